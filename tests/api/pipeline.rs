//! No `/agent-tools` operation runs before the agent pipeline: every
//! operation of the three families, at its own method, under its plain
//! path, a percent-encoded spelling of it and an unknown name, is refused
//! for missing identity headers, and for an agent that manages no project,
//! before anything of the call is read. The pipeline is run by each
//! family's handler first (`pipeline::Behind::run`), not by a layer over
//! the routes: this holds every operation of the three tables to it.

use acdm_core::business::wire::BusinessOp;
use acdm_core::nc::NcOp;
use acdm_core::project::ProjectOp;

use crate::helpers::{Options, Req, TOKEN, spawn_app};

/// `(method, path)` of every operation, plus spellings the router also
/// matches: a percent-encoded operation name, an unknown one.
fn every_operation() -> Vec<(&'static str, String)> {
    let mut calls: Vec<(&'static str, String)> = NcOp::ALL
        .iter()
        .map(|op| (op.method(), format!("/{}", op.path())))
        .chain(
            BusinessOp::ALL
                .iter()
                .map(|op| (op.method(), format!("/{}", op.path()))),
        )
        .chain(
            ProjectOp::ALL
                .iter()
                .map(|op| (op.method(), format!("/{}", op.path()))),
        )
        .collect();
    calls.extend([
        ("POST", "/agent-tools/nc/%72ead".to_owned()),
        ("POST", "/agent-tools/nc/frobnicate".to_owned()),
        ("POST", "/agent-tools/business/%6cist_meetings".to_owned()),
        ("POST", "/agent-tools/business/frobnicate".to_owned()),
    ]);
    calls
}

#[tokio::test]
async fn every_agent_tools_route_runs_the_pipeline_before_the_operation() {
    let app = spawn_app(Options::default()).await;
    // Not valid for any operation: a call that got past the pipeline would
    // be refused for its body instead.
    let body = r#"{"not a field": true}"#;
    let no_identity: &[(&str, &str)] = &[("X-ACDM-Service-Auth", TOKEN)];
    let unprovisioned: &[(&str, &str)] = &[
        ("X-ACDM-Service-Auth", TOKEN),
        ("X-ACDM-User-Id", "u-1"),
        ("X-ACDM-Agent-Name", "project-nowhere"),
        ("X-ACDM-Thread-Id", "t-1"),
    ];
    let refusals = [
        (no_identity, 401, "missing_identity_headers"),
        (unprovisioned, 403, "scope_violation"),
    ];
    for (method, path) in every_operation() {
        for (headers, status, code) in refusals {
            let response = app
                .send(Req::new(method, &path).headers(headers).json(body))
                .await;
            assert_eq!(
                (response.status, response.json()["code"].as_str()),
                (status, Some(code)),
                "{method} {path}: {}",
                response.body
            );
        }
    }
    app.stop().await;
}

/// The router decodes an operation's name before the handler acts on it,
/// so `nc/%77rite` writes: it is counted on the writes' budget like
/// `nc/write`, not on the calls' budget alone.
#[tokio::test]
async fn a_percent_encoded_write_is_counted_as_a_write() {
    let app = spawn_app(Options {
        extra_env: vec![
            // One write, then one every 10 s: no time a slow machine takes
            // refills the bucket within the test.
            ("ACDM_BFF_WRITE_RATE_PER_MINUTE", "6".to_owned()),
            ("ACDM_BFF_WRITE_RATE_BURST", "1".to_owned()),
        ],
        ..Options::default()
    })
    .await;
    let agent = crate::admin::alpha_with_writes(&app, 1).await;
    for path in [
        "/agent-tools/nc/%77rite",
        "/agent-tools/nc/wr%69te",
        "/agent-tools/business/%63reate_meeting",
    ] {
        let refused = app
            .send(
                Req::new("POST", path)
                    .headers(&agent)
                    .json(r#"{"rel_path":"notes/again.md","content":"x"}"#),
            )
            .await;
        assert_eq!(refused.status, 429, "{path}: {}", refused.body);
        let body = refused.json();
        assert_eq!(body["code"], "rate_limited", "{path}");
        assert!(
            body["message"].as_str().unwrap().contains("writes"),
            "{path}: {body}"
        );
    }
    // A read still passes: only the writes' budget is spent.
    let read = app
        .send(
            Req::new("POST", "/agent-tools/nc/%72ead")
                .headers(&agent)
                .json(r#"{"rel_path":"notes/0.md"}"#),
        )
        .await;
    assert_eq!(read.status, 200, "{}", read.body);
    app.stop().await;
}
