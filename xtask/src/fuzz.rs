//! `cargo xtask fuzz-api`: schemathesis against the real binary.
//!
//! 1. Builds the binary and starts `acdm-backend demo` (project `alpha`,
//!    its manager agent `project-alpha`, owner `u-alice`, meetings,
//!    reports, files) on a free loopback port with fresh service and admin
//!    tokens.
//! 2. Fetches `/openapi.json` as served and validates it as OpenAPI 3.1
//!    (`openapi-spec-validator`, from `cargo xtask setup`).
//! 3. Runs schemathesis (pinned, from `cargo xtask setup`) with every
//!    default check and all four phases (examples, coverage, fuzzing, and
//!    the stateful phase over the document's links; the one adjustment,
//!    for rules JSON Schema cannot state, is in
//!    `tests/schemathesis/schemathesis.toml`), with valid
//!    credentials for both security schemes, and prints its report; a
//!    JUnit report is kept in `target/schemathesis/`.
//!
//! Ends with "N passed, M failed"; exits 1 on any failure.

use std::process::{Command, ExitCode, Stdio};

use crate::builds::Build;
use crate::integration::{Running, free_port, random_token, wait_ready};
use crate::tidy::workspace_root;

/// Examples per operation and phase: enough to find what a schema and a
/// handler disagree on, small enough for CI (a few minutes on 2 cores).
const MAX_EXAMPLES: &str = "100";

/// Entry point for `cargo xtask fuzz-api`.
pub(crate) fn main(args: &[String]) -> ExitCode {
    if let Some(arg) = args.first() {
        return crate::usage_error(&format!("`fuzz-api` takes no arguments (got `{arg}`)"));
    }
    match run() {
        Ok((passed, failed)) => {
            println!("{passed} passed, {failed} failed");
            if failed == 0 {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(error) => {
            eprintln!("xtask fuzz-api: {error}");
            println!("0 passed, 1 failed");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(usize, usize), String> {
    let root = workspace_root();
    crate::setup::install(&root)?;
    let binary = crate::builds::binaries(&root, Build::Dev, &[])?.join("acdm-backend");
    let target = crate::builds::target_dir(&root);
    let out = target.join("schemathesis");
    let run_dir = out.join(format!("run-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&run_dir);
    std::fs::create_dir_all(&run_dir)
        .map_err(|e| format!("cannot create {}: {e}", run_dir.display()))?;

    let port = free_port()?;
    let (token, admin) = (random_token()?, random_token()?);
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
            .env("ACDM_ADMIN_TOKEN", &admin)
            .env("ACDM_LOG_FORMAT", "json")
            // Schemathesis makes thousands of calls as one agent: with the
            // limits on, most would be 429 and the logic behind them left
            // untested (the limits have tests of their own).
            .env("ACDM_BFF_RATE_PER_MINUTE", "0")
            .env("ACDM_BFF_WRITE_RATE_PER_MINUTE", "0")
            .env("ACDM_MCP_TOOL_RATE_PER_MINUTE", "0")
            .env_remove("DATABASE_URL")
            .stdout(Stdio::null())
            .stderr(log_file)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", binary.display()))?,
    );
    wait_ready(port, &mut server.0, &log)?;

    let venv_bin = crate::setup::venv_dir(&root).join("bin");
    let url = format!("http://127.0.0.1:{port}");
    let document = run_dir.join("openapi.json");
    let python = venv_bin.join("python");
    let fetched = Command::new(&python)
        .args([
            "-c",
            "import sys, urllib.request; open(sys.argv[2], 'wb').write(urllib.request.urlopen(sys.argv[1] + '/openapi.json').read())",
        ])
        .arg(&url)
        .arg(&document)
        .status()
        .map_err(|e| format!("cannot run python: {e}"))?;
    if !fetched.success() {
        return Err("cannot fetch /openapi.json".to_owned());
    }
    let (mut passed, mut failed) = (0, 0);
    let mut record = |ok: bool, what: &str| {
        if ok {
            passed += 1;
            println!("PASS {what}");
        } else {
            failed += 1;
            println!("FAIL {what}");
        }
    };
    println!("$ openapi-spec-validator {}", document.display());
    let valid = Command::new(venv_bin.join("openapi-spec-validator"))
        .arg(&document)
        .status()
        .map_err(|e| format!("cannot run openapi-spec-validator: {e}"))?;
    record(valid.success(), "/openapi.json validates as OpenAPI 3.1");

    let headers = [
        format!("X-ACDM-Service-Auth: {token}"),
        "X-ACDM-User-Id: u-alice".to_owned(),
        "X-ACDM-Agent-Name: project-alpha".to_owned(),
        "X-ACDM-Thread-Id: schemathesis".to_owned(),
        format!("Authorization: Bearer {admin}"),
    ];
    let mut st = Command::new(venv_bin.join("schemathesis"));
    st.arg("--config-file")
        .arg(root.join("tests/schemathesis/schemathesis.toml"))
        .arg("run")
        .arg(&document)
        .args(["--url", &url])
        .args(["--max-examples", MAX_EXAMPLES])
        .args(["--seed", "1"])
        .args(["--report", "junit"])
        .arg("--report-dir")
        .arg(&out)
        .arg("--no-color")
        .env("SCHEMATHESIS_HOOKS", "")
        .current_dir(&run_dir);
    for header in &headers {
        st.args(["-H", header]);
    }
    println!(
        "$ schemathesis run openapi.json --url {url} --max-examples {MAX_EXAMPLES} --seed 1 -H <service token, identity of u-alice/project-alpha, admin bearer>"
    );
    let fuzzed = st
        .status()
        .map_err(|e| format!("cannot run schemathesis: {e}"))?;
    record(
        fuzzed.success(),
        "schemathesis: every default check, all phases, 0 failures",
    );
    drop(server);
    if failed == 0 {
        let _ = std::fs::remove_dir_all(&run_dir);
    } else {
        println!("the server's log: {}", log.display());
    }
    Ok((passed, failed))
}
