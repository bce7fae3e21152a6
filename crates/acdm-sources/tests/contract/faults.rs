//! A misbehaving upstream in front of every client operation: stalls,
//! resets, error statuses, truncated and dripping bodies, malformed XML and
//! JSON, hostile hrefs, oversized bodies and redirects. Each must end in a
//! typed error, without a panic; the tests about time (stall, drip) run on
//! a paused tokio clock and check that the client's budget, not the
//! server's delay, ended the call.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use acdm_sources::gitlab::{GitLabConfig, GitLabWiki};
use acdm_sources::http::{HttpClient, HttpSettings};
use acdm_sources::nextcloud::{NextcloudConfig, NextcloudFiles, NextcloudSearch};
use acdm_sources::{
    FileReader, FileSearch, FileWriter, GitRef, Precondition, ReadRange, SourceError, WikiQuery,
    WikiSource,
};
use acdm_test_support::loopback::read_request;
use bytes::Bytes;
use secrecy::SecretString;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::time::Instant;

use crate::harness::abs;

/// What the upstream does after reading a request.
#[derive(Clone)]
enum Behavior {
    /// Never answers.
    Stall,
    /// Closes the connection with unread data (a reset).
    Reset,
    /// Answers with this status, content type and body.
    Respond(u16, &'static str, Vec<u8>),
    /// Announces 1000 bytes, sends 10, closes.
    Truncated(u16),
    /// Sends the headers, then one byte every 300 ms.
    Drip(u16),
    /// Redirects to this address.
    Redirect(SocketAddr),
    /// Answers the first connection with this status and no body, and
    /// stalls every later one.
    FirstThenStall(u16),
}

/// A loopback server that misbehaves on purpose, counting connections.
struct FaultServer {
    addr: SocketAddr,
    connections: Arc<AtomicUsize>,
}

fn head(status: u16, content_type: &str, length: usize) -> String {
    format!(
        "HTTP/1.1 {status} X\r\nContent-Type: {content_type}\r\nContent-Length: {length}\r\nConnection: close\r\n\r\n"
    )
}

impl FaultServer {
    async fn start(behavior: Behavior) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let connections = Arc::new(AtomicUsize::new(0));
        let counter = connections.clone();
        tokio::spawn(async move {
            loop {
                let Ok((mut stream, _)) = listener.accept().await else {
                    return;
                };
                let earlier = counter.fetch_add(1, Ordering::SeqCst);
                let behavior = match behavior {
                    Behavior::FirstThenStall(status) if earlier == 0 => {
                        Behavior::Respond(status, "text/plain", Vec::new())
                    }
                    Behavior::FirstThenStall(_) => Behavior::Stall,
                    ref other => other.clone(),
                };
                tokio::spawn(async move {
                    if matches!(behavior, Behavior::Reset) {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        drop(stream); // unread request bytes: the kernel resets
                        return;
                    }
                    // A request cut short is answered all the same.
                    let _ = read_request(&mut stream, &mut Vec::new()).await;
                    match behavior {
                        Behavior::Stall => tokio::time::sleep(Duration::from_secs(60)).await,
                        Behavior::Reset | Behavior::FirstThenStall(_) => {}
                        Behavior::Respond(status, content_type, body) => {
                            let _ = stream
                                .write_all(head(status, content_type, body.len()).as_bytes())
                                .await;
                            let _ = stream.write_all(&body).await;
                        }
                        Behavior::Truncated(status) => {
                            let _ = stream
                                .write_all(head(status, "application/xml", 1000).as_bytes())
                                .await;
                            let _ = stream.write_all(b"<d:multist").await;
                        }
                        Behavior::Drip(status) => {
                            let _ = stream
                                .write_all(head(status, "application/xml", 200).as_bytes())
                                .await;
                            for _ in 0..200 {
                                if stream.write_all(b" ").await.is_err() {
                                    return;
                                }
                                tokio::time::sleep(Duration::from_millis(300)).await;
                            }
                        }
                        Behavior::Redirect(to) => {
                            let text = format!(
                                "HTTP/1.1 302 Found\r\nLocation: http://{to}/remote.php/dav/files/u/x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                            );
                            let _ = stream.write_all(text.as_bytes()).await;
                        }
                    }
                    let _ = stream.shutdown().await;
                });
            }
        });
        Self { addr, connections }
    }
}

/// Longest silence while reading.
const READ_TIMEOUT: Duration = Duration::from_secs(1);
/// Budget of a whole call, retries included.
const BUDGET: Duration = Duration::from_secs(3);

/// Short budgets: 1 s of silence, 3 s per call, one retry for reads.
fn fault_http() -> HttpClient {
    HttpClient::new(HttpSettings {
        connect_timeout: Duration::from_secs(1),
        read_timeout: READ_TIMEOUT,
        timeout: BUDGET,
        retries: 1,
        backoff: Duration::from_millis(20),
        max_retry_after: Duration::from_secs(1),
        user_agent: "acdm-backend-fault-tests".to_owned(),
        ..HttpSettings::default()
    })
    .unwrap()
}

/// Every client operation the service uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Stat,
    List,
    Read,
    Write,
    Copy,
    Move,
    MakeFolders,
    Search,
    WikiSearch,
    WikiRead,
}

const ALL: &[Op] = &[
    Op::Stat,
    Op::List,
    Op::Read,
    Op::Write,
    Op::Copy,
    Op::Move,
    Op::MakeFolders,
    Op::Search,
    Op::WikiSearch,
    Op::WikiRead,
];

async fn run(op: Op, addr: SocketAddr) -> Result<(), SourceError> {
    run_with(op, addr, fault_http()).await
}

/// [`run`] with clients over `http`.
async fn run_with(op: Op, addr: SocketAddr, http: HttpClient) -> Result<(), SourceError> {
    let base = url::Url::parse(&format!("http://{addr}/")).unwrap();
    let nc = NextcloudConfig {
        url: base.clone(),
        user: "u".to_owned(),
        app_password: Some(SecretString::from("p")),
    };
    let files = NextcloudFiles::new(nc.clone(), http.clone()).unwrap();
    let wiki = GitLabWiki::new(
        GitLabConfig {
            base_url: base,
            project: "42".to_owned(),
            token: Some(SecretString::from("glpat-x")),
            default_ref: GitRef::parse("main").unwrap(),
        },
        http.clone(),
    )
    .unwrap();
    let path = abs("/Projects/Alpha/notes.md");
    match op {
        Op::Stat => files.stat(&path).await.map(drop),
        Op::List => files.list(&abs("/Projects/Alpha")).await.map(drop),
        Op::Read => {
            let stream = files.read(&path, ReadRange::new(0, 4096)).await?;
            stream.collect(4096).await.map(drop)
        }
        Op::Write => files
            .write(&path, Bytes::from_static(b"x"), &Precondition::None)
            .await
            .map(drop),
        Op::Copy => {
            files
                .copy_to(&path, &abs("/Projects/Alpha/kept.md"), false)
                .await
        }
        Op::Move => {
            files
                .move_to(&path, &abs("/Projects/Alpha/other.md"), false)
                .await
        }
        Op::MakeFolders => files.make_folders(&abs("/Projects/Alpha/new")).await,
        Op::Search => NextcloudSearch::new(nc, http)
            .unwrap()
            .search("plan", 10, &abs("/Projects/Alpha"))
            .await
            .map(drop),
        Op::WikiSearch => wiki
            .search(&WikiQuery {
                term: "deploy".to_owned(),
                limit: 10,
                path_prefix: None,
                git_ref: None,
            })
            .await
            .map(drop),
        Op::WikiRead => wiki
            .read(
                &acdm_core::RelPath::parse("a.md").unwrap(),
                None,
                ReadRange::new(0, 4096),
            )
            .await
            .map(drop),
    }
}

/// Runs `ops` against `behavior`, checks each error with `check` and
/// returns how long each took on tokio's clock (virtual when the test
/// pauses it). A call that does not end within 20 s (a generous guard:
/// every budget here is 3 s) fails the test as hung.
async fn expect(
    behavior: Behavior,
    ops: &[Op],
    check: impl Fn(Op, &SourceError) -> bool,
) -> Vec<(Op, Duration)> {
    let server = FaultServer::start(behavior).await;
    let mut took = Vec::new();
    for &op in ops {
        let started = Instant::now();
        let outcome = tokio::time::timeout(Duration::from_secs(20), run(op, server.addr))
            .await
            .unwrap_or_else(|_| panic!("{op:?} hung"));
        took.push((op, started.elapsed()));
        let error = outcome.expect_err(&format!("{op:?} must fail"));
        assert!(check(op, &error), "{op:?}: unexpected {error:?}");
        let text = error.to_string();
        assert!(
            !text.contains("127.0.0.1") && !text.contains("glpat") && !text.contains("remote.php"),
            "{op:?}: {text}"
        );
    }
    took
}

// Paused clock: the server's 60 s stall and the client's timeouts are all
// virtual, so the test waits for nothing and load cannot skew it.
#[tokio::test(start_paused = true)]
async fn a_stalled_upstream_times_out_within_the_budget() {
    let took = expect(Behavior::Stall, ALL, |_, e| {
        matches!(e, SourceError::Timeout(_))
    })
    .await;
    for (op, took) in took {
        // The server never answers (it would stall for 60 s): the client's
        // read timeout ended the call, once or twice (reads retry), and
        // never later than the whole budget.
        assert!(
            took >= READ_TIMEOUT && took <= BUDGET,
            "{op:?} took {took:?}"
        );
    }
}

// Paused clock. With 2 s of silence allowed and three attempts, a stalled
// upstream used to answer after 6 s whatever the budget said: the budget
// was only checked before a retry started. It is a deadline now.
#[tokio::test(start_paused = true)]
async fn a_stall_answers_by_the_budget_however_many_attempts_are_left() {
    let budget = Duration::from_secs(5);
    let http = HttpClient::new(HttpSettings {
        read_timeout: Duration::from_secs(2),
        timeout: budget,
        retries: 2,
        backoff: Duration::from_millis(20),
        ..HttpSettings::default()
    })
    .unwrap();
    let server = FaultServer::start(Behavior::Stall).await;
    for op in [Op::Stat, Op::Read, Op::Search, Op::WikiRead] {
        let started = Instant::now();
        let error = run_with(op, server.addr, http.clone()).await.unwrap_err();
        let took = started.elapsed();
        assert!(
            matches!(error, SourceError::Timeout(_)),
            "{op:?}: {error:?}"
        );
        assert!(
            took > Duration::from_secs(4) && took <= budget,
            "{op:?} took {took:?}"
        );
    }
}

// Paused clock. A request's deadline ends every upstream call it makes,
// however long their own budget.
#[tokio::test(start_paused = true)]
async fn a_requests_deadline_ends_its_upstream_calls_sooner() {
    let server = FaultServer::start(Behavior::Stall).await;
    for op in [Op::Stat, Op::Write, Op::Search] {
        let started = Instant::now();
        let deadline = started + Duration::from_millis(700);
        let error = acdm_sources::deadline::within(deadline, run(op, server.addr))
            .await
            .unwrap_err();
        assert!(
            matches!(error, SourceError::Timeout(_)),
            "{op:?}: {error:?}"
        );
        assert_eq!(started.elapsed(), Duration::from_millis(700), "{op:?}");
    }
    // A deadline already past sends nothing, and says so (a write's caller
    // then knows nothing happened).
    let before = server.connections.load(Ordering::SeqCst);
    let error = acdm_sources::deadline::within(Instant::now(), run(Op::Write, server.addr))
        .await
        .unwrap_err();
    assert!(matches!(error, SourceError::NotSent(_)), "{error:?}");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(server.connections.load(Ordering::SeqCst), before);
}

// Paused clock. Ten calls at once to a host allowed two connections: two
// reach it, the others wait for a slot, and all end by their deadline.
#[tokio::test(start_paused = true)]
async fn a_host_gets_no_more_requests_at_once_than_its_cap() {
    let http = HttpClient::new(HttpSettings {
        timeout: BUDGET,
        retries: 0,
        max_connections_per_host: 2,
        ..HttpSettings::default()
    })
    .unwrap();
    let server = FaultServer::start(Behavior::Stall).await;
    let started = Instant::now();
    let calls: Vec<_> = (0..10)
        .map(|_| tokio::spawn(run_with(Op::Stat, server.addr, http.clone())))
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(server.connections.load(Ordering::SeqCst), 2);
    let (mut timed_out, mut not_sent) = (0, 0);
    for call in calls {
        match call.await.unwrap().unwrap_err() {
            SourceError::Timeout(_) => timed_out += 1,
            SourceError::NotSent(_) => not_sent += 1,
            other => panic!("{other:?}"),
        }
    }
    // The two that reached the host timed out; the others were never sent.
    assert_eq!((timed_out, not_sent), (2, 8));
    assert_eq!(
        started.elapsed(),
        BUDGET,
        "waiting for a slot ends by the deadline"
    );
    assert_eq!(server.connections.load(Ordering::SeqCst), 2);
}

// Paused clock. A read whose first attempt reached the host (a 503) and
// whose retry then waits for a slot past its deadline, another call
// holding the host's only connection, timed out: it is not `NotSent`,
// which would tell a caller that nothing reached the upstream.
#[tokio::test(start_paused = true)]
async fn a_retry_that_never_gets_a_slot_after_a_sent_attempt_is_a_timeout_not_unsent() {
    let http = HttpClient::new(HttpSettings {
        timeout: BUDGET,
        read_timeout: BUDGET * 10,
        retries: 1,
        backoff: Duration::from_millis(20),
        max_connections_per_host: 1,
        ..HttpSettings::default()
    })
    .unwrap();
    let server = FaultServer::start(Behavior::FirstThenStall(503)).await;
    let first = tokio::spawn(run_with(Op::Stat, server.addr, http.clone()));
    while server.connections.load(Ordering::SeqCst) == 0 {
        tokio::task::yield_now().await;
    }
    // Takes the slot while the first call waits to retry, and keeps it
    // until its own deadline, after the first call's.
    let holder = tokio::spawn(run_with(Op::Stat, server.addr, http.clone()));
    let first = first.await.unwrap().unwrap_err();
    assert!(matches!(first, SourceError::Timeout(_)), "{first:?}");
    let holder = holder.await.unwrap().unwrap_err();
    assert!(matches!(holder, SourceError::Timeout(_)), "{holder:?}");
    // The retry never reached the host.
    assert_eq!(server.connections.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_reset_connection_is_an_upstream_error() {
    expect(Behavior::Reset, ALL, |_, e| {
        matches!(e, SourceError::Upstream { status: None, .. })
    })
    .await;
}

#[tokio::test]
async fn server_errors_keep_their_status() {
    for status in [500u16, 502, 503] {
        let body =
            b"<html><body>Internal error, stack trace at /var/www/x.php</body></html>".to_vec();
        expect(
            Behavior::Respond(status, "text/html", body),
            ALL,
            |_, e| matches!(e, SourceError::Upstream { status: Some(s), .. } if *s == status),
        )
        .await;
    }
}

#[tokio::test]
async fn a_truncated_body_is_an_upstream_error() {
    expect(Behavior::Truncated(207), &[Op::Stat, Op::List], |_, e| {
        matches!(e, SourceError::Upstream { status: None, .. })
    })
    .await;
    expect(
        Behavior::Truncated(200),
        &[Op::Read, Op::Search, Op::WikiSearch, Op::WikiRead],
        |_, e| matches!(e, SourceError::Upstream { status: None, .. }),
    )
    .await;
}

// Paused clock, as for the stall.
#[tokio::test(start_paused = true)]
async fn a_dripping_body_is_cut_by_the_total_timeout() {
    let mut took = expect(Behavior::Drip(207), &[Op::Stat, Op::List], |_, e| {
        matches!(e, SourceError::Timeout(_))
    })
    .await;
    took.extend(
        expect(
            Behavior::Drip(200),
            &[Op::Read, Op::Search, Op::WikiSearch, Op::WikiRead],
            |_, e| matches!(e, SourceError::Timeout(_)),
        )
        .await,
    );
    for (op, took) in took {
        // A byte every 300 ms never lets the read timeout fire, and the
        // body would take 60 s: only the whole-call budget ends it (no
        // retry fits in what is left of it).
        assert!(
            took >= BUDGET && took < BUDGET + READ_TIMEOUT,
            "{op:?} took {took:?}"
        );
    }
}

#[tokio::test]
async fn malformed_xml_and_json_are_invalid_responses() {
    let garbage =
        b"<d:multistatus xmlns:d=\"DAV:\"><d:response><d:href>/x</d:href><d:prop".to_vec();
    expect(
        Behavior::Respond(207, "application/xml", garbage),
        &[Op::Stat, Op::List],
        |_, e| matches!(e, SourceError::InvalidResponse { .. }),
    )
    .await;
    expect(
        Behavior::Respond(200, "application/json", b"{\"ocs\": [1, 2".to_vec()),
        &[Op::Search, Op::WikiSearch],
        |_, e| matches!(e, SourceError::InvalidResponse { .. }),
    )
    .await;
    // JSON, but not the documented shape.
    expect(
        Behavior::Respond(200, "application/json", b"{\"unexpected\": true}".to_vec()),
        &[Op::Search, Op::WikiSearch],
        |_, e| matches!(e, SourceError::InvalidResponse { .. }),
    )
    .await;
}

fn multistatus(hrefs: &[&str]) -> Vec<u8> {
    let mut xml = String::from(r#"<?xml version="1.0"?><d:multistatus xmlns:d="DAV:">"#);
    for href in hrefs {
        let kind = if href.ends_with('/') {
            "<d:collection/>"
        } else {
            ""
        };
        xml.push_str(&format!(
            "<d:response><d:href>{href}</d:href><d:propstat><d:prop><d:resourcetype>{kind}</d:resourcetype></d:prop><d:status>HTTP/1.1 200 OK</d:status></d:propstat></d:response>"
        ));
    }
    xml.push_str("</d:multistatus>");
    xml.into_bytes()
}

#[tokio::test]
async fn hostile_hrefs_are_invalid_responses() {
    let cases: &[&[&str]] = &[
        &[
            "/remote.php/dav/files/u/Projects/Alpha/",
            "/remote.php/dav/files/u/Projects/Alpha/../Beta/secret.md",
        ],
        &[
            "/remote.php/dav/files/u/Projects/Alpha/",
            "/remote.php/dav/files/other/Projects/Alpha/x.md",
        ],
        &[
            "/remote.php/dav/files/u/Projects/Alpha/",
            "http://evil.example/remote.php/dav/files/u/Projects/Alpha/x.md",
        ],
        &[
            "/remote.php/dav/files/u/Projects/Alpha/",
            "/remote.php/dav/files/u/Projects/Beta/x.md",
        ],
        &[
            "/remote.php/dav/files/u/Projects/Alpha/",
            "/remote.php/dav/files/u/Projects/Alpha/%2e%2e/%2e%2e/x",
        ],
        &[
            "/remote.php/dav/files/u/Projects/Alpha/notes.md",
            "/remote.php/dav/files/u/Projects/Alpha/sub/deep.md",
        ],
        &["relative/path"],
    ];
    for hrefs in cases {
        let body = multistatus(hrefs);
        expect(
            Behavior::Respond(207, "application/xml", body),
            &[Op::Stat, Op::List],
            |_, e| matches!(e, SourceError::InvalidResponse { .. }),
        )
        .await;
    }
}

#[tokio::test]
async fn oversized_bodies_are_refused_without_buffering_them() {
    let huge = vec![b' '; 17 << 20];
    expect(
        Behavior::Respond(207, "application/xml", huge),
        &[Op::Stat, Op::List],
        |_, e| matches!(e, SourceError::InvalidResponse { .. }),
    )
    .await;
}

#[tokio::test]
async fn redirects_are_never_followed() {
    let target = FaultServer::start(Behavior::Respond(
        200,
        "text/plain",
        b"should not be reached".to_vec(),
    ))
    .await;
    expect(Behavior::Redirect(target.addr), ALL, |_, e| {
        matches!(
            e,
            SourceError::Upstream {
                status: Some(302),
                ..
            }
        )
    })
    .await;
    assert_eq!(
        target.connections.load(Ordering::SeqCst),
        0,
        "the redirect target was never contacted"
    );
}

#[tokio::test]
async fn rate_limits_and_locks_are_typed_and_retryable() {
    let server = FaultServer::start(Behavior::Respond(
        423,
        "application/xml",
        b"<d:error xmlns:d=\"DAV:\"/>".to_vec(),
    ))
    .await;
    for op in [Op::Write, Op::Copy, Op::Move] {
        let error = run(op, server.addr).await.unwrap_err();
        assert!(
            matches!(error, SourceError::Locked { .. }),
            "{op:?}: {error:?}"
        );
        assert!(error.is_retryable());
    }
    let server = FaultServer::start(Behavior::Respond(
        429,
        "text/plain",
        b"Retry later".to_vec(),
    ))
    .await;
    for op in [Op::Stat, Op::Search, Op::WikiSearch, Op::WikiRead] {
        let error = run(op, server.addr).await.unwrap_err();
        assert!(
            matches!(error, SourceError::RateLimited { .. }),
            "{op:?}: {error:?}"
        );
    }
}
