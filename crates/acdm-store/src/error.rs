//! The store's error type. Messages are safe to show callers; the sqlx
//! source (which may name tables or servers) is kept for logs only.

use std::path::PathBuf;

/// What went wrong in the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The named record does not exist.
    #[error("{what} `{key}` not found")]
    NotFound {
        /// What kind of record (`project`, `agent mount`).
        what: &'static str,
        /// The key that was looked up.
        key: String,
    },
    /// The change collides with existing data (a taken slug or name).
    #[error("{0}")]
    Conflict(String),
    /// A row changed since a write was planned against it (optimistic
    /// concurrency): nothing was written.
    #[error("{what} changed since the change was planned: {detail}")]
    Stale {
        /// The row, for people (`meeting 7f…`).
        what: String,
        /// How it differs (`it is at version 4 now`).
        detail: String,
    },
    /// An approval could not be used for a write: another call used it
    /// first, or it expired meanwhile. Nothing was recorded.
    #[error("{0}")]
    ApprovalSpent(String),
    /// A paging cursor that this store did not hand out.
    #[error("{}", acdm_core::business::CursorError)]
    InvalidCursor,
    /// The database cannot be reached, timed out or is busy; retryable.
    #[error("the database is unavailable")]
    Unavailable(#[source] sqlx::Error),
    /// Another process holds the SQLite file locked, or the database takes
    /// no writes: says which lock, so an operator knows what to stop.
    #[error("{0}")]
    Locked(String),
    /// Any other database failure.
    #[error("database error")]
    Database(#[source] sqlx::Error),
    /// Migrations could not be applied or inspected.
    #[error("database migration failed")]
    Migrate(#[source] sqlx::migrate::MigrateError),
    /// A stored row no longer passes the domain rules.
    #[error("stored {table} row is invalid: {detail}")]
    Corrupt {
        /// The table.
        table: &'static str,
        /// What failed to parse.
        detail: String,
    },
    /// The database settings cannot be used (for example an unparsable
    /// PostgreSQL URL). Never contains the URL.
    #[error("{0}")]
    Config(&'static str),
    /// The SQLite file's folder could not be created.
    #[error("cannot create the database folder {}", path.display())]
    Prepare {
        /// The folder.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

impl StoreError {
    /// The ToolResponse code this error answers with. Only `NotFound`,
    /// `Conflict`, `Stale`, `ApprovalSpent` and `InvalidCursor` carry text meant for the caller; the others are logged.
    pub fn code(&self) -> acdm_core::ErrorCode {
        use acdm_core::ErrorCode;
        match self {
            Self::NotFound { .. } => ErrorCode::NotFound,
            Self::Conflict(_) | Self::Stale { .. } => ErrorCode::Conflict,
            Self::ApprovalSpent(_) => ErrorCode::ApprovalUsed,
            Self::InvalidCursor => ErrorCode::ValidationError,
            Self::Unavailable(_) | Self::Locked(_) => ErrorCode::ServiceUnavailable,
            Self::Database(_)
            | Self::Migrate(_)
            | Self::Corrupt { .. }
            | Self::Config(_)
            | Self::Prepare { .. } => ErrorCode::InternalError,
        }
    }

    /// True when retrying later may succeed (connection, pool, lock).
    pub fn is_unavailable(&self) -> bool {
        matches!(self, Self::Unavailable(_))
    }

    pub(crate) fn corrupt(table: &'static str, detail: impl std::fmt::Display) -> Self {
        Self::Corrupt {
            table,
            detail: detail.to_string(),
        }
    }
}

impl From<sqlx::Error> for StoreError {
    fn from(error: sqlx::Error) -> Self {
        match &error {
            sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::Io(_)
            | sqlx::Error::Tls(_)
            | sqlx::Error::Protocol(_)
            | sqlx::Error::WorkerCrashed => Self::Unavailable(error),
            sqlx::Error::Database(db) if db.is_unique_violation() => {
                Self::Conflict("a record with the same key already exists".to_owned())
            }
            // SQLITE_BUSY (5) and SQLITE_LOCKED (6): another writer holds the lock.
            sqlx::Error::Database(db) if matches!(db.code().as_deref(), Some("5" | "6")) => {
                Self::Unavailable(error)
            }
            // PostgreSQL class 08 (connection), 57P (shutdown), 53 (resources).
            sqlx::Error::Database(db)
                if db.code().is_some_and(|c| {
                    c.starts_with("08") || c.starts_with("57P") || c.starts_with("53")
                }) =>
            {
                Self::Unavailable(error)
            }
            _ => Self::Database(error),
        }
    }
}

impl From<sqlx::migrate::MigrateError> for StoreError {
    fn from(error: sqlx::migrate::MigrateError) -> Self {
        Self::Migrate(error)
    }
}
