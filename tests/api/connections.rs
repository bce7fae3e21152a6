//! The HTTP edge: a client that never finishes its request head is cut
//! off by the header-read timeout, the connection cap bounds how many
//! connections the server holds, and a normal client is still served
//! while slow ones are being dropped.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use crate::helpers::{Options, Req, send, spawn_app};

/// How a slow client's connection ended.
#[derive(Debug, PartialEq, Eq)]
enum Ended {
    /// The server closed it, with nothing or a `408` written first.
    ClosedByServer,
    /// The server answered something else.
    Answered(String),
}

/// Connects, starts a request and then dribbles a header value one byte at
/// a time, never ending the head, until the server closes the connection
/// (one growing header, so no header-count or size limit ends it first).
async fn slow_client(addr: std::net::SocketAddr, started: mpsc::Sender<()>) -> Ended {
    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut reader, mut writer) = stream.into_split();
    writer
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        .await
        .unwrap();
    started.send(()).await.unwrap();
    let dribble = async move {
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        loop {
            tick.tick().await;
            if writer.write_all(b"x").await.is_err() {
                break;
            }
        }
        // The write side failed: the server is gone; the read side says how.
        std::future::pending::<()>().await;
    };
    let read = async move {
        let mut bytes = Vec::new();
        match reader.read_to_end(&mut bytes).await {
            Ok(_) if bytes.is_empty() || bytes.starts_with(b"HTTP/1.1 408") => {
                Ended::ClosedByServer
            }
            Ok(_) => Ended::Answered(String::from_utf8_lossy(&bytes).into_owned()),
            // A reset: the server closed with our dribble unread.
            Err(_) => Ended::ClosedByServer,
        }
    };
    tokio::select! {
        ended = read => ended,
        () = dribble => unreachable!("dribbling never ends by itself"),
    }
}

/// The value of the open-connections gauge in a `/metrics` text.
fn open_connections(metrics: &str) -> Option<u64> {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix("acdm_http_open_connections "))
        .map(|v| v.trim().parse().unwrap())
}

#[tokio::test]
async fn slow_clients_are_cut_off_while_a_normal_client_is_still_served() {
    const SLOW: usize = 500;
    const CAP: u64 = 200;
    let app = spawn_app(Options {
        extra_env: vec![
            ("ACDM_HEADER_READ_TIMEOUT_SECONDS", "1".to_owned()),
            ("ACDM_MAX_CONNECTIONS", CAP.to_string()),
        ],
        ..Options::default()
    })
    .await;
    // The listen backlog (1024) holds every connection the loop has not
    // accepted yet, so each close below is the server's doing, not the
    // kernel's.
    let mut slow = JoinSet::new();
    let (started, mut all_started) = mpsc::channel(SLOW);
    for _ in 0..SLOW {
        slow.spawn(slow_client(app.addr, started.clone()));
    }
    for _ in 0..SLOW {
        all_started.recv().await.unwrap();
    }

    // While the slow ones hold (or wait for) every slot, a normal client
    // still gets its answer, and the server never holds more than the cap.
    let normal = app.send(Req::get("/healthz")).await;
    assert_eq!(normal.status, 200, "{}", normal.body);
    let metrics = send(app.addr, Req::get("/metrics")).await;
    assert_eq!(metrics.status, 200);
    let open = open_connections(&metrics.body);

    // Every slow client is closed by the server (a safety bound, not a
    // speed assertion: without a header-read timeout they stay open).
    let mut closed = 0;
    let all = async {
        while let Some(ended) = slow.join_next().await {
            assert_eq!(ended.unwrap(), Ended::ClosedByServer);
            closed += 1;
        }
    };
    let finished = tokio::time::timeout(Duration::from_secs(60), all).await;
    assert!(
        finished.is_ok(),
        "only {closed} of {SLOW} slow connections were closed by the server"
    );
    assert_eq!(closed, SLOW);
    let open = open.unwrap_or_else(|| panic!("no open-connections gauge in {}", metrics.body));
    assert!(open >= 1, "the metrics request itself is open");
    assert!(open <= CAP, "{open} open connections, cap {CAP}");

    // And the server is healthy afterwards.
    assert_eq!(app.send(Req::get("/healthz")).await.status, 200);
    app.stop().await;
}
