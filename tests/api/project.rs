//! The project operations over real sockets and the real WebDAV server
//! (spec §6.3, §6.5, §7): the overview after a scripted day of work, the
//! statement of work, the milestone advance with its roles, conflicts and
//! revert, and the harness client serving the overview the way an engine
//! calls it while it builds a prompt (no agent-run context, async and
//! blocking, with and without a runtime).

use std::time::Duration;

use acdm_core::business::ReportStatus;
use acdm_core::project::ProjectOp;
use acdm_core::{AgentName, ErrorCode, Identity, ThreadId, ToolResponse, UserId};
use chrono::{TimeDelta, Utc};
use serde_json::{Value, json};

use crate::business::{add_member, seed_report};
use crate::dav::{ALPHA, BETA, NcEnv, THREAD, USER, assert_envelope, code};

fn identity(user: &str) -> Identity {
    Identity::new(
        UserId::parse(user).unwrap(),
        AgentName::parse(ALPHA).unwrap(),
        ThreadId::parse(THREAD).unwrap(),
    )
}

/// A call as the engine makes it (its method from the operation).
async fn call(env: &NcEnv, user: &str, path: &str, method: &str, body: Value) -> (u16, Value) {
    let client = env.harness.as_identity(identity(user));
    let answer: ToolResponse<Value> = if method == "GET" {
        client.get(path).await
    } else {
        client.call(path, &body).await
    };
    let value = serde_json::to_value(&answer).unwrap();
    assert_envelope(answer.http_status(), &value, &format!("{path} {body}"));
    (answer.http_status(), value)
}

async fn overview(env: &NcEnv, user: &str) -> Value {
    let (status, body) = call(env, user, ProjectOp::Overview.path(), "GET", json!({})).await;
    assert_eq!(status, 200, "{body}");
    body
}

async fn advance(env: &NcEnv, user: &str, if_current: u32) -> (u16, Value) {
    call(
        env,
        user,
        ProjectOp::AdvanceMilestone.path(),
        "POST",
        json!({ "if_current": if_current }),
    )
    .await
}

async fn biz(env: &NcEnv, user: &str, op: &str, body: Value) -> Value {
    let (status, answer) = call(
        env,
        user,
        &format!("agent-tools/business/{op}"),
        "POST",
        body,
    )
    .await;
    assert_eq!(status, 200, "{op}: {answer}");
    answer["data"].clone()
}

fn at(days: i64, hour: u32) -> String {
    let day = (Utc::now() + TimeDelta::days(days)).date_naive();
    day.and_hms_opt(hour, 0, 0).unwrap().and_utc().to_rfc3339()
}

/// Puts milestones 1 (current) … `n` (planned) in place, as an operator.
async fn milestones(env: &NcEnv, n: u32) -> Vec<Value> {
    let mut out = Vec::new();
    for seq in 1..=n {
        let status = if seq == 1 { "current" } else { "planned" };
        let (code, body) = env
            .admin(
                "PUT",
                &format!("/admin/projects/alpha/milestones/{seq}"),
                Some(json!({
                    "user_id": "op-1",
                    "title": format!("Phase {seq}"),
                    "due_date": (Utc::now() + TimeDelta::days(i64::from(seq) * 10)).date_naive(),
                    "status": status,
                    "acceptance_criteria": [format!("criterion {seq}")],
                })),
            )
            .await;
        assert_eq!(code, 200, "{body}");
        let mut milestone = body["data"].clone();
        let object = milestone.as_object_mut().unwrap();
        object.remove("changed");
        object.remove("event_id");
        out.push(milestone);
    }
    out
}

/// An owner, an admin and a viewer beside the member `u-1`.
async fn managers_and_viewer(env: &NcEnv) {
    for (user, role) in [
        ("u-owner", "owner"),
        ("u-admin", "admin"),
        ("u-viewer", "viewer"),
    ] {
        add_member(env, "alpha", user, role).await;
    }
}

fn without(mut value: Value, fields: &[&str]) -> Value {
    for field in fields {
        value.as_object_mut().unwrap().remove(*field);
    }
    value
}

#[tokio::test]
async fn the_overview_after_a_scripted_sequence_of_writes_matches_exactly() {
    let Some(env) = NcEnv::start().await else {
        return;
    };
    managers_and_viewer(&env).await;
    let (status, named) = env
        .admin(
            "PUT",
            "/admin/projects/alpha/members/u-admin/name",
            Some(json!({"user_id": "op-1", "display_name": "Ada Admin"})),
        )
        .await;
    assert_eq!(status, 200, "{named}");
    let (status, meta) = env
        .admin(
            "PUT",
            "/admin/projects/alpha/meta",
            Some(json!({"user_id": "op-1", "status": "active", "time_zone": "Europe/Paris"})),
        )
        .await;
    assert_eq!(status, 200, "{meta}");
    let mut milestones = milestones(&env, 3).await;

    // The scripted day: meetings created, a report submitted and approved,
    // another submitted, the milestone advanced, a file written.
    let mut upcoming = Vec::new();
    for (title, day) in [("Site visit", 3), ("Kick-off", 1), ("Far away", 20)] {
        let written = biz(
            &env,
            USER,
            "create_meeting",
            json!({"title": title, "starts_at": at(day, 9), "ends_at": at(day, 10),
                   "location": "Room 1", "attendees": [USER, "u-admin"]}),
        )
        .await;
        if day <= 14 {
            let m = &written["meeting"];
            upcoming.push(json!({
                "meeting_id": m["meeting_id"], "title": title, "starts_at": m["starts_at"],
                "ends_at": m["ends_at"], "location": "Room 1", "attendees": 2, "version": 1,
            }));
        }
    }
    upcoming.reverse(); // soonest first
    let approved = seed_report(&env, "alpha", "Week 1", ReportStatus::Draft).await;
    biz(
        &env,
        USER,
        "update_report_status",
        json!({"report_id": approved, "to": "submitted"}),
    )
    .await;
    biz(
        &env,
        "u-admin",
        "update_report_status",
        json!({"report_id": approved, "to": "approved"}),
    )
    .await;
    let waiting = seed_report(&env, "alpha", "Week 2", ReportStatus::Draft).await;
    let submitted = biz(
        &env,
        USER,
        "update_report_status",
        json!({"report_id": waiting, "to": "submitted"}),
    )
    .await;
    let (status, advanced) = advance(&env, "u-admin", 1).await;
    assert_eq!(status, 200, "{advanced}");
    let (status, wrote) = env
        .nc(
            ALPHA,
            "write",
            json!({"rel_path": "notes/overview.md", "content": "# Notes\n"}),
        )
        .await;
    assert_eq!(status, 200, "{wrote}");

    let answer = overview(&env, "u-viewer").await;
    let data = &answer["data"];
    milestones[0] = advanced["data"]["done"].clone();
    milestones[1] = advanced["data"]["current"].clone();
    let report = &submitted["report"];
    // The agent writes, newest first, as the journal recorded them.
    let events = env.events("project=alpha").await;
    let agent_writes: Vec<Value> = events
        .iter()
        .filter(|e| e["actor"]["kind"] == "via_agent")
        .take(10)
        .map(|e| {
            json!({
                "event_id": e["id"], "op": e["op"], "target": e["target"],
                "user_id": e["actor"]["user_id"], "agent_name": e["actor"]["agent_name"],
                "status": e["status"], "at": e["created_at"],
            })
        })
        .collect();
    let ops: Vec<&str> = agent_writes
        .iter()
        .map(|w| w["op"].as_str().unwrap())
        .collect();
    assert_eq!(
        ops,
        [
            "nc_write",
            "advance_milestone",
            "update_report_status",
            "update_report_status",
            "update_report_status",
            "create_meeting",
            "create_meeting",
            "create_meeting"
        ],
        "{events:?}"
    );
    let member = |user: &str, name: Value, role: &str| json!({"user_id": user, "display_name": name, "role": role});
    let expected = json!({
        "meta": without(meta["data"].clone(), &["changed", "event_id"]),
        "milestones": milestones,
        "current_milestone": 2,
        "upcoming_meetings": upcoming,
        "reports": {
            "draft": 0, "submitted": 1, "approved": 1, "rejected": 0,
            "awaiting_approval": [{
                "report_id": waiting, "title": "Week 2", "kind": "weekly",
                "period_start": report["period_start"], "period_end": report["period_end"],
                "version": 2, "updated_at": report["updated_at"],
            }],
        },
        "members": {
            "owners": [member("u-owner", Value::Null, "owner")],
            "admins": [member("u-admin", json!("Ada Admin"), "admin")],
            "members": [member(USER, Value::Null, "member")],
            "viewers": [member("u-viewer", Value::Null, "viewer")],
        },
        "acting_role": "viewer",
        "recent_agent_writes": agent_writes,
        "file_writes_enabled": true,
    });
    assert_eq!(
        data,
        &expected,
        "{}",
        serde_json::to_string_pretty(data).unwrap()
    );
    assert_eq!(data["meta"]["status"], "active");
    let message = answer["message"].as_str().unwrap();
    assert!(
        message.contains("milestone 2 of 3 \"Phase 2\" current")
            && message.contains("1 report(s) waiting"),
        "{message}"
    );

    // The kill switch shows; more than ten writes show the last ten.
    env.set_writes_enabled(false).await;
    for i in 0..3 {
        biz(
            &env,
            USER,
            "create_meeting",
            json!({"title": format!("Extra {i}"), "starts_at": at(30, 9), "ends_at": at(30, 10)}),
        )
        .await;
    }
    let later = overview(&env, USER).await;
    assert_eq!(later["data"]["file_writes_enabled"], false);
    assert_eq!(later["data"]["acting_role"], "member");
    let recent = later["data"]["recent_agent_writes"].as_array().unwrap();
    assert_eq!(recent.len(), 10);
    assert_eq!(recent[0]["op"], "create_meeting");
    assert_eq!(recent[3]["op"], "nc_write");
    assert_eq!(
        later["data"]["upcoming_meetings"], data["upcoming_meetings"],
        "meetings 30 days ahead are not upcoming"
    );

    // Another project's overview shows none of this.
    let beta: ToolResponse<Value> = env
        .harness
        .as_identity(Identity::new(
            UserId::parse(USER).unwrap(),
            AgentName::parse(BETA).unwrap(),
            ThreadId::parse(THREAD).unwrap(),
        ))
        .get(ProjectOp::Overview.path())
        .await;
    let beta = serde_json::to_value(&beta).unwrap();
    assert_eq!(beta["success"], true, "{beta}");
    assert_eq!(beta["data"]["meta"]["slug"], "beta");
    assert_eq!(beta["data"]["recent_agent_writes"], json!([]));
    assert_eq!(beta["data"]["milestones"], json!([]));
    env.stop().await;
}

#[tokio::test]
async fn advancing_is_for_managers_stale_is_a_conflict_and_a_revert_restores_milestone_and_status()
{
    let Some(env) = NcEnv::start().await else {
        return;
    };
    managers_and_viewer(&env).await;
    let (status, meta) = env
        .admin(
            "PUT",
            "/admin/projects/alpha/meta",
            Some(json!({"user_id": "op-1", "status": "active"})),
        )
        .await;
    assert_eq!(status, 200, "{meta}");
    let before = milestones(&env, 2).await;

    // Nobody below admin advances, and a non-member never does.
    for user in [USER, "u-viewer", "u-stranger"] {
        let (status, refused) = advance(&env, user, 1).await;
        assert_eq!(
            (status, code(&refused)),
            (403, "permission_denied"),
            "{user}: {refused}"
        );
        assert!(
            refused["message"].as_str().unwrap().contains(user),
            "{refused}"
        );
    }
    // A stale if_current names the current one, and changes nothing.
    let (status, stale) = advance(&env, "u-admin", 2).await;
    assert_eq!((status, code(&stale)), (409, "conflict"), "{stale}");
    assert!(
        stale["message"]
            .as_str()
            .unwrap()
            .contains("milestone 1 \"Phase 1\" is current, not 2"),
        "{stale}"
    );
    assert_eq!(stale["data"]["current"], 1);
    assert!(
        stale["suggested_action"]
            .as_str()
            .unwrap()
            .contains("if_current: 1")
    );
    let (status, zero) = advance(&env, "u-admin", 0).await;
    assert_eq!((status, code(&zero)), (422, "validation_error"), "{zero}");

    // Admin: 1 done, 2 current.
    let (status, first) = advance(&env, "u-admin", 1).await;
    assert_eq!(status, 200, "{first}");
    let data = &first["data"];
    assert_eq!(data["done"]["seq"], 1);
    assert_eq!(data["done"]["status"], "done");
    assert_eq!(data["done"]["closed_by"], "u-admin");
    assert_eq!(data["current"]["seq"], 2);
    assert_eq!(data["current"]["status"], "current");
    assert_eq!(data["project_status"], "active");
    // Owner: the last one done completes the project.
    let (status, last) = advance(&env, "u-owner", 2).await;
    assert_eq!(status, 200, "{last}");
    assert_eq!(last["data"]["current"], Value::Null);
    assert_eq!(last["data"]["project_status"], "completed");
    assert!(
        last["message"]
            .as_str()
            .unwrap()
            .contains("the project is now completed"),
        "{last}"
    );
    let view = overview(&env, USER).await;
    assert_eq!(view["data"]["meta"]["status"], "completed");
    assert_eq!(view["data"]["current_milestone"], Value::Null);
    let (status, nothing) = advance(&env, "u-owner", 2).await;
    assert_eq!((status, code(&nothing)), (409, "conflict"), "{nothing}");
    assert!(
        nothing["message"]
            .as_str()
            .unwrap()
            .contains("all 2 milestones are done"),
        "{nothing}"
    );

    // Each advance is one event by the agent; reverting the last one
    // brings back milestone 2 as current and the project's status.
    let events = env.events("project=alpha").await;
    let advances: Vec<&Value> = events
        .iter()
        .filter(|e| e["op"] == "advance_milestone")
        .collect();
    assert_eq!(advances.len(), 2, "{events:?}");
    assert!(
        advances
            .iter()
            .all(|e| e["actor"]["kind"] == "via_agent" && e["status"] == "applied")
    );
    assert_eq!(advances[0]["target"], "milestone:2");
    let (status, reverted) = env.revert(last["data"]["event_id"].as_str().unwrap()).await;
    assert_eq!(status, 200, "{reverted}");
    let view = overview(&env, USER).await;
    assert_eq!(view["data"]["meta"]["status"], "active");
    assert_eq!(view["data"]["current_milestone"], 2);
    assert_eq!(view["data"]["milestones"][0], data["done"]);
    assert_eq!(view["data"]["milestones"][1], data["current"]);
    let (status, reverted) = env
        .revert(first["data"]["event_id"].as_str().unwrap())
        .await;
    assert_eq!(status, 200, "{reverted}");
    let view = overview(&env, USER).await;
    assert_eq!(
        view["data"]["milestones"],
        json!(before),
        "back as the operator set them"
    );
    assert_eq!(view["data"]["current_milestone"], 1);

    // Each path answers its own method only.
    let (status, wrong) = call(
        &env,
        "u-admin",
        ProjectOp::AdvanceMilestone.path(),
        "GET",
        json!({}),
    )
    .await;
    assert_eq!(
        (status, code(&wrong)),
        (405, "method_not_allowed"),
        "{wrong}"
    );
    let (status, wrong) = call(&env, USER, ProjectOp::Overview.path(), "POST", json!({})).await;
    assert_eq!(
        (status, code(&wrong)),
        (405, "method_not_allowed"),
        "{wrong}"
    );
    env.stop().await;
}

#[tokio::test]
async fn the_statement_of_work_is_what_the_operator_wrote_with_the_milestones_criteria() {
    let Some(env) = NcEnv::start().await else {
        return;
    };
    let (status, empty) = call(&env, USER, ProjectOp::Sow.path(), "GET", json!({})).await;
    assert_eq!(status, 200, "{empty}");
    assert_eq!(empty["data"]["summary"], "");
    assert_eq!(empty["data"]["deliverables"], json!([]));
    assert!(
        empty["message"]
            .as_str()
            .unwrap()
            .contains("no statement of work"),
        "{empty}"
    );

    milestones(&env, 2).await;
    let sow = json!({
        "user_id": "op-1",
        "summary": "Ship the **pilot**.",
        "deliverables": [
            {"title": "Spec", "description": "What we build.", "milestone": 1},
            {"title": "Handbook", "description": ""},
        ],
    });
    let (status, unknown) = env
        .admin(
            "PUT",
            "/admin/projects/alpha/sow",
            Some(json!({"user_id": "op-1", "deliverables": [{"title": "X", "milestone": 9}]})),
        )
        .await;
    assert_eq!(
        (status, code(&unknown)),
        (422, "validation_error"),
        "{unknown}"
    );
    assert!(
        unknown["message"]
            .as_str()
            .unwrap()
            .contains("deliverables[0].milestone"),
        "{unknown}"
    );
    let (status, written) = env
        .admin("PUT", "/admin/projects/alpha/sow", Some(sow.clone()))
        .await;
    assert_eq!(status, 200, "{written}");
    assert_eq!(written["data"]["changed"], true);
    let (status, again) = env
        .admin("PUT", "/admin/projects/alpha/sow", Some(sow))
        .await;
    assert_eq!(
        (status, &again["data"]["changed"]),
        (200, &json!(false)),
        "{again}"
    );

    let (status, read) = call(&env, "u-1", ProjectOp::Sow.path(), "GET", json!({})).await;
    assert_eq!(status, 200, "{read}");
    assert_eq!(
        read["data"],
        json!({
            "summary": "Ship the **pilot**.",
            "deliverables": [
                {"title": "Spec", "description": "What we build.", "milestone": 1},
                {"title": "Handbook", "description": ""},
            ],
            "milestones": [
                {"seq": 1, "title": "Phase 1", "status": "current",
                 "due_date": (Utc::now() + TimeDelta::days(10)).date_naive(), "acceptance_criteria": ["criterion 1"]},
                {"seq": 2, "title": "Phase 2", "status": "planned",
                 "due_date": (Utc::now() + TimeDelta::days(20)).date_naive(), "acceptance_criteria": ["criterion 2"]},
            ],
            "updated_at": written["data"]["updated_at"],
        })
    );
    // The write is an event like any other: reverting it empties the
    // statement again.
    let (status, reverted) = env
        .revert(written["data"]["event_id"].as_str().unwrap())
        .await;
    assert_eq!(status, 200, "{reverted}");
    let (_, back) = call(&env, USER, ProjectOp::Sow.path(), "GET", json!({})).await;
    assert_eq!(back["data"]["summary"], "");
    assert_eq!(back["data"]["deliverables"], json!([]));
    env.stop().await;
}

/// The engine calls the overview while it builds a prompt: before any
/// agent-run context exists. The explicit identity serves that path in
/// every form — async, blocking from a plain thread, blocking from code
/// running inside a runtime — and the ambient form without a context
/// refuses without sending anything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_harness_serves_the_overview_at_prompt_build_time_in_every_form() {
    let Some(env) = NcEnv::start().await else {
        return;
    };
    // Async, explicit identity, no with_identity around it.
    let answer = env
        .harness
        .as_identity(identity(USER))
        .project_overview()
        .await;
    let data = answer
        .data()
        .unwrap_or_else(|| panic!("{}", answer.message()));
    assert_eq!(data.meta.slug, "alpha");
    // Async, ambient identity missing: nothing is sent.
    let refused = env.harness.project_overview().await;
    assert_eq!(refused.error_code(), Some(ErrorCode::InternalError));
    assert!(
        refused.message().contains("no request was sent"),
        "{}",
        refused.message()
    );

    let config = env.harness.config().clone();
    let blocking = acdm_harness_client::blocking::BlockingClient::new(config).unwrap();
    // Blocking, from a plain thread with no runtime.
    let from_thread = std::thread::scope(|scope| {
        scope
            .spawn(|| blocking.as_identity(identity(USER)).project_overview())
            .join()
            .unwrap()
    });
    assert_eq!(
        from_thread.data().map(|d| d.meta.slug.as_str()),
        Some("alpha"),
        "{}",
        from_thread.message()
    );
    // Blocking, from synchronous code running inside this runtime.
    let inside = blocking.as_identity(identity(USER)).project_overview();
    assert_eq!(inside.data(), Some(data), "{}", inside.message());
    // And inside a current-thread runtime of the caller's own.
    let own = std::thread::scope(|scope| {
        scope
            .spawn(|| {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap()
                    .block_on(async { blocking.as_identity(identity(USER)).project_sow() })
            })
            .join()
            .unwrap()
    });
    assert!(own.is_success(), "{}", own.message());
    // The blocking ambient form: the thread's identity, then none.
    let ambient = acdm_harness_client::blocking::with_identity(identity(USER), || {
        blocking.project_overview()
    });
    assert!(ambient.is_success(), "{}", ambient.message());
    let none = blocking.project_overview();
    assert_eq!(none.error_code(), Some(ErrorCode::InternalError));
    tokio::time::timeout(Duration::from_secs(30), env.stop())
        .await
        .unwrap();
}

/// The overview is kept between calls, but never past a change: a write
/// made behind this server's back (as another replica or the CLI would,
/// straight through the journal into the shared database), a role change
/// (provisioning, not an event) and the kill switch all show in the very
/// next overview.
#[tokio::test]
async fn a_kept_overview_never_outlives_a_change_made_anywhere() {
    let Some(env) = NcEnv::start().await else {
        return;
    };
    let first = overview(&env, USER).await;
    assert_eq!(first["data"]["reports"]["draft"], 0);
    let again = overview(&env, USER).await;
    assert_eq!(
        first["data"], again["data"],
        "nothing changed, same overview"
    );

    seed_report(&env, "alpha", "Behind the back", ReportStatus::Draft).await;
    let after = overview(&env, USER).await;
    assert_eq!(after["data"]["reports"]["draft"], 1, "{after}");

    add_member(&env, "alpha", "u-new", "admin").await;
    let after = overview(&env, USER).await;
    let admins: Vec<&str> = after["data"]["members"]["admins"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["user_id"].as_str().unwrap())
        .collect();
    assert_eq!(admins, ["u-new"], "{after}");

    env.set_writes_enabled(false).await;
    let after = overview(&env, USER).await;
    assert_eq!(after["data"]["file_writes_enabled"], false);
    env.stop().await;
}
