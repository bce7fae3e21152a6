//! Provisioning records: projects, their members, mounts and manager
//! agents; and what the other modules share without depending on each
//! other: an event's id ([`EventId`], re-exported by `events`), an
//! approval's ([`ApprovalId`], re-exported by `approval`) and what an
//! operation needs from a member's role ([`Access`], re-exported by
//! `business`).
//!
//! These are plain values the store reads and writes and the operator API
//! and CLI print; they carry validated names only.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::names::{AgentName, MountName, ProjectName, ProjectSlug, UserId};
use crate::path::AbsPath;

/// An event's id: a random UUID.
#[derive(
    Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(transparent)]
pub struct EventId(Uuid);

impl EventId {
    /// A fresh random id.
    pub fn new_random() -> Self {
        Self(Uuid::new_v4())
    }
}

impl FromStr for EventId {
    type Err = uuid::Error;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Uuid::parse_str(s).map(Self)
    }
}

impl fmt::Display for EventId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.hyphenated().fmt(f)
    }
}

impl fmt::Debug for EventId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "EventId({})", self.0.hyphenated())
    }
}

/// An approval's id: a random UUID (never guessable, never sequential).
#[derive(
    Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(transparent)]
pub struct ApprovalId(Uuid);

impl ApprovalId {
    /// A fresh random id.
    pub fn new_random() -> Self {
        Self(Uuid::new_v4())
    }
}

impl FromStr for ApprovalId {
    type Err = uuid::Error;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Uuid::parse_str(s).map(Self)
    }
}

impl fmt::Display for ApprovalId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.hyphenated().fmt(f)
    }
}

impl fmt::Debug for ApprovalId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ApprovalId({})", self.0.hyphenated())
    }
}

/// A project's stable internal id: a random UUID, never sequential.
#[derive(
    Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(transparent)]
pub struct ProjectId(Uuid);

impl ProjectId {
    /// A fresh random id.
    pub fn new_random() -> Self {
        Self(Uuid::new_v4())
    }

    /// The underlying UUID.
    pub fn as_uuid(&self) -> Uuid {
        self.0
    }
}

impl From<Uuid> for ProjectId {
    fn from(value: Uuid) -> Self {
        Self(value)
    }
}

impl FromStr for ProjectId {
    type Err = uuid::Error;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Uuid::parse_str(s).map(Self)
    }
}

impl fmt::Display for ProjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.hyphenated().fmt(f)
    }
}

impl fmt::Debug for ProjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ProjectId({})", self.0.hyphenated())
    }
}

/// What the scope resolver returns: enough to address a project's data.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ProjectRef {
    /// Internal id.
    pub id: ProjectId,
    /// URL-safe identifier.
    pub slug: ProjectSlug,
    /// Display name, also the project's folder name.
    pub name: ProjectName,
}

/// A project.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Project {
    /// Internal id.
    pub id: ProjectId,
    /// URL-safe identifier.
    pub slug: ProjectSlug,
    /// Display name, also the project's folder name.
    pub name: ProjectName,
    /// When it was created.
    pub created_at: DateTime<Utc>,
}

impl Project {
    /// The reference the scope resolver hands out.
    pub fn to_ref(&self) -> ProjectRef {
        ProjectRef {
            id: self.id,
            slug: self.slug.clone(),
            name: self.name.clone(),
        }
    }
}

/// Declares a closed set of names (each spelled as given) with `FromStr`,
/// `Display` and serde. Used here and in [`crate::events`].
macro_rules! name_enum {
    ($(#[$doc:meta])* $name:ident { $( $(#[$vdoc:meta])* $variant:ident = $text:literal ),* $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema)]
        pub enum $name { $( $(#[$vdoc])* #[serde(rename = $text)] $variant, )* }

        impl $name {
            /// Every value.
            pub const ALL: &'static [$name] = &[ $( $name::$variant, )* ];

            /// The lowercase name.
            pub const fn as_str(self) -> &'static str {
                match self { $( $name::$variant => $text, )* }
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ::std::str::FromStr for $name {
            type Err = $crate::domain::UnknownVariant;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Self::ALL.iter().copied().find(|v| v.as_str() == s).ok_or_else(|| $crate::domain::UnknownVariant {
                    value: s.to_owned(),
                    expected: concat!($( $text, " " ),*).trim_end(),
                })
            }
        }
    };
}

pub(crate) use name_enum;

/// A string that names none of an enum's values.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown value `{value}`; expected one of: {expected}")]
pub struct UnknownVariant {
    /// What was given.
    pub value: String,
    /// The accepted values, space-separated.
    pub expected: &'static str,
}

name_enum!(
    /// A project member's role. Owners and admins may advance milestones.
    MemberRole {
        /// Owns the project.
        Owner = "owner",
        /// Administers the project.
        Admin = "admin",
        /// Works in the project.
        Member = "member",
        /// Reads only.
        Viewer = "viewer",
    }
);

name_enum!(
    /// The role an agent is mounted with. Only managers resolve to a scope.
    AgentRole {
        /// The project's manager agent.
        Manager = "manager",
    }
);

/// A member of a project.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Member {
    /// The user.
    pub user_id: UserId,
    /// Their role.
    pub role: MemberRole,
    /// When the membership was created or last changed.
    pub updated_at: DateTime<Utc>,
}

/// One of a project's folders in the file store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Mount {
    /// Name agents use to pick it (`project` is the default mount).
    pub name: MountName,
    /// Absolute folder in the file store's user tree (`/Projects/Alpha`).
    pub root: AbsPath,
    /// Whether agents may write there.
    pub writable: bool,
}

/// The name of the mount every project gets at creation.
pub const DEFAULT_MOUNT: &str = "project";

/// An agent mounted on a project.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AgentMount {
    /// The agent.
    pub agent_name: AgentName,
    /// The project's slug.
    pub project: ProjectSlug,
    /// Its role.
    pub role: AgentRole,
    /// When it was mounted.
    pub mounted_at: DateTime<Utc>,
    /// When it was unmounted; `None` while active.
    pub unmounted_at: Option<DateTime<Utc>>,
}

/// A project with everything provisioned for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ProjectDetails {
    /// The project.
    #[serde(flatten)]
    pub project: Project,
    /// Members, by user id.
    pub members: Vec<Member>,
    /// Mounts, by name.
    pub mounts: Vec<Mount>,
    /// Active agent mounts, by agent name.
    pub agents: Vec<AgentMount>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_parse_from_their_lowercase_names_only() {
        assert_eq!("owner".parse(), Ok(MemberRole::Owner));
        assert_eq!("viewer".parse(), Ok(MemberRole::Viewer));
        let err = "Owner".parse::<MemberRole>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown value `Owner`; expected one of: owner admin member viewer"
        );
        assert_eq!("manager".parse(), Ok(AgentRole::Manager));
        assert_eq!(
            serde_json::to_string(&MemberRole::Admin).unwrap(),
            "\"admin\""
        );
    }

    #[test]
    fn project_ids_are_random_uuids() {
        let a = ProjectId::new_random();
        let b = ProjectId::new_random();
        assert_ne!(a, b);
        assert_eq!(a.to_string().parse::<ProjectId>().unwrap(), a);
        assert_eq!(a.as_uuid().get_version_num(), 4);
    }
}

/// What an operation needs from the acting user's role (spec §6.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Access {
    /// Every read: viewers and up.
    Read,
    /// File writes, meetings, attachments, submitting and reopening
    /// reports: members and up.
    Contribute,
    /// Deleting meetings, approving and rejecting reports, advancing
    /// milestones: admins and owners.
    Manage,
}

impl Access {
    /// The least role that has this access.
    pub const fn least_role(self) -> MemberRole {
        match self {
            Self::Read => MemberRole::Viewer,
            Self::Contribute => MemberRole::Member,
            Self::Manage => MemberRole::Admin,
        }
    }

    /// How the access reads in a message (`read`, `contribute`, `manage`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Contribute => "contribute",
            Self::Manage => "manage",
        }
    }
}

impl MemberRole {
    /// Whether a member with this role has `access`.
    pub const fn grants(self, access: Access) -> bool {
        match access {
            Access::Read => true,
            Access::Contribute => !matches!(self, MemberRole::Viewer),
            Access::Manage => matches!(self, MemberRole::Owner | MemberRole::Admin),
        }
    }
}
