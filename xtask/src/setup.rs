//! `cargo xtask setup`: installs the external programs the test suite runs
//! against, into the project-local `.test-tools/` folder (never system-wide):
//!
//! - a real WebDAV server, wsgidav (PyPI, pinned), in a Python venv at
//!   `.test-tools/venv`; the contract suite finds it there (or through
//!   `ACDM_WSGIDAV`);
//! - the official MCP Python SDK (`mcp`, pinned) in the same venv, for
//!   `cargo xtask integration`. (The conformance suite and Node 22 come
//!   from npm through `npx` when the integration suite runs.)
//! - nginx, the load balancer of `cargo xtask cluster`: Debian's package,
//!   installed with apt when it is missing and this runs as root (CI);
//!   otherwise the message says what to install. Only `cargo xtask setup`
//!   and `cargo xtask cluster` ask for it; the test suite does not need it.
//!
//! Idempotent: a tool already at the pinned version is left alone.
//! `cargo xtask test` runs this first and carries on without the tools when
//! they cannot be installed (the tests that need them then say so, and fail
//! when `ACDM_REQUIRE_WEBDAV` is set, as in CI).

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

use crate::tidy::workspace_root;

/// wsgidav and the WSGI server it runs on, pinned.
const WSGIDAV: &str = "wsgidav==4.4.0";
const CHEROOT: &str = "cheroot==11.1.2";
const WSGIDAV_VERSION: &str = "4.4.0";
/// The MCP Python SDK, pinned.
const MCP_SDK: &str = "mcp==1.30.0";
const MCP_SDK_VERSION: &str = "1.30.0";

/// pip's arguments: not `--quiet`, so what it downloads and builds shows.
const PIP_INSTALL: [&str; 5] = [
    "install",
    "--disable-pip-version-check",
    WSGIDAV,
    CHEROOT,
    MCP_SDK,
];

/// Where the venv lives.
pub(crate) fn venv_dir(root: &Path) -> PathBuf {
    root.join(".test-tools").join("venv")
}

/// Entry point for `cargo xtask setup`.
pub(crate) fn main(args: &[String]) -> ExitCode {
    if let Some(arg) = args.first() {
        return crate::usage_error(&format!("`setup` takes no arguments (got `{arg}`)"));
    }
    match install(&workspace_root()).and_then(|()| install_nginx()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("xtask setup: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Installs what is missing; an error says what to do.
pub(crate) fn install(root: &Path) -> Result<(), String> {
    let venv = venv_dir(root);
    let wsgidav = venv.join("bin").join("wsgidav");
    let venv_python = venv.join("bin").join("python");
    let wsgidav_ok = || version_of(&wsgidav).as_deref() == Some(WSGIDAV_VERSION);
    let sdk_ok = || sdk_version(&venv_python).as_deref() == Some(MCP_SDK_VERSION);
    if wsgidav_ok() && sdk_ok() {
        println!(
            "setup: wsgidav {WSGIDAV_VERSION} and mcp {MCP_SDK_VERSION} are installed in {}",
            venv.display()
        );
        return Ok(());
    }
    let python = ["python3", "python"]
        .into_iter()
        .find(|p| quiet(Command::new(p).arg("--version")))
        .ok_or("no python3 found; install Python 3 (with venv) to run the WebDAV tests")?;
    if !venv.join("bin").join("pip").is_file() {
        println!("$ {python} -m venv {}", venv.display());
        let created = Command::new(python)
            .args(["-m", "venv"])
            .arg(&venv)
            .status()
            .map_err(|e| format!("cannot run {python}: {e}"))?;
        if !created.success() {
            return Err(format!(
                "`{python} -m venv` failed; install the venv module (Debian: python3-venv)"
            ));
        }
    }
    let pip = venv.join("bin").join("pip");
    println!(
        "$ {} {} (a minute or two the first time)",
        pip.display(),
        PIP_INSTALL.join(" ")
    );
    let installed = Command::new(&pip)
        .args(PIP_INSTALL)
        .status()
        .map_err(|e| format!("cannot run pip: {e}"))?;
    if !installed.success() {
        return Err("pip could not install wsgidav and mcp (is PyPI reachable?)".to_owned());
    }
    if !wsgidav_ok() {
        return Err(format!(
            "wsgidav reports version {:?} after installing, expected {WSGIDAV_VERSION}",
            version_of(&wsgidav)
        ));
    }
    if !sdk_ok() {
        return Err(format!(
            "the mcp SDK reports version {:?} after installing, expected {MCP_SDK_VERSION}",
            sdk_version(&venv_python)
        ));
    }
    println!("setup: wsgidav {WSGIDAV_VERSION} and mcp {MCP_SDK_VERSION} ready");
    Ok(())
}

/// Installs Debian's nginx unless an `nginx` is on the `PATH`. Only as
/// root with apt (as in CI); anyone else is told what to install. The
/// cluster runs it as a child process with its own configuration, never
/// as the system's service.
pub(crate) fn install_nginx() -> Result<(), String> {
    let present = || quiet(Command::new("nginx").arg("-v"));
    if present() {
        println!("setup: nginx is installed");
        return Ok(());
    }
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).trim() == "0");
    if !root || !quiet(Command::new("apt-get").arg("--version")) {
        return Err(
            "nginx is not installed: install Debian's package (`sudo apt-get install nginx`)"
                .to_owned(),
        );
    }
    for args in [
        &["update", "-qq"][..],
        &["install", "-y", "-qq", "--no-install-recommends", "nginx"][..],
    ] {
        println!("$ apt-get {}", args.join(" "));
        let status = Command::new("apt-get")
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
            .map_err(|e| format!("cannot run apt-get: {e}"))?;
        if !status.success() {
            return Err(format!("apt-get {} failed", args.join(" ")));
        }
    }
    if present() {
        Ok(())
    } else {
        Err("apt-get installed nginx, but `nginx -v` still fails".to_owned())
    }
}

fn quiet(command: &mut Command) -> bool {
    command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The installed MCP SDK version, asked of the venv's Python.
fn sdk_version(python: &Path) -> Option<String> {
    let output = Command::new(python)
        .args([
            "-c",
            "import importlib.metadata as m; print(m.version('mcp'))",
        ])
        .stderr(Stdio::null())
        .output()
        .ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

fn version_of(program: &Path) -> Option<String> {
    let output = Command::new(program).arg("--version").output().ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::PIP_INSTALL;

    #[test]
    fn pip_shows_what_it_installs() {
        assert!(
            !PIP_INSTALL
                .iter()
                .any(|arg| *arg == "--quiet" || *arg == "-q"),
            "{PIP_INSTALL:?}"
        );
    }
}
