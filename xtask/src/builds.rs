//! The builds the black-box steps run: the test suite's own, or the release.
//!
//! `cargo xtask integration`, `fuzz-api` and `cluster` drive the binaries
//! `cargo xtask test` already built. [`Build::Dev`] asks cargo for them as
//! `cargo build --workspace --bins --tests`: with the test targets
//! selected, cargo resolves features as the test run does (dev-dependencies
//! included), so after the suite only the binaries no test needs
//! (`acdm-cluster`, `xtask`) are compiled, in seconds. A plain
//! `cargo build -p acdm-backend` resolves the binary's features alone, and
//! rebuilt tokio and every crate above it a second time in each of those
//! steps. Run on a clean checkout, these commands build every test target
//! first. The release build stays for what measures speed (`bench http`)
//! and for `cluster --release`.

use std::path::{Path, PathBuf};

use crate::metadata::cargo_command;

/// Which build a step runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Build {
    /// The test suite's build (dev profile, the test run's features).
    Dev,
    /// The release build that ships (fat LTO).
    Release,
}

impl Build {
    /// The folder under cargo's target folder this build writes.
    fn folder(self) -> &'static str {
        match self {
            Self::Dev => "debug",
            Self::Release => "release",
        }
    }
}

/// Builds the workspace's binaries as `build` says, with `packages` for a
/// release build (a dev build builds every binary and test); returns the
/// folder the binaries are in.
pub(crate) fn binaries(root: &Path, build: Build, packages: &[&str]) -> Result<PathBuf, String> {
    let commands: Vec<Vec<&str>> = match build {
        Build::Dev => vec![vec!["build", "--workspace", "--bins", "--tests"]],
        Build::Release => packages
            .iter()
            .map(|package| vec!["build", "--release", "-p", package])
            .collect(),
    };
    for args in commands {
        println!("$ cargo {}", args.join(" "));
        let built = cargo_command()
            .args(&args)
            .current_dir(root)
            .status()
            .map_err(|e| format!("cannot run cargo: {e}"))?;
        if !built.success() {
            return Err(format!("cargo {} failed", args.join(" ")));
        }
    }
    Ok(target_dir(root).join(build.folder()))
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
