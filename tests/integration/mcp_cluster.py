"""One MCP session through the cluster's load balancer, with the official
Python SDK (`mcp` on PyPI).

Run by the cluster suite (`cargo xtask cluster test`) against nginx in
front of several stateless replicas:

    mcp_cluster.py URL SERVICE_TOKEN CALLS

Initializes, lists the tools, then makes CALLS tool calls cycling through
the wiki search, a wiki read and a read of the project's folder (the
cluster's Nextcloud is a WebDAV server without Nextcloud's search API, so
`acdm_search_nextcloud` is left out), and checks that every answer is a
success with the expected content. The balancer spreads the session's
requests over the replicas; the suite counts where they landed. Prints one
line per failed call and a summary; exits 1 on any failure.
"""

import asyncio
import sys

from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client

TOOLS = ["acdm_search_wiki", "acdm_read_wiki_file", "acdm_search_nextcloud", "acdm_read_nextcloud_file"]

CALLS = [
    ("acdm_search_wiki", {"query": "weekly", "limit": 5},
     lambda c: any(h.get("path") == "guides/weekly-reports.md" for h in c.get("hits", []))),
    ("acdm_read_wiki_file", {"path": "guides/weekly-reports.md"},
     lambda c: "Weekly reports" in c.get("content", "")),
    ("acdm_read_nextcloud_file", {"path": "/Projects/Alpha/README.md", "project_name": "Alpha"},
     lambda c: "Alpha" in c.get("content", "")),
]


async def run(url: str, token: str, calls: int) -> int:
    failed = 0
    async with streamablehttp_client(url, headers={"X-ACDM-Service-Auth": token}) as (read, write, _):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            if init.serverInfo.name != "acdm-knowledge":
                print(f"FAIL initialize names {init.serverInfo.name}")
                failed += 1
            names = [tool.name for tool in (await session.list_tools()).tools]
            if names != TOOLS:
                print(f"FAIL tools/list shows {names}")
                failed += 1
            for n in range(calls):
                tool, arguments, expected = CALLS[n % len(CALLS)]
                result = await session.call_tool(tool, arguments)
                content = result.structuredContent or {}
                if result.isError or not expected(content):
                    print(f"FAIL call {n}: {tool} {arguments}: {content}")
                    failed += 1
    print(f"initialize, tools/list and {calls} tools/call through {url}: {failed} failed")
    return failed


def main() -> None:
    url, token, calls = sys.argv[1], sys.argv[2], int(sys.argv[3])
    failed = asyncio.run(run(url, token, calls))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
