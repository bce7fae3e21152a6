//! The binary itself: configuration errors, the operator commands, and a
//! real `serve` process stopped with SIGTERM.

use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::helpers::{Req, TOKEN, send};

const BIN: &str = env!("CARGO_BIN_EXE_acdm-backend");

fn run(data_dir: &Path, env: &[(&str, &str)], args: &[&str]) -> Output {
    Command::new(BIN)
        .env_clear()
        .env("ACDM_DATA_DIR", data_dir)
        .env("ACDM_LOG_FORMAT", "json")
        .envs(env.iter().copied())
        .args(args)
        .output()
        .unwrap()
}

fn json(output: &Output) -> serde_json::Value {
    assert!(
        output.status.success(),
        "failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

#[test]
fn an_invalid_configuration_stops_the_binary_naming_the_setting() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(
        dir.path(),
        &[
            ("ACDM_LISTEN_ADDR", "nope"),
            ("ACDM_MCP_SERVICE_TOKEN", "short"),
        ],
        &["serve"],
    );
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("ACDM_LISTEN_ADDR (from environment)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("ACDM_MCP_SERVICE_TOKEN (from environment): must be at least 32"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("short"),
        "the value itself is not echoed: {stderr}"
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn check_config_redacts_secrets_and_reports_the_database() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(
        dir.path(),
        &[("ACDM_MCP_SERVICE_TOKEN", TOKEN)],
        &["check-config"],
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(!text.contains(TOKEN), "{text}");
    let v = json(&out);
    assert_eq!(v["settings"]["ACDM_MCP_SERVICE_TOKEN"], "set (redacted)");
    assert_eq!(v["database"]["reachable"], true);
    assert_eq!(
        v["database"]["migrations"]["pending"],
        serde_json::json!([1])
    );
}

#[test]
fn operators_provision_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let created = json(&run(
        d,
        &[],
        &["project", "create", "--slug", "alpha", "--name", "Alpha"],
    ));
    assert_eq!(created["mounts"][0]["root"], "/Projects/Alpha");
    json(&run(
        d,
        &[],
        &[
            "member",
            "add",
            "--project",
            "alpha",
            "--user",
            "u1",
            "--role",
            "admin",
        ],
    ));
    let mount = json(&run(
        d,
        &[],
        &[
            "mount",
            "add",
            "--project",
            "alpha",
            "--name",
            "archive",
            "--root",
            "/Archive/Alpha",
            "--read-only",
        ],
    ));
    assert_eq!(mount["mount"]["writable"], false);
    let mounted = json(&run(
        d,
        &[],
        &[
            "agent",
            "mount",
            "--agent",
            "project-alpha",
            "--project",
            "alpha",
        ],
    ));
    assert_eq!(mounted["mount"]["role"], "manager");
    let shown = json(&run(d, &[], &["project", "show", "alpha"]));
    assert_eq!(shown["agents"][0]["agent_name"], "project-alpha");
    assert_eq!(shown["members"][0]["role"], "admin");
    assert_eq!(
        json(&run(d, &[], &["agent", "list"]))
            .as_array()
            .unwrap()
            .len(),
        1
    );
    json(&run(
        d,
        &[],
        &["agent", "unmount", "--agent", "project-alpha"],
    ));

    let again = run(d, &[], &["agent", "unmount", "--agent", "project-alpha"]);
    assert_eq!(again.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&again.stderr)
            .contains("active agent mount `project-alpha` not found")
    );
    let bad = run(
        d,
        &[],
        &[
            "member",
            "add",
            "--project",
            "alpha",
            "--user",
            "u2",
            "--role",
            "boss",
        ],
    );
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("expected one of: owner admin member viewer")
    );
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[tokio::test]
async fn serve_stops_cleanly_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut child = Command::new(BIN)
        .env_clear()
        .env("ACDM_DATA_DIR", dir.path())
        .env("ACDM_LISTEN_ADDR", &addr)
        .env("ACDM_MCP_SERVICE_TOKEN", TOKEN)
        .env("ACDM_LOG_FORMAT", "json")
        .arg("serve")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let socket = addr.parse().unwrap();
    let started = Instant::now();
    loop {
        if tokio::net::TcpStream::connect(socket).await.is_ok() {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the server did not start"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(send(socket, Req::get("/readyz")).await.status, 200);

    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let stopping = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            stopping.elapsed() < Duration::from_secs(15),
            "still running after SIGTERM"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let stderr = String::from_utf8_lossy(&child.wait_with_output().unwrap().stderr).into_owned();
    assert!(status.success(), "{status}: {stderr}");
    assert!(
        stderr.contains("SIGTERM received") && stderr.contains("\"stopped\""),
        "{stderr}"
    );
    assert!(!stderr.contains(TOKEN));
}
