//! The global layer (`http::FrontLayer`), seen from a route under it: the
//! request id taken or made and echoed, secret headers marked sensitive
//! before anything else sees the request, a panicking handler answered
//! with an `internal_error` envelope, and `Connection: close` once the
//! server drains.

use acdm_backend::app::{AppState, with_global_layers};
use acdm_core::RequestId;
use axum::Router;
use axum::body::Body;
use axum::extract::Request as Incoming;
use axum::http::{HeaderMap, Request};
use axum::routing::post;

use crate::helpers::{Options, TOKEN, app_state, call_router};

/// A route that panics, and one that says which of its headers are
/// marked sensitive and which request id its extensions hold, under the
/// global layer of a server with the service token `TOKEN`.
async fn router() -> (Router, AppState, tempfile::TempDir) {
    let (state, dir) = app_state(&Options {
        service_token: Some(TOKEN),
        ..Options::default()
    })
    .await;
    let adapters = Router::new()
        .route(
            "/agent-tools/panics",
            post(|| async {
                if std::hint::black_box(true) {
                    panic!("a handler's bug");
                }
                "unreachable"
            }),
        )
        .route(
            "/agent-tools/echo",
            post(|req: Incoming| async move {
                let sensitive: Vec<String> = req
                    .headers()
                    .iter()
                    .filter(|(_, v)| v.is_sensitive())
                    .map(|(n, _)| n.as_str().to_owned())
                    .collect();
                let id = req
                    .extensions()
                    .get::<RequestId>()
                    .map_or("", RequestId::as_str);
                format!("{id} {}", sensitive.join(","))
            }),
        );
    (with_global_layers(&state, adapters), state, dir)
}

async fn post_to(
    router: &Router,
    path: &str,
    headers: &[(&str, &str)],
) -> (u16, HeaderMap, String) {
    let mut builder = Request::builder()
        .method("POST")
        .uri(path)
        .header("X-ACDM-Service-Auth", TOKEN);
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    call_router(router, builder.body(Body::empty()).unwrap()).await
}

#[tokio::test]
async fn a_panicking_handler_is_answered_with_an_internal_error_under_its_request_id() {
    let (router, _state, _dir) = router().await;
    let (status, headers, body) =
        post_to(&router, "/agent-tools/panics", &[("X-Request-Id", "lb:42")]).await;
    assert_eq!(status, 500, "{body}");
    let envelope: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(envelope["code"], "internal_error", "{body}");
    assert!(!body.contains("a handler's bug"), "{body}");
    assert_eq!(headers["x-request-id"], "lb:42");
    // The server still answers after the panic.
    let (status, _, _) = post_to(&router, "/agent-tools/echo", &[]).await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn a_panicked_request_is_counted_like_any_other_answer() {
    let (router, state, _dir) = router().await;
    post_to(&router, "/agent-tools/panics", &[]).await;
    post_to(&router, "/agent-tools/panics", &[]).await;
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &state.metrics).unwrap();
    let line = |prefix: &str| {
        text.lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix} in:\n{text}"))
            .to_owned()
    };
    assert_eq!(
        line(r#"acdm_http_requests_total{surface="agent_tools",status="5xx"}"#),
        r#"acdm_http_requests_total{surface="agent_tools",status="5xx"} 2"#
    );
    assert!(
        line(r#"acdm_http_request_duration_seconds_count{surface="agent_tools"}"#).ends_with(" 2"),
        "{text}"
    );
    assert_eq!(
        line(r#"acdm_bff_operations_total{op="unknown",outcome="panic"}"#),
        r#"acdm_bff_operations_total{op="unknown",outcome="panic"} 2"#
    );
}

#[tokio::test]
async fn the_request_id_is_the_callers_when_well_formed_and_a_fresh_one_otherwise() {
    let (router, _state, _dir) = router().await;
    let (_, headers, body) = post_to(
        &router,
        "/agent-tools/echo",
        &[("X-Request-Id", "lb:1234.abc_def")],
    )
    .await;
    assert_eq!(headers["x-request-id"], "lb:1234.abc_def");
    assert!(body.starts_with("lb:1234.abc_def "), "{body}");
    for forged in ["a b", "", "-starts-with-a-dash"] {
        let (_, headers, body) =
            post_to(&router, "/agent-tools/echo", &[("X-Request-Id", forged)]).await;
        let echoed = headers["x-request-id"].to_str().unwrap();
        assert_ne!(echoed, forged);
        assert!(RequestId::parse(echoed).is_ok(), "{echoed}");
        assert!(
            body.starts_with(&format!("{echoed} ")),
            "the handler sees the id the caller gets back: {body}"
        );
    }
    let (_, first, _) = post_to(&router, "/agent-tools/echo", &[]).await;
    let (_, second, _) = post_to(&router, "/agent-tools/echo", &[]).await;
    assert_ne!(first["x-request-id"], second["x-request-id"]);
}

#[tokio::test]
async fn secret_headers_reach_handlers_marked_sensitive_and_others_do_not() {
    let (router, _state, _dir) = router().await;
    let (status, _, body) = post_to(
        &router,
        "/agent-tools/echo",
        &[
            ("Authorization", "Bearer x"),
            ("Cookie", "a=b"),
            ("Proxy-Authorization", "Basic eA=="),
            ("X-ACDM-User-Id", "u-1"),
        ],
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (_, sensitive) = body.split_once(' ').unwrap();
    let mut sensitive: Vec<&str> = sensitive.split(',').collect();
    sensitive.sort_unstable();
    assert_eq!(
        sensitive,
        [
            "authorization",
            "cookie",
            "proxy-authorization",
            "x-acdm-service-auth"
        ]
    );
}

#[tokio::test]
async fn once_the_server_drains_every_answer_asks_its_client_to_close() {
    let (router, state, _dir) = router().await;
    let (_, headers, _) = post_to(&router, "/agent-tools/echo", &[]).await;
    assert!(headers.get("connection").is_none());
    state.readiness.set_draining();
    for path in ["/agent-tools/echo", "/agent-tools/panics", "/no-such-route"] {
        let (_, headers, _) = post_to(&router, path, &[]).await;
        assert_eq!(headers["connection"], "close", "{path}");
    }
}
