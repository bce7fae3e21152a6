//! The one HTTP client every upstream call goes through.
//!
//! HTTP/1.1 of our own over tokio's TCP and rustls: the request is written
//! and its answer read by the calling task itself, on a connection kept
//! per host between calls ([`conn`]; the message format in [`wire`]). No
//! connection task, no channels, no layers for what this client never does
//! (follow redirects, honour proxy variables, decompress). Timeouts are
//! explicit, redirects are never followed (a redirect to another host
//! would carry our credentials: the 3xx is the caller's to map), TLS is
//! rustls with the webpki roots, and retries are bounded: only idempotent
//! requests, only on transient outcomes (the request could not be sent or
//! its answer broke off, timeouts, 502/503/504, 429/503 with a short
//! `Retry-After`), with exponential backoff and full jitter inside the
//! request's time budget. Transport errors become [`SourceError`]s without
//! the URL.

mod conn;
mod wire;

use std::future::Future;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::Instant;
use url::Url;

use self::conn::{Conn, Connector, Host, Hosts, Key};
use self::wire::{Decoder, Step};
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
    /// the response body is read or dropped); more wait for a slot within
    /// their deadline. Also the most idle connections kept per host.
    pub max_connections_per_host: usize,
    /// `User-Agent` sent upstream.
    pub user_agent: String,
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
        }
    }
}

/// How long an idle connection is kept for the next request.
const IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// A request body up to this size is written with its head, in one write.
const COALESCE_BODY_BYTES: usize = 16 * 1024;

/// Bytes asked of the socket per read.
const READ_BYTES: usize = 16 * 1024;

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
    hosts: Hosts,
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

    /// Where its connection goes; `None` for a URL this client cannot
    /// reach (not `http`/`https`, no host).
    fn key(&self) -> Option<Key<'_>> {
        let tls = match self.url.scheme() {
            "http" => false,
            "https" => true,
            _ => return None,
        };
        Some(Key {
            tls,
            host: self.url.host_str().filter(|h| !h.is_empty())?,
            port: self.url.port_or_known_default()?,
        })
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
    /// The request could not be sent, or its answer's head broke off.
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
}

/// How one round trip on one connection failed.
enum Trip {
    /// The connection ended before any byte of an answer: on a kept
    /// connection, the server closed it as the request went out, so the
    /// request never reached it.
    Closed,
    /// Anything else.
    Failed(Transport),
}

impl Trip {
    /// What an IO error means here: the connection closed under us if no
    /// answer has started, else a failed send.
    fn of(error: &io::Error, answer_started: bool) -> Self {
        let closed = matches!(
            error.kind(),
            io::ErrorKind::BrokenPipe
                | io::ErrorKind::ConnectionReset
                | io::ErrorKind::ConnectionAborted
                | io::ErrorKind::UnexpectedEof
        );
        if closed && !answer_started {
            Self::Closed
        } else {
            Self::Failed(Transport::of(error, Transport::Send))
        }
    }
}

/// An upstream response, holding its host's connection slot until its body
/// is read or it is dropped. Reading the body ends by the call's deadline,
/// and a silence longer than the read timeout ends it too.
#[derive(Debug)]
pub(crate) struct Upstream {
    source_name: &'static str,
    head: http::response::Parts,
    body: Body,
    deadline: Instant,
    read_timeout: Duration,
    /// Held, not read: given back when the response is dropped.
    _slot: Option<OwnedSemaphorePermit>,
}

/// A response's body on its connection. The connection goes back to its
/// host once the body is read whole (or was empty); a body left unread is
/// closed with its connection, unless what remains of it was already
/// received.
struct Body {
    conn: Option<Conn>,
    decoder: Decoder,
    /// Whether the server keeps the connection for another request.
    keep_alive: bool,
    host: Arc<Host>,
}

impl std::fmt::Debug for Body {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Body")
            .field("decoder", &self.decoder)
            .field("open", &self.conn.is_some())
            .finish_non_exhaustive()
    }
}

impl Body {
    /// Gives the connection back if the body is complete and nothing
    /// follows it.
    fn release(&mut self) {
        if let Some(conn) = self.conn.take()
            && self.keep_alive
            && self.decoder.is_done()
            && conn.buf.is_empty()
        {
            self.host.checkin(conn);
        }
    }
}

impl Drop for Body {
    fn drop(&mut self) {
        // Whatever of the body was already received is skipped, so a
        // small answer its caller did not read keeps its connection.
        if let Some(conn) = self.conn.as_mut() {
            while let Ok(Step::Data(_)) = self.decoder.decode(&mut conn.buf) {}
        }
        self.release();
    }
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

    /// The next chunk of the body, `None` at its end.
    pub(crate) async fn chunk(&mut self) -> Result<Option<Bytes>, SourceError> {
        let body = &mut self.body;
        loop {
            let Some(conn) = body.conn.as_mut() else {
                // Read whole before, or broken off by an earlier error.
                return if body.decoder.is_done() {
                    Ok(None)
                } else {
                    Err(transport_error(self.source_name, Transport::Body))
                };
            };
            match body.decoder.decode(&mut conn.buf) {
                Ok(Step::Data(data)) => {
                    if body.decoder.is_done() {
                        body.release();
                    }
                    return Ok(Some(data));
                }
                Ok(Step::End) => {
                    body.release();
                    return Ok(None);
                }
                Ok(Step::More) => {}
                Err(wire::Malformed) => {
                    body.conn = None;
                    return Err(transport_error(self.source_name, Transport::Body));
                }
            }
            let wait = self
                .deadline
                .saturating_duration_since(Instant::now())
                .min(self.read_timeout);
            // Past the deadline not even a chunk already received is read.
            if wait.is_zero() {
                body.conn = None;
                return Err(transport_error(self.source_name, Transport::Timeout));
            }
            conn.buf.reserve(READ_BYTES);
            let failure =
                match tokio::time::timeout(wait, conn.stream.read_buf(&mut conn.buf)).await {
                    Ok(Ok(0)) => match body.decoder.at_close() {
                        // Read to the close: the end, and no reuse.
                        Ok(_) => {
                            body.conn = None;
                            return Ok(None);
                        }
                        Err(wire::Malformed) => Transport::Body,
                    },
                    Ok(Ok(_)) => continue,
                    Ok(Err(error)) => Transport::of(&error, Transport::Body),
                    Err(_) => Transport::Timeout,
                };
            body.conn = None;
            return Err(transport_error(self.source_name, failure));
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

impl HttpClient {
    /// Builds the client.
    pub fn new(settings: HttpSettings) -> Result<Self, SourceError> {
        let roots = rustls::RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        };
        let mut tls = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|_| SourceError::NotConfigured("TLS could not be set up".to_owned()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
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
                hosts: Hosts::new(settings.max_connections_per_host, IDLE_TIMEOUT),
                settings,
            }),
        })
    }

    /// The settings.
    pub fn settings(&self) -> &HttpSettings {
        &self.inner.settings
    }

    /// The request's head, and its body when small enough to go with it
    /// in one write; `None` when the request cannot be made.
    fn encode(&self, request: &UpstreamRequest) -> Option<Vec<u8>> {
        let small = request.body.len() <= COALESCE_BODY_BYTES;
        let mut out = Vec::with_capacity(512 + if small { request.body.len() } else { 0 });
        wire::encode_request(
            &mut out,
            &request.method,
            &request.url,
            &request.headers,
            &self.inner.defaults,
            request.body.len(),
        )?;
        if small {
            out.extend_from_slice(&request.body);
        }
        Some(out)
    }

    /// One request on one of `host`'s connections, kept or new, up to its
    /// answer's head. A read whose kept connection turns out closed as it
    /// was sent goes again at once, once, on a new connection: it never
    /// reached the server. A write does not: the caller re-checks it.
    async fn exchange(
        &self,
        host: &Host,
        key: &Key<'_>,
        idempotency: Idempotency,
        request: &UpstreamRequest,
        encoded: &[u8],
    ) -> Result<(wire::Head, Conn), Transport> {
        let connect = || async {
            self.inner
                .connector
                .connect(key)
                .await
                .map_err(|error| Transport::of(&error, Transport::Connect))
        };
        let mut conn = match host.checkout() {
            Some(conn) => conn,
            None => connect().await?,
        };
        loop {
            match round_trip(&mut conn, encoded, request).await {
                Ok(head) => return Ok((head, conn)),
                // On a new connection, which is not `reused`: a server that
                // drops this request on every connection sees it twice,
                // not once per idle connection.
                Err(Trip::Closed) if conn.reused && idempotency == Idempotency::Read => {
                    conn = connect().await?;
                }
                Err(Trip::Closed) => return Err(Transport::Send),
                Err(Trip::Failed(failure)) => return Err(failure),
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
        let (Some(key), Some(encoded)) = (request.key(), self.encode(request)) else {
            return Err(SourceError::upstream(
                source_name,
                None,
                "the request failed",
            ));
        };
        let host = self.inner.hosts.get(&key);
        // Whether any attempt reached the upstream: a call that never did
        // is `NotSent`, which a write's caller can trust as "nothing
        // happened".
        let sent = std::sync::atomic::AtomicBool::new(false);
        if deadline <= Instant::now() {
            return Err(unsent());
        }
        // Each attempt runs under one timer, its read timeout or the
        // call's deadline, whichever comes first (a timer is a lock and a
        // wheel insertion, and a wake-up of the event loop when it is the
        // soonest); a wait for a slot, only when none is free, under one
        // of its own. The waits between attempts end before the deadline
        // (`retrying`).
        let call = retrying(source_name, deadline, attempts, |attempt| {
            let (sent, host, key, encoded) = (&sent, &host, &key, &encoded);
            async move {
                // Never closed, so always a slot once one is free.
                let slot = match host.slots.clone().try_acquire_owned() {
                    Ok(slot) => Some(slot),
                    Err(_) => {
                        let waited =
                            tokio::time::timeout_at(deadline, host.slots.clone().acquire_owned());
                        match waited.await {
                            Ok(slot) => slot.ok(),
                            Err(_) => return (Err(Failed::Unsent), None),
                        }
                    }
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
                    self.exchange(host, key, idempotency, request, encoded),
                )
                .await
                {
                    Ok(outcome) => outcome,
                    Err(_) if ends == deadline => return (Err(Failed::Deadline), None),
                    Err(_) => Err(Transport::Timeout),
                };
                let delay = match &outcome {
                    Ok((head, _)) => retry_delay(head.parts.status, &head.parts.headers, settings),
                    Err(_) => Some(self.backoff(attempt)),
                };
                let outcome = outcome.map(|(head, conn)| {
                    let mut body = Body {
                        conn: Some(conn),
                        decoder: Decoder::new(head.framing),
                        keep_alive: head.keep_alive,
                        host: host.clone(),
                    };
                    // An empty body: the connection is free at once.
                    if body.decoder.is_done() {
                        body.release();
                    }
                    Upstream {
                        source_name,
                        head: head.parts,
                        body,
                        deadline,
                        read_timeout: settings.read_timeout,
                        _slot: slot,
                    }
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
}

/// Writes the request on `conn` and reads its answer's head.
async fn round_trip(
    conn: &mut Conn,
    encoded: &[u8],
    request: &UpstreamRequest,
) -> Result<wire::Head, Trip> {
    let write = async {
        conn.stream.write_all(encoded).await?;
        if request.body.len() > COALESCE_BODY_BYTES {
            conn.stream.write_all(&request.body).await?;
        }
        conn.stream.flush().await
    };
    write.await.map_err(|error| Trip::of(&error, false))?;
    // Whether any byte of an answer came (an interim 1xx is consumed
    // from the buffer, but the server did answer).
    let mut started = false;
    loop {
        match wire::parse_head(&mut conn.buf, &request.method) {
            Ok(Some(head)) => return Ok(head),
            Ok(None) => {}
            Err(wire::Malformed) => return Err(Trip::Failed(Transport::Send)),
        }
        conn.buf.reserve(READ_BYTES);
        match conn.stream.read_buf(&mut conn.buf).await {
            Ok(0) if started => return Err(Trip::Failed(Transport::Send)),
            Ok(0) => return Err(Trip::Closed),
            Ok(_) => started = true,
            Err(error) => return Err(Trip::of(&error, started)),
        }
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

/// Reads a whole (small) body with a size cap, so a hostile or broken
/// upstream cannot make us buffer without bound.
pub(crate) async fn read_capped(
    source_name: &'static str,
    mut response: Upstream,
    cap: usize,
) -> Result<Vec<u8>, SourceError> {
    if response.content_length().is_some_and(|n| n > cap as u64) {
        return Err(SourceError::invalid(
            source_name,
            format!("the response is larger than {cap} bytes"),
        ));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        if body.len() + chunk.len() > cap {
            return Err(SourceError::invalid(
                source_name,
                format!("the response is larger than {cap} bytes"),
            ));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
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
        let request = UpstreamRequest::new(Method::GET, url)
            .headers(&headers)
            .authorization(basic_authorization("svc", "app-password").unwrap());
        let authorization = &request.headers[header::AUTHORIZATION];
        // base64("svc:app-password")
        assert_eq!(authorization, "Basic c3ZjOmFwcC1wYXNzd29yZA==");
        assert!(authorization.is_sensitive(), "never logged");
        let encoded = String::from_utf8(client.encode(&request).unwrap()).unwrap();
        assert_eq!(
            encoded,
            format!(
                "GET /remote.php/dav/files/u/a%20b.md?x=1 HTTP/1.1\r\nhost: cloud.example\r\n\
                 depth: 0\r\nauthorization: Basic c3ZjOmFwcC1wYXNzd29yZA==\r\n\
                 user-agent: {}\r\naccept: */*\r\n\r\n",
                HttpSettings::default().user_agent
            )
        );
        assert_eq!(
            request.key(),
            Some(Key {
                tls: true,
                host: "cloud.example",
                port: 443
            })
        );
        // Only HTTP(S) is ever sent.
        let ftp = UpstreamRequest::new(Method::GET, Url::parse("ftp://cloud.example/x").unwrap());
        assert!(ftp.key().is_none());
        // A small body goes with its head; a large one is written after it.
        let small = UpstreamRequest::new(Method::PUT, Url::parse("http://h/f").unwrap())
            .body(Bytes::from_static(b"abc"));
        assert!(
            client
                .encode(&small)
                .unwrap()
                .ends_with(b"content-length: 3\r\n\r\nabc")
        );
        let large = UpstreamRequest::new(Method::PUT, Url::parse("http://h/f").unwrap())
            .body(Bytes::from(vec![b'x'; COALESCE_BODY_BYTES + 1]));
        assert!(client.encode(&large).unwrap().ends_with(b"\r\n\r\n"));
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
    async fn an_idle_connection_goes_only_to_a_request_on_the_runtime_that_made_it() {
        let server = Scripted::start(|_, _| {
            Some(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".to_vec())
        })
        .await;
        let client = client(0);
        assert_eq!(get(&client, &server).await.unwrap(), b"ok");
        // Another runtime, as another of the service's connection threads
        // is: its socket would be woken from this runtime's event loop, so
        // it makes a connection of its own, and reuses that one.
        let (other, request) = (client.clone(), server.request(Method::GET));
        let bodies = tokio::task::spawn_blocking(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async {
                let mut bodies = Vec::new();
                for _ in 0..2 {
                    let answer = other.send("test", Idempotency::Read, &request).await;
                    bodies.push(read_capped("test", answer.unwrap(), 1 << 10).await.unwrap());
                }
                bodies
            })
        })
        .await
        .unwrap();
        assert_eq!(bodies, [b"ok".to_vec(), b"ok".to_vec()]);
        assert_eq!((server.connections(), server.requests()), (2, 3));
        // Back here, the first connection is still kept for this runtime.
        assert_eq!(get(&client, &server).await.unwrap(), b"ok");
        assert_eq!((server.connections(), server.requests()), (2, 4));
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

    #[test]
    fn backoff_stays_under_its_ceiling() {
        let client = HttpClient::new(HttpSettings::default()).unwrap();
        for attempt in 1..10 {
            assert!(client.backoff(attempt) <= Duration::from_secs(2));
        }
        assert!(client.backoff(1) <= Duration::from_millis(100));
    }
}
