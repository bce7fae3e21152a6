//! How to reach the database: the typed configuration the binary builds
//! from `DATABASE_URL` and `ACDM_DATA_DIR`.

use std::path::PathBuf;
use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};

/// Which database, and where.
#[derive(Debug, Clone)]
pub enum DatabaseTarget {
    /// An embedded SQLite file (created on first start, WAL mode).
    Sqlite {
        /// The database file.
        path: PathBuf,
    },
    /// A PostgreSQL server; the URL may carry a password.
    Postgres {
        /// `postgres://…` or `postgresql://…`.
        url: SecretString,
    },
}

/// Why a `DATABASE_URL` value was refused. Never contains the URL itself.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    /// Neither `postgres://`, `postgresql://` nor `sqlite:`.
    #[error("unsupported scheme; use postgres://…, postgresql://… or sqlite:<path>")]
    UnsupportedScheme,
    /// `sqlite:` without a file path.
    #[error("sqlite: needs a file path, such as sqlite:./data/acdm.sqlite3")]
    EmptySqlitePath,
    /// `sqlite::memory:` would lose everything at exit and differ per connection.
    #[error("in-memory SQLite is not supported; give a file path")]
    InMemory,
}

impl DatabaseTarget {
    /// Interprets a `DATABASE_URL` value.
    pub fn from_url(url: &SecretString) -> Result<Self, TargetError> {
        let raw = url.expose_secret().trim();
        if raw.starts_with("postgres://") || raw.starts_with("postgresql://") {
            return Ok(Self::Postgres {
                url: SecretString::from(raw.to_owned()),
            });
        }
        let Some(rest) = raw.strip_prefix("sqlite:") else {
            return Err(TargetError::UnsupportedScheme);
        };
        let path = rest.strip_prefix("//").unwrap_or(rest);
        let path = path.split('?').next().unwrap_or_default();
        if path.is_empty() {
            return Err(TargetError::EmptySqlitePath);
        }
        if path == ":memory:" {
            return Err(TargetError::InMemory);
        }
        Ok(Self::Sqlite {
            path: PathBuf::from(path),
        })
    }

    /// A short description safe to print (no password).
    pub fn describe(&self) -> String {
        match self {
            Self::Sqlite { path } => format!("sqlite file {}", path.display()),
            Self::Postgres { .. } => "postgresql (DATABASE_URL)".to_owned(),
        }
    }
}

/// Database settings.
#[derive(Debug, Clone)]
pub struct DatabaseConfig {
    /// Which database.
    pub target: DatabaseTarget,
    /// Pool size.
    pub max_connections: u32,
    /// How long a request waits for a pooled connection before failing
    /// with "unavailable".
    pub acquire_timeout: Duration,
}

impl DatabaseConfig {
    /// Defaults for `target`: 10 connections, 5 s acquire timeout.
    pub fn new(target: DatabaseTarget) -> Self {
        Self {
            target,
            max_connections: 10,
            acquire_timeout: Duration::from_secs(5),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(url: &str, expected: Result<&str, TargetError>) {
        let got = DatabaseTarget::from_url(&SecretString::from(url.to_owned()));
        let got = got.map(|t| match t {
            DatabaseTarget::Sqlite { path } => format!("sqlite {}", path.display()),
            DatabaseTarget::Postgres { url } => format!("pg {}", url.expose_secret()),
        });
        assert_eq!(got.as_deref().map_err(Clone::clone), expected, "url {url}");
    }

    #[test]
    fn database_urls_select_the_backend() {
        check("postgres://u:p@h/db", Ok("pg postgres://u:p@h/db"));
        check("postgresql://h/db", Ok("pg postgresql://h/db"));
        check("sqlite:./data/x.sqlite3", Ok("sqlite ./data/x.sqlite3"));
        check(
            "sqlite:///var/lib/acdm/x.db",
            Ok("sqlite /var/lib/acdm/x.db"),
        );
        check("sqlite://rel.db?mode=rwc", Ok("sqlite rel.db"));
        check("sqlite:", Err(TargetError::EmptySqlitePath));
        check("sqlite::memory:", Err(TargetError::InMemory));
        check("mysql://h/db", Err(TargetError::UnsupportedScheme));
        check("", Err(TargetError::UnsupportedScheme));
    }

    #[test]
    fn describe_never_shows_the_password() {
        let t = DatabaseTarget::from_url(&SecretString::from("postgres://u:hunter2@h/db")).unwrap();
        assert!(!t.describe().contains("hunter2"));
        assert!(!format!("{t:?}").contains("hunter2"));
    }
}
