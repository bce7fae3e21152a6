//! Connections to upstream hosts: made (TCP, then TLS for `https`), kept
//! per host while idle, and handed to one request at a time. The exchange
//! runs in the calling task: no connection task, no channel between the
//! request and its socket.
//!
//! A socket is registered with the event loop of the tokio runtime that
//! made it, and that loop alone learns when it is ready. A server that
//! runs one runtime per core (the service's connection threads) would, on
//! reusing a connection made on another runtime, have every answer wake
//! it from that other thread; so an idle connection is handed only to a
//! request on the runtime that made it.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::Semaphore;
use tokio::time::Instant;
use tokio_rustls::client::TlsStream;

/// A connection's byte stream.
pub(super) enum Stream {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl Stream {
    /// The TCP connection under it.
    fn tcp(&self) -> &TcpStream {
        match self {
            Self::Plain(s) => s,
            Self::Tls(s) => s.get_ref().0,
        }
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_flush(cx),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// One connection and the bytes read from it but not yet used.
pub(super) struct Conn {
    pub(super) stream: Stream,
    pub(super) buf: BytesMut,
    /// Whether it served a request before this one.
    pub(super) reused: bool,
    idle_since: Instant,
    /// The runtime whose event loop its socket is registered with.
    runtime: Option<tokio::runtime::Id>,
}

/// The runtime the caller runs on, if any.
fn current_runtime() -> Option<tokio::runtime::Id> {
    tokio::runtime::Handle::try_current()
        .ok()
        .map(|handle| handle.id())
}

impl Conn {
    /// Whether an idle connection can carry a request: nothing unread
    /// from before, and the server has neither closed it nor sent anything
    /// since (a polite close, TLS's `close_notify`, or garbage).
    ///
    /// Looks without waiting. A connection kept only briefly is asked
    /// through tokio's readiness, which costs nothing but may not know yet
    /// of a close that has only just arrived; one idle for a second or
    /// more, the kind a server closes on its own idle timeout, is asked of
    /// the socket itself. TLS records that carry no data (session
    /// tickets) are taken in by rustls and leave it usable.
    fn quiet(&mut self, now: Instant) -> bool {
        if !self.buf.is_empty() {
            return false;
        }
        if now.saturating_duration_since(self.idle_since) >= ASK_THE_SOCKET_AFTER {
            let mut byte = [std::mem::MaybeUninit::<u8>::uninit(); 1];
            match socket2::SockRef::from(self.stream.tcp()).peek(&mut byte) {
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => return true,
                // Bytes on a TLS connection may be a session ticket: rustls
                // says below whether any data came.
                Ok(n) if n > 0 && matches!(self.stream, Stream::Tls(_)) => {}
                _ => return false,
            }
        }
        let mut cx = Context::from_waker(Waker::noop());
        let mut byte = [0u8; 1];
        let mut probe = ReadBuf::new(&mut byte);
        matches!(
            Pin::new(&mut self.stream).poll_read(&mut cx, &mut probe),
            Poll::Pending
        )
    }
}

/// How long a connection stays idle before [`Conn::quiet`] asks the socket
/// itself whether the server closed it.
const ASK_THE_SOCKET_AFTER: Duration = Duration::from_secs(1);

/// Where connections go: the URL's scheme, host and port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Key<'a> {
    pub(super) tls: bool,
    pub(super) host: &'a str,
    pub(super) port: u16,
}

/// One upstream host: its request slots and its idle connections.
pub(super) struct Host {
    tls: bool,
    host: String,
    port: u16,
    /// Requests in flight at once to this host.
    pub(super) slots: Arc<Semaphore>,
    /// The most idle connections kept.
    max_idle: usize,
    /// How long an idle connection is kept.
    idle_timeout: Duration,
    idle: Mutex<Vec<Conn>>,
}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host")
            .field("tls", &self.tls)
            .field("port", &self.port)
            .finish_non_exhaustive()
    }
}

impl Host {
    /// The idle connections, those idle past the timeout dropped.
    fn idle(&self, now: Instant) -> std::sync::MutexGuard<'_, Vec<Conn>> {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        idle.retain(|conn| now.saturating_duration_since(conn.idle_since) < self.idle_timeout);
        idle
    }

    /// An idle connection made on the caller's runtime that is still
    /// usable, the most recent first; stale ones (expired, or closed by the
    /// server) are dropped on the way.
    pub(super) fn checkout(&self) -> Option<Conn> {
        let now = Instant::now();
        let here = current_runtime();
        let mut idle = self.idle(now);
        while let Some(at) = idle.iter().rposition(|conn| conn.runtime == here) {
            let mut conn = idle.remove(at);
            if conn.quiet(now) {
                conn.reused = true;
                return Some(conn);
            }
        }
        None
    }

    /// Keeps a connection whose last answer was read whole, for the next
    /// request; when the most kept are idle, the one idle longest goes.
    /// (Connections another runtime made, which no request here takes, so
    /// age out instead of keeping this runtime's from being kept.)
    pub(super) fn checkin(&self, mut conn: Conn) {
        let now = Instant::now();
        conn.idle_since = now;
        let mut idle = self.idle(now);
        if idle.len() >= self.max_idle {
            idle.remove(0);
        }
        idle.push(conn);
    }
}

/// The hosts this client has talked to. There are a few (the wiki's and
/// the file store's), so a list is searched without building a key.
#[derive(Debug)]
pub(super) struct Hosts {
    hosts: Mutex<Vec<Arc<Host>>>,
    /// Each host's request slots, and the most idle connections it keeps.
    per_host: usize,
    idle_timeout: Duration,
}

impl Hosts {
    /// No hosts yet; each will have `per_host` request slots and keep as
    /// many idle connections, each for `idle_timeout`.
    pub(super) fn new(per_host: usize, idle_timeout: Duration) -> Self {
        Self {
            hosts: Mutex::default(),
            per_host: per_host.max(1),
            idle_timeout,
        }
    }

    /// The host for `key`, created on first use.
    pub(super) fn get(&self, key: &Key<'_>) -> Arc<Host> {
        let mut hosts = self.hosts.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(host) = hosts
            .iter()
            .find(|h| h.tls == key.tls && h.port == key.port && h.host == key.host)
        {
            return host.clone();
        }
        let host = Arc::new(Host {
            tls: key.tls,
            host: key.host.to_owned(),
            port: key.port,
            slots: Arc::new(Semaphore::new(self.per_host)),
            max_idle: self.per_host,
            idle_timeout: self.idle_timeout,
            idle: Mutex::new(Vec::new()),
        });
        hosts.push(host.clone());
        host
    }
}

/// How new connections are made.
pub(super) struct Connector {
    pub(super) connect_timeout: Duration,
    pub(super) tls: tokio_rustls::TlsConnector,
}

impl std::fmt::Debug for Connector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connector")
            .field("connect_timeout", &self.connect_timeout)
            .finish_non_exhaustive()
    }
}

impl Connector {
    /// A new connection to `key`: each of the host's addresses in turn,
    /// the connect timeout shared between them (so an address that drops
    /// packets leaves time for the next); then TLS for `https`.
    pub(super) async fn connect(&self, key: &Key<'_>) -> io::Result<Conn> {
        // An IP literal is not looked up (its brackets off, for IPv6).
        let literal = key
            .host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(key.host);
        let addrs: Vec<SocketAddr> = match literal.parse::<IpAddr>() {
            Ok(ip) => vec![SocketAddr::new(ip, key.port)],
            Err(_) => tokio::net::lookup_host((key.host, key.port))
                .await?
                .collect(),
        };
        let each = self
            .connect_timeout
            .checked_div(u32::try_from(addrs.len()).unwrap_or(u32::MAX))
            .unwrap_or(self.connect_timeout);
        let mut last = io::Error::new(io::ErrorKind::NotFound, "the host has no address");
        let mut tcp = None;
        for addr in addrs {
            match tokio::time::timeout(each, TcpStream::connect(addr)).await {
                Ok(Ok(stream)) => {
                    tcp = Some(stream);
                    break;
                }
                Ok(Err(error)) => last = error,
                Err(_) => last = io::Error::new(io::ErrorKind::TimedOut, "connect timed out"),
            }
        }
        let tcp = tcp.ok_or(last)?;
        tune(&tcp);
        let stream = if key.tls {
            let name = rustls::pki_types::ServerName::try_from(literal.to_owned())
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "not a server name"))?;
            Stream::Tls(Box::new(self.tls.connect(name, tcp).await?))
        } else {
            Stream::Plain(tcp)
        };
        Ok(Conn {
            stream,
            buf: BytesMut::with_capacity(16 * 1024),
            reused: false,
            idle_since: Instant::now(),
            runtime: current_runtime(),
        })
    }
}

/// No Nagle delay for our small writes; TCP keep-alive so a pooled
/// connection that a NAT or balancer dropped is noticed instead of costing
/// a whole read timeout, and unacknowledged data gives up after 30 s.
fn tune(tcp: &TcpStream) {
    // Best effort: a socket that refuses an option still works.
    let _ = tcp.set_nodelay(true);
    let socket = socket2::SockRef::from(tcp);
    let keepalive = socket2::TcpKeepalive::new()
        .with_time(Duration::from_secs(15))
        .with_interval(Duration::from_secs(15))
        .with_retries(3);
    let _ = socket.set_tcp_keepalive(&keepalive);
    #[cfg(target_os = "linux")]
    let _ = socket.set_tcp_user_timeout(Some(Duration::from_secs(30)));
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    fn connector() -> Connector {
        let roots = rustls::RootCertStore::empty();
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
        Connector {
            connect_timeout: Duration::from_secs(5),
            tls: tokio_rustls::TlsConnector::from(Arc::new(config)),
        }
    }

    /// A listener on a loopback port, and the key of that port.
    async fn loopback() -> (TcpListener, Key<'static>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let key = Key {
            tls: false,
            host: "127.0.0.1",
            port,
        };
        (listener, key)
    }

    #[tokio::test]
    async fn an_idle_connection_the_server_closed_or_wrote_to_is_never_handed_out() {
        let (listener, key) = loopback().await;
        let host = Hosts::new(8, Duration::from_secs(60)).get(&key);
        let connector = connector();

        // Three connections: one the server leaves alone, one it closes,
        // one it writes to unasked.
        let mut server_ends = Vec::new();
        for _ in 0..3 {
            let conn = connector.connect(&key).await.unwrap();
            let (server, _) = listener.accept().await.unwrap();
            server_ends.push(server);
            host.checkin(conn);
        }
        let mut quiet = server_ends.remove(0);
        drop(server_ends.remove(0));
        server_ends[0]
            .write_all(b"HTTP/1.1 408 Timeout\r\n\r\n")
            .await
            .unwrap();
        // The close and the bytes are on the loopback already; tokio's
        // readiness learns of them when the driver is polled, which a
        // yield does before the task runs again.
        tokio::task::yield_now().await;

        let mut conn = host.checkout().expect("the quiet one");
        assert!(conn.reused);
        assert!(host.checkout().is_none());
        // It is the connection the server kept: a byte goes through.
        tokio::io::AsyncWriteExt::write_all(&mut conn.stream, b"x")
            .await
            .unwrap();
        let mut byte = [0u8; 1];
        quiet.read_exact(&mut byte).await.unwrap();
        assert_eq!(&byte, b"x");
    }

    #[tokio::test]
    async fn a_long_idle_connection_is_checked_on_the_socket_itself() {
        let (listener, key) = loopback().await;
        let connector = connector();
        let mut conns = Vec::new();
        let mut server_ends = Vec::new();
        for _ in 0..3 {
            conns.push(connector.connect(&key).await.unwrap());
            server_ends.push(listener.accept().await.unwrap().0);
        }
        drop(server_ends.remove(1));
        server_ends[1].write_all(b"x").await.unwrap();
        // No yield: the driver has not seen the close or the byte; the
        // socket has. As if each had been idle for two seconds:
        let later = Instant::now() + Duration::from_secs(2);
        let quiet: Vec<bool> = conns.iter_mut().map(|c| c.quiet(later)).collect();
        assert_eq!(quiet, [true, false, false]);
    }

    #[tokio::test]
    async fn idle_connections_expire_and_the_pool_keeps_at_most_its_cap() {
        let (listener, key) = loopback().await;
        let hosts = Hosts::new(2, Duration::from_secs(60));
        let host = hosts.get(&key);
        assert!(Arc::ptr_eq(&host, &hosts.get(&key)), "one host per key");
        let connector = connector();
        let mut server_ends = Vec::new();
        for _ in 0..3 {
            let conn = connector.connect(&key).await.unwrap();
            server_ends.push(listener.accept().await.unwrap().0);
            host.checkin(conn);
        }
        let kept = [host.checkout(), host.checkout()];
        assert!(kept.iter().all(Option::is_some));
        assert!(host.checkout().is_none(), "two kept");
        // The one idle longest is the one that went: its server end reads
        // the close; the two others are open, with nothing to read.
        let mut byte = [0u8; 1];
        assert_eq!(server_ends[0].read(&mut byte).await.unwrap(), 0);
        for end in &server_ends[1..] {
            let read = end.try_read(&mut byte);
            assert_eq!(
                read.unwrap_err().kind(),
                io::ErrorKind::WouldBlock,
                "still open"
            );
        }
        drop(kept);

        // A host whose idle connections expire at once keeps none.
        let host = Hosts::new(2, Duration::ZERO).get(&key);
        let conn = connector.connect(&key).await.unwrap();
        server_ends.push(listener.accept().await.unwrap().0);
        host.checkin(conn);
        assert!(host.checkout().is_none(), "expired");
    }

    #[tokio::test]
    async fn a_host_without_a_listener_is_a_connect_error() {
        let (listener, key) = loopback().await;
        drop(listener);
        assert!(connector().connect(&key).await.is_err());
    }
}
