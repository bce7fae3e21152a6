//! `cargo xtask integration`: the service driven by clients nobody here
//! wrote, over real sockets.
//!
//! 1. Builds the binary and starts `acdm-backend demo` (sample project,
//!    wiki and files) on a free loopback port with a fresh token.
//! 2. Runs the official MCP Python SDK against it
//!    (`tests/integration/mcp_python_sdk.py`, the SDK from `cargo xtask
//!    setup`), and the README's Python client example exactly as written.
//! 3. Runs the official MCP TypeScript SDK against it
//!    (`tests/integration/mcp_typescript_sdk.mjs`; the SDK, pinned, is
//!    installed from npm into `.test-tools/node`). Unlike the Python one,
//!    this client checks structured content against the output schema on
//!    failures too.
//! 4. Runs the official MCP conformance suite (npm
//!    `@modelcontextprotocol/conformance`, Node 22 from npm) through a
//!    loopback proxy that adds the service header, for the scenarios that
//!    apply to a tools-only server, with the documented baseline
//!    (`tests/integration/conformance-baseline.yml`); then reads the saved
//!    checks of the DNS-rebinding scenario and requires the foreign
//!    Host/Origin to be refused and the one baselined check to have failed
//!    only for the documented reason.
//!
//! Ends with "N passed, M failed"; exits 1 on any failure.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use crate::builds::Build;
use crate::tidy::workspace_root;

/// The conformance package and the Node it needs (Node ≥ 22).
const CONFORMANCE: &str = "@modelcontextprotocol/conformance@0.1.16";
const NODE: &str = "node@22";
/// The MCP TypeScript SDK, pinned.
const TS_SDK: &str = "@modelcontextprotocol/sdk";
const TS_SDK_VERSION: &str = "1.32.2";
/// Scenarios that apply to a stateless, tools-only server.
const SCENARIOS: &[&str] = &[
    "server-initialize",
    "ping",
    "tools-list",
    "dns-rebinding-protection",
];

/// A child process killed when dropped.
pub(crate) struct Running(pub(crate) Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub(crate) fn free_port() -> Result<u16, String> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("no free port: {e}"))
}

pub(crate) fn random_token() -> Result<String, String> {
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|e| format!("cannot read /dev/urandom: {e}"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// `GET path` on a loopback port; the status code, if any answer came.
pub(crate) fn http_status(port: u16, path: &str) -> Option<u16> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut head = String::new();
    stream.read_to_string(&mut head).ok()?;
    head.split(' ').nth(1)?.parse().ok()
}

pub(crate) fn wait_ready(port: u16, server: &mut Child, log: &Path) -> Result<(), String> {
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(60) {
        if let Ok(Some(status)) = server.try_wait() {
            let log = std::fs::read_to_string(log).unwrap_or_default();
            return Err(format!("acdm-backend exited ({status}):\n{log}"));
        }
        if http_status(port, "/readyz") == Some(200) {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Err("acdm-backend did not become ready within 60 s".to_owned())
}

/// Tallies outcomes and prints each.
#[derive(Default)]
struct Tally {
    passed: usize,
    failed: usize,
}

impl Tally {
    fn record(&mut self, ok: bool, what: &str) {
        if ok {
            self.passed += 1;
            println!("PASS {what}");
        } else {
            self.failed += 1;
            println!("FAIL {what}");
        }
    }
}

/// Entry point for `cargo xtask integration`.
pub(crate) fn main(args: &[String]) -> ExitCode {
    if let Some(arg) = args.first() {
        return crate::usage_error(&format!("`integration` takes no arguments (got `{arg}`)"));
    }
    match run() {
        Ok(tally) => {
            println!("{} passed, {} failed", tally.passed, tally.failed);
            if tally.failed == 0 {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(error) => {
            eprintln!("xtask integration: {error}");
            println!("0 passed, 1 failed");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<Tally, String> {
    let root = workspace_root();
    crate::setup::install(&root)?;
    let binary = crate::builds::binaries(&root, Build::Dev, &[])?.join("acdm-backend");
    let target = crate::builds::target_dir(&root);
    let run_dir = target
        .join("integration")
        .join(format!("run-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&run_dir);
    std::fs::create_dir_all(&run_dir)
        .map_err(|e| format!("cannot create {}: {e}", run_dir.display()))?;

    let (port, proxy_port) = (free_port()?, free_port()?);
    let token = random_token()?;
    let log = run_dir.join("backend.log");
    let log_file = std::fs::File::create(&log).map_err(|e| e.to_string())?;
    println!(
        "$ acdm-backend demo   # on 127.0.0.1:{port}, data in {}",
        run_dir.display()
    );
    let mut server = Running(
        Command::new(&binary)
            .arg("demo")
            .env("ACDM_DATA_DIR", run_dir.join("data"))
            .env("ACDM_LISTEN_ADDR", format!("127.0.0.1:{port}"))
            .env("ACDM_MCP_SERVICE_TOKEN", &token)
            .env("ACDM_LOG_FORMAT", "json")
            .env_remove("DATABASE_URL")
            .stdout(Stdio::null())
            .stderr(log_file)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", binary.display()))?,
    );
    wait_ready(port, &mut server.0, &log)?;

    let mut tally = Tally::default();
    let venv_python = crate::setup::venv_dir(&root).join("bin").join("python");
    let url = format!("http://127.0.0.1:{port}/mcp");
    println!("$ python tests/integration/mcp_python_sdk.py {url} ***");
    let sdk = Command::new(&venv_python)
        .arg(root.join("tests/integration/mcp_python_sdk.py"))
        .args([&url, &token])
        .status()
        .map_err(|e| format!("cannot run the Python SDK check: {e}"))?;
    tally.record(sdk.success(), "the MCP Python SDK drives every tool");

    let (ran, printed) = run_readme_example(&root, &run_dir, &venv_python, port, &token)?;
    tally.record(
        ran && printed.contains("acdm_read_nextcloud_file")
            && printed.contains("/Projects/Alpha/meetings/2026-11-03-kickoff.md"),
        "the README's MCP client example works as written",
    );

    let ts_sdk = install_ts_sdk(&root)?;
    println!("$ node tests/integration/mcp_typescript_sdk.mjs {url} ***");
    let ts = Command::new("node")
        .arg(root.join("tests/integration/mcp_typescript_sdk.mjs"))
        .args([&url, &token])
        .env("ACDM_TS_SDK", &ts_sdk)
        .status()
        .map_err(|e| format!("cannot run node (Node.js 18+ is needed): {e}"))?;
    tally.record(ts.success(), "the MCP TypeScript SDK drives every tool");

    let _proxy = Running(
        Command::new(&venv_python)
            .arg(root.join("tests/integration/header_proxy.py"))
            .args([
                proxy_port.to_string(),
                port.to_string(),
                format!("X-ACDM-Service-Auth: {token}"),
            ])
            .spawn()
            .map_err(|e| format!("cannot start the header proxy: {e}"))?,
    );
    let started = Instant::now();
    while TcpStream::connect(("127.0.0.1", proxy_port)).is_err() {
        if started.elapsed() > Duration::from_secs(10) {
            return Err("the header proxy did not start".to_owned());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let baseline = root.join("tests/integration/conformance-baseline.yml");
    let results = run_dir.join("conformance");
    for scenario in SCENARIOS {
        let script = format!(
            "conformance server --url http://127.0.0.1:{proxy_port}/mcp --scenario {scenario} --expected-failures {} -o {}",
            baseline.display(),
            results.display()
        );
        println!("$ npx -p {NODE} -p {CONFORMANCE} -c '{script}'");
        let status = Command::new("npx")
            .args(["-y", "-p", NODE, "-p", CONFORMANCE, "-c", &script])
            .current_dir(&run_dir)
            .status()
            .map_err(|e| format!("cannot run npx (Node.js and npm are needed): {e}"))?;
        tally.record(
            status.success(),
            &format!("conformance scenario {scenario}"),
        );
    }
    let (rejected, refused_for_origin) = rebinding_checks(&results)?;
    tally.record(
        rejected,
        "dns-rebinding: a foreign Host/Origin is refused with 4xx",
    );
    tally.record(
        refused_for_origin,
        "dns-rebinding: the baselined check failed only because every Origin is refused (403 permission_denied)",
    );
    drop(server);
    let _ = std::fs::remove_dir_all(run_dir.join("data"));
    Ok(tally)
}

/// The marker in README.md above the Python MCP client example.
const README_EXAMPLE: &str = "<!-- readme-example: python-mcp";

/// Runs the README's Python MCP client example exactly as written (the
/// first fenced block after [`README_EXAMPLE`]) against the demo, with the
/// environment the README tells a reader to export. Returns whether it
/// exited 0 and what it printed.
fn run_readme_example(
    root: &Path,
    run_dir: &Path,
    python: &Path,
    port: u16,
    token: &str,
) -> Result<(bool, String), String> {
    let readme = std::fs::read_to_string(root.join("README.md"))
        .map_err(|e| format!("cannot read README.md: {e}"))?;
    let code = readme_block(&readme, README_EXAMPLE, "```python")
        .ok_or("README.md has no Python block after its example marker")?;
    let script = run_dir.join("readme_example.py");
    std::fs::write(&script, code).map_err(|e| format!("cannot write {}: {e}", script.display()))?;
    println!("$ python README.md#python-mcp");
    let output = Command::new(python)
        .arg(&script)
        .env("ACDM_BACKEND_URL", format!("http://127.0.0.1:{port}"))
        .env("ACDM_MCP_SERVICE_TOKEN", token)
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run the README example: {e}"))?;
    let printed = String::from_utf8_lossy(&output.stdout).into_owned();
    print!("{printed}");
    Ok((output.status.success(), printed))
}

/// The body of the first fenced block opening with `fence` after `marker`.
fn readme_block<'a>(text: &'a str, marker: &str, fence: &str) -> Option<&'a str> {
    let after_marker = text.get(text.find(marker)?..)?;
    let opening = after_marker.find(fence)?;
    let body_start = opening + after_marker.get(opening..)?.find('\n')? + 1;
    let body = after_marker.get(body_start..)?;
    let end = body.find("\n```")?;
    body.get(..=end)
}

/// Installs the pinned TypeScript SDK into `.test-tools/node` unless it is
/// there; returns the package's folder.
fn install_ts_sdk(root: &Path) -> Result<PathBuf, String> {
    let prefix = root.join(".test-tools").join("node");
    let package = prefix.join("node_modules").join(TS_SDK);
    let installed = std::fs::read_to_string(package.join("package.json"))
        .ok()
        .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
        .and_then(|json| {
            json.get("version")
                .and_then(|v| v.as_str())
                .map(str::to_owned)
        });
    if installed.as_deref() == Some(TS_SDK_VERSION) {
        return Ok(package);
    }
    println!(
        "$ npm install --prefix {} {TS_SDK}@{TS_SDK_VERSION}",
        prefix.display()
    );
    std::fs::create_dir_all(&prefix)
        .map_err(|e| format!("cannot create {}: {e}", prefix.display()))?;
    let status = Command::new("npm")
        .args(["install", "--no-audit", "--no-fund", "--silent", "--prefix"])
        .arg(&prefix)
        .arg(format!("{TS_SDK}@{TS_SDK_VERSION}"))
        .status()
        .map_err(|e| format!("cannot run npm (Node.js and npm are needed): {e}"))?;
    if !status.success() {
        return Err(format!(
            "npm could not install {TS_SDK}@{TS_SDK_VERSION} (is the npm registry reachable?)"
        ));
    }
    Ok(package)
}

/// Reads the saved checks of the DNS-rebinding scenario.
fn rebinding_checks(results: &Path) -> Result<(bool, bool), String> {
    let dir = std::fs::read_dir(results)
        .map_err(|e| format!("no conformance results in {}: {e}", results.display()))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| {
            p.file_name().is_some_and(|n| {
                n.to_string_lossy()
                    .starts_with("server-dns-rebinding-protection")
            })
        })
        .ok_or("the DNS-rebinding scenario saved no results")?;
    let text = std::fs::read_to_string(dir.join("checks.json")).map_err(|e| e.to_string())?;
    let checks: serde_json::Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    let find = |id: &str| {
        checks
            .as_array()
            .and_then(|a| a.iter().find(|c| c.get("id").is_some_and(|v| v == id)))
            .cloned()
            .unwrap_or_default()
    };
    let rejected = find("localhost-host-rebinding-rejected");
    let valid = find("localhost-host-valid-accepted");
    let at = |check: &serde_json::Value, pointer: &str| check.pointer(pointer).cloned();
    let refused = at(&rejected, "/status").is_some_and(|s| s == "SUCCESS");
    let documented = at(&valid, "/details/statusCode").is_some_and(|s| s == 403)
        && at(&valid, "/details/body/code").is_some_and(|c| c == "permission_denied");
    Ok((refused, documented))
}

#[cfg(test)]
mod tests {
    use super::{README_EXAMPLE, readme_block};

    #[test]
    fn the_block_after_the_marker_is_found_whole() {
        let text = "```python\nnot this\n```\n<!-- readme-example: python-mcp -->\nprose\n```python\nimport os\nprint(1)\n```\nafter\n```python\nnor this\n```\n";
        assert_eq!(
            readme_block(text, README_EXAMPLE, "```python"),
            Some("import os\nprint(1)\n")
        );
        assert_eq!(readme_block("no marker", README_EXAMPLE, "```python"), None);
    }

    #[test]
    fn the_readme_carries_the_python_client_example() {
        let readme = std::fs::read_to_string(crate::tidy::workspace_root().join("README.md"))
            .expect("README.md is readable");
        let code = readme_block(&readme, README_EXAMPLE, "```python")
            .expect("README.md has the marked Python MCP example");
        assert!(code.contains("X-ACDM-Service-Auth"), "{code}");
        assert!(code.contains("ACDM_MCP_SERVICE_TOKEN"), "{code}");
    }
}
