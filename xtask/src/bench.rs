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
//! - `search`: the content index over a generated corpus of 10,000 project
//!   files (one in ten a real document: docx, xlsx, pptx, odt, pdf, html)
//!   in the local file store, through the service's knowledge layer: the
//!   first build's time and the index's size, a refresh with nothing
//!   changed and one with 1 % changed (time, listings, downloads), query
//!   p50/p99 and the process's resident memory (`--docs`, `--queries`
//!   after `--`).
//! - `http`: the release binary on loopback against a real upstream
//!   (Debian's nginx serving GitLab's and Nextcloud's wire formats), next
//!   to an nginx one-hop proxy as the floor, driven by wrk at C=16, 32,
//!   64, 256 and 1024 (the last two for half the seconds): req/s, p50,
//!   p99 and the ratio to the floor of the service's hot path, the CPU the
//!   service used (cores busy and µs per answer), its resident memory, and
//!   at the end each scenario's req/s at every level as a share of its
//!   C=64 figure. On SQLite, or with `--database postgres://…` on a
//!   PostgreSQL database of its own; `--upstream-cap 32,1024` runs it all
//!   once per `ACDM_UPSTREAM_MAX_CONNECTIONS`, so the cap's cost shows
//!   (`--concurrency`, `--only`, `--seconds`, `--set KEY=VALUE`: see
//!   `acdm-cluster bench`). Not part of
//!   `cargo xtask bench` without a suite name: it needs nginx, its WebDAV
//!   module and wrk (`cargo xtask setup` installs them as root) and builds
//!   the release binary. Like `cargo xtask cluster`, this module only
//!   prepares and then replaces itself with the `acdm-cluster` harness
//!   (`tests/cluster`, its `bench` module), which runs everything.

use std::os::unix::process::CommandExt as _;
use std::process::{Command, ExitCode};

use crate::builds::Build;
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
    (
        "search",
        &["bench", "-p", "acdm-backend", "--bench", "search"],
    ),
];

/// Entry point for `cargo xtask bench [suite]` and `cargo xtask bench http [ARGS]`.
pub(crate) fn main(args: &[String]) -> ExitCode {
    if let Some((first, rest)) = args.split_first()
        && first == "http"
    {
        return http(rest);
    }
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

/// `cargo xtask bench http [ARGS]`: installs nginx, its WebDAV module and
/// wrk (as root), checks psql for PostgreSQL, builds the release backend
/// and the harness, then becomes the harness's `bench` (ARGS go to it).
fn http(args: &[String]) -> ExitCode {
    let root = workspace_root();
    // Every argument is the harness's; a `--` (as `cluster` takes) is allowed.
    let args: Vec<&String> = args.iter().filter(|a| *a != "--").collect();
    let postgres = args
        .iter()
        .any(|a| a.starts_with("postgres://") || a.starts_with("postgresql://"));
    let prepared = crate::setup::install_debian(&crate::setup::BENCH_PACKAGES).and_then(|()| {
        if postgres {
            crate::cluster::require_psql()?;
        }
        crate::builds::binaries(&root, Build::Release, &["acdm-backend", "acdm-cluster"])
    });
    match prepared {
        Ok(folder) => {
            let (backend, harness) = (folder.join("acdm-backend"), folder.join("acdm-cluster"));
            let work = crate::builds::target_dir(&root).join("bench-http");
            let error = Command::new(harness)
                .arg("bench")
                .arg("--backend")
                .arg(backend)
                .arg("--work")
                .arg(work)
                .args(args)
                .exec();
            eprintln!("xtask bench http: cannot start the harness: {error}");
            ExitCode::FAILURE
        }
        Err(error) => {
            eprintln!("xtask bench http: {error}");
            ExitCode::FAILURE
        }
    }
}
