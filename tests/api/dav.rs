//! The harness of the `nc` tests: a real WebDAV server (wsgidav, mounted at
//! Nextcloud's `/remote.php/dav/files/u` path and serving a temporary
//! folder), a recording reverse proxy in front of it, and the service
//! configured to use that proxy as its Nextcloud, with projects `alpha`
//! (folder `Alpha`) and `beta` (folder `Beta`) provisioned through the
//! operator API and a few files on the WebDAV disk.
//!
//! The proxy forwards every method with its headers and body, rewriting
//! only the authority of a `Destination` header, and records each request
//! as it arrived: the method, the raw (still percent-encoded) path and
//! query, and the raw `Destination`, `Depth` and `Overwrite` headers. The
//! assertions at the bottom judge that recording: every request lands —
//! decoded once, as sabre/dav decodes — inside one project's folder or its
//! trash, and no dot segment, encoded dot or slash, or backslash ever
//! reaches the upstream. (The only requests allowed outside those two
//! folders are a `MKCOL` or a depth-0 `PROPFIND` of their ancestors
//! `/Projects` and `/Projects/.acdm-trash`, which the file store sends when
//! it creates the trash folders level by level.) The recording is taken
//! before forwarding, so it shows what the service sent even where the
//! proxy's own URL parsing would normalise a path on the way on.
//!
//! Nextcloud's unified search (`/ocs/v2.php/search/…`) is not WebDAV:
//! the proxy answers it itself, with every name on the WebDAV disk that
//! contains the term — in every project, on purpose — plus a few hostile
//! paths, so the service's own scope filter is what is tested.
//!
//! wsgidav is installed by `cargo xtask setup` into `.test-tools/venv`
//! (`ACDM_WSGIDAV` overrides). Without it these tests say so and pass —
//! unless `ACDM_REQUIRE_WEBDAV` is set (CI), where its absence fails them.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use acdm_core::ToolResponse;
use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::helpers::{ADMIN_TOKEN, Options, TOKEN, TestApp, spawn_app};

use acdm_test_support::traversal;
pub(crate) use acdm_test_support::{DAV_PASSWORD, DAV_USER, Wsgidav};
use base64::Engine as _;
/// The user id, thread id and agents every `nc` call is made with.
pub(crate) const USER: &str = "u-1";
pub(crate) const THREAD: &str = "t-1";
pub(crate) const ALPHA: &str = "project-alpha";
pub(crate) const BETA: &str = "project-beta";
/// The DAV root of the user, as the upstream sees it.
/// The projects' base folder, as WebDAV path segments.
const PROJECTS: [&str; 5] = ["remote.php", "dav", "files", DAV_USER, "Projects"];
/// Methods that change something upstream.
pub(crate) const WRITE_METHODS: &[&str] = &[
    "PUT",
    "DELETE",
    "MOVE",
    "COPY",
    "MKCOL",
    "PROPPATCH",
    "LOCK",
    "UNLOCK",
    "POST",
    "PATCH",
];

// ---------------------------------------------------------------------------
// The recording proxy

/// One request as the proxy received it.
#[derive(Debug, Clone)]
pub(crate) struct Recorded {
    pub(crate) method: String,
    /// The raw path, still percent-encoded, exactly as received.
    pub(crate) path: String,
    pub(crate) query: Option<String>,
    /// The raw `Destination` header (MOVE, COPY).
    pub(crate) destination: Option<String>,
    pub(crate) depth: Option<String>,
    pub(crate) overwrite: Option<String>,
    /// What the upstream answered.
    pub(crate) status: u16,
    /// How long the upstream took, in milliseconds.
    pub(crate) millis: u64,
}

impl std::fmt::Display for Recorded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.method, self.path)?;
        if let Some(q) = &self.query {
            write!(f, "?{q}")?;
        }
        if let Some(d) = &self.destination {
            write!(f, " Destination: {d}")?;
        }
        if let Some(d) = &self.depth {
            write!(f, " Depth: {d}")?;
        }
        if let Some(o) = &self.overwrite {
            write!(f, " Overwrite: {o}")?;
        }
        write!(f, " -> {} in {} ms", self.status, self.millis)
    }
}

impl Recorded {
    pub(crate) fn is_write(&self) -> bool {
        WRITE_METHODS
            .iter()
            .any(|m| m.eq_ignore_ascii_case(&self.method))
    }

    pub(crate) fn is_search(&self) -> bool {
        self.path.starts_with("/ocs/")
    }
}

/// Everything the proxy has seen, in arrival order (by completion).
#[derive(Clone, Default)]
pub(crate) struct Recorder(Arc<Mutex<Vec<Recorded>>>);

impl Recorder {
    /// How many requests so far: a mark for [`Recorder::since`].
    pub(crate) fn mark(&self) -> usize {
        self.0.lock().unwrap().len()
    }

    /// The requests recorded after `mark`.
    pub(crate) fn since(&self, mark: usize) -> Vec<Recorded> {
        self.0
            .lock()
            .unwrap()
            .get(mark..)
            .map(<[Recorded]>::to_vec)
            .unwrap_or_default()
    }

    /// Every request so far.
    pub(crate) fn all(&self) -> Vec<Recorded> {
        self.since(0)
    }

    fn push(&self, r: Recorded) {
        self.0.lock().unwrap().push(r);
    }
}

#[derive(Clone)]
struct ProxyState {
    recorder: Recorder,
    client: reqwest::Client,
    /// `http://127.0.0.1:<proxy port>`, as the service writes Destinations.
    own_origin: String,
    upstream_origin: String,
    /// The WebDAV disk, for the fake unified search.
    disk: PathBuf,
}

/// The recording reverse proxy.
pub(crate) struct DavProxy {
    pub(crate) addr: SocketAddr,
    pub(crate) recorder: Recorder,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for DavProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[expect(
    clippy::disallowed_methods,
    reason = "the test proxy is not an upstream client of the service"
)]
fn proxy_client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .pool_max_idle_per_host(64)
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap()
}

impl DavProxy {
    /// Starts a proxy in front of `upstream`, which serves `disk`.
    pub(crate) async fn start(upstream: SocketAddr, disk: PathBuf) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let recorder = Recorder::default();
        let state = ProxyState {
            recorder: recorder.clone(),
            client: proxy_client(),
            own_origin: format!("http://{addr}"),
            upstream_origin: format!("http://{upstream}"),
            disk,
        };
        let app = Router::new().fallback(forward).with_state(state);
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Self {
            addr,
            recorder,
            task,
        }
    }
}

fn header(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
}

const HOP_BY_HOP: &[&str] = &[
    "host",
    "connection",
    "content-length",
    "transfer-encoding",
    "keep-alive",
    "te",
    "trailer",
    "upgrade",
    "proxy-connection",
];

async fn forward(State(state): State<ProxyState>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let path = parts.uri.path().to_owned();
    let query = parts.uri.query().map(str::to_owned);
    let destination = header(&parts.headers, "destination");
    let depth = header(&parts.headers, "depth");
    let overwrite = header(&parts.headers, "overwrite");
    let started = Instant::now();
    let record = |status: u16| Recorded {
        method: parts.method.as_str().to_owned(),
        path: path.clone(),
        query: query.clone(),
        destination: destination.clone(),
        depth: depth.clone(),
        overwrite: overwrite.clone(),
        status,
        millis: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
    };
    let bytes = axum::body::to_bytes(body, 256 << 20)
        .await
        .unwrap_or_default();

    if path.starts_with("/ocs/") {
        let response = fake_unified_search(&state.disk, query.as_deref().unwrap_or_default());
        state.recorder.push(record(200));
        return response;
    }

    let target = parts
        .uri
        .path_and_query()
        .map_or("/", axum::http::uri::PathAndQuery::as_str);
    let url = format!("{}{target}", state.upstream_origin);
    let mut builder = state.client.request(parts.method.clone(), url);
    for (name, value) in &parts.headers {
        let lower = name.as_str();
        if HOP_BY_HOP.contains(&lower) || lower == "destination" {
            continue;
        }
        builder = builder.header(name, value);
    }
    if let Some(d) = &destination {
        let rewritten = d.strip_prefix(&state.own_origin).map_or_else(
            || d.clone(),
            |rest| format!("{}{rest}", state.upstream_origin),
        );
        builder = builder.header("destination", rewritten);
    }
    let answer = match builder.body(bytes).send().await {
        Ok(answer) => answer,
        Err(e) => {
            state.recorder.push(record(599));
            return (StatusCode::BAD_GATEWAY, format!("proxy: {e}")).into_response();
        }
    };
    let status = answer.status();
    let headers = answer.headers().clone();
    let body = answer.bytes().await.unwrap_or_default();
    state.recorder.push(record(status.as_u16()));
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    for (name, value) in &headers {
        if HOP_BY_HOP.contains(&name.as_str()) {
            continue;
        }
        response.headers_mut().append(name, value.clone());
    }
    response
}

/// Nextcloud's `files` search provider over the whole WebDAV disk (names
/// only, case-insensitive), paged by an integer cursor, plus hostile paths.
fn fake_unified_search(disk: &Path, query: &str) -> Response {
    let mut term = String::new();
    let mut limit = 25usize;
    let mut cursor = 0usize;
    for (k, v) in url::form_urlencoded::parse(query.as_bytes()) {
        match k.as_ref() {
            "term" => term = v.into_owned(),
            "limit" => limit = v.parse().unwrap_or(25),
            "cursor" => cursor = v.parse().unwrap_or(0),
            _ => {}
        }
    }
    let needle = term.to_lowercase();
    let mut all: Vec<(String, bool)> = Vec::new();
    for (path, content) in snapshot(disk) {
        let name = path.rsplit('/').next().unwrap_or_default();
        if !needle.is_empty() && name.to_lowercase().contains(&needle) {
            all.push((format!("/{path}"), content.is_none()));
        }
    }
    if !needle.is_empty() {
        for hostile in [
            format!("/Projects/Alpha/../Beta/{term}-escape.md"),
            format!("/Projects/Alpha/%2e%2e/Beta/{term}-encoded.md"),
            format!("/Projects/Alpha-evil/{term}-sibling.md"),
            format!("/Projects/.acdm-trash/alpha/x/{term}-trash.md"),
            format!("/Projects/Alpha\\..\\Beta\\{term}-backslash.md"),
            format!("../../etc/{term}"),
        ] {
            all.push((hostile, false));
        }
    }
    let page: Vec<Value> = all
        .iter()
        .skip(cursor)
        .take(limit)
        .map(|(path, is_dir)| {
            json!({
                "thumbnailUrl": "",
                "title": path.rsplit('/').next().unwrap_or_default(),
                "subline": "",
                "resourceUrl": "",
                "icon": if *is_dir { "icon-folder" } else { "icon-filetype-text" },
                "rounded": false,
                "attributes": {"fileId": "1", "path": path},
            })
        })
        .collect();
    let next = cursor + page.len();
    let body = json!({"ocs": {
        "meta": {"status": "ok", "statuscode": 200, "message": "OK"},
        "data": {"name": "Files", "isPaginated": true, "cursor": next, "entries": page},
    }});
    axum::Json(body).into_response()
}

// ---------------------------------------------------------------------------
// The disk

/// Every file and folder under `root`: relative path (with `/`) → content
/// (`None` for a folder).
pub(crate) fn snapshot(root: &Path) -> BTreeMap<String, Option<Vec<u8>>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Option<Vec<u8>>>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let rel = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                out.insert(rel, None);
                walk(root, &path, out);
            } else {
                out.insert(rel, Some(std::fs::read(&path).unwrap_or_default()));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

/// The part of a snapshot outside `Projects/Alpha/` and
/// `Projects/.acdm-trash/alpha/`: what no call of agent alpha may change.
pub(crate) fn outside_alpha(
    all: &BTreeMap<String, Option<Vec<u8>>>,
) -> BTreeMap<String, Option<Vec<u8>>> {
    all.iter()
        .filter(|(k, _)| {
            !(k.as_str() == "Projects/Alpha"
                || k.starts_with("Projects/Alpha/")
                || k.as_str() == "Projects/.acdm-trash"
                || k.as_str() == "Projects/.acdm-trash/alpha"
                || k.starts_with("Projects/.acdm-trash/alpha/"))
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// The files seeded on the WebDAV disk (relative to its root).
pub(crate) const SEED: &[(&str, &[u8])] = &[
    ("Projects/Alpha/readme.md", b"# Alpha\nThe alpha project.\n"),
    ("Projects/Alpha/docs/plan.md", b"alpha plan\nline two\n"),
    (
        "Projects/Alpha/docs/a b#c%d.md",
        b"odd name: space, hash, percent\n",
    ),
    (
        "Projects/Alpha/docs/caf\u{e9} \u{fc}.txt",
        b"unicode name\n",
    ),
    ("Projects/Alpha/docs/sub/deep.txt", b"deep\n"),
    (
        "Projects/Alpha/image.bin",
        &[0x89, b'P', b'N', b'G', 0, 0xff, 0xfe, 0x80, 1, 2, 3],
    ),
    ("Projects/Alpha/ref/manual.md", b"read-only manual\n"),
    ("Projects/Beta/secret.md", b"beta secret plan\n"),
    ("Projects/Beta/docs/plan.md", b"beta plan\n"),
    (
        "Projects/Alpha-evil/plan.md",
        b"sibling folder, never touched\n",
    ),
    ("Projects/Alpha-evil/x.md", b"sibling x\n"),
    ("Projects/outside.md", b"between projects\n"),
];

// ---------------------------------------------------------------------------
// The service in front of it

/// wsgidav + proxy + the service, provisioned.
/// One database a test runs on ([`NcEnv::on_each_database`]).
pub(crate) struct DatabaseChoice {
    /// `sqlite` or `postgres`, for failure messages.
    pub(crate) name: &'static str,
    postgres: bool,
    extra_env: Vec<(&'static str, String)>,
}

impl DatabaseChoice {
    /// The environment on this database (`None` without wsgidav, as
    /// [`NcEnv::start`]); a PostgreSQL schema is made only now, and
    /// dropped by [`NcEnv::stop`].
    pub(crate) async fn start(self) -> Option<NcEnv> {
        let schema = match self.postgres {
            true => crate::helpers::PgSchema::create().await,
            false => None,
        };
        NcEnv::start_on(schema, self.extra_env).await
    }
}

pub(crate) struct NcEnv {
    pub(crate) app: TestApp,
    pub(crate) proxy: DavProxy,
    pub(crate) dav: Wsgidav,
    client: reqwest::Client,
    base: String,
    /// The engine's client: the agent calls of these tests go through it.
    pub(crate) harness: acdm_harness_client::HarnessClient,
    /// The PostgreSQL schema the service runs on, if not the embedded
    /// SQLite database.
    schema: Option<crate::helpers::PgSchema>,
}

#[expect(
    clippy::disallowed_methods,
    reason = "the test client is not an upstream client of the service"
)]
pub(crate) fn test_client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .pool_max_idle_per_host(64)
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap()
}

impl NcEnv {
    /// Starts everything with the default settings; `None` when wsgidav is
    /// not installed (and not required).
    pub(crate) async fn start() -> Option<Self> {
        Self::start_with(Vec::new()).await
    }

    /// Starts everything, with extra settings for the service.
    pub(crate) async fn start_with(extra_env: Vec<(&'static str, String)>) -> Option<Self> {
        Self::start_on(None, extra_env).await
    }

    /// Both databases: [`NcEnv::start_with`] on the embedded SQLite
    /// database, then on a PostgreSQL schema of its own when
    /// `ACDM_TEST_DATABASE_URL` names a server (one at a time: each is
    /// stopped before the next starts).
    pub(crate) async fn on_each_database(
        extra_env: Vec<(&'static str, String)>,
    ) -> Vec<DatabaseChoice> {
        #[expect(
            clippy::disallowed_methods,
            reason = "a test: CI names its PostgreSQL in the environment"
        )]
        let postgres = std::env::var("ACDM_TEST_DATABASE_URL").is_ok_and(|u| !u.trim().is_empty());
        let mut choices = vec![DatabaseChoice {
            name: "sqlite",
            postgres: false,
            extra_env: extra_env.clone(),
        }];
        if postgres {
            choices.push(DatabaseChoice {
                name: "postgres",
                postgres: true,
                extra_env,
            });
        }
        choices
    }

    /// Starts everything on `schema` (PostgreSQL), or SQLite without one.
    async fn start_on(
        schema: Option<crate::helpers::PgSchema>,
        extra_env: Vec<(&'static str, String)>,
    ) -> Option<Self> {
        let Some(dav) = Wsgidav::start().await else {
            if let Some(schema) = schema {
                schema.drop_now().await;
            }
            return None;
        };
        for (path, content) in SEED {
            let file = dav.root.join(path);
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(&file, content).unwrap();
        }
        let proxy = DavProxy::start(dav.addr, dav.root.clone()).await;
        let mut env = vec![
            ("NEXTCLOUD_URL", format!("http://{}/", proxy.addr)),
            ("NEXTCLOUD_USER", DAV_USER.to_owned()),
            ("NEXTCLOUD_APP_PASSWORD", DAV_PASSWORD.to_owned()),
            ("NEXTCLOUD_BASE_PATH", "/Projects".to_owned()),
            ("ACDM_UPSTREAM_TIMEOUT_SECONDS", "30".to_owned()),
        ];
        env.extend(extra_env);
        if let Some(schema) = &schema {
            env.push(("DATABASE_URL", schema.url.clone()));
        }
        let app = spawn_app(Options {
            extra_env: env,
            ..Options::default()
        })
        .await;
        let base = format!("http://{}", app.addr);
        let this = Self {
            app,
            proxy,
            dav,
            client: test_client(),
            harness: acdm_harness_client::HarnessClient::new(
                acdm_harness_client::ClientConfig::new(
                    &base,
                    Some(secrecy::SecretString::from(TOKEN.to_owned())),
                    Duration::from_secs(60),
                )
                .unwrap(),
            )
            .unwrap(),
            base,
            schema,
        };
        for (slug, name) in [("alpha", "Alpha"), ("beta", "Beta")] {
            let (status, body) = this
                .admin(
                    "POST",
                    "/admin/projects",
                    Some(json!({"slug": slug, "name": name})),
                )
                .await;
            assert_eq!(status, 200, "create project {slug}: {body}");
        }
        for (agent, project) in [(ALPHA, "alpha"), (BETA, "beta")] {
            let (status, body) = this
                .admin(
                    "POST",
                    "/admin/agents",
                    Some(json!({"agent_name": agent, "project": project})),
                )
                .await;
            assert_eq!(status, 200, "mount agent {agent}: {body}");
            // The acting user of these suites is a member of both projects
            // (membership is required by default).
            let (status, body) = this
                .admin(
                    "POST",
                    &format!("/admin/projects/{project}/members"),
                    Some(json!({"user_id": "u-1", "role": "member"})),
                )
                .await;
            assert_eq!(status, 200, "add member to {project}: {body}");
        }
        Some(this)
    }

    /// Stops the service (wsgidav and the proxy stop when dropped).
    pub(crate) async fn stop(self) {
        let Self {
            app,
            proxy,
            dav,
            schema,
            ..
        } = self;
        app.stop().await;
        drop(proxy);
        drop(dav);
        if let Some(schema) = schema {
            schema.drop_now().await;
        }
    }

    /// Runs `sql` on the service's database: for what a test cannot do
    /// through the API (moving a stored expiry into the past instead of
    /// waiting for it).
    pub(crate) async fn execute_sql(&self, sql: &str) -> u64 {
        use sqlx::{Connection, Executor};
        let sql = sqlx::AssertSqlSafe(sql.to_owned());
        match &self.schema {
            Some(schema) => {
                let mut db = sqlx::PgConnection::connect(&schema.url).await.unwrap();
                db.execute(sql).await.unwrap().rows_affected()
            }
            None => {
                let file = self.app.data_dir.join("acdm.sqlite3");
                let mut db =
                    sqlx::SqliteConnection::connect(&format!("sqlite://{}", file.display()))
                        .await
                        .unwrap();
                db.execute(sql).await.unwrap().rows_affected()
            }
        }
    }

    pub(crate) fn recorder(&self) -> &Recorder {
        &self.proxy.recorder
    }

    /// A path on the WebDAV disk (relative to the user's home).
    pub(crate) fn disk(&self, rel: &str) -> PathBuf {
        self.dav.root.join(rel)
    }

    /// The content of a file on the WebDAV disk, `None` when absent.
    pub(crate) fn disk_read(&self, rel: &str) -> Option<Vec<u8>> {
        std::fs::read(self.disk(rel)).ok()
    }

    /// A snapshot of the whole WebDAV disk.
    pub(crate) fn disk_snapshot(&self) -> BTreeMap<String, Option<Vec<u8>>> {
        snapshot(&self.dav.root)
    }

    /// The files (with content) under `Projects/.acdm-trash/alpha/<event>/`,
    /// relative to that folder.
    pub(crate) fn trash_of(&self, slug: &str, event: &str) -> BTreeMap<String, Vec<u8>> {
        snapshot(&self.disk(&format!("Projects/.acdm-trash/{slug}/{event}")))
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| (k, v)))
            .collect()
    }

    /// `POST /agent-tools/nc/{op}` as `agent` for user `u-1` in thread
    /// `t-1`; checks the answer is a consistent ToolResponse whose HTTP
    /// status is its code's.
    pub(crate) async fn nc(&self, agent: &str, op: &str, body: Value) -> (u16, Value) {
        // Through the harness client, as the engine calls: the status is the
        // one of the code (the raw path below checks the server agrees).
        if let Ok(agent_name) = acdm_core::AgentName::parse(agent) {
            let identity = acdm_core::Identity::new(
                acdm_core::UserId::parse(USER).unwrap(),
                agent_name,
                acdm_core::ThreadId::parse(THREAD).unwrap(),
            );
            let answer: ToolResponse<Value> = self
                .harness
                .as_identity(identity)
                .call(&format!("agent-tools/nc/{op}"), &body)
                .await;
            let value = serde_json::to_value(&answer).unwrap();
            assert_envelope(answer.http_status(), &value, &format!("nc/{op} {body}"));
            return (answer.http_status(), value);
        }
        let headers = [
            ("X-ACDM-Service-Auth", TOKEN),
            ("X-ACDM-User-Id", USER),
            ("X-ACDM-Agent-Name", agent),
            ("X-ACDM-Thread-Id", THREAD),
        ];
        self.nc_with(&headers, op, &body.to_string()).await
    }

    /// `POST /agent-tools/nc/{op}` with exactly these headers and this raw
    /// body (plus `Content-Type: application/json`); checks the envelope.
    pub(crate) async fn nc_with(
        &self,
        headers: &[(&str, &str)],
        op: &str,
        body: &str,
    ) -> (u16, Value) {
        let mut request = self
            .client
            .post(format!("{}/agent-tools/nc/{op}", self.base))
            .header("Content-Type", "application/json")
            .body(body.to_owned());
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        let value: Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("nc/{op} {body}: not JSON ({e}), status {status}: {text}"));
        assert_envelope(status, &value, &format!("nc/{op} {body}"));
        (status, value)
    }

    /// An operator API call with the admin token.
    pub(crate) async fn admin(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut request = self
            .client
            .request(method, format!("{}{path}", self.base))
            .header("Authorization", format!("Bearer {ADMIN_TOKEN}"));
        if let Some(body) = body {
            request = request
                .header("Content-Type", "application/json")
                .body(body.to_string());
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        let value: Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{path}: not JSON ({e}), status {status}: {text}"));
        assert_envelope(status, &value, path);
        (status, value)
    }

    /// `GET /admin/events?<query>`: one page, newest first.
    /// A `GET` with a JSON body as `user` through the agent `ALPHA` (what
    /// a generic client may send to the project reads).
    pub(crate) async fn raw_get_with_body(
        &self,
        path: &str,
        user: &str,
        body: &Value,
    ) -> ToolResponse<Value> {
        let response = self
            .client
            .get(format!("{}/{path}", self.base))
            .header("X-ACDM-Service-Auth", TOKEN)
            .header("X-ACDM-User-Id", user)
            .header("X-ACDM-Agent-Name", ALPHA)
            .header("X-ACDM-Thread-Id", THREAD)
            .header("Content-Type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        let text = response.text().await.unwrap();
        serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{path}: not an envelope ({e}): {text}"))
    }

    pub(crate) async fn events_page(&self, query: &str) -> (Vec<Value>, Option<String>) {
        let (status, body) = self
            .admin("GET", &format!("/admin/events?{query}"), None)
            .await;
        assert_eq!(status, 200, "events {query}: {body}");
        let events = body["data"]["events"]
            .as_array()
            .unwrap_or_else(|| panic!("no events list: {body}"))
            .clone();
        let next = body["data"]["next_before"].as_str().map(str::to_owned);
        (events, next)
    }

    /// Every event matching `query` (all pages), newest first.
    pub(crate) async fn events(&self, query: &str) -> Vec<Value> {
        let mut all = Vec::new();
        let mut before: Option<String> = None;
        for _ in 0..1000 {
            let mut parts: Vec<String> = Vec::new();
            if !query.is_empty() {
                parts.push(query.to_owned());
            }
            parts.push("limit=100".to_owned());
            if let Some(b) = &before {
                parts.push(format!("before={b}"));
            }
            let q = parts.join("&");
            let (page, next) = self.events_page(&q).await;
            let empty = page.is_empty();
            all.extend(page);
            match next {
                Some(n) if !empty => before = Some(n),
                _ => return all,
            }
        }
        panic!("events never ended");
    }

    /// `GET /admin/events/{id}`.
    pub(crate) async fn event(&self, id: &str) -> Value {
        let (status, body) = self
            .admin("GET", &format!("/admin/events/{id}"), None)
            .await;
        assert_eq!(status, 200, "event {id}: {body}");
        body["data"].clone()
    }

    /// `POST /admin/events/{id}/revert` as operator `op-1`.
    pub(crate) async fn revert(&self, id: &str) -> (u16, Value) {
        self.admin(
            "POST",
            &format!("/admin/events/{id}/revert"),
            Some(json!({"user_id": "op-1"})),
        )
        .await
    }

    /// `PUT /admin/kill-switch`.
    pub(crate) async fn set_writes_enabled(&self, enabled: bool) -> Value {
        let (status, body) = self
            .admin(
                "PUT",
                "/admin/kill-switch",
                Some(json!({"nc_writes_enabled": enabled, "reason": "test"})),
            )
            .await;
        assert_eq!(status, 200, "kill switch: {body}");
        assert_eq!(body["data"]["nc_writes_enabled"], enabled, "{body}");
        body
    }
}

/// The body is a consistent ToolResponse (`success` matches `code`, the
/// code is in the core table) and the HTTP status is the code's.
pub(crate) fn assert_envelope(status: u16, body: &Value, context: &str) {
    for key in ["success", "code", "message", "data", "suggested_action"] {
        assert!(
            body.get(key).is_some(),
            "{context}: envelope without `{key}`: {body}"
        );
    }
    let parsed: ToolResponse = serde_json::from_value(body.clone())
        .unwrap_or_else(|e| panic!("{context}: not a ToolResponse ({e}): {body}"));
    assert_eq!(
        parsed.http_status(),
        status,
        "{context}: HTTP status is not its code's: {body}"
    );
}

/// The `code` of an envelope.
pub(crate) fn code(body: &Value) -> &str {
    body["code"].as_str().unwrap_or("<no code>")
}

// ---------------------------------------------------------------------------
// Judging the recording

/// The path of a `Destination` header (an absolute URL or a path).
fn destination_path(destination: &str) -> String {
    let rest = destination
        .strip_prefix("http://")
        .or_else(|| destination.strip_prefix("https://"));
    match rest {
        Some(rest) => rest
            .find('/')
            .map_or_else(|| "/".to_owned(), |i| rest[i..].to_owned()),
        None => destination.to_owned(),
    }
}

/// Where agent `slug` (folder `folder`) may send requests: its project
/// folder, its trash, and — for a depth-0 PROPFIND or a MKCOL that
/// creates the trash or the project folder — their ancestors. The judge is
/// the suites' one oracle, [`traversal::Scope`]: every request path is
/// also refused for any spelling (dot segment, encoded dot or slash,
/// backslash, at any depth of decoding) a server could take elsewhere.
pub(crate) struct Scope(traversal::Scope);

impl Scope {
    /// The scope of the project with this slug and folder name under
    /// `/Projects`.
    pub(crate) fn project(slug: &str, folder: &str) -> Self {
        Self(traversal::Scope::new(&PROJECTS, folder).with_trash(slug))
    }

    /// Alpha's scope.
    pub(crate) fn alpha() -> Self {
        Self::project("alpha", "Alpha")
    }

    /// Why `path` (with `method`, `depth`) is out of scope, if it is.
    fn judge(&self, method: &str, raw: &str, depth: Option<&str>) -> Option<String> {
        self.0.judge(method, raw, depth).err()
    }
}

/// What is wrong with these recorded requests for `scope`: each request
/// must lie inside it (search requests, which carry no path, only need the
/// search endpoint's path) with a clean spelling, and so must every
/// `Destination`.
pub(crate) fn confinement_problems(records: &[Recorded], scope: &Scope) -> Vec<String> {
    let mut bad = Vec::new();
    for r in records {
        if r.is_search() {
            if r.path != "/ocs/v2.php/search/providers/files/search" {
                bad.push(format!("{r}: unexpected search path"));
            }
            continue;
        }
        if let Some(why) = scope.judge(&r.method, &r.path, r.depth.as_deref()) {
            bad.push(format!("{r}: {why}"));
        }
        if let Some(d) = &r.destination {
            let path = destination_path(d);
            // A Destination is where something is written: never an ancestor.
            if let Some(why) = scope.judge("MOVE", &path, None) {
                bad.push(format!("{r}: Destination {why}"));
            }
        }
    }
    bad
}

/// Panics listing every request [`confinement_problems`] finds.
pub(crate) fn assert_confined(records: &[Recorded], scope: &Scope, context: &str) {
    let bad = confinement_problems(records, scope);
    assert!(
        bad.is_empty(),
        "{context}: {} upstream request(s) out of scope:\n{}",
        bad.len(),
        bad.iter().take(40).cloned().collect::<Vec<_>>().join("\n")
    );
}

/// No recorded request changed anything upstream.
pub(crate) fn assert_no_writes(records: &[Recorded], context: &str) {
    let writes: Vec<String> = records
        .iter()
        .filter(|r| r.is_write())
        .map(ToString::to_string)
        .collect();
    assert!(
        writes.is_empty(),
        "{context}: write methods reached the upstream:\n{}",
        writes.join("\n")
    );
}

/// Nothing recorded destroys data: no `DELETE`, and every `MOVE` or
/// `COPY` says `Overwrite: F` (what a change replaces or removes is moved
/// into the trash first, spec §6.4).
pub(crate) fn assert_nothing_destroyed(records: &[Recorded], context: &str) {
    let bad: Vec<String> = records
        .iter()
        .filter(|r| {
            r.method == "DELETE"
                || (matches!(r.method.as_str(), "MOVE" | "COPY")
                    && !r
                        .overwrite
                        .as_deref()
                        .is_some_and(|o| o.eq_ignore_ascii_case("F")))
        })
        .map(ToString::to_string)
        .collect();
    assert!(
        bad.is_empty(),
        "{context}: requests that may destroy data upstream:\n{}",
        bad.join("\n")
    );
}

/// No recorded request (path or Destination) touches the folder `name`
/// under `/Projects` (decoded once, segment-wise).
pub(crate) fn assert_untouched(records: &[Recorded], name: &str, context: &str) {
    // A spelling the oracle cannot place might land there: it counts.
    let touches = |raw: &str| {
        traversal::land(raw).map_or(true, |s| {
            s.len() > PROJECTS.len()
                && s.iter().zip(PROJECTS).all(|(a, b)| a == b)
                && s.get(PROJECTS.len()).map(String::as_str) == Some(name)
        })
    };
    let bad: Vec<String> = records
        .iter()
        .filter(|r| {
            touches(&r.path)
                || r.destination
                    .as_deref()
                    .is_some_and(|d| touches(&destination_path(d)))
        })
        .map(ToString::to_string)
        .collect();
    assert!(
        bad.is_empty(),
        "{context}: requests reached /Projects/{name}/:\n{}",
        bad.join("\n")
    );
}

// ---------------------------------------------------------------------------
// Small helpers for the tests

/// Standard base64 (with padding).
pub(crate) fn base64_encode(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Standard base64 (padding optional); panics on anything else.
pub(crate) fn base64_decode(text: &str) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD_NO_PAD
        .decode(text.trim_end_matches('='))
        .unwrap_or_else(|e| panic!("not base64 ({e}): {text:?}"))
}

#[tokio::test]
async fn the_harness_lists_a_folder_through_the_recording_proxy() {
    let Some(env) = NcEnv::start().await else {
        return;
    };
    // Straight through the proxy, as the service will call it.
    let client = test_client();
    let response = client
        .request(
            reqwest::Method::from_bytes(b"PROPFIND").unwrap(),
            format!(
                "http://{}/remote.php/dav/files/u/Projects/Alpha/docs/",
                env.proxy.addr
            ),
        )
        .basic_auth(DAV_USER, Some(DAV_PASSWORD))
        .header("Depth", "1")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 207);
    let listing = response.text().await.unwrap();
    for name in ["plan.md", "a%20b%23c%25d.md", "sub"] {
        assert!(listing.contains(name), "{name} missing from {listing}");
    }
    let seen = env.recorder().all();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].method, "PROPFIND");
    assert_eq!(seen[0].path, "/remote.php/dav/files/u/Projects/Alpha/docs/");
    assert_eq!(seen[0].depth.as_deref(), Some("1"));
    assert_confined(&seen, &Scope::alpha(), "harness");

    // A MOVE's Destination is rewritten to the upstream and recorded raw.
    let destination = format!(
        "http://{}/remote.php/dav/files/u/Projects/Alpha/docs/moved%20plan.md",
        env.proxy.addr
    );
    let moved = client
        .request(
            reqwest::Method::from_bytes(b"MOVE").unwrap(),
            format!(
                "http://{}/remote.php/dav/files/u/Projects/Alpha/docs/plan.md",
                env.proxy.addr
            ),
        )
        .basic_auth(DAV_USER, Some(DAV_PASSWORD))
        .header("Destination", &destination)
        .header("Overwrite", "F")
        .send()
        .await
        .unwrap();
    assert_eq!(moved.status().as_u16(), 201);
    assert_eq!(
        env.disk_read("Projects/Alpha/docs/moved plan.md")
            .as_deref(),
        Some(&b"alpha plan\nline two\n"[..])
    );
    let seen = env.recorder().all();
    assert_eq!(seen[1].destination.as_deref(), Some(destination.as_str()));
    assert_confined(&seen, &Scope::alpha(), "harness");

    // The judge catches what it must.
    let fake = |method: &str, path: &str, destination: Option<&str>| Recorded {
        method: method.to_owned(),
        path: path.to_owned(),
        query: None,
        destination: destination.map(str::to_owned),
        depth: None,
        overwrite: None,
        status: 200,
        millis: 0,
    };
    for bad in [
        fake(
            "GET",
            "/remote.php/dav/files/u/Projects/Beta/secret.md",
            None,
        ),
        fake(
            "GET",
            "/remote.php/dav/files/u/Projects/Alpha/../Beta/x",
            None,
        ),
        fake(
            "GET",
            "/remote.php/dav/files/u/Projects/Alpha/%2e%2e/Beta",
            None,
        ),
        fake(
            "GET",
            "/remote.php/dav/files/u/Projects/Alpha/%2E%2E%2FBeta",
            None,
        ),
        fake("GET", "/remote.php/dav/files/u/Projects/Alpha/a%5Cb", None),
        fake(
            "GET",
            "/remote.php/dav/files/u/Projects/Alpha/%252e%252e",
            None,
        ),
        fake(
            "GET",
            "/remote.php/dav/files/u/Projects/Alpha-evil/x.md",
            None,
        ),
        fake("GET", "/remote.php/dav/files/u/Projects/Alpha//x.md", None),
        fake("PROPFIND", "/remote.php/dav/files/u/Projects/", None),
        fake(
            "DELETE",
            "/remote.php/dav/files/u/Projects/.acdm-trash",
            None,
        ),
        fake(
            "GET",
            "/remote.php/dav/files/u/Projects/.acdm-trash/beta/x",
            None,
        ),
        fake(
            "MOVE",
            "/remote.php/dav/files/u/Projects/Alpha/x",
            Some("http://h/remote.php/dav/files/u/Projects/Beta/x"),
        ),
    ] {
        assert!(
            !confinement_problems(std::slice::from_ref(&bad), &Scope::alpha()).is_empty(),
            "the judge let {bad} through"
        );
    }
    assert_confined(
        &[
            fake("MKCOL", "/remote.php/dav/files/u/Projects", None),
            fake(
                "MKCOL",
                "/remote.php/dav/files/u/Projects/.acdm-trash",
                None,
            ),
            fake(
                "MOVE",
                "/remote.php/dav/files/u/Projects/Alpha/a%20b%23c%25d.md",
                Some(
                    "http://h/remote.php/dav/files/u/Projects/.acdm-trash/alpha/e/0/a%20b%23c%25d.md",
                ),
            ),
        ],
        &Scope::alpha(),
        "judge",
    );
    env.stop().await;
}
