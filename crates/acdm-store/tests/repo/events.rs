//! Storage events (intents, their fate, reverts and their claims, listing)
//! and the run-time switches.

use std::collections::HashSet;
use std::time::Duration;

use acdm_core::domain::ProjectId;
use acdm_core::events::{
    Actor, ActorKind, EventId, EventOp, EventStatus, NewEvent, Step, StorageEvent,
};
use acdm_core::{AbsPath, Identity, ThreadId, UserId};
use acdm_store::{DatabaseTarget, EventFilter, ManualClock, NC_WRITES_SWITCH, Store, StoreError};
use chrono::{DateTime, Duration as Span, TimeZone, Utc};
use serde_json::json;
use sqlx::Connection;

use crate::harness::{TestDb, migrated};
use crate::provisioning::{agent, base, name, slug};

fn abs(s: &str) -> AbsPath {
    AbsPath::parse(s).unwrap()
}

/// `store` (same pool) stamping with a clock that moves only when the
/// test advances it, so timestamps are distinct or ordered without sleeping.
fn with_manual_clock(store: &Store) -> (Store, ManualClock) {
    let clock = ManualClock::new(Utc.with_ymd_and_hms(2026, 1, 2, 9, 0, 0).unwrap());
    (store.clone().with_clock(clock.clock()), clock)
}

async fn new_project(s: &Store, project: &str, display: &str) -> ProjectId {
    s.create_project(&slug(project), &name(display), &base())
        .await
        .unwrap()
        .project
        .id
}

/// An agent's overwrite of `file` in the project folder `folder`.
fn write_by(project: ProjectId, agent_name: &str, folder: &str, file: &str) -> NewEvent {
    let id = EventId::new_random();
    let identity = Identity::new(
        UserId::parse("alice@example.com").unwrap(),
        agent(agent_name),
        ThreadId::parse("thread-7").unwrap(),
    );
    let path = abs(&format!("/Projects/{folder}/{file}"));
    let kept = abs(&format!("/Projects/.acdm-trash/x/{id}/0/{file}"));
    NewEvent {
        id,
        actor: Actor::via_agent(&identity),
        project_id: project,
        op: EventOp::NcWrite,
        target: format!("project:/{file}"),
        params: json!({"path": format!("/{file}"), "overwrite": true, "size": 5}),
        plan: vec![
            Step::Copy {
                from: path.clone(),
                to: kept.clone(),
            },
            Step::Put {
                path: path.clone(),
                sha256: "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824".into(),
                size: 5,
                replaces: Some("\"etag-1\"".into()),
            },
        ],
        undo: vec![
            Step::Discard {
                path: path.clone(),
                etag: None,
            },
            Step::Move {
                from: kept,
                to: path,
            },
        ],
        reverts: None,
        approval: None,
    }
}

fn write(project: ProjectId, file: &str) -> NewEvent {
    write_by(project, "project-alpha", "Alpha", file)
}

/// An operator's revert of `original`.
fn revert_of(original: &StorageEvent) -> NewEvent {
    NewEvent {
        id: EventId::new_random(),
        actor: Actor::direct(UserId::parse("operator").unwrap()),
        project_id: original.project_id,
        op: EventOp::Revert,
        target: original.target.clone(),
        params: json!({"event": original.id.to_string()}),
        plan: original.undo.clone(),
        undo: vec![],
        reverts: Some(original.id),
        approval: None,
    }
}

/// Records and applies a write.
async fn applied(s: &Store, event: NewEvent) -> StorageEvent {
    let recorded = s.record_intent(&event).await.unwrap();
    s.mark_applied(recorded.id, Some(&json!({"etag": "\"etag-2\""})))
        .await
        .unwrap()
}

fn conflict_message(err: StoreError) -> String {
    match err {
        StoreError::Conflict(message) => message,
        other => panic!("expected a conflict, got {other:?}"),
    }
}

fn assert_not_found_event(err: &StoreError, id: EventId, db: &str) {
    assert!(
        matches!(err, StoreError::NotFound { what: "storage event", key } if *key == id.to_string()),
        "{db}: {err:?}"
    );
}

#[tokio::test]
async fn an_intent_round_trips_every_field_including_plan_and_undo() {
    for db in migrated().await {
        let s = &db.store;
        let alpha = new_project(s, "alpha", "Alpha").await;
        let event = write(alpha, "a b#.md");
        let recorded = s.record_intent(&event).await.unwrap();

        assert_eq!(recorded.id, event.id, "{}", db.name);
        assert_eq!(recorded.actor, event.actor);
        assert_eq!(recorded.actor.kind, ActorKind::ViaAgent);
        assert_eq!(recorded.project_id, alpha);
        assert_eq!(recorded.project.as_str(), "alpha");
        assert_eq!(recorded.op, EventOp::NcWrite);
        assert_eq!(recorded.target, "project:/a b#.md");
        assert_eq!(recorded.params, event.params);
        assert_eq!(recorded.plan, event.plan);
        assert_eq!(recorded.undo, event.undo);
        assert_eq!(recorded.status, EventStatus::Pending);
        assert_eq!(
            (
                &recorded.result,
                &recorded.error,
                recorded.reverts,
                recorded.reverted_by
            ),
            (&None, &None, None, None)
        );
        assert_eq!(recorded.created_at, recorded.updated_at);

        let read = s.event(event.id).await.unwrap();
        assert_eq!(
            read, recorded,
            "{}: what is read is what was recorded",
            db.name
        );

        // A system actor with no user, agent or thread reads back as such.
        let mut by_system = write(alpha, "b.md");
        by_system.actor = Actor::system();
        let recorded = s.record_intent(&by_system).await.unwrap();
        assert_eq!(s.event(by_system.id).await.unwrap(), recorded);
        assert_eq!(recorded.actor, Actor::system());

        let result = json!({"etag": "\"etag-2\"", "size": 5, "nested": [1, {"k": null}]});
        let done = s.mark_applied(event.id, Some(&result)).await.unwrap();
        assert_eq!(done.result, Some(result), "{}", db.name);
        assert!(done.updated_at >= done.created_at);
        assert_eq!(s.event(event.id).await.unwrap(), done);

        // Ids are the caller's: the same one twice is a conflict.
        let err = s.record_intent(&event).await.unwrap_err();
        assert!(
            matches!(err, StoreError::Conflict(_)),
            "{}: {err:?}",
            db.name
        );
        db.finish().await;
    }
}

#[tokio::test]
async fn unknown_events_and_projects_are_not_found() {
    for db in migrated().await {
        let s = &db.store;
        let missing = EventId::new_random();
        assert_not_found_event(&s.event(missing).await.unwrap_err(), missing, db.name);
        assert_not_found_event(
            &s.mark_applied(missing, None).await.unwrap_err(),
            missing,
            db.name,
        );
        assert_not_found_event(
            &s.mark_failed(missing, "x").await.unwrap_err(),
            missing,
            db.name,
        );
        let nowhere = ProjectId::new_random();
        let err = s.record_intent(&write(nowhere, "a.md")).await.unwrap_err();
        assert!(
            matches!(
                err,
                StoreError::NotFound {
                    what: "project",
                    ..
                }
            ),
            "{}: {err:?}",
            db.name
        );
        assert!(matches!(
            s.project_by_id(nowhere).await.unwrap_err(),
            StoreError::NotFound {
                what: "project",
                ..
            }
        ));
        assert!(matches!(
            s.project_mounts(nowhere).await.unwrap_err(),
            StoreError::NotFound {
                what: "project",
                ..
            }
        ));
        db.finish().await;
    }
}

#[tokio::test]
async fn an_event_is_applied_or_failed_once_and_only_from_pending() {
    for db in migrated().await {
        let s = &db.store;
        let alpha = new_project(s, "alpha", "Alpha").await;

        let a = s.record_intent(&write(alpha, "a.md")).await.unwrap();
        let applied = s.mark_applied(a.id, None).await.unwrap();
        assert_eq!(
            (applied.status, applied.result.clone()),
            (EventStatus::Applied, None),
            "{}",
            db.name
        );
        let again = conflict_message(s.mark_applied(a.id, None).await.unwrap_err());
        assert_eq!(again, format!("event {} is applied, not pending", a.id));
        let late = conflict_message(s.mark_failed(a.id, "too late").await.unwrap_err());
        assert_eq!(late, format!("event {} is applied, not pending", a.id));
        assert_eq!(
            s.event(a.id).await.unwrap(),
            applied,
            "{}: a refused change leaves the event as it was",
            db.name
        );

        let b = s.record_intent(&write(alpha, "b.md")).await.unwrap();
        let failed = s
            .mark_failed(b.id, "the file changed since it was read")
            .await
            .unwrap();
        assert_eq!(failed.status, EventStatus::Failed);
        assert_eq!(
            failed.error.as_deref(),
            Some("the file changed since it was read")
        );
        assert_eq!(failed.result, None);
        let err = conflict_message(s.mark_applied(b.id, None).await.unwrap_err());
        assert_eq!(err, format!("event {} is failed, not pending", b.id));
        let err = conflict_message(s.mark_failed(b.id, "twice").await.unwrap_err());
        assert_eq!(err, format!("event {} is failed, not pending", b.id));
        assert_eq!(s.event(b.id).await.unwrap(), failed, "{}", db.name);
        db.finish().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_concurrent_reverts_of_one_event_let_exactly_one_claim_it() {
    for db in migrated().await {
        let s = &db.store;
        // Another server's pool, as two replicas would race.
        let other = db.open_again().await;
        let alpha = new_project(s, "alpha", "Alpha").await;
        for round in 0..5 {
            let original = applied(s, write(alpha, &format!("f{round}.md"))).await;
            let (first, second) = (revert_of(&original), revert_of(&original));
            let (a, b) = tokio::join!(
                s.record_revert_intent(&first),
                other.record_revert_intent(&second)
            );
            let (winner, loser, err) = match (a, b) {
                (Ok(won), Err(err)) => (won, second.id, err),
                (Err(err), Ok(won)) => (won, first.id, err),
                (a, b) => panic!("{}: exactly one revert must win: {a:?} / {b:?}", db.name),
            };
            assert_eq!(
                conflict_message(err),
                format!(
                    "event {} is already being reverted by {}",
                    original.id, winner.id
                ),
                "{}",
                db.name
            );
            assert_eq!(winner.status, EventStatus::Pending);
            assert_eq!(winner.reverts, Some(original.id));
            let claimed = s.event(original.id).await.unwrap();
            assert_eq!(claimed.reverted_by, Some(winner.id), "{}", db.name);
            assert_eq!(claimed.status, EventStatus::Applied);
            assert_not_found_event(&s.event(loser).await.unwrap_err(), loser, db.name);
        }
        other.close().await;
        db.finish().await;
    }
}

#[tokio::test]
async fn an_applied_revert_marks_the_original_reverted() {
    for db in migrated().await {
        let s = &db.store;
        let alpha = new_project(s, "alpha", "Alpha").await;
        let original = applied(s, write(alpha, "a.md")).await;
        let revert = s.record_revert_intent(&revert_of(&original)).await.unwrap();
        assert_eq!(revert.op, EventOp::Revert);
        assert_eq!(revert.plan, original.undo, "{}", db.name);

        let done = s.mark_applied(revert.id, None).await.unwrap();
        assert_eq!(done.status, EventStatus::Applied);
        let original_now = s.event(original.id).await.unwrap();
        assert_eq!(
            (original_now.status, original_now.reverted_by),
            (EventStatus::Reverted, Some(revert.id)),
            "{}",
            db.name
        );
        assert!(original_now.updated_at >= original.updated_at);

        // A reverted event cannot be reverted again…
        let err = s
            .record_revert_intent(&revert_of(&original_now))
            .await
            .unwrap_err();
        assert_eq!(
            conflict_message(err),
            format!(
                "event {} is reverted; only an applied event can be reverted",
                original.id
            )
        );
        // …but the revert, an applied event itself, can.
        let undo_revert = s.record_revert_intent(&revert_of(&done)).await.unwrap();
        assert_eq!(undo_revert.reverts, Some(done.id), "{}", db.name);
        db.finish().await;
    }
}

#[tokio::test]
async fn a_failed_revert_frees_the_original_for_another_revert() {
    for db in migrated().await {
        let s = &db.store;
        let alpha = new_project(s, "alpha", "Alpha").await;
        let original = applied(s, write(alpha, "a.md")).await;
        let first = s.record_revert_intent(&revert_of(&original)).await.unwrap();
        let blocked = s
            .record_revert_intent(&revert_of(&original))
            .await
            .unwrap_err();
        assert_eq!(
            conflict_message(blocked),
            format!(
                "event {} is already being reverted by {}",
                original.id, first.id
            ),
            "{}",
            db.name
        );

        let failed = s
            .mark_failed(first.id, "the file changed since the event")
            .await
            .unwrap();
        assert_eq!(failed.status, EventStatus::Failed);
        let freed = s.event(original.id).await.unwrap();
        assert_eq!(
            (freed.status, freed.reverted_by),
            (EventStatus::Applied, None),
            "{}: the original is free again",
            db.name
        );

        let second = s.record_revert_intent(&revert_of(&original)).await.unwrap();
        s.mark_applied(second.id, None).await.unwrap();
        let reverted = s.event(original.id).await.unwrap();
        assert_eq!(
            (reverted.status, reverted.reverted_by),
            (EventStatus::Reverted, Some(second.id))
        );
        // The first, failed revert cannot touch the original any more.
        assert!(matches!(
            s.mark_failed(first.id, "again").await.unwrap_err(),
            StoreError::Conflict(_)
        ));
        assert_eq!(s.event(original.id).await.unwrap(), reverted, "{}", db.name);
        db.finish().await;
    }
}

#[tokio::test]
async fn only_applied_events_can_be_reverted_and_the_reason_is_named() {
    for db in migrated().await {
        let s = &db.store;
        let alpha = new_project(s, "alpha", "Alpha").await;
        let pending = s.record_intent(&write(alpha, "p.md")).await.unwrap();
        let failed = s.record_intent(&write(alpha, "f.md")).await.unwrap();
        let failed = s.mark_failed(failed.id, "no").await.unwrap();
        for (event, status) in [(&pending, "pending"), (&failed, "failed")] {
            let err = s.record_revert_intent(&revert_of(event)).await.unwrap_err();
            assert_eq!(
                conflict_message(err),
                format!(
                    "event {} is {status}; only an applied event can be reverted",
                    event.id
                ),
                "{}",
                db.name
            );
            assert_eq!(s.event(event.id).await.unwrap().reverted_by, None);
        }

        // An original that does not exist.
        let mut ghost = revert_of(&pending);
        let missing = EventId::new_random();
        ghost.reverts = Some(missing);
        assert_not_found_event(
            &s.record_revert_intent(&ghost).await.unwrap_err(),
            missing,
            db.name,
        );

        // A revert must say what it reverts.
        let mut aimless = revert_of(&pending);
        aimless.reverts = None;
        assert!(matches!(
            s.record_revert_intent(&aimless).await.unwrap_err(),
            StoreError::Conflict(_)
        ));

        // record_intent of a revert claims the original just the same.
        let original = applied(s, write(alpha, "a.md")).await;
        let revert = s.record_intent(&revert_of(&original)).await.unwrap();
        assert_eq!(
            s.event(original.id).await.unwrap().reverted_by,
            Some(revert.id),
            "{}",
            db.name
        );
        for refused in [ghost.id, aimless.id] {
            assert_not_found_event(&s.event(refused).await.unwrap_err(), refused, db.name);
        }
        db.finish().await;
    }
}

#[tokio::test]
async fn an_event_of_another_project_cannot_be_reverted_and_is_not_found() {
    for db in migrated().await {
        let s = &db.store;
        let alpha = new_project(s, "alpha", "Alpha").await;
        let beta = new_project(s, "beta", "Beta").await;
        let in_alpha = applied(s, write(alpha, "secret.md")).await;

        let mut from_beta = revert_of(&in_alpha);
        from_beta.project_id = beta;
        let err = s.record_revert_intent(&from_beta).await.unwrap_err();
        assert_not_found_event(&err, in_alpha.id, db.name);
        assert_eq!(
            err.to_string(),
            format!("storage event `{}` not found", in_alpha.id),
            "{}: the message is the same as for a missing event",
            db.name
        );
        let untouched = s.event(in_alpha.id).await.unwrap();
        assert_eq!(untouched, in_alpha, "{}: not claimed", db.name);
        assert_not_found_event(
            &s.event(from_beta.id).await.unwrap_err(),
            from_beta.id,
            db.name,
        );

        // Its own project may revert it.
        s.record_revert_intent(&revert_of(&in_alpha)).await.unwrap();
        db.finish().await;
    }
}

fn ids(events: &[StorageEvent]) -> Vec<EventId> {
    events.iter().map(|e| e.id).collect()
}

/// Newest first by (created_at, id), as the listing promises.
fn newest_first(mut events: Vec<StorageEvent>) -> Vec<EventId> {
    events.sort_by_key(|e| std::cmp::Reverse((e.created_at, e.id)));
    ids(&events)
}

#[tokio::test]
async fn listing_filters_by_project_agent_and_status_newest_first() {
    for db in migrated().await {
        let (s, clock) = with_manual_clock(&db.store);
        let s = &s;
        let alpha = new_project(s, "alpha", "Alpha").await;
        let beta = new_project(s, "beta", "Beta").await;
        let mut all = Vec::new();
        for i in 0..3 {
            all.push(applied(s, write(alpha, &format!("a{i}.md"))).await);
            clock.advance(Duration::from_millis(2));
        }
        let beta_pending = s
            .record_intent(&write_by(beta, "project-beta", "Beta", "b.md"))
            .await
            .unwrap();
        all.push(beta_pending.clone());
        let alpha_failed = s.record_intent(&write(alpha, "x.md")).await.unwrap();
        let alpha_failed = s.mark_failed(alpha_failed.id, "no").await.unwrap();
        all.push(alpha_failed.clone());

        let everything = s.list_events(&EventFilter::default()).await.unwrap();
        assert_eq!(
            ids(&everything),
            newest_first(all.clone()),
            "{}: newest first",
            db.name
        );
        // The listing carries the same events `event` reads.
        for listed in &everything {
            assert_eq!(listed, &s.event(listed.id).await.unwrap());
        }

        let by_slug = s
            .list_events(&EventFilter {
                project: Some(slug("alpha")),
                ..EventFilter::default()
            })
            .await
            .unwrap();
        let alpha_only: Vec<_> = all
            .iter()
            .filter(|e| e.project_id == alpha)
            .cloned()
            .collect();
        assert_eq!(
            ids(&by_slug),
            newest_first(alpha_only.clone()),
            "{}",
            db.name
        );
        let by_id = s
            .list_events(&EventFilter {
                project_id: Some(alpha),
                ..EventFilter::default()
            })
            .await
            .unwrap();
        assert_eq!(ids(&by_id), ids(&by_slug));
        let contradictory = s
            .list_events(&EventFilter {
                project: Some(slug("alpha")),
                project_id: Some(beta),
                ..EventFilter::default()
            })
            .await
            .unwrap();
        assert!(contradictory.is_empty(), "{}: every filter holds", db.name);

        let by_agent = s
            .list_events(&EventFilter {
                agent: Some(agent("project-beta")),
                ..EventFilter::default()
            })
            .await
            .unwrap();
        assert_eq!(ids(&by_agent), vec![beta_pending.id], "{}", db.name);

        let failed = s
            .list_events(&EventFilter {
                project: Some(slug("alpha")),
                status: Some(EventStatus::Failed),
                ..EventFilter::default()
            })
            .await
            .unwrap();
        assert_eq!(ids(&failed), vec![alpha_failed.id]);
        let applied_in_alpha = s
            .list_events(&EventFilter {
                project_id: Some(alpha),
                status: Some(EventStatus::Applied),
                ..EventFilter::default()
            })
            .await
            .unwrap();
        assert_eq!(ids(&applied_in_alpha), newest_first(all[..3].to_vec()));

        let none = s
            .list_events(&EventFilter {
                project: Some(slug("gamma")),
                ..EventFilter::default()
            })
            .await
            .unwrap();
        assert!(none.is_empty());

        // A limit of 0 still returns one; a huge one is capped, not refused.
        let one = s
            .list_events(&EventFilter {
                limit: 0,
                ..EventFilter::default()
            })
            .await
            .unwrap();
        assert_eq!(ids(&one), newest_first(all.clone())[..1].to_vec());
        let capped = s
            .list_events(&EventFilter {
                limit: u32::MAX,
                ..EventFilter::default()
            })
            .await
            .unwrap();
        assert_eq!(capped.len(), all.len(), "{}", db.name);
        db.finish().await;
    }
}

#[tokio::test]
async fn keyset_paging_returns_every_event_exactly_once() {
    for db in migrated().await {
        let s = &db.store;
        let alpha = new_project(s, "alpha", "Alpha").await;
        let beta = new_project(s, "beta", "Beta").await;
        let mut recorded = Vec::new();
        for i in 0..7 {
            recorded.push(
                s.record_intent(&write(alpha, &format!("{i}.md")))
                    .await
                    .unwrap(),
            );
            // Noise in another project, interleaved.
            s.record_intent(&write(beta, "noise.md")).await.unwrap();
        }
        let filter = EventFilter {
            project: Some(slug("alpha")),
            limit: 3,
            ..EventFilter::default()
        };
        let mut pages = Vec::new();
        let mut before = None;
        loop {
            let page = s
                .list_events(&EventFilter {
                    before,
                    ..filter.clone()
                })
                .await
                .unwrap();
            if page.is_empty() {
                break;
            }
            assert!(page.len() <= 3);
            before = page.last().map(|e| e.id);
            pages.push(ids(&page));
            assert!(pages.len() <= 3, "{}: paging must end", db.name);
        }
        assert_eq!(
            pages.iter().map(Vec::len).collect::<Vec<_>>(),
            vec![3, 3, 1],
            "{}",
            db.name
        );
        let seen: Vec<EventId> = pages.concat();
        assert_eq!(
            seen,
            newest_first(recorded.clone()),
            "{}: each event once, in order",
            db.name
        );
        assert_eq!(seen.iter().collect::<HashSet<_>>().len(), 7);

        let missing = EventId::new_random();
        let err = s
            .list_events(&EventFilter {
                before: Some(missing),
                ..filter.clone()
            })
            .await
            .unwrap_err();
        assert_not_found_event(&err, missing, db.name);
        db.finish().await;
    }
}

/// Writes an event row directly, bypassing the store, with a chosen
/// creation time and plan text.
async fn insert_raw(db: &TestDb, project: ProjectId, at: DateTime<Utc>, plan: &str) -> EventId {
    let id = EventId::new_random();
    let sql = "INSERT INTO user_storage_events (id, actor_kind, project_id, op, target, params, \
               plan, undo, status, created_at, updated_at) \
               VALUES ($1, 'system', $2, 'nc_write', 't', '{}', $3, '[]', 'pending', $4, $4)";
    match &db.config.target {
        DatabaseTarget::Sqlite { path } => {
            let url = format!("sqlite://{}", path.display());
            let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
            sqlx::query(sql)
                .bind(id.to_string())
                .bind(project.to_string())
                .bind(plan)
                .bind(at)
                .execute(&mut conn)
                .await
                .unwrap();
            conn.close().await.unwrap();
        }
        DatabaseTarget::Postgres { url } => {
            use secrecy::ExposeSecret;
            let mut conn = sqlx::PgConnection::connect(url.expose_secret())
                .await
                .unwrap();
            sqlx::query(sql)
                .bind(id.to_string())
                .bind(project.to_string())
                .bind(plan)
                .bind(at)
                .execute(&mut conn)
                .await
                .unwrap();
            conn.close().await.unwrap();
        }
    }
    id
}

#[tokio::test]
async fn times_with_any_fraction_order_correctly_on_both_backends() {
    for db in migrated().await {
        let s = &db.store;
        let alpha = new_project(s, "alpha", "Alpha").await;
        let second = Utc.with_ymd_and_hms(2030, 1, 2, 3, 4, 5).unwrap();
        // Whole seconds, milliseconds and microseconds are written with
        // different numbers of digits on SQLite.
        let times = [
            second + Span::microseconds(500_001),
            second,
            second + Span::milliseconds(500),
            second + Span::microseconds(1),
            second + Span::seconds(1),
            second + Span::microseconds(499_999),
        ];
        let mut by_time = Vec::new();
        for at in times {
            by_time.push((at, insert_raw(&db, alpha, at, "[]").await));
        }
        by_time.sort();
        let listed = s.list_events(&EventFilter::default()).await.unwrap();
        let expected: Vec<EventId> = by_time.iter().rev().map(|(_, id)| *id).collect();
        assert_eq!(ids(&listed), expected, "{}", db.name);
        for (event, (at, _)) in listed.iter().zip(by_time.iter().rev()) {
            assert_eq!(event.created_at, *at, "{}: read back exactly", db.name);
        }
        let old = s
            .pending_events(second + Span::milliseconds(500))
            .await
            .unwrap();
        let expected: Vec<EventId> = by_time
            .iter()
            .filter(|(at, _)| *at <= second + Span::milliseconds(500))
            .map(|(_, id)| *id)
            .collect();
        assert_eq!(ids(&old), expected, "{}", db.name);
        assert_eq!(old.len(), 4);
        db.finish().await;
    }
}

#[tokio::test]
async fn a_corrupt_json_column_is_reported_not_trusted() {
    for db in migrated().await {
        let s = &db.store;
        let alpha = new_project(s, "alpha", "Alpha").await;
        let bad = insert_raw(&db, alpha, Utc::now(), "{not json").await;
        let err = s.event(bad).await.unwrap_err();
        assert!(
            matches!(
                err,
                StoreError::Corrupt {
                    table: "user_storage_events",
                    ..
                }
            ),
            "{}: {err:?}",
            db.name
        );
        assert!(err.to_string().contains("plan"), "{err}");
        let escaping = insert_raw(
            &db,
            alpha,
            Utc::now(),
            r#"[{"step":"move","from":"/a/../b","to":"/c"}]"#,
        )
        .await;
        assert!(matches!(
            s.event(escaping).await.unwrap_err(),
            StoreError::Corrupt { .. }
        ));
        db.finish().await;
    }
}

#[tokio::test]
async fn pending_events_are_those_old_enough_oldest_first() {
    for db in migrated().await {
        let (s, clock) = with_manual_clock(&db.store);
        let s = &s;
        let alpha = new_project(s, "alpha", "Alpha").await;
        let beta = new_project(s, "beta", "Beta").await;
        let first = s.record_intent(&write(alpha, "1.md")).await.unwrap();
        clock.advance(Duration::from_millis(3));
        let done = applied(s, write(alpha, "done.md")).await;
        let second = s.record_intent(&write(beta, "2.md")).await.unwrap();
        clock.advance(Duration::from_millis(3));
        let cut = second.created_at;
        let young = s.record_intent(&write(alpha, "3.md")).await.unwrap();
        assert!(young.created_at > cut);

        let old = s.pending_events(cut).await.unwrap();
        assert_eq!(
            ids(&old),
            vec![first.id, second.id],
            "{}: pending, at or before the cut, oldest first, every project",
            db.name
        );
        assert!(!ids(&old).contains(&done.id));
        let none = s
            .pending_events(first.created_at - Span::microseconds(1))
            .await
            .unwrap();
        assert!(none.is_empty(), "{}", db.name);
        let all = s.pending_events(clock.now()).await.unwrap();
        assert_eq!(ids(&all), vec![first.id, second.id, young.id]);
        db.finish().await;
    }
}

#[tokio::test]
async fn projects_and_their_mounts_are_found_by_id() {
    for db in migrated().await {
        let s = &db.store;
        let alpha = new_project(s, "alpha", "Alpha").await;
        new_project(s, "beta", "Beta").await;
        s.set_mount(
            &slug("alpha"),
            &acdm_core::MountName::parse("archive").unwrap(),
            Some(&abs("/Archive/Alpha")),
            false,
            &base(),
        )
        .await
        .unwrap();
        let project = s.project_by_id(alpha).await.unwrap();
        assert_eq!(
            (project.id, project.slug.as_str(), project.name.as_str()),
            (alpha, "alpha", "Alpha"),
            "{}",
            db.name
        );
        let mounts = s.project_mounts(alpha).await.unwrap();
        let summary: Vec<_> = mounts
            .iter()
            .map(|m| (m.name.as_str(), m.root.to_string(), m.writable))
            .collect();
        assert_eq!(
            summary,
            vec![
                ("archive", "/Archive/Alpha".to_owned(), false),
                ("project", "/Projects/Alpha".to_owned(), true),
            ],
            "{}",
            db.name
        );
        db.finish().await;
    }
}

#[tokio::test]
async fn a_switch_is_absent_until_set_then_reads_back_each_flip() {
    for db in migrated().await {
        let (s, clock) = with_manual_clock(&db.store);
        let s = &s;
        assert_eq!(NC_WRITES_SWITCH, "nc_writes_enabled");
        assert_eq!(
            s.switch(NC_WRITES_SWITCH).await.unwrap(),
            None,
            "{}",
            db.name
        );

        let off = s
            .set_switch(
                NC_WRITES_SWITCH,
                false,
                Some("operator"),
                Some("incident 42"),
            )
            .await
            .unwrap();
        assert!(!off.enabled);
        assert_eq!(off.changed_by.as_deref(), Some("operator"));
        assert_eq!(off.reason.as_deref(), Some("incident 42"));
        assert_eq!(
            s.switch(NC_WRITES_SWITCH).await.unwrap(),
            Some(off.clone()),
            "{}",
            db.name
        );

        clock.advance(Duration::from_millis(2));
        let on = s
            .set_switch(NC_WRITES_SWITCH, true, None, None)
            .await
            .unwrap();
        assert!(on.enabled && on.changed_at > off.changed_at);
        let read = s.switch(NC_WRITES_SWITCH).await.unwrap().unwrap();
        assert_eq!(read, on, "{}: who and why are replaced, not kept", db.name);
        assert_eq!((read.changed_by, read.reason), (None, None));

        // Another server sees the flip.
        let other = db.open_again().await;
        assert_eq!(other.switch(NC_WRITES_SWITCH).await.unwrap(), Some(on));
        other.close().await;
        // Switches are independent.
        assert_eq!(s.switch("something_else").await.unwrap(), None);
        db.finish().await;
    }
}

#[tokio::test]
async fn an_event_is_found_by_a_unique_prefix_and_an_ambiguous_one_says_how_many_match() {
    use acdm_core::events::EventRef;
    for db in migrated().await {
        let s = &db.store;
        let alpha = new_project(s, "alpha", "Alpha").await;
        let mut ids = Vec::new();
        for (n, id) in [
            "abcd1111-0000-4000-8000-000000000001",
            "abcd2222-0000-4000-8000-000000000002",
            "abce3333-0000-4000-8000-000000000003",
        ]
        .into_iter()
        .enumerate()
        {
            let mut event = write(alpha, &format!("{n}.md"));
            event.id = id.parse().unwrap();
            s.record_intent(&event).await.unwrap();
            ids.push(event.id);
        }
        let resolve = |text: &str| {
            let reference: EventRef = text.parse().unwrap();
            async move { s.resolve_event(&reference).await }
        };
        assert_eq!(resolve("abcd1").await.unwrap(), ids[0], "{}", db.name);
        assert_eq!(resolve("ABCD2222-").await.unwrap(), ids[1], "{}", db.name);
        assert_eq!(resolve("abce").await.unwrap(), ids[2], "{}", db.name);
        let whole = ids[0].to_string();
        assert_eq!(resolve(&whole).await.unwrap(), ids[0], "{}", db.name);

        let ambiguous = conflict_message(resolve("abcd").await.unwrap_err());
        assert!(
            ambiguous.contains("`abcd` is ambiguous: 2 events start with it"),
            "{}: {ambiguous}",
            db.name
        );
        let missing = resolve("abcf").await.unwrap_err();
        assert!(
            matches!(&missing, StoreError::NotFound { what: "storage event", key } if key == "abcf…"),
            "{}: {missing:?}",
            db.name
        );
    }
}
