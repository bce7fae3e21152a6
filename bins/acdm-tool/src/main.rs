//! `acdm-tool`: a command line over acdm-harness-client, for operators and
//! scripts. It calls the Agent Tools BFF exactly as the agent engine does
//! (service token and the three identity headers) and prints the
//! ToolResponse — JSON, or a readable rendering with `--human`. Exit status:
//! 0 when `success` is true, 1 for a failure envelope, 2 for a usage error.
//!
//! ```sh
//! export ACDM_MCP_SERVICE_TOKEN=…   # only ever from the environment
//! acdm-tool nc read notes/plan.md --agent project-alpha --user u1 --thread t1
//! ```

mod cli;
mod human;
mod run;

use std::process::ExitCode;

use clap::Parser;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    run::run(cli::Cli::parse()).await
}
