//! `acdm-backend`: parse the command line, load the configuration, set up
//! logging, run the command.

use std::ffi::OsString;
use std::process::ExitCode;

use acdm_backend::cli::{Cli, Command};
use acdm_backend::config::Config;
use acdm_server::telemetry;
use clap::Parser;

/// mimalloc instead of the system allocator: the hot path allocates per
/// request (headers, JSON, the window), and glibc's malloc was a tenth of
/// its CPU (docs/performance.md). Built without transparent huge pages
/// (`no_thp`): with them an idle service held 30 MB instead of 18.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    // A document extraction child: no configuration, no logging, no
    // runtime; bytes in on standard input, the text out on standard output,
    // under limits it sets on itself first.
    if matches!(cli.command, Some(Command::Extract)) {
        return acdm_extract::child_main();
    }
    match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime.block_on(run(cli)),
        Err(error) => {
            #[expect(
                clippy::print_stderr,
                reason = "logging is not set up without a runtime"
            )]
            {
                eprintln!("error: cannot start the async runtime: {error}");
            }
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> ExitCode {
    #[expect(
        clippy::disallowed_methods,
        reason = "the binary is the one place the service reads its environment"
    )]
    let environment: Vec<(OsString, OsString)> = std::env::vars_os().collect();
    // A misspelled setting would otherwise be ignored without a word; it
    // is said with a configuration error (often why a required one is
    // missing) or, once logging is set up, in the log.
    let unknown = acdm_backend::config::unknown_variables(
        environment.iter().filter_map(|(name, _)| name.to_str()),
    );
    let config = match Config::load_from(cli.config.as_deref(), environment.iter().cloned()) {
        Ok(config) => config,
        Err(error) => {
            #[expect(
                clippy::print_stderr,
                reason = "logging is not set up without a valid config"
            )]
            {
                eprint!("{error}");
                for unknown in &unknown {
                    eprintln!("warning: {unknown}");
                }
            }
            return ExitCode::from(2);
        }
    };
    let command = cli.command.unwrap_or(Command::Serve);
    let serving = matches!(command, Command::Serve | Command::Demo);
    // RUST_LOG: the log filter's conventional fallback.
    let rust_log = environment
        .iter()
        .find(|(name, _)| name == "RUST_LOG")
        .and_then(|(_, value)| value.clone().into_string().ok());
    // Dropped when `main` returns: writes the last log lines.
    let _log = telemetry::init(&config.log(rust_log), if serving { "info" } else { "warn" });
    for unknown in &unknown {
        tracing::warn!(
            variable = unknown.name,
            closest = unknown.closest,
            "{unknown}"
        );
    }
    let result = match command {
        Command::Serve => acdm_backend::app::serve(&config, |_| {}).await,
        Command::Demo => acdm_backend::demo::run(&config).await,
        Command::Extract => Ok(()),
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
