//! HTTP test double for the GitLab REST v4 endpoints the GitLab source calls:
//! project lookup, project blob search (basic search) and raw file download.
//!
//! It follows `shared/reference/upstream-wire-formats.md` §1: `{id}` and
//! `{file_path}` are single URL-encoded path segments (an unencoded `/` does
//! not match a route → 404), `PRIVATE-TOKEN` auth (§1.5), offset pagination
//! headers with an empty `X-Next-Page` on the last page (§1.2), the 404 bodies
//! of `lib/api/files.rb` (§1.3) and both kinds of 429 (§1.6). Every request is
//! recorded exactly as it arrived so tests can assert on the wire.

use crate::recording::{Recorded, Recorder};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// The numeric id of the one project the double serves.
const PROJECT_ID: u64 = 42;
/// The project's default branch, used when a request names no `ref`.
const DEFAULT_BRANCH: &str = "main";
/// `per_page` when the request has none (§1.2).
const DEFAULT_PER_PAGE: u64 = 20;
/// Larger `per_page` values are silently clamped to this (§1.2).
const MAX_PER_PAGE: u64 = 100;
/// Above this many results GitLab omits `X-Total`, `X-Total-Pages` and the
/// `rel="last"` link (§1.2, GitLab 11.8+).
const TOTAL_HEADERS_LIMIT: u64 = 10_000;
/// `git grep -I` treats a blob as binary when a NUL byte occurs in its first
/// 8000 bytes (git's `FIRST_FEW_BYTES`); binary blobs have no content matches.
const BINARY_SNIFF_BYTES: usize = 8000;
/// The `RateLimit-Limit` advertised by the Rack::Attack 429.
const RATE_LIMIT: u64 = 600;

/// How the double answers authenticated requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Serve the endpoints normally.
    Normal,
    /// Rack::Attack throttle: 429, plain-text `Retry later`, `Retry-After`
    /// and the `RateLimit-*` headers (§1.6).
    RackAttack429,
    /// Application rate limit (e.g. `search_rate_limit`): 429 with a JSON
    /// body and no `RateLimit-*` headers (§1.6).
    AppLimit429,
    /// Answer every request with this status and `{"message":"<n> <reason>"}`.
    Status(u16),
    /// The search timeout rescue: 408 `{"error":"Request timed out"}` (§1.1).
    Timeout408,
}

/// A running GitLab double; the server stops when this is dropped.
pub(crate) struct GitLabDouble {
    /// The instance root, e.g. `http://127.0.0.1:PORT/`.
    pub(crate) base_url: url::Url,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl GitLabDouble {
    /// Starts a double on `127.0.0.1:0`.
    ///
    /// `project` is the path `group/project` (the double also answers to the
    /// numeric id 42), `token` the only `PRIVATE-TOKEN` accepted, `refs` maps
    /// ref name → (repository path → file bytes). The default branch is
    /// `main`.
    pub(crate) async fn start(
        project: &str,
        token: &str,
        refs: BTreeMap<String, BTreeMap<String, Vec<u8>>>,
    ) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the GitLab double");
        let addr = listener.local_addr().expect("GitLab double address");
        let base_url = url::Url::parse(&format!("http://{addr}/")).expect("GitLab double base URL");
        let shared = Arc::new(Shared {
            base: format!("http://{addr}"),
            project: project.to_owned(),
            token: token.to_owned(),
            refs,
            mode: Mutex::new(Mode::Normal),
            requests: Recorder::default(),
        });
        let app = Router::new()
            .fallback(handle)
            .with_state(Arc::clone(&shared));
        let task = tokio::spawn(async move {
            axum::serve(listener, app)
                .await
                .expect("serve the GitLab double");
        });
        Self {
            base_url,
            shared,
            task,
        }
    }

    /// Sets how authenticated requests are answered from now on.
    ///
    /// Panics when a [`Mode::Status`] code is not a valid HTTP status.
    pub(crate) fn set_mode(&self, mode: Mode) {
        if let Mode::Status(code) = mode {
            assert!(
                StatusCode::from_u16(code).is_ok(),
                "{code} is not an HTTP status code"
            );
        }
        *self
            .shared
            .mode
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = mode;
    }

    /// Every request received so far, oldest first.
    pub(crate) fn requests(&self) -> Vec<Recorded> {
        self.shared.requests.all()
    }
}

impl Drop for GitLabDouble {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// State shared with the server task.
struct Shared {
    /// `http://127.0.0.1:PORT`, without a trailing slash (for `Link`).
    base: String,
    project: String,
    token: String,
    refs: BTreeMap<String, BTreeMap<String, Vec<u8>>>,
    mode: Mutex<Mode>,
    requests: Recorder,
}

/// The one handler: records the request, then routes on the raw path.
async fn handle(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    shared.requests.record(&request);
    let uri = request.uri();
    shared.answer(request.method(), uri.path(), uri.query(), request.headers())
}

impl Shared {
    fn answer(
        &self,
        method: &Method,
        path: &str,
        query: Option<&str>,
        headers: &HeaderMap,
    ) -> Response {
        // Auth first (§1.5): only the header form, only the configured token.
        let authorized = headers
            .get("private-token")
            .is_some_and(|value| value.as_bytes() == self.token.as_bytes());
        if !authorized {
            return message(StatusCode::UNAUTHORIZED, "401 Unauthorized");
        }
        let mode = *self.mode.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(response) = mode_response(mode) {
            return response;
        }
        // Grape answers HEAD on every GET route.
        if method != Method::GET && method != Method::HEAD {
            return not_found();
        }
        let Some(rest) = path.strip_prefix("/api/v4/projects/") else {
            return not_found();
        };
        // `{id}` and `{file_path}` are single segments: an unencoded slash
        // yields more segments and matches no route (NO_SLASH_URL_PART_REGEX).
        let segments: Vec<&str> = rest.split('/').collect();
        let params = parse_query(query);
        match segments.as_slice() {
            [id] if !id.is_empty() => self.project(id),
            [id, "search"] | [id, "-", "search"] if !id.is_empty() => {
                self.search(path, id, &params)
            }
            [id, "repository", "files", file, "raw"] if !id.is_empty() && !file.is_empty() => {
                self.raw(id, file, &params)
            }
            _ => not_found(),
        }
    }

    /// Whether the `{id}` segment (decoded once) names the project: the
    /// numeric id, or the full path compared case-insensitively like
    /// `Project.find_by_full_path`.
    fn is_project(&self, segment: &str) -> bool {
        let Some(decoded) = percent_decode(segment) else {
            return false;
        };
        if !decoded.is_empty() && decoded.bytes().all(|b| b.is_ascii_digit()) {
            return decoded.parse::<u64>() == Ok(PROJECT_ID);
        }
        decoded.to_lowercase() == self.project.to_lowercase()
    }

    /// `GET /api/v4/projects/{id}`.
    fn project(&self, id: &str) -> Response {
        if !self.is_project(id) {
            return message(StatusCode::NOT_FOUND, "404 Project Not Found");
        }
        json_response(
            StatusCode::OK,
            &ProjectBody {
                id: PROJECT_ID,
                path_with_namespace: &self.project,
                default_branch: DEFAULT_BRANCH,
            },
        )
    }

    /// `GET /api/v4/projects/{id}/search?scope=blobs&search=…`.
    fn search(&self, raw_path: &str, id: &str, params: &[(String, String)]) -> Response {
        // Grape validates the declared params (in declaration order: search,
        // scope, …, page, per_page) before the endpoint resolves the project,
        // and reports every failure in one `error` string.
        let mut errors = Vec::new();
        let search = param(params, "search").unwrap_or_default();
        if search.is_empty() {
            errors.push("search is missing".to_owned());
        }
        match param(params, "scope") {
            None => errors.push("scope is missing".to_owned()),
            Some("blobs") => {}
            Some(_) => errors.push("scope does not have a valid value".to_owned()),
        }
        let page = match integer_param(params, "page") {
            Ok(page) => page.unwrap_or(1).max(1),
            Err(()) => {
                errors.push("page is invalid".to_owned());
                1
            }
        };
        let per_page = match integer_param(params, "per_page") {
            // Simplification: a non-positive per_page falls back to the default.
            Ok(Some(n)) if n > 0 => u64::try_from(n).unwrap_or(MAX_PER_PAGE).min(MAX_PER_PAGE),
            Ok(_) => DEFAULT_PER_PAGE,
            Err(()) => {
                errors.push("per_page is invalid".to_owned());
                DEFAULT_PER_PAGE
            }
        };
        if !errors.is_empty() {
            return error(StatusCode::BAD_REQUEST, &errors.join(", "));
        }
        if !self.is_project(id) {
            return message(StatusCode::NOT_FOUND, "404 Project Not Found");
        }
        let git_ref = param(params, "ref")
            .filter(|r| !r.is_empty())
            .unwrap_or(DEFAULT_BRANCH);
        // An unknown ref has no blobs: the search answers an empty list.
        let hits = self
            .refs
            .get(git_ref)
            .map(|files| blob_search(files, search))
            .unwrap_or_default();
        let page = u64::try_from(page).unwrap_or(u64::MAX);
        let total = u64::try_from(hits.len()).unwrap_or(u64::MAX);
        let skip =
            usize::try_from(page.saturating_sub(1).saturating_mul(per_page)).unwrap_or(usize::MAX);
        let take = usize::try_from(per_page).unwrap_or(usize::MAX);
        let items: Vec<BlobItem<'_>> = hits
            .iter()
            .skip(skip)
            .take(take)
            .map(|hit| BlobItem {
                basename: path_without_extension(&hit.path),
                data: &hit.data,
                path: &hit.path,
                filename: &hit.path,
                id: None,
                git_ref,
                startline: hit.startline,
                project_id: PROJECT_ID,
            })
            .collect();
        let mut response = json_response(StatusCode::OK, &items);
        let headers = response.headers_mut();
        let window = PageWindow {
            page,
            per_page,
            total,
        };
        self.pagination_headers(headers, raw_path, id, params, window);
        set(headers, "x-search-type", "basic");
        response
    }

    /// The offset pagination headers of `Gitlab::Pagination::OffsetPagination`
    /// over a Kaminari array (§1.2). `Link` URLs repeat every request param
    /// plus the route's `id`, sorted by name like Rails' `to_query`.
    fn pagination_headers(
        &self,
        headers: &mut HeaderMap,
        raw_path: &str,
        id: &str,
        params: &[(String, String)],
        window: PageWindow,
    ) {
        let PageWindow {
            page,
            per_page,
            total,
        } = window;
        // Kaminari: total_pages may be 0; next/prev are nil on the last page,
        // on the first page and whenever the page is out of range.
        let kaminari_pages = total.div_ceil(per_page);
        let total_pages = kaminari_pages.max(1);
        let next = (page < kaminari_pages).then(|| page + 1);
        let prev = (page > 1 && page <= kaminari_pages).then(|| page - 1);
        // Omission rule (GitLab 11.8+): above 10,000 results, no X-Total,
        // X-Total-Pages or rel="last". (GitLab applies it to counted
        // ActiveRecord relations; the double applies it to blob search too.)
        let with_totals = total <= TOTAL_HEADERS_LIMIT;

        let mut query: BTreeMap<String, String> = params.iter().cloned().collect();
        query.insert(
            "id".to_owned(),
            percent_decode(id).unwrap_or_else(|| id.to_owned()),
        );
        query.insert("per_page".to_owned(), per_page.to_string());
        let href = |target: u64| {
            let mut query = query.clone();
            query.insert("page".to_owned(), target.to_string());
            let encoded: Vec<String> = query
                .iter()
                .map(|(k, v)| format!("{}={}", cgi_escape(k), cgi_escape(v)))
                .collect();
            format!("{}{}?{}", self.base, raw_path, encoded.join("&"))
        };
        let mut links = Vec::new();
        if let Some(prev) = prev {
            links.push(format!("<{}>; rel=\"prev\"", href(prev)));
        }
        if let Some(next) = next {
            links.push(format!("<{}>; rel=\"next\"", href(next)));
        }
        links.push(format!("<{}>; rel=\"first\"", href(1)));
        if with_totals {
            links.push(format!("<{}>; rel=\"last\"", href(total_pages)));
        }

        set(headers, "x-per-page", &per_page.to_string());
        set(headers, "x-page", &page.to_string());
        set(
            headers,
            "x-next-page",
            &next.map(|n| n.to_string()).unwrap_or_default(),
        );
        set(
            headers,
            "x-prev-page",
            &prev.map(|n| n.to_string()).unwrap_or_default(),
        );
        set(headers, "link", &links.join(", "));
        if with_totals {
            set(headers, "x-total", &total.to_string());
            set(headers, "x-total-pages", &total_pages.to_string());
        }
    }

    /// `GET /api/v4/projects/{id}/repository/files/{file_path}/raw[?ref=…]`.
    fn raw(&self, id: &str, file_segment: &str, params: &[(String, String)]) -> Response {
        if !self.is_project(id) {
            return message(StatusCode::NOT_FOUND, "404 Project Not Found");
        }
        let git_ref = param(params, "ref")
            .filter(|r| !r.is_empty())
            .unwrap_or(DEFAULT_BRANCH);
        let Some(files) = self.refs.get(git_ref) else {
            return message(StatusCode::NOT_FOUND, "404 Commit Not Found");
        };
        // The client percent-encodes the path into one segment; decode once.
        let Some(file_path) = percent_decode(file_segment) else {
            return message(StatusCode::NOT_FOUND, "404 File Not Found");
        };
        let Some(bytes) = files.get(&file_path) else {
            return message(StatusCode::NOT_FOUND, "404 File Not Found");
        };
        let file_name = file_path.rsplit('/').next().unwrap_or(&file_path);
        let mut blob_input = format!("blob {}\0", bytes.len()).into_bytes();
        blob_input.extend_from_slice(bytes);
        let blob_id = hex(&sha256(&blob_input));
        let commit_id = hex(&sha256(format!("commit {git_ref}").as_bytes()));
        let last_commit_id = hex(&sha256(format!("last {git_ref} {file_path}").as_bytes()));

        // Range requests are not supported here: always the full 200.
        let mut response = (StatusCode::OK, bytes.clone()).into_response();
        let headers = response.headers_mut();
        set(headers, "content-type", "text/plain; charset=utf-8");
        set(headers, "content-length", &bytes.len().to_string());
        set(
            headers,
            "content-disposition",
            &content_disposition_inline(file_name),
        );
        set(
            headers,
            "cache-control",
            "max-age=0, private, must-revalidate, no-store, no-cache",
        );
        set(headers, "pragma", "no-cache");
        set(headers, "expires", "Fri, 01 Jan 1990 00:00:00 GMT");
        set(
            headers,
            "x-gitlab-blob-id",
            blob_id.get(..40).unwrap_or(&blob_id),
        );
        set(
            headers,
            "x-gitlab-commit-id",
            commit_id.get(..40).unwrap_or(&commit_id),
        );
        set(headers, "x-gitlab-content-sha256", &hex(&sha256(bytes)));
        set(headers, "x-gitlab-encoding", "base64");
        set(headers, "x-gitlab-execute-filemode", "false");
        set(headers, "x-gitlab-file-name", file_name);
        set(headers, "x-gitlab-file-path", &file_path);
        set(
            headers,
            "x-gitlab-last-commit-id",
            last_commit_id.get(..40).unwrap_or(&last_commit_id),
        );
        set(headers, "x-gitlab-ref", git_ref);
        set(headers, "x-gitlab-size", &bytes.len().to_string());
        response
    }
}

/// The answer a non-normal mode gives every authenticated request.
fn mode_response(mode: Mode) -> Option<Response> {
    match mode {
        Mode::Normal => None,
        Mode::RackAttack429 => {
            // Gitlab::RackAttack.throttled_response_headers with a 1 s window
            // remainder; body is Gitlab::Throttle.rate_limiting_response_text,
            // the default text plus a trailing newline.
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            let reset = now + 1;
            let mut response = (StatusCode::TOO_MANY_REQUESTS, "Retry later\n").into_response();
            let headers = response.headers_mut();
            set(headers, "content-type", "text/plain");
            set(headers, "ratelimit-name", "throttle_authenticated_api");
            set(headers, "ratelimit-limit", &RATE_LIMIT.to_string());
            set(headers, "ratelimit-observed", &(RATE_LIMIT + 1).to_string());
            set(headers, "ratelimit-remaining", "0");
            set(headers, "ratelimit-reset", &reset.to_string());
            set(headers, "ratelimit-resettime", &http_date(reset));
            set(headers, "retry-after", "1");
            Some(response)
        }
        Mode::AppLimit429 => Some(json_response(
            StatusCode::TOO_MANY_REQUESTS,
            &serde_json::json!({
                "message": {
                    "error": "This endpoint has been requested too many times. Try again later."
                }
            }),
        )),
        Mode::Status(code) => {
            let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let text = match status.canonical_reason() {
                Some(reason) => format!("{} {reason}", status.as_u16()),
                None => status.as_u16().to_string(),
            };
            Some(message(status, &text))
        }
        Mode::Timeout408 => Some(error(StatusCode::REQUEST_TIMEOUT, "Request timed out")),
    }
}

/// `{"id":42,"path_with_namespace":…,"default_branch":"main"}`.
#[derive(Serialize)]
struct ProjectBody<'a> {
    id: u64,
    path_with_namespace: &'a str,
    default_branch: &'a str,
}

/// One `API::Entities::Blob`, fields in the entity's order.
#[derive(Serialize)]
struct BlobItem<'a> {
    basename: String,
    data: &'a str,
    path: &'a str,
    filename: &'a str,
    id: Option<&'a str>,
    #[serde(rename = "ref")]
    git_ref: &'a str,
    startline: usize,
    project_id: u64,
}

/// The page asked for and the result count.
#[derive(Clone, Copy)]
struct PageWindow {
    /// 1-based page number.
    page: u64,
    /// Effective page size, 1..=100.
    per_page: u64,
    /// Number of results over all pages.
    total: u64,
}

/// One blob search result before pagination.
struct Hit {
    path: String,
    data: String,
    startline: usize,
}

/// Which part of the path a search filter tests (`Gitlab::FileFinder`).
#[derive(Clone, Copy)]
enum FilterKind {
    /// `filename:NAME`: `(?i)NAME$` on the path.
    Filename,
    /// `path:PART`: `(?i)PART` anywhere in the path.
    Path,
    /// `extension:EXT`: `(?i)\.EXT$` on the path.
    Extension,
}

/// Basic blob search like `Gitlab::FileFinder#find`: path matches first, then
/// content matches, both in path order, then the filters as post-filters.
fn blob_search(files: &BTreeMap<String, Vec<u8>>, raw_query: &str) -> Vec<Hit> {
    let (term, filters) = parse_search(raw_query);
    let needle = term.to_lowercase();
    let mut hits = Vec::new();
    // find_by_path: the full path contains the term, case-insensitively.
    for path in files.keys() {
        if path.to_lowercase().contains(&needle) {
            hits.push(Hit {
                path: path.clone(),
                data: String::new(),
                startline: 1,
            });
        }
    }
    // find_by_content: one result per matching line, with one line of context
    // either side; binary blobs are skipped like `git grep -I`.
    for (path, bytes) in files {
        let head = bytes.get(..BINARY_SNIFF_BYTES).unwrap_or(bytes);
        if head.contains(&0) {
            continue;
        }
        let text = String::from_utf8_lossy(bytes);
        let mut lines: Vec<&str> = text.split('\n').collect();
        if text.ends_with('\n') {
            lines.pop();
        }
        for (index, line) in lines.iter().enumerate() {
            if !line.to_lowercase().contains(&needle) {
                continue;
            }
            let first = index.saturating_sub(1);
            let last = (index + 1).min(lines.len().saturating_sub(1));
            let data = lines.get(first..=last).unwrap_or_default().join("\n");
            hits.push(Hit {
                path: path.clone(),
                data,
                startline: first + 1,
            });
        }
    }
    hits.retain(|hit| {
        filters.iter().all(|(kind, value)| match kind {
            FilterKind::Filename => glob_search(&hit.path, value, true),
            FilterKind::Path => glob_search(&hit.path, value, false),
            FilterKind::Extension => glob_search(&hit.path, &format!(".{value}"), true),
        })
    });
    hits
}

/// `Gitlab::Search::Query#extract_filters`: tokens (split on whitespace
/// outside double quotes) of the form `[-]name:VALUE` become filters (value
/// unquoted and lowercased; FOSS ignores the `-` negation); the rest, joined
/// by single spaces, is the term, or `*` when nothing is left.
fn parse_search(raw: &str) -> (String, Vec<(FilterKind, String)>) {
    let tokens = split_tokens(raw);
    let mut fragments: Vec<&str> = Vec::new();
    let mut filters = Vec::new();
    for (kind, name) in [
        (FilterKind::Filename, "filename"),
        (FilterKind::Path, "path"),
        (FilterKind::Extension, "extension"),
    ] {
        for token in &tokens {
            let unsigned = token.strip_prefix('-').unwrap_or(token);
            let is_filter = unsigned
                .strip_prefix(name)
                .is_some_and(|rest| rest.starts_with(':'));
            if !is_filter {
                continue;
            }
            // Ruby: `match.split(':')[1..].join` drops every colon.
            let input: String = token.split(':').skip(1).collect();
            if input.is_empty() {
                continue;
            }
            let unquoted = input.strip_prefix('"').unwrap_or(&input);
            let unquoted = unquoted.strip_suffix('"').unwrap_or(unquoted);
            fragments.push(token);
            filters.push((kind, unquoted.to_lowercase()));
        }
    }
    let rest: Vec<&str> = tokens
        .iter()
        .map(String::as_str)
        .filter(|token| !fragments.contains(token))
        .collect();
    let term = rest.join(" ");
    let term = if term.is_empty() {
        "*".to_owned()
    } else {
        term
    };
    (term, filters)
}

/// Splits on single whitespace characters followed by an even number of
/// double quotes (`TOKEN_WITH_QUOTES_REGEXP`), dropping empty tokens.
fn split_tokens(raw: &str) -> Vec<String> {
    let mut quotes_left = raw.matches('"').count();
    let mut tokens = Vec::new();
    let mut current = String::new();
    for c in raw.chars() {
        if c == '"' {
            quotes_left -= 1;
        }
        if c.is_whitespace() && quotes_left.is_multiple_of(2) {
            if !current.is_empty() {
                tokens.push(std::mem::take(&mut current));
            }
        } else {
            current.push(c);
        }
    }
    if !current.is_empty() {
        tokens.push(current);
    }
    tokens
}

/// Case-insensitive search for `pattern` (where `*` matches any run of
/// characters) in `text`, optionally anchored at the end of `text`.
fn glob_search(text: &str, pattern: &str, anchored_end: bool) -> bool {
    let text: Vec<char> = text.to_lowercase().chars().collect();
    let mut pattern: Vec<char> = pattern.to_lowercase().chars().collect();
    if !anchored_end {
        pattern.push('*');
    }
    (0..=text.len()).any(|start| glob_full(text.get(start..).unwrap_or_default(), &pattern))
}

/// Whether `pattern` (with `*` wildcards) matches all of `text`.
fn glob_full(text: &[char], pattern: &[char]) -> bool {
    let (mut t, mut p) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while let Some(&c) = text.get(t) {
        match pattern.get(p) {
            Some('*') => {
                star = Some((p, t));
                p += 1;
            }
            Some(&pc) if pc == c => {
                t += 1;
                p += 1;
            }
            _ => match star {
                Some((star_p, star_t)) => {
                    p = star_p + 1;
                    t = star_t + 1;
                    star = Some((star_p, star_t + 1));
                }
                None => return false,
            },
        }
    }
    pattern
        .get(p..)
        .unwrap_or_default()
        .iter()
        .all(|&c| c == '*')
}

/// `Pathname#sub_ext('')`: the path without the last component's extension.
fn path_without_extension(path: &str) -> String {
    let name_start = path.rfind('/').map_or(0, |i| i + 1);
    let name = path.get(name_start..).unwrap_or_default();
    match name.rfind('.') {
        Some(dot) if dot > 0 => path.get(..name_start + dot).unwrap_or(path).to_owned(),
        _ => path.to_owned(),
    }
}

/// The decoded query pairs (`+` is a space), in order.
fn parse_query(query: Option<&str>) -> Vec<(String, String)> {
    url::form_urlencoded::parse(query.unwrap_or_default().as_bytes())
        .into_owned()
        .collect()
}

/// The last value of `name` (Rack keeps the last of repeated plain keys).
fn param<'a>(params: &'a [(String, String)], name: &str) -> Option<&'a str> {
    params
        .iter()
        .rev()
        .find(|(key, _)| key == name)
        .map(|(_, value)| value.as_str())
}

/// A Grape `Integer` param: absent or empty → `None`, not an integer → `Err`.
fn integer_param(params: &[(String, String)], name: &str) -> Result<Option<i64>, ()> {
    match param(params, name) {
        None | Some("") => Ok(None),
        Some(value) => value.trim().parse().map(Some).map_err(|_| ()),
    }
}

/// Decodes `%XX` escapes once; `None` when the result is not UTF-8.
fn percent_decode(segment: &str) -> Option<String> {
    percent_encoding::percent_decode_str(segment)
        .decode_utf8()
        .ok()
        .map(std::borrow::Cow::into_owned)
}

/// Ruby's `CGI.escape`, as used by Rails' `to_query` for `Link` URLs.
fn cgi_escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'.' | b'-' | b'~' => {
                out.push(char::from(b));
            }
            b' ' => out.push('+'),
            _ => {
                let _ = write!(out, "%{b:02X}");
            }
        }
    }
    out
}

/// `Content-Disposition: inline; filename="…"; filename*=UTF-8''…` as Rails
/// formats it (non-ASCII replaced by `?` and `"` escaped in the plain form).
fn content_disposition_inline(file_name: &str) -> String {
    let mut ascii = String::new();
    for c in file_name.chars() {
        match c {
            '"' => ascii.push_str("\\\""),
            c if c.is_ascii() && !c.is_ascii_control() => ascii.push(c),
            _ => ascii.push('?'),
        }
    }
    let mut encoded = String::new();
    for b in file_name.bytes() {
        if b.is_ascii_alphanumeric() || b"!#$&+-.^_`|~".contains(&b) {
            encoded.push(char::from(b));
        } else {
            let _ = write!(encoded, "%{b:02X}");
        }
    }
    format!("inline; filename=\"{ascii}\"; filename*=UTF-8''{encoded}")
}

/// Sets a header, skipping values that are not valid header bytes.
fn set(headers: &mut HeaderMap, name: &'static str, value: &str) {
    if let Ok(value) = HeaderValue::from_bytes(value.as_bytes()) {
        headers.insert(HeaderName::from_static(name), value);
    }
}

fn json_response<T: Serialize + ?Sized>(status: StatusCode, body: &T) -> Response {
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    (status, [(header::CONTENT_TYPE, "application/json")], bytes).into_response()
}

/// GitLab's `{"message": …}` error body (`error!` / `not_found!`).
fn message(status: StatusCode, text: &str) -> Response {
    json_response(status, &serde_json::json!({ "message": text }))
}

/// Grape's `{"error": …}` body (validation errors, `render_api_error!`).
fn error(status: StatusCode, text: &str) -> Response {
    json_response(status, &serde_json::json!({ "error": text }))
}

/// The catch-all route's `404 Not Found`.
fn not_found() -> Response {
    message(StatusCode::NOT_FOUND, "404 Not Found")
}

/// An RFC 7231 IMF-fixdate, e.g. `Sun, 06 Nov 1994 08:49:37 GMT`.
fn http_date(unix: u64) -> String {
    const WEEKDAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let days = unix / 86_400;
    let secs = unix % 86_400;
    // Howard Hinnant's civil_from_days, for days since 1970-01-01.
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    let weekday = usize::try_from((days + 4) % 7).unwrap_or(0);
    let month_name = usize::try_from(month - 1)
        .ok()
        .and_then(|m| MONTHS.get(m))
        .copied()
        .unwrap_or("Jan");
    format!(
        "{}, {day:02} {month_name} {year} {:02}:{:02}:{:02} GMT",
        WEEKDAYS.get(weekday).copied().unwrap_or("Thu"),
        secs / 3600,
        secs % 3600 / 60,
        secs % 60,
    )
}

fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// SHA-256, for `X-Gitlab-Content-Sha256` and plausible ids.
fn sha256(data: &[u8]) -> [u8; 32] {
    sha2::Digest::finalize(<sha2::Sha256 as sha2::Digest>::new_with_prefix(data)).into()
}
