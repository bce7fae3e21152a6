//! The cluster: the production shape of `deploy/` on loopback.
//!
//! - a PostgreSQL database of its own on the local server
//!   (`acdm_cluster_<pid>`, created at start and dropped at the end);
//! - the real WebDAV server (wsgidav from `.test-tools/venv`, started by
//!   `acdm-test-support`'s launcher, the test suites' own) serving a
//!   folder at Nextcloud's DAV path, as the replicas' Nextcloud;
//! - N replicas of the service's binary (`acdm-backend serve`), migrated
//!   once beforehand like the compose file's `migrate` service, each on a
//!   loopback port, sharing one data folder (the local wiki stands in for
//!   GitLab, which has no server here);
//! - nginx with `deploy/nginx.conf` ([`crate::nginx`]) in front of them.
//!
//! The project `alpha` (folder `Alpha`), its members and its agent are
//! provisioned through the operator API of replica 0. Each child's output
//! goes to a file in the run folder (`replica-<i>.log`, `nginx/`,
//! `webdav/wsgidav.log`).

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::time::Duration;

use acdm_harness_client::{ClientConfig, HarnessClient};
use acdm_test_support::{DAV_PASSWORD, DAV_USER, Wsgidav};
use anyhow::{Context, Result, anyhow, bail};
use rustix::process::Signal;
use secrecy::SecretString;
use serde_json::{Value, json};
use tokio::process::Command;

use crate::nginx::Nginx;
use crate::process::{Process, log_tail};

/// The project every check works in.
pub(crate) const SLUG: &str = "alpha";
/// Its display name, also its folder under `/Projects`.
pub(crate) const PROJECT: &str = "Alpha";
/// Its agent.
pub(crate) const AGENT: &str = "project-alpha";
/// Its owner.
pub(crate) const OWNER: &str = "u-alice";
/// A member (members write files).
pub(crate) const MEMBER: &str = "u-bob";
/// The `Host` values the replicas' MCP endpoint accepts: the compose
/// file's list (nginx sends `Host: acdm-backend`).
const ALLOWED_HOSTS: &str = "acdm-backend,localhost,127.0.0.1";
/// How long a replica may take to become ready.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a replica may take to stop on SIGTERM before it is killed:
/// the default grace period (10 s) and some.
const STOP_GRACE: Duration = Duration::from_secs(15);

/// What to start.
#[derive(Debug, Clone)]
pub(crate) struct Spec {
    /// How many replicas.
    pub(crate) replicas: usize,
    /// The service's binary (`acdm-backend`).
    pub(crate) backend: PathBuf,
    /// The workspace root (for `deploy/nginx.conf`, `.test-tools/`).
    pub(crate) root: PathBuf,
    /// The PostgreSQL server, without a database
    /// (`postgres://postgres@127.0.0.1:5432`).
    pub(crate) postgres: String,
    /// The run folder (created; logs, data, configuration).
    pub(crate) dir: PathBuf,
    /// Settings every replica gets on top of the cluster's own
    /// (`ACDM_SCOPE_POLL_MILLIS=500`, …).
    pub(crate) settings: Vec<(String, String)>,
}

/// A database of the cluster's (or the HTTP bench's) own on the local
/// server; dropped (with any connection still open) when the cluster
/// stops, or when the value is dropped.
pub(crate) struct Database {
    server: String,
    name: String,
    dropped: bool,
}

impl Database {
    /// Creates the database `name` on `server` (a URL without a database,
    /// `postgres://postgres@127.0.0.1:5432`), dropping one of that name first.
    pub(crate) fn create(server: &str, name: &str) -> Result<Self> {
        let db = Self {
            server: server.trim_end_matches('/').to_owned(),
            name: name.to_owned(),
            dropped: false,
        };
        db.psql(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))?;
        db.psql(&format!("CREATE DATABASE {name}"))?;
        Ok(db)
    }

    /// Its URL.
    pub(crate) fn url(&self) -> String {
        format!("{}/{}", self.server, self.name)
    }

    fn psql(&self, sql: &str) -> Result<()> {
        let output = std::process::Command::new("psql")
            .arg(format!("{}/postgres", self.server))
            .args(["-v", "ON_ERROR_STOP=1", "-q", "-c", sql])
            .output()
            .context("cannot run psql (Debian: postgresql-client)")?;
        if !output.status.success() {
            bail!(
                "psql `{sql}` on {} failed: {}",
                self.server,
                String::from_utf8_lossy(&output.stderr).trim()
            );
        }
        Ok(())
    }

    /// Drops it now (at most once).
    pub(crate) fn drop_now(&mut self) -> Result<()> {
        if !self.dropped {
            self.dropped = true;
            self.psql(&format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            ))?;
        }
        Ok(())
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        let _ = self.drop_now();
    }
}

/// One replica: its address stays the same across restarts (it is in
/// nginx's upstream list).
pub(crate) struct Replica {
    /// Where it listens.
    pub(crate) addr: SocketAddr,
    /// Its log (JSON lines, appended across restarts).
    pub(crate) log: PathBuf,
    process: Option<Process>,
}

/// The running cluster.
pub(crate) struct Cluster {
    /// The run folder.
    pub(crate) dir: PathBuf,
    backend: PathBuf,
    /// The workspace root.
    pub(crate) root: PathBuf,
    /// What every replica's environment holds (but its listen address).
    env: Vec<(String, String)>,
    /// Settings a check gives the replicas on top of `env` until it
    /// restarts them without ([`Cluster::restart_all_with`]).
    extra: Vec<(String, String)>,
    db: Database,
    /// The WebDAV server (its folder `webdav/` in the run folder).
    pub(crate) dav: Wsgidav,
    /// The replicas, by index.
    pub(crate) replicas: Vec<Replica>,
    /// The balancer.
    pub(crate) nginx: Nginx,
    /// `ACDM_MCP_SERVICE_TOKEN`.
    pub(crate) service_token: String,
    /// `ACDM_ADMIN_TOKEN`.
    pub(crate) admin_token: String,
    /// A plain HTTP client (probes, `/admin`, MCP).
    pub(crate) http: reqwest::Client,
}

impl Cluster {
    /// Starts everything and provisions the project; on error, whatever
    /// was started is stopped again.
    pub(crate) async fn start(spec: &Spec) -> Result<Self> {
        if spec.replicas == 0 {
            bail!("a cluster needs at least one replica");
        }
        if !spec.backend.is_file() {
            bail!(
                "no backend binary at {} (cargo xtask cluster builds it)",
                spec.backend.display()
            );
        }
        std::fs::create_dir_all(&spec.dir)?;
        let service_token = random_token()?;
        let admin_token = random_token()?;
        let db = Database::create(
            &spec.postgres,
            &format!("acdm_cluster_{}", std::process::id()),
        )?;
        let dav = Wsgidav::start_in(&spec.dir.join("webdav"))
            .await
            .map_err(|why| anyhow!(why))?;
        let data = spec.dir.join("data");
        seed(&data, &project_folder(&dav))?;
        let mut env: Vec<(String, String)> = [
            ("DATABASE_URL", db.url()),
            ("ACDM_DATA_DIR", data.display().to_string()),
            ("ACDM_MCP_SERVICE_TOKEN", service_token.clone()),
            ("ACDM_ADMIN_TOKEN", admin_token.clone()),
            ("ACDM_MCP_ALLOWED_HOSTS", ALLOWED_HOSTS.to_owned()),
            ("NEXTCLOUD_URL", format!("http://{}", dav.addr)),
            ("NEXTCLOUD_USER", DAV_USER.to_owned()),
            ("NEXTCLOUD_APP_PASSWORD", DAV_PASSWORD.to_owned()),
            ("NEXTCLOUD_BASE_PATH", "/Projects".to_owned()),
            ("ACDM_LOG_FORMAT", "json".to_owned()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        for (key, value) in &spec.settings {
            env.retain(|(k, _)| k != key);
            env.push((key.clone(), value.clone()));
        }
        let mut replicas = Vec::with_capacity(spec.replicas);
        for index in 0..spec.replicas {
            replicas.push(Replica {
                addr: SocketAddr::from(([127, 0, 0, 1], free_port()?)),
                log: spec.dir.join(format!("replica-{index}.log")),
                process: None,
            });
        }
        let upstreams: Vec<SocketAddr> = replicas.iter().map(|r| r.addr).collect();
        let balancer = SocketAddr::from(([127, 0, 0, 1], free_port()?));
        let nginx = Nginx::start(&spec.root, &spec.dir.join("nginx"), balancer, &upstreams).await?;
        let mut cluster = Self {
            dir: spec.dir.clone(),
            backend: spec.backend.clone(),
            root: spec.root.clone(),
            env,
            extra: Vec::new(),
            db,
            dav,
            replicas,
            nginx,
            service_token,
            admin_token,
            http: http_client()?,
        };
        // Like the compose file's `migrate` service: once, before the
        // replicas start.
        cluster.cli(&["migrate"]).await?;
        for index in 0..spec.replicas {
            cluster.spawn_replica(index)?;
        }
        for index in 0..spec.replicas {
            cluster.wait_ready(index).await?;
        }
        cluster.provision().await?;
        wait_until(
            Duration::from_secs(20),
            "the balancer to answer /readyz",
            || {
                let url = format!("{}/readyz", cluster.balancer_url());
                let http = cluster.http.clone();
                async move {
                    http.get(url)
                        .send()
                        .await
                        .is_ok_and(|r| r.status().as_u16() == 200)
                }
            },
        )
        .await?;
        Ok(cluster)
    }

    /// The balancer's base URL.
    pub(crate) fn balancer_url(&self) -> String {
        format!("http://{}", self.nginx.addr)
    }

    /// Replica `index`'s base URL.
    pub(crate) fn replica_url(&self, index: usize) -> Result<String> {
        Ok(format!("http://{}", self.replica(index)?.addr))
    }

    /// The database URL.
    pub(crate) fn database_url(&self) -> String {
        self.db.url()
    }

    fn replica(&self, index: usize) -> Result<&Replica> {
        self.replicas
            .get(index)
            .ok_or_else(|| anyhow!("no replica {index}"))
    }

    fn replica_mut(&mut self, index: usize) -> Result<&mut Replica> {
        self.replicas
            .get_mut(index)
            .ok_or_else(|| anyhow!("no replica {index}"))
    }

    /// The index of the replica at `addr` (`127.0.0.1:port`, as nginx logs it).
    pub(crate) fn replica_at(&self, addr: &str) -> Option<usize> {
        self.replicas
            .iter()
            .position(|r| r.addr.to_string() == addr)
    }

    /// Starts replica `index` (`serve`), without waiting for it.
    fn spawn_replica(&mut self, index: usize) -> Result<()> {
        let mut command = Command::new(&self.backend);
        command
            .arg("serve")
            .env_clear()
            .envs(self.env.iter().cloned())
            .envs(self.extra.iter().cloned());
        let replica = self.replica_mut(index)?;
        command.env("ACDM_LISTEN_ADDR", replica.addr.to_string());
        let process = Process::spawn(&format!("replica {index}"), command, &replica.log)?;
        replica.process = Some(process);
        Ok(())
    }

    /// Stops every replica (SIGINT: no pre-stop delay, in-flight requests
    /// finish) and starts them again with `settings` on top of the
    /// cluster's own (an empty list restores those), ready and in the
    /// balancer's rotation.
    pub(crate) async fn restart_all_with(&mut self, settings: &[(&str, &str)]) -> Result<()> {
        for index in 0..self.replicas.len() {
            if self.is_running(index) {
                self.signal(index, Signal::INT)?;
            }
        }
        for index in 0..self.replicas.len() {
            if !self.wait_exit(index, Duration::from_secs(30)).await? {
                bail!("replica {index} did not stop on SIGINT within 30 s");
            }
        }
        self.extra = settings
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        self.ensure_running().await?;
        Ok(())
    }

    /// Waits until replica `index` answers `/readyz` with 200.
    pub(crate) async fn wait_ready(&mut self, index: usize) -> Result<()> {
        let url = format!("{}/readyz", self.replica_url(index)?);
        let deadline = tokio::time::Instant::now() + READY_TIMEOUT;
        loop {
            let ready = self
                .http
                .get(&url)
                .send()
                .await
                .is_ok_and(|r| r.status().as_u16() == 200);
            if ready {
                return Ok(());
            }
            let replica = self.replica_mut(index)?;
            if let Some(process) = replica.process.as_mut()
                && let Some(status) = process.exited()
            {
                bail!(
                    "replica {index} exited ({status}) before it was ready:\n{}",
                    process.log_tail(30)
                );
            }
            if tokio::time::Instant::now() > deadline {
                bail!(
                    "replica {index} was not ready within {READY_TIMEOUT:?}:\n{}",
                    log_tail(&replica.log, 30)
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Sends `signal` to replica `index` (`Signal::KILL` for a crash,
    /// `Signal::TERM` for a drain).
    pub(crate) fn signal(&self, index: usize, signal: Signal) -> Result<()> {
        self.replica(index)?
            .process
            .as_ref()
            .ok_or_else(|| anyhow!("replica {index} is not running"))?
            .signal(signal)
    }

    /// Waits for at most `limit` until replica `index` has exited; true if it has.
    pub(crate) async fn wait_exit(&mut self, index: usize, limit: Duration) -> Result<bool> {
        Ok(match self.replica_mut(index)?.process.as_mut() {
            Some(process) => process.wait_for(limit).await.is_some(),
            None => true,
        })
    }

    /// Whether replica `index` is running.
    pub(crate) fn is_running(&mut self, index: usize) -> bool {
        self.replica_mut(index)
            .ok()
            .and_then(|r| r.process.as_mut())
            .is_some_and(|p| p.exited().is_none())
    }

    /// Starts every replica that is not running again, waits until each
    /// is ready and the balancer sends it requests again (nginx leaves a
    /// failed server out for `fail_timeout`, 10 s). Returns the restarted.
    pub(crate) async fn ensure_running(&mut self) -> Result<Vec<usize>> {
        let stopped = self.restart_stopped().await?;
        for &index in &stopped {
            self.wait_in_rotation(index).await?;
        }
        Ok(stopped)
    }

    /// Starts every replica that is not running again and waits until
    /// each is ready (not until the balancer uses it again). Returns the
    /// restarted.
    pub(crate) async fn restart_stopped(&mut self) -> Result<Vec<usize>> {
        let stopped: Vec<usize> = (0..self.replicas.len())
            .filter(|&i| !self.is_running(i))
            .collect();
        for &index in &stopped {
            self.spawn_replica(index)?;
        }
        for &index in &stopped {
            self.wait_ready(index).await?;
        }
        Ok(stopped)
    }

    /// Waits until the balancer sends a request to replica `index` again.
    async fn wait_in_rotation(&self, index: usize) -> Result<()> {
        let addr = self.replica(index)?.addr.to_string();
        let url = format!("{}/healthz", self.balancer_url());
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let mark = self.nginx.log.mark();
            for _ in 0..self.replicas.len() {
                let _ = self.http.get(&url).send().await;
            }
            let lines = self.nginx.log.since(mark);
            if lines
                .iter()
                .any(|l| l.status == 200 && l.answered_by() == Some(addr.as_str()))
            {
                return Ok(());
            }
            if tokio::time::Instant::now() > deadline {
                bail!("the balancer did not send replica {index} a request within 30 s");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Runs an operator command of the backend (`migrate`, `events
    /// reconcile`, …) against the cluster's database and file store;
    /// returns its standard output, or its error.
    pub(crate) async fn cli(&self, args: &[&str]) -> Result<String> {
        let output = Command::new(&self.backend)
            .args(args)
            .env_clear()
            .envs(self.env.iter().cloned())
            .output()
            .await
            .with_context(|| format!("cannot run acdm-backend {}", args.join(" ")))?;
        if !output.status.success() {
            bail!(
                "acdm-backend {} failed ({}): {}",
                args.join(" "),
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }

    /// An operator API call on replica `index`; the envelope, which must be
    /// a success.
    pub(crate) async fn admin(
        &self,
        index: usize,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value> {
        let base = self.replica_url(index)?;
        admin(&self.http, &base, &self.admin_token, method, path, body)
            .await
            .with_context(|| format!("on replica {index}"))
    }

    /// The harness client (the engine's client) against `base_url`.
    pub(crate) fn client(&self, base_url: &str) -> Result<HarnessClient> {
        let config = ClientConfig::new(
            base_url,
            Some(SecretString::from(self.service_token.clone())),
            Duration::from_secs(30),
        )?;
        Ok(HarnessClient::new(config)?)
    }

    /// Replica `index`'s `/metrics` text.
    pub(crate) async fn metrics(&self, index: usize) -> Result<String> {
        let url = format!("{}/metrics", self.replica_url(index)?);
        Ok(self.http.get(url).send().await?.text().await?)
    }

    /// Provisions the project, its members and its agent through replica 0.
    async fn provision(&self) -> Result<()> {
        provision(&self.http, &self.replica_url(0)?, &self.admin_token).await
    }

    /// Stops everything: the balancer, the replicas (SIGTERM), the WebDAV
    /// server; then drops the database.
    pub(crate) async fn stop(mut self) -> Result<()> {
        self.nginx.stop().await;
        for replica in &mut self.replicas {
            if let Some(process) = replica.process.as_mut() {
                process.stop(Signal::TERM, STOP_GRACE).await;
            }
        }
        // Killed and waited for when dropped.
        drop(self.dav);
        self.db.drop_now()
    }
}

/// An operator API call to the server at `base`; the envelope, which must
/// be a success.
pub(crate) async fn admin(
    http: &reqwest::Client,
    base: &str,
    admin_token: &str,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> Result<Value> {
    let mut request = http
        .request(method.clone(), format!("{base}{path}"))
        .bearer_auth(admin_token);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request
        .send()
        .await
        .with_context(|| format!("{method} {path}"))?;
    let status = response.status();
    let envelope: Value = response
        .json()
        .await
        .with_context(|| format!("{method} {path}: not JSON"))?;
    if !status.is_success() || envelope.get("success") != Some(&Value::Bool(true)) {
        bail!("{method} {path}: {status} {envelope}");
    }
    Ok(envelope)
}

/// Provisions the project `alpha` (folder `Alpha`), its owner, its member
/// and its agent through the operator API of the server at `base`.
pub(crate) async fn provision(http: &reqwest::Client, base: &str, admin_token: &str) -> Result<()> {
    let post = reqwest::Method::POST;
    let project = json!({ "slug": SLUG, "name": PROJECT });
    admin(
        http,
        base,
        admin_token,
        post.clone(),
        "/admin/projects",
        Some(project),
    )
    .await?;
    let members = format!("/admin/projects/{SLUG}/members");
    for (user, role) in [(OWNER, "owner"), (MEMBER, "member")] {
        let member = json!({ "user_id": user, "role": role });
        admin(
            http,
            base,
            admin_token,
            post.clone(),
            &members,
            Some(member),
        )
        .await?;
    }
    let agent = json!({ "agent_name": AGENT, "project": SLUG });
    admin(http, base, admin_token, post, "/admin/agents", Some(agent)).await?;
    Ok(())
}

/// Pages of the seeded wiki's handbook: a wiki of a real team's size, so
/// a wiki search takes as long as it would there (the local wiki is
/// searched file by file, as GitLab's blob search would be).
const HANDBOOK_PAGES: usize = 1000;

/// The project's folder on the WebDAV server's disk.
pub(crate) fn project_folder(dav: &Wsgidav) -> PathBuf {
    dav.root.join("Projects").join(PROJECT)
}

/// The wiki pages (the replicas' shared data folder) and the project's
/// files (on the WebDAV disk) every check reads.
fn seed(data: &Path, project: &Path) -> Result<()> {
    let wiki = data.join("wiki");
    let handbook = wiki.join("handbook");
    std::fs::create_dir_all(&handbook)?;
    let paragraph = "Decisions are written down where the team can find them; \
                     every meeting ends with its actions, owners and dates.\n";
    for page in 0..HANDBOOK_PAGES {
        let text = format!("# Handbook page {page}\n\n{}", paragraph.repeat(30));
        std::fs::write(handbook.join(format!("page-{page:04}.md")), text)?;
    }
    let files = [
        (
            wiki.join("guides").join("weekly-reports.md"),
            "# Weekly reports\n\nEvery Friday the project manager writes a weekly report.\n",
        ),
        (
            wiki.join("index.md"),
            "# Wiki\n\nSee guides/weekly-reports.md.\n",
        ),
        (
            project.join("README.md"),
            "# Alpha\n\nThe Alpha project's shared folder.\n",
        ),
        (
            project.join("notes").join("plan.md"),
            "# Plan\n\n1. Build\n2. Ship\n",
        ),
    ];
    for (path, text) in files {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

/// Polls `condition` until it holds, for at most `limit`.
pub(crate) async fn wait_until<F, Fut>(limit: Duration, what: &str, mut condition: F) -> Result<()>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if condition().await {
            return Ok(());
        }
        if tokio::time::Instant::now() > deadline {
            bail!("timed out after {limit:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A loopback port free at this moment.
pub(crate) fn free_port() -> Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// 32 random bytes as hex (a token the backend accepts).
pub(crate) fn random_token() -> Result<String> {
    use std::io::Read as _;
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// The plain HTTP client of the harness and the suite: no proxy from the
/// environment, no redirects, a 30 s budget per request.
pub(crate) fn http_client() -> Result<reqwest::Client> {
    #[expect(
        clippy::disallowed_methods,
        reason = "the cluster suite's own client, not an upstream client of the service"
    )]
    let client = reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .pool_max_idle_per_host(64)
        .timeout(Duration::from_secs(30))
        .build()?;
    Ok(client)
}
