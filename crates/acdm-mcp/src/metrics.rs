//! Prometheus metrics of the knowledge tools: calls by tool and outcome
//! (`ok` or the error code), and latency by tool. Labels are bounded sets
//! (the five tools, `resources/list`, `resources/read` and `prompts/get`;
//! the error-code table) — never a query, URI, path or project.
//! And the content index per source and the extraction pool per failure
//! reason ([`IndexMetrics`]).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    tool: &'static str,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolLabel {
    tool: &'static str,
}

/// The tool metrics, registered once.
#[derive(Clone, Debug)]
pub struct McpMetrics {
    calls: Family<CallLabels, Counter>,
    latency: Family<ToolLabel, Histogram>,
}

impl McpMetrics {
    /// Registers the metrics in `registry`.
    pub fn register(registry: &mut Registry) -> Self {
        let calls = Family::<CallLabels, Counter>::default();
        let latency = Family::<ToolLabel, Histogram>::new_with_constructor(|| {
            // 0.5 ms … ~16 s
            Histogram::new(exponential_buckets(0.0005, 2.0, 16))
        });
        registry.register(
            "acdm_mcp_tool_calls",
            "MCP tool calls (and resources/list, resources/read, prompts/get) by tool and outcome (ok or error code)",
            calls.clone(),
        );
        registry.register(
            "acdm_mcp_tool_duration_seconds",
            "MCP tool call latency by tool",
            latency.clone(),
        );
        Self { calls, latency }
    }

    /// A registry of its own, for tests.
    pub fn unregistered() -> Self {
        Self::register(&mut Registry::default())
    }

    pub(crate) fn record(&self, tool: &'static str, outcome: &'static str, seconds: f64) {
        self.calls
            .get_or_create(&CallLabels { tool, outcome })
            .inc();
        self.latency
            .get_or_create(&ToolLabel { tool })
            .observe(seconds);
    }
}

/// The content index and the extraction pool, per source and reason.
#[derive(Clone, Default)]
pub struct IndexMetrics {
    documents: Family<SourceLabel, Gauge>,
    built: Family<SourceLabel, Gauge>,
    lag: Family<SourceLabel, Gauge>,
    errors: Family<SourceLabel, Gauge>,
    unreadable: Family<SourceLabel, Gauge>,
    extractions: Gauge,
    cache_hits: Gauge,
    failures: Family<ReasonLabel, Gauge>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SourceLabel {
    source: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: &'static str,
}

impl IndexMetrics {
    /// Registers the metrics in `registry`.
    pub fn register(registry: &mut Registry) -> Self {
        let this = Self::default();
        registry.register(
            "acdm_index_documents",
            "Documents in the content index, by source (wiki, files)",
            this.documents.clone(),
        );
        registry.register(
            "acdm_index_built",
            "1 once the source's first refresh went through (searches use the index), else 0",
            this.built.clone(),
        );
        registry.register(
            "acdm_index_lag_seconds",
            "Seconds since the index last reflected the source (absent before the first refresh)",
            this.lag.clone(),
        );
        registry.register(
            "acdm_index_refresh_errors",
            "Refreshes of the source that failed since the server started",
            this.errors.clone(),
        );
        registry.register(
            "acdm_index_unreadable_documents",
            "Documents indexed by name only because their text could not be had (/mcp/health says which and why)",
            this.unreadable.clone(),
        );
        registry.register(
            "acdm_extract_children",
            "Extraction child processes started since the server started",
            this.extractions.clone(),
        );
        registry.register(
            "acdm_extract_cache_hits",
            "Documents' text answered from the extraction cache since the server started",
            this.cache_hits.clone(),
        );
        registry.register(
            "acdm_extract_failures",
            "Documents that could not be turned into text since the server started, by reason",
            this.failures.clone(),
        );
        this
    }

    /// Copies the index's and the pool's current figures in (at each
    /// scrape: they are read, not pushed).
    pub async fn update(&self, knowledge: &acdm_knowledge::Knowledge) {
        let status = knowledge.status().await;
        let now = chrono::Utc::now();
        for (source, state) in [("wiki", &status.wiki), ("files", &status.files)] {
            let label = SourceLabel { source };
            let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
            self.documents
                .get_or_create(&label)
                .set(count(state.documents));
            self.built.get_or_create(&label).set(i64::from(state.built));
            self.errors.get_or_create(&label).set(count(state.errors));
            self.unreadable
                .get_or_create(&label)
                .set(count(state.unreadable_count));
            match state.lag_seconds(now) {
                Some(lag) => {
                    self.lag.get_or_create(&label).set(count(lag));
                }
                None => {
                    self.lag.remove(&label);
                }
            }
        }
        let stats = knowledge.extractor().stats();
        self.extractions
            .set(i64::try_from(stats.extractions).unwrap_or(i64::MAX));
        self.cache_hits
            .set(i64::try_from(stats.cache_hits).unwrap_or(i64::MAX));
        for (reason, n) in stats.failures {
            self.failures
                .get_or_create(&ReasonLabel { reason })
                .set(i64::try_from(n).unwrap_or(i64::MAX));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_and_latency_are_exported_with_bounded_labels() {
        let mut registry = Registry::default();
        let metrics = McpMetrics::register(&mut registry);
        metrics.record("acdm_search_wiki", "ok", 0.002);
        metrics.record("acdm_search_wiki", "not_found", 0.001);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(
            text.contains(r#"acdm_mcp_tool_calls_total{tool="acdm_search_wiki",outcome="ok"} 1"#),
            "{text}"
        );
        assert!(text.contains(r#"outcome="not_found""#));
        assert!(
            text.contains(r#"acdm_mcp_tool_duration_seconds_count{tool="acdm_search_wiki"} 2"#),
            "{text}"
        );
    }
}

/// The approval notifications' outbox (shared by every replica) and this
/// server's deliveries, set at scrape time.
#[derive(Clone, Debug, Default)]
pub struct NotificationMetrics {
    waiting: Gauge,
    failing: Gauge,
    delivered: Gauge,
    failed: Gauge,
}

impl NotificationMetrics {
    /// Registers the metrics in `registry`.
    pub fn register(registry: &mut Registry) -> Self {
        let this = Self::default();
        for (name, help, gauge) in [
            (
                "acdm_approval_notifications_waiting",
                "Approval notifications not yet delivered (the whole deployment's outbox)",
                &this.waiting,
            ),
            (
                "acdm_approval_notifications_failing",
                "Undelivered approval notifications whose last attempt failed",
                &this.failing,
            ),
            (
                "acdm_approval_notifications_delivered",
                "Approval notifications this server delivered since it started",
                &this.delivered,
            ),
            (
                "acdm_approval_notification_failures",
                "Failed delivery attempts of this server since it started",
                &this.failed,
            ),
        ] {
            registry.register(name, help, gauge.clone());
        }
        this
    }

    /// Sets the outbox's `waiting` and `failing` messages, and this
    /// server's `delivered` messages and `failed` attempts.
    pub fn set(&self, waiting: u64, failing: u64, delivered: u64, failed: u64) {
        let to = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        self.waiting.set(to(waiting));
        self.failing.set(to(failing));
        self.delivered.set(to(delivered));
        self.failed.set(to(failed));
    }
}
