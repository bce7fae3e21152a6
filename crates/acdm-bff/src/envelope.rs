//! Sending a [`ToolResponse`] over HTTP: the status comes from the code,
//! the body is always the envelope, and internal details go to the log,
//! never to the caller.
//!
//! This is the one place errors of the layers below become envelopes:
//! every lower error knows its code (`StoreError::code`,
//! `SourceError::code`, `JournalError::code`), and the `From` impls here
//! turn it into a [`Failure`] — choosing what the caller may read and
//! logging the rest — so handlers simply use `?`. A source error's envelope
//! is its own (`From<SourceError> for ToolResponse`, shared with the MCP
//! server). The request id that an `internal_error` names is added here
//! too, from [`request_scope`].

use acdm_core::{ErrorCode, RequestId, ScopeError, ToolResponse};
use acdm_journal::JournalError;
use acdm_sources::SourceError;
use acdm_store::StoreError;
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

tokio::task_local! {
    /// The id of the request being handled, for `internal_error` messages.
    /// `None` outside a request, or for a request without an id.
    static REQUEST_ID: Option<RequestId>;
}

/// Middleware: makes the request's id (set by the binary's outermost
/// middleware) the one [`internal_message`] names, for the whole handler.
pub async fn request_scope(req: Request, next: Next) -> Response {
    let id = req.extensions().get::<RequestId>().cloned();
    in_request_scope(id, next.run(req)).await
}

/// Runs `handling` with `id` as the request id [`internal_message`] names:
/// [`request_scope`] for work that is not a layer (the agent pipeline,
/// `pipeline::Behind::run`).
///
/// Not an `async fn`: its future would hold `handling` twice (as its
/// argument, then inside the scope's future), and a handler's future is
/// moved whole into a box on every call.
pub(crate) fn in_request_scope<F: Future<Output = Response>>(
    id: Option<RequestId>,
    handling: F,
) -> impl Future<Output = Response> {
    REQUEST_ID.scope(id, handling)
}

/// Why a request was refused before a handler ran (`service_auth_failed`,
/// `admin_auth_failed`, …), set as a response extension so the request
/// span's `outcome` says so instead of a bare status class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome(pub &'static str);

/// A [`ToolResponse`] ready to be sent: HTTP status of its code, JSON body,
/// `Cache-Control: no-store`.
#[derive(Debug)]
pub struct Envelope<T>(pub ToolResponse<T>);

impl<T: Serialize> IntoResponse for Envelope<T> {
    fn into_response(self) -> Response {
        let status =
            StatusCode::from_u16(self.0.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        // What axum's `Json` writes, a long string (a read's window)
        // escaped 64 bytes at a time (`acdm_core::json`).
        let mut response = match acdm_core::json::to_vec(&self.0) {
            Ok(body) => {
                let mut response = (status, body).into_response();
                response.headers_mut().insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                );
                response
            }
            Err(error) => (StatusCode::INTERNAL_SERVER_ERROR, error.to_string()).into_response(),
        };
        response
            .headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        response
    }
}

impl<T> From<ToolResponse<T>> for Envelope<T> {
    fn from(value: ToolResponse<T>) -> Self {
        Self(value)
    }
}

/// A failed request, as the envelope it answers with: the one error type
/// of the HTTP adapters. Boxed, since errors are the cold path. The HTTP
/// status is the code's, unless a more precise one of the same class was
/// set with [`Failure::with_http_status`].
#[derive(Debug)]
pub struct Failure(Box<ToolResponse<serde_json::Value>>, Option<StatusCode>);

impl Failure {
    /// A failure with `code`'s default suggested action.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self(Box::new(ToolResponse::failure(code, message)), None)
    }

    /// Replaces the suggested action.
    #[must_use]
    pub fn with_suggested_action(self, action: impl Into<String>) -> Self {
        Self(Box::new(self.0.with_suggested_action(action)), self.1)
    }

    /// Attaches details (for example field problems) as `data`.
    #[must_use]
    pub fn with_data(self, data: impl Serialize) -> Self {
        let value = serde_json::to_value(data).unwrap_or(serde_json::Value::Null);
        Self(Box::new(self.0.with_data(value)), self.1)
    }

    /// Sends the envelope with `status` instead of its code's, for the few
    /// refusals HTTP has a more precise word for (`415` for a body that is
    /// not UTF-8 JSON is still a `validation_error`). Only a status of the
    /// code's class is taken, so a client that reads the class still reads
    /// the code right.
    #[must_use]
    pub fn with_http_status(self, status: StatusCode) -> Self {
        let same_class = self.0.http_status() / 100 == status.as_u16() / 100;
        let status = same_class.then_some(status).or(self.1);
        Self(self.0, status)
    }

    /// The envelope.
    pub fn envelope(&self) -> &ToolResponse<serde_json::Value> {
        &self.0
    }
}

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        let outcome = self.0.error_code().map_or("error", ErrorCode::as_str);
        let mut response = Envelope(*self.0).into_response();
        if let Some(status) = self.1 {
            *response.status_mut() = status;
        }
        response.extensions_mut().insert(Outcome(outcome));
        response
    }
}

/// A failure envelope with no data, as a response.
pub fn failure(code: ErrorCode, message: impl Into<String>) -> Response {
    Failure::new(code, message).into_response()
}

/// The message for an `internal_error`: no detail, but the id of the
/// request being handled (see [`request_scope`]), which an operator can
/// search the logs for.
pub fn internal_message() -> String {
    REQUEST_ID
        .try_with(|id| {
            id.as_ref().map(|id| format!(
                "internal error; an operator can find the details in the server logs under request id {id}"
            ))
        })
        .ok()
        .flatten()
        .unwrap_or_else(|| {
            "internal error; an operator can find the details in the server logs".to_owned()
        })
}

impl From<StoreError> for Failure {
    /// What the caller may read of a store error: the record not found or
    /// the conflict; anything else is logged and answered generically.
    fn from(error: StoreError) -> Self {
        let code = error.code();
        match code {
            ErrorCode::NotFound
            | ErrorCode::Conflict
            | ErrorCode::ValidationError
            | ErrorCode::ApprovalUsed => Self::new(code, error.to_string()),
            ErrorCode::ServiceUnavailable => {
                tracing::warn!(error = %error_chain(&error), "database unavailable");
                Self::new(code, "the backend's database is unavailable right now")
            }
            _ => {
                tracing::error!(error = %error_chain(&error), "store error");
                Self::new(ErrorCode::InternalError, internal_message())
            }
        }
    }
}

impl From<SourceError> for Failure {
    /// A file-store or wiki error in its own words (they never carry a URL,
    /// a body or a credential), mapped as the MCP server maps it
    /// (`From<SourceError> for ToolResponse`, in acdm-sources).
    fn from(error: SourceError) -> Self {
        Self(Box::new(error.into()), None)
    }
}

impl Failure {
    /// A source error with its code, in `message`'s words (a caller that
    /// knows how to show the paths involved); upstream faults are logged
    /// ([`SourceError::to_response`]).
    pub fn source(error: &SourceError, message: impl Into<String>) -> Self {
        Self(Box::new(error.to_response(message)), None)
    }
}

impl From<JournalError> for Failure {
    fn from(error: JournalError) -> Self {
        match error {
            JournalError::Store(e) => e.into(),
            JournalError::Source(e) => e.into(),
            JournalError::Conflict(message) => Self::new(ErrorCode::Conflict, message),
            JournalError::NotFound(message) => Self::new(ErrorCode::NotFound, message),
            error @ JournalError::Crashed(_) => {
                tracing::error!(error = %error, "journal stopped");
                Self::new(ErrorCode::InternalError, internal_message())
            }
        }
    }
}

impl From<ScopeError> for Failure {
    fn from(error: ScopeError) -> Self {
        match error {
            ScopeError::NotProvisioned { agent } => Self::new(
                ErrorCode::ScopeViolation,
                format!("agent {agent} is not a provisioned project manager"),
            ),
            error @ ScopeError::Directory(_) => {
                tracing::warn!(error = %error_chain(&error), "scope resolution failed");
                Self::new(
                    ErrorCode::ServiceUnavailable,
                    "the backend cannot resolve this agent's project right now",
                )
            }
        }
    }
}

/// `error` and its sources, joined, for one log field.
pub fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use axum::body::to_bytes;

    use super::*;

    #[tokio::test]
    async fn an_envelope_carries_the_status_of_its_code() {
        let response = failure(ErrorCode::KillSwitchOff, "writes are off");
        assert_eq!(response.status(), StatusCode::FORBIDDEN);
        assert_eq!(response.headers()[header::CONTENT_TYPE], "application/json");
        assert_eq!(response.headers()[header::CACHE_CONTROL], "no-store");
        let body = to_bytes(response.into_body(), 4096).await.unwrap();
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["code"], "kill_switch_off");
        assert_eq!(v["success"], false);
    }

    fn code_of(failure: Failure) -> Option<ErrorCode> {
        failure.envelope().error_code()
    }

    #[tokio::test]
    async fn store_errors_map_to_stable_codes_without_internal_text() {
        let id = RequestId::parse("req-1").unwrap();
        let not_found = StoreError::NotFound {
            what: "project",
            key: "x".into(),
        };
        assert_eq!(code_of(not_found.into()), Some(ErrorCode::NotFound));
        let conflict = StoreError::Conflict("taken".into());
        assert_eq!(code_of(conflict.into()), Some(ErrorCode::Conflict));
        let down = StoreError::Unavailable(sqlx::Error::PoolTimedOut);
        assert_eq!(code_of(down.into()), Some(ErrorCode::ServiceUnavailable));
        let corrupt = || StoreError::Corrupt {
            table: "projects",
            detail: "SQLSTATE 42P01 secret".into(),
        };
        let inside = REQUEST_ID
            .scope(Some(id), async { Failure::from(corrupt()) })
            .await;
        let r = inside.envelope();
        assert_eq!(r.error_code(), Some(ErrorCode::InternalError));
        assert!(!r.message().contains("SQLSTATE"), "{}", r.message());
        assert!(r.message().contains("req-1"), "{}", r.message());
        let outside = Failure::from(corrupt());
        assert!(!outside.envelope().message().contains("req-1"));
    }
}
