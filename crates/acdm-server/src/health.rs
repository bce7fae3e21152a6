//! Health endpoints, open to probes without a token:
//!
//! - `/healthz`: the process is up and serving;
//! - `/readyz`: the database answers and takes writes (an SQLite file
//!   locked by another process is named), migrations are applied, the
//!   service token is configured and the server is not shutting down — 503 with
//!   the reasons otherwise (cached for a second so probes cannot hammer
//!   the database; the database checks take [`DB_BUDGET`] at most in all,
//!   so a probe is answered, with the reason, whatever the database does);
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
use tokio::time::timeout_at;

/// How long a readiness answer is reused.
const READY_CACHE: Duration = Duration::from_secs(1);
/// How long the database checks of one measurement may take in all: a
/// probe gets its answer within half a second whatever the database does
/// (Kubernetes' default probe timeout is a second).
pub const DB_BUDGET: Duration = Duration::from_millis(400);
/// How long the write check waits for SQLite's write lock, inside the
/// budget, so that a lock held elsewhere is named rather than timed out.
const WRITE_LOCK_PATIENCE: Duration = Duration::from_millis(250);

/// Marks a health-probe response, which the front layer logs at debug
/// level so probes do not drown the log.
#[derive(Debug, Clone, Copy)]
pub struct Probe;

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
        let deadline = tokio::time::Instant::now() + DB_BUDGET;
        let database = match timeout_at(deadline, self.store.ping()).await {
            Ok(Ok(())) => Check::ok(),
            // An SQLite file locked by another process is named as such.
            Ok(Err(error)) => match timeout_at(deadline, self.store.lock_holder()).await {
                Ok(Some(locked)) => Check::error(format!("database: {locked}")),
                _ => Check::error(format!("database: {error}")),
            },
            Err(_) => match timeout_at(deadline, self.store.lock_holder()).await {
                Ok(Some(locked)) => Check::error(format!("database: {locked}")),
                _ => Check::error(format!("database did not answer within {DB_BUDGET:?}")),
            },
        };
        // Reads may pass while writes cannot (a write lock held elsewhere,
        // a read-only standby): every write would fail, so not ready.
        let writes = if database.is_ok() {
            match timeout_at(
                deadline,
                self.store.check_writable_within(WRITE_LOCK_PATIENCE),
            )
            .await
            {
                Ok(Ok(())) => Check::ok(),
                Ok(Err(error)) => Check::error(format!("database writes: {error}")),
                Err(_) => Check::error(format!(
                    "database writes: no write lock within {DB_BUDGET:?}"
                )),
            }
        } else {
            Check::error("database unreachable")
        };
        let migrations = if database.is_ok() {
            match timeout_at(deadline, self.store.migration_status()).await {
                Ok(Ok(status)) if status.is_current() => Check::ok(),
                Ok(Ok(status)) => Check::error(format!(
                    "migrations not current (pending {:?}, modified {:?}, failed {:?}); run `acdm-backend migrate`",
                    status.pending, status.modified, status.dirty
                )),
                Ok(Err(error)) => Check::error(format!("cannot read migrations: {error}")),
                Err(_) => Check::error(format!("cannot read migrations within {DB_BUDGET:?}")),
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

#[cfg(test)]
mod tests {
    use super::*;
    use acdm_store::{DatabaseConfig, DatabaseTarget};
    use sqlx::{ConnectOptions, Executor};

    #[tokio::test]
    async fn readiness_answers_within_its_budget_while_another_process_holds_the_database() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("acdm.sqlite3");
        let store = Store::connect(&DatabaseConfig::new(DatabaseTarget::Sqlite {
            path: path.clone(),
        }))
        .await
        .unwrap();
        store.migrate().await.unwrap();
        let readiness = Readiness::new(store, true);
        assert_eq!(readiness.measure().await.status, "ready");
        let mut holder = sqlx::sqlite::SqliteConnectOptions::new()
            .filename(&path)
            .connect()
            .await
            .unwrap();
        holder.execute("BEGIN IMMEDIATE").await.unwrap();
        // On the real clock: SQLite waits for its lock in real time, and a
        // paused clock would jump to the budget's end whatever SQLite did.
        // A probe that waited out SQLite's busy timeout (a second, as
        // before) fails the bound, which the budget leaves room under.
        let start = std::time::Instant::now();
        let report = readiness.measure().await;
        let took = start.elapsed();
        assert!(
            took < Duration::from_millis(900),
            "answered after {took:?}, past a 1 s probe's patience"
        );
        assert_eq!(report.status, "not_ready");
        let reasons: Vec<&str> = report
            .checks
            .values()
            .filter_map(|check| check.reason.as_deref())
            .collect();
        // The reason, not a timeout: the writes are what is refused.
        assert!(
            reasons.iter().any(|r| r.starts_with("database writes:")),
            "{reasons:?}"
        );
        holder.execute("ROLLBACK").await.unwrap();
    }
}
