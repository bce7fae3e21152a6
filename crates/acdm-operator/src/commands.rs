//! The operator commands of spec §9 (`project`, `member`, `mount`,
//! `agent`, `events`, `kill-switch`, and the business commands `member
//! name`, `meta set`, `milestone set`, `report`, `meeting`, `import`),
//! declared for the binary's command line and run here on the configured
//! database directly (running servers see agent changes through the scope
//! epoch within `ACDM_SCOPE_POLL_MILLIS`). A command's result is its
//! output, as text; the binary prints it.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use acdm_core::domain::MemberRole;
use acdm_core::{AbsPath, AgentName, MountName, ProjectName, ProjectSlug, UserId};
use acdm_sources::FileWriter;
use acdm_store::Store;
use clap::{Args, Subcommand};
use serde::Serialize;

use acdm_bff::envelope::Failure;
use acdm_bff::operator::{
    AttachmentInput, MeetingInput, MetaInput, MilestoneInput, Operator, ReportInput,
};
use acdm_bff::switch::KillSwitch;
use acdm_core::business::{FileId, MeetingId, ReportId};
use acdm_core::events::{Actor, EventId, EventRef, StorageEvent};
use acdm_journal::Journal;
use chrono::{DateTime, FixedOffset, NaiveDate};

use crate::OperatorError;

pub mod approvals;

/// What the commands work on: the database, and the settings they need
/// (typed values the binary read).
pub struct Target<'a> {
    /// The database.
    pub store: &'a Store,
    /// `NEXTCLOUD_BASE_PATH`: where project folders are.
    pub files_base: &'a AbsPath,
    /// `ACDM_AI_NC_WRITES_ENABLED`.
    pub nc_writes_enabled: bool,
    /// `ACDM_APPROVAL_REQUIRED_OPS`: the deployment's list.
    pub approval_policy: acdm_core::approval::ApprovalPolicy,
    /// `ACDM_SCOPE_POLL_MILLIS`: how soon running servers follow.
    pub scope_poll_interval: Duration,
    /// The configured file store, built when a command first needs it
    /// (those that write through the journal); its error is a message.
    pub files: &'a (dyn Fn() -> Result<Arc<dyn FileWriter>, String> + Sync),
}

/// The operator commands (the binary's command line flattens them into
/// its own).
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create, list and show projects.
    #[command(subcommand)]
    Project(ProjectCommand),
    /// Add, change, name and remove project members.
    #[command(subcommand)]
    Member(MemberCommand),
    /// Add or change a project's mounts (folders in the file store).
    #[command(subcommand)]
    Mount(MountCommand),
    /// Mount and unmount agents as project managers.
    #[command(subcommand)]
    Agent(AgentCommand),
    /// List, show and revert storage events (every file write is one).
    #[command(subcommand)]
    Events(EventsCommand),
    /// Show or flip the kill switch for agents' file writes (every server
    /// follows within ACDM_SCOPE_POLL_MILLIS).
    #[command(subcommand)]
    KillSwitch(KillSwitchCommand),
    /// List, show, approve and reject approval requests of agents' writes.
    #[command(subcommand)]
    Approvals(approvals::ApprovalsCommand),
    /// Show, set or clear a project's own list of writes that need approval.
    #[command(subcommand)]
    ApprovalPolicy(approvals::PolicyCommand),
    /// Set a project's meta (status, description, dates, time zone).
    #[command(subcommand)]
    Meta(MetaCommand),
    /// Create or replace a project's milestones.
    #[command(subcommand)]
    Milestone(MilestoneCommand),
    /// Create and edit a project's reports.
    #[command(subcommand)]
    Report(ReportCommand),
    /// Create and edit a project's meetings.
    #[command(subcommand)]
    Meeting(MeetingCommand),
    /// Import a project's business data from a JSON or TOML file (checked
    /// whole before anything is written; a second run changes nothing).
    Import {
        /// The project's slug.
        #[arg(long)]
        project: String,
        /// Who imports (recorded as the events' direct actor).
        #[arg(long, default_value = DEFAULT_OPERATOR)]
        by: String,
        /// The document: `.json` or `.toml` (see docs/operators.md).
        file: PathBuf,
    },
}

/// Who a business command acts as when `--by` is not given.
pub const DEFAULT_OPERATOR: &str = "operator";

/// The project and the acting person of a business command.
#[derive(Debug, Args)]
pub struct Acting {
    /// The project's slug.
    #[arg(long)]
    project: String,
    /// Who makes the change (recorded as the event's direct actor).
    #[arg(long, default_value = DEFAULT_OPERATOR)]
    by: String,
}

/// `meta …`
#[derive(Debug, Subcommand)]
pub enum MetaCommand {
    /// Change the given fields of a project's meta (the others stay).
    Set {
        /// The project and who acts.
        #[command(flatten)]
        acting: Acting,
        /// planning, active, on_hold, completed or closed.
        #[arg(long)]
        status: Option<String>,
        /// What the project is about (markdown).
        #[arg(long)]
        description: Option<String>,
        /// YYYY-MM-DD.
        #[arg(long)]
        start_date: Option<String>,
        /// YYYY-MM-DD.
        #[arg(long)]
        end_date: Option<String>,
        /// IANA name, e.g. Europe/Paris.
        #[arg(long)]
        time_zone: Option<String>,
    },
}

/// `milestone …`
#[derive(Debug, Subcommand)]
pub enum MilestoneCommand {
    /// Create or replace milestone `--seq` (making it current makes the
    /// current one planned).
    Set {
        /// The project and who acts.
        #[command(flatten)]
        acting: Acting,
        /// Its place in the sequence, from 1.
        #[arg(long)]
        seq: u32,
        /// Its title.
        #[arg(long)]
        title: String,
        /// YYYY-MM-DD.
        #[arg(long)]
        due_date: Option<String>,
        /// planned, current or done.
        #[arg(long, default_value = "planned")]
        status: String,
        /// An acceptance criterion (repeat for several).
        #[arg(long = "criterion")]
        criteria: Vec<String>,
    },
}

/// The fields of a report.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Its title.
    #[arg(long)]
    title: String,
    /// weekly, monthly, milestone or other.
    #[arg(long)]
    kind: String,
    /// First day covered, YYYY-MM-DD.
    #[arg(long)]
    period_start: String,
    /// Last day covered, YYYY-MM-DD.
    #[arg(long)]
    period_end: String,
    /// The text (markdown).
    #[arg(long, default_value = "")]
    body: String,
    /// draft, submitted, approved or rejected (create: draft; update: unchanged).
    #[arg(long)]
    status: Option<String>,
}

/// `report …`
#[derive(Debug, Subcommand)]
pub enum ReportCommand {
    /// Create a report.
    Create {
        /// The project and who acts.
        #[command(flatten)]
        acting: Acting,
        /// The report's fields.
        #[command(flatten)]
        report: ReportArgs,
    },
    /// Replace a report's fields.
    Update {
        /// The project and who acts.
        #[command(flatten)]
        acting: Acting,
        /// The report's id.
        #[arg(long)]
        id: String,
        /// Refuse unless the report is at this version.
        #[arg(long)]
        if_version: Option<i64>,
        /// The report's fields.
        #[command(flatten)]
        report: ReportArgs,
    },
}

/// The fields of a meeting.
#[derive(Debug, Args)]
pub struct MeetingArgs {
    /// Its title.
    #[arg(long)]
    title: String,
    /// RFC 3339, e.g. 2026-12-01T09:00:00+01:00.
    #[arg(long)]
    starts_at: String,
    /// RFC 3339, after the start and at most 24 h later.
    #[arg(long)]
    ends_at: String,
    /// Where.
    #[arg(long)]
    location: Option<String>,
    /// What will be discussed (markdown).
    #[arg(long)]
    agenda: Option<String>,
    /// What was said (markdown).
    #[arg(long)]
    notes: Option<String>,
    /// A member attending (repeat for several).
    #[arg(long = "attendee")]
    attendees: Vec<String>,
}

/// `meeting …`
#[derive(Debug, Subcommand)]
pub enum MeetingCommand {
    /// Create a meeting.
    Create {
        /// The project and who acts.
        #[command(flatten)]
        acting: Acting,
        /// The meeting's fields.
        #[command(flatten)]
        meeting: MeetingArgs,
    },
    /// Replace a meeting's fields.
    Update {
        /// The project and who acts.
        #[command(flatten)]
        acting: Acting,
        /// The meeting's id.
        #[arg(long)]
        id: String,
        /// Refuse unless the meeting is at this version.
        #[arg(long)]
        if_version: Option<i64>,
        /// The meeting's fields.
        #[command(flatten)]
        meeting: MeetingArgs,
    },
    /// Attach a text file to a meeting (kept at meetings/<id>/<name> in
    /// the `project` mount).
    Attach {
        /// The project and who acts.
        #[command(flatten)]
        acting: Acting,
        /// The meeting's id.
        #[arg(long)]
        id: String,
        /// The local file to attach (UTF-8 text).
        file: PathBuf,
        /// Its name in the meeting (default: the file's name).
        #[arg(long)]
        name: Option<String>,
    },
}

/// `events …`
#[derive(Debug, Subcommand)]
pub enum EventsCommand {
    /// Storage events, newest first.
    List {
        /// Only this project (slug).
        #[arg(long)]
        project: Option<String>,
        /// Only this agent.
        #[arg(long)]
        agent: Option<String>,
        /// Only this status (pending, applied, failed, reverted).
        #[arg(long)]
        status: Option<String>,
        /// At most this many (1–500).
        #[arg(long, default_value_t = 50)]
        limit: u32,
        /// Only events older than this event (the `next_before` of a page).
        #[arg(long)]
        before: Option<String>,
        /// A table for people instead of JSON.
        #[arg(long)]
        human: bool,
    },
    /// One event, with its plan and undo steps.
    Show {
        /// The event id, or a unique prefix of it (at least 4 characters).
        id: String,
    },
    /// Reverts an applied event (recorded as a new event by --user).
    Revert {
        /// The event id, or a unique prefix of it (at least 4 characters).
        id: String,
        /// Who reverts (recorded as a direct actor).
        #[arg(long)]
        user: String,
    },
    /// Settles events left pending by a crash, now (whatever their age).
    Reconcile,
}

/// `kill-switch …`
#[derive(Debug, Subcommand)]
pub enum KillSwitchCommand {
    /// The current state and who decided it.
    Show,
    /// Switch agents' file writes off.
    Off {
        /// Why (kept with the switch).
        #[arg(long)]
        reason: Option<String>,
        /// Who (kept with the switch).
        #[arg(long)]
        user: Option<String>,
    },
    /// Switch agents' file writes back on.
    On {
        /// Why (kept with the switch).
        #[arg(long)]
        reason: Option<String>,
        /// Who (kept with the switch).
        #[arg(long)]
        user: Option<String>,
    },
}

/// `project …`
#[derive(Debug, Subcommand)]
pub enum ProjectCommand {
    /// Create a project and its default writable mount `project`.
    Create {
        /// URL-safe identifier, `[a-z0-9-]{1,63}`.
        #[arg(long)]
        slug: String,
        /// Display name, also the folder name under NEXTCLOUD_BASE_PATH.
        #[arg(long)]
        name: String,
    },
    /// List projects.
    List,
    /// Show a project with its members, mounts and agents.
    Show {
        /// The project's slug.
        slug: String,
    },
}

/// `member …`
#[derive(Debug, Subcommand)]
pub enum MemberCommand {
    /// Add a member, or change an existing member's role.
    Add {
        /// The project's slug.
        #[arg(long)]
        project: String,
        /// The user id (as sent in X-ACDM-User-Id).
        #[arg(long)]
        user: String,
        /// owner, admin, member or viewer.
        #[arg(long)]
        role: String,
    },
    /// Remove a member.
    Remove {
        /// The project's slug.
        #[arg(long)]
        project: String,
        /// The user id.
        #[arg(long)]
        user: String,
    },
    /// Set a member's display name (journalled; an empty name clears it).
    Name {
        /// The project and who acts.
        #[command(flatten)]
        acting: Acting,
        /// The member's user id.
        #[arg(long)]
        user: String,
        /// Their name for people.
        #[arg(long)]
        name: String,
    },
}

/// `mount …`
#[derive(Debug, Subcommand)]
pub enum MountCommand {
    /// Add a mount, or change an existing one.
    Add(MountArgs),
}

/// Arguments of `mount add`.
#[derive(Debug, Args)]
pub struct MountArgs {
    /// The project's slug.
    #[arg(long)]
    project: String,
    /// Mount name agents use (`project` is the default mount).
    #[arg(long)]
    name: String,
    /// Absolute folder in the file store; default `<NEXTCLOUD_BASE_PATH>/<project name>`.
    #[arg(long)]
    root: Option<String>,
    /// Refuse agent writes to this mount.
    #[arg(long)]
    read_only: bool,
}

/// `agent …`
#[derive(Debug, Subcommand)]
pub enum AgentCommand {
    /// Mount an agent as a project's manager (moving it if it manages another).
    Mount {
        /// The agent name (as sent in X-ACDM-Agent-Name), e.g. project-alpha.
        #[arg(long)]
        agent: String,
        /// The project's slug.
        #[arg(long)]
        project: String,
    },
    /// End an agent's mount; every running server drops its scope within seconds.
    Unmount {
        /// The agent name.
        #[arg(long)]
        agent: String,
    },
    /// List active agent mounts.
    List,
}

pub(crate) fn parse<T, E: std::fmt::Display>(
    what: &'static str,
    raw: &str,
    f: impl FnOnce(&str) -> Result<T, E>,
) -> Result<T, OperatorError> {
    f(raw).map_err(|e| OperatorError::Invalid {
        what,
        raw: raw.to_owned(),
        reason: e.to_string(),
    })
}

/// A command's result as its output: pretty JSON and a line end.
pub(crate) fn print(value: &impl Serialize) -> Result<String, OperatorError> {
    let mut text = serde_json::to_string_pretty(value)?;
    text.push('\n');
    Ok(text)
}

/// Runs an operator command; its output is what the binary prints.
pub async fn run(command: Command, target: &Target<'_>) -> Result<String, OperatorError> {
    let store = target.store;
    let base = target.files_base;
    match command {
        Command::Project(ProjectCommand::Create { slug, name }) => {
            let slug = parse("slug", &slug, ProjectSlug::parse)?;
            let name = parse("project name", &name, ProjectName::parse)?;
            print(&store.create_project(&slug, &name, base).await?)
        }
        Command::Project(ProjectCommand::List) => print(&store.list_projects().await?),
        Command::Project(ProjectCommand::Show { slug }) => print(
            &store
                .project(&parse("slug", &slug, ProjectSlug::parse)?)
                .await?,
        ),
        Command::Member(MemberCommand::Add {
            project,
            user,
            role,
        }) => {
            let project = parse("slug", &project, ProjectSlug::parse)?;
            let user = parse("user id", &user, UserId::parse)?;
            let role: MemberRole = parse("role", &role, str::parse)?;
            let (member, change) = store.set_member(&project, &user, role).await?;
            print(&serde_json::json!({ "member": member, "change": change }))
        }
        Command::Member(MemberCommand::Remove { project, user }) => {
            let project = parse("slug", &project, ProjectSlug::parse)?;
            let user = parse("user id", &user, UserId::parse)?;
            store.remove_member(&project, &user).await?;
            print(&serde_json::json!({ "removed": user }))
        }
        Command::Mount(MountCommand::Add(args)) => {
            let project = parse("slug", &args.project, ProjectSlug::parse)?;
            let name = parse("mount name", &args.name, MountName::parse)?;
            let root = args
                .root
                .as_deref()
                .map(|r| parse("root", r, AbsPath::parse))
                .transpose()?;
            let (mount, change) = store
                .set_mount(&project, &name, root.as_ref(), !args.read_only, base)
                .await?;
            print(&serde_json::json!({ "mount": mount, "change": change }))
        }
        Command::Agent(AgentCommand::Mount { agent, project }) => {
            let agent = parse("agent name", &agent, AgentName::parse)?;
            let project = parse("slug", &project, ProjectSlug::parse)?;
            print(&store.mount_agent(&agent, &project).await?)
        }
        Command::Agent(AgentCommand::Unmount { agent }) => {
            let agent = parse("agent name", &agent, AgentName::parse)?;
            print(&store.unmount_agent(&agent).await?)
        }
        Command::Agent(AgentCommand::List) => print(&store.list_agents().await?),
        Command::Events(command) => events(command, target).await,
        Command::KillSwitch(command) => kill_switch(command, target).await,
        Command::Approvals(command) => approvals::run(command, target).await,
        Command::ApprovalPolicy(command) => approvals::policy(command, target).await,
        Command::Member(MemberCommand::Name { acting, user, name }) => {
            let member = parse("user id", &user, UserId::parse)?;
            let journal = journal(target)?;
            let op = acting.operator(&journal).await?;
            print(
                &op.set_member_name(&member, Some(name))
                    .await
                    .map_err(failed)?,
            )
        }
        Command::Meta(MetaCommand::Set {
            acting,
            status,
            description,
            start_date,
            end_date,
            time_zone,
        }) => {
            let input = MetaInput {
                status: status
                    .as_deref()
                    .map(|s| parse("status", s, str::parse))
                    .transpose()?,
                description,
                start_date: date("start date", start_date.as_deref())?,
                end_date: date("end date", end_date.as_deref())?,
                time_zone,
            };
            let journal = journal(target)?;
            let op = acting.operator(&journal).await?;
            print(&op.set_meta(&input).await.map_err(failed)?)
        }
        Command::Milestone(MilestoneCommand::Set {
            acting,
            seq,
            title,
            due_date,
            status,
            criteria,
        }) => {
            let input = MilestoneInput {
                title,
                due_date: date("due date", due_date.as_deref())?,
                status: parse("status", &status, str::parse)?,
                acceptance_criteria: criteria,
            };
            let journal = journal(target)?;
            let op = acting.operator(&journal).await?;
            print(&op.set_milestone(seq, &input).await.map_err(failed)?)
        }
        Command::Report(command) => report(command, target).await,
        Command::Meeting(command) => meeting(command, target).await,
        Command::Import { project, by, file } => {
            let project = parse("slug", &project, ProjectSlug::parse)?;
            let by = parse("user id", &by, UserId::parse)?;
            let journal = journal(target)?;
            print(&crate::import::run(&journal, &project, by, &file).await?)
        }
    }
}

async fn events(command: EventsCommand, target: &Target<'_>) -> Result<String, OperatorError> {
    let store = target.store;
    match command {
        EventsCommand::List {
            project,
            agent,
            status,
            limit,
            before,
            human,
        } => {
            if !(1..=500).contains(&limit) {
                return Err(OperatorError::Usage(
                    "--limit must be between 1 and 500".to_owned(),
                ));
            }
            let filter = acdm_store::EventFilter {
                project: project
                    .as_deref()
                    .map(|p| parse("slug", p, ProjectSlug::parse))
                    .transpose()?,
                agent: agent
                    .as_deref()
                    .map(|a| parse("agent name", a, AgentName::parse))
                    .transpose()?,
                status: status
                    .as_deref()
                    .map(|s| parse("status", s, str::parse))
                    .transpose()?,
                before: before
                    .as_deref()
                    .map(|b| parse("event id", b, str::parse))
                    .transpose()?,
                limit,
                ..acdm_store::EventFilter::default()
            };
            let events = store.list_events(&filter).await?;
            let next_before = (events.len() == limit as usize)
                .then(|| events.last().map(|e| e.id))
                .flatten();
            if human {
                return Ok(events_table(&events, next_before));
            }
            print(&serde_json::json!({ "events": events, "next_before": next_before }))
        }
        EventsCommand::Show { id } => {
            let id = resolve_event(store, &id).await?;
            print(&store.event(id).await?)
        }
        EventsCommand::Revert { id, user } => {
            let id = resolve_event(store, &id).await?;
            let user = parse("user id", &user, UserId::parse)?;
            let journal = journal(target)?;
            let revert = journal
                .revert(&Actor::direct(user), id, None)
                .await
                .map_err(|error| OperatorError::Revert { id, error })?;
            print(&serde_json::json!({ "revert": revert, "reverted": id }))
        }
        EventsCommand::Reconcile => {
            let journal = journal(target)?;
            print(&journal.reconcile(chrono::Utc::now()).await?)
        }
    }
}

/// The event an operator names by its id or a unique prefix of it.
async fn resolve_event(store: &Store, raw: &str) -> Result<EventId, OperatorError> {
    let reference: EventRef = parse("event id", raw, str::parse)?;
    Ok(store.resolve_event(&reference).await?)
}

/// Text from the database with control characters escaped, so a name
/// cannot drive the terminal.
fn clean(text: &str) -> String {
    text.chars()
        .flat_map(|c| {
            if c.is_control() {
                c.escape_default().collect::<Vec<_>>()
            } else {
                vec![c]
            }
        })
        .collect()
}

/// `events list --human`: one row per event (the id shortened to 8
/// characters, which `show` and `revert` accept), then how to page on.
fn events_table(events: &[StorageEvent], next_before: Option<EventId>) -> String {
    use std::fmt::Write as _;
    if events.is_empty() {
        return "(no storage events)\n".to_owned();
    }
    let header = [
        "ID",
        "CREATED (UTC)",
        "STATUS",
        "OP",
        "PROJECT",
        "BY",
        "TARGET",
    ];
    let rows: Vec<[String; 7]> = events
        .iter()
        .map(|e| {
            let id = e.id.to_string();
            let by = match (&e.actor.user_id, &e.actor.agent_name) {
                (Some(user), Some(agent)) => format!("{user} via {agent}"),
                (Some(user), None) => user.to_string(),
                (None, Some(agent)) => agent.to_string(),
                (None, None) => e.actor.kind.to_string(),
            };
            [
                id.get(..8).unwrap_or(&id).to_owned(),
                e.created_at.format("%Y-%m-%d %H:%M:%S").to_string(),
                e.status.to_string(),
                e.op.to_string(),
                e.project.to_string(),
                clean(&by),
                clean(&e.target),
            ]
        })
        .collect();
    let mut widths = header.map(|h| h.chars().count());
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: &[&str]| {
        let mut text = String::new();
        for (cell, width) in cells.iter().zip(widths) {
            let _ = write!(text, "{cell:<width$}  ");
        }
        out.push_str(text.trim_end());
        out.push('\n');
    };
    line(&header);
    for row in &rows {
        line(&row.each_ref().map(String::as_str));
    }
    if let Some(before) = next_before {
        let _ = writeln!(out, "more: events list --before {before}");
    }
    out
}

/// The journal over the configured file store.
fn journal(target: &Target<'_>) -> Result<Journal, OperatorError> {
    let files = (target.files)().map_err(OperatorError::Sources)?;
    Ok(Journal::new(
        target.store.clone(),
        files,
        target.files_base.clone(),
    ))
}

async fn kill_switch(
    command: KillSwitchCommand,
    target: &Target<'_>,
) -> Result<String, OperatorError> {
    let store = target.store;
    let switch = KillSwitch::new(target.nc_writes_enabled);
    let (enabled, reason, user) = match command {
        KillSwitchCommand::Show => {
            let row = switch.refresh(store).await?;
            return print(&switch.report(row));
        }
        KillSwitchCommand::Off { reason, user } => (false, reason, user),
        KillSwitchCommand::On { reason, user } => (true, reason, user),
    };
    if enabled && !target.nc_writes_enabled {
        return Err(OperatorError::Usage(
            "ACDM_AI_NC_WRITES_ENABLED=false in this environment; writes can only be enabled there"
                .to_owned(),
        ));
    }
    let user = user
        .as_deref()
        .map(|u| parse("user id", u, UserId::parse))
        .transpose()?;
    store
        .set_switch(
            acdm_store::NC_WRITES_SWITCH,
            enabled,
            user.as_ref().map(UserId::as_str),
            reason.as_deref(),
        )
        .await?;
    let row = switch.refresh(store).await?;
    let within = target.scope_poll_interval;
    print(&SwitchChange {
        report: switch.report(row),
        running_servers_follow_within_ms: u64::try_from(within.as_millis()).unwrap_or(u64::MAX),
        takes_effect: format!(
            "saved in the database; running servers apply it at their next read of the switch, within {} ms (ACDM_SCOPE_POLL_MILLIS as configured here), and keep the previous setting until then. `PUT /admin/kill-switch` applies at once on the server that answers it.",
            within.as_millis()
        ),
    })
}

/// What `kill-switch on|off` prints: the switch, and when running servers
/// follow it (the CLI writes the database; servers poll it).
#[derive(Serialize)]
struct SwitchChange {
    #[serde(flatten)]
    report: acdm_bff::switch::SwitchReport,
    running_servers_follow_within_ms: u64,
    takes_effect: String,
}

impl Acting {
    /// The operator acting on the project.
    async fn operator<'a>(&self, journal: &'a Journal) -> Result<Operator<'a>, OperatorError> {
        let slug = parse("slug", &self.project, ProjectSlug::parse)?;
        let user = parse("user id", &self.by, UserId::parse)?;
        let project = journal.store().project(&slug).await?.project.to_ref();
        Ok(Operator::new(journal, project, user))
    }
}

/// A refused business write, as the operator reads it (the envelope's
/// message names the fields).
pub(crate) fn failed(failure: Failure) -> OperatorError {
    let envelope = failure.envelope();
    OperatorError::Refused {
        code: envelope.error_code().map_or("error", |c| c.as_str()),
        message: envelope.message().to_owned(),
    }
}

fn date(what: &'static str, raw: Option<&str>) -> Result<Option<NaiveDate>, OperatorError> {
    raw.map(|d| parse(what, d, |s| s.parse::<NaiveDate>()))
        .transpose()
}

fn time(what: &'static str, raw: &str) -> Result<DateTime<FixedOffset>, OperatorError> {
    parse(what, raw, DateTime::parse_from_rfc3339)
}

impl ReportArgs {
    fn input(self) -> Result<ReportInput, OperatorError> {
        Ok(ReportInput {
            title: self.title,
            kind: parse("kind", &self.kind, str::parse)?,
            period_start: parse("period start", &self.period_start, str::parse)?,
            period_end: parse("period end", &self.period_end, str::parse)?,
            body: self.body,
            status: self
                .status
                .as_deref()
                .map(|s| parse("status", s, str::parse))
                .transpose()?,
        })
    }
}

impl MeetingArgs {
    fn input(self) -> Result<MeetingInput, OperatorError> {
        Ok(MeetingInput {
            title: self.title,
            starts_at: time("start", &self.starts_at)?,
            ends_at: time("end", &self.ends_at)?,
            location: self.location,
            agenda: self.agenda,
            notes: self.notes,
            attendees: self
                .attendees
                .iter()
                .map(|a| parse("attendee", a, UserId::parse))
                .collect::<Result<_, _>>()?,
        })
    }
}

async fn report(command: ReportCommand, target: &Target<'_>) -> Result<String, OperatorError> {
    let journal = journal(target)?;
    match command {
        ReportCommand::Create { acting, report } => {
            let input = report.input()?;
            let op = acting.operator(&journal).await?;
            print(
                &op.create_report(ReportId::new_random(), &input)
                    .await
                    .map_err(failed)?,
            )
        }
        ReportCommand::Update {
            acting,
            id,
            if_version,
            report,
        } => {
            let id: ReportId = parse("report id", &id, str::parse)?;
            let input = report.input()?;
            let op = acting.operator(&journal).await?;
            print(
                &op.update_report(id, &input, if_version)
                    .await
                    .map_err(failed)?,
            )
        }
    }
}

async fn meeting(command: MeetingCommand, target: &Target<'_>) -> Result<String, OperatorError> {
    let journal = journal(target)?;
    match command {
        MeetingCommand::Create { acting, meeting } => {
            let input = meeting.input()?;
            let op = acting.operator(&journal).await?;
            print(
                &op.create_meeting(MeetingId::new_random(), &input)
                    .await
                    .map_err(failed)?,
            )
        }
        MeetingCommand::Update {
            acting,
            id,
            if_version,
            meeting,
        } => {
            let id: MeetingId = parse("meeting id", &id, str::parse)?;
            let input = meeting.input()?;
            let op = acting.operator(&journal).await?;
            print(
                &op.update_meeting(id, &input, if_version)
                    .await
                    .map_err(failed)?,
            )
        }
        MeetingCommand::Attach {
            acting,
            id,
            file,
            name,
        } => {
            let id: MeetingId = parse("meeting id", &id, str::parse)?;
            let name = match name {
                Some(name) => name,
                None => file
                    .file_name()
                    .and_then(|n| n.to_str())
                    .ok_or_else(|| {
                        OperatorError::Usage(
                            "the file has no name; give one with --name".to_owned(),
                        )
                    })?
                    .to_owned(),
            };
            let content = std::fs::read_to_string(&file).map_err(|error| OperatorError::Read {
                file: file.display().to_string(),
                error,
            })?;
            let op = acting.operator(&journal).await?;
            print(
                &op.attach(id, FileId::new_random(), &AttachmentInput { name, content })
                    .await
                    .map_err(failed)?,
            )
        }
    }
}
