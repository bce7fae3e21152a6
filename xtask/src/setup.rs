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
//! - schemathesis and openapi-spec-validator (pinned) in the same venv,
//!   for `cargo xtask fuzz-api`;
//! - Debian's `chromium` and `chromium-driver` for the console's browser
//!   suite (`tests/console`), with apt, when they are missing and setup
//!   runs as root on Debian; otherwise it says how to get them. Never a
//!   browser download.
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
/// schemathesis and the OpenAPI validator, pinned, for `cargo xtask fuzz-api`.
const SCHEMATHESIS: &str = "schemathesis==4.32.5";
const SCHEMATHESIS_VERSION: &str = "4.32.5";
const SPEC_VALIDATOR: &str = "openapi-spec-validator==0.7.2";

/// pip's arguments: not `--quiet`, so what it downloads and builds shows.
const PIP_INSTALL: [&str; 7] = [
    "install",
    "--disable-pip-version-check",
    WSGIDAV,
    CHEROOT,
    MCP_SDK,
    SCHEMATHESIS,
    SPEC_VALIDATOR,
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

/// Where the browser suite looks for the browser and its driver.
const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// Installs Debian's chromium and chromium-driver when they are missing
/// and this runs as root with apt; an error says what to do otherwise.
pub(crate) fn install_browser() -> Result<(), String> {
    debian_packages(
        &["chromium", "chromium-driver"],
        || Path::new(CHROMIUM).is_file() && Path::new(CHROMEDRIVER).is_file(),
        "the console's browser tests",
    )
}

/// Installs Debian's `packages` when `present` says they are missing: with
/// apt-get as root (as in CI); anyone else is told what to install, for
/// `what`. Checks `present` again afterwards.
pub(crate) fn debian_packages(
    packages: &[&str],
    present: impl Fn() -> bool,
    what: &str,
) -> Result<(), String> {
    let listed = packages.join(" ");
    if present() {
        println!("setup: {listed} installed");
        return Ok(());
    }
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).trim() == "0");
    if !root || !quiet(Command::new("apt-get").arg("--version")) {
        return Err(format!(
            "{what} need Debian's {listed}: `sudo apt-get install {listed}`"
        ));
    }
    let mut install = vec!["install", "-y", "-qq", "--no-install-recommends"];
    install.extend_from_slice(packages);
    for args in [&["update", "-qq"][..], &install[..]] {
        println!("$ apt-get {}", args.join(" "));
        let status = Command::new("apt-get")
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
            .map_err(|e| format!("cannot run apt-get: {e}"))?;
        if !status.success() {
            return Err(format!("`apt-get {}` failed", args.join(" ")));
        }
    }
    if present() {
        Ok(())
    } else {
        Err(format!(
            "apt-get installed {listed}, but they are still not found"
        ))
    }
}

/// Installs what is missing; an error says what to do.
pub(crate) fn install(root: &Path) -> Result<(), String> {
    if let Err(error) = install_browser() {
        eprintln!("setup: {error}");
    }
    let venv = venv_dir(root);
    let wsgidav = venv.join("bin").join("wsgidav");
    let venv_python = venv.join("bin").join("python");
    let wsgidav_ok = || version_of(&wsgidav).as_deref() == Some(WSGIDAV_VERSION);
    let sdk_ok = || {
        package_version(&venv_python, "mcp").as_deref() == Some(MCP_SDK_VERSION)
            && package_version(&venv_python, "schemathesis").as_deref()
                == Some(SCHEMATHESIS_VERSION)
            && package_version(&venv_python, "openapi-spec-validator").is_some()
    };
    if wsgidav_ok() && sdk_ok() {
        println!(
            "setup: wsgidav {WSGIDAV_VERSION}, mcp {MCP_SDK_VERSION} and schemathesis {SCHEMATHESIS_VERSION} are installed in {}",
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
        return Err(
            "pip could not install wsgidav, mcp and schemathesis (is PyPI reachable?)".to_owned(),
        );
    }
    if !wsgidav_ok() {
        return Err(format!(
            "wsgidav reports version {:?} after installing, expected {WSGIDAV_VERSION}",
            version_of(&wsgidav)
        ));
    }
    if !sdk_ok() {
        return Err(format!(
            "the mcp SDK or schemathesis reports another version after installing (mcp {:?}, expected {MCP_SDK_VERSION}; schemathesis {:?}, expected {SCHEMATHESIS_VERSION})",
            package_version(&venv_python, "mcp"),
            package_version(&venv_python, "schemathesis")
        ));
    }
    println!(
        "setup: wsgidav {WSGIDAV_VERSION}, mcp {MCP_SDK_VERSION} and schemathesis {SCHEMATHESIS_VERSION} ready"
    );
    Ok(())
}

/// Installs Debian's nginx unless an `nginx` is on the `PATH`. Only as
/// root with apt (as in CI); anyone else is told what to install. The
/// cluster runs it as a child process with its own configuration, never
/// as the system's service.
pub(crate) fn install_nginx() -> Result<(), String> {
    debian_packages(
        &["nginx"],
        || quiet(Command::new("nginx").arg("-v")),
        "the cluster's load balancer and the HTTP bench",
    )
}

fn quiet(command: &mut Command) -> bool {
    command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// An installed package's version, asked of the venv's Python.
fn package_version(python: &Path, package: &str) -> Option<String> {
    let output = Command::new(python)
        .args([
            "-c",
            "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))",
            package,
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
