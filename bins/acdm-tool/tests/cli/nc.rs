//! `acdm-tool nc …` against a double that answers: the request each
//! subcommand sends, and what is printed for successes and failures.

use serde_json::{Value, json};

use crate::double::{Double, Received};
use crate::{TOKEN, Tool};

const EVENT: &str = "0b5e8f43-8d5e-4bf5-9d1c-6a7f2f5e9a10";

/// Asserts the four headers of spec §3 and a JSON body.
fn assert_sent(request: &Received, op: &str, body: &Value) {
    assert_eq!(request.method, "POST");
    assert_eq!(request.path, format!("/agent-tools/nc/{op}"));
    assert_eq!(request.header("x-acdm-service-auth"), Some(TOKEN));
    assert_eq!(request.header("x-acdm-user-id"), Some("u1"));
    assert_eq!(request.header("x-acdm-agent-name"), Some("project-alpha"));
    assert_eq!(request.header("x-acdm-thread-id"), Some("t1"));
    assert_eq!(request.header("content-type"), Some("application/json"));
    assert_eq!(&request.json(), body, "body of {op}");
}

#[tokio::test]
async fn every_subcommand_sends_the_four_headers_and_its_typed_body() {
    let entry = json!({
        "name": "plan.md", "rel_path": "notes/plan.md", "is_dir": false, "size": 12,
        "modified": "2026-01-02T10:00:00Z", "etag": "\"e1\"",
    });
    let cases: Vec<(Vec<&str>, &str, Value, Value)> = vec![
        (
            vec!["nc", "list-mounts"],
            "list_mounts",
            json!({}),
            json!({ "mounts": [{ "name": "project", "writable": true }] }),
        ),
        (
            vec!["nc", "list"],
            "list",
            json!({ "rel_path": "" }),
            json!({ "mount": "project", "rel_path": "", "entries": [], "truncated": false }),
        ),
        (
            vec!["nc", "list", "notes", "--mount", "archive"],
            "list",
            json!({ "rel_path": "notes", "mount": "archive" }),
            json!({ "mount": "archive", "rel_path": "notes", "entries": [entry], "truncated": false }),
        ),
        (
            vec![
                "nc",
                "read",
                "notes/plan.md",
                "--offset",
                "10",
                "--max-bytes",
                "100",
            ],
            "read",
            json!({ "rel_path": "notes/plan.md", "offset": 10, "max_bytes": 100 }),
            json!({
                "mount": "project", "rel_path": "notes/plan.md", "encoding": "text",
                "content": "ll", "size": 12, "etag": "\"e1\"", "content_type": "text/markdown",
                "offset": 10, "returned_bytes": 2, "truncated": false, "next_offset": null,
            }),
        ),
        (
            vec![
                "nc", "search", "kick off", "--limit", "5", "--mount", "project",
            ],
            "search",
            json!({ "query": "kick off", "mount": "project", "limit": 5 }),
            json!({ "hits": [{
                "mount": "project", "rel_path": "notes/plan.md", "is_dir": false,
                "snippet": "the kick off is on Monday", "line": 3,
            }], "returned": 1 }),
        ),
        (
            vec![
                "nc",
                "write",
                "a.md",
                "--content",
                "hello",
                "--if-match",
                "\"e1\"",
            ],
            "write",
            json!({ "rel_path": "a.md", "content": "hello", "if_match": "\"e1\"" }),
            json!({
                "mount": "project", "rel_path": "a.md", "created": false, "size": 5,
                "etag": "\"e2\"", "event_id": EVENT,
            }),
        ),
        (
            vec!["nc", "delete", "old"],
            "delete",
            json!({ "rel_path": "old" }),
            json!({
                "dry_run": true, "mount": "project", "rel_path": "old",
                "would_delete": [
                    { "rel_path": "old", "is_dir": true, "size": null },
                    { "rel_path": "old/a.md", "is_dir": false, "size": 3 },
                ],
                "count": 2, "truncated": false,
            }),
        ),
        (
            vec!["nc", "delete", "old", "--yes", "--mount", "project"],
            "delete",
            json!({ "rel_path": "old", "mount": "project", "dry_run": false }),
            json!({ "dry_run": false, "mount": "project", "rel_path": "old", "event_id": EVENT }),
        ),
        (
            vec!["nc", "move", "a.md", "b.md", "--overwrite"],
            "move",
            json!({ "from_rel_path": "a.md", "to_rel_path": "b.md", "overwrite": true }),
            json!({
                "mount": "project", "from_rel_path": "a.md", "to_rel_path": "b.md",
                "overwritten": true, "event_id": EVENT,
            }),
        ),
        (
            vec!["nc", "move", "a.md", "b.md"],
            "move",
            json!({ "from_rel_path": "a.md", "to_rel_path": "b.md" }),
            json!({
                "mount": "project", "from_rel_path": "a.md", "to_rel_path": "b.md",
                "overwritten": false, "event_id": EVENT,
            }),
        ),
    ];
    for (args, op, body, data) in cases {
        let double = Double::ok(data.clone()).await;
        let ran = Tool::new(&double.url, &args).run().await;
        ran.exits(0);
        assert_sent(&double.only_request(), op, &body);
        let printed = ran.json();
        assert_eq!(printed["success"], true);
        assert_eq!(printed["code"], "ok");
        assert_eq!(printed["data"], data, "`{}` printed {printed:#}", ran.args);
        assert_eq!(ran.stderr, "");
    }
}

#[tokio::test]
async fn write_takes_its_content_from_a_file_or_stdin_and_base64_encodes_on_request() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("acdm-tool-write");
    std::fs::create_dir_all(&dir).unwrap();
    let text = dir.join("plan.md");
    std::fs::write(&text, "# Plan\nété\n").unwrap();
    let binary = dir.join("logo.bin");
    std::fs::write(&binary, [0_u8, 0xff, 0x10, 0x80]).unwrap();
    let (text, binary) = (text.to_str().unwrap(), binary.to_str().unwrap());
    let data = json!({
        "mount": "project", "rel_path": "x", "created": true, "size": 4, "etag": null,
        "event_id": EVENT,
    });

    // (arguments, stdin, the body sent)
    let cases: Vec<(Vec<&str>, &[u8], Value)> = vec![
        (
            vec!["nc", "write", "x", "--from-file", text],
            b"not read",
            json!({ "rel_path": "x", "content": "# Plan\nété\n" }),
        ),
        (
            vec!["nc", "write", "x"],
            b"from stdin\n",
            json!({ "rel_path": "x", "content": "from stdin\n" }),
        ),
        (
            vec!["nc", "write", "x", "--from-file", binary, "--base64"],
            b"not read",
            json!({ "rel_path": "x", "content": "AP8QgA==", "encoding": "base64" }),
        ),
        (
            vec!["nc", "write", "x", "--base64"],
            &[0xff, 0xfe],
            json!({ "rel_path": "x", "content": "//4=", "encoding": "base64" }),
        ),
    ];
    for (args, stdin, body) in cases {
        let double = Double::ok(data.clone()).await;
        let ran = Tool::new(&double.url, &args).stdin(stdin).run().await;
        ran.exits(0);
        assert_sent(&double.only_request(), "write", &body);
    }

    // Bytes that are not UTF-8 need --base64; a missing file is named.
    // Both are usage errors, and nothing is sent.
    let double = Double::ok(data).await;
    let ran = Tool::new(&double.url, &["nc", "write", "x", "--from-file", binary])
        .run()
        .await;
    ran.exits(2);
    assert!(
        ran.stderr.contains("is not UTF-8 text; pass --base64"),
        "{ran:#?}"
    );
    let missing = dir.join("missing.md");
    let ran = Tool::new(
        &double.url,
        &["nc", "write", "x", "--from-file", missing.to_str().unwrap()],
    )
    .run()
    .await;
    ran.exits(2);
    assert!(ran.stderr.contains("cannot read --from-file"), "{ran:#?}");
    assert!(double.requests().is_empty());
}

#[tokio::test]
async fn a_failure_envelope_is_printed_unchanged_and_exits_one() {
    let conflict = json!({
        "success": false, "code": "conflict",
        "message": "a.md changed since etag \"e1\" was read",
        "data": null,
        "suggested_action": "Re-read the file and retry with its new etag.",
    });
    let double = Double::answering(409, conflict.to_string()).await;
    let ran = Tool::new(
        &double.url,
        &[
            "nc",
            "write",
            "a.md",
            "--content",
            "x",
            "--if-match",
            "\"e1\"",
        ],
    )
    .run()
    .await;
    ran.exits(1);
    assert_eq!(ran.json(), conflict);
    assert_eq!(double.requests().len(), 1);
}

#[tokio::test]
async fn human_output_renders_a_list_as_a_table() {
    let double = Double::ok(json!({
        "mount": "project", "rel_path": "notes", "truncated": false, "entries": [
            { "name": "minutes", "rel_path": "notes/minutes", "is_dir": true,
              "size": null, "modified": "2026-01-02T09:30:00Z", "etag": null },
            { "name": "plan.md", "rel_path": "notes/plan.md", "is_dir": false,
              "size": 1234, "modified": "2026-01-02T10:00:00Z", "etag": "\"5f1e\"" },
        ],
    }))
    .await;
    let ran = Tool::new(&double.url, &["nc", "list", "notes", "--human"])
        .run()
        .await;
    ran.exits(0);
    assert_eq!(
        ran.stdout,
        "ok: done\n\
         NAME      SIZE  MODIFIED (UTC)       ETAG\n\
         minutes/  -     2026-01-02 09:30:00  -\n\
         plan.md   1234  2026-01-02 10:00:00  \"5f1e\"\n"
    );
}

#[tokio::test]
async fn human_output_shows_a_failure_with_its_suggested_action_last() {
    let double = Double::answering(
        403,
        json!({
            "success": false, "code": "scope_violation",
            "message": "agent ghost is not a provisioned project manager",
            "data": null, "suggested_action": "Ask an operator to mount it.",
        })
        .to_string(),
    )
    .await;
    let ran = Tool::new(&double.url, &["--human", "nc", "read", "a.md"])
        .run()
        .await;
    ran.exits(1);
    assert_eq!(
        ran.stdout,
        "scope_violation: agent ghost is not a provisioned project manager\n\
         suggested action: Ask an operator to mount it.\n"
    );
}

#[tokio::test]
async fn identity_url_and_timeout_can_come_from_the_environment() {
    let double = Double::ok(json!({ "mounts": [] })).await;
    let ran = Tool::env_only(&["nc", "list-mounts"])
        .env("ACDM_BACKEND_URL", &double.url)
        .env("NC_OP_TIMEOUT_SECONDS", "5")
        .env("ACDM_USER_ID", "u1")
        .env("ACDM_AGENT_NAME", "project-alpha")
        .env("ACDM_THREAD_ID", "t1")
        .run()
        .await;
    ran.exits(0);
    assert_sent(&double.only_request(), "list_mounts", &json!({}));

    // An option wins over its variable.
    let double = Double::ok(json!({ "mounts": [] })).await;
    let ran = Tool::new(&double.url, &["nc", "list-mounts"])
        .env("ACDM_AGENT_NAME", "project-beta")
        .run()
        .await;
    ran.exits(0);
    let request = double.only_request();
    assert_eq!(request.header("x-acdm-agent-name"), Some("project-alpha"));
}

#[tokio::test]
async fn a_dry_run_delete_suggests_running_again_with_yes_not_the_wire_flag() {
    let preview = json!({
        "success": true, "code": "ok",
        "message": "dry run: deleting project:/old would remove 1 item(s); nothing was changed.",
        "data": {
            "dry_run": true, "mount": "project", "rel_path": "old",
            "would_delete": [{ "rel_path": "old", "is_dir": false, "size": 3 }],
            "count": 1, "truncated": false,
        },
        "suggested_action": "Call again with dry_run: false to delete (the item is kept in the backend's trash and can be restored).",
    });
    for args in [
        vec!["nc", "delete", "old"],
        vec!["--human", "nc", "delete", "old"],
    ] {
        let double = Double::answering(200, preview.to_string()).await;
        let ran = Tool::new(&double.url, &args).run().await;
        ran.exits(0);
        assert!(
            ran.stdout.contains("again with --yes to delete"),
            "{ran:#?}"
        );
        assert!(!ran.stdout.contains("dry_run: false"), "{ran:#?}");
    }

    // A real delete is printed as the server sent it.
    let done = json!({
        "success": true, "code": "ok", "message": "deleted project:/old",
        "data": { "dry_run": false, "mount": "project", "rel_path": "old", "event_id": EVENT },
        "suggested_action": null,
    });
    let double = Double::answering(200, done.to_string()).await;
    let ran = Tool::new(&double.url, &["nc", "delete", "old", "--yes"])
        .run()
        .await;
    ran.exits(0);
    assert_eq!(ran.json(), done);
}

#[tokio::test]
async fn an_approval_request_is_printed_with_its_data_and_the_approval_id_is_sent_back() {
    const APPROVAL: &str = "6f1c2a4e-0d6b-4a3b-9f00-2b1c3d4e5f60";
    let required = json!({
        "success": false, "code": "approval_required",
        "message": "nc.delete needs a person's approval in project `alpha` before it runs; nothing was changed.",
        "data": {
            "approval_id": APPROVAL, "status": "pending", "expires_at": "2026-11-30T09:00:00Z",
            "preview": { "summary": "delete project:/a.md (1 item(s))", "targets": [] },
        },
        "suggested_action": "Tell the user this change needs approval.",
    });
    let double = Double::answering(403, required.to_string()).await;
    let ran = Tool::new(&double.url, &["nc", "delete", "a.md", "--yes"])
        .run()
        .await;
    ran.exits(1);
    // The data is kept, whatever its shape: the user needs the id.
    assert_eq!(ran.json(), required);
    assert_sent(
        &double.requests()[0],
        "delete",
        &json!({ "rel_path": "a.md", "dry_run": false }),
    );

    let ran = Tool::new(
        &double.url,
        &["nc", "delete", "a.md", "--yes", "--approval-id", APPROVAL],
    )
    .run()
    .await;
    ran.exits(1);
    assert_sent(
        &double.requests()[1],
        "delete",
        &json!({ "rel_path": "a.md", "dry_run": false, "approval_id": APPROVAL }),
    );

    // Not an approval id: a usage error, nothing sent.
    let ran = Tool::new(
        &double.url,
        &["nc", "delete", "a.md", "--yes", "--approval-id", "nope"],
    )
    .run()
    .await;
    ran.exits(2);
    assert_eq!(double.requests().len(), 2);
}
