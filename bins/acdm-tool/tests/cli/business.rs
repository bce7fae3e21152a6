//! `acdm-tool business …` against a double that answers: the request each
//! subcommand sends, the dry-run convention of `delete-meeting`, and the
//! `--human` tables and details.

use serde_json::{Value, json};

use crate::Tool;
use crate::double::{Double, Received};

const MEETING: &str = "6f1c2b9e-8a0e-4a59-9d1e-0c5f2a3b4c5d";
const FILE: &str = "0b5e8f43-8d5e-4bf5-9d1c-6a7f2f5e9a10";
const REPORT: &str = "9a7d1c55-3e2b-4f0a-8c6d-1e2f3a4b5c6d";
const EVENT: &str = "3c4d5e6f-7a8b-4c9d-8e0f-1a2b3c4d5e6f";

fn assert_sent(request: &Received, op: &str, body: &Value) {
    assert_eq!(request.method, "POST");
    assert_eq!(request.path, format!("/agent-tools/business/{op}"));
    assert_eq!(request.header("x-acdm-user-id"), Some("u1"));
    assert_eq!(request.header("x-acdm-agent-name"), Some("project-alpha"));
    assert_eq!(request.header("x-acdm-thread-id"), Some("t1"));
    assert_eq!(&request.json(), body, "body of {op}");
}

fn meeting() -> Value {
    json!({
        "meeting_id": MEETING, "title": "Kick-off",
        "starts_at": "2026-12-01T08:00:00Z", "ends_at": "2026-12-01T09:00:00Z",
        "location": "Room 2", "agenda": "1. scope\n2. plan", "notes": null,
        "attendees": ["u1", "u2"], "version": 2,
        "created_by": "u1", "created_at": "2026-11-01T08:00:00Z",
        "updated_by": "u2", "updated_at": "2026-11-02T08:00:00Z",
    })
}

fn file(missing: bool) -> Value {
    json!({
        "file_id": FILE, "meeting_id": MEETING, "mount": "project",
        "rel_path": format!("meetings/{MEETING}/minutes.md"), "name": "minutes.md",
        "size": 12, "etag": "\"e1\"", "content_type": "text/markdown",
        "added_by": "u1", "added_at": "2026-11-03T10:00:00Z", "missing": missing,
    })
}

fn report() -> Value {
    json!({
        "report_id": REPORT, "title": "Week 48", "kind": "weekly",
        "period_start": "2026-11-23", "period_end": "2026-11-29",
        "body": "All good.\nNext: tests.", "status": "submitted", "version": 3,
        "created_by": "u1", "created_at": "2026-11-29T18:00:00Z",
        "updated_at": "2026-11-30T09:00:00Z",
    })
}

fn transition(seq: u32, from: &str, to: &str, comment: Option<&str>) -> Value {
    json!({
        "report_id": REPORT, "seq": seq, "from": from, "to": to, "user_id": "u1",
        "comment": comment, "at": "2026-11-30T09:00:00Z",
    })
}

fn page(items: Vec<Value>, next: Option<&str>, total: u64) -> Value {
    json!({ "items": items, "next_cursor": next, "total_count": total })
}

#[tokio::test]
async fn every_business_subcommand_sends_its_typed_body_and_prints_the_data() {
    let written = json!({ "meeting": meeting(), "changed": ["title"], "event_id": EVENT });
    let file_written = json!({ "file": file(false), "event_id": EVENT });
    let mut details = report();
    details["history"] = json!([transition(1, "draft", "submitted", None)]);
    let cases: Vec<(Vec<&str>, &str, Value, Value)> = vec![
        (
            vec!["business", "list-meetings"],
            "list_meetings",
            json!({}),
            page(vec![meeting()], None, 1),
        ),
        (
            vec![
                "business",
                "list-meetings",
                "--from",
                "2026-12-01T09:00:00+01:00",
                "--to",
                "2026-12-31T00:00:00Z",
                "--limit",
                "2",
                "--cursor",
                "6162",
            ],
            "list_meetings",
            json!({ "from": "2026-12-01T09:00:00+01:00", "to": "2026-12-31T00:00:00Z",
                    "limit": 2, "cursor": "6162" }),
            page(vec![meeting()], Some("6364"), 3),
        ),
        (
            vec!["business", "get-meeting", MEETING],
            "get_meeting",
            json!({ "meeting_id": MEETING }),
            json!({ "meeting": meeting(), "files": [file(false)] }),
        ),
        (
            vec![
                "business",
                "create-meeting",
                "--title",
                "Kick-off",
                "--starts-at",
                "2026-12-01T09:00:00+01:00",
                "--ends-at",
                "2026-12-01T10:00:00+01:00",
                "--location",
                "Room 2",
                "--attendee",
                "u1",
                "--attendee",
                "u2",
            ],
            "create_meeting",
            json!({ "title": "Kick-off", "starts_at": "2026-12-01T09:00:00+01:00",
                    "ends_at": "2026-12-01T10:00:00+01:00", "location": "Room 2",
                    "attendees": ["u1", "u2"] }),
            written.clone(),
        ),
        (
            vec![
                "business",
                "update-meeting",
                MEETING,
                "--if-version",
                "2",
                "--title",
                "New",
                "--notes",
                "",
            ],
            "update_meeting",
            json!({ "meeting_id": MEETING, "if_version": 2, "title": "New", "notes": "" }),
            written.clone(),
        ),
        (
            vec![
                "business",
                "update-meeting",
                MEETING,
                "--if-version",
                "2",
                "--no-attendees",
            ],
            "update_meeting",
            json!({ "meeting_id": MEETING, "if_version": 2, "attendees": [] }),
            written,
        ),
        (
            vec!["business", "delete-meeting", MEETING, "--yes"],
            "delete_meeting",
            json!({ "meeting_id": MEETING, "dry_run": false }),
            json!({ "dry_run": false, "meeting": meeting(), "files": [], "event_id": EVENT }),
        ),
        (
            vec!["business", "list-meeting-files", MEETING],
            "list_meeting_files",
            json!({ "meeting_id": MEETING }),
            page(vec![file(false)], None, 1),
        ),
        (
            vec![
                "business",
                "attach-meeting-file",
                MEETING,
                "minutes.md",
                "--content",
                "# Minutes",
            ],
            "attach_meeting_file",
            json!({ "meeting_id": MEETING, "name": "minutes.md", "content": "# Minutes" }),
            file_written.clone(),
        ),
        (
            vec!["business", "delete-meeting-file", MEETING, FILE],
            "delete_meeting_file",
            json!({ "meeting_id": MEETING, "file_id": FILE }),
            file_written,
        ),
        (
            vec![
                "business",
                "list-calendar",
                "--from",
                "2026-12-01T00:00:00Z",
                "--to",
                "2027-01-01T00:00:00+01:00",
            ],
            "list_calendar",
            json!({ "from": "2026-12-01T00:00:00Z", "to": "2027-01-01T00:00:00+01:00" }),
            page(vec![], None, 0),
        ),
        (
            vec![
                "business",
                "list-reports",
                "--status",
                "submitted",
                "--limit",
                "5",
            ],
            "list_reports",
            json!({ "status": "submitted", "limit": 5 }),
            page(vec![report()], None, 1),
        ),
        (
            vec!["business", "get-report", REPORT],
            "get_report",
            json!({ "report_id": REPORT }),
            details,
        ),
        (
            vec![
                "business",
                "update-report-status",
                REPORT,
                "rejected",
                "--comment",
                "numbers missing",
                "--if-version",
                "3",
            ],
            "update_report_status",
            json!({ "report_id": REPORT, "to": "rejected", "comment": "numbers missing",
                    "if_version": 3 }),
            json!({ "report": report(),
                    "transition": transition(2, "submitted", "rejected", Some("numbers missing")),
                    "event_id": EVENT }),
        ),
        (
            vec!["business", "list-members"],
            "list_members",
            json!({}),
            page(
                vec![json!({ "user_id": "u1", "display_name": "Ada", "role": "owner" })],
                None,
                1,
            ),
        ),
        (
            vec!["business", "get-project-meta"],
            "get_project_meta",
            json!({}),
            json!({ "slug": "alpha", "name": "Alpha", "status": "active", "description": "",
                    "start_date": "2026-01-05", "end_date": null, "time_zone": "UTC",
                    "updated_at": "2026-11-01T08:00:00Z" }),
        ),
    ];
    for (args, op, body, data) in cases {
        let double = Double::ok(data.clone()).await;
        let ran = Tool::new(&double.url, &args).run().await;
        ran.exits(0);
        assert_sent(&double.only_request(), op, &body);
        let printed = ran.json();
        assert_eq!(printed["code"], "ok");
        assert_eq!(printed["data"], data, "`{}` printed {printed:#}", ran.args);
        assert_eq!(ran.stderr, "");
    }
}

#[tokio::test]
async fn bad_ids_times_and_statuses_are_usage_errors_and_nothing_is_sent() {
    let double = Double::ok(json!({})).await;
    for (args, word) in [
        (vec!["business", "get-meeting", "not-a-uuid"], "MEETING_ID"),
        (
            vec![
                "business",
                "list-calendar",
                "--from",
                "2026-12-01T09:00:00",
                "--to",
                "2026-12-02T00:00:00Z",
            ],
            "--from",
        ),
        (
            vec!["business", "list-reports", "--status", "done"],
            "--status",
        ),
        (
            vec![
                "business",
                "update-meeting",
                MEETING,
                "--if-version",
                "1",
                "--attendee",
                "u1",
                "--no-attendees",
            ],
            "--no-attendees",
        ),
    ] {
        let ran = Tool::new(&double.url, &args).run().await;
        ran.exits(2);
        assert!(ran.stderr.contains(word), "`{word}` not in {ran:#?}");
    }
    assert!(double.requests().is_empty());
}

#[tokio::test]
async fn a_dry_run_meeting_delete_suggests_running_again_with_yes() {
    let preview = json!({
        "success": true, "code": "ok",
        "message": "dry run: deleting meeting \"Kick-off\" would also remove its 1 file(s); nothing was deleted",
        "data": { "dry_run": true, "meeting": meeting(), "files": [file(false)], "event_id": null },
        "suggested_action": "Call again with dry_run: false to delete the meeting and these files (the files are kept in the backend's trash and an operator can restore everything).",
    });
    for args in [
        vec!["business", "delete-meeting", MEETING],
        vec!["--human", "business", "delete-meeting", MEETING],
    ] {
        let double = Double::answering(200, preview.to_string()).await;
        let ran = Tool::new(&double.url, &args).run().await;
        ran.exits(0);
        assert_sent(
            &double.only_request(),
            "delete_meeting",
            &json!({ "meeting_id": MEETING }),
        );
        assert!(
            ran.stdout
                .contains("again with --yes to delete the meeting"),
            "{ran:#?}"
        );
        assert!(!ran.stdout.contains("dry_run: false"), "{ran:#?}");
    }
    // A refusal is printed as the server sent it.
    let refused = json!({
        "success": false, "code": "permission_denied",
        "message": "user `u1` is a member of project `alpha`; to delete a meeting needs the role admin or higher",
        "data": null, "suggested_action": "Tell the user this needs a project member with a higher role; do not retry.",
    });
    let double = Double::answering(403, refused.to_string()).await;
    let ran = Tool::new(
        &double.url,
        &["business", "delete-meeting", MEETING, "--yes"],
    )
    .run()
    .await;
    ran.exits(1);
    assert_eq!(ran.json(), refused);
}

#[tokio::test]
async fn human_output_renders_business_lists_as_tables_with_the_next_cursor() {
    let cases: Vec<(Vec<&str>, Value, String)> = vec![
        (
            vec!["business", "list-meetings"],
            page(vec![meeting()], Some("6364"), 3),
            format!(
                "ok: done\n\
                 MEETING_ID                            STARTS (UTC)      ENDS (UTC)        VERSION  TITLE\n\
                 {MEETING}  2026-12-01 08:00  2026-12-01 09:00  2        Kick-off\n\
                 (1 of 3; next page: --cursor 6364)\n"
            ),
        ),
        (
            vec!["business", "list-meeting-files", MEETING],
            page(vec![file(true)], None, 1),
            format!(
                "ok: done\n\
                 FILE_ID                               SIZE  ADDED (UTC)       STATE    PATH\n\
                 {FILE}  12    2026-11-03 10:00  missing  project:/meetings/{MEETING}/minutes.md\n"
            ),
        ),
        (
            vec![
                "business",
                "list-calendar",
                "--from",
                "2026-12-01T00:00:00Z",
                "--to",
                "2027-01-01T00:00:00Z",
            ],
            page(
                vec![
                    json!({ "kind": "meeting", "at": "2026-12-01T08:00:00Z", "ends_at": "2026-12-01T09:00:00Z",
                            "title": "Kick-off", "meeting_id": MEETING, "milestone_seq": null }),
                    json!({ "kind": "milestone_due", "at": "2026-12-15T00:00:00Z", "ends_at": null,
                            "title": "Design done", "meeting_id": null, "milestone_seq": 2 }),
                ],
                None,
                2,
            ),
            format!(
                "ok: done\n\
                 AT (UTC)          ENDS (UTC)        KIND           ID                                    TITLE\n\
                 2026-12-01 08:00  2026-12-01 09:00  meeting        {MEETING}  Kick-off\n\
                 2026-12-15 00:00  -                 milestone due  milestone 2                           Design done\n"
            ),
        ),
        (
            vec!["business", "list-reports"],
            page(vec![report()], None, 1),
            format!(
                "ok: done\n\
                 REPORT_ID                             STATUS     KIND    PERIOD                  VERSION  TITLE\n\
                 {REPORT}  submitted  weekly  2026-11-23..2026-11-29  3        Week 48\n"
            ),
        ),
        (
            vec!["business", "list-members"],
            page(
                vec![
                    json!({ "user_id": "u1", "display_name": "Ada \u{1b}[31mL", "role": "owner" }),
                    json!({ "user_id": "u2", "display_name": null, "role": "viewer" }),
                ],
                None,
                2,
            ),
            "ok: done\n\
             USER_ID  ROLE    NAME\n\
             u1       owner   Ada \\u{1b}[31mL\n\
             u2       viewer  -\n"
                .to_owned(),
        ),
        (
            vec!["business", "list-reports", "--status", "approved"],
            page(vec![], None, 0),
            "ok: done\n(no reports)\n".to_owned(),
        ),
    ];
    for (args, data, expected) in cases {
        let double = Double::ok(data).await;
        let mut args = args;
        args.push("--human");
        let ran = Tool::new(&double.url, &args).run().await;
        ran.exits(0);
        assert_eq!(ran.stdout, expected, "`{}`", ran.args);
    }
}

#[tokio::test]
async fn human_output_shows_a_meeting_with_its_files_and_a_report_with_its_history() {
    let double = Double::ok(json!({ "meeting": meeting(), "files": [file(false)] })).await;
    let ran = Tool::new(
        &double.url,
        &["--human", "business", "get-meeting", MEETING],
    )
    .run()
    .await;
    ran.exits(0);
    assert_eq!(
        ran.stdout,
        format!(
            "ok: done\n\
             meeting_id: {MEETING}\n\
             title:      Kick-off\n\
             starts_at:  2026-12-01 08:00 UTC\n\
             ends_at:    2026-12-01 09:00 UTC\n\
             location:   Room 2\n\
             attendees:  u1, u2\n\
             version:    2\n\
             updated:    2026-11-02 08:00 UTC by u2\n\
             agenda:\n  1. scope\n  2. plan\n\
             files:\n\
             FILE_ID                               SIZE  ADDED (UTC)       STATE  PATH\n\
             {FILE}  12    2026-11-03 10:00  ok     project:/meetings/{MEETING}/minutes.md\n"
        )
    );

    let mut details = report();
    details["history"] = json!([
        transition(1, "draft", "submitted", None),
        transition(2, "submitted", "rejected", Some("numbers missing")),
    ]);
    let double = Double::ok(details).await;
    let ran = Tool::new(&double.url, &["--human", "business", "get-report", REPORT])
        .run()
        .await;
    ran.exits(0);
    assert_eq!(
        ran.stdout,
        format!(
            "ok: done\n\
             report_id: {REPORT}\n\
             title:     Week 48\n\
             kind:      weekly\n\
             period:    2026-11-23 to 2026-11-29\n\
             status:    submitted\n\
             version:   3\n\
             created:   2026-11-29 18:00 UTC by u1\n\
             history:\n\
             SEQ  AT (UTC)          MOVE                   BY  COMMENT\n\
             1    2026-11-30 09:00  draft -> submitted     u1  -\n\
             2    2026-11-30 09:00  submitted -> rejected  u1  numbers missing\n\
             body:\n  All good.\n  Next: tests.\n"
        )
    );

    let double = Double::ok(json!({
        "slug": "alpha", "name": "Alpha", "status": "active", "description": "The alpha project.",
        "start_date": "2026-01-05", "end_date": null, "time_zone": "Europe/Paris",
        "updated_at": "2026-11-01T08:00:00Z",
    }))
    .await;
    let ran = Tool::new(&double.url, &["--human", "business", "get-project-meta"])
        .run()
        .await;
    ran.exits(0);
    assert_eq!(
        ran.stdout,
        "ok: done\n\
         slug:       alpha\n\
         name:       Alpha\n\
         status:     active\n\
         start_date: 2026-01-05\n\
         end_date:   -\n\
         time_zone:  Europe/Paris\n\
         updated_at: 2026-11-01 08:00 UTC\n\
         description:\n  The alpha project.\n"
    );
}
