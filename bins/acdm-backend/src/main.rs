//! `acdm-backend`: parse the command line, load the configuration, set up
//! logging, run the command.

use std::process::ExitCode;

use acdm_backend::app::{Application, shutdown_signal};
use acdm_backend::cli::{Cli, Command};
use acdm_backend::config::Config;
use acdm_backend::telemetry;
use clap::Parser;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let config = match Config::load(cli.config.as_deref()) {
        Ok(config) => config,
        Err(error) => {
            #[allow(
                clippy::print_stderr,
                reason = "logging is not set up without a valid config"
            )]
            {
                eprint!("{error}");
            }
            return ExitCode::from(2);
        }
    };
    let command = cli.command.unwrap_or(Command::Serve);
    let serving = matches!(command, Command::Serve);
    telemetry::init(&config.log, if serving { "info" } else { "warn" });
    let result = match command {
        Command::Serve => serve(&config).await,
        other => acdm_backend::cli::run_operator(other, &config).await,
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!(error = format!("{error:#}"), "failed");
            #[allow(
                clippy::print_stderr,
                reason = "the error must reach the operator even with logs filtered"
            )]
            {
                eprintln!("error: {error:#}");
            }
            ExitCode::FAILURE
        }
    }
}

async fn serve(config: &Config) -> anyhow::Result<()> {
    let app = Application::build(config).await?;
    let address = app.local_addr()?;
    tracing::info!(
        address = %address,
        database = %config.database.target.describe(),
        "acdm-backend listening on http://{address}"
    );
    if config.service_token.is_none() {
        tracing::warn!(
            "ACDM_MCP_SERVICE_TOKEN is not set: every /mcp and /agent-tools request is refused"
        );
    }
    if config.admin_token.is_none() {
        tracing::info!("ACDM_ADMIN_TOKEN is not set: the operator API at /admin is disabled");
    }
    let token = app.shutdown_token();
    tokio::spawn(async move {
        shutdown_signal().await;
        token.cancel();
    });
    app.run_until_stopped().await
}
