//! Human approval of risky agent writes: which operations need a person's
//! yes ([`ApprovalPolicy`]), an approval request and where it stands
//! ([`Approval`], [`ApprovalStatus`]), and the rules that bind an approval
//! to exactly the call that was previewed ([`Approval::check_use`]) and
//! say who may decide it ([`Approval::check_decision`]).
//!
//! An approval is bound to its project, its operation, the acting user,
//! the agent and the call's arguments (as the operation's typed request
//! writes them back, so spelling does not matter, content does). A person
//! decides it once, before it expires; the write it allows runs once.

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::business::wire::BusinessOp;
pub use crate::domain::ApprovalId;
use crate::domain::{EventId, MemberRole};
use crate::names::{AgentName, ProjectSlug, ThreadId, UserId};
use crate::nc::NcOp;
use crate::project::ProjectOp;

/// A write operation of the Agent Tools BFF, as policies and approvals
/// name it: its label (`nc.delete`, `business.delete_meeting`,
/// `project.milestone/advance`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WriteOp {
    /// A file primitive.
    Nc(NcOp),
    /// A business operation.
    Business(BusinessOp),
    /// A project operation.
    Project(ProjectOp),
}

impl WriteOp {
    /// Every write operation, in documentation order.
    pub fn all() -> impl Iterator<Item = WriteOp> {
        NcOp::ALL
            .iter()
            .filter(|op| op.writes())
            .map(|&op| WriteOp::Nc(op))
            .chain(
                BusinessOp::ALL
                    .iter()
                    .filter(|op| op.writes())
                    .map(|&op| WriteOp::Business(op)),
            )
            .chain(
                ProjectOp::ALL
                    .iter()
                    .filter(|op| op.writes())
                    .map(|&op| WriteOp::Project(op)),
            )
    }

    /// Its label: `<family>.<name>`.
    pub const fn label(self) -> &'static str {
        match self {
            Self::Nc(op) => op.label(),
            Self::Business(op) => op.label(),
            Self::Project(op) => op.label(),
        }
    }

    /// The labels of every write operation, comma-separated (for
    /// messages).
    pub fn known_labels() -> String {
        Self::all().map(Self::label).collect::<Vec<_>>().join(", ")
    }
}

impl fmt::Display for WriteOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// A label that names no write operation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{label}` is not a write operation; the write operations are: {}",
    WriteOp::known_labels()
)]
pub struct UnknownWriteOp {
    /// What was given.
    pub label: String,
}

impl FromStr for WriteOp {
    type Err = UnknownWriteOp;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::all()
            .find(|op| op.label() == s)
            .ok_or_else(|| UnknownWriteOp {
                label: s.to_owned(),
            })
    }
}

impl Serialize for WriteOp {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.label())
    }
}

impl<'de> Deserialize<'de> for WriteOp {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let label = String::deserialize(deserializer)?;
        label.parse().map_err(serde::de::Error::custom)
    }
}

impl schemars::JsonSchema for WriteOp {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "WriteOp".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let labels: Vec<&str> = Self::all().map(Self::label).collect();
        schemars::json_schema!({
            "type": "string",
            "description": "A write operation's label: `<family>.<name>`.",
            "enum": labels,
        })
    }
}

/// The write operations that need a person's approval before they run (a
/// dry run never does).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(transparent)]
pub struct ApprovalPolicy(BTreeSet<WriteOp>);

impl ApprovalPolicy {
    /// No operation needs approval.
    pub fn none() -> Self {
        Self::default()
    }

    /// A policy of these operations.
    pub fn of(ops: impl IntoIterator<Item = WriteOp>) -> Self {
        Self(ops.into_iter().collect())
    }

    /// Parses a comma-separated list of labels (blanks around each are
    /// ignored, an empty list is no operation); an unknown label is
    /// refused.
    pub fn parse_list(list: &str) -> Result<Self, UnknownWriteOp> {
        list.split(',')
            .map(str::trim)
            .filter(|label| !label.is_empty())
            .map(str::parse)
            .collect::<Result<BTreeSet<_>, _>>()
            .map(Self)
    }

    /// Whether `op` needs approval.
    pub fn requires(&self, op: WriteOp) -> bool {
        self.0.contains(&op)
    }

    /// The operations, in documentation order.
    pub fn ops(&self) -> impl Iterator<Item = WriteOp> + '_ {
        self.0.iter().copied()
    }

    /// The labels, comma-separated, in documentation order (empty for
    /// none).
    pub fn to_list(&self) -> String {
        self.0
            .iter()
            .map(|op| op.label())
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// Where a project's policy comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum PolicySource {
    /// The project's own list (set through the operator API).
    Project,
    /// The deployment's `ACDM_APPROVAL_REQUIRED_OPS`.
    Global,
}

/// How long an approval request lives: from 1 second to 30 days.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApprovalTtl(Duration);

impl ApprovalTtl {
    /// The shortest.
    pub const MIN: Duration = Duration::from_secs(1);
    /// The longest: 30 days.
    pub const MAX: Duration = Duration::from_secs(30 * 24 * 3600);
    /// The default: one day.
    pub const DEFAULT: Self = Self(Duration::from_secs(24 * 3600));

    /// A lifetime in bounds.
    pub fn new(ttl: Duration) -> Result<Self, String> {
        if (Self::MIN..=Self::MAX).contains(&ttl) {
            Ok(Self(ttl))
        } else {
            Err(format!(
                "must be from {} s to {} s (30 days)",
                Self::MIN.as_secs(),
                Self::MAX.as_secs()
            ))
        }
    }

    /// The lifetime.
    pub fn get(self) -> Duration {
        self.0
    }

    /// When a request made at `at` expires.
    pub fn expiry_from(self, at: DateTime<Utc>) -> DateTime<Utc> {
        let ttl = chrono::Duration::from_std(self.0).unwrap_or(chrono::Duration::days(30));
        at + ttl
    }
}

impl Default for ApprovalTtl {
    fn default() -> Self {
        Self::DEFAULT
    }
}

crate::domain::name_enum!(
    /// Where an approval stands. `expired` is never stored: a `pending` or
    /// `approved` request past its expiry reads as expired
    /// ([`Approval::status_at`]).
    ApprovalStatus {
        /// Waiting for a person.
        Pending = "pending",
        /// A person said yes; the write may run once.
        Approved = "approved",
        /// A person said no.
        Rejected = "rejected",
        /// The write it allowed has run (its event names the approval).
        Used = "used",
        /// A target changed between the preview and the write: nothing
        /// was written and the approval is void.
        Voided = "voided",
        /// Not decided or not used in time.
        Expired = "expired",
    }
);

/// What an approval allows, as it was requested.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ApprovalRequest {
    /// The project.
    pub project: ProjectSlug,
    /// The operation.
    pub op: WriteOp,
    /// The call's arguments, as the operation's request type writes them
    /// (without `approval_id`).
    pub arguments: serde_json::Value,
    /// The acting user who asked (through the agent).
    pub requested_by: UserId,
    /// The agent.
    pub agent: AgentName,
    /// The conversation.
    pub thread: ThreadId,
    /// What would change, with each target's etag or version.
    pub preview: serde_json::Value,
}

/// An approval request and its decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Approval {
    /// Its id.
    pub approval_id: ApprovalId,
    /// What was asked.
    #[serde(flatten)]
    pub request: ApprovalRequest,
    /// Where it stands (as stored: see [`Approval::status_at`]).
    pub status: ApprovalStatus,
    /// When it was asked.
    pub created_at: DateTime<Utc>,
    /// When it expires unless used.
    pub expires_at: DateTime<Utc>,
    /// Who approved or rejected it.
    pub decided_by: Option<UserId>,
    /// When.
    pub decided_at: Option<DateTime<Utc>>,
    /// The approver's note, or the reason for a rejection or a voiding.
    pub note: Option<String>,
    /// The event of the write it allowed, once used.
    pub event_id: Option<EventId>,
}

/// Why an approval cannot be used for a call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UseRefusal {
    /// Nobody decided yet.
    #[error("approval {0} is still pending: nobody has decided yet")]
    Pending(ApprovalId),
    /// Rejected, with the reason.
    #[error("approval {id} was rejected by {by}: {reason}")]
    Rejected {
        /// The approval.
        id: ApprovalId,
        /// Who.
        by: String,
        /// Why.
        reason: String,
    },
    /// Not decided or not used in time.
    #[error("approval {0} expired at {1}")]
    Expired(ApprovalId, DateTime<Utc>),
    /// It was given for another call.
    #[error("approval {id} was given for {what}")]
    Mismatch {
        /// The approval.
        id: ApprovalId,
        /// How the call differs (`another operation`, `other arguments`).
        what: String,
    },
    /// It has been used.
    #[error("approval {0} has been used; each approval allows one write")]
    Used(ApprovalId),
    /// A target changed after the preview; it is void.
    #[error("approval {id} is void: {reason}")]
    Voided {
        /// The approval.
        id: ApprovalId,
        /// What changed.
        reason: String,
    },
}

/// Why a person may not decide an approval.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecisionRefusal {
    /// Four eyes: the user who asked cannot decide their own request.
    #[error(
        "user `{0}` asked for this approval and cannot decide it: another owner or admin of the project must (four-eyes rule)"
    )]
    OwnRequest(UserId),
    /// Only a project's owners and admins decide.
    #[error("user `{user}` is {} of project `{project}`; only its owners and admins decide approvals", role.map_or_else(|| "not a member".to_owned(), |r| format!("a {r}")))]
    Role {
        /// Who.
        user: UserId,
        /// Their role, if a member.
        role: Option<MemberRole>,
        /// The project.
        project: ProjectSlug,
    },
    /// It is no longer pending.
    #[error("approval {id} is {status}; only a pending approval can be decided")]
    NotPending {
        /// The approval.
        id: ApprovalId,
        /// Where it stands.
        status: ApprovalStatus,
    },
}

impl Approval {
    /// Where it stands at `now`: a pending or approved request past its
    /// expiry is expired.
    pub fn status_at(&self, now: DateTime<Utc>) -> ApprovalStatus {
        match self.status {
            ApprovalStatus::Pending | ApprovalStatus::Approved if now >= self.expires_at => {
                ApprovalStatus::Expired
            }
            status => status,
        }
    }

    /// Whether `user` (acting through `agent`) may use this approval for
    /// `op` with `arguments` at `now`. The binding is checked first, so a
    /// caller it was not given to learns nothing of its decision.
    pub fn check_use(
        &self,
        op: WriteOp,
        user: &UserId,
        agent: &AgentName,
        arguments: &serde_json::Value,
        now: DateTime<Utc>,
    ) -> Result<(), UseRefusal> {
        let id = self.approval_id;
        let mismatch = |what: &str| UseRefusal::Mismatch {
            id,
            what: what.to_owned(),
        };
        if op != self.request.op {
            return Err(mismatch(&format!(
                "another operation ({}), not {op}",
                self.request.op
            )));
        }
        if *user != self.request.requested_by {
            return Err(mismatch("another user's call"));
        }
        if *agent != self.request.agent {
            return Err(mismatch("another agent's call"));
        }
        if *arguments != self.request.arguments {
            return Err(mismatch(&format!(
                "other arguments: {}",
                differences(&self.request.arguments, arguments)
            )));
        }
        match self.status_at(now) {
            ApprovalStatus::Approved => Ok(()),
            ApprovalStatus::Pending => Err(UseRefusal::Pending(id)),
            ApprovalStatus::Rejected => Err(UseRefusal::Rejected {
                id,
                by: self
                    .decided_by
                    .as_ref()
                    .map_or_else(|| "an approver".to_owned(), |u| format!("`{u}`")),
                reason: self.note.clone().unwrap_or_default(),
            }),
            ApprovalStatus::Expired => Err(UseRefusal::Expired(id, self.expires_at)),
            ApprovalStatus::Used => Err(UseRefusal::Used(id)),
            ApprovalStatus::Voided => Err(UseRefusal::Voided {
                id,
                reason: self.note.clone().unwrap_or_default(),
            }),
        }
    }

    /// Whether `user`, whose role in the project is `role`, may approve
    /// or reject this request at `now`.
    pub fn check_decision(
        &self,
        user: &UserId,
        role: Option<MemberRole>,
        now: DateTime<Utc>,
    ) -> Result<(), DecisionRefusal> {
        if *user == self.request.requested_by {
            return Err(DecisionRefusal::OwnRequest(user.clone()));
        }
        if !matches!(role, Some(MemberRole::Owner | MemberRole::Admin)) {
            return Err(DecisionRefusal::Role {
                user: user.clone(),
                role,
                project: self.request.project.clone(),
            });
        }
        match self.status_at(now) {
            ApprovalStatus::Pending => Ok(()),
            status => Err(DecisionRefusal::NotPending {
                id: self.approval_id,
                status,
            }),
        }
    }
}

/// The top-level fields whose values differ, for a mismatch's message
/// (names only: values may be long or private).
fn differences(approved: &serde_json::Value, given: &serde_json::Value) -> String {
    let (Some(approved), Some(given)) = (approved.as_object(), given.as_object()) else {
        return "the arguments differ".to_owned();
    };
    let mut names: BTreeSet<&str> = BTreeSet::new();
    for (key, value) in approved {
        if given.get(key) != Some(value) {
            names.insert(key);
        }
    }
    for key in given.keys() {
        if !approved.contains_key(key) {
            names.insert(key);
        }
    }
    if names.is_empty() {
        "the arguments differ".to_owned()
    } else {
        format!(
            "{} differ(s) from the approved call",
            names.into_iter().collect::<Vec<_>>().join(", ")
        )
    }
}

/// What a call that needs approval answers (`approval_required`'s data).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ApprovalRequired {
    /// The request's id: send it back as `approval_id` once approved.
    pub approval_id: ApprovalId,
    /// `pending`.
    pub status: ApprovalStatus,
    /// When it expires unless decided and used.
    pub expires_at: DateTime<Utc>,
    /// What would change, with each target's current etag or version.
    pub preview: serde_json::Value,
}

/// A write's request with the approval of exactly that call, as a client
/// sends it: the request's own fields and `approval_id` beside them.
#[derive(Debug, Clone, Serialize)]
pub struct WithApproval<'a, T: Serialize> {
    /// The approval an `approval_required` answer gave, once approved.
    pub approval_id: ApprovalId,
    /// The same request as the call that asked.
    #[serde(flatten)]
    pub request: &'a T,
}

impl ApprovalRequired {
    /// The approval request in a failure's `data`, when the failure is
    /// `approval_required` (read it from a `ToolResponse<Value>`).
    pub fn from_data(code: crate::ResponseCode, data: Option<&serde_json::Value>) -> Option<Self> {
        (code == crate::ResponseCode::Error(crate::ErrorCode::ApprovalRequired))
            .then(|| data.cloned())
            .flatten()
            .and_then(|data| serde_json::from_value(data).ok())
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone as _;
    use serde_json::json;

    use super::*;

    fn at(seconds: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_800_000_000 + seconds, 0).unwrap()
    }

    fn approval(status: ApprovalStatus) -> Approval {
        Approval {
            approval_id: ApprovalId::new_random(),
            request: ApprovalRequest {
                project: ProjectSlug::parse("alpha").unwrap(),
                op: "nc.delete".parse().unwrap(),
                arguments: json!({"rel_path": "a.md", "dry_run": false}),
                requested_by: UserId::parse("u-1").unwrap(),
                agent: AgentName::parse("project-alpha").unwrap(),
                thread: ThreadId::parse("t-1").unwrap(),
                preview: json!({}),
            },
            status,
            created_at: at(0),
            expires_at: at(100),
            decided_by: Some(UserId::parse("boss").unwrap()),
            decided_at: Some(at(10)),
            note: Some("not this one".to_owned()),
            event_id: None,
        }
    }

    #[test]
    fn every_write_and_only_writes_have_labels_that_parse_back() {
        let labels: Vec<&str> = WriteOp::all().map(WriteOp::label).collect();
        assert_eq!(labels.len(), 10, "{labels:?}");
        for label in &labels {
            assert_eq!(label.parse::<WriteOp>().unwrap().label(), *label);
        }
        for read in [
            "nc.read",
            "business.list_meetings",
            "project.overview",
            "nc",
            "",
        ] {
            let error = read.parse::<WriteOp>().unwrap_err();
            assert!(error.to_string().contains("nc.delete"), "{error}");
        }
        assert!(labels.contains(&"project.milestone/advance"));
    }

    #[test]
    fn a_policy_list_is_trimmed_and_refuses_unknown_labels() {
        let policy = ApprovalPolicy::parse_list(" nc.delete , business.delete_meeting,,").unwrap();
        assert!(policy.requires("nc.delete".parse().unwrap()));
        assert!(!policy.requires("nc.write".parse().unwrap()));
        assert_eq!(
            policy.to_list(),
            "nc.delete,business.delete_meeting",
            "documentation order"
        );
        assert_eq!(
            ApprovalPolicy::parse_list("").unwrap(),
            ApprovalPolicy::none()
        );
        let error = ApprovalPolicy::parse_list("nc.delete,nc.deleet").unwrap_err();
        assert_eq!(error.label, "nc.deleet");
    }

    #[test]
    fn the_ttl_is_one_second_to_thirty_days() {
        assert!(ApprovalTtl::new(Duration::from_secs(1)).is_ok());
        assert!(ApprovalTtl::new(Duration::from_secs(30 * 86_400)).is_ok());
        assert!(ApprovalTtl::new(Duration::from_millis(999)).is_err());
        assert!(ApprovalTtl::new(Duration::from_secs(30 * 86_400 + 1)).is_err());
        assert_eq!(ApprovalTtl::DEFAULT.expiry_from(at(0)), at(86_400));
    }

    #[test]
    fn an_approval_is_used_only_by_its_call_and_only_once_approved_in_time() {
        let user = UserId::parse("u-1").unwrap();
        let agent = AgentName::parse("project-alpha").unwrap();
        let op: WriteOp = "nc.delete".parse().unwrap();
        let args = json!({"dry_run": false, "rel_path": "a.md"});
        let approved = approval(ApprovalStatus::Approved);
        assert_eq!(approved.check_use(op, &user, &agent, &args, at(5)), Ok(()));
        assert!(matches!(
            approved.check_use(op, &user, &agent, &args, at(100)),
            Err(UseRefusal::Expired(..))
        ));
        let other = json!({"dry_run": false, "rel_path": "b.md"});
        let refusal = approved
            .check_use(op, &user, &agent, &other, at(5))
            .unwrap_err();
        assert!(refusal.to_string().contains("rel_path"), "{refusal}");
        for (what, refusal) in [
            (
                "op",
                approved.check_use("nc.write".parse().unwrap(), &user, &agent, &args, at(5)),
            ),
            (
                "user",
                approved.check_use(op, &UserId::parse("u-2").unwrap(), &agent, &args, at(5)),
            ),
            (
                "agent",
                approved.check_use(
                    op,
                    &user,
                    &AgentName::parse("project-b").unwrap(),
                    &args,
                    at(5),
                ),
            ),
        ] {
            assert!(
                matches!(refusal, Err(UseRefusal::Mismatch { .. })),
                "{what}"
            );
        }
        // A caller it was not given to learns nothing of its decision.
        let rejected = approval(ApprovalStatus::Rejected);
        assert!(matches!(
            rejected.check_use(op, &UserId::parse("u-2").unwrap(), &agent, &args, at(5)),
            Err(UseRefusal::Mismatch { .. })
        ));
        let refusal = rejected
            .check_use(op, &user, &agent, &args, at(5))
            .unwrap_err();
        assert!(refusal.to_string().contains("not this one"), "{refusal}");
        for (status, expected) in [
            (ApprovalStatus::Pending, "pending"),
            (ApprovalStatus::Used, "used"),
            (ApprovalStatus::Voided, "void"),
        ] {
            let refusal = approval(status)
                .check_use(op, &user, &agent, &args, at(5))
                .unwrap_err();
            assert!(refusal.to_string().contains(expected), "{refusal}");
        }
    }

    #[test]
    fn only_another_owner_or_admin_decides_a_pending_request_in_time() {
        let pending = approval(ApprovalStatus::Pending);
        let boss = UserId::parse("boss").unwrap();
        for role in [MemberRole::Owner, MemberRole::Admin] {
            assert_eq!(pending.check_decision(&boss, Some(role), at(1)), Ok(()));
        }
        for role in [None, Some(MemberRole::Member), Some(MemberRole::Viewer)] {
            assert!(matches!(
                pending.check_decision(&boss, role, at(1)),
                Err(DecisionRefusal::Role { .. })
            ));
        }
        assert!(matches!(
            pending.check_decision(
                &UserId::parse("u-1").unwrap(),
                Some(MemberRole::Owner),
                at(1)
            ),
            Err(DecisionRefusal::OwnRequest(_))
        ));
        assert!(matches!(
            pending.check_decision(&boss, Some(MemberRole::Owner), at(100)),
            Err(DecisionRefusal::NotPending {
                status: ApprovalStatus::Expired,
                ..
            })
        ));
        assert!(matches!(
            approval(ApprovalStatus::Approved).check_decision(
                &boss,
                Some(MemberRole::Owner),
                at(1)
            ),
            Err(DecisionRefusal::NotPending {
                status: ApprovalStatus::Approved,
                ..
            })
        ));
    }
}
