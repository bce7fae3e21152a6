//! The crate's one error type; each variant knows its stable code.

/// Why an index operation failed. Messages name no document text.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// The query has no searchable word (only punctuation, spaces or
    /// symbols).
    #[error("the query has no word to search for: use words or characters, not only punctuation")]
    EmptyQuery,
    /// An argument the caller gave is unusable (an empty key, a scope that
    /// is not a folder).
    #[error("{0}")]
    Invalid(String),
    /// Another writer (this process or another) holds the index directory.
    #[error("{0}")]
    Locked(String),
    /// The index directory cannot be read or written.
    #[error("{0}")]
    Storage(String),
    /// The search engine failed.
    #[error("{0}")]
    Engine(String),
}

/// Every code, in declaration order.
const CODES: [&str; 5] = [
    "empty_query",
    "invalid_request",
    "index_locked",
    "index_storage",
    "index_failed",
];

impl IndexError {
    /// The stable snake_case code: `empty_query`, `invalid_request`,
    /// `index_locked`, `index_storage` or `index_failed`.
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            Self::EmptyQuery => "empty_query",
            Self::Invalid(_) => "invalid_request",
            Self::Locked(_) => "index_locked",
            Self::Storage(_) => "index_storage",
            Self::Engine(_) => "index_failed",
        }
    }

    /// Every code [`code`](Self::code) can give.
    #[must_use]
    pub fn codes() -> &'static [&'static str] {
        &CODES
    }
}

impl From<tantivy::TantivyError> for IndexError {
    fn from(error: tantivy::TantivyError) -> Self {
        use tantivy::TantivyError as T;
        match error {
            T::LockFailure(..) => Self::Locked(format!(
                "the index directory is in use by another writer: {error}"
            )),
            T::IoError(_)
            | T::OpenDirectoryError(_)
            | T::OpenReadError(_)
            | T::OpenWriteError(_) => Self::Storage(format!("index storage: {error}")),
            other => Self::Engine(format!("index: {other}")),
        }
    }
}

impl From<std::io::Error> for IndexError {
    fn from(error: std::io::Error) -> Self {
        Self::Storage(format!("index storage: {error}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_variant_has_a_listed_code() {
        let all = [
            IndexError::EmptyQuery,
            IndexError::Invalid(String::new()),
            IndexError::Locked(String::new()),
            IndexError::Storage(String::new()),
            IndexError::Engine(String::new()),
        ];
        let codes: Vec<&str> = all.iter().map(IndexError::code).collect();
        assert_eq!(codes, IndexError::codes());
    }
}
