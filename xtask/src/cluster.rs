//! `cargo xtask cluster [N]` and `cargo xtask cluster test [N]`: the
//! production shape — PostgreSQL, N replicas of the service, nginx with
//! `deploy/nginx.conf`, the real WebDAV server — on loopback.
//!
//! This module only prepares: it installs the test tools (`setup`: wsgidav,
//! the MCP Python SDK and nginx), checks that psql is there, builds the
//! backend and the `acdm-cluster` harness, then replaces itself with the
//! harness (`exec`), which owns every child process and stops them all on
//! Ctrl-C. The harness and the suite live in `tests/cluster` (crate
//! `acdm-cluster`).
//!
//! - `cargo xtask cluster [N]`: start N replicas (3 by default), print the
//!   addresses, run until Ctrl-C.
//! - `cargo xtask cluster test [N]`: the cluster suite against N replicas
//!   (3 by default); prints its figures; exits 1 if a check failed.
//!
//! The replicas run the test suite's build ([`Build::Dev`]) unless
//! `--release` asks for the release binary, the one that ships (CI runs
//! the suite on the test suite's build: a release build compiles every
//! dependency again, ten minutes on CI's two cores). The
//! harness is always the test suite's build: it only drives and checks.
//!
//! Arguments after `--` go to the harness (`--set KEY=VALUE` gives every
//! replica a setting; `--postgres URL` another PostgreSQL server).

use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

use crate::builds::{Build, target_dir};
use crate::tidy::workspace_root;

/// Replicas when `N` is not given: the cluster suite's figure.
const DEFAULT_REPLICAS: usize = 3;

/// Entry point for `cargo xtask cluster [test] [N] [--release] [-- ARGS]`.
pub(crate) fn main(args: &[String]) -> ExitCode {
    let (ours, passed) = match args.iter().position(|a| a == "--") {
        Some(at) => (
            args.get(..at).unwrap_or_default(),
            args.get(at + 1..).unwrap_or_default(),
        ),
        None => (args, &[][..]),
    };
    let build = if ours.iter().any(|a| a == "--release") {
        Build::Release
    } else {
        Build::Dev
    };
    let ours: Vec<String> = ours.iter().filter(|a| *a != "--release").cloned().collect();
    let ours = ours.as_slice();
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
        _ => {
            return crate::usage_error(
                "`cluster` takes at most `test`, a number of replicas and `--release`",
            );
        }
    };
    match prepare(&workspace_root(), build) {
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

/// Installs the tools, checks the programs, builds; returns the backend
/// and the harness binary.
fn prepare(root: &Path, build: Build) -> Result<(PathBuf, PathBuf), String> {
    crate::setup::install(root)?;
    crate::setup::install_debian(&[crate::setup::NGINX])?;
    require_psql()?;
    // The harness only drives and checks: the test suite's build.
    let dev = crate::builds::binaries(root, Build::Dev, &[])?;
    let backend = match build {
        Build::Dev => dev.join("acdm-backend"),
        Build::Release => {
            crate::builds::binaries(root, Build::Release, &["acdm-backend"])?.join("acdm-backend")
        }
    };
    Ok((backend, dev.join("acdm-cluster")))
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
