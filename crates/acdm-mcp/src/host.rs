//! The `Host` allow-list of `/mcp` (`ACDM_MCP_ALLOWED_HOSTS`), checked in
//! front of rmcp: it guards against DNS rebinding, where a page served
//! from a foreign name reaches a service on the caller's network.
//!
//! rmcp reads only the `Host` header, but a request in absolute form
//! (`POST http://evil.example/mcp`) names its host in the target, and RFC
//! 9112 §3.2.2 makes that the host of the request. So every host the
//! request names — the target's authority when it has one, and the `Host`
//! header when present — must be on the list; a request naming none is
//! refused too. Matching follows rmcp's: host names in any case, IPv6
//! brackets ignored, and an entry without a port admits any port.
//!
//! A refusal is a ToolResponse (`permission_denied`, HTTP 403) naming the
//! setting, so an operator sees what to change; the allowed hosts are
//! never listed to the caller. rmcp's own check stays behind this one, on
//! the same list, as a second line: it can only refuse what this one has
//! refused already.

use std::sync::Arc;

use acdm_core::{ErrorCode, ToolResponse};
use axum::Json;
use axum::extract::Request;
use axum::http::uri::Authority;
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};

/// One allowed host, normalised.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Allowed {
    host: String,
    port: Option<u16>,
}

/// The hosts `/mcp` answers to.
#[derive(Debug, Clone)]
pub(crate) struct AllowedHosts(Arc<[Allowed]>);

impl AllowedHosts {
    /// The list from `host` or `host:port` entries. An entry that is not an
    /// authority (a bare IPv6 address such as `::1`) is a host without a
    /// port, as rmcp reads it.
    pub(crate) fn new(entries: &[String]) -> Self {
        Self(
            entries
                .iter()
                .map(|entry| entry.trim())
                .filter(|entry| !entry.is_empty())
                .map(|entry| match Authority::try_from(entry) {
                    Ok(authority) => Allowed {
                        host: normalise(authority.host()),
                        port: authority.port_u16(),
                    },
                    Err(_) => Allowed {
                        host: normalise(entry),
                        port: None,
                    },
                })
                .collect(),
        )
    }

    fn admits(&self, authority: &Authority) -> bool {
        let host = normalise(authority.host());
        let port = authority.port_u16();
        self.0
            .iter()
            .any(|allowed| allowed.host == host && allowed.port.is_none_or(|p| port == Some(p)))
    }

    /// `Ok` when every host the request names is allowed, else what is
    /// wrong.
    fn check(&self, uri: &Uri, headers: &HeaderMap) -> Result<(), String> {
        if let Some(target) = uri.authority() {
            self.check_one(target, "the request target")?;
        }
        let mut values = headers.get_all(header::HOST).iter();
        match (values.next(), values.next()) {
            (None, _) if uri.authority().is_none() => {
                Err("the request names no host (no `Host` header)".to_owned())
            }
            (None, _) => Ok(()),
            (Some(_), Some(_)) => Err("the request has more than one `Host` header".to_owned()),
            (Some(value), None) => {
                let authority = value
                    .to_str()
                    .ok()
                    .and_then(|text| Authority::try_from(text).ok())
                    .ok_or_else(|| "the `Host` header is not a host or host:port".to_owned())?;
                self.check_one(&authority, "the `Host` header")
            }
        }
    }

    fn check_one(&self, authority: &Authority, named_by: &str) -> Result<(), String> {
        if self.admits(authority) {
            return Ok(());
        }
        let shown: String = authority.as_str().chars().take(100).collect();
        Err(format!(
            "the host `{shown}` in {named_by} is not one this MCP endpoint answers to"
        ))
    }
}

/// Lowercase, without IPv6 brackets (as rmcp compares hosts).
fn normalise(host: &str) -> String {
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase()
}

/// The refusal of a request for a host not allowed, or `None`: the check
/// `serve` makes before anything else on `/mcp`.
pub(crate) fn refusal_for(allowed: &AllowedHosts, req: &Request) -> Option<Response> {
    allowed.check(req.uri(), req.headers()).err().map(|problem| {
        tracing::warn!(%problem, "refused an MCP request for a host not allowed (possible DNS rebinding)");
        refusal(&problem)
    })
}

fn refusal(problem: &str) -> Response {
    let envelope = ToolResponse::<serde_json::Value>::failure(
        ErrorCode::PermissionDenied,
        format!("{problem}; the hosts it accepts are set by ACDM_MCP_ALLOWED_HOSTS"),
    )
    .with_suggested_action(
        "Call the MCP endpoint by a host name listed in ACDM_MCP_ALLOWED_HOSTS, \
         or ask the operator to add the name you use there.",
    );
    let mut response = (StatusCode::FORBIDDEN, Json(envelope)).into_response();
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allowed() -> AllowedHosts {
        AllowedHosts::new(
            &[
                "localhost",
                "127.0.0.1",
                "::1",
                "[::1]:8002",
                "acdm-backend:8002",
            ]
            .map(str::to_owned),
        )
    }

    fn check(target: &str, host: Option<&str>) -> Result<(), String> {
        let uri: Uri = target.parse().unwrap();
        let mut headers = HeaderMap::new();
        if let Some(host) = host {
            headers.insert(header::HOST, HeaderValue::from_str(host).unwrap());
        }
        allowed().check(&uri, &headers)
    }

    #[test]
    fn every_host_a_request_names_must_be_allowed() {
        assert_eq!(check("/mcp", Some("localhost")), Ok(()));
        assert_eq!(check("/mcp", Some("LOCALHOST:1234")), Ok(()));
        assert_eq!(check("/mcp", Some("[::1]")), Ok(()));
        assert_eq!(check("/mcp", Some("acdm-backend:8002")), Ok(()));
        assert_eq!(check("http://127.0.0.1:9/mcp", Some("localhost")), Ok(()));
        assert_eq!(check("http://localhost/mcp", None), Ok(()));

        let refused = |target: &str, host: Option<&str>, says: &str| {
            let problem = check(target, host).unwrap_err();
            assert!(problem.contains(says), "{target} {host:?}: {problem}");
        };
        refused("/mcp", Some("acdm-backend"), "`acdm-backend`");
        refused("/mcp", Some("acdm-backend:9"), "`acdm-backend:9`");
        refused("/mcp", Some("evil.example"), "in the `Host` header");
        refused(
            "http://evil.example/mcp",
            Some("127.0.0.1"),
            "`evil.example` in the request target",
        );
        refused(
            "http://user@evil.example/mcp",
            Some("localhost"),
            "evil.example",
        );
        refused("/mcp", None, "no `Host` header");
        refused("/mcp", Some("bad host"), "not a host or host:port");
    }
}
