// The Knowledge MCP server, driven by the official TypeScript SDK
// (`@modelcontextprotocol/sdk` on npm), the client inside most MCP hosts.
//
// Run by `cargo xtask integration` against `acdm-backend demo`:
//
//     ACDM_TS_SDK=<path to the sdk package> node mcp_typescript_sdk.mjs URL SERVICE_TOKEN
//
// This client validates every tool result's structured content against the
// tool's output schema, failures included, and throws when they disagree:
// the checks below call every tool on success and error paths through it.
// Prints one line per check and ends with "N passed, M failed"; exits 1 on
// any failure.

import { pathToFileURL } from "node:url";
import { join } from "node:path";

const [url, token] = process.argv.slice(2);
const sdk = process.env.ACDM_TS_SDK;
if (!url || !token || !sdk) {
  console.error("usage: ACDM_TS_SDK=<sdk dir> node mcp_typescript_sdk.mjs URL TOKEN");
  process.exit(2);
}
const load = (file) => import(pathToFileURL(join(sdk, "dist", "esm", file)).href);
const { Client } = await load("client/index.js");
const { StreamableHTTPClientTransport } = await load("client/streamableHttp.js");

let passed = 0;
let failed = 0;
function check(ok, what, detail = "") {
  if (ok) {
    passed += 1;
    console.log(`PASS ${what}`);
  } else {
    failed += 1;
    console.log(`FAIL ${what}: ${typeof detail === "string" ? detail : JSON.stringify(detail)}`);
  }
}

function connect(withToken) {
  const client = new Client({ name: "acdm-integration-ts", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { "X-ACDM-Service-Auth": withToken } },
  });
  return client.connect(transport).then(() => client);
}

async function call(client, name, args) {
  try {
    return { result: await client.callTool({ name, arguments: args }) };
  } catch (error) {
    return { error };
  }
}

const client = await connect(token);
check(client.getServerVersion()?.name === "acdm-knowledge", "initialize names the server");
check((client.getInstructions() ?? "").includes("Never guess"), "the instructions forbid guessing the project");

const { tools } = await client.listTools();
check(
  JSON.stringify(tools.map((t) => t.name)) ===
    JSON.stringify(["acdm_search_wiki", "acdm_read_wiki_file", "acdm_search_nextcloud", "acdm_read_nextcloud_file"]),
  "tools/list shows the four tools",
  tools.map((t) => t.name),
);
check(tools.every((t) => t.outputSchema && t.annotations?.readOnlyHint === true), "every tool has an output schema and is read-only");

const successes = [
  ["acdm_search_wiki", { query: "weekly" }],
  ["acdm_read_wiki_file", { path: "guides/weekly-reports.md", max_bytes: 200 }],
  ["acdm_search_nextcloud", { query: "kickoff", project_name: "Alpha" }],
  ["acdm_read_nextcloud_file", { path: "/Projects/Alpha/meetings/2026-11-03-kickoff.md", project_name: "Alpha" }],
];
for (const [name, args] of successes) {
  const { result, error } = await call(client, name, args);
  check(
    result && !result.isError && result.structuredContent && result.content?.[0]?.type === "text",
    `${name} succeeds and its structured content passes the SDK's schema check`,
    error?.message ?? result,
  );
}
const hits = (await call(client, "acdm_search_nextcloud", { query: "kickoff", project_name: "Alpha" })).result
  ?.structuredContent?.hits ?? [];
check(hits.length > 0 && hits.every((h) => h.path.startsWith("/Projects/Alpha/")), "every hit is inside the project", hits);

// Failures are tool results the model can read, not exceptions.
const failures = [
  ["acdm_read_nextcloud_file", { path: "/Projects/Beta/secret.md", project_name: "Alpha" }, "permission_denied"],
  ["acdm_read_nextcloud_file", { path: "/Projects/Alpha/../Beta/x.md", project_name: "Alpha" }, "permission_denied"],
  ["acdm_search_nextcloud", { query: "kickoff", project_name: ".." }, "validation_error"],
  ["acdm_search_wiki", { query: "x", project_id: "beta" }, "validation_error"],
  ["acdm_read_wiki_file", { path: "no/such/page.md" }, "not_found"],
  ["acdm_search_nextcloud", { query: "kickoff", project_name: "alpha" }, "not_found"],
  ["acdm_search_nextcloud", { query: "kickoff", project_name: ".acdm-trash" }, "validation_error"],
  ["acdm_read_wiki_file", { path: "guides/weekly-reports.md", max_bytes: 100000000 }, "validation_error"],
];
for (const [name, args, code] of failures) {
  const { result, error } = await call(client, name, args);
  check(
    result?.isError === true && result.structuredContent?.code === code && result.content?.[0]?.text,
    `${name} ${JSON.stringify(args)} is an isError result with ${code}`,
    error?.message ?? result,
  );
}

const unknown = await call(client, "acdm_no_such_tool", {});
check(unknown.error?.code === -32602, "an unknown tool is a protocol error (-32602)", unknown.error?.message ?? unknown.result);
await client.close();

let refused = false;
try {
  const intruder = await connect("wrong-token-0123456789abcdef0123456");
  await intruder.close();
} catch {
  refused = true;
}
check(refused, "a client with a wrong token cannot initialize");

console.log(`${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
