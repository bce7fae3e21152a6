//! An MCP endpoint over fixture sources, called with JSON-RPC through the
//! real router (the same code path as over a socket, without one).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use acdm_core::AbsPath;
use acdm_mcp::{McpMetrics, McpSettings, ReadLimits};
use acdm_sources::local::{LocalFileSearch, LocalFileStore, LocalWiki};
use acdm_sources::{GitRef, Sources};
use axum::Router;
use axum::body::{Body, to_bytes};
use axum::http::Request;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

/// A 100 KiB text file with multi-byte characters at window borders.
pub(crate) fn big_text() -> String {
    let mut text = String::new();
    let mut n = 0;
    while text.len() < 100 * 1024 {
        text.push_str(&format!("line {n}: café – 报告 – naïve résumé\n"));
        n += 1;
    }
    text
}

pub(crate) const PNG: &[u8] =
    b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0\x1f\x15\xc4\x89";

fn write(root: &Path, path: &str, content: &[u8]) {
    let file = root.join(path);
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(file, content).unwrap();
}

/// Fills `wiki` and `files` with the fixture.
pub(crate) fn fixture(wiki: &Path, files: &Path) {
    write(wiki, "README.md", b"# Wiki\nStart with the guides.\n");
    write(
        wiki,
        "guides/weekly-reports.md",
        b"# Weekly reports\nDue Friday.\nApproved by an owner.\n",
    );
    write(
        wiki,
        "guides/deploy.md",
        b"# Deploy\nUse the blue/green switch.\n",
    );
    write(wiki, "big.md", big_text().as_bytes());
    write(
        files,
        "Projects/Alpha/notes/kickoff.md",
        b"# Kickoff\nDecisions: floor 5 first.\n",
    );
    write(files, "Projects/Alpha/big.txt", big_text().as_bytes());
    write(files, "Projects/Alpha/logo.png", PNG);
    write(files, "Projects/Alpha-evil/kickoff.md", b"evil twin");
    write(
        files,
        "Projects/Beta/kickoff.md",
        b"# Beta kickoff\nsecret\n",
    );
    // What the BFF's journal keeps: every project's replaced and deleted
    // files, beside the project folders.
    for (path, content) in TRASH {
        write(files, path, content.as_bytes());
    }
    // Two folders that differ only in case (a case-sensitive store).
    write(files, "Projects/Delta/a.md", b"delta");
    write(files, "Projects/DELTA/a.md", b"DELTA");
}

/// Files in the trash (`/Projects/.acdm-trash/<slug>/<event>/<n>/<name>`);
/// their content must never come back from a tool.
pub(crate) const TRASH: &[(&str, &str)] = &[
    (
        "Projects/.acdm-trash/alpha/6f1c1c1e-6b0b-4e53-9a38-2d1f7cf6b8a1/0/kickoff.md",
        "kept copy of alpha's kickoff",
    ),
    (
        "Projects/.acdm-trash/beta/0c8d2f6a-3c5e-4b7a-9b1d-6f1c1f7e9e10/0/kickoff.md",
        "kept copy of beta's kickoff",
    ),
];

pub(crate) fn settings() -> McpSettings {
    McpSettings {
        knowledge: None,
        people: None,
        allowed_hosts: vec![
            "localhost".to_owned(),
            "127.0.0.1".to_owned(),
            "acdm-backend".to_owned(),
        ],
        sessions: false,
        files_base: AbsPath::parse("/Projects").unwrap(),
        read_limits: ReadLimits {
            default_bytes: 32 * 1024,
            max_bytes: 64 * 1024,
        },
        stopped: CancellationToken::new(),
        linger: std::time::Duration::ZERO,
        limits: acdm_mcp::ToolLimits::off(),
    }
}

/// An MCP router over the local fixture.
pub(crate) struct Mcp {
    pub(crate) router: Router,
    /// Each tool's output schema, compiled on first use: every result a
    /// test sees is checked against it, errors included (clients such as
    /// the TypeScript SDK validate both).
    validators: tokio::sync::OnceCell<HashMap<String, jsonschema::Validator>>,
    _dir: tempfile::TempDir,
}

pub(crate) fn local_sources(dir: &Path) -> Sources {
    let files = LocalFileStore::open(dir.join("files")).unwrap();
    Sources {
        wiki: Arc::new(LocalWiki::open(dir.join("wiki"), GitRef::parse("main").unwrap()).unwrap()),
        files: Arc::new(files.clone()),
        search: Arc::new(LocalFileSearch::new(files)),
    }
}

impl Mcp {
    /// An endpoint over other sources.
    pub(crate) fn with_router(router: Router) -> Self {
        Self {
            router,
            validators: tokio::sync::OnceCell::new(),
            _dir: tempfile::tempdir().unwrap(),
        }
    }

    pub(crate) fn local() -> Self {
        let dir = tempfile::tempdir().unwrap();
        fixture(&dir.path().join("wiki"), &dir.path().join("files"));
        let router = acdm_mcp::router(
            local_sources(dir.path()),
            settings(),
            McpMetrics::unregistered(),
        );
        Self {
            router,
            validators: tokio::sync::OnceCell::new(),
            _dir: dir,
        }
    }

    /// Sends one raw HTTP request.
    pub(crate) async fn http(
        &self,
        request: Request<Body>,
    ) -> (u16, Vec<(String, String)>, String) {
        let response = self.router.clone().oneshot(request).await.unwrap();
        let status = response.status().as_u16();
        let headers = response
            .headers()
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_owned(),
                    v.to_str().unwrap_or_default().to_owned(),
                )
            })
            .collect();
        let body = to_bytes(response.into_body(), 16 << 20).await.unwrap();
        (status, headers, String::from_utf8_lossy(&body).into_owned())
    }

    /// A JSON-RPC call to `/mcp`; returns the whole response object.
    pub(crate) async fn rpc(&self, method: &str, params: Value) -> Value {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let request = rpc_request("/mcp", "localhost", &body);
        let (status, _, text) = self.http(request).await;
        assert_eq!(status, 200, "{method}: {text}");
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{method}: not JSON ({e}): {text}"))
    }

    /// Calls a tool; returns the `result`, after checking its structured
    /// content against the tool's output schema.
    pub(crate) async fn tool(&self, name: &str, arguments: Value) -> Value {
        let response = self
            .rpc("tools/call", json!({"name": name, "arguments": arguments}))
            .await;
        let result = response
            .get("result")
            .cloned()
            .unwrap_or_else(|| panic!("{name}: no result: {response}"));
        let validators = self
            .validators
            .get_or_init(|| async {
                let list = self.rpc("tools/list", json!({})).await;
                list["result"]["tools"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|t| {
                        let validator = jsonschema::validator_for(&t["outputSchema"])
                            .unwrap_or_else(|e| panic!("{}: bad output schema: {e}", t["name"]));
                        (t["name"].as_str().unwrap().to_owned(), validator)
                    })
                    .collect()
            })
            .await;
        let structured = result
            .get("structuredContent")
            .unwrap_or_else(|| panic!("{name}: no structured content: {result}"));
        if let Err(error) = validators[name].validate(structured) {
            panic!("{name}: the result does not match the output schema ({error}): {result}");
        }
        result
    }
}

pub(crate) fn rpc_request(path: &str, host: &str, body: &Value) -> Request<Body> {
    Request::builder()
        .method("POST")
        .uri(path)
        .header("host", host)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(Body::from(body.to_string()))
        .unwrap()
}

/// The error code of a failed tool result (and checks it is a failure).
pub(crate) fn error_code(result: &Value) -> String {
    assert_eq!(result["isError"], true, "expected a failure: {result}");
    result["structuredContent"]["code"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// The structured content of a successful tool result.
pub(crate) fn ok(result: &Value) -> &Value {
    assert_eq!(result["isError"], false, "expected success: {result}");
    &result["structuredContent"]
}
