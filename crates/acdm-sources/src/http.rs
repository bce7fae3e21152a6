//! The one HTTP client every upstream call goes through.
//!
//! Timeouts are explicit (reqwest has none by default), redirects are never
//! followed (a redirect to another host would carry our credentials), TLS
//! is rustls with the webpki roots, and retries are bounded: only
//! idempotent requests, only on transient outcomes (connection failures,
//! timeouts, 502/503/504, 429/503 with a short `Retry-After`), with
//! exponential backoff and full jitter inside the request's time budget.
//! Transport errors are turned into [`SourceError`]s without the URL.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use reqwest::{Client, RequestBuilder, Response, StatusCode, header};

use crate::error::SourceError;

/// Settings shared by every upstream client.
#[derive(Debug, Clone)]
pub struct HttpSettings {
    /// Time to establish a connection.
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

/// The upstream HTTP client.
#[derive(Debug, Clone)]
pub struct HttpClient {
    client: Client,
    settings: Arc<HttpSettings>,
    /// One semaphore per upstream `host:port`, created on first use.
    hosts: Arc<Mutex<HashMap<String, Arc<Semaphore>>>>,
}

/// Why an attempt gave no response.
enum Failed {
    /// The transport failed.
    Http(reqwest::Error),
    /// The deadline passed before the request was sent.
    Unsent,
}

/// An upstream response, holding its host's connection slot until its body
/// is read or it is dropped. Reads like the `reqwest::Response` it wraps.
#[derive(Debug)]
pub(crate) struct Upstream {
    response: Response,
    slot: Option<OwnedSemaphorePermit>,
}

impl Upstream {
    /// The body as a stream of chunks; the slot is held until the stream
    /// ends or is dropped.
    pub(crate) fn bytes_stream(
        self,
    ) -> impl futures_util::Stream<Item = Result<bytes::Bytes, reqwest::Error>> + Send + 'static
    {
        let slot = self.slot;
        self.response.bytes_stream().map(move |chunk| {
            let _held = &slot;
            chunk
        })
    }
}

impl std::ops::Deref for Upstream {
    type Target = Response;
    fn deref(&self) -> &Response {
        &self.response
    }
}

impl std::ops::DerefMut for Upstream {
    fn deref_mut(&mut self) -> &mut Response {
        &mut self.response
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
        #[expect(clippy::disallowed_methods, reason = "this is the one blessed builder")]
        let client = Client::builder()
            .tls_backend_preconfigured(tls)
            .connect_timeout(settings.connect_timeout)
            .read_timeout(settings.read_timeout)
            .timeout(settings.timeout)
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(settings.user_agent.clone())
            .pool_idle_timeout(Duration::from_secs(60))
            .pool_max_idle_per_host(settings.max_connections_per_host)
            .build()
            .map_err(|_| {
                SourceError::NotConfigured("the HTTP client could not be built".to_owned())
            })?;
        Ok(Self {
            client,
            settings: Arc::new(settings),
            hosts: Arc::default(),
        })
    }

    /// The settings.
    pub fn settings(&self) -> &HttpSettings {
        &self.settings
    }

    /// The connection slots of `url`'s host.
    fn slots(&self, url: &url::Url) -> Arc<Semaphore> {
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

    /// Sends the request `build` makes (called once per attempt) and
    /// returns the response, whatever its status; statuses are mapped by
    /// the caller, which knows the protocol. `Read`s are retried on
    /// transient outcomes. The whole call — waiting for a connection slot,
    /// every attempt, the waits between them and reading the body — ends
    /// by one deadline: [`HttpSettings::timeout`] from now, or the
    /// request's own ([`crate::deadline`]) when sooner; past it the call
    /// is a [`SourceError::Timeout`].
    pub(crate) async fn send(
        &self,
        source_name: &'static str,
        idempotency: Idempotency,
        build: impl Fn(&Client) -> RequestBuilder,
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
            let request = build(&self.client).build();
            let sent = &sent;
            async move {
                let mut request = match request {
                    Ok(request) => request,
                    Err(error) => return (Err(Failed::Http(error)), None),
                };
                // Never closed, so always a slot once one is free.
                let slot = self.slots(request.url()).acquire_owned().await.ok();
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return (Err(Failed::Unsent), None);
                }
                // This attempt, its body included, ends by the deadline.
                *request.timeout_mut() = Some(left);
                sent.store(true, std::sync::atomic::Ordering::Release);
                let outcome = self.client.execute(request).await;
                let delay = match &outcome {
                    Ok(response) => retry_delay(response, &self.settings),
                    Err(error) if is_transient(error) => Some(self.backoff(attempt)),
                    Err(_) => None,
                };
                (
                    outcome
                        .map(|response| Upstream { response, slot })
                        .map_err(Failed::Http),
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
            Ok(Err(Failed::Http(error))) => Err(transport_error(source_name, error)),
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

/// A transient failure worth another attempt.
fn is_transient(error: &reqwest::Error) -> bool {
    error.is_connect() || error.is_timeout() || (error.is_request() && !error.is_builder())
}

/// How long to wait before retrying this response, if it is worth retrying.
fn retry_delay(response: &Response, settings: &HttpSettings) -> Option<Duration> {
    match response.status() {
        StatusCode::BAD_GATEWAY | StatusCode::GATEWAY_TIMEOUT => Some(settings.backoff),
        StatusCode::SERVICE_UNAVAILABLE | StatusCode::TOO_MANY_REQUESTS => {
            match retry_after(response.headers()) {
                Some(after) if after <= settings.max_retry_after => Some(after),
                Some(_) => None,
                None if response.status() == StatusCode::SERVICE_UNAVAILABLE => {
                    Some(settings.backoff)
                }
                None => None,
            }
        }
        _ => None,
    }
}

/// `Retry-After` in seconds (the HTTP-date form is read as "soon"), or
/// GitLab's `RateLimit-Reset` (Unix seconds).
pub(crate) fn retry_after(headers: &header::HeaderMap) -> Option<Duration> {
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
pub(crate) fn transport_error(source_name: &'static str, error: reqwest::Error) -> SourceError {
    let error = error.without_url();
    if error.is_timeout() {
        SourceError::Timeout(source_name)
    } else if error.is_connect() {
        SourceError::upstream(source_name, None, "cannot connect")
    } else if error.is_body() || error.is_decode() {
        SourceError::upstream(
            source_name,
            None,
            "the connection broke while reading the response",
        )
    } else if error.is_redirect() {
        SourceError::upstream(source_name, None, "unexpected redirect")
    } else {
        SourceError::upstream(source_name, None, "the request failed")
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
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| transport_error(source_name, e))?
    {
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
    headers: &header::HeaderMap,
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
    fn backoff_stays_under_its_ceiling() {
        let client = HttpClient::new(HttpSettings::default()).unwrap();
        for attempt in 1..10 {
            assert!(client.backoff(attempt) <= Duration::from_secs(2));
        }
        assert!(client.backoff(1) <= Duration::from_millis(100));
    }
}
