//! Business data a person edits through the operator API: members' names,
//! project meta, milestones, reports and meetings — each change one
//! journalled event with actor `direct`, listed and revertible; strict
//! bodies whose problems name the field.

use serde_json::{Value, json};

use crate::helpers::{BEARER, Options, Req, TestApp, spawn_app};

const H: [(&str, &str); 1] = [("Authorization", BEARER)];

async fn call(app: &TestApp, method: &str, path: &str, body: &Value) -> (u16, Value) {
    let text = body.to_string();
    let r = app
        .send(Req::new(method, path).headers(&H).json(&text))
        .await;
    (r.status, r.json())
}

async fn events(app: &TestApp) -> Vec<Value> {
    let r = app
        .send(Req::get("/admin/events?project=alpha").headers(&H))
        .await;
    r.json()["data"]["events"].as_array().unwrap().clone()
}

async fn project_with_members(app: &TestApp) {
    let (status, v) = call(
        app,
        "POST",
        "/admin/projects",
        &json!({ "slug": "alpha", "name": "Alpha" }),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    for (user, role) in [("u-alice", "owner"), ("u-bob", "member")] {
        let (status, v) = call(
            app,
            "POST",
            "/admin/projects/alpha/members",
            &json!({ "user_id": user, "role": role }),
        )
        .await;
        assert_eq!(status, 200, "{v}");
    }
}

#[tokio::test]
async fn every_business_edit_is_one_direct_event_and_a_repeat_records_nothing() {
    let app = spawn_app(Options::default()).await;
    project_with_members(&app).await;

    let (status, v) = call(
        &app,
        "PUT",
        "/admin/projects/alpha/members/u-bob/name",
        &json!({ "user_id": "ops", "display_name": "Bob Nguyen" }),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["data"]["display_name"], "Bob Nguyen");
    assert_eq!(v["data"]["changed"], true);

    let meta = json!({ "user_id": "ops", "status": "active", "time_zone": "Europe/Paris" });
    let (status, v) = call(&app, "PUT", "/admin/projects/alpha/meta", &meta).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["data"]["status"], "active");
    let meta_event = v["data"]["event_id"].as_str().unwrap().to_owned();
    // The same change again changes nothing and records nothing.
    let (status, v) = call(&app, "PUT", "/admin/projects/alpha/meta", &meta).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["data"]["changed"], false);
    assert_eq!(v["data"]["event_id"], Value::Null);

    for (seq, status) in [(1, "current"), (2, "current")] {
        let (code, v) = call(
            &app,
            "PUT",
            &format!("/admin/projects/alpha/milestones/{seq}"),
            &json!({ "user_id": "ops", "title": format!("M{seq}"), "status": status }),
        )
        .await;
        assert_eq!(code, 200, "{v}");
    }

    let (status, v) = call(
        &app,
        "POST",
        "/admin/projects/alpha/reports",
        &json!({ "user_id": "ops", "title": "Week 47", "kind": "weekly",
                 "period_start": "2026-11-16", "period_end": "2026-11-22" }),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["data"]["status"], "draft");
    assert_eq!(v["data"]["version"], 1);
    let report = v["data"]["report_id"].as_str().unwrap().to_owned();
    let update = json!({ "user_id": "ops", "if_version": 1, "title": "Week 47", "kind": "weekly",
                         "period_start": "2026-11-16", "period_end": "2026-11-22",
                         "status": "approved", "body": "Done." });
    let path = format!("/admin/projects/alpha/reports/{report}");
    let (status, v) = call(&app, "PUT", &path, &update).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["data"]["status"], "approved");
    assert_eq!(v["data"]["version"], 2);
    // A stale version is a conflict naming the current one.
    let (status, v) = call(&app, "PUT", &path, &update).await;
    assert_eq!(status, 409, "{v}");
    assert_eq!(v["data"]["current_version"], 2);

    let (status, v) = call(
        &app,
        "POST",
        "/admin/projects/alpha/meetings",
        &json!({ "user_id": "ops", "title": "Kick-off",
                 "starts_at": "2026-12-01T09:00:00+01:00", "ends_at": "2026-12-01T10:00:00+01:00",
                 "attendees": ["u-alice", "u-bob"] }),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["data"]["starts_at"], "2026-12-01T08:00:00Z");
    let meeting = v["data"]["meeting_id"].as_str().unwrap().to_owned();
    let moved = json!({ "user_id": "ops", "if_version": 1, "title": "Kick-off (moved)",
                        "starts_at": "2026-12-02T09:00:00+01:00", "ends_at": "2026-12-02T10:00:00+01:00",
                        "attendees": ["u-alice", "u-bob"] });
    let meeting_path = format!("/admin/projects/alpha/meetings/{meeting}");
    let (status, v) = call(&app, "PUT", &meeting_path, &moved).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["data"]["version"], 2);
    assert_eq!(v["data"]["title"], "Kick-off (moved)");
    let (status, v) = call(&app, "PUT", &meeting_path, &moved).await;
    assert_eq!(status, 409, "{v}");
    assert_eq!(v["data"]["current_version"], 2);
    let (status, v) = call(
        &app,
        "POST",
        &format!("/admin/projects/alpha/meetings/{meeting}/files"),
        &json!({ "user_id": "ops", "name": "agenda.md", "content": "# Agenda\n" }),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        v["data"]["rel_path"],
        format!("meetings/{meeting}/agenda.md")
    );
    let on_disk = app
        .data_dir
        .join(format!("files/Projects/Alpha/meetings/{meeting}/agenda.md"));
    assert_eq!(std::fs::read_to_string(on_disk).unwrap(), "# Agenda\n");

    let listed = events(&app).await;
    let ops: Vec<&str> = listed.iter().map(|e| e["op"].as_str().unwrap()).collect();
    assert_eq!(
        ops,
        [
            "attach_meeting_file",
            "update_meeting",
            "create_meeting",
            "update_report",
            "create_report",
            "set_milestone",
            "set_milestone",
            "set_project_meta",
            "set_member_name",
        ]
    );
    for event in &listed {
        assert_eq!(event["status"], "applied", "{event}");
        assert_eq!(event["actor"]["kind"], "direct", "{event}");
        assert_eq!(event["actor"]["user_id"], "ops", "{event}");
    }

    // Milestone 2 became current, so milestone 1 is planned again.
    let store = &app.state.store;
    let project = store
        .project(&acdm_core::ProjectSlug::parse("alpha").unwrap())
        .await
        .unwrap()
        .project;
    let milestones = store.milestones(project.id).await.unwrap();
    let statuses: Vec<String> = milestones.iter().map(|m| m.status.to_string()).collect();
    assert_eq!(statuses, ["planned", "current"]);

    // The meta change is revertible like any event.
    let r = app
        .send(
            Req::new("POST", &format!("/admin/events/{meta_event}/revert"))
                .headers(&H)
                .json(r#"{"user_id":"ops"}"#),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let meta = store.project_meta(&project.to_ref()).await.unwrap();
    assert_eq!(meta.status.to_string(), "planning");
    assert_eq!(meta.time_zone, "UTC");
    app.stop().await;
}

#[tokio::test]
async fn bad_business_bodies_are_refused_naming_the_field_and_record_nothing() {
    let app = spawn_app(Options::default()).await;
    project_with_members(&app).await;
    let cases: Vec<(&str, &str, Value, &str)> = vec![
        (
            "PUT",
            "/admin/projects/alpha/meta",
            json!({ "status": "active" }),
            "user_id",
        ),
        (
            "PUT",
            "/admin/projects/alpha/meta",
            json!({ "user_id": "ops", "colour": "red" }),
            "colour",
        ),
        (
            "PUT",
            "/admin/projects/alpha/meta",
            json!({ "user_id": "ops", "status": "busy" }),
            "status",
        ),
        (
            "PUT",
            "/admin/projects/alpha/meta",
            json!({ "user_id": "ops", "start_date": "2026-02-01", "end_date": "2026-01-01" }),
            "end_date",
        ),
        (
            "PUT",
            "/admin/projects/alpha/milestones/0",
            json!({ "user_id": "ops", "title": "M" }),
            "seq",
        ),
        (
            "PUT",
            "/admin/projects/alpha/milestones/1",
            json!({ "user_id": "ops", "title": " padded" }),
            "title",
        ),
        (
            "POST",
            "/admin/projects/alpha/reports",
            json!({ "user_id": "ops", "title": "R", "kind": "weekly",
                    "period_start": "2026-01-08", "period_end": "2026-01-01" }),
            "period_end",
        ),
        (
            "POST",
            "/admin/projects/alpha/meetings",
            json!({ "user_id": "ops", "title": "M",
                    "starts_at": "2026-12-01T10:00:00Z", "ends_at": "2026-12-01T09:00:00Z" }),
            "ends_at",
        ),
        (
            "POST",
            "/admin/projects/alpha/meetings",
            json!({ "user_id": "ops", "title": "M",
                    "starts_at": "2026-12-01T09:00:00Z", "ends_at": "2026-12-01T10:00:00Z",
                    "attendees": ["u-zed"] }),
            "attendees[0]",
        ),
        (
            "PUT",
            "/admin/projects/alpha/members/u-bob/name",
            json!({ "user_id": "ops", "display_name": "Bob\u{202e}" }),
            "display_name",
        ),
    ];
    for (method, path, body, field) in &cases {
        let (status, v) = call(&app, method, path, body).await;
        assert_eq!(status, 422, "{method} {path} {body}: {v}");
        assert_eq!(v["code"], "validation_error", "{body}: {v}");
        let fields: Vec<&str> = v["data"]["errors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["field"].as_str().unwrap())
            .collect();
        assert_eq!(fields, [*field], "{body}: {v}");
    }
    let (status, v) = call(
        &app,
        "PUT",
        "/admin/projects/alpha/members/u-zed/name",
        &json!({ "user_id": "ops", "display_name": "Zed" }),
    )
    .await;
    assert_eq!(status, 404, "{v}");
    assert!(v["message"].as_str().unwrap().contains("u-zed"), "{v}");
    assert!(events(&app).await.is_empty());
    app.stop().await;
}
