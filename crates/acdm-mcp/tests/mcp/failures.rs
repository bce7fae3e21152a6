//! What the tools do when the sources misbehave: an upstream that fails,
//! throttles, stalls or refuses the token; a source that is not configured;
//! a search that returns hits outside the project. Every case is a tool
//! result with a stable code and a message that carries no upstream body
//! and no credential — in the result and in the logs.

use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use acdm_core::AbsPath;
use acdm_mcp::McpMetrics;
use acdm_sources::gitlab::{GitLabConfig, GitLabWiki};
use acdm_sources::http::{HttpClient, HttpSettings};
use acdm_sources::{EntryKind, FileHit, FileSearch, GitRef, SourceError, Unconfigured};
use async_trait::async_trait;
use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{Request as HttpRequest, StatusCode};
use axum::response::{IntoResponse, Response};
use secrecy::SecretString;
use serde_json::json;

use crate::harness::{Mcp, error_code, local_sources, ok, settings};

const BODY_MARKER: &str = "UPSTREAM-BODY-7f3a";
const TOKEN_MARKER: &str = "glpat-TOKEN-MARKER-91c2";

/// How the GitLab double misbehaves.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Fault {
    ServerError,
    Throttled,
    Stalled,
    BadToken,
}

async fn gitlab(State(fault): State<Arc<Mutex<Fault>>>, _request: Request) -> Response {
    let fault = *fault.lock().unwrap();
    let json = |status: StatusCode, body: serde_json::Value| {
        (
            status,
            [("content-type", "application/json")],
            body.to_string(),
        )
            .into_response()
    };
    match fault {
        // GitLab's 500 body, with a marker that must never be shown.
        Fault::ServerError => json(
            StatusCode::INTERNAL_SERVER_ERROR,
            json!({"message": format!("500 Internal Server Error {BODY_MARKER}")}),
        ),
        Fault::Throttled => (
            StatusCode::TOO_MANY_REQUESTS,
            [("retry-after", "120"), ("content-type", "text/plain")],
            format!("Retry later {BODY_MARKER}"),
        )
            .into_response(),
        Fault::Stalled => {
            tokio::time::sleep(Duration::from_secs(30)).await;
            StatusCode::OK.into_response()
        }
        Fault::BadToken => json(
            StatusCode::UNAUTHORIZED,
            json!({"message": format!("401 Unauthorized {BODY_MARKER}")}),
        ),
    }
}

/// A log buffer for one test.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl Write for Logs {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(data);
        Ok(data.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn upstream_faults_are_tool_errors_with_stable_codes_and_no_leaks() {
    let logs = Logs::default();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer({
            let logs = logs.clone();
            move || logs.clone()
        })
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let fault = Arc::new(Mutex::new(Fault::ServerError));
    let app = Router::new().fallback(gitlab).with_state(fault.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let http = HttpClient::new(HttpSettings {
        retries: 0,
        read_timeout: Duration::from_millis(300),
        timeout: Duration::from_secs(2),
        max_retry_after: Duration::from_secs(1),
        ..HttpSettings::default()
    })
    .unwrap();
    let wiki = GitLabWiki::new(
        GitLabConfig {
            base_url: url::Url::parse(&format!("http://{addr}/")).unwrap(),
            project: "42".to_owned(),
            token: Some(SecretString::from(TOKEN_MARKER)),
            default_ref: GitRef::parse("main").unwrap(),
        },
        http,
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut sources = local_sources(dir.path());
    sources.wiki = Arc::new(wiki);
    let mcp = Mcp::with_router(acdm_mcp::router(
        sources,
        settings(),
        McpMetrics::unregistered(),
    ));

    for (which, code) in [
        (Fault::ServerError, "upstream_error"),
        (Fault::Throttled, "rate_limited"),
        (Fault::Stalled, "upstream_timeout"),
        (Fault::BadToken, "upstream_error"),
    ] {
        *fault.lock().unwrap() = which;
        for (tool, arguments) in [
            ("acdm_search_wiki", json!({"query": "deploy"})),
            ("acdm_read_wiki_file", json!({"path": "guides/deploy.md"})),
        ] {
            let result = mcp.tool(tool, arguments).await;
            assert_eq!(error_code(&result), code, "{which:?} {tool}: {result}");
            let shown = result.to_string();
            assert!(
                !shown.contains(BODY_MARKER),
                "{which:?}: body shown: {shown}"
            );
            assert!(!shown.contains(TOKEN_MARKER), "{which:?}: token shown");
            assert!(
                !shown.contains(&addr.to_string()),
                "{which:?}: upstream address shown: {shown}"
            );
            assert!(
                result["structuredContent"]["suggested_action"].is_string(),
                "{which:?}: says what to do: {result}"
            );
        }
    }
    *fault.lock().unwrap() = Fault::BadToken;
    let result = mcp
        .tool("acdm_search_wiki", json!({"query": "deploy"}))
        .await;
    assert!(
        result["structuredContent"]["message"]
            .as_str()
            .unwrap()
            .contains("GITLAB_WIKI_PAT"),
        "an operator knows which setting to fix: {result}"
    );

    let logged = String::from_utf8_lossy(&logs.0.lock().unwrap()).into_owned();
    assert!(logged.contains("mcp_tool"), "the tool spans were logged");
    assert!(!logged.contains(TOKEN_MARKER), "the token reached the logs");
    assert!(
        !logged.contains(BODY_MARKER),
        "an upstream body reached the logs"
    );
}

#[tokio::test]
async fn an_unconfigured_source_says_which_setting_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let mut sources = local_sources(dir.path());
    sources.wiki = Arc::new(Unconfigured::new("GITLAB_WIKI_BASE_URL"));
    sources.files = Arc::new(Unconfigured::new("NEXTCLOUD_URL"));
    sources.search = Arc::new(Unconfigured::new("NEXTCLOUD_URL"));
    let mcp = Mcp::with_router(acdm_mcp::router(
        sources,
        settings(),
        McpMetrics::unregistered(),
    ));
    for (tool, arguments, setting) in [
        (
            "acdm_search_wiki",
            json!({"query": "deploy"}),
            "GITLAB_WIKI_BASE_URL",
        ),
        (
            "acdm_read_wiki_file",
            json!({"path": "guides/deploy.md"}),
            "GITLAB_WIKI_BASE_URL",
        ),
        (
            "acdm_search_nextcloud",
            json!({"query": "kickoff", "project_name": "Alpha"}),
            "NEXTCLOUD_URL",
        ),
        (
            "acdm_read_nextcloud_file",
            json!({"path": "/Projects/Alpha/notes/kickoff.md", "project_name": "Alpha"}),
            "NEXTCLOUD_URL",
        ),
    ] {
        let result = mcp.tool(tool, arguments).await;
        assert_eq!(error_code(&result), "source_not_configured", "{tool}");
        assert!(
            result["content"][0]["text"]
                .as_str()
                .unwrap()
                .contains(setting),
            "{tool}: {result}"
        );
    }
}

/// A file search that returns whatever it is given, and counts its checks:
/// stands for a source whose own scope filter is broken.
struct Careless {
    hits: Vec<FileHit>,
    checks: AtomicUsize,
}

#[async_trait]
impl FileSearch for Careless {
    fn kind(&self) -> &'static str {
        "careless"
    }

    async fn check(&self) -> Result<(), SourceError> {
        self.checks.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    async fn search(
        &self,
        _term: &str,
        _limit: usize,
        _scope: &AbsPath,
    ) -> Result<Vec<FileHit>, SourceError> {
        Ok(self.hits.clone())
    }
}

fn hit(path: &str) -> FileHit {
    FileHit {
        path: AbsPath::parse(path).unwrap(),
        kind: Some(EntryKind::File),
        snippet: None,
        line: None,
    }
}

fn careless_mcp(hits: Vec<FileHit>) -> (Mcp, Arc<Careless>) {
    let dir = tempfile::tempdir().unwrap();
    let mut sources = local_sources(dir.path());
    let search = Arc::new(Careless {
        hits,
        checks: AtomicUsize::new(0),
    });
    sources.search = search.clone();
    let mcp = Mcp::with_router(acdm_mcp::router(
        sources,
        settings(),
        McpMetrics::unregistered(),
    ));
    (mcp, search)
}

#[tokio::test]
async fn search_hits_outside_the_project_are_dropped_even_when_the_source_returns_them() {
    let (mcp, _) = careless_mcp(vec![
        hit("/Projects/Beta/kickoff.md"),
        hit("/Projects/Alpha-evil/kickoff.md"),
        hit("/Projects/Alpha"),
        hit("/Projects"),
        hit("/kickoff.md"),
        hit("/Projects/alpha/kickoff.md"),
        hit("/Projects/Alpha/notes/kickoff.md"),
        hit("/Projects/Alpha/minutes/kickoff-2.md"),
    ]);
    let result = mcp
        .tool(
            "acdm_search_nextcloud",
            json!({"query": "kickoff", "project_name": "Alpha"}),
        )
        .await;
    let paths: Vec<&str> = ok(&result)["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        paths,
        [
            "/Projects/Alpha/notes/kickoff.md",
            "/Projects/Alpha/minutes/kickoff-2.md"
        ]
    );
    assert_eq!(ok(&result)["returned"], 2);
    let text = result["content"][0]["text"].as_str().unwrap();
    assert!(
        !text.contains("Beta") && !text.contains("Alpha-evil"),
        "{text}"
    );
}

#[tokio::test]
async fn health_is_cached_so_probes_cannot_hammer_upstreams() {
    let (mcp, search) = careless_mcp(Vec::new());
    let get = || {
        HttpRequest::builder()
            .uri("/mcp/health")
            .header("host", "localhost")
            .body(Body::empty())
            .unwrap()
    };
    for _ in 0..20 {
        let (status, _, body) = mcp.http(get()).await;
        assert_eq!(status, 200, "{body}");
    }
    assert_eq!(
        search.checks.load(Ordering::SeqCst),
        1,
        "twenty probes, one check of the source"
    );
}

#[tokio::test]
async fn trash_hits_are_dropped_even_when_the_source_returns_them() {
    let (mcp, _) = careless_mcp(vec![
        hit("/Projects/.acdm-trash/alpha/e/0/kickoff.md"),
        hit("/Projects/Alpha/notes/kickoff.md"),
    ]);
    for project in ["Alpha", ".acdm-trash"] {
        let result = mcp
            .tool(
                "acdm_search_nextcloud",
                json!({"query": "kickoff", "project_name": project}),
            )
            .await;
        assert!(
            !result.to_string().contains(".acdm-trash/alpha"),
            "{project}: {result}"
        );
    }
}
