//! Probes: `/healthz`, `/readyz` and `/mcp/health` answer without a token;
//! readiness says exactly why it is not ready.

use crate::helpers::{Options, Req, spawn_app};

#[tokio::test]
async fn without_a_token_the_service_is_live_but_not_ready_and_says_why() {
    let app = spawn_app(Options {
        service_token: None,
        ..Options::default()
    })
    .await;
    let live = app.send(Req::get("/healthz")).await;
    assert_eq!(
        (live.status, live.json()["status"].as_str()),
        (200, Some("ok"))
    );
    let ready = app.send(Req::get("/readyz")).await;
    assert_eq!(ready.status, 503);
    let body = ready.json();
    assert_eq!(body["status"], "not_ready");
    assert_eq!(body["checks"]["database"]["status"], "ok");
    assert_eq!(body["checks"]["migrations"]["status"], "ok");
    assert_eq!(body["checks"]["service_token"]["status"], "error");
    assert!(
        body["checks"]["service_token"]["reason"]
            .as_str()
            .unwrap()
            .contains("ACDM_MCP_SERVICE_TOKEN is not set")
    );
    let mcp = app.send(Req::get("/mcp/health")).await;
    assert_eq!(mcp.status, 200);
    assert_eq!(mcp.json()["status"], "ok");
    app.stop().await;
}

#[tokio::test]
async fn with_a_token_and_a_migrated_database_the_service_is_ready() {
    let app = spawn_app(Options::default()).await;
    let ready = app.send(Req::get("/readyz")).await;
    assert_eq!(ready.status, 200, "{}", ready.body);
    assert_eq!(ready.json()["status"], "ready");
    assert!(ready.header("x-request-id").is_some());
    app.stop().await;
}

#[tokio::test]
async fn pending_migrations_make_the_service_not_ready() {
    let app = spawn_app(Options {
        extra_env: vec![("ACDM_AUTO_MIGRATE", "false".to_owned())],
        ..Options::default()
    })
    .await;
    let ready = app.send(Req::get("/readyz")).await;
    assert_eq!(ready.status, 503);
    let reason = ready.json()["checks"]["migrations"]["reason"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        reason.contains("pending [1, 2, 3, 4, 5, 6, 7, 8]")
            && reason.contains("acdm-backend migrate"),
        "{reason}"
    );
    app.stop().await;
}

#[tokio::test]
async fn a_caller_request_id_is_kept_when_well_formed_and_replaced_otherwise() {
    let app = spawn_app(Options::default()).await;
    let kept = app
        .send(Req::get("/healthz").headers(&[("X-Request-Id", "lb-1234.abc")]))
        .await;
    assert_eq!(kept.header("x-request-id"), Some("lb-1234.abc"));
    let replaced = app
        .send(Req::get("/healthz").headers(&[("X-Request-Id", "a b\tc")]))
        .await;
    let id = replaced.header("x-request-id").unwrap();
    assert_ne!(id, "a b\tc");
    assert_eq!(id.len(), 36, "a fresh UUID: {id}");
    app.stop().await;
}
