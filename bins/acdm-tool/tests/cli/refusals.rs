//! When the call cannot be made or is refused before any tool runs: no
//! identity, no token, the service gate's 401, a backend that is down or
//! silent, usage errors. Nothing is sent when something is missing locally,
//! and the token is never printed.

use serde_json::json;

use crate::double::Double;
use crate::{TOKEN, Tool};

#[tokio::test]
async fn a_missing_or_invalid_identity_is_named_and_nothing_is_sent() {
    let double = Double::ok(json!({ "mounts": [] })).await;
    let cases: Vec<(Vec<&str>, Vec<&str>)> = vec![
        (
            vec!["--user", "u1", "--agent", "project-alpha"],
            vec![
                "--thread (ACDM_THREAD_ID) is missing",
                "no request was sent",
            ],
        ),
        (
            vec![],
            vec![
                "--user (ACDM_USER_ID), --agent (ACDM_AGENT_NAME), --thread (ACDM_THREAD_ID) are missing",
            ],
        ),
        (
            vec!["--user", "u1", "--agent", " ", "--thread", "t1"],
            vec!["--agent (ACDM_AGENT_NAME) is missing or empty"],
        ),
        (
            vec!["--user", "u1", "--agent", "bad agent", "--thread", "t1"],
            vec![
                "--agent (ACDM_AGENT_NAME) is not a valid X-ACDM-Agent-Name",
                "no request was sent",
            ],
        ),
    ];
    for (identity, words) in cases {
        let mut args = vec!["nc", "list-mounts"];
        args.extend(identity);
        let ran = Tool::bare(&double.url, &args).run().await;
        ran.fails_with("internal_error", &words);
        assert!(
            ran.json()["suggested_action"]
                .as_str()
                .unwrap()
                .contains("ACDM_USER_ID")
        );
    }
    assert!(double.requests().is_empty(), "{:#?}", double.requests());
}

#[tokio::test]
async fn without_a_token_the_client_refuses_and_nothing_is_sent() {
    let double = Double::ok(json!({ "mounts": [] })).await;
    for token in [None, Some(""), Some("   ")] {
        let tool = Tool::new(&double.url, &["nc", "list-mounts"]);
        let tool = match token {
            None => tool.without_env("ACDM_MCP_SERVICE_TOKEN"),
            Some(value) => tool.env("ACDM_MCP_SERVICE_TOKEN", value),
        };
        tool.run().await.fails_with(
            "internal_error",
            &[
                "ACDM_MCP_SERVICE_TOKEN",
                "not configured",
                "no request was sent",
            ],
        );
    }
    assert!(double.requests().is_empty(), "{:#?}", double.requests());
}

#[tokio::test]
async fn the_gate_refusal_is_an_internal_error_naming_the_token_mismatch() {
    let double = Double::answering(401, r#"{"error":"service auth failed"}"#).await;
    let ran = Tool::new(&double.url, &["nc", "read", "a.md"]).run().await;
    ran.fails_with(
        "internal_error",
        &["ACDM_MCP_SERVICE_TOKEN", "does not match"],
    );

    // The other 401 is the BFF's own envelope, passed through.
    let missing = json!({
        "success": false, "code": "missing_identity_headers",
        "message": "missing identity header(s): X-ACDM-Thread-Id",
        "data": null, "suggested_action": "Send all three identity headers.",
    });
    let double = Double::answering(401, missing.to_string()).await;
    let ran = Tool::new(&double.url, &["nc", "read", "a.md"]).run().await;
    ran.exits(1);
    assert_eq!(ran.json(), missing);
}

#[tokio::test]
async fn a_backend_that_is_down_or_silent_is_an_internal_error_with_a_retry_hint() {
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    };
    let ran = Tool::new(&closed, &["nc", "list-mounts"]).run().await;
    ran.fails_with("internal_error", &["could not be reached"]);
    assert!(
        !ran.stdout.contains("127.0.0.1"),
        "no address in the message"
    );

    let silent = Double::silent().await;
    let ran = Tool::new(&silent.url, &["nc", "list-mounts", "--timeout", "1"])
        .run()
        .await;
    ran.fails_with("internal_error", &["did not answer within 1 s"]);
    assert!(
        ran.json()["suggested_action"]
            .as_str()
            .unwrap()
            .starts_with("Retry")
    );
    assert_eq!(silent.requests().len(), 1);
}

#[tokio::test]
async fn usage_errors_exit_two_and_send_nothing() {
    let double = Double::ok(json!({ "mounts": [] })).await;
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["nc", "read"], "<REL_PATH>"),
        (vec!["nc", "list-mounts", "--token", "a-token"], "--token"),
        (vec!["nc", "list-mounts", "--timeout", "0"], "--timeout"),
        (
            vec!["nc", "list-mounts", "--url", "ftp://backend"],
            "not an http(s) URL",
        ),
        (
            vec!["nc", "write", "a", "--content", "x", "--from-file", "b"],
            "cannot be used with",
        ),
        (
            vec!["nc", "write", "a", "--content", "x", "--base64"],
            "cannot be used with",
        ),
        (vec!["nc", "unknown"], "unrecognized subcommand"),
    ];
    for (args, word) in cases {
        let ran = Tool::new(&double.url, &args).run().await;
        ran.exits(2);
        assert_eq!(ran.stdout, "", "{ran:#?}");
        assert!(ran.stderr.contains(word), "`{word}` not in {ran:#?}");
    }
    assert!(double.requests().is_empty(), "{:#?}", double.requests());
}

#[tokio::test]
async fn the_token_is_never_printed() {
    // Every run checks stdout and stderr for the token (`Tool::run`); these
    // are the paths most likely to echo what was sent.
    let gate = Double::answering(401, r#"{"error":"service auth failed"}"#).await;
    let odd = Double::answering(500, "<html>proxy error</html>").await;
    let invalid = Double::answering(422, "field `x` is wrong").await;
    for url in [&gate.url, &odd.url, &invalid.url] {
        for human in [false, true] {
            let mut args = vec!["nc", "write", "a.md", "--content", "x"];
            if human {
                args.push("--human");
            }
            let ran = Tool::new(url, &args).run().await;
            ran.exits(1);
        }
    }
    assert!(
        odd.requests()[0]
            .header("x-acdm-service-auth")
            .is_some_and(|t| t == TOKEN),
        "the token was sent"
    );
    let ran = Tool::new(&gate.url, &["--help"]).run().await;
    ran.exits(0);
    assert!(
        ran.stdout.contains("ACDM_MCP_SERVICE_TOKEN only"),
        "{ran:#?}"
    );
    Tool::new(&gate.url, &["nc", "write", "--help"])
        .run()
        .await
        .exits(0);
}
