//! The wire types of the business operations (spec §6.2,
//! `POST /agent-tools/business/{op}`): one request and one response `data`
//! type per operation, shared by the BFF (which parses requests strictly)
//! and the harness client (which sends them), so the two cannot drift.
//!
//! Times are RFC 3339 **with an offset** on input (`2026-12-01T09:00:00+01:00`
//! or `…Z`; a time without one is refused) and UTC on output. Every list
//! answers with the same envelope: `items`, `next_cursor`, `total_count`.

use chrono::{DateTime, FixedOffset, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{
    Access, FileId, Meeting, MeetingFile, MeetingId, MemberInfo, ProjectMeta, Report,
    ReportDetails, ReportId, ReportStatus, ReportTransition,
};
use crate::domain::EventId;
use crate::nc::Encoding;

crate::ops::operations!(
    /// The business operations, in the order they are documented; each
    /// name is also the last segment of its path
    /// (`agent-tools/business/<name>`).
    BusinessOp = "business" {
        /// Meetings in a time window, by start.
        ListMeetings = "list_meetings", read;
        /// One meeting with its files.
        GetMeeting = "get_meeting", read;
        /// Create a meeting.
        CreateMeeting = "create_meeting", write;
        /// Change a meeting (`if_version`).
        UpdateMeeting = "update_meeting", write;
        /// Delete a meeting with its files (a dry run by default).
        DeleteMeeting = "delete_meeting", write;
        /// A meeting's files.
        ListMeetingFiles = "list_meeting_files", read;
        /// Write a file under the meeting's folder and register it.
        AttachMeetingFile = "attach_meeting_file", write;
        /// Remove a meeting's file and its registration.
        DeleteMeetingFile = "delete_meeting_file", write;
        /// Meetings and milestone due dates in a window, by time.
        ListCalendar = "list_calendar", read;
        /// Reports, newest first.
        ListReports = "list_reports", read;
        /// One report with its history.
        GetReport = "get_report", read;
        /// Move a report along its approval flow.
        UpdateReportStatus = "update_report_status", write;
        /// The project's members.
        ListMembers = "list_members", read;
        /// The project's meta.
        GetProjectMeta = "get_project_meta", read;
    }
);

impl BusinessOp {
    /// What the acting user's role must grant (spec §6.5). For
    /// `update_report_status` this is the least a move needs; approving
    /// and rejecting need [`Access::Manage`] ([`ReportStatus::move_needs`]).
    pub const fn access(self) -> Access {
        match self {
            Self::DeleteMeeting => Access::Manage,
            op if op.writes() => Access::Contribute,
            _ => Access::Read,
        }
    }

    /// The JSON Schema of the operation's request body, generated from the
    /// very type the BFF parses.
    pub fn request_schema(self) -> schemars::Schema {
        match self {
            Self::ListMeetings => schemars::schema_for!(ListMeetingsRequest),
            Self::GetMeeting => schemars::schema_for!(MeetingRequest),
            Self::CreateMeeting => schemars::schema_for!(CreateMeetingRequest),
            Self::UpdateMeeting => schemars::schema_for!(UpdateMeetingRequest),
            Self::DeleteMeeting => schemars::schema_for!(DeleteMeetingRequest),
            Self::ListMeetingFiles => schemars::schema_for!(MeetingRequest),
            Self::AttachMeetingFile => schemars::schema_for!(AttachMeetingFileRequest),
            Self::DeleteMeetingFile => schemars::schema_for!(DeleteMeetingFileRequest),
            Self::ListCalendar => schemars::schema_for!(ListCalendarRequest),
            Self::ListReports => schemars::schema_for!(ListReportsRequest),
            Self::GetReport => schemars::schema_for!(ReportRequest),
            Self::UpdateReportStatus => schemars::schema_for!(UpdateReportStatusRequest),
            Self::ListMembers | Self::GetProjectMeta => schemars::schema_for!(EmptyRequest),
        }
    }

    /// The same schema as a subschema of `generator` (a `$ref` to its
    /// definitions for named types), for documents that collect every
    /// operation's types in one place (the OpenAPI document).
    pub fn request_subschema(self, generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        match self {
            Self::ListMeetings => generator.subschema_for::<ListMeetingsRequest>(),
            Self::GetMeeting => generator.subschema_for::<MeetingRequest>(),
            Self::CreateMeeting => generator.subschema_for::<CreateMeetingRequest>(),
            Self::UpdateMeeting => generator.subschema_for::<UpdateMeetingRequest>(),
            Self::DeleteMeeting => generator.subschema_for::<DeleteMeetingRequest>(),
            Self::ListMeetingFiles => generator.subschema_for::<MeetingRequest>(),
            Self::AttachMeetingFile => generator.subschema_for::<AttachMeetingFileRequest>(),
            Self::DeleteMeetingFile => generator.subschema_for::<DeleteMeetingFileRequest>(),
            Self::ListCalendar => generator.subschema_for::<ListCalendarRequest>(),
            Self::ListReports => generator.subschema_for::<ListReportsRequest>(),
            Self::GetReport => generator.subschema_for::<ReportRequest>(),
            Self::UpdateReportStatus => generator.subschema_for::<UpdateReportStatusRequest>(),
            Self::ListMembers | Self::GetProjectMeta => generator.subschema_for::<EmptyRequest>(),
        }
    }

    /// The JSON Schema of the `data` of its success.
    pub fn data_schema(self) -> schemars::Schema {
        match self {
            Self::ListMeetings => schemars::schema_for!(Paged<Meeting>),
            Self::GetMeeting => schemars::schema_for!(MeetingData),
            Self::CreateMeeting | Self::UpdateMeeting => schemars::schema_for!(MeetingWritten),
            Self::DeleteMeeting => schemars::schema_for!(DeleteMeetingData),
            Self::ListMeetingFiles => schemars::schema_for!(Paged<MeetingFile>),
            Self::AttachMeetingFile | Self::DeleteMeetingFile => {
                schemars::schema_for!(MeetingFileWritten)
            }
            Self::ListCalendar => schemars::schema_for!(Paged<CalendarEntry>),
            Self::ListReports => schemars::schema_for!(Paged<Report>),
            Self::GetReport => schemars::schema_for!(ReportDetails),
            Self::UpdateReportStatus => schemars::schema_for!(ReportStatusData),
            Self::ListMembers => schemars::schema_for!(Paged<MemberInfo>),
            Self::GetProjectMeta => schemars::schema_for!(ProjectMeta),
        }
    }

    /// The same schema as a subschema of `generator` (a `$ref` to its
    /// definitions for named types), for documents that collect every
    /// operation's types in one place (the OpenAPI document).
    pub fn data_subschema(self, generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        match self {
            Self::ListMeetings => generator.subschema_for::<Paged<Meeting>>(),
            Self::GetMeeting => generator.subschema_for::<MeetingData>(),
            Self::CreateMeeting | Self::UpdateMeeting => {
                generator.subschema_for::<MeetingWritten>()
            }
            Self::DeleteMeeting => generator.subschema_for::<DeleteMeetingData>(),
            Self::ListMeetingFiles => generator.subschema_for::<Paged<MeetingFile>>(),
            Self::AttachMeetingFile | Self::DeleteMeetingFile => {
                generator.subschema_for::<MeetingFileWritten>()
            }
            Self::ListCalendar => generator.subschema_for::<Paged<CalendarEntry>>(),
            Self::ListReports => generator.subschema_for::<Paged<Report>>(),
            Self::GetReport => generator.subschema_for::<ReportDetails>(),
            Self::UpdateReportStatus => generator.subschema_for::<ReportStatusData>(),
            Self::ListMembers => generator.subschema_for::<Paged<MemberInfo>>(),
            Self::GetProjectMeta => generator.subschema_for::<ProjectMeta>(),
        }
    }
}

fn yes() -> bool {
    true
}

fn is_true(value: &bool) -> bool {
    *value
}

/// No fields (`list_members`, `get_project_meta`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EmptyRequest {}

/// `list_meetings`: a window by start time, paged.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListMeetingsRequest {
    /// Meetings starting at or after this time (default: now).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<DateTime<FixedOffset>>,
    /// Meetings starting before this time (default: `from` + 30 days; at
    /// most 366 days after `from`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<DateTime<FixedOffset>>,
    /// Page size, 1–100 (default 20).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub limit: Option<u32>,
    /// `next_cursor` of the previous page, as returned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9a-f]{2})+$"))]
    pub cursor: Option<String>,
}

/// `get_meeting`, `list_meeting_files`: one meeting.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MeetingRequest {
    /// The meeting's id (from `list_meetings` or `list_calendar`).
    pub meeting_id: MeetingId,
}

/// `create_meeting`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateMeetingRequest {
    /// 1–200 characters, one line.
    #[schemars(length(min = 1, max = 200), regex(pattern = super::LINE_PATTERN))]
    pub title: String,
    /// When it starts, RFC 3339 with an offset.
    pub starts_at: DateTime<FixedOffset>,
    /// When it ends: after the start, at most 24 hours later.
    pub ends_at: DateTime<FixedOffset>,
    /// Where (a room, a link); up to 500 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 500), regex(pattern = super::OPTIONAL_LINE_PATTERN))]
    pub location: Option<String>,
    /// What will be discussed (markdown, up to 20,000 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 20000), regex(pattern = super::TEXT_PATTERN))]
    pub agenda: Option<String>,
    /// Notes (markdown, up to 20,000 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 20000), regex(pattern = super::TEXT_PATTERN))]
    pub notes: Option<String>,
    /// User ids of project members (see `list_members`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attendees: Option<Vec<String>>,
}

/// `update_meeting`: only the fields given change (at least one). An
/// empty `location`, `agenda` or `notes` clears it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend("minProperties" = 3))]
pub struct UpdateMeetingRequest {
    /// The meeting.
    pub meeting_id: MeetingId,
    /// The `version` you read; a stale one is a `conflict` with the current
    /// version and the fields that differ.
    pub if_version: i64,
    /// New title (1–200 characters, one line).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 200), regex(pattern = super::LINE_PATTERN))]
    pub title: Option<String>,
    /// New start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub starts_at: Option<DateTime<FixedOffset>>,
    /// New end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ends_at: Option<DateTime<FixedOffset>>,
    /// New location (empty clears it; up to 500 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 500), regex(pattern = super::OPTIONAL_LINE_PATTERN))]
    pub location: Option<String>,
    /// New agenda (empty clears it; up to 20,000 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 20000), regex(pattern = super::TEXT_PATTERN))]
    pub agenda: Option<String>,
    /// New notes (empty clears them; up to 20,000 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 20000), regex(pattern = super::TEXT_PATTERN))]
    pub notes: Option<String>,
    /// The whole new list of attendees (member user ids).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attendees: Option<Vec<String>>,
}

/// `delete_meeting`: a dry run unless `dry_run` is false.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeleteMeetingRequest {
    /// The meeting.
    pub meeting_id: MeetingId,
    /// Only report what would be removed (the default).
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub dry_run: bool,
}

/// `attach_meeting_file`: a new file under `meetings/<meeting_id>/`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AttachMeetingFileRequest {
    /// The meeting.
    pub meeting_id: MeetingId,
    /// The file's name (one name, no folders), e.g. `minutes.md`.
    pub name: String,
    /// The content, as text or base64 (see `encoding`); up to 10 MiB.
    pub content: String,
    /// How `content` is encoded (default `text`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encoding: Option<Encoding>,
}

/// `delete_meeting_file`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeleteMeetingFileRequest {
    /// The meeting.
    pub meeting_id: MeetingId,
    /// The file (from `get_meeting` or `list_meeting_files`).
    pub file_id: FileId,
}

/// `list_calendar`: a window of at most 366 days.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListCalendarRequest {
    /// Start of the window (inclusive), RFC 3339 with an offset.
    pub from: DateTime<FixedOffset>,
    /// End of the window (exclusive).
    pub to: DateTime<FixedOffset>,
}

/// `list_reports`: newest first, paged.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListReportsRequest {
    /// Only reports in this status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ReportStatus>,
    /// Page size, 1–100 (default 20).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub limit: Option<u32>,
    /// `next_cursor` of the previous page, as returned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9a-f]{2})+$"))]
    pub cursor: Option<String>,
}

/// `get_report`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReportRequest {
    /// The report's id (from `list_reports`).
    pub report_id: ReportId,
}

/// `update_report_status`: draft→submitted, submitted→approved or
/// rejected (admins and owners), rejected→draft.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateReportStatusRequest {
    /// The report.
    pub report_id: ReportId,
    /// The new status.
    pub to: ReportStatus,
    /// Why (required for `rejected`; up to 2,000 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 2000), regex(pattern = super::TEXT_PATTERN))]
    pub comment: Option<String>,
    /// The `version` you read; a stale one is a `conflict`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub if_version: Option<i64>,
}

/// One page of a list: every list answers with this envelope.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(rename = "Paged{T}")]
pub struct Paged<T> {
    /// The items of this page.
    pub items: Vec<T>,
    /// Pass as `cursor` to get the next page; `null` at the end.
    pub next_cursor: Option<String>,
    /// How many items the filters select, across all pages.
    pub total_count: u64,
}

/// `get_meeting` data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct MeetingData {
    /// The meeting.
    pub meeting: Meeting,
    /// Its files (`missing: true` for one found gone).
    pub files: Vec<MeetingFile>,
}

/// `create_meeting` and `update_meeting` data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct MeetingWritten {
    /// The meeting as it is now.
    pub meeting: Meeting,
    /// The fields that changed (all of them for a create).
    pub changed: Vec<String>,
    /// The storage event recording the change (operators can revert it).
    pub event_id: EventId,
}

/// `delete_meeting` data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct DeleteMeetingData {
    /// True when nothing was deleted (a dry run).
    pub dry_run: bool,
    /// The meeting (as it was).
    pub meeting: Meeting,
    /// Its files, removed with it (or that would be).
    pub files: Vec<MeetingFile>,
    /// The storage event, for a real delete.
    pub event_id: Option<EventId>,
}

/// `attach_meeting_file` and `delete_meeting_file` data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct MeetingFileWritten {
    /// The file's row (as it is now, or as it was for a delete).
    pub file: MeetingFile,
    /// The storage event recording the change.
    pub event_id: EventId,
}

/// What a calendar entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CalendarKind {
    /// A meeting.
    Meeting,
    /// A milestone's due date.
    MilestoneDue,
}

/// One entry of `list_calendar`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CalendarEntry {
    /// Meeting or milestone due date.
    pub kind: CalendarKind,
    /// When (UTC): a meeting's start, or the due date at 00:00.
    pub at: DateTime<Utc>,
    /// A meeting's end.
    pub ends_at: Option<DateTime<Utc>>,
    /// The meeting's or the milestone's title.
    pub title: String,
    /// The meeting, for a meeting.
    pub meeting_id: Option<MeetingId>,
    /// The milestone's `seq`, for a due date.
    pub milestone_seq: Option<u32>,
}

/// `update_report_status` data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ReportStatusData {
    /// The report as it is now.
    pub report: Report,
    /// The move just made.
    pub transition: ReportTransition,
    /// The storage event recording it.
    pub event_id: EventId,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_business_operations_have_their_wire_names_and_kinds() {
        assert_eq!(BusinessOp::ALL.len(), 14);
        let writes: Vec<&str> = BusinessOp::ALL
            .iter()
            .filter(|op| op.writes())
            .map(|op| op.as_str())
            .collect();
        assert_eq!(
            writes,
            [
                "create_meeting",
                "update_meeting",
                "delete_meeting",
                "attach_meeting_file",
                "delete_meeting_file",
                "update_report_status"
            ]
        );
        assert_eq!(
            BusinessOp::GetMeeting.path(),
            "agent-tools/business/get_meeting"
        );
    }

    #[test]
    fn times_need_an_offset_and_strangers_are_refused() {
        let ok: ListCalendarRequest = serde_json::from_str(
            r#"{"from":"2026-12-01T09:00:00+01:00","to":"2026-12-31T00:00:00Z"}"#,
        )
        .unwrap();
        assert_eq!(
            ok.from.with_timezone(&Utc).to_rfc3339(),
            "2026-12-01T08:00:00+00:00"
        );
        let naive = serde_json::from_str::<ListCalendarRequest>(
            r#"{"from":"2026-12-01T09:00:00","to":"2026-12-31T00:00:00Z"}"#,
        );
        assert!(naive.is_err());
        let stray = serde_json::from_str::<MeetingRequest>(
            r#"{"meeting_id":"6f1c2b9e-8a0e-4a59-9d1e-0c5f2a3b4c5d","project_id":"x"}"#,
        );
        assert!(stray.unwrap_err().to_string().contains("project_id"));
        let delete: DeleteMeetingRequest =
            serde_json::from_str(r#"{"meeting_id":"6f1c2b9e-8a0e-4a59-9d1e-0c5f2a3b4c5d"}"#)
                .unwrap();
        assert!(
            delete.dry_run,
            "a delete is a dry run unless told otherwise"
        );
    }
}
