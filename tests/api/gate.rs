//! The service gate cannot be bypassed: every spelling of a gated path,
//! with every wrong token, is refused with the exact body before any
//! handler runs; only the exact probe paths are open.
//!
//! Decision (documented in docs/architecture.md): the gate is deny-by-default
//! on the raw path. `/MCP`, `/%6dcp`, `//mcp` are *refused* without the
//! token, and *not routed* (404) with it — routing is exact and
//! case-sensitive, and nothing decodes or normalises a path first.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use acdm_backend::app::with_global_layers;
use acdm_server::gate::REFUSAL_BODY;
use axum::Router;
use axum::body::Body;
use axum::http::Request;
use axum::routing::any;

use crate::helpers::{Options, Req, TOKEN, app_state, auth, call_router, send, spawn_app};

/// Every path of the bypass table.
const PATHS: &[&str] = &[
    "/mcp",
    "/mcp/",
    "/mcp/x",
    "/mcpx",
    "//mcp",
    "/MCP",
    "/Mcp/health",
    "/%6dcp",
    "/%6Dcp/",
    "/mcp%2F",
    "/mcp/health/../x",
    "/mcp/health/..%2Fx",
    "/mcp/health%2F..%2Fx",
    "/mcp/health/",
    "/mcp/health/x",
    "/mcp/./health",
    "/mcp//health",
    "/agent-tools",
    "/agent-tools/",
    "/agent-tools/nc/read",
    "/agent-tools/nc/../../admin",
    "/agent-tools%2Fnc%2Fread",
    "/agent-tools%2F..%2Fmcp",
    "/agent-toolsx",
    "/agent-tools;x/nc/read",
    "/AGENT-TOOLS/nc/read",
    "/healthz/../mcp",
    "/readyz/../agent-tools/nc/read",
    "/",
    "/unknown",
    "/mcp?x=/mcp/health",
];

/// Headers that must not pass.
fn wrong_tokens() -> Vec<(&'static str, Vec<(&'static str, String)>)> {
    vec![
        ("missing", vec![]),
        ("empty", vec![("X-ACDM-Service-Auth", String::new())]),
        (
            "wrong case",
            vec![("X-ACDM-Service-Auth", TOKEN.to_uppercase())],
        ),
        (
            "wrong, same length",
            vec![(
                "X-ACDM-Service-Auth",
                format!("{}x", &TOKEN[..TOKEN.len() - 1]),
            )],
        ),
        (
            "a prefix",
            vec![("X-ACDM-Service-Auth", TOKEN[..TOKEN.len() - 1].to_owned())],
        ),
        ("longer", vec![("X-ACDM-Service-Auth", format!("{TOKEN}0"))]),
        (
            "twice",
            vec![
                ("X-ACDM-Service-Auth", TOKEN.to_owned()),
                ("X-ACDM-Service-Auth", TOKEN.to_owned()),
            ],
        ),
        (
            "in another header",
            vec![("Authorization", format!("Bearer {TOKEN}"))],
        ),
        (
            "the header name misspelled",
            vec![("X-ACDM-Service-Authorization", TOKEN.to_owned())],
        ),
    ]
}

/// A router whose every route under `/mcp` and `/agent-tools` counts the
/// requests that reach it, under the real global layers.
async fn recording_router(
    service_token: Option<&'static str>,
) -> (Router, Arc<AtomicUsize>, tempfile::TempDir) {
    let (state, dir) = app_state(&Options {
        service_token,
        ..Options::default()
    })
    .await;
    let reached = Arc::new(AtomicUsize::new(0));
    let recorder = {
        let reached = reached.clone();
        any(move || {
            let reached = reached.clone();
            async move {
                reached.fetch_add(1, Ordering::SeqCst);
                "reached"
            }
        })
    };
    let adapters = Router::new()
        .nest_service("/mcp", recorder.clone())
        .route("/agent-tools", recorder.clone())
        .route("/agent-tools/{*rest}", recorder);
    (with_global_layers(&state, adapters), reached, dir)
}

async fn call(
    router: &Router,
    method: &str,
    path: &str,
    headers: &[(&str, String)],
) -> (u16, String) {
    let mut builder = Request::builder().method(method).uri(path);
    for (name, value) in headers {
        builder = builder.header(*name, value.as_str());
    }
    let (status, _, body) = call_router(router, builder.body(Body::empty()).unwrap()).await;
    (status, body)
}

#[tokio::test]
async fn no_path_spelling_or_wrong_token_reaches_a_handler() {
    let (router, reached, _dir) = recording_router(Some(TOKEN)).await;
    let mut refused = 0;
    for path in PATHS {
        for method in ["GET", "POST", "DELETE"] {
            for (variant, headers) in wrong_tokens() {
                let (status, body) = call(&router, method, path, &headers).await;
                assert_eq!(
                    (status, body.as_str()),
                    (401, REFUSAL_BODY),
                    "{method} {path} with {variant} token"
                );
                refused += 1;
            }
        }
    }
    assert_eq!(
        reached.load(Ordering::SeqCst),
        0,
        "no refused request reached a handler"
    );
    eprintln!("{refused} requests refused, none reached a handler");
}

#[tokio::test]
async fn the_right_token_reaches_routing_and_only_exact_routes_answer() {
    let (router, reached, _dir) = recording_router(Some(TOKEN)).await;
    let headers = vec![("X-ACDM-Service-Auth", TOKEN.to_owned())];
    let mut answered = 0;
    for path in PATHS {
        let (status, body) = call(&router, "POST", path, &headers).await;
        assert_ne!(status, 401, "{path}: {body}");
        if status == 200 {
            assert_eq!(body, "reached", "{path}");
            answered += 1;
        } else {
            assert_eq!(status, 404, "{path}: not routed, not refused");
            let v: serde_json::Value = serde_json::from_str(&body).unwrap();
            assert_eq!(v["code"], "not_found", "{path}");
        }
    }
    assert_eq!(reached.load(Ordering::SeqCst), answered);
    // The decision for look-alikes: not routed.
    for path in [
        "/MCP",
        "/%6dcp",
        "//mcp",
        "/mcpx",
        "/agent-toolsx",
        "/agent-tools%2Fnc%2Fread",
    ] {
        assert_eq!(call(&router, "POST", path, &headers).await.0, 404, "{path}");
    }
    for path in [
        "/mcp",
        "/mcp/",
        "/mcp/x",
        "/agent-tools",
        "/agent-tools/nc/read",
    ] {
        assert_eq!(call(&router, "POST", path, &headers).await.0, 200, "{path}");
    }
}

#[tokio::test]
async fn without_a_configured_token_everything_gated_is_refused() {
    let (router, reached, _dir) = recording_router(None).await;
    for path in PATHS {
        for headers in [
            vec![],
            vec![("X-ACDM-Service-Auth", String::new())],
            vec![("X-ACDM-Service-Auth", TOKEN.to_owned())],
        ] {
            let (status, body) = call(&router, "POST", path, &headers).await;
            assert_eq!(
                (status, body.as_str()),
                (401, REFUSAL_BODY),
                "{path} {headers:?}"
            );
        }
    }
    assert_eq!(reached.load(Ordering::SeqCst), 0);
    for path in ["/healthz", "/mcp/health"] {
        assert_eq!(
            call(&router, "GET", path, &[]).await.0,
            200,
            "{path} stays open"
        );
    }
}

#[tokio::test]
async fn a_browser_origin_is_refused_even_with_the_token() {
    let (router, reached, _dir) = recording_router(Some(TOKEN)).await;
    let headers = vec![
        ("X-ACDM-Service-Auth", TOKEN.to_owned()),
        ("Origin", "https://evil.example".to_owned()),
    ];
    for path in ["/mcp", "/agent-tools/nc/read", "/admin/projects"] {
        let (status, body) = call(&router, "POST", path, &headers).await;
        assert_eq!(status, 403, "{path}");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["code"], "permission_denied");
    }
    assert_eq!(reached.load(Ordering::SeqCst), 0);
    let (status, _) = call(&router, "GET", "/mcp/health", &headers).await;
    assert_eq!(status, 200, "probes stay open");
}

#[tokio::test]
async fn over_a_real_socket_the_table_holds_byte_for_byte() {
    let app = spawn_app(Options::default()).await;
    for path in PATHS {
        let refused = send(app.addr, Req::new("POST", path)).await;
        assert_eq!(
            (refused.status, refused.body.as_str()),
            (401, REFUSAL_BODY),
            "{path}"
        );
        assert_eq!(refused.header("content-type"), Some("application/json"));
        let wrong = send(
            app.addr,
            Req::new("POST", path).headers(&[("X-ACDM-Service-Auth", "nope")]),
        )
        .await;
        assert_eq!(wrong.status, 401, "{path}");
        // Past the gate (a BFF path may still answer 401 itself, with a
        // ToolResponse naming the missing identity headers).
        let admitted = send(app.addr, Req::new("POST", path).headers(&auth())).await;
        assert_ne!(admitted.body.as_str(), REFUSAL_BODY, "{path}");
    }
    let health = send(app.addr, Req::get("/mcp/health")).await;
    assert_eq!(health.status, 200);
    let token_in_query = send(app.addr, Req::new("POST", &format!("/mcp?token={TOKEN}"))).await;
    assert_eq!(
        token_in_query.status, 401,
        "the token is only read from its header"
    );
    app.stop().await;
}
