//! An HTTP double of the GitLab REST v4 endpoints the wiki source calls —
//! project lookup, blob search, raw files, one branch, the repository tree
//! and the commit list — over a repository with history that tests change
//! while it runs ([`GitLabDouble::put_file`], [`GitLabDouble::delete_file`]),
//! recording every request exactly as it arrived ([`GitLabDouble::requests`]).
//!
//! It follows GitLab's documentation (`doc/api/repositories.md`,
//! `branches.md`, `commits.md`, `rest/_index.md`, `search.md`) and, where
//! the documentation is silent, the source it documents (`lib/api/*.rb`,
//! `Gitlab::Pagination::*`, Gitaly's `GetTreeEntries`):
//!
//! - `{id}`, `{file_path}` and `{branch}` are single URL-encoded path
//!   segments (an unencoded `/` does not match a route → 404);
//!   `PRIVATE-TOKEN` is the only credential accepted;
//! - errors are `{"message":"404 Project Not Found"}`-style bodies
//!   (`not_found!`), validation errors `{"error":"… is invalid"}` (Grape);
//!   an unknown ref is `404 Commit Not Found` on a raw file, `404 Tree Not
//!   Found` on the tree and `404 Branch Not Found` on a branch; the commit
//!   list of an unknown ref is empty;
//! - offset pagination (`page`, `per_page` 20 by default, at most 100):
//!   `X-Page`, `X-Per-Page`, `X-Next-Page`/`X-Prev-Page` (empty when
//!   there is none), `Link` with `prev`/`next`/`first`/`last`, `X-Total` and
//!   `X-Total-Pages` only up to 10,000 results — and never on the commit
//!   list (which says there is a next page when a page is full) nor on the
//!   tree's first page;
//! - keyset pagination of the tree (`pagination=keyset`, GitLab 17.1+): a
//!   page of `per_page` entries, and while more follow, one header
//!   `Link: <…>; rel="next"` whose URL repeats the request's parameters plus
//!   `id`, `page`, `per_page` and `recursive` (sorted, as Rails' `to_query`
//!   writes them) and a `page_token`: Base64 of `{"file_name":"<path of the
//!   last entry>"}` (Gitaly's token; an entry's object id is accepted too,
//!   the older form). No other pagination header. The URL's origin is
//!   GitLab's configured host, which [`GitLabDouble::set_link_base`] changes
//!   to test that a client does not follow it elsewhere;
//! - the recursive tree lists folders (`type: "tree"`, mode `040000`) before
//!   their contents, entries in git's order (a folder sorts as `name/`);
//!   ids are real git object ids: a blob's is SHA-1 of `"blob <len>\0"` and
//!   the bytes, a folder's that of its git tree object;
//! - every change is a commit with its whole file map; a commit id is SHA-1
//!   over a counter, the root tree id and the parent. A `ref` (raw file,
//!   tree, search) is a branch or any commit the double made (its full SHA,
//!   or an unambiguous prefix of at least 7 digits).

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use chrono::{DateTime, NaiveDate, NaiveDateTime, TimeZone as _, Utc};
use serde::Serialize;

/// The numeric id of the one project the double serves.
pub const PROJECT_ID: u64 = 42;
/// The project's default branch: where a request with no `ref` reads and
/// where [`GitLabDouble::put_file`] and [`GitLabDouble::delete_file`] commit.
pub const DEFAULT_BRANCH: &str = "main";
/// `per_page` when the request has none.
const DEFAULT_PER_PAGE: u64 = 20;
/// Larger `per_page` values are clamped to this.
const MAX_PER_PAGE: u64 = 100;
/// Above this many results GitLab omits `X-Total`, `X-Total-Pages` and the
/// `rel="last"` link (GitLab 11.8+).
const TOTAL_HEADERS_LIMIT: u64 = 10_000;
/// `git grep -I` treats a blob as binary when a NUL byte occurs in its first
/// 8000 bytes (git's `FIRST_FEW_BYTES`); binary blobs have no content matches.
const BINARY_SNIFF_BYTES: usize = 8000;
/// The `RateLimit-Limit` advertised by the Rack::Attack 429.
const RATE_LIMIT: u64 = 600;
/// The shortest abbreviated commit SHA accepted as a ref.
const MIN_SHORT_SHA: usize = 7;
/// Who makes the double's commits.
const AUTHOR_NAME: &str = "Wiki Editor";
/// Their address.
const AUTHOR_EMAIL: &str = "wiki-editor@example.com";

/// How the double answers authenticated requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Serve the endpoints normally.
    Normal,
    /// Rack::Attack throttle: 429, plain-text `Retry later`, `Retry-After`
    /// and the `RateLimit-*` headers.
    RackAttack429,
    /// Application rate limit (e.g. `search_rate_limit`): 429 with a JSON
    /// body and no `RateLimit-*` headers.
    AppLimit429,
    /// Answer every request with this status and `{"message":"<n> <reason>"}`.
    Status(u16),
    /// The search timeout rescue: 408 `{"error":"Request timed out"}`.
    Timeout408,
}

/// One request as a double received it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    /// The request method, e.g. `GET`.
    pub method: String,
    /// The request target's path and query exactly as sent (still encoded).
    pub path_and_query: String,
    /// Every header as (lowercase name, value), in arrival order per name.
    pub headers: Vec<(String, String)>,
}

impl Recorded {
    /// The first value of header `name` (lowercase).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The path, without the query.
    pub fn path(&self) -> &str {
        self.path_and_query
            .split_once('?')
            .map_or(self.path_and_query.as_str(), |(path, _)| path)
    }
}

/// The requests a double has received, oldest first; every double of an
/// HTTP upstream can keep one.
#[derive(Debug, Default)]
pub struct Recorder(Mutex<Vec<Recorded>>);

impl Recorder {
    /// Records `request` as it arrived.
    pub fn record(&self, request: &Request) {
        let uri = request.uri();
        let path_and_query = uri
            .path_and_query()
            .map_or_else(|| uri.path().to_owned(), |pq| pq.as_str().to_owned());
        let headers = request
            .headers()
            .iter()
            .map(|(name, value)| {
                (
                    name.as_str().to_owned(),
                    String::from_utf8_lossy(value.as_bytes()).into_owned(),
                )
            })
            .collect();
        lock(&self.0).push(Recorded {
            method: request.method().as_str().to_owned(),
            path_and_query,
            headers,
        });
    }

    /// Everything recorded so far.
    pub fn all(&self) -> Vec<Recorded> {
        lock(&self.0).clone()
    }

    /// Forgets what was recorded.
    pub fn clear(&self) {
        lock(&self.0).clear();
    }
}

/// The git blob id of `content`: SHA-1 of `"blob <len>\0"` and the bytes,
/// as `git hash-object` computes it.
pub fn git_blob_id(content: &[u8]) -> String {
    let mut hasher = <sha1::Sha1 as sha1::Digest>::new();
    sha1::Digest::update(&mut hasher, format!("blob {}\0", content.len()).as_bytes());
    sha1::Digest::update(&mut hasher, content);
    hex(&sha1::Digest::finalize(hasher))
}

/// A running GitLab double; the server stops when this is dropped.
pub struct GitLabDouble {
    /// The instance root, e.g. `http://127.0.0.1:PORT/`.
    pub base_url: url::Url,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for GitLabDouble {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GitLabDouble")
            .field("base_url", &self.base_url.as_str())
            .finish_non_exhaustive()
    }
}

impl GitLabDouble {
    /// Starts a double on `127.0.0.1:0`.
    ///
    /// `project` is the path `group/project` (the double also answers to the
    /// numeric id [`PROJECT_ID`]), `token` the only `PRIVATE-TOKEN`
    /// accepted, `refs` maps branch name → (repository path → file bytes):
    /// each branch starts as one commit of its own. The default branch is
    /// [`DEFAULT_BRANCH`]; without it in `refs` it has no commit until the
    /// first [`GitLabDouble::put_file`].
    ///
    /// Panics when a path is not a valid repository path.
    pub async fn start(
        project: &str,
        token: &str,
        refs: BTreeMap<String, BTreeMap<String, Vec<u8>>>,
    ) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|e| panic!("cannot bind the GitLab double: {e}"));
        let addr = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("the GitLab double has no address: {e}"));
        let base_url = url::Url::parse(&format!("http://{addr}/"))
            .unwrap_or_else(|e| panic!("the GitLab double's URL: {e}"));
        let mut repo = Repo::default();
        for (branch, files) in refs {
            for path in files.keys() {
                check_path(path);
            }
            let files = files
                .into_iter()
                .map(|(path, bytes)| (path, Blob::new(bytes)))
                .collect();
            repo.commit(&branch, files, "Initial commit".to_owned());
        }
        let shared = Arc::new(Shared {
            link_base: Mutex::new(format!("http://{addr}")),
            project: project.to_owned(),
            token: token.to_owned(),
            repo: Mutex::new(repo),
            mode: Mutex::new(Mode::Normal),
            requests: Recorder::default(),
        });
        let app = Router::new()
            .fallback(handle)
            .with_state(Arc::clone(&shared));
        let task = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                panic!("the GitLab double stopped: {e}");
            }
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
    pub fn set_mode(&self, mode: Mode) {
        if let Mode::Status(code) = mode {
            assert!(
                StatusCode::from_u16(code).is_ok(),
                "{code} is not an HTTP status code"
            );
        }
        *lock(&self.shared.mode) = mode;
    }

    /// Sets the origin `Link` headers (and `web_url`s) name, as GitLab's
    /// configured `gitlab.host` and `port` do — `http://other.example:81`;
    /// `None` goes back to the double's own.
    pub fn set_link_base(&self, origin: Option<&str>) {
        let own = self.base_url.as_str().trim_end_matches('/').to_owned();
        *lock(&self.shared.link_base) = origin.map_or(own, |o| o.trim_end_matches('/').to_owned());
    }

    /// Every request received so far, oldest first.
    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.requests.all()
    }

    /// Forgets the requests received so far (to count a later step's).
    pub fn clear_requests(&self) {
        self.shared.requests.clear();
    }

    /// Writes `bytes` to `path` on the default branch as a new commit, and
    /// returns its id.
    ///
    /// Panics when `path` is not a valid repository path, or a file stands
    /// where it needs a folder (or a folder where it names a file).
    pub fn put_file(&self, path: &str, bytes: impl Into<Vec<u8>>) -> String {
        check_path(path);
        let mut repo = lock(&self.shared.repo);
        let mut files = repo.files_of_branch(DEFAULT_BRANCH);
        let conflict = files.keys().any(|existing| {
            existing
                .strip_prefix(path)
                .is_some_and(|rest| rest.starts_with('/'))
                || path
                    .strip_prefix(existing.as_str())
                    .is_some_and(|rest| rest.starts_with('/'))
        });
        assert!(!conflict, "{path}: a file and a folder cannot share a path");
        let title = if files.contains_key(path) {
            format!("Update {path}")
        } else {
            format!("Add {path}")
        };
        files.insert(path.to_owned(), Blob::new(bytes.into()));
        repo.commit(DEFAULT_BRANCH, files, title)
    }

    /// Deletes `path` from the default branch as a new commit, and returns
    /// its id.
    ///
    /// Panics when there is no such file.
    pub fn delete_file(&self, path: &str) -> String {
        let mut repo = lock(&self.shared.repo);
        let mut files = repo.files_of_branch(DEFAULT_BRANCH);
        assert!(
            files.remove(path).is_some(),
            "{path} is not a file of {DEFAULT_BRANCH}"
        );
        repo.commit(DEFAULT_BRANCH, files, format!("Delete {path}"))
    }

    /// The commit `branch` points at, if it exists.
    pub fn branch_head(&self, branch: &str) -> Option<String> {
        lock(&self.shared.repo).branches.get(branch).cloned()
    }

    /// The commit the default branch points at, if it has one.
    pub fn head(&self) -> Option<String> {
        self.branch_head(DEFAULT_BRANCH)
    }
}

impl Drop for GitLabDouble {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Locks `mutex`, whatever a panicking holder left behind.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Panics unless `path` is a path git can hold: segments that are neither
/// empty, `.` nor `..`, and no NUL.
fn check_path(path: &str) {
    let valid = !path.is_empty()
        && !path.contains('\0')
        && path
            .split('/')
            .all(|segment| !matches!(segment, "" | "." | ".."));
    assert!(valid, "{path:?} is not a repository path");
}

/// A file's bytes and blob id.
#[derive(Clone)]
struct Blob {
    bytes: Arc<Vec<u8>>,
    id: String,
}

impl Blob {
    fn new(bytes: Vec<u8>) -> Self {
        Self {
            id: git_blob_id(&bytes),
            bytes: Arc::new(bytes),
        }
    }
}

/// One commit: its whole file map.
struct Commit {
    id: String,
    parent_ids: Vec<String>,
    title: String,
    time: DateTime<Utc>,
    files: BTreeMap<String, Blob>,
}

/// The repository: branches, and every commit ever made.
#[derive(Default)]
struct Repo {
    branches: BTreeMap<String, String>,
    commits: HashMap<String, Arc<Commit>>,
    /// Commits made so far; part of each commit's id.
    counter: u64,
    /// The latest commit time handed out (times never go back).
    last_time: Option<DateTime<Utc>>,
}

impl Repo {
    /// The files at the head of `branch` (none for a missing branch).
    fn files_of_branch(&self, branch: &str) -> BTreeMap<String, Blob> {
        self.branches
            .get(branch)
            .and_then(|id| self.commits.get(id))
            .map(|commit| commit.files.clone())
            .unwrap_or_default()
    }

    /// Makes a commit of `files` on `branch` (its parent the branch's head,
    /// if any), moves the branch to it, and returns its id.
    fn commit(&mut self, branch: &str, files: BTreeMap<String, Blob>, title: String) -> String {
        self.counter += 1;
        let parent_ids: Vec<String> = self.branches.get(branch).cloned().into_iter().collect();
        let root = Dir::of(&files);
        let mut state = format!("counter {}\ntree {}\n", self.counter, root.id);
        for parent in &parent_ids {
            let _ = writeln!(state, "parent {parent}");
        }
        let mut hasher = <sha1::Sha1 as sha1::Digest>::new();
        sha1::Digest::update(&mut hasher, state.as_bytes());
        let id = hex(&sha1::Digest::finalize(hasher));
        let now = DateTime::<Utc>::from(SystemTime::now());
        let now = Utc
            .timestamp_opt(now.timestamp(), 0)
            .single()
            .unwrap_or(now);
        let time = self.last_time.map_or(now, |last| last.max(now));
        self.last_time = Some(time);
        self.commits.insert(
            id.clone(),
            Arc::new(Commit {
                id: id.clone(),
                parent_ids,
                title,
                time,
                files,
            }),
        );
        self.branches.insert(branch.to_owned(), id.clone());
        id
    }

    /// The commit a `ref` names: a branch, a full commit SHA, or an
    /// unambiguous prefix of one.
    fn resolve(&self, git_ref: &str) -> Option<Arc<Commit>> {
        if let Some(id) = self.branches.get(git_ref) {
            return self.commits.get(id).cloned();
        }
        let lower = git_ref.to_ascii_lowercase();
        if lower.len() < MIN_SHORT_SHA || !lower.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let mut found = self.commits.values().filter(|c| c.id.starts_with(&lower));
        let first = found.next()?;
        found.next().is_none().then(|| Arc::clone(first))
    }

    /// The commit's first-parent history, newest first.
    fn history(&self, head: &Arc<Commit>) -> Vec<Arc<Commit>> {
        let mut out = vec![Arc::clone(head)];
        while let Some(parent) = out
            .last()
            .and_then(|c| c.parent_ids.first())
            .and_then(|id| self.commits.get(id))
        {
            out.push(Arc::clone(parent));
        }
        out
    }

    /// Whether `commit` changed anything at or below `path` compared with
    /// its first parent (or, without one, has anything there).
    fn touches(&self, commit: &Commit, path: &str) -> bool {
        let under = |files: &BTreeMap<String, Blob>| -> Vec<(String, String)> {
            files
                .iter()
                .filter(|(p, _)| {
                    p.as_str() == path
                        || p.strip_prefix(path)
                            .is_some_and(|rest| rest.starts_with('/'))
                })
                .map(|(p, b)| (p.clone(), b.id.clone()))
                .collect()
        };
        let parent = commit
            .parent_ids
            .first()
            .and_then(|id| self.commits.get(id))
            .map(|c| under(&c.files))
            .unwrap_or_default();
        under(&commit.files) != parent
    }

    /// The newest commit in `head`'s history that changed `path`.
    fn last_commit_of(&self, head: &Arc<Commit>, path: &str) -> String {
        self.history(head)
            .into_iter()
            .find(|c| self.touches(c, path))
            .map_or_else(|| head.id.clone(), |c| c.id.clone())
    }
}

/// A folder of a commit's tree, with its git tree id.
struct Dir {
    id: String,
    /// Entries in git's order.
    entries: Vec<(String, Node)>,
}

enum Node {
    File(String),
    Dir(Dir),
}

impl Dir {
    /// The tree of `files`.
    fn of(files: &BTreeMap<String, Blob>) -> Self {
        #[derive(Default)]
        struct Building {
            files: BTreeMap<String, String>,
            dirs: BTreeMap<String, Building>,
        }
        fn finish(node: Building) -> Dir {
            let mut entries: Vec<(String, Node)> = node
                .files
                .into_iter()
                .map(|(name, id)| (name, Node::File(id)))
                .chain(
                    node.dirs
                        .into_iter()
                        .map(|(name, dir)| (name, Node::Dir(finish(dir)))),
                )
                .collect();
            // Git sorts a folder as if its name ended with `/`.
            entries.sort_by_cached_key(sort_key);
            let mut object = Vec::new();
            for (name, node) in &entries {
                let (mode, id) = match node {
                    Node::File(id) => ("100644", id.as_str()),
                    Node::Dir(dir) => ("40000", dir.id.as_str()),
                };
                object.extend_from_slice(format!("{mode} {name}\0").as_bytes());
                object.extend_from_slice(&unhex(id));
            }
            let mut hasher = <sha1::Sha1 as sha1::Digest>::new();
            sha1::Digest::update(&mut hasher, format!("tree {}\0", object.len()).as_bytes());
            sha1::Digest::update(&mut hasher, &object);
            Dir {
                id: hex(&sha1::Digest::finalize(hasher)),
                entries,
            }
        }
        fn sort_key((name, node): &(String, Node)) -> Vec<u8> {
            let mut key = name.as_bytes().to_vec();
            if matches!(node, Node::Dir(_)) {
                key.push(b'/');
            }
            key
        }
        let mut root = Building::default();
        for (path, blob) in files {
            let mut segments: Vec<&str> = path.split('/').collect();
            let Some(name) = segments.pop() else { continue };
            let mut node = &mut root;
            for segment in segments {
                node = node.dirs.entry(segment.to_owned()).or_default();
            }
            node.files.insert(name.to_owned(), blob.id.clone());
        }
        finish(root)
    }

    /// The folder at `path` (`""` for this one).
    fn find(&self, path: &str) -> Option<&Dir> {
        let mut dir = self;
        for segment in path.split('/').filter(|s| !s.is_empty()) {
            dir = dir.entries.iter().find_map(|(name, node)| match node {
                Node::Dir(d) if name == segment => Some(d),
                _ => None,
            })?;
        }
        Some(dir)
    }

    /// The entries as `git ls-tree [-r -t]` lists them: with `recursive`,
    /// each folder followed by its contents.
    fn list(&self, prefix: &str, recursive: bool, out: &mut Vec<TreeItem>) {
        for (name, node) in &self.entries {
            let path = if prefix.is_empty() {
                name.clone()
            } else {
                format!("{prefix}/{name}")
            };
            match node {
                Node::File(id) => out.push(TreeItem {
                    id: id.clone(),
                    name: name.clone(),
                    kind: "blob",
                    path,
                    mode: "100644",
                }),
                Node::Dir(dir) => {
                    out.push(TreeItem {
                        id: dir.id.clone(),
                        name: name.clone(),
                        kind: "tree",
                        path: path.clone(),
                        mode: "040000",
                    });
                    if recursive {
                        dir.list(&path, true, out);
                    }
                }
            }
        }
    }
}

/// State shared with the server task.
struct Shared {
    /// The origin `Link` URLs name, without a trailing slash.
    link_base: Mutex<String>,
    project: String,
    token: String,
    repo: Mutex<Repo>,
    mode: Mutex<Mode>,
    requests: Recorder,
}

/// The one handler: records the request, then routes on the raw path.
async fn handle(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    shared.requests.record(&request);
    let uri = request.uri();
    shared.answer(request.method(), uri.path(), uri.query(), request.headers())
}

/// A request as the endpoints see it.
struct Call<'a> {
    /// The path as it arrived (still encoded), for `Link` URLs.
    raw_path: &'a str,
    /// The `{id}` segment, still encoded.
    id: &'a str,
    /// The decoded query pairs, in order.
    params: Vec<(String, String)>,
}

impl Shared {
    fn answer(
        &self,
        method: &Method,
        path: &str,
        query: Option<&str>,
        headers: &HeaderMap,
    ) -> Response {
        // Auth first: only the header form, only the configured token.
        let authorized = headers
            .get("private-token")
            .is_some_and(|value| value.as_bytes() == self.token.as_bytes());
        if !authorized {
            return message(StatusCode::UNAUTHORIZED, "401 Unauthorized");
        }
        let mode = *lock(&self.mode);
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
        // `{id}`, `{file_path}` and `{branch}` are single segments: an
        // unencoded slash yields more segments and matches no route
        // (NO_SLASH_URL_PART_REGEX).
        let segments: Vec<&str> = rest.split('/').collect();
        let Some(id) = segments.first().copied().filter(|id| !id.is_empty()) else {
            return not_found();
        };
        let call = Call {
            raw_path: path,
            id,
            params: parse_query(query),
        };
        match segments.get(1..).unwrap_or_default() {
            [] => self.project(&call),
            ["search"] | ["-", "search"] => self.search(&call),
            ["repository", "files", file, "raw"] if !file.is_empty() => self.raw(&call, file),
            ["repository", "branches", branch] if !branch.is_empty() => self.branch(&call, branch),
            ["repository", "tree"] => self.tree(&call),
            ["repository", "commits"] => self.commits(&call),
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

    fn link_base(&self) -> String {
        lock(&self.link_base).clone()
    }

    fn web_url(&self, tail: &str) -> String {
        format!("{}/{}/-/{tail}", self.link_base(), self.project)
    }

    /// `GET /api/v4/projects/{id}`.
    fn project(&self, call: &Call<'_>) -> Response {
        if !self.is_project(call.id) {
            return project_not_found();
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
    fn search(&self, call: &Call<'_>) -> Response {
        let params = &call.params;
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
        let (page, per_page) = page_params(params, &mut errors);
        if !errors.is_empty() {
            return error(StatusCode::BAD_REQUEST, &errors.join(", "));
        }
        if !self.is_project(call.id) {
            return project_not_found();
        }
        let git_ref = param(params, "ref")
            .filter(|r| !r.is_empty())
            .unwrap_or(DEFAULT_BRANCH);
        // An unknown ref has no blobs: the search answers an empty list.
        let hits = lock(&self.repo)
            .resolve(git_ref)
            .map(|commit| blob_search(&commit.files, search))
            .unwrap_or_default();
        let total = u64::try_from(hits.len()).unwrap_or(u64::MAX);
        let items: Vec<BlobItem<'_>> = hits
            .iter()
            .skip(skip_of(page, per_page))
            .take(usize::try_from(per_page).unwrap_or(usize::MAX))
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
        self.offset_headers(
            headers,
            call,
            &BTreeMap::new(),
            Offset {
                page,
                per_page,
                total,
                counted: true,
            },
        );
        set(headers, "x-search-type", "basic");
        response
    }

    /// The offset pagination headers of `Gitlab::Pagination::OffsetPagination`
    /// over a Kaminari array. `Link` URLs repeat every request param plus
    /// the route's `id` and `defaults` (declared defaults), sorted by name
    /// like Rails' `to_query`. Uncounted (`without_count`), no `X-Total`,
    /// `X-Total-Pages` or `rel="last"`.
    fn offset_headers(
        &self,
        headers: &mut HeaderMap,
        call: &Call<'_>,
        defaults: &BTreeMap<String, String>,
        window: Offset,
    ) {
        let Offset {
            page,
            per_page,
            total,
            counted,
        } = window;
        // Kaminari: total_pages may be 0; next/prev are nil on the last page,
        // on the first page and whenever the page is out of range.
        let kaminari_pages = total.div_ceil(per_page);
        let next = (page < kaminari_pages).then(|| page + 1);
        let prev = (page > 1 && page <= kaminari_pages).then(|| page - 1);
        // Omission rule (GitLab 11.8+): above 10,000 results, no X-Total,
        // X-Total-Pages or rel="last".
        let totals = Some(total).filter(|t| counted && *t <= TOTAL_HEADERS_LIMIT);

        let mut query = self.link_query(call, defaults);
        query.insert("per_page".to_owned(), per_page.to_string());
        let href = |target: u64| {
            let mut query = query.clone();
            query.insert("page".to_owned(), target.to_string());
            self.link_href(call, &query)
        };
        let mut links = Vec::new();
        if let Some(prev) = prev {
            links.push(format!("<{}>; rel=\"prev\"", href(prev)));
        }
        if let Some(next) = next {
            links.push(format!("<{}>; rel=\"next\"", href(next)));
        }
        links.push(format!("<{}>; rel=\"first\"", href(1)));
        if let Some(total) = totals {
            let total_pages = total.div_ceil(per_page).max(1);
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
        if let Some(total) = totals {
            set(headers, "x-total", &total.to_string());
            set(
                headers,
                "x-total-pages",
                &total.div_ceil(per_page).max(1).to_string(),
            );
        }
    }

    /// The request's params, its defaults and the route's `id` (decoded),
    /// as Grape's `params` holds them.
    fn link_query(
        &self,
        call: &Call<'_>,
        defaults: &BTreeMap<String, String>,
    ) -> BTreeMap<String, String> {
        let mut query = defaults.clone();
        query.extend(call.params.iter().cloned());
        query.insert(
            "id".to_owned(),
            percent_decode(call.id).unwrap_or_else(|| call.id.to_owned()),
        );
        query
    }

    /// A `Link` URL: the configured origin, the request's path, `query`.
    fn link_href(&self, call: &Call<'_>, query: &BTreeMap<String, String>) -> String {
        let encoded: Vec<String> = query
            .iter()
            .map(|(k, v)| format!("{}={}", cgi_escape(k), cgi_escape(v)))
            .collect();
        format!(
            "{}{}?{}",
            self.link_base(),
            call.raw_path,
            encoded.join("&")
        )
    }

    /// `GET /api/v4/projects/{id}/repository/files/{file_path}/raw[?ref=…]`.
    fn raw(&self, call: &Call<'_>, file_segment: &str) -> Response {
        if !self.is_project(call.id) {
            return project_not_found();
        }
        let git_ref = param(&call.params, "ref")
            .filter(|r| !r.is_empty())
            .unwrap_or(DEFAULT_BRANCH);
        let repo = lock(&self.repo);
        let Some(commit) = repo.resolve(git_ref) else {
            return message(StatusCode::NOT_FOUND, "404 Commit Not Found");
        };
        // The client percent-encodes the path into one segment; decode once.
        let Some(file_path) = percent_decode(file_segment) else {
            return message(StatusCode::NOT_FOUND, "404 File Not Found");
        };
        let Some(blob) = commit.files.get(&file_path) else {
            return message(StatusCode::NOT_FOUND, "404 File Not Found");
        };
        let last_commit_id = repo.last_commit_of(&commit, &file_path);
        drop(repo);
        let bytes = blob.bytes.as_slice();
        let file_name = file_path.rsplit('/').next().unwrap_or(&file_path);

        // Range requests are not supported here: always the full 200.
        let mut response = (StatusCode::OK, bytes.to_vec()).into_response();
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
        set(headers, "x-gitlab-blob-id", &blob.id);
        set(headers, "x-gitlab-commit-id", &commit.id);
        set(headers, "x-gitlab-content-sha256", &hex(&sha256(bytes)));
        set(headers, "x-gitlab-encoding", "base64");
        set(headers, "x-gitlab-execute-filemode", "false");
        set(headers, "x-gitlab-file-name", file_name);
        set(headers, "x-gitlab-file-path", &file_path);
        set(headers, "x-gitlab-last-commit-id", &last_commit_id);
        set(headers, "x-gitlab-ref", git_ref);
        set(headers, "x-gitlab-size", &bytes.len().to_string());
        response
    }

    /// `GET /api/v4/projects/{id}/repository/branches/{branch}`.
    fn branch(&self, call: &Call<'_>, branch_segment: &str) -> Response {
        if !self.is_project(call.id) {
            return project_not_found();
        }
        let Some(name) = percent_decode(branch_segment) else {
            return message(StatusCode::NOT_FOUND, "404 Branch Not Found");
        };
        let repo = lock(&self.repo);
        let Some(commit) = repo.branches.get(&name).and_then(|id| repo.commits.get(id)) else {
            return message(StatusCode::NOT_FOUND, "404 Branch Not Found");
        };
        let default = name == DEFAULT_BRANCH;
        let body = BranchBody {
            name: &name,
            commit: self.commit_body(commit),
            merged: false,
            // New projects protect their default branch.
            protected: default,
            developers_can_push: false,
            developers_can_merge: false,
            can_push: true,
            default,
            web_url: self.web_url(&format!("tree/{name}")),
        };
        json_response(StatusCode::OK, &body)
    }

    /// `API::Entities::Commit`.
    fn commit_body<'a>(&self, commit: &'a Commit) -> CommitBody<'a> {
        let date = commit
            .time
            .format("%Y-%m-%dT%H:%M:%S%.3f+00:00")
            .to_string();
        CommitBody {
            id: &commit.id,
            short_id: commit.id.get(..8).unwrap_or(&commit.id),
            created_at: date.clone(),
            parent_ids: &commit.parent_ids,
            title: &commit.title,
            message: &commit.title,
            author_name: AUTHOR_NAME,
            author_email: AUTHOR_EMAIL,
            authored_date: date.clone(),
            committer_name: AUTHOR_NAME,
            committer_email: AUTHOR_EMAIL,
            committed_date: date,
            trailers: BTreeMap::new(),
            extended_trailers: BTreeMap::new(),
            web_url: self.web_url(&format!("commit/{}", commit.id)),
        }
    }

    /// `GET /api/v4/projects/{id}/repository/tree`.
    fn tree(&self, call: &Call<'_>) -> Response {
        let params = &call.params;
        let mut errors = Vec::new();
        let recursive = match param(params, "recursive") {
            None | Some("") => false,
            Some(value) => match boolean(value) {
                Some(b) => b,
                None => {
                    errors.push("recursive is invalid".to_owned());
                    false
                }
            },
        };
        let (page, per_page) = page_params(params, &mut errors);
        let pagination = param(params, "pagination").unwrap_or("legacy");
        if !matches!(pagination, "legacy" | "keyset" | "none") {
            errors.push("pagination does not have a valid value".to_owned());
        }
        if pagination == "none" && !recursive {
            errors.push("pagination cannot be \"none\" unless \"recursive\" is true".to_owned());
        }
        if !errors.is_empty() {
            return error(StatusCode::BAD_REQUEST, &errors.join(", "));
        }
        if !self.is_project(call.id) {
            return project_not_found();
        }
        let git_ref = param(params, "ref")
            .filter(|r| !r.is_empty())
            .unwrap_or(DEFAULT_BRANCH);
        let Some(commit) = lock(&self.repo).resolve(git_ref) else {
            return message(StatusCode::NOT_FOUND, "404 Tree Not Found");
        };
        let root = Dir::of(&commit.files);
        let path = param(params, "path").unwrap_or_default().trim_matches('/');
        // GitLab 17.7+: a path that is not a folder is a 404.
        let Some(dir) = root.find(path) else {
            return message(
                StatusCode::NOT_FOUND,
                "404 invalid revision or path Not Found",
            );
        };
        let mut items = Vec::new();
        dir.list(path, recursive, &mut items);

        // Grape's params as the `Link` repeats them: declared defaults.
        let mut defaults = BTreeMap::new();
        defaults.insert("recursive".to_owned(), recursive.to_string());
        defaults.insert("pagination".to_owned(), pagination.to_owned());
        defaults.insert("page".to_owned(), page.to_string());
        defaults.insert("per_page".to_owned(), per_page.to_string());
        match pagination {
            "none" => json_response(StatusCode::OK, &items),
            "keyset" => self.tree_keyset(call, &defaults, &items, per_page, recursive),
            _ => {
                let count = u64::try_from(items.len()).unwrap_or(u64::MAX);
                let shown: Vec<&TreeItem> = items
                    .iter()
                    .skip(skip_of(page, per_page))
                    .take(usize::try_from(per_page).unwrap_or(usize::MAX))
                    .collect();
                let mut response = json_response(StatusCode::OK, &shown);
                // The first page comes from Gitaly, uncounted, with a next
                // page while its cursor says more follow; later ones from
                // Kaminari over the whole list.
                let window = if page == 1 {
                    let more = items.len() > shown.len();
                    Offset {
                        page,
                        per_page,
                        total: if more { per_page + 1 } else { count },
                        counted: false,
                    }
                } else {
                    Offset {
                        page,
                        per_page,
                        total: count,
                        counted: true,
                    }
                };
                self.offset_headers(response.headers_mut(), call, &defaults, window);
                response
            }
        }
    }

    /// A keyset page of the tree as Gitaly cuts it: after the entry the
    /// `page_token` names, `per_page` entries, and a `Link` to the next
    /// page while entries follow.
    fn tree_keyset(
        &self,
        call: &Call<'_>,
        defaults: &BTreeMap<String, String>,
        items: &[TreeItem],
        per_page: u64,
        recursive: bool,
    ) -> Response {
        let start = match param(&call.params, "page_token").filter(|t| !t.is_empty()) {
            None => 0,
            Some(token) => {
                let found = match decode_page_token(token) {
                    Some(file_name) => items.iter().position(|i| i.path == file_name),
                    None => items.iter().position(|i| i.id == token),
                };
                match found {
                    Some(index) => index + 1,
                    None => {
                        return message(
                            StatusCode::BAD_REQUEST,
                            &format!("400 Bad request - could not find starting OID: {token}"),
                        );
                    }
                }
            }
        };
        let limit = usize::try_from(per_page).unwrap_or(usize::MAX);
        let page = items.get(start..).unwrap_or_default();
        let shown = page.get(..limit.min(page.len())).unwrap_or_default();
        let mut response = json_response(StatusCode::OK, &shown);
        if let Some(last) = shown.last().filter(|_| start + limit < items.len()) {
            let mut query = self.link_query(call, defaults);
            query.insert("recursive".to_owned(), recursive.to_string());
            query.insert("page_token".to_owned(), encode_page_token(&last.path));
            let href = self.link_href(call, &query);
            set(
                response.headers_mut(),
                "link",
                &format!("<{href}>; rel=\"next\""),
            );
        }
        response
    }

    /// `GET /api/v4/projects/{id}/repository/commits`.
    fn commits(&self, call: &Call<'_>) -> Response {
        let params = &call.params;
        let mut errors = Vec::new();
        let since = match param(params, "since").filter(|s| !s.is_empty()) {
            None => None,
            Some(value) => {
                let parsed = parse_datetime(value);
                if parsed.is_none() {
                    errors.push("since is invalid".to_owned());
                }
                parsed
            }
        };
        let until = match param(params, "until").filter(|s| !s.is_empty()) {
            None => None,
            Some(value) => {
                let parsed = parse_datetime(value);
                if parsed.is_none() {
                    errors.push("until is invalid".to_owned());
                }
                parsed
            }
        };
        let (page, per_page) = page_params(params, &mut errors);
        if !errors.is_empty() {
            return error(StatusCode::BAD_REQUEST, &errors.join(", "));
        }
        if !self.is_project(call.id) {
            return project_not_found();
        }
        let git_ref = param(params, "ref_name")
            .filter(|r| !r.is_empty())
            .unwrap_or(DEFAULT_BRANCH);
        let path = param(params, "path")
            .filter(|p| !p.is_empty())
            .map(|p| p.trim_matches('/').to_owned());
        let repo = lock(&self.repo);
        // An unknown ref has no commits: an empty list.
        let history = repo
            .resolve(git_ref)
            .map(|head| repo.history(&head))
            .unwrap_or_default();
        let selected: Vec<Arc<Commit>> = history
            .into_iter()
            .filter(|c| since.is_none_or(|s| c.time >= s))
            .filter(|c| until.is_none_or(|u| c.time <= u))
            .filter(|c| path.as_deref().is_none_or(|p| repo.touches(c, p)))
            .collect();
        drop(repo);
        let offset = skip_of(page, per_page);
        let shown: Vec<CommitBody<'_>> = selected
            .iter()
            .skip(offset)
            .take(usize::try_from(per_page).unwrap_or(usize::MAX))
            .map(|c| self.commit_body(c))
            .collect();
        // `commit_count = offset + commits.size + 1`: a full page says
        // another follows; no totals (`exclude_total_headers`).
        let count = u64::try_from(offset + shown.len() + 1).unwrap_or(u64::MAX);
        let mut response = json_response(StatusCode::OK, &shown);
        self.offset_headers(
            response.headers_mut(),
            call,
            &BTreeMap::new(),
            Offset {
                page,
                per_page,
                total: count,
                counted: false,
            },
        );
        response
    }
}

/// Gitaly's page token: Base64 of `{"file_name":"<path>"}`.
fn encode_page_token(path: &str) -> String {
    let json = serde_json::json!({ "file_name": path }).to_string();
    base64::engine::general_purpose::STANDARD.encode(json)
}

/// The path a page token names; `None` for the older form, an object id.
fn decode_page_token(token: &str) -> Option<String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(token)
        .ok()?;
    let value: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    value.get("file_name")?.as_str().map(str::to_owned)
}

/// A Grape `DateTime`: ISO 8601 with or without an offset (UTC then), or a
/// date.
fn parse_datetime(value: &str) -> Option<DateTime<Utc>> {
    if let Ok(date) = DateTime::parse_from_rfc3339(value) {
        return Some(date.with_timezone(&Utc));
    }
    for format in [
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%dT%H:%M:%S",
        "%Y-%m-%d %H:%M:%S",
    ] {
        if let Ok(naive) = NaiveDateTime::parse_from_str(value, format) {
            return Some(naive.and_utc());
        }
    }
    NaiveDate::parse_from_str(value, "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|naive| naive.and_utc())
}

/// A Grape `Boolean`.
fn boolean(value: &str) -> Option<bool> {
    match value.to_ascii_lowercase().as_str() {
        "true" | "1" | "t" | "yes" | "y" => Some(true),
        "false" | "0" | "f" | "no" | "n" => Some(false),
        _ => None,
    }
}

/// `page` (1 by default) and `per_page` (20 by default, at most 100), with
/// Grape's errors for values that are not integers.
fn page_params(params: &[(String, String)], errors: &mut Vec<String>) -> (u64, u64) {
    let page = match integer_param(params, "page") {
        Ok(page) => u64::try_from(page.unwrap_or(1).max(1)).unwrap_or(1),
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
    (page, per_page)
}

/// How many results come before `page`.
fn skip_of(page: u64, per_page: u64) -> usize {
    usize::try_from(page.saturating_sub(1).saturating_mul(per_page)).unwrap_or(usize::MAX)
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

/// One `API::Entities::TreeObject`.
#[derive(Serialize)]
struct TreeItem {
    id: String,
    name: String,
    #[serde(rename = "type")]
    kind: &'static str,
    path: String,
    mode: &'static str,
}

/// `API::Entities::Commit`, fields in the entity's order.
#[derive(Serialize)]
struct CommitBody<'a> {
    id: &'a str,
    short_id: &'a str,
    created_at: String,
    parent_ids: &'a [String],
    title: &'a str,
    message: &'a str,
    author_name: &'static str,
    author_email: &'static str,
    authored_date: String,
    committer_name: &'static str,
    committer_email: &'static str,
    committed_date: String,
    trailers: BTreeMap<String, String>,
    extended_trailers: BTreeMap<String, Vec<String>>,
    web_url: String,
}

/// `API::Entities::Branch`, fields in the entity's order.
#[derive(Serialize)]
struct BranchBody<'a> {
    name: &'a str,
    commit: CommitBody<'a>,
    merged: bool,
    protected: bool,
    developers_can_push: bool,
    developers_can_merge: bool,
    can_push: bool,
    default: bool,
    web_url: String,
}

/// The page asked for and the result count.
#[derive(Clone, Copy)]
struct Offset {
    /// 1-based page number.
    page: u64,
    /// Effective page size, 1..=100.
    per_page: u64,
    /// Number of results over all pages, as Kaminari is told it.
    total: u64,
    /// Whether `total` is a real count, shown in `X-Total`, `X-Total-Pages`
    /// and `rel="last"`.
    counted: bool,
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
fn blob_search(files: &BTreeMap<String, Blob>, raw_query: &str) -> Vec<Hit> {
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
    for (path, blob) in files {
        let bytes = blob.bytes.as_slice();
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

fn project_not_found() -> Response {
    message(StatusCode::NOT_FOUND, "404 Project Not Found")
}

/// An RFC 7231 IMF-fixdate, e.g. `Sun, 06 Nov 1994 08:49:37 GMT`.
fn http_date(unix: u64) -> String {
    i64::try_from(unix)
        .ok()
        .and_then(|secs| Utc.timestamp_opt(secs, 0).single())
        .map(|t| t.format("%a, %d %b %Y %H:%M:%S GMT").to_string())
        .unwrap_or_default()
}

fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// The bytes of a hex object id.
fn unhex(id: &str) -> Vec<u8> {
    id.as_bytes()
        .chunks(2)
        .filter_map(|pair| {
            std::str::from_utf8(pair)
                .ok()
                .and_then(|s| u8::from_str_radix(s, 16).ok())
        })
        .collect()
}

/// SHA-256, for `X-Gitlab-Content-Sha256`.
fn sha256(data: &[u8]) -> [u8; 32] {
    sha2::Digest::finalize(<sha2::Sha256 as sha2::Digest>::new_with_prefix(data)).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blob_and_tree_ids_are_gits() {
        // `printf 'hello\n' | git hash-object --stdin`
        assert_eq!(
            git_blob_id(b"hello\n"),
            "ce013625030ba8dba906f756967f9e9ca394464a"
        );
        // The empty blob, and the tree holding only `hello.txt` with it:
        // `git mktree` of `100644 blob ce01…\thello.txt`.
        assert_eq!(git_blob_id(b""), "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391");
        let files = BTreeMap::from([("hello.txt".to_owned(), Blob::new(b"hello\n".to_vec()))]);
        assert_eq!(
            Dir::of(&files).id,
            "aaa96ced2d9a1c8e72c56b253a0e2fe78393feb7"
        );
        // Nested: `git write-tree` over these files.
        let files: BTreeMap<String, Blob> = [
            ("a-b.md", "z\n"),
            ("a.md", "y\n"),
            ("a/x.md", "x\n"),
            ("b.md", "w\n"),
            ("hello.txt", "hello\n"),
        ]
        .into_iter()
        .map(|(p, c)| (p.to_owned(), Blob::new(c.as_bytes().to_vec())))
        .collect();
        let root = Dir::of(&files);
        assert_eq!(root.id, "894179722aeb639e49d158d5cf8f3573377cb787");
        assert_eq!(
            root.find("a").map(|d| d.id.as_str()),
            Some("5e966922f6944392754b5f6a8105103b9edb101e")
        );
    }

    #[test]
    fn folders_sort_as_if_their_name_ended_with_a_slash() {
        let files: BTreeMap<String, Blob> = ["a-b.md", "a/x.md", "a.md", "b.md"]
            .into_iter()
            .map(|p| (p.to_owned(), Blob::new(p.as_bytes().to_vec())))
            .collect();
        let mut items = Vec::new();
        Dir::of(&files).list("", true, &mut items);
        let paths: Vec<(&str, &str)> = items.iter().map(|i| (i.path.as_str(), i.kind)).collect();
        assert_eq!(
            paths,
            vec![
                ("a-b.md", "blob"),
                ("a.md", "blob"),
                ("a", "tree"),
                ("a/x.md", "blob"),
                ("b.md", "blob"),
            ]
        );
    }

    #[test]
    fn page_tokens_are_gitalys() {
        let token = encode_page_token("LICENSE");
        assert_eq!(token, "eyJmaWxlX25hbWUiOiJMSUNFTlNFIn0=");
        assert_eq!(decode_page_token(&token).as_deref(), Some("LICENSE"));
        assert_eq!(
            decode_page_token("a1e8f8d745cc87e3a9248358d9352bb7f9a0aeba"),
            None
        );
    }

    #[test]
    fn http_dates_are_imf_fixdates() {
        assert_eq!(http_date(784_111_777), "Sun, 06 Nov 1994 08:49:37 GMT");
    }

    /// One answer: status, headers (lowercase names), JSON body.
    struct Answer {
        status: u16,
        headers: Vec<(String, String)>,
        body: serde_json::Value,
    }

    impl Answer {
        fn header(&self, name: &str) -> Option<&str> {
            self.headers
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.as_str())
        }
    }

    /// A GET of `target` with the token, over a fresh connection.
    async fn get(double: &GitLabDouble, target: &str) -> Answer {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let addr = format!(
            "{}:{}",
            double.base_url.host_str().unwrap_or_default(),
            double.base_url.port().unwrap_or_default()
        );
        let mut stream = tokio::net::TcpStream::connect(addr)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let request = format!(
            "GET {target} HTTP/1.1\r\nHost: gitlab\r\nPRIVATE-TOKEN: t\r\nConnection: close\r\n\r\n"
        );
        stream
            .write_all(request.as_bytes())
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let mut raw = Vec::new();
        stream
            .read_to_end(&mut raw)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let text = String::from_utf8_lossy(&raw).into_owned();
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let mut lines = head.lines();
        let status = lines
            .next()
            .and_then(|l| l.split(' ').nth(1))
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let headers = lines
            .filter_map(|l| l.split_once(": "))
            .map(|(k, v)| (k.to_ascii_lowercase(), v.to_owned()))
            .collect();
        Answer {
            status,
            headers,
            body: serde_json::from_str(body).unwrap_or(serde_json::Value::Null),
        }
    }

    async fn double() -> GitLabDouble {
        let files = BTreeMap::from([
            ("README.md".to_owned(), b"hello\n".to_vec()),
            ("docs/a.md".to_owned(), b"a\n".to_vec()),
        ]);
        GitLabDouble::start(
            "group/wiki",
            "t",
            BTreeMap::from([(DEFAULT_BRANCH.to_owned(), files)]),
        )
        .await
    }

    fn ids_of(body: &serde_json::Value) -> Vec<String> {
        body.as_array()
            .map(|items| {
                items
                    .iter()
                    .filter_map(|i| i["id"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }

    #[tokio::test]
    async fn the_commit_list_is_newest_first_and_says_a_full_page_has_a_next() {
        let d = double().await;
        let first = d.head().unwrap_or_default();
        let second = d.put_file("README.md", "hello again\n");
        let third = d.put_file("docs/b.md", "b\n");
        let fourth = d.delete_file("docs/a.md");
        let page1 = get(&d, "/api/v4/projects/42/repository/commits?per_page=2").await;
        assert_eq!(page1.status, 200);
        assert_eq!(ids_of(&page1.body), vec![fourth.clone(), third.clone()]);
        assert_eq!(page1.header("x-next-page"), Some("2"));
        assert_eq!(page1.header("x-total"), None, "never counted");
        assert!(
            page1
                .header("link")
                .is_some_and(|l| l.contains("rel=\"next\"") && !l.contains("rel=\"last\""))
        );
        assert_eq!(page1.body[0]["parent_ids"][0], third.as_str());
        assert_eq!(page1.body[0]["title"], "Delete docs/a.md");
        let page2 = get(
            &d,
            "/api/v4/projects/42/repository/commits?per_page=2&page=2",
        )
        .await;
        assert_eq!(ids_of(&page2.body), vec![second.clone(), first.clone()]);
        assert_eq!(page2.header("x-next-page"), Some("3"), "a full page");
        let page3 = get(
            &d,
            "/api/v4/projects/42/repository/commits?per_page=2&page=3",
        )
        .await;
        assert_eq!(ids_of(&page3.body), Vec::<String>::new());
        assert_eq!(page3.header("x-next-page"), Some(""));

        let readme = get(
            &d,
            "/api/v4/projects/group%2Fwiki/repository/commits?path=README.md",
        )
        .await;
        assert_eq!(ids_of(&readme.body), vec![second, first.clone()]);
        let docs = get(&d, "/api/v4/projects/42/repository/commits?path=docs").await;
        assert_eq!(ids_of(&docs.body), vec![fourth, third, first.clone()]);
        let later = get(
            &d,
            "/api/v4/projects/42/repository/commits?since=2999-01-01T00:00:00Z",
        )
        .await;
        assert_eq!(ids_of(&later.body), Vec::<String>::new());
        let old = get(
            &d,
            &format!("/api/v4/projects/42/repository/commits?ref_name={first}"),
        )
        .await;
        assert_eq!(ids_of(&old.body), vec![first]);
        let unknown = get(&d, "/api/v4/projects/42/repository/commits?ref_name=nope").await;
        assert_eq!((unknown.status, ids_of(&unknown.body)), (200, Vec::new()));
        let bad = get(&d, "/api/v4/projects/42/repository/commits?since=yesterday").await;
        assert_eq!(bad.status, 400);
        assert_eq!(bad.body["error"], "since is invalid");
    }

    #[tokio::test]
    async fn a_branch_answers_its_head_commit() {
        let d = double().await;
        let head = d.put_file("README.md", "v2\n");
        let main = get(&d, "/api/v4/projects/group%2Fwiki/repository/branches/main").await;
        assert_eq!(main.status, 200);
        assert_eq!(main.body["name"], "main");
        assert_eq!(main.body["default"], true);
        assert_eq!(main.body["protected"], true);
        assert_eq!(main.body["commit"]["id"], head.as_str());
        assert_eq!(
            main.body["commit"]["short_id"],
            head.get(..8).unwrap_or_default()
        );
        let date = main.body["commit"]["committed_date"]
            .as_str()
            .unwrap_or_default();
        assert!(DateTime::parse_from_rfc3339(date).is_ok(), "{date}");
        let missing = get(&d, "/api/v4/projects/42/repository/branches/nope").await;
        assert_eq!(missing.status, 404);
        assert_eq!(missing.body["message"], "404 Branch Not Found");
        let slash = get(&d, "/api/v4/projects/42/repository/branches/re/lease").await;
        assert_eq!(slash.status, 404, "an unencoded slash matches no route");
        assert_eq!(slash.body["message"], "404 Not Found");
    }

    #[tokio::test]
    async fn the_tree_pages_by_offset_unless_asked_for_keyset() {
        let d = double().await;
        let top = get(&d, "/api/v4/projects/42/repository/tree").await;
        let kinds: Vec<(String, String)> = top
            .body
            .as_array()
            .map(|items| {
                items
                    .iter()
                    .map(|i| {
                        (
                            i["path"].as_str().unwrap_or_default().to_owned(),
                            i["type"].as_str().unwrap_or_default().to_owned(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        assert_eq!(
            kinds,
            vec![
                ("README.md".to_owned(), "blob".to_owned()),
                ("docs".to_owned(), "tree".to_owned()),
            ]
        );
        let first = get(
            &d,
            "/api/v4/projects/42/repository/tree?recursive=true&per_page=2",
        )
        .await;
        assert_eq!(first.body.as_array().map(Vec::len), Some(2));
        assert_eq!(first.header("x-next-page"), Some("2"));
        assert_eq!(
            first.header("x-total"),
            None,
            "Gitaly's first page is uncounted"
        );
        let second = get(
            &d,
            "/api/v4/projects/42/repository/tree?recursive=true&per_page=2&page=2",
        )
        .await;
        assert_eq!(second.body[0]["path"], "docs/a.md");
        assert_eq!(second.header("x-total"), Some("3"));
        assert_eq!(second.header("x-next-page"), Some(""));
        let keyset = get(
            &d,
            "/api/v4/projects/42/repository/tree?recursive=true&per_page=2&pagination=keyset",
        )
        .await;
        assert_eq!(keyset.header("x-next-page"), None, "only the link");
        let link = keyset.header("link").unwrap_or_default();
        assert!(link.ends_with("; rel=\"next\""), "{link}");
        assert!(
            link.contains(&format!(
                "page_token={}",
                cgi_escape(&encode_page_token("docs"))
            )),
            "{link}"
        );
        let none = get(
            &d,
            "/api/v4/projects/42/repository/tree?recursive=true&pagination=none&per_page=1",
        )
        .await;
        assert_eq!(none.body.as_array().map(Vec::len), Some(3));
        let shallow_none = get(&d, "/api/v4/projects/42/repository/tree?pagination=none").await;
        assert_eq!(shallow_none.status, 400);
        let unknown = get(&d, "/api/v4/projects/42/repository/tree?ref=nope").await;
        assert_eq!(
            (unknown.status, unknown.body["message"].as_str()),
            (404, Some("404 Tree Not Found"))
        );
    }
}
