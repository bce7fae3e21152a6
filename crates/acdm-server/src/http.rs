//! Request plumbing shared by every route, as one layer ([`FrontLayer`]):
//! the request id, the request span and its closing log line, the service
//! gate, the body-size limit, the deadline, the request metrics, and
//! turning a panic into an `internal_error` envelope instead of a dropped
//! connection.

use std::convert::Infallible;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use acdm_bff::envelope::{Outcome, failure, internal_message};
use acdm_core::business::wire::BusinessOp;
use acdm_core::nc::NcOp;
use acdm_core::project::ProjectOp;
use acdm_core::{ErrorCode, RequestId};
use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderName, HeaderValue, Response as HttpResponse, header};
use axum::response::Response;
use futures_util::FutureExt as _;
use http_body_util::Limited;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use tracing::field::Empty;
use tracing::{Instrument as _, Span};

use crate::gate::ServiceGate;
use crate::health::{Probe, Readiness};

/// The request/response header carrying the request id.
pub const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// `X-ACDM-Timeout-Ms`, as `http` spells header names (lowercase): a
/// lookup by text parses and lowercases the name on every request, as
/// the identity headers' did (`acdm_bff`'s pipeline).
const TIMEOUT_MS: HeaderName = HeaderName::from_static("x-acdm-timeout-ms");

/// How long a request may take, and how much of a caller's own wait it
/// uses: the rest is left for the answer to travel back.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    /// `ACDM_REQUEST_TIMEOUT_SECONDS`.
    pub request_timeout: Duration,
}

impl Budget {
    /// The time this request may take: the configured timeout, or nine
    /// tenths of what the caller says it waits (`X-ACDM-Timeout-Ms`), when
    /// that is less.
    pub fn for_request(&self, headers: &axum::http::HeaderMap) -> Duration {
        let caller = headers
            .get(TIMEOUT_MS)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(|ms| Duration::from_millis(ms.saturating_mul(9) / 10));
        caller.map_or(self.request_timeout, |c| c.min(self.request_timeout))
    }
}

/// The global middleware, as one tower layer over every route. Outermost
/// first, it does what five layers did (`docs/performance.md`,
/// "Middleware"):
///
/// 1. marks the secret headers' values sensitive, so that no `Debug` of
///    the request prints them ([`SENSITIVE`]);
/// 2. takes the caller's `X-Request-Id` when it is well-formed, else makes
///    one, stores it in the request extensions and echoes it on the
///    response; while the server drains, every response asks its client
///    to close the connection, so a load balancer's kept-alive
///    connections end cleanly after their current request instead of
///    being closed under one it is about to send;
/// 3. opens the request span ([`make_span`]) and logs its closing line
///    ([`on_response`]);
/// 4. turns a panic of what runs inside into an `internal_error` envelope
///    ([`panic_response`]) instead of a dropped connection;
/// 5. the edge ([`Edge`]): counts the request (refused and panicked ones
///    included), checks the service gate and the body-size limit, and
///    runs the rest by the request's deadline, answering a route's panic
///    itself so that it is counted.
///
/// Each of axum's `from_fn` layers cloned its inner service into a boxed
/// one and boxed a future per request, and the trace and panic layers
/// wrapped the response body in two more boxes: one future here does it
/// all.
#[derive(Clone)]
pub struct FrontLayer {
    front: Arc<Front>,
}

/// What the global middleware works with.
struct Front {
    readiness: Arc<Readiness>,
    edge: Edge,
}

impl FrontLayer {
    /// The layer, with the server's readiness (is it draining?) and what
    /// the edge checks requests with.
    pub fn new(readiness: Arc<Readiness>, edge: Edge) -> Self {
        Self {
            front: Arc::new(Front { readiness, edge }),
        }
    }
}

impl<S> tower::Layer<S> for FrontLayer {
    type Service = FrontService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        FrontService {
            inner,
            front: self.front.clone(),
        }
    }
}

/// A route under the global middleware ([`FrontLayer`]).
#[derive(Clone)]
pub struct FrontService<S> {
    inner: S,
    front: Arc<Front>,
}

/// The request headers whose values are secrets: never printed.
pub const SENSITIVE: [HeaderName; 4] = [
    crate::gate::SERVICE_AUTH,
    header::AUTHORIZATION,
    header::COOKIE,
    header::PROXY_AUTHORIZATION,
];

impl<S> tower::Service<Request> for FrontService<S>
where
    S: tower::Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request) -> Self::Future {
        // The service made ready is the one called; its clone stays for
        // the next request.
        let inner = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, inner);
        let front = self.front.clone();
        let started = std::time::Instant::now();
        let headers = req.headers_mut();
        for name in &SENSITIVE {
            if let header::Entry::Occupied(mut entry) = headers.entry(name) {
                for value in entry.iter_mut() {
                    value.set_sensitive(true);
                }
            }
        }
        let id = req
            .headers()
            .get(&REQUEST_ID)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| RequestId::parse(v).ok())
            .unwrap_or_else(RequestId::random);
        let echo = HeaderValue::from_str(id.as_str()).ok();
        // Read from the path once, for the span and the metrics.
        let op = bff_op(req.uri().path());
        let span = make_span(&req, &id, op);
        req.extensions_mut().insert(id);
        Box::pin(async move {
            // The edge answers a route's panic itself; this guard is for a
            // panic of the edge's own.
            let guarded = AssertUnwindSafe(front.edge.run(req, op, inner)).catch_unwind();
            let mut response = guarded
                .instrument(span.clone())
                .await
                .unwrap_or_else(|panic| span.in_scope(|| panic_response(panic)));
            on_response(&response, started.elapsed(), &span);
            drop(span);
            if let Some(value) = echo {
                response.headers_mut().insert(REQUEST_ID, value);
            }
            if front.readiness.is_draining() {
                response
                    .headers_mut()
                    .insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            Ok(response)
        })
    }
}

/// What the edge checks a request with.
#[derive(Clone)]
pub struct Edge {
    /// Request counts and latencies.
    pub metrics: HttpMetrics,
    /// The service token.
    pub gate: ServiceGate,
    /// `ACDM_MAX_REQUEST_BYTES`.
    pub max_request_bytes: usize,
    /// The request's time budget.
    pub budget: Budget,
}

/// The edge's decision on a request.
enum Admitted {
    /// Run it, by this deadline.
    Run(Request, tokio::time::Instant),
    /// Answer this instead (the gate's or the body limit's refusal).
    Refused(Response),
}

impl Edge {
    /// Counts the request (`op`: the BFF operation its path names, as
    /// [`bff_op`] reads it), and answers it with `inner` if the gate and
    /// the body limit admit it, by its deadline.
    async fn run<S>(&self, req: Request, op: &'static str, mut inner: S) -> Response
    where
        S: tower::Service<Request, Response = Response, Error = Infallible>,
    {
        let counted = self.metrics.start(req.uri().path(), op);
        let response = match self.admit(req) {
            Admitted::Run(req, deadline) => {
                // A panic of the route (in its `call` or its future) is
                // answered here, so that it is counted like any answer.
                let answer = AssertUnwindSafe(async move {
                    match inner.call(req).await {
                        Ok(response) => response,
                        Err(never) => match never {},
                    }
                })
                .catch_unwind();
                acdm_sources::deadline::within(deadline, answer)
                    .await
                    .unwrap_or_else(panic_response)
            }
            Admitted::Refused(refused) => refused,
        };
        self.metrics.finish(counted, &response);
        response
    }

    fn admit(&self, req: Request) -> Admitted {
        let service = match crate::gate::decide(&self.gate, &req) {
            crate::gate::Decision::Refuse(refused) => return Admitted::Refused(refused),
            crate::gate::Decision::Service => true,
            crate::gate::Decision::Pass => false,
        };
        if let Some(refused) = body_too_large(self.max_request_bytes, &req) {
            return Admitted::Refused(refused);
        }
        let mut req = limit_body(self.max_request_bytes, req);
        if service {
            req.extensions_mut()
                .insert(acdm_core::identity::ServiceAuthenticated);
        }
        // Every upstream call the request makes ends by its deadline
        // (`acdm_sources::deadline`), also when the work runs in another
        // task (the MCP server's), which reads it from the extensions.
        let deadline = tokio::time::Instant::now() + self.budget.for_request(req.headers());
        req.extensions_mut()
            .insert(acdm_sources::deadline::Deadline(deadline));
        Admitted::Run(req, deadline)
    }
}

/// The request span: the request id, method and path (never the query or
/// headers), the BFF operation the path names (`op`, as [`bff_op`] reads
/// it: known from the start, so not a record of its own later), plus
/// fields the gate and the BFF fill in as they learn them.
fn make_span(req: &Request, id: &RequestId, op: &'static str) -> Span {
    let path = req.uri().path();
    let op = Some(op).filter(|op| *op != "unknown");
    tracing::info_span!(
        "request",
        request_id = %id.as_str(),
        method = %req.method(),
        path = %path,
        op,
        agent = Empty,
        user = Empty,
        thread = Empty,
        project = Empty,
        status = Empty,
        outcome = Empty,
        latency_ms = Empty,
    )
}

/// A response's outcome: the code a handler or a refusal named, else its
/// status class.
fn outcome<B>(response: &HttpResponse<B>) -> &'static str {
    let status = response.status();
    response.extensions().get::<Outcome>().map_or_else(
        || {
            if status.is_server_error() {
                "server_error"
            } else if status.is_client_error() {
                "client_error"
            } else {
                "ok"
            }
        },
        |o| o.0,
    )
}

/// Records status, latency and outcome, and logs one line per request
/// (probes at debug level).
fn on_response<B>(response: &HttpResponse<B>, latency: Duration, span: &Span) {
    let status = response.status();
    let outcome = outcome(response);
    tracing::record_all!(
        span,
        status = status.as_u16(),
        outcome = outcome,
        latency_ms = latency.as_secs_f64() * 1000.0,
    );
    let _guard = span.enter();
    if response.extensions().get::<Probe>().is_some() {
        tracing::debug!("probe answered");
    } else if status.is_server_error() {
        tracing::warn!("request finished");
    } else {
        tracing::info!("request finished");
    }
}

/// Requests by surface and status class, and their latency; BFF
/// operations by op and outcome code, and their latency by op. Bounded
/// labels only, never a raw path.
#[derive(Debug, Clone)]
pub struct HttpMetrics {
    requests: Family<SurfaceLabels, Counter>,
    latency: Family<SurfaceLabel, Histogram>,
    /// Connections open now (bounded by `ACDM_MAX_CONNECTIONS`).
    pub open_connections: Gauge,
    bff_operations: Family<OperationLabels, Counter>,
    bff_latency: Family<OperationLabel, Histogram>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OperationLabels {
    op: &'static str,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OperationLabel {
    op: &'static str,
}

/// The BFF operation a raw path names (`nc.write`, `business.get_meeting`,
/// `project.overview`), or `unknown`: one of a fixed set (the operations
/// the three families list), whatever the caller sends.
fn bff_op(path: &str) -> &'static str {
    fn label<T: std::str::FromStr>(name: &str, label: fn(T) -> &'static str) -> &'static str {
        name.parse::<T>().map_or("unknown", label)
    }
    let Some(rest) = path.strip_prefix("/agent-tools/") else {
        return "unknown";
    };
    match rest.split_once('/') {
        Some(("nc", op)) => label(op, NcOp::label),
        Some(("business", op)) => label(op, BusinessOp::label),
        Some(("project", op)) => label(op, ProjectOp::label),
        _ => "unknown",
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SurfaceLabels {
    surface: &'static str,
    status: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SurfaceLabel {
    surface: &'static str,
}

impl HttpMetrics {
    /// Registers the HTTP metrics.
    pub fn register(registry: &mut prometheus_client::registry::Registry) -> Self {
        let requests = Family::<SurfaceLabels, Counter>::default();
        let latency = Family::<SurfaceLabel, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.0005, 2.0, 16))
        });
        registry.register(
            "acdm_http_requests",
            "HTTP requests by surface and status class",
            requests.clone(),
        );
        registry.register(
            "acdm_http_request_duration_seconds",
            "HTTP request latency by surface",
            latency.clone(),
        );
        let open_connections = Gauge::default();
        registry.register(
            "acdm_http_open_connections",
            "HTTP connections open now (at most ACDM_MAX_CONNECTIONS)",
            open_connections.clone(),
        );
        let bff_operations = Family::<OperationLabels, Counter>::default();
        let bff_latency = Family::<OperationLabel, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.0005, 2.0, 16))
        });
        registry.register(
            "acdm_bff_operations",
            "Agent Tools BFF operations by op and outcome code",
            bff_operations.clone(),
        );
        registry.register(
            "acdm_bff_operation_duration_seconds",
            "Agent Tools BFF operation latency by op",
            bff_latency.clone(),
        );
        Self {
            requests,
            latency,
            open_connections,
            bff_operations,
            bff_latency,
        }
    }
}

/// Which part of the API a raw path belongs to.
fn surface(path: &str) -> &'static str {
    match path {
        "/healthz" | "/readyz" | "/mcp/health" | "/metrics" => "probe",
        _ if path == "/mcp" || path.starts_with("/mcp/") => "mcp",
        _ if path == "/agent-tools" || path.starts_with("/agent-tools/") => "agent_tools",
        _ if path == "/admin" || path.starts_with("/admin/") => "admin",
        _ => "other",
    }
}

/// A request being counted: its surface, its BFF operation, its start.
struct Counted {
    surface: &'static str,
    op: Option<&'static str>,
    started: std::time::Instant,
}

impl HttpMetrics {
    /// Starts counting a request to the raw `path`, whose BFF operation
    /// [`bff_op`] read as `op`.
    fn start(&self, path: &str, op: &'static str) -> Counted {
        let surface = surface(path);
        Counted {
            surface,
            op: (surface == "agent_tools").then_some(op),
            started: std::time::Instant::now(),
        }
    }

    /// Counts the request's `response` and its latency.
    fn finish<B>(&self, counted: Counted, response: &HttpResponse<B>) {
        let Counted {
            surface,
            op,
            started,
        } = counted;
        let elapsed = started.elapsed().as_secs_f64();
        if let Some(op) = op {
            self.bff_operations
                .get_or_create(&OperationLabels {
                    op,
                    outcome: outcome(response),
                })
                .inc();
            self.bff_latency
                .get_or_create(&OperationLabel { op })
                .observe(elapsed);
        }
        let status = match response.status().as_u16() {
            100..=199 => "1xx",
            200..=299 => "2xx",
            300..=399 => "3xx",
            400..=499 => "4xx",
            _ => "5xx",
        };
        self.requests
            .get_or_create(&SurfaceLabels { surface, status })
            .inc();
        self.latency
            .get_or_create(&SurfaceLabel { surface })
            .observe(elapsed);
    }
}

/// The refusal of a body that `Content-Length` says is larger than `max`
/// bytes.
fn body_too_large(max: usize, req: &Request) -> Option<Response> {
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    declared.filter(|n| *n > max as u64).map(|_| {
        let mut response = failure(
            ErrorCode::PayloadTooLarge,
            format!("the request body is larger than this server accepts ({max} bytes)"),
        );
        response
            .extensions_mut()
            .insert(Outcome("payload_too_large"));
        response
    })
}

/// The request with its body cut off past `max` bytes: reading more fails
/// (the extractor then answers `payload_too_large`).
fn limit_body(max: usize, req: Request) -> Request {
    let (parts, body) = req.into_parts();
    Request::from_parts(parts, Body::new(Limited::new(body, max)))
}

/// The answer when a handler panics: an `internal_error` envelope. The
/// panic message is not sent; the panic hook has logged it.
fn panic_response(_panic: Box<dyn std::any::Any + Send + 'static>) -> Response {
    tracing::error!("a request handler panicked");
    let mut response = failure(ErrorCode::InternalError, internal_message());
    response.extensions_mut().insert(Outcome("panic"));
    response
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use axum::http::{HeaderMap, HeaderName, HeaderValue};

    use super::{Budget, TIMEOUT_MS, bff_op};

    #[test]
    fn the_timeout_header_is_the_protocols_and_its_wait_bounds_the_budget() {
        assert!(
            TIMEOUT_MS
                .as_str()
                .eq_ignore_ascii_case(acdm_core::headers::TIMEOUT_MS)
        );
        let budget = Budget {
            request_timeout: Duration::from_secs(30),
        };
        let with = |value: &str| {
            let mut headers = HeaderMap::new();
            let name = HeaderName::from_bytes(acdm_core::headers::TIMEOUT_MS.as_bytes()).unwrap();
            headers.insert(name, HeaderValue::from_str(value).unwrap());
            budget.for_request(&headers)
        };
        assert_eq!(with("1000"), Duration::from_millis(900));
        assert_eq!(with(" 2000 "), Duration::from_millis(1800));
        assert_eq!(with("60000"), Duration::from_secs(30));
        assert_eq!(with("soon"), Duration::from_secs(30));
        assert_eq!(
            budget.for_request(&HeaderMap::new()),
            Duration::from_secs(30)
        );
    }

    #[test]
    fn every_operation_has_its_own_label_and_anything_else_is_unknown() {
        for op in acdm_core::nc::NcOp::ALL {
            assert_eq!(bff_op(&format!("/agent-tools/nc/{op}")), format!("nc.{op}"));
        }
        for op in acdm_core::business::wire::BusinessOp::ALL {
            assert_eq!(bff_op(&format!("/{}", op.path())), op.label());
        }
        for op in acdm_core::project::ProjectOp::ALL {
            assert_eq!(bff_op(&format!("/{}", op.path())), op.label());
        }
        assert_eq!(bff_op("/agent-tools/project/overview"), "project.overview");
        for path in [
            "/agent-tools/nc/",
            "/agent-tools/nc/WRITE",
            "/agent-tools/nc/%77rite",
            "/agent-tools/nc/write/x",
            "/agent-tools/other",
            "/agent-tools/business/",
            "/agent-tools/business/nc",
            "/agent-tools/project/milestone",
            "/agent-tools/project/milestone/advance/x",
            "/agent-tools/projects/overview",
        ] {
            assert_eq!(bff_op(path), "unknown", "{path}");
        }
    }
}
