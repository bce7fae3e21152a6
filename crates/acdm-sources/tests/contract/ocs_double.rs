//! HTTP test double for Nextcloud's OCS unified search, `files` provider
//! (`GET /ocs/v2.php/search/providers/files/search?term=…&limit=…&cursor=…`).
//!
//! It follows `shared/reference/upstream-wire-formats.md` §2.1–2.3 and §3.12:
//! `OCS-APIRequest: true` plus HTTP Basic auth are required (else 401 with
//! statuscode 997), names (not contents) are matched with SQL `LIKE
//! '%term%'`, `limit` is clamped to 1..=25 (default 5), the cursor is an
//! integer offset and the body is the V2 envelope, rendered the way PHP's
//! `json_encode` writes it (`\/`, `\u003C`, `\uXXXX`) or, when the client
//! asks for neither `format=json` nor `Accept: application/json`, as OCS XML.
//! Every request is recorded exactly as it arrived.

use crate::recording::{Recorded, Recorder};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// The only route the double serves.
const SEARCH_PATH: &str = "/ocs/v2.php/search/providers/files/search";
/// `SearchQuery::LIMIT_DEFAULT`.
const DEFAULT_LIMIT: i64 = 5;
/// The controller clamps `limit` to 1..=25.
const MAX_LIMIT: i64 = 25;
/// The first file id handed out.
const FIRST_FILE_ID: u64 = 101;

/// A running OCS search double; the server stops when this is dropped.
pub(crate) struct OcsDouble {
    /// The instance root, e.g. `http://127.0.0.1:PORT/`.
    pub(crate) base_url: url::Url,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl OcsDouble {
    /// Starts a double on `127.0.0.1:0` serving unified search over the files
    /// under `root` on disk, which is the user's home folder (`/` in
    /// `attributes.path`). `user`/`password` is the only Basic credential
    /// accepted.
    pub(crate) async fn start(root: PathBuf, user: &str, password: &str) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the OCS double");
        let addr = listener.local_addr().expect("OCS double address");
        let base_url = url::Url::parse(&format!("http://{addr}/")).expect("OCS double base URL");
        let shared = Arc::new(Shared {
            base: base_url.as_str().to_owned(),
            root,
            user: user.to_owned(),
            password: password.to_owned(),
            injected: Mutex::new(Vec::new()),
            file_ids: Mutex::new(BTreeMap::new()),
            requests: Recorder::default(),
        });
        let app = Router::new()
            .fallback(handle)
            .with_state(Arc::clone(&shared));
        let task = tokio::spawn(async move {
            axum::serve(listener, app)
                .await
                .expect("serve the OCS double");
        });
        Self {
            base_url,
            shared,
            task,
        }
    }

    /// Extra raw entries (JSON values in the entry shape) appended after the
    /// real entries of the FIRST page (cursor 0) of every later search, to
    /// simulate hostile or odd results. Repeated calls add more.
    pub(crate) fn inject_entries(&self, entries: Vec<serde_json::Value>) {
        self.shared
            .injected
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend(entries);
    }

    /// Every request received so far, oldest first.
    pub(crate) fn requests(&self) -> Vec<Recorded> {
        self.shared.requests.all()
    }
}

impl Drop for OcsDouble {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// State shared with the server task.
struct Shared {
    /// The base URL with its trailing slash.
    base: String,
    root: PathBuf,
    user: String,
    password: String,
    injected: Mutex<Vec<serde_json::Value>>,
    /// Stable file ids: home-relative path → id, handed out on first sight.
    file_ids: Mutex<BTreeMap<String, u64>>,
    requests: Recorder,
}

/// The one handler: records the request, then answers it.
async fn handle(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    shared.requests.record(&request);
    let uri = request.uri();
    shared.answer(request.method(), uri.path(), uri.query(), request.headers())
}

/// An ordered JSON value: PHP arrays keep insertion order, which
/// `serde_json::Value` (without `preserve_order`) does not.
#[derive(Clone)]
enum J {
    Null,
    Bool(bool),
    /// A number, already rendered.
    Num(String),
    Str(String),
    Arr(Vec<J>),
    Obj(Vec<(String, J)>),
}

impl J {
    fn str(value: impl Into<String>) -> Self {
        Self::Str(value.into())
    }

    fn obj(fields: Vec<(&str, J)>) -> Self {
        Self::Obj(
            fields
                .into_iter()
                .map(|(key, value)| (key.to_owned(), value))
                .collect(),
        )
    }

    fn from_value(value: &serde_json::Value) -> Self {
        match value {
            serde_json::Value::Null => Self::Null,
            serde_json::Value::Bool(b) => Self::Bool(*b),
            serde_json::Value::Number(n) => Self::Num(n.to_string()),
            serde_json::Value::String(s) => Self::Str(s.clone()),
            serde_json::Value::Array(items) => {
                Self::Arr(items.iter().map(Self::from_value).collect())
            }
            serde_json::Value::Object(map) => Self::Obj(
                map.iter()
                    .map(|(key, value)| (key.clone(), Self::from_value(value)))
                    .collect(),
            ),
        }
    }
}

impl Shared {
    fn answer(
        &self,
        method: &Method,
        path: &str,
        query: Option<&str>,
        headers: &HeaderMap,
    ) -> Response {
        let params: Vec<(String, String)> =
            url::form_urlencoded::parse(query.unwrap_or_default().as_bytes())
                .into_owned()
                .collect();
        let json = wants_json(&params, headers);
        let api_request = headers
            .get("ocs-apirequest")
            .is_some_and(|value| value.as_bytes() == b"true");
        if !api_request || !self.authenticated(headers) {
            return envelope(
                json,
                StatusCode::UNAUTHORIZED,
                failure_meta(997, "Current user is not logged in"),
                J::Arr(Vec::new()),
            );
        }
        if method != Method::GET || path != SEARCH_PATH {
            // OCS answers unknown routes with statuscode 998 (HTTP 404 on v2).
            return envelope(
                json,
                StatusCode::NOT_FOUND,
                failure_meta(
                    998,
                    "Invalid query, please check the syntax. API specifications are here: http://www.freedesktop.org/wiki/Specifications/open-collaboration-services.",
                ),
                J::Arr(Vec::new()),
            );
        }
        // NC 27: `if (empty(trim($term)))` → 400 with data null; the V2 meta
        // message of a plain DataResponse is empty.
        let term = param(&params, "term").unwrap_or_default();
        if term.trim().is_empty() {
            return envelope(
                json,
                StatusCode::BAD_REQUEST,
                failure_meta(400, ""),
                J::Null,
            );
        }
        let limit = param(&params, "limit")
            .and_then(|v| v.trim().parse::<i64>().ok())
            .unwrap_or(DEFAULT_LIMIT)
            .clamp(1, MAX_LIMIT);
        // `(int)$cursor`: anything unparsable is offset 0.
        let cursor = param(&params, "cursor")
            .and_then(|v| v.trim().parse::<i64>().ok())
            .unwrap_or(0)
            .max(0);

        // Ordered by path, not by mtime desc as real Nextcloud does: tests
        // must not depend on the order.
        let matches: Vec<Node> = walk(&self.root)
            .into_iter()
            .filter(|node| like_contains(&node.name, term))
            .collect();
        let offset = usize::try_from(cursor).unwrap_or(usize::MAX);
        let take = usize::try_from(limit).unwrap_or(1);
        let mut entries: Vec<J> = matches
            .iter()
            .skip(offset)
            .take(take)
            .map(|node| self.entry(node))
            .collect();
        if cursor == 0 {
            let injected = self.injected.lock().unwrap_or_else(PoisonError::into_inner);
            entries.extend(injected.iter().map(J::from_value));
        }
        // FilesSearchProvider returns `SearchResult::paginated(…, cursor +
        // limit)`: the next cursor is always set, also on the last page; a
        // client stops on a short or empty page.
        let data = J::obj(vec![
            ("name", J::str("Files")),
            ("isPaginated", J::Bool(true)),
            ("entries", J::Arr(entries)),
            ("cursor", J::Num((cursor + limit).to_string())),
        ]);
        let meta = J::obj(vec![
            ("status", J::str("ok")),
            ("statuscode", J::Num("200".to_owned())),
            ("message", J::str("OK")),
        ]);
        envelope(json, StatusCode::OK, meta, data)
    }

    /// Basic auth with the configured user and password.
    fn authenticated(&self, headers: &HeaderMap) -> bool {
        let Some(value) = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
        else {
            return false;
        };
        let Some((scheme, encoded)) = value.trim().split_once(' ') else {
            return false;
        };
        if !scheme.eq_ignore_ascii_case("basic") {
            return false;
        }
        let Some(decoded) = base64_decode(encoded.trim()) else {
            return false;
        };
        let expected = format!("{}:{}", self.user, self.password);
        decoded == expected.as_bytes()
    }

    /// One `SearchResultEntry` as FilesSearchProvider builds it.
    fn entry(&self, node: &Node) -> J {
        let id = {
            let mut ids = self.file_ids.lock().unwrap_or_else(PoisonError::into_inner);
            let next = FIRST_FILE_ID + u64::try_from(ids.len()).unwrap_or(0);
            *ids.entry(node.path.clone()).or_insert(next)
        };
        let thumbnail = if node.is_dir {
            String::new()
        } else {
            format!("{}index.php/core/preview?x=32&y=32&fileId={id}", self.base)
        };
        // formatSubline: "in <parent>" unless the node sits in the home root.
        let subline = match node.path.rfind('/') {
            Some(slash) if slash > 0 => format!(
                "in {}",
                node.path
                    .get(..slash)
                    .unwrap_or_default()
                    .trim_start_matches('/')
            ),
            _ => String::new(),
        };
        let icon = if node.is_dir {
            "icon-folder"
        } else {
            "/core/img/filetypes/text.svg"
        };
        J::obj(vec![
            ("thumbnailUrl", J::Str(thumbnail)),
            ("title", J::str(node.name.clone())),
            ("subline", J::Str(subline)),
            (
                "resourceUrl",
                J::Str(format!("{}index.php/f/{id}", self.base)),
            ),
            ("icon", J::str(icon)),
            ("rounded", J::Bool(false)),
            (
                "attributes",
                J::obj(vec![
                    ("fileId", J::Str(id.to_string())),
                    ("path", J::str(node.path.clone())),
                ]),
            ),
        ])
    }
}

/// A file or folder under the home root.
struct Node {
    /// Home-relative path with a leading `/`.
    path: String,
    name: String,
    is_dir: bool,
}

/// Every file and folder under `root`, sorted by path; names starting with
/// `.`, symlinks and non-UTF-8 names are skipped.
fn walk(root: &Path) -> Vec<Node> {
    let mut nodes = Vec::new();
    let mut pending = vec![(root.to_path_buf(), String::new())];
    while let Some((dir, rel)) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            if kind.is_symlink() || name.starts_with('.') {
                continue;
            }
            let path = format!("{rel}/{name}");
            if kind.is_dir() {
                pending.push((entry.path(), path.clone()));
            } else if !kind.is_file() {
                continue;
            }
            nodes.push(Node {
                path,
                name,
                is_dir: kind.is_dir(),
            });
        }
    }
    nodes.sort_by(|a, b| a.path.cmp(&b.path));
    nodes
}

/// `name ILIKE '%term%'`: case-insensitive, and the term's own `%` and `_`
/// act as wildcards (the provider does not escape them).
fn like_contains(name: &str, term: &str) -> bool {
    let text: Vec<char> = name.to_lowercase().chars().collect();
    let mut pattern = vec!['%'];
    pattern.extend(term.to_lowercase().chars());
    pattern.push('%');
    like_full(&text, &pattern)
}

/// Whether the LIKE `pattern` (`%` any run, `_` one character) matches all of
/// `text`.
fn like_full(text: &[char], pattern: &[char]) -> bool {
    let (mut t, mut p) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while let Some(&c) = text.get(t) {
        match pattern.get(p) {
            Some('%') => {
                star = Some((p, t));
                p += 1;
            }
            Some(&pc) if pc == '_' || pc == c => {
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
        .all(|&c| c == '%')
}

/// The last value of `name` in the query.
fn param<'a>(params: &'a [(String, String)], name: &str) -> Option<&'a str> {
    params
        .iter()
        .rev()
        .find(|(key, _)| key == name)
        .map(|(_, value)| value.as_str())
}

/// OCS format negotiation: `format=json` wins, else an `Accept` list item
/// that is exactly `application/json`; anything else gets XML.
fn wants_json(params: &[(String, String)], headers: &HeaderMap) -> bool {
    if let Some(format) = param(params, "format") {
        return format == "json";
    }
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|item| item.trim().eq_ignore_ascii_case("application/json"))
}

/// The V2 `meta` of a failure: `statuscode` is the OCS code.
fn failure_meta(statuscode: u32, message: &str) -> J {
    J::obj(vec![
        ("status", J::str("failure")),
        ("statuscode", J::Num(statuscode.to_string())),
        ("message", J::str(message)),
    ])
}

/// `{"ocs":{"meta":…,"data":…}}` in the negotiated format.
fn envelope(json: bool, status: StatusCode, meta: J, data: J) -> Response {
    let body = J::obj(vec![("ocs", J::obj(vec![("meta", meta), ("data", data)]))]);
    let (content_type, text) = if json {
        let mut out = String::new();
        write_php_json(&mut out, &body);
        ("application/json; charset=utf-8", out)
    } else {
        let mut out = String::from("<?xml version=\"1.0\"?>\n");
        if let J::Obj(fields) = &body {
            write_xml(&mut out, fields, 0);
        }
        ("application/xml; charset=utf-8", out)
    };
    let mut response = (status, text).into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

/// `json_encode($value, JSON_HEX_TAG)`.
fn write_php_json(out: &mut String, value: &J) {
    match value {
        J::Null => out.push_str("null"),
        J::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        J::Num(n) => out.push_str(n),
        J::Str(s) => write_php_string(out, s),
        J::Arr(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_php_json(out, item);
            }
            out.push(']');
        }
        J::Obj(fields) => {
            out.push('{');
            for (i, (key, item)) in fields.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_php_string(out, key);
                out.push(':');
                write_php_json(out, item);
            }
            out.push('}');
        }
    }
}

/// A PHP JSON string: `/` escaped, `<`/`>` as `\u003C`/`\u003E`, and every
/// non-ASCII character as lowercase `\uXXXX` UTF-16 units.
fn write_php_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '/' => out.push_str("\\/"),
            '<' => out.push_str("\\u003C"),
            '>' => out.push_str("\\u003E"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if c.is_ascii() && !c.is_ascii_control() => out.push(c),
            c => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
        }
    }
    out.push('"');
}

/// `BaseResponse::toXML` through an indenting `XMLWriter` (one space per
/// level): list items are `<element>`, null is an empty element, booleans
/// are `1`/empty like PHP's string cast.
fn write_xml(out: &mut String, fields: &[(String, J)], depth: usize) {
    for (name, value) in fields {
        let indent = " ".repeat(depth);
        match value {
            J::Null => {
                let _ = writeln!(out, "{indent}<{name}/>");
            }
            J::Arr(items) if items.is_empty() => {
                let _ = writeln!(out, "{indent}<{name}/>");
            }
            J::Obj(inner) if inner.is_empty() => {
                let _ = writeln!(out, "{indent}<{name}/>");
            }
            J::Arr(items) => {
                let _ = writeln!(out, "{indent}<{name}>");
                let inner: Vec<(String, J)> = items
                    .iter()
                    .map(|item| ("element".to_owned(), item.clone()))
                    .collect();
                write_xml(out, &inner, depth + 1);
                let _ = writeln!(out, "{indent}</{name}>");
            }
            J::Obj(inner) => {
                let _ = writeln!(out, "{indent}<{name}>");
                write_xml(out, inner, depth + 1);
                let _ = writeln!(out, "{indent}</{name}>");
            }
            J::Bool(b) => {
                let text = if *b { "1" } else { "" };
                let _ = writeln!(out, "{indent}<{name}>{text}</{name}>");
            }
            J::Num(text) | J::Str(text) => {
                let _ = writeln!(out, "{indent}<{name}>{}</{name}>", xml_escape(text));
            }
        }
    }
}

fn xml_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Standard base64 (padding optional); `None` on any other character.
fn base64_decode(input: &str) -> Option<Vec<u8>> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD_NO_PAD
        .decode(input.trim_end_matches('='))
        .ok()
}
