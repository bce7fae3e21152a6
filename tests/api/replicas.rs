//! What a deployment of several replicas relies on, tried on one server
//! over real sockets: rate limits answered the way the spec says, a stop
//! that loses no call (MCP included) and shows on `/readyz` first, and a
//! stalled upstream answered before the caller gives up.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use acdm_core::ToolResponse;
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, ClientConfig};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, mpsc};

use crate::admin::alpha_with_writes;
use crate::helpers::{Options, Req, TOKEN, TestApp, send, spawn_app};

/// An upstream that reads each request, says so, and answers only when
/// released (with `answer`), or never.
struct HeldUpstream {
    addr: SocketAddr,
    arrived: mpsc::UnboundedReceiver<()>,
    release: Arc<Notify>,
}

impl HeldUpstream {
    async fn start(answer: Option<&'static str>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, arrived) = mpsc::unbounded_channel();
        let release = Arc::new(Notify::new());
        let held = release.clone();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let (tx, held) = (tx.clone(), held.clone());
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut byte = [0u8; 1];
                    while !head.ends_with(b"\r\n\r\n") {
                        if stream.read(&mut byte).await.unwrap_or(0) == 0 {
                            return;
                        }
                        head.push(byte[0]);
                    }
                    let _ = tx.send(());
                    let Some(body) = answer else {
                        // Never answers; holds the connection.
                        std::future::pending::<()>().await;
                        return;
                    };
                    held.notified().await;
                    let reply = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = stream.write_all(reply.as_bytes()).await;
                });
            }
        });
        Self {
            addr,
            arrived,
            release,
        }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

/// A GitLab whose blob search answers (an empty page) only when released.
fn gitlab_env(upstream: &HeldUpstream) -> Vec<(&'static str, String)> {
    vec![
        ("GITLAB_WIKI_BASE_URL", upstream.url()),
        ("GITLAB_WIKI_PROJECT_ID", "42".to_owned()),
        ("GITLAB_WIKI_PAT", "glpat-test-0123456789abcdef".to_owned()),
    ]
}

fn mcp_headers() -> [(&'static str, &'static str); 2] {
    [
        ("X-ACDM-Service-Auth", TOKEN),
        ("Accept", "application/json, text/event-stream"),
    ]
}

fn tools_call(name: &str, arguments: Value) -> String {
    json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": name, "arguments": arguments}})
    .to_string()
}

/// Waits (at most 10 s) until the server no longer accepts connections.
async fn until_listener_closed(addr: SocketAddr) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !crate::helpers::refuses_connections(addr).await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the listener did not close"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn stopped(app: TestApp) {
    tokio::time::timeout(Duration::from_secs(10), app.task)
        .await
        .expect("the server stops")
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn an_agent_over_its_rate_gets_rate_limited_with_retry_after_and_others_do_not() {
    let app = spawn_app(Options {
        extra_env: vec![
            // A call every 10 s: no time a slow machine takes refills a
            // bucket within the test.
            ("ACDM_BFF_RATE_PER_MINUTE", "6".to_owned()),
            ("ACDM_BFF_RATE_BURST", "5".to_owned()),
            ("ACDM_BFF_WRITE_RATE_PER_MINUTE", "6".to_owned()),
            ("ACDM_BFF_WRITE_RATE_BURST", "2".to_owned()),
        ],
        ..Options::default()
    })
    .await;
    let agent = alpha_with_writes(&app, 0).await;
    let call = |op: &'static str, body: &'static str| {
        let app = &app;
        async move {
            app.send(
                Req::new("POST", &format!("/agent-tools/nc/{op}"))
                    .headers(&agent)
                    .json(body),
            )
            .await
        }
    };
    // Two writes, the write burst; the third write is over the writes'
    // budget while reads still pass (the calls' budget has room).
    for n in 0..2 {
        let r = call("write", r#"{"rel_path":"w.md","content":"x"}"#).await;
        assert_eq!(r.status, 200, "write {n}: {}", r.body);
    }
    let refused = call("write", r#"{"rel_path":"w.md","content":"x"}"#).await;
    assert_eq!(refused.status, 429, "{}", refused.body);
    let body = refused.json();
    assert_eq!(body["code"], "rate_limited");
    assert!(body["message"].as_str().unwrap().contains("project-alpha"));
    assert!(body["message"].as_str().unwrap().contains("writes"));
    assert_eq!(body["data"]["limit_per_minute"], 6);
    let after = refused.header("retry-after").expect("Retry-After");
    assert_eq!(after, body["data"]["retry_after_seconds"].to_string());
    let after: u64 = after.parse().unwrap();
    assert!((1..=10).contains(&after), "one write every 10 s: {after}");
    // Three calls were made (two writes and a refused one); the burst of
    // five leaves two reads, then the calls' budget is spent too.
    for n in 0..2 {
        let r = call("list_mounts", "{}").await;
        assert_eq!(r.status, 200, "read {n}: {}", r.body);
    }
    let refused = call("list_mounts", "{}").await;
    assert_eq!(refused.status, 429, "{}", refused.body);
    assert!(
        refused.json()["message"]
            .as_str()
            .unwrap()
            .contains("calls")
    );
    // Another agent has budgets of its own.
    for (path, body) in [
        ("/admin/projects", r#"{"slug":"beta","name":"Beta"}"#),
        (
            "/admin/agents",
            r#"{"agent_name":"project-beta","project":"beta"}"#,
        ),
        (
            "/admin/projects/beta/members",
            r#"{"user_id":"u-1","role":"member"}"#,
        ),
    ] {
        let r = app
            .send(
                Req::new("POST", path)
                    .headers(&crate::admin::admin_headers())
                    .json(body),
            )
            .await;
        assert!(r.status < 300, "{path}: {}", r.body);
    }
    let beta = [
        ("X-ACDM-Service-Auth", TOKEN),
        ("X-ACDM-User-Id", "u-1"),
        ("X-ACDM-Agent-Name", "project-beta"),
        ("X-ACDM-Thread-Id", "t-1"),
    ];
    let r = app
        .send(
            Req::new("POST", "/agent-tools/nc/list_mounts")
                .headers(&beta)
                .json("{}"),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    app.stop().await;
}

#[tokio::test]
async fn a_tool_over_its_rate_is_a_tool_error_saying_how_long_to_wait() {
    let app = spawn_app(Options {
        extra_env: vec![
            // A call every 10 s, bursts of 2.
            ("ACDM_MCP_TOOL_RATE_PER_MINUTE", "6".to_owned()),
            ("ACDM_MCP_TOOL_RATE_BURST", "2".to_owned()),
        ],
        ..Options::default()
    })
    .await;
    let search = tools_call("acdm_search_wiki", json!({"query": "report"}));
    let mut results = Vec::new();
    for _ in 0..3 {
        let r = app
            .send(
                Req::new("POST", "/mcp")
                    .headers(&mcp_headers())
                    .json(&search),
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.body);
        results.push(r.json()["result"].clone());
    }
    assert_eq!(results[0]["isError"], false, "{}", results[0]);
    assert_eq!(results[1]["isError"], false, "{}", results[1]);
    let limited = &results[2];
    assert_eq!(limited["isError"], true, "{limited}");
    let failure = &limited["structuredContent"];
    assert_eq!(failure["code"], "rate_limited", "{limited}");
    let wait = failure["retry_after_seconds"].as_u64().unwrap();
    assert!((1..=10).contains(&wait), "one call every 10 s: {wait}");
    let text = limited["content"][0]["text"].as_str().unwrap();
    assert!(text.contains(&format!("Wait {wait} s")), "{text}");
    // The budget is the tool's: another tool still answers.
    let read = tools_call("acdm_read_wiki_file", json!({"path": "README.md"}));
    let r = app
        .send(Req::new("POST", "/mcp").headers(&mcp_headers()).json(&read))
        .await;
    assert_ne!(
        r.json()["result"]["structuredContent"]["code"],
        "rate_limited",
        "{}",
        r.body
    );
    app.stop().await;
}

/// Sends `request` on a kept-alive connection (no `Connection: close` of
/// its own); the status and the response's `Connection` header.
async fn keep_alive(addr: SocketAddr, request: &str) -> (u16, Option<String>) {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(stream.read(&mut byte).await.unwrap(), 1, "{head:?}");
        head.push(byte[0]);
    }
    let head = String::from_utf8(head).unwrap().to_lowercase();
    let status = head[9..12].parse().unwrap();
    let connection = head
        .lines()
        .find_map(|l| l.strip_prefix("connection:"))
        .map(|v| v.trim().to_owned());
    (status, connection)
}

#[tokio::test]
async fn during_the_prestop_delay_readiness_says_draining_and_requests_are_still_served() {
    // What is checked must happen within the delay: long enough for a
    // loaded machine.
    let app = spawn_app(Options {
        extra_env: vec![("ACDM_SHUTDOWN_PRESTOP_SECONDS", "5".to_owned())],
        ..Options::default()
    })
    .await;
    alpha_with_writes(&app, 0).await;
    let probe = "GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    let list_mounts = format!(
        "POST /agent-tools/nc/list_mounts HTTP/1.1\r\nHost: 127.0.0.1\r\n\
         X-ACDM-Service-Auth: {TOKEN}\r\nX-ACDM-User-Id: u-1\r\n\
         X-ACDM-Agent-Name: project-alpha\r\nX-ACDM-Thread-Id: t-1\r\n\
         Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{{}}"
    );
    assert_eq!(keep_alive(app.addr, probe).await, (200, None));
    assert_eq!(keep_alive(app.addr, &list_mounts).await, (200, None));
    app.shutdown.cancel();
    let r = app.send(Req::get("/readyz")).await;
    assert_eq!(r.status, 503, "{}", r.body);
    assert_eq!(r.json()["status"], "draining");
    assert_eq!(
        r.json()["checks"]["shutdown"]["reason"],
        "the server is shutting down"
    );
    // Still serving, each answer asking its client to close the connection
    // so a load balancer does not reuse it.
    let close = Some("close".to_owned());
    assert_eq!(keep_alive(app.addr, probe).await, (503, close.clone()));
    assert_eq!(keep_alive(app.addr, &list_mounts).await, (200, close));
    until_listener_closed(app.addr).await;
    stopped(app).await;
}

#[tokio::test]
async fn an_mcp_call_in_flight_when_the_server_stops_is_answered() {
    let mut gitlab = HeldUpstream::start(Some("[]")).await;
    let app = spawn_app(Options {
        extra_env: gitlab_env(&gitlab),
        ..Options::default()
    })
    .await;
    let addr = app.addr;
    let call = tokio::spawn(async move {
        send(
            addr,
            Req::new("POST", "/mcp")
                .headers(&mcp_headers())
                .json(&tools_call("acdm_search_wiki", json!({"query": "deploy"}))),
        )
        .await
    });
    gitlab.arrived.recv().await.unwrap();
    app.shutdown.cancel();
    until_listener_closed(app.addr).await;
    gitlab.release.notify_waiters();
    let answer = call.await.unwrap();
    assert_eq!(answer.status, 200, "{}", answer.body);
    let result = &answer.json()["result"];
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(result["structuredContent"]["returned"], 0, "{result}");
    stopped(app).await;
}

#[tokio::test]
async fn an_mcp_call_in_flight_in_a_session_when_the_server_stops_is_answered() {
    let mut gitlab = HeldUpstream::start(Some("[]")).await;
    let mut env = gitlab_env(&gitlab);
    env.push(("ACDM_MCP_SESSIONS", "true".to_owned()));
    let app = spawn_app(Options {
        extra_env: env,
        ..Options::default()
    })
    .await;
    let client = ClientConfig::default()
        .serve(crate::mcp::transport(app.addr, TOKEN))
        .await
        .unwrap();
    let peer = client.peer().clone();
    let call = tokio::spawn(async move {
        let mut arguments = serde_json::Map::new();
        arguments.insert("query".to_owned(), json!("deploy"));
        peer.call_tool(CallToolRequestParams::new("acdm_search_wiki").with_arguments(arguments))
            .await
    });
    gitlab.arrived.recv().await.unwrap();
    app.shutdown.cancel();
    until_listener_closed(app.addr).await;
    gitlab.release.notify_waiters();
    // Before this was fixed the session's stream ended without the result
    // and the call waited for ever: a guard makes that a failure.
    let result = tokio::time::timeout(Duration::from_secs(10), call)
        .await
        .expect("the call is answered, not abandoned")
        .unwrap()
        .expect("the call is answered");
    assert_eq!(result.is_error, Some(false), "{result:?}");
    drop(client);
    stopped(app).await;
}

#[tokio::test]
async fn a_stalled_upstream_is_upstream_timeout_before_the_harness_client_gives_up() {
    // A Nextcloud that never answers; the server's own budgets are the
    // defaults (20 s per upstream call, 25 s per request), the client waits
    // 5 s and says so: the server answers first (at 4.5 s), with what
    // happened.
    let nextcloud = HeldUpstream::start(None).await;
    let app = spawn_app(Options {
        extra_env: vec![
            ("NEXTCLOUD_URL", nextcloud.url()),
            ("NEXTCLOUD_USER", "svc".to_owned()),
            ("NEXTCLOUD_APP_PASSWORD", "app-password".to_owned()),
        ],
        ..Options::default()
    })
    .await;
    alpha_with_writes(&app, 0).await;
    let client = acdm_harness_client::HarnessClient::new(
        acdm_harness_client::ClientConfig::new(
            &format!("http://{}", app.addr),
            Some(TOKEN.to_owned().into()),
            Duration::from_secs(5),
        )
        .unwrap(),
    )
    .unwrap();
    let identity = acdm_core::Identity::new(
        acdm_core::UserId::parse("u-1").unwrap(),
        acdm_core::AgentName::parse("project-alpha").unwrap(),
        acdm_core::ThreadId::parse("t-1").unwrap(),
    );
    let answer: ToolResponse<Value> = client
        .as_identity(identity)
        .call("agent-tools/nc/read", &json!({"rel_path": "notes.md"}))
        .await;
    assert_eq!(
        answer.error_code(),
        Some(acdm_core::ErrorCode::UpstreamTimeout),
        "{answer:?}"
    );
    app.stop().await;
}

#[test]
fn by_default_the_server_answers_before_the_harness_client_gives_up() {
    let dir = tempfile::tempdir().unwrap();
    let config = acdm_backend::config::Config::load_from(
        None,
        [(
            std::ffi::OsString::from("ACDM_DATA_DIR"),
            dir.path().as_os_str().to_owned(),
        )],
    )
    .unwrap();
    assert!(config.upstream().timeout <= config.request_timeout);
    assert!(
        config.request_timeout < acdm_harness_client::DEFAULT_TIMEOUT,
        "{:?} ≥ {:?}",
        config.request_timeout,
        acdm_harness_client::DEFAULT_TIMEOUT
    );
}

#[tokio::test]
async fn readiness_fails_naming_the_lock_while_another_process_holds_the_database_for_writing() {
    use sqlx::{ConnectOptions, Executor};
    let app = spawn_app(Options::default()).await;
    assert_eq!(app.send(Req::get("/readyz")).await.status, 200);
    let mut holder = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(app.data_dir.join("acdm.sqlite3"))
        .connect()
        .await
        .unwrap();
    holder.execute("BEGIN IMMEDIATE").await.unwrap();
    // Readiness is measured at most once a second.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let report = loop {
        let r = app.send(Req::get("/readyz")).await;
        if r.status == 503 {
            break r.json();
        }
        assert!(tokio::time::Instant::now() < deadline, "still ready");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(report["status"], "not_ready");
    assert_eq!(report["checks"]["database"]["status"], "ok", "reads pass");
    let reason = report["checks"]["database_writes"]["reason"]
        .as_str()
        .unwrap();
    assert!(
        reason.contains("locked for writing by another process"),
        "{reason}"
    );
    holder.execute("ROLLBACK").await.unwrap();
    drop(holder);
    app.stop().await;
}

/// Two servers on one database: SQLite (one data folder) always, and
/// PostgreSQL (a schema of its own) when `ACDM_TEST_DATABASE_URL` is set.
/// On PostgreSQL the servers poll only every minute, so what reaches the
/// other server within seconds was announced.
async fn two_servers_on_one_database() -> Vec<(
    &'static str,
    TestApp,
    TestApp,
    Option<crate::helpers::PgSchema>,
)> {
    let mut pairs = Vec::new();
    let a = spawn_app(Options::default()).await;
    let b = spawn_app(Options {
        data_dir: Some(a.data_dir.clone()),
        ..Options::default()
    })
    .await;
    pairs.push(("sqlite", a, b, None));
    if let Some(schema) = crate::helpers::PgSchema::create().await {
        let env = || {
            vec![
                ("DATABASE_URL", schema.url.clone()),
                ("ACDM_SCOPE_POLL_MILLIS", "60000".to_owned()),
            ]
        };
        let a = spawn_app(Options {
            extra_env: env(),
            ..Options::default()
        })
        .await;
        let b = spawn_app(Options {
            extra_env: env(),
            ..Options::default()
        })
        .await;
        pairs.push(("postgres", a, b, Some(schema)));
    }
    pairs
}

/// Sends an nc write as `project-alpha` until it answers `code` (10 s at
/// most).
async fn until_write_answers(app: &TestApp, agent: &[(&str, &str); 4], code: &str, what: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let r = app
            .send(
                Req::new("POST", "/agent-tools/nc/write")
                    .headers(agent)
                    .json(r#"{"rel_path":"notes/cache.md","content":"x"}"#),
            )
            .await;
        let got = r.json()["code"].as_str().unwrap_or_default().to_owned();
        if got == code {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: still {got} after 10 s: {}",
            r.body
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_role_or_mount_change_through_one_server_is_obeyed_by_the_other_without_a_restart() {
    for (database, a, b, schema) in two_servers_on_one_database().await {
        let agent = alpha_with_writes(&a, 0).await;
        // B serves (and caches) the member's scope.
        until_write_answers(&b, &agent, "ok", database).await;
        // Demoted to viewer through A: A refuses at once, B once the change
        // reaches it.
        let r = a
            .send(
                Req::new("POST", "/admin/projects/alpha/members")
                    .headers(&crate::admin::admin_headers())
                    .json(r#"{"user_id":"u-1","role":"viewer"}"#),
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.body);
        let now = a
            .send(
                Req::new("POST", "/agent-tools/nc/write")
                    .headers(&agent)
                    .json(r#"{"rel_path":"notes/cache.md","content":"x"}"#),
            )
            .await;
        assert_eq!(
            now.json()["code"],
            "permission_denied",
            "{database}: {}",
            now.body
        );
        until_write_answers(&b, &agent, "permission_denied", database).await;
        // A member again (B writes again), then the mount made read-only
        // through A.
        for (path, body) in [
            (
                "/admin/projects/alpha/members",
                r#"{"user_id":"u-1","role":"member"}"#,
            ),
            (
                "/admin/projects/alpha/mounts",
                r#"{"name":"project","writable":false}"#,
            ),
        ] {
            let r = a
                .send(
                    Req::new("POST", path)
                        .headers(&crate::admin::admin_headers())
                        .json(body),
                )
                .await;
            assert_eq!(r.status, 200, "{path}: {}", r.body);
            if path.ends_with("members") {
                until_write_answers(&b, &agent, "ok", database).await;
            }
        }
        let now = a
            .send(
                Req::new("POST", "/agent-tools/nc/write")
                    .headers(&agent)
                    .json(r#"{"rel_path":"notes/cache.md","content":"x"}"#),
            )
            .await;
        let message = now.json()["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(message.contains("read-only"), "{database}: {}", now.body);
        until_write_answers(&b, &agent, "permission_denied", database).await;
        let refused = b
            .send(
                Req::new("POST", "/agent-tools/nc/write")
                    .headers(&agent)
                    .json(r#"{"rel_path":"notes/cache.md","content":"x"}"#),
            )
            .await;
        let message = refused.json()["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(
            message.contains("read-only"),
            "{database}: {}",
            refused.body
        );
        a.stop().await;
        b.stop().await;
        if let Some(schema) = schema {
            schema.drop_now().await;
        }
    }
}

/// A raw `POST /mcp` of `body`, as a client sends it.
fn mcp_post(body: &str) -> String {
    format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-ACDM-Service-Auth: {TOKEN}\r\n\
         Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// Sends `request` on `stream` (kept alive) and reads one answer: its
/// status and body (by `Content-Length`).
async fn exchange(stream: &mut TcpStream, request: &str) -> (u16, String) {
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(stream.read(&mut byte).await.unwrap(), 1, "{head:?}");
        head.push(byte[0]);
    }
    let head = String::from_utf8(head).unwrap().to_lowercase();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .map_or(0, |v| v.trim().parse().unwrap());
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).await.unwrap();
    (
        head[9..12].parse().unwrap(),
        String::from_utf8(body).unwrap(),
    )
}

#[tokio::test]
async fn an_mcp_call_on_an_idle_connection_after_the_listener_closed_is_answered() {
    // Behind a balancer (a pre-stop delay is set) an idle kept-alive
    // connection lingers after the listener closed; a call the balancer
    // sends on it then must be answered, not abandoned by the MCP drain.
    let app = spawn_app(Options {
        extra_env: vec![("ACDM_SHUTDOWN_PRESTOP_SECONDS", "1".to_owned())],
        ..Options::default()
    })
    .await;
    let mut idle = TcpStream::connect(app.addr).await.unwrap();
    let (status, _) = exchange(
        &mut idle,
        "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
    )
    .await;
    assert_eq!(status, 200);
    app.shutdown.cancel();
    until_listener_closed(app.addr).await;
    let body = tools_call("acdm_search_wiki", json!({"query": "report"}));
    let (status, answer) = exchange(&mut idle, &mcp_post(&body)).await;
    assert_eq!(status, 200, "{answer}");
    let answer: Value = serde_json::from_str(&answer).unwrap();
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    stopped(app).await;
}

#[tokio::test]
async fn an_mcp_call_on_a_connection_opened_before_the_stop_is_answered_without_a_prestop() {
    // No pre-stop delay, so no linger for used connections; a connection
    // that had not sent a request when the drain began (one the server
    // took from its listen queue at the close, typically) still has its
    // call answered, by rmcp too (`tools/list` does not take the direct
    // path), rather than abandoned by the MCP drain.
    let app = spawn_app(Options::default()).await;
    let mut fresh = TcpStream::connect(app.addr).await.unwrap();
    app.shutdown.cancel();
    until_listener_closed(app.addr).await;
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string();
    let (status, answer) = exchange(&mut fresh, &mcp_post(&body)).await;
    assert_eq!(status, 200, "{answer}");
    let answer: Value = serde_json::from_str(&answer).unwrap();
    assert_eq!(
        answer["result"]["tools"].as_array().map(Vec::len),
        Some(4),
        "{answer}"
    );
    stopped(app).await;
}
