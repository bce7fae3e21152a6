//! Every row of the spec §7 outcome table, against a loopback HTTP server
//! that answers exactly what a row needs and records what it received
//! (raw HTTP/1.1 over a tokio socket: no server framework in this crate's
//! dependency tree). A row's test fails when its mapping changes.

#![expect(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    reason = "tests fail loudly"
)]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use acdm_core::nc::{ReadData, ReadRequest, WriteRequest};
use acdm_core::{AgentName, ErrorCode, Identity, ThreadId, ToolResponse, UserId};
use acdm_harness_client::{ClientConfig, HarnessClient, with_identity};
use secrecy::SecretString;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const TOKEN: &str = "svc-0123456789abcdef0123456789abcdef";

/// What the server does with each request.
#[derive(Clone)]
enum Answer {
    /// Status, content type, body.
    Reply(u16, &'static str, Vec<u8>),
    /// Read the request, then say nothing.
    Hang,
}

/// One request as received.
#[derive(Debug, Clone)]
struct Seen {
    request_line: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

struct Server {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
}

async fn serve(answer: Answer) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let record = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let answer = answer.clone();
            let record = record.clone();
            tokio::spawn(async move {
                let mut buffer = Vec::new();
                let mut chunk = [0_u8; 4096];
                let head_end = loop {
                    let n = socket.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    buffer.extend_from_slice(&chunk[..n]);
                    if let Some(i) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
                        break i + 4;
                    }
                };
                let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
                let mut lines = head.split("\r\n");
                let request_line = lines.next().unwrap_or_default().to_owned();
                let headers: Vec<(String, String)> = lines
                    .filter_map(|l| l.split_once(": "))
                    .map(|(k, v)| (k.to_owned(), v.to_owned()))
                    .collect();
                let length: usize = headers
                    .iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
                    .and_then(|(_, v)| v.parse().ok())
                    .unwrap_or(0);
                while buffer.len() < head_end + length {
                    let n = socket.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        break;
                    }
                    buffer.extend_from_slice(&chunk[..n]);
                }
                record.lock().unwrap().push(Seen {
                    request_line,
                    headers,
                    body: buffer[head_end..].to_vec(),
                });
                match answer {
                    Answer::Hang => tokio::time::sleep(Duration::from_secs(60)).await,
                    Answer::Reply(status, content_type, body) => {
                        let head = format!(
                            "HTTP/1.1 {status} X\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                            body.len()
                        );
                        let _ = socket.write_all(head.as_bytes()).await;
                        let _ = socket.write_all(&body).await;
                        let _ = socket.shutdown().await;
                    }
                }
            });
        }
    });
    Server { addr, seen }
}

fn identity() -> Identity {
    Identity::new(
        UserId::parse("u-1").unwrap(),
        AgentName::parse("project-alpha").unwrap(),
        ThreadId::parse("t-1").unwrap(),
    )
}

fn client(addr: SocketAddr, token: Option<&str>, timeout: Duration) -> HarnessClient {
    HarnessClient::new(
        ClientConfig::new(
            &format!("http://{addr}"),
            token.map(|t| SecretString::from(t.to_owned())),
            timeout,
        )
        .unwrap(),
    )
    .unwrap()
}

fn json_reply(status: u16, body: &Value) -> Answer {
    Answer::Reply(
        status,
        "application/json",
        serde_json::to_vec(body).unwrap(),
    )
}

fn read_request() -> ReadRequest {
    ReadRequest {
        rel_path: "notes/plan.md".into(),
        ..ReadRequest::default()
    }
}

const READ_OK: &str = r#"{"success":true,"code":"ok","message":"12 bytes","data":{"mount":"project","rel_path":"notes/plan.md","encoding":"text","content":"hello world\n","size":12,"etag":"e1","content_type":"text/markdown","offset":0,"returned_bytes":12,"truncated":false,"next_offset":null},"suggested_action":null}"#;

#[tokio::test]
async fn the_four_headers_and_the_typed_body_are_sent_from_the_ambient_identity() {
    let server = serve(Answer::Reply(
        200,
        "application/json",
        READ_OK.as_bytes().to_vec(),
    ))
    .await;
    let c = client(server.addr, Some(TOKEN), Duration::from_secs(5));
    let answer: ToolResponse<ReadData> =
        with_identity(identity(), c.nc_read(&read_request())).await;
    assert!(answer.is_success(), "{answer:?}");
    assert_eq!(answer.data().unwrap().content, "hello world\n");
    let seen = server.seen.lock().unwrap()[0].clone();
    assert_eq!(seen.request_line, "POST /agent-tools/nc/read HTTP/1.1");
    assert_eq!(seen.header("x-acdm-service-auth"), Some(TOKEN));
    assert_eq!(seen.header("x-acdm-user-id"), Some("u-1"));
    assert_eq!(seen.header("x-acdm-agent-name"), Some("project-alpha"));
    assert_eq!(seen.header("x-acdm-thread-id"), Some("t-1"));
    // How long it waits, so the backend answers before it gives up.
    assert_eq!(seen.header("x-acdm-timeout-ms"), Some("5000"));
    assert_eq!(seen.header("content-type"), Some("application/json"));
    let body: Value = serde_json::from_slice(&seen.body).unwrap();
    assert_eq!(body, json!({ "rel_path": "notes/plan.md" }));

    // The explicit override wins over (and works without) the context.
    let other = Identity::new(
        UserId::parse("u-2").unwrap(),
        AgentName::parse("project-beta").unwrap(),
        ThreadId::parse("t-2").unwrap(),
    );
    let _: ToolResponse<ReadData> = c.as_identity(other).nc_read(&read_request()).await;
    let seen = server.seen.lock().unwrap()[1].clone();
    assert_eq!(seen.header("x-acdm-agent-name"), Some("project-beta"));
}

#[tokio::test]
async fn identity_incomplete_is_internal_error_and_nothing_is_sent() {
    let server = serve(Answer::Reply(
        200,
        "application/json",
        READ_OK.as_bytes().to_vec(),
    ))
    .await;
    let c = client(server.addr, Some(TOKEN), Duration::from_secs(5));
    let answer = c.nc_read(&read_request()).await;
    assert_eq!(answer.error_code(), Some(ErrorCode::InternalError));
    assert!(
        answer.message().contains("identity"),
        "{}",
        answer.message()
    );
    assert!(server.seen.lock().unwrap().is_empty(), "a request was sent");
}

#[tokio::test]
async fn a_missing_service_token_is_internal_error_and_nothing_is_sent() {
    let server = serve(Answer::Reply(
        200,
        "application/json",
        READ_OK.as_bytes().to_vec(),
    ))
    .await;
    for token in [None, Some(""), Some("   ")] {
        let c = client(server.addr, token, Duration::from_secs(5));
        let answer = with_identity(identity(), c.nc_read(&read_request())).await;
        assert_eq!(
            answer.error_code(),
            Some(ErrorCode::InternalError),
            "{token:?}"
        );
        assert!(answer.message().contains("ACDM_MCP_SERVICE_TOKEN"));
    }
    assert!(server.seen.lock().unwrap().is_empty(), "a request was sent");
}

// Paused clock: the server's 60 s hang and the client's 1 s timeout are
// virtual, so the test waits for nothing and load cannot skew it.
#[tokio::test(start_paused = true)]
async fn a_timeout_or_a_refused_connection_is_internal_error_with_a_retry_hint() {
    let server = serve(Answer::Hang).await;
    let c = client(server.addr, Some(TOKEN), Duration::from_secs(1));
    let started = tokio::time::Instant::now();
    let answer = with_identity(identity(), c.nc_read(&read_request())).await;
    let took = started.elapsed();
    assert!(
        took >= Duration::from_secs(1) && took < Duration::from_secs(2),
        "the configured 1 s timeout, not the server's 60 s, ended the call: {took:?}"
    );
    assert_eq!(answer.error_code(), Some(ErrorCode::InternalError));
    assert!(
        answer.message().contains("did not answer within 1 s"),
        "{}",
        answer.message()
    );
    assert!(answer.suggested_action().unwrap().contains("Retry"));

    // A port nobody listens on.
    let closed = TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap()
        .local_addr()
        .unwrap();
    let c = client(closed, Some(TOKEN), Duration::from_secs(2));
    let answer = with_identity(identity(), c.nc_read(&read_request())).await;
    assert_eq!(answer.error_code(), Some(ErrorCode::InternalError));
    assert!(
        answer.message().contains("could not be reached"),
        "{}",
        answer.message()
    );
    assert!(
        !answer.message().contains("127.0.0.1"),
        "no address in the message"
    );
    assert!(answer.suggested_action().unwrap().contains("Retry"));
}

#[tokio::test]
async fn a_structured_401_passes_through_unchanged() {
    let body = json!({
        "success": false, "code": "missing_identity_headers",
        "message": "missing or empty identity header(s): X-ACDM-Thread-Id",
        "data": {"missing": ["X-ACDM-Thread-Id"]},
        "suggested_action": "fix the harness"
    });
    let server = serve(json_reply(401, &body)).await;
    let c = client(server.addr, Some(TOKEN), Duration::from_secs(5));
    let answer: ToolResponse<Value> =
        with_identity(identity(), c.call("agent-tools/nc/read", &read_request())).await;
    assert_eq!(serde_json::to_value(&answer).unwrap(), body);
}

#[tokio::test]
async fn the_gates_plain_401_is_internal_error_naming_a_token_mismatch() {
    let server = serve(Answer::Reply(
        401,
        "application/json",
        br#"{"error":"service auth failed"}"#.to_vec(),
    ))
    .await;
    let c = client(server.addr, Some(TOKEN), Duration::from_secs(5));
    let answer = with_identity(identity(), c.nc_read(&read_request())).await;
    assert_eq!(answer.error_code(), Some(ErrorCode::InternalError));
    assert!(
        answer.message().contains("ACDM_MCP_SERVICE_TOKEN"),
        "{}",
        answer.message()
    );
    assert!(
        answer.message().contains("does not match"),
        "{}",
        answer.message()
    );
    assert!(!answer.message().contains(TOKEN));
}

#[tokio::test]
async fn a_422_is_validation_error_with_the_field_problems() {
    // The backend's own 422: a ToolResponse, passed through with its data.
    let body = json!({
        "success": false, "code": "validation_error",
        "message": "project_id: unknown field `project_id`",
        "data": {"errors": [{"field": "project_id", "problem": "unknown field `project_id`"}]},
        "suggested_action": "Fix the fields named in the message and call again."
    });
    let server = serve(json_reply(422, &body)).await;
    let c = client(server.addr, Some(TOKEN), Duration::from_secs(5));
    let answer: ToolResponse<Value> =
        with_identity(identity(), c.call("agent-tools/nc/read", &read_request())).await;
    assert_eq!(serde_json::to_value(&answer).unwrap(), body);
    // A typed call keeps the code and the message naming the field.
    let typed = with_identity(identity(), c.nc_read(&read_request())).await;
    assert_eq!(typed.error_code(), Some(ErrorCode::ValidationError));
    assert!(typed.message().contains("project_id"));

    // A 422 that is not a ToolResponse (a proxy's or framework's page).
    let server = serve(Answer::Reply(
        422,
        "application/json",
        br#"{"detail":[{"loc":["body","rel_path"],"msg":"field required"}]}"#.to_vec(),
    ))
    .await;
    let c = client(server.addr, Some(TOKEN), Duration::from_secs(5));
    let answer = with_identity(identity(), c.nc_read(&read_request())).await;
    assert_eq!(answer.error_code(), Some(ErrorCode::ValidationError));
    assert!(
        answer.message().contains("rel_path"),
        "{}",
        answer.message()
    );
}

#[tokio::test]
async fn any_toolresponse_body_passes_through_whatever_the_status() {
    for (status, body) in [
        (
            404,
            json!({"success":false,"code":"not_found","message":"`x` does not exist","data":null,"suggested_action":"Check the name."}),
        ),
        (
            409,
            json!({"success":false,"code":"conflict","message":"changed","data":null,"suggested_action":null}),
        ),
        (
            403,
            json!({"success":false,"code":"kill_switch_off","message":"writes are off","data":null,"suggested_action":"Tell the user; do not retry."}),
        ),
        (
            503,
            json!({"success":false,"code":"service_unavailable","message":"db down","data":null,"suggested_action":"Retry in a few seconds."}),
        ),
        // A status that does not match the code: the body still wins.
        (
            200,
            json!({"success":false,"code":"scope_violation","message":"agent x is not a provisioned project manager","data":null,"suggested_action":null}),
        ),
    ] {
        let server = serve(json_reply(status, &body)).await;
        let c = client(server.addr, Some(TOKEN), Duration::from_secs(5));
        let answer: ToolResponse<Value> = with_identity(
            identity(),
            c.call("agent-tools/nc/write", &WriteRequest::default()),
        )
        .await;
        assert_eq!(
            serde_json::to_value(&answer).unwrap(),
            body,
            "HTTP {status}"
        );
    }
}

#[tokio::test]
async fn a_non_json_or_unexpected_body_is_an_error_with_a_short_clean_excerpt() {
    let page = format!(
        "<html><head><title>502 Bad Gateway</title></head>\r\n<body>\u{7}{}</body></html>",
        "x".repeat(1000)
    );
    let server = serve(Answer::Reply(502, "text/html", page.into_bytes())).await;
    let c = client(server.addr, Some(TOKEN), Duration::from_secs(5));
    let answer = with_identity(identity(), c.nc_read(&read_request())).await;
    assert_eq!(answer.error_code(), Some(ErrorCode::UpstreamError));
    let message = answer.message();
    assert!(
        message.contains("HTTP 502") && message.contains("502 Bad Gateway"),
        "{message}"
    );
    assert!(
        message.chars().count() < 320,
        "the excerpt is short: {message}"
    );
    assert!(
        !message.chars().any(char::is_control),
        "no control characters: {message:?}"
    );

    for (status, body) in [
        (200, &b"OK"[..]),
        (400, &b""[..]),
        (200, &br#"{"ok":true}"#[..]),
    ] {
        let server = serve(Answer::Reply(status, "text/plain", body.to_vec())).await;
        let c = client(server.addr, Some(TOKEN), Duration::from_secs(5));
        let answer = with_identity(identity(), c.nc_read(&read_request())).await;
        assert_eq!(
            answer.error_code(),
            Some(ErrorCode::InternalError),
            "{status} {body:?}"
        );
    }

    // A success whose data has the wrong shape: the sides drifted.
    let drifted = json!({"success":true,"code":"ok","message":"m","data":{"unexpected":1},"suggested_action":null});
    let server = serve(json_reply(200, &drifted)).await;
    let c = client(server.addr, Some(TOKEN), Duration::from_secs(5));
    let answer = with_identity(identity(), c.nc_read(&read_request())).await;
    assert_eq!(answer.error_code(), Some(ErrorCode::InternalError));
    assert!(
        answer.message().contains("expected shape"),
        "{}",
        answer.message()
    );
}

#[cfg(feature = "blocking")]
#[test]
fn the_blocking_client_sends_the_same_request_and_maps_the_same_way() {
    use acdm_harness_client::blocking::{BlockingClient, with_identity as blocking_identity};
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let server = runtime.block_on(serve(Answer::Reply(
        200,
        "application/json",
        READ_OK.as_bytes().to_vec(),
    )));
    let config = ClientConfig::new(
        &format!("http://{}", server.addr),
        Some(SecretString::from(TOKEN.to_owned())),
        Duration::from_secs(5),
    )
    .unwrap();
    let client = BlockingClient::new(config).unwrap();
    // Without an identity on this thread: nothing is sent.
    let refused = client.nc_read(&read_request());
    assert_eq!(refused.error_code(), Some(ErrorCode::InternalError));
    assert!(server.seen.lock().unwrap().is_empty());
    let answer = blocking_identity(identity(), || client.nc_read(&read_request()));
    assert_eq!(answer.data().unwrap().content, "hello world\n");
    let seen = server.seen.lock().unwrap()[0].clone();
    assert_eq!(seen.header("x-acdm-thread-id"), Some("t-1"));
    // The explicit identity, from a plain thread with no runtime.
    let scoped = client.as_identity(identity()).nc_read(&read_request());
    assert_eq!(scoped.data().unwrap().content, "hello world\n");
    // Called from synchronous code inside an async runtime (either
    // flavour), it still serves the call instead of refusing or panicking.
    let inside = runtime.block_on(async {
        client.call_as::<_, Value>(&identity(), "agent-tools/nc/read", &read_request())
    });
    assert!(inside.is_success(), "{}", inside.message());
    let current_thread = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let inside =
        current_thread.block_on(async { client.as_identity(identity()).nc_read(&read_request()) });
    assert_eq!(inside.data().unwrap().content, "hello world\n");
    let seen = server.seen.lock().unwrap();
    assert_eq!(seen.len(), 4, "four calls were sent");
    assert!(
        seen.iter()
            .all(|r| r.header("x-acdm-user-id") == Some("u-1"))
    );
}

const MEETING: &str = "6f1c2b9e-8a0e-4a59-9d1e-0c5f2a3b4c5d";
const FILE: &str = "0b5e8f43-8d5e-4bf5-9d1c-6a7f2f5e9a10";
const REPORT: &str = "9a7d1c55-3e2b-4f0a-8c6d-1e2f3a4b5c6d";

/// A request of type `T` from JSON (the times need chrono, which this
/// crate does not name).
fn request<T: serde::de::DeserializeOwned>(body: Value) -> T {
    serde_json::from_value(body).unwrap()
}

/// What every business method must send: its path and its body.
fn business_expectations() -> Vec<(&'static str, Value)> {
    vec![
        (
            "list_meetings",
            json!({"from": "2026-12-01T09:00:00+01:00", "limit": 2, "cursor": "6162"}),
        ),
        ("get_meeting", json!({"meeting_id": MEETING})),
        (
            "create_meeting",
            json!({"title": "Kick-off", "starts_at": "2026-12-01T09:00:00+01:00",
                   "ends_at": "2026-12-01T10:00:00+01:00", "attendees": ["u-1"]}),
        ),
        (
            "update_meeting",
            json!({"meeting_id": MEETING, "if_version": 3, "notes": ""}),
        ),
        ("delete_meeting", json!({"meeting_id": MEETING})),
        ("list_meeting_files", json!({"meeting_id": MEETING})),
        (
            "attach_meeting_file",
            json!({"meeting_id": MEETING, "name": "a.bin", "content": "AP8=", "encoding": "base64"}),
        ),
        (
            "delete_meeting_file",
            json!({"meeting_id": MEETING, "file_id": FILE}),
        ),
        (
            "list_calendar",
            json!({"from": "2026-12-01T00:00:00Z", "to": "2027-01-01T00:00:00Z"}),
        ),
        ("list_reports", json!({"status": "submitted", "limit": 5})),
        ("get_report", json!({"report_id": REPORT})),
        (
            "update_report_status",
            json!({"report_id": REPORT, "to": "rejected", "comment": "numbers missing", "if_version": 2}),
        ),
        ("list_members", json!({})),
        ("get_project_meta", json!({})),
    ]
}

/// A `not_found` envelope: every typed method passes it through, whatever
/// its data type.
fn not_found() -> Answer {
    json_reply(
        404,
        &json!({"success": false, "code": "not_found", "message": "no such thing",
                "data": null, "suggested_action": null}),
    )
}

/// Checks the requests a server saw against [`business_expectations`].
fn assert_business_requests(seen: &[Seen]) {
    let expected = business_expectations();
    assert_eq!(seen.len(), expected.len(), "{seen:#?}");
    for (seen, (op, body)) in seen.iter().zip(expected) {
        assert_eq!(
            seen.request_line,
            format!("POST /agent-tools/business/{op} HTTP/1.1")
        );
        assert_eq!(seen.header("x-acdm-agent-name"), Some("project-alpha"));
        let sent: Value = serde_json::from_slice(&seen.body).unwrap();
        assert_eq!(sent, body, "body of {op}");
    }
}

#[tokio::test]
async fn every_business_method_sends_its_path_and_its_typed_body() {
    let server = serve(not_found()).await;
    let c = client(server.addr, Some(TOKEN), Duration::from_secs(5));
    let c = c.as_identity(identity());
    let bodies: Vec<Value> = business_expectations()
        .into_iter()
        .map(|(_, b)| b)
        .collect();
    let codes = vec![
        c.business_list_meetings(&request(bodies[0].clone()))
            .await
            .error_code(),
        c.business_get_meeting(&request(bodies[1].clone()))
            .await
            .error_code(),
        c.business_create_meeting(&request(bodies[2].clone()))
            .await
            .error_code(),
        c.business_update_meeting(&request(bodies[3].clone()))
            .await
            .error_code(),
        c.business_delete_meeting(&request(bodies[4].clone()))
            .await
            .error_code(),
        c.business_list_meeting_files(&request(bodies[5].clone()))
            .await
            .error_code(),
        c.business_attach_meeting_file(&request(bodies[6].clone()))
            .await
            .error_code(),
        c.business_delete_meeting_file(&request(bodies[7].clone()))
            .await
            .error_code(),
        c.business_list_calendar(&request(bodies[8].clone()))
            .await
            .error_code(),
        c.business_list_reports(&request(bodies[9].clone()))
            .await
            .error_code(),
        c.business_get_report(&request(bodies[10].clone()))
            .await
            .error_code(),
        c.business_update_report_status(&request(bodies[11].clone()))
            .await
            .error_code(),
        c.business_list_members().await.error_code(),
        c.business_get_project_meta().await.error_code(),
    ];
    assert!(
        codes.iter().all(|c| *c == Some(ErrorCode::NotFound)),
        "{codes:?}"
    );
    assert_business_requests(&server.seen.lock().unwrap());
}

#[tokio::test]
async fn a_business_answer_is_typed_and_a_real_delete_is_asked_for_explicitly() {
    let page = json!({
        "success": true, "code": "ok", "message": "1 of 3 meeting(s)",
        "data": {"items": [{
            "meeting_id": MEETING, "title": "Kick-off",
            "starts_at": "2026-12-01T08:00:00Z", "ends_at": "2026-12-01T09:00:00Z",
            "location": null, "agenda": null, "notes": null, "attendees": ["u-1"],
            "version": 1, "created_by": "u-1", "created_at": "2026-11-01T08:00:00Z",
            "updated_by": "u-1", "updated_at": "2026-11-01T08:00:00Z"
        }], "next_cursor": "6162", "total_count": 3},
        "suggested_action": null
    });
    let server = serve(json_reply(200, &page)).await;
    let c = client(server.addr, Some(TOKEN), Duration::from_secs(5));
    let answer = with_identity(
        identity(),
        c.business_list_meetings(&acdm_core::business::wire::ListMeetingsRequest::default()),
    )
    .await;
    let data = answer.into_data().unwrap();
    assert_eq!(data.items[0].meeting_id.to_string(), MEETING);
    assert_eq!(data.items[0].attendees[0].as_str(), "u-1");
    assert_eq!(
        (data.next_cursor.as_deref(), data.total_count),
        (Some("6162"), 3)
    );
    let seen = server.seen.lock().unwrap()[0].clone();
    assert_eq!(
        seen.request_line,
        "POST /agent-tools/business/list_meetings HTTP/1.1"
    );
    assert_eq!(
        serde_json::from_slice::<Value>(&seen.body).unwrap(),
        json!({})
    );

    // `dry_run: false` is the one way to delete, and it is on the wire.
    let server = serve(not_found()).await;
    let c = client(server.addr, Some(TOKEN), Duration::from_secs(5));
    let delete = acdm_core::business::wire::DeleteMeetingRequest {
        meeting_id: MEETING.parse().unwrap(),
        dry_run: false,
    };
    let _ = with_identity(identity(), c.business_delete_meeting(&delete)).await;
    let seen = server.seen.lock().unwrap()[0].clone();
    assert_eq!(
        serde_json::from_slice::<Value>(&seen.body).unwrap(),
        json!({"meeting_id": MEETING, "dry_run": false})
    );
}

#[cfg(feature = "blocking")]
#[test]
fn the_blocking_business_methods_send_the_same_requests() {
    use acdm_harness_client::blocking::{BlockingClient, with_identity as blocking_identity};
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let server = runtime.block_on(serve(not_found()));
    let config = ClientConfig::new(
        &format!("http://{}", server.addr),
        Some(SecretString::from(TOKEN.to_owned())),
        Duration::from_secs(5),
    )
    .unwrap();
    let c = BlockingClient::new(config).unwrap();
    let bodies: Vec<Value> = business_expectations()
        .into_iter()
        .map(|(_, b)| b)
        .collect();
    let codes = blocking_identity(identity(), || {
        vec![
            c.business_list_meetings(&request(bodies[0].clone()))
                .error_code(),
            c.business_get_meeting(&request(bodies[1].clone()))
                .error_code(),
            c.business_create_meeting(&request(bodies[2].clone()))
                .error_code(),
            c.business_update_meeting(&request(bodies[3].clone()))
                .error_code(),
            c.business_delete_meeting(&request(bodies[4].clone()))
                .error_code(),
            c.business_list_meeting_files(&request(bodies[5].clone()))
                .error_code(),
            c.business_attach_meeting_file(&request(bodies[6].clone()))
                .error_code(),
            c.business_delete_meeting_file(&request(bodies[7].clone()))
                .error_code(),
            c.business_list_calendar(&request(bodies[8].clone()))
                .error_code(),
            c.business_list_reports(&request(bodies[9].clone()))
                .error_code(),
            c.business_get_report(&request(bodies[10].clone()))
                .error_code(),
            c.business_update_report_status(&request(bodies[11].clone()))
                .error_code(),
            c.business_list_members().error_code(),
            c.business_get_project_meta().error_code(),
        ]
    });
    assert!(
        codes.iter().all(|c| *c == Some(ErrorCode::NotFound)),
        "{codes:?}"
    );
    assert_business_requests(&server.seen.lock().unwrap());
}

/// The project reads are `GET`s with no body and no `Content-Type`; the
/// advance is a `POST` with its typed body — from the async client, and
/// with the `blocking` feature from the blocking client alike.
#[test]
fn the_project_methods_send_their_methods_paths_and_bodies() {
    use acdm_core::project::AdvanceMilestoneRequest;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let server = runtime.block_on(serve(not_found()));
    let c = client(server.addr, Some(TOKEN), Duration::from_secs(5));
    let advance = AdvanceMilestoneRequest { if_current: 2 };
    let codes = runtime.block_on(async {
        let c = c.as_identity(identity());
        vec![
            c.project_overview().await.error_code(),
            c.project_sow().await.error_code(),
            c.project_advance_milestone(&advance).await.error_code(),
        ]
    });
    // One round of three requests from the async client, and a second
    // from the blocking one when it is built.
    let rounds = if cfg!(feature = "blocking") { 2 } else { 1 };
    #[cfg(feature = "blocking")]
    {
        use acdm_harness_client::blocking::BlockingClient;
        let config = ClientConfig::new(
            &format!("http://{}", server.addr),
            Some(SecretString::from(TOKEN.to_owned())),
            Duration::from_secs(5),
        )
        .unwrap();
        let blocking = BlockingClient::new(config).unwrap();
        let scoped = blocking.as_identity(identity());
        let blocking_codes = vec![
            scoped.project_overview().error_code(),
            scoped.project_sow().error_code(),
            scoped.project_advance_milestone(&advance).error_code(),
        ];
        assert_eq!(codes, blocking_codes);
    }
    assert!(
        codes.iter().all(|c| *c == Some(ErrorCode::NotFound)),
        "{codes:?}"
    );
    let seen = server.seen.lock().unwrap();
    assert_eq!(seen.len(), 3 * rounds);
    for round in seen.chunks(3) {
        assert_eq!(
            round[0].request_line,
            "GET /agent-tools/project/overview HTTP/1.1"
        );
        assert_eq!(
            round[1].request_line,
            "GET /agent-tools/project/sow HTTP/1.1"
        );
        for get in &round[..2] {
            assert!(get.body.is_empty() && get.header("content-type").is_none());
            assert_eq!(get.header("x-acdm-user-id"), Some("u-1"));
        }
        assert_eq!(
            round[2].request_line,
            "POST /agent-tools/project/milestone/advance HTTP/1.1"
        );
        assert_eq!(round[2].header("content-type"), Some("application/json"));
        let sent: Value = serde_json::from_slice(&round[2].body).unwrap();
        assert_eq!(sent, json!({"if_current": 2}));
    }
}

/// The whole tool catalog, committed: a change to a description, a schema
/// or an annotation shows as a diff of `tests/snapshots/catalog.json`,
/// updated deliberately with `ACDM_UPDATE_SNAPSHOTS=1`.
#[test]
fn the_catalog_matches_the_committed_snapshot() {
    let catalog = serde_json::to_value(acdm_harness_client::catalog()).unwrap();
    acdm_test_support::snapshot::assert_json(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots/catalog.json"),
        &catalog,
    );
}
