//! The connection pool for either backend, and the one macro that runs the
//! same SQL on both.
//!
//! Queries are written once, with `$n` placeholders that SQLite and
//! PostgreSQL both accept, and type-checked for each backend by
//! [`with_pool!`]. Column types are chosen so both decode to the same Rust
//! types (TEXT ids, `DateTime<Utc>`, BOOLEAN, BIGINT).

use std::str::FromStr;

use secrecy::ExposeSecret;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::{Database, Transaction};

use crate::config::{DatabaseConfig, DatabaseTarget};
use crate::error::StoreError;

/// Which backend a store runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// Embedded SQLite.
    Sqlite,
    /// PostgreSQL.
    Postgres,
}

impl Backend {
    /// `sqlite` or `postgres`.
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgres",
        }
    }
}

/// A pool for one of the two backends.
#[derive(Debug, Clone)]
pub(crate) enum Pool {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

/// Runs `$body` with `$p` bound to the concrete pool, once per backend.
macro_rules! with_pool {
    ($pool:expr, $p:ident => $body:expr) => {
        match $pool {
            $crate::db::Pool::Sqlite($p) => $body,
            $crate::db::Pool::Postgres($p) => $body,
        }
    };
}
pub(crate) use with_pool;

/// Declares a row type and its [`sqlx::FromRow`] by column name, for
/// SQLite and PostgreSQL alike: what `#[derive(sqlx::FromRow)]` writes.
/// The derive is not used because it brings sqlx's macros crate, which
/// builds sqlx, both drivers and SQLite's C library a second time for
/// the compiler (`docs/architecture.md`, "Kept of our own").
macro_rules! row {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $($(#[$field_meta:meta])* $field_vis:vis $field:ident : $ty:ty),* $(,)?
        }
    ) => {
        $(#[$meta])*
        $vis struct $name {
            $($(#[$field_meta])* $field_vis $field: $ty),*
        }

        impl<'r, R: ::sqlx::Row> ::sqlx::FromRow<'r, R> for $name
        where
            &'r str: ::sqlx::ColumnIndex<R>,
            $($ty: ::sqlx::Decode<'r, R::Database> + ::sqlx::Type<R::Database>,)*
        {
            fn from_row(row: &'r R) -> Result<Self, ::sqlx::Error> {
                Ok(Self {
                    $($field: row.try_get(stringify!($field))?),*
                })
            }
        }
    };
}
pub(crate) use row;

/// Starting a transaction that will write.
pub(crate) trait WritePool {
    type Db: Database;
    /// SQLite: `BEGIN IMMEDIATE`, so two writers queue on the lock instead
    /// of failing when a read transaction tries to upgrade. PostgreSQL: `BEGIN`.
    async fn begin_write(&self) -> Result<Transaction<'static, Self::Db>, sqlx::Error>;
}

impl WritePool for SqlitePool {
    type Db = sqlx::Sqlite;
    async fn begin_write(&self) -> Result<Transaction<'static, sqlx::Sqlite>, sqlx::Error> {
        self.begin_with("BEGIN IMMEDIATE").await
    }
}

impl WritePool for PgPool {
    type Db = sqlx::Postgres;
    async fn begin_write(&self) -> Result<Transaction<'static, sqlx::Postgres>, sqlx::Error> {
        self.begin().await
    }
}

/// Opens the pool. For SQLite, creates the folder and the file on first
/// start and switches to WAL.
pub(crate) async fn connect(config: &DatabaseConfig) -> Result<Pool, StoreError> {
    match &config.target {
        DatabaseTarget::Sqlite { path } => {
            if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                tokio::fs::create_dir_all(parent)
                    .await
                    .map_err(|source| StoreError::Prepare {
                        path: parent.to_owned(),
                        source,
                    })?;
            }
            let options = SqliteConnectOptions::new()
                .filename(path)
                .create_if_missing(true)
                .journal_mode(SqliteJournalMode::Wal)
                .synchronous(SqliteSynchronous::Normal)
                .busy_timeout(config.acquire_timeout)
                .foreign_keys(true);
            let pool = SqlitePoolOptions::new()
                .max_connections(config.max_connections.max(1))
                .acquire_timeout(config.acquire_timeout)
                .connect_with(options)
                .await;
            match pool {
                Ok(pool) => Ok(Pool::Sqlite(pool)),
                // "pool timed out" says nothing: name the lock, if that is it.
                Err(error) => Err(match sqlite_lock(path, LOCK_PATIENCE).await {
                    Some(lock) => locked(path, lock),
                    None => error.into(),
                }),
            }
        }
        DatabaseTarget::Postgres { url } => {
            // The parse error may quote the URL; never pass it on.
            let options = PgConnectOptions::from_str(url.expose_secret())
                .map_err(|_| StoreError::Config("DATABASE_URL is not a valid PostgreSQL URL"))?
                .application_name("acdm-backend")
                .options([("statement_timeout", "30s"), ("lock_timeout", "10s")]);
            let pool = PgPoolOptions::new()
                .max_connections(config.max_connections.max(1))
                .acquire_timeout(config.acquire_timeout)
                .connect_with(options)
                .await?;
            Ok(Pool::Postgres(pool))
        }
    }
}

/// How long a look at an SQLite file's locks waits for each: a write of
/// this service's own never takes that long, a lock held elsewhere does.
pub(crate) const LOCK_PATIENCE: std::time::Duration = std::time::Duration::from_secs(1);

/// What kind of lock another process holds on an SQLite file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SqliteLock {
    /// Reading is blocked too: an exclusive lock (a process that set
    /// `locking_mode=EXCLUSIVE` and wrote, or one rewriting the file).
    Exclusive,
    /// Reads pass, writes wait: a write transaction left open
    /// (`BEGIN IMMEDIATE` or `BEGIN EXCLUSIVE` in a shell or a tool).
    Write,
}

/// The error naming the lock on `path`.
pub(crate) fn locked(path: &std::path::Path, lock: SqliteLock) -> StoreError {
    let path = path.display();
    StoreError::Locked(match lock {
        SqliteLock::Exclusive => format!(
            "the SQLite database {path} is locked by another process with an exclusive lock \
             (locking_mode=EXCLUSIVE, or a file being rewritten): it can be neither read nor \
             written; stop that process (another acdm-backend or a tool such as sqlite3 on \
             the same file), and use PostgreSQL to run several servers"
        ),
        SqliteLock::Write => format!(
            "the SQLite database {path} is locked for writing by another process \
             (a write transaction left open, e.g. BEGIN EXCLUSIVE or BEGIN IMMEDIATE in \
             sqlite3): it can be read but not written; end that transaction or stop that process"
        ),
    })
}

/// Whether an error is SQLite's "busy" or "locked".
pub(crate) fn is_busy(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::Database(db) => db
            .code()
            .and_then(|code| code.parse::<i32>().ok())
            .is_some_and(|code| matches!(code & 0xff, 5 | 6)),
        _ => false,
    }
}

/// Looks at what holds `path` with a connection of its own that waits at
/// most `patience` for each lock: `None` when nothing does (or the file
/// cannot be opened).
pub(crate) async fn sqlite_lock(
    path: &std::path::Path,
    patience: std::time::Duration,
) -> Option<SqliteLock> {
    use sqlx::{ConnectOptions, Connection, Executor};
    let options = SqliteConnectOptions::new()
        .filename(path)
        .busy_timeout(patience);
    let mut conn = match options.connect().await {
        Ok(conn) => conn,
        Err(error) if is_busy(&error) => return Some(SqliteLock::Exclusive),
        Err(_) => return None,
    };
    let lock = match conn.execute("SELECT count(*) FROM sqlite_master").await {
        Err(error) if is_busy(&error) => Some(SqliteLock::Exclusive),
        Err(_) => None,
        Ok(_) => match conn.execute("BEGIN IMMEDIATE").await {
            Err(error) if is_busy(&error) => Some(SqliteLock::Write),
            Err(_) => None,
            Ok(_) => {
                let _ = conn.execute("ROLLBACK").await;
                None
            }
        },
    };
    let _ = conn.close().await;
    lock
}

/// A write transaction on either backend, for code that runs several
/// statements (each through [`with_tx!`]) and commits once.
pub(crate) enum Tx {
    Sqlite(Transaction<'static, sqlx::Sqlite>),
    /// With whether it was started to write (then rows read are locked).
    Postgres(Transaction<'static, sqlx::Postgres>, bool),
}

impl Tx {
    /// Starts a write transaction on `pool`.
    pub(crate) async fn begin(pool: &Pool) -> Result<Self, sqlx::Error> {
        Ok(match pool {
            Pool::Sqlite(p) => Tx::Sqlite(p.begin_write().await?),
            Pool::Postgres(p) => Tx::Postgres(p.begin_write().await?, true),
        })
    }

    /// Starts a transaction that only reads (a consistent view of several
    /// rows, taking no write lock).
    pub(crate) async fn begin_read(pool: &Pool) -> Result<Self, sqlx::Error> {
        Ok(match pool {
            Pool::Sqlite(p) => Tx::Sqlite(p.begin().await?),
            Pool::Postgres(p) => Tx::Postgres(p.begin().await?, false),
        })
    }

    /// Commits.
    pub(crate) async fn commit(self) -> Result<(), sqlx::Error> {
        match self {
            Tx::Sqlite(t) => t.commit().await,
            Tx::Postgres(t, _) => t.commit().await,
        }
    }
}

/// Runs `$body` with `$t` bound to the concrete transaction (use
/// `&mut **$t` as the executor), once per backend.
macro_rules! with_tx {
    ($tx:expr, $t:ident => $body:expr) => {
        match $tx {
            $crate::db::Tx::Sqlite($t) => $body,
            $crate::db::Tx::Postgres($t, _) => $body,
        }
    };
}
pub(crate) use with_tx;
