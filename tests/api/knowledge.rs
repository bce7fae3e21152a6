//! Knowledge an agent can find and read, through both channels, over the
//! real WebDAV server and the GitLab double: documents made by real
//! libraries (`cargo xtask setup` writes them with python-docx, openpyxl,
//! python-pptx, odfpy and reportlab) read as Markdown text in windows
//! that chain, their exact bytes with `"as": "raw"`, clear failures for
//! unreadable ones; and the content index answering `nc/search`,
//! `acdm_search_nextcloud` and `acdm_search_wiki`, fresh after one refresh
//! for files added, changed and deleted upstream, at once for writes
//! through the BFF, and never outside the project.
//!
//! The index's refresh period is set far beyond the test: each test
//! refreshes it itself (`Knowledge::refresh`), so time is the test's.

use std::collections::BTreeMap;
use std::path::PathBuf;

use acdm_test_support::gitlab::GitLabDouble;
use base64::Engine as _;
use serde_json::{Value, json};

use crate::dav::{ALPHA, BETA, NcEnv};
use crate::helpers::{Req, TOKEN, send};

/// The fixtures `cargo xtask setup` makes, or `None` (and a note) when
/// they are missing and not required.
#[expect(
    clippy::disallowed_methods,
    clippy::print_stderr,
    reason = "a test: ACDM_REQUIRE_WEBDAV makes missing tools a failure (CI); a skip is said"
)]
fn fixtures() -> Option<(PathBuf, Value)> {
    let dir =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.test-tools/fixtures/documents");
    match std::fs::read(dir.join("manifest.json")) {
        Ok(manifest) => Some((dir, serde_json::from_slice(&manifest).unwrap())),
        Err(_) if std::env::var_os("ACDM_REQUIRE_WEBDAV").is_some() => {
            panic!(
                "the document fixtures are missing in {}: run `cargo xtask setup`",
                dir.display()
            )
        }
        Err(_) => {
            eprintln!("skipped: no document fixtures (run `cargo xtask setup`)");
            None
        }
    }
}

/// Copies every fixture into Alpha's `docs/` folder on the WebDAV disk.
fn place(env: &NcEnv, dir: &std::path::Path, manifest: &Value) -> Vec<Value> {
    let files = manifest["files"].as_array().unwrap().clone();
    for file in &files {
        let name = file["name"].as_str().unwrap();
        let target = env.disk(&format!("Projects/Alpha/docs/{name}"));
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::copy(dir.join(name), &target).unwrap();
    }
    files
}

/// A `tools/call` over the socket with the service token; the `result`.
async fn call_tool(env: &NcEnv, name: &str, arguments: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": name, "arguments": arguments}})
    .to_string();
    let r = send(
        env.app.addr,
        Req::new("POST", "/mcp")
            .headers(&[
                ("X-ACDM-Service-Auth", TOKEN),
                ("Accept", "application/json, text/event-stream"),
            ])
            .json(&body),
    )
    .await;
    assert_eq!(r.status, 200, "{name} {arguments}: {}", r.body);
    r.json()["result"].clone()
}

/// The whole text of a document through `nc/read`, window after window of
/// `window` bytes; checks that each window starts where the last stopped.
async fn read_in_windows(env: &NcEnv, rel_path: &str, window: u64) -> (String, Value) {
    let mut text = String::new();
    let mut offset = 0;
    let mut first = Value::Null;
    loop {
        let (status, answer) = env
            .nc(
                ALPHA,
                "read",
                json!({"rel_path": rel_path, "offset": offset, "max_bytes": window}),
            )
            .await;
        assert_eq!(status, 200, "{rel_path} at {offset}: {answer}");
        let data = &answer["data"];
        assert_eq!(data["offset"], offset, "{rel_path}: the offset is echoed");
        text.push_str(data["content"].as_str().unwrap());
        if first.is_null() {
            first = data.clone();
        }
        match data["next_offset"].as_u64() {
            Some(next) => {
                assert!(next > offset, "{rel_path}: windows move on");
                offset = next;
            }
            None => break,
        }
    }
    (text, first)
}

#[tokio::test]
async fn documents_are_read_as_markdown_text_through_both_channels() {
    let Some((dir, manifest)) = fixtures() else {
        return;
    };
    let Some(env) = NcEnv::start().await else {
        return;
    };
    for file in place(&env, &dir, &manifest) {
        let name = file["name"].as_str().unwrap();
        let rel = format!("docs/{name}");
        let bytes = std::fs::read(dir.join(name)).unwrap();
        if let Some(reason) = file["reason"].as_str() {
            let (status, answer) = env.nc(ALPHA, "read", json!({"rel_path": rel})).await;
            assert_eq!(status, 422, "{name}: {answer}");
            assert_eq!(answer["code"], "document_unreadable", "{name}: {answer}");
            assert!(
                answer["message"].as_str().unwrap().contains(reason),
                "{name}: the reason is said: {answer}"
            );
            continue;
        }
        // Whole, then in small windows: the same text.
        let (status, whole) = env
            .nc(
                ALPHA,
                "read",
                json!({"rel_path": rel, "max_bytes": 131_072}),
            )
            .await;
        assert_eq!(status, 200, "{name}: {whole}");
        let data = &whole["data"];
        let text = data["content"].as_str().unwrap().to_owned();
        assert_eq!(data["extracted_from"], file["format"], "{name}");
        assert_eq!(data["encoding"], "text", "{name}");
        assert_eq!(
            data["size"],
            text.len() as u64,
            "{name}: size is the text's"
        );
        assert_eq!(
            data["file_size"],
            bytes.len() as u64,
            "{name}: the file's own"
        );
        assert!(data["etag"].is_string(), "{name}: {data}");
        for expected in ["headings", "lines", "contains"] {
            for piece in file[expected].as_array().into_iter().flatten() {
                let piece = piece.as_str().unwrap();
                assert!(
                    text.contains(piece),
                    "{name}: {piece:?} missing in:\n{text}"
                );
            }
        }
        for piece in file["absent"].as_array().into_iter().flatten() {
            let piece = piece.as_str().unwrap();
            assert!(
                !text.contains(piece),
                "{name}: {piece:?} present in:\n{text}"
            );
        }
        let (joined, first) = read_in_windows(&env, &rel, 97).await;
        assert_eq!(joined, text, "{name}: windows joined give the whole text");
        assert_eq!(first["truncated"], text.len() > 97, "{name}");

        // The exact bytes on request.
        let (status, raw) = env
            .nc(
                ALPHA,
                "read",
                json!({"rel_path": rel, "as": "raw", "max_bytes": 131_072}),
            )
            .await;
        assert_eq!(status, 200, "{name}: {raw}");
        assert!(raw["data"]["extracted_from"].is_null(), "{name}: {raw}");
        let content = raw["data"]["content"].as_str().unwrap();
        let got = match raw["data"]["encoding"].as_str().unwrap() {
            "base64" => base64::engine::general_purpose::STANDARD
                .decode(content)
                .unwrap(),
            _ => content.as_bytes().to_vec(),
        };
        assert_eq!(got, bytes, "{name}: raw is the file's bytes");

        // The MCP tool answers the same text.
        let result = call_tool(
            &env,
            "acdm_read_nextcloud_file",
            json!({"path": format!("/Projects/Alpha/{rel}"), "project_name": "Alpha",
                   "max_bytes": 131072}),
        )
        .await;
        let structured = &result["structuredContent"];
        assert_eq!(result["isError"], false, "{name}: {result}");
        assert_eq!(structured["extracted_from"], file["format"], "{name}");
        assert_eq!(structured["file_size"], bytes.len() as u64, "{name}");
        let mcp_text = structured["content"].as_str().unwrap();
        assert!(
            text.starts_with(mcp_text) && !mcp_text.is_empty(),
            "{name}: the MCP window is the text's start"
        );
    }
    env.stop().await;
}

#[tokio::test]
async fn a_damaged_document_is_a_clear_failure_and_the_next_read_is_served() {
    let Some((dir, _)) = fixtures() else {
        return;
    };
    let Some(env) = NcEnv::start().await else {
        return;
    };
    let pdf = std::fs::read(dir.join("report.pdf")).unwrap();
    let truncated = env.disk("Projects/Alpha/docs/truncated.pdf");
    std::fs::create_dir_all(truncated.parent().unwrap()).unwrap();
    std::fs::write(&truncated, &pdf[..pdf.len() / 3]).unwrap();
    std::fs::write(
        env.disk("Projects/Alpha/docs/garbage.docx"),
        b"this is not a zip archive at all",
    )
    .unwrap();
    std::fs::copy(
        dir.join("minutes.docx"),
        env.disk("Projects/Alpha/docs/good.docx"),
    )
    .unwrap();
    for name in ["truncated.pdf", "garbage.docx"] {
        let (status, answer) = env
            .nc(ALPHA, "read", json!({"rel_path": format!("docs/{name}")}))
            .await;
        assert_eq!(status, 422, "{name}: {answer}");
        assert_eq!(answer["code"], "document_unreadable", "{name}");
        let message = answer["message"].as_str().unwrap();
        assert!(message.contains("could not be read as text"), "{message}");
        assert!(
            !message.contains("/tmp") && !message.contains("panicked"),
            "{message}"
        );
        // Its bytes stay readable.
        let (status, raw) = env
            .nc(
                ALPHA,
                "read",
                json!({"rel_path": format!("docs/{name}"), "as": "raw"}),
            )
            .await;
        assert_eq!(status, 200, "{name}: {raw}");
        let result = call_tool(
            &env,
            "acdm_read_nextcloud_file",
            json!({"path": format!("/Projects/Alpha/docs/{name}"), "project_name": "Alpha"}),
        )
        .await;
        assert_eq!(result["isError"], true, "{result}");
        assert_eq!(
            result["structuredContent"]["code"], "document_unreadable",
            "{result}"
        );
    }
    let (status, good) = env
        .nc(ALPHA, "read", json!({"rel_path": "docs/good.docx"}))
        .await;
    assert_eq!(status, 200, "{good}");
    assert_eq!(good["data"]["extracted_from"], "docx");
    env.stop().await;
}

/// The wiki of the GitLab double: a guide and a policy.
fn wiki_files() -> BTreeMap<String, BTreeMap<String, Vec<u8>>> {
    let main = BTreeMap::from([
        (
            "guides/weekly-reports.md".to_owned(),
            b"# Weekly reports\n\nSend the weekly report to the sponsor every Friday.\n".to_vec(),
        ),
        (
            "policies/security.md".to_owned(),
            "# 安全制度\n\n所有密码每九十天更换一次。\n"
                .as_bytes()
                .to_vec(),
        ),
    ]);
    BTreeMap::from([("main".to_owned(), main)])
}

async fn searched_paths(env: &NcEnv, tool: &str, arguments: Value) -> (Vec<String>, Value) {
    let result = call_tool(env, tool, arguments.clone()).await;
    assert_eq!(result["isError"], false, "{tool} {arguments}: {result}");
    let structured = result["structuredContent"].clone();
    let paths = structured["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["path"].as_str().unwrap().to_owned())
        .collect();
    (paths, structured)
}

#[tokio::test]
async fn the_content_index_answers_the_three_searches_and_follows_both_upstreams() {
    let Some((dir, manifest)) = fixtures() else {
        return;
    };
    let gitlab = GitLabDouble::start("docs/wiki", "glpat-knowledge-test", wiki_files()).await;
    let Some(env) = NcEnv::start_with(vec![
        ("ACDM_SEARCH_REFRESH_SECONDS", "86400".to_owned()),
        ("GITLAB_WIKI_BASE_URL", gitlab.base_url.to_string()),
        ("GITLAB_WIKI_PROJECT_ID", "docs/wiki".to_owned()),
        ("GITLAB_WIKI_PAT", "glpat-knowledge-test".to_owned()),
    ])
    .await
    else {
        return;
    };
    place(&env, &dir, &manifest);
    std::fs::write(
        env.disk("Projects/Beta/penalty-beta.md"),
        "Beta's supplier penalty: confidential.",
    )
    .unwrap();
    let knowledge = env.app.state.knowledge.clone();
    let (wiki, files) = knowledge.refresh().await;
    wiki.unwrap();
    files.unwrap();

    // BFF nc/search: ranked content hits, documents' text included.
    let (status, found) = env
        .nc(ALPHA, "search", json!({"query": "supplier list risks"}))
        .await;
    assert_eq!(status, 200, "{found}");
    let data = &found["data"];
    assert_eq!(data["searched"], "index", "{found}");
    let first = &data["hits"][0];
    assert_eq!(first["rel_path"], "docs/minutes.docx", "{found}");
    assert_eq!(first["path"], "/Projects/Alpha/docs/minutes.docx");
    assert_eq!(first["extracted_from"], "docx");
    assert!(first["score"].as_f64().unwrap() > 0.0);
    assert!(first["snippet"].as_str().unwrap().contains("**"), "{first}");
    assert!(data["total_count"].as_u64().unwrap() >= 1);
    let text = found.to_string();
    assert!(
        !text.contains("Beta") && !text.contains(".acdm-trash"),
        "{found}"
    );

    // MCP: Chinese content of a PDF, and of a Word file.
    let (paths, out) = searched_paths(
        &env,
        "acdm_search_nextcloud",
        json!({"query": "季度收入增长", "project_name": "Alpha"}),
    )
    .await;
    assert_eq!(out["searched"], "index", "{out}");
    assert_eq!(
        paths.first().map(String::as_str),
        Some("/Projects/Alpha/docs/report-zh.pdf"),
        "{out}"
    );
    let (paths, _) = searched_paths(
        &env,
        "acdm_search_nextcloud",
        json!({"query": "预算审批", "project_name": "Alpha"}),
    )
    .await;
    assert!(
        paths.contains(&"/Projects/Alpha/docs/minutes-zh.docx".to_owned()),
        "{paths:?}"
    );
    // Beta's agent and project see Beta's file only.
    let (paths, _) = searched_paths(
        &env,
        "acdm_search_nextcloud",
        json!({"query": "supplier penalty", "project_name": "Beta"}),
    )
    .await;
    assert_eq!(paths, ["/Projects/Beta/penalty-beta.md"]);
    let (status, beta) = env.nc(BETA, "search", json!({"query": "supplier"})).await;
    assert_eq!(status, 200);
    assert!(
        beta["data"]["hits"]
            .as_array()
            .unwrap()
            .iter()
            .all(|h| h["path"].as_str().unwrap().starts_with("/Projects/Beta/")),
        "{beta}"
    );

    // The wiki.
    let (paths, out) =
        searched_paths(&env, "acdm_search_wiki", json!({"query": "weekly report"})).await;
    assert_eq!(out["searched"], "index", "{out}");
    assert_eq!(paths, ["guides/weekly-reports.md"]);
    let (paths, _) = searched_paths(&env, "acdm_search_wiki", json!({"query": "密码更换"})).await;
    assert_eq!(paths, ["policies/security.md"]);

    // Nothing changed: one branch lookup on GitLab, nothing downloaded.
    gitlab.clear_requests();
    let (wiki, files) = knowledge.refresh().await;
    let (wiki, files) = (wiki.unwrap(), files.unwrap());
    assert_eq!((wiki.downloads, files.downloads), (0, 0));
    let requests: Vec<String> = gitlab
        .requests()
        .iter()
        .map(|r| r.path().to_owned())
        .collect();
    assert_eq!(requests.len(), 1, "{requests:?}");
    assert!(
        requests[0].contains("/repository/branches/"),
        "{requests:?}"
    );

    // Added, changed and deleted upstream: reflected after one refresh.
    std::fs::create_dir_all(env.disk("Projects/Alpha/notes")).unwrap();
    std::fs::write(
        env.disk("Projects/Alpha/notes/crane.md"),
        "The tower crane inspection passed.",
    )
    .unwrap();
    gitlab.put_file(
        "guides/cranes.md",
        b"Crane permits are renewed yearly.".to_vec(),
    );
    let (wiki, files) = knowledge.refresh().await;
    assert_eq!(
        wiki.unwrap().downloads,
        1,
        "only the changed wiki file is fetched"
    );
    files.unwrap();
    // (Words of the content, not of the file's name: names are indexed too.)
    let query = json!({"query": "inspection passed", "project_name": "Alpha"});
    let (paths, _) = searched_paths(&env, "acdm_search_nextcloud", query.clone()).await;
    assert_eq!(paths, ["/Projects/Alpha/notes/crane.md"]);
    let (paths, _) =
        searched_paths(&env, "acdm_search_wiki", json!({"query": "crane permits"})).await;
    assert_eq!(paths, ["guides/cranes.md"]);

    std::fs::write(
        env.disk("Projects/Alpha/notes/crane.md"),
        "The scaffolding was delayed.",
    )
    .unwrap();
    gitlab.put_file("guides/cranes.md", b"Cranes need a lifting plan.".to_vec());
    let (wiki, files) = knowledge.refresh().await;
    wiki.unwrap();
    files.unwrap();
    let (paths, _) = searched_paths(&env, "acdm_search_nextcloud", query.clone()).await;
    assert!(paths.is_empty(), "{paths:?}");
    let (paths, _) = searched_paths(
        &env,
        "acdm_search_nextcloud",
        json!({"query": "scaffolding", "project_name": "Alpha"}),
    )
    .await;
    assert_eq!(paths, ["/Projects/Alpha/notes/crane.md"]);
    let (paths, _) =
        searched_paths(&env, "acdm_search_wiki", json!({"query": "lifting plan"})).await;
    assert_eq!(paths, ["guides/cranes.md"]);

    std::fs::remove_file(env.disk("Projects/Alpha/notes/crane.md")).unwrap();
    gitlab.delete_file("guides/cranes.md");
    let (wiki, files) = knowledge.refresh().await;
    wiki.unwrap();
    files.unwrap();
    let (paths, _) = searched_paths(
        &env,
        "acdm_search_nextcloud",
        json!({"query": "scaffolding", "project_name": "Alpha"}),
    )
    .await;
    assert!(paths.is_empty(), "{paths:?}");
    let (paths, _) =
        searched_paths(&env, "acdm_search_wiki", json!({"query": "lifting plan"})).await;
    assert!(paths.is_empty(), "{paths:?}");

    // A write through the BFF is searchable at once, without a refresh;
    // its delete likewise gone.
    let (status, wrote) = env
        .nc(
            ALPHA,
            "write",
            json!({"rel_path": "notes/site-visit.md", "content": "Site visit: the foundation pour is scheduled."}),
        )
        .await;
    assert_eq!(status, 200, "{wrote}");
    let (status, found) = env
        .nc(ALPHA, "search", json!({"query": "foundation pour"}))
        .await;
    assert_eq!(status, 200);
    assert_eq!(
        found["data"]["hits"][0]["rel_path"], "notes/site-visit.md",
        "{found}"
    );
    let (status, gone) = env
        .nc(
            ALPHA,
            "delete",
            json!({"rel_path": "notes/site-visit.md", "dry_run": false}),
        )
        .await;
    assert_eq!(status, 200, "{gone}");
    let (_, found) = env
        .nc(ALPHA, "search", json!({"query": "foundation pour"}))
        .await;
    assert_eq!(found["data"]["returned"], 0, "{found}");

    // Health reports the index per source, with the unreadable document.
    let health = send(env.app.addr, Req::new("GET", "/mcp/health")).await;
    let health = health.json();
    assert_eq!(health["index"]["files"]["status"], "ready", "{health}");
    assert_eq!(health["index"]["wiki"]["status"], "ready", "{health}");
    assert!(
        health["index"]["files"]["documents"].as_u64().unwrap() >= 11,
        "{health}"
    );
    // Counted by reason; the open report names no file (the log does).
    assert!(
        health["index"]["files"]["unreadable_reasons"]["no_text"].as_u64() >= Some(1),
        "{health}"
    );
    assert!(!health.to_string().contains("scan.pdf"), "{health}");
    env.stop().await;
}

#[tokio::test]
async fn no_project_name_or_mount_reaches_another_projects_or_the_trashs_files_through_the_index() {
    let Some(env) =
        NcEnv::start_with(vec![("ACDM_SEARCH_REFRESH_SECONDS", "86400".to_owned())]).await
    else {
        return;
    };
    for (path, text) in [
        ("Projects/Alpha/secret-alpha.md", "zebrafish alpha"),
        ("Projects/Beta/secret-beta.md", "zebrafish beta"),
        ("Projects/Alphabet/secret-alphabet.md", "zebrafish alphabet"),
        (
            "Projects/.acdm-trash/alpha/e1/0/secret-trash.md",
            "zebrafish trash",
        ),
    ] {
        let file = env.disk(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, text).unwrap();
    }
    let (wiki, files) = env.app.state.knowledge.refresh().await;
    wiki.unwrap();
    files.unwrap();
    let mut names: Vec<String> = acdm_test_support::traversal::payloads()
        .into_iter()
        .collect();
    names.extend(
        [
            "Alpha",
            "alpha",
            "ALPHA",
            "Alpha/",
            "Alpha/..",
            "Alpha/../Beta",
            "Beta",
            "Alphabet",
            ".acdm-trash",
            "..",
            "/Projects/Beta",
            "Alpha\u{0}",
            "Ａlpha",
        ]
        .map(str::to_owned),
    );
    for name in &names {
        let result = call_tool(
            &env,
            "acdm_search_nextcloud",
            json!({"query": "zebrafish", "project_name": name}),
        )
        .await;
        let text = result.to_string();
        assert!(!text.contains("zebrafish trash"), "{name:?}: {text}");
        for hit in result["structuredContent"]["hits"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let path = hit["path"].as_str().unwrap();
            let expected = format!("/Projects/{name}/");
            assert!(path.starts_with(&expected), "{name:?} returned {path}");
        }
        if name != "Beta" {
            assert!(!text.contains("secret-beta"), "{name:?}: {text}");
        }
    }
    // A query of symbols only (valid by the schema) finds nothing: never a
    // server error (schemathesis found `{"query": "-"}` answered 500).
    let (status, answer) = env.nc(ALPHA, "search", json!({"query": "-"})).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["data"]["returned"], 0, "{answer}");
    let result = call_tool(
        &env,
        "acdm_search_nextcloud",
        json!({"query": "—— ?", "project_name": "Alpha"}),
    )
    .await;
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(result["structuredContent"]["returned"], 0, "{result}");
    // The BFF: whatever the mount, Alpha's agent sees Alpha's only.
    for mount in [None, Some("project"), Some("beta"), Some("../beta")] {
        let mut body = json!({"query": "zebrafish"});
        if let Some(mount) = mount {
            body["mount"] = json!(mount);
        }
        let (_, answer) = env.nc(ALPHA, "search", body).await;
        let text = answer.to_string();
        assert!(
            !text.contains("secret-beta")
                && !text.contains("secret-trash")
                && !text.contains("alphabet"),
            "{mount:?}: {text}"
        );
    }
    env.stop().await;
}
