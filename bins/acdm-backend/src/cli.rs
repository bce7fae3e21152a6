//! The command line: `serve` and the operator commands of spec §9, which
//! work on the configured database directly (running servers see agent
//! changes through the scope epoch within `ACDM_SCOPE_POLL_MILLIS`).

use std::path::PathBuf;

use acdm_core::domain::MemberRole;
use acdm_core::{AbsPath, AgentName, MountName, ProjectName, ProjectSlug, UserId};
use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use serde::Serialize;

use crate::app::open_store;
use crate::config::Config;

/// acdm-backend: the Knowledge MCP server and Agent Tools BFF of a-cdm.
#[derive(Debug, Parser)]
#[command(version, about, long_about = None)]
pub struct Cli {
    /// A TOML file with settings (same names as the environment variables;
    /// the environment wins). See docs/config.md.
    #[arg(long, global = true, env = "ACDM_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// What to do (default: serve).
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the HTTP server until SIGINT or SIGTERM.
    Serve,
    /// Provision a sample project, agent, wiki and files in the local
    /// folders, print tokens and example calls, and serve.
    Demo,
    /// Apply pending database migrations and exit.
    Migrate,
    /// Validate the configuration, print it with secrets redacted, and check
    /// the database connection.
    CheckConfig,
    /// Create, list and show projects.
    #[command(subcommand)]
    Project(ProjectCommand),
    /// Add, change and remove project members.
    #[command(subcommand)]
    Member(MemberCommand),
    /// Add or change a project's mounts (folders in the file store).
    #[command(subcommand)]
    Mount(MountCommand),
    /// Mount and unmount agents as project managers.
    #[command(subcommand)]
    Agent(AgentCommand),
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

fn parse<T, E: std::fmt::Display>(
    what: &str,
    raw: &str,
    f: impl FnOnce(&str) -> Result<T, E>,
) -> anyhow::Result<T> {
    f(raw).map_err(|e| anyhow::anyhow!("invalid {what} `{raw}`: {e}"))
}

#[allow(
    clippy::print_stdout,
    reason = "command results are the command's output"
)]
fn print(value: &impl Serialize) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

/// Runs an operator command (everything but `serve`).
pub async fn run_operator(command: Command, config: &Config) -> anyhow::Result<()> {
    match command {
        Command::Serve | Command::Demo => anyhow::bail!("serve and demo are not operator commands"),
        Command::CheckConfig => {
            let store = acdm_store::Store::connect(&config.database)
                .await
                .with_context(|| {
                    format!(
                        "cannot open the database ({})",
                        config.database.target.describe()
                    )
                })?;
            let migrations = store.migration_status().await?;
            store.close().await;
            print(&serde_json::json!({
                "valid": true,
                "settings": config.redacted(),
                "database": { "reachable": true, "migrations": migrations },
            }))
        }
        Command::Migrate => {
            let store = acdm_store::Store::connect(&config.database).await?;
            store.migrate().await.context("cannot apply migrations")?;
            let status = store.migration_status().await?;
            store.close().await;
            print(&status)
        }
        other => {
            let store = open_store(config).await?;
            let result = provision(other, config, &store).await;
            store.close().await;
            result
        }
    }
}

async fn provision(
    command: Command,
    config: &Config,
    store: &acdm_store::Store,
) -> anyhow::Result<()> {
    let base = &config.files_base;
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
        Command::Serve | Command::Demo | Command::Migrate | Command::CheckConfig => {
            anyhow::bail!("not a provisioning command")
        }
    }
}
