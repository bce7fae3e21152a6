//! Logging: one `tracing` subscriber for the process, JSON or pretty, on
//! standard error (standard output is for command results). Only the
//! binary installs it; libraries only emit events.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::writer::BoxMakeWriter;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

mod batch;
mod json;
use batch::Batched;
pub use batch::Flush;
pub use json::JsonLines;

use crate::config::{LogFormat, LogSettings};

/// The crates whose events are this service's own log; everything else
/// (rmcp, sqlx, hyper, …) is a library.
const OWN_CRATES: &[&str] = &[
    "acdm_backend",
    "acdm_bff",
    "acdm_console",
    "acdm_core",
    "acdm_journal",
    "acdm_mcp",
    "acdm_sources",
    "acdm_store",
];

/// The default directives: our crates at `level`, libraries at `warn`,
/// so their own chatter (rmcp's lines for every MCP call, for example)
/// shows only when `ACDM_LOG` or `RUST_LOG` asks for it.
fn default_directives(level: &str) -> String {
    std::iter::once("warn".to_owned())
        .chain(OWN_CRATES.iter().map(|krate| format!("{krate}={level}")))
        .collect::<Vec<_>>()
        .join(",")
}

/// The filter: `ACDM_LOG`, else `RUST_LOG`, else our crates at `default`
/// and libraries at `warn`.
fn filter(settings: &LogSettings, default: &str) -> EnvFilter {
    let from_settings = settings
        .filter
        .as_deref()
        .and_then(|f| EnvFilter::try_new(f).ok());
    from_settings
        .or_else(|| EnvFilter::try_from_default_env().ok())
        .unwrap_or_else(|| EnvFilter::new(default_directives(default)))
}

/// Installs the global subscriber. `default` is the filter when neither
/// `ACDM_LOG` nor `RUST_LOG` is set (`info` for the server, `warn` for
/// one-shot commands). JSON lines are written in batches by a thread of
/// their own (`telemetry/batch.rs`): keep the returned guard until the process
/// ends, so that its drop writes the last of them.
#[must_use = "dropping the guard stops batching; keep it until the process ends"]
pub fn init(settings: &LogSettings, default: &str) -> Option<Flush> {
    let json = match settings.format {
        LogFormat::Json => true,
        LogFormat::Pretty => false,
        LogFormat::Auto => !std::io::stderr().is_terminal(),
    };
    let filter = filter(settings, default);
    // A second initialisation (tests) keeps the first subscriber.
    if json {
        let (writer, flush) = match Batched::spawn(std::io::stderr()) {
            Ok((batched, flush)) => (BoxMakeWriter::new(batched), Some(flush)),
            // No thread for the writer: each line written by its logger.
            Err(_) => (BoxMakeWriter::new(std::io::stderr), None),
        };
        tracing_subscriber::registry()
            .with(filter)
            .with(JsonLines::new(writer))
            .try_init()
            .ok()
            .and(flush)
    } else {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .try_init();
        None
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use tracing_subscriber::layer::SubscriberExt;

    use super::*;

    /// Records the target of every event that passes the filter.
    struct Targets(Arc<Mutex<Vec<String>>>);

    impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Targets {
        fn on_event(
            &self,
            event: &tracing::Event<'_>,
            _ctx: tracing_subscriber::layer::Context<'_, S>,
        ) {
            if let Ok(mut seen) = self.0.lock() {
                seen.push(event.metadata().target().to_owned());
            }
        }
    }

    #[test]
    fn by_default_library_info_lines_stay_out_and_ours_and_library_warnings_stay_in() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let subscriber = tracing_subscriber::registry()
            .with(EnvFilter::new(default_directives("info")))
            .with(Targets(seen.clone()));
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!(target: "rmcp::service", "serve server initialized");
            tracing::info!(target: "sqlx::query", "summary");
            tracing::debug!(target: "acdm_bff::nc", "detail");
            tracing::info!(target: "acdm_backend::http", "request finished");
            tracing::info!(target: "acdm_mcp::server", "tool called");
            tracing::info!(target: "acdm_journal", "storage event applied");
            tracing::warn!(target: "sqlx::pool", "slow acquire");
        });
        let seen = seen.lock().map(|s| s.clone()).unwrap_or_default();
        assert_eq!(
            seen,
            [
                "acdm_backend::http",
                "acdm_mcp::server",
                "acdm_journal",
                "sqlx::pool"
            ],
            "only our info lines and every warning pass"
        );
    }

    #[test]
    fn every_crate_of_the_service_counts_as_our_own_log() {
        let crates = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../crates");
        let mut missing = Vec::new();
        for entry in std::fs::read_dir(crates).unwrap() {
            let name = entry
                .unwrap()
                .file_name()
                .to_string_lossy()
                .replace('-', "_");
            if name.starts_with("acdm_") && !OWN_CRATES.contains(&name.as_str()) {
                missing.push(name);
            }
        }
        // The client and the test support never run inside the service.
        missing.retain(|n| n != "acdm_harness_client" && n != "acdm_test_support");
        assert!(missing.is_empty(), "add {missing:?} to OWN_CRATES");
    }
}
