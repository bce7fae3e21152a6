//! `cargo xtask cluster [N]` and `cargo xtask cluster test [N]`: the
//! production shape — PostgreSQL, N replicas of the release binary, nginx
//! with `deploy/nginx.conf`, the real WebDAV server — on loopback.
//!
//! This module only prepares: it installs the test tools (`setup`: wsgidav,
//! the MCP Python SDK and nginx), checks that psql is there, builds
//! the release backend and the `acdm-cluster` harness, then replaces
//! itself with the harness (`exec`), which owns every child process and
//! stops them all on Ctrl-C. The harness and the suite live in
//! `tests/cluster` (crate `acdm-cluster`).
//!
//! - `cargo xtask cluster [N]`: start N replicas (3 by default), print the
//!   addresses, run until Ctrl-C.
//! - `cargo xtask cluster test [N]`: the cluster suite against N replicas
//!   (3 by default); prints its figures; exits 1 if a check failed.
//!
//! Arguments after `--` go to the harness (`--set KEY=VALUE` gives every
//! replica a setting; `--postgres URL` another PostgreSQL server).

use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

use crate::metadata::cargo_command;
use crate::tidy::workspace_root;

/// Replicas when `N` is not given: the cluster suite's figure.
const DEFAULT_REPLICAS: usize = 3;

/// Entry point for `cargo xtask cluster [test] [N] [-- ARGS]`.
pub(crate) fn main(args: &[String]) -> ExitCode {
    let (ours, passed) = match args.iter().position(|a| a == "--") {
        Some(at) => (
            args.get(..at).unwrap_or_default(),
            args.get(at + 1..).unwrap_or_default(),
        ),
        None => (args, &[][..]),
    };
    let (mode, rest) = match ours.split_first() {
        Some((first, rest)) if first == "test" => ("test", rest),
        _ => ("up", ours),
    };
    let replicas = match rest {
        [] => DEFAULT_REPLICAS,
        [n] => match n.parse::<usize>() {
            Ok(n) if n >= 1 => n,
            _ => return crate::usage_error(&format!("`{n}` is not a number of replicas")),
        },
        _ => return crate::usage_error("`cluster` takes at most `test` and a number of replicas"),
    };
    match prepare(&workspace_root()) {
        Ok((backend, harness)) => {
            let target = target_dir(&workspace_root());
            let error = Command::new(harness)
                .arg(mode)
                .arg("--replicas")
                .arg(replicas.to_string())
                .arg("--backend")
                .arg(backend)
                .arg("--root")
                .arg(workspace_root())
                .arg("--work")
                .arg(target.join("cluster"))
                .args(passed)
                .exec();
            eprintln!("xtask cluster: cannot start the harness: {error}");
            ExitCode::FAILURE
        }
        Err(error) => {
            eprintln!("xtask cluster: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Installs the tools, checks the programs, builds; returns the release
/// backend and the harness binary.
fn prepare(root: &Path) -> Result<(PathBuf, PathBuf), String> {
    crate::setup::install(root)?;
    crate::setup::install_debian(&[crate::setup::NGINX])?;
    require_psql()?;
    build(root, Harness::Debug)
}

/// Fails unless psql runs (the harness creates and drops its database with it).
pub(crate) fn require_psql() -> Result<(), String> {
    let psql = Command::new("psql")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if psql {
        Ok(())
    } else {
        Err("psql is not installed (Debian: postgresql-client)".to_owned())
    }
}

/// How the harness is built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Harness {
    /// A debug build: the cluster suite only drives and checks.
    Debug,
    /// A release build: the HTTP bench's open-loop generator must keep
    /// its pace.
    Release,
}

/// Builds the release backend and the harness; returns their paths.
pub(crate) fn build(root: &Path, harness: Harness) -> Result<(PathBuf, PathBuf), String> {
    let harness_build: &[&str] = match harness {
        Harness::Debug => &["build", "-p", "acdm-cluster"],
        Harness::Release => &["build", "--release", "-p", "acdm-cluster"],
    };
    for build in [
        &["build", "--release", "-p", "acdm-backend"][..],
        harness_build,
    ] {
        println!("$ cargo {}", build.join(" "));
        let built = cargo_command()
            .args(build)
            .current_dir(root)
            .status()
            .map_err(|e| format!("cannot run cargo: {e}"))?;
        if !built.success() {
            return Err(format!("cargo {} failed", build.join(" ")));
        }
    }
    let target = target_dir(root);
    let profile = match harness {
        Harness::Debug => "debug",
        Harness::Release => "release",
    };
    Ok((
        target.join("release").join("acdm-backend"),
        target.join(profile).join("acdm-cluster"),
    ))
}

/// Cargo's target folder.
pub(crate) fn target_dir(root: &Path) -> PathBuf {
    #[expect(
        clippy::disallowed_methods,
        reason = "xtask finds cargo's target folder"
    )]
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from);
    target
}
