//! The project family's reads on both databases: the journal stamp that
//! keeps an overview (it moves with every step of every event of the
//! project, and only of that project), the overview's own queries, the
//! meta read in one query, and the statement of work as a row that always
//! exists.

use acdm_core::business::{
    Deliverable, Meeting, MeetingId, Report, ReportId, ReportKind, ReportStatus, RowImage, RowKey,
    StatementOfWork,
};
use acdm_core::domain::{MemberRole, ProjectId};
use acdm_core::events::{Actor, EventId, EventOp, EventStatus, NewEvent, Step};
use acdm_core::{AgentName, Identity, ThreadId};
use acdm_store::Store;
use chrono::{DateTime, TimeDelta, Utc};

use crate::harness::{at, migrated, project, user};

fn agent() -> Actor {
    Actor::via_agent(&Identity::new(
        user("u-1"),
        AgentName::parse("project-alpha").unwrap(),
        ThreadId::parse("t-1").unwrap(),
    ))
}

fn new_event(project: ProjectId, actor: Actor, target: &str, plan: Vec<Step>) -> NewEvent {
    NewEvent {
        id: EventId::new_random(),
        actor,
        project_id: project,
        op: EventOp::CreateMeeting,
        target: target.into(),
        params: serde_json::json!({}),
        plan,
        undo: vec![],
        reverts: None,
        approval: None,
    }
}

fn row(before: Option<RowImage>, after: Option<RowImage>) -> Step {
    Step::Row {
        before: before.map(Box::new),
        after: after.map(Box::new),
    }
}

/// Records and applies one row event as `actor`.
async fn apply(store: &Store, project: ProjectId, actor: Actor, target: &str, step: Step) {
    let plan = vec![step];
    let event = new_event(project, actor, target, plan.clone());
    store.record_intent(&event).await.unwrap();
    store
        .apply_rows(event.id, project, &plan, None)
        .await
        .unwrap();
}

fn meeting(starts_at: DateTime<Utc>, title: &str, attendees: &[&str]) -> Meeting {
    Meeting {
        meeting_id: MeetingId::new_random(),
        title: title.to_owned(),
        starts_at,
        ends_at: starts_at + TimeDelta::minutes(30),
        location: Some("Room".into()),
        agenda: Some("long agenda".into()),
        notes: None,
        attendees: attendees.iter().map(|u| user(u)).collect(),
        version: 1,
        created_by: Some(user("u-1")),
        created_at: at("2026-11-20T08:00:00Z"),
        updated_by: Some(user("u-1")),
        updated_at: at("2026-11-20T08:00:00Z"),
    }
}

#[tokio::test]
async fn the_journal_stamp_moves_with_every_step_of_the_projects_events_only() {
    for db in migrated().await {
        let s = &db.store;
        let alpha = project(s, "alpha").await;
        let beta = project(s, "beta").await;
        let mut seen = vec![s.journal_stamp(alpha.id).await.unwrap()];
        let mut step = |stamp| {
            assert!(
                !seen.contains(&stamp),
                "{}: a stamp came back: {stamp:?}",
                db.name
            );
            seen.push(stamp);
        };
        let m = meeting(at("2026-12-01T09:00:00Z"), "Kick-off", &[]);
        let plan = vec![row(None, Some(RowImage::Meeting(m.clone())))];
        let first = new_event(alpha.id, agent(), "meeting", plan.clone());
        s.record_intent(&first).await.unwrap();
        step(s.journal_stamp(alpha.id).await.unwrap());
        s.apply_rows(first.id, alpha.id, &plan, None).await.unwrap();
        step(s.journal_stamp(alpha.id).await.unwrap());
        let second = new_event(alpha.id, agent(), "meeting", vec![]);
        s.record_intent(&second).await.unwrap();
        step(s.journal_stamp(alpha.id).await.unwrap());
        s.mark_failed(second.id, "test").await.unwrap();
        step(s.journal_stamp(alpha.id).await.unwrap());

        // Another project's events leave it as it is.
        let before = s.journal_stamp(alpha.id).await.unwrap();
        let other = meeting(at("2026-12-01T09:00:00Z"), "Beta", &[]);
        apply(
            s,
            beta.id,
            agent(),
            "meeting",
            row(None, Some(RowImage::Meeting(other))),
        )
        .await;
        assert_eq!(
            s.journal_stamp(alpha.id).await.unwrap(),
            before,
            "{}",
            db.name
        );
        let applied = s.event(first.id).await.unwrap();
        assert_eq!(applied.status, EventStatus::Applied);

        // The overview's one query: the same stamp, and the members as
        // `members_info` lists them.
        for (member, role) in [("u-b", MemberRole::Viewer), ("u-a", MemberRole::Owner)] {
            s.set_member(&alpha.slug, &user(member), role)
                .await
                .unwrap();
        }
        let (stamp, members) = s.journal_stamp_and_members(alpha.id).await.unwrap();
        assert_eq!(
            stamp,
            s.journal_stamp(alpha.id).await.unwrap(),
            "{}",
            db.name
        );
        assert_eq!(
            members,
            s.members_info(alpha.id).await.unwrap(),
            "{}",
            db.name
        );
        assert_eq!(members.len(), 2);
        let (_, none) = s.journal_stamp_and_members(beta.id).await.unwrap();
        assert!(none.is_empty());
    }
}

#[tokio::test]
async fn the_overview_queries_select_what_it_shows_in_order_and_bounded() {
    for db in migrated().await {
        let s = &db.store;
        let p = project(s, "alpha").await;
        let other = project(s, "beta").await;
        let now = at("2026-12-01T08:00:00Z");
        // Upcoming: inside the window, by start, with attendee counts.
        let later = meeting(now + TimeDelta::days(3), "Later", &["u-1", "u-2"]);
        let sooner = meeting(now + TimeDelta::hours(2), "Sooner", &["u-1"]);
        let past = meeting(now - TimeDelta::hours(2), "Past", &[]);
        let far = meeting(now + TimeDelta::days(20), "Far", &[]);
        for m in [&later, &sooner, &past, &far] {
            apply(
                s,
                p.id,
                agent(),
                "meeting",
                row(None, Some(RowImage::Meeting(m.clone()))),
            )
            .await;
        }
        let elsewhere = meeting(now + TimeDelta::hours(1), "Elsewhere", &[]);
        apply(
            s,
            other.id,
            agent(),
            "meeting",
            row(None, Some(RowImage::Meeting(elsewhere))),
        )
        .await;
        let upcoming = s
            .upcoming_meetings(p.id, now, now + TimeDelta::days(14), 5)
            .await
            .unwrap();
        let seen: Vec<(&str, usize)> = upcoming
            .iter()
            .map(|m| (m.title.as_str(), m.attendees))
            .collect();
        assert_eq!(seen, [("Sooner", 1), ("Later", 2)], "{}", db.name);
        assert_eq!(upcoming[0].meeting_id, sooner.meeting_id);
        assert_eq!(upcoming[0].starts_at, sooner.starts_at);
        let one = s
            .upcoming_meetings(p.id, now, now + TimeDelta::days(14), 1)
            .await
            .unwrap();
        assert_eq!(one.len(), 1);

        // Awaiting approval: only submitted, newest first, bounded.
        for n in 0..4i64 {
            let report = Report {
                report_id: ReportId::new_random(),
                title: format!("R{n}"),
                kind: ReportKind::Weekly,
                period_start: now.date_naive(),
                period_end: now.date_naive(),
                body: "body".into(),
                status: if n == 1 {
                    ReportStatus::Draft
                } else {
                    ReportStatus::Submitted
                },
                version: 1,
                created_by: None,
                created_at: now + TimeDelta::minutes(n),
                updated_at: now,
            };
            apply(
                s,
                p.id,
                Actor::direct(user("op")),
                "report",
                row(None, Some(RowImage::Report(report))),
            )
            .await;
        }
        let waiting = s.reports_awaiting_approval(p.id, 10).await.unwrap();
        let titles: Vec<&str> = waiting.iter().map(|r| r.title.as_str()).collect();
        assert_eq!(titles, ["R3", "R2", "R0"], "{}", db.name);
        assert_eq!(s.reports_awaiting_approval(p.id, 2).await.unwrap().len(), 2);

        // Recent agent writes: the agent's only (not the operator's
        // reports), newest first, bounded, this project only.
        let writes = s.recent_agent_writes(p.id, 10).await.unwrap();
        assert_eq!(writes.len(), 4, "{}: {writes:?}", db.name);
        assert!(
            writes
                .iter()
                .all(|w| w.agent_name.as_deref() == Some("project-alpha")
                    && w.user_id == Some(user("u-1"))
                    && w.status == EventStatus::Applied
                    && w.op == "create_meeting")
        );
        assert!(writes.windows(2).all(|w| w[0].at >= w[1].at));
        assert_eq!(s.recent_agent_writes(p.id, 3).await.unwrap().len(), 3);
    }
}

#[tokio::test]
async fn the_meta_in_one_query_is_the_row_the_journal_sees_and_the_sow_always_exists() {
    for db in migrated().await {
        let s = &db.store;
        let p = project(s, "alpha").await;
        // Before anything is set, both reads agree on the defaults.
        let by_row = |store: &Store| {
            let store = store.clone();
            async move {
                match store.row(p.id, &RowKey::ProjectMeta).await.unwrap() {
                    Some(RowImage::ProjectMeta(meta)) => meta,
                    other => panic!("{other:?}"),
                }
            }
        };
        let default = s.project_meta(&p).await.unwrap();
        assert_eq!(default, by_row(s).await, "{}", db.name);
        let set = acdm_core::business::ProjectMeta {
            status: acdm_core::business::ProjectStatus::Active,
            description: "what".into(),
            start_date: Some(at("2026-12-01T00:00:00Z").date_naive()),
            end_date: None,
            time_zone: "Europe/Paris".into(),
            updated_at: at("2026-12-02T10:11:12.123456Z"),
            ..default.clone()
        };
        apply(
            s,
            p.id,
            Actor::direct(user("op")),
            "meta",
            row(
                Some(RowImage::ProjectMeta(default)),
                Some(RowImage::ProjectMeta(set.clone())),
            ),
        )
        .await;
        assert_eq!(s.project_meta(&p).await.unwrap(), set, "{}", db.name);
        assert_eq!(by_row(s).await, set, "{}", db.name);

        // The statement of work: empty until written, then as written.
        let empty = s.sow(p.id).await.unwrap();
        assert!(empty.summary.is_empty() && empty.deliverables.is_empty());
        let written = StatementOfWork {
            summary: "Ship it".into(),
            deliverables: vec![Deliverable {
                title: "Spec".into(),
                description: String::new(),
                milestone: Some(1),
            }],
            updated_at: at("2026-12-03T00:00:00Z"),
        };
        apply(
            s,
            p.id,
            Actor::direct(user("op")),
            "sow",
            row(
                Some(RowImage::Sow(empty.clone())),
                Some(RowImage::Sow(written.clone())),
            ),
        )
        .await;
        assert_eq!(s.sow(p.id).await.unwrap(), written, "{}", db.name);
        // It is never inserted or deleted, only changed.
        let event = new_event(
            p.id,
            Actor::direct(user("op")),
            "sow",
            vec![row(None, Some(RowImage::Sow(written.clone())))],
        );
        s.record_intent(&event).await.unwrap();
        let refused = s.apply_rows(event.id, p.id, &event.plan, None).await;
        assert!(refused.is_err(), "{}: {refused:?}", db.name);
    }
}
