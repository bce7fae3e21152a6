//! The MCP wire contract, committed: what `tools/list` shows a client —
//! names, titles, descriptions, input and output schemas, annotations — in
//! `tests/snapshots/tools-list.json`. A change to a tool shows up as a diff
//! of that file, updated deliberately with `ACDM_UPDATE_SNAPSHOTS=1`.

use std::path::Path;

use serde_json::json;

use crate::harness::Mcp;

#[tokio::test]
async fn tools_list_matches_the_committed_snapshot() {
    let mcp = Mcp::local();
    let list = mcp.rpc("tools/list", json!({})).await;
    acdm_test_support::snapshot::assert_json(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots/tools-list.json"),
        &list["result"],
    );
}
