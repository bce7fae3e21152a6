//! Making upstream connections: TCP (each of the host's addresses in turn
//! within the connect timeout), through the egress proxy when one applies
//! (`CONNECT` for a tunnel, made with hyper), TLS for `https`, then
//! hyper's HTTP/1.1 on it, whose I/O runs in a task on the caller's
//! runtime.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Method, Request, StatusCode, header};
use http_body_util::{Empty, Full};
use hyper::rt::{Read, Write};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use super::pool::Conn;
pub(super) use super::proxy::Key;
use super::proxy::Route;

/// Longest response head (status line and headers) and trailer section
/// read from an upstream.
const MAX_HEAD_BYTES: usize = 64 * 1024;
/// Most headers in one response head.
const MAX_HEADERS: usize = 128;

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

/// A failure to connect without the address, the proxy or a credential
/// in it.
fn failed(what: &'static str) -> io::Error {
    io::Error::other(what)
}

impl Connector {
    /// A new connection to `key` along `route`.
    pub(super) async fn connect(&self, key: &Key, route: &Route) -> io::Result<Conn> {
        match route {
            Route::Direct => {
                let tcp = self.tcp(&key.host, key.port).await?;
                self.finish(key, tcp).await
            }
            // Plain HTTP to the proxy; the requests name their target in
            // absolute form.
            Route::Forward { proxy, .. } => {
                let tcp = self.tcp(&proxy.host, proxy.port).await?;
                handshake(TokioIo::new(tcp)).await
            }
            Route::Tunnel {
                proxy,
                authorization,
            } => {
                let tcp = self.tcp(&proxy.host, proxy.port).await?;
                let tunnel = tunnel(tcp, key, authorization.as_ref()).await?;
                self.finish(key, tunnel).await
            }
        }
    }

    /// TLS on `io` for `https`, then HTTP/1.1.
    async fn finish<T>(&self, key: &Key, io: T) -> io::Result<Conn>
    where
        T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        if key.tls {
            let name = rustls::pki_types::ServerName::try_from(unbracketed(&key.host).to_owned())
                .map_err(|_| {
                io::Error::new(io::ErrorKind::InvalidInput, "not a server name")
            })?;
            let tls = self.tls.connect(name, io).await?;
            handshake(TokioIo::new(tls)).await
        } else {
            handshake(TokioIo::new(io)).await
        }
    }

    /// A TCP connection to `host:port`: each of its addresses in turn, the
    /// connect timeout shared between them (so an address that drops
    /// packets leaves time for the next).
    async fn tcp(&self, host: &str, port: u16) -> io::Result<TcpStream> {
        // An IP literal is not looked up (its brackets off, for IPv6).
        let literal = unbracketed(host);
        let addrs: Vec<SocketAddr> = match literal.parse::<IpAddr>() {
            Ok(ip) => vec![SocketAddr::new(ip, port)],
            Err(_) => tokio::net::lookup_host((host, port)).await?.collect(),
        };
        let each = self
            .connect_timeout
            .checked_div(u32::try_from(addrs.len()).unwrap_or(u32::MAX))
            .unwrap_or(self.connect_timeout);
        let mut last = io::Error::new(io::ErrorKind::NotFound, "the host has no address");
        for addr in addrs {
            match tokio::time::timeout(each, TcpStream::connect(addr)).await {
                Ok(Ok(stream)) => {
                    tune(&stream);
                    return Ok(stream);
                }
                Ok(Err(error)) => last = error,
                Err(_) => last = io::Error::new(io::ErrorKind::TimedOut, "connect timed out"),
            }
        }
        Err(last)
    }
}

/// `host` without the brackets of an IPv6 literal.
fn unbracketed(host: &str) -> &str {
    host.strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host)
}

/// HTTP/1.1 on `io`, its I/O in a task of the caller's runtime.
async fn handshake<T>(io: T) -> io::Result<Conn>
where
    T: Read + Write + Unpin + Send + 'static,
{
    let (sender, connection) = hyper::client::conn::http1::Builder::new()
        .max_headers(MAX_HEADERS)
        .max_header_size(MAX_HEAD_BYTES)
        .handshake::<T, Full<Bytes>>(io)
        .await
        .map_err(|_| failed("the HTTP handshake failed"))?;
    let task = tokio::spawn(async move {
        // How it ended is the request's to tell (the sender sees it).
        let _ = connection.await;
    });
    Ok(Conn::new(sender, task.abort_handle()))
}

/// A tunnel to `key` through the proxy at the other end of `tcp`: a
/// `CONNECT` sent and its answer read by hyper, the connection then handed
/// over whole.
async fn tunnel(
    tcp: TcpStream,
    key: &Key,
    authorization: Option<&HeaderValue>,
) -> io::Result<TokioIo<hyper::upgrade::Upgraded>> {
    let (mut sender, connection) = hyper::client::conn::http1::Builder::new()
        .max_headers(MAX_HEADERS)
        .max_header_size(MAX_HEAD_BYTES)
        .handshake::<_, Empty<Bytes>>(TokioIo::new(tcp))
        .await
        .map_err(|_| failed("the proxy handshake failed"))?;
    // Ends once the tunnel is handed over (or the proxy refused it).
    tokio::spawn(async move {
        let _ = connection.with_upgrades().await;
    });
    let authority = format!("{}:{}", key.host, key.port);
    let mut request = Request::builder()
        .method(Method::CONNECT)
        .uri(authority.as_str())
        .header(header::HOST, authority.as_str())
        .body(Empty::<Bytes>::new())
        .map_err(|_| failed("the proxy request cannot be made"))?;
    if let Some(value) = authorization {
        request
            .headers_mut()
            .insert(header::PROXY_AUTHORIZATION, value.clone());
    }
    let response = sender
        .send_request(request)
        .await
        .map_err(|_| failed("the proxy did not answer"))?;
    if response.status() != StatusCode::OK {
        return Err(failed("the proxy refused the tunnel"));
    }
    let upgraded = hyper::upgrade::on(response)
        .await
        .map_err(|_| failed("the proxy tunnel broke"))?;
    Ok(TokioIo::new(upgraded))
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

/// The TLS settings: the webpki roots and `extra` DER certificates,
/// HTTP/1.1 offered by ALPN.
pub(super) fn tls_config(extra: &[Vec<u8>]) -> Result<rustls::ClientConfig, &'static str> {
    let mut roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    for der in extra {
        roots
            .add(rustls::pki_types::CertificateDer::from(der.clone()))
            .map_err(|_| "an extra root certificate is not a usable DER certificate")?;
    }
    let mut tls = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|_| "TLS could not be set up")?
    .with_root_certificates(roots)
    .with_no_client_auth();
    tls.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(tls)
}
