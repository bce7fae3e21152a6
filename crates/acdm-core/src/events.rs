//! Storage events: the record of every write (spec §6.4), and the plans
//! that make each one reversible.
//!
//! A write is described before it happens by a **plan**: the server-side
//! steps it will take in the file store (copy what is about to be
//! overwritten into the trash, put the new content, move a file). Its
//! **undo** is the list of steps that takes the store back: move a kept
//! file back, discard what the write created. Both are plain data stored
//! with the event, so an operator can read them and a reconciler can tell
//! after a crash how far a write got.
//!
//! Nothing is ever destroyed: deleting is moving into the hidden trash,
//! overwriting first copies the old content there, and a revert discards
//! by moving into the trash too — so a revert is itself a reversible event.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::business::RowImage;
pub use crate::domain::EventId;
use crate::domain::{ProjectId, name_enum};
use crate::identity::Identity;
use crate::names::{AgentName, ProjectSlug, ThreadId, UserId};
use crate::path::{AbsPath, PathError};

/// The folder (directly under the files base) that holds every project's
/// trash: `<base>/.acdm-trash/<project slug>/<event id>/…`. No mount root
/// may lie inside it, and no caller path may name it.
pub const TRASH_FOLDER: &str = ".acdm-trash";

/// The fewest characters of an event id an operator may give.
pub const MIN_EVENT_PREFIX: usize = 4;

/// How an operator names an event: its whole id, or a prefix of it (at
/// least [`MIN_EVENT_PREFIX`] hex digits) that the store resolves when it
/// is unique, as git does for commits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventRef {
    /// A whole id.
    Id(EventId),
    /// The start of an id as displayed (lowercase hex digits and hyphens).
    Prefix(String),
}

/// Why a text names no event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EventRefError {
    /// Characters that never occur in an event id.
    #[error("must be an event id, or its first characters (0-9, a-f and -)")]
    NotAnId,
    /// Fewer hex digits than [`MIN_EVENT_PREFIX`].
    #[error("give at least {MIN_EVENT_PREFIX} characters of the event id")]
    TooShort,
}

impl FromStr for EventRef {
    type Err = EventRefError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        // Every form a whole id is written in (hyphenated, 32 hex digits,
        // braced, urn:uuid) names it; a prefix never parses as a whole id.
        if let Ok(id) = s.parse::<EventId>() {
            return Ok(Self::Id(id));
        }
        let prefix = s.to_ascii_lowercase();
        if prefix.len() > 36 || !prefix.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-') {
            return Err(EventRefError::NotAnId);
        }
        if prefix.bytes().filter(u8::is_ascii_hexdigit).count() < MIN_EVENT_PREFIX {
            return Err(EventRefError::TooShort);
        }
        Ok(Self::Prefix(prefix))
    }
}

impl fmt::Display for EventRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Id(id) => id.fmt(f),
            Self::Prefix(prefix) => write!(f, "{prefix}…"),
        }
    }
}

name_enum!(
    /// Who made a change.
    ActorKind {
        /// An LLM agent, on behalf of a user, in a thread.
        ViaAgent = "via_agent",
        /// A person directly (an operator's revert, for example).
        Direct = "direct",
        /// The service itself (the start-up reconciler).
        System = "system",
    }
);

name_enum!(
    /// Where an event stands.
    EventStatus {
        /// The intent is recorded; the upstream change may or may not have
        /// happened yet.
        Pending = "pending",
        /// The change happened.
        Applied = "applied",
        /// The change did not happen (nothing to undo).
        Failed = "failed",
        /// The change was undone by a later (revert) event.
        Reverted = "reverted",
    }
);

name_enum!(
    /// What an event did.
    EventOp {
        /// `nc/write`: a file created or overwritten.
        NcWrite = "nc_write",
        /// `nc/delete`: a file or folder moved into the trash.
        NcDelete = "nc_delete",
        /// `nc/move`: a file or folder moved (or renamed).
        NcMove = "nc_move",
        /// The undo of another event.
        Revert = "revert",
        /// `business/create_meeting`.
        CreateMeeting = "create_meeting",
        /// `business/update_meeting`.
        UpdateMeeting = "update_meeting",
        /// `business/delete_meeting`: the meeting, its file rows and files.
        DeleteMeeting = "delete_meeting",
        /// `business/attach_meeting_file`: a file and its row.
        AttachMeetingFile = "attach_meeting_file",
        /// `business/delete_meeting_file`: a file and its row.
        DeleteMeetingFile = "delete_meeting_file",
        /// `business/update_report_status`.
        UpdateReportStatus = "update_report_status",
        /// An operator created a report.
        CreateReport = "create_report",
        /// An operator edited a report.
        UpdateReport = "update_report",
        /// An operator set a member's display name.
        SetMemberName = "set_member_name",
        /// An operator set the project's meta.
        SetProjectMeta = "set_project_meta",
        /// An operator created or edited a milestone.
        SetMilestone = "set_milestone",
        /// `project/milestone/advance`: the current milestone done, the
        /// next one current (the last one ⇒ the project completed).
        AdvanceMilestone = "advance_milestone",
        /// An operator wrote the statement of work.
        SetSow = "set_sow",
    }
);

/// Who an event is attributed to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Actor {
    /// Agent, person or system.
    pub kind: ActorKind,
    /// The user (the agent's user, or the person acting directly).
    pub user_id: Option<UserId>,
    /// The agent, for `via_agent`.
    pub agent_name: Option<AgentName>,
    /// The conversation thread, for `via_agent`.
    pub thread_id: Option<ThreadId>,
}

impl Actor {
    /// An agent acting for a user in a thread.
    pub fn via_agent(identity: &Identity) -> Self {
        Self {
            kind: ActorKind::ViaAgent,
            user_id: Some(identity.user_id().clone()),
            agent_name: Some(identity.agent_name().clone()),
            thread_id: Some(identity.thread_id().clone()),
        }
    }

    /// A person acting directly (an operator).
    pub fn direct(user_id: UserId) -> Self {
        Self {
            kind: ActorKind::Direct,
            user_id: Some(user_id),
            agent_name: None,
            thread_id: None,
        }
    }

    /// The service itself.
    pub fn system() -> Self {
        Self {
            kind: ActorKind::System,
            user_id: None,
            agent_name: None,
            thread_id: None,
        }
    }
}

/// One server-side step in the file store. Contents never travel in a
/// step: only paths, sizes and digests.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "step", rename_all = "snake_case", deny_unknown_fields)]
pub enum Step {
    /// Copy `from` to `to` (which must not exist), keeping what is about
    /// to be overwritten.
    Copy {
        /// What is kept.
        from: AbsPath,
        /// Where, in the trash.
        to: AbsPath,
    },
    /// Put new content at `path`: `sha256` and `size` identify it, so a
    /// reconciler can tell whether the put happened.
    Put {
        /// The file.
        path: AbsPath,
        /// Lowercase hex SHA-256 of the content.
        sha256: String,
        /// Bytes.
        size: u64,
        /// The etag the file had when the plan was made (`If-Match`), or
        /// `None` for a create (`If-None-Match: *`).
        replaces: Option<String>,
    },
    /// Move `from` to `to` (which must not exist).
    Move {
        /// The current location.
        from: AbsPath,
        /// The new location.
        to: AbsPath,
    },
    /// In an undo: remove what the event created at `path` by moving it
    /// into the reverting event's trash. When `etag` is known, the file
    /// must still carry it (a later change is not silently discarded).
    Discard {
        /// What the event created.
        path: AbsPath,
        /// Its etag right after the event, when known.
        etag: Option<String>,
    },
    /// Change one business row of the event's project from `before` to
    /// `after`: `before: None` inserts, `after: None` deletes. The row
    /// must still match `before` ([`RowImage::still_matches`]) or the whole
    /// event fails as a conflict. Row steps come after every file step of
    /// a plan, and all of them are applied in one database transaction
    /// together with marking the event applied: a pending event has
    /// changed no row.
    Row {
        /// The row as the plan found it (`None`: absent).
        before: Option<Box<RowImage>>,
        /// The row as the plan leaves it (`None`: removed).
        after: Option<Box<RowImage>>,
    },
}

impl Step {
    /// The paths this step touches.
    pub fn paths(&self) -> Vec<&AbsPath> {
        match self {
            Step::Copy { from, to } | Step::Move { from, to } => vec![from, to],
            Step::Put { path, .. } | Step::Discard { path, .. } => vec![path],
            Step::Row { .. } => Vec::new(),
        }
    }

    /// Whether this step changes a database row rather than a file.
    pub fn is_row(&self) -> bool {
        matches!(self, Step::Row { .. })
    }

    /// The undo of a row change: the same row from `after` back to
    /// `before`.
    pub fn row_inverse(&self) -> Option<Step> {
        match self {
            Step::Row { before, after } => Some(Step::Row {
                before: after.clone(),
                after: before.clone(),
            }),
            _ => None,
        }
    }
}

/// The undo of a plan's row changes: each inverted, last first (a meeting
/// deleted after its files is restored before them).
pub fn rows_undo(plan: &[Step]) -> Vec<Step> {
    plan.iter().rev().filter_map(Step::row_inverse).collect()
}

/// Where an event keeps what it replaces or removes:
/// `<base>/.acdm-trash/<project slug>/<event id>`.
pub fn trash_folder(files_base: &AbsPath, project: &ProjectSlug, event: EventId) -> AbsPath {
    // The three names are valid segments by construction: a fixed name, a
    // slug (`[a-z0-9-]`), and a hyphenated UUID.
    let mut path = files_base.clone();
    for name in [TRASH_FOLDER, project.as_str(), &event.to_string()] {
        path = path.join_name(name).unwrap_or_else(|_| path.clone());
    }
    path
}

/// Where the trash of an event that changed nothing goes, so the trash
/// holds only what a revert can restore: `<base>/.acdm-trash/<slug>/discarded/<day>/<event id>`,
/// one folder per day it was discarded (the discard area's retention is
/// counted in those days: an operator empties the days past it).
pub fn discard_folder(
    files_base: &AbsPath,
    project: &ProjectSlug,
    day: chrono::NaiveDate,
    event: EventId,
) -> AbsPath {
    // Valid segments by construction: fixed names, a slug, a date, a UUID.
    let mut path = files_base.clone();
    let day = day.format("%Y-%m-%d").to_string();
    for name in [
        TRASH_FOLDER,
        project.as_str(),
        DISCARD_FOLDER,
        &day,
        &event.to_string(),
    ] {
        path = path.join_name(name).unwrap_or_else(|_| path.clone());
    }
    path
}

/// The name of a project's discard area inside its trash.
pub const DISCARD_FOLDER: &str = "discarded";

/// The place in an event's trash for the `index`-th thing it keeps, named
/// like the original: `<trash>/<index>/<name>`.
pub fn kept_path(trash: &AbsPath, index: usize, original: &AbsPath) -> Result<AbsPath, PathError> {
    let name = original.segments().last().ok_or(PathError::EmptySegment)?;
    trash.join_name(&index.to_string())?.join_name(name)
}

/// The trash root of every project, `<base>/.acdm-trash`.
pub fn trash_root(files_base: &AbsPath) -> AbsPath {
    files_base
        .join_name(TRASH_FOLDER)
        .unwrap_or_else(|_| files_base.clone())
}

/// Turns an undo list into the steps a revert event performs, with every
/// `Discard` becoming a move into `revert_trash` and every row change
/// writing the old row back over the current one ([`RowImage::restored_over`]:
/// a versioned row moves forward, stamped `at` and `by`); also returns the
/// revert's own undo (the inverse moves, last first, then the inverse row
/// changes, last first), so a revert can be reverted.
pub fn revert_plan(
    undo: &[Step],
    revert_trash: &AbsPath,
    at: DateTime<Utc>,
    by: Option<&UserId>,
) -> Result<(Vec<Step>, Vec<Step>), PathError> {
    let mut plan = Vec::with_capacity(undo.len());
    for (index, step) in undo.iter().enumerate() {
        match step {
            Step::Move { from, to } => plan.push(Step::Move {
                from: from.clone(),
                to: to.clone(),
            }),
            Step::Discard { path, .. } => plan.push(Step::Move {
                from: path.clone(),
                to: kept_path(revert_trash, index, path)?,
            }),
            Step::Row {
                before: Some(current),
                after: Some(old),
            } => plan.push(Step::Row {
                before: Some(current.clone()),
                after: Some(Box::new(old.restored_over(current, at, by))),
            }),
            // Inserts and deletes put back exactly what was there; copies
            // and puts never appear in an undo and are refused by the
            // executor.
            other => plan.push(other.clone()),
        }
    }
    let moves = plan.iter().rev().filter_map(|step| match step {
        Step::Move { from, to } => Some(Step::Move {
            from: to.clone(),
            to: from.clone(),
        }),
        _ => None,
    });
    let inverse = moves.chain(rows_undo(&plan)).collect();
    Ok((plan, inverse))
}

/// A new event, before it is stored as `pending`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewEvent {
    /// Chosen by the caller, so the trash folder can be named before the
    /// intent is stored.
    pub id: EventId,
    /// Who.
    pub actor: Actor,
    /// The project whose data changes.
    pub project_id: ProjectId,
    /// What kind of change.
    pub op: EventOp,
    /// What it changes, for people: `project:/notes/a.md`.
    pub target: String,
    /// The request's parameters (never file contents).
    pub params: serde_json::Value,
    /// The steps the change takes.
    pub plan: Vec<Step>,
    /// The steps that undo it.
    pub undo: Vec<Step>,
    /// For a revert: the event it undoes.
    pub reverts: Option<EventId>,
    /// The approval this write uses: it becomes `used` in the intent's
    /// transaction, or the intent is not recorded.
    pub approval: Option<crate::domain::ApprovalId>,
}

/// A stored event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StorageEvent {
    /// Its id.
    pub id: EventId,
    /// Who.
    pub actor: Actor,
    /// The project's id.
    pub project_id: ProjectId,
    /// The project's slug.
    pub project: ProjectSlug,
    /// What kind of change.
    pub op: EventOp,
    /// What it changes, for people.
    pub target: String,
    /// The request's parameters.
    pub params: serde_json::Value,
    /// The steps the change takes.
    pub plan: Vec<Step>,
    /// The steps that undo it.
    pub undo: Vec<Step>,
    /// Where it stands.
    pub status: EventStatus,
    /// What the change produced (for example the new etag), once applied.
    pub result: Option<serde_json::Value>,
    /// Why it failed, for `failed` (our words, never an upstream body).
    pub error: Option<String>,
    /// For a revert: the event it undoes.
    pub reverts: Option<EventId>,
    /// The revert that undid (or is undoing) this event.
    pub reverted_by: Option<EventId>,
    /// When the intent was recorded.
    pub created_at: DateTime<Utc>,
    /// When the status last changed.
    pub updated_at: DateTime<Utc>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn abs(s: &str) -> AbsPath {
        AbsPath::parse(s).unwrap()
    }

    #[test]
    fn an_event_is_named_by_its_id_or_a_prefix_of_at_least_four_hex_digits() {
        let id = EventId::new_random();
        let text = id.to_string();
        assert_eq!(text.parse::<EventRef>(), Ok(EventRef::Id(id)));
        assert_eq!(
            text.to_uppercase().parse::<EventRef>(),
            Ok(EventRef::Id(id))
        );
        let simple = text.replace('-', "");
        assert_eq!(simple.parse::<EventRef>(), Ok(EventRef::Id(id)));
        assert_eq!(
            format!("urn:uuid:{text}").parse::<EventRef>(),
            Ok(EventRef::Id(id))
        );
        assert_eq!(
            "3F2A-9c".parse::<EventRef>(),
            Ok(EventRef::Prefix("3f2a-9c".to_owned()))
        );
        assert_eq!("3f2".parse::<EventRef>(), Err(EventRefError::TooShort));
        assert_eq!("3f-2-".parse::<EventRef>(), Err(EventRefError::TooShort));
        assert_eq!("".parse::<EventRef>(), Err(EventRefError::TooShort));
        for bad in ["3f2g", "3f2a%", "3f2a_", &format!("{text}0")] {
            assert_eq!(
                bad.parse::<EventRef>(),
                Err(EventRefError::NotAnId),
                "{bad}"
            );
        }
    }

    #[test]
    fn trash_lives_beside_the_projects_under_the_base() {
        let id: EventId = "6f1c1c1e-6b0b-4e53-9a38-2d1f7cf6b8a1".parse().unwrap();
        let slug = ProjectSlug::parse("alpha").unwrap();
        let trash = trash_folder(&abs("/Projects"), &slug, id);
        assert_eq!(
            trash.to_string(),
            "/Projects/.acdm-trash/alpha/6f1c1c1e-6b0b-4e53-9a38-2d1f7cf6b8a1"
        );
        assert!(trash_root(&abs("/Projects")).contains(&trash));
        let kept = kept_path(&trash, 0, &abs("/Projects/Alpha/a b#.md")).unwrap();
        assert_eq!(kept.segments().last().unwrap(), "a b#.md");
        assert!(trash.contains(&kept));
        let day = chrono::NaiveDate::from_ymd_opt(2026, 11, 25).unwrap();
        let discarded = discard_folder(&abs("/Projects"), &slug, day, id);
        assert_eq!(
            discarded.to_string(),
            "/Projects/.acdm-trash/alpha/discarded/2026-11-25/6f1c1c1e-6b0b-4e53-9a38-2d1f7cf6b8a1"
        );
        assert!(trash_root(&abs("/Projects")).contains(&discarded));
        assert!(!trash.contains(&discarded));
    }

    #[test]
    fn a_revert_discards_into_its_own_trash_and_can_itself_be_reverted() {
        let trash = abs("/P/.acdm-trash/alpha/r1");
        let undo = vec![
            Step::Discard {
                path: abs("/P/Alpha/a.md"),
                etag: Some("e2".into()),
            },
            Step::Move {
                from: abs("/P/.acdm-trash/alpha/e1/0/a.md"),
                to: abs("/P/Alpha/a.md"),
            },
        ];
        let (plan, inverse) = revert_plan(&undo, &trash, Utc::now(), None).unwrap();
        assert_eq!(
            plan,
            vec![
                Step::Move {
                    from: abs("/P/Alpha/a.md"),
                    to: abs("/P/.acdm-trash/alpha/r1/0/a.md"),
                },
                Step::Move {
                    from: abs("/P/.acdm-trash/alpha/e1/0/a.md"),
                    to: abs("/P/Alpha/a.md"),
                },
            ]
        );
        // Undoing the revert: put the restored file back in the first
        // trash, then bring the discarded one back, in that order.
        assert_eq!(
            inverse,
            vec![
                Step::Move {
                    from: abs("/P/Alpha/a.md"),
                    to: abs("/P/.acdm-trash/alpha/e1/0/a.md"),
                },
                Step::Move {
                    from: abs("/P/.acdm-trash/alpha/r1/0/a.md"),
                    to: abs("/P/Alpha/a.md"),
                },
            ]
        );
    }

    #[test]
    fn steps_round_trip_as_tagged_json_and_names_parse() {
        let step = Step::Put {
            path: abs("/P/A/x.md"),
            sha256: "ab".into(),
            size: 2,
            replaces: None,
        };
        let json = serde_json::to_value(&step).unwrap();
        assert_eq!(json["step"], "put");
        assert_eq!(serde_json::from_value::<Step>(json).unwrap(), step);
        assert!(
            serde_json::from_str::<Step>(r#"{"step":"move","from":"/a/../b","to":"/c"}"#).is_err()
        );
        for op in EventOp::ALL {
            assert_eq!(op.as_str().parse::<EventOp>().unwrap(), *op);
        }
        assert_eq!(
            "via_agent".parse::<ActorKind>().unwrap(),
            ActorKind::ViaAgent
        );
        assert!("pendin".parse::<EventStatus>().is_err());
    }
}
