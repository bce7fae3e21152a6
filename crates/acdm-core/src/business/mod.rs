//! Business objects (spec §6.2): members' names, project meta, milestones,
//! meetings and their files, reports and their transitions — the records
//! the store keeps, the BFF serves and the journal keeps before-images of.
//!
//! Everything here is a plain validated value. The rules that need no IO
//! live here too: which report moves are allowed, what a role may do, how
//! long a title may be, which time window a list may span.

pub mod wire;

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, NaiveDate, TimeDelta, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

pub use crate::domain::Access;
use crate::domain::{MemberRole, name_enum};
use crate::names::UserId;
use crate::text;

/// Declares a random-UUID id type, shown hyphenated.
macro_rules! uuid_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
        #[serde(transparent)]
        pub struct $name(Uuid);

        impl $name {
            /// A fresh random id.
            pub fn new_random() -> Self {
                Self(Uuid::new_v4())
            }

            /// The underlying UUID.
            pub fn as_uuid(&self) -> Uuid {
                self.0
            }
        }

        impl From<Uuid> for $name {
            fn from(value: Uuid) -> Self {
                Self(value)
            }
        }

        impl FromStr for $name {
            type Err = uuid::Error;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Uuid::parse_str(s).map(Self)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.hyphenated().fmt(f)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!(stringify!($name), "({})"), self.0.hyphenated())
            }
        }
    };
}

uuid_id!(
    /// A meeting's id.
    MeetingId
);
uuid_id!(
    /// A meeting file's id.
    FileId
);
uuid_id!(
    /// A report's id.
    ReportId
);

name_enum!(
    /// Where a project stands.
    ProjectStatus {
        /// Not started.
        Planning = "planning",
        /// Under way.
        Active = "active",
        /// Paused.
        OnHold = "on_hold",
        /// Every milestone done.
        Completed = "completed",
        /// Archived.
        Closed = "closed",
    }
);

name_enum!(
    /// Where a milestone stands; at most one per project is `current`.
    MilestoneStatus {
        /// Not reached yet.
        Planned = "planned",
        /// The one the project works towards now.
        Current = "current",
        /// Reached.
        Done = "done",
    }
);

name_enum!(
    /// Where a report stands in its approval flow.
    ReportStatus {
        /// Being written.
        Draft = "draft",
        /// Waiting for approval.
        Submitted = "submitted",
        /// Approved by an admin or owner.
        Approved = "approved",
        /// Sent back with a comment.
        Rejected = "rejected",
    }
);

name_enum!(
    /// What a report covers.
    ReportKind {
        /// A week.
        Weekly = "weekly",
        /// A month.
        Monthly = "monthly",
        /// A milestone.
        Milestone = "milestone",
        /// Anything else.
        Other = "other",
    }
);

impl ReportStatus {
    /// The statuses a report in this status may move to.
    pub const fn allowed_moves(self) -> &'static [ReportStatus] {
        match self {
            Self::Draft => &[Self::Submitted],
            Self::Submitted => &[Self::Approved, Self::Rejected],
            Self::Rejected => &[Self::Draft],
            Self::Approved => &[],
        }
    }

    /// Whether `self → to` is a legal move.
    pub fn may_move_to(self, to: ReportStatus) -> bool {
        self.allowed_moves().contains(&to)
    }

    /// The access a move needs: approving or rejecting is a manager's
    /// decision; submitting and reopening are a member's.
    pub const fn move_needs(self, to: ReportStatus) -> Access {
        match (self, to) {
            (Self::Submitted, Self::Approved | Self::Rejected) => Access::Manage,
            _ => Access::Contribute,
        }
    }
}

/// Limits on the objects' fields (spec §6.2).
pub mod limits {
    /// A meeting's title, in characters.
    pub const TITLE_CHARS: usize = 200;
    /// A location, in characters.
    pub const LOCATION_CHARS: usize = 500;
    /// A meeting's agenda or notes, in characters.
    pub const MEETING_TEXT_CHARS: usize = 20_000;
    /// A report's body, in characters.
    pub const REPORT_BODY_CHARS: usize = 100_000;
    /// A transition comment, in characters.
    pub const COMMENT_CHARS: usize = 2_000;
    /// A display name, in characters.
    pub const DISPLAY_NAME_CHARS: usize = 200;
    /// A meeting's longest duration, in hours.
    pub const MEETING_HOURS: i64 = 24;
    /// The widest window a list may span, in days.
    pub const WINDOW_DAYS: i64 = 366;
    /// Attendees of one meeting.
    pub const ATTENDEES: usize = 200;
    /// The default page size.
    pub const PAGE_DEFAULT: u32 = 20;
    /// The largest page size.
    pub const PAGE_MAX: u32 = 100;
    /// Files attached to one meeting.
    pub const FILES_PER_MEETING: usize = 100;
    /// An attachment's bytes (decoded).
    pub const FILE_BYTES: usize = 10 * 1024 * 1024;
    /// A statement of work's summary, in characters.
    pub const SOW_SUMMARY_CHARS: usize = 20_000;
    /// A deliverable's description, in characters.
    pub const DELIVERABLE_CHARS: usize = 5_000;
    /// Deliverables of one statement of work.
    pub const DELIVERABLES: usize = 200;
    /// Upcoming meetings the overview shows.
    pub const OVERVIEW_MEETINGS: usize = 5;
    /// How far ahead the overview looks for meetings, in days.
    pub const OVERVIEW_DAYS: i64 = 14;
    /// Reports waiting for approval the overview lists.
    pub const OVERVIEW_AWAITING: usize = 10;
    /// Recent agent writes the overview lists.
    pub const OVERVIEW_WRITES: usize = 10;
}

/// Why a field's value was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FieldError {
    /// Empty or only whitespace where text is required.
    #[error("must not be empty")]
    Empty,
    /// More characters than allowed.
    #[error("is longer than {max} characters ({len} given)")]
    TooLong {
        /// The limit.
        max: usize,
        /// What was given.
        len: usize,
    },
    /// A control or invisible character where none may be.
    #[error("contains a control or invisible character")]
    Control,
    /// Leading or trailing whitespace on a one-line field.
    #[error("starts or ends with whitespace")]
    Padded,
}

/// Checks a one-line text field (a title, a location, a name): 1–`max`
/// characters, no control or invisible characters, no padding.
pub fn check_line(value: &str, max: usize) -> Result<(), FieldError> {
    if value.trim().is_empty() {
        return Err(FieldError::Empty);
    }
    let len = value.chars().count();
    if len > max {
        return Err(FieldError::TooLong { max, len });
    }
    if value
        .chars()
        .any(|c| text::is_control(c) || text::is_invisible(c))
    {
        return Err(FieldError::Control);
    }
    if value.trim() != value {
        return Err(FieldError::Padded);
    }
    Ok(())
}

/// What [`check_line`] accepts, as a JSON Schema pattern (the length is
/// the schema's `maxLength`): no controls or invisible characters, no
/// surrounding whitespace, not blank.
pub const LINE_PATTERN: &str = concat!(
    "^[^\\s",
    crate::text::forbidden_class!(),
    "]([^",
    crate::text::forbidden_class!(),
    "]*[^\\s",
    crate::text::forbidden_class!(),
    "])?$"
);

/// [`LINE_PATTERN`], or empty (an optional line an empty value clears).
pub const OPTIONAL_LINE_PATTERN: &str = concat!(
    "^([^\\s",
    crate::text::forbidden_class!(),
    "]([^",
    crate::text::forbidden_class!(),
    "]*[^\\s",
    crate::text::forbidden_class!(),
    "])?)?$"
);

/// What [`check_text`] accepts, as a JSON Schema pattern: any text but
/// control characters other than tab, line feed and carriage return.
pub const TEXT_PATTERN: &str = "^[^\\u0000-\\u0008\\u000b\\u000c\\u000e-\\u001f\\u007f-\\u009f]*$";

/// Checks a multi-line text field (agenda, notes, a body, a comment): at
/// most `max` characters; tabs and line breaks allowed, other control
/// characters not. May be empty.
pub fn check_text(value: &str, max: usize) -> Result<(), FieldError> {
    let len = value.chars().count();
    if len > max {
        return Err(FieldError::TooLong { max, len });
    }
    if value
        .chars()
        .any(|c| !matches!(c, '\n' | '\r' | '\t') && text::is_control(c))
    {
        return Err(FieldError::Control);
    }
    Ok(())
}

/// Why a time span was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SpanError {
    /// The end is not after the start.
    #[error("must end after it starts")]
    Backwards,
    /// Longer than allowed.
    #[error("spans more than {max_hours} hours")]
    TooLong {
        /// The limit in hours.
        max_hours: i64,
    },
}

/// Checks a meeting's `starts_at`/`ends_at`: the end after the start, at
/// most [`limits::MEETING_HOURS`] later.
pub fn check_meeting_span(
    starts_at: DateTime<Utc>,
    ends_at: DateTime<Utc>,
) -> Result<(), SpanError> {
    if ends_at <= starts_at {
        return Err(SpanError::Backwards);
    }
    if ends_at - starts_at > TimeDelta::hours(limits::MEETING_HOURS) {
        return Err(SpanError::TooLong {
            max_hours: limits::MEETING_HOURS,
        });
    }
    Ok(())
}

/// Checks a list's window: `to` after `from`, at most
/// [`limits::WINDOW_DAYS`] days.
pub fn check_window(from: DateTime<Utc>, to: DateTime<Utc>) -> Result<(), SpanError> {
    if to <= from {
        return Err(SpanError::Backwards);
    }
    if to - from > TimeDelta::days(limits::WINDOW_DAYS) {
        return Err(SpanError::TooLong {
            max_hours: limits::WINDOW_DAYS * 24,
        });
    }
    Ok(())
}

/// A project member with their name, as agents see them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct MemberInfo {
    /// The user's id (what `X-ACDM-User-Id` carries, and what attendees list).
    pub user_id: UserId,
    /// Their name for people, when known.
    pub display_name: Option<String>,
    /// Their role in the project.
    pub role: MemberRole,
}

/// A project's descriptive data (spec §6.2 "project meta").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ProjectMeta {
    /// The project's URL-safe id.
    pub slug: String,
    /// Its name (also its folder's name).
    pub name: String,
    /// Where it stands.
    pub status: ProjectStatus,
    /// What it is about (may be empty).
    pub description: String,
    /// When it starts, `YYYY-MM-DD`.
    pub start_date: Option<NaiveDate>,
    /// When it is due to end, `YYYY-MM-DD`.
    pub end_date: Option<NaiveDate>,
    /// The IANA time zone people in the project work in (`UTC` unless set).
    pub time_zone: String,
    /// Last change.
    pub updated_at: DateTime<Utc>,
}

/// A milestone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Milestone {
    /// Its place in the project's sequence, from 1.
    pub seq: u32,
    /// Its title.
    pub title: String,
    /// When it is due, `YYYY-MM-DD`.
    pub due_date: Option<NaiveDate>,
    /// Planned, current (at most one) or done.
    pub status: MilestoneStatus,
    /// What must hold for it to be done.
    pub acceptance_criteria: Vec<String>,
    /// When it was marked done.
    pub closed_at: Option<DateTime<Utc>>,
    /// Who marked it done.
    pub closed_by: Option<UserId>,
}

/// One deliverable of a statement of work.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Deliverable {
    /// What is delivered (one line).
    pub title: String,
    /// What it contains and how it is accepted (markdown, may be empty).
    #[serde(default)]
    pub description: String,
    /// The `seq` of the milestone it belongs to, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub milestone: Option<u32>,
}

/// A project's statement of work (spec §6.3): what the project delivers.
/// Each milestone's acceptance criteria live on the milestone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct StatementOfWork {
    /// What the project is to achieve (markdown; empty until written).
    pub summary: String,
    /// What it delivers, in order.
    pub deliverables: Vec<Deliverable>,
    /// Last change (the project's creation until one is written).
    pub updated_at: DateTime<Utc>,
}

/// A meeting.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Meeting {
    /// Its id.
    pub meeting_id: MeetingId,
    /// Its title (1–200 characters).
    pub title: String,
    /// When it starts (UTC).
    pub starts_at: DateTime<Utc>,
    /// When it ends (UTC), after the start and at most 24 h later.
    pub ends_at: DateTime<Utc>,
    /// Where (a room, a link).
    pub location: Option<String>,
    /// What will be discussed (markdown, ≤ 20,000 characters).
    pub agenda: Option<String>,
    /// What was said (markdown, ≤ 20,000 characters).
    pub notes: Option<String>,
    /// Who attends: user ids of project members.
    pub attendees: Vec<UserId>,
    /// +1 on every change; `update_meeting` takes it as `if_version`.
    pub version: i64,
    /// Who created it.
    pub created_by: Option<UserId>,
    /// When.
    pub created_at: DateTime<Utc>,
    /// Who changed it last.
    pub updated_by: Option<UserId>,
    /// When.
    pub updated_at: DateTime<Utc>,
}

impl Meeting {
    /// The names of the fields whose values differ between two versions of
    /// a meeting (for a `conflict` that says what changed).
    pub fn differing_fields(&self, other: &Meeting) -> Vec<&'static str> {
        let mut fields = Vec::new();
        let checks: [(&'static str, bool); 7] = [
            ("title", self.title != other.title),
            ("starts_at", self.starts_at != other.starts_at),
            ("ends_at", self.ends_at != other.ends_at),
            ("location", self.location != other.location),
            ("agenda", self.agenda != other.agenda),
            ("notes", self.notes != other.notes),
            ("attendees", self.attendees != other.attendees),
        ];
        for (name, differs) in checks {
            if differs {
                fields.push(name);
            }
        }
        fields
    }
}

/// A file attached to a meeting. The file lives in the project's files;
/// this row says it belongs to the meeting.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct MeetingFile {
    /// Its id.
    pub file_id: FileId,
    /// The meeting it belongs to.
    pub meeting_id: MeetingId,
    /// The mount holding it (`project`).
    pub mount: String,
    /// Its path in that mount (`meetings/<meeting_id>/<name>`).
    pub rel_path: String,
    /// Its file name.
    pub name: String,
    /// Bytes.
    pub size: u64,
    /// Its etag when attached.
    pub etag: Option<String>,
    /// Its MIME type, when known.
    pub content_type: Option<String>,
    /// Who attached it.
    pub added_by: Option<UserId>,
    /// When.
    pub added_at: DateTime<Utc>,
    /// True when the file was found gone from the file store (removed
    /// behind the service's back).
    pub missing: bool,
}

/// A report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Report {
    /// Its id.
    pub report_id: ReportId,
    /// Its title.
    pub title: String,
    /// Weekly, monthly, milestone or other.
    pub kind: ReportKind,
    /// First day covered, `YYYY-MM-DD`.
    pub period_start: NaiveDate,
    /// Last day covered, `YYYY-MM-DD`.
    pub period_end: NaiveDate,
    /// The text (markdown, ≤ 100,000 characters).
    pub body: String,
    /// Draft, submitted, approved or rejected.
    pub status: ReportStatus,
    /// +1 on every change; `update_report_status` takes it as `if_version`.
    pub version: i64,
    /// Who wrote it.
    pub created_by: Option<UserId>,
    /// When.
    pub created_at: DateTime<Utc>,
    /// Last change.
    pub updated_at: DateTime<Utc>,
}

/// One move of a report's status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ReportTransition {
    /// The report.
    pub report_id: ReportId,
    /// Its place in the report's history, from 1.
    pub seq: u32,
    /// The status before.
    pub from: ReportStatus,
    /// The status after.
    pub to: ReportStatus,
    /// Who moved it.
    pub user_id: Option<UserId>,
    /// Why (required for `rejected`).
    pub comment: Option<String>,
    /// When.
    pub at: DateTime<Utc>,
}

/// A report with its history, oldest move first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ReportDetails {
    /// The report.
    #[serde(flatten)]
    pub report: Report,
    /// Its status moves, oldest first.
    pub history: Vec<ReportTransition>,
}

/// One business row as the journal keeps it: the before- or after-image of
/// a write. A [`crate::events::Step::Row`] holds two of them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "table", rename_all = "snake_case", deny_unknown_fields)]
pub enum RowImage {
    /// A meeting with its attendees.
    Meeting(Meeting),
    /// A meeting file's row (not its bytes: the file moves are steps of
    /// their own).
    MeetingFile(MeetingFile),
    /// A report (its history rows are `ReportTransition`s).
    Report(Report),
    /// One move in a report's history.
    ReportTransition(ReportTransition),
    /// A milestone of the event's project.
    Milestone(Milestone),
    /// The event's project's meta.
    ProjectMeta(ProjectMeta),
    /// A member's name (only the name changes through events; roles are
    /// provisioning).
    Member(MemberInfo),
    /// The event's project's statement of work.
    Sow(StatementOfWork),
}

/// Which row a [`RowImage`] is: its table and key within the event's project.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum RowKey {
    /// A meeting.
    Meeting(MeetingId),
    /// A meeting file.
    MeetingFile(FileId),
    /// A report.
    Report(ReportId),
    /// A report's `seq`-th transition.
    ReportTransition(ReportId, u32),
    /// The project's `seq`-th milestone.
    Milestone(u32),
    /// The project's meta.
    ProjectMeta,
    /// A member of the project.
    Member(UserId),
    /// The project's statement of work.
    Sow,
}

impl fmt::Display for RowKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Meeting(id) => write!(f, "meeting {id}"),
            Self::MeetingFile(id) => write!(f, "meeting file {id}"),
            Self::Report(id) => write!(f, "report {id}"),
            Self::ReportTransition(id, seq) => write!(f, "transition {seq} of report {id}"),
            Self::Milestone(seq) => write!(f, "milestone {seq}"),
            Self::ProjectMeta => f.write_str("the project's meta"),
            Self::Member(user) => write!(f, "member {user}"),
            Self::Sow => f.write_str("the project's statement of work"),
        }
    }
}

impl RowImage {
    /// Which row this is.
    pub fn key(&self) -> RowKey {
        match self {
            Self::Meeting(m) => RowKey::Meeting(m.meeting_id),
            Self::MeetingFile(f) => RowKey::MeetingFile(f.file_id),
            Self::Report(r) => RowKey::Report(r.report_id),
            Self::ReportTransition(t) => RowKey::ReportTransition(t.report_id, t.seq),
            Self::Milestone(m) => RowKey::Milestone(m.seq),
            Self::ProjectMeta(_) => RowKey::ProjectMeta,
            Self::Member(m) => RowKey::Member(m.user_id.clone()),
            Self::Sow(_) => RowKey::Sow,
        }
    }

    /// Whether `current` (the row as stored now) is still the row this
    /// image describes, so a change planned against this image may go on.
    /// Versioned rows compare their version; a meeting file compares where
    /// it is and what it belongs to (a sweep marking it missing, or the
    /// etag learnt once its file was written, is no change to it); other
    /// rows compare whole.
    pub fn still_matches(&self, current: &RowImage) -> bool {
        match (self, current) {
            (Self::Meeting(a), Self::Meeting(b)) => {
                a.meeting_id == b.meeting_id && a.version == b.version
            }
            (Self::Report(a), Self::Report(b)) => {
                a.report_id == b.report_id && a.version == b.version
            }
            (Self::MeetingFile(a), Self::MeetingFile(b)) => {
                a.file_id == b.file_id
                    && a.meeting_id == b.meeting_id
                    && a.mount == b.mount
                    && a.rel_path == b.rel_path
            }
            (a, b) => a == b,
        }
    }

    /// This image written back over `current` by a revert: the fields are
    /// this image's, but a versioned row's version moves forward (to
    /// `current`'s + 1) so that no `if_version` read before the revert can
    /// match again; `at` and `by` stamp the change.
    pub fn restored_over(
        &self,
        current: &RowImage,
        at: DateTime<Utc>,
        by: Option<&UserId>,
    ) -> RowImage {
        match (self, current) {
            (Self::Meeting(old), Self::Meeting(now)) => Self::Meeting(Meeting {
                version: now.version + 1,
                updated_at: at,
                updated_by: by.cloned(),
                ..old.clone()
            }),
            (Self::Report(old), Self::Report(now)) => Self::Report(Report {
                version: now.version + 1,
                updated_at: at,
                ..old.clone()
            }),
            (Self::ProjectMeta(old), Self::ProjectMeta(_)) => Self::ProjectMeta(ProjectMeta {
                updated_at: at,
                ..old.clone()
            }),
            (Self::Sow(old), Self::Sow(_)) => Self::Sow(StatementOfWork {
                updated_at: at,
                ..old.clone()
            }),
            (old, _) => old.clone(),
        }
    }

    /// What the row is, for people.
    pub fn describe(&self) -> String {
        match self {
            Self::Meeting(m) => format!("meeting \"{}\" ({})", m.title, m.meeting_id),
            Self::MeetingFile(f) => format!("meeting file {} ({})", f.rel_path, f.file_id),
            Self::Report(r) => format!("report \"{}\" ({})", r.title, r.report_id),
            other => other.key().to_string(),
        }
    }
}

/// The position after the last item of a page, handed out as an opaque
/// `next_cursor` and taken back as `cursor`: the sort key and the id of
/// that item, so the next page starts strictly after it (keyset paging:
/// no item is skipped or repeated when rows are added meanwhile).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    /// The sort key of the last item (a time, RFC 3339).
    pub key: String,
    /// Its id.
    pub id: String,
}

/// A cursor that is not one this service handed out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "is not a cursor from a previous page; pass next_cursor exactly as returned, or leave cursor out to start over"
)]
pub struct CursorError;

impl Cursor {
    /// The opaque form (lowercase hex of `key|id`).
    pub fn encode(&self) -> String {
        let plain = format!("{}|{}", self.key, self.id);
        plain.bytes().map(|b| format!("{b:02x}")).collect()
    }

    /// Reads back what [`Cursor::encode`] produced.
    pub fn decode(text: &str) -> Result<Self, CursorError> {
        if text.is_empty() || text.len() > 512 || !text.len().is_multiple_of(2) {
            return Err(CursorError);
        }
        let bytes = (0..text.len())
            .step_by(2)
            .map(|i| {
                u8::from_str_radix(text.get(i..i + 2).ok_or(CursorError)?, 16)
                    .map_err(|_| CursorError)
            })
            .collect::<Result<Vec<u8>, _>>()?;
        let plain = String::from_utf8(bytes).map_err(|_| CursorError)?;
        let (key, id) = plain.split_once('|').ok_or(CursorError)?;
        if key.is_empty() || id.is_empty() {
            return Err(CursorError);
        }
        Ok(Self {
            key: key.to_owned(),
            id: id.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_moves_follow_the_spec_and_name_the_allowed_ones() {
        use ReportStatus::*;
        let legal = [
            (Draft, Submitted),
            (Submitted, Approved),
            (Submitted, Rejected),
            (Rejected, Draft),
        ];
        for from in ReportStatus::ALL {
            for to in ReportStatus::ALL {
                assert_eq!(
                    from.may_move_to(*to),
                    legal.contains(&(*from, *to)),
                    "{from} → {to}"
                );
            }
        }
        assert_eq!(Submitted.move_needs(Approved), Access::Manage);
        assert_eq!(Submitted.move_needs(Rejected), Access::Manage);
        assert_eq!(Draft.move_needs(Submitted), Access::Contribute);
        assert_eq!(Rejected.move_needs(Draft), Access::Contribute);
    }

    #[test]
    fn roles_grant_what_the_spec_table_says() {
        use MemberRole::*;
        for (role, read, contribute, manage) in [
            (Viewer, true, false, false),
            (Member, true, true, false),
            (Admin, true, true, true),
            (Owner, true, true, true),
        ] {
            assert_eq!(role.grants(Access::Read), read, "{role} read");
            assert_eq!(
                role.grants(Access::Contribute),
                contribute,
                "{role} contribute"
            );
            assert_eq!(role.grants(Access::Manage), manage, "{role} manage");
        }
        for access in [Access::Read, Access::Contribute, Access::Manage] {
            assert!(access.least_role().grants(access));
        }
    }

    #[test]
    fn text_fields_are_bounded_and_clean() {
        assert_eq!(check_line("Kick-off", 200), Ok(()));
        assert_eq!(check_line("", 200), Err(FieldError::Empty));
        assert_eq!(check_line("  ", 200), Err(FieldError::Empty));
        assert_eq!(check_line(" a", 200), Err(FieldError::Padded));
        assert_eq!(check_line("a\u{202e}b", 200), Err(FieldError::Control));
        assert_eq!(check_line("a\nb", 200), Err(FieldError::Control));
        assert_eq!(
            check_line(&"é".repeat(201), 200),
            Err(FieldError::TooLong { max: 200, len: 201 })
        );
        assert_eq!(check_line(&"é".repeat(200), 200), Ok(()));
        assert_eq!(check_text("line 1\nline 2\t", 20), Ok(()));
        assert_eq!(check_text("", 20), Ok(()));
        assert_eq!(check_text("a\u{0}b", 20), Err(FieldError::Control));
    }

    #[test]
    fn spans_and_windows_are_bounded() {
        let t = |s: &str| s.parse::<DateTime<Utc>>().unwrap();
        let start = t("2026-12-01T09:00:00Z");
        assert_eq!(check_meeting_span(start, t("2026-12-01T10:00:00Z")), Ok(()));
        assert_eq!(check_meeting_span(start, start), Err(SpanError::Backwards));
        assert_eq!(check_meeting_span(start, t("2026-12-02T09:00:00Z")), Ok(()));
        assert_eq!(
            check_meeting_span(start, t("2026-12-02T09:00:01Z")),
            Err(SpanError::TooLong { max_hours: 24 })
        );
        assert_eq!(check_window(start, t("2027-12-02T09:00:00Z")), Ok(()));
        assert!(check_window(start, t("2027-12-02T09:00:01Z")).is_err());
    }

    #[test]
    fn cursors_round_trip_and_refuse_what_was_not_handed_out() {
        let cursor = Cursor {
            key: "2026-12-01T09:00:00+00:00".into(),
            id: MeetingId::new_random().to_string(),
        };
        assert_eq!(Cursor::decode(&cursor.encode()), Ok(cursor));
        for bad in ["", "zz", "abc", "7c", &"00".repeat(300), "61"] {
            assert_eq!(Cursor::decode(bad), Err(CursorError), "{bad:?}");
        }
    }

    #[test]
    fn a_revert_moves_a_versioned_row_forward_and_keeps_the_old_fields() {
        let at = "2026-12-01T09:00:00Z".parse::<DateTime<Utc>>().unwrap();
        let meeting = Meeting {
            meeting_id: MeetingId::new_random(),
            title: "Old".into(),
            starts_at: at,
            ends_at: at + TimeDelta::hours(1),
            location: None,
            agenda: None,
            notes: None,
            attendees: vec![],
            version: 3,
            created_by: None,
            created_at: at,
            updated_by: None,
            updated_at: at,
        };
        let changed = Meeting {
            title: "New".into(),
            version: 4,
            ..meeting.clone()
        };
        let (before, after) = (
            RowImage::Meeting(meeting.clone()),
            RowImage::Meeting(changed.clone()),
        );
        assert!(after.still_matches(&after));
        assert!(!before.still_matches(&after));
        let RowImage::Meeting(restored) = before.restored_over(&after, at, None) else {
            panic!("a meeting stays a meeting");
        };
        assert_eq!(restored.title, "Old");
        assert_eq!(restored.version, 5);
        assert_eq!(meeting.differing_fields(&changed), vec!["title"]);
    }
}
