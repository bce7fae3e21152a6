//! Shutdown: readiness flips when draining, and a connection that never
//! finishes its request cannot hold the server past the grace period.

use std::time::{Duration, Instant};

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::helpers::{BEARER, Options, Req, spawn_app};

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

#[tokio::test]
async fn a_stuck_client_cannot_hold_the_shutdown_past_the_grace_period() {
    let app = spawn_app(Options::default()).await;
    // An admitted request whose body never arrives (its handler is reading
    // it, so the request is in flight), and an idle connection.
    let mut stuck = TcpStream::connect(app.addr).await.unwrap();
    let head = format!(
        "POST /admin/projects HTTP/1.1\r\nHost: x\r\nAuthorization: {BEARER}\r\n\
         Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{{"
    );
    stuck.write_all(head.as_bytes()).await.unwrap();
    let _idle = TcpStream::connect(app.addr).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;

    let started = Instant::now();
    app.shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(10), app.task)
        .await
        .expect("the server stops")
        .unwrap()
        .unwrap();
    let took = started.elapsed();
    eprintln!("stopped {took:?} after the signal (grace 2 s)");
    assert!(
        took >= Duration::from_millis(1500),
        "waited for the in-flight request: {took:?}"
    );
    assert!(
        took < Duration::from_secs(4),
        "but not past the grace period: {took:?}"
    );
    assert!(
        TcpStream::connect(app.addr).await.is_err(),
        "no longer accepting"
    );
}
