//! Plain stateless `tools/call`s, answered without rmcp's per-request
//! machinery.
//!
//! In stateless JSON mode rmcp answers each `POST /mcp` by building a
//! service, a one-shot transport with its channels and a task of its own,
//! and running the request through its JSON-RPC model: in the HTTP bench
//! that was a sixth to a fifth of a tool call's instructions (callgrind).
//! A *plain* `tools/call` is answered here instead, by the same handler
//! ([`KnowledgeServer::answer`], in the caller's task, moved to a task of
//! its own only if the caller goes away first, so that such a call still
//! finishes with its metrics and log line, as rmcp's does) and written as
//! rmcp writes it: a success from the tool's own output ([`Answered`], a
//! file read's structured content without a `serde_json::Value`), a
//! failure or an error through rmcp's message types — the answer is
//! rmcp's byte for byte.
//!
//! "Plain" is narrow on purpose — every check rmcp makes on the way to its
//! handler would pass, and none of its per-request features is asked for:
//!
//! - `POST`, an `Accept` listing both `application/json` and
//!   `text/event-stream` without parameters, one `Content-Type` of
//!   `application/json` (parameters allowed, as rmcp allows them), a
//!   `Content-Length` within the body limit;
//! - no `MCP-Protocol-Version`, or one naming a known version older than
//!   the one that brings per-request metadata and standard headers;
//! - a body that is one JSON-RPC 2.0 request with exactly `jsonrpc`, `id`,
//!   `method: "tools/call"` and `params` holding only `name` and
//!   `arguments` (so no `_meta`: no progress token, no per-request
//!   protocol version).
//!
//! Anything else — other methods, notifications, responses, `_meta`,
//! another field, a body that is not that JSON — goes to rmcp with its
//! body re-attached, and rmcp answers or refuses it as before. The host
//! check and the drain count come before both paths (`serve`, in
//! `lib.rs`). The test
//! `direct::the_direct_path_answers_exactly_what_rmcp_answers` sends the
//! same requests both ways and compares status, headers and bytes.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::extract::Request;
use axum::response::Response;
use http::{HeaderMap, Method, StatusCode, header};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, JsonObject, ProtocolVersion, RequestId,
    ServerJsonRpcMessage, ServerResult,
};
use serde::Deserialize;

use crate::server::KnowledgeServer;
use crate::tools::Structured;

/// The largest request body either path reads (rmcp's default, set on
/// its configuration too so the two agree).
pub(crate) const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

const JSON: &str = "application/json";
const EVENT_STREAM: &str = "text/event-stream";

/// A plain `tools/call` request, as sent.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Call {
    jsonrpc: String,
    id: RequestId,
    method: String,
    params: Params,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Params {
    name: String,
    #[serde(default)]
    arguments: Option<JsonObject>,
}

/// Answers `request` when it is a plain `tools/call`; otherwise gives it
/// back, whole, for rmcp.
pub(crate) async fn answer(
    server: &Arc<KnowledgeServer>,
    request: Request,
) -> Result<Response, Request> {
    if !plain_head(request.method(), request.headers()) {
        return Err(request);
    }
    let (parts, body) = request.into_parts();
    let bytes = match axum::body::to_bytes(body, MAX_BODY_BYTES).await {
        Ok(bytes) => bytes,
        // The body broke off (or outgrew its Content-Length): rmcp's answer.
        Err(error) => {
            return Ok(plain_text(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("Failed to read request body: {error}"),
            ));
        }
    };
    let call = match serde_json::from_slice::<Call>(&bytes) {
        Ok(call) if call.jsonrpc == "2.0" && call.method == "tools/call" => call,
        _ => return Err(Request::from_parts(parts, Body::from(bytes))),
    };
    let mut params = CallToolRequestParams::new(call.params.name);
    params.arguments = call.params.arguments;
    // In the caller's task, and in a task of its own only if the caller
    // goes away first ([`Finish`]): a call whose caller went away still
    // finishes, with its metrics and its log line, as rmcp's task of its
    // own did, without a task per call. Boxed first: the call's future is
    // 2.5 KiB, and a box is moved as a pointer, into a task if need be.
    let call_future = {
        let server = server.clone();
        Box::pin(async move { server.answer(params, Some(&parts)).await })
    };
    let Ok(outcome) = Finish::new(call_future).await else {
        return Ok(plain_text(
            StatusCode::INTERNAL_SERVER_ERROR,
            "Internal Server Error: the tool call ended without an answer".to_owned(),
        ));
    };
    // A success is written from the call's own output (no `Value` of
    // it); a tool's failure and a JSON-RPC error through rmcp's types.
    let body = match outcome {
        Ok(Ok(success)) => acdm_core::json::to_vec(&Answered {
            jsonrpc: "2.0",
            id: &call.id,
            result: AnsweredResult {
                content: [TextBlock {
                    kind: "text",
                    text: &success.text,
                }],
                structured_content: &success.structured,
                is_error: false,
            },
        }),
        Ok(Err(failure)) => {
            // As rmcp's handler does for a peer older than 2026-07-28,
            // which every plain call is.
            let mut result = ServerResult::from(CallToolResponse::from(crate::server::result_of(
                Err(failure),
            )));
            result.strip_result_type_for_legacy_peer();
            acdm_core::json::to_vec(&ServerJsonRpcMessage::response(result, call.id))
        }
        Err(error) => acdm_core::json::to_vec(&ServerJsonRpcMessage::error(error, Some(call.id))),
    };
    // serde_json's bytes, the window escaped 64 bytes at a time.
    Ok(match body {
        Ok(body) => {
            let mut response = Response::new(Body::from(body));
            response
                .headers_mut()
                .insert(header::CONTENT_TYPE, http::HeaderValue::from_static(JSON));
            response
        }
        Err(error) => plain_text(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("serialize json response: {error}"),
        ),
    })
}

/// A plain call's success as rmcp writes it for a peer older than
/// 2026-07-28 (no `resultType`): the JSON-RPC response, its one text
/// block, the structured content and `isError`. The test
/// `the_direct_path_answers_exactly_what_rmcp_answers` holds the bytes to
/// rmcp's.
#[derive(serde::Serialize)]
struct Answered<'a> {
    jsonrpc: &'static str,
    id: &'a RequestId,
    result: AnsweredResult<'a>,
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct AnsweredResult<'a> {
    content: [TextBlock<'a>; 1],
    structured_content: &'a Structured,
    is_error: bool,
}

#[derive(serde::Serialize)]
struct TextBlock<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    text: &'a str,
}

/// A tool call run in its caller's task that, when that task drops it
/// before its answer (the client went away, the connection closed), goes
/// on in a task of its own to its end: its metrics and log line are never
/// lost with the caller.
///
/// rmcp runs every call in a task of its own for this; a task per call
/// costs a spawn, a task cell and a wake across tasks (and, on a
/// work-stealing runtime with an idle worker, a thread woken to steal it). A call that panics ends the future with
/// [`Panicked`], as a task's `JoinError` did.
struct Finish<T: Send + 'static> {
    call: Option<Pin<Box<dyn Future<Output = T> + Send>>>,
}

/// A call that panicked: its panic was reported by the panic hook.
struct Panicked;

impl<T: Send + 'static> Finish<T> {
    fn new(call: Pin<Box<dyn Future<Output = T> + Send>>) -> Self {
        Self { call: Some(call) }
    }
}

impl<T: Send + 'static> Future for Finish<T> {
    type Output = Result<T, Panicked>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Some(call) = self.call.as_mut() else {
            // Polled again after its answer, which `.await` never does:
            // there is no other answer to give.
            return Poll::Ready(Err(Panicked));
        };
        let polled = std::panic::catch_unwind(AssertUnwindSafe(|| call.as_mut().poll(cx)));
        match polled {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(output)) => {
                self.call = None;
                Poll::Ready(Ok(output))
            }
            Err(_) => {
                self.call = None;
                Poll::Ready(Err(Panicked))
            }
        }
    }
}

impl<T: Send + 'static> Drop for Finish<T> {
    fn drop(&mut self) {
        // Unfinished: the rest runs in a task of its own (a runtime that is
        // shutting down drops it, as it drops every task).
        let Some(call) = self.call.take() else {
            return;
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    let _unheard = call.await;
                });
            }
            // Dropped outside any runtime: nothing can run the rest.
            Err(_) => tracing::debug!("a tool call left unfinished outside a runtime"),
        }
    }
}

/// Whether the method and headers are those of a plain call (module doc).
fn plain_head(method: &Method, headers: &HeaderMap) -> bool {
    *method == Method::POST
        && accepts_json_and_event_stream(headers)
        && content_type_is_json(headers)
        && content_length(headers).is_some_and(|n| n <= MAX_BODY_BYTES as u64)
        && protocol_version_is_plain(headers)
}

/// Every `Accept` entry a bare media type (no parameters, no quoting), and
/// both of MCP's among them.
fn accepts_json_and_event_stream(headers: &HeaderMap) -> bool {
    let (mut json, mut stream) = (false, false);
    for value in headers.get_all(header::ACCEPT) {
        let Ok(text) = value.to_str() else {
            return false;
        };
        for entry in text.split(',') {
            if entry.contains([';', '"']) {
                return false;
            }
            let essence = entry.trim();
            json |= essence.eq_ignore_ascii_case(JSON);
            stream |= essence.eq_ignore_ascii_case(EVENT_STREAM);
        }
    }
    json && stream
}

/// One `Content-Type`, `application/json` before any parameter.
fn content_type_is_json(headers: &HeaderMap) -> bool {
    let mut values = headers.get_all(header::CONTENT_TYPE).iter();
    match (values.next(), values.next()) {
        (Some(value), None) => value.to_str().is_ok_and(|text| {
            let essence = text.split_once(';').map_or(text, |(essence, _)| essence);
            essence.trim().eq_ignore_ascii_case(JSON)
        }),
        _ => false,
    }
}

/// The one `Content-Length`, when there is one.
fn content_length(headers: &HeaderMap) -> Option<u64> {
    let mut values = headers.get_all(header::CONTENT_LENGTH).iter();
    match (values.next(), values.next()) {
        (Some(value), None) => value.to_str().ok()?.parse().ok(),
        _ => None,
    }
}

/// No `MCP-Protocol-Version`, or one known version older than the one
/// with per-request metadata and standard headers (which rmcp checks
/// against the body).
fn protocol_version_is_plain(headers: &HeaderMap) -> bool {
    let mut values = headers.get_all("mcp-protocol-version").iter();
    match (values.next(), values.next()) {
        (None, _) => true,
        (Some(value), None) => value.to_str().is_ok_and(|version| {
            version < ProtocolVersion::STANDARD_HEADERS.as_str()
                && ProtocolVersion::KNOWN_VERSIONS
                    .iter()
                    .any(|known| known.as_str() == version)
        }),
        _ => false,
    }
}

fn plain_text(status: StatusCode, text: String) -> Response {
    let mut response = Response::new(Body::from(text));
    *response.status_mut() = status;
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, http::HeaderValue::from_static(value));
        }
        map
    }

    const PLAIN: &[(&str, &str)] = &[
        ("accept", "application/json, text/event-stream"),
        ("content-type", "application/json"),
        ("content-length", "10"),
    ];

    #[test]
    fn only_a_plain_head_takes_the_direct_path() {
        assert!(plain_head(&Method::POST, &headers(PLAIN)));
        assert!(!plain_head(&Method::GET, &headers(PLAIN)));
        let with = |extra: &[(&'static str, &'static str)]| {
            let mut all = PLAIN.to_vec();
            all.retain(|(name, _)| !extra.iter().any(|(n, _)| n == name));
            all.extend_from_slice(extra);
            plain_head(&Method::POST, &headers(&all))
        };
        assert!(with(&[("content-type", "application/json; charset=utf-8")]));
        assert!(with(&[("accept", "TEXT/EVENT-STREAM,application/json")]));
        assert!(with(&[("mcp-protocol-version", "2025-06-18")]));
        assert!(with(&[("mcp-protocol-version", "2025-11-25")]));
        // What rmcp would refuse, or checks against the body.
        assert!(!with(&[("accept", "application/json")]));
        assert!(!with(&[(
            "accept",
            "application/json;q=1, text/event-stream;q=0"
        )]));
        assert!(!with(&[("content-type", "text/plain")]));
        assert!(!with(&[("content-length", "4194305")]));
        assert!(!with(&[("mcp-protocol-version", "2026-07-28")]));
        assert!(!with(&[("mcp-protocol-version", "1999-01-01")]));
        let mut no_length = PLAIN.to_vec();
        no_length.retain(|(name, _)| *name != "content-length");
        assert!(!plain_head(&Method::POST, &headers(&no_length)));
        let mut two_types = PLAIN.to_vec();
        two_types.push(("content-type", "application/json"));
        assert!(!plain_head(&Method::POST, &headers(&two_types)));
    }

    /// Headers a case sends beyond the plain ones.
    type Headers = &'static [(&'static str, &'static str)];

    /// A router over a small local fixture, with the direct path or not.
    fn router(dir: &std::path::Path, direct: bool) -> axum::Router {
        router_over(dir, direct, |wiki| wiki, crate::McpMetrics::unregistered())
    }

    /// A router over a small local fixture whose wiki is `wiki` of the
    /// local one, its calls counted in `metrics`.
    fn router_over(
        dir: &std::path::Path,
        direct: bool,
        wiki: impl FnOnce(
            std::sync::Arc<dyn acdm_sources::WikiSource>,
        ) -> std::sync::Arc<dyn acdm_sources::WikiSource>,
        metrics: crate::McpMetrics,
    ) -> axum::Router {
        use acdm_sources::local::{LocalFileSearch, LocalFileStore, LocalWiki};
        let write = |path: &str, content: &str| {
            let file = dir.join(path);
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(file, content).unwrap();
        };
        write("wiki/guides/weekly.md", "# Weekly reports\nDue Friday.\n");
        write(
            "files/Projects/Alpha/notes/kickoff.md",
            "# Kickoff\nfloor 5 first\n",
        );
        std::fs::write(
            dir.join("files/Projects/Alpha/notes/plan.bin"),
            [0_u8, 1, 2, 0xff, b'"', b'\n'],
        )
        .unwrap();
        let files = LocalFileStore::open(dir.join("files")).unwrap();
        let sources = acdm_sources::Sources {
            wiki: wiki(std::sync::Arc::new(
                LocalWiki::open(
                    dir.join("wiki"),
                    acdm_sources::GitRef::parse("main").unwrap(),
                )
                .unwrap(),
            )),
            files: std::sync::Arc::new(files.clone()),
            search: std::sync::Arc::new(LocalFileSearch::new(files)),
        };
        let settings = crate::McpSettings {
            knowledge: None,
            people: None,
            allowed_hosts: vec!["localhost".to_owned()],
            sessions: false,
            files_base: acdm_core::AbsPath::parse("/Projects").unwrap(),
            read_limits: crate::ReadLimits::default(),
            stopped: tokio_util::sync::CancellationToken::new(),
            linger: std::time::Duration::ZERO,
            limits: crate::ToolLimits::off(),
        };
        crate::build(sources, settings, metrics, direct)
    }

    /// A POST of `body` to `/mcp` with the plain headers, `extra`
    /// replacing those of the same name.
    fn post(extra: Headers, body: &str) -> Request {
        let mut request = http::Request::builder()
            .method("POST")
            .uri("/mcp")
            .header("host", "localhost")
            .header("content-length", body.len());
        for (name, value) in PLAIN.iter().filter(|(name, _)| *name != "content-length") {
            if !extra.iter().any(|(n, _)| n == name) {
                request = request.header(*name, *value);
            }
        }
        for (name, value) in extra {
            request = request.header(*name, *value);
        }
        request.body(Body::from(body.to_owned())).unwrap()
    }

    /// Status, headers and body of `router`'s answer to a POST of `body`.
    async fn send(
        router: &axum::Router,
        extra: Headers,
        body: &str,
    ) -> (u16, Vec<(String, String)>, bytes::Bytes) {
        use tower::ServiceExt;
        let response = router.clone().oneshot(post(extra, body)).await.unwrap();
        let status = response.status().as_u16();
        let mut headers: Vec<(String, String)> = response
            .headers()
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_str().unwrap().to_owned()))
            .collect();
        headers.sort();
        let body = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        (status, headers, body)
    }

    #[tokio::test]
    async fn the_direct_path_answers_exactly_what_rmcp_answers() {
        let dir = tempfile::tempdir().unwrap();
        let both = router(dir.path(), true);
        let rmcp = router(dir.path(), false);
        let read = r#""name":"acdm_read_nextcloud_file","arguments":{"project_name":"Alpha","path":"/Projects/Alpha/notes/kickoff.md"}"#;
        let call = |id: &str, params: &str| {
            format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{{params}}}}}"#)
        };
        // (headers beyond the plain ones, body, answered directly?)
        let cases: Vec<(Headers, String, bool)> = vec![
            (&[], call("1", read), true),
            (&[], call(r#""a-string-id""#, read), true),
            (&[], call("9223372036854775807", read), true),
            (&[], call("7.0", read), true),
            (
                &[("mcp-protocol-version", "2025-06-18")],
                call("2", read),
                true,
            ),
            (
                &[("content-type", "application/json; charset=utf-8")],
                call("3", read),
                true,
            ),
            (
                &[],
                call(
                    "4",
                    r#""name":"acdm_search_wiki","arguments":{"query":"weekly"}"#,
                ),
                true,
            ),
            (
                &[],
                call(
                    "5",
                    r#""name":"acdm_read_wiki_file","arguments":{"path":"guides/weekly.md"}"#,
                ),
                true,
            ),
            (
                &[],
                call(
                    "6",
                    r#""name":"acdm_search_nextcloud","arguments":{"query":"kickoff","project_name":"Alpha"}"#,
                ),
                true,
            ),
            // Windows: cut short (next_offset), from an offset, binary.
            (
                &[],
                call(
                    "21",
                    r#""name":"acdm_read_nextcloud_file","arguments":{"project_name":"Alpha","path":"/Projects/Alpha/notes/kickoff.md","max_bytes":5}"#,
                ),
                true,
            ),
            (
                &[],
                call(
                    "22",
                    r#""name":"acdm_read_wiki_file","arguments":{"path":"guides/weekly.md","ref":"main","offset":3,"max_bytes":4}"#,
                ),
                true,
            ),
            (
                &[],
                call(
                    "23",
                    r#""name":"acdm_read_nextcloud_file","arguments":{"project_name":"Alpha","path":"/Projects/Alpha/notes/plan.bin"}"#,
                ),
                true,
            ),
            // Failures the model acts on, and a protocol error.
            (
                &[],
                call(
                    "7",
                    r#""name":"acdm_read_nextcloud_file","arguments":{"project_name":"Beta","path":"/Projects/Beta/x.md"}"#,
                ),
                true,
            ),
            (
                &[],
                call(
                    "8",
                    r#""name":"acdm_read_wiki_file","arguments":{"path":"guides/weekly.md","project_id":1}"#,
                ),
                true,
            ),
            (
                &[],
                call("9", r#""name":"acdm_read_wiki_file","arguments":null"#),
                true,
            ),
            (&[], call("10", r#""name":"acdm_read_wiki_file""#), true),
            (
                &[],
                call("11", r#""name":"no_such_tool","arguments":{}"#),
                true,
            ),
            // Not plain: rmcp answers, the same through both routers.
            (
                &[],
                call("12", &format!(r#"{read},"_meta":{{"progressToken":1}}"#)),
                false,
            ),
            (&[], call("13", &format!(r#"{read},"extra":true"#)), false),
            (
                &[],
                format!(r#"{{"jsonrpc":"1.0","id":14,"method":"tools/call","params":{{{read}}}}}"#),
                false,
            ),
            (
                &[],
                r#"{"jsonrpc":"2.0","id":15,"method":"tools/list","params":{}}"#.to_owned(),
                false,
            ),
            (
                &[],
                r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_owned(),
                false,
            ),
            (&[], call("1.5", read), false),
            (&[], format!("[{}]", call("16", read)), false),
            (&[], "{not json".to_owned(), false),
            (
                &[("mcp-protocol-version", "2026-07-28")],
                call("17", read),
                false,
            ),
            (
                &[("mcp-protocol-version", "1999-01-01")],
                call("18", read),
                false,
            ),
            (&[("accept", "application/json")], call("19", read), false),
            (&[("content-type", "text/plain")], call("20", read), false),
        ];
        let server = crate::server::KnowledgeServer::new(
            crate::tools::Tools::new(
                acdm_sources::Sources {
                    wiki: std::sync::Arc::new(acdm_sources::Unconfigured::new("-")),
                    files: std::sync::Arc::new(acdm_sources::Unconfigured::new("-")),
                    search: std::sync::Arc::new(acdm_sources::Unconfigured::new("-")),
                },
                acdm_core::AbsPath::parse("/Projects").unwrap(),
                crate::ReadLimits::default(),
                None,
            ),
            crate::McpMetrics::unregistered(),
            crate::ToolLimits::off(),
        );
        for (extra, body, direct) in &cases {
            let direct_answer = send(&both, extra, body).await;
            let rmcp_answer = send(&rmcp, extra, body).await;
            assert_eq!(
                direct_answer, rmcp_answer,
                "the two paths differ on {extra:?} {body}"
            );
            // Which path answered: the direct one answers a plain call
            // itself and hands anything else back.
            let taken = answer(&Arc::new(server.clone()), post(extra, body)).await;
            assert_eq!(
                taken.is_ok(),
                *direct,
                "direct path taken for {extra:?} {body}?"
            );
            if let Err(given_back) = taken {
                let kept = axum::body::to_bytes(given_back.into_body(), usize::MAX)
                    .await
                    .unwrap();
                assert_eq!(kept, body.as_bytes(), "the body is handed back whole");
            }
        }
        // The plain calls did answer what they were asked.
        let (_, _, first) = send(&both, &[], &cases[0].1).await;
        let first: serde_json::Value = serde_json::from_slice(&first).unwrap();
        assert_eq!(first["id"], 1);
        assert!(
            first["result"]["structuredContent"]["content"]
                .as_str()
                .unwrap()
                .contains("floor 5 first"),
            "{first}"
        );
        // And the windows' cases are successes, each of its kind.
        for (id, key, expected) in [
            ("21", "next_offset", serde_json::json!(5)),
            ("22", "content", serde_json::json!("eekl")),
            ("23", "encoding", serde_json::json!("base64")),
        ] {
            let case = cases
                .iter()
                .find(|case| case.1.contains(&format!(r#""id":{id},"#)))
                .unwrap();
            let (_, _, answer) = send(&both, &[], &case.1).await;
            let answer: serde_json::Value = serde_json::from_slice(&answer).unwrap();
            assert_eq!(answer["result"]["isError"], false, "{answer}");
            assert_eq!(
                answer["result"]["structuredContent"][key], expected,
                "{answer}"
            );
        }
    }

    /// A wiki whose searches wait, once they have begun (`begun`), for
    /// `release` before the local wiki answers them, or panic.
    struct Held {
        wiki: std::sync::Arc<dyn acdm_sources::WikiSource>,
        begun: std::sync::Arc<tokio::sync::Notify>,
        release: std::sync::Arc<tokio::sync::Notify>,
        panics: bool,
    }

    #[async_trait::async_trait]
    impl acdm_sources::WikiSource for Held {
        fn kind(&self) -> &'static str {
            "held"
        }

        async fn check(&self) -> Result<(), acdm_sources::SourceError> {
            Ok(())
        }

        async fn search(
            &self,
            query: &acdm_sources::WikiQuery,
        ) -> Result<acdm_sources::WikiSearch, acdm_sources::SourceError> {
            self.begun.notify_one();
            self.release.notified().await;
            assert!(!self.panics, "the held wiki panics, as asked");
            self.wiki.search(query).await
        }

        async fn read(
            &self,
            path: &acdm_core::RelPath,
            git_ref: Option<&acdm_sources::GitRef>,
            range: acdm_sources::ReadRange,
        ) -> Result<acdm_sources::WikiWindow, acdm_sources::SourceError> {
            self.wiki.read(path, git_ref, range).await
        }

        async fn head(&self) -> Result<acdm_sources::WikiHead, acdm_sources::SourceError> {
            self.wiki.head().await
        }

        async fn tree(
            &self,
            commit: &str,
        ) -> Result<Vec<acdm_sources::WikiBlob>, acdm_sources::SourceError> {
            self.wiki.tree(commit).await
        }
    }

    /// A router whose wiki searches are [`Held`], with its metrics'
    /// registry, and the search's `begun` and `release`.
    fn held_router(
        dir: &std::path::Path,
        panics: bool,
    ) -> (
        axum::Router,
        prometheus_client::registry::Registry,
        std::sync::Arc<tokio::sync::Notify>,
        std::sync::Arc<tokio::sync::Notify>,
    ) {
        let begun = std::sync::Arc::new(tokio::sync::Notify::new());
        let release = std::sync::Arc::new(tokio::sync::Notify::new());
        let mut registry = prometheus_client::registry::Registry::default();
        let metrics = crate::McpMetrics::register(&mut registry);
        let router = router_over(
            dir,
            true,
            |wiki| {
                std::sync::Arc::new(Held {
                    wiki,
                    begun: begun.clone(),
                    release: release.clone(),
                    panics,
                })
            },
            metrics,
        );
        (router, registry, begun, release)
    }

    fn metrics_text(registry: &prometheus_client::registry::Registry) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, registry).unwrap();
        text
    }

    const SEARCH: &str = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"acdm_search_wiki","arguments":{"query":"weekly"}}}"#;

    #[tokio::test]
    async fn a_call_whose_caller_goes_away_still_finishes_and_is_counted() {
        use tower::ServiceExt;
        let dir = tempfile::tempdir().unwrap();
        let (router, registry, begun, release) = held_router(dir.path(), false);
        let finished = r#"acdm_mcp_tool_calls_total{tool="acdm_search_wiki",outcome="ok"} 1"#;
        {
            let call = router.clone().oneshot(post(&[], SEARCH));
            tokio::pin!(call);
            tokio::select! {
                answer = &mut call => panic!("answered while the wiki held it: {answer:?}"),
                () = begun.notified() => {}
            }
            // The caller goes away with its call in the wiki.
        }
        assert!(!metrics_text(&registry).contains(finished));
        release.notify_one();
        let mut polls = 0;
        while !metrics_text(&registry).contains(finished) {
            polls += 1;
            assert!(polls < 10_000, "{}", metrics_text(&registry));
            tokio::task::yield_now().await;
        }
        // And the server answers the next call as before.
        release.notify_one();
        let (status, _, body) = send(&router, &[], SEARCH).await;
        assert_eq!(status, 200);
        let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(body["id"], 7, "{body}");
        assert_eq!(body["result"]["isError"], false, "{body}");
    }

    #[tokio::test]
    async fn a_call_that_panics_is_answered_with_a_500_and_the_next_call_is_answered() {
        let dir = tempfile::tempdir().unwrap();
        let (router, _registry, _begun, release) = held_router(dir.path(), true);
        release.notify_one();
        let (status, _, body) = send(&router, &[], SEARCH).await;
        assert_eq!(status, 500);
        assert_eq!(
            body,
            "Internal Server Error: the tool call ended without an answer"
        );
        let read = r#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"acdm_read_nextcloud_file","arguments":{"project_name":"Alpha","path":"/Projects/Alpha/notes/kickoff.md"}}}"#;
        let (status, _, body) = send(&router, &[], read).await;
        assert_eq!(status, 200);
        let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(body["result"]["isError"], false, "{body}");
    }
}
