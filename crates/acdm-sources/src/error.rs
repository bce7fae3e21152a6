//! The source layer's one error type. Messages are written here, from our
//! own words, project-relative paths and upstream status codes — never
//! from an upstream body, a URL (which names the service account and base
//! path) or a credential.

use std::time::Duration;

use acdm_core::{ErrorCode, ToolResponse};

/// What went wrong talking to a source.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SourceError {
    /// The file, folder, ref or project does not exist (or is not visible).
    #[error("not found: {0}")]
    NotFound(String),
    /// A precondition failed: the etag changed, the target already exists
    /// for a create-only write, or the destination exists without overwrite.
    #[error("precondition failed: {0}")]
    PreconditionFailed(String),
    /// The operation conflicts with what is there: a missing parent folder,
    /// a file where a folder is needed or the other way round, a move into
    /// itself.
    #[error("conflict: {0}")]
    Conflict(String),
    /// The source refuses this operation (403, or our own refusal such as a
    /// symbolic link in a local folder).
    #[error("permission denied: {0}")]
    PermissionDenied(String),
    /// The target is locked by another writer; retry later.
    #[error("locked: {message}")]
    Locked {
        /// What is locked.
        message: String,
        /// When to retry, if the source said.
        retry_after: Option<Duration>,
    },
    /// The source is rate limiting us.
    #[error("rate limited by the {source_name}")]
    RateLimited {
        /// Which source (`GitLab`, `Nextcloud`).
        source_name: &'static str,
        /// When to retry, if the source said.
        retry_after: Option<Duration>,
    },
    /// The source did not answer in time.
    #[error("the {0} did not answer in time")]
    Timeout(&'static str),
    /// The call's deadline passed before it was sent (waiting for a
    /// connection slot, or spent by earlier calls of the request): the
    /// source saw nothing of it.
    #[error("the call to the {0} was not made: its time ran out first")]
    NotSent(&'static str),
    /// The source failed: an error status, a broken connection, a redirect.
    #[error("{source_name} error{}: {detail}", .status.map(|s| format!(" (HTTP {s})")).unwrap_or_default())]
    Upstream {
        /// Which source.
        source_name: &'static str,
        /// The HTTP status, when there was one.
        status: Option<u16>,
        /// What happened, in our words.
        detail: String,
    },
    /// The source is not configured on this server (or lacks a credential).
    #[error("not configured: {0}")]
    NotConfigured(String),
    /// The source answered something we cannot trust or parse: malformed
    /// XML or JSON, a path outside the requested folder, an oversized body.
    #[error("invalid response from the {source_name}: {detail}")]
    InvalidResponse {
        /// Which source.
        source_name: &'static str,
        /// What was wrong.
        detail: String,
    },
    /// The request itself cannot be made (an invalid ref or range).
    #[error("invalid request: {0}")]
    InvalidRequest(String),
}

impl SourceError {
    /// True when the same call may succeed later without any change.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Locked { .. }
            | Self::RateLimited { .. }
            | Self::Timeout(_)
            | Self::NotSent(_) => true,
            Self::Upstream { status, .. } => {
                status.is_none_or(|s| matches!(s, 500 | 502 | 503 | 504))
            }
            _ => false,
        }
    }

    /// How long to wait before retrying, when the source said.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::Locked { retry_after, .. } | Self::RateLimited { retry_after, .. } => {
                *retry_after
            }
            _ => None,
        }
    }

    /// The protocol code this error is reported with, by the MCP server and
    /// the BFF alike.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::NotFound(_) => ErrorCode::NotFound,
            Self::PreconditionFailed(_) | Self::Conflict(_) => ErrorCode::Conflict,
            Self::PermissionDenied(_) => ErrorCode::PermissionDenied,
            Self::Locked { .. } | Self::RateLimited { .. } => ErrorCode::RateLimited,
            Self::Timeout(_) | Self::NotSent(_) => ErrorCode::UpstreamTimeout,
            Self::Upstream { .. } | Self::InvalidResponse { .. } => ErrorCode::UpstreamError,
            Self::NotConfigured(_) => ErrorCode::SourceNotConfigured,
            Self::InvalidRequest(_) => ErrorCode::ValidationError,
        }
    }

    /// The failure this error is reported with, by the MCP server and the
    /// BFF alike: its [`code`](Self::code), `message` (the error's own
    /// words, or a caller's that shows the paths involved) and the code's
    /// default suggested action. Upstream faults are logged here, once.
    pub fn to_response<T>(&self, message: impl Into<String>) -> ToolResponse<T> {
        let code = self.code();
        if matches!(code, ErrorCode::UpstreamError | ErrorCode::UpstreamTimeout) {
            tracing::warn!(error = %self, "upstream failed");
        }
        ToolResponse::failure(code, message)
    }

    pub(crate) fn invalid(source_name: &'static str, detail: impl Into<String>) -> Self {
        Self::InvalidResponse {
            source_name,
            detail: detail.into(),
        }
    }

    pub(crate) fn upstream(
        source_name: &'static str,
        status: Option<u16>,
        detail: impl Into<String>,
    ) -> Self {
        Self::Upstream {
            source_name,
            status,
            detail: detail.into(),
        }
    }
}

impl<T> From<SourceError> for ToolResponse<T> {
    /// [`SourceError::to_response`] in the error's own words (they never
    /// carry a URL, a body or a credential).
    fn from(error: SourceError) -> Self {
        error.to_response(error.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retryable_errors_are_the_transient_ones() {
        let check = |e: SourceError, expected: bool| assert_eq!(e.is_retryable(), expected, "{e}");
        check(SourceError::Timeout("Nextcloud"), true);
        check(
            SourceError::Locked {
                message: "x".into(),
                retry_after: None,
            },
            true,
        );
        check(
            SourceError::RateLimited {
                source_name: "GitLab",
                retry_after: Some(Duration::from_secs(3)),
            },
            true,
        );
        check(
            SourceError::upstream("Nextcloud", Some(503), "maintenance"),
            true,
        );
        check(
            SourceError::upstream("Nextcloud", None, "connection reset"),
            true,
        );
        check(
            SourceError::upstream("Nextcloud", Some(507), "insufficient storage"),
            false,
        );
        check(SourceError::NotFound("x".into()), false);
        check(SourceError::PreconditionFailed("x".into()), false);
    }

    #[test]
    fn every_error_maps_to_one_protocol_code_and_one_failure() {
        let check = |e: SourceError, code: ErrorCode| {
            assert_eq!(e.code(), code, "{e}");
            // The failure both adapters send: that code, the error's words,
            // the code's default advice.
            let response: ToolResponse = e.clone().into();
            assert_eq!(response.error_code(), Some(code), "{e}");
            assert_eq!(response.message(), e.to_string());
            assert_eq!(response.suggested_action(), code.default_suggested_action());
        };
        check(SourceError::NotFound("x".into()), ErrorCode::NotFound);
        check(
            SourceError::PreconditionFailed("x".into()),
            ErrorCode::Conflict,
        );
        check(SourceError::Conflict("x".into()), ErrorCode::Conflict);
        check(
            SourceError::PermissionDenied("x".into()),
            ErrorCode::PermissionDenied,
        );
        check(
            SourceError::Locked {
                message: "x".into(),
                retry_after: None,
            },
            ErrorCode::RateLimited,
        );
        check(
            SourceError::RateLimited {
                source_name: "GitLab",
                retry_after: None,
            },
            ErrorCode::RateLimited,
        );
        check(SourceError::Timeout("GitLab"), ErrorCode::UpstreamTimeout);
        check(
            SourceError::upstream("GitLab", Some(500), "x"),
            ErrorCode::UpstreamError,
        );
        check(
            SourceError::invalid("GitLab", "x"),
            ErrorCode::UpstreamError,
        );
        check(
            SourceError::NotConfigured("x".into()),
            ErrorCode::SourceNotConfigured,
        );
        check(
            SourceError::InvalidRequest("x".into()),
            ErrorCode::ValidationError,
        );
    }

    #[test]
    fn messages_read_as_sentences() {
        assert_eq!(
            SourceError::upstream("GitLab", Some(502), "bad gateway").to_string(),
            "GitLab error (HTTP 502): bad gateway"
        );
        assert_eq!(
            SourceError::upstream("Nextcloud", None, "connection reset").to_string(),
            "Nextcloud error: connection reset"
        );
    }
}
