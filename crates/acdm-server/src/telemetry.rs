//! Logging: one `tracing` subscriber for the process, JSON or pretty, on
//! standard error (standard output is for command results). The binary
//! decides when to install it and hands it its settings (read from the
//! environment by the binary, `RUST_LOG` included); libraries only emit
//! events.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::fmt::writer::BoxMakeWriter;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt as _;

mod batch;
mod json;
use batch::Batched;
pub use batch::Flush;
pub use json::JsonLines;

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// Pretty on a terminal, JSON otherwise.
    Auto,
    /// One JSON object per line.
    Json,
    /// Human-readable.
    Pretty,
}

/// Logging settings.
#[derive(Debug, Clone)]
pub struct LogSettings {
    /// Output format.
    pub format: LogFormat,
    /// `ACDM_LOG`, if set.
    pub filter: Option<String>,
    /// `RUST_LOG`, the filter's conventional fallback, if set (the binary
    /// reads it; this crate never reads the environment).
    pub fallback_filter: Option<String>,
}

/// The crates whose events are this service's own log; everything else
/// (rmcp, sqlx, hyper, …) is a library.
const OWN_CRATES: &[&str] = &[
    "acdm_backend",
    "acdm_bff",
    "acdm_config",
    "acdm_console",
    "acdm_core",
    "acdm_extract",
    "acdm_index",
    "acdm_journal",
    "acdm_knowledge",
    "acdm_mcp",
    "acdm_operator",
    "acdm_server",
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

/// The filter's directives: `ACDM_LOG`, else `RUST_LOG`, else our crates
/// at `default` and libraries at `warn` (a text `EnvFilter` refuses is
/// passed over, as if unset).
fn directives(settings: &LogSettings, default: &str) -> String {
    let valid = |text: &str| EnvFilter::try_new(text).is_ok();
    settings
        .filter
        .clone()
        .filter(|f| valid(f))
        .or_else(|| settings.fallback_filter.clone().filter(|f| valid(f)))
        .unwrap_or_else(|| default_directives(default))
}

/// The filter layer for `directives`. Directives of targets and levels
/// only (`acdm_bff=debug,warn`) — the default and what operators set —
/// are a `Targets` filter, which decides on an event's target and level
/// alone; `EnvFilter` does the same for them but also takes a lock shared
/// by every thread on each span's entry, exit, record and close, to
/// follow span-scoped directives (`[request{agent=…}]=debug`), which
/// only it understands and is kept for.
fn filter_layer<S>(directives: &str) -> Box<dyn Layer<S> + Send + Sync>
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
{
    static_targets(directives).map_or_else(
        || Box::new(EnvFilter::new(directives)) as Box<dyn Layer<S> + Send + Sync>,
        |targets| Box::new(targets),
    )
}

/// `directives` as a `Targets` filter, when they name only targets and
/// levels in the plainest spelling (no spaces, no empty directive, no
/// span or field filter); `None` leaves them to `EnvFilter`.
fn static_targets(directives: &str) -> Option<Targets> {
    let plain = directives.split(',').all(|d| {
        // `target=` is TRACE to EnvFilter but ERROR to Targets.
        !d.is_empty()
            && !d.ends_with('=')
            && d.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_:=.-".contains(&b))
    });
    plain.then(|| directives.parse().ok()).flatten()
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
    let directives = directives(settings, default);
    // A second initialisation (tests) keeps the first subscriber.
    if json {
        let (writer, flush) = match Batched::spawn(std::io::stderr()) {
            Ok((batched, flush)) => (BoxMakeWriter::new(batched), Some(flush)),
            // No thread for the writer: each line written by its logger.
            Err(_) => (BoxMakeWriter::new(std::io::stderr), None),
        };
        tracing_subscriber::registry()
            .with(filter_layer(&directives))
            .with(JsonLines::new(writer))
            .try_init()
            .ok()
            .and(flush)
    } else {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(EnvFilter::new(directives))
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
            tracing::info!(target: "acdm_server::http", "request finished");
            tracing::info!(target: "acdm_mcp::server", "tool called");
            tracing::info!(target: "acdm_journal", "storage event applied");
            tracing::warn!(target: "sqlx::pool", "slow acquire");
        });
        let seen = seen.lock().map(|s| s.clone()).unwrap_or_default();
        assert_eq!(
            seen,
            [
                "acdm_server::http",
                "acdm_mcp::server",
                "acdm_journal",
                "sqlx::pool"
            ],
            "only our info lines and every warning pass"
        );
    }

    /// Records the target and level of every event that passes.
    struct Levels(Arc<Mutex<Vec<String>>>);

    impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Levels {
        fn on_event(
            &self,
            event: &tracing::Event<'_>,
            _ctx: tracing_subscriber::layer::Context<'_, S>,
        ) {
            if let Ok(mut seen) = self.0.lock() {
                let meta = event.metadata();
                seen.push(format!("{} {}", meta.target(), meta.level()));
            }
        }
    }

    /// Every event of a fixed set (targets by levels) that passes under
    /// `layer`, as `target level`.
    fn passed(layer: Box<dyn Layer<tracing_subscriber::Registry> + Send + Sync>) -> Vec<String> {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let subscriber = tracing_subscriber::registry()
            .with(layer)
            .with(Levels(seen.clone()));
        macro_rules! each_level {
            ($($target:literal),*) => {$(
                tracing::trace!(target: $target, "trace");
                tracing::debug!(target: $target, "debug");
                tracing::info!(target: $target, "info");
                tracing::warn!(target: $target, "warn");
                tracing::error!(target: $target, "error");
            )*};
        }
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!("request", agent = "project-a");
            let _entered = span.enter();
            each_level!(
                "acdm_bff",
                "acdm_bff::nc",
                "acdm_bffx",
                "acdm_core::path",
                "acdm_server::http",
                "rmcp::service",
                "sqlx"
            );
        });
        seen.lock().map(|s| s.clone()).unwrap_or_default()
    }

    #[test]
    fn plain_directives_filter_as_env_filter_would_and_the_rest_stay_with_it() {
        for directives in [
            default_directives("info"),
            default_directives("debug"),
            "warn".to_owned(),
            "INFO".to_owned(),
            "off".to_owned(),
            "acdm_bff=debug,warn".to_owned(),
            "acdm_bff".to_owned(),
            "acdm_core::path=trace,acdm_core=error,info".to_owned(),
            "acdm_bff=off,acdm_bff::nc=trace".to_owned(),
        ] {
            assert!(static_targets(&directives).is_some(), "{directives}");
            let expected = passed(Box::new(EnvFilter::new(&directives)));
            assert_eq!(passed(filter_layer(&directives)), expected, "{directives}");
        }
        for directives in [
            "[request{agent=project-a}]=debug",
            "acdm_bff[request]=debug,warn",
            "acdm_bff=debug, warn",
            "acdm_bff=debug,,warn",
            "acdm_bff=",
            "acdm_bff=,warn",
            "",
        ] {
            assert!(static_targets(directives).is_none(), "{directives}");
        }
        // An empty level is EnvFilter's TRACE.
        assert!(passed(filter_layer("acdm_bff=")).contains(&"acdm_bff TRACE".to_owned()));
        // A span-scoped directive still works: it is EnvFilter's.
        let scoped = passed(filter_layer("warn,[request{agent=project-a}]=debug"));
        assert!(scoped.contains(&"rmcp::service DEBUG".to_owned()));
        assert_eq!(
            scoped.len(),
            7 * 4,
            "debug and above of every target: {scoped:?}"
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
