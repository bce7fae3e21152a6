"""A person's own MCP client: the official Python SDK (`mcp` on PyPI) with
the person's access token from the identity provider.

Run by the API suite (`tests/api/people.rs`) against a server whose
issuer is the suite's local identity provider:

    mcp_people.py URL ACCESS_TOKEN

The token is u-alice's, a viewer of "Alpha" and of nothing else. Lists the
tools (the person's list of projects among them), reads her project,
is refused "Beta" exactly as a project that does not exist (by a tool and
as a resource), lists and reads resources, gets a prompt, and checks that
a client without a token cannot initialize. Prints one line per check and
ends with "N passed, M failed"; exits 1 on any failure.
"""

import asyncio
import sys

from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client
from mcp.shared.exceptions import McpError

from mcp_python_sdk import Checks, refused  # the engine's SDK script, beside this one


async def run(url: str, token: str, checks: Checks) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    async with streamablehttp_client(url, headers=headers) as (read, write, _):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            checks.check(init.serverInfo.name == "acdm-knowledge", "initialize with a bearer token", init.serverInfo)
            names = [tool.name for tool in (await session.list_tools()).tools]
            checks.check("acdm_list_projects" in names, "a person sees acdm_list_projects", names)

            mine = await session.call_tool("acdm_list_projects", {})
            projects = [p["project_name"] for p in (mine.structuredContent or {}).get("projects", [])]
            checks.check(not mine.isError and projects == ["Alpha"], "her projects: Alpha only", mine.structuredContent)

            plan = await session.call_tool("acdm_read_nextcloud_file",
                                           {"path": "/Projects/Alpha/plan.md", "project_name": "Alpha"})
            checks.check(not plan.isError and "secret-alpha" in (plan.structuredContent or {}).get("content", ""),
                         "she reads her project's file", plan.structuredContent)

            theirs = await session.call_tool("acdm_read_nextcloud_file",
                                             {"path": "/Projects/Beta/plan.md", "project_name": "Beta"})
            missing = await session.call_tool("acdm_read_nextcloud_file",
                                              {"path": "/Projects/Gamma/plan.md", "project_name": "Gamma"})
            same = (theirs.structuredContent or {}).get("message", "").replace("Beta", "X") == \
                (missing.structuredContent or {}).get("message", "").replace("Gamma", "X")
            checks.check(theirs.isError and (theirs.structuredContent or {}).get("code") == "not_found" and same,
                         "another project is answered as a missing one", theirs.structuredContent)
            checks.check("secret-beta" not in str(theirs), "nothing of Beta comes back", theirs)

            # Resources: the templates, her overview in the list, her file
            # read as a resource, Beta's refused as Gamma's.
            templates = [t.uriTemplate for t in (await session.list_resource_templates()).resourceTemplates]
            checks.check("nextcloud://{project}/{path}" in templates and "wiki://{path}" in templates,
                         "the resource templates", templates)
            listed = [str(r.uri) for r in (await session.list_resources()).resources]
            checks.check("project://alpha/overview" in listed and not any("beta" in u for u in listed),
                         "her overview is listed, Beta's is not", listed[:5])
            read = await session.read_resource("nextcloud://Alpha/plan.md")
            checks.check("secret-alpha" in read.contents[0].text, "she reads her file as a resource", read)
            errors = []
            for uri in ("nextcloud://Beta/plan.md", "nextcloud://Gamma/plan.md"):
                try:
                    await session.read_resource(uri)
                    errors.append("served")
                except McpError as error:
                    errors.append(error.error.message)
            checks.check(errors[0] != "served" and errors[0].replace("Beta", "X") == errors[1].replace("Gamma", "X"),
                         "Beta's file as a resource is answered as a missing project's", errors)

            # Prompts: the three, one with an embedded resource.
            prompts = [p.name for p in (await session.list_prompts()).prompts]
            checks.check(prompts == ["prepare_meeting", "review_reports", "summarise_file"], "the prompts", prompts)
            got = await session.get_prompt("summarise_file", {"project_name": "Alpha", "path": "plan.md"})
            embedded = got.messages[1].content
            checks.check(embedded.type == "resource" and "secret-alpha" in embedded.resource.text,
                         "a prompt embeds her file", got)


def main() -> int:
    url, token = sys.argv[1], sys.argv[2]
    checks = Checks()
    asyncio.run(run(url, token, checks))
    checks.check(asyncio.run(refused(url)), "a client without a token cannot initialize")
    print(f"{checks.passed} passed, {checks.failed} failed")
    return 1 if checks.failed else 0


if __name__ == "__main__":
    sys.exit(main())
