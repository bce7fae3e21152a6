//! Resources and prompts, as an MCP client asks for them: the templates,
//! the paged list, reads through the read tools' own checks, and the
//! prompt the engine is offered.

use base64::Engine;
use serde_json::{Value, json};

use crate::harness::{Mcp, PNG, big_text, fixture, local_sources, settings};

/// The JSON-RPC error of a response (and checks there is one).
fn error(response: &Value) -> &Value {
    response
        .get("error")
        .unwrap_or_else(|| panic!("expected an error: {response}"))
}

/// The one content of a `resources/read`.
fn content(response: &Value) -> &Value {
    let contents = response["result"]["contents"]
        .as_array()
        .unwrap_or_else(|| panic!("expected contents: {response}"));
    assert_eq!(contents.len(), 1, "{response}");
    &contents[0]
}

async fn read(mcp: &Mcp, uri: &str) -> Value {
    mcp.rpc("resources/read", json!({"uri": uri})).await
}

#[tokio::test]
async fn the_server_offers_resources_and_prompts_with_three_templates() {
    let mcp = Mcp::local();
    let init = mcp
        .rpc(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
        )
        .await;
    let capabilities = &init["result"]["capabilities"];
    assert!(capabilities["resources"].is_object(), "{init}");
    assert!(capabilities["prompts"].is_object(), "{init}");
    assert!(capabilities["tools"].is_object(), "{init}");

    let templates = mcp.rpc("resources/templates/list", json!({})).await;
    let uris: Vec<&str> = templates["result"]["resourceTemplates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["uriTemplate"].as_str().unwrap())
        .collect();
    assert_eq!(
        uris,
        [
            "wiki://{path}",
            "nextcloud://{project}/{path}",
            "project://{slug}/overview"
        ]
    );
    // The engine is offered the prompt that needs no person's account.
    let prompts = mcp.rpc("prompts/list", json!({})).await;
    let prompts = prompts["result"]["prompts"].as_array().unwrap();
    assert_eq!(prompts.len(), 1, "{prompts:?}");
    assert_eq!(prompts[0]["name"], "summarise_file");
    let arguments: Vec<(&str, bool)> = prompts[0]["arguments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["name"].as_str().unwrap(), a["required"] == true))
        .collect();
    assert_eq!(
        arguments,
        [("project_name", true), ("path", true), ("focus", false)]
    );
}

#[tokio::test]
async fn the_list_gives_every_wiki_file_a_page_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let (wiki, files) = (dir.path().join("wiki"), dir.path().join("files"));
    fixture(&wiki, &files);
    // 4 files of the fixture and 246 more: three pages.
    for n in 0..246 {
        let page = wiki.join(format!("notes/page-{n:03}.md"));
        std::fs::create_dir_all(page.parent().unwrap()).unwrap();
        std::fs::write(page, format!("# Page {n}\n")).unwrap();
    }
    let mcp = Mcp::with_router(acdm_mcp::router(
        local_sources(dir.path()),
        settings(),
        acdm_mcp::McpMetrics::unregistered(),
    ));
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = Vec::new();
    loop {
        let params = match &cursor {
            Some(cursor) => json!({"cursor": cursor}),
            None => json!({}),
        };
        let page = mcp.rpc("resources/list", params).await;
        let resources = page["result"]["resources"].as_array().unwrap().clone();
        pages.push(resources.len());
        for resource in &resources {
            let uri = resource["uri"].as_str().unwrap().to_owned();
            assert!(uri.starts_with("wiki://"), "{resource}");
            assert_eq!(
                format!("wiki://{}", resource["name"].as_str().unwrap()),
                uri
            );
            seen.push(uri);
        }
        match page["result"]["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
    }
    assert_eq!(pages, [100, 100, 50]);
    let mut unique = seen.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), 250, "each file once");
    assert!(seen.contains(&"wiki://guides/weekly-reports.md".to_owned()));
    // Every listed URI reads.
    let listed = read(&mcp, &seen[0]).await;
    assert!(content(&listed)["text"].is_string(), "{listed}");
    // A cursor not made by the server is refused as a bad parameter; one
    // past the end (the wiki shrank meanwhile) is an empty last page.
    for bad in ["abc", "-1", ""] {
        let refused = mcp.rpc("resources/list", json!({"cursor": bad})).await;
        assert_eq!(error(&refused)["code"], -32602, "{refused}");
    }
    let past = mcp.rpc("resources/list", json!({"cursor": "999999"})).await;
    assert_eq!(past["result"]["resources"], json!([]), "{past}");
    assert!(past["result"].get("nextCursor").is_none(), "{past}");
}

#[tokio::test]
async fn a_resource_reads_as_the_read_tools_read() {
    let mcp = Mcp::local();
    // The wiki, with the path encoded or not.
    for uri in [
        "wiki://guides/weekly-reports.md",
        "wiki://guides%2Fweekly-reports.md",
    ] {
        let page = read(&mcp, uri).await;
        let page = content(&page);
        assert_eq!(page["uri"], uri);
        assert_eq!(
            page["text"],
            "# Weekly reports\nDue Friday.\nApproved by an owner.\n"
        );
        assert!(
            page.get("_meta")
                .is_none_or(|m| m.get("truncated").is_none())
        );
    }
    // A file larger than the largest window: its first window, and how to
    // read on.
    let big = read(&mcp, "wiki://big.md").await;
    let big = content(&big);
    let text = big["text"].as_str().unwrap();
    assert!(big_text().starts_with(text));
    assert!(
        text.len() <= 64 * 1024 && text.len() > 60 * 1024,
        "{}",
        text.len()
    );
    assert_eq!(big["_meta"]["truncated"], true, "{big}");
    assert_eq!(big["_meta"]["next_offset"], text.len());
    assert!(
        big["_meta"]["continue_with"]
            .as_str()
            .unwrap()
            .contains(&format!(
                "acdm_read_wiki_file with path=\"big.md\", offset={}",
                text.len()
            )),
        "{big}"
    );

    // Project files: text, and binary as base64.
    let notes = read(&mcp, "nextcloud://Alpha/notes/kickoff.md").await;
    assert_eq!(
        content(&notes)["text"],
        "# Kickoff\nDecisions: floor 5 first.\n"
    );
    let logo = read(&mcp, "nextcloud://Alpha/logo.png").await;
    let blob = content(&logo)["blob"].as_str().unwrap();
    assert_eq!(
        base64::engine::general_purpose::STANDARD
            .decode(blob)
            .unwrap(),
        PNG
    );
    assert_eq!(content(&logo)["mimeType"], "image/png");
}

#[tokio::test]
async fn a_resource_outside_its_project_or_missing_is_refused_as_the_tools_refuse_it() {
    let mcp = Mcp::local();
    for (uri, code, says) in [
        // Out of the project's folder, plainly or encoded.
        (
            "nextcloud://Alpha/../Beta/kickoff.md",
            -32602,
            "permission_denied",
        ),
        (
            "nextcloud://Alpha/%2E%2E%2FBeta%2Fkickoff.md",
            -32602,
            "permission_denied",
        ),
        (
            "nextcloud://Alpha%2F..%2FBeta/kickoff.md",
            -32602,
            "validation_error",
        ),
        // The trash is no project.
        (
            "nextcloud://.acdm-trash/alpha/6f1c1c1e-6b0b-4e53-9a38-2d1f7cf6b8a1/0/kickoff.md",
            -32602,
            "validation_error",
        ),
        // Missing: the file, the project.
        ("nextcloud://Alpha/nothing.md", -32002, "not_found"),
        ("nextcloud://Gamma/kickoff.md", -32002, "not_found"),
        ("wiki://nothing.md", -32002, "not_found"),
        // Not a resource of this server.
        ("file:///etc/passwd", -32602, "validation_error"),
        // Overviews are for people.
        ("project://alpha/overview", -32002, "not_found"),
    ] {
        let response = read(&mcp, uri).await;
        let error = error(&response);
        assert_eq!(error["code"], code, "{uri}: {response}");
        assert_eq!(error["data"]["code"], says, "{uri}: {response}");
        assert!(
            error["data"]["suggested_action"].is_string(),
            "{uri}: {response}"
        );
        let text = response.to_string();
        assert!(!text.contains("secret"), "{uri}: {text}");
        assert!(!text.contains("kept copy"), "{uri}: {text}");
    }
    // A project name differing only in case gets the tools' hint.
    let hinted = read(&mcp, "nextcloud://alpha/notes/kickoff.md").await;
    assert!(
        error(&hinted)["data"]["suggested_action"]
            .as_str()
            .unwrap()
            .contains("\"Alpha\""),
        "{hinted}"
    );
}

#[tokio::test]
async fn the_summarise_prompt_embeds_the_file_it_is_about() {
    let mcp = Mcp::local();
    for path in ["/Projects/Alpha/notes/kickoff.md", "notes/kickoff.md"] {
        let got = mcp
            .rpc(
                "prompts/get",
                json!({"name": "summarise_file", "arguments": {"project_name": "Alpha", "path": path, "focus": "decisions"}}),
            )
            .await;
        let messages = got["result"]["messages"].as_array().unwrap();
        assert_eq!(messages.len(), 2, "{got}");
        assert_eq!(messages[0]["role"], "user");
        let instruction = messages[0]["content"]["text"].as_str().unwrap();
        assert!(
            instruction.contains("\"/Projects/Alpha/notes/kickoff.md\"")
                && instruction.contains("concentrating on: decisions"),
            "{instruction}"
        );
        let embedded = &messages[1]["content"];
        assert_eq!(embedded["type"], "resource", "{got}");
        assert_eq!(
            embedded["resource"]["uri"],
            "nextcloud://Alpha/notes/kickoff.md"
        );
        assert_eq!(
            embedded["resource"]["text"],
            "# Kickoff\nDecisions: floor 5 first.\n"
        );
    }
    // Typed arguments: missing, unknown, not a string, too long.
    for (arguments, says) in [
        (json!({"project_name": "Alpha"}), "missing field `path`"),
        (
            json!({"project_name": "Alpha", "path": "a.md", "project_id": "x"}),
            "unknown field `project_id`",
        ),
        (
            json!({"project_name": "Alpha", "path": 5}),
            "path: invalid type",
        ),
        (
            json!({"project_name": "Alpha", "path": "notes/kickoff.md", "focus": "x".repeat(501)}),
            "focus is longer than 500 characters",
        ),
    ] {
        let refused = mcp
            .rpc(
                "prompts/get",
                json!({"name": "summarise_file", "arguments": arguments}),
            )
            .await;
        let error = error(&refused);
        assert_eq!(error["code"], -32602, "{refused}");
        assert!(
            error["message"].as_str().unwrap().contains(says),
            "{says}: {refused}"
        );
    }
    // Another project's file, and the prompts for people only.
    let outside = mcp
        .rpc(
            "prompts/get",
            json!({"name": "summarise_file", "arguments": {"project_name": "Alpha", "path": "/Projects/Beta/kickoff.md"}}),
        )
        .await;
    assert_eq!(error(&outside)["data"]["code"], "permission_denied");
    assert!(!outside.to_string().contains("secret"));
    for name in ["prepare_meeting", "review_reports", "nothing"] {
        let refused = mcp
            .rpc(
                "prompts/get",
                json!({"name": name, "arguments": {"project_name": "Alpha"}}),
            )
            .await;
        assert_eq!(error(&refused)["code"], -32602, "{name}: {refused}");
    }
}
