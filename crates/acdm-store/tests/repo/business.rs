//! Business objects on both databases: the constraints that keep them valid,
//! row changes applied with their event (compare-and-set on the
//! before-image), concurrent updates of one meeting, keyset paging, and
//! one project never seeing another's rows.

use acdm_core::business::{
    Cursor, FileId, Meeting, MeetingFile, MeetingId, Milestone, MilestoneStatus, Report, ReportId,
    ReportKind, ReportStatus, RowImage,
};
use acdm_core::domain::ProjectId;
use acdm_core::events::{Actor, EventId, EventOp, EventStatus, NewEvent, Step};
use acdm_store::{Store, StoreError};
use chrono::{DateTime, TimeDelta, Utc};

use crate::harness::{at, migrated, project, user};

fn meeting(starts_at: DateTime<Utc>, title: &str) -> Meeting {
    Meeting {
        meeting_id: MeetingId::new_random(),
        title: title.to_owned(),
        starts_at,
        ends_at: starts_at + TimeDelta::minutes(30),
        location: None,
        agenda: None,
        notes: None,
        attendees: vec![user("u-1")],
        version: 1,
        created_by: Some(user("u-1")),
        created_at: at("2026-11-20T08:00:00Z"),
        updated_by: Some(user("u-1")),
        updated_at: at("2026-11-20T08:00:00Z"),
    }
}

/// Records an intent with `rows` as its plan and applies them.
async fn write(
    store: &Store,
    project: ProjectId,
    rows: Vec<(Option<RowImage>, Option<RowImage>)>,
) -> Result<(), StoreError> {
    let plan: Vec<Step> = rows
        .into_iter()
        .map(|(before, after)| Step::Row {
            before: before.map(Box::new),
            after: after.map(Box::new),
        })
        .collect();
    let event = NewEvent {
        id: EventId::new_random(),
        actor: Actor::direct(user("op-1")),
        project_id: project,
        op: EventOp::UpdateMeeting,
        target: "test".into(),
        params: serde_json::json!({}),
        plan: plan.clone(),
        undo: vec![],
        reverts: None,
        approval: None,
    };
    store.record_intent(&event).await?;
    let applied = store.apply_rows(event.id, project, &plan, None).await;
    if applied.is_err() {
        store.mark_failed(event.id, "test").await?;
    }
    assert!(
        applied.as_ref().is_err()
            || applied
                .as_ref()
                .is_ok_and(|e| e.status == EventStatus::Applied)
    );
    applied.map(|_| ())
}

#[tokio::test]
async fn rows_change_with_their_event_and_only_from_the_state_they_were_planned_on() {
    for db in migrated().await {
        let s = &db.store;
        let p = project(s, "alpha").await;
        let m = meeting(at("2026-12-01T09:00:00Z"), "Kick-off");
        write(s, p.id, vec![(None, Some(RowImage::Meeting(m.clone())))])
            .await
            .unwrap();
        assert_eq!(
            s.meeting(p.id, m.meeting_id).await.unwrap(),
            Some(m.clone()),
            "{}",
            db.name
        );

        // Inserting again: the row exists, nothing changes.
        let again = write(s, p.id, vec![(None, Some(RowImage::Meeting(m.clone())))]).await;
        assert!(
            matches!(again, Err(StoreError::Stale { .. })),
            "{}: {again:?}",
            db.name
        );

        let v2 = Meeting {
            title: "Kick-off v2".into(),
            attendees: vec![user("u-2"), user("u-1")],
            version: 2,
            ..m.clone()
        };
        write(
            s,
            p.id,
            vec![(
                Some(RowImage::Meeting(m.clone())),
                Some(RowImage::Meeting(v2.clone())),
            )],
        )
        .await
        .unwrap();
        assert_eq!(
            s.meeting(p.id, m.meeting_id).await.unwrap(),
            Some(v2.clone()),
            "{}: attendees keep their order",
            db.name
        );

        // Planned on version 1, but it is at 2 now.
        let stale = write(s, p.id, vec![(Some(RowImage::Meeting(m.clone())), None)]).await;
        match stale {
            Err(StoreError::Stale { detail, .. }) => {
                assert!(detail.contains("version 2"), "{}: {detail}", db.name);
            }
            other => panic!("{}: {other:?}", db.name),
        }
        // A failed step in the middle undoes the steps before it.
        let other = meeting(at("2026-12-02T09:00:00Z"), "Other");
        let mixed = write(
            s,
            p.id,
            vec![
                (None, Some(RowImage::Meeting(other.clone()))),
                (Some(RowImage::Meeting(m.clone())), None),
            ],
        )
        .await;
        assert!(mixed.is_err(), "{}", db.name);
        assert_eq!(
            s.meeting(p.id, other.meeting_id).await.unwrap(),
            None,
            "{}: all or nothing",
            db.name
        );

        // The database refuses what the domain forbids, even if asked.
        let backwards = Meeting {
            ends_at: m.starts_at,
            ..meeting(m.starts_at, "Backwards")
        };
        assert!(
            write(s, p.id, vec![(None, Some(RowImage::Meeting(backwards)))])
                .await
                .is_err(),
            "{}",
            db.name
        );
        let milestone = |seq, status| Milestone {
            seq,
            title: format!("M{seq}"),
            due_date: None,
            status,
            acceptance_criteria: vec!["signed".into()],
            closed_at: None,
            closed_by: None,
        };
        write(
            s,
            p.id,
            vec![(
                None,
                Some(RowImage::Milestone(milestone(1, MilestoneStatus::Current))),
            )],
        )
        .await
        .unwrap();
        let second = write(
            s,
            p.id,
            vec![(
                None,
                Some(RowImage::Milestone(milestone(2, MilestoneStatus::Current))),
            )],
        )
        .await;
        assert!(
            matches!(second, Err(StoreError::Stale { .. })),
            "{}: two current milestones: {second:?}",
            db.name
        );
        assert_eq!(
            s.milestones(p.id).await.unwrap(),
            vec![milestone(1, MilestoneStatus::Current)],
            "{}",
            db.name
        );

        // A file row needs its meeting in the same project, and the meeting
        // cannot go while a file row points at it.
        let file = MeetingFile {
            file_id: FileId::new_random(),
            meeting_id: m.meeting_id,
            mount: "project".into(),
            rel_path: format!("meetings/{}/50%_done.txt", m.meeting_id),
            name: "50%_done.txt".into(),
            size: 3,
            etag: Some("\"e1\"".into()),
            content_type: None,
            added_by: None,
            added_at: at("2026-11-20T09:00:00Z"),
            missing: false,
        };
        write(
            s,
            p.id,
            vec![(None, Some(RowImage::MeetingFile(file.clone())))],
        )
        .await
        .unwrap();
        let orphaning = write(s, p.id, vec![(Some(RowImage::Meeting(v2.clone())), None)]).await;
        assert!(
            matches!(orphaning, Err(StoreError::Stale { .. })),
            "{}: a meeting with files cannot be deleted alone: {orphaning:?}",
            db.name
        );
        // A file row for a meeting that is not there is refused, not
        // silently left out.
        let stray = MeetingFile {
            file_id: FileId::new_random(),
            meeting_id: MeetingId::new_random(),
            rel_path: "meetings/none/x.txt".into(),
            ..file.clone()
        };
        let stray = write(s, p.id, vec![(None, Some(RowImage::MeetingFile(stray)))]).await;
        match stray {
            Err(StoreError::Stale { detail, .. }) => {
                assert!(detail.contains("is gone"), "{}: {detail}", db.name);
            }
            other => panic!("{}: {other:?}", db.name),
        }
        let found = |path: &'static str| {
            let s = s.clone();
            async move {
                s.attachment_at_or_under(p.id, "project", path)
                    .await
                    .unwrap()
                    .map(|f| f.file_id)
            }
        };
        assert_eq!(found("").await, Some(file.file_id), "{}", db.name);
        assert_eq!(found("meetings").await, Some(file.file_id), "{}", db.name);
        assert_eq!(
            found(Box::leak(file.rel_path.clone().into_boxed_str())).await,
            Some(file.file_id),
            "{}",
            db.name
        );
        // `%` and `_` are no wildcards; a sibling with a common prefix is not "under".
        assert_eq!(found("meet%").await, None, "{}", db.name);
        assert_eq!(found("meeting").await, None, "{}", db.name);
        assert_eq!(found("meetings_").await, None, "{}", db.name);

        // Another project sees none of it.
        let q = project(s, "beta").await;
        assert_eq!(
            s.meeting(q.id, m.meeting_id).await.unwrap(),
            None,
            "{}",
            db.name
        );
        assert_eq!(
            s.meeting_file(q.id, file.file_id).await.unwrap(),
            None,
            "{}",
            db.name
        );
        assert!(
            s.meeting_files(q.id, m.meeting_id)
                .await
                .unwrap()
                .is_empty(),
            "{}",
            db.name
        );
        assert_eq!(
            s.attachment_at_or_under(q.id, "project", "").await.unwrap(),
            None,
            "{}",
            db.name
        );
        let foreign = write(s, q.id, vec![(Some(RowImage::Meeting(v2.clone())), None)]).await;
        assert!(
            matches!(foreign, Err(StoreError::Stale { .. })),
            "{}: {foreign:?}",
            db.name
        );
        assert!(
            s.meeting(p.id, m.meeting_id).await.unwrap().is_some(),
            "{}",
            db.name
        );
        db.finish().await;
    }
}

#[tokio::test]
async fn of_two_concurrent_updates_of_one_meeting_exactly_one_wins() {
    for db in migrated().await {
        let other = db.open_again().await;
        let p = project(&db.store, "alpha").await;
        let m = meeting(at("2026-12-01T09:00:00Z"), "Kick-off");
        write(
            &db.store,
            p.id,
            vec![(None, Some(RowImage::Meeting(m.clone())))],
        )
        .await
        .unwrap();
        let mut current = m.clone();
        for round in 0..8 {
            let a = Meeting {
                title: format!("A{round}"),
                version: current.version + 1,
                ..current.clone()
            };
            let b = Meeting {
                title: format!("B{round}"),
                version: current.version + 1,
                ..current.clone()
            };
            let before = Some(RowImage::Meeting(current.clone()));
            let (first, second) = tokio::join!(
                write(
                    &db.store,
                    p.id,
                    vec![(before.clone(), Some(RowImage::Meeting(a.clone())))]
                ),
                write(
                    &other,
                    p.id,
                    vec![(before.clone(), Some(RowImage::Meeting(b.clone())))]
                ),
            );
            assert!(
                first.is_ok() != second.is_ok(),
                "{}: round {round}: {first:?} / {second:?}",
                db.name
            );
            let loser = first.as_ref().err().or(second.as_ref().err()).unwrap();
            assert!(
                matches!(loser, StoreError::Stale { .. } | StoreError::Unavailable(_)),
                "{}: {loser:?}",
                db.name
            );
            current = db.store.meeting(p.id, m.meeting_id).await.unwrap().unwrap();
            let winner = if first.is_ok() { &a } else { &b };
            assert_eq!(&current, winner, "{}: round {round}", db.name);
        }
        other.close().await;
        db.finish().await;
    }
}

#[tokio::test]
async fn keyset_pages_never_skip_or_repeat_even_when_rows_arrive_between_pages() {
    for db in migrated().await {
        let s = &db.store;
        let p = project(s, "alpha").await;
        let base = at("2026-12-01T09:00:00Z");
        let mut all = Vec::new();
        // 45 meetings, three at each start time: ties are ordered by id.
        for i in 0..45 {
            let m = meeting(base + TimeDelta::hours(i / 3), &format!("M{i}"));
            write(s, p.id, vec![(None, Some(RowImage::Meeting(m.clone())))])
                .await
                .unwrap();
            all.push(m);
        }
        all.sort_by(|a, b| {
            (a.starts_at, a.meeting_id.to_string()).cmp(&(b.starts_at, b.meeting_id.to_string()))
        });
        let (from, to) = (base, base + TimeDelta::days(30));
        let mut seen = Vec::new();
        let mut cursor: Option<Cursor> = None;
        let mut pages = 0;
        loop {
            let page = s
                .meetings_page(p.id, from, to, 20, cursor.as_ref())
                .await
                .unwrap();
            assert_eq!(page.total, 45 + u64::from(pages > 0), "{}", db.name);
            seen.extend(page.items.iter().map(|m| m.meeting_id));
            pages += 1;
            if pages == 1 {
                // Earlier than the cursor: must not show up on later pages.
                let early = meeting(
                    base - TimeDelta::hours(1) + TimeDelta::days(0) + TimeDelta::hours(1),
                    "late arrival",
                );
                write(
                    s,
                    p.id,
                    vec![(None, Some(RowImage::Meeting(early.clone())))],
                )
                .await
                .unwrap();
                all.push(early);
            }
            match page.next {
                Some(next) => cursor = Some(Cursor::decode(&next.encode()).unwrap()),
                None => break,
            }
        }
        assert_eq!(pages, 3, "{}", db.name);
        let mut unique = seen.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(
            unique.len(),
            seen.len(),
            "{}: a meeting was repeated",
            db.name
        );
        // Everything that existed at the first page was seen, in order.
        let expected: Vec<MeetingId> = all.iter().take(45).map(|m| m.meeting_id).collect();
        let seen_original: Vec<MeetingId> = seen
            .iter()
            .copied()
            .filter(|id| expected.contains(id))
            .collect();
        assert_eq!(seen_original, expected, "{}", db.name);
        // A forged cursor is refused, not misread.
        let forged = Cursor {
            key: "yesterday".into(),
            id: "x".into(),
        };
        assert!(
            matches!(
                s.meetings_page(p.id, from, to, 20, Some(&forged)).await,
                Err(StoreError::InvalidCursor)
            ),
            "{}",
            db.name
        );

        // Reports: newest first, by status, counted.
        for i in 0..25i64 {
            let status = [
                ReportStatus::Draft,
                ReportStatus::Submitted,
                ReportStatus::Approved,
                ReportStatus::Rejected,
            ][usize::try_from(i % 4).unwrap()];
            let report = Report {
                report_id: ReportId::new_random(),
                title: format!("R{i}"),
                kind: ReportKind::Weekly,
                period_start: "2026-11-23".parse().unwrap(),
                period_end: "2026-11-29".parse().unwrap(),
                body: String::new(),
                status,
                version: 1,
                created_by: None,
                created_at: base + TimeDelta::minutes(i),
                updated_at: base + TimeDelta::minutes(i),
            };
            write(s, p.id, vec![(None, Some(RowImage::Report(report)))])
                .await
                .unwrap();
        }
        let first = s.reports_page(p.id, None, 10, None).await.unwrap();
        assert_eq!(first.total, 25, "{}", db.name);
        assert_eq!(
            first.items.first().unwrap().title,
            "R24",
            "{}: newest first",
            db.name
        );
        let second = s
            .reports_page(p.id, None, 10, first.next.as_ref())
            .await
            .unwrap();
        assert_eq!(second.items.first().unwrap().title, "R14", "{}", db.name);
        let drafts = s
            .reports_page(p.id, Some(ReportStatus::Draft), 100, None)
            .await
            .unwrap();
        assert_eq!(drafts.total, 7, "{}", db.name);
        assert!(
            drafts.items.iter().all(|r| r.status == ReportStatus::Draft),
            "{}",
            db.name
        );
        assert!(drafts.next.is_none(), "{}", db.name);
        let counts = s.report_counts(p.id).await.unwrap();
        assert_eq!(
            counts,
            vec![
                (ReportStatus::Draft, 7),
                (ReportStatus::Submitted, 6),
                (ReportStatus::Approved, 6),
                (ReportStatus::Rejected, 6)
            ],
            "{}",
            db.name
        );
        db.finish().await;
    }
}
