//! `acdm-cluster`: the production shape of `deploy/` on loopback, and the
//! cluster suite against it. Started by `cargo xtask cluster`, which builds
//! the service's binary and this one, installs the test tools and passes the
//! paths:
//!
//! ```text
//! acdm-cluster up   --backend <acdm-backend> --root <workspace> --work <folder> [--replicas N] [--set KEY=VALUE]…
//! acdm-cluster test --backend <acdm-backend> --root <workspace> --work <folder> [--replicas N] [--set KEY=VALUE]…
//! ```
//!
//! `up` starts the cluster ([`harness`]), prints its addresses and runs
//! until Ctrl-C; `test` runs the suite ([`suite`]) and exits 1 if a check
//! failed.
//!
//! ```text
//! acdm-cluster bench --backend <release binary> --work <folder> [--database sqlite|postgres://…] [--seconds N] …
//! ```
//!
//! `bench` is the HTTP bench of `cargo xtask bench http` ([`bench`]): one
//! release replica against an nginx upstream, next to an nginx one-hop
//! proxy as the floor, driven by wrk; it prints its tables and exits 1 if
//! an answer failed. `--set` gives every replica a setting (`--set
//! ACDM_SCOPE_POLL_MILLIS=500`); `--postgres` names another server than
//! `postgres://postgres@127.0.0.1:5432`.

#![expect(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "a command-line harness: printing addresses and the suite's report is its job"
)]

mod bench;
mod harness;
mod load;
mod nginx;
mod process;
mod suite;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, anyhow, bail};

use crate::harness::{AGENT, Cluster, MEMBER, OWNER, PROJECT, SLUG, Spec};

/// What to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Up,
    Test,
}

/// The parsed command line.
struct Args {
    mode: Mode,
    spec: Spec,
}

const USAGE: &str = "usage: acdm-cluster (up|test) --backend PATH --root PATH --work PATH \
                     [--replicas N] [--postgres URL] [--set KEY=VALUE]...\n       \
                     acdm-cluster bench --backend PATH --work PATH [--database URL] [--seconds N] ...";

fn parse(args: &[String]) -> Result<Args> {
    let (mode, rest) = match args.split_first() {
        Some((m, rest)) if m == "up" => (Mode::Up, rest),
        Some((m, rest)) if m == "test" => (Mode::Test, rest),
        _ => bail!("{USAGE}"),
    };
    let (mut backend, mut root, mut work) = (None, None, None);
    let mut replicas = 3;
    let mut postgres = "postgres://postgres@127.0.0.1:5432".to_owned();
    let mut settings = Vec::new();
    let mut iter = rest.iter();
    while let Some(flag) = iter.next() {
        let mut value = || {
            iter.next()
                .cloned()
                .ok_or_else(|| anyhow!("{flag} needs a value\n{USAGE}"))
        };
        match flag.as_str() {
            "--backend" => backend = Some(PathBuf::from(value()?)),
            "--root" => root = Some(PathBuf::from(value()?)),
            "--work" => work = Some(PathBuf::from(value()?)),
            "--replicas" => {
                replicas = value()?
                    .parse()
                    .context("--replicas takes a whole number")?;
            }
            "--postgres" => postgres = value()?,
            "--set" => {
                let pair = value()?;
                let (key, val) = pair
                    .split_once('=')
                    .ok_or_else(|| anyhow!("--set takes KEY=VALUE, got `{pair}`"))?;
                settings.push((key.to_owned(), val.to_owned()));
            }
            other => bail!("unknown argument `{other}`\n{USAGE}"),
        }
    }
    let missing = |name: &str| anyhow!("{name} is required\n{USAGE}");
    let work = work.ok_or_else(|| missing("--work"))?;
    if mode == Mode::Test && replicas < 2 {
        bail!("the cluster suite needs at least 2 replicas (3 in CI)");
    }
    Ok(Args {
        mode,
        spec: Spec {
            replicas,
            backend: backend.ok_or_else(|| missing("--backend"))?,
            root: root.ok_or_else(|| missing("--root"))?,
            postgres,
            dir: work.join(format!("run-{}", std::process::id())),
            settings,
        },
    })
}

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // The harness's HTTP clients build on rustls (plain HTTP here).
    let _ = rustls::crypto::ring::default_provider().install_default();
    if let Some(("bench", rest)) = args.split_first().map(|(m, rest)| (m.as_str(), rest)) {
        return match bench::main(rest).await {
            Ok(true) => ExitCode::SUCCESS,
            Ok(false) => ExitCode::FAILURE,
            Err(error) => {
                eprintln!("acdm-cluster bench: {error:#}");
                ExitCode::FAILURE
            }
        };
    }
    let args = match parse(&args) {
        Ok(args) => args,
        Err(error) => {
            eprintln!("{error:#}");
            return ExitCode::from(2);
        }
    };
    let result = match args.mode {
        Mode::Up => up(&args.spec).await,
        Mode::Test => test(&args.spec).await,
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(error) => {
            eprintln!("acdm-cluster: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Starts the cluster, prints where everything is, waits for Ctrl-C.
async fn up(spec: &Spec) -> Result<bool> {
    println!(
        "starting {} replicas of {} behind nginx, on PostgreSQL…",
        spec.replicas,
        spec.backend.display()
    );
    let cluster = Cluster::start(spec).await?;
    print_addresses(&cluster);
    println!("\nCtrl-C stops everything and drops the database.");
    tokio::signal::ctrl_c()
        .await
        .context("cannot wait for Ctrl-C")?;
    println!("\nstopping: balancer, replicas (SIGTERM), WebDAV server, database");
    cluster.stop().await?;
    let _ = std::fs::remove_dir_all(&spec.dir);
    Ok(true)
}

fn print_addresses(cluster: &Cluster) {
    let balancer = cluster.balancer_url();
    println!("\nacdm cluster ready (folder {})", cluster.dir.display());
    println!("  balancer  {balancer}   (MCP: {balancer}/mcp)");
    for (index, replica) in cluster.replicas.iter().enumerate() {
        println!(
            "  replica {index} http://{}   log {}",
            replica.addr,
            replica.log.display()
        );
    }
    println!("  database  {}", cluster.database_url());
    println!(
        "  webdav    http://{}/remote.php/dav/files/u/   (folder {})",
        cluster.dav.addr,
        cluster.dav.root.display()
    );
    println!(
        "  nginx     {} (from deploy/nginx.conf), access log {}",
        cluster.nginx.config.display(),
        cluster.dir.join("nginx").join("access.log").display()
    );
    println!(
        "  project   {SLUG} \"{PROJECT}\", agent {AGENT}, users {OWNER} (owner), {MEMBER} (member)"
    );
    println!("\nexport ACDM_BACKEND_URL={balancer}");
    println!("export ACDM_MCP_SERVICE_TOKEN={}", cluster.service_token);
    println!("export ACDM_ADMIN_TOKEN={}", cluster.admin_token);
    println!(
        "curl -s -H \"X-ACDM-Service-Auth: $ACDM_MCP_SERVICE_TOKEN\" -H 'X-ACDM-User-Id: {MEMBER}' \
         -H 'X-ACDM-Agent-Name: {AGENT}' -H 'X-ACDM-Thread-Id: t1' -H 'Content-Type: application/json' \
         -d '{{\"rel_path\":\"\"}}' $ACDM_BACKEND_URL/agent-tools/nc/list"
    );
}

/// Starts the cluster, runs the suite, stops the cluster; false if a check
/// failed (the run folder is then kept for its logs).
async fn test(spec: &Spec) -> Result<bool> {
    println!(
        "cluster suite: {} replicas of {} behind nginx (deploy/nginx.conf), PostgreSQL, wsgidav",
        spec.replicas,
        spec.backend.display()
    );
    let mut spec = spec.clone();
    spec.settings = suite::SETTINGS
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .chain(spec.settings)
        .collect();
    let mut cluster = Cluster::start(&spec).await?;
    print_addresses(&cluster);
    let report = suite::run(&mut cluster).await;
    report.print();
    cluster.stop().await?;
    if report.failed() == 0 {
        let _ = std::fs::remove_dir_all(&spec.dir);
        Ok(true)
    } else {
        println!("logs kept in {}", spec.dir.display());
        Ok(false)
    }
}
