//! The client's settings: where the backend is, the service token, the
//! timeout. Values can be passed explicitly or read from the environment
//! with the deployment's names.

use std::time::Duration;

use secrecy::SecretString;
use url::Url;

/// `ACDM_BACKEND_URL` when unset.
pub const DEFAULT_BACKEND_URL: &str = "http://acdm-backend:8002";

/// `NC_OP_TIMEOUT_SECONDS` when unset: the whole call, connect included.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// How to reach the backend.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// The backend's root (`http://acdm-backend:8002`).
    pub base_url: Url,
    /// `ACDM_MCP_SERVICE_TOKEN`; `None` (or empty) makes every call an
    /// `internal_error` without a request.
    pub service_token: Option<SecretString>,
    /// The budget of one call.
    pub timeout: Duration,
}

/// A setting that cannot be used; names the setting, never a secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The URL does not parse or is not `http`/`https`.
    #[error("ACDM_BACKEND_URL `{value}` is not an http(s) URL")]
    BackendUrl {
        /// What was given.
        value: String,
    },
    /// The timeout is not a whole number of seconds between 1 and 3600.
    #[error("NC_OP_TIMEOUT_SECONDS `{value}` is not a whole number of seconds between 1 and 3600")]
    Timeout {
        /// What was given.
        value: String,
    },
    /// The HTTP client could not be built.
    #[error("the HTTP client cannot be built: {0}")]
    Http(String),
}

impl ClientConfig {
    /// A configuration from explicit values.
    pub fn new(
        base_url: &str,
        service_token: Option<SecretString>,
        timeout: Duration,
    ) -> Result<Self, ConfigError> {
        let bad = || ConfigError::BackendUrl {
            value: base_url.to_owned(),
        };
        let mut url = Url::parse(base_url).map_err(|_| bad())?;
        if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
            return Err(bad());
        }
        // A backend behind a path prefix: endpoints are joined below it,
        // whether or not the setting ends with `/`.
        if !url.path().ends_with('/') {
            let path = format!("{}/", url.path());
            url.set_path(&path);
        }
        Ok(Self {
            base_url: url,
            service_token,
            timeout,
        })
    }

    /// `ACDM_BACKEND_URL`, `ACDM_MCP_SERVICE_TOKEN`, `NC_OP_TIMEOUT_SECONDS`
    /// from the environment, with the defaults of spec §7.
    #[expect(
        clippy::disallowed_methods,
        reason = "the one library read of the environment: the engine embeds this crate and has no other way to pass the deployment's settings"
    )]
    pub fn from_env() -> Result<Self, ConfigError> {
        // tidy:allow-env: the engine embeds this crate and has no other way to pass the deployment's settings.
        let read = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let url = read("ACDM_BACKEND_URL").unwrap_or_else(|| DEFAULT_BACKEND_URL.to_owned());
        let timeout = match read("NC_OP_TIMEOUT_SECONDS") {
            None => DEFAULT_TIMEOUT,
            Some(value) => match value.trim().parse::<u64>() {
                Ok(seconds @ 1..=3600) => Duration::from_secs(seconds),
                _ => return Err(ConfigError::Timeout { value }),
            },
        };
        let token = read("ACDM_MCP_SERVICE_TOKEN").map(SecretString::from);
        Self::new(&url, token, timeout)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_http_urls_with_a_host_are_accepted() {
        for bad in ["acdm-backend:8002", "ftp://x", "http://", "not a url"] {
            assert!(
                ClientConfig::new(bad, None, DEFAULT_TIMEOUT).is_err(),
                "{bad}"
            );
        }
        let ok = ClientConfig::new("http://acdm-backend:8002", None, DEFAULT_TIMEOUT).unwrap();
        assert_eq!(ok.base_url.as_str(), "http://acdm-backend:8002/");
        let prefixed = ClientConfig::new("https://gw.example/acdm", None, DEFAULT_TIMEOUT).unwrap();
        assert_eq!(
            prefixed
                .base_url
                .join("agent-tools/nc/read")
                .unwrap()
                .as_str(),
            "https://gw.example/acdm/agent-tools/nc/read"
        );
    }
}
