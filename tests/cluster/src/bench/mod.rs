//! `acdm-cluster bench`: the HTTP bench of `cargo xtask bench http` — the
//! service's hot path against the physical floor of a hop on this machine.
//!
//! It starts, on loopback:
//!
//! - the upstream: Debian's nginx serving Nextcloud's WebDAV (a 4 KiB
//!   file, a folder of 21 files, `PROPFIND` through `dav_ext`) and unified
//!   search, and GitLab's blob search and raw files, from a folder
//!   ([`upstream`]);
//! - the floor: a second nginx that only proxies to the first, over
//!   kept-alive connections;
//! - one release `acdm-backend serve` whose GitLab and Nextcloud are that
//!   upstream, on SQLite (its data folder) or, with `--database URL`, on a
//!   PostgreSQL database of its own (`acdm_bench_http_<pid>`, created on
//!   that server and dropped at the end), with the rate limits on and far
//!   above the throughput (every call pays for the check, none is refused)
//!   and the project `alpha`, its member and its agent provisioned through
//!   `/admin`.
//!
//! Then, at each concurrency (16, 32, 64, 256 and 1024 by default; the
//! levels above [`SWEEP_BASE`] measured for half the seconds), wrk drives
//! every [`scenario`] in turn — the floor and the targets' two scenarios
//! first and again, mirrored, last — for a warm-up and a measured run, and
//! the block's table is printed: req/s, p50, p99, the ratio to the floor,
//! the p99 over the floor's, the hop's CPU time (the service's, or the
//! floor's nginx's) per answer and as cores busy over the measured window,
//! and the failures. At the end, the sweep: every scenario at every
//! concurrency, and its req/s at each level as a share of its req/s at
//! [`SWEEP_BASE`] ([`report::sweep`]). With `--upstream-cap 32,1024` the
//! whole run is made once per `ACDM_UPSTREAM_MAX_CONNECTIONS`, the service
//! restarted between them, so the cap's cost shows side by side.
//! After the [`TAIL_AT`] block the floor and the targets run once more,
//! open-loop at one offered rate ([`paced`]). The service's resident
//! memory is read idle and after each concurrency; the targets
//! are read off the end. Exit status 1 when any answer failed (the table says which and
//! how), never for a figure.

mod paced;
mod procfs;
mod report;
mod scenario;
mod upstream;
mod wrk;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use rustix::process::Signal;
use tokio::process::Command;

use crate::bench::report::{Block, MemoryLog, Row};
use crate::bench::scenario::{FLOOR, FLOOR_AGAIN, Scenario, TARGETS, Target, again};
use crate::bench::wrk::Load;
use crate::harness::{Database, free_port, http_client, provision, random_token};
use crate::nginx::Nginx;
use crate::process::{Process, log_tail};

/// The command line.
const USAGE: &str = "usage: acdm-cluster bench --backend PATH --work PATH [--database sqlite|postgres://USER@HOST:PORT] \
                     [--seconds N] [--warmup N] [--concurrency 16,32,64,256,1024] [--threads N] [--offered F] \
                     [--upstream-cap N,M] [--only TEXT,TEXT] [--set KEY=VALUE]... [--keep]";

/// The concurrency the others are read against in the sweep: the highest
/// the benches ran at before issue 41, and the level above which runs are
/// measured for half the seconds.
pub(crate) const SWEEP_BASE: usize = 64;

/// The concurrencies measured when none are named.
const DEFAULT_CONCURRENCY: [usize; 5] = [16, 32, SWEEP_BASE, 256, 1024];

/// The concurrency the tail target names: after its block, the floor and
/// the targets' scenarios run again open-loop at a fixed offered rate.
pub(crate) const TAIL_AT: usize = 32;

/// The bench's settings.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Options {
    /// The release binary.
    backend: PathBuf,
    /// Where run folders go.
    work: PathBuf,
    /// `None`: SQLite; else the PostgreSQL server to make a database on.
    postgres: Option<String>,
    /// Seconds measured per scenario.
    seconds: u64,
    /// Seconds of warm-up before each.
    warmup: u64,
    /// The concurrencies, in order.
    concurrency: Vec<usize>,
    /// wrk's threads.
    threads: usize,
    /// The open-loop runs' offered rate, as a fraction of the floor's
    /// closed-loop req/s at [`TAIL_AT`]; 0: no open-loop runs.
    offered: f64,
    /// Keep the run folder (logs, scripts, the upstream's files) even
    /// when every answer succeeded.
    keep: bool,
    /// The service's `ACDM_UPSTREAM_MAX_CONNECTIONS`, one whole run each;
    /// `None`: its default, unset.
    caps: Vec<Option<usize>>,
    /// Only the scenarios whose name holds one of these (case
    /// insensitive), besides the floor; empty: every scenario.
    only: Vec<String>,
    /// Settings given to the service on top of the bench's.
    settings: Vec<(String, String)>,
}

impl Options {
    /// Seconds measured at `concurrency`: half as long above
    /// [`SWEEP_BASE`] (at least one), so the two levels the sweep adds
    /// cost little more than one did.
    fn seconds_at(&self, concurrency: usize) -> u64 {
        if concurrency > SWEEP_BASE {
            (self.seconds / 2).max(1)
        } else {
            self.seconds
        }
    }

    /// The most connections any run opens.
    fn most_connections(&self) -> usize {
        self.concurrency.iter().copied().max().unwrap_or(0)
    }
}

/// A comma-separated list of positive whole numbers.
fn counts(text: &str, flag: &str) -> Result<Vec<usize>> {
    text.split(',')
        .map(|c| {
            c.trim()
                .parse::<usize>()
                .ok()
                .filter(|c| *c > 0)
                .ok_or_else(|| anyhow!("{flag} takes numbers like 16,32,64, not `{text}`"))
        })
        .collect()
}

/// The server part of a PostgreSQL URL (`postgres://u@h:p/db?x` →
/// `postgres://u@h:p`): the bench makes its own database there.
fn server_of(url: &str) -> Result<String> {
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| anyhow!("`{url}` is not a postgres:// URL"))?;
    if scheme != "postgres" && scheme != "postgresql" {
        bail!("`{url}` is not a postgres:// URL (or `sqlite`)");
    }
    let authority = rest.split(['/', '?']).next().unwrap_or_default();
    if authority.is_empty() {
        bail!("`{url}` names no server");
    }
    Ok(format!("{scheme}://{authority}"))
}

/// Parses the bench's arguments.
pub(crate) fn parse(args: &[String]) -> Result<Options> {
    let (mut backend, mut work, mut postgres) = (None, None, None);
    let (mut seconds, mut warmup, mut threads) = (10, 2, 2);
    let mut concurrency = DEFAULT_CONCURRENCY.to_vec();
    let mut offered = 0.25;
    let mut keep = false;
    let mut caps = vec![None];
    let mut only = Vec::new();
    let mut settings = Vec::new();
    let mut iter = args.iter();
    while let Some(flag) = iter.next() {
        let mut value = || {
            iter.next()
                .cloned()
                .ok_or_else(|| anyhow!("{flag} needs a value\n{USAGE}"))
        };
        let number = |text: String| -> Result<u64> {
            text.parse()
                .with_context(|| format!("{flag} takes a whole number, not `{text}`"))
        };
        match flag.as_str() {
            "--backend" => backend = Some(PathBuf::from(value()?)),
            "--work" => work = Some(PathBuf::from(value()?)),
            "--database" => {
                let url = value()?;
                postgres = if url == "sqlite" {
                    None
                } else {
                    Some(server_of(&url)?)
                };
            }
            "--seconds" => seconds = number(value()?)?,
            "--warmup" => warmup = number(value()?)?,
            "--threads" => threads = usize::try_from(number(value()?)?)?,
            "--concurrency" => concurrency = counts(&value()?, flag)?,
            "--upstream-cap" => {
                caps = counts(&value()?, flag)?.into_iter().map(Some).collect();
            }
            "--only" => {
                only = value()?
                    .split(',')
                    .map(|t| t.trim().to_lowercase())
                    .filter(|t| !t.is_empty())
                    .collect();
            }
            "--set" => {
                let pair = value()?;
                let (key, val) = pair
                    .split_once('=')
                    .ok_or_else(|| anyhow!("--set takes KEY=VALUE, not `{pair}`"))?;
                settings.push((key.to_owned(), val.to_owned()));
            }
            "--offered" => {
                let text = value()?;
                offered = text
                    .parse::<f64>()
                    .ok()
                    .filter(|f| (0.0..=1.0).contains(f))
                    .ok_or_else(|| {
                        anyhow!("--offered takes a fraction of the floor's req/s from 0 to 1, not `{text}`")
                    })?;
            }
            "--keep" => keep = true,
            other => bail!("unknown argument `{other}`\n{USAGE}"),
        }
    }
    if seconds == 0 || threads == 0 {
        bail!("--seconds and --threads must be at least 1");
    }
    let missing = |name: &str| anyhow!("{name} is required\n{USAGE}");
    // nginx reads its paths from its prefix: every path is made absolute.
    let absolute = |path: PathBuf| std::path::absolute(&path).unwrap_or(path);
    Ok(Options {
        backend: absolute(backend.ok_or_else(|| missing("--backend"))?),
        work: absolute(work.ok_or_else(|| missing("--work"))?),
        postgres,
        seconds,
        warmup,
        concurrency,
        threads,
        offered,
        keep,
        caps,
        only,
        settings,
    })
}

/// The rate limits: on, far above what one machine serves, so every call
/// pays for the check and none is refused.
const RATE_LIMITS: [(&str, &str); 6] = [
    ("ACDM_BFF_RATE_PER_MINUTE", "1000000"),
    ("ACDM_BFF_RATE_BURST", "1000000"),
    ("ACDM_BFF_WRITE_RATE_PER_MINUTE", "1000000"),
    ("ACDM_BFF_WRITE_RATE_BURST", "1000000"),
    ("ACDM_MCP_TOOL_RATE_PER_MINUTE", "1000000"),
    ("ACDM_MCP_TOOL_RATE_BURST", "1000000"),
];

/// Everything running.
struct Rig {
    upstream: Nginx,
    floor: Nginx,
    service: Process,
    service_addr: SocketAddr,
    /// The service's environment, but for the upstream cap.
    service_env: Vec<(String, String)>,
    backend: PathBuf,
    token: String,
    database: Option<Database>,
    dir: PathBuf,
}

/// The service's connection cap (`ACDM_MAX_CONNECTIONS`) for runs of at
/// most `most` connections: twice that, at least the service's default
/// (512), so that no run's connections wait in the listen backlog behind
/// the cap (they would never be served: wrk keeps its connections open).
fn connection_cap(most: usize) -> usize {
    most.saturating_mul(2).max(512)
}

/// File descriptors a run at `most` connections needs in each of wrk,
/// the floor's nginx and the service: a client end and an upstream end
/// per connection, and some for everything else.
fn descriptors_needed(most: usize) -> u64 {
    u64::try_from(most)
        .unwrap_or(u64::MAX)
        .saturating_mul(2)
        .saturating_add(256)
}

/// Raises this process's open-file limit to its hard limit (the children
/// — wrk, both nginx, the service — inherit it) and says whether it
/// covers runs of `most` connections.
fn raise_file_limit(most: usize) -> Result<u64> {
    use rustix::process::{Resource, getrlimit, setrlimit};
    // `None` is no limit.
    let mut limit = getrlimit(Resource::Nofile);
    if limit.current != limit.maximum {
        limit.current = limit.maximum;
        setrlimit(Resource::Nofile, limit).context("cannot raise the open-file limit")?;
    }
    let current = getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX);
    let needed = descriptors_needed(most);
    if current < needed {
        bail!(
            "the open-file limit is {current}, below the {needed} a run at C={most} needs \
             (raise it: ulimit -n {needed})"
        );
    }
    Ok(current)
}

impl Rig {
    /// Seeds the upstream's files, starts both nginx, the database and the
    /// service (with the first of the options' upstream caps), provisions
    /// the project.
    async fn start(options: &Options, dir: &Path) -> Result<Self> {
        if !options.backend.is_file() {
            bail!(
                "no backend binary at {} (cargo build --release -p acdm-backend)",
                options.backend.display()
            );
        }
        if !Path::new(upstream::DAV_EXT_MODULE).is_file() {
            bail!(
                "nginx's dav_ext module is not installed at {} (Debian: apt-get install libnginx-mod-http-dav-ext; `cargo xtask setup` does)",
                upstream::DAV_EXT_MODULE
            );
        }
        std::fs::create_dir_all(dir)?;
        let layout = upstream::seed(dir)?;
        let upstream_addr = SocketAddr::from(([127, 0, 0, 1], free_port()?));
        let upstream_dir = dir.join("upstream");
        let upstream = Nginx::run(
            &upstream_dir,
            upstream_addr,
            &upstream::upstream_config(
                &upstream_dir,
                upstream_addr,
                &layout,
                options.most_connections(),
            ),
        )
        .await
        .context("the upstream nginx did not start")?;
        let floor_addr = SocketAddr::from(([127, 0, 0, 1], free_port()?));
        let floor_dir = dir.join("floor");
        let floor = Nginx::run(
            &floor_dir,
            floor_addr,
            &upstream::proxy_config(
                &floor_dir,
                floor_addr,
                upstream_addr,
                options.most_connections(),
            ),
        )
        .await
        .context("the floor's nginx did not start")?;
        let database = match &options.postgres {
            Some(server) => Some(Database::create(
                server,
                &format!("acdm_bench_http_{}", std::process::id()),
            )?),
            None => None,
        };
        let token = random_token()?;
        let admin_token = random_token()?;
        let service_addr = SocketAddr::from(([127, 0, 0, 1], free_port()?));
        let upstream_url = format!("http://{upstream_addr}");
        let mut env: Vec<(String, String)> = [
            ("ACDM_LISTEN_ADDR", service_addr.to_string()),
            ("ACDM_DATA_DIR", dir.join("data").display().to_string()),
            ("ACDM_MCP_SERVICE_TOKEN", token.clone()),
            ("ACDM_ADMIN_TOKEN", admin_token.clone()),
            ("ACDM_LOCAL_SOURCES", "false".to_owned()),
            ("NEXTCLOUD_URL", upstream_url.clone()),
            ("NEXTCLOUD_USER", upstream::DAV_USER.to_owned()),
            ("NEXTCLOUD_APP_PASSWORD", upstream::DAV_PASSWORD.to_owned()),
            ("NEXTCLOUD_BASE_PATH", "/Projects".to_owned()),
            ("GITLAB_WIKI_BASE_URL", upstream_url),
            (
                "GITLAB_WIKI_PROJECT_ID",
                upstream::GITLAB_PROJECT.to_owned(),
            ),
            ("GITLAB_WIKI_PAT", "bench-gitlab-token".to_owned()),
            ("ACDM_SHUTDOWN_PRESTOP_SECONDS", "0".to_owned()),
            ("ACDM_LOG_FORMAT", "json".to_owned()),
            (
                "ACDM_MAX_CONNECTIONS",
                connection_cap(options.most_connections()).to_string(),
            ),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        env.extend(
            RATE_LIMITS
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
        );
        if let Some(db) = &database {
            env.push(("DATABASE_URL".to_owned(), db.url()));
        }
        for (key, value) in &options.settings {
            env.retain(|(k, _)| k != key);
            env.push((key.clone(), value.clone()));
        }
        let service = spawn_service(
            &options.backend,
            &env,
            options.caps.first().copied().flatten(),
            dir,
        )?;
        let mut rig = Self {
            upstream,
            floor,
            service,
            service_addr,
            service_env: env,
            backend: options.backend.clone(),
            token,
            database,
            dir: dir.to_owned(),
        };
        rig.wait_ready().await?;
        let http = http_client()?;
        provision(&http, &format!("http://{service_addr}"), &admin_token)
            .await
            .context("provisioning the project through /admin")?;
        Ok(rig)
    }

    /// Stops the service and starts it again with upstream cap `cap`, on
    /// the same data (the project stays provisioned).
    async fn restart_service(&mut self, cap: Option<usize>) -> Result<()> {
        self.service
            .stop(Signal::TERM, Duration::from_secs(15))
            .await;
        self.service = spawn_service(&self.backend, &self.service_env, cap, &self.dir)?;
        self.wait_ready().await
    }

    /// Waits until the service answers `/readyz` with 200.
    async fn wait_ready(&mut self) -> Result<()> {
        let http = http_client()?;
        let url = format!("http://{}/readyz", self.service_addr);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            if http
                .get(&url)
                .send()
                .await
                .is_ok_and(|r| r.status().as_u16() == 200)
            {
                return Ok(());
            }
            if let Some(status) = self.service.exited() {
                bail!(
                    "the service exited ({status}) before it was ready:\n{}",
                    self.service.log_tail(30)
                );
            }
            if tokio::time::Instant::now() > deadline {
                bail!(
                    "the service was not ready within 60 s:\n{}",
                    log_tail(&self.dir.join("service.log"), 30)
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Where `target` listens.
    fn addr(&self, target: Target) -> SocketAddr {
        match target {
            Target::Upstream => self.upstream.addr,
            Target::Floor => self.floor.addr,
            Target::Service => self.service_addr,
        }
    }

    /// The process whose CPU time a scenario on `target` costs: the hop.
    fn hop_pid(&self, target: Target) -> Option<i32> {
        match target {
            Target::Upstream => None,
            Target::Floor => Some(self.floor.pid()),
            Target::Service => Some(self.service.pid()),
        }
    }

    /// Sends every scenario once and checks the answer, so a rig that
    /// cannot answer fails with the answer before any load.
    async fn preflight(&self, scenarios: &[Scenario]) -> Result<()> {
        let http = http_client()?;
        for scenario in scenarios {
            let url = format!("http://{}{}", self.addr(scenario.target), scenario.path);
            let method = reqwest::Method::from_bytes(scenario.request.method.as_bytes())?;
            let mut request = http.request(method, url);
            for (name, value) in &scenario.request.headers {
                request = request.header(name, value);
            }
            if let Some(body) = &scenario.request.body {
                request = request.body(body.clone());
            }
            let response = request
                .send()
                .await
                .with_context(|| format!("{}: no answer", scenario.name))?;
            let status = response.status().as_u16();
            let body = response.text().await.unwrap_or_default();
            scenario
                .judge
                .check(status, &body)
                .map_err(|why| anyhow!("{}: {why}", scenario.name))?;
        }
        Ok(())
    }

    /// A warm-up and a measured run of `scenario` at `concurrency`,
    /// closed-loop, or open-loop at `offered` req/s.
    async fn measure(
        &self,
        options: &Options,
        scenario: &Scenario,
        name: &str,
        concurrency: usize,
        offered: Option<f64>,
    ) -> Result<Row> {
        let addr = self.addr(scenario.target);
        let hop = self.hop_pid(scenario.target);
        let driver = match offered {
            None => {
                let scripts = self.dir.join("scripts");
                std::fs::create_dir_all(&scripts)?;
                let script = scripts.join(format!("{}.lua", slug(scenario.name)));
                std::fs::write(
                    &script,
                    wrk::script(scenario.name, &scenario.request, &scenario.judge),
                )?;
                Driver::Wrk {
                    script,
                    log: self.dir.join("wrk.log"),
                    threads: options.threads,
                }
            }
            Some(rate) => Driver::Paced(rate),
        };
        // Open-loop, every run sees the same arrivals: the warm-up one
        // stream, each measured run another.
        let warm = if options.warmup > 0 {
            Some(
                driver
                    .run(scenario, addr, concurrency, options.warmup, 2)
                    .await?,
            )
        } else {
            None
        };
        let cpu_before = hop.map(procfs::cpu_time);
        let mut figures = driver
            .run(
                scenario,
                addr,
                concurrency,
                options.seconds_at(concurrency),
                1,
            )
            .await?;
        let cpu = hop
            .zip(cpu_before)
            .map(|(pid, before)| procfs::cpu_time(pid).saturating_sub(before));
        if let Some(warm) = &warm {
            figures = figures.with_failures_of(warm);
        }
        Ok(Row::new(name, figures, cpu))
    }

    /// Every scenario at `concurrency`, closed-loop, in the order of
    /// [`plan`]; or, at `offered` req/s, the floor and the targets'
    /// scenarios open-loop in the same mirrored order.
    async fn block(
        &self,
        options: &Options,
        scenarios: &[Scenario],
        concurrency: usize,
        offered: Option<f64>,
        cap: Option<usize>,
    ) -> Result<Block> {
        let mut rows = Vec::new();
        for (scenario, name) in plan(scenarios, offered.is_none()) {
            match offered {
                Some(rate) => eprintln!("  C={concurrency} at {rate:.0} req/s: {name}"),
                None => eprintln!("  C={concurrency}: {name}"),
            }
            rows.push(
                self.measure(options, scenario, &name, concurrency, offered)
                    .await?,
            );
        }
        Ok(Block {
            concurrency,
            offered,
            cap,
            rows,
        })
    }

    /// Stops the service (SIGTERM: no pre-stop delay here), both nginx,
    /// and drops the database.
    async fn stop(mut self) -> Result<()> {
        self.service
            .stop(Signal::TERM, Duration::from_secs(15))
            .await;
        self.floor.stop().await;
        self.upstream.stop().await;
        if let Some(db) = self.database.as_mut() {
            db.drop_now()?;
        }
        Ok(())
    }
}

/// Starts the service with `env` and, when given, the upstream cap `cap`;
/// its output goes to the run folder's `service.log`.
fn spawn_service(
    backend: &Path,
    env: &[(String, String)],
    cap: Option<usize>,
    dir: &Path,
) -> Result<Process> {
    let mut command = Command::new(backend);
    command
        .arg("serve")
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)));
    if let Some(cap) = cap {
        command.env("ACDM_UPSTREAM_MAX_CONNECTIONS", cap.to_string());
    }
    Process::spawn("acdm-backend", command, &dir.join("service.log"))
}

/// The runs of a block, in order, with the name each is shown under, in
/// mirrored order so that each measured pair is centred on the block and
/// well apart: the floor, the targets' scenarios, every other scenario
/// (when `others`), the targets' scenarios again (the last first), the
/// floor again.
fn plan(scenarios: &[Scenario], others: bool) -> Vec<(&Scenario, String)> {
    let find = |name: &str| scenarios.iter().find(|s| s.name == name);
    let firsts: Vec<&Scenario> = std::iter::once(FLOOR)
        .chain(TARGETS)
        .filter_map(find)
        .collect();
    let mut runs: Vec<(&Scenario, String)> =
        firsts.iter().map(|s| (*s, s.name.to_owned())).collect();
    runs.extend(
        scenarios
            .iter()
            .filter(|s| others && s.name != FLOOR && !TARGETS.contains(&s.name))
            .map(|s| (s, s.name.to_owned())),
    );
    for scenario in firsts.iter().rev() {
        let name = if scenario.name == FLOOR {
            FLOOR_AGAIN.to_owned()
        } else {
            again(scenario.name)
        };
        runs.push((scenario, name));
    }
    runs
}

/// A file name for a scenario's script.
fn slug(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_matches('-').to_owned()
}

/// The first line of a program's `-v` output (nginx and wrk print to
/// standard error).
fn version_of(program: &str, arg: &str) -> String {
    std::process::Command::new(program)
        .arg(arg)
        .output()
        .ok()
        .and_then(|out| {
            let text = [out.stdout, out.stderr].concat();
            String::from_utf8_lossy(&text)
                .lines()
                .next()
                .map(str::to_owned)
        })
        .unwrap_or_else(|| format!("{program}: not found"))
}

/// The load average, to read the run's noise by.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|text| {
            text.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|| "?".to_owned())
}

/// Runs the bench; false when an answer failed.
pub(crate) async fn main(args: &[String]) -> Result<bool> {
    let options = parse(args)?;
    let dir = options.work.join(format!("run-{}", std::process::id()));
    let database = match &options.postgres {
        Some(server) => format!(
            "PostgreSQL (database acdm_bench_http_{} on {server})",
            std::process::id()
        ),
        None => "SQLite".to_owned(),
    };
    println!("HTTP bench: the hot path against an nginx one-hop floor, on {database}");
    println!(
        "  {} cores, load average {} | {} | {} | wrk {} threads, {} s measured ({} above C={SWEEP_BASE}) after a {} s warm-up per run",
        std::thread::available_parallelism().map_or(0, usize::from),
        load_average(),
        version_of("nginx", "-v"),
        version_of("wrk", "-v")
            .split(" Copyright")
            .next()
            .unwrap_or_default(),
        options.threads,
        options.seconds,
        options.seconds_at(usize::MAX),
        options.warmup,
    );
    println!(
        "  backend {} (rate limits on at 1000000/min), run folder {}",
        options.backend.display(),
        dir.display()
    );
    let limit = raise_file_limit(options.most_connections())?;
    println!(
        "  open-file limit {limit}; the service's ACDM_MAX_CONNECTIONS {}; upstream caps: {}{}",
        connection_cap(options.most_connections()),
        options
            .caps
            .iter()
            .map(|c| cap_text(*c))
            .collect::<Vec<_>>()
            .join(", "),
        if options.settings.is_empty() {
            String::new()
        } else {
            format!(
                "; settings {}",
                options
                    .settings
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            )
        }
    );
    let mut rig = Rig::start(&options, &dir).await?;
    let outcome = run(&mut rig, &options, &database).await;
    let stopped = rig.stop().await;
    let failed = match outcome {
        Ok(failed) => failed,
        Err(error) => {
            println!("logs kept in {}", dir.display());
            return Err(error);
        }
    };
    stopped?;
    if failed == 0 {
        if options.keep {
            println!("run folder kept: {}", dir.display());
        } else {
            let _ = std::fs::remove_dir_all(&dir);
        }
        Ok(true)
    } else {
        println!(
            "\nFAILED: {failed} answers failed (see the FAILED lines above); logs kept in {}",
            dir.display()
        );
        Ok(false)
    }
}

/// What sends a run's requests.
enum Driver {
    /// wrk, closed-loop, with the scenario's script; its reports go to `log`.
    Wrk {
        script: PathBuf,
        log: PathBuf,
        threads: usize,
    },
    /// The harness's open-loop generator, at this many req/s.
    Paced(f64),
}

impl Driver {
    /// One run of `scenario` against `addr` for `seconds` over
    /// `concurrency` connections (open-loop, the arrivals of stream
    /// `seed`, on a thread of its own).
    async fn run(
        &self,
        scenario: &Scenario,
        addr: SocketAddr,
        concurrency: usize,
        seconds: u64,
        seed: u64,
    ) -> Result<wrk::Figures> {
        let duration = Duration::from_secs(seconds);
        match self {
            Self::Wrk {
                script,
                log,
                threads,
            } => {
                let load = Load {
                    connections: concurrency,
                    threads: *threads,
                    duration,
                };
                wrk::run(load, script, addr, &scenario.path, log).await
            }
            Self::Paced(rate) => {
                let open = paced::Open {
                    connections: concurrency,
                    rate: *rate,
                    duration,
                    seed,
                };
                let (request, judge, path) = (
                    scenario.request.clone(),
                    scenario.judge.clone(),
                    scenario.path.clone(),
                );
                tokio::task::spawn_blocking(move || {
                    paced::run(&open, &request, &judge, addr, &path)
                })
                .await
                .context("the open-loop run's thread")?
            }
        }
    }
}

/// The offered rate of the open-loop runs after a closed-loop `block`:
/// `fraction` of its floor's req/s, at [`TAIL_AT`] only; none when the
/// fraction is 0 or the floor was not measured.
fn open_loop_rate(block: &Block, fraction: f64) -> Option<f64> {
    (block.concurrency == TAIL_AT && block.offered.is_none() && fraction > 0.0)
        .then(|| block.floor())
        .flatten()
        .map(|floor| floor.rate * fraction)
        .filter(|rate| *rate >= 1.0)
}

/// The measurements on a started rig, once per upstream cap; the number
/// of failed answers.
async fn run(rig: &mut Rig, options: &Options, database: &str) -> Result<u64> {
    let scenarios: Vec<Scenario> = scenario::scenarios(&rig.token)
        .into_iter()
        .filter(|s| chosen(s, &options.only))
        .collect();
    rig.preflight(&scenarios).await?;
    let mut memory = MemoryLog::default();
    let mut blocks = Vec::new();
    for (index, &cap) in options.caps.iter().enumerate() {
        if index > 0 {
            eprintln!(
                "restarting the service with ACDM_UPSTREAM_MAX_CONNECTIONS={}…",
                cap_text(cap)
            );
            rig.restart_service(cap).await?;
        }
        // The memory targets are read off the first cap's run.
        let moment = |text: String| match index {
            0 => text,
            _ => format!("{text} (upstream cap {})", cap_text(cap)),
        };
        let pid = rig.service.pid();
        memory.note(moment(report::IDLE.to_owned()), procfs::memory(pid));
        let heading = |extra: &str| {
            format!(
                "{database}, upstream cap {}, load average {}{extra}",
                cap_text(cap),
                load_average()
            )
        };
        for &concurrency in &options.concurrency {
            eprintln!(
                "measuring at C={concurrency}, upstream cap {}…",
                cap_text(cap)
            );
            let block = rig
                .block(options, &scenarios, concurrency, None, cap)
                .await?;
            memory.note(moment(report::after(concurrency)), procfs::memory(pid));
            println!("\n{}", block.table(&heading("")));
            let offered = open_loop_rate(&block, options.offered);
            blocks.push(block);
            if let Some(rate) = offered {
                eprintln!("measuring at C={concurrency}, open-loop at {rate:.0} req/s…");
                let paced = rig
                    .block(options, &scenarios, concurrency, Some(rate), cap)
                    .await?;
                println!(
                    "\n{}",
                    paced.table(&heading(&format!(
                        "; {:.2} × the floor's closed-loop req/s above",
                        options.offered
                    )))
                );
                blocks.push(paced);
            }
        }
    }
    println!("{}", memory.line());
    println!(
        "\n{}",
        report::sweep(
            &blocks,
            &format!("{database}, load average {}", load_average())
        )
    );
    let first_cap: Vec<Block> = blocks
        .iter()
        .filter(|b| b.cap == options.caps.first().copied().flatten())
        .cloned()
        .collect();
    println!("\n{}", report::targets(&first_cap, &memory));
    Ok(blocks.iter().map(Block::failures).sum())
}

/// An upstream cap as the tables show it.
pub(crate) fn cap_text(cap: Option<usize>) -> String {
    cap.map_or_else(|| "default".to_owned(), |c| c.to_string())
}

/// Whether `scenario` runs under `--only` (the floor always does).
fn chosen(scenario: &Scenario, only: &[String]) -> bool {
    let name = scenario.name.to_lowercase();
    only.is_empty() || scenario.name == FLOOR || only.iter().any(|o| name.contains(o.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(text: &str) -> Vec<String> {
        text.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn the_defaults_are_sqlite_ten_seconds_and_five_concurrencies_up_to_1024() {
        let options = parse(&args("--backend /b --work /w")).unwrap();
        assert_eq!(options.postgres, None);
        assert_eq!(
            (options.seconds, options.warmup, options.threads),
            (10, 2, 2)
        );
        assert_eq!(options.concurrency, [16, 32, 64, 256, 1024]);
        assert_eq!(options.caps, [None]);
        assert!(options.only.is_empty() && options.settings.is_empty());
        // The levels above C=64 are measured for half as long.
        assert_eq!(
            options
                .concurrency
                .iter()
                .map(|c| options.seconds_at(*c))
                .collect::<Vec<_>>(),
            [10, 10, 10, 5, 5]
        );
        assert_eq!(options.most_connections(), 1024);
        assert!((options.offered - 0.25).abs() < 1e-12);
        assert!(!options.keep);
        let off = parse(&args("--backend /b --work /w --offered 0")).unwrap();
        assert!(off.offered.abs() < 1e-12);
        assert!(parse(&args("--backend /b --work /w --keep")).unwrap().keep);
    }

    #[test]
    fn a_postgres_url_names_the_server_the_bench_makes_its_database_on() {
        let options = parse(&args(
            "--backend /b --work /w --database postgres://postgres@127.0.0.1:5432/acdm_bench_http?sslmode=disable \
             --seconds 3 --warmup 0 --concurrency 8,32 --threads 1",
        ))
        .unwrap();
        assert_eq!(
            options.postgres.as_deref(),
            Some("postgres://postgres@127.0.0.1:5432")
        );
        assert_eq!(
            (options.seconds, options.warmup, options.threads),
            (3, 0, 1)
        );
        assert_eq!(options.concurrency, [8, 32]);
        assert_eq!(
            server_of("postgresql://u@h:1").unwrap(),
            "postgresql://u@h:1"
        );
        assert!(server_of("mysql://u@h/x").is_err());
        assert!(server_of("postgres:///x").is_err());
        let sqlite = parse(&args("--backend /b --work /w --database sqlite")).unwrap();
        assert_eq!(sqlite.postgres, None);
    }

    #[test]
    fn upstream_caps_scenarios_and_settings_are_named_on_the_command_line() {
        let options = parse(&args(
            "--backend /b --work /w --upstream-cap 32,1024 --only healthz,NC/read \
             --set ACDM_CONNECTION_THREADS=1 --set A=b=c --seconds 1",
        ))
        .unwrap();
        assert_eq!(options.caps, [Some(32), Some(1024)]);
        assert_eq!(options.only, ["healthz", "nc/read"]);
        assert_eq!(
            options.settings,
            [
                ("ACDM_CONNECTION_THREADS".to_owned(), "1".to_owned()),
                ("A".to_owned(), "b=c".to_owned())
            ]
        );
        // Never less than a second, above C=64 too.
        assert_eq!((options.seconds_at(16), options.seconds_at(1024)), (1, 1));
        let all = scenario::scenarios("t");
        let picked: Vec<&str> = all
            .iter()
            .filter(|s| chosen(s, &options.only))
            .map(|s| s.name)
            .collect();
        assert_eq!(
            picked,
            [FLOOR, "service GET /healthz", scenario::NC_READ],
            "the floor always runs"
        );
        assert_eq!(all.iter().filter(|s| chosen(s, &[])).count(), all.len());
        assert_eq!(cap_text(None), "default");
        assert_eq!(cap_text(Some(32)), "32");
    }

    #[test]
    fn runs_of_many_connections_get_the_descriptors_and_the_service_cap_they_need() {
        // The service's own cap (512 by default) would leave half of a
        // C=1024 run's connections in the listen backlog, never served.
        assert_eq!(connection_cap(16), 512);
        assert_eq!(connection_cap(1024), 2048);
        assert_eq!(descriptors_needed(1024), 2304);
        assert!(descriptors_needed(16) < 1024);
        // This process's limit is raised to its hard limit, which a run
        // of one connection never exceeds.
        assert!(raise_file_limit(1).unwrap() >= descriptors_needed(1));
    }

    #[test]
    fn bad_arguments_are_refused() {
        for bad in [
            "--work /w",
            "--backend /b",
            "--backend /b --work /w --seconds x",
            "--backend /b --work /w --seconds 0",
            "--backend /b --work /w --concurrency 16,,64",
            "--backend /b --work /w --concurrency 0",
            "--backend /b --work /w --frobnicate",
            "--backend /b --work /w --database",
            "--backend /b --work /w --offered 1.5",
            "--backend /b --work /w --offered -0.1",
            "--backend /b --work /w --offered half",
            "--backend /b --work /w --upstream-cap 0",
            "--backend /b --work /w --upstream-cap many",
            "--backend /b --work /w --set NOEQUALS",
        ] {
            assert!(parse(&args(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_block_runs_the_floor_and_the_targets_twice_in_mirrored_order() {
        use scenario::{MCP_READ_FILE, NC_READ};
        let scenarios = scenario::scenarios("token");
        let plan = plan(&scenarios, true);
        let names: Vec<&str> = plan.iter().map(|(_, n)| n.as_str()).collect();
        let n = names.len();
        assert_eq!(n, scenarios.len() + 3, "{names:?}");
        assert_eq!(&names[..3], &[FLOOR, NC_READ, MCP_READ_FILE]);
        assert_eq!(
            &names[n - 3..],
            &[
                again(MCP_READ_FILE).as_str(),
                again(NC_READ).as_str(),
                FLOOR_AGAIN
            ]
        );
        // Every scenario runs, the others once, in their order.
        let others: Vec<&str> = scenarios
            .iter()
            .map(|s| s.name)
            .filter(|name| *name != FLOOR && !TARGETS.contains(name))
            .collect();
        assert_eq!(&names[3..n - 3], &others[..]);
        // Each pair is centred on the block.
        for (first, second) in [(0, n - 1), (1, n - 2), (2, n - 3)] {
            assert_eq!(first + second, n - 1);
            assert!(std::ptr::eq(plan[first].0, plan[second].0));
        }
        // Each run sends its own scenario's request.
        for (scenario, name) in &plan {
            assert!(
                *name == scenario.name
                    || *name == again(scenario.name)
                    || (name == FLOOR_AGAIN && scenario.name == FLOOR),
                "{name} runs {}",
                scenario.name
            );
        }
        // Open-loop, only the floor and the targets run, in the same
        // mirrored order.
        let open: Vec<String> = super::plan(&scenarios, false)
            .into_iter()
            .map(|(_, name)| name)
            .collect();
        assert_eq!(
            open,
            [
                FLOOR.to_owned(),
                NC_READ.to_owned(),
                MCP_READ_FILE.to_owned(),
                again(MCP_READ_FILE),
                again(NC_READ),
                FLOOR_AGAIN.to_owned()
            ]
        );
    }

    #[test]
    fn the_open_loop_runs_follow_the_tail_block_at_a_fraction_of_its_floor() {
        use crate::bench::wrk::Figures;
        let floor = |name: &str, requests: u64| report::Row {
            name: name.to_owned(),
            figures: Figures {
                requests,
                duration: Duration::from_secs(10),
                ..Figures::default()
            },
            cpu_us: None,
            cpu_cores: None,
        };
        let block = |concurrency: usize, offered: Option<f64>| Block {
            concurrency,
            offered,
            cap: None,
            rows: vec![floor(FLOOR, 400_000), floor(FLOOR_AGAIN, 600_000)],
        };
        // The floor's mean: 50,000 req/s.
        let rate = open_loop_rate(&block(TAIL_AT, None), 0.25).unwrap();
        assert!((rate - 12_500.0).abs() < 1e-6, "{rate}");
        assert_eq!(open_loop_rate(&block(16, None), 0.25), None);
        assert_eq!(open_loop_rate(&block(64, None), 0.25), None);
        assert_eq!(open_loop_rate(&block(TAIL_AT, None), 0.0), None);
        assert_eq!(open_loop_rate(&block(TAIL_AT, Some(1000.0)), 0.25), None);
        let no_floor = Block {
            concurrency: TAIL_AT,
            offered: None,
            cap: None,
            rows: Vec::new(),
        };
        assert_eq!(open_loop_rate(&no_floor, 0.25), None);
    }

    #[test]
    fn script_names_are_slugs_of_scenario_names() {
        assert_eq!(
            slug("MCP acdm_read_nextcloud_file (4 KiB)"),
            "mcp-acdm-read-nextcloud-file-4-kib"
        );
        assert_eq!(
            slug("floor: nginx one hop (GET 4 KiB)"),
            "floor-nginx-one-hop-get-4-kib"
        );
    }
}
