//! Prometheus metrics of the knowledge tools: calls by tool and outcome
//! (`ok` or the error code), and latency by tool. Labels are bounded sets
//! (four tools, the error-code table) — never a query, path or project.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
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
            "MCP tool calls by tool and outcome (ok or error code)",
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
