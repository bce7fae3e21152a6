//! Logging: one `tracing` subscriber for the process, JSON or pretty, on
//! standard error (standard output is for command results). Only the
//! binary installs it; libraries only emit events.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

use crate::config::{LogFormat, LogSettings};

/// The filter: `ACDM_LOG`, else `RUST_LOG`, else `default`.
fn filter(settings: &LogSettings, default: &str) -> EnvFilter {
    let from_settings = settings
        .filter
        .as_deref()
        .and_then(|f| EnvFilter::try_new(f).ok());
    from_settings
        .or_else(|| EnvFilter::try_from_default_env().ok())
        .unwrap_or_else(|| EnvFilter::new(default))
}

/// Installs the global subscriber. `default` is the filter when neither
/// `ACDM_LOG` nor `RUST_LOG` is set (`info` for the server, `warn` for
/// one-shot commands).
pub fn init(settings: &LogSettings, default: &str) {
    let json = match settings.format {
        LogFormat::Json => true,
        LogFormat::Pretty => false,
        LogFormat::Auto => !std::io::stderr().is_terminal(),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter(settings, default))
        .with_writer(std::io::stderr);
    // A second initialisation (tests) keeps the first subscriber.
    let _ = if json {
        builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .try_init()
    } else {
        builder.try_init()
    };
}
