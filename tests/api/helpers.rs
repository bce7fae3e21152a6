//! Starting the service on port 0 with its own database, and a raw
//! HTTP/1.1 client that sends paths exactly as written (no normalisation,
//! unlike URL-based clients).

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use acdm_backend::app::{AppState, Application};
use acdm_backend::config::Config;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub(crate) const TOKEN: &str = "svc-0123456789abcdef0123456789abcdef";
pub(crate) const ADMIN_TOKEN: &str = "adm-fedcba9876543210fedcba9876543210";

/// How to start a test server.
pub(crate) struct Options {
    pub(crate) service_token: Option<&'static str>,
    pub(crate) admin_token: Option<&'static str>,
    pub(crate) extra_env: Vec<(&'static str, String)>,
    /// Reuse this data folder (a second server on the same database).
    pub(crate) data_dir: Option<PathBuf>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            service_token: Some(TOKEN),
            admin_token: Some(ADMIN_TOKEN),
            extra_env: Vec::new(),
            data_dir: None,
        }
    }
}

/// A running server.
pub(crate) struct TestApp {
    pub(crate) addr: SocketAddr,
    pub(crate) state: AppState,
    pub(crate) data_dir: PathBuf,
    pub(crate) shutdown: CancellationToken,
    pub(crate) task: JoinHandle<anyhow::Result<()>>,
    _dir: Option<tempfile::TempDir>,
}

/// The configuration a test server runs with.
pub(crate) fn test_config(options: &Options, data_dir: &std::path::Path) -> Config {
    let mut env: Vec<(OsString, OsString)> = vec![
        ("ACDM_LISTEN_ADDR".into(), "127.0.0.1:0".into()),
        ("ACDM_DATA_DIR".into(), data_dir.as_os_str().to_owned()),
        ("ACDM_SCOPE_POLL_MILLIS".into(), "100".into()),
        ("ACDM_SHUTDOWN_GRACE_SECONDS".into(), "2".into()),
        // Tests that are not about them drive more calls than any agent
        // may make, and stop at once; the tests of limits and of the
        // pre-stop delay set these again (a later value wins).
        ("ACDM_BFF_RATE_PER_MINUTE".into(), "0".into()),
        ("ACDM_BFF_WRITE_RATE_PER_MINUTE".into(), "0".into()),
        ("ACDM_MCP_TOOL_RATE_PER_MINUTE".into(), "0".into()),
        ("ACDM_SHUTDOWN_PRESTOP_SECONDS".into(), "0".into()),
        // The content index is off (searches are the upstreams'), as the
        // suites of the upstream search expect; the knowledge suite turns it
        // on and refreshes it itself.
        ("ACDM_SEARCH_REFRESH_SECONDS".into(), "0".into()),
        // Documents are extracted by the service's binary (the test
        // program cannot run its `extract` command).
        (
            "ACDM_EXTRACT_PROGRAM".into(),
            env!("CARGO_BIN_EXE_acdm-backend").into(),
        ),
    ];
    if let Some(token) = options.service_token {
        env.push(("ACDM_MCP_SERVICE_TOKEN".into(), token.into()));
    }
    if let Some(token) = options.admin_token {
        env.push(("ACDM_ADMIN_TOKEN".into(), token.into()));
    }
    for (k, v) in &options.extra_env {
        env.push(((*k).into(), v.into()));
    }
    Config::load_from(None, env).expect("test configuration is valid")
}

#[expect(
    clippy::disallowed_methods,
    reason = "a test: TEST_LOG shows the service's log"
)]
pub(crate) fn init_test_log() {
    if std::env::var_os("TEST_LOG").is_some() {
        let settings = acdm_server::telemetry::LogSettings {
            format: acdm_server::telemetry::LogFormat::Pretty,
            filter: Some("debug".to_owned()),
            fallback_filter: None,
        };
        // Pretty lines: written by their loggers, no guard to keep.
        let _ = acdm_server::telemetry::init(&settings, "debug");
    }
}

pub(crate) async fn spawn_app(options: Options) -> TestApp {
    init_test_log();
    let (dir, data_dir) = match &options.data_dir {
        Some(path) => (None, path.clone()),
        None => {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().to_owned();
            (Some(dir), path)
        }
    };
    let config = test_config(&options, &data_dir);
    let app = Application::build(&config).await.expect("the app builds");
    let addr = app.local_addr().unwrap();
    let state = app.state().clone();
    let shutdown = app.shutdown_token();
    let task = tokio::spawn(app.run_until_stopped());
    TestApp {
        addr,
        state,
        data_dir,
        shutdown,
        task,
        _dir: dir,
    }
}

impl TestApp {
    /// Stops the server and waits for it.
    pub(crate) async fn stop(self) {
        self.shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(10), self.task)
            .await
            .expect("stops in time")
            .unwrap()
            .unwrap();
    }

    pub(crate) async fn send(&self, request: Req<'_>) -> Resp {
        send(self.addr, request).await
    }
}

/// A request, written byte for byte.
#[derive(Clone, Copy)]
pub(crate) struct Req<'a> {
    pub(crate) method: &'a str,
    pub(crate) path: &'a str,
    pub(crate) headers: &'a [(&'a str, &'a str)],
    pub(crate) body: Option<&'a str>,
}

impl<'a> Req<'a> {
    pub(crate) fn get(path: &'a str) -> Self {
        Self {
            method: "GET",
            path,
            headers: &[],
            body: None,
        }
    }

    pub(crate) fn new(method: &'a str, path: &'a str) -> Self {
        Self {
            method,
            ..Self::get(path)
        }
    }

    pub(crate) fn headers(self, headers: &'a [(&'a str, &'a str)]) -> Self {
        Self { headers, ..self }
    }

    pub(crate) fn json(self, body: &'a str) -> Self {
        Self {
            body: Some(body),
            ..self
        }
    }
}

/// A response.
#[derive(Debug)]
pub(crate) struct Resp {
    pub(crate) status: u16,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: String,
}

impl Resp {
    pub(crate) fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", self.body))
    }

    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Whether a connection to `addr` is refused now. A stopping server first
/// drops new connection requests (their `SYN` is answered only when sent
/// again, about a second later, by then with a refusal): an attempt not
/// answered within a moment counts as not refused yet, and is abandoned.
pub(crate) async fn refuses_connections(addr: SocketAddr) -> bool {
    match tokio::time::timeout(Duration::from_millis(20), TcpStream::connect(addr)).await {
        Ok(Ok(_)) | Err(_) => false,
        Ok(Err(error)) => error.kind() == std::io::ErrorKind::ConnectionRefused,
    }
}

pub(crate) async fn send(addr: SocketAddr, request: Req<'_>) -> Resp {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let mut raw = format!(
        "{} {} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nConnection: close\r\n",
        request.method,
        request.path,
        addr.port()
    );
    for (name, value) in request.headers {
        raw.push_str(&format!("{name}: {value}\r\n"));
    }
    if let Some(body) = request.body {
        raw.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    raw.push_str("\r\n");
    if let Some(body) = request.body {
        raw.push_str(body);
    }
    stream.write_all(raw.as_bytes()).await.unwrap();
    let mut bytes = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut bytes))
        .await
        .expect("response in time")
        .unwrap();
    parse_response(&bytes)
}

fn parse_response(bytes: &[u8]) -> Resp {
    let text = String::from_utf8_lossy(bytes);
    let (head, body) = text.split_once("\r\n\r\n").expect("a complete response");
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap();
    let status = status_line.split(' ').nth(1).unwrap().parse().unwrap();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let chunked = headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_owned()
    };
    Resp {
        status,
        headers,
        body,
    }
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if size == 0 {
            break;
        }
        out.push_str(&rest[..size]);
        body = &rest[size + 2..];
    }
    out
}

pub(crate) fn auth() -> [(&'static str, &'static str); 1] {
    [("X-ACDM-Service-Auth", TOKEN)]
}

pub(crate) const BEARER: &str = "Bearer adm-fedcba9876543210fedcba9876543210";

/// The application state of a server started with `options`, over a data
/// folder of its own (removed when the returned folder is dropped), for
/// routers called in process rather than over a socket.
pub(crate) async fn app_state(options: &Options) -> (AppState, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let config = test_config(options, dir.path());
    let store = acdm_backend::app::open_store(&config).await.unwrap();
    let sources = acdm_backend::app::build_sources(&config).unwrap();
    (AppState::new(&config, store, sources).unwrap(), dir)
}

/// Sends `request` to `router` in process: the status, headers and body
/// (as text) of its answer.
pub(crate) async fn call_router(
    router: &axum::Router,
    request: axum::http::Request<axum::body::Body>,
) -> (u16, axum::http::HeaderMap, String) {
    use tower::ServiceExt as _;
    let response = router.clone().oneshot(request).await.unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = axum::body::to_bytes(response.into_body(), 1 << 16)
        .await
        .unwrap();
    (status, headers, String::from_utf8_lossy(&body).into_owned())
}

/// A PostgreSQL schema of its own for one test's servers, on the server
/// `ACDM_TEST_DATABASE_URL` names (CI sets it); dropped by
/// [`PgSchema::drop_now`] once they stopped.
pub(crate) struct PgSchema {
    admin_url: String,
    schema: String,
    /// The database URL servers use (its search path is the schema).
    pub(crate) url: String,
}

impl PgSchema {
    /// A new schema, or `None` when no PostgreSQL is configured.
    pub(crate) async fn create() -> Option<Self> {
        use sqlx::{Connection, Executor};
        #[expect(
            clippy::disallowed_methods,
            reason = "a test: CI names its PostgreSQL in the environment"
        )]
        let admin_url = std::env::var("ACDM_TEST_DATABASE_URL").ok()?;
        if admin_url.trim().is_empty() {
            return None;
        }
        let schema = format!("acdm_api_{}", uuid::Uuid::new_v4().simple());
        let mut admin = sqlx::PgConnection::connect(&admin_url).await.unwrap();
        admin
            .execute(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
            .await
            .unwrap();
        let separator = if admin_url.contains('?') { '&' } else { '?' };
        let url = format!("{admin_url}{separator}options=-c%20search_path%3D{schema}");
        Some(Self {
            admin_url,
            schema,
            url,
        })
    }

    /// Drops the schema and everything in it.
    pub(crate) async fn drop_now(self) {
        use sqlx::{Connection, Executor};
        let mut admin = sqlx::PgConnection::connect(&self.admin_url).await.unwrap();
        admin
            .execute(sqlx::AssertSqlSafe(format!(
                "DROP SCHEMA IF EXISTS {} CASCADE",
                self.schema
            )))
            .await
            .unwrap();
    }
}
