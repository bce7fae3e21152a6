"""The Knowledge MCP server, driven by the official Python SDK (`mcp` on PyPI).

Run by `cargo xtask integration` against `acdm-backend demo` (its sample
project "Alpha" and wiki):

    mcp_python_sdk.py URL SERVICE_TOKEN

Initializes over streamable HTTP with the service header, lists the tools
(names, schemas, annotations), calls every tool on success and error paths,
and checks that a client without the token cannot connect. Prints one line
per check and ends with "N passed, M failed"; exits 1 on any failure.
"""

import asyncio
import sys

from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client
from mcp.shared.exceptions import McpError

TOOLS = ["acdm_search_wiki", "acdm_read_wiki_file", "acdm_search_nextcloud", "acdm_read_nextcloud_file"]


class Checks:
    def __init__(self) -> None:
        self.passed = 0
        self.failed = 0

    def check(self, ok: bool, what: str, detail: object = "") -> None:
        if ok:
            self.passed += 1
            print(f"PASS {what}")
        else:
            self.failed += 1
            print(f"FAIL {what}: {detail}")


async def run(url: str, token: str, checks: Checks) -> None:
    async with streamablehttp_client(url, headers={"X-ACDM-Service-Auth": token}) as (read, write, _):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            checks.check(init.serverInfo.name == "acdm-knowledge", "initialize names the server", init.serverInfo)
            checks.check("Never guess" in (init.instructions or ""), "the instructions forbid guessing the project")
            checks.check(init.capabilities.tools is not None, "the tools capability is declared")

            listed = await session.list_tools()
            names = [tool.name for tool in listed.tools]
            checks.check(names == TOOLS, "tools/list shows the four tools", names)
            for tool in listed.tools:
                schema = tool.inputSchema
                checks.check(schema.get("type") == "object" and schema.get("additionalProperties") is False,
                             f"{tool.name}: a strict object input schema", schema)
                checks.check(tool.outputSchema is not None, f"{tool.name}: an output schema")
                hints = tool.annotations
                checks.check(hints is not None and hints.readOnlyHint and hints.idempotentHint and hints.openWorldHint,
                             f"{tool.name}: read-only, idempotent, open-world", hints)

            found = await session.call_tool("acdm_search_wiki", {"query": "weekly", "limit": 5})
            hits = (found.structuredContent or {}).get("hits", [])
            checks.check(not found.isError and any(h["path"] == "guides/weekly-reports.md" for h in hits),
                         "acdm_search_wiki finds the weekly-reports guide", found.structuredContent)

            page = await session.call_tool("acdm_read_wiki_file", {"path": "guides/weekly-reports.md", "max_bytes": 64})
            content = page.structuredContent or {}
            checks.check(not page.isError and content.get("truncated") is True and content.get("next_offset") == 64,
                         "acdm_read_wiki_file returns a truncated window with next_offset", content)
            rest = await session.call_tool("acdm_read_wiki_file",
                                           {"path": "guides/weekly-reports.md", "offset": content.get("next_offset", 0)})
            checks.check(not rest.isError and (rest.structuredContent or {}).get("offset") == 64,
                         "the next window continues at next_offset", rest.structuredContent)

            files = await session.call_tool("acdm_search_nextcloud", {"query": "kickoff", "project_name": "Alpha"})
            paths = [h["path"] for h in (files.structuredContent or {}).get("hits", [])]
            checks.check("/Projects/Alpha/meetings/2026-11-03-kickoff.md" in paths,
                         "acdm_search_nextcloud finds the kickoff minutes", files.structuredContent)
            checks.check(all(p.startswith("/Projects/Alpha/") for p in paths), "every hit is inside the project", paths)

            minutes = await session.call_tool("acdm_read_nextcloud_file",
                                              {"path": "/Projects/Alpha/meetings/2026-11-03-kickoff.md", "project_name": "Alpha"})
            checks.check(not minutes.isError and "Kickoff meeting" in (minutes.structuredContent or {}).get("content", ""),
                         "acdm_read_nextcloud_file reads the minutes", minutes.structuredContent)

            # Failures the model can act on: tool results with isError and a code.
            for tool, arguments, code in [
                ("acdm_read_nextcloud_file", {"path": "/Projects/Beta/secret.md", "project_name": "Alpha"}, "permission_denied"),
                ("acdm_read_nextcloud_file", {"path": "/Projects/Alpha/../Beta/x.md", "project_name": "Alpha"}, "permission_denied"),
                ("acdm_read_nextcloud_file", {"path": "Projects/Alpha/meetings/x.md", "project_name": "Alpha"}, "invalid_path"),
                ("acdm_search_nextcloud", {"query": "kickoff", "project_name": ".."}, "validation_error"),
                ("acdm_search_wiki", {"query": "x", "project_id": "beta"}, "validation_error"),
                ("acdm_search_wiki", {"query": "x", "limit": 500}, "validation_error"),
                ("acdm_read_wiki_file", {"path": "no/such/page.md"}, "not_found"),
            ]:
                result = await session.call_tool(tool, arguments)
                got = (result.structuredContent or {}).get("code")
                checks.check(result.isError and got == code, f"{tool} {arguments} fails with {code}", result.structuredContent)

            wrong = await session.call_tool("acdm_search_nextcloud", {"query": "kickoff", "project_name": "Gamma"})
            checks.check(wrong.isError and (wrong.structuredContent or {}).get("code") == "not_found",
                         "a wrong project name is not_found, not an empty search", wrong.structuredContent)
            twin = await session.call_tool("acdm_search_nextcloud", {"query": "kickoff", "project_name": "alpha"})
            checks.check(twin.isError and 'project_name "Alpha"' in (twin.structuredContent or {}).get("suggested_action", ""),
                         "a name differing only in case is not_found and the exact name is suggested", twin.structuredContent)
            trash = await session.call_tool("acdm_search_nextcloud", {"query": "kickoff", "project_name": ".acdm-trash"})
            checks.check(trash.isError and (trash.structuredContent or {}).get("code") == "validation_error",
                         "the trash is not a project", trash.structuredContent)

            try:
                await session.call_tool("acdm_no_such_tool", {})
                checks.check(False, "an unknown tool is a protocol error", "no error raised")
            except McpError as error:
                checks.check(error.error.code == -32602, "an unknown tool is a protocol error", error.error)


async def refused(url: str, headers: dict[str, str] | None = None) -> bool:
    """True when the server refused a client sending `headers` with 401
    (the SDK raises it inside an exception group)."""
    try:
        async with streamablehttp_client(url, headers=headers) as (read, write, _):
            async with ClientSession(read, write) as session:
                await asyncio.wait_for(session.initialize(), timeout=10)
        return False
    except BaseException as error:  # noqa: BLE001 - inspected below
        return "401" in repr(error) or "401" in str(getattr(error, "exceptions", ""))


def main() -> int:
    url, token = sys.argv[1], sys.argv[2]
    checks = Checks()
    asyncio.run(run(url, token, checks))
    wrong = {"X-ACDM-Service-Auth": "wrong-token-0123456789abcdef0123456"}
    checks.check(asyncio.run(refused(url, wrong)), "a client with a wrong token cannot initialize")
    print(f"{checks.passed} passed, {checks.failed} failed")
    return 1 if checks.failed else 0


if __name__ == "__main__":
    sys.exit(main())
