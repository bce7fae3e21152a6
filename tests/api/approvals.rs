//! Human approval of risky agent writes, over real sockets and the real
//! WebDAV server: a write the policy names does not run but asks
//! (`approval_required` with a preview and each target's etag or
//! version); a person with authority decides it through the operator API
//! (four eyes, owners and admins only); the agent's second call runs once,
//! recorded with who approved it; every other use is refused with its own
//! code; a target changed after the preview voids it; another project's
//! agent never learns it exists. The policy per project, dry runs, and
//! roles and the kill switch before approval.

use acdm_core::{AgentName, Identity, ThreadId, ToolResponse, UserId};
use serde_json::{Value, json};

use crate::business::add_member;
use crate::dav::{ALPHA, BETA, DatabaseChoice, NcEnv, THREAD, USER, assert_envelope, code};
use crate::helpers::Req;

const OPS: &str = "nc.delete,nc.write,business.delete_meeting,project.milestone/advance";

fn settings() -> Vec<(&'static str, String)> {
    vec![("ACDM_APPROVAL_REQUIRED_OPS", OPS.to_owned())]
}

/// The suite's service on the embedded database.
async fn env() -> Option<NcEnv> {
    provisioned(NcEnv::start_with(settings()).await?).await
}

/// The suite's service on `database`.
async fn env_on(database: DatabaseChoice) -> Option<NcEnv> {
    provisioned(database.start().await?).await
}

/// Alpha's owner, admin and viewer, and beta's owner.
async fn provisioned(env: NcEnv) -> Option<NcEnv> {
    for (user, role) in [
        ("u-owner", "owner"),
        ("u-admin", "admin"),
        ("u-viewer", "viewer"),
    ] {
        add_member(&env, "alpha", user, role).await;
    }
    // Beta's owner: an owner, but of another project.
    add_member(&env, "beta", "u-beta-owner", "owner").await;
    Some(env)
}

/// An agent call as `user` through `agent`, through the harness client.
async fn call(env: &NcEnv, user: &str, agent: &str, path: &str, body: &Value) -> (u16, Value) {
    let identity = Identity::new(
        UserId::parse(user).unwrap(),
        AgentName::parse(agent).unwrap(),
        ThreadId::parse(THREAD).unwrap(),
    );
    let answer: ToolResponse<Value> = env.harness.as_identity(identity).call(path, body).await;
    let value = serde_json::to_value(&answer).unwrap();
    assert_envelope(answer.http_status(), &value, &format!("{path} {body}"));
    (answer.http_status(), value)
}

fn with_approval(body: &Value, id: &str) -> Value {
    let mut body = body.clone();
    body["approval_id"] = json!(id);
    body
}

async fn decide(env: &NcEnv, id: &str, verb: &str, body: Value) -> (u16, Value) {
    env.admin("POST", &format!("/admin/approvals/{id}/{verb}"), Some(body))
        .await
}

#[tokio::test]
async fn a_delete_waits_for_a_person_and_runs_once_as_approved() {
    for database in NcEnv::on_each_database(settings()).await {
        let name = database.name;
        let Some(env) = env_on(database).await else {
            return;
        };
        eprintln!("on {name}");
        let delete = json!({"rel_path": "docs/plan.md", "dry_run": false});
        let before = env.disk_read("Projects/Alpha/docs/plan.md").unwrap();

        // A dry run never needs approval, and lists each item's etag.
        let (status, dry) = env
            .nc(ALPHA, "delete", json!({"rel_path": "docs/plan.md"}))
            .await;
        assert_eq!(status, 200, "{dry}");
        let etag = dry["data"]["would_delete"][0]["etag"].clone();
        assert!(etag.is_string(), "the dry run lists the etag: {dry}");

        // The real call asks, and nothing is written.
        let mark = env.recorder().mark();
        let (status, asked) = env.nc(ALPHA, "delete", delete.clone()).await;
        assert_eq!(
            (status, code(&asked)),
            (403, "approval_required"),
            "{asked}"
        );
        let data = &asked["data"];
        let id = data["approval_id"].as_str().unwrap().to_owned();
        assert_eq!(data["status"], "pending");
        assert!(data["expires_at"].is_string(), "{asked}");
        assert_eq!(
            data["preview"]["would_delete"][0]["rel_path"],
            "docs/plan.md"
        );
        assert_eq!(data["preview"]["would_delete"][0]["etag"], etag, "{asked}");
        assert_eq!(data["preview"]["targets"][0]["version"], etag, "{asked}");
        let action = asked["suggested_action"].as_str().unwrap();
        assert!(
            action.contains(&id) && action.contains("approval_id"),
            "{action}"
        );
        assert!(env.recorder().since(mark).iter().all(|r| !r.is_write()));
        assert_eq!(
            env.disk_read("Projects/Alpha/docs/plan.md").unwrap(),
            before
        );

        // Asked again before anyone decided: the same request, not a second.
        let (_, again) = env.nc(ALPHA, "delete", delete.clone()).await;
        assert_eq!(again["data"]["approval_id"], id.as_str(), "{again}");

        // Presented before anyone decided: pending.
        let approved_call = with_approval(&delete, &id);
        let (status, refused) = env.nc(ALPHA, "delete", approved_call.clone()).await;
        assert_eq!(
            (status, code(&refused)),
            (403, "approval_pending"),
            "{refused}"
        );

        // The operator sees it, with the preview.
        let (status, listed) = env
            .admin("GET", "/admin/approvals?status=pending&project=alpha", None)
            .await;
        assert_eq!(status, 200, "{listed}");
        let found = &listed["data"]["approvals"][0];
        assert_eq!(found["approval_id"], id.as_str(), "{listed}");
        assert_eq!(found["op"], "nc.delete");
        assert_eq!(found["requested_by"], USER);
        assert_eq!(found["agent"], ALPHA);
        assert_eq!(found["current_status"], "pending");

        // Who may not decide: the requester (four eyes), a viewer, a
        // non-member, an owner of another project.
        for (user, rule) in [
            (USER, "four-eyes"),
            ("u-viewer", "owners and admins"),
            ("u-stranger", "owners and admins"),
            ("u-beta-owner", "owners and admins"),
        ] {
            let (status, refused) = decide(&env, &id, "approve", json!({"user_id": user})).await;
            assert_eq!(
                (status, code(&refused)),
                (403, "permission_denied"),
                "{user}: {refused}"
            );
            assert!(
                refused["message"].as_str().unwrap().contains(rule),
                "{user}: {refused}"
            );
        }
        let (status, approved) = decide(
            &env,
            &id,
            "approve",
            json!({"user_id": "u-owner", "note": "ok for Monday"}),
        )
        .await;
        assert_eq!(status, 200, "{approved}");
        assert_eq!(approved["data"]["status"], "approved");
        assert_eq!(approved["data"]["decided_by"], "u-owner");
        // Decided once: a second decision is a conflict.
        let (status, again) = decide(
            &env,
            &id,
            "reject",
            json!({"user_id": "u-admin", "reason": "late"}),
        )
        .await;
        assert_eq!((status, code(&again)), (409, "conflict"), "{again}");

        // Other arguments, another user, another agent's project: refused,
        // nothing written.
        let mark = env.recorder().mark();
        let other_file = with_approval(&json!({"rel_path": "readme.md", "dry_run": false}), &id);
        let (status, refused) = env.nc(ALPHA, "delete", other_file).await;
        assert_eq!(
            (status, code(&refused)),
            (403, "approval_mismatch"),
            "{refused}"
        );
        assert!(
            refused["message"].as_str().unwrap().contains("rel_path"),
            "{refused}"
        );
        let (status, refused) = call(
            &env,
            "u-admin",
            ALPHA,
            "agent-tools/nc/delete",
            &approved_call,
        )
        .await;
        assert_eq!(
            (status, code(&refused)),
            (403, "approval_mismatch"),
            "{refused}"
        );
        // Another project's agent: as if the approval did not exist.
        let (status, refused) = env.nc(BETA, "delete", approved_call.clone()).await;
        assert_eq!((status, code(&refused)), (404, "not_found"), "{refused}");
        let unknown_id = acdm_core::approval::ApprovalId::new_random().to_string();
        let (_, unknown) = env
            .nc(BETA, "delete", with_approval(&delete, &unknown_id))
            .await;
        assert_eq!(
            refused["message"].as_str().unwrap().replace(&id, "ID"),
            unknown["message"]
                .as_str()
                .unwrap()
                .replace(&unknown_id, "ID"),
            "another project's approval reads as an unknown one"
        );
        assert!(env.recorder().since(mark).iter().all(|r| !r.is_write()));

        // The approved call runs, once, recorded with who approved it.
        let (status, done) = env.nc(ALPHA, "delete", approved_call.clone()).await;
        assert_eq!(status, 200, "{done}");
        assert!(env.disk_read("Projects/Alpha/docs/plan.md").is_none());
        let event = env.event(done["data"]["event_id"].as_str().unwrap()).await;
        assert_eq!(
            event["params"]["approval"]["approval_id"],
            id.as_str(),
            "{event}"
        );
        assert_eq!(
            event["params"]["approval"]["approved_by"], "u-owner",
            "{event}"
        );
        let (status, refused) = env.nc(ALPHA, "delete", approved_call).await;
        assert_eq!(
            (status, code(&refused)),
            (409, "approval_used"),
            "{refused}"
        );
        let (_, shown) = env
            .admin("GET", &format!("/admin/approvals/{id}"), None)
            .await;
        assert_eq!(shown["data"]["status"], "used", "{shown}");
        assert_eq!(shown["data"]["event_id"], done["data"]["event_id"]);
        env.stop().await;
    }
}

#[tokio::test]
async fn a_target_changed_after_the_preview_voids_the_approval() {
    for database in NcEnv::on_each_database(settings()).await {
        let name = database.name;
        let Some(env) = env_on(database).await else {
            return;
        };
        eprintln!("on {name}");
        let write = json!({"rel_path": "docs/plan.md", "content": "the agent's plan\n"});
        let (status, asked) = env.nc(ALPHA, "write", write.clone()).await;
        assert_eq!(
            (status, code(&asked)),
            (403, "approval_required"),
            "{asked}"
        );
        let preview = &asked["data"]["preview"];
        assert_eq!(preview["exists"], true, "{asked}");
        assert_eq!(preview["new_text"], "the agent's plan\n");
        let id = asked["data"]["approval_id"].as_str().unwrap().to_owned();
        let (status, _) = decide(&env, &id, "approve", json!({"user_id": "u-admin"})).await;
        assert_eq!(status, 200);

        // Someone edits the file after the approver looked.
        std::fs::write(env.disk("Projects/Alpha/docs/plan.md"), "a person's edit\n").unwrap();
        let mark = env.recorder().mark();
        let approved_call = with_approval(&write, &id);
        let (status, refused) = env.nc(ALPHA, "write", approved_call.clone()).await;
        assert_eq!((status, code(&refused)), (409, "conflict"), "{refused}");
        assert!(
            refused["message"]
                .as_str()
                .unwrap()
                .contains("docs/plan.md"),
            "{refused}"
        );
        assert!(
            env.recorder().since(mark).iter().all(|r| !r.is_write()),
            "nothing written"
        );
        assert_eq!(
            env.disk_read("Projects/Alpha/docs/plan.md").unwrap(),
            b"a person's edit\n"
        );
        // Void for good, even if the file went back as it was.
        let (_, shown) = env
            .admin("GET", &format!("/admin/approvals/{id}"), None)
            .await;
        assert_eq!(shown["data"]["status"], "voided", "{shown}");
        let (status, refused) = env.nc(ALPHA, "write", approved_call).await;
        assert_eq!((status, code(&refused)), (409, "conflict"), "{refused}");
        env.stop().await;
    }
}

#[tokio::test]
async fn a_rejection_says_why_and_roles_and_the_kill_switch_come_first() {
    for database in NcEnv::on_each_database(settings()).await {
        let name = database.name;
        let Some(env) = env_on(database).await else {
            return;
        };
        eprintln!("on {name}");
        let delete = json!({"rel_path": "readme.md", "dry_run": false});
        // A viewer may not delete at all: refused by role, nothing asked.
        let (status, refused) =
            call(&env, "u-viewer", ALPHA, "agent-tools/nc/delete", &delete).await;
        assert_eq!(
            (status, code(&refused)),
            (403, "permission_denied"),
            "{refused}"
        );
        // The kill switch answers before approval.
        env.set_writes_enabled(false).await;
        let (status, refused) = env.nc(ALPHA, "delete", delete.clone()).await;
        assert_eq!(
            (status, code(&refused)),
            (403, "kill_switch_off"),
            "{refused}"
        );
        env.set_writes_enabled(true).await;
        let (_, pending) = env.admin("GET", "/admin/approvals", None).await;
        assert_eq!(
            pending["data"]["approvals"],
            json!([]),
            "nothing was asked: {pending}"
        );

        let (status, asked) = env.nc(ALPHA, "delete", delete.clone()).await;
        assert_eq!(
            (status, code(&asked)),
            (403, "approval_required"),
            "{asked}"
        );
        let id = asked["data"]["approval_id"].as_str().unwrap().to_owned();
        // A rejection needs its reason.
        let (status, refused) = decide(
            &env,
            &id,
            "reject",
            json!({"user_id": "u-admin", "reason": "  "}),
        )
        .await;
        assert_eq!(
            (status, code(&refused)),
            (422, "validation_error"),
            "{refused}"
        );
        let (status, _) = decide(
            &env,
            &id,
            "reject",
            json!({"user_id": "u-admin", "reason": "keep it until the audit"}),
        )
        .await;
        assert_eq!(status, 200);
        let (status, refused) = env.nc(ALPHA, "delete", with_approval(&delete, &id)).await;
        assert_eq!(
            (status, code(&refused)),
            (403, "approval_rejected"),
            "{refused}"
        );
        assert!(
            refused["message"]
                .as_str()
                .unwrap()
                .contains("keep it until the audit"),
            "{refused}"
        );
        assert!(env.disk_read("Projects/Alpha/readme.md").is_some());
        // A malformed id is a validation error, an unknown one not found.
        let (status, refused) = env
            .nc(ALPHA, "delete", with_approval(&delete, "nope"))
            .await;
        assert_eq!(
            (status, code(&refused)),
            (422, "validation_error"),
            "{refused}"
        );
        env.stop().await;
    }
}

#[tokio::test]
async fn a_project_has_its_own_policy_until_it_is_cleared() {
    for database in NcEnv::on_each_database(settings()).await {
        let name = database.name;
        let Some(env) = env_on(database).await else {
            return;
        };
        eprintln!("on {name}");
        let path = "/admin/projects/alpha/approval-policy";
        let (status, shown) = env.admin("GET", path, None).await;
        assert_eq!(status, 200, "{shown}");
        assert_eq!(shown["data"]["source"], "global");
        assert_eq!(
            shown["data"]["ops"],
            json!([
                "nc.write",
                "nc.delete",
                "business.delete_meeting",
                "project.milestone/advance"
            ])
        );
        let (status, refused) = env
            .admin("PUT", path, Some(json!({"ops": ["nc.delete", "nc.read"]})))
            .await;
        assert_eq!(
            (status, code(&refused)),
            (422, "validation_error"),
            "{refused}"
        );
        let (status, set) = env
            .admin("PUT", path, Some(json!({"ops": ["nc.move"]})))
            .await;
        assert_eq!(status, 200, "{set}");
        assert_eq!(
            set["data"],
            json!({"ops": ["nc.move"], "source": "project"})
        );

        // Now a delete runs at once, and a move asks.
        let (status, deleted) = env
            .nc(
                ALPHA,
                "delete",
                json!({"rel_path": "docs/sub/deep.txt", "dry_run": false}),
            )
            .await;
        assert_eq!(status, 200, "{deleted}");
        let (status, asked) = env
            .nc(
                ALPHA,
                "move",
                json!({"from_rel_path": "readme.md", "to_rel_path": "docs/readme.md"}),
            )
            .await;
        assert_eq!(
            (status, code(&asked)),
            (403, "approval_required"),
            "{asked}"
        );
        assert_eq!(
            asked["data"]["preview"]["targets"][1]["version"],
            Value::Null,
            "nothing at the target"
        );
        // Beta still follows the deployment's list.
        let (status, asked) = env
            .nc(
                BETA,
                "delete",
                json!({"rel_path": "secret.md", "dry_run": false}),
            )
            .await;
        assert_eq!(
            (status, code(&asked)),
            (403, "approval_required"),
            "{asked}"
        );

        let (status, cleared) = env.admin("DELETE", path, None).await;
        assert_eq!(status, 200, "{cleared}");
        assert_eq!(cleared["data"]["source"], "global");
        env.stop().await;
    }
}

#[tokio::test]
async fn business_and_project_writes_preview_what_they_would_change() {
    for database in NcEnv::on_each_database(settings()).await {
        let name = database.name;
        let Some(env) = env_on(database).await else {
            return;
        };
        eprintln!("on {name}");
        // A meeting, made by the agent (creating needs no approval here).
        let (status, created) = call(
            &env,
            USER,
            ALPHA,
            "agent-tools/business/create_meeting",
            &json!({"title": "Kick-off", "starts_at": "2030-01-07T09:00:00Z", "ends_at": "2030-01-07T10:00:00Z"}),
        )
        .await;
        assert_eq!(status, 200, "{created}");
        let meeting = created["data"]["meeting"]["meeting_id"]
            .as_str()
            .unwrap()
            .to_owned();
        let delete = json!({"meeting_id": meeting, "dry_run": false});
        let (status, asked) = call(
            &env,
            "u-admin",
            ALPHA,
            "agent-tools/business/delete_meeting",
            &delete,
        )
        .await;
        assert_eq!(
            (status, code(&asked)),
            (403, "approval_required"),
            "{asked}"
        );
        let preview = &asked["data"]["preview"];
        assert_eq!(preview["meeting"]["title"], "Kick-off", "{asked}");
        assert_eq!(preview["meeting"]["version"], 1, "{asked}");
        assert_eq!(preview["files"], json!([]));
        let id = asked["data"]["approval_id"].as_str().unwrap().to_owned();
        let (status, _) = decide(&env, &id, "approve", json!({"user_id": "u-owner"})).await;
        assert_eq!(status, 200);
        let (status, deleted) = call(
            &env,
            "u-admin",
            ALPHA,
            "agent-tools/business/delete_meeting",
            &with_approval(&delete, &id),
        )
        .await;
        assert_eq!(status, 200, "{deleted}");

        // The milestone advance shows the current milestone and the project's
        // status; an impossible advance is refused at once, nobody is asked.
        for seq in 1..=2 {
            let (status, body) = env
                .admin(
                    "PUT",
                    &format!("/admin/projects/alpha/milestones/{seq}"),
                    Some(json!({
                        "user_id": "op-1",
                        "title": format!("Phase {seq}"),
                        "due_date": "2030-02-01",
                        "status": if seq == 1 { "current" } else { "planned" },
                        "acceptance_criteria": [],
                    })),
                )
                .await;
            assert_eq!(status, 200, "{body}");
        }
        let (status, refused) = call(
            &env,
            "u-owner",
            ALPHA,
            "agent-tools/project/milestone/advance",
            &json!({"if_current": 2}),
        )
        .await;
        assert_eq!((status, code(&refused)), (409, "conflict"), "{refused}");
        let advance = json!({"if_current": 1});
        let (status, asked) = call(
            &env,
            "u-owner",
            ALPHA,
            "agent-tools/project/milestone/advance",
            &advance,
        )
        .await;
        assert_eq!(
            (status, code(&asked)),
            (403, "approval_required"),
            "{asked}"
        );
        let preview = &asked["data"]["preview"];
        assert_eq!(preview["current"]["seq"], 1, "{asked}");
        assert_eq!(preview["next"]["seq"], 2, "{asked}");
        assert!(preview["project_status"].is_string(), "{asked}");
        let id = asked["data"]["approval_id"].as_str().unwrap().to_owned();
        let (status, _) = decide(&env, &id, "approve", json!({"user_id": "u-admin"})).await;
        assert_eq!(status, 200);
        let (status, advanced) = call(
            &env,
            "u-owner",
            ALPHA,
            "agent-tools/project/milestone/advance",
            &with_approval(&advance, &id),
        )
        .await;
        assert_eq!(status, 200, "{advanced}");
        env.stop().await;
    }
}

/// Moves approval `id`'s expiry to its creation: expired, as if its
/// lifetime had passed.
async fn expire(env: &NcEnv, id: &str) {
    let changed = env
        .execute_sql(&format!(
            "UPDATE approvals SET expires_at = created_at WHERE id = '{id}'"
        ))
        .await;
    assert_eq!(changed, 1, "approval {id}");
}

#[tokio::test]
async fn an_approval_past_its_lifetime_can_be_neither_decided_nor_used() {
    for database in NcEnv::on_each_database(settings()).await {
        let name = database.name;
        let Some(env) = env_on(database).await else {
            return;
        };
        eprintln!("on {name}");
        let delete = json!({"rel_path": "docs/plan.md", "dry_run": false});

        // Expired before anyone decided: too late to decide, and asking
        // again makes a new request.
        let (_, asked) = env.nc(ALPHA, "delete", delete.clone()).await;
        assert_eq!(code(&asked), "approval_required", "{asked}");
        let first = asked["data"]["approval_id"].as_str().unwrap().to_owned();
        expire(&env, &first).await;
        let (status, refused) =
            decide(&env, &first, "approve", json!({"user_id": "u-owner"})).await;
        assert_eq!((status, code(&refused)), (409, "conflict"), "{refused}");
        assert!(
            refused["message"].as_str().unwrap().contains("expired"),
            "{refused}"
        );
        let (status, refused) = env
            .nc(ALPHA, "delete", with_approval(&delete, &first))
            .await;
        assert_eq!(
            (status, code(&refused)),
            (410, "approval_expired"),
            "{refused}"
        );
        let (_, shown) = env
            .admin("GET", &format!("/admin/approvals/{first}"), None)
            .await;
        assert_eq!(shown["data"]["current_status"], "expired", "{shown}");
        let (_, listed) = env
            .admin("GET", "/admin/approvals?status=pending&project=alpha", None)
            .await;
        assert_eq!(listed["data"]["approvals"], json!([]), "{listed}");

        // Approved, then expired unused: refused, and nothing written.
        let (_, asked) = env.nc(ALPHA, "delete", delete.clone()).await;
        let second = asked["data"]["approval_id"].as_str().unwrap().to_owned();
        assert_ne!(second, first, "a new request");
        let (status, _) = decide(&env, &second, "approve", json!({"user_id": "u-owner"})).await;
        assert_eq!(status, 200);
        expire(&env, &second).await;
        let mark = env.recorder().mark();
        let (status, refused) = env
            .nc(ALPHA, "delete", with_approval(&delete, &second))
            .await;
        assert_eq!(
            (status, code(&refused)),
            (410, "approval_expired"),
            "{refused}"
        );
        assert!(refused["suggested_action"].is_string(), "{refused}");
        assert!(env.recorder().since(mark).iter().all(|r| !r.is_write()));
        assert!(env.disk_read("Projects/Alpha/docs/plan.md").is_some());
        env.stop().await;
    }
}

#[tokio::test]
async fn meeting_changes_and_file_removals_ask_when_the_policy_names_them() {
    for database in NcEnv::on_each_database(settings()).await {
        let name = database.name;
        let Some(env) = env_on(database).await else {
            return;
        };
        eprintln!("on {name}");
        let (status, _) = env
            .admin(
                "PUT",
                "/admin/projects/alpha/approval-policy",
                Some(json!({"ops": [
                    "business.update_meeting",
                    "business.attach_meeting_file",
                    "business.delete_meeting_file"
                ]})),
            )
            .await;
        assert_eq!(status, 200);
        let agent = |path: &str| format!("agent-tools/business/{path}");
        let (status, created) = call(
            &env,
            USER,
            ALPHA,
            &agent("create_meeting"),
            &json!({"title": "Design review", "starts_at": "2030-01-07T09:00:00Z", "ends_at": "2030-01-07T10:00:00Z"}),
        )
        .await;
        assert_eq!(status, 200, "{created}");
        let meeting = created["data"]["meeting"]["meeting_id"].clone();

        // Attaching asks; the preview names the meeting at its version.
        let attach = json!({"meeting_id": meeting, "name": "minutes.md", "content": "# Minutes\n"});
        let (status, asked) = call(&env, USER, ALPHA, &agent("attach_meeting_file"), &attach).await;
        assert_eq!(
            (status, code(&asked)),
            (403, "approval_required"),
            "{asked}"
        );
        let preview = &asked["data"]["preview"];
        assert_eq!(preview["name"], "minutes.md", "{asked}");
        assert_eq!(preview["targets"][0]["version"], 1, "{asked}");
        let id = asked["data"]["approval_id"].as_str().unwrap().to_owned();
        let (status, _) = decide(&env, &id, "approve", json!({"user_id": "u-owner"})).await;
        assert_eq!(status, 200);
        let (status, attached) = call(
            &env,
            USER,
            ALPHA,
            &agent("attach_meeting_file"),
            &with_approval(&attach, &id),
        )
        .await;
        assert_eq!(status, 200, "{attached}");
        let file = attached["data"]["file"]["file_id"].clone();
        let event = env
            .event(attached["data"]["event_id"].as_str().unwrap())
            .await;
        assert_eq!(
            event["params"]["approval"]["approval_id"],
            id.as_str(),
            "{event}"
        );

        // A change asks; the meeting changed after the preview (a person
        // renamed it): conflict, nothing written, the approval void.
        let (_, got) = call(
            &env,
            USER,
            ALPHA,
            &agent("get_meeting"),
            &json!({"meeting_id": meeting}),
        )
        .await;
        let version = got["data"]["meeting"]["version"].clone();
        let update = json!({"meeting_id": meeting, "if_version": version, "location": "Room 4"});
        let (status, asked) = call(&env, USER, ALPHA, &agent("update_meeting"), &update).await;
        assert_eq!(
            (status, code(&asked)),
            (403, "approval_required"),
            "{asked}"
        );
        assert_eq!(
            asked["data"]["preview"]["changes"]["location"], "Room 4",
            "{asked}"
        );
        let id = asked["data"]["approval_id"].as_str().unwrap().to_owned();
        let (status, _) = decide(&env, &id, "approve", json!({"user_id": "u-admin"})).await;
        assert_eq!(status, 200);
        let (status, renamed) = env
            .admin(
                "PUT",
                &format!(
                    "/admin/projects/alpha/meetings/{}",
                    meeting.as_str().unwrap()
                ),
                Some(json!({
                    "user_id": "u-owner",
                    "if_version": version,
                    "title": "Design review (moved)",
                    "starts_at": "2030-01-07T09:00:00Z",
                    "ends_at": "2030-01-07T10:00:00Z",
                })),
            )
            .await;
        assert_eq!(status, 200, "{renamed}");
        let (status, refused) = call(
            &env,
            USER,
            ALPHA,
            &agent("update_meeting"),
            &with_approval(&update, &id),
        )
        .await;
        assert_eq!((status, code(&refused)), (409, "conflict"), "{refused}");
        let (_, got) = call(
            &env,
            USER,
            ALPHA,
            &agent("get_meeting"),
            &json!({"meeting_id": meeting}),
        )
        .await;
        assert_ne!(got["data"]["meeting"]["location"], "Room 4", "{got}");
        let (_, shown) = env
            .admin("GET", &format!("/admin/approvals/{id}"), None)
            .await;
        assert_eq!(shown["data"]["status"], "voided", "{shown}");

        // Removing the file asks, shows the file with its etag, and runs once.
        let remove = json!({"meeting_id": meeting, "file_id": file});
        let (status, asked) = call(&env, USER, ALPHA, &agent("delete_meeting_file"), &remove).await;
        assert_eq!(
            (status, code(&asked)),
            (403, "approval_required"),
            "{asked}"
        );
        assert_eq!(
            asked["data"]["preview"]["file"]["name"], "minutes.md",
            "{asked}"
        );
        assert!(
            asked["data"]["preview"]["targets"][0]["version"]["etag"].is_string(),
            "{asked}"
        );
        let id = asked["data"]["approval_id"].as_str().unwrap().to_owned();
        // Four eyes: the user who asked cannot approve it.
        add_member(&env, "alpha", USER, "owner").await;
        let (status, refused) = decide(&env, &id, "approve", json!({"user_id": USER})).await;
        assert_eq!(
            (status, code(&refused)),
            (403, "permission_denied"),
            "{refused}"
        );
        let (status, _) = decide(&env, &id, "approve", json!({"user_id": "u-owner"})).await;
        assert_eq!(status, 200);
        let (status, removed) = call(
            &env,
            USER,
            ALPHA,
            &agent("delete_meeting_file"),
            &with_approval(&remove, &id),
        )
        .await;
        assert_eq!(status, 200, "{removed}");
        let (status, again) = call(
            &env,
            USER,
            ALPHA,
            &agent("delete_meeting_file"),
            &with_approval(&remove, &id),
        )
        .await;
        assert_eq!((status, code(&again)), (409, "approval_used"), "{again}");
        env.stop().await;
    }
}

/// A receiver of notifications on loopback: records each POST and answers
/// with the next status of its script (then 200).
struct Receiver {
    url: String,
    got: tokio::sync::mpsc::UnboundedReceiver<(axum::http::HeaderMap, String)>,
}

async fn receiver(script: Vec<u16>) -> Receiver {
    use std::sync::{Arc, Mutex};
    let (tx, got) = tokio::sync::mpsc::unbounded_channel();
    let script = Arc::new(Mutex::new(script.into_iter()));
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |headers: axum::http::HeaderMap, body: String| {
            let tx = tx.clone();
            let script = script.clone();
            async move {
                let _ = tx.send((headers, body));
                let status = script.lock().unwrap().next().unwrap_or(200);
                axum::http::StatusCode::from_u16(status).unwrap()
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!(
        "http://{}/hook?key=receivers-own",
        listener.local_addr().unwrap()
    );
    tokio::spawn(async move { axum::serve(listener, app).await });
    Receiver { url, got }
}

impl Receiver {
    async fn next(&mut self) -> (axum::http::HeaderMap, String) {
        tokio::time::timeout(std::time::Duration::from_secs(30), self.got.recv())
            .await
            .expect("a notification within 30 s")
            .unwrap()
    }
}

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// Checks a message's signature as a receiver would (Standard Webhooks).
fn signed_by_secret(headers: &axum::http::HeaderMap, body: &str) -> bool {
    use base64::Engine as _;
    use hmac::Mac as _;
    let header = |name: &str| headers.get(name).unwrap().to_str().unwrap().to_owned();
    let key = base64::engine::general_purpose::STANDARD
        .decode(SECRET.strip_prefix("whsec_").unwrap())
        .unwrap();
    let mut mac = <hmac::Hmac<sha2::Sha256> as hmac::Mac>::new_from_slice(&key).unwrap();
    mac.update(
        format!(
            "{}.{}.{body}",
            header("webhook-id"),
            header("webhook-timestamp")
        )
        .as_bytes(),
    );
    let expected = format!(
        "v1,{}",
        base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
    );
    header("webhook-signature")
        .split(' ')
        .any(|s| s == expected)
}

#[tokio::test]
async fn a_new_request_is_posted_signed_at_once_and_retried_until_taken() {
    // The first attempt is refused (503), the retry taken.
    let mut hook = receiver(vec![503]).await;
    let Some(env) = NcEnv::start_with(vec![
        ("ACDM_APPROVAL_REQUIRED_OPS", OPS.to_owned()),
        ("ACDM_APPROVAL_WEBHOOK_URL", hook.url.clone()),
        ("ACDM_APPROVAL_WEBHOOK_SECRET", SECRET.to_owned()),
        ("ACDM_PUBLIC_URL", "https://acdm.example.com".to_owned()),
    ])
    .await
    else {
        return;
    };
    let (status, asked) = env
        .nc(
            ALPHA,
            "delete",
            json!({"rel_path": "readme.md", "dry_run": false}),
        )
        .await;
    assert_eq!(
        (status, code(&asked)),
        (403, "approval_required"),
        "{asked}"
    );
    let id = asked["data"]["approval_id"].as_str().unwrap().to_owned();

    let (headers, body) = hook.next().await;
    assert!(signed_by_secret(&headers, &body), "{headers:?}");
    let message: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(message["approval_id"], id.as_str());
    assert_eq!(message["project"], "alpha");
    assert_eq!(message["op"], "nc.delete");
    assert_eq!(message["requested_by"], USER);
    assert_eq!(message["agent"], ALPHA);
    assert_eq!(message["thread"], THREAD);
    assert_eq!(message["preview"], asked["data"]["preview"]);
    assert_eq!(message["expires_at"], asked["data"]["expires_at"]);
    assert_eq!(
        message["console_url"],
        format!("https://acdm.example.com/console/approvals/{id}")
    );
    let first_id = headers.get("webhook-id").unwrap().clone();

    // Retried with the same id, until the receiver takes it.
    let (headers, retried) = hook.next().await;
    assert_eq!(
        headers.get("webhook-id").unwrap(),
        &first_id,
        "the same message"
    );
    assert_eq!(retried, body);
    assert!(signed_by_secret(&headers, &retried));
    // Delivered once: the failing count went back to zero, and /metrics says so.
    let metrics = loop {
        let text = env.app.send(Req::get("/metrics")).await.body;
        if text.contains("acdm_approval_notifications_delivered 1") {
            break text;
        }
        tokio::task::yield_now().await;
    };
    assert!(
        metrics.contains("acdm_approval_notifications_waiting 0"),
        "{metrics}"
    );
    assert!(
        metrics.contains("acdm_approval_notification_failures 1"),
        "{metrics}"
    );
    env.stop().await;
}

/// Another server on the same database and the same WebDAV server (a
/// replica).
async fn replica(env: &NcEnv) -> crate::helpers::TestApp {
    crate::helpers::spawn_app(crate::helpers::Options {
        extra_env: vec![
            ("NEXTCLOUD_URL", format!("http://{}/", env.proxy.addr)),
            ("NEXTCLOUD_USER", crate::dav::DAV_USER.to_owned()),
            (
                "NEXTCLOUD_APP_PASSWORD",
                crate::dav::DAV_PASSWORD.to_owned(),
            ),
            ("NEXTCLOUD_BASE_PATH", "/Projects".to_owned()),
            ("ACDM_APPROVAL_REQUIRED_OPS", OPS.to_owned()),
        ],
        data_dir: Some(env.app.data_dir.clone()),
        ..crate::helpers::Options::default()
    })
    .await
}

#[tokio::test]
async fn a_request_made_on_one_server_is_approved_on_another_and_used_on_a_third() {
    let Some(env) = env().await else { return };
    let (second, third) = (replica(&env).await, replica(&env).await);
    let delete = json!({"rel_path": "docs/plan.md", "dry_run": false});
    let (status, asked) = env.nc(ALPHA, "delete", delete.clone()).await;
    assert_eq!(
        (status, code(&asked)),
        (403, "approval_required"),
        "{asked}"
    );
    let id = asked["data"]["approval_id"].as_str().unwrap().to_owned();

    // Approved through the second server's operator API.
    let body = json!({"user_id": "u-owner"}).to_string();
    let path = format!("/admin/approvals/{id}/approve");
    let approved = second
        .send(
            Req::new("POST", &path)
                .headers(&[("Authorization", crate::helpers::BEARER)])
                .json(&body),
        )
        .await;
    assert_eq!(approved.status, 200, "{}", approved.body);

    // Used through the third, once; the first sees it used.
    let call = with_approval(&delete, &id).to_string();
    let headers = [
        ("X-ACDM-Service-Auth", crate::helpers::TOKEN),
        ("X-ACDM-User-Id", USER),
        ("X-ACDM-Agent-Name", ALPHA),
        ("X-ACDM-Thread-Id", THREAD),
    ];
    let done = third
        .send(
            Req::new("POST", "/agent-tools/nc/delete")
                .headers(&headers)
                .json(&call),
        )
        .await;
    assert_eq!(done.status, 200, "{}", done.body);
    assert!(env.disk_read("Projects/Alpha/docs/plan.md").is_none());
    let (status, again) = env.nc(ALPHA, "delete", with_approval(&delete, &id)).await;
    assert_eq!((status, code(&again)), (409, "approval_used"), "{again}");
    second.stop().await;
    third.stop().await;
    env.stop().await;
}

#[tokio::test]
async fn a_report_move_asks_only_for_a_move_the_caller_may_make() {
    let Some(env) = NcEnv::start_with(vec![(
        "ACDM_APPROVAL_REQUIRED_OPS",
        "business.update_report_status".to_owned(),
    )])
    .await
    else {
        return;
    };
    add_member(&env, "alpha", "u-owner", "owner").await;
    add_member(&env, "alpha", "u-admin", "admin").await;
    let report = crate::business::seed_report(
        &env,
        "alpha",
        "Week 48",
        acdm_core::business::ReportStatus::Submitted,
    )
    .await;
    let path = "agent-tools/business/update_report_status";
    // A member may not approve a report: refused by role, nobody asked.
    let approve = json!({"report_id": report, "to": "approved"});
    let (status, refused) = call(&env, USER, ALPHA, path, &approve).await;
    assert_eq!(
        (status, code(&refused)),
        (403, "permission_denied"),
        "{refused}"
    );
    // A rejection without its comment: refused, nobody asked.
    let reject = json!({"report_id": report, "to": "rejected"});
    let (status, refused) = call(&env, "u-owner", ALPHA, path, &reject).await;
    assert_eq!(
        (status, code(&refused)),
        (422, "validation_error"),
        "{refused}"
    );
    let (_, listed) = env.admin("GET", "/admin/approvals", None).await;
    assert_eq!(listed["data"]["approvals"], json!([]), "{listed}");

    // The owner's move asks, with the report's version and status.
    let (status, asked) = call(&env, "u-owner", ALPHA, path, &approve).await;
    assert_eq!(
        (status, code(&asked)),
        (403, "approval_required"),
        "{asked}"
    );
    let preview = &asked["data"]["preview"];
    assert_eq!(preview["report"]["status"], "submitted", "{asked}");
    assert_eq!(preview["to"], "approved");
    let id = asked["data"]["approval_id"].as_str().unwrap().to_owned();
    let (status, _) = decide(&env, &id, "approve", json!({"user_id": "u-admin"})).await;
    assert_eq!(status, 200);
    let (status, moved) = call(&env, "u-owner", ALPHA, path, &with_approval(&approve, &id)).await;
    assert_eq!(status, 200, "{moved}");
    assert_eq!(moved["data"]["report"]["status"], "approved", "{moved}");
    env.stop().await;
}
