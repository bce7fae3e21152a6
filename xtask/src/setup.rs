//! `cargo xtask setup`: installs the external programs the test suite runs
//! against, into the project-local `.test-tools/` folder (never system-wide):
//!
//! - a real WebDAV server, wsgidav (PyPI, pinned), in a Python venv at
//!   `.test-tools/venv`; the contract suite finds it there (or through
//!   `ACDM_WSGIDAV`);
//! - the official MCP Python SDK (`mcp`, pinned) in the same venv, for
//!   `cargo xtask integration`. (The conformance suite and Node 22 come
//!   from npm through `npx` when the integration suite runs.)
//! - nginx, the load balancer of `cargo xtask cluster`, and for `cargo
//!   xtask bench http` its WebDAV module (`dav_ext`, for `PROPFIND`) and
//!   the load generator wrk: Debian's packages, installed with apt when
//!   they are missing and this runs as root (CI); otherwise the message
//!   says what to install. Only `cargo xtask setup`, `cargo xtask cluster`
//!   (nginx) and `cargo xtask bench http` (all three) ask for them; the
//!   test suite does not need them.
//! - schemathesis and openapi-spec-validator (pinned) in the same venv,
//!   for `cargo xtask fuzz-api`;
//! - Debian's `chromium` and `chromium-driver` for the console's browser
//!   suite (`tests/console`), the same way. Never a browser download.
//! - Debian's `poppler-utils` (`pdftotext`, which acdm-extract runs on
//!   PDFs) and `poppler-data` (its CMaps for Chinese fonts), the same way;
//! - python-docx, openpyxl, python-pptx, odfpy and reportlab (pinned) in
//!   the same venv, which write the documents acdm-extract's tests read
//!   (`xtask/fixtures/make_documents.py`) into
//!   `.test-tools/fixtures/documents/`, again whenever the script or a
//!   pin changes.
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
/// What writes acdm-extract's test documents, pinned: (package, version).
const DOCUMENT_MAKERS: [(&str, &str); 5] = [
    ("python-docx", "1.2.0"),
    ("openpyxl", "3.1.5"),
    ("python-pptx", "1.0.2"),
    ("odfpy", "1.4.1"),
    ("reportlab", "5.1.0"),
];

/// pip's arguments: not `--quiet`, so what it downloads and builds shows.
const PIP_INSTALL: [&str; 12] = [
    "install",
    "--disable-pip-version-check",
    WSGIDAV,
    CHEROOT,
    MCP_SDK,
    SCHEMATHESIS,
    SPEC_VALIDATOR,
    "python-docx==1.2.0",
    "openpyxl==3.1.5",
    "python-pptx==1.0.2",
    "odfpy==1.4.1",
    "reportlab==5.1.0",
];

/// The script that writes acdm-extract's test documents, from the root.
const DOCUMENTS_SCRIPT: &str = "xtask/fixtures/make_documents.py";

/// Where the venv lives.
pub(crate) fn venv_dir(root: &Path) -> PathBuf {
    root.join(".test-tools").join("venv")
}

/// Entry point for `cargo xtask setup`.
pub(crate) fn main(args: &[String]) -> ExitCode {
    if let Some(arg) = args.first() {
        return crate::usage_error(&format!("`setup` takes no arguments (got `{arg}`)"));
    }
    match install(&workspace_root()).and_then(|()| install_debian(&BENCH_PACKAGES)) {
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
    install_debian(&[
        DebianPackage {
            name: "chromium",
            role: "the console's browser tests",
            present: Presence::File(CHROMIUM),
        },
        DebianPackage {
            name: "chromium-driver",
            role: "the console's browser tests",
            present: Presence::File(CHROMEDRIVER),
        },
    ])
}

/// Installs what is missing; an error says what to do.
pub(crate) fn install(root: &Path) -> Result<(), String> {
    if let Err(error) = install_browser() {
        eprintln!("setup: {error}");
    }
    if let Err(error) = install_debian(&[POPPLER, POPPLER_DATA]) {
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
            && DOCUMENT_MAKERS.iter().all(|(package, version)| {
                package_version(&venv_python, package).as_deref() == Some(*version)
            })
    };
    if wsgidav_ok() && sdk_ok() {
        println!(
            "setup: wsgidav {WSGIDAV_VERSION}, mcp {MCP_SDK_VERSION} and schemathesis {SCHEMATHESIS_VERSION} are installed in {}",
            venv.display()
        );
        return make_documents(root, &venv_python);
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
    make_documents(root, &venv_python)
}

/// Writes acdm-extract's test documents with the venv's `python` into
/// `.test-tools/fixtures/documents/`, unless they were written by this
/// very script with these very pins (a copy of both is kept beside them).
fn make_documents(root: &Path, python: &Path) -> Result<(), String> {
    let script = root.join(DOCUMENTS_SCRIPT);
    let out = root.join(".test-tools").join("fixtures").join("documents");
    let stamp_path = out.join(".made-by");
    let source = std::fs::read_to_string(&script)
        .map_err(|e| format!("cannot read {}: {e}", script.display()))?;
    let pins: Vec<String> = DOCUMENT_MAKERS
        .iter()
        .map(|(package, version)| format!("# {package}=={version}"))
        .collect();
    let stamp = format!("{}\n{source}", pins.join("\n"));
    if std::fs::read_to_string(&stamp_path).is_ok_and(|made| made == stamp)
        && out.join("manifest.json").is_file()
    {
        println!(
            "setup: the test documents are up to date in {}",
            out.display()
        );
        return Ok(());
    }
    if out.exists() {
        std::fs::remove_dir_all(&out)
            .map_err(|e| format!("cannot clear {}: {e}", out.display()))?;
    }
    println!(
        "$ {} {} {}",
        python.display(),
        script.display(),
        out.display()
    );
    let made = Command::new(python)
        .arg(&script)
        .arg(&out)
        .status()
        .map_err(|e| format!("cannot run {}: {e}", python.display()))?;
    if !made.success() {
        return Err(format!(
            "{DOCUMENTS_SCRIPT} failed to write the test documents"
        ));
    }
    std::fs::write(&stamp_path, stamp)
        .map_err(|e| format!("cannot write {}: {e}", stamp_path.display()))
}

/// A program of Debian's that the cluster, the HTTP bench or the console tests run.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DebianPackage {
    /// The package's name (`apt-get install <name>`).
    pub(crate) name: &'static str,
    /// What it is for, in messages.
    pub(crate) role: &'static str,
    /// How to tell it is installed.
    pub(crate) present: Presence,
}

/// How to tell a package is installed.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Presence {
    /// This command, with these arguments, runs and exits 0.
    Runs(&'static str, &'static [&'static str]),
    /// This command runs at all (whatever its exit status: wrk has no
    /// option that exits 0 without a target).
    Starts(&'static str, &'static [&'static str]),
    /// This file exists.
    File(&'static str),
}

impl Presence {
    fn holds(self) -> bool {
        match self {
            Self::Runs(program, args) => quiet(Command::new(program).args(args)),
            Self::Starts(program, args) => Command::new(program)
                .args(args)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok(),
            Self::File(path) => Path::new(path).is_file(),
        }
    }
}

/// Debian's nginx: the balancer of `cargo xtask cluster`, the upstream and
/// the one-hop floor of `cargo xtask bench http`.
pub(crate) const NGINX: DebianPackage = DebianPackage {
    name: "nginx",
    role: "the cluster's balancer and the HTTP bench's upstream",
    present: Presence::Runs("nginx", &["-v"]),
};

/// Where Debian's nginx keeps its dynamic modules.
pub(crate) const DAV_EXT_MODULE: &str = "/usr/lib/nginx/modules/ngx_http_dav_ext_module.so";

/// nginx's `dav_ext` module: `PROPFIND` (nc `list`) for the HTTP bench.
pub(crate) const DAV_EXT: DebianPackage = DebianPackage {
    name: "libnginx-mod-http-dav-ext",
    role: "PROPFIND in the HTTP bench's WebDAV upstream",
    present: Presence::File(DAV_EXT_MODULE),
};

/// wrk, the HTTP bench's load generator.
pub(crate) const WRK: DebianPackage = DebianPackage {
    name: "wrk",
    role: "the HTTP bench's load generator",
    present: Presence::Starts("wrk", &["-v"]),
};

/// poppler's pdftotext: acdm-extract reads PDFs with it (its tests check
/// Chinese text through it).
pub(crate) const POPPLER: DebianPackage = DebianPackage {
    name: "poppler-utils",
    role: "pdftotext, which acdm-extract runs on PDFs",
    present: Presence::Starts("pdftotext", &["-v"]),
};

/// poppler's CMaps for CJK fonts (a recommendation apt leaves out with
/// `--no-install-recommends`): without them pdftotext loses the text of
/// Chinese PDFs whose fonts use predefined CMaps.
pub(crate) const POPPLER_DATA: DebianPackage = DebianPackage {
    name: "poppler-data",
    role: "pdftotext's CMaps for Chinese, Japanese and Korean fonts",
    present: Presence::File("/usr/share/poppler/cMap/Adobe-GB1/UniGB-UCS2-H"),
};

/// Everything `cargo xtask setup` installs from Debian.
pub(crate) const BENCH_PACKAGES: [DebianPackage; 3] = [NGINX, DAV_EXT, WRK];

/// Installs those of Debian's `packages` that are missing. Only as root
/// with apt (as in CI); anyone else is told what to install. nginx runs
/// as a child process with its own configuration, never as the system's
/// service.
pub(crate) fn install_debian(packages: &[DebianPackage]) -> Result<(), String> {
    let missing: Vec<&DebianPackage> = packages.iter().filter(|p| !p.present.holds()).collect();
    for package in packages {
        if !missing.iter().any(|m| m.name == package.name) {
            println!("setup: {} is installed ({})", package.name, package.role);
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    let names: Vec<&str> = missing.iter().map(|p| p.name).collect();
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).trim() == "0");
    if !root || !quiet(Command::new("apt-get").arg("--version")) {
        return Err(format!(
            "not installed: {}; install Debian's packages (`sudo apt-get install {}`)",
            missing
                .iter()
                .map(|p| format!("{} ({})", p.name, p.role))
                .collect::<Vec<_>>()
                .join(", "),
            names.join(" ")
        ));
    }
    let install: Vec<&str> = ["install", "-y", "-qq", "--no-install-recommends"]
        .into_iter()
        .chain(names.iter().copied())
        .collect();
    for args in [&["update", "-qq"][..], &install[..]] {
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
    match missing.iter().find(|p| !p.present.holds()) {
        None => Ok(()),
        Some(package) => Err(format!(
            "apt-get installed {}, but it is still not there",
            package.name
        )),
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
    use super::{DOCUMENT_MAKERS, PIP_INSTALL};

    #[test]
    fn pip_installs_the_pinned_document_makers() {
        for (package, version) in DOCUMENT_MAKERS {
            let pin = format!("{package}=={version}");
            assert!(
                PIP_INSTALL.contains(&pin.as_str()),
                "{pin} not in {PIP_INSTALL:?}"
            );
        }
    }

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
