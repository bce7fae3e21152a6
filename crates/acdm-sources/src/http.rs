//! The one HTTP client every upstream call goes through.
//!
//! hyper's pooled client, used directly: one parse of the URL per request,
//! no layers for what this client never does (follow redirects, honour
//! proxy variables, decompress). Timeouts are explicit, redirects are never
//! followed (a redirect to another host would carry our credentials: the
//! 3xx is the caller's to map), TLS is rustls with the webpki roots, and
//! retries are bounded: only idempotent requests, only on transient
//! outcomes (the request could not be sent or its answer broke off,
//! timeouts, 502/503/504, 429/503 with a short `Retry-After`), with
//! exponential backoff and full jitter inside the request's time budget.
//! Transport errors become [`SourceError`]s without the URL.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use url::Url;

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
    /// their deadline.
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

/// Whether a request may be sent twice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Idempotency {
    /// Reads (GET, PROPFIND, search): retried on transient failures.
    Read,
    /// Writes: sent once. A failed write is re-checked by its caller, never
    /// blindly repeated.
    Write,
}

type Connector = hyper_rustls::HttpsConnector<HttpConnector>;

/// The upstream HTTP client.
#[derive(Debug, Clone)]
pub struct HttpClient {
    client: Client<Connector, Full<Bytes>>,
    settings: Arc<HttpSettings>,
    user_agent: HeaderValue,
    /// One semaphore per upstream `host:port`, created on first use.
    hosts: Arc<Mutex<HashMap<String, Arc<Semaphore>>>>,
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

    /// Basic credentials, in a header marked sensitive (never logged).
    pub(crate) fn basic_auth(mut self, user: &str, password: &str) -> Self {
        use base64::Engine as _;
        let encoded =
            base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        if let Ok(mut value) = HeaderValue::from_str(&format!("Basic {encoded}")) {
            value.set_sensitive(true);
            self.headers.insert(header::AUTHORIZATION, value);
        }
        self
    }
}

/// Why an attempt gave no response.
enum Failed {
    /// The request could not be made at all (an unusable URL): not worth
    /// another attempt.
    Unusable,
    /// The transport failed.
    Transport(Transport),
    /// The deadline passed before the request was sent.
    Unsent,
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
    /// What a failure of hyper's client was.
    fn of(error: &hyper_util::client::legacy::Error) -> Self {
        if timed_out(error) {
            Self::Timeout
        } else if error.is_connect() {
            Self::Connect
        } else {
            Self::Send
        }
    }
}

/// Whether an I/O timeout is anywhere in `error`'s chain of sources.
fn timed_out(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(error);
    while let Some(error) = next {
        if error
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut)
        {
            return true;
        }
        next = error.source();
    }
    false
}

/// An upstream response, holding its host's connection slot until its body
/// is read or it is dropped. Reading the body ends by the call's deadline,
/// and a silence longer than the read timeout ends it too.
#[derive(Debug)]
pub(crate) struct Upstream {
    source_name: &'static str,
    head: http::response::Parts,
    body: Incoming,
    deadline: Instant,
    read_timeout: Duration,
    /// Held, not read: given back when the response is dropped.
    _slot: Option<OwnedSemaphorePermit>,
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
        loop {
            let wait = self
                .deadline
                .saturating_duration_since(Instant::now())
                .min(self.read_timeout);
            // Past the deadline not even a chunk already received is read.
            if wait.is_zero() {
                return Err(transport_error(self.source_name, Transport::Timeout));
            }
            let frame = match tokio::time::timeout(wait, self.body.frame()).await {
                Err(_) => return Err(transport_error(self.source_name, Transport::Timeout)),
                Ok(None) => return Ok(None),
                Ok(Some(Err(error))) => {
                    let kind = if timed_out(&error) {
                        Transport::Timeout
                    } else {
                        Transport::Body
                    };
                    return Err(transport_error(self.source_name, kind));
                }
                Ok(Some(Ok(frame))) => frame,
            };
            // Trailers carry nothing we read.
            if let Ok(data) = frame.into_data() {
                return Ok(Some(data));
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

impl HttpClient {
    /// Builds the client.
    pub fn new(settings: HttpSettings) -> Result<Self, SourceError> {
        let roots = rustls::RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        };
        let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|_| SourceError::NotConfigured("TLS could not be set up".to_owned()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
        let mut tcp = HttpConnector::new();
        tcp.enforce_http(false);
        tcp.set_nodelay(true);
        tcp.set_connect_timeout(Some(settings.connect_timeout));
        // As reqwest did: a pooled connection that a NAT or balancer
        // dropped is noticed instead of costing a whole read timeout.
        tcp.set_keepalive(Some(Duration::from_secs(15)));
        tcp.set_keepalive_interval(Some(Duration::from_secs(15)));
        tcp.set_keepalive_retries(Some(3));
        #[cfg(target_os = "linux")]
        tcp.set_tcp_user_timeout(Some(Duration::from_secs(30)));
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .wrap_connector(tcp);
        #[expect(clippy::disallowed_methods, reason = "this is the one blessed builder")]
        let client = Client::builder(TokioExecutor::new())
            .pool_timer(TokioTimer::new())
            .pool_idle_timeout(Duration::from_secs(60))
            .pool_max_idle_per_host(settings.max_connections_per_host)
            .build(connector);
        let user_agent = HeaderValue::from_str(&settings.user_agent).map_err(|_| {
            SourceError::NotConfigured("the upstream User-Agent is not a header value".to_owned())
        })?;
        Ok(Self {
            client,
            settings: Arc::new(settings),
            user_agent,
            hosts: Arc::default(),
        })
    }

    /// The settings.
    pub fn settings(&self) -> &HttpSettings {
        &self.settings
    }

    /// The connection slots of `url`'s host.
    fn slots(&self, url: &Url) -> Arc<Semaphore> {
        let host = format!(
            "{}:{}",
            url.host_str().unwrap_or_default(),
            url.port_or_known_default().unwrap_or_default()
        );
        let mut hosts = self.hosts.lock().unwrap_or_else(|p| p.into_inner());
        hosts
            .entry(host)
            .or_insert_with(|| {
                Arc::new(Semaphore::new(
                    self.settings.max_connections_per_host.max(1),
                ))
            })
            .clone()
    }

    /// hyper's request for one attempt.
    fn prepare(&self, request: &UpstreamRequest) -> Option<http::Request<Full<Bytes>>> {
        if !matches!(request.url.scheme(), "http" | "https") {
            return None;
        }
        let uri = http::Uri::try_from(request.url.as_str()).ok()?;
        let mut prepared = http::Request::new(Full::new(request.body.clone()));
        *prepared.method_mut() = request.method.clone();
        *prepared.uri_mut() = uri;
        *prepared.headers_mut() = request.headers.clone();
        let headers = prepared.headers_mut();
        headers
            .entry(header::USER_AGENT)
            .or_insert_with(|| self.user_agent.clone());
        headers
            .entry(header::ACCEPT)
            .or_insert_with(|| HeaderValue::from_static("*/*"));
        Some(prepared)
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
        let attempts = match idempotency {
            Idempotency::Read => self.settings.retries + 1,
            Idempotency::Write => 1,
        };
        let deadline = crate::deadline::sooner(Instant::now() + self.settings.timeout);
        // Whether any attempt reached the upstream: a call that never did
        // is `NotSent`, which a write's caller can trust as "nothing
        // happened".
        let sent = std::sync::atomic::AtomicBool::new(false);
        let call = retrying(source_name, deadline, attempts, |attempt| {
            let sent = &sent;
            async move {
                let Some(prepared) = self.prepare(request) else {
                    return (Err(Failed::Unusable), None);
                };
                // Never closed, so always a slot once one is free.
                let slot = self.slots(&request.url).acquire_owned().await.ok();
                if deadline <= Instant::now() {
                    return (Err(Failed::Unsent), None);
                }
                sent.store(true, std::sync::atomic::Ordering::Release);
                let outcome = match tokio::time::timeout(
                    self.settings.read_timeout,
                    self.client.request(prepared),
                )
                .await
                {
                    Ok(Ok(response)) => Ok(response),
                    Ok(Err(error)) => Err(Transport::of(&error)),
                    Err(_) => Err(Transport::Timeout),
                };
                let delay = match &outcome {
                    Ok(response) => {
                        retry_delay(response.status(), response.headers(), &self.settings)
                    }
                    Err(_) => Some(self.backoff(attempt)),
                };
                let read_timeout = self.settings.read_timeout;
                (
                    outcome
                        .map(|response| {
                            let (head, body) = response.into_parts();
                            Upstream {
                                source_name,
                                head,
                                body,
                                deadline,
                                read_timeout,
                                _slot: slot,
                            }
                        })
                        .map_err(Failed::Transport),
                    delay,
                )
            }
        });
        let unsent = || {
            tracing::debug!(
                source = source_name,
                "upstream call not made: its deadline passed first"
            );
            SourceError::NotSent(source_name)
        };
        if deadline <= Instant::now() {
            return Err(unsent());
        }
        match tokio::time::timeout_at(deadline, call).await {
            Ok(Ok(upstream)) => Ok(upstream),
            Ok(Err(Failed::Transport(kind))) => Err(transport_error(source_name, kind)),
            Ok(Err(Failed::Unusable)) => Err(SourceError::upstream(
                source_name,
                None,
                "the request failed",
            )),
            Ok(Err(Failed::Unsent)) => Err(unsent()),
            Err(_) if !sent.load(std::sync::atomic::Ordering::Acquire) => Err(unsent()),
            Err(_) => {
                tracing::debug!(source = source_name, "upstream call reached its deadline");
                Err(SourceError::Timeout(source_name))
            }
        }
    }

    /// Full-jitter exponential backoff: a random delay up to base × 2^(n−1),
    /// capped at 2 s.
    fn backoff(&self, attempt: u32) -> Duration {
        let ceiling = self
            .settings
            .backoff
            .saturating_mul(1 << attempt.saturating_sub(1).min(5))
            .min(Duration::from_secs(2));
        let millis = u64::try_from(ceiling.as_millis()).unwrap_or(2000).max(1);
        Duration::from_millis(fastrand::u64(0..=millis))
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
    Some(Duration::from_secs(u64::try_from(reset - now).unwrap_or(0)))
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
            .basic_auth("svc", "app-password");
        let prepared = client.prepare(&request).unwrap();
        let authorization = &prepared.headers()[header::AUTHORIZATION];
        // base64("svc:app-password")
        assert_eq!(authorization, "Basic c3ZjOmFwcC1wYXNzd29yZA==");
        assert!(authorization.is_sensitive(), "never logged");
        assert_eq!(prepared.headers()["depth"], "0");
        assert_eq!(
            prepared.headers()[header::USER_AGENT],
            HttpSettings::default().user_agent.as_str()
        );
        assert_eq!(prepared.headers()[header::ACCEPT], "*/*");
        assert_eq!(
            prepared.uri().to_string(),
            "https://cloud.example/remote.php/dav/files/u/a%20b.md?x=1"
        );
        // Only HTTP(S) is ever sent.
        let ftp = UpstreamRequest::new(Method::GET, Url::parse("ftp://cloud.example/x").unwrap());
        assert!(client.prepare(&ftp).is_none());
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
