//! The project operations (spec §6.3): the overview an engine puts in the
//! prompt, the statement of work, and the milestone advance — their
//! operation enum and wire types, shared by the BFF and the harness client
//! like [`crate::nc`] and [`crate::business::wire`].
//!
//! `overview` and `sow` are `GET` (no input); `milestone/advance` is a
//! `POST` with a JSON body.

use chrono::{DateTime, NaiveDate, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::business::wire::EmptyRequest;
use crate::business::{
    Access, Deliverable, MeetingId, MemberInfo, Milestone, MilestoneStatus, ProjectMeta, ReportId,
    ReportKind,
};
use crate::domain::MemberRole;
use crate::events::{EventId, EventStatus};
use crate::names::UserId;

crate::ops::operations!(
    /// The project operations; the name is what follows
    /// `agent-tools/project/` in the path.
    ProjectOp = "project" {
        /// Everything an agent should know about its project, in one cheap
        /// call (meta, milestones, upcoming meetings, reports, members,
        /// recent agent writes).
        Overview = "overview", get;
        /// The statement of work: summary, deliverables, and each
        /// milestone's acceptance criteria.
        Sow = "sow", get;
        /// Mark the current milestone done and the next one current.
        AdvanceMilestone = "milestone/advance", write;
    }
);

impl ProjectOp {
    /// What the acting user's role must grant (spec §6.5).
    pub const fn access(self) -> Access {
        match self {
            Self::AdvanceMilestone => Access::Manage,
            _ => Access::Read,
        }
    }

    /// The JSON Schema of the operation's input, generated from the type
    /// the BFF parses (an empty object for the two `GET`s).
    pub fn request_schema(self) -> schemars::Schema {
        match self {
            Self::Overview | Self::Sow => schemars::schema_for!(EmptyRequest),
            Self::AdvanceMilestone => schemars::schema_for!(AdvanceMilestoneRequest),
        }
    }

    /// The same schema as a subschema of `generator` (a `$ref` to its
    /// definitions for named types), for documents that collect every
    /// operation's types in one place (the OpenAPI document).
    pub fn request_subschema(self, generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        match self {
            Self::Overview | Self::Sow => generator.subschema_for::<EmptyRequest>(),
            Self::AdvanceMilestone => generator.subschema_for::<AdvanceMilestoneRequest>(),
        }
    }

    /// The JSON Schema of the `data` of its success.
    pub fn data_schema(self) -> schemars::Schema {
        match self {
            Self::Overview => schemars::schema_for!(OverviewData),
            Self::Sow => schemars::schema_for!(SowData),
            Self::AdvanceMilestone => schemars::schema_for!(AdvanceData),
        }
    }

    /// The same schema as a subschema of `generator` (a `$ref` to its
    /// definitions for named types), for documents that collect every
    /// operation's types in one place (the OpenAPI document).
    pub fn data_subschema(self, generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        match self {
            Self::Overview => generator.subschema_for::<OverviewData>(),
            Self::Sow => generator.subschema_for::<SowData>(),
            Self::AdvanceMilestone => generator.subschema_for::<AdvanceData>(),
        }
    }
}

/// `milestone/advance`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AdvanceMilestoneRequest {
    /// The `seq` of the milestone you believe is current (from `overview`);
    /// if another one is current the call is a `conflict` naming it.
    #[schemars(range(min = 1))]
    pub if_current: u32,
}

/// `overview` data: what an agent should know before it acts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct OverviewData {
    /// The project's meta (status, dates, time zone).
    pub meta: ProjectMeta,
    /// Every milestone, by `seq`.
    pub milestones: Vec<Milestone>,
    /// The `seq` of the current milestone, if one is current.
    pub current_milestone: Option<u32>,
    /// Meetings starting in the next 14 days, soonest first, at most 5.
    pub upcoming_meetings: Vec<UpcomingMeeting>,
    /// Reports by status, and the ones waiting for approval.
    pub reports: ReportsOverview,
    /// The members, grouped by role.
    pub members: MembersByRole,
    /// The acting user's role (what the agent may do on their behalf).
    pub acting_role: Option<MemberRole>,
    /// The last 10 writes agents made in this project, newest first.
    pub recent_agent_writes: Vec<RecentWrite>,
    /// Whether agents' file writes are enabled right now (the kill switch).
    pub file_writes_enabled: bool,
}

/// A meeting in the overview (its agenda and notes through `get_meeting`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct UpcomingMeeting {
    /// Its id.
    pub meeting_id: MeetingId,
    /// Its title.
    pub title: String,
    /// When it starts (UTC).
    pub starts_at: DateTime<Utc>,
    /// When it ends (UTC).
    pub ends_at: DateTime<Utc>,
    /// Where.
    pub location: Option<String>,
    /// How many people attend.
    pub attendees: usize,
    /// Its `version` (for `update_meeting`).
    pub version: i64,
}

/// Reports in the overview.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ReportsOverview {
    /// Drafts.
    pub draft: u64,
    /// Submitted, waiting for approval.
    pub submitted: u64,
    /// Approved.
    pub approved: u64,
    /// Rejected (back to their authors).
    pub rejected: u64,
    /// The submitted ones, oldest first (at most 10).
    pub awaiting_approval: Vec<ReportBrief>,
}

/// A report in the overview (its body through `get_report`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ReportBrief {
    /// Its id.
    pub report_id: ReportId,
    /// Its title.
    pub title: String,
    /// Weekly, monthly, milestone or other.
    pub kind: ReportKind,
    /// First day covered.
    pub period_start: NaiveDate,
    /// Last day covered.
    pub period_end: NaiveDate,
    /// Its `version` (for `update_report_status`).
    pub version: i64,
    /// Last change.
    pub updated_at: DateTime<Utc>,
}

/// The members by role.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct MembersByRole {
    /// Owners.
    pub owners: Vec<MemberInfo>,
    /// Admins.
    pub admins: Vec<MemberInfo>,
    /// Members.
    pub members: Vec<MemberInfo>,
    /// Viewers.
    pub viewers: Vec<MemberInfo>,
}

impl MembersByRole {
    /// `members` grouped by their role, each group in the given order.
    pub fn group(members: impl IntoIterator<Item = MemberInfo>) -> Self {
        let mut out = Self::default();
        for member in members {
            match member.role {
                MemberRole::Owner => out.owners.push(member),
                MemberRole::Admin => out.admins.push(member),
                MemberRole::Member => out.members.push(member),
                MemberRole::Viewer => out.viewers.push(member),
            }
        }
        out
    }
}

/// One recent agent write, from the journal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RecentWrite {
    /// The storage event.
    pub event_id: EventId,
    /// What it did (`nc_write`, `create_meeting`, …).
    pub op: String,
    /// What it changed (`project:/notes/a.md`, `meeting:<id>`, …).
    pub target: String,
    /// On whose behalf.
    pub user_id: Option<UserId>,
    /// Which agent.
    pub agent_name: Option<String>,
    /// `pending`, `applied`, `failed` or `reverted`.
    pub status: EventStatus,
    /// When.
    pub at: DateTime<Utc>,
}

/// `sow` data: the statement of work.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SowData {
    /// What the project is to achieve (empty until an operator writes it).
    pub summary: String,
    /// What it delivers, each with its milestone's `seq` when it has one.
    pub deliverables: Vec<Deliverable>,
    /// Each milestone with its acceptance criteria, by `seq`.
    pub milestones: Vec<MilestoneCriteria>,
    /// Last change of the summary or deliverables.
    pub updated_at: DateTime<Utc>,
}

/// A milestone in the statement of work.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct MilestoneCriteria {
    /// Its `seq`.
    pub seq: u32,
    /// Its title.
    pub title: String,
    /// Planned, current or done.
    pub status: MilestoneStatus,
    /// When it is due.
    pub due_date: Option<NaiveDate>,
    /// What must hold for it to be done.
    pub acceptance_criteria: Vec<String>,
}

impl From<&Milestone> for MilestoneCriteria {
    fn from(m: &Milestone) -> Self {
        Self {
            seq: m.seq,
            title: m.title.clone(),
            status: m.status,
            due_date: m.due_date,
            acceptance_criteria: m.acceptance_criteria.clone(),
        }
    }
}

/// `milestone/advance` data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AdvanceData {
    /// The milestone just marked done.
    pub done: Milestone,
    /// The milestone now current; `null` when the one done was the last.
    pub current: Option<Milestone>,
    /// The project's status now (`completed` after the last milestone).
    pub project_status: crate::business::ProjectStatus,
    /// The storage event recording the change (operators can revert it).
    pub event_id: EventId,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_project_operations_have_their_paths_methods_and_access() {
        let ops: Vec<(&str, &str, bool)> = ProjectOp::ALL
            .iter()
            .map(|op| (op.path(), op.method(), op.writes()))
            .collect();
        assert_eq!(
            ops,
            [
                ("agent-tools/project/overview", "GET", false),
                ("agent-tools/project/sow", "GET", false),
                ("agent-tools/project/milestone/advance", "POST", true),
            ]
        );
        assert_eq!(ProjectOp::AdvanceMilestone.access(), Access::Manage);
        assert_eq!(ProjectOp::Overview.access(), Access::Read);
        assert_eq!(
            "milestone/advance".parse::<ProjectOp>(),
            Ok(ProjectOp::AdvanceMilestone)
        );
        assert!("advance".parse::<ProjectOp>().is_err());
    }

    #[test]
    fn an_advance_needs_if_current_and_nothing_else() {
        assert!(serde_json::from_str::<AdvanceMilestoneRequest>("{}").is_err());
        assert!(
            serde_json::from_str::<AdvanceMilestoneRequest>(r#"{"if_current":2,"seq":3}"#).is_err()
        );
        assert_eq!(
            serde_json::from_str::<AdvanceMilestoneRequest>(r#"{"if_current":2}"#).unwrap(),
            AdvanceMilestoneRequest { if_current: 2 }
        );
    }
}
