//! `acdm-backend`: parse the command line, load the configuration, set up
//! logging, run the command.

use std::process::ExitCode;

use acdm_backend::cli::{Cli, Command};
use acdm_backend::config::Config;
use acdm_backend::telemetry;
use clap::Parser;

/// mimalloc instead of the system allocator: the hot path allocates per
/// request (headers, JSON, the window), and glibc's malloc was a tenth of
/// its CPU (docs/performance.md). Built without transparent huge pages
/// (`no_thp`): with them an idle service held 30 MB instead of 18.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let config = match Config::load(cli.config.as_deref()) {
        Ok(config) => config,
        Err(error) => {
            #[expect(
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
    let serving = matches!(command, Command::Serve | Command::Demo);
    // Dropped when `main` returns: writes the last log lines.
    let _log = telemetry::init(&config.log(), if serving { "info" } else { "warn" });
    let result = match command {
        Command::Serve => acdm_backend::app::serve(&config, |_| {}).await,
        Command::Demo => acdm_backend::demo::run(&config).await,
        other => acdm_backend::cli::run_operator(other, &config).await,
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // Said once: a server's failure is a line of its log (where its
        // other lines go); a command's is one plain message for the
        // operator who typed it.
        Err(error) if serving => {
            tracing::error!(error = format!("{error:#}"), "failed");
            ExitCode::FAILURE
        }
        Err(error) => {
            #[expect(
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
