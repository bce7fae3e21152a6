//! What the pool and its child say to each other: a JSON header line
//! (`{"format":"docx","limits":{…}}`) then the document's bytes to EOF on
//! the child's stdin; one JSON answer (`{"ok":{…}}` or
//! `{"error":{"reason":…,"message":…}}`) on its stdout.

use serde::{Deserialize, Serialize};

use crate::error::ExtractError;
use crate::format::{Extracted, Format};
use crate::limits::Limits;

/// The longest header line a child reads.
pub(crate) const MAX_HEADER_BYTES: u64 = 64 * 1024;

/// The header of a request.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Request {
    pub(crate) format: Format,
    pub(crate) limits: Limits,
}

/// A child's answer.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Answer {
    Ok(Extracted),
    Error(Failure),
}

/// A failure, as a child reports it.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Failure {
    pub(crate) reason: String,
    pub(crate) message: String,
}

impl Answer {
    pub(crate) fn new(result: Result<Extracted, ExtractError>) -> Self {
        match result {
            Ok(extracted) => Self::Ok(extracted),
            Err(error) => Self::Error(Failure {
                reason: error.reason().to_owned(),
                message: error.message().to_owned(),
            }),
        }
    }

    pub(crate) fn into_result(self) -> Result<Extracted, ExtractError> {
        match self {
            Self::Ok(extracted) => Ok(extracted),
            Self::Error(failure) => Err(ExtractError::from_reason(
                &failure.reason,
                failure.message,
            )
            .unwrap_or_else(|| {
                ExtractError::Crashed(format!(
                    "the extractor gave an unknown reason ({:.40})",
                    failure.reason
                ))
            })),
        }
    }
}
