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
    // The server never serves more than its cap: a larger window is
    // refused, naming the cap (like a limit out of range).
    let capped = mcp
        .tool(
            "acdm_read_wiki_file",
            json!({"path": "big.md", "max_bytes": 10_000_000}),
        )
        .await;
    assert_eq!(error_code(&capped), "validation_error", "{capped}");
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
    assert_eq!(
        error_code(&wrong),
        "not_found",
        "a wrong name finds nothing, and says so: {wrong}"
    );
    assert!(!wrong.to_string().contains("Beta"), "{wrong}");
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

/// Searches and reads that aim at the trash (`/Projects/.acdm-trash/…`),
/// which keeps the replaced and deleted files of every project.
pub(crate) fn trash_attempts() -> Vec<(&'static str, serde_json::Value)> {
    let kept = "/Projects/.acdm-trash/alpha/6f1c1c1e-6b0b-4e53-9a38-2d1f7cf6b8a1/0/kickoff.md";
    let mut attempts = Vec::new();
    for project in [
        ".acdm-trash",
        ".ACDM-TRASH",
        ".Acdm-Trash",
        ".acdm-trash/alpha",
    ] {
        attempts.push((
            "acdm_search_nextcloud",
            json!({"query": "kickoff", "project_name": project}),
        ));
        attempts.push((
            "acdm_read_nextcloud_file",
            json!({"path": kept, "project_name": project}),
        ));
        attempts.push((
            "acdm_read_nextcloud_file",
            json!({"path": kept.replace(".acdm-trash", project), "project_name": project}),
        ));
    }
    for path in [
        kept.to_owned(),
        kept.replace(".acdm-trash", ".ACDM-TRASH"),
        kept.replace("/Projects/", "/Projects/Alpha/../"),
        kept.replace("/Projects/", "/Projects/Alpha/%2e%2e/"),
    ] {
        attempts.push((
            "acdm_read_nextcloud_file",
            json!({"path": path, "project_name": "Alpha"}),
        ));
    }
    attempts
}

#[tokio::test]
async fn the_trash_is_never_listed_or_read_through_either_tool() {
    let mcp = Mcp::local();
    for (tool, arguments) in trash_attempts() {
        let result = mcp.tool(tool, arguments.clone()).await;
        let code = error_code(&result);
        assert!(
            ["validation_error", "permission_denied"].contains(&code.as_str()),
            "{tool} {arguments}: {result}"
        );
        let shown = result.to_string();
        assert!(
            !shown.contains("kept copy") && !shown.contains("\"hits\""),
            "{tool} {arguments}: the trash leaked: {shown}"
        );
    }
    let by_name = mcp
        .tool(
            "acdm_search_nextcloud",
            json!({"query": "kickoff", "project_name": ".acdm-trash"}),
        )
        .await;
    let message = by_name["structuredContent"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("invalid project_name") && message.contains("reserved"),
        "{message}"
    );
    let by_path = mcp
        .tool(
            "acdm_read_nextcloud_file",
            json!({"path": "/Projects/.acdm-trash/alpha/x/0/kickoff.md", "project_name": "Alpha"}),
        )
        .await;
    assert_eq!(error_code(&by_path), "permission_denied");
    assert!(
        by_path["structuredContent"]["message"]
            .as_str()
            .unwrap()
            .contains("(required prefix: \"/Projects/Alpha/\")"),
        "{by_path}"
    );
    let text = by_path["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("the trash") && text.contains("not readable"),
        "the model learns why: {text}"
    );
}

#[tokio::test]
async fn a_wrong_project_name_is_not_found_and_the_one_case_twin_is_suggested() {
    let mcp = Mcp::local();
    let slug = mcp
        .tool(
            "acdm_search_nextcloud",
            json!({"query": "kickoff", "project_name": "alpha"}),
        )
        .await;
    assert_eq!(error_code(&slug), "not_found", "{slug}");
    let message = slug["structuredContent"]["message"].as_str().unwrap();
    assert!(
        message.contains("no project folder is named \"alpha\"")
            && message.contains("case-sensitive"),
        "{message}"
    );
    let action = slug["structuredContent"]["suggested_action"]
        .as_str()
        .unwrap();
    assert!(
        action.contains("project_name \"Alpha\"") && action.contains("ask the user"),
        "{action}"
    );
    let read = mcp
        .tool(
            "acdm_read_nextcloud_file",
            json!({"path": "/Projects/alpha/notes/kickoff.md", "project_name": "alpha"}),
        )
        .await;
    assert_eq!(error_code(&read), "not_found", "{read}");
    assert!(
        read["structuredContent"]["message"]
            .as_str()
            .unwrap()
            .contains("no project folder is named \"alpha\""),
        "{read}"
    );
    assert!(
        read["structuredContent"]["suggested_action"]
            .as_str()
            .unwrap()
            .contains("project_name \"Alpha\""),
        "{read}"
    );
    // No folder at all, or two that differ only in case: nothing to suggest.
    for project in ["Gamma", "delta"] {
        let result = mcp
            .tool(
                "acdm_search_nextcloud",
                json!({"query": "kickoff", "project_name": project}),
            )
            .await;
        assert_eq!(error_code(&result), "not_found", "{project}: {result}");
        let action = result["structuredContent"]["suggested_action"]
            .as_str()
            .unwrap();
        assert!(
            action.contains("workspace context") && !action.contains("project_name \""),
            "{project}: {action}"
        );
        assert!(!result.to_string().contains("acdm-trash"), "{result}");
    }
    // The project exists but nothing matches: an empty search, as before.
    let empty = mcp
        .tool(
            "acdm_search_nextcloud",
            json!({"query": "nothing-like-this", "project_name": "Alpha"}),
        )
        .await;
    assert_eq!(ok(&empty)["returned"], 0);
    // A missing file in an existing project stays a missing file.
    let missing = mcp
        .tool(
            "acdm_read_nextcloud_file",
            json!({"path": "/Projects/Alpha/missing.md", "project_name": "Alpha"}),
        )
        .await;
    assert_eq!(error_code(&missing), "not_found");
    assert!(
        !missing["structuredContent"]["message"]
            .as_str()
            .unwrap()
            .contains("no project folder"),
        "{missing}"
    );
}

#[tokio::test]
async fn no_schema_in_tools_list_uses_a_type_array_or_null() {
    let mcp = Mcp::local();
    let list = mcp.rpc("tools/list", json!({})).await;
    fn walk(value: &serde_json::Value, at: &str, problems: &mut Vec<String>) {
        match value {
            serde_json::Value::Object(object) => {
                for (key, child) in object {
                    let here = format!("{at}/{key}");
                    if key == "type" && !child.is_string() {
                        problems.push(format!("{here}: {child}"));
                    }
                    if child.is_null() || (key == "type" && child == "null") {
                        problems.push(format!("{here}: null"));
                    }
                    walk(child, &here, problems);
                }
            }
            serde_json::Value::Array(items) => {
                for (i, child) in items.iter().enumerate() {
                    walk(child, &format!("{at}/{i}"), problems);
                }
            }
            _ => {}
        }
    }
    let mut problems = Vec::new();
    for tool in list["result"]["tools"].as_array().unwrap() {
        let name = tool["name"].as_str().unwrap();
        walk(
            &tool["inputSchema"],
            &format!("{name}/input"),
            &mut problems,
        );
        walk(
            &tool["outputSchema"],
            &format!("{name}/output"),
            &mut problems,
        );
    }
    assert!(problems.is_empty(), "{problems:#?}");
    // Optional inputs are simply not required.
    let read = &list["result"]["tools"][3]["inputSchema"];
    assert_eq!(read["properties"]["max_bytes"]["type"], "integer");
    assert_eq!(read["required"], json!(["path", "project_name"]), "{read}");
}

#[tokio::test]
async fn reads_past_the_end_and_numbers_out_of_range_are_refused_naming_the_field() {
    let mcp = Mcp::local();
    for (tool, arguments, needles) in [
        (
            "acdm_read_nextcloud_file",
            json!({"path": "/Projects/Alpha/notes/kickoff.md", "project_name": "Alpha", "offset": 1000}),
            vec!["offset", "1000", "36 bytes"],
        ),
        (
            "acdm_read_wiki_file",
            json!({"path": "README.md", "offset": 30}),
            vec!["offset", "30", "30 bytes"],
        ),
        (
            "acdm_read_wiki_file",
            json!({"path": "big.md", "max_bytes": 10_000_000}),
            vec!["max_bytes", "65536"],
        ),
        (
            "acdm_read_nextcloud_file",
            json!({"path": "/Projects/Alpha/big.txt", "project_name": "Alpha", "max_bytes": 65_537}),
            vec!["max_bytes", "65536"],
        ),
        (
            "acdm_search_nextcloud",
            json!({"query": "x", "project_name": "Alpha", "limit": 51}),
            vec!["limit", "50"],
        ),
        (
            "acdm_search_wiki",
            json!({"query": 42}),
            vec!["query", "invalid type"],
        ),
        (
            "acdm_search_wiki",
            json!({"query": "x", "limit": "ten"}),
            vec!["limit", "invalid type"],
        ),
        (
            "acdm_read_nextcloud_file",
            json!({"path": "/Projects/Alpha/big.txt", "project_name": "Alpha", "offset": -1}),
            vec!["offset"],
        ),
    ] {
        let result = mcp.tool(tool, arguments.clone()).await;
        assert_eq!(
            error_code(&result),
            "validation_error",
            "{tool} {arguments}"
        );
        let message = result["structuredContent"]["message"].as_str().unwrap();
        for needle in needles {
            assert!(message.contains(needle), "{tool} {arguments}: {message}");
        }
    }
    // The last byte, and an empty file, are still fine.
    let last = mcp
        .tool(
            "acdm_read_nextcloud_file",
            json!({"path": "/Projects/Alpha/notes/kickoff.md", "project_name": "Alpha", "offset": 35}),
        )
        .await;
    assert_eq!(ok(&last)["content"], "\n");
    let cap = mcp
        .tool(
            "acdm_read_wiki_file",
            json!({"path": "big.md", "max_bytes": 65_536}),
        )
        .await;
    assert!(ok(&cap)["returned_bytes"].as_u64().unwrap() > 60_000);
}

#[tokio::test]
async fn readable_texts_count_in_words_a_person_would_write() {
    let mcp = Mcp::local();
    let one = mcp
        .tool(
            "acdm_search_nextcloud",
            json!({"query": "kickoff", "project_name": "Alpha"}),
        )
        .await;
    let text = one["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("1 file matching \"kickoff\" in /Projects/Alpha/"),
        "{text}"
    );
    let none = mcp
        .tool("acdm_search_wiki", json!({"query": "no such words here"}))
        .await;
    let text = none["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("No wiki matches for \"no such words here\""),
        "{text}"
    );
    let single = mcp
        .tool("acdm_search_wiki", json!({"query": "blue/green"}))
        .await;
    let text = single["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("1 of 1 wiki match for \"blue/green\""),
        "{text}"
    );
    let list = mcp.rpc("tools/list", json!({})).await;
    let description = list["result"]["tools"][2]["description"].as_str().unwrap();
    assert!(
        description.contains("contents and names") && !description.contains("not contents"),
        "the local store searches contents too: {description}"
    );
}
