//! Approval requests: stored pending, decided once before they expire,
//! used once in the transaction of the write's intent (and again only when
//! that write failed), voided, listed; each project's own policy; the
//! notifications' outbox with its leases.

use std::time::Duration;

use acdm_core::approval::{ApprovalPolicy, ApprovalRequest, ApprovalStatus, ApprovalTtl, WriteOp};
use acdm_core::domain::ProjectId;
use acdm_core::events::{Actor, EventId, EventOp, EventStatus, NewEvent};
use acdm_core::{AgentName, Identity, ProjectSlug, ThreadId, UserId};
use acdm_store::{ApprovalFilter, ManualClock, Store, StoreError};
use chrono::{TimeZone, Utc};
use serde_json::json;

use crate::harness::migrated;
use crate::provisioning::{base, name, slug};

fn user(u: &str) -> UserId {
    UserId::parse(u).unwrap()
}

fn with_manual_clock(store: &Store) -> (Store, ManualClock) {
    let clock = ManualClock::new(Utc.with_ymd_and_hms(2026, 3, 4, 9, 0, 0).unwrap());
    (store.clone().with_clock(clock.clock()), clock)
}

async fn project(s: &Store, p: &str, display: &str) -> ProjectId {
    s.create_project(&slug(p), &name(display), &base())
        .await
        .unwrap()
        .project
        .id
}

fn request(project: &str, op: &str, path: &str) -> ApprovalRequest {
    ApprovalRequest {
        project: ProjectSlug::parse(project).unwrap(),
        op: op.parse().unwrap(),
        arguments: json!({ "rel_path": path, "dry_run": false }),
        requested_by: user("u-1"),
        agent: AgentName::parse("project-alpha").unwrap(),
        thread: ThreadId::parse("t-1").unwrap(),
        preview: json!({ "summary": "delete", "targets": [{ "target": path, "version": "e1" }] }),
    }
}

fn ttl(seconds: u64) -> ApprovalTtl {
    ApprovalTtl::new(Duration::from_secs(seconds)).unwrap()
}

/// A write's intent that uses `approval`.
fn intent(project: ProjectId, approval: acdm_core::approval::ApprovalId) -> NewEvent {
    let identity = Identity::new(
        user("u-1"),
        AgentName::parse("project-alpha").unwrap(),
        ThreadId::parse("t-1").unwrap(),
    );
    NewEvent {
        id: EventId::new_random(),
        actor: Actor::via_agent(&identity),
        project_id: project,
        op: EventOp::NcDelete,
        target: "project:/a.md".into(),
        params: json!({}),
        plan: vec![],
        undo: vec![],
        reverts: None,
        approval: Some(approval),
    }
}

#[tokio::test]
async fn a_request_is_decided_once_before_it_expires() {
    for db in migrated().await {
        let (s, clock) = with_manual_clock(&db.store);
        let alpha = project(&s, "alpha", "Alpha").await;
        let asked = request("alpha", "nc.delete", "a.md");
        let created = s
            .create_approval(alpha, &asked, ttl(3600), None)
            .await
            .unwrap();
        assert_eq!(created.status, ApprovalStatus::Pending, "{}", db.name);
        assert_eq!(
            created.expires_at - created.created_at,
            chrono::TimeDelta::hours(1)
        );
        let read = s.approval(created.approval_id).await.unwrap();
        assert_eq!(
            read, created,
            "{}: what is read is what was stored",
            db.name
        );

        clock.advance(Duration::from_secs(300));
        let approved = s
            .decide_approval(created.approval_id, true, &user("boss"), Some("fine"))
            .await
            .unwrap();
        assert_eq!(approved.status, ApprovalStatus::Approved, "{}", db.name);
        assert_eq!(approved.decided_by, Some(user("boss")));
        assert_eq!(approved.note.as_deref(), Some("fine"));
        assert_eq!(approved.decided_at, Some(clock.now()));
        // The second decision loses, whichever it is.
        for approve in [true, false] {
            let error = s
                .decide_approval(created.approval_id, approve, &user("other"), None)
                .await
                .unwrap_err();
            assert!(
                matches!(&error, StoreError::Conflict(m) if m.contains("approved")),
                "{}: {error:?}",
                db.name
            );
        }
        // Past its expiry a pending request cannot be decided.
        let late = s
            .create_approval(alpha, &asked, ttl(60), None)
            .await
            .unwrap();
        clock.advance(Duration::from_secs(60));
        let error = s
            .decide_approval(late.approval_id, true, &user("boss"), None)
            .await
            .unwrap_err();
        assert!(
            matches!(&error, StoreError::Conflict(m) if m.contains("expired")),
            "{}: {error:?}",
            db.name
        );
        assert_eq!(
            s.approval(late.approval_id)
                .await
                .unwrap()
                .status_at(clock.now()),
            ApprovalStatus::Expired
        );
        db.finish().await;
    }
}

#[tokio::test]
async fn an_approval_is_used_by_one_intent_only_and_again_only_after_a_failed_write() {
    for db in migrated().await {
        let (s, clock) = with_manual_clock(&db.store);
        let alpha = project(&s, "alpha", "Alpha").await;
        let beta = project(&s, "beta", "Beta").await;
        let created = s
            .create_approval(
                alpha,
                &request("alpha", "nc.delete", "a.md"),
                ttl(3600),
                None,
            )
            .await
            .unwrap();
        let id = created.approval_id;
        // Pending: no intent can use it, and nothing is recorded.
        let first = intent(alpha, id);
        let error = s.record_intent(&first).await.unwrap_err();
        assert!(
            matches!(error, StoreError::ApprovalSpent(_)),
            "{}: {error:?}",
            db.name
        );
        assert!(s.event(first.id).await.is_err(), "{}: no event", db.name);

        s.decide_approval(id, true, &user("boss"), None)
            .await
            .unwrap();
        // Another project's intent cannot use it.
        let error = s.record_intent(&intent(beta, id)).await.unwrap_err();
        assert!(
            matches!(error, StoreError::ApprovalSpent(_)),
            "{}: {error:?}",
            db.name
        );

        // The first use records the event and the use together.
        let recorded = s.record_intent(&first).await.unwrap();
        let used = s.approval(id).await.unwrap();
        assert_eq!(used.status, ApprovalStatus::Used, "{}", db.name);
        assert_eq!(used.event_id, Some(recorded.id));
        // Two writes racing for it: the second is refused, nothing recorded.
        let second = intent(alpha, id);
        let error = s.record_intent(&second).await.unwrap_err();
        assert!(
            matches!(error, StoreError::ApprovalSpent(_)),
            "{}: {error:?}",
            db.name
        );
        assert!(s.event(second.id).await.is_err());
        // Its write applied: used for good.
        s.mark_applied(recorded.id, None).await.unwrap();
        assert!(s.record_intent(&intent(alpha, id)).await.is_err());

        // A write that failed (nothing written) leaves the approval usable
        // again, until it expires.
        let other = s
            .create_approval(
                alpha,
                &request("alpha", "nc.delete", "b.md"),
                ttl(3600),
                None,
            )
            .await
            .unwrap();
        s.decide_approval(other.approval_id, true, &user("boss"), None)
            .await
            .unwrap();
        let failed = s
            .record_intent(&intent(alpha, other.approval_id))
            .await
            .unwrap();
        s.mark_failed(failed.id, "the store refused").await.unwrap();
        assert_eq!(
            s.event(failed.id).await.unwrap().status,
            EventStatus::Failed
        );
        // Failed, nothing written: the approval is usable again.
        let freed = s.approval(other.approval_id).await.unwrap();
        assert_eq!(
            (freed.status, freed.event_id),
            (ApprovalStatus::Approved, None),
            "{}",
            db.name
        );
        let again = s
            .record_intent(&intent(alpha, other.approval_id))
            .await
            .unwrap();
        assert_eq!(
            s.approval(other.approval_id).await.unwrap().event_id,
            Some(again.id),
            "{}",
            db.name
        );
        s.mark_failed(again.id, "refused again").await.unwrap();
        clock.advance(Duration::from_secs(3600));
        let error = s
            .record_intent(&intent(alpha, other.approval_id))
            .await
            .unwrap_err();
        assert!(
            matches!(error, StoreError::ApprovalSpent(_)),
            "{}: expired: {error:?}",
            db.name
        );
        db.finish().await;
    }
}

#[tokio::test]
async fn a_voided_approval_cannot_be_used_and_listings_filter_and_page() {
    for db in migrated().await {
        let (s, clock) = with_manual_clock(&db.store);
        let alpha = project(&s, "alpha", "Alpha").await;
        let beta = project(&s, "beta", "Beta").await;
        let mut ids = Vec::new();
        for (project, slug, op) in [
            (alpha, "alpha", "nc.delete"),
            (alpha, "alpha", "nc.write"),
            (beta, "beta", "nc.delete"),
            (alpha, "alpha", "business.delete_meeting"),
        ] {
            clock.advance(Duration::from_secs(1));
            let created = s
                .create_approval(project, &request(slug, op, "x.md"), ttl(100), None)
                .await
                .unwrap();
            ids.push(created.approval_id);
        }
        s.decide_approval(ids[0], true, &user("boss"), None)
            .await
            .unwrap();
        assert!(s.void_approval(ids[0], "x.md changed").await.unwrap());
        let voided = s.approval(ids[0]).await.unwrap();
        assert_eq!(
            (voided.status, voided.note.as_deref()),
            (ApprovalStatus::Voided, Some("x.md changed"))
        );
        assert!(
            s.record_intent(&intent(alpha, ids[0])).await.is_err(),
            "{}",
            db.name
        );
        assert!(
            !s.void_approval(ids[1], "pending").await.unwrap(),
            "only approved ones"
        );
        s.decide_approval(ids[1], false, &user("boss"), Some("no"))
            .await
            .unwrap();

        let list = |filter: ApprovalFilter| {
            let s = s.clone();
            async move {
                s.list_approvals(&ApprovalFilter {
                    limit: 50,
                    ..filter
                })
                .await
                .unwrap()
                .into_iter()
                .map(|a| a.approval_id)
                .collect::<Vec<_>>()
            }
        };
        assert_eq!(
            list(ApprovalFilter::default()).await,
            vec![ids[3], ids[2], ids[1], ids[0]],
            "{}",
            db.name
        );
        assert_eq!(
            list(ApprovalFilter {
                project: Some(slug("alpha")),
                ..ApprovalFilter::default()
            })
            .await,
            vec![ids[3], ids[1], ids[0]]
        );
        assert_eq!(
            list(ApprovalFilter {
                op: Some("nc.delete".parse::<WriteOp>().unwrap()),
                ..ApprovalFilter::default()
            })
            .await,
            vec![ids[2], ids[0]]
        );
        assert_eq!(
            list(ApprovalFilter {
                status: Some(ApprovalStatus::Pending),
                ..ApprovalFilter::default()
            })
            .await,
            vec![ids[3], ids[2]]
        );
        assert_eq!(
            list(ApprovalFilter {
                status: Some(ApprovalStatus::Rejected),
                ..ApprovalFilter::default()
            })
            .await,
            vec![ids[1]]
        );
        // Past their expiry, pending ones list as expired and no longer as pending.
        clock.advance(Duration::from_secs(200));
        assert_eq!(
            list(ApprovalFilter {
                status: Some(ApprovalStatus::Expired),
                ..ApprovalFilter::default()
            })
            .await,
            vec![ids[3], ids[2]]
        );
        assert!(
            list(ApprovalFilter {
                status: Some(ApprovalStatus::Pending),
                ..ApprovalFilter::default()
            })
            .await
            .is_empty()
        );
        // Pages of two, by the keyset cursor.
        let first = s
            .list_approvals(&ApprovalFilter {
                limit: 2,
                ..ApprovalFilter::default()
            })
            .await
            .unwrap();
        let next = s
            .list_approvals(&ApprovalFilter {
                limit: 2,
                before: Some(first[1].approval_id),
                ..ApprovalFilter::default()
            })
            .await
            .unwrap();
        let paged: Vec<_> = first.iter().chain(&next).map(|a| a.approval_id).collect();
        assert_eq!(paged, vec![ids[3], ids[2], ids[1], ids[0]], "{}", db.name);
        // Another project's approval is not found through this project.
        assert!(matches!(
            s.approval_of(beta, ids[0]).await,
            Err(StoreError::NotFound { .. })
        ));
        assert_eq!(
            s.approval_of(alpha, ids[0]).await.unwrap().approval_id,
            ids[0]
        );
        db.finish().await;
    }
}

#[tokio::test]
async fn a_projects_own_policy_replaces_the_global_one_until_cleared() {
    for db in migrated().await {
        let s = &db.store;
        let alpha = project(s, "alpha", "Alpha").await;
        assert_eq!(s.approval_policy(alpha).await.unwrap(), None, "{}", db.name);
        let own = ApprovalPolicy::parse_list("nc.delete,project.milestone/advance").unwrap();
        s.set_approval_policy(alpha, &own, Some("op-1"))
            .await
            .unwrap();
        assert_eq!(s.approval_policy(alpha).await.unwrap(), Some(own));
        // An empty list is a policy too: nothing needs approval here.
        s.set_approval_policy(alpha, &ApprovalPolicy::none(), None)
            .await
            .unwrap();
        assert_eq!(
            s.approval_policy(alpha).await.unwrap(),
            Some(ApprovalPolicy::none())
        );
        assert!(s.clear_approval_policy(alpha).await.unwrap());
        assert!(!s.clear_approval_policy(alpha).await.unwrap());
        assert_eq!(s.approval_policy(alpha).await.unwrap(), None, "{}", db.name);
        db.finish().await;
    }
}

#[tokio::test]
async fn notifications_are_stored_with_their_request_leased_once_and_retried_later() {
    for db in migrated().await {
        let (s, clock) = with_manual_clock(&db.store);
        let alpha = project(&s, "alpha", "Alpha").await;
        let body = |a: &acdm_core::approval::Approval| {
            format!("{{\"approval_id\":\"{}\"}}", a.approval_id)
        };
        let created = s
            .create_approval(
                alpha,
                &request("alpha", "nc.delete", "a.md"),
                ttl(3600),
                Some(&body),
            )
            .await
            .unwrap();
        // Without a sender, no message.
        s.create_approval(
            alpha,
            &request("alpha", "nc.write", "b.md"),
            ttl(3600),
            None,
        )
        .await
        .unwrap();
        let leased = s
            .lease_due_notifications(10, Duration::from_secs(30))
            .await
            .unwrap();
        assert_eq!(leased.len(), 1, "{}", db.name);
        assert_eq!(leased[0].approval_id, created.approval_id);
        assert_eq!(leased[0].payload, body(&created));
        assert_eq!(leased[0].attempts, 0);
        // Leased: another replica does not get it.
        assert!(
            s.lease_due_notifications(10, Duration::from_secs(30))
                .await
                .unwrap()
                .is_empty()
        );
        s.notification_failed(
            &leased[0].id,
            "the receiver answered 503",
            Duration::from_secs(4),
        )
        .await
        .unwrap();
        let backlog = s.outbox_backlog().await.unwrap();
        assert_eq!(
            (backlog.waiting, backlog.failing, backlog.delivered),
            (1, 1, 0),
            "{}",
            db.name
        );
        assert_eq!(
            s.notification_errors(created.approval_id).await.unwrap(),
            vec![(1, "the receiver answered 503".to_owned())]
        );
        // Not due before its retry time; due after it.
        assert!(
            s.lease_due_notifications(10, Duration::from_secs(30))
                .await
                .unwrap()
                .is_empty()
        );
        clock.advance(Duration::from_secs(4));
        let again = s
            .lease_due_notifications(10, Duration::from_secs(30))
            .await
            .unwrap();
        assert_eq!((again.len(), again[0].attempts), (1, 1), "{}", db.name);
        // A sender that died: its lease ends, and another takes it.
        clock.advance(Duration::from_secs(30));
        let taken = s
            .lease_due_notifications(10, Duration::from_secs(30))
            .await
            .unwrap();
        assert_eq!(taken.len(), 1, "{}", db.name);
        s.notification_delivered(&taken[0].id).await.unwrap();
        let backlog = s.outbox_backlog().await.unwrap();
        assert_eq!(
            (backlog.waiting, backlog.failing, backlog.delivered),
            (0, 0, 1),
            "{}",
            db.name
        );
        clock.advance(Duration::from_secs(3600));
        assert!(
            s.lease_due_notifications(10, Duration::from_secs(30))
                .await
                .unwrap()
                .is_empty()
        );
        db.finish().await;
    }
}
