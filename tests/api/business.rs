//! The business operations over real sockets and the real WebDAV server
//! (spec §6.2, §6.4, §6.5): meetings and their files, reports, members and
//! meta; no ghost attachments; reverts that put rows and files back; the
//! role matrix of every operation (nc, business and project); one project never reaching another's
//! rows or files.

use acdm_core::business::wire::BusinessOp;
use acdm_core::business::{Report, ReportId, ReportKind, ReportStatus, RowImage};
use acdm_core::events::{Actor, EventOp};
use acdm_core::nc::NcOp;
use acdm_core::project::ProjectOp;
use acdm_core::{AgentName, Identity, ThreadId, ToolResponse, UserId};
use acdm_journal::{Change, Record};
use chrono::{TimeDelta, Utc};
use serde_json::{Value, json};

use crate::dav::{ALPHA, BETA, NcEnv, THREAD, USER, assert_envelope, code};

/// A business call as the engine makes it, for `user` through `agent`.
async fn call(env: &NcEnv, user: &str, agent: &str, op: &str, body: Value) -> (u16, Value) {
    let identity = Identity::new(
        UserId::parse(user).unwrap(),
        AgentName::parse(agent).unwrap(),
        ThreadId::parse(THREAD).unwrap(),
    );
    let path = format!("agent-tools/{op}");
    let client = env.harness.as_identity(identity);
    // The project reads are GETs; everything else is a POST.
    let answer: ToolResponse<Value> = match ProjectOp::ALL.iter().find(|p| p.path() == path) {
        Some(read) if read.method() == "GET" => client.get(&path).await,
        _ => client.call(&path, &body).await,
    };
    let value = serde_json::to_value(&answer).unwrap();
    assert_envelope(answer.http_status(), &value, &format!("{op} {body}"));
    (answer.http_status(), value)
}

async fn biz(env: &NcEnv, op: &str, body: Value) -> (u16, Value) {
    call(env, USER, ALPHA, &format!("business/{op}"), body).await
}

fn in_days(days: i64, hour: u32) -> String {
    let day = (Utc::now() + TimeDelta::days(days)).date_naive();
    day.and_hms_opt(hour, 0, 0).unwrap().and_utc().to_rfc3339()
}

pub(crate) async fn add_member(env: &NcEnv, project: &str, user: &str, role: &str) {
    let (status, body) = env
        .admin(
            "POST",
            &format!("/admin/projects/{project}/members"),
            Some(json!({"user_id": user, "role": role})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
}

/// A meeting created through the API; returns its JSON.
async fn meeting(env: &NcEnv, title: &str, day: i64) -> Value {
    let (status, body) = biz(
        env,
        "create_meeting",
        json!({"title": title, "starts_at": in_days(day, 9), "ends_at": in_days(day, 10), "attendees": [USER]}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    body["data"]["meeting"].clone()
}

/// A report in `status`, seeded as an operator would (through the journal).
pub(crate) async fn seed_report(
    env: &NcEnv,
    project: &str,
    title: &str,
    status: ReportStatus,
) -> ReportId {
    seed_report_in(&env.app, project, title, status).await
}

/// [`seed_report`] in any app.
pub(crate) async fn seed_report_in(
    app: &crate::helpers::TestApp,
    project: &str,
    title: &str,
    status: ReportStatus,
) -> ReportId {
    let state = &app.state;
    let details = state
        .store
        .project(&acdm_core::ProjectSlug::parse(project).unwrap())
        .await
        .unwrap();
    let now = Utc::now();
    let report = Report {
        report_id: ReportId::new_random(),
        title: title.to_owned(),
        kind: ReportKind::Weekly,
        period_start: now.date_naive(),
        period_end: now.date_naive(),
        body: "# Progress".into(),
        status,
        version: 1,
        created_by: Some(UserId::parse(USER).unwrap()),
        created_at: now,
        updated_at: now,
    };
    let operator = Actor::direct(UserId::parse("op-1").unwrap());
    state
        .journal
        .change(
            Record {
                actor: &operator,
                project: &details.project.to_ref(),
                target: format!("report:{}", report.report_id),
                params: json!({}),
                approval: None,
            },
            Change {
                op: EventOp::CreateReport,
                remove: vec![],
                create: None,
                rows: vec![(None, Some(RowImage::Report(report.clone())))],
            },
        )
        .await
        .unwrap();
    report.report_id
}

#[tokio::test]
async fn meetings_are_created_read_paged_and_updated_with_versions_that_say_what_changed() {
    let Some(env) = NcEnv::start().await else {
        return;
    };
    let first = meeting(&env, "Kick-off", 1).await;
    assert_eq!(first["version"], 1);
    assert_eq!(first["attendees"], json!([USER]));
    let id = first["meeting_id"].as_str().unwrap().to_owned();

    let (status, got) = biz(&env, "get_meeting", json!({"meeting_id": id})).await;
    assert_eq!(status, 200, "{got}");
    assert_eq!(got["data"]["meeting"], first);
    assert_eq!(got["data"]["files"], json!([]));

    let (status, updated) = biz(
        &env,
        "update_meeting",
        json!({"meeting_id": id, "if_version": 1, "title": "Kick-off (room 2)", "location": "Room 2"}),
    )
    .await;
    assert_eq!(status, 200, "{updated}");
    assert_eq!(updated["data"]["meeting"]["version"], 2);
    assert_eq!(updated["data"]["changed"], json!(["title", "location"]));

    // A stale version: conflict with the current version and what changed.
    let (status, stale) = biz(
        &env,
        "update_meeting",
        json!({"meeting_id": id, "if_version": 1, "agenda": "budget"}),
    )
    .await;
    assert_eq!(status, 409, "{stale}");
    assert_eq!(code(&stale), "conflict");
    assert_eq!(stale["data"]["current_version"], 2, "{stale}");
    assert_eq!(
        stale["data"]["differing_fields"],
        json!(["title", "location"]),
        "{stale}"
    );
    assert!(
        stale["suggested_action"]
            .as_str()
            .unwrap()
            .contains("if_version: 2"),
        "{stale}"
    );

    // Paging: 25 more meetings over the coming days, pages of 10.
    for day in 2..27 {
        meeting(&env, &format!("Daily {day}"), day).await;
    }
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    for page in 0.. {
        let mut body = json!({"limit": 10, "to": in_days(60, 0)});
        if let Some(c) = &cursor {
            body["cursor"] = json!(c);
        }
        let (status, listed) = biz(&env, "list_meetings", body).await;
        assert_eq!(status, 200, "{listed}");
        assert_eq!(listed["data"]["total_count"], 26, "{listed}");
        for item in listed["data"]["items"].as_array().unwrap() {
            seen.push(item["starts_at"].as_str().unwrap().to_owned());
        }
        match listed["data"]["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => {
                assert_eq!(page, 2, "three pages");
                break;
            }
        }
    }
    assert_eq!(seen.len(), 26);
    let mut sorted = seen.clone();
    sorted.sort();
    assert_eq!(seen, sorted, "by start time");

    // Strict inputs, each naming its field.
    for (op, body, field) in [
        (
            "create_meeting",
            json!({"title": "", "starts_at": in_days(1, 9), "ends_at": in_days(1, 10)}),
            "title",
        ),
        (
            "create_meeting",
            json!({"title": "x", "starts_at": in_days(1, 9), "ends_at": in_days(1, 8)}),
            "ends_at",
        ),
        (
            "create_meeting",
            json!({"title": "x", "starts_at": in_days(1, 9), "ends_at": in_days(2, 10)}),
            "ends_at",
        ),
        (
            "create_meeting",
            json!({"title": "x", "starts_at": "2026-12-01T09:00:00", "ends_at": in_days(1, 10)}),
            "starts_at",
        ),
        (
            "create_meeting",
            json!({"title": "x", "starts_at": in_days(1, 9), "ends_at": in_days(1, 10), "attendees": ["u-nobody"]}),
            "attendees",
        ),
        (
            "create_meeting",
            json!({"title": "x", "starts_at": in_days(1, 9), "ends_at": in_days(1, 10), "project_id": "beta"}),
            "project_id",
        ),
        (
            "list_meetings",
            json!({"from": in_days(0, 0), "to": in_days(400, 0)}),
            "to",
        ),
        ("list_meetings", json!({"limit": 0}), "limit"),
        ("list_meetings", json!({"cursor": "not-a-cursor"}), "cursor"),
        (
            "update_meeting",
            json!({"meeting_id": id, "if_version": 2}),
            ".",
        ),
        ("get_meeting", json!({"meeting_id": "42"}), "meeting_id"),
    ] {
        let (status, refused) = biz(&env, op, body.clone()).await;
        assert_eq!(status, 422, "{op} {body}: {refused}");
        assert_eq!(code(&refused), "validation_error", "{refused}");
        assert!(
            refused["message"].as_str().unwrap().contains(field),
            "{op} {body}: {refused}"
        );
    }
    let (status, missing) = biz(
        &env,
        "get_meeting",
        json!({"meeting_id": uuid::Uuid::new_v4()}),
    )
    .await;
    assert_eq!((status, code(&missing)), (404, "not_found"), "{missing}");
    let (status, unknown) = biz(&env, "rename_meeting", json!({})).await;
    assert_eq!((status, code(&unknown)), (404, "not_found"), "{unknown}");
    assert!(
        unknown["message"]
            .as_str()
            .unwrap()
            .contains("list_meetings"),
        "{unknown}"
    );

    // Every write is one applied event by the agent, revertible.
    let events = env.events("project=alpha").await;
    let ops: Vec<&str> = events.iter().map(|e| e["op"].as_str().unwrap()).collect();
    assert_eq!(ops.iter().filter(|o| **o == "create_meeting").count(), 26);
    assert_eq!(ops.iter().filter(|o| **o == "update_meeting").count(), 1);
    let update = events.iter().find(|e| e["op"] == "update_meeting").unwrap();
    assert_eq!(update["actor"]["kind"], "via_agent", "{update}");
    let (status, reverted) = env.revert(update["id"].as_str().unwrap()).await;
    assert_eq!(status, 200, "{reverted}");
    let (_, back) = biz(&env, "get_meeting", json!({"meeting_id": id})).await;
    assert_eq!(back["data"]["meeting"]["title"], "Kick-off");
    assert_eq!(back["data"]["meeting"]["location"], Value::Null);
    assert_eq!(
        back["data"]["meeting"]["version"], 3,
        "a revert moves the version forward"
    );
    env.stop().await;
}

#[tokio::test]
async fn attachments_are_never_ghosts_and_reverts_put_rows_and_files_back() {
    let Some(env) = NcEnv::start().await else {
        return;
    };
    add_member(&env, "alpha", "u-admin", "admin").await;
    let m = meeting(&env, "Review", 3).await;
    let id = m["meeting_id"].as_str().unwrap().to_owned();
    let folder = format!("Projects/Alpha/meetings/{id}");
    let mut files = Vec::new();
    for (name, content, encoding) in [
        ("minutes.md", "# Minutes\n- agreed", "text"),
        ("chart.png", "iVBORw0KGgo=", "base64"),
    ] {
        let (status, attached) = biz(
            &env,
            "attach_meeting_file",
            json!({"meeting_id": id, "name": name, "content": content, "encoding": encoding}),
        )
        .await;
        assert_eq!(status, 200, "{attached}");
        let file = attached["data"]["file"].clone();
        assert_eq!(file["rel_path"], format!("meetings/{id}/{name}"));
        assert!(
            file["etag"].is_string(),
            "the row knows its file's etag: {file}"
        );
        files.push(file);
    }
    assert_eq!(
        env.disk_read(&format!("{folder}/minutes.md")).unwrap(),
        b"# Minutes\n- agreed"
    );
    assert_eq!(
        env.disk_read(&format!("{folder}/chart.png")).unwrap(),
        b"\x89PNG\r\n\x1a\n"
    );
    let (status, twice) = biz(
        &env,
        "attach_meeting_file",
        json!({"meeting_id": id, "name": "minutes.md", "content": "again"}),
    )
    .await;
    assert_eq!((status, code(&twice)), (409, "conflict"), "{twice}");
    for bad in ["../x.md", "a/b.md", "", ".acdm-trash"] {
        let (status, refused) = biz(
            &env,
            "attach_meeting_file",
            json!({"meeting_id": id, "name": bad, "content": "x"}),
        )
        .await;
        assert_eq!(status, 422, "{bad}: {refused}");
    }

    // nc cannot remove or displace an attachment, nor a folder holding one.
    let before = env.disk_snapshot();
    let mark = env.recorder().mark();
    for (op, body) in [
        (
            "delete",
            json!({"rel_path": format!("meetings/{id}/minutes.md"), "dry_run": false}),
        ),
        ("delete", json!({"rel_path": "meetings", "dry_run": false})),
        (
            "move",
            json!({"from_rel_path": format!("meetings/{id}/minutes.md"), "to_rel_path": "minutes.md"}),
        ),
        (
            "move",
            json!({"from_rel_path": "meetings", "to_rel_path": "archive"}),
        ),
        (
            "move",
            json!({"from_rel_path": "docs/plan.md", "to_rel_path": format!("meetings/{id}/minutes.md"), "overwrite": true}),
        ),
    ] {
        let (status, refused) = env.nc(ALPHA, op, body.clone()).await;
        assert_eq!(
            (status, code(&refused)),
            (409, "conflict"),
            "{op} {body}: {refused}"
        );
        let action = refused["suggested_action"].as_str().unwrap();
        assert!(action.contains("delete_meeting_file"), "{refused}");
    }
    assert!(
        env.recorder().since(mark).iter().all(|r| !r.is_write()),
        "no write reached the file store"
    );
    assert_eq!(env.disk_snapshot(), before);

    // A file removed behind the service's back shows as missing.
    std::fs::remove_file(env.disk(&format!("{folder}/chart.png"))).unwrap();
    // The periodic sweep finds it (once), and so does reading the meeting.
    let sweep = acdm_bff::business::AttachmentSweep::new(
        acdm_bff::business::BusinessState::new(
            env.app.state.journal.clone(),
            env.app.state.kill_switch.clone(),
            acdm_bff::approval::Approvals::off(env.app.state.store.clone()),
        ),
        100,
    );
    let swept = sweep.poll_once().await.unwrap();
    assert_eq!(
        (swept.checked, swept.missing, swept.back),
        (2, 1, 0),
        "{swept:?}"
    );
    let swept = sweep.poll_once().await.unwrap();
    assert_eq!(
        (swept.checked, swept.missing),
        (2, 0),
        "already known: {swept:?}"
    );
    let (_, got) = biz(&env, "get_meeting", json!({"meeting_id": id})).await;
    let shown: Vec<(Value, Value)> = got["data"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["name"].clone(), f["missing"].clone()))
        .collect();
    assert_eq!(
        shown,
        vec![
            (json!("minutes.md"), json!(false)),
            (json!("chart.png"), json!(true))
        ]
    );
    assert!(
        got["message"].as_str().unwrap().contains("1 missing"),
        "{got}"
    );

    // delete_meeting_file: file into the trash and row gone, one event; revert both.
    let file_id = files[0]["file_id"].as_str().unwrap();
    let (status, removed) = biz(
        &env,
        "delete_meeting_file",
        json!({"meeting_id": id, "file_id": file_id}),
    )
    .await;
    assert_eq!(status, 200, "{removed}");
    assert!(env.disk_read(&format!("{folder}/minutes.md")).is_none());
    let (_, listed) = biz(&env, "list_meeting_files", json!({"meeting_id": id})).await;
    assert_eq!(listed["data"]["total_count"], 1, "{listed}");
    let (status, reverted) = env
        .revert(removed["data"]["event_id"].as_str().unwrap())
        .await;
    assert_eq!(status, 200, "{reverted}");
    assert_eq!(
        env.disk_read(&format!("{folder}/minutes.md")).unwrap(),
        b"# Minutes\n- agreed"
    );
    let (_, listed) = biz(&env, "list_meeting_files", json!({"meeting_id": id})).await;
    assert_eq!(listed["data"]["total_count"], 2, "{listed}");

    // delete_meeting: a dry run by default, for admins; then everything in one event.
    let (status, member_try) = biz(
        &env,
        "delete_meeting",
        json!({"meeting_id": id, "dry_run": false}),
    )
    .await;
    assert_eq!(
        (status, code(&member_try)),
        (403, "permission_denied"),
        "{member_try}"
    );
    assert!(
        member_try["message"].as_str().unwrap().contains("admin"),
        "{member_try}"
    );
    let admin = |op: &'static str, body: Value| {
        let env = &env;
        async move { call(env, "u-admin", ALPHA, &format!("business/{op}"), body).await }
    };
    let (status, dry) = admin("delete_meeting", json!({"meeting_id": id})).await;
    assert_eq!(status, 200, "{dry}");
    assert_eq!(dry["data"]["dry_run"], true);
    assert_eq!(dry["data"]["files"].as_array().unwrap().len(), 2);
    assert!(
        dry["suggested_action"]
            .as_str()
            .unwrap()
            .contains("dry_run: false")
    );
    assert!(
        env.disk_read(&format!("{folder}/minutes.md")).is_some(),
        "a dry run deletes nothing"
    );
    let before_delete = env.disk_snapshot();
    let (status, deleted) = admin(
        "delete_meeting",
        json!({"meeting_id": id, "dry_run": false}),
    )
    .await;
    assert_eq!(status, 200, "{deleted}");
    assert!(env.disk_read(&format!("{folder}/minutes.md")).is_none());
    let (status, gone) = biz(&env, "get_meeting", json!({"meeting_id": id})).await;
    assert_eq!((status, code(&gone)), (404, "not_found"), "{gone}");
    let event = deleted["data"]["event_id"].as_str().unwrap();
    let recorded = env.event(event).await;
    assert_eq!(recorded["op"], "delete_meeting");
    assert_eq!(recorded["status"], "applied");
    let (status, reverted) = env.revert(event).await;
    assert_eq!(status, 200, "{reverted}");
    let restored = env.disk_snapshot();
    for (path, content) in &before_delete {
        if path.starts_with("Projects/Alpha/") {
            assert_eq!(restored.get(path), Some(content), "{path} not restored");
        }
    }
    let (_, back) = biz(&env, "get_meeting", json!({"meeting_id": id})).await;
    assert_eq!(back["data"]["meeting"]["version"], m["version"], "{back}");
    assert_eq!(back["data"]["files"].as_array().unwrap().len(), 2, "{back}");

    // The kill switch stops the writes that touch files, not the reads.
    env.set_writes_enabled(false).await;
    let (status, off) = biz(
        &env,
        "attach_meeting_file",
        json!({"meeting_id": id, "name": "late.md", "content": "x"}),
    )
    .await;
    assert_eq!((status, code(&off)), (403, "kill_switch_off"), "{off}");
    let (status, off) = admin(
        "delete_meeting",
        json!({"meeting_id": id, "dry_run": false}),
    )
    .await;
    assert_eq!((status, code(&off)), (403, "kill_switch_off"), "{off}");
    let (status, _) = biz(
        &env,
        "update_meeting",
        json!({"meeting_id": id, "if_version": 1, "notes": "still editable"}),
    )
    .await;
    assert_eq!(status, 200, "database-only writes are not file writes");
    env.stop().await;
}

#[tokio::test]
async fn reports_move_only_along_their_flow_with_comments_and_roles() {
    let Some(env) = NcEnv::start().await else {
        return;
    };
    add_member(&env, "alpha", "u-owner", "owner").await;
    let draft = seed_report(&env, "alpha", "Week 48", ReportStatus::Draft).await;
    for (title, status) in [
        ("Week 47", ReportStatus::Submitted),
        ("Week 46", ReportStatus::Approved),
    ] {
        seed_report(&env, "alpha", title, status).await;
    }
    let (status, listed) = biz(&env, "list_reports", json!({})).await;
    assert_eq!(status, 200, "{listed}");
    assert_eq!(listed["data"]["total_count"], 3);
    assert_eq!(
        listed["data"]["items"][0]["title"], "Week 46",
        "newest first"
    );
    let (_, drafts) = biz(&env, "list_reports", json!({"status": "draft"})).await;
    assert_eq!(drafts["data"]["total_count"], 1);

    let (status, submitted) = biz(
        &env,
        "update_report_status",
        json!({"report_id": draft, "to": "submitted", "if_version": 1}),
    )
    .await;
    assert_eq!(status, 200, "{submitted}");
    assert_eq!(submitted["data"]["report"]["version"], 2);
    // Approving is for admins and owners.
    let (status, denied) = biz(
        &env,
        "update_report_status",
        json!({"report_id": draft, "to": "approved"}),
    )
    .await;
    assert_eq!(
        (status, code(&denied)),
        (403, "permission_denied"),
        "{denied}"
    );
    let owner = |body: Value| {
        let env = &env;
        async move { call(env, "u-owner", ALPHA, "business/update_report_status", body).await }
    };
    let (status, no_comment) = owner(json!({"report_id": draft, "to": "rejected"})).await;
    assert_eq!(status, 422, "{no_comment}");
    assert!(
        no_comment["message"].as_str().unwrap().contains("comment"),
        "{no_comment}"
    );
    let (status, stale) =
        owner(json!({"report_id": draft, "to": "rejected", "comment": "x", "if_version": 1})).await;
    assert_eq!((status, code(&stale)), (409, "conflict"), "{stale}");
    assert_eq!(stale["data"]["current_version"], 2);
    let (status, rejected) =
        owner(json!({"report_id": draft, "to": "rejected", "comment": "numbers missing"})).await;
    assert_eq!(status, 200, "{rejected}");
    let (status, illegal) = owner(json!({"report_id": draft, "to": "approved"})).await;
    assert_eq!((status, code(&illegal)), (409, "conflict"), "{illegal}");
    assert!(
        illegal["message"]
            .as_str()
            .unwrap()
            .contains("only move to draft"),
        "{illegal}"
    );
    assert_eq!(illegal["data"]["allowed"], json!(["draft"]));

    let (_, got) = biz(&env, "get_report", json!({"report_id": draft})).await;
    let history: Vec<(Value, Value, Value)> = got["data"]["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["from"].clone(), t["to"].clone(), t["comment"].clone()))
        .collect();
    assert_eq!(
        history,
        vec![
            (json!("draft"), json!("submitted"), Value::Null),
            (
                json!("submitted"),
                json!("rejected"),
                json!("numbers missing")
            ),
        ]
    );
    // Reverting the rejection puts the report and its history back.
    let (status, reverted) = env
        .revert(rejected["data"]["event_id"].as_str().unwrap())
        .await;
    assert_eq!(status, 200, "{reverted}");
    let (_, back) = biz(&env, "get_report", json!({"report_id": draft})).await;
    assert_eq!(back["data"]["status"], "submitted");
    assert_eq!(back["data"]["history"].as_array().unwrap().len(), 1);

    let (status, members) = biz(&env, "list_members", json!({})).await;
    assert_eq!(status, 200, "{members}");
    assert_eq!(members["data"]["total_count"], 2);
    let (status, meta) = biz(&env, "get_project_meta", json!({})).await;
    assert_eq!(status, 200, "{meta}");
    assert_eq!(meta["data"]["slug"], "alpha");
    assert_eq!(meta["data"]["status"], "planning");
    env.stop().await;
}

#[tokio::test]
async fn another_projects_ids_are_not_found_and_touch_nothing() {
    let Some(env) = NcEnv::start().await else {
        return;
    };
    let m = meeting(&env, "Alpha only", 2).await;
    let id = m["meeting_id"].as_str().unwrap().to_owned();
    let (_, attached) = biz(
        &env,
        "attach_meeting_file",
        json!({"meeting_id": id, "name": "secret.md", "content": "alpha"}),
    )
    .await;
    let file_id = attached["data"]["file"]["file_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let report = seed_report(&env, "alpha", "Alpha report", ReportStatus::Submitted).await;
    add_member(&env, "beta", "u-1", "owner").await;

    let before = env.disk_snapshot();
    let mark = env.recorder().mark();
    let beta = |op: &'static str, body: Value| {
        let env = &env;
        async move { call(env, USER, BETA, &format!("business/{op}"), body).await }
    };
    for (op, body) in [
        ("get_meeting", json!({"meeting_id": id})),
        ("list_meeting_files", json!({"meeting_id": id})),
        (
            "update_meeting",
            json!({"meeting_id": id, "if_version": 1, "title": "pwned"}),
        ),
        (
            "delete_meeting",
            json!({"meeting_id": id, "dry_run": false}),
        ),
        (
            "attach_meeting_file",
            json!({"meeting_id": id, "name": "x.md", "content": "x"}),
        ),
        (
            "delete_meeting_file",
            json!({"meeting_id": id, "file_id": file_id}),
        ),
        ("get_report", json!({"report_id": report})),
        (
            "update_report_status",
            json!({"report_id": report, "to": "approved"}),
        ),
    ] {
        let (status, answer) = beta(op, body.clone()).await;
        assert_eq!(
            (status, code(&answer)),
            (404, "not_found"),
            "{op} {body}: {answer}"
        );
        assert!(!answer.to_string().contains("Alpha only"), "{answer}");
    }
    let (_, listed) = beta("list_meetings", json!({})).await;
    assert_eq!(listed["data"]["total_count"], 0, "{listed}");
    let (_, reports) = beta("list_reports", json!({})).await;
    assert_eq!(reports["data"]["total_count"], 0, "{reports}");
    assert!(
        env.recorder().since(mark).iter().all(|r| !r.is_write()),
        "no write upstream"
    );
    assert_eq!(env.disk_snapshot(), before);
    let (_, still) = biz(&env, "get_meeting", json!({"meeting_id": id})).await;
    assert_eq!(still["data"]["meeting"], m);
    assert_eq!(still["data"]["files"].as_array().unwrap().len(), 1);
    env.stop().await;
}

/// Who may do what (spec §6.5), for every operation: a refused call is
/// `permission_denied` before its body is even read; an allowed one is
/// anything else (most bodies here are empty and fail validation later).
#[tokio::test]
async fn the_role_matrix_holds_for_every_operation() {
    for require in [true, false] {
        let Some(env) =
            NcEnv::start_with(vec![("ACDM_BFF_REQUIRE_MEMBERSHIP", require.to_string())]).await
        else {
            return;
        };
        for (user, role) in [
            ("u-owner", "owner"),
            ("u-admin", "admin"),
            ("u-viewer", "viewer"),
        ] {
            add_member(&env, "alpha", user, role).await;
        }
        let mut ops: Vec<(String, acdm_core::business::Access)> = NcOp::ALL
            .iter()
            .map(|op| (format!("nc/{}", op.as_str()), op.access()))
            .collect();
        ops.extend(
            BusinessOp::ALL
                .iter()
                .map(|op| (format!("business/{}", op.as_str()), op.access())),
        );
        ops.extend(
            ProjectOp::ALL
                .iter()
                .map(|op| (format!("project/{}", op.as_str()), op.access())),
        );
        assert_eq!(ops.len(), 24);
        for (user, role) in [
            ("u-owner", Some("owner")),
            ("u-admin", Some("admin")),
            (USER, Some("member")),
            ("u-viewer", Some("viewer")),
            ("u-stranger", None),
        ] {
            // A non-member acts as a member when membership is not required.
            let effective = match role {
                Some(role) => Some(role.parse::<acdm_core::domain::MemberRole>().unwrap()),
                None if !require => Some(acdm_core::domain::MemberRole::Member),
                None => None,
            };
            for (op, access) in &ops {
                let allowed = effective.is_some_and(|r| r.grants(*access));
                let (status, answer) = call(&env, user, ALPHA, op, json!({})).await;
                if allowed {
                    assert_ne!(
                        code(&answer),
                        "permission_denied",
                        "{user} ({role:?}, require {require}) {op}: {answer}"
                    );
                } else {
                    assert_eq!(
                        (status, code(&answer)),
                        (403, "permission_denied"),
                        "{user} ({role:?}, require {require}) {op}: {answer}"
                    );
                    let message = answer["message"].as_str().unwrap();
                    assert!(message.contains(user), "{message}");
                }
            }
        }
        env.stop().await;
    }
}

#[tokio::test]
async fn the_calendar_merges_meetings_and_milestone_due_dates_by_time() {
    let Some(env) = NcEnv::start().await else {
        return;
    };
    let later = meeting(&env, "Later", 5).await;
    let sooner = meeting(&env, "Sooner", 1).await;
    meeting(&env, "Outside the window", 40).await;
    // A milestone due in 3 days, seeded as an operator would.
    let state = &env.app.state;
    let project = state
        .store
        .project(&acdm_core::ProjectSlug::parse("alpha").unwrap())
        .await
        .unwrap()
        .project
        .to_ref();
    let operator = Actor::direct(UserId::parse("op-1").unwrap());
    let due = (Utc::now() + TimeDelta::days(3)).date_naive();
    state
        .journal
        .change(
            Record {
                actor: &operator,
                project: &project,
                target: "milestone:1".into(),
                params: json!({}),
                approval: None,
            },
            Change {
                op: EventOp::SetMilestone,
                remove: vec![],
                create: None,
                rows: vec![(
                    None,
                    Some(RowImage::Milestone(acdm_core::business::Milestone {
                        seq: 1,
                        title: "Design frozen".into(),
                        due_date: Some(due),
                        status: acdm_core::business::MilestoneStatus::Current,
                        acceptance_criteria: vec!["signed off".into()],
                        closed_at: None,
                        closed_by: None,
                    })),
                )],
            },
        )
        .await
        .unwrap();
    let (status, calendar) = biz(
        &env,
        "list_calendar",
        json!({"from": in_days(0, 0), "to": in_days(14, 0)}),
    )
    .await;
    assert_eq!(status, 200, "{calendar}");
    let entries: Vec<(Value, Value)> = calendar["data"]["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["kind"].clone(), e["title"].clone()))
        .collect();
    assert_eq!(
        entries,
        vec![
            (json!("meeting"), json!("Sooner")),
            (json!("milestone_due"), json!("Design frozen")),
            (json!("meeting"), json!("Later")),
        ]
    );
    assert_eq!(
        calendar["data"]["items"][0]["meeting_id"],
        sooner["meeting_id"]
    );
    assert_eq!(
        calendar["data"]["items"][2]["meeting_id"],
        later["meeting_id"]
    );
    assert_eq!(calendar["data"]["items"][1]["milestone_seq"], 1);
    assert_eq!(calendar["data"]["total_count"], 3);
    for body in [
        json!({"from": in_days(0, 0), "to": in_days(367, 0)}),
        json!({"from": in_days(2, 0), "to": in_days(1, 0)}),
        json!({"from": in_days(0, 0)}),
    ] {
        let (status, refused) = biz(&env, "list_calendar", body.clone()).await;
        assert_eq!(
            (status, code(&refused)),
            (422, "validation_error"),
            "{body}: {refused}"
        );
    }
    env.stop().await;
}
