//! Shutdown: readiness flips when draining, and a connection that never
//! finishes its request cannot hold the server past the grace period.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::helpers::{BEARER, Options, Req, refuses_connections, spawn_app};

#[tokio::test]
async fn readiness_reports_draining_during_shutdown() {
    let app = spawn_app(Options::default()).await;
    assert_eq!(app.send(Req::get("/readyz")).await.status, 200);
    app.state.readiness.set_draining();
    let r = app.send(Req::get("/readyz")).await;
    assert_eq!(r.status, 503);
    assert_eq!(
        r.json()["checks"]["shutdown"]["reason"],
        "the server is shutting down"
    );
    app.stop().await;
}

/// A request head for `POST /admin/projects` announcing a two-byte body,
/// with its first byte.
fn half_a_request() -> String {
    format!(
        "POST /admin/projects HTTP/1.1\r\nHost: x\r\nAuthorization: {BEARER}\r\n\
         Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{{"
    )
}

#[tokio::test]
async fn a_stuck_client_cannot_hold_the_shutdown_past_the_grace_period() {
    // Grace period: 2 s (the test servers' setting).
    let app = spawn_app(Options::default()).await;
    // Two admitted requests whose bodies are not complete (their handlers
    // are reading them, so they are in flight): one finishes during the
    // drain, one never does; and an idle connection.
    let mut finishing = TcpStream::connect(app.addr).await.unwrap();
    finishing
        .write_all(half_a_request().as_bytes())
        .await
        .unwrap();
    let mut stuck = TcpStream::connect(app.addr).await.unwrap();
    stuck.write_all(half_a_request().as_bytes()).await.unwrap();
    let _idle = TcpStream::connect(app.addr).await.unwrap();
    // Both requests reach their handlers before the shutdown starts.
    tokio::time::sleep(Duration::from_millis(100)).await;

    app.shutdown.cancel();
    // Draining once the listener is gone.
    while !refuses_connections(app.addr).await {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // The drain waits for an in-flight request: it is answered.
    finishing.write_all(b"}").await.unwrap();
    let mut answer = String::new();
    finishing.read_to_string(&mut answer).await.unwrap();
    assert!(
        answer.starts_with("HTTP/1.1 "),
        "answered during the drain: {answer:?}"
    );

    // The stuck one ends the drain only at the deadline. The server cannot
    // run on a paused clock (real sockets, a database), so the guard is
    // generous — five grace periods — and what is checked is how it ended:
    // the stuck request was cut off without an answer.
    tokio::time::timeout(Duration::from_secs(10), app.task)
        .await
        .expect("the server stops at the drain deadline")
        .unwrap()
        .unwrap();
    let mut rest = Vec::new();
    let cut = stuck.read_to_end(&mut rest).await;
    assert!(
        cut.is_err() || rest.is_empty(),
        "closed without an answer: {:?}",
        String::from_utf8_lossy(&rest)
    );
    assert!(
        TcpStream::connect(app.addr).await.is_err(),
        "no longer accepting"
    );
}
