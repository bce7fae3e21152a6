//! The business operations (`POST /agent-tools/business/{op}`, spec §6.2)
//! through the harness client's typed methods (`business_*`) against the
//! real service and a real WebDAV server (see `dav.rs`): meetings and their
//! files are seeded through the operations themselves, reports as an
//! operator would (`business::seed_report`, no agent operation creates
//! one), every typed answer is checked, and attachments on the WebDAV disk.
//! (`business.rs` checks the same operations' rules over raw JSON.)

use acdm_core::business::wire::{
    AttachMeetingFileRequest, CalendarKind, CreateMeetingRequest, DeleteMeetingFileRequest,
    DeleteMeetingRequest, ListCalendarRequest, ListMeetingsRequest, ListReportsRequest,
    MeetingRequest, ReportRequest, UpdateMeetingRequest, UpdateReportStatusRequest,
};
use acdm_core::business::{MeetingId, ProjectStatus, ReportId, ReportStatus};
use acdm_core::domain::MemberRole;
use acdm_core::nc::Encoding;
use acdm_core::{AgentName, ErrorCode, Identity, ThreadId, ToolResponse, UserId};
use acdm_harness_client::with_identity;
use chrono::{DateTime, FixedOffset};
use serde_json::{Value, json};

use crate::business::{add_member, seed_report};
use crate::dav::{ALPHA, NcEnv, Scope, THREAD, USER, assert_confined, assert_nothing_destroyed};

/// The project's admin (may delete meetings) and a viewer (reads only).
const ADMIN: &str = "u-admin";
const VIEWER: &str = "u-viewer";

fn identity(user: &str) -> Identity {
    Identity::new(
        UserId::parse(user).unwrap(),
        AgentName::parse(ALPHA).unwrap(),
        ThreadId::parse(THREAD).unwrap(),
    )
}

fn at(text: &str) -> DateTime<FixedOffset> {
    DateTime::parse_from_rfc3339(text).unwrap()
}

fn meeting(title: &str, starts_at: &str, ends_at: &str) -> CreateMeetingRequest {
    CreateMeetingRequest {
        title: title.to_owned(),
        starts_at: at(starts_at),
        ends_at: at(ends_at),
        location: None,
        agenda: None,
        notes: None,
        attendees: None,
    }
}

fn update(meeting_id: MeetingId, if_version: i64) -> UpdateMeetingRequest {
    UpdateMeetingRequest {
        meeting_id,
        if_version,
        title: None,
        starts_at: None,
        ends_at: None,
        location: None,
        agenda: None,
        notes: None,
        attendees: None,
    }
}

/// The answer's data, or a failure naming the call.
fn data<T>(answer: ToolResponse<T>, what: &str) -> T
where
    T: std::fmt::Debug,
{
    assert!(answer.is_success(), "{what}: {answer:?}");
    answer.into_data().unwrap()
}

#[tokio::test]
async fn the_harness_clients_typed_business_methods_round_trip_every_operation() {
    let Some(env) = NcEnv::start().await else {
        return;
    };
    add_member(&env, "alpha", ADMIN, "admin").await;
    add_member(&env, "alpha", VIEWER, "viewer").await;
    let draft = seed_report(&env, "alpha", "Week 1", ReportStatus::Draft).await;
    let submitted = seed_report(&env, "alpha", "Week 2", ReportStatus::Submitted).await;
    let client = &env.harness;
    let window = || ListMeetingsRequest {
        from: Some(at("2030-01-01T00:00:00Z")),
        to: Some(at("2030-02-01T00:00:00Z")),
        ..ListMeetingsRequest::default()
    };

    let run = async {
        // The project and its people.
        let meta = data(client.business_get_project_meta().await, "meta");
        assert_eq!((meta.slug.as_str(), meta.name.as_str()), ("alpha", "Alpha"));
        assert_eq!(meta.time_zone, "UTC");
        assert!(ProjectStatus::ALL.contains(&meta.status));
        let members = data(client.business_list_members().await, "members");
        let mut roles: Vec<(String, MemberRole)> = members
            .items
            .iter()
            .map(|m| (m.user_id.as_str().to_owned(), m.role))
            .collect();
        roles.sort();
        assert_eq!(
            roles,
            [
                (USER.to_owned(), MemberRole::Member),
                (ADMIN.to_owned(), MemberRole::Admin),
                (VIEWER.to_owned(), MemberRole::Viewer),
            ]
        );
        assert_eq!((members.total_count, members.next_cursor), (3, None));

        // Three meetings, given in other offsets, come back in UTC.
        let mut kickoff = meeting(
            "Kick-off",
            "2030-01-10T10:00:00+01:00",
            "2030-01-10T11:00:00+01:00",
        );
        kickoff.location = Some("Room 2".into());
        kickoff.agenda = Some("1. scope\n2. plan".into());
        kickoff.attendees = Some(vec![USER.into(), ADMIN.into()]);
        let created = data(client.business_create_meeting(&kickoff).await, "create");
        let first = created.meeting.clone();
        assert_eq!(first.starts_at.to_rfc3339(), "2030-01-10T09:00:00+00:00");
        assert_eq!(first.ends_at.to_rfc3339(), "2030-01-10T10:00:00+00:00");
        assert_eq!(first.version, 1);
        assert_eq!(first.location.as_deref(), Some("Room 2"));
        assert_eq!(first.created_by.as_ref().map(UserId::as_str), Some(USER));
        let attendees: Vec<&str> = first.attendees.iter().map(UserId::as_str).collect();
        assert_eq!(attendees, [USER, ADMIN]);
        assert!(created.changed.iter().any(|f| f == "title"), "{created:?}");
        let second = data(
            client
                .business_create_meeting(&meeting(
                    "Design review",
                    "2030-01-11T09:00:00Z",
                    "2030-01-11T10:00:00Z",
                ))
                .await,
            "create 2",
        )
        .meeting;
        let third = data(
            client
                .business_create_meeting(&meeting(
                    "Retro",
                    "2030-01-12T15:00:00-05:00",
                    "2030-01-12T16:00:00-05:00",
                ))
                .await,
            "create 3",
        )
        .meeting;
        assert_ne!(created.event_id.to_string(), "");

        // A viewer reads but does not write.
        let refused = client
            .as_identity(identity(VIEWER))
            .business_create_meeting(&meeting(
                "No",
                "2030-01-20T09:00:00Z",
                "2030-01-20T10:00:00Z",
            ))
            .await;
        assert_eq!(
            refused.error_code(),
            Some(ErrorCode::PermissionDenied),
            "{refused:?}"
        );
        let seen = client
            .as_identity(identity(VIEWER))
            .business_get_meeting(&MeetingRequest {
                meeting_id: first.meeting_id,
            })
            .await;
        assert_eq!(data(seen, "viewer get").meeting, first);

        // get → update → a stale update is a conflict naming the current version.
        let got = data(
            client
                .business_get_meeting(&MeetingRequest {
                    meeting_id: first.meeting_id,
                })
                .await,
            "get",
        );
        assert_eq!(got.meeting, first);
        assert!(got.files.is_empty());
        let mut change = update(first.meeting_id, 1);
        change.title = Some("Kick-off (moved)".into());
        change.starts_at = Some(at("2030-01-10T08:30:00Z"));
        let updated = data(client.business_update_meeting(&change).await, "update");
        assert_eq!(updated.meeting.version, 2);
        assert_eq!(updated.meeting.title, "Kick-off (moved)");
        assert_eq!(updated.changed, ["title", "starts_at"]);
        assert_eq!(
            updated.meeting.agenda, first.agenda,
            "fields not given stay"
        );

        let mut stale = update(first.meeting_id, 1);
        stale.notes = Some("late".into());
        let conflict = client.business_update_meeting(&stale).await;
        assert_eq!(
            conflict.error_code(),
            Some(ErrorCode::Conflict),
            "{conflict:?}"
        );
        assert!(
            conflict.message().contains("is at version 2, not 1"),
            "{}",
            conflict.message()
        );
        assert!(
            conflict
                .suggested_action()
                .unwrap()
                .contains("if_version: 2"),
            "{conflict:?}"
        );
        // The untyped call keeps the conflict's data: the current meeting
        // and the fields changed since version 1.
        let raw: ToolResponse<Value> = client
            .call(
                acdm_core::business::wire::BusinessOp::UpdateMeeting.path(),
                &stale,
            )
            .await;
        let raw_data = raw.data().unwrap();
        assert_eq!(raw_data["current_version"], 2);
        assert_eq!(raw_data["differing_fields"], json!(["title", "starts_at"]));
        assert_eq!(raw_data["meeting"]["title"], "Kick-off (moved)");

        // Paging: two, then the last one; the cursor goes back as given.
        let mut first_page = window();
        first_page.limit = Some(2);
        let page = data(client.business_list_meetings(&first_page).await, "page 1");
        let ids: Vec<MeetingId> = page.items.iter().map(|m| m.meeting_id).collect();
        assert_eq!(ids, [first.meeting_id, second.meeting_id]);
        assert_eq!(page.total_count, 3);
        let cursor = page.next_cursor.expect("a next page");
        let mut next = window();
        next.limit = Some(2);
        next.cursor = Some(cursor);
        let page = data(client.business_list_meetings(&next).await, "page 2");
        let ids: Vec<MeetingId> = page.items.iter().map(|m| m.meeting_id).collect();
        assert_eq!(ids, [third.meeting_id]);
        assert_eq!((page.next_cursor, page.total_count), (None, 3));
        let mut bad = window();
        bad.cursor = Some("not-a-cursor".into());
        let bad = client.business_list_meetings(&bad).await;
        assert_eq!(
            bad.error_code(),
            Some(ErrorCode::ValidationError),
            "{bad:?}"
        );

        // Attachments: written on the WebDAV disk and registered.
        let minutes = data(
            client
                .business_attach_meeting_file(&AttachMeetingFileRequest {
                    meeting_id: first.meeting_id,
                    name: "minutes.md".into(),
                    content: "# Minutes\n".into(),
                    encoding: None,
                })
                .await,
            "attach",
        )
        .file;
        let folder = format!("meetings/{}", first.meeting_id);
        assert_eq!(minutes.rel_path, format!("{folder}/minutes.md"));
        assert_eq!((minutes.mount.as_str(), minutes.size), ("project", 10));
        assert!(!minutes.missing);
        let slides = data(
            client
                .business_attach_meeting_file(&AttachMeetingFileRequest {
                    meeting_id: first.meeting_id,
                    name: "slides.bin".into(),
                    content: "AAEC/w==".into(),
                    encoding: Some(Encoding::Base64),
                })
                .await,
            "attach 2",
        );
        assert_eq!(slides.file.size, 4);
        let slides = slides.file;
        let on_disk = |name: &str| env.disk_read(&format!("Projects/Alpha/{folder}/{name}"));
        assert_eq!(on_disk("minutes.md").as_deref(), Some(&b"# Minutes\n"[..]));
        assert_eq!(
            on_disk("slides.bin").as_deref(),
            Some(&[0_u8, 1, 2, 0xff][..])
        );
        let twice = client
            .business_attach_meeting_file(&AttachMeetingFileRequest {
                meeting_id: first.meeting_id,
                name: "minutes.md".into(),
                content: "again".into(),
                encoding: None,
            })
            .await;
        assert_eq!(twice.error_code(), Some(ErrorCode::Conflict), "{twice:?}");
        assert_eq!(on_disk("minutes.md").as_deref(), Some(&b"# Minutes\n"[..]));

        let files = data(
            client
                .business_list_meeting_files(&MeetingRequest {
                    meeting_id: first.meeting_id,
                })
                .await,
            "files",
        );
        let mut names: Vec<&str> = files.items.iter().map(|f| f.name.as_str()).collect();
        names.sort_unstable();
        assert_eq!(names, ["minutes.md", "slides.bin"]);
        assert_eq!((files.total_count, files.next_cursor), (2, None));
        let got = data(
            client
                .business_get_meeting(&MeetingRequest {
                    meeting_id: first.meeting_id,
                })
                .await,
            "get with files",
        );
        assert_eq!(got.files.len(), 2);

        // The calendar merges the three meetings by time.
        let calendar = data(
            client
                .business_list_calendar(&ListCalendarRequest {
                    from: at("2030-01-01T00:00:00Z"),
                    to: at("2030-02-01T00:00:00Z"),
                })
                .await,
            "calendar",
        );
        let entries: Vec<(CalendarKind, Option<MeetingId>)> = calendar
            .items
            .iter()
            .map(|e| (e.kind, e.meeting_id))
            .collect();
        assert_eq!(
            entries,
            [
                (CalendarKind::Meeting, Some(first.meeting_id)),
                (CalendarKind::Meeting, Some(second.meeting_id)),
                (CalendarKind::Meeting, Some(third.meeting_id)),
            ]
        );
        assert_eq!(calendar.items[0].title, "Kick-off (moved)");

        // One file removed: its row and its bytes (into the trash).
        let removed = data(
            client
                .business_delete_meeting_file(&DeleteMeetingFileRequest {
                    meeting_id: first.meeting_id,
                    file_id: slides.file_id,
                })
                .await,
            "delete file",
        );
        assert_eq!(removed.file.file_id, slides.file_id);
        assert!(on_disk("slides.bin").is_none());
        let files = data(
            client
                .business_list_meeting_files(&MeetingRequest {
                    meeting_id: first.meeting_id,
                })
                .await,
            "files after",
        );
        assert_eq!(files.items.len(), 1);
        assert_eq!(files.items[0].file_id, minutes.file_id);

        // Deleting a meeting: a member may not; an admin gets a dry run by
        // default, then deletes the meeting and its file for real.
        let real = DeleteMeetingRequest {
            meeting_id: first.meeting_id,
            dry_run: false,
        };
        let denied = client.business_delete_meeting(&real).await;
        assert_eq!(
            denied.error_code(),
            Some(ErrorCode::PermissionDenied),
            "{denied:?}"
        );
        let admin = client.as_identity(identity(ADMIN));
        let preview = DeleteMeetingRequest {
            meeting_id: first.meeting_id,
            dry_run: true,
        };
        let dry = admin.business_delete_meeting(&preview).await;
        assert!(
            dry.suggested_action().unwrap().contains("dry_run: false"),
            "{dry:?}"
        );
        let dry = data(dry, "dry run");
        assert!(dry.dry_run);
        assert_eq!(dry.event_id, None);
        assert_eq!(dry.meeting.version, 2);
        assert_eq!(dry.files.len(), 1);
        assert!(on_disk("minutes.md").is_some(), "a dry run deletes nothing");
        let deleted = data(admin.business_delete_meeting(&real).await, "delete");
        assert!(!deleted.dry_run);
        assert!(deleted.event_id.is_some());
        assert_eq!(deleted.files[0].file_id, minutes.file_id);
        assert!(on_disk("minutes.md").is_none());
        let gone = client
            .business_get_meeting(&MeetingRequest {
                meeting_id: first.meeting_id,
            })
            .await;
        assert_eq!(gone.error_code(), Some(ErrorCode::NotFound), "{gone:?}");
        let rest = data(
            client.business_list_meetings(&window()).await,
            "after delete",
        );
        assert_eq!(rest.total_count, 2);

        // Reports: paged newest first, filtered by status, moved along
        // their flow with the roles it needs, each move in the history.
        let mut one = ListReportsRequest {
            limit: Some(1),
            ..ListReportsRequest::default()
        };
        let page = data(client.business_list_reports(&one).await, "reports 1");
        assert_eq!(page.items.len(), 1);
        assert_eq!(page.total_count, 2);
        one.cursor = Some(page.next_cursor.clone().expect("a next page"));
        let rest = data(client.business_list_reports(&one).await, "reports 2");
        assert_eq!((rest.items.len(), rest.next_cursor.as_deref()), (1, None));
        let mut both: Vec<ReportId> = vec![page.items[0].report_id, rest.items[0].report_id];
        both.sort();
        let mut seeded = vec![draft, submitted];
        seeded.sort();
        assert_eq!(both, seeded);
        let drafts = data(
            client
                .business_list_reports(&ListReportsRequest {
                    status: Some(ReportStatus::Draft),
                    ..ListReportsRequest::default()
                })
                .await,
            "drafts",
        );
        let ids: Vec<ReportId> = drafts.items.iter().map(|r| r.report_id).collect();
        assert_eq!((ids, drafts.total_count), (vec![draft], 1));

        let move_to =
            |report_id, to, comment: Option<&str>, if_version| UpdateReportStatusRequest {
                report_id,
                to,
                comment: comment.map(str::to_owned),
                if_version,
            };
        let moved = data(
            client
                .business_update_report_status(&move_to(
                    draft,
                    ReportStatus::Submitted,
                    None,
                    Some(1),
                ))
                .await,
            "submit",
        );
        assert_eq!(
            (moved.report.status, moved.report.version),
            (ReportStatus::Submitted, 2)
        );
        assert_eq!(
            (moved.transition.from, moved.transition.to),
            (ReportStatus::Draft, ReportStatus::Submitted)
        );
        assert_eq!(
            moved.transition.user_id.as_ref().map(UserId::as_str),
            Some(USER)
        );
        let stale = client
            .business_update_report_status(&move_to(draft, ReportStatus::Approved, None, Some(1)))
            .await;
        assert_eq!(stale.error_code(), Some(ErrorCode::Conflict), "{stale:?}");
        let denied = client
            .business_update_report_status(&move_to(draft, ReportStatus::Approved, None, Some(2)))
            .await;
        assert_eq!(
            denied.error_code(),
            Some(ErrorCode::PermissionDenied),
            "{denied:?}"
        );
        let rejected = data(
            admin
                .business_update_report_status(&move_to(
                    draft,
                    ReportStatus::Rejected,
                    Some("numbers missing"),
                    Some(2),
                ))
                .await,
            "reject",
        );
        assert_eq!(rejected.report.status, ReportStatus::Rejected);
        assert_eq!(
            rejected.transition.comment.as_deref(),
            Some("numbers missing")
        );
        let illegal = client
            .business_update_report_status(&move_to(draft, ReportStatus::Approved, None, None))
            .await;
        assert_eq!(
            illegal.error_code(),
            Some(ErrorCode::Conflict),
            "{illegal:?}"
        );
        let details = data(
            client
                .business_get_report(&ReportRequest { report_id: draft })
                .await,
            "get report",
        );
        assert_eq!(details.report.status, ReportStatus::Rejected);
        assert_eq!(details.report.title, "Week 1");
        let history: Vec<(u32, ReportStatus, ReportStatus)> = details
            .history
            .iter()
            .map(|t| (t.seq, t.from, t.to))
            .collect();
        assert_eq!(
            history,
            [
                (1, ReportStatus::Draft, ReportStatus::Submitted),
                (2, ReportStatus::Submitted, ReportStatus::Rejected),
            ]
        );
        let unknown = client
            .business_get_report(&ReportRequest {
                report_id: ReportId::new_random(),
            })
            .await;
        assert_eq!(
            unknown.error_code(),
            Some(ErrorCode::NotFound),
            "{unknown:?}"
        );
    };
    with_identity(identity(USER), run).await;

    let records = env.recorder().all();
    assert_confined(&records, &Scope::alpha(), "business operations");
    assert_nothing_destroyed(&records, "business operations");
    env.stop().await;
}
