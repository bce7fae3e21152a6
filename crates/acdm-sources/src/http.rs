//! The one HTTP client every upstream call goes through.
//!
//! hyper speaks HTTP/1.1 (framing, chunked and to-the-close bodies, 1xx,
//! keep-alive) on connections of our own pool ([`pool`]: each host's fair
//! queue of request slots and its connections; [`connect`]: TCP, the
//! egress proxy of [`proxy`], TLS). Timeouts are explicit, redirects are
//! never followed (a redirect to another host would carry our
//! credentials: the 3xx is the caller's to map), TLS is rustls with the
//! webpki roots (and any extra roots configured), JSON and XML answers may
//! come gzip-compressed (decoded within the caller's size bound, never for
//! ranged reads), and retries are bounded: only idempotent requests, only
//! on transient outcomes (the request could not be sent or its answer
//! broke off, timeouts, 502/503/504, 429/503 with a short `Retry-After`),
//! with exponential backoff and full jitter inside the request's time
//! budget. Transport errors become [`SourceError`]s without the URL.

mod connect;
mod pool;
mod proxy;

use std::future::Future;
use std::io::{self, Write as _};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, StatusCode, header};
use http_body_util::{BodyExt as _, Full};
use hyper::body::{Body as _, Incoming};
use tokio::time::Instant;
use url::{Position, Url};

pub use self::proxy::ProxySettings;

use self::connect::{Connector, Key};
use self::pool::{Host, Pick, Slot};
use self::proxy::{Proxies, Route};
use crate::error::SourceError;

/// Settings shared by every upstream client.
#[derive(Debug, Clone)]
pub struct HttpSettings {
    /// Time to establish a TCP connection (the TLS handshake after it is
    /// bounded by `read_timeout` and the call's deadline).
    pub connect_timeout: Duration,
    /// Longest silence while reading a response.
    pub read_timeout: Duration,
    /// Budget for a whole call, retries and the response body included: a
    /// hard deadline, never exceeded. A request's own deadline
    /// ([`crate::deadline`]) shortens it.
    pub timeout: Duration,
    /// Extra attempts for idempotent requests (0 = none).
    pub retries: u32,
    /// First backoff delay; doubled per attempt, with full jitter.
    pub backoff: Duration,
    /// Longest `Retry-After` we wait for ourselves before giving up and
    /// reporting the rate limit.
    pub max_retry_after: Duration,
    /// Requests in flight at once to one upstream host (from sending until
    /// the response body is read or dropped), and the most connections
    /// open to it; more wait for a slot, first come first served, within
    /// their deadline.
    pub max_connections_per_host: usize,
    /// `User-Agent` sent upstream.
    pub user_agent: String,
    /// The egress proxy (none by default: every call goes direct).
    pub proxy: ProxySettings,
    /// DER certificates trusted as roots besides the webpki ones (a
    /// company's own certificate authority).
    pub extra_root_certificates: Vec<Vec<u8>>,
}

impl Default for HttpSettings {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(5),
            read_timeout: Duration::from_secs(10),
            timeout: Duration::from_secs(20),
            retries: 2,
            backoff: Duration::from_millis(100),
            max_retry_after: Duration::from_secs(2),
            max_connections_per_host: 32,
            user_agent: format!("acdm-backend/{}", env!("CARGO_PKG_VERSION")),
            proxy: ProxySettings::default(),
            extra_root_certificates: Vec::new(),
        }
    }
}

/// The certificates of a PEM file (`-----BEGIN CERTIFICATE-----` blocks;
/// other blocks are skipped), as DER, each checked usable as a trust root:
/// at least one, or what is wrong, in words an operator can act on.
///
/// # Errors
///
/// The text when the PEM is malformed, holds no certificate, or holds one
/// that is not a usable root certificate.
pub fn root_certificates_from_pem(pem: &[u8]) -> Result<Vec<Vec<u8>>, String> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject as _;
    let mut certificates = Vec::new();
    for (n, certificate) in CertificateDer::pem_slice_iter(pem).enumerate() {
        let certificate = certificate.map_err(|error| match n {
            0 => format!("is not valid PEM ({error})"),
            n => format!("is not valid PEM after its certificate {n} ({error})"),
        })?;
        let mut roots = rustls::RootCertStore::empty();
        roots.add(certificate.clone()).map_err(|_| {
            format!(
                "certificate {} is not a usable X.509 root certificate",
                n + 1
            )
        })?;
        certificates.push(certificate.to_vec());
    }
    if certificates.is_empty() {
        return Err("holds no `-----BEGIN CERTIFICATE-----` block".to_owned());
    }
    Ok(certificates)
}

/// How long an idle connection is kept for the next request.
const IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// Whether a request may be sent twice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Idempotency {
    /// Reads (GET, PROPFIND, search): retried on transient failures.
    Read,
    /// Writes: sent once. A failed write is re-checked by its caller, never
    /// blindly repeated.
    Write,
}

/// The upstream HTTP client.
#[derive(Debug, Clone)]
pub struct HttpClient {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    settings: HttpSettings,
    /// `User-Agent` and `Accept`, sent unless the request has its own.
    defaults: [(HeaderName, HeaderValue); 2],
    connector: Connector,
    proxies: Option<Proxies>,
    /// The hosts this client has talked to. There are a few (the wiki's
    /// and the file store's), so a list is searched without building a
    /// key.
    hosts: Mutex<Vec<Arc<Destination>>>,
}

/// One upstream host: where it is, how it is reached, its slots and
/// connections.
#[derive(Debug)]
struct Destination {
    key: Key,
    route: Route,
    pool: Arc<Host>,
}

/// Basic credentials as an `Authorization` value marked sensitive (never
/// logged); `None` if they cannot be a header value.
pub(crate) fn basic_authorization(user: &str, password: &str) -> Option<HeaderValue> {
    use base64::Engine as _;
    let encoded = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    let mut value = HeaderValue::from_str(&format!("Basic {encoded}")).ok()?;
    value.set_sensitive(true);
    Some(value)
}

/// One upstream request, as the source built it; sent once per attempt.
#[derive(Debug, Clone)]
pub(crate) struct UpstreamRequest {
    method: Method,
    url: Url,
    headers: HeaderMap,
    body: Bytes,
}

impl UpstreamRequest {
    /// A request without headers or body.
    pub(crate) fn new(method: Method, url: Url) -> Self {
        Self {
            method,
            url,
            headers: HeaderMap::new(),
            body: Bytes::new(),
        }
    }

    /// Adds `headers` (replacing any of the same name).
    pub(crate) fn headers(mut self, headers: &HeaderMap) -> Self {
        for (name, value) in headers {
            self.headers.insert(name, value.clone());
        }
        self
    }

    /// Sets the body.
    pub(crate) fn body(mut self, body: Bytes) -> Self {
        self.body = body;
        self
    }

    /// Sets the `Authorization` header ([`basic_authorization`]'s value,
    /// made once and shared by every request: a clone is a reference
    /// count, not a copy).
    pub(crate) fn authorization(mut self, value: HeaderValue) -> Self {
        self.headers.insert(header::AUTHORIZATION, value);
        self
    }

    /// Accepts a gzip-compressed answer, which [`read_capped`] decodes: for
    /// JSON and XML answers read whole, never for a file or a range of one.
    pub(crate) fn accept_gzip(mut self) -> Self {
        self.headers
            .insert(header::ACCEPT_ENCODING, HeaderValue::from_static("gzip"));
        self
    }

    /// Where its connection goes: scheme, host and port; `None` for a URL
    /// this client cannot reach (not `http`/`https`, no host).
    fn target(&self) -> Option<(bool, &str, u16)> {
        let tls = match self.url.scheme() {
            "http" => false,
            "https" => true,
            _ => return None,
        };
        Some((
            tls,
            self.url.host_str().filter(|h| !h.is_empty())?,
            self.url.port_or_known_default()?,
        ))
    }
}

/// Why an attempt gave no response.
enum Failed {
    /// The transport failed.
    Transport(Transport),
    /// The deadline passed before the request was sent.
    Unsent,
    /// The call's deadline passed while an attempt waited for its answer.
    Deadline,
}

/// A transport failure, told apart as callers need it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Transport {
    /// No connection could be made.
    Connect,
    /// A timeout: connecting, waiting for the answer, or a silence in its
    /// body.
    Timeout,
    /// The request could not be sent, or its answer's head broke off or
    /// was not HTTP.
    Send,
    /// The answer's body broke off.
    Body,
}

impl Transport {
    /// A timeout if `error` is one, else `otherwise`.
    fn of(error: &io::Error, otherwise: Self) -> Self {
        if error.kind() == io::ErrorKind::TimedOut {
            Self::Timeout
        } else {
            otherwise
        }
    }

    /// What a hyper error means here: a timeout if an IO timeout caused
    /// it, else `otherwise`.
    fn of_hyper(error: &hyper::Error, otherwise: Self) -> Self {
        match io_cause(error) {
            Some(io) => Self::of(io, otherwise),
            None => otherwise,
        }
    }
}

/// The IO error under a hyper error, if one caused it.
fn io_cause(error: &hyper::Error) -> Option<&io::Error> {
    let mut cause = std::error::Error::source(error);
    while let Some(error) = cause {
        if let Some(io) = error.downcast_ref::<io::Error>() {
            return Some(io);
        }
        cause = error.source();
    }
    None
}

/// Whether a request failed because its kept connection was closed as it
/// was sent, before any answer: it never reached the server's handler.
fn closed_under(error: &hyper::Error) -> bool {
    error.is_canceled()
        || error.is_closed()
        || error.is_incomplete_message()
        || io_cause(error).is_some_and(|io| {
            matches!(
                io.kind(),
                io::ErrorKind::BrokenPipe
                    | io::ErrorKind::ConnectionReset
                    | io::ErrorKind::ConnectionAborted
                    | io::ErrorKind::UnexpectedEof
            )
        })
}

/// An upstream response, holding its host's slot (and the connection it
/// came on) until its body is read or it is dropped. Reading the body ends
/// by the call's deadline, and a silence longer than the read timeout ends
/// it too. A body read whole leaves its connection for the next request;
/// one dropped unread closes it (unless it was empty).
#[derive(Debug)]
pub(crate) struct Upstream {
    source_name: &'static str,
    head: http::response::Parts,
    /// `None` once read whole or broken off.
    body: Option<Incoming>,
    /// Whether the body was read whole.
    done: bool,
    deadline: Instant,
    read_timeout: Duration,
    /// Given back when the body ends or the response is dropped.
    slot: Option<Slot>,
}

impl Upstream {
    /// The status.
    pub(crate) fn status(&self) -> StatusCode {
        self.head.status
    }

    /// The headers.
    pub(crate) fn headers(&self) -> &HeaderMap {
        &self.head.headers
    }

    /// The `Content-Length`, when the answer states one.
    pub(crate) fn content_length(&self) -> Option<u64> {
        self.head
            .headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok())
    }

    /// The body was read whole: its connection can carry the next request
    /// and the slot goes back at once.
    fn finish(&mut self) {
        self.body = None;
        self.done = true;
        if let Some(mut slot) = self.slot.take() {
            slot.keep();
        }
    }

    /// The body broke off: its connection closes with the slot's return.
    fn fail(&mut self, failure: Transport) -> SourceError {
        self.body = None;
        self.slot = None;
        transport_error(self.source_name, failure)
    }

    /// The next chunk of the body, `None` at its end.
    pub(crate) async fn chunk(&mut self) -> Result<Option<Bytes>, SourceError> {
        loop {
            let Some(body) = self.body.as_mut() else {
                // Read whole before, or broken off by an earlier error.
                return if self.done {
                    Ok(None)
                } else {
                    Err(transport_error(self.source_name, Transport::Body))
                };
            };
            if body.is_end_stream() {
                self.finish();
                return Ok(None);
            }
            let wait = self
                .deadline
                .saturating_duration_since(Instant::now())
                .min(self.read_timeout);
            // Past the deadline not even a chunk already received is read.
            if wait.is_zero() {
                return Err(self.fail(Transport::Timeout));
            }
            match tokio::time::timeout(wait, body.frame()).await {
                Ok(Some(Ok(frame))) => {
                    // Trailers are not data: skipped.
                    let Ok(data) = frame.into_data() else {
                        continue;
                    };
                    if body.is_end_stream() {
                        self.finish();
                    }
                    if data.is_empty() {
                        continue;
                    }
                    return Ok(Some(data));
                }
                Ok(None) => {
                    self.finish();
                    return Ok(None);
                }
                Ok(Some(Err(error))) => {
                    return Err(self.fail(Transport::of_hyper(&error, Transport::Body)));
                }
                Err(_) => return Err(self.fail(Transport::Timeout)),
            }
        }
    }

    /// The body as a stream of chunks; the slot is held until the stream
    /// ends or is dropped.
    pub(crate) fn bytes_stream(
        self,
    ) -> impl futures_util::Stream<Item = Result<Bytes, SourceError>> + Send + 'static {
        futures_util::stream::unfold(Some(self), |upstream| async move {
            let mut upstream = upstream?;
            match upstream.chunk().await {
                Ok(Some(chunk)) => Some((Ok(chunk), Some(upstream))),
                Ok(None) => None,
                // The stream ends after its error.
                Err(error) => Some((Err(error), None)),
            }
        })
    }
}

/// The framing headers hyper writes itself from the request: the caller's
/// are not sent.
fn is_framing(name: &HeaderName) -> bool {
    name == header::HOST
        || name == header::CONTENT_LENGTH
        || name == header::TRANSFER_ENCODING
        || name == header::CONNECTION
}

impl HttpClient {
    /// Builds the client. Fails when the proxy settings or an extra root
    /// certificate cannot be used (the message names the setting, never
    /// its value).
    pub fn new(settings: HttpSettings) -> Result<Self, SourceError> {
        let tls = connect::tls_config(&settings.extra_root_certificates)
            .map_err(|problem| SourceError::NotConfigured(problem.to_owned()))?;
        let proxies = Proxies::new(&settings.proxy).map_err(SourceError::NotConfigured)?;
        let user_agent = HeaderValue::from_str(&settings.user_agent).map_err(|_| {
            SourceError::NotConfigured("the upstream User-Agent is not a header value".to_owned())
        })?;
        Ok(Self {
            inner: Arc::new(Inner {
                defaults: [
                    (header::USER_AGENT, user_agent),
                    (header::ACCEPT, HeaderValue::from_static("*/*")),
                ],
                connector: Connector {
                    connect_timeout: settings.connect_timeout,
                    tls: tokio_rustls::TlsConnector::from(Arc::new(tls)),
                },
                proxies,
                hosts: Mutex::default(),
                settings,
            }),
        })
    }

    /// The settings.
    pub fn settings(&self) -> &HttpSettings {
        &self.inner.settings
    }

    /// The host `request` goes to, made on first use; `None` for a URL
    /// this client cannot reach.
    fn destination(&self, request: &UpstreamRequest) -> Option<Arc<Destination>> {
        let (tls, host, port) = request.target()?;
        let mut hosts = self.inner.hosts.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(found) = hosts
            .iter()
            .find(|d| d.key.tls == tls && d.key.port == port && d.key.host == host)
        {
            return Some(found.clone());
        }
        let key = Key {
            tls,
            host: host.to_owned(),
            port,
        };
        let route = self
            .inner
            .proxies
            .as_ref()
            .map_or(Route::Direct, |proxies| proxies.route(&key));
        let destination = Arc::new(Destination {
            key,
            route,
            pool: Arc::new(Host::new(
                self.inner.settings.max_connections_per_host,
                IDLE_TIMEOUT,
            )),
        });
        hosts.push(destination.clone());
        Some(destination)
    }

    /// The request as hyper sends it along `route`: the target in origin
    /// form (absolute form to a forwarding proxy, with its credentials),
    /// `Host` from the URL, the caller's headers but for the framing ones,
    /// then our defaults; `None` when it cannot be made.
    fn build(&self, request: &UpstreamRequest, route: &Route) -> Option<Request<Full<Bytes>>> {
        let url = &request.url;
        url.host_str().filter(|h| !h.is_empty())?;
        let target = match route {
            Route::Forward { .. } => &url[..Position::AfterQuery],
            Route::Direct | Route::Tunnel { .. } => {
                match &url[Position::BeforePath..Position::AfterQuery] {
                    "" => "/",
                    target => target,
                }
            }
        };
        let uri = http::Uri::try_from(target).ok()?;
        let mut headers = HeaderMap::with_capacity(request.headers.len() + 4);
        // The URL's own `host[:port]` (a default port is not in it).
        headers.insert(
            header::HOST,
            HeaderValue::from_str(&url[Position::BeforeHost..Position::AfterPort]).ok()?,
        );
        for (name, value) in &request.headers {
            if !is_framing(name) {
                headers.append(name.clone(), value.clone());
            }
        }
        for (name, value) in &self.inner.defaults {
            if !request.headers.contains_key(name) {
                headers.insert(name.clone(), value.clone());
            }
        }
        // A method that carries a body states its length even when empty
        // (an empty PUT is a file of no bytes, not a request still being
        // sent); hyper states a longer body's itself.
        if request.body.is_empty() && !matches!(request.method, Method::GET | Method::HEAD) {
            headers.insert(header::CONTENT_LENGTH, HeaderValue::from_static("0"));
        }
        if let Route::Forward {
            authorization: Some(value),
            ..
        } = route
        {
            headers.insert(header::PROXY_AUTHORIZATION, value.clone());
        }
        let mut built = Request::new(Full::new(request.body.clone()));
        *built.method_mut() = request.method.clone();
        *built.uri_mut() = uri;
        *built.headers_mut() = headers;
        Some(built)
    }

    /// One request on a connection of `slot`'s host, kept or new, up to
    /// its answer's head. A read whose kept connection turns out closed as
    /// it was sent goes again at once, once, on a new connection: it never
    /// reached the server. A write does not: the caller re-checks it.
    async fn exchange(
        &self,
        destination: &Destination,
        mut slot: Slot,
        idempotency: Idempotency,
        request: &UpstreamRequest,
        mut built: Option<Request<Full<Bytes>>>,
    ) -> Result<(http::Response<Incoming>, Slot), Transport> {
        let mut pick = slot.pick();
        loop {
            let conn = match pick {
                Pick::Idle(mut conn) => {
                    // Closed by its server while idle, or not yet done with
                    // its last answer: ready tells, without sending.
                    if conn.sender.ready().await.is_err() {
                        drop(conn);
                        pick = slot.pick();
                        continue;
                    }
                    slot.connected(conn)
                }
                Pick::Connect => match self
                    .inner
                    .connector
                    .connect(&destination.key, &destination.route)
                    .await
                {
                    Ok(conn) => slot.connected(conn),
                    Err(error) => {
                        slot.discard();
                        return Err(Transport::of(&error, Transport::Connect));
                    }
                },
            };
            let reused = conn.reused;
            let built = match built.take() {
                Some(built) => built,
                None => self
                    .build(request, &destination.route)
                    .ok_or(Transport::Send)?,
            };
            match conn.sender.send_request(built).await {
                Ok(response) => return Ok((response, slot)),
                // On a new connection, which is not `reused`: a server that
                // drops this request on every connection sees it twice,
                // not once per idle connection.
                Err(error)
                    if reused && idempotency == Idempotency::Read && closed_under(&error) =>
                {
                    pick = slot.renew();
                }
                Err(error) => {
                    slot.discard();
                    return Err(Transport::of_hyper(&error, Transport::Send));
                }
            }
        }
    }

    /// Sends `request` and returns the response, whatever its status;
    /// statuses are mapped by the caller, which knows the protocol. `Read`s
    /// are retried on transient outcomes. The whole call — waiting for a
    /// connection slot, every attempt, the waits between them and reading
    /// the body — ends by one deadline: [`HttpSettings::timeout`] from now,
    /// or the request's own ([`crate::deadline`]) when sooner; past it the
    /// call is a [`SourceError::Timeout`].
    pub(crate) async fn send(
        &self,
        source_name: &'static str,
        idempotency: Idempotency,
        request: &UpstreamRequest,
    ) -> Result<Upstream, SourceError> {
        let settings = &self.inner.settings;
        let attempts = match idempotency {
            Idempotency::Read => settings.retries + 1,
            Idempotency::Write => 1,
        };
        let deadline = crate::deadline::sooner(Instant::now() + settings.timeout);
        let unsent = || {
            tracing::debug!(
                source = source_name,
                "upstream call not made: its deadline passed first"
            );
            SourceError::NotSent(source_name)
        };
        // Built once here, and again only for a retry or a new connection.
        let Some((destination, built)) = self.destination(request).and_then(|destination| {
            let built = self.build(request, &destination.route)?;
            Some((destination, built))
        }) else {
            return Err(SourceError::upstream(
                source_name,
                None,
                "the request failed",
            ));
        };
        let mut built = Some(built);
        // Whether any attempt reached the upstream: a call that never did
        // is `NotSent`, which a write's caller can trust as "nothing
        // happened".
        let sent = std::sync::atomic::AtomicBool::new(false);
        if deadline <= Instant::now() {
            return Err(unsent());
        }
        // Each attempt runs under one timer, its read timeout or the
        // call's deadline, whichever comes first; a wait for a slot, only
        // when none is free, under one of its own (the deadline: the
        // hand-over itself has no timer). The waits between attempts end
        // before the deadline (`retrying`).
        let call = retrying(source_name, deadline, attempts, |attempt| {
            let (sent, destination, built) = (&sent, &destination, built.take());
            async move {
                let slot = match tokio::time::timeout_at(deadline, destination.pool.slot()).await {
                    Ok(slot) => slot,
                    Err(_) => return (Err(Failed::Unsent), None),
                };
                if deadline <= Instant::now() {
                    return (Err(Failed::Unsent), None);
                }
                sent.store(true, std::sync::atomic::Ordering::Release);
                let ends = Instant::now()
                    .checked_add(settings.read_timeout)
                    .map_or(deadline, |silence| silence.min(deadline));
                let outcome = match tokio::time::timeout_at(
                    ends,
                    self.exchange(destination, slot, idempotency, request, built),
                )
                .await
                {
                    Ok(outcome) => outcome,
                    Err(_) if ends == deadline => return (Err(Failed::Deadline), None),
                    Err(_) => Err(Transport::Timeout),
                };
                let delay = match &outcome {
                    Ok((response, _)) => {
                        retry_delay(response.status(), response.headers(), settings)
                    }
                    Err(_) => Some(self.backoff(attempt)),
                };
                let outcome = outcome.map(|(response, slot)| {
                    let (head, body) = response.into_parts();
                    let mut upstream = Upstream {
                        source_name,
                        head,
                        body: Some(body),
                        done: false,
                        deadline,
                        read_timeout: settings.read_timeout,
                        slot: Some(slot),
                    };
                    // An empty body: the connection is free at once.
                    if upstream.body.as_ref().is_some_and(Incoming::is_end_stream) {
                        upstream.finish();
                    }
                    upstream
                });
                (outcome.map_err(Failed::Transport), delay)
            }
        });
        match call.await {
            Ok(upstream) => Ok(upstream),
            Err(Failed::Transport(kind)) => Err(transport_error(source_name, kind)),
            // An earlier attempt reached the upstream: not "nothing
            // happened".
            Err(Failed::Unsent) if !sent.load(std::sync::atomic::Ordering::Acquire) => {
                Err(unsent())
            }
            Err(Failed::Unsent | Failed::Deadline) => {
                tracing::debug!(source = source_name, "upstream call reached its deadline");
                Err(SourceError::Timeout(source_name))
            }
        }
    }

    /// Full-jitter exponential backoff: a random delay up to base × 2^(n−1),
    /// capped at 2 s.
    fn backoff(&self, attempt: u32) -> Duration {
        let ceiling = self
            .inner
            .settings
            .backoff
            .saturating_mul(1 << attempt.saturating_sub(1).min(5))
            .min(Duration::from_secs(2));
        let millis = u64::try_from(ceiling.as_millis()).unwrap_or(2000).max(1);
        Duration::from_millis(fastrand::u64(0..=millis))
    }

    /// The slots held, connections open and idle, and calls waiting, of
    /// the host `url` names (tests).
    #[cfg(test)]
    fn counts(&self, url: &Url) -> Option<(usize, usize, usize, usize)> {
        let request = UpstreamRequest::new(Method::GET, url.clone());
        Some(self.destination(&request)?.pool.counts())
    }
}

/// Makes up to `attempts` attempts (numbered from 1) of a call to `source`
/// while each says how long to wait before the next one, and returns the
/// last outcome. Stops early when waiting would reach `deadline` (on
/// tokio's clock, so a paused clock drives it in tests).
async fn retrying<T, F, Fut>(
    source: &'static str,
    deadline: Instant,
    attempts: u32,
    mut attempt: F,
) -> T
where
    F: FnMut(u32) -> Fut,
    Fut: Future<Output = (T, Option<Duration>)>,
{
    let mut n = 0;
    loop {
        n += 1;
        let (outcome, delay) = attempt(n).await;
        let Some(delay) = delay.filter(|_| n < attempts) else {
            return outcome;
        };
        if Instant::now() + delay >= deadline {
            return outcome;
        }
        // The answer is not kept: its connection slot and unread body are
        // given back before the wait.
        drop(outcome);
        tracing::debug!(
            source,
            attempt = n,
            delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
            "retrying upstream call"
        );
        tokio::time::sleep(delay).await;
    }
}

/// How long to wait before retrying this response, if it is worth retrying.
fn retry_delay(
    status: StatusCode,
    headers: &HeaderMap,
    settings: &HttpSettings,
) -> Option<Duration> {
    match status {
        StatusCode::BAD_GATEWAY | StatusCode::GATEWAY_TIMEOUT => Some(settings.backoff),
        StatusCode::SERVICE_UNAVAILABLE | StatusCode::TOO_MANY_REQUESTS => {
            match retry_after(headers) {
                Some(after) if after <= settings.max_retry_after => Some(after),
                Some(_) => None,
                None if status == StatusCode::SERVICE_UNAVAILABLE => Some(settings.backoff),
                None => None,
            }
        }
        _ => None,
    }
}

/// `Retry-After` in seconds (the HTTP-date form is read as "soon"), or
/// GitLab's `RateLimit-Reset` (Unix seconds).
pub(crate) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let text = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(value) = text("retry-after") {
        return Some(match value.parse::<u64>() {
            Ok(seconds) => Duration::from_secs(seconds),
            Err(_) => Duration::from_secs(1),
        });
    }
    let reset = text("ratelimit-reset")?.parse::<i64>().ok()?;
    let now = chrono::Utc::now().timestamp();
    Some(Duration::from_secs(
        u64::try_from(reset.saturating_sub(now)).unwrap_or(0),
    ))
}

/// A transport failure, in our words and without the URL.
fn transport_error(source_name: &'static str, failure: Transport) -> SourceError {
    match failure {
        Transport::Timeout => SourceError::Timeout(source_name),
        Transport::Connect => SourceError::upstream(source_name, None, "cannot connect"),
        Transport::Send => SourceError::upstream(source_name, None, "the request failed"),
        Transport::Body => SourceError::upstream(
            source_name,
            None,
            "the connection broke while reading the response",
        ),
    }
}

/// How an answer's body is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Encoding {
    Identity,
    Gzip,
    /// One this client never asks for.
    Other,
}

impl Encoding {
    fn of(headers: &HeaderMap) -> Self {
        let Some(value) = headers.get(header::CONTENT_ENCODING) else {
            return Self::Identity;
        };
        let value = value.to_str().map(str::trim).unwrap_or_default();
        if value.eq_ignore_ascii_case("gzip") || value.eq_ignore_ascii_case("x-gzip") {
            Self::Gzip
        } else if value.is_empty() || value.eq_ignore_ascii_case("identity") {
            Self::Identity
        } else {
            Self::Other
        }
    }
}

/// A `Vec` that refuses to grow past `cap` bytes: where a gzip body is
/// decoded, so that the bound applies to what it decodes to.
struct Capped {
    out: Vec<u8>,
    cap: usize,
}

impl io::Write for Capped {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.out.len() + buf.len() > self.cap {
            return Err(io::ErrorKind::FileTooLarge.into());
        }
        self.out.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Reads a whole (small) body with a size cap, so a hostile or broken
/// upstream cannot make us buffer without bound. A gzip-compressed body is
/// decoded as it comes, the cap bounding the decoded bytes (a gzip bomb
/// stops at the cap) and, with a little slack for gzip's own overhead, the
/// compressed ones.
pub(crate) async fn read_capped(
    source_name: &'static str,
    mut response: Upstream,
    cap: usize,
) -> Result<Vec<u8>, SourceError> {
    let too_large = || {
        SourceError::invalid(
            source_name,
            format!("the response is larger than {cap} bytes"),
        )
    };
    let encoding = Encoding::of(response.headers());
    let wire_cap = match encoding {
        Encoding::Identity => cap,
        Encoding::Gzip => cap.saturating_add(cap / 64).saturating_add(64),
        Encoding::Other => {
            return Err(SourceError::invalid(
                source_name,
                "the response has a content encoding that was not asked for",
            ));
        }
    };
    if response
        .content_length()
        .is_some_and(|n| n > wire_cap as u64)
    {
        return Err(too_large());
    }
    let mut body = Vec::new();
    let mut gzip = (encoding == Encoding::Gzip).then(|| {
        flate2::write::GzDecoder::new(Capped {
            out: Vec::new(),
            cap,
        })
    });
    let malformed = || SourceError::invalid(source_name, "the compressed response is malformed");
    let decoded = |error: io::Error| {
        if error.kind() == io::ErrorKind::FileTooLarge {
            too_large()
        } else {
            malformed()
        }
    };
    let mut read = 0usize;
    while let Some(chunk) = response.chunk().await? {
        read += chunk.len();
        if read > wire_cap {
            return Err(too_large());
        }
        match gzip.as_mut() {
            Some(decoder) => decoder.write_all(&chunk).map_err(decoded)?,
            None => body.extend_from_slice(&chunk),
        }
    }
    match gzip {
        Some(decoder) => Ok(decoder.finish().map_err(decoded)?.out),
        None => Ok(body),
    }
}

/// The error for a status the caller has no specific meaning for.
pub(crate) fn unexpected_status(
    source_name: &'static str,
    status: StatusCode,
    headers: &HeaderMap,
) -> SourceError {
    match status.as_u16() {
        300..=399 => SourceError::upstream(
            source_name,
            Some(status.as_u16()),
            "unexpected redirect (not followed)",
        ),
        408 | 504 => SourceError::Timeout(source_name),
        429 => SourceError::RateLimited {
            source_name,
            retry_after: retry_after(headers),
        },
        423 => SourceError::Locked {
            message: "the resource is locked by another writer".to_owned(),
            retry_after: retry_after(headers),
        },
        _ => SourceError::upstream(
            source_name,
            Some(status.as_u16()),
            status
                .canonical_reason()
                .unwrap_or("unexpected status")
                .to_lowercase(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use acdm_test_support::loopback::read_request;
    use tokio::io::AsyncWriteExt;

    #[test]
    fn retry_after_reads_seconds_and_gitlab_reset() {
        let mut h = header::HeaderMap::new();
        assert_eq!(retry_after(&h), None);
        h.insert("retry-after", header::HeaderValue::from_static("7"));
        assert_eq!(retry_after(&h), Some(Duration::from_secs(7)));
        h.insert(
            "retry-after",
            header::HeaderValue::from_static("Wed, 21 Oct 2026 07:28:00 GMT"),
        );
        assert_eq!(retry_after(&h), Some(Duration::from_secs(1)));
        let mut h = header::HeaderMap::new();
        let reset = chrono::Utc::now().timestamp() + 30;
        h.insert(
            "ratelimit-reset",
            header::HeaderValue::from_str(&reset.to_string()).unwrap(),
        );
        let d = retry_after(&h).unwrap();
        assert!(
            d <= Duration::from_secs(30) && d >= Duration::from_secs(28),
            "{d:?}"
        );
        // A hostile reset far in the past is "now", not an overflow.
        h.insert(
            "ratelimit-reset",
            header::HeaderValue::from_static("-9223372036854775808"),
        );
        assert_eq!(retry_after(&h), Some(Duration::ZERO));
    }

    /// An attempt that always asks to be retried after `delay`, recording
    /// when (on tokio's clock) each attempt was made.
    fn always_retry(
        made: &std::sync::Mutex<Vec<Duration>>,
        start: Instant,
        delay: Duration,
    ) -> impl FnMut(u32) -> std::future::Ready<(u32, Option<Duration>)> {
        move |n| {
            made.lock().unwrap().push(start.elapsed());
            std::future::ready((n, Some(delay)))
        }
    }

    #[tokio::test(start_paused = true)]
    async fn retries_wait_their_delay_on_tokios_clock_and_stop_at_the_attempt_limit() {
        let made = std::sync::Mutex::new(Vec::new());
        let start = Instant::now();
        let last = retrying(
            "test",
            start + Duration::from_secs(60),
            3,
            always_retry(&made, start, Duration::from_secs(2)),
        )
        .await;
        assert_eq!(last, 3, "the last outcome is returned");
        let s = Duration::from_secs;
        assert_eq!(*made.lock().unwrap(), vec![s(0), s(2), s(4)]);
        // The paused clock moved exactly by the two waits: nothing waited
        // for real, and nothing waited after the last attempt.
        assert_eq!(start.elapsed(), s(4));
    }

    #[tokio::test(start_paused = true)]
    async fn no_wait_reaches_past_the_budget() {
        let made = std::sync::Mutex::new(Vec::new());
        let start = Instant::now();
        // Room for ten attempts, but a budget of 5 s: attempts at 0, 2 and
        // 4 s; waiting again would reach 6 s, so the third is the last.
        let last = retrying(
            "test",
            start + Duration::from_secs(5),
            10,
            always_retry(&made, start, Duration::from_secs(2)),
        )
        .await;
        assert_eq!(last, 3);
        assert_eq!(start.elapsed(), Duration::from_secs(4));
        // A Retry-After longer than the whole budget is not waited for.
        let made = std::sync::Mutex::new(Vec::new());
        let start = Instant::now();
        let last = retrying(
            "test",
            start + Duration::from_secs(5),
            10,
            always_retry(&made, start, Duration::from_secs(7)),
        )
        .await;
        assert_eq!((last, start.elapsed()), (1, Duration::ZERO));
    }

    #[tokio::test(start_paused = true)]
    async fn an_outcome_not_worth_retrying_is_returned_at_once() {
        let mut calls = 0;
        let start = Instant::now();
        let last = retrying("test", start + Duration::from_secs(60), 5, |n| {
            calls += 1;
            std::future::ready((n, (n < 2).then_some(Duration::from_secs(1))))
        })
        .await;
        assert_eq!((last, calls), (2, 2));
        assert_eq!(start.elapsed(), Duration::from_secs(1));
    }

    #[test]
    fn a_request_carries_its_credentials_marked_sensitive_and_our_defaults() {
        let client = HttpClient::new(HttpSettings::default()).unwrap();
        let url = Url::parse("https://cloud.example/remote.php/dav/files/u/a%20b.md?x=1").unwrap();
        let mut headers = HeaderMap::new();
        headers.insert("depth", HeaderValue::from_static("0"));
        // Framing headers are hyper's to write, never the caller's.
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from_static("99"));
        headers.insert(header::HOST, HeaderValue::from_static("elsewhere.example"));
        let request = UpstreamRequest::new(Method::GET, url)
            .headers(&headers)
            .authorization(basic_authorization("svc", "app-password").unwrap());
        let authorization = &request.headers[header::AUTHORIZATION];
        // base64("svc:app-password")
        assert_eq!(authorization, "Basic c3ZjOmFwcC1wYXNzd29yZA==");
        assert!(authorization.is_sensitive(), "never logged");
        let built = client.build(&request, &Route::Direct).unwrap();
        assert_eq!(built.uri(), "/remote.php/dav/files/u/a%20b.md?x=1");
        let sent: Vec<(String, String)> = built
            .headers()
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_str().unwrap().to_owned()))
            .collect();
        let pair = |n: &str, v: &str| (n.to_owned(), v.to_owned());
        assert_eq!(
            sent,
            [
                pair("host", "cloud.example"),
                pair("depth", "0"),
                pair("authorization", "Basic c3ZjOmFwcC1wYXNzd29yZA=="),
                pair("user-agent", &HttpSettings::default().user_agent),
                pair("accept", "*/*"),
            ]
        );
        assert_eq!(request.target(), Some((true, "cloud.example", 443)));
        // Only HTTP(S) is ever sent.
        let ftp = UpstreamRequest::new(Method::GET, Url::parse("ftp://cloud.example/x").unwrap());
        assert!(ftp.target().is_none());
        // An empty PUT states its length; a GET does not.
        let put = UpstreamRequest::new(Method::PUT, Url::parse("http://h:8080/f").unwrap());
        let built = client.build(&put, &Route::Direct).unwrap();
        assert_eq!(built.headers()[header::CONTENT_LENGTH], "0");
        assert_eq!(built.headers()[header::HOST], "h:8080");
        // Through a forwarding proxy: absolute form, and the proxy's
        // credentials beside the upstream's.
        let forward = Route::Forward {
            proxy: proxy::Target {
                host: "proxy".to_owned(),
                port: 3128,
            },
            authorization: Some(HeaderValue::from_static("Basic cHJveHk=")),
        };
        let built = client.build(&request, &forward).unwrap();
        assert_eq!(
            built.uri(),
            "https://cloud.example/remote.php/dav/files/u/a%20b.md?x=1"
        );
        assert_eq!(
            built.headers()[header::PROXY_AUTHORIZATION],
            "Basic cHJveHk="
        );
    }

    /// A loopback server answering each request with what `answer` says
    /// for (connection number, request number on it), or closing the
    /// connection on `None`. Counts connections and requests.
    struct Scripted {
        addr: std::net::SocketAddr,
        connections: Arc<std::sync::atomic::AtomicUsize>,
        requests: Arc<std::sync::atomic::AtomicUsize>,
    }

    impl Scripted {
        async fn start(
            answer: impl Fn(usize, usize) -> Option<Vec<u8>> + Send + Sync + 'static,
        ) -> Self {
            use std::sync::atomic::{AtomicUsize, Ordering};
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let connections = Arc::new(AtomicUsize::new(0));
            let requests = Arc::new(AtomicUsize::new(0));
            let answer = Arc::new(answer);
            let (c, r) = (connections.clone(), requests.clone());
            tokio::spawn(async move {
                while let Ok((mut stream, _)) = listener.accept().await {
                    let number = c.fetch_add(1, Ordering::SeqCst);
                    let (answer, r) = (answer.clone(), r.clone());
                    tokio::spawn(async move {
                        let mut buf = Vec::new();
                        for on_conn in 0.. {
                            if read_request(&mut stream, &mut buf).await.is_none() {
                                return;
                            }
                            r.fetch_add(1, Ordering::SeqCst);
                            match answer(number, on_conn) {
                                Some(bytes) => {
                                    if stream.write_all(&bytes).await.is_err() {
                                        return;
                                    }
                                }
                                None => return,
                            }
                        }
                    });
                }
            });
            Self {
                addr,
                connections,
                requests,
            }
        }

        fn connections(&self) -> usize {
            self.connections.load(std::sync::atomic::Ordering::SeqCst)
        }

        fn requests(&self) -> usize {
            self.requests.load(std::sync::atomic::Ordering::SeqCst)
        }

        fn request(&self, method: Method) -> UpstreamRequest {
            let url = Url::parse(&format!("http://{}/f", self.addr)).unwrap();
            UpstreamRequest::new(method, url)
        }
    }

    fn client(retries: u32) -> HttpClient {
        HttpClient::new(HttpSettings {
            retries,
            ..HttpSettings::default()
        })
        .unwrap()
    }

    async fn get(client: &HttpClient, server: &Scripted) -> Result<Vec<u8>, SourceError> {
        let answer = client
            .send("test", Idempotency::Read, &server.request(Method::GET))
            .await?;
        read_capped("test", answer, 1 << 20).await
    }

    #[tokio::test]
    async fn answers_read_whole_leave_their_connection_for_the_next_request() {
        let server = Scripted::start(|_, n| {
            Some(if n % 2 == 0 {
                b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello".to_vec()
            } else {
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n".to_vec()
            })
        })
        .await;
        let client = client(0);
        for n in 0..6 {
            let body = get(&client, &server).await.unwrap();
            let expected: &[u8] = if n % 2 == 0 { b"hello" } else { b"hello world" };
            assert_eq!(body, expected);
        }
        assert_eq!((server.connections(), server.requests()), (1, 6));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_idle_connection_of_another_runtime_is_used_only_at_the_cap() {
        let server = Scripted::start(|_, _| {
            Some(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".to_vec())
        })
        .await;
        // Another runtime, as another of the service's lanes is.
        let on_another_runtime = |client: HttpClient, request: UpstreamRequest| {
            tokio::task::spawn_blocking(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                runtime.block_on(async {
                    let mut bodies = Vec::new();
                    for _ in 0..2 {
                        let answer = client.send("test", Idempotency::Read, &request).await;
                        bodies.push(read_capped("test", answer.unwrap(), 1 << 10).await.unwrap());
                    }
                    bodies
                })
            })
        };
        // Below the cap, it makes a connection of its own (whose answers
        // wake it on its own thread), and reuses that one.
        let client = client(0);
        assert_eq!(get(&client, &server).await.unwrap(), b"ok");
        let bodies = on_another_runtime(client.clone(), server.request(Method::GET))
            .await
            .unwrap();
        assert_eq!(bodies, [b"ok".to_vec(), b"ok".to_vec()]);
        assert_eq!((server.connections(), server.requests()), (2, 3));
        // Back here, the first connection is still kept for this runtime.
        assert_eq!(get(&client, &server).await.unwrap(), b"ok");
        assert_eq!((server.connections(), server.requests()), (2, 4));
        // At the cap, it takes the idle connection this runtime made
        // rather than close it to make one.
        let capped = HttpClient::new(HttpSettings {
            retries: 0,
            max_connections_per_host: 1,
            ..HttpSettings::default()
        })
        .unwrap();
        assert_eq!(get(&capped, &server).await.unwrap(), b"ok");
        let bodies = on_another_runtime(capped.clone(), server.request(Method::GET))
            .await
            .unwrap();
        assert_eq!(bodies, [b"ok".to_vec(), b"ok".to_vec()]);
        assert_eq!((server.connections(), server.requests()), (3, 7));
    }

    #[tokio::test]
    async fn an_answer_dropped_half_read_closes_its_connection_and_an_empty_one_does_not() {
        let server = Scripted::start(|_, n| {
            Some(if n == 0 {
                b"HTTP/1.1 204 No Content\r\n\r\n".to_vec()
            } else {
                let mut big = b"HTTP/1.1 200 OK\r\nContent-Length: 4194304\r\n\r\n".to_vec();
                big.resize(big.len() + 4 * 1024 * 1024, b'x');
                big
            })
        })
        .await;
        let client = client(0);
        let request = server.request(Method::DELETE);
        // Never read: its (empty) body is complete with the head.
        let answer = client
            .send("test", Idempotency::Write, &request)
            .await
            .unwrap();
        assert_eq!(answer.status(), StatusCode::NO_CONTENT);
        drop(answer);
        let mut answer = client
            .send("test", Idempotency::Read, &server.request(Method::GET))
            .await
            .unwrap();
        assert!(answer.chunk().await.unwrap().is_some());
        drop(answer);
        assert_eq!(server.connections(), 1, "the 204's connection was kept");
        // The half-read answer's connection is gone: the next request
        // opens another (whose first answer is the 204).
        let answer = client
            .send("test", Idempotency::Write, &request)
            .await
            .unwrap();
        assert_eq!(answer.status(), StatusCode::NO_CONTENT);
        assert_eq!(server.connections(), 2);
    }

    #[tokio::test]
    async fn a_kept_connection_closed_under_a_read_is_retried_at_once_and_under_a_write_is_not() {
        // Every connection answers its first request and closes at the
        // second without answering, as a server closing an idle
        // connection while the request is on its way.
        let ok = || Some(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".to_vec());
        let server = Scripted::start(move |_, n| if n == 0 { ok() } else { None }).await;
        // No retries: the read succeeds only because a request that never
        // reached the server goes again on a new connection.
        let client = client(0);
        assert_eq!(get(&client, &server).await.unwrap(), b"ok");
        assert_eq!(get(&client, &server).await.unwrap(), b"ok");
        assert_eq!((server.connections(), server.requests()), (2, 3));
        // A write on the kept connection is not sent again: the server saw
        // it, and the caller is told the request failed.
        let error = client
            .send("test", Idempotency::Write, &server.request(Method::PUT))
            .await
            .unwrap_err();
        assert!(matches!(error, SourceError::Upstream { .. }), "{error:?}");
        assert_eq!((server.connections(), server.requests()), (2, 4));
    }

    #[tokio::test]
    async fn a_read_dropped_on_every_connection_goes_again_once_not_once_per_connection() {
        // Three connections answer their first request; after that every
        // request is dropped unanswered, on new connections too.
        let ok = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".to_vec();
        let server = Scripted::start(move |c, n| (c < 3 && n == 0).then(|| ok.clone())).await;
        let client = client(0);
        let reads = (0..3).map(|_| get(&client, &server));
        for body in futures_util::future::join_all(reads).await {
            assert_eq!(body.unwrap(), b"ok");
        }
        assert_eq!((server.connections(), server.requests()), (3, 3));
        let error = get(&client, &server).await.unwrap_err();
        assert!(matches!(error, SourceError::Upstream { .. }), "{error:?}");
        // A kept connection, then one new one: two sends, not four.
        assert_eq!((server.connections(), server.requests()), (4, 5));
    }

    #[tokio::test]
    async fn an_answer_to_the_close_or_with_bytes_after_it_is_not_kept() {
        let server = Scripted::start(|connection, _| {
            Some(match connection {
                0 => {
                    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok".to_vec()
                }
                1 => b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok".to_vec(),
                _ => b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokJUNK".to_vec(),
            })
        })
        .await;
        let client = client(0);
        for _ in 0..4 {
            assert_eq!(get(&client, &server).await.unwrap(), b"ok");
        }
        assert_eq!(server.connections(), 4);
    }

    /// Calls spread over four current-thread runtimes, as the service's
    /// lanes are, sharing a host allowed four connections: however the
    /// slots move between runtimes, no more than four connections are ever
    /// made, so no slot waits on a connect while another runtime's
    /// connection sits idle.
    #[test]
    fn slots_moving_between_runtimes_make_no_new_connections() {
        let outer = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let server = outer.block_on(Scripted::start(|_, _| {
            Some(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".to_vec())
        }));
        let client = HttpClient::new(HttpSettings {
            retries: 0,
            max_connections_per_host: 4,
            ..HttpSettings::default()
        })
        .unwrap();
        // A lane's connections close when its runtime stops: the lanes
        // stop together, once every call is done.
        let all_done = Arc::new(tokio::sync::Barrier::new(4));
        let lanes: Vec<_> = (0..4)
            .map(|_| {
                let (client, request) = (client.clone(), server.request(Method::GET));
                let all_done = all_done.clone();
                std::thread::spawn(move || {
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .unwrap();
                    runtime.block_on(async {
                        let calls = (0..8).map(|_| {
                            let (client, request) = (client.clone(), request.clone());
                            tokio::spawn(async move {
                                for _ in 0..25 {
                                    let answer = client.send("test", Idempotency::Read, &request);
                                    let body = read_capped("test", answer.await.unwrap(), 64);
                                    assert_eq!(body.await.unwrap(), b"ok");
                                }
                            })
                        });
                        for call in futures_util::future::join_all(calls).await {
                            call.unwrap();
                        }
                        all_done.wait().await;
                    });
                })
            })
            .collect();
        for lane in lanes {
            lane.join().unwrap();
        }
        assert_eq!(server.requests(), 4 * 8 * 25);
        assert!(
            server.connections() <= 4,
            "{} connections for a cap of 4",
            server.connections()
        );
    }

    /// An upstream that holds every request until the test lets one
    /// answer go (a tick of a counted clock), recording the order in which
    /// requests (`/f?n=<call>`) arrive, its connections, and the most
    /// requests it held at once.
    struct Gated {
        addr: std::net::SocketAddr,
        arrivals: std::sync::mpsc::Receiver<usize>,
        ticks: Arc<tokio::sync::Semaphore>,
        connections: Arc<std::sync::atomic::AtomicUsize>,
        most_at_once: Arc<std::sync::atomic::AtomicUsize>,
    }

    impl Gated {
        async fn start() -> Self {
            use std::sync::atomic::{AtomicUsize, Ordering};
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let (arrived, arrivals) = std::sync::mpsc::channel();
            let ticks = Arc::new(tokio::sync::Semaphore::new(0));
            let connections = Arc::new(AtomicUsize::new(0));
            let most_at_once = Arc::new(AtomicUsize::new(0));
            let held = Arc::new(AtomicUsize::new(0));
            let (t, c, m) = (ticks.clone(), connections.clone(), most_at_once.clone());
            tokio::spawn(async move {
                while let Ok((mut stream, _)) = listener.accept().await {
                    c.fetch_add(1, Ordering::SeqCst);
                    let (arrived, t, m, held) =
                        (arrived.clone(), t.clone(), m.clone(), held.clone());
                    tokio::spawn(async move {
                        let mut buf = Vec::new();
                        loop {
                            let mut chunk = [0u8; 1024];
                            let end = loop {
                                if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                                    break end + 4;
                                }
                                match tokio::io::AsyncReadExt::read(&mut stream, &mut chunk).await {
                                    Ok(0) | Err(_) => return,
                                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                                }
                            };
                            let head = String::from_utf8_lossy(&buf[..end]).into_owned();
                            buf.drain(..end);
                            let n: usize = head
                                .split_once("?n=")
                                .and_then(|(_, rest)| rest.split(' ').next())
                                .and_then(|n| n.parse().ok())
                                .unwrap();
                            let now = held.fetch_add(1, Ordering::SeqCst) + 1;
                            m.fetch_max(now, Ordering::SeqCst);
                            arrived.send(n).unwrap();
                            t.acquire().await.unwrap().forget();
                            held.fetch_sub(1, Ordering::SeqCst);
                            let answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
                            if stream.write_all(answer).await.is_err() {
                                return;
                            }
                        }
                    });
                }
            });
            Self {
                addr,
                arrivals,
                ticks,
                connections,
                most_at_once,
            }
        }

        /// The next request to arrive (a guard against a hang, not a
        /// measure: each arrives as soon as a slot lets it).
        fn next_arrival(&self) -> usize {
            self.arrivals
                .recv_timeout(Duration::from_secs(30))
                .expect("a call arrives")
        }
    }

    /// The acceptance test of the slot queue: many calls spread over
    /// current-thread runtimes, as the service's lanes are, wait for two
    /// slots. Each answer let go (one tick) lets exactly the longest
    /// waiting call in, on the connection that answer freed: FIFO order,
    /// one call per freed slot, never more than two at once, and two
    /// connections in all whichever runtime each call runs on. (The client
    /// this replaced kept FIFO order, but a slot moving to another runtime
    /// connected anew while the idle connection sat on the first one.)
    #[test]
    fn waiting_calls_on_several_runtimes_get_freed_slots_in_order_on_the_freed_connections() {
        use std::sync::atomic::Ordering;
        const CAP: usize = 2;
        const LANES: usize = 3;
        const CALLS: usize = 12;
        let outer = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let server = outer.block_on(Gated::start());
        let client = HttpClient::new(HttpSettings {
            retries: 0,
            timeout: Duration::from_secs(600),
            read_timeout: Duration::from_secs(600),
            max_connections_per_host: CAP,
            ..HttpSettings::default()
        })
        .unwrap();
        let base = Url::parse(&format!("http://{}/f", server.addr)).unwrap();
        let (finished, done) = std::sync::mpsc::channel();
        let mut lanes = Vec::new();
        let mut threads = Vec::new();
        for _ in 0..LANES {
            let (start, mut starts) = tokio::sync::mpsc::unbounded_channel::<usize>();
            lanes.push(start);
            let (client, base, finished) = (client.clone(), base.clone(), finished.clone());
            threads.push(std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                runtime.block_on(async move {
                    let mut calls = Vec::new();
                    while let Some(n) = starts.recv().await {
                        let (client, finished) = (client.clone(), finished.clone());
                        let mut url = base.clone();
                        url.set_query(Some(&format!("n={n}")));
                        calls.push(tokio::spawn(async move {
                            let request = UpstreamRequest::new(Method::GET, url);
                            let answer = client.send("test", Idempotency::Read, &request);
                            let body = read_capped("test", answer.await.unwrap(), 64).await;
                            assert_eq!(body.unwrap(), b"ok");
                            finished.send(n).unwrap();
                        }));
                    }
                    for call in calls {
                        call.await.unwrap();
                    }
                });
            }));
        }
        for n in 0..CALLS {
            lanes[n % LANES].send(n).unwrap();
            if n < CAP {
                assert_eq!(server.next_arrival(), n);
            } else {
                // Queued behind the calls before it.
                while client.counts(&base).map(|c| c.3) != Some(n - CAP + 1) {
                    std::thread::yield_now();
                }
            }
        }
        assert_eq!(client.counts(&base), Some((CAP, CAP, 0, CALLS - CAP)));
        for tick in 0..CALLS {
            server.ticks.add_permits(1);
            assert_eq!(
                done.recv_timeout(Duration::from_secs(30)).unwrap(),
                tick,
                "answers in order"
            );
            if tick + CAP < CALLS {
                assert_eq!(server.next_arrival(), tick + CAP, "the longest waiter next");
            }
        }
        drop(lanes);
        for thread in threads {
            thread.join().unwrap();
        }
        assert_eq!(server.most_at_once.load(Ordering::SeqCst), CAP);
        assert_eq!(
            server.connections.load(Ordering::SeqCst),
            CAP,
            "no new connection"
        );
        assert_eq!(client.counts(&base).map(|c| c.3), Some(0));
    }

    /// The same on one runtime with a paused clock: twelve calls, two
    /// slots, an upstream answering each request after 100 ms — the calls
    /// end two every 100 ms, in the order they came, on two connections.
    #[tokio::test(start_paused = true)]
    async fn waiting_calls_end_at_the_rate_the_slots_allow() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        // An upstream that answers each request 100 ms after it came, on
        // the paused clock.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let relay_addr = listener.local_addr().unwrap();
        let connections = Arc::new(AtomicUsize::new(0));
        let counted = connections.clone();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                counted.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    while read_request(&mut stream, &mut buf).await.is_some() {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        let answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
                        if stream.write_all(answer).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        // Timeouts far past the test's second: were the paused clock to
        // jump while a loopback read is still on its way, it would stop at
        // the upstream's next 100 ms, never end a call.
        let client = HttpClient::new(HttpSettings {
            retries: 0,
            max_connections_per_host: 2,
            connect_timeout: Duration::from_secs(600),
            read_timeout: Duration::from_secs(600),
            timeout: Duration::from_secs(600),
            ..HttpSettings::default()
        })
        .unwrap();
        let url = Url::parse(&format!("http://{relay_addr}/f")).unwrap();
        let start = Instant::now();
        let ended = Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut calls = Vec::new();
        for n in 0..12u64 {
            let (client, url, ended) = (client.clone(), url.clone(), ended.clone());
            calls.push(tokio::spawn(async move {
                let request = UpstreamRequest::new(Method::GET, url);
                let answer = client.send("test", Idempotency::Read, &request).await;
                assert_eq!(
                    read_capped("test", answer.unwrap(), 64).await.unwrap(),
                    b"ok"
                );
                ended.lock().unwrap().push((n, start.elapsed()));
            }));
            // Each call queued before the next starts.
            tokio::task::yield_now().await;
        }
        for call in calls {
            call.await.unwrap();
        }
        let ended = ended.lock().unwrap().clone();
        let expected: Vec<(u64, Duration)> = (0..12)
            .map(|n| (n, Duration::from_millis(100 * (n / 2 + 1))))
            .collect();
        let mut sorted = ended.clone();
        sorted.sort();
        assert_eq!(sorted, expected, "two calls every 100 ms");
        let order: Vec<u64> = ended.iter().map(|(n, _)| n / 2).collect();
        let mut pairs = order.clone();
        pairs.sort();
        assert_eq!(order, pairs, "each pair ends after the pair before it");
        assert_eq!(connections.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn backoff_stays_under_its_ceiling() {
        let client = HttpClient::new(HttpSettings::default()).unwrap();
        for attempt in 1..10 {
            assert!(client.backoff(attempt) <= Duration::from_secs(2));
        }
        assert!(client.backoff(1) <= Duration::from_millis(100));
    }
}
