//! The application: builds everything from a [`Config`], binds the
//! listener (port 0 in tests) and runs until its shutdown token is
//! cancelled, then drains within the grace period.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use acdm_bff::admin::{self, AdminState};
use acdm_bff::approval::{Approvals, Delivery, DeliveryStats};
use acdm_bff::business::{AttachmentSweep, BusinessState, Swept};
use acdm_bff::envelope::failure;
use acdm_bff::nc::{NcLimits, NcState};
use acdm_bff::pipeline::{AgentLimits, PipelineState};
use acdm_bff::project::ProjectState;
use acdm_bff::switch::KillSwitch;
use acdm_core::approval::ApprovalTtl;
use acdm_core::limit::RateLimiter;
use acdm_core::{ErrorCode, ScopeResolver, SharedToken, UserId};
use acdm_extract::{Extractor, ExtractorConfig, Limits as ExtractLimits};
use acdm_journal::{Journal, Settled};
use acdm_knowledge::{
    Knowledge, KnowledgeError, KnowledgeSettings, KnowledgeSources, ProjectFolders,
};
use acdm_mcp::{McpMetrics, McpSettings, ReadLimits, ToolLimits};
use acdm_sources::gitlab::{GitLabConfig, GitLabWiki};
use acdm_sources::http::HttpClient;
use acdm_sources::local::{LocalFileSearch, LocalFileStore, LocalWiki};
use acdm_sources::nextcloud::{NextcloudConfig, NextcloudFiles, NextcloudSearch};
use acdm_sources::webhook::WebhookSender;
use acdm_sources::{FileReader, FileSearch, FileWriter, GitRef, Sources, Unconfigured, WikiSource};
use acdm_store::{
    Change, Changes, EpochCheck, ScopeWatcher, SharedLimiter, Store, StoreError, SwitchState,
};
use anyhow::Context;
use axum::Router;
use axum::extract::Request;
use axum::extract::State;
use axum::response::IntoResponse;
use axum::response::Response;
use axum::routing::get;
use prometheus_client::registry::Registry;
use secrecy::ExposeSecret;
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use acdm_server::gate::ServiceGate;
use acdm_server::health::{self, Readiness};
use acdm_server::http;
use acdm_server::lanes::Lanes;
use acdm_server::periodic::{Periodic, Round};
use acdm_server::server::{self, ConnectionLimits};

use crate::config::Config;

/// Everything a router needs.
#[derive(Clone)]
pub struct AppState {
    /// Cancelled when a stop is asked for: `/readyz` answers 503
    /// `draining` from then on, and the listener closes after the pre-stop
    /// delay.
    pub shutdown: CancellationToken,
    /// Cancelled when the listener has closed: in-flight MCP calls are
    /// answered, then MCP streams end.
    stopped: CancellationToken,
    /// Prometheus metrics, served at `/metrics`.
    pub metrics: Arc<Registry>,
    mcp_metrics: McpMetrics,
    http_metrics: http::HttpMetrics,
    index_metrics: acdm_mcp::IndexMetrics,
    mcp: McpSettings,
    /// The database.
    pub store: Store,
    /// The wiki, the project files and file search.
    pub sources: Sources,
    /// The agent → project resolver shared by every adapter.
    pub resolver: Arc<ScopeResolver>,
    /// What `/readyz` reports.
    pub readiness: Arc<Readiness>,
    /// The storage-event journal every file write goes through.
    pub journal: Journal,
    /// The kill switch for agents' file writes.
    pub kill_switch: KillSwitch,
    /// The rate limits' buckets, shared by every replica.
    pub limiter: Arc<SharedLimiter>,
    agent_limits: AgentLimits,
    budget: http::Budget,
    nc: NcState,
    business: BusinessState,
    project: ProjectState,
    require_membership: bool,
    gate: ServiceGate,
    admin: Option<AdminState>,
    console: Option<acdm_console::ConsoleState>,
    max_request_bytes: usize,
    /// Documents as text and the content index.
    pub knowledge: Knowledge,
    /// The approval notifications' sender, with a webhook configured.
    delivery: Option<Delivery>,
    notification_metrics: acdm_mcp::NotificationMetrics,
}

/// The provisioned folders the content index covers: every project's
/// mounts, from the database.
struct StoreFolders(Store);

#[async_trait::async_trait]
impl ProjectFolders for StoreFolders {
    async fn roots(&self) -> Result<Vec<acdm_core::AbsPath>, KnowledgeError> {
        self.0
            .mount_roots()
            .await
            .map_err(|e| KnowledgeError::Folders(e.to_string()))
    }
}

/// The extraction pool for `config`: children of this binary (or of
/// `ACDM_EXTRACT_PROGRAM`) run with `extract`.
fn extractor(config: &Config) -> anyhow::Result<Extractor> {
    let program = match &config.extract_program {
        Some(program) => program.clone(),
        None => std::env::current_exe()
            .context("cannot tell where this binary is, to run its `extract` command (set ACDM_EXTRACT_PROGRAM)")?,
    };
    let limits = ExtractLimits {
        max_input_bytes: config.extract_max_file_bytes,
        max_output_bytes: config.extract_max_text_bytes,
        cpu_seconds: config.extract_timeout.as_secs(),
        wall_seconds: config.extract_timeout.as_secs(),
        memory_bytes: config.extract_memory_mib.saturating_mul(1 << 20),
        ..ExtractLimits::default()
    };
    Ok(Extractor::new(ExtractorConfig {
        program,
        args: vec!["extract".into()],
        processes: config.extract_processes,
        limits,
        cache_bytes: config.extract_cache_bytes,
    }))
}

/// Documents as text and the content index for `config`, in
/// `ACDM_SEARCH_INDEX_DIR` (or `<ACDM_DATA_DIR>/search-index`).
fn knowledge(config: &Config, store: &Store, sources: &Sources) -> anyhow::Result<Knowledge> {
    let base = config
        .search_index_dir
        .clone()
        .unwrap_or_else(|| config.data_dir.join("search-index"));
    // Each server keeps an index of its own: servers sharing a data folder
    // (replicas on one host) take the first of `search-index`,
    // `search-index-1`, … no other holds.
    Knowledge::open(
        &KnowledgeSettings {
            index_dir: Some(base.clone()),
            refresh_every: config.search_refresh,
            max_file_bytes: config.extract_max_file_bytes,
            // As many documents in memory as children turn them into text:
            // the memory reads of documents take is bounded by
            // ACDM_EXTRACT_PROCESSES × (ACDM_EXTRACT_MAX_FILE_BYTES +
            // 2 × ACDM_EXTRACT_MAX_TEXT_BYTES) plus the cache.
            documents_in_flight: config.extract_processes,
        },
        KnowledgeSources {
            wiki: sources.wiki.clone(),
            files: sources.files.clone(),
            files_base: config.files_base.clone(),
            // Nextcloud propagates a change to every parent folder's etag; a
            // local folder's etag is its own modification time.
            folder_etags_cover_subtree: sources.files.kind() == "nextcloud",
        },
        extractor(config)?,
        Arc::new(StoreFolders(store.clone())),
    )
    .with_context(|| {
        format!(
            "cannot open the content index in {} (ACDM_SEARCH_INDEX_DIR)",
            base.display()
        )
    })
}

/// `ACDM_APPROVAL_*`: the policy and lifetime of approval requests, and
/// their notifications' sender when a webhook is configured.
fn approvals(config: &Config, store: &Store) -> anyhow::Result<(Approvals, Option<Delivery>)> {
    let ttl = ApprovalTtl::new(config.approval_ttl).map_err(anyhow::Error::msg)?;
    let delivery = match (
        &config.approval_webhook_url,
        &config.approval_webhook_secret,
    ) {
        (Some(url), Some(secret)) => {
            let client = HttpClient::new(config.upstream())
                .context("cannot build the webhook's HTTP client")?;
            let sender = WebhookSender::new(client, url.clone(), secret)
                .context("ACDM_APPROVAL_WEBHOOK_SECRET")?;
            Some(Delivery::new(sender))
        }
        _ => None,
    };
    let public = config.public_base();
    let notifications = delivery
        .as_ref()
        .map(|d| d.notifications(format!("{public}/console")));
    let global = config.approval_required_ops.clone();
    Ok((
        Approvals::new(store.clone(), global, ttl, notifications),
        delivery,
    ))
}

/// People's projects, from the database (read on every request of a
/// person, so a removed member loses access with their next request), and
/// their projects' overviews, as the BFF makes them.
struct StoreMembers(Store, ProjectState);

#[async_trait::async_trait]
impl acdm_mcp::PersonDirectory for StoreMembers {
    async fn memberships(&self, user: &UserId) -> Result<Vec<acdm_mcp::Membership>, String> {
        let rows = self
            .0
            .memberships_of(user)
            .await
            .map_err(|e| e.to_string())?;
        Ok(rows
            .into_iter()
            .map(|(project, role)| acdm_mcp::Membership {
                slug: project.slug,
                name: project.name,
                role,
            })
            .collect())
    }

    async fn overview(
        &self,
        user: &UserId,
        slug: &acdm_core::ProjectSlug,
    ) -> Result<Option<(acdm_core::project::OverviewData, String)>, String> {
        let rows = self
            .0
            .memberships_of(user)
            .await
            .map_err(|e| e.to_string())?;
        let Some((project, role)) = rows.into_iter().find(|(p, _)| p.slug == *slug) else {
            return Ok(None);
        };
        self.1
            .overview_for(&project, Some(role))
            .await
            .map(Some)
            .map_err(|failure| failure.message().to_owned())
    }
}

/// `ACDM_OIDC_*`: people's access tokens on `/mcp`, when an issuer is set.
fn people(
    config: &Config,
    store: &Store,
    project: &ProjectState,
) -> anyhow::Result<Option<acdm_mcp::PeopleAuth>> {
    let Some(settings) = config.oidc() else {
        return Ok(None);
    };
    let client = HttpClient::new(config.upstream())
        .context("cannot build the identity provider's HTTP client")?;
    let verifier = acdm_sources::oidc::TokenVerifier::new(settings, client);
    Ok(Some(acdm_mcp::PeopleAuth::new(
        verifier,
        Arc::new(StoreMembers(store.clone(), project.clone())),
        &config.public_base(),
    )))
}

impl AppState {
    /// The state for `config` over an open, migrated `store` and `sources`.
    pub fn new(config: &Config, store: Store, sources: ServiceSources) -> anyhow::Result<Self> {
        let resolver = Arc::new(ScopeResolver::new(
            Arc::new(store.clone()),
            config.scope_cache_ttl,
        ));
        let service_token = config.service_token.as_ref().map(|t| t.expose_secret());
        let journal = Journal::new(
            store.clone(),
            sources.files.clone(),
            config.files_base.clone(),
        );
        let sources = sources.knowledge();
        let knowledge = knowledge(config, &store, &sources)?;
        let kill_switch = KillSwitch::new(config.nc_writes_enabled);
        let read_max = config.mcp_max_read_bytes;
        let (approvals, delivery) = approvals(config, &store)?;
        let nc = NcState::new(
            journal.clone(),
            sources.search.clone(),
            kill_switch.clone(),
            NcLimits {
                default_read_bytes: (64 * 1024).min(read_max),
                max_read_bytes: read_max,
                ..NcLimits::default()
            },
            Some(knowledge.clone()),
            approvals.clone(),
        );
        let business = BusinessState::new(journal.clone(), kill_switch.clone(), approvals.clone());
        let project = ProjectState::new(journal.clone(), kill_switch.clone(), approvals.clone());
        let admin = config
            .admin_token
            .as_ref()
            .and_then(|t| SharedToken::of(t.expose_secret()))
            .map(|token| {
                AdminState::new(
                    journal.clone(),
                    kill_switch.clone(),
                    resolver.clone(),
                    config.files_base.clone(),
                    token,
                    approvals.clone(),
                )
            });
        let console = config.admin_token.as_ref().and_then(|t| {
            acdm_console::ConsoleState::new(
                journal.clone(),
                kill_switch.clone(),
                resolver.clone(),
                t.expose_secret(),
                config.console_secure_cookie,
                approvals.clone(),
            )
        });
        let shutdown = CancellationToken::new();
        let stopped = CancellationToken::new();
        let limiter = Arc::new(SharedLimiter::new(store.clone(), config.rate_lease));
        let limits: Arc<dyn RateLimiter> = limiter.clone();
        let mut registry = Registry::default();
        let mcp_metrics = McpMetrics::register(&mut registry);
        let http_metrics = http::HttpMetrics::register(&mut registry);
        let index_metrics = acdm_mcp::IndexMetrics::register(&mut registry);
        let notification_metrics = acdm_mcp::NotificationMetrics::register(&mut registry);
        let people = people(config, &store, &project)?;
        let gate = ServiceGate::new(service_token).with_people(people.is_some());
        let mcp = McpSettings {
            people,
            allowed_hosts: config.mcp_allowed_hosts.clone(),
            sessions: config.mcp_sessions,
            files_base: config.files_base.clone(),
            read_limits: ReadLimits {
                default_bytes: (32 * 1024).min(config.mcp_max_read_bytes),
                max_bytes: config.mcp_max_read_bytes,
            },
            stopped: stopped.clone(),
            // Until no connection can bring a call any more.
            linger: connection_limits(config).last_request_after_stop(),
            limits: ToolLimits {
                limiter: limits.clone(),
                per_tool: config.mcp_tool_rate(),
            },
            knowledge: Some(knowledge.clone()),
        };
        Ok(Self {
            shutdown,
            stopped,
            agent_limits: AgentLimits {
                limiter: limits,
                calls: config.bff_calls_rate(),
                writes: config.bff_writes_rate(),
            },
            limiter,
            budget: http::Budget {
                request_timeout: config.request_timeout,
            },
            metrics: Arc::new(registry),
            index_metrics,
            mcp_metrics,
            http_metrics,
            mcp,
            readiness: Arc::new(Readiness::new(store.clone(), service_token.is_some())),
            gate,
            journal,
            kill_switch,
            nc,
            business,
            project,
            require_membership: config.bff_require_membership,
            store,
            sources,
            resolver,
            admin,
            console,
            max_request_bytes: config.max_request_bytes,
            knowledge,
            delivery,
            notification_metrics,
        })
    }
}

async fn not_found(req: Request) -> Response {
    failure(
        ErrorCode::NotFound,
        format!("no endpoint {} {}", req.method(), req.uri().path()),
    )
}

async fn method_not_allowed() -> Response {
    failure(
        ErrorCode::MethodNotAllowed,
        "this method is not allowed on this path",
    )
}

/// The whole HTTP surface: the probes, the operator API when enabled, and
/// the adapters, under the global middleware.
pub fn router(state: &AppState) -> Router {
    with_global_layers(state, adapter_routes(state))
}

/// The routes of the adapters: the MCP server and the Agent Tools BFF.
fn adapter_routes(state: &AppState) -> Router {
    acdm_mcp::router(
        state.sources.clone(),
        state.mcp.clone(),
        state.mcp_metrics.clone(),
    )
    .merge(acdm_bff::agent_tools(
        state.nc.clone(),
        state.business.clone(),
        state.project.clone(),
        PipelineState {
            resolver: state.resolver.clone(),
            store: state.store.clone(),
            require_membership: state.require_membership,
            limits: state.agent_limits.clone(),
        },
    ))
}

/// `GET /metrics`: Prometheus text exposition. Open like the probes: it
/// holds counts by tool, outcome and surface only — no identities, paths
/// or secrets.
/// What `/metrics` encodes: the registry, and the content index's figures
/// copied into it at each scrape.
#[derive(Clone)]
struct MetricsState {
    registry: Arc<Registry>,
    index: acdm_mcp::IndexMetrics,
    knowledge: Knowledge,
    notifications: Option<(acdm_mcp::NotificationMetrics, Store, Arc<DeliveryStats>)>,
}

async fn metrics(State(state): State<MetricsState>) -> Response {
    state.index.update(&state.knowledge).await;
    if let Some((gauges, store, stats)) = &state.notifications {
        use std::sync::atomic::Ordering::Relaxed;
        let backlog = store.outbox_backlog().await.unwrap_or_default();
        let (delivered, failed) = (stats.delivered.load(Relaxed), stats.failed.load(Relaxed));
        gauges.set(backlog.waiting, backlog.failing, delivered, failed);
    }
    let registry = state.registry;
    let mut text = String::new();
    match prometheus_client::encoding::text::encode(&mut text, &registry) {
        Ok(()) => {
            let mut response = text.into_response();
            response.headers_mut().insert(
                axum::http::header::CONTENT_TYPE,
                axum::http::HeaderValue::from_static(
                    "application/openmetrics-text; version=1.0.0; charset=utf-8",
                ),
            );
            response.extensions_mut().insert(health::Probe);
            response
        }
        Err(_) => failure(ErrorCode::InternalError, "metrics could not be encoded"),
    }
}

/// `GET /openapi.json`: the OpenAPI 3.1 document of the BFF and the
/// operator API, generated from their types. Open: it describes the API,
/// it holds no data.
async fn openapi() -> Response {
    let mut response = axum::Json(acdm_bff::openapi::document()).into_response();
    response.extensions_mut().insert(health::Probe);
    response
}

/// Adds the probes and the operator API to `routes` and puts everything
/// under the global middleware ([`http::FrontLayer`]). Outermost first:
/// mark secret headers sensitive; the request id and `Connection: close`
/// while draining; the request span; the panic guard; then metrics,
/// service gate, body limit and the request's deadline ([`http::Edge`]).
/// Routes merged after this would bypass the gate, so every route
/// goes through here; the gate's bypass test calls it with recording routes.
pub fn with_global_layers(state: &AppState, adapters: Router) -> Router {
    let mut routes = adapters
        .route("/healthz", get(health::healthz))
        .route(
            "/readyz",
            get(health::readyz).with_state(state.readiness.clone()),
        )
        .route(
            "/metrics",
            get(metrics).with_state(MetricsState {
                registry: state.metrics.clone(),
                index: state.index_metrics.clone(),
                knowledge: state.knowledge.clone(),
                notifications: state.delivery.as_ref().map(|d| {
                    (
                        state.notification_metrics.clone(),
                        state.store.clone(),
                        d.stats.clone(),
                    )
                }),
            }),
        )
        .route("/openapi.json", get(openapi))
        .route("/api-docs", get(acdm_console::api_docs::handler));
    if let Some(admin_state) = &state.admin {
        routes = routes.merge(admin::router(admin_state.clone()));
    }
    if let Some(console) = &state.console {
        routes = routes.merge(acdm_console::router(console.clone()));
    }
    routes
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(http::FrontLayer::new(
            state.readiness.clone(),
            http::Edge {
                metrics: state.http_metrics.clone(),
                gate: state.gate.clone(),
                max_request_bytes: state.max_request_bytes,
                budget: state.budget,
            },
        ))
}

/// A built, bound application.
pub struct Application {
    listener: TcpListener,
    router: Router,
    state: AppState,
    /// The scope watcher, the kill-switch follower and the reconciler,
    /// awaited before the database closes.
    periodic: Periodic,
    shutdown: CancellationToken,
    prestop: Duration,
    /// Set by SIGINT: stop without the pre-stop delay.
    skip_prestop: Arc<AtomicBool>,
    grace: Duration,
    limits: ConnectionLimits,
    /// The connection threads.
    lanes: Lanes,
}

impl Application {
    /// Opens (and, with `ACDM_AUTO_MIGRATE`, migrates) the database, starts
    /// the periodic tasks (scope watcher, kill-switch follower, reconciler)
    /// and binds the listener.
    pub async fn build(config: &Config) -> anyhow::Result<Self> {
        let store = open_store(config).await?;
        let sources = build_sources(config)?;
        tracing::info!(
            wiki = sources.wiki.kind(),
            files = sources.files.kind(),
            search = sources.search.kind(),
            "sources ready"
        );
        let state = AppState::new(config, store.clone(), sources)?;
        let shutdown = state.shutdown.clone();
        // Each runs once before the first request, then periodically. An
        // unreadable kill switch (migrations pending, database down) does
        // not stop the start: the service is not ready, and writes fail on
        // the journal.
        // The periodic tasks follow revocations and the kill switch while
        // the server drains too: they stop once it no longer serves.
        let mut periodic = Periodic::new(CancellationToken::new());
        // Both also run as soon as PostgreSQL announces a change.
        let (scope_changed, switch_changed) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
        periodic
            .start_nudged(
                "scope-watcher",
                config.scope_poll_interval,
                ScopeRound(ScopeWatcher::new(store.clone(), state.resolver.clone())),
                scope_changed.clone(),
            )
            .await;
        periodic
            .start_nudged(
                "kill-switch-follower",
                config.scope_poll_interval,
                SwitchFollower {
                    switch: state.kill_switch.clone(),
                    store: store.clone(),
                },
                switch_changed.clone(),
            )
            .await;
        match store.changes().await {
            Ok(Some(changes)) => periodic.spawn("change-listener", |stop| {
                follow_changes(changes, scope_changed, switch_changed, stop)
            }),
            Ok(None) => {}
            Err(error) => tracing::warn!(
                %error,
                poll_ms = u64::try_from(config.scope_poll_interval.as_millis()).unwrap_or(u64::MAX),
                "cannot listen for changes announced by the database; following them by polling only"
            ),
        }
        periodic
            .start(
                "reconciler",
                RECONCILE_EVERY,
                Reconciler {
                    journal: state.journal.clone(),
                    settle_after: config.events_settle_after,
                },
            )
            .await;
        periodic.start_later(
            "rate-bucket-pruner",
            PRUNE_BUCKETS_EVERY,
            BucketPruner(store.clone()),
        );
        periodic
            .start(
                "attachment-sweep",
                SWEEP_EVERY,
                SweepRound(AttachmentSweep::new(state.business.clone(), SWEEP_BATCH)),
            )
            .await;
        // The content index: a first refresh at once (searches fall back to
        // the upstreams' until it is done), then every ACDM_SEARCH_REFRESH_SECONDS.
        let knowledge = state.knowledge.clone();
        periodic.spawn("content-index", move |stop| knowledge.run(stop));
        if let Some(delivery) = state.delivery.clone() {
            let store = store.clone();
            periodic.spawn("approval-notifications", move |stop| {
                delivery.run(store, stop)
            });
        }
        let listener = match server::bind(config.listen_addr) {
            Ok(listener) => listener,
            Err(error) => {
                // No server will run: stop the tasks just started.
                periodic.join(Duration::ZERO).await;
                return Err(error).with_context(|| {
                    format!("cannot listen on ACDM_LISTEN_ADDR={}", config.listen_addr)
                });
            }
        };
        let threads = match config.connection_threads {
            0 => std::thread::available_parallelism().map_or(1, usize::from),
            n => n,
        };
        let lanes = match Lanes::start(threads) {
            Ok(lanes) => lanes,
            Err(error) => {
                periodic.join(Duration::ZERO).await;
                return Err(error).with_context(|| {
                    format!("cannot start {threads} connection threads (ACDM_CONNECTION_THREADS)")
                });
            }
        };
        tracing::info!(threads = lanes.count(), "connection threads started");
        Ok(Self {
            router: router(&state),
            listener,
            lanes,
            state,
            periodic,
            shutdown,
            prestop: config.shutdown_prestop,
            skip_prestop: Arc::default(),
            grace: config.shutdown_grace,
            limits: connection_limits(config),
        })
    }

    /// The address actually bound (useful with port 0).
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// The shared state (store, resolver, readiness).
    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// Cancelling this token starts a graceful shutdown: the pre-stop
    /// delay (`/readyz` 503), then the drain.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    /// Makes the next shutdown skip the pre-stop delay (an interactive
    /// stop: nobody balances load onto a terminal).
    pub fn skip_prestop(&self) -> Arc<AtomicBool> {
        self.skip_prestop.clone()
    }

    /// Serves until the shutdown token is cancelled; then, for the
    /// pre-stop delay, goes on serving while `/readyz` answers 503
    /// `draining` and every response asks its client to close the
    /// connection; then closes the listener and lets in-flight requests
    /// (MCP calls too) finish for the grace period, closes what is still
    /// open, and closes the database pool. Connections are bounded by the
    /// header-read timeout and the connection cap ([`server`]).
    pub async fn run_until_stopped(self) -> anyhow::Result<()> {
        let Self {
            listener,
            router,
            state,
            periodic,
            shutdown,
            prestop,
            skip_prestop,
            grace,
            limits,
            lanes,
        } = self;
        let lanes = Arc::new(lanes);
        let readiness = state.readiness.clone();
        let (stop, stopped) = (shutdown.clone(), state.stopped.clone());
        let server = server::serve(
            listener,
            router,
            limits,
            state.http_metrics.open_connections.clone(),
            lanes.clone(),
            async move {
                stop.cancelled().await;
                readiness.set_draining();
                if !prestop.is_zero() && !skip_prestop.load(Ordering::Acquire) {
                    tracing::info!(
                        prestop_seconds = prestop.as_secs(),
                        "stopping: /readyz answers 503 draining; serving on until the pre-stop delay ends"
                    );
                    tokio::time::sleep(prestop).await;
                }
                tracing::info!("shutting down: no new connections, draining in-flight requests");
                stopped.cancel();
            },
        );
        // Aborting this task drops the loop, which aborts every connection
        // still open.
        let mut server = tokio::spawn(server);
        tokio::select! {
            result = &mut server => {
                result.context("server task failed")?;
            }
            () = async {
                state.stopped.cancelled().await;
                tokio::time::sleep(grace).await;
            } => {
                tracing::warn!(grace_seconds = grace.as_secs(), "drain deadline passed; closing open connections");
                server.abort();
                // Wait until the aborted connections are gone before the
                // database closes under them.
                let _ = server.await;
            }
        }
        shutdown.cancel();
        state.stopped.cancel();
        // The periodic tasks use the database: they stop first. A round
        // still running is cut short (each is safe to interrupt).
        periodic.join(PERIODIC_STOP).await;
        state.store.close().await;
        // Last: a database connection made during a request is registered
        // with its lane's event loop.
        if let Ok(lanes) = Arc::try_unwrap(lanes) {
            lanes.stop().await;
        }
        tracing::info!("stopped");
        Ok(())
    }
}

/// The sources a server runs with. The project files are a
/// [`FileWriter`] here, for the journal only; the knowledge tools get them
/// read-only ([`ServiceSources::knowledge`]).
#[derive(Clone)]
pub struct ServiceSources {
    /// The wiki.
    pub wiki: Arc<dyn WikiSource>,
    /// The project files.
    pub files: Arc<dyn FileWriter>,
    /// File search.
    pub search: Arc<dyn FileSearch>,
}

impl ServiceSources {
    /// The same sources with the files read-only: what the MCP server and
    /// the BFF's reads get.
    pub fn knowledge(&self) -> Sources {
        let files: Arc<dyn FileReader> = self.files.clone();
        Sources {
            wiki: self.wiki.clone(),
            files,
            search: self.search.clone(),
        }
    }
}

/// The sources for `config`: GitLab and Nextcloud when configured, the
/// local folders `<ACDM_DATA_DIR>/wiki` and `<ACDM_DATA_DIR>/files`
/// otherwise.
pub fn build_sources(config: &Config) -> anyhow::Result<ServiceSources> {
    let http =
        HttpClient::new(config.upstream()).context("cannot build the upstream HTTP client")?;
    let main = GitRef::parse("main").context("the default wiki ref")?;
    let wiki: Arc<dyn WikiSource> = match &config.gitlab() {
        None if !config.local_sources => Arc::new(Unconfigured::new("GITLAB_WIKI_BASE_URL")),
        Some(gitlab) => Arc::new(
            GitLabWiki::new(
                GitLabConfig {
                    base_url: gitlab.base_url.clone(),
                    project: gitlab.project_id.clone(),
                    token: gitlab.pat.clone(),
                    default_ref: main,
                },
                http.clone(),
            )
            .context("GITLAB_WIKI_BASE_URL")?,
        ),
        None => Arc::new(
            LocalWiki::open(config.data_dir.join("wiki"), main)
                .context("the local wiki folder in ACDM_DATA_DIR")?,
        ),
    };
    let (files, search): (Arc<dyn FileWriter>, Arc<dyn FileSearch>) = match &config.nextcloud() {
        None if !config.local_sources => {
            let none = Arc::new(Unconfigured::new("NEXTCLOUD_URL"));
            (none.clone(), none)
        }
        Some(nextcloud) => {
            let nc = NextcloudConfig {
                url: nextcloud.url.clone(),
                user: nextcloud.user.clone(),
                app_password: nextcloud.app_password.clone(),
            };
            (
                Arc::new(NextcloudFiles::new(nc.clone(), http.clone()).context("NEXTCLOUD_URL")?),
                Arc::new(NextcloudSearch::new(nc, http).context("NEXTCLOUD_URL")?),
            )
        }
        None => {
            let local = LocalFileStore::open(config.data_dir.join("files"))
                .context("the local file folder in ACDM_DATA_DIR")?;
            (
                Arc::new(local.clone()),
                Arc::new(LocalFileSearch::new(local)),
            )
        }
    };
    Ok(ServiceSources {
        wiki,
        files,
        search,
    })
}

/// How long the background rounds get to stop once the server stopped
/// serving; one still running after it is aborted.
const PERIODIC_STOP: Duration = Duration::from_secs(2);

/// The longest an idle connection stays open once the listener closed.
const IDLE_LINGER: Duration = Duration::from_secs(1);

/// The connection loop's bounds. Idle kept-alive connections stay open
/// once the listener closed: behind a load balancer (a pre-stop delay is
/// set), a second for the balancer to use them once more or drop them
/// before the server closes them; otherwise not at all, unless they have
/// not sent a request yet ([`server`]).
fn connection_limits(config: &Config) -> ConnectionLimits {
    ConnectionLimits {
        header_read_timeout: config.header_read_timeout,
        max_connections: config.max_connections,
        idle_linger: config.shutdown_prestop.min(IDLE_LINGER),
    }
}

/// How often the reconciler runs after its first round at start-up.
const RECONCILE_EVERY: Duration = Duration::from_secs(30);

/// The scope watcher as a periodic round.
struct ScopeRound(ScopeWatcher);

impl Round for ScopeRound {
    type Done = EpochCheck;
    type Error = StoreError;
    async fn poll_once(&mut self) -> Result<EpochCheck, StoreError> {
        self.0.poll_once().await
    }
}

/// Runs the scope watcher's and the kill-switch follower's rounds as soon
/// as the database announces a change they follow (after a lost
/// connection, both), until `stop`.
async fn follow_changes(
    mut changes: Changes,
    scope: Arc<Notify>,
    switch: Arc<Notify>,
    stop: CancellationToken,
) {
    let mut failing = false;
    loop {
        let next = tokio::select! {
            () = stop.cancelled() => return,
            next = changes.next() => next,
        };
        match next {
            Ok(change) => {
                if failing {
                    tracing::info!("listening for announced changes again");
                    failing = false;
                }
                if matches!(change, Change::Scope | Change::Missed) {
                    scope.notify_one();
                }
                if matches!(change, Change::Switches | Change::Missed) {
                    switch.notify_one();
                }
            }
            Err(error) => {
                // Announcements may be lost until the listener reconnects,
                // which it does on its own, silently: a round now and after
                // every failed attempt covers what was missed meanwhile.
                scope.notify_one();
                switch.notify_one();
                if !failing {
                    tracing::warn!(%error, "lost the database's change announcements; polling until they are back");
                    failing = true;
                }
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
            }
        }
    }
}

/// The kill-switch follower: one round reads the operator's switch.
struct SwitchFollower {
    switch: KillSwitch,
    store: Store,
}

impl Round for SwitchFollower {
    type Done = Option<SwitchState>;
    type Error = StoreError;
    async fn poll_once(&mut self) -> Result<Option<SwitchState>, StoreError> {
        self.switch.poll_once(&self.store).await
    }
}

/// How often idle rate-limit buckets are forgotten.
const PRUNE_BUCKETS_EVERY: Duration = Duration::from_secs(600);

/// Forgets the rate-limit buckets nobody used for an hour.
struct BucketPruner(Store);

impl Round for BucketPruner {
    type Done = u64;
    type Error = StoreError;
    async fn poll_once(&mut self) -> Result<u64, StoreError> {
        self.0.prune_rate_buckets().await
    }
}

/// How often the attachment sweep runs, and how many files a round looks
/// at (a file is looked at again after every other one has been).
const SWEEP_EVERY: Duration = Duration::from_secs(300);
const SWEEP_BATCH: u32 = 200;

/// The attachment sweep as a periodic round.
struct SweepRound(AttachmentSweep);

impl Round for SweepRound {
    type Done = Swept;
    type Error = StoreError;
    async fn poll_once(&mut self) -> Result<Swept, StoreError> {
        self.0.poll_once().await
    }
}

/// The reconciler: one round settles the storage events a crash left
/// `pending` that are older than `settle_after` (so a write in flight on
/// another replica is never touched).
struct Reconciler {
    journal: Journal,
    settle_after: Duration,
}

impl Round for Reconciler {
    type Done = Settled;
    type Error = StoreError;
    async fn poll_once(&mut self) -> Result<Settled, StoreError> {
        let cutoff = chrono::Utc::now()
            - chrono::TimeDelta::from_std(self.settle_after).unwrap_or(chrono::TimeDelta::zero());
        self.journal.reconcile(cutoff).await
    }
}

/// Connects to the configured database and applies migrations when
/// `ACDM_AUTO_MIGRATE` is on.
pub async fn open_store(config: &Config) -> anyhow::Result<Store> {
    let target = config.database().target.describe();
    let store = Store::connect(&config.database())
        .await
        .with_context(|| format!("cannot open the database ({target})"))?;
    if config.auto_migrate {
        store
            .migrate()
            .await
            .with_context(|| format!("cannot apply migrations to the database ({target})"))?;
    }
    Ok(store)
}

/// Builds the application for `config`, calls `on_ready` with the bound
/// address, and serves until SIGINT or SIGTERM.
pub async fn serve(config: &Config, on_ready: impl FnOnce(SocketAddr)) -> anyhow::Result<()> {
    let app = Application::build(config).await?;
    let address = app.local_addr()?;
    tracing::info!(
        address = %address,
        database = %config.database().target.describe(),
        "acdm-backend listening on http://{address}"
    );
    if config.service_token.is_none() {
        tracing::warn!(
            "ACDM_MCP_SERVICE_TOKEN is not set: every /mcp and /agent-tools request is refused"
        );
    }
    if config.admin_token.is_none() {
        tracing::info!("ACDM_ADMIN_TOKEN is not set: the operator API at /admin is disabled");
    }
    on_ready(address);
    let token = app.shutdown_token();
    let skip_prestop = app.skip_prestop();
    tokio::spawn(async move {
        if shutdown_signal().await == Signal::Interrupt {
            skip_prestop.store(true, Ordering::Release);
        }
        token.cancel();
    });
    app.run_until_stopped().await
}

/// The signal that asked the server to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// SIGINT (Ctrl-C): someone at a terminal.
    Interrupt,
    /// SIGTERM: an orchestrator or a supervisor.
    Terminate,
}

/// Resolves when SIGINT or SIGTERM arrives, saying which.
pub async fn shutdown_signal() -> Signal {
    let interrupt = async {
        if let Err(error) = tokio::signal::ctrl_c().await {
            tracing::error!(%error, "cannot listen for SIGINT");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(error) => {
                tracing::error!(%error, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => {
            tracing::info!("SIGINT received");
            Signal::Interrupt
        }
        () = terminate => {
            tracing::info!("SIGTERM received");
            Signal::Terminate
        }
    }
}
