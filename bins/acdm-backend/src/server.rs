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
//!   connections are refused) and every connection is served until it
//!   closes: the server's responses now ask their clients to close
//!   (`Connection: close`, set by the drain middleware), so a connection
//!   ends after its next response. One that stays idle is closed by the
//!   server after [`ConnectionLimits::idle_linger`]: a load balancer that
//!   holds kept-alive connections may pick one at any moment, and a
//!   request sent on a connection just as the server closes it fails —
//!   a lingering connection is used once more (and answered) or closed by
//!   its client instead. The loop returns once all are gone. The caller
//!   bounds this by the grace period and drops the loop's future, which
//!   aborts every connection still open.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::pin;
use std::sync::Arc;
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
/// the module documentation. `open` counts the open connections.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ConnectionLimits,
    open: Gauge,
    signal: impl Future<Output = ()>,
) {
    let mut signal = pin!(signal);
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let draining = CancellationToken::new();
    let mut connections = JoinSet::new();
    let mut last_cap_warning: Option<Instant> = None;
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
        connections.spawn(connection(
            stream,
            peer,
            router.clone(),
            limits,
            draining.clone(),
            Slot::new(slot, open.clone()),
        ));
    }
    drop(listener);
    draining.cancel();
    while connections.join_next().await.is_some() {}
}

/// An open connection's hold on the cap and on the gauge, released when
/// the connection ends (or is aborted).
struct Slot {
    _permit: OwnedSemaphorePermit,
    open: Gauge,
}

impl Slot {
    fn new(permit: OwnedSemaphorePermit, open: Gauge) -> Self {
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
    let service = TowerToHyperService::new(router);
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    let mut conn = pin!(builder.serve_connection(TokioIo::new(stream), service));
    let result = tokio::select! {
        result = conn.as_mut() => result,
        () = draining.cancelled() => tokio::select! {
            // Served until its next response, which closes it, or until
            // its client closes it.
            result = conn.as_mut() => result,
            () = tokio::time::sleep(limits.idle_linger) => {
                conn.as_mut().graceful_shutdown();
                conn.await
            }
        },
    };
    if let Err(error) = result {
        // Timeouts, resets and malformed requests: the client's doing.
        tracing::debug!(%error, %peer, "connection ended with an error");
    }
}

/// Errors that concern one connection only; the next accept can go on.
fn is_connection_error(error: &std::io::Error) -> bool {
    use std::io::ErrorKind;
    matches!(
        error.kind(),
        ErrorKind::ConnectionRefused | ErrorKind::ConnectionAborted | ErrorKind::ConnectionReset
    )
}
