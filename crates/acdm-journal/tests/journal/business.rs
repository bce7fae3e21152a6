//! The crash matrix of business writes: rows alone, a file and its row, files
//! and rows together (`delete_meeting`). Each write is stopped at every
//! stage, then the reconciler runs: exactly one new event, nothing pending,
//! `failed` ⇒ files and rows exactly as before, `applied` ⇒ a revert puts
//! files back byte for byte and rows back field for field (a versioned
//! row's version moves forward).

#![expect(clippy::panic, reason = "a broken seed fails the test loudly")]

use acdm_core::UserId;
use acdm_core::business::{
    FileId, Meeting, MeetingFile, MeetingId, Report, ReportId, ReportKind, ReportStatus,
    ReportTransition, RowImage,
};
use acdm_core::events::{Actor, EventOp, EventStatus};
use acdm_journal::{Change, JournalError, Record, Stage};
use bytes::Bytes;
use chrono::{DateTime, TimeDelta, Utc};

use super::{Files, World, abs, by_agent};

fn at(text: &str) -> DateTime<Utc> {
    text.parse().unwrap()
}

fn user(id: &str) -> UserId {
    UserId::parse(id).unwrap()
}

fn operator() -> Actor {
    Actor::direct(user("op-1"))
}

fn direct<'a>(actor: &'a Actor, world: &'a World, target: &str) -> Record<'a> {
    Record {
        actor,
        project: &world.project,
        target: target.to_owned(),
        params: serde_json::json!({}),
        approval: None,
    }
}

fn meeting(id: MeetingId, title: &str) -> Meeting {
    let start = at("2026-12-01T09:00:00Z");
    Meeting {
        meeting_id: id,
        title: title.to_owned(),
        starts_at: start,
        ends_at: start + TimeDelta::hours(1),
        location: Some("Room 1".into()),
        agenda: Some("1. plan\n2. budget".into()),
        notes: None,
        attendees: vec![user("u-1"), user("u-2")],
        version: 1,
        created_by: Some(user("u-1")),
        created_at: at("2026-11-20T08:00:00Z"),
        updated_by: Some(user("u-1")),
        updated_at: at("2026-11-20T08:00:00Z"),
    }
}

fn file_row(meeting: MeetingId, name: &str, size: u64) -> MeetingFile {
    MeetingFile {
        file_id: FileId::new_random(),
        meeting_id: meeting,
        mount: "project".into(),
        rel_path: format!("meetings/{meeting}/{name}"),
        name: name.to_owned(),
        size,
        etag: None,
        content_type: Some("text/plain".into()),
        added_by: Some(user("u-1")),
        added_at: at("2026-11-20T08:05:00Z"),
        missing: false,
    }
}

fn file_path(row: &MeetingFile) -> acdm_core::AbsPath {
    abs(&format!("/Projects/Alpha/{}", row.rel_path))
}

/// What the seed created: a meeting with two files, a draft report.
struct Seed {
    meeting: Meeting,
    files: Vec<MeetingFile>,
    report: Report,
}

async fn seed(world: &World) -> Seed {
    let op = operator();
    let m = meeting(MeetingId::new_random(), "Kick-off");
    world
        .journal
        .change(
            direct(&op, world, "meeting"),
            Change {
                op: EventOp::CreateMeeting,
                remove: vec![],
                create: None,
                rows: vec![(None, Some(RowImage::Meeting(m.clone())))],
            },
        )
        .await
        .unwrap();
    let mut files = Vec::new();
    for (name, body) in [("a.txt", &b"alpha\n"[..]), ("b.txt", &b"beta beta\n"[..])] {
        let row = file_row(m.meeting_id, name, body.len() as u64);
        let changed = world
            .journal
            .change(
                direct(&op, world, "attach"),
                Change {
                    op: EventOp::AttachMeetingFile,
                    remove: vec![],
                    create: Some((file_path(&row), Bytes::copy_from_slice(body))),
                    rows: vec![(None, Some(RowImage::MeetingFile(row.clone())))],
                },
            )
            .await
            .unwrap();
        assert_eq!(changed.event.status, EventStatus::Applied);
        files.push(
            world
                .store
                .meeting_file(world.project.id, row.file_id)
                .await
                .unwrap()
                .unwrap(),
        );
    }
    let report = Report {
        report_id: ReportId::new_random(),
        title: "Week 48".into(),
        kind: ReportKind::Weekly,
        period_start: "2026-11-23".parse().unwrap(),
        period_end: "2026-11-29".parse().unwrap(),
        body: "# Done\n- kick-off".into(),
        status: ReportStatus::Draft,
        version: 1,
        created_by: Some(user("u-1")),
        created_at: at("2026-11-21T10:00:00Z"),
        updated_at: at("2026-11-21T10:00:00Z"),
    };
    world
        .journal
        .change(
            direct(&op, world, "report"),
            Change {
                op: EventOp::CreateReport,
                remove: vec![],
                create: None,
                rows: vec![(None, Some(RowImage::Report(report.clone())))],
            },
        )
        .await
        .unwrap();
    Seed {
        meeting: m,
        files,
        report,
    }
}

/// Every business row of the project, as text; with `loose`, what a
/// revert moves forward (versions, update stamps) is left out.
async fn rows(world: &World, loose: bool) -> String {
    let id = world.project.id;
    let page = world
        .store
        .meetings_page(
            id,
            at("2000-01-01T00:00:00Z"),
            at("2100-01-01T00:00:00Z"),
            100,
            None,
        )
        .await
        .unwrap();
    let mut out = String::new();
    for mut m in page.items {
        let files = world.store.meeting_files(id, m.meeting_id).await.unwrap();
        if loose {
            m.version = 0;
            m.updated_at = at("2000-01-01T00:00:00Z");
            m.updated_by = None;
        }
        out.push_str(&format!("{m:?}\n{files:?}\n"));
    }
    let reports = world.store.reports_page(id, None, 100, None).await.unwrap();
    for r in reports.items {
        let mut details = world.store.report(id, r.report_id).await.unwrap().unwrap();
        if loose {
            details.report.version = 0;
            details.report.updated_at = at("2000-01-01T00:00:00Z");
        }
        out.push_str(&format!("{details:?}\n"));
    }
    out
}

#[derive(Debug, Clone, Copy)]
enum Op {
    CreateMeeting,
    UpdateMeeting,
    AttachFile,
    DeleteFile,
    DeleteMeeting,
    SubmitReport,
}

const OPS: [Op; 6] = [
    Op::CreateMeeting,
    Op::UpdateMeeting,
    Op::AttachFile,
    Op::DeleteFile,
    Op::DeleteMeeting,
    Op::SubmitReport,
];

fn change(op: Op, seed: &Seed) -> Change {
    let m = &seed.meeting;
    let [a, b] = seed.files.as_slice() else {
        panic!("the seed attaches two files");
    };
    match op {
        Op::CreateMeeting => Change {
            op: EventOp::CreateMeeting,
            remove: vec![],
            create: None,
            rows: vec![(
                None,
                Some(RowImage::Meeting(meeting(
                    MeetingId::new_random(),
                    "Review",
                ))),
            )],
        },
        Op::UpdateMeeting => Change {
            op: EventOp::UpdateMeeting,
            remove: vec![],
            create: None,
            rows: vec![(
                Some(RowImage::Meeting(m.clone())),
                Some(RowImage::Meeting(Meeting {
                    title: "Kick-off (moved)".into(),
                    attendees: vec![user("u-2")],
                    version: m.version + 1,
                    updated_at: at("2026-11-22T08:00:00Z"),
                    updated_by: Some(user("u-2")),
                    ..m.clone()
                })),
            )],
        },
        Op::AttachFile => {
            let row = file_row(m.meeting_id, "c.md", 7);
            Change {
                op: EventOp::AttachMeetingFile,
                remove: vec![],
                create: Some((file_path(&row), Bytes::from_static(b"gamma\n\n"))),
                rows: vec![(None, Some(RowImage::MeetingFile(row)))],
            }
        }
        Op::DeleteFile => Change {
            op: EventOp::DeleteMeetingFile,
            remove: vec![file_path(a)],
            create: None,
            rows: vec![(Some(RowImage::MeetingFile(a.clone())), None)],
        },
        Op::DeleteMeeting => Change {
            op: EventOp::DeleteMeeting,
            remove: vec![file_path(a), file_path(b)],
            create: None,
            rows: vec![
                (Some(RowImage::MeetingFile(a.clone())), None),
                (Some(RowImage::MeetingFile(b.clone())), None),
                (Some(RowImage::Meeting(m.clone())), None),
            ],
        },
        Op::SubmitReport => {
            let r = &seed.report;
            Change {
                op: EventOp::UpdateReportStatus,
                remove: vec![],
                create: None,
                rows: vec![
                    (
                        Some(RowImage::Report(r.clone())),
                        Some(RowImage::Report(Report {
                            status: ReportStatus::Submitted,
                            version: r.version + 1,
                            updated_at: at("2026-11-22T09:00:00Z"),
                            ..r.clone()
                        })),
                    ),
                    (
                        None,
                        Some(RowImage::ReportTransition(ReportTransition {
                            report_id: r.report_id,
                            seq: 1,
                            from: ReportStatus::Draft,
                            to: ReportStatus::Submitted,
                            user_id: Some(user("u-1")),
                            comment: None,
                            at: at("2026-11-22T09:00:00Z"),
                        })),
                    ),
                ],
            }
        }
    }
}

#[tokio::test]
async fn a_business_write_crashed_at_any_stage_is_whole_or_absent_with_one_event() {
    crash_matrix(Files::Local).await;
}

#[tokio::test]
async fn over_webdav_a_business_write_crashed_at_any_stage_is_whole_or_absent() {
    crash_matrix(Files::WebDav).await;
}

async fn crash_matrix(files: Files) {
    for op in OPS {
        for stage in [
            None,
            Some(Stage::AfterIntent),
            Some(Stage::AfterKeep),
            Some(Stage::AfterUpstream),
        ] {
            let Some(world) = World::on(files).await else {
                return;
            };
            let seed = seed(&world).await;
            let files_before = world.snapshot();
            let rows_before = rows(&world, false).await;
            let loose_before = rows(&world, true).await;
            let seen: Vec<_> = world.events().await.iter().map(|e| e.id).collect();
            world.arm(stage);
            let outcome = world
                .journal
                .change(by_agent(&world.project, "business"), change(op, &seed))
                .await;
            world.arm(None);
            let crashed = matches!(outcome, Err(JournalError::Crashed(_)));
            if !crashed {
                let changed = outcome.unwrap_or_else(|e| panic!("{op:?} at {stage:?}: {e}"));
                assert_eq!(
                    changed.event.status,
                    EventStatus::Applied,
                    "{op:?} at {stage:?}"
                );
            }
            let settled = world.journal.reconcile(Utc::now()).await.unwrap();
            assert!(settled.left.is_empty(), "{op:?} at {stage:?}: {settled:?}");
            let events = world.events().await;
            let new: Vec<_> = events.iter().filter(|e| !seen.contains(&e.id)).collect();
            assert_eq!(new.len(), 1, "{op:?} at {stage:?}: one event");
            let [event] = new.as_slice() else {
                panic!("{op:?} at {stage:?}: {} new events", new.len());
            };
            assert_ne!(event.status, EventStatus::Pending, "{op:?} at {stage:?}");
            let files_after = super::without_new_folders(world.snapshot(), &files_before);
            match event.status {
                EventStatus::Failed => {
                    assert!(crashed, "{op:?} at {stage:?}: failed without a crash");
                    assert_eq!(
                        files_after, files_before,
                        "{op:?} at {stage:?}: files changed"
                    );
                    assert_eq!(
                        rows(&world, false).await,
                        rows_before,
                        "{op:?} at {stage:?}: rows changed"
                    );
                }
                EventStatus::Applied => {
                    assert!(
                        !crashed,
                        "{op:?} at {stage:?}: applied after a crash before the rows"
                    );
                    assert_ne!(
                        rows(&world, false).await,
                        rows_before,
                        "{op:?}: applied, rows unchanged"
                    );
                    let revert = world
                        .journal
                        .revert(&operator(), event.id, None)
                        .await
                        .unwrap_or_else(|e| panic!("{op:?} at {stage:?}: revert: {e}"));
                    assert_eq!(revert.status, EventStatus::Applied);
                    let restored = super::without_new_folders(world.snapshot(), &files_before);
                    assert_eq!(restored, files_before, "{op:?}: files not restored exactly");
                    // Versions move forward; every other field is back.
                    assert_eq!(
                        rows(&world, true).await,
                        loose_before,
                        "{op:?}: rows not restored"
                    );
                    // And the revert itself can be reverted.
                    world
                        .journal
                        .revert(&operator(), revert.id, None)
                        .await
                        .unwrap_or_else(|e| panic!("{op:?}: revert of the revert: {e}"));
                }
                other => panic!("{op:?} at {stage:?}: {other}"),
            }
        }
    }
}

#[tokio::test]
async fn a_revert_refuses_when_a_row_changed_since_and_changes_nothing() {
    let world = World::new().await;
    let seed = seed(&world).await;
    let first = world
        .journal
        .change(
            by_agent(&world.project, "business"),
            change(Op::UpdateMeeting, &seed),
        )
        .await
        .unwrap();
    // A later change of the same meeting (version 2 → 3).
    let now = world
        .store
        .meeting(world.project.id, seed.meeting.meeting_id)
        .await
        .unwrap()
        .unwrap();
    let later = Meeting {
        notes: Some("decided".into()),
        version: now.version + 1,
        ..now.clone()
    };
    world
        .journal
        .change(
            by_agent(&world.project, "business"),
            Change {
                op: EventOp::UpdateMeeting,
                remove: vec![],
                create: None,
                rows: vec![(
                    Some(RowImage::Meeting(now)),
                    Some(RowImage::Meeting(later.clone())),
                )],
            },
        )
        .await
        .unwrap();
    let files = world.snapshot();
    let rows_now = rows(&world, false).await;
    let refused = world
        .journal
        .revert(&operator(), first.event.id, None)
        .await;
    match refused {
        Err(JournalError::Conflict(message)) => {
            assert!(
                message.contains("revert the later events first"),
                "{message}"
            );
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    assert_eq!(world.snapshot(), files);
    assert_eq!(rows(&world, false).await, rows_now, "nothing changed");
    let event = world.store.event(first.event.id).await.unwrap();
    assert_eq!(event.status, EventStatus::Applied, "still revertible later");
    assert_eq!(event.reverted_by, None);
}
