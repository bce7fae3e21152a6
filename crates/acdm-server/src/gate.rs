//! The service gate (spec §3.1): one check, made by the edge middleware
//! (`http::Edge`, inside the global layer `http::FrontLayer`) in front of every route.
//!
//! Deny by default. Every path is gated except an exact list of open probe
//! paths and the operator API (which has its own token). A gated request
//! needs exactly one `X-ACDM-Service-Auth` header equal to
//! `ACDM_MCP_SERVICE_TOKEN`, compared in constant time, its length hidden;
//! without a configured token nothing passes. Refusal is HTTP 401 with the
//! exact body `{"error":"service auth failed"}` — deliberately not a
//! ToolResponse: it is a deployment problem, not something an LLM can fix.
//!
//! Paths are classified by the raw request path, byte for byte, before any
//! routing. Nothing is decoded or normalised here, and routing does not
//! normalise either, so a path that only looks like an open one (`/MCP`,
//! `/%6dcp`, `//mcp`, `/mcp/health/../x`, `/mcp/health%2F..%2Fx`) is gated
//! like any other: refused without the token, and with the token it reaches
//! the router, which knows no such route (404). No spelling of a path can
//! reach a handler without passing the gate.
//!
//! A gated or operator request carrying `Origin` (a browser) is refused
//! with 403: no browser is a client, and no CORS is offered.

use acdm_bff::envelope::{Outcome, failure};
use acdm_core::{ErrorCode, SharedToken};
use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::Response;

/// `X-ACDM-Service-Auth`, as `http` spells header names (lowercase).
pub const SERVICE_AUTH: HeaderName = HeaderName::from_static("x-acdm-service-auth");

/// Paths that answer without the service token, matched exactly. The
/// protected-resource metadata (RFC 9728) is public by design: it tells a
/// person's client where to get a token.
pub const OPEN_PATHS: &[&str] = &[
    "/.well-known/oauth-protected-resource",
    "/.well-known/oauth-protected-resource/mcp",
    "/healthz",
    "/readyz",
    "/mcp/health",
    "/metrics",
    "/openapi.json",
    "/api-docs",
];

/// The exact refusal body of spec §3.1.
pub const REFUSAL_BODY: &str = r#"{"error":"service auth failed"}"#;

/// How the gate treats a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathClass {
    /// A probe: no token.
    Open,
    /// The operator API: its own bearer token, no service token, no browsers.
    Operator,
    /// The operator console: its own session (a signed cookie, CSRF
    /// tokens, same-origin form posts); browsers are its clients.
    Console,
    /// The MCP endpoint (`/mcp`, `/mcp/`): the service token, or — when
    /// people's tokens are accepted — a request the MCP server
    /// authenticates itself; no browsers.
    Mcp,
    /// Everything else: the service token, no browsers.
    Gated,
}

/// Classifies a raw request path.
pub fn classify(path: &str) -> PathClass {
    if OPEN_PATHS.contains(&path) {
        PathClass::Open
    } else if path == "/admin" || path.starts_with("/admin/") {
        PathClass::Operator
    } else if path == "/console" || path.starts_with("/console/") {
        PathClass::Console
    } else if path == "/mcp" || path == "/mcp/" {
        PathClass::Mcp
    } else {
        PathClass::Gated
    }
}

/// The gate's state: the configured token, if any, and whether `/mcp`
/// also takes people's access tokens.
#[derive(Debug, Clone)]
pub struct ServiceGate {
    expected: Option<SharedToken>,
    people: bool,
}

impl ServiceGate {
    /// A gate for `token`; `None` (or empty, or longer than
    /// [`SharedToken::MAX_LEN`], which the configuration refuses) refuses
    /// every gated request.
    pub fn new(token: Option<&str>) -> Self {
        Self {
            expected: token.and_then(SharedToken::of),
            people: false,
        }
    }

    /// The same gate, letting requests to `/mcp` without the service
    /// token through to the MCP server, which requires a person's access
    /// token of them. A request that carries a wrong service token is
    /// still refused here.
    pub fn with_people(self, people: bool) -> Self {
        Self { people, ..self }
    }

    /// True when the request carries exactly one `X-ACDM-Service-Auth`
    /// equal to the configured token.
    pub fn admits(&self, headers_in: &axum::http::HeaderMap) -> bool {
        let Some(expected) = &self.expected else {
            return false;
        };
        let mut values = headers_in.get_all(SERVICE_AUTH).iter();
        match (values.next(), values.next()) {
            (Some(value), None) => expected.matches(value.as_bytes()),
            _ => false,
        }
    }
}

fn refusal() -> Response {
    let mut response = Response::new(Body::from(REFUSAL_BODY));
    *response.status_mut() = StatusCode::UNAUTHORIZED;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
        .extensions_mut()
        .insert(Outcome("service_auth_failed"));
    response
}

fn browser_refusal() -> Response {
    let mut response = failure(
        ErrorCode::PermissionDenied,
        "browser requests (with an Origin header) are not accepted; this API is for servers",
    );
    response.extensions_mut().insert(Outcome("origin_refused"));
    response
}

/// What the gate decided.
#[derive(Debug)]
pub enum Decision {
    /// Let through as it is (an open path, the operator API, the console,
    /// or `/mcp` for the MCP server to authenticate).
    Pass,
    /// Let through as the service's: the caller presented the token.
    Service,
    /// Answer this instead.
    Refuse(Response),
}

/// The gate's decision on a request.
pub fn decide(gate: &ServiceGate, req: &Request) -> Decision {
    let has_origin = req.headers().contains_key(header::ORIGIN);
    let class = classify(req.uri().path());
    match class {
        PathClass::Open => return Decision::Pass,
        PathClass::Operator if has_origin => return Decision::Refuse(browser_refusal()),
        PathClass::Operator | PathClass::Console => return Decision::Pass,
        PathClass::Mcp | PathClass::Gated => {}
    }
    let service = gate.admits(req.headers());
    // A person's request to `/mcp`: no service token at all (a wrong one is
    // refused), for the MCP server to authenticate.
    let person =
        class == PathClass::Mcp && gate.people && !req.headers().contains_key(SERVICE_AUTH);
    if !service && !person {
        Decision::Refuse(refusal())
    } else if has_origin {
        Decision::Refuse(browser_refusal())
    } else if service {
        Decision::Service
    } else {
        Decision::Pass
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_constant_is_the_protocol_header() {
        assert!(
            SERVICE_AUTH
                .as_str()
                .eq_ignore_ascii_case(acdm_core::headers::SERVICE_AUTH)
        );
    }

    #[test]
    fn only_exact_probe_paths_are_open() {
        let check = |path: &str, expected: PathClass| {
            assert_eq!(classify(path), expected, "{path}");
        };
        check("/healthz", PathClass::Open);
        check("/readyz", PathClass::Open);
        check("/metrics", PathClass::Open);
        check("/metrics/", PathClass::Gated);
        check("/openapi.json", PathClass::Open);
        check("/openapi.json/", PathClass::Gated);
        check("/OPENAPI.json", PathClass::Gated);
        check("/mcp/health", PathClass::Open);
        check("/mcp/health/", PathClass::Gated);
        check("/mcp/health/../x", PathClass::Gated);
        check("/mcp/health%2F..%2Fx", PathClass::Gated);
        check("/mcp/healthz", PathClass::Gated);
        check("/MCP/health", PathClass::Gated);
        check("//mcp/health", PathClass::Gated);
        check("/healthz/../agent-tools", PathClass::Gated);
        check("/mcp", PathClass::Mcp);
        check("/mcp/", PathClass::Mcp);
        check("/mcp/mcp", PathClass::Gated);
        check("/.well-known/oauth-protected-resource", PathClass::Open);
        check("/.well-known/oauth-protected-resource/mcp", PathClass::Open);
        check("/.well-known/oauth-protected-resource/", PathClass::Gated);
        check("/", PathClass::Gated);
        check("*", PathClass::Gated);
        check("", PathClass::Gated);
        check("/admin", PathClass::Operator);
        check("/admin/projects", PathClass::Operator);
        check("/administrator", PathClass::Gated);
        check("/console", PathClass::Console);
        check("/console/events", PathClass::Console);
        check("/consoles", PathClass::Gated);
        check("/CONSOLE", PathClass::Gated);
        check("/api-docs", PathClass::Open);
        check("/api-docs/", PathClass::Gated);
        check("/ADMIN/projects", PathClass::Gated);
    }

    #[test]
    fn mcp_passes_without_the_token_only_for_people_and_never_for_a_browser() {
        let token = "0123456789abcdef0123456789abcdef";
        let decide_on = |people: bool, path: &str, headers: &[(&str, &str)]| {
            let gate = ServiceGate::new(Some(token)).with_people(people);
            let mut request = Request::new(Body::empty());
            *request.uri_mut() = path.parse().unwrap();
            for (name, value) in headers {
                request.headers_mut().append(
                    HeaderName::from_bytes(name.as_bytes()).unwrap(),
                    HeaderValue::from_str(value).unwrap(),
                );
            }
            match decide(&gate, &request) {
                Decision::Pass => "pass",
                Decision::Service => "service",
                Decision::Refuse(r) if r.status() == StatusCode::UNAUTHORIZED => "401",
                Decision::Refuse(_) => "403",
            }
        };
        let service = ("x-acdm-service-auth", token);
        let wrong = ("x-acdm-service-auth", "wrong-token-0123456789abcdef0123");
        let origin = ("origin", "https://evil.example");
        for people in [false, true] {
            assert_eq!(decide_on(people, "/mcp", &[service]), "service");
            assert_eq!(decide_on(people, "/mcp", &[wrong]), "401");
            assert_eq!(decide_on(people, "/mcp", &[service, origin]), "403");
            assert_eq!(decide_on(people, "/agent-tools/nc/list", &[]), "401");
            assert_eq!(
                decide_on(people, "/agent-tools/nc/list", &[service]),
                "service"
            );
            assert_eq!(decide_on(people, "/mcp/mcp", &[]), "401");
        }
        assert_eq!(decide_on(false, "/mcp", &[]), "401");
        assert_eq!(decide_on(true, "/mcp", &[]), "pass");
        assert_eq!(decide_on(true, "/mcp/", &[]), "pass");
        assert_eq!(decide_on(true, "/mcp", &[origin]), "403");
        assert_eq!(decide_on(true, "/mcp", &[wrong, origin]), "401");
        assert_eq!(
            decide_on(true, "/.well-known/oauth-protected-resource", &[]),
            "pass"
        );
    }

    #[test]
    fn the_gate_needs_exactly_one_matching_header() {
        let token = "0123456789abcdef0123456789abcdef";
        let gate = ServiceGate::new(Some(token));
        let check = |values: &[&[u8]], expected: bool| {
            let mut map = axum::http::HeaderMap::new();
            for v in values {
                map.append(SERVICE_AUTH, HeaderValue::from_bytes(v).unwrap());
            }
            assert_eq!(gate.admits(&map), expected, "{values:?}");
        };
        check(&[token.as_bytes()], true);
        check(&[], false);
        check(&[b""], false);
        check(&[token.to_uppercase().as_bytes()], false);
        check(&[&token.as_bytes()[..31]], false);
        check(&[token.as_bytes(), token.as_bytes()], false);
        check(&[b"wrong", token.as_bytes()], false);
        check(&["0123456789abcdef0123456789abcdé".as_bytes()], false);
    }

    #[test]
    fn without_a_configured_token_nothing_is_admitted() {
        for gate in [ServiceGate::new(None), ServiceGate::new(Some(""))] {
            let mut map = axum::http::HeaderMap::new();
            assert!(!gate.admits(&map));
            map.insert(SERVICE_AUTH, HeaderValue::from_static(""));
            assert!(
                !gate.admits(&map),
                "an empty header never matches an empty token"
            );
        }
    }
}
