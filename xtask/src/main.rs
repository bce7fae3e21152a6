//! `cargo xtask`: the single home of the project's automation.
//!
//! Written in Rust so it runs wherever cargo does, with no shell scripts or
//! extra tools. Each subcommand lives in its own module:
//!
//! - `tidy`: the architecture checks (module [`tidy`]), also run by
//!   `cargo test -p xtask`;
//! - `bench`: speed and memory measurements (module [`bench`]);
//! - `cluster`: the production shape on loopback, and the cluster suite
//!   against it (module [`cluster`]);
//! - `integration`: real MCP clients against a running service (module
//!   [`integration`]);
//! - `fuzz-api`: schemathesis against the built binary (module [`fuzz`]);
//! - `setup`: the external programs the tests run against (module [`setup`]);
//! - `test`: the project's whole test suite (module [`suite`]).
//!
//! This file only parses the command line and dispatches.

#![expect(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "xtask is a command-line tool: printing its report is its job"
)]

mod bench;
mod builds;
mod cluster;
mod fuzz;
mod integration;
mod metadata;
mod setup;
mod suite;
mod tidy;

use std::process::ExitCode;

/// The usage text for `cargo xtask help`, no arguments, or a bad command.
const USAGE: &str = "\
Usage: cargo xtask <command> [args]

Commands:
  tidy             Run the architecture checks (crate edges, forbidden dependencies,
                   env reads, module docs, workspace lints, architecture doc)
  bench [SUITE]    Run the benchmarks (release, loopback): sources, mcp, bff
  bench http [--database postgres://USER@HOST:PORT] [--seconds N] [--concurrency 16,32,64]
                   The release binary against an nginx upstream, next to an nginx
                   one-hop proxy (the floor), driven by wrk; SQLite unless --database
  cluster [N] [--release]
                   Start PostgreSQL, N replicas of the service (3 by default; the test
                   suite's build, or the release binary), nginx with deploy/nginx.conf
                   and a WebDAV server on loopback; Ctrl-C stops all
  cluster test [N] [--release]
                   Run the cluster suite against such a cluster (N = 3 by default)
  integration      Run the MCP Python and TypeScript SDKs and the conformance
                   suite against a running `acdm-backend demo`
  fuzz-api         Run schemathesis (every check, all phases) against a running
                   `acdm-backend demo` through its /openapi.json
  setup            Install the test tools (pinned wsgidav and MCP Python SDK) into .test-tools/,
                   and, as root, Debian's nginx, its WebDAV module and wrk (the cluster,
                   `bench http`) and chromium (the console tests)
  test [-- ARGS]   Install the test tools if possible, then run the whole test suite:
                   nextest (or cargo test) and doctests; ARGS go to the test runner
  help             Show this message
";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|arg| arg.to_string_lossy().into_owned())
        .collect();
    let Some((command, rest)) = args.split_first() else {
        print!("{USAGE}");
        return ExitCode::SUCCESS;
    };
    match command.as_str() {
        "tidy" => tidy::main(rest),
        "bench" => bench::main(rest),
        "cluster" => cluster::main(rest),
        "integration" => integration::main(rest),
        "fuzz-api" => fuzz::main(rest),
        "setup" => setup::main(rest),
        "test" => suite::main(rest),
        "help" | "-h" | "--help" => {
            print!("{USAGE}");
            ExitCode::SUCCESS
        }
        other => usage_error(&format!("unknown command `{other}`")),
    }
}

/// Reports a command-line mistake with the usage text; exits with status 2.
pub(crate) fn usage_error(message: &str) -> ExitCode {
    eprintln!("error: {message}\n\n{USAGE}");
    ExitCode::from(2)
}
