//! The command line: `serve`, `demo`, `migrate`, `check-config`, and the
//! operator commands of spec §9 (declared and run by `acdm-operator`),
//! which work on the configured database directly (running servers see
//! agent changes through the scope epoch within `ACDM_SCOPE_POLL_MILLIS`).

use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};

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
#[expect(
    clippy::large_enum_variant,
    reason = "one value, parsed once per process"
)]
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
    /// Turn one document into text (the server runs this itself, in a
    /// child process per document): a JSON header line and the bytes on
    /// standard input, one JSON answer on standard output.
    #[command(hide = true)]
    Extract,
    /// The operator commands.
    #[command(flatten)]
    Operator(acdm_operator::commands::Command),
}

#[expect(
    clippy::print_stdout,
    reason = "command results are the command's output"
)]
fn print(text: &str) {
    print!("{text}");
}

fn json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    print(&format!("{}\n", serde_json::to_string_pretty(value)?));
    Ok(())
}

/// Runs an operator command (everything but `serve` and `demo`).
pub async fn run_operator(command: Command, config: &Config) -> anyhow::Result<()> {
    match command {
        Command::Serve | Command::Demo | Command::Extract => {
            anyhow::bail!("serve, demo and extract are not operator commands")
        }
        Command::CheckConfig => {
            let store = acdm_store::Store::connect(&config.database())
                .await
                .with_context(|| {
                    format!(
                        "cannot open the database ({})",
                        config.database().target.describe()
                    )
                })?;
            let migrations = store.migration_status().await?;
            store.close().await;
            json(&serde_json::json!({
                "valid": true,
                "settings": config.redacted(),
                "database": { "reachable": true, "migrations": migrations },
            }))
        }
        Command::Migrate => {
            let store = acdm_store::Store::connect(&config.database()).await?;
            store.migrate().await.context("cannot apply migrations")?;
            let status = store.migration_status().await?;
            store.close().await;
            json(&status)
        }
        Command::Operator(command) => {
            let store = open_store(config).await?;
            let files = || {
                crate::app::build_sources(config)
                    .map(|sources| sources.files)
                    .map_err(|error| format!("{error:#}"))
            };
            let target = acdm_operator::commands::Target {
                store: &store,
                files_base: &config.files_base,
                nc_writes_enabled: config.nc_writes_enabled,
                approval_policy: config.approval_required_ops.clone(),
                scope_poll_interval: config.scope_poll_interval,
                files: &files,
            };
            let result = acdm_operator::commands::run(command, &target).await;
            store.close().await;
            print(&result?);
            Ok(())
        }
    }
}
