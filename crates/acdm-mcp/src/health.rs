//! `/mcp/health`: the knowledge server and each source — `ok`,
//! `not_configured` (no source at all) or `error` with the reason (for
//! example a missing GitLab token). Open to probes without a token, so the
//! answer is cached for a few seconds and upstreams cannot be hammered
//! through it.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use acdm_sources::{SourceError, Sources};
use serde::Serialize;
use tokio::sync::Mutex;

/// How long a report is reused.
const CACHE: Duration = Duration::from_secs(5);
/// How long one source may take to answer its check.
const CHECK_TIMEOUT: Duration = Duration::from_secs(3);

/// One source's health.
#[derive(Debug, Clone, Serialize)]
pub struct SourceHealth {
    /// `ok`, `not_configured` or `error`.
    pub status: &'static str,
    /// `gitlab`, `nextcloud`, `local` or `none`.
    pub kind: &'static str,
    /// Why not ok.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The report.
#[derive(Debug, Clone, Serialize)]
pub struct HealthReport {
    /// `ok` when every source is, else `degraded`.
    pub status: &'static str,
    /// The server's name.
    pub server: &'static str,
    /// Its version.
    pub version: &'static str,
    /// Each source by role.
    pub sources: BTreeMap<&'static str, SourceHealth>,
    /// When the sources were checked (RFC 3339).
    pub checked_at: String,
    /// The content index, per source (absent without one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index: Option<BTreeMap<&'static str, IndexHealth>>,
}

/// One source's state in the content index.
#[derive(Debug, Clone, Serialize)]
pub struct IndexHealth {
    /// `ready` once a first refresh went through (searches are answered by
    /// the index), `building` before.
    pub status: &'static str,
    /// Documents indexed.
    pub documents: u64,
    /// When the last refresh started (RFC 3339), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_refresh: Option<String>,
    /// Seconds since the index last reflected the source, if it ever did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lag_seconds: Option<u64>,
    /// Refreshes that failed since the server started.
    pub errors: u64,
    /// Why the last refresh failed, as a stable reason (`upstream`,
    /// `timed_out`, …), until one goes through. (This report is open to
    /// probes: no path or message of the upstreams is shown; the log has
    /// them.)
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Documents indexed by name only because their text could not be had.
    pub unreadable: u64,
    /// The newest of them, counted by reason (`no_text`, `zip_bomb`, …);
    /// which files, the log says.
    pub unreadable_reasons: BTreeMap<String, u64>,
}

impl IndexHealth {
    fn of(status: &acdm_knowledge::SourceStatus, now: chrono::DateTime<chrono::Utc>) -> Self {
        Self {
            status: if status.built { "ready" } else { "building" },
            documents: status.documents,
            last_refresh: status
                .last_refresh
                .map(|at| at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
            lag_seconds: status.lag_seconds(now),
            errors: status.errors,
            last_error: status.last_error.clone(),
            unreadable: status.unreadable_count,
            unreadable_reasons: status.unreadable.iter().fold(
                BTreeMap::new(),
                |mut reasons, item| {
                    *reasons.entry(item.reason.clone()).or_default() += 1;
                    reasons
                },
            ),
        }
    }
}

/// Checks the sources, at most once per cache period.
pub struct McpHealth {
    sources: Sources,
    knowledge: Option<acdm_knowledge::Knowledge>,
    cached: Mutex<Option<(Instant, HealthReport)>>,
}

async fn check(
    kind: &'static str,
    check: impl Future<Output = Result<(), SourceError>>,
) -> SourceHealth {
    let outcome = tokio::time::timeout(CHECK_TIMEOUT, check).await;
    let (status, reason) = match outcome {
        Ok(Ok(())) => ("ok", None),
        Ok(Err(SourceError::NotConfigured(reason))) if kind == "none" => {
            ("not_configured", Some(reason))
        }
        Ok(Err(error)) => ("error", Some(error.to_string())),
        Err(_) => (
            "error",
            Some(format!("no answer within {} s", CHECK_TIMEOUT.as_secs())),
        ),
    };
    SourceHealth {
        status,
        kind,
        reason,
    }
}

impl McpHealth {
    /// Health of `sources`.
    pub fn new(sources: Sources, knowledge: Option<acdm_knowledge::Knowledge>) -> Self {
        Self {
            sources,
            knowledge,
            cached: Mutex::new(None),
        }
    }

    async fn measure(&self) -> HealthReport {
        let s = &self.sources;
        let (wiki, files, search) = tokio::join!(
            check(s.wiki.kind(), s.wiki.check()),
            check(s.files.kind(), s.files.check()),
            check(s.search.kind(), s.search.check()),
        );
        let sources = BTreeMap::from([("wiki", wiki), ("files", files), ("search", search)]);
        let all_ok = sources.values().all(|h| h.status == "ok");
        let now = chrono::Utc::now();
        let index = match &self.knowledge {
            Some(knowledge) => {
                let status = knowledge.status().await;
                Some(BTreeMap::from([
                    ("wiki", IndexHealth::of(&status.wiki, now)),
                    ("files", IndexHealth::of(&status.files, now)),
                ]))
            }
            None => None,
        };
        HealthReport {
            index,
            status: if all_ok { "ok" } else { "degraded" },
            server: "acdm-knowledge",
            version: env!("CARGO_PKG_VERSION"),
            sources,
            checked_at: now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        }
    }

    /// The current report (cached).
    pub async fn report(&self) -> HealthReport {
        let mut cached = self.cached.lock().await;
        if let Some((at, report)) = cached.as_ref()
            && at.elapsed() < CACHE
        {
            return report.clone();
        }
        let report = self.measure().await;
        *cached = Some((Instant::now(), report.clone()));
        report
    }
}
