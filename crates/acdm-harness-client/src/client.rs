//! The client: the four headers, one typed method per endpoint, and the
//! one function that turns whatever happened into a `ToolResponse`
//! (spec §7):
//!
//! | situation | result |
//! |---|---|
//! | identity incomplete | `internal_error`, no request sent |
//! | service token not configured | `internal_error`, no request sent |
//! | timeout / connection failure | `internal_error` with a retry hint |
//! | 401 with a ToolResponse body | that body, unchanged |
//! | 401 `{"error":"service auth failed"}` | `internal_error` naming a service-token mismatch |
//! | 422 | `validation_error` with the field problems |
//! | any status with a ToolResponse body | that body, unchanged |
//! | non-JSON or unexpected body | `upstream_error` (5xx) or `internal_error`, with a short sanitised excerpt |

use std::sync::Arc;

use acdm_core::{ErrorCode, Identity, ToolResponse, headers};
use reqwest::Client;
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderValue};
use secrecy::ExposeSecret;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::config::{ClientConfig, ConfigError};
use crate::context::current_identity;

/// The body of the service gate's refusal: a deployment problem.
const GATE_REFUSAL: &str = "service auth failed";
/// Characters of an unexpected body quoted in a message.
const EXCERPT_CHARS: usize = 200;
/// Bytes of a response body read at most.
const MAX_BODY_BYTES: usize = 16 << 20;

use crate::methods::typed_methods;

/// The client; cheap to clone, one per process is enough.
#[derive(Clone)]
pub struct HarnessClient {
    http: Client,
    config: Arc<ClientConfig>,
}

impl std::fmt::Debug for HarnessClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HarnessClient")
            .field("base_url", &self.config.base_url.as_str())
            .field("service_token", &self.config.service_token.is_some())
            .field("timeout", &self.config.timeout)
            .finish()
    }
}

/// The client with an explicit identity, for code that runs before the
/// ambient context exists (prompt building).
#[derive(Debug, Clone)]
pub struct Scoped<'a> {
    client: &'a HarnessClient,
    identity: Identity,
}

impl HarnessClient {
    /// A client for `config`.
    pub fn new(config: ClientConfig) -> Result<Self, ConfigError> {
        let roots = rustls::RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        };
        let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|e| ConfigError::Http(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
        #[expect(
            clippy::disallowed_methods,
            reason = "the harness client is not an upstream client; it has its own timeouts and no redirects"
        )]
        let http = Client::builder()
            .tls_backend_preconfigured(tls)
            .timeout(config.timeout)
            .connect_timeout(config.timeout)
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("acdm-harness-client/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| ConfigError::Http(e.to_string()))?;
        Ok(Self {
            http,
            config: Arc::new(config),
        })
    }

    /// A client configured from the environment ([`ClientConfig::from_env`]).
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::new(ClientConfig::from_env()?)
    }

    /// The settings.
    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    /// This client acting as `identity`, whatever the ambient context says.
    pub fn as_identity(&self, identity: Identity) -> Scoped<'_> {
        Scoped {
            client: self,
            identity,
        }
    }

    /// Calls `POST <base>/<path>` with `body` as the ambient identity; see
    /// the module docs for how every outcome becomes a `ToolResponse`.
    /// `Resp = serde_json::Value` keeps every failure's data (such as the
    /// field problems of a `validation_error`).
    pub async fn call<Req: Serialize + ?Sized, Resp: DeserializeOwned>(
        &self,
        path: &str,
        body: &Req,
    ) -> ToolResponse<Resp> {
        self.send(current_identity(), Verb::Post, path, body).await
    }

    /// Calls `GET <base>/<path>` (the project reads) as the ambient
    /// identity, like [`Self::call`].
    pub async fn get<Resp: DeserializeOwned>(&self, path: &str) -> ToolResponse<Resp> {
        self.send(current_identity(), Verb::Get, path, &()).await
    }

    pub(crate) async fn send<Req: Serialize + ?Sized, Resp: DeserializeOwned>(
        &self,
        identity: Option<Identity>,
        verb: Verb,
        path: &str,
        body: &Req,
    ) -> ToolResponse<Resp> {
        let Some(identity) = identity else {
            return ToolResponse::failure(
                ErrorCode::InternalError,
                "no caller identity: the engine must run this tool inside with_identity (or use as_identity); no request was sent",
            )
            .with_suggested_action("This is a harness bug, not something to retry; tell an operator.");
        };
        let token = match &self.config.service_token {
            Some(token) if !token.expose_secret().trim().is_empty() => token,
            _ => {
                return ToolResponse::failure(
                    ErrorCode::InternalError,
                    "the service token (ACDM_MCP_SERVICE_TOKEN) is not configured for the harness; no request was sent",
                )
                .with_suggested_action("This is a deployment problem, not something to retry; tell an operator.");
            }
        };
        let url = match self.config.base_url.join(path.trim_start_matches('/')) {
            Ok(url) => url,
            Err(_) => {
                return ToolResponse::failure(
                    ErrorCode::InternalError,
                    format!("`{path}` is not a valid endpoint path"),
                );
            }
        };
        let mut headers = HeaderMap::new();
        // How long this client waits: the backend answers before it.
        let waits = self.config.timeout.as_millis().to_string();
        let values = [
            (headers::TIMEOUT_MS, waits.as_str()),
            (headers::SERVICE_AUTH, token.expose_secret()),
            (headers::USER_ID, identity.user_id().as_str()),
            (headers::AGENT_NAME, identity.agent_name().as_str()),
            (headers::THREAD_ID, identity.thread_id().as_str()),
        ];
        for (name, value) in values {
            match HeaderValue::from_str(value) {
                Ok(mut value) => {
                    value.set_sensitive(name == headers::SERVICE_AUTH);
                    headers.insert(name, value);
                }
                Err(_) => {
                    return ToolResponse::failure(
                        ErrorCode::InternalError,
                        format!(
                            "the {name} value cannot be sent as an HTTP header; no request was sent"
                        ),
                    );
                }
            }
        }
        let request = match verb {
            Verb::Get => self.http.get(url).headers(headers),
            Verb::Post => {
                headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
                let Ok(body) = serde_json::to_vec(body) else {
                    return ToolResponse::failure(
                        ErrorCode::InternalError,
                        "the request could not be encoded as JSON",
                    );
                };
                self.http.post(url).headers(headers).body(body)
            }
        };
        let answer = request.send().await;
        let response = match answer {
            Ok(response) => response,
            Err(error) => return transport_failure(&error, self.config.timeout.as_secs()),
        };
        let status = response.status().as_u16();
        let bytes = match read_body(response).await {
            Ok(bytes) => bytes,
            Err(error) => return transport_failure(&error, self.config.timeout.as_secs()),
        };
        interpret(status, &bytes)
    }

    typed_methods!(async; .await);
}

impl Scoped<'_> {
    /// [`HarnessClient::call`] as this identity.
    pub async fn call<Req: Serialize + ?Sized, Resp: DeserializeOwned>(
        &self,
        path: &str,
        body: &Req,
    ) -> ToolResponse<Resp> {
        self.client
            .send(Some(self.identity.clone()), Verb::Post, path, body)
            .await
    }

    /// [`HarnessClient::get`] as this identity.
    pub async fn get<Resp: DeserializeOwned>(&self, path: &str) -> ToolResponse<Resp> {
        self.client
            .send(Some(self.identity.clone()), Verb::Get, path, &())
            .await
    }

    typed_methods!(async; .await);
}

/// The HTTP method of a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verb {
    /// The project reads without input.
    Get,
    /// Everything else, with a JSON body.
    Post,
}

async fn read_body(mut response: reqwest::Response) -> Result<Vec<u8>, reqwest::Error> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        let room = MAX_BODY_BYTES.saturating_sub(body.len());
        body.extend_from_slice(chunk.get(..room.min(chunk.len())).unwrap_or_default());
        if body.len() >= MAX_BODY_BYTES {
            break;
        }
    }
    Ok(body)
}

/// A failure to talk to the backend at all. The message never carries the
/// URL (it could name internal hosts) or a header.
fn transport_failure<T>(error: &reqwest::Error, timeout_secs: u64) -> ToolResponse<T> {
    let what = if error.is_timeout() {
        format!("the backend did not answer within {timeout_secs} s")
    } else if error.is_connect() {
        "the backend could not be reached (connection failed)".to_owned()
    } else {
        "the connection to the backend failed".to_owned()
    };
    ToolResponse::failure(ErrorCode::InternalError, what).with_suggested_action(
        "Retry once in a few seconds; if it fails again, tell the user the tool is unavailable.",
    )
}

/// Turns a status and a body into the caller's `ToolResponse`.
pub(crate) fn interpret<T: DeserializeOwned>(status: u16, body: &[u8]) -> ToolResponse<T> {
    match serde_json::from_slice::<ToolResponse<Value>>(body) {
        Ok(envelope) => typed(envelope),
        Err(_) => unexpected(status, body),
    }
}

/// The envelope with its data in the caller's type. A success whose data
/// does not fit is an error (the two sides drifted); a failure keeps its
/// data when it fits and drops it otherwise.
fn typed<T: DeserializeOwned>(envelope: ToolResponse<Value>) -> ToolResponse<T> {
    if envelope.is_success() {
        let data = envelope.data().cloned().unwrap_or(Value::Null);
        return match serde_json::from_value::<T>(data) {
            Ok(data) => envelope.map(|_| data),
            Err(error) => ToolResponse::failure(
                ErrorCode::InternalError,
                format!(
                    "the backend's answer does not have the expected shape ({error}); client and backend versions may differ"
                ),
            ),
        };
    }
    envelope
        .map(|data| serde_json::from_value::<T>(data).ok())
        .flatten()
}

/// A body that is not a ToolResponse.
fn unexpected<T>(status: u16, body: &[u8]) -> ToolResponse<T> {
    let json = serde_json::from_slice::<Value>(body).ok();
    if status == 401
        && json
            .as_ref()
            .and_then(|v| v.get("error"))
            .and_then(Value::as_str)
            == Some(GATE_REFUSAL)
    {
        return ToolResponse::failure(
            ErrorCode::InternalError,
            "the backend refused the service token: the harness's ACDM_MCP_SERVICE_TOKEN does not match the backend's (a deployment problem)",
        )
        .with_suggested_action("Do not retry; tell an operator to align ACDM_MCP_SERVICE_TOKEN between the engine and the backend.");
    }
    let excerpt = excerpt(body);
    if status == 422 {
        return ToolResponse::failure(
            ErrorCode::ValidationError,
            format!("the backend refused the request as invalid (HTTP 422): {excerpt}"),
        );
    }
    let code = if status >= 500 {
        ErrorCode::UpstreamError
    } else {
        ErrorCode::InternalError
    };
    ToolResponse::failure(
        code,
        format!(
            "the backend answered HTTP {status} with a body that is not a ToolResponse: {excerpt}"
        ),
    )
}

/// The start of `body` as one line of printable text.
fn excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let mut out: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(EXCERPT_CHARS)
        .collect::<String>()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    if text.chars().count() > EXCERPT_CHARS {
        out.push('…');
    }
    if out.is_empty() {
        "(empty body)".to_owned()
    } else {
        format!("`{out}`")
    }
}
