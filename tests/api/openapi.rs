//! `/openapi.json`: served without a token, pinned by a committed
//! snapshot (`docs/openapi.json`), and true to the router: every
//! documented operation is routed, and each answers with a status the
//! document lists for it.

use std::path::PathBuf;

use serde_json::Value;

use crate::helpers::{ADMIN_TOKEN, BEARER, Options, Req, TOKEN, spawn_app};

fn snapshot_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/openapi.json")
}

#[tokio::test]
async fn the_openapi_document_is_open_and_matches_the_committed_snapshot() {
    let app = spawn_app(Options::default()).await;
    let response = app.send(Req::get("/openapi.json")).await;
    assert_eq!(response.status, 200, "{}", response.body);
    assert!(
        response
            .header("content-type")
            .is_some_and(|v| v.starts_with("application/json"))
    );
    let doc = response.json();
    assert_eq!(doc["openapi"], "3.1.0");
    acdm_test_support::snapshot::assert_json(&snapshot_path(), &doc);
    // No token of any kind opens anything more, and the document names
    // none of them.
    assert!(!response.body.contains(TOKEN) && !response.body.contains(ADMIN_TOKEN));
    app.stop().await;
}

/// A value for a path parameter that parses (so the request reaches the
/// handler, which may still find nothing).
fn sample(name: &str) -> &'static str {
    match name {
        "slug" => "alpha",
        "user_id" => "u-alice",
        "agent_name" => "project-alpha",
        "seq" => "1",
        _ => "00000000-0000-4000-8000-000000000000",
    }
}

#[tokio::test]
async fn every_documented_operation_is_routed_and_answers_a_documented_status() {
    let app = spawn_app(Options::default()).await;
    let doc = app.send(Req::get("/openapi.json")).await.json();
    let headers = [
        ("X-ACDM-Service-Auth", TOKEN),
        ("X-ACDM-User-Id", "u-alice"),
        ("X-ACDM-Agent-Name", "project-alpha"),
        ("X-ACDM-Thread-Id", "t-1"),
        ("Authorization", BEARER),
    ];
    let mut checked = 0;
    for (template, item) in doc["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            let path: String = template
                .split('/')
                .map(
                    |segment| match segment.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
                        Some(name) => sample(name).to_owned(),
                        None => segment.to_owned(),
                    },
                )
                .collect::<Vec<_>>()
                .join("/");
            let method = method.to_ascii_uppercase();
            let mut request = Req::new(&method, &path).headers(&headers);
            if operation.get("requestBody").is_some() {
                request = request.json("{}");
            }
            let response = app.send(request).await;
            let body = response.json();
            let documented = &operation["responses"];
            assert!(
                documented.get(response.status.to_string()).is_some(),
                "{method} {path} answered {} which its operation does not document: {body}",
                response.status
            );
            let message = body["message"].as_str().unwrap_or_default();
            assert!(
                !message.starts_with("no endpoint") && response.status != 405,
                "{method} {path} is documented but not routed: {body}"
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 24 + acdm_bff::admin::AdminOp::ALL.len());
    app.stop().await;
}

#[tokio::test]
async fn the_document_names_every_status_with_its_codes_and_the_security_schemes() {
    let app = spawn_app(Options::default()).await;
    let doc: Value = app.send(Req::get("/openapi.json")).await.json();
    let schemes = doc["components"]["securitySchemes"].as_object().unwrap();
    for name in [
        "serviceToken",
        "userId",
        "agentName",
        "threadId",
        "adminToken",
    ] {
        assert!(schemes.contains_key(name), "{name}");
    }
    let write = &doc["paths"]["/agent-tools/nc/write"]["post"];
    assert_eq!(write["responses"]["403"]["content"]["application/json"]["schema"]["properties"]["code"]["enum"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| *c == "kill_switch_off")
        .count(), 1);
    assert!(write["responses"]["401"]["content"]["application/json"]["schema"]["oneOf"].is_array());
    let data =
        &write["responses"]["200"]["content"]["application/json"]["schema"]["properties"]["data"];
    assert_eq!(data["$ref"], "#/components/schemas/WriteData");
    app.stop().await;
}

/// Found by schemathesis: a project operation called with another method
/// answered 405 without `Allow` (RFC 9110 §15.5.6 requires it).
#[tokio::test]
async fn a_wrong_method_is_405_with_the_allowed_method_named() {
    let app = spawn_app(Options::default()).await;
    let admin = [("Authorization", BEARER)];
    for (path, body) in [
        ("/admin/projects", r#"{"slug":"alpha","name":"Alpha"}"#),
        (
            "/admin/projects/alpha/members",
            r#"{"user_id":"u-alice","role":"owner"}"#,
        ),
        (
            "/admin/agents",
            r#"{"agent_name":"project-alpha","project":"alpha"}"#,
        ),
    ] {
        let response = app
            .send(Req::new("POST", path).headers(&admin).json(body))
            .await;
        assert_eq!(response.status, 200, "{path}: {}", response.body);
    }
    let headers = [
        ("X-ACDM-Service-Auth", TOKEN),
        ("X-ACDM-User-Id", "u-alice"),
        ("X-ACDM-Agent-Name", "project-alpha"),
        ("X-ACDM-Thread-Id", "t-1"),
    ];
    for (method, path, allowed) in [
        ("TRACE", "/agent-tools/project/overview", "GET"),
        ("POST", "/agent-tools/project/sow", "GET"),
        ("GET", "/agent-tools/project/milestone/advance", "POST"),
    ] {
        let response = app.send(Req::new(method, path).headers(&headers)).await;
        assert_eq!(response.status, 405, "{method} {path}: {}", response.body);
        assert_eq!(response.header("allow"), Some(allowed), "{method} {path}");
        assert_eq!(response.json()["code"], "method_not_allowed");
    }
    app.stop().await;
}
