//! Sending a [`ToolResponse`] over HTTP: the status comes from the code,
//! the body is always the envelope, and internal details go to the log,
//! never to the caller. This is the one place errors of the layers below
//! are mapped to codes.

use acdm_core::{ErrorCode, RequestId, ToolResponse};
use acdm_sources::SourceError;
use acdm_store::StoreError;
use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::journal::JournalError;

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
        let mut response = (status, Json(self.0)).into_response();
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

    /// The failure a store error maps to (logged when the caller does not
    /// see the detail).
    pub fn store(error: &StoreError, request_id: Option<&RequestId>) -> Self {
        Self(Box::new(store_failure(error, request_id)), None)
    }

    /// The failure a journal error maps to. File-store errors are worded
    /// by `source`, since only the caller knows how to show their paths.
    pub fn journal(
        error: JournalError,
        request_id: Option<&RequestId>,
        source: impl FnOnce(&SourceError) -> Failure,
    ) -> Self {
        match error {
            JournalError::Store(e) => Self::store(&e, request_id),
            JournalError::Source(e) => source(&e),
            JournalError::Conflict(message) => Self::new(ErrorCode::Conflict, message),
            JournalError::NotFound(message) => Self::new(ErrorCode::NotFound, message),
            error @ (JournalError::NoActor | JournalError::Crashed(_)) => {
                tracing::error!(error = %error, "journal refused");
                Self::new(ErrorCode::InternalError, internal_message(request_id))
            }
        }
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

/// The message for an `internal_error`: no detail, but the request id an
/// operator can search the logs for.
pub fn internal_message(request_id: Option<&RequestId>) -> String {
    match request_id {
        Some(id) => format!(
            "internal error; an operator can find the details in the server logs under request id {id}"
        ),
        None => "internal error; an operator can find the details in the server logs".to_owned(),
    }
}

/// Maps a store error to its envelope, logging what the caller does not see.
pub fn store_failure<T>(error: &StoreError, request_id: Option<&RequestId>) -> ToolResponse<T> {
    match error {
        StoreError::NotFound { .. } => {
            ToolResponse::failure(ErrorCode::NotFound, error.to_string())
        }
        StoreError::Conflict(_) => ToolResponse::failure(ErrorCode::Conflict, error.to_string()),
        StoreError::Unavailable(_) => {
            tracing::warn!(error = %error_chain(error), "database unavailable");
            ToolResponse::failure(
                ErrorCode::ServiceUnavailable,
                "the backend's database is unavailable right now",
            )
        }
        _ => {
            tracing::error!(error = %error_chain(error), "store error");
            ToolResponse::failure(ErrorCode::InternalError, internal_message(request_id))
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

    #[test]
    fn store_errors_map_to_stable_codes_without_internal_text() {
        let id = RequestId::parse("req-1").unwrap();
        let not_found = StoreError::NotFound {
            what: "project",
            key: "x".into(),
        };
        assert_eq!(
            store_failure::<()>(&not_found, None).error_code(),
            Some(ErrorCode::NotFound)
        );
        let conflict = StoreError::Conflict("taken".into());
        assert_eq!(
            store_failure::<()>(&conflict, None).error_code(),
            Some(ErrorCode::Conflict)
        );
        let down = StoreError::Unavailable(sqlx::Error::PoolTimedOut);
        assert_eq!(
            store_failure::<()>(&down, None).error_code(),
            Some(ErrorCode::ServiceUnavailable)
        );
        let corrupt = StoreError::Corrupt {
            table: "projects",
            detail: "SQLSTATE 42P01 secret".into(),
        };
        let r = store_failure::<()>(&corrupt, Some(&id));
        assert_eq!(r.error_code(), Some(ErrorCode::InternalError));
        assert!(!r.message().contains("SQLSTATE"), "{}", r.message());
        assert!(r.message().contains("req-1"));
    }
}
