//! The business commands of the binary: `import` (checked whole, then
//! written; idempotent) and the one-object commands (`meta set`,
//! `milestone set`, `report create`, `meeting create`, `member name`).

use std::path::Path;
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_acdm-backend");

fn run(data_dir: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .env_clear()
        .env("ACDM_DATA_DIR", data_dir)
        .env("ACDM_LOG_FORMAT", "json")
        .args(args)
        .output()
        .unwrap()
}

fn json(output: &Output) -> serde_json::Value {
    assert!(
        output.status.success(),
        "failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

fn events(d: &Path) -> Vec<serde_json::Value> {
    json(&run(d, &["events", "list", "--project", "alpha"]))["events"]
        .as_array()
        .unwrap()
        .clone()
}

fn project(d: &Path) {
    json(&run(
        d,
        &["project", "create", "--slug", "alpha", "--name", "Alpha"],
    ));
    for (user, role) in [("u-alice", "owner"), ("u-bob", "member")] {
        json(&run(
            d,
            &[
                "member",
                "add",
                "--project",
                "alpha",
                "--user",
                user,
                "--role",
                role,
            ],
        ));
    }
}

const DOCUMENT: &str = r##"
[meta]
status = "active"
description = "Replace paper minutes."
start_date = 2026-09-01
time_zone = "Europe/Paris"

[[members]]
user_id = "u-alice"
display_name = "Alice Martin"

[[milestones]]
seq = 1
title = "Discovery"
status = "done"

[[milestones]]
seq = 2
title = "Build"
due_date = 2026-12-18
status = "current"
acceptance_criteria = ["Meetings usable end to end"]

[[reports]]
key = "w46"
title = "Week 46"
kind = "weekly"
period_start = 2026-11-09
period_end = 2026-11-15
status = "approved"

[[reports]]
key = "w47"
title = "Week 47"
kind = "weekly"
period_start = 2026-11-16
period_end = 2026-11-22

[[meetings]]
key = "kickoff"
title = "Kick-off"
starts_at = 2026-12-01T09:00:00+01:00
ends_at = "2026-12-01T10:00:00+01:00"
attendees = ["u-alice", "u-bob"]

[[meetings.attachments]]
name = "agenda.md"
content = "# Agenda\n"

[[meetings]]
key = "review"
title = "Design review"
starts_at = "2026-12-03T14:00:00Z"
ends_at = "2026-12-03T15:30:00Z"
"##;

#[test]
fn an_import_writes_each_object_once_and_a_second_run_records_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    project(d);
    let file = d.join("alpha.toml");
    std::fs::write(&file, DOCUMENT).unwrap();
    let file = file.to_str().unwrap();

    let first = json(&run(
        d,
        &["import", "--project", "alpha", "--by", "ops", file],
    ));
    assert_eq!(first["changed"].as_array().unwrap().len(), 9, "{first}");
    assert_eq!(first["unchanged"], 0);
    let after_first = events(d);
    assert_eq!(after_first.len(), 9);
    for event in &after_first {
        assert_eq!(event["status"], "applied", "{event}");
        assert_eq!(event["actor"]["kind"], "direct", "{event}");
        assert_eq!(event["actor"]["user_id"], "ops", "{event}");
    }
    let attached: Vec<_> = walk(&d.join("files/Projects/Alpha/meetings"));
    assert_eq!(attached.len(), 1, "{attached:?}");
    assert_eq!(std::fs::read_to_string(&attached[0]).unwrap(), "# Agenda\n");

    // Again: everything is found as the file says; no event.
    let second = json(&run(
        d,
        &["import", "--project", "alpha", "--by", "ops", file],
    ));
    assert_eq!(second["changed"], serde_json::json!([]), "{second}");
    assert_eq!(second["unchanged"], 9);
    assert_eq!(events(d).len(), 9);

    // The same document as JSON is the same data: still nothing to do.
    let as_json = d.join("alpha.json");
    let value: toml::Value = toml::from_str(DOCUMENT).unwrap();
    let mut text = serde_json::to_string(&value).unwrap();
    // TOML dates serialise as tagged tables; the JSON document spells them as text.
    for (bare, quoted) in [
        ("2026-09-01", "\"2026-09-01\""),
        ("2026-12-18", "\"2026-12-18\""),
        ("2026-11-09", "\"2026-11-09\""),
        ("2026-11-15", "\"2026-11-15\""),
        ("2026-11-16", "\"2026-11-16\""),
        ("2026-11-22", "\"2026-11-22\""),
        ("2026-12-01T09:00:00+01:00", "\"2026-12-01T09:00:00+01:00\""),
    ] {
        text = text.replace(
            &format!("{{\"$__toml_private_datetime\":\"{bare}\"}}"),
            quoted,
        );
    }
    std::fs::write(&as_json, text).unwrap();
    let third = json(&run(
        d,
        &[
            "import",
            "--project",
            "alpha",
            "--by",
            "ops",
            as_json.to_str().unwrap(),
        ],
    ));
    assert_eq!(third["changed"], serde_json::json!([]), "{third}");

    // A changed field is one new event, for that object only.
    std::fs::write(
        d.join("alpha.toml"),
        DOCUMENT.replace("title = \"Week 47\"", "title = \"Week 47 (final)\""),
    )
    .unwrap();
    let fourth = json(&run(
        d,
        &["import", "--project", "alpha", "--by", "ops", file],
    ));
    assert_eq!(
        fourth["changed"],
        serde_json::json!(["report w47"]),
        "{fourth}"
    );
    let latest = events(d);
    assert_eq!(latest.len(), 10);
    assert_eq!(latest[0]["op"], "update_report");
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            found.extend(walk(&path));
        } else {
            found.push(path);
        }
    }
    found
}

#[test]
fn an_invalid_document_writes_nothing_and_lists_every_problem_by_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    project(d);
    let file = d.join("bad.json");
    std::fs::write(
        &file,
        serde_json::json!({
            "meta": { "status": "active", "start_date": "2026-02-01", "end_date": "2026-01-01" },
            "members": [{ "user_id": "u-zed", "display_name": "Zed" }],
            "milestones": [
                { "seq": 1, "title": "A", "status": "current" },
                { "seq": 2, "title": "B", "status": "current" }
            ],
            "reports": [
                { "key": "ok", "title": "Fine", "kind": "weekly",
                  "period_start": "2026-01-01", "period_end": "2026-01-07" },
                { "key": "ok", "title": "", "kind": "weekly",
                  "period_start": "2026-01-01", "period_end": "2026-01-07" }
            ],
            "meetings": [
                { "key": "m1", "title": "Fine", "starts_at": "2026-12-01T09:00:00Z",
                  "ends_at": "2026-12-01T10:00:00Z" },
                { "key": "m2", "title": "Fine", "starts_at": "2026-12-01T09:00:00Z",
                  "ends_at": "2026-12-01T10:00:00Z" },
                { "key": "m3", "title": "Backwards", "starts_at": "2026-12-01T10:00:00Z",
                  "ends_at": "2026-12-01T09:00:00Z",
                  "attachments": [{ "name": "../escape.md", "content": "x" }] }
            ]
        })
        .to_string(),
    )
    .unwrap();
    let out = run(d, &["import", "--project", "alpha", file.to_str().unwrap()]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("7 problem(s); nothing was written"),
        "{stderr}"
    );
    for path in [
        "meta.end_date:",
        "members[0].user_id:",
        "milestones[1].status:",
        "reports[1].key:",
        "reports[1].title:",
        "meetings[2].ends_at:",
        "meetings[2].attachments[0].name:",
    ] {
        assert!(stderr.contains(path), "{path} missing from: {stderr}");
    }
    assert!(events(d).is_empty());
    assert!(!d.join("files/Projects/Alpha/meetings").exists());

    // A field of the wrong shape is named by its path, and nothing is written.
    std::fs::write(
        &file,
        r#"{"meetings":[{"key":"m","title":"M","starts_at":"tomorrow","ends_at":"2026-12-01T10:00:00Z"}]}"#,
    )
    .unwrap();
    let out = run(d, &["import", "--project", "alpha", file.to_str().unwrap()]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("meetings[0].starts_at"), "{stderr}");
    // An unknown field too.
    std::fs::write(&file, r#"{"meta":{"colour":"red"}}"#).unwrap();
    let out = run(d, &["import", "--project", "alpha", file.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("meta.colour: unknown field `colour`"),
        "{stderr}"
    );
    assert!(events(d).is_empty());
}

#[test]
fn operators_edit_business_data_one_object_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    project(d);
    let named = json(&run(
        d,
        &[
            "member",
            "name",
            "--project",
            "alpha",
            "--user",
            "u-bob",
            "--name",
            "Bob",
            "--by",
            "ops",
        ],
    ));
    assert_eq!(named["display_name"], "Bob");
    let meta = json(&run(
        d,
        &["meta", "set", "--project", "alpha", "--status", "on_hold"],
    ));
    assert_eq!(meta["status"], "on_hold");
    let milestone = json(&run(
        d,
        &[
            "milestone",
            "set",
            "--project",
            "alpha",
            "--seq",
            "1",
            "--title",
            "Build",
            "--status",
            "current",
            "--criterion",
            "Works",
            "--criterion",
            "Reviewed",
        ],
    ));
    assert_eq!(
        milestone["acceptance_criteria"],
        serde_json::json!(["Works", "Reviewed"])
    );
    let report = json(&run(
        d,
        &[
            "report",
            "create",
            "--project",
            "alpha",
            "--title",
            "Week 47",
            "--kind",
            "weekly",
            "--period-start",
            "2026-11-16",
            "--period-end",
            "2026-11-22",
            "--status",
            "submitted",
        ],
    ));
    assert_eq!(report["status"], "submitted");
    let id = report["report_id"].as_str().unwrap();
    let updated = json(&run(
        d,
        &[
            "report",
            "update",
            "--project",
            "alpha",
            "--id",
            id,
            "--if-version",
            "1",
            "--title",
            "Week 47",
            "--kind",
            "weekly",
            "--period-start",
            "2026-11-16",
            "--period-end",
            "2026-11-22",
            "--status",
            "approved",
        ],
    ));
    assert_eq!(updated["version"], 2);
    let meeting = json(&run(
        d,
        &[
            "meeting",
            "create",
            "--project",
            "alpha",
            "--title",
            "Kick-off",
            "--starts-at",
            "2026-12-01T09:00:00Z",
            "--ends-at",
            "2026-12-01T10:00:00Z",
            "--attendee",
            "u-alice",
        ],
    ));
    assert_eq!(meeting["attendees"], serde_json::json!(["u-alice"]));
    let ops: Vec<String> = events(d)
        .iter()
        .map(|e| {
            format!(
                "{} by {}",
                e["op"].as_str().unwrap(),
                e["actor"]["user_id"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        ops,
        [
            "create_meeting by operator",
            "update_report by operator",
            "create_report by operator",
            "set_milestone by operator",
            "set_project_meta by operator",
            "set_member_name by ops",
        ]
    );

    // Refusals name the field and record nothing.
    let out = run(
        d,
        &[
            "meeting",
            "create",
            "--project",
            "alpha",
            "--title",
            "Long",
            "--starts-at",
            "2026-12-01T09:00:00Z",
            "--ends-at",
            "2026-12-03T10:00:00Z",
            "--attendee",
            "u-zed",
        ],
    );
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("validation_error: ends_at: spans more than 24 hours"),
        "{stderr}"
    );
    assert!(
        stderr.contains("attendees[0]: `u-zed` is not a member"),
        "{stderr}"
    );
    assert_eq!(events(d).len(), 6);
}
