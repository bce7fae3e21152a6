//! `acdm-tool project …` and `acdm-tool catalog`: the method, path and
//! body each project subcommand sends, the `--human` overview, and the
//! catalog printed without any backend, token or identity.

use serde_json::{Value, json};

use crate::Tool;
use crate::double::Double;

const EVENT: &str = "3c4d5e6f-7a8b-4c9d-8e0f-1a2b3c4d5e6f";

fn milestone(seq: u32, status: &str) -> Value {
    json!({
        "seq": seq, "title": format!("Phase {seq}"), "due_date": "2026-12-20", "status": status,
        "acceptance_criteria": ["signed off"], "closed_at": null, "closed_by": null,
    })
}

fn overview() -> Value {
    json!({
        "meta": { "slug": "alpha", "name": "Alpha", "status": "active", "description": "",
                  "start_date": "2026-11-01", "end_date": null, "time_zone": "Europe/Paris",
                  "updated_at": "2026-11-02T08:00:00Z" },
        "milestones": [milestone(1, "done"), milestone(2, "current")],
        "current_milestone": 2,
        "upcoming_meetings": [{ "meeting_id": "6f1c2b9e-8a0e-4a59-9d1e-0c5f2a3b4c5d",
            "title": "Kick-off", "starts_at": "2026-12-01T08:00:00Z", "ends_at": "2026-12-01T09:00:00Z",
            "location": null, "attendees": 2, "version": 1 }],
        "reports": { "draft": 1, "submitted": 1, "approved": 0, "rejected": 0,
            "awaiting_approval": [{ "report_id": "9a7d1c55-3e2b-4f0a-8c6d-1e2f3a4b5c6d",
                "title": "Week 48", "kind": "weekly", "period_start": "2026-11-23",
                "period_end": "2026-11-29", "version": 2, "updated_at": "2026-11-30T09:00:00Z" }] },
        "members": { "owners": [{ "user_id": "u-alice", "display_name": "Alice", "role": "owner" }],
                     "admins": [], "members": [{ "user_id": "u1", "display_name": null, "role": "member" }],
                     "viewers": [] },
        "acting_role": "member",
        "recent_agent_writes": [{ "event_id": EVENT, "op": "nc_write", "target": "project:/notes/a.md",
            "user_id": "u1", "agent_name": "project-alpha", "status": "applied",
            "at": "2026-11-30T10:00:00Z" }],
        "file_writes_enabled": true,
    })
}

/// Arguments, the method and operation sent, the body sent, the data answered.
type Case = (
    Vec<&'static str>,
    &'static str,
    &'static str,
    Option<Value>,
    Value,
);

#[tokio::test]
async fn the_project_subcommands_send_their_method_path_and_body() {
    let sow = json!({ "summary": "Ship it", "deliverables": [{ "title": "Spec", "description": "", "milestone": 1 }],
                      "milestones": [{ "seq": 1, "title": "Phase 1", "status": "done", "due_date": null,
                                       "acceptance_criteria": ["signed off"] }],
                      "updated_at": "2026-11-02T08:00:00Z" });
    let advanced = json!({ "done": milestone(2, "done"), "current": milestone(3, "current"),
                           "project_status": "active", "event_id": EVENT });
    let cases: Vec<Case> = vec![
        (
            vec!["project", "overview"],
            "GET",
            "overview",
            None,
            overview(),
        ),
        (vec!["project", "sow"], "GET", "sow", None, sow),
        (
            vec!["project", "advance", "--if-current", "2"],
            "POST",
            "milestone/advance",
            Some(json!({ "if_current": 2 })),
            advanced,
        ),
    ];
    for (args, method, op, body, data) in cases {
        let double = Double::ok(data.clone()).await;
        let ran = Tool::new(&double.url, &args).run().await;
        ran.exits(0);
        assert_eq!(ran.json()["data"], data, "{args:?}");
        let request = double.only_request();
        assert_eq!(request.method, method, "{args:?}");
        assert_eq!(request.path, format!("/agent-tools/project/{op}"));
        assert_eq!(request.header("x-acdm-user-id"), Some("u1"));
        match body {
            Some(body) => assert_eq!(request.json(), body),
            None => assert!(request.body.is_empty(), "a GET sends no body"),
        }
    }
}

#[tokio::test]
async fn the_overview_reads_as_sections_with_human() {
    let double = Double::ok(overview()).await;
    let ran = Tool::new(&double.url, &["--human", "project", "overview"])
        .run()
        .await;
    ran.exits(0);
    let text = &ran.stdout;
    for expected in [
        "project:",
        "Alpha (alpha)",
        "your role:",
        "member",
        "seq  status   due         title",
        "2    current  2026-12-20  Phase 2",
        "2026-12-01 08:00",
        "reports: 1 draft, 1 submitted, 0 approved, 0 rejected",
        "awaiting approval: 9a7d1c55-3e2b-4f0a-8c6d-1e2f3a4b5c6d (v2) Week 48",
        "owners:",
        "Alice (u-alice)",
        "nc_write",
        "project:/notes/a.md",
    ] {
        assert!(text.contains(expected), "`{expected}` not in:\n{text}");
    }
}

#[tokio::test]
async fn the_catalog_is_printed_without_backend_token_or_identity() {
    let ran = Tool::env_only(&["catalog"])
        .without_env("ACDM_MCP_SERVICE_TOKEN")
        .run()
        .await;
    ran.exits(0);
    let tools = ran.json();
    let tools = tools.as_array().unwrap();
    assert_eq!(tools.len(), 24);
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    for name in [
        "nc_read",
        "business_delete_meeting_file",
        "project_overview",
        "project_milestone_advance",
    ] {
        assert!(names.contains(&name), "{name}: {names:?}");
    }
    let advance = tools
        .iter()
        .find(|t| t["name"] == "project_milestone_advance")
        .unwrap();
    assert_eq!(advance["input_schema"]["required"], json!(["if_current"]));
    assert_eq!(advance["annotations"]["least_role"], "admin");

    let human = Tool::env_only(&["--human", "catalog"]).run().await;
    human.exits(0);
    assert_eq!(
        human.stdout.lines().count(),
        25,
        "a header and 24 tools:\n{}",
        human.stdout
    );
    assert!(human.stdout.contains("nc_delete"), "{}", human.stdout);
    assert!(
        human.stdout.lines().any(|l| l.starts_with("nc_delete")
            && l.contains("POST /agent-tools/nc/delete")
            && l.contains("destructive")),
        "{}",
        human.stdout
    );
}
