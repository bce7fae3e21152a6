//! acdm-mcp: the Knowledge MCP server at `/mcp`.
//!
//! Four read-only tools over the wiki and the project files (rmcp,
//! streamable HTTP, stateless with JSON responses by default so any
//! replica can answer any request), `/mcp/health` per source, and
//! Prometheus metrics per tool. The service gate in front of it (in the
//! binary) has already refused browsers and checked the service token —
//! or, with people's tokens on, let a request without it through, which
//! `people.rs` authenticates here; this crate adds the `Host` allow-list
//! (`host.rs`: the `Host` header and an absolute-form target's authority,
//! refused with an envelope naming `ACDM_MCP_ALLOWED_HOSTS`) and the
//! tool-level rules.
//!
//! **Architecture invariant:** an adapter over acdm-sources with no
//! business logic; does not depend on acdm-bff or acdm-store.

mod direct;
mod drain;
mod health;
mod host;
mod metrics;
mod people;
mod prompts;
mod resources;
mod server;
mod sessions;
mod tools;

use std::sync::Arc;
use std::time::Duration;

use acdm_core::AbsPath;
use acdm_knowledge::Knowledge;
use acdm_sources::Sources;
use axum::Router;
use axum::extract::Request;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

pub use health::{HealthReport, McpHealth, SourceHealth};
pub use metrics::{IndexMetrics, McpMetrics, NotificationMetrics};
pub use people::{Membership, PeopleAuth, Person, PersonDirectory};
pub use server::{INSTRUCTIONS, KnowledgeServer, ToolLimits};
pub use tools::ReadLimits;

/// How the MCP endpoint runs.
#[derive(Debug, Clone)]
pub struct McpSettings {
    /// `Host` values accepted (`host` or `host:port`); a request naming
    /// another host (in `Host` or in an absolute-form target) gets 403.
    /// An empty list means loopback only (rmcp would read it as "any").
    pub allowed_hosts: Vec<String>,
    /// Keep MCP sessions (SSE streams, `Mcp-Session-Id`) instead of the
    /// default stateless JSON mode. Sessions pin a client to one replica.
    pub sessions: bool,
    /// The folder holding one folder per project.
    pub files_base: AbsPath,
    /// Read windows.
    pub read_limits: ReadLimits,
    /// Cancelled when the server stops taking requests. Calls in flight,
    /// and those idle connections bring within `linger`, are answered
    /// first; then open streams end, so the drain cannot hang on them (the
    /// caller bounds the whole drain).
    pub stopped: CancellationToken,
    /// How long after `stopped` the server's connections may still bring
    /// a new call (idle connections lingering, connections taken from the
    /// listener's queue waiting for their first request).
    pub linger: Duration,
    /// Each tool's rate limit.
    pub limits: ToolLimits,
    /// Documents as text and the content index (the service always has
    /// them); `None` leaves searches to the upstreams and reads documents
    /// as bytes.
    pub knowledge: Option<Knowledge>,
    /// People's access tokens, when `/mcp` takes them (the service gate
    /// then lets requests without the service token through to here).
    pub people: Option<PeopleAuth>,
}

/// The hosts accepted when none are configured.
const LOOPBACK: &[&str] = &["localhost", "127.0.0.1", "::1"];

/// The `/mcp` and `/mcp/health` routes.
pub fn router(sources: Sources, settings: McpSettings, metrics: McpMetrics) -> Router {
    build(sources, settings, metrics, true)
}

/// The routes, with plain tool calls answered directly or not (only in
/// stateless mode: sessions need rmcp's streams).
fn build(sources: Sources, settings: McpSettings, metrics: McpMetrics, direct: bool) -> Router {
    let health = Arc::new(McpHealth::new(sources.clone(), settings.knowledge.clone()));
    let server = KnowledgeServer::new(
        tools::Tools::new(
            sources,
            settings.files_base.clone(),
            settings.read_limits,
            settings.knowledge.clone(),
        ),
        metrics,
        settings.limits.clone(),
    )
    .with_people(settings.people.as_ref().map(PeopleAuth::directory));
    let allowed_hosts = if settings.allowed_hosts.is_empty() {
        LOOPBACK.iter().map(|h| (*h).to_owned()).collect()
    } else {
        settings.allowed_hosts.clone()
    };
    let host_check = host::AllowedHosts::new(&allowed_hosts);
    // rmcp's token ends its streams, and abandons calls still in flight:
    // cancel it only once those are answered.
    let in_flight = drain::InFlight::default();
    let streams = CancellationToken::new();
    tokio::spawn(in_flight.end_streams_after(
        settings.stopped.clone(),
        settings.linger,
        streams.clone(),
    ));
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(allowed_hosts)
        .with_legacy_session_mode(settings.sessions)
        .with_json_response(!settings.sessions)
        .with_sse_keep_alive(Some(Duration::from_secs(15)))
        .with_cancellation_token(streams)
        .with_max_request_body_bytes(direct::MAX_BODY_BYTES);
    let direct = (direct && !settings.sessions).then(|| Arc::new(server.clone()));
    let rmcp = StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    // Shared: a request's copy of the state is one reference count, not a
    // clone of rmcp's service and its configuration.
    let people = settings.people;
    let endpoint = Arc::new(Endpoint {
        rmcp,
        direct,
        host_check,
        in_flight,
        owners: (people.is_some() && settings.sessions).then(Default::default),
        people: people.clone(),
    });
    // Exactly `/mcp` and `/mcp/`: rmcp ignores the path, so a catch-all
    // would also serve `/mcp/mcp` and any other spelling. The host check
    // covers these two routes only; probes answer under any name.
    let router = Router::new()
        .route("/mcp", any(serve).with_state(endpoint.clone()))
        .route("/mcp/", any(serve).with_state(endpoint))
        .route("/mcp/health", get(health_handler).with_state(health));
    match people {
        // RFC 9728: at the resource's path, and at the root for clients
        // that look there first.
        Some(people) => router
            .route(
                "/.well-known/oauth-protected-resource/mcp",
                get(metadata_handler).with_state(people.clone()),
            )
            .route(
                "/.well-known/oauth-protected-resource",
                get(metadata_handler).with_state(people),
            ),
        None => router,
    }
}

async fn metadata_handler(State(people): State<PeopleAuth>) -> Response {
    people.metadata()
}

/// `/mcp`: rmcp's service, with plain stateless tool calls answered
/// directly (`direct.rs`) when sessions are off, behind the host check
/// and the drain's count.
struct Endpoint {
    rmcp: StreamableHttpService<KnowledgeServer, LocalSessionManager>,
    direct: Option<Arc<KnowledgeServer>>,
    host_check: host::AllowedHosts,
    in_flight: drain::InFlight,
    people: Option<PeopleAuth>,
    /// Sessions' openers, with people's tokens and sessions both on.
    owners: Option<sessions::SessionOwners>,
}

/// The host check, then the drain's count of the call, then the answer.
/// Checked and counted here, not by two `from_fn` layers: each of those
/// cloned the boxed route it wraps and boxed a future on every call
/// (`docs/performance.md`, "The hot routes without their layers").
async fn serve(State(endpoint): State<Arc<Endpoint>>, request: Request) -> Response {
    if let Some(refused) = host::refusal_for(&endpoint.host_check, &request) {
        return refused;
    }
    // The gate let a request without the service token through only for
    // a person's token: check it (with people's tokens off, every request
    // here carried the service token).
    let request = match &endpoint.people {
        Some(people)
            if request
                .extensions()
                .get::<acdm_core::identity::ServiceAuthenticated>()
                .is_none() =>
        {
            match people.admit(request).await {
                Ok(request) => request,
                Err(refused) => return refused,
            }
        }
        _ => request,
    };
    let Some(owners) = &endpoint.owners else {
        return endpoint
            .in_flight
            .counting(request, |request| endpoint.answer(request))
            .await;
    };
    // A session serves only whoever opened it.
    let caller = sessions::Owner::of(request.extensions().get::<Person>());
    let named = sessions::requested(request.headers());
    if let Some(id) = &named
        && !owners.admits(id, &caller)
    {
        return sessions::not_found();
    }
    let method = request.method().clone();
    let response = endpoint
        .in_flight
        .counting(request, |request| endpoint.answer(request))
        .await;
    sessions::after(owners, &method, named.as_deref(), caller, &response);
    response
}

impl Endpoint {
    async fn answer(&self, request: Request) -> Response {
        let request = match &self.direct {
            Some(server) => match direct::answer(server, request).await {
                Ok(response) => return response,
                Err(request) => request,
            },
            None => request,
        };
        self.rmcp.handle(request).await.map(axum::body::Body::new)
    }
}

async fn health_handler(State(health): State<Arc<McpHealth>>) -> Response {
    axum::Json(health.report().await).into_response()
}
