//! The MCP endpoint through the whole service (gate, host check, tools)
//! over a real socket, driven by rmcp's own client: what an in-repo Rust
//! agent would do. The Python SDK and the conformance suite are run by
//! `cargo xtask integration`.

use std::collections::HashMap;

use http::{HeaderName, HeaderValue};
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, ClientConfig};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::json;

use crate::dav::{ALPHA, NcEnv};
use crate::helpers::{Options, Req, TOKEN, send, spawn_app};

pub(crate) fn transport(
    addr: std::net::SocketAddr,
    token: &str,
) -> StreamableHttpClientTransport<reqwest::Client> {
    // rmcp's client builds a default reqwest client, which needs a process
    // crypto provider (the service's own client passes its TLS setup).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let config = StreamableHttpClientTransportConfig::with_uri(format!("http://{addr}/mcp"))
        .custom_headers(HashMap::from([(
            HeaderName::from_static("x-acdm-service-auth"),
            HeaderValue::from_str(token).unwrap(),
        )]));
    StreamableHttpClientTransport::from_config(config)
}

fn args(value: serde_json::Value) -> rmcp::model::JsonObject {
    value.as_object().unwrap().clone()
}

#[tokio::test]
async fn an_rmcp_client_initializes_lists_and_calls_every_tool() {
    let app = spawn_app(Options::default()).await;
    let wiki = app.data_dir.join("wiki/guides");
    std::fs::create_dir_all(&wiki).unwrap();
    std::fs::write(
        wiki.join("weekly-reports.md"),
        "# Weekly reports\nDue on Friday.\n",
    )
    .unwrap();
    let folder = app.data_dir.join("files/Projects/Alpha/meetings");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(folder.join("kickoff.md"), "# Kickoff\nfloor 5 first\n").unwrap();

    let client = ClientConfig::default()
        .serve(transport(app.addr, TOKEN))
        .await
        .unwrap();
    let info = client.peer_info().unwrap();
    assert_eq!(info.server_info.as_ref().unwrap().name, "acdm-knowledge");
    assert!(
        info.instructions
            .as_deref()
            .unwrap()
            .contains("Never guess")
    );
    let tools = client.list_all_tools().await.unwrap();
    assert_eq!(tools.len(), 4);
    assert!(
        tools
            .iter()
            .all(|t| t.annotations.as_ref().and_then(|a| a.read_only_hint) == Some(true))
    );

    let call = async |name: &'static str, arguments: serde_json::Value| {
        client
            .call_tool(CallToolRequestParams::new(name).with_arguments(args(arguments)))
            .await
            .unwrap()
    };
    let found = call("acdm_search_wiki", json!({"query": "weekly"})).await;
    assert_eq!(found.is_error, Some(false));
    assert_eq!(
        found.structured_content.as_ref().unwrap()["hits"][0]["path"],
        "guides/weekly-reports.md"
    );
    let read = call(
        "acdm_read_wiki_file",
        json!({"path": "guides/weekly-reports.md"}),
    )
    .await;
    assert_eq!(
        read.structured_content.as_ref().unwrap()["content"],
        "# Weekly reports\nDue on Friday.\n"
    );
    let hits = call(
        "acdm_search_nextcloud",
        json!({"query": "kickoff", "project_name": "Alpha"}),
    )
    .await;
    assert_eq!(
        hits.structured_content.as_ref().unwrap()["hits"][0]["path"],
        "/Projects/Alpha/meetings/kickoff.md"
    );
    let file = call(
        "acdm_read_nextcloud_file",
        json!({"path": "/Projects/Alpha/meetings/kickoff.md", "project_name": "Alpha"}),
    )
    .await;
    assert_eq!(
        file.structured_content.as_ref().unwrap()["content"],
        "# Kickoff\nfloor 5 first\n"
    );
    let refused = call(
        "acdm_read_nextcloud_file",
        json!({"path": "/Projects/Beta/x.md", "project_name": "Alpha"}),
    )
    .await;
    assert_eq!(refused.is_error, Some(true));
    assert_eq!(
        refused.structured_content.as_ref().unwrap()["code"],
        "permission_denied"
    );
    let unknown = client
        .call_tool(CallToolRequestParams::new("acdm_nope"))
        .await;
    assert!(unknown.is_err(), "an unknown tool is a protocol error");
    client.cancel().await.unwrap();

    let metrics = send(app.addr, Req::get("/metrics")).await;
    assert_eq!(metrics.status, 200);
    assert!(metrics.body.contains(r#"acdm_mcp_tool_calls_total{tool="acdm_read_nextcloud_file",outcome="permission_denied"} 1"#), "{}", metrics.body);
    assert!(
        metrics
            .body
            .contains(r#"acdm_http_requests_total{surface="mcp",status="2xx"}"#)
    );
    app.stop().await;
}

#[tokio::test]
async fn without_the_service_token_the_client_cannot_even_initialize() {
    let app = spawn_app(Options::default()).await;
    let refused = ClientConfig::default()
        .serve(transport(app.addr, "not-the-token-0123456789abcdef0123"))
        .await;
    assert!(refused.is_err());
    let metrics = send(app.addr, Req::get("/metrics")).await.body;
    assert!(
        metrics.contains(r#"acdm_http_requests_total{surface="mcp",status="4xx"}"#),
        "{metrics}"
    );
    assert!(
        !metrics.contains("acdm_mcp_tool_calls_total{"),
        "no tool ran"
    );
    app.stop().await;
}

#[tokio::test]
async fn shutdown_is_not_held_by_an_open_mcp_session_stream() {
    // A grace period far longer than `stop`'s 10 s guard: if the open
    // stream held the drain, only the deadline would end it and `stop`
    // would fail; ending within the guard means the stream was closed.
    let app = spawn_app(Options {
        extra_env: vec![
            ("ACDM_MCP_SESSIONS", "true".to_owned()),
            ("ACDM_SHUTDOWN_GRACE_SECONDS", "300".to_owned()),
        ],
        ..Options::default()
    })
    .await;
    let client = ClientConfig::default()
        .serve(transport(app.addr, TOKEN))
        .await
        .unwrap();
    client.list_all_tools().await.unwrap();
    // The client holds its session's event stream open; shutdown must end it.
    app.stop().await;
    drop(client);
}

#[tokio::test]
async fn an_absolute_form_target_naming_a_foreign_host_is_refused_naming_the_setting() {
    let app = spawn_app(Options::default()).await;
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"}}})
    .to_string();
    let headers = [
        ("X-ACDM-Service-Auth", TOKEN),
        ("Accept", "application/json, text/event-stream"),
    ];
    // The helper sends `Host: 127.0.0.1:<port>`, an allowed host; RFC 9112
    // §3.2.2 makes the target's authority the host that counts.
    for target in ["http://evil.example/mcp", "http://evil.example:80/mcp/"] {
        let r = send(
            app.addr,
            Req::new("POST", target).headers(&headers).json(&initialize),
        )
        .await;
        assert_eq!(r.status, 403, "{target}: {}", r.body);
        let v = r.json();
        assert_eq!(v["code"], "permission_denied", "{target}");
        let message = v["message"].as_str().unwrap();
        assert!(message.contains("ACDM_MCP_ALLOWED_HOSTS"), "{message}");
        assert!(message.contains("evil.example"), "{message}");
    }
    let allowed = format!("http://127.0.0.1:{}/mcp", app.addr.port());
    let r = send(
        app.addr,
        Req::new("POST", &allowed)
            .headers(&headers)
            .json(&initialize),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    app.stop().await;
}

/// One `tools/call` over the socket with the service token (stateless,
/// JSON answers); returns the `result`.
async fn call_tool(
    addr: std::net::SocketAddr,
    name: &str,
    arguments: serde_json::Value,
) -> serde_json::Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": name, "arguments": arguments}})
    .to_string();
    let r = send(
        addr,
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

#[tokio::test]
async fn over_webdav_neither_tool_lists_or_reads_the_trash() {
    let Some(env) = NcEnv::start().await else {
        return;
    };
    // Agent alpha deletes a file: the journal keeps it in the trash.
    let (status, gone) = env
        .nc(
            ALPHA,
            "delete",
            json!({"rel_path": "docs/plan.md", "dry_run": false}),
        )
        .await;
    assert_eq!(status, 200, "{gone}");
    let event = gone["data"]["event_id"].as_str().unwrap().to_owned();
    let kept = env.trash_of("alpha", &event);
    let (kept_name, kept_content) = kept.iter().next().unwrap();
    assert_eq!(kept_content.as_slice(), b"alpha plan\nline two\n");
    let kept_path = format!("/Projects/.acdm-trash/alpha/{event}/{kept_name}");

    let mark = env.recorder().mark();
    let mut attempts = Vec::new();
    for project in [".acdm-trash", ".ACDM-TRASH", ".acdm-trash/alpha"] {
        attempts.push((
            "acdm_search_nextcloud",
            json!({"query": "plan", "project_name": project}),
        ));
        attempts.push((
            "acdm_read_nextcloud_file",
            json!({"path": kept_path, "project_name": project}),
        ));
    }
    for path in [
        kept_path.clone(),
        kept_path.replace(".acdm-trash", ".ACDM-TRASH"),
        kept_path.replace("/Projects/", "/Projects/Alpha/../"),
    ] {
        attempts.push((
            "acdm_read_nextcloud_file",
            json!({"path": path, "project_name": "Alpha"}),
        ));
    }
    for (tool, arguments) in attempts {
        let result = call_tool(env.app.addr, tool, arguments.clone()).await;
        assert_eq!(result["isError"], true, "{tool} {arguments}: {result}");
        let code = result["structuredContent"]["code"].as_str().unwrap();
        assert!(
            ["validation_error", "permission_denied"].contains(&code),
            "{tool} {arguments}: {result}"
        );
        assert!(
            !result.to_string().contains("line two"),
            "{tool} {arguments}: {result}"
        );
    }
    // Alpha's own search never shows the trash either (the fake unified
    // search answers with a trash path on purpose).
    let found = call_tool(
        env.app.addr,
        "acdm_search_nextcloud",
        json!({"query": "plan", "project_name": "Alpha"}),
    )
    .await;
    assert_eq!(found["isError"], false, "{found}");
    assert!(!found.to_string().contains(".acdm-trash"), "{found}");
    let sent: Vec<String> = env
        .recorder()
        .since(mark)
        .iter()
        .filter(|r| !r.is_search())
        .map(ToString::to_string)
        .collect();
    assert!(
        sent.iter()
            .all(|r| !r.to_lowercase().contains(".acdm-trash")),
        "a request reached the trash: {sent:#?}"
    );
    env.stop().await;
}
