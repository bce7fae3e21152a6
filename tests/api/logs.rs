//! No secret reaches a log line, even at TRACE level.

use acdm_server::telemetry::JsonLines;
use acdm_test_support::logs::LogCapture;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::SubscriberExt as _;

use crate::helpers::{ADMIN_TOKEN, BEARER, Options, Req, TOKEN, spawn_app};

#[tokio::test(flavor = "current_thread")]
async fn tokens_never_appear_in_logs_at_trace_level() {
    let capture = LogCapture::default();
    // The service's own JSON lines (what `serve` writes), everything on,
    // and the pretty lines too, which carry every enclosing span's fields.
    let subscriber = tracing_subscriber::registry()
        .with(EnvFilter::new("trace"))
        .with(JsonLines::new(capture.clone()))
        .with(
            tracing_subscriber::fmt::layer()
                .with_ansi(false)
                .with_writer(capture.clone()),
        );
    let _guard = tracing::subscriber::set_default(subscriber);

    let app = spawn_app(Options::default()).await;
    let near_miss = format!("{}X", &TOKEN[..TOKEN.len() - 1]);
    let service = [("X-ACDM-Service-Auth", TOKEN)];
    let wrong = [("X-ACDM-Service-Auth", near_miss.as_str())];
    let admin = [("Authorization", BEARER)];
    app.send(Req::new("POST", "/mcp").headers(&service)).await;
    app.send(Req::new("POST", "/agent-tools/nc/read").headers(&wrong))
        .await;
    app.send(
        Req::new("POST", "/admin/projects")
            .headers(&admin)
            .json(r#"{"slug":"alpha","name":"Alpha"}"#),
    )
    .await;
    app.send(Req::get("/admin/projects").headers(&service))
        .await;
    // A BFF write through the whole pipeline, its event, and the switch.
    app.send(
        Req::new("POST", "/admin/agents")
            .headers(&admin)
            .json(r#"{"agent_name":"project-alpha","project":"alpha"}"#),
    )
    .await;
    app.send(
        Req::new("POST", "/admin/projects/alpha/members")
            .headers(&admin)
            .json(r#"{"user_id":"u-1","role":"member"}"#),
    )
    .await;
    let agent = [
        ("X-ACDM-Service-Auth", TOKEN),
        ("X-ACDM-User-Id", "u-1"),
        ("X-ACDM-Agent-Name", "project-alpha"),
        ("X-ACDM-Thread-Id", "t-1"),
    ];
    let written = app
        .send(
            Req::new("POST", "/agent-tools/nc/write")
                .headers(&agent)
                .json(r#"{"rel_path":"notes/a.md","content":"hello"}"#),
        )
        .await;
    assert_eq!(written.status, 200, "{}", written.body);
    app.send(
        Req::new("PUT", "/admin/kill-switch")
            .headers(&admin)
            .json(r#"{"nc_writes_enabled":false,"reason":"drill"}"#),
    )
    .await;
    app.stop().await;

    let logs = capture.text();
    assert!(
        logs.contains("request finished"),
        "the capture works: {logs}"
    );
    assert!(logs.contains("service_auth_failed"));
    for field in [
        r#""op":"nc.write""#,
        r#""agent":"project-alpha""#,
        r#""user":"u-1""#,
        r#""thread":"t-1""#,
        r#""project":"alpha""#,
        "storage event applied",
        "kill switch set by an operator",
    ] {
        assert!(logs.contains(field), "{field} is logged");
    }
    assert!(
        logs.contains("admin_auth_failed"),
        "the refusal is named in the span"
    );
    for secret in [
        TOKEN,
        ADMIN_TOKEN,
        near_miss.as_str(),
        "x-acdm-service-auth",
        "authorization",
    ] {
        assert!(
            !logs.to_lowercase().contains(&secret.to_lowercase()),
            "{secret} appears in the logs"
        );
    }
}

/// The service's JSON lines at `info`, captured while the guard lives.
fn info_lines() -> (LogCapture, tracing::subscriber::DefaultGuard) {
    let capture = LogCapture::default();
    let subscriber = tracing_subscriber::registry()
        .with(EnvFilter::new("info"))
        .with(JsonLines::new(capture.clone()));
    (capture, tracing::subscriber::set_default(subscriber))
}

#[tokio::test(flavor = "current_thread")]
async fn a_start_reads_the_kill_switch_without_calling_it_a_change() {
    let (capture, _guard) = info_lines();

    let app = spawn_app(Options::default()).await;
    let admin = [("Authorization", BEARER)];
    let off = app
        .send(
            Req::new("PUT", "/admin/kill-switch")
                .headers(&admin)
                .json(r#"{"nc_writes_enabled":false,"reason":"drill"}"#),
        )
        .await;
    assert_eq!(off.status, 200, "{}", off.body);
    app.stop().await;

    let logs = capture.text();
    let changes: Vec<&str> = logs
        .lines()
        .filter(|line| line.contains("kill switch for agents' file writes changed"))
        .collect();
    assert_eq!(
        changes.len(),
        1,
        "only the operator's change is one: {logs}"
    );
    assert!(changes[0].contains(r#""level":"WARN""#), "{logs}");
    assert!(
        logs.lines().any(
            |line| line.contains("kill switch for agents' file writes read")
                && line.contains(r#""level":"INFO""#)
        ),
        "{logs}"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn every_bff_line_names_its_op_caller_and_project_whether_the_scope_was_cached_or_looked_up()
{
    let (capture, _guard) = info_lines();

    let app = spawn_app(Options::default()).await;
    let agent = crate::admin::alpha_with_writes(&app, 0).await;
    // The first call looks the scope up, the second finds it cached; both
    // pass the pipeline (the project's folder is not there: not_found).
    for _ in 0..2 {
        let listed = app
            .send(
                Req::new("POST", "/agent-tools/nc/list")
                    .headers(&agent)
                    .json("{}"),
            )
            .await;
        assert!(
            listed.body.contains("does not exist in mount"),
            "{}",
            listed.body
        );
    }
    app.stop().await;

    let lines: Vec<serde_json::Value> = capture
        .text()
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .filter(|line: &serde_json::Value| {
            line["message"] == "request finished" && line["span"]["path"] == "/agent-tools/nc/list"
        })
        .collect();
    assert_eq!(lines.len(), 2, "{}", capture.text());
    for line in &lines {
        let span = &line["span"];
        assert_eq!(
            (
                &span["op"],
                &span["agent"],
                &span["user"],
                &span["thread"],
                &span["project"],
                &span["status"]
            ),
            (
                &serde_json::json!("nc.list"),
                &serde_json::json!("project-alpha"),
                &serde_json::json!("u-1"),
                &serde_json::json!("t-1"),
                &serde_json::json!("alpha"),
                &serde_json::json!(404)
            ),
            "{line}"
        );
    }
}
