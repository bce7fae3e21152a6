//! The four tools, called as an MCP client would: results, windows,
//! scope rules and every failure path.

use base64::Engine;
use serde_json::json;

use crate::harness::{Mcp, PNG, big_text, error_code, ok};

#[tokio::test]
async fn tools_list_shows_four_read_only_tools_with_schemas() {
    let mcp = Mcp::local();
    let list = mcp.rpc("tools/list", json!({})).await;
    let tools = list["result"]["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "acdm_search_wiki",
            "acdm_read_wiki_file",
            "acdm_search_nextcloud",
            "acdm_read_nextcloud_file"
        ]
    );
    for tool in tools {
        assert_eq!(tool["annotations"]["readOnlyHint"], true, "{tool}");
        assert_eq!(tool["annotations"]["idempotentHint"], true);
        assert_eq!(tool["annotations"]["openWorldHint"], true);
        assert_eq!(tool["inputSchema"]["type"], "object");
        assert_eq!(tool["inputSchema"]["additionalProperties"], false);
        assert_eq!(tool["outputSchema"]["type"], "object", "{tool}");
    }
    assert_eq!(
        tools[2]["inputSchema"]["properties"]["limit"]["maximum"],
        50
    );
    // Rust integer widths ("uint64", ...) are not JSON Schema formats and
    // make client-side validators warn; the bounds stay as minimum/maximum.
    let listed = serde_json::to_string(&list).unwrap();
    for width in ["uint", "int32", "int64", "uint32", "uint64", "double"] {
        assert!(
            !listed.contains(&format!("\"format\":\"{width}\"")),
            "{width} format in {listed}"
        );
    }
    assert_eq!(
        tools[1]["inputSchema"]["properties"]["offset"]["minimum"], 0,
        "{}",
        tools[1]["inputSchema"]
    );
}

#[tokio::test]
async fn wiki_search_gives_paths_lines_snippets_and_suggestions_when_few() {
    let mcp = Mcp::local();
    let result = mcp
        .tool("acdm_search_wiki", json!({"query": "weekly", "limit": 5}))
        .await;
    let out = ok(&result);
    assert_eq!(out["returned"], 2);
    assert_eq!(out["total_count"], 2);
    assert_eq!(out["hits"][0]["path"], "guides/weekly-reports.md");
    assert_eq!(out["hits"][0]["title"], "weekly-reports.md");
    assert_eq!(out["hits"][1]["line"], 1);
    assert!(
        out["hits"][1]["snippet"]
            .as_str()
            .unwrap()
            .contains("Weekly reports")
    );
    assert!(
        !out["suggestions"].as_array().unwrap().is_empty(),
        "fewer than 3 hits"
    );
    let text = result["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("2 of 2 wiki matches for \"weekly\""),
        "{text}"
    );
    let narrowed = mcp
        .tool(
            "acdm_search_wiki",
            json!({"query": "deploy", "path_prefix": "guides"}),
        )
        .await;
    assert!(
        ok(&narrowed)["hits"]
            .as_array()
            .unwrap()
            .iter()
            .all(|h| h["path"].as_str().unwrap().starts_with("guides/"))
    );
    let none = mcp
        .tool("acdm_search_wiki", json!({"query": "no such words here"}))
        .await;
    let out = ok(&none);
    assert_eq!(out["returned"], 0);
    assert!(
        out["suggestions"][0]
            .as_str()
            .unwrap()
            .contains("one distinctive word"),
        "{out}"
    );
}

#[tokio::test]
async fn reads_come_in_windows_that_reassemble_the_file() {
    let mcp = Mcp::local();
    for (tool, args) in [
        (
            "acdm_read_wiki_file",
            json!({"path": "big.md", "max_bytes": 10_000}),
        ),
        (
            "acdm_read_nextcloud_file",
            json!({"path": "/Projects/Alpha/big.txt", "project_name": "Alpha", "max_bytes": 10_000}),
        ),
    ] {
        let mut text = String::new();
        let mut args = args;
        let mut calls = 0;
        loop {
            let result = mcp.tool(tool, args.clone()).await;
            let out = ok(&result).clone();
            assert_eq!(out["encoding"], "text");
            assert!(out["returned_bytes"].as_u64().unwrap() <= 10_000);
            text.push_str(out["content"].as_str().unwrap());
            calls += 1;
            match out["next_offset"].as_u64() {
                Some(next) => {
                    assert_eq!(out["truncated"], true);
                    args["offset"] = json!(next);
                }
                None => break,
            }
            assert!(calls < 100);
        }
        assert_eq!(text, big_text(), "{tool}: the windows cut no character");
        assert!(calls >= 10, "{tool}: {calls} windows");
    }
    // The server caps a window whatever is asked.
    let capped = mcp
        .tool(
            "acdm_read_wiki_file",
            json!({"path": "big.md", "max_bytes": 10_000_000}),
        )
        .await;
    assert!(ok(&capped)["returned_bytes"].as_u64().unwrap() <= 64 * 1024);
    let default = mcp
        .tool("acdm_read_wiki_file", json!({"path": "big.md"}))
        .await;
    assert!(ok(&default)["returned_bytes"].as_u64().unwrap() <= 32 * 1024);
}

#[tokio::test]
async fn binary_files_come_back_as_base64() {
    let mcp = Mcp::local();
    let result = mcp
        .tool(
            "acdm_read_nextcloud_file",
            json!({"path": "/Projects/Alpha/logo.png", "project_name": "Alpha"}),
        )
        .await;
    let out = ok(&result);
    assert_eq!(out["encoding"], "base64");
    assert_eq!(out["content_type"], "image/png");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(out["content"].as_str().unwrap())
        .unwrap();
    assert_eq!(bytes, PNG);
    assert!(
        result["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("binary content (image/png)")
    );
}

#[tokio::test]
async fn nextcloud_search_stays_inside_the_project() {
    let mcp = Mcp::local();
    let result = mcp
        .tool(
            "acdm_search_nextcloud",
            json!({"query": "kickoff", "project_name": "Alpha"}),
        )
        .await;
    let out = ok(&result);
    assert_eq!(out["scope"], "/Projects/Alpha/");
    let paths: Vec<&str> = out["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        paths,
        ["/Projects/Alpha/notes/kickoff.md"],
        "not Alpha-evil, not Beta"
    );
    let wrong = mcp
        .tool(
            "acdm_search_nextcloud",
            json!({"query": "kickoff", "project_name": "Gamma"}),
        )
        .await;
    assert_eq!(ok(&wrong)["returned"], 0, "a wrong name finds nothing");
}

#[tokio::test]
async fn nextcloud_reads_outside_the_project_are_refused() {
    let mcp = Mcp::local();
    let check = async |path: &str, project: &str, code: &str| {
        let result = mcp
            .tool(
                "acdm_read_nextcloud_file",
                json!({"path": path, "project_name": project}),
            )
            .await;
        assert_eq!(error_code(&result), code, "{path} as {project}: {result}");
        let text = result["content"][0]["text"].as_str().unwrap().to_owned();
        assert!(text.contains("What to do:"), "{text}");
        text
    };
    let text = check("/Projects/Beta/kickoff.md", "Alpha", "permission_denied").await;
    assert!(text.starts_with("path outside project scope: \"/Projects/Beta/kickoff.md\" (required prefix: \"/Projects/Alpha/\")"), "{text}");
    check(
        "/Projects/Alpha-evil/kickoff.md",
        "Alpha",
        "permission_denied",
    )
    .await;
    check("Projects/Alpha/notes/kickoff.md", "Alpha", "invalid_path").await;
    // Escapes once normalised are permission errors naming the prefix
    // (spec §3.4); dot segments that stay inside are still refused.
    for escape in [
        "/Projects/Alpha/../Beta/kickoff.md",
        "/Projects/Alpha/%2e%2e/Beta/kickoff.md",
        "/Projects/Alpha/..%2fAlpha-evil/kickoff.md",
        "/Projects/Alpha/..\\Beta\\kickoff.md",
    ] {
        let text = check(escape, "Alpha", "permission_denied").await;
        assert!(
            text.contains("(required prefix: \"/Projects/Alpha/\")"),
            "{text}"
        );
    }
    check(
        "/Projects/Alpha/notes/../notes/kickoff.md",
        "Alpha",
        "invalid_path",
    )
    .await;
    check("", "Alpha", "invalid_path").await;
    check("/Projects/Alpha", "Alpha", "invalid_path").await;
    check("/Projects/Alpha/notes", "Alpha", "conflict").await;
    check("/Projects/Alpha/missing.md", "Alpha", "not_found").await;
    check(
        "/Projects/../Projects/Alpha/notes/kickoff.md",
        "Alpha",
        "invalid_path",
    )
    .await;
    for bad in [
        "..",
        ".",
        "Alpha/../Beta",
        " Alpha",
        "Alpha\u{202e}",
        "Al\u{FF0F}pha",
        "",
    ] {
        let result = mcp
            .tool(
                "acdm_read_nextcloud_file",
                json!({"path": "/Projects/Alpha/notes/kickoff.md", "project_name": bad}),
            )
            .await;
        assert_eq!(error_code(&result), "validation_error", "{bad:?}");
        assert!(
            result["structuredContent"]["message"]
                .as_str()
                .unwrap()
                .starts_with("invalid project_name"),
            "{bad:?}"
        );
    }
    let fine = mcp
        .tool(
            "acdm_read_nextcloud_file",
            json!({"path": "/Projects/Alpha/notes/kickoff.md", "project_name": "Alpha"}),
        )
        .await;
    assert_eq!(
        ok(&fine)["content"],
        "# Kickoff\nDecisions: floor 5 first.\n"
    );
}

#[tokio::test]
async fn bad_arguments_are_tool_errors_and_an_unknown_tool_is_a_protocol_error() {
    let mcp = Mcp::local();
    let check = async |tool: &str, args: serde_json::Value, needle: &str| {
        let result = mcp.tool(tool, args.clone()).await;
        assert_eq!(error_code(&result), "validation_error", "{tool} {args}");
        let message = result["structuredContent"]["message"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(message.contains(needle), "{tool} {args}: {message}");
    };
    check(
        "acdm_search_wiki",
        json!({"query": "x", "project_id": "beta"}),
        "unknown field `project_id`",
    )
    .await;
    check("acdm_search_wiki", json!({"query": 42}), "invalid type").await;
    check("acdm_search_wiki", json!({}), "missing field `query`").await;
    check(
        "acdm_search_wiki",
        json!({"query": "   "}),
        "query: is empty",
    )
    .await;
    check(
        "acdm_search_wiki",
        json!({"query": "x", "limit": 0}),
        "limit: 0 is outside 1–50",
    )
    .await;
    check(
        "acdm_search_wiki",
        json!({"query": "x", "limit": 51}),
        "limit",
    )
    .await;
    check(
        "acdm_search_wiki",
        json!({"query": "x", "path_prefix": "../etc"}),
        "path_prefix",
    )
    .await;
    check(
        "acdm_read_wiki_file",
        json!({"path": "../etc/passwd"}),
        "invalid path",
    )
    .await;
    check(
        "acdm_read_wiki_file",
        json!({"path": "guides/%2e%2e/x.md"}),
        "invalid path",
    )
    .await;
    check(
        "acdm_read_wiki_file",
        json!({"path": "a.md", "ref": "-x"}),
        "invalid ref",
    )
    .await;
    check(
        "acdm_read_wiki_file",
        json!({"path": "a.md", "max_bytes": 0}),
        "max_bytes",
    )
    .await;
    check(
        "acdm_search_nextcloud",
        json!({"query": "x"}),
        "missing field `project_name`",
    )
    .await;
    let missing = mcp
        .tool("acdm_read_wiki_file", json!({"path": "nope.md"}))
        .await;
    assert_eq!(error_code(&missing), "not_found");
    assert!(
        missing["structuredContent"]["suggested_action"]
            .as_str()
            .unwrap()
            .contains("acdm_search_wiki")
    );
    // A leading slash is tolerated; the path stays inside the wiki.
    let slash = mcp
        .tool("acdm_read_wiki_file", json!({"path": "/etc/passwd"}))
        .await;
    assert_eq!(error_code(&slash), "not_found");
    let bad_ref = mcp
        .tool(
            "acdm_read_wiki_file",
            json!({"path": "README.md", "ref": "v9"}),
        )
        .await;
    assert_eq!(error_code(&bad_ref), "not_found");

    let unknown = mcp
        .rpc(
            "tools/call",
            json!({"name": "acdm_delete_everything", "arguments": {}}),
        )
        .await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
}
