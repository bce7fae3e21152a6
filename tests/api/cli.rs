//! The binary itself: configuration errors, the operator commands, and a
//! real `serve` process stopped with SIGTERM.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

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
fn a_misspelled_setting_is_named_with_the_configuration_error_it_may_explain() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(
        dir.path(),
        &[
            ("ACDM_LISTEN_ADDR", "nope"),
            ("ACDM_UPSTREAM_MAX_CONECTIONS", "5"),
        ],
        &["serve"],
    );
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "ACDM_UPSTREAM_MAX_CONECTIONS is not a setting and is ignored; \
             did you mean ACDM_UPSTREAM_MAX_CONNECTIONS?"
        ),
        "{stderr}"
    );
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
        serde_json::json!([1, 2, 3, 4, 5, 6, 7, 8])
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
    // The error is said once, as a plain line, not also as a log line.
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert_eq!(
        stderr.trim_end(),
        "error: active agent mount `project-alpha` not found",
        "{stderr}"
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

/// The address in the JSON log line `acdm-backend listening on …` (the
/// server logs it once its listener is bound, so it can be connected to at
/// once).
fn listening_address(line: &str) -> Option<std::net::SocketAddr> {
    let line: serde_json::Value = serde_json::from_str(line).ok()?;
    line["message"]
        .as_str()?
        .starts_with("acdm-backend listening on ")
        .then(|| line["address"].as_str()?.parse().ok())?
}

#[tokio::test]
async fn serve_stops_cleanly_on_sigterm() {
    use std::io::{BufRead, BufReader};
    let dir = tempfile::tempdir().unwrap();
    // Port 0: the kernel picks a free port when the server binds, and the
    // server says which; no port is picked first and bound later.
    let mut child = Command::new(BIN)
        .env_clear()
        .env("ACDM_DATA_DIR", dir.path())
        .env("ACDM_LISTEN_ADDR", "127.0.0.1:0")
        .env("ACDM_MCP_SERVICE_TOKEN", TOKEN)
        .env("ACDM_LOG_FORMAT", "json")
        .arg("serve")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read the log for the bound address, and keep all of it.
    let stderr = child.stderr.take().unwrap();
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let log = std::thread::spawn(move || {
        let mut text = String::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(addr) = listening_address(&line) {
                let _ = addr_tx.send(addr);
            }
            text.push_str(&line);
            text.push('\n');
        }
        text
    });
    // A generous guard against a binary that never starts: it waits for the
    // log line, not for a time.
    let socket = tokio::task::spawn_blocking(move || addr_rx.recv_timeout(Duration::from_secs(60)))
        .await
        .unwrap()
        .expect("the server logs the address it is listening on");
    assert_ne!(socket.port(), 0);
    assert_eq!(send(socket, Req::get("/readyz")).await.status, 200);

    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    // A real process cannot run on a paused clock: the guard is generous
    // (the drain's grace period is 10 s by default, and nothing is in
    // flight); what is checked is how it stops.
    let status = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::task::spawn_blocking(move || child.wait()),
    )
    .await
    .expect("stopped after SIGTERM")
    .unwrap()
    .unwrap();
    let stderr = log.join().unwrap();
    assert!(status.success(), "{status}: {stderr}");
    assert!(
        stderr.contains("SIGTERM received") && stderr.contains("\"stopped\""),
        "{stderr}"
    );
    assert!(!stderr.contains(TOKEN));
}

/// Starts `acdm-backend demo` in `dir` on port 0; returns the child,
/// the address and the service and admin tokens it printed.
async fn start_demo(dir: &Path) -> (std::process::Child, std::net::SocketAddr, String, String) {
    use std::io::{BufRead, BufReader};
    let mut child = Command::new(BIN)
        .env_clear()
        .env("ACDM_DATA_DIR", dir)
        // Port 0: the banner says which port the server bound.
        .env("ACDM_LISTEN_ADDR", "127.0.0.1:0")
        .env("ACDM_LOG_FORMAT", "json")
        .arg("demo")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(dir.join("demo.log")).unwrap())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    // Read the banner for the address and the tokens, then keep draining
    // standard output.
    let (tokens_tx, tokens_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut addr = None;
        let mut service = None;
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(a) = line.strip_prefix("acdm-backend demo is running on http://") {
                addr = a.trim().parse::<std::net::SocketAddr>().ok();
            }
            if let Some(t) = line.strip_prefix("export ACDM_MCP_SERVICE_TOKEN=") {
                service = Some(t.to_owned());
            }
            if let Some(t) = line.strip_prefix("export ACDM_ADMIN_TOKEN=") {
                let _ = tokens_tx.send((addr, service.clone().unwrap_or_default(), t.to_owned()));
            }
        }
    });
    let (addr, service, admin) =
        tokio::task::spawn_blocking(move || tokens_rx.recv_timeout(Duration::from_secs(30)))
            .await
            .unwrap()
            .expect("the demo printed its tokens");
    let addr = addr.expect("the banner names the bound address");
    assert_ne!(addr.port(), 0);
    (child, addr, service, admin)
}

fn stop(mut child: std::process::Child) {
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(child.wait().unwrap().success());
}

#[tokio::test]
async fn the_demo_provisions_samples_prints_tokens_and_serves() {
    use chrono::Datelike;
    let dir = tempfile::tempdir().unwrap();
    let started = chrono::Utc::now().date_naive();
    let (child, addr, service, admin) = start_demo(dir.path()).await;
    assert_eq!(service.len(), 64);
    assert_ne!(service, admin);
    assert_eq!(
        send(addr, Req::get("/readyz")).await.status,
        200,
        "ready: the demo token is in use"
    );
    let bearer = format!("Bearer {admin}");
    let project = send(
        addr,
        Req::get("/admin/projects/alpha").headers(&[("Authorization", &bearer)]),
    )
    .await
    .json();
    assert_eq!(project["data"]["name"], "Alpha");
    assert_eq!(project["data"]["agents"][0]["agent_name"], "project-alpha");
    assert_eq!(project["data"]["members"].as_array().unwrap().len(), 4);
    let service_header = [("X-ACDM-Service-Auth", service.as_str())];
    assert_ne!(
        send(addr, Req::new("POST", "/mcp").headers(&service_header))
            .await
            .status,
        401
    );
    // The business data is there for agents, as the banner's call shows.
    let agent = [
        ("X-ACDM-Service-Auth", service.as_str()),
        ("X-ACDM-User-Id", "u-alice"),
        ("X-ACDM-Agent-Name", "project-alpha"),
        ("X-ACDM-Thread-Id", "demo-1"),
    ];
    let meetings = send(
        addr,
        Req::new("POST", "/agent-tools/business/list_meetings")
            .headers(&agent)
            .json("{}"),
    )
    .await
    .json();
    assert_eq!(meetings["data"]["total_count"], 6, "{meetings}");
    let mut statuses: Vec<String> = send(
        addr,
        Req::new("POST", "/agent-tools/business/list_reports")
            .headers(&agent)
            .json("{}"),
    )
    .await
    .json()["data"]["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["status"].as_str().unwrap().to_owned())
        .collect();
    statuses.sort();
    assert_eq!(statuses, ["approved", "draft", "rejected", "submitted"]);
    let events_path = "/admin/events?project=alpha&limit=500";
    let recorded = send(
        addr,
        Req::get(events_path).headers(&[("Authorization", &bearer)]),
    )
    .await
    .json()["data"]["events"]
        .as_array()
        .unwrap()
        .len();
    assert!(recorded >= 20, "{recorded} business events");
    stop(child);
    let files = dir.path().join("files/Projects/Alpha");
    assert!(files.join("meetings/2026-11-03-kickoff.md").is_file());
    assert!(dir.path().join("wiki/guides/weekly-reports.md").is_file());

    // A second run keeps what the user changed, provisions nothing twice
    // and serves with the same tokens, kept in the data dir for the owner
    // only, so the exports of another terminal keep working.
    std::fs::write(files.join("README.md"), "edited by hand").unwrap();
    let (child, addr, service_again, admin_again) = start_demo(dir.path()).await;
    assert_eq!(
        (&service_again, &admin_again),
        (&service, &admin),
        "a restart keeps the demo's tokens"
    );
    let kept = dir.path().join("demo-tokens.env");
    let text = std::fs::read_to_string(&kept).unwrap();
    assert!(text.contains(&format!("export ACDM_MCP_SERVICE_TOKEN={service}")));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&kept).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    }
    let admin = admin_again;
    let bearer = format!("Bearer {admin}");
    let projects = send(
        addr,
        Req::get("/admin/projects").headers(&[("Authorization", &bearer)]),
    )
    .await
    .json();
    assert_eq!(projects["data"].as_array().unwrap().len(), 1);
    // Its business data was found as written: no new event (unless the
    // week turned between the two runs, which moves the meetings).
    let again = send(
        addr,
        Req::get(events_path).headers(&[("Authorization", &bearer)]),
    )
    .await
    .json()["data"]["events"]
        .as_array()
        .unwrap()
        .len();
    let same_week = chrono::Utc::now().date_naive().iso_week() == started.iso_week();
    if same_week {
        assert_eq!(again, recorded, "a second run records nothing");
    }
    stop(child);
    assert_eq!(
        std::fs::read_to_string(files.join("README.md")).unwrap(),
        "edited by hand"
    );
}

#[test]
fn the_demo_refuses_to_write_samples_into_a_real_nextcloud() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(
        dir.path(),
        &[
            ("NEXTCLOUD_URL", "https://cloud.example.com"),
            ("NEXTCLOUD_USER", "svc"),
        ],
        &["demo"],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("unset GITLAB_WIKI_BASE_URL and NEXTCLOUD_URL")
    );
}

#[tokio::test]
async fn events_list_as_a_table_and_are_named_by_a_short_prefix() {
    let dir = tempfile::tempdir().unwrap();
    let app = crate::helpers::spawn_app(crate::helpers::Options {
        data_dir: Some(dir.path().to_owned()),
        ..crate::helpers::Options::default()
    })
    .await;
    crate::admin::alpha_with_writes(&app, 2).await;
    app.stop().await;
    let d = dir.path();

    let listed = json(&run(d, &[], &["events", "list"]));
    let ids: Vec<String> = listed["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids.len(), 2, "{listed}");

    let table = run(d, &[], &["events", "list", "--human"]);
    assert!(table.status.success(), "{table:?}");
    let text = String::from_utf8(table.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(lines[0].starts_with("ID "), "{text}");
    for (line, file) in lines[1..].iter().zip(["1.md", "0.md"]) {
        for cell in [
            "applied",
            "nc_write",
            "alpha",
            "u-1 via project-alpha",
            &format!("project:/notes/{file}"),
        ] {
            assert!(line.contains(cell), "{cell} in {line}");
        }
    }
    assert!(lines[1].starts_with(&ids[0][..8]), "{text}");

    // A unique prefix names the event, as git's short ids do.
    let shown = json(&run(d, &[], &["events", "show", &ids[1][..8]]));
    assert_eq!(shown["id"], ids[1].as_str());
    let short = run(d, &[], &["events", "show", &ids[1][..3]]);
    assert_eq!(short.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&short.stderr);
    assert!(stderr.contains("at least 4 characters"), "{stderr}");
}

#[test]
fn the_kill_switch_from_the_cli_says_when_running_servers_follow_and_who_set_it() {
    let dir = tempfile::tempdir().unwrap();
    let off = json(&run(
        dir.path(),
        &[("ACDM_SCOPE_POLL_MILLIS", "1500")],
        &["kill-switch", "off", "--reason", "drill", "--user", "u-ops"],
    ));
    assert_eq!(off["nc_writes_enabled"], false, "{off}");
    assert_eq!(off["operator"]["user_id"], "u-ops", "{off}");
    assert_eq!(off["running_servers_follow_within_ms"], 1500, "{off}");
    let said = off["takes_effect"].as_str().unwrap_or_default();
    assert!(
        said.contains("within 1500 ms") && said.contains("ACDM_SCOPE_POLL_MILLIS"),
        "{off}"
    );
}
