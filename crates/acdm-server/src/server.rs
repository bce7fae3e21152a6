//! The HTTP/1 connection loop: accepts TCP connections up to a cap, serves
//! each with hyper under a header-read timeout, and drains them on
//! shutdown.
//!
//! `axum::serve` offers neither a header-read timeout nor a connection cap,
//! so a client that sends one header line every few seconds held its
//! connection (and a file descriptor) for ever. Here:
//!
//! - **Header-read timeout** (`ACDM_HEADER_READ_TIMEOUT_SECONDS`): a
//!   connection must deliver a complete request head within this time of
//!   the server starting to read it, or hyper answers `408` and closes it.
//!   Dribbling does not extend it. hyper starts the same clock when a
//!   keep-alive connection goes idle, so it is also the idle timeout of
//!   kept-alive connections; a load balancer's idle timeout towards this
//!   service must be shorter (or it may reuse a connection we just closed).
//! - **Connection cap** (`ACDM_MAX_CONNECTIONS`): when that many
//!   connections are open, the loop stops *accepting* until one closes.
//!   New connections then wait in the kernel's listen backlog ([`bind`]
//!   asks for [`LISTEN_BACKLOG`], not the usual 128) and are
//!   served as soon as a slot frees — slow clients free theirs within the
//!   header-read timeout — instead of being accepted and reset. A normal
//!   client is delayed, not failed, and nothing it sent is lost; a load
//!   balancer sees a slow connect rather than a reset it would count as a
//!   failure of the replica. Reaching the cap is logged (at most once a
//!   minute) and `acdm_http_open_connections` shows how close it is.
//! - **Shutdown**: when the signal fires the listener is closed (new
//!   connections are refused) without resetting a connection the kernel
//!   had already completed: closing a listening socket resets every
//!   connection still in its accept queue, and a balancer that had sent a
//!   `POST` on one cannot tell whether it was served, so it answers `502`
//!   rather than trying another replica. So new handshakes are stopped
//!   first (on Linux, a socket filter drops new `SYN`s; their
//!   retransmission, a second later, finds the port closed and is
//!   refused, which a balancer retries elsewhere), what completes within
//!   [`HANDSHAKE_SETTLE`] is accepted, then everything still queued —
//!   past the connection cap if need be — and only then is the listener
//!   closed. Every connection is then served until it closes: the
//!   server's responses now ask their clients to close (`Connection:
//!   close`, set by the drain middleware), so a connection ends after its
//!   next response. One that stays idle is closed by the server after
//!   [`ConnectionLimits::idle_linger`] (one that has not sent a request
//!   yet, after a second at least): a load balancer that holds kept-alive
//!   connections may pick one at any moment, and a request sent on a
//!   connection just as the server closes it fails — a lingering
//!   connection is used once more (and answered) or closed by its client
//!   instead. The loop returns once all are gone. The caller bounds this
//!   by the grace period and drops the loop's future, which aborts every
//!   connection still open.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use prometheus_client::metrics::gauge::Gauge;
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::lanes::Lanes;

/// Bounds on what clients can hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Time allowed for a complete request head (and for an idle
    /// keep-alive connection to start the next one).
    pub header_read_timeout: Duration,
    /// Connections open at once; beyond it, new ones wait to be accepted.
    pub max_connections: usize,
    /// Once the listener has closed, how long an idle connection stays open
    /// for its client to use once more or to close it.
    pub idle_linger: Duration,
}

impl ConnectionLimits {
    /// How long after the stop signal a connection may still bring a new
    /// request: connections completing their handshake during
    /// [`HANDSHAKE_SETTLE`], then the longer of the idle linger and the
    /// wait for a first request. Whatever counts calls in flight to end a
    /// drain (the MCP endpoint's) must wait this long first.
    pub fn last_request_after_stop(&self) -> Duration {
        HANDSHAKE_SETTLE + self.idle_linger.max(FIRST_REQUEST_WAIT)
    }
}

/// The listen backlog asked for: connections the kernel holds while the
/// loop is at the cap or busy (Linux caps it at `net.core.somaxconn`).
/// The usual 128 overflows under a burst, and the kernel then drops or
/// resets connections nobody has refused.
pub const LISTEN_BACKLOG: u32 = 1024;

/// Binds `addr` (address reuse on, as tokio does) with [`LISTEN_BACKLOG`].
pub fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

/// How often reaching the connection cap may be logged.
const CAP_WARNING_INTERVAL: Duration = Duration::from_secs(60);

/// How long to wait after an accept error that is not about one
/// connection (out of file descriptors, for instance) before trying again.
const ACCEPT_ERROR_BACKOFF: Duration = Duration::from_secs(1);

/// Serves `router` on `listener` until `signal` resolves, then drains: see
/// the module documentation. `open` counts the open connections; each
/// runs on one of `lanes`, the thread it was handed to when accepted.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ConnectionLimits,
    open: Gauge,
    lanes: Arc<Lanes>,
    signal: impl Future<Output = ()>,
) {
    let mut signal = pin!(signal);
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let draining = CancellationToken::new();
    let mut connections = JoinSet::new();
    let mut last_cap_warning: Option<Instant> = None;
    let serving = |stream: TcpStream, peer, permit| {
        let slot = Slot::new(permit, open.clone());
        let (router, draining) = (router.clone(), draining.clone());
        // Its socket leaves this runtime's event loop for its lane's.
        let stream = stream.into_std();
        async move {
            match stream.and_then(TcpStream::from_std) {
                Ok(stream) => connection(stream, peer, router, limits, draining, slot).await,
                Err(error) => {
                    tracing::warn!(%error, %peer, "a connection could not be moved to its thread; closed");
                }
            }
        }
    };
    loop {
        // Finished connections are reaped here so the set stays small.
        while connections.try_join_next().is_some() {}
        let slot = match slots.clone().try_acquire_owned() {
            Ok(slot) => slot,
            Err(_) => {
                if last_cap_warning.is_none_or(|at| at.elapsed() >= CAP_WARNING_INTERVAL) {
                    last_cap_warning = Some(Instant::now());
                    tracing::warn!(
                        max_connections = limits.max_connections,
                        "connection limit reached (ACDM_MAX_CONNECTIONS); new connections wait to be accepted"
                    );
                }
                tokio::select! {
                    () = &mut signal => break,
                    slot = slots.clone().acquire_owned() => match slot {
                        Ok(slot) => slot,
                        // The semaphore is never closed; stop serving if it is.
                        Err(_) => break,
                    },
                }
            }
        };
        let (stream, peer) = tokio::select! {
            () = &mut signal => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) if is_connection_error(&error) => continue,
                Err(error) => {
                    tracing::error!(%error, "cannot accept connections; retrying in a second");
                    let stop = tokio::select! {
                        () = &mut signal => true,
                        () = tokio::time::sleep(ACCEPT_ERROR_BACKOFF) => false,
                    };
                    if stop {
                        break;
                    }
                    continue;
                }
            },
        };
        lanes.spawn(&mut connections, serving(stream, peer, Some(slot)));
    }
    // Each connection accepted from here on is answered once and closed;
    // none waits for a slot, since the listener's close would reset it.
    close_without_reset(listener, |stream, peer| {
        lanes.spawn(&mut connections, serving(stream, peer, None));
    })
    .await;
    draining.cancel();
    while connections.join_next().await.is_some() {}
}

/// Once new handshakes are refused, how long connections whose handshake
/// was under way may take to complete (the balancer's `ACK` is one round
/// trip away) before the listener closes.
pub const HANDSHAKE_SETTLE: Duration = Duration::from_millis(100);

/// Closes `listener` without resetting a connection the kernel completed:
/// stops new handshakes, hands `spawn` what completes within
/// [`HANDSHAKE_SETTLE`] and then everything still queued, and closes it.
/// Where new handshakes cannot be stopped, takes what is queued and
/// closes at once.
async fn close_without_reset(listener: TcpListener, mut spawn: impl FnMut(TcpStream, SocketAddr)) {
    match refuse_new_handshakes(&listener) {
        Ok(()) => {
            let mut settled = pin!(tokio::time::sleep(HANDSHAKE_SETTLE));
            loop {
                let accepted = tokio::select! {
                    () = &mut settled => break,
                    accepted = listener.accept() => accepted,
                };
                match accepted {
                    Ok((stream, peer)) => spawn(stream, peer),
                    Err(error) if is_connection_error(&error) => {}
                    // Out of descriptors, say: what is queued is taken below.
                    Err(_) => break,
                }
            }
        }
        Err(error) => tracing::debug!(
            %error,
            "cannot stop new handshakes on the listener; closing it once its queue is empty"
        ),
    }
    // The reactor may not have seen the last arrivals yet: ask the kernel
    // itself until its queue is empty.
    let Ok(listener) = listener.into_std() else {
        return;
    };
    loop {
        match listener.accept() {
            Ok((stream, peer)) => {
                let stream = stream
                    .set_nonblocking(true)
                    .and_then(|()| TcpStream::from_std(stream));
                if let Ok(stream) = stream {
                    spawn(stream, peer);
                }
            }
            Err(error) if is_connection_error(&error) => {}
            Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(error) => {
                tracing::warn!(%error, "cannot take the connections still queued; closing the listener resets them");
                break;
            }
        }
    }
}

/// Makes the kernel drop new connection requests (`SYN`s) to `listener`
/// while letting handshakes under way complete: a classic BPF socket
/// filter that drops a TCP segment with `SYN` set and `ACK` clear. A
/// filter sees a TCP segment from its header, whose byte 13 holds the
/// flags.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn refuse_new_handshakes(listener: &impl std::os::fd::AsFd) -> std::io::Result<()> {
    use socket2::{SockFilter, SockRef};
    const LOAD_BYTE: u16 = 0x30; // BPF_LD | BPF_B | BPF_ABS
    const AND: u16 = 0x54; // BPF_ALU | BPF_AND | BPF_K
    const JUMP_IF_EQUAL: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
    const RETURN: u16 = 0x06; // BPF_RET | BPF_K
    const FLAGS: u32 = 13;
    const SYN: u32 = 0x02;
    const ACK: u32 = 0x10;
    let program = [
        SockFilter::new(LOAD_BYTE, 0, 0, FLAGS),
        SockFilter::new(AND, 0, 0, SYN | ACK),
        // A bare SYN: go on to the drop; anything else: skip it.
        SockFilter::new(JUMP_IF_EQUAL, 0, 1, SYN),
        SockFilter::new(RETURN, 0, 0, 0),
        SockFilter::new(RETURN, 0, 0, u32::MAX),
    ];
    SockRef::from(listener).attach_filter(&program)
}

/// Elsewhere new handshakes cannot be stopped this way.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn refuse_new_handshakes<T>(_listener: &T) -> std::io::Result<()> {
    Err(std::io::ErrorKind::Unsupported.into())
}

/// An open connection's hold on the cap and on the gauge, released when
/// the connection ends (or is aborted).
/// (A connection taken from the queue once the listener is closing holds
/// no permit: it is answered once, past the cap.)
struct Slot {
    _permit: Option<OwnedSemaphorePermit>,
    open: Gauge,
}

impl Slot {
    fn new(permit: Option<OwnedSemaphorePermit>, open: Gauge) -> Self {
        open.inc();
        Self {
            _permit: permit,
            open,
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.open.dec();
    }
}

/// Once the drain began, how long a connection that has not sent a
/// request yet stays open for its first one.
const FIRST_REQUEST_WAIT: Duration = Duration::from_secs(1);

/// Serves one connection until it ends, or asks it to finish when
/// `draining` is cancelled.
async fn connection(
    stream: TcpStream,
    peer: SocketAddr,
    router: Router,
    limits: ConnectionLimits,
    draining: CancellationToken,
    _slot: Slot,
) {
    // Without TCP_NODELAY small responses wait ~40 ms for delayed ACKs.
    let _ = stream.set_nodelay(true);
    // Whether a request has reached the router on this connection: one
    // that has not is not closed as idle by the drain at once.
    let used = Arc::new(AtomicBool::new(false));
    let service = {
        let (service, used) = (TowerToHyperService::new(router), used.clone());
        hyper::service::service_fn(move |request| {
            used.store(true, Ordering::Relaxed);
            hyper::service::Service::call(&service, request)
        })
    };
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    let mut conn = pin!(builder.serve_connection(TokioIo::new(stream), service));
    let result = tokio::select! {
        result = conn.as_mut() => result,
        () = draining.cancelled() => {
            // A connection that has not sent its first request yet (one
            // just taken from the queue, most likely with its request on
            // the way) gets at least FIRST_REQUEST_WAIT for it: closing
            // it as idle at once would drop a request its client has sent.
            let linger = if used.load(Ordering::Relaxed) {
                limits.idle_linger
            } else {
                limits.idle_linger.max(FIRST_REQUEST_WAIT)
            };
            tokio::select! {
                // Served until its next response, which closes it, or
                // until its client closes it.
                result = conn.as_mut() => result,
                () = tokio::time::sleep(linger) => {
                    // A request being answered is finished first.
                    conn.as_mut().graceful_shutdown();
                    conn.await
                }
            }
        }
    };
    if let Err(error) = result {
        // Timeouts, resets and malformed requests: the client's doing.
        tracing::debug!(%error, %peer, "connection ended with an error");
    }
}

/// Errors of `accept` that concern the connection it was taking (Linux
/// passes a connection's network errors on to `accept`) or the one call:
/// the next accept can go on.
fn is_connection_error(error: &std::io::Error) -> bool {
    use std::io::ErrorKind;
    matches!(
        error.kind(),
        ErrorKind::ConnectionRefused
            | ErrorKind::ConnectionAborted
            | ErrorKind::ConnectionReset
            | ErrorKind::Interrupted
            | ErrorKind::NetworkDown
            | ErrorKind::NetworkUnreachable
            | ErrorKind::HostUnreachable
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::routing::get;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    const REQUEST: &[u8] = b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";

    /// Waits (yielding, bounded) until `open` shows `count` connections.
    async fn open_reaches(open: &Gauge, count: i64) {
        for _ in 0..10_000 {
            if open.get() == count {
                return;
            }
            tokio::task::yield_now().await;
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        panic!("open connections stayed at {}, not {count}", open.get());
    }

    /// A server on a loopback port answering `hello` at `/`, without
    /// linger, stopped by cancelling `stop`.
    struct Running {
        addr: SocketAddr,
        open: Gauge,
        stop: CancellationToken,
        task: tokio::task::JoinHandle<()>,
    }

    fn start(max_connections: usize) -> Running {
        start_on(max_connections, Lanes::none())
    }

    fn start_on(max_connections: usize, lanes: Lanes) -> Running {
        let listener = bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = listener.local_addr().unwrap();
        let router = Router::new().route("/", get(|| async { "hello" })).route(
            "/thread",
            get(|| async { std::thread::current().name().unwrap_or("").to_owned() }),
        );
        let limits = ConnectionLimits {
            header_read_timeout: Duration::from_secs(30),
            max_connections,
            idle_linger: Duration::ZERO,
        };
        let (open, stop) = (Gauge::default(), CancellationToken::new());
        let task = tokio::spawn(serve(
            listener,
            router,
            limits,
            open.clone(),
            Arc::new(lanes),
            stop.clone().cancelled_owned(),
        ));
        Running {
            addr,
            open,
            stop,
            task,
        }
    }

    #[tokio::test]
    async fn connections_the_kernel_queued_are_answered_when_the_listener_closes() {
        let Running {
            addr,
            open,
            stop,
            task: server,
        } = start(1);
        // An idle connection holds the only slot ...
        let holder = TcpStream::connect(addr).await.unwrap();
        open_reaches(&open, 1).await;
        // ... so these complete their handshake in the kernel and wait in
        // its queue, each with its request sent: what a balancer has just
        // forwarded when the replica stops.
        let mut queued = Vec::new();
        for _ in 0..3 {
            let mut stream = TcpStream::connect(addr).await.unwrap();
            stream.write_all(REQUEST).await.unwrap();
            queued.push(stream);
        }
        assert_eq!(open.get(), 1, "the loop waits at the cap");

        stop.cancel();
        for (index, mut stream) in queued.into_iter().enumerate() {
            let mut answer = Vec::new();
            let read = stream.read_to_end(&mut answer).await;
            let answer = String::from_utf8_lossy(&answer);
            assert!(
                read.is_ok() && answer.starts_with("HTTP/1.1 200") && answer.ends_with("hello"),
                "queued connection {index} was answered, not reset: {read:?} {answer:?}"
            );
        }
        // The holder, which never sent a request, is closed by the drain
        // once it waited FIRST_REQUEST_WAIT for one.
        let mut holder = holder;
        let mut rest = Vec::new();
        assert_eq!(holder.read_to_end(&mut rest).await.unwrap(), 0);
        server.await.unwrap();
        assert_eq!(open.get(), 0);
        assert!(TcpStream::connect(addr).await.is_err(), "closed");
    }

    /// Sends `GET path` on `stream` (kept alive) and reads the answer's body.
    async fn get_on(stream: &mut TcpStream, path: &str) -> String {
        let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut answer = Vec::new();
        let mut chunk = [0u8; 1024];
        loop {
            let n = stream.read(&mut chunk).await.unwrap();
            assert!(n > 0, "answered");
            answer.extend_from_slice(&chunk[..n]);
            let text = String::from_utf8_lossy(&answer).into_owned();
            if let Some((head, body)) = text.split_once("\r\n\r\n") {
                let length: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length: "))
                    .unwrap()
                    .parse()
                    .unwrap();
                if body.len() == length {
                    return body.to_owned();
                }
            }
        }
    }

    #[tokio::test]
    async fn connections_run_on_the_lanes_they_were_handed_to_and_drain_there() {
        let Running {
            addr,
            open,
            stop,
            task: server,
        } = start_on(8, Lanes::start(2).unwrap());
        let (mut first, mut second) = (
            TcpStream::connect(addr).await.unwrap(),
            TcpStream::connect(addr).await.unwrap(),
        );
        open_reaches(&open, 2).await;
        // Each connection stays on its thread, request after request.
        for _ in 0..3 {
            assert_eq!(get_on(&mut first, "/thread").await, "acdm-lane-0");
            assert_eq!(get_on(&mut second, "/thread").await, "acdm-lane-1");
        }
        stop.cancel();
        for stream in [&mut first, &mut second] {
            let mut rest = Vec::new();
            assert_eq!(
                stream.read_to_end(&mut rest).await.unwrap(),
                0,
                "closed as idle"
            );
        }
        server.await.unwrap();
        assert_eq!(open.get(), 0);
    }

    #[tokio::test]
    async fn a_connection_without_a_request_when_the_drain_begins_is_still_answered() {
        // No cap reached, no linger: a connection that has not sent its
        // request when the drain begins (as one taken from the queue at
        // the close) is still answered when it does.
        let Running {
            addr,
            open,
            stop,
            task: server,
        } = start(8);
        // A kept-alive connection that was used once: the drain closes it
        // as idle at once, which tells the test the drain has begun.
        let mut used = TcpStream::connect(addr).await.unwrap();
        used.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let mut head = vec![0; 1024];
        let mut read = 0;
        while !String::from_utf8_lossy(&head[..read]).ends_with("hello") {
            let n = used.read(&mut head[read..]).await.unwrap();
            assert!(n > 0, "answered before the drain");
            read += n;
        }
        // Connected and accepted, but its request comes after the drain
        // began.
        let mut late = TcpStream::connect(addr).await.unwrap();
        open_reaches(&open, 2).await;
        stop.cancel();
        let mut rest = Vec::new();
        assert_eq!(
            used.read_to_end(&mut rest).await.unwrap(),
            0,
            "closed as idle"
        );
        late.write_all(REQUEST).await.unwrap();
        let mut answer = String::new();
        let read = late.read_to_string(&mut answer).await;
        assert!(
            read.is_ok() && answer.starts_with("HTTP/1.1 200"),
            "{read:?} {answer:?}"
        );
        server.await.unwrap();
    }

    #[cfg(any(target_os = "linux", target_os = "android"))]
    #[tokio::test]
    async fn once_handshakes_are_refused_a_new_connection_is_refused_never_reset() {
        // A listener that stopped new handshakes, then closed: a client
        // that asked to connect in between is refused (a balancer tries
        // another replica), where without the filter its connection would
        // have been completed by the kernel, then reset by the close.
        let listener = bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = listener.local_addr().unwrap();
        refuse_new_handshakes(&listener).unwrap();
        // A non-blocking connect has sent its SYN when it returns; on
        // loopback the kernel answers it at once, or, filtered, drops it.
        let socket = socket2::Socket::new(
            socket2::Domain::IPV4,
            socket2::Type::STREAM,
            Some(socket2::Protocol::TCP),
        )
        .unwrap();
        socket.set_nonblocking(true).unwrap();
        match socket.connect(&addr.into()) {
            Err(error) if error.raw_os_error() == Some(libc::EINPROGRESS) => {}
            other => panic!("a non-blocking connect is under way: {other:?}"),
        }
        drop(listener);
        // The SYN's retransmission (about a second later) is refused.
        let stream = TcpStream::from_std(std::net::TcpStream::from(socket)).unwrap();
        stream.writable().await.unwrap();
        let outcome = stream.take_error().unwrap();
        assert_eq!(
            outcome.map(|e| e.kind()),
            Some(std::io::ErrorKind::ConnectionRefused),
            "refused, not connected (peer: {:?})",
            stream.peer_addr()
        );
    }
}
