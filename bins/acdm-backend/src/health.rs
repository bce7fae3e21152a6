//! Health endpoints, open to probes without a token:
//!
//! - `/healthz`: the process is up and serving;
//! - `/readyz`: the database answers and takes writes (an SQLite file
//!   locked by another process is named), migrations are applied, the
//!   service token is configured and the server is not shutting down — 503 with
//!   the reasons otherwise (cached for a second so probes cannot hammer
//!   the database);
//! - `/mcp/health` is served by `acdm-mcp` (per-source checks).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use acdm_store::Store;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use tokio::sync::Mutex;

use crate::http::Probe;

/// How long a readiness answer is reused.
const READY_CACHE: Duration = Duration::from_secs(1);
/// How long the database may take to answer a readiness ping.
const DB_TIMEOUT: Duration = Duration::from_secs(2);

/// One readiness check.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    /// `ok` or `error`.
    pub status: &'static str,
    /// Why not, when not ok.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl Check {
    fn ok() -> Self {
        Self {
            status: "ok",
            reason: None,
        }
    }

    fn error(reason: impl Into<String>) -> Self {
        Self {
            status: "error",
            reason: Some(reason.into()),
        }
    }

    fn is_ok(&self) -> bool {
        self.status == "ok"
    }
}

/// The `/readyz` body.
#[derive(Debug, Clone, Serialize)]
pub struct ReadyReport {
    /// `ready`, `not_ready`, or `draining` (shutting down: still serving
    /// for the pre-stop delay, then finishing what is in flight).
    pub status: &'static str,
    /// Each check by name.
    pub checks: std::collections::BTreeMap<&'static str, Check>,
}

/// What readiness depends on.
pub struct Readiness {
    store: Store,
    token_configured: bool,
    draining: AtomicBool,
    cached: Mutex<Option<(Instant, ReadyReport)>>,
}

impl Readiness {
    /// Readiness over `store`, for a server with or without a service token.
    pub fn new(store: Store, token_configured: bool) -> Self {
        Self {
            store,
            token_configured,
            draining: AtomicBool::new(false),
            cached: Mutex::new(None),
        }
    }

    /// From now on `/readyz` answers 503 `draining`: the server is
    /// shutting down.
    pub fn set_draining(&self) {
        self.draining.store(true, Ordering::Release);
    }

    /// Whether the server is shutting down.
    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Acquire)
    }

    async fn measure(&self) -> ReadyReport {
        let mut checks = std::collections::BTreeMap::new();
        let database = match tokio::time::timeout(DB_TIMEOUT, self.store.ping()).await {
            Ok(Ok(())) => Check::ok(),
            // An SQLite file locked by another process is named as such.
            Ok(Err(error)) => match self.store.lock_holder().await {
                Some(locked) => Check::error(format!("database: {locked}")),
                None => Check::error(format!("database: {error}")),
            },
            Err(_) => match self.store.lock_holder().await {
                Some(locked) => Check::error(format!("database: {locked}")),
                None => Check::error(format!("database did not answer within {DB_TIMEOUT:?}")),
            },
        };
        // Reads may pass while writes cannot (a write lock held elsewhere,
        // a read-only standby): every write would fail, so not ready.
        let writes = if database.is_ok() {
            match tokio::time::timeout(DB_TIMEOUT, self.store.check_writable()).await {
                Ok(Ok(())) => Check::ok(),
                Ok(Err(error)) => Check::error(format!("database writes: {error}")),
                Err(_) => Check::error(format!(
                    "database writes: no write lock within {DB_TIMEOUT:?}"
                )),
            }
        } else {
            Check::error("database unreachable")
        };
        let migrations = if database.is_ok() {
            match self.store.migration_status().await {
                Ok(status) if status.is_current() => Check::ok(),
                Ok(status) => Check::error(format!(
                    "migrations not current (pending {:?}, modified {:?}, failed {:?}); run `acdm-backend migrate`",
                    status.pending, status.modified, status.dirty
                )),
                Err(error) => Check::error(format!("cannot read migrations: {error}")),
            }
        } else {
            Check::error("database unreachable")
        };
        let token = if self.token_configured {
            Check::ok()
        } else {
            Check::error(
                "ACDM_MCP_SERVICE_TOKEN is not set; every /mcp and /agent-tools request is refused",
            )
        };
        checks.insert("database", database);
        checks.insert("database_writes", writes);
        checks.insert("migrations", migrations);
        checks.insert("service_token", token);
        let ready = checks.values().all(Check::is_ok);
        ReadyReport {
            status: if ready { "ready" } else { "not_ready" },
            checks,
        }
    }

    /// The current report, measured at most once per [`READY_CACHE`].
    pub async fn report(&self) -> ReadyReport {
        let mut report = {
            let mut cached = self.cached.lock().await;
            match cached.as_ref() {
                Some((at, report)) if at.elapsed() < READY_CACHE => report.clone(),
                _ => {
                    let report = self.measure().await;
                    *cached = Some((Instant::now(), report.clone()));
                    report
                }
            }
        };
        if self.is_draining() {
            report.status = "draining";
            report
                .checks
                .insert("shutdown", Check::error("the server is shutting down"));
        }
        report
    }
}

fn probe(status: StatusCode, body: impl Serialize) -> Response {
    let mut response = (status, Json(body)).into_response();
    response.extensions_mut().insert(Probe);
    response
}

/// `GET /healthz`.
pub async fn healthz() -> Response {
    probe(StatusCode::OK, serde_json::json!({ "status": "ok" }))
}

/// `GET /readyz`.
pub async fn readyz(State(readiness): State<Arc<Readiness>>) -> Response {
    let report = readiness.report().await;
    let status = if report.status == "ready" {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    probe(status, report)
}
