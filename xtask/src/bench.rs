//! `cargo xtask bench <suite>`: speed and memory measurements, in release
//! builds, on loopback. Numbers go to standard output; nothing is asserted
//! on time (timed assertions belong here, not in the test suite).
//!
//! - `sources`: a 1 GiB file read in 1 MiB windows through every file store.
//! - `mcp`: `tools/call` throughput and p50/p99 latency per tool through the
//!   whole service at a fixed concurrency, next to the health routes as a
//!   floor (`ACDM_BENCH_CONCURRENCY`, `ACDM_BENCH_SECONDS`).
//! - `bff`: the Agent Tools BFF's nc, business and project reads on a
//!   realistic project, `get_meeting` against a small nc `read` and the
//!   project `overview` against `list_mounts`, on SQLite and, with
//!   `ACDM_BENCH_DATABASE_URL`, on PostgreSQL in the same run.

use std::process::ExitCode;

use crate::metadata::cargo_command;
use crate::tidy::workspace_root;

/// The suites: name, cargo arguments.
const SUITES: &[(&str, &[&str])] = &[
    (
        "sources",
        &["bench", "-p", "acdm-sources", "--bench", "windows"],
    ),
    ("mcp", &["bench", "-p", "acdm-backend", "--bench", "mcp"]),
    ("bff", &["bench", "-p", "acdm-backend", "--bench", "bff"]),
];

/// Entry point for `cargo xtask bench [suite]`.
pub(crate) fn main(args: &[String]) -> ExitCode {
    let root = workspace_root();
    let selected: Vec<&(&str, &[&str])> = match args {
        [] => SUITES.iter().collect(),
        [name] => match SUITES.iter().find(|(n, _)| n == name) {
            Some(suite) => vec![suite],
            None => return crate::usage_error(&format!("unknown bench suite `{name}`")),
        },
        _ => return crate::usage_error("`bench` takes at most one suite name"),
    };
    if let Err(error) = crate::setup::install(&root) {
        eprintln!(
            "xtask bench: test tools not installed ({error}); the WebDAV measurement is left out"
        );
    }
    let mut failed = false;
    for (name, cargo_args) in selected {
        println!("$ cargo {}   # {name}", cargo_args.join(" "));
        let ok = cargo_command()
            .args(*cargo_args)
            .current_dir(&root)
            .status()
            .is_ok_and(|s| s.success());
        failed |= !ok;
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
