//! The transport rules: where the endpoint answers, which hosts it
//! accepts, stateless by default, sessions on request, and `/mcp/health`.

use std::sync::Arc;

use acdm_mcp::{McpMetrics, McpSettings};
use acdm_sources::gitlab::{GitLabConfig, GitLabWiki};
use acdm_sources::http::{HttpClient, HttpSettings};
use acdm_sources::{GitRef, Sources, Unconfigured};
use axum::body::Body;
use axum::http::Request;
use serde_json::{Value, json};

use crate::harness::{Mcp, local_sources, rpc_request, settings};

fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}})
}

#[tokio::test]
async fn mcp_and_mcp_slash_both_answer_without_a_redirect() {
    let mcp = Mcp::local();
    for path in ["/mcp", "/mcp/"] {
        let (status, headers, body) = mcp
            .http(rpc_request(path, "localhost", &initialize()))
            .await;
        assert_eq!(status, 200, "{path}: {body}");
        let v: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["result"]["serverInfo"]["name"], "acdm-knowledge");
        assert!(
            v["result"]["instructions"]
                .as_str()
                .unwrap()
                .contains("Never guess")
        );
        assert!(
            headers.iter().all(|(k, _)| k != "mcp-session-id"),
            "stateless: no session"
        );
        assert!(
            headers
                .iter()
                .any(|(k, v)| k == "content-type" && v.starts_with("application/json")),
            "{headers:?}"
        );
    }
    for path in ["/mcp/mcp", "/mcp/x", "/mcp//"] {
        let (status, _, _) = mcp
            .http(rpc_request(path, "localhost", &initialize()))
            .await;
        assert_eq!(status, 404, "{path}: only /mcp and /mcp/ serve MCP");
    }
}

#[tokio::test]
async fn only_the_configured_hosts_are_accepted() {
    let mcp = Mcp::local();
    for host in [
        "localhost",
        "127.0.0.1:8002",
        "acdm-backend",
        "acdm-backend:8002",
    ] {
        let (status, _, body) = mcp.http(rpc_request("/mcp", host, &initialize())).await;
        assert_eq!(status, 200, "{host}: {body}");
    }
    for host in [
        "evil.example",
        "evil.example:8002",
        "acdm-backend.evil.example",
        "localhost.evil.example",
    ] {
        let (status, _, _) = mcp.http(rpc_request("/mcp", host, &initialize())).await;
        assert_eq!(status, 403, "{host}");
    }
}

#[tokio::test]
async fn an_absolute_form_target_is_checked_like_the_host() {
    let mcp = Mcp::local();
    let with_target = |target: &str, host: &str| {
        let mut request = rpc_request("/mcp", host, &initialize());
        *request.uri_mut() = target.parse().unwrap();
        request
    };
    for (target, host) in [
        ("http://evil.example/mcp", "127.0.0.1"),
        ("http://evil.example:8002/mcp", "localhost:8002"),
        ("http://evil.example/mcp/", "acdm-backend"),
        ("http://localhost.evil.example/mcp", "localhost"),
        // Both must be allowed: a foreign Host beside an allowed target is
        // as suspicious as the reverse.
        ("http://localhost/mcp", "evil.example"),
    ] {
        let (status, _, body) = mcp.http(with_target(target, host)).await;
        assert_eq!(status, 403, "{target} with Host {host}: {body}");
    }
    for (target, host) in [
        ("http://localhost:8002/mcp", "localhost:8002"),
        ("http://acdm-backend/mcp/", "acdm-backend"),
        ("http://127.0.0.1:8002/mcp", "127.0.0.1:8002"),
    ] {
        let (status, _, body) = mcp.http(with_target(target, host)).await;
        assert_eq!(status, 200, "{target} with Host {host}: {body}");
    }
}

#[tokio::test]
async fn a_host_refusal_is_a_json_envelope_naming_the_setting() {
    let mcp = Mcp::local();
    for host in ["evil.example", "evil.example:8002"] {
        let (status, headers, body) = mcp.http(rpc_request("/mcp", host, &initialize())).await;
        assert_eq!(status, 403, "{host}");
        assert!(
            headers
                .iter()
                .any(|(k, v)| k == "content-type" && v.starts_with("application/json")),
            "{headers:?}"
        );
        let v: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
        assert_eq!(v["success"], false);
        assert_eq!(v["code"], "permission_denied");
        let message = v["message"].as_str().unwrap();
        assert!(message.contains("ACDM_MCP_ALLOWED_HOSTS"), "{message}");
        assert!(message.contains("evil.example"), "{message}");
        assert!(
            !message.contains("acdm-backend"),
            "the allowed hosts are not listed to a stranger: {message}"
        );
        assert!(
            v["suggested_action"]
                .as_str()
                .unwrap()
                .contains("ACDM_MCP_ALLOWED_HOSTS")
        );
    }
    let mut no_host = rpc_request("/mcp", "localhost", &initialize());
    no_host.headers_mut().remove("host");
    let (status, _, body) = mcp.http(no_host).await;
    assert_eq!(status, 403, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
    assert_eq!(v["code"], "permission_denied");
    let message = v["message"].as_str().unwrap();
    assert!(message.contains("no `Host`"), "{message}");
}

#[tokio::test]
async fn an_empty_host_list_means_loopback_only_not_any_host() {
    let dir = tempfile::tempdir().unwrap();
    let mut settings = settings();
    settings.allowed_hosts.clear();
    let mcp = Mcp::with_router(acdm_mcp::router(
        local_sources(dir.path()),
        settings,
        McpMetrics::unregistered(),
    ));
    let (status, _, body) = mcp
        .http(rpc_request("/mcp", "127.0.0.1:8002", &initialize()))
        .await;
    assert_eq!(status, 200, "{body}");
    for host in ["acdm-backend", "evil.example"] {
        let (status, _, _) = mcp.http(rpc_request("/mcp", host, &initialize())).await;
        assert_eq!(status, 403, "{host}");
    }
}

#[tokio::test]
async fn stateless_mode_needs_no_handshake_and_refuses_get() {
    let mcp = Mcp::local();
    let list = mcp.rpc("tools/list", json!({})).await;
    assert_eq!(
        list["result"]["tools"].as_array().unwrap().len(),
        4,
        "no initialize needed"
    );
    let get = Request::builder()
        .method("GET")
        .uri("/mcp")
        .header("host", "localhost")
        .header("accept", "text/event-stream")
        .body(Body::empty())
        .unwrap();
    let (status, _, _) = mcp.http(get).await;
    assert_eq!(status, 405);
}

#[tokio::test]
async fn sessions_can_be_turned_on() {
    let dir = tempfile::tempdir().unwrap();
    crate::harness::fixture(&dir.path().join("wiki"), &dir.path().join("files"));
    let router = acdm_mcp::router(
        local_sources(dir.path()),
        McpSettings {
            knowledge: None,
            sessions: true,
            ..settings()
        },
        McpMetrics::unregistered(),
    );
    let response =
        tower::ServiceExt::oneshot(router, rpc_request("/mcp", "localhost", &initialize()))
            .await
            .unwrap();
    assert_eq!(response.status(), 200);
    assert!(response.headers().contains_key("mcp-session-id"));
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
}

async fn health_of(sources: Sources) -> Value {
    let router = acdm_mcp::router(sources, settings(), McpMetrics::unregistered());
    let request = Request::builder()
        .uri("/mcp/health")
        .header("host", "localhost")
        .body(Body::empty())
        .unwrap();
    let response = tower::ServiceExt::oneshot(router, request).await.unwrap();
    assert_eq!(response.status(), 200);
    let body = axum::body::to_bytes(response.into_body(), 1 << 16)
        .await
        .unwrap();
    serde_json::from_slice(&body).unwrap()
}

#[tokio::test]
async fn health_reports_each_source() {
    let dir = tempfile::tempdir().unwrap();
    let local = health_of(local_sources(dir.path())).await;
    assert_eq!(local["status"], "ok");
    assert_eq!(
        local["sources"]["wiki"],
        json!({"status": "ok", "kind": "local"})
    );

    let mut sources = local_sources(dir.path());
    sources.wiki = Arc::new(Unconfigured::new("GITLAB_WIKI_BASE_URL"));
    let missing = health_of(sources.clone()).await;
    assert_eq!(missing["status"], "degraded");
    assert_eq!(missing["sources"]["wiki"]["status"], "not_configured");
    assert!(
        missing["sources"]["wiki"]["reason"]
            .as_str()
            .unwrap()
            .contains("GITLAB_WIKI_BASE_URL")
    );

    // GitLab configured without its token: an error that names the setting,
    // found without any request.
    sources.wiki = Arc::new(
        GitLabWiki::new(
            GitLabConfig {
                base_url: url::Url::parse("http://127.0.0.1:9/").unwrap(),
                project: "42".to_owned(),
                token: None,
                default_ref: GitRef::parse("main").unwrap(),
            },
            HttpClient::new(HttpSettings::default()).unwrap(),
        )
        .unwrap(),
    );
    let no_pat = health_of(sources).await;
    assert_eq!(no_pat["sources"]["wiki"]["status"], "error");
    assert_eq!(no_pat["sources"]["wiki"]["kind"], "gitlab");
    assert!(
        no_pat["sources"]["wiki"]["reason"]
            .as_str()
            .unwrap()
            .contains("GITLAB_WIKI_PAT is not set")
    );
}
