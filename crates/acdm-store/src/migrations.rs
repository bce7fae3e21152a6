//! The embedded migrations (`migrations/sqlite`, `migrations/postgres` at
//! the repository root) and how far a database has got with them.

use sqlx::migrate::{Migrate, Migrator};

use crate::db::{Pool, with_pool};
use crate::error::StoreError;

static SQLITE: Migrator = sqlx::migrate!("../../migrations/sqlite");
static POSTGRES: Migrator = sqlx::migrate!("../../migrations/postgres");

const TABLE: &str = "_sqlx_migrations";

/// Where a database stands against the embedded migrations.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct MigrationStatus {
    /// Versions applied successfully that this binary knows.
    pub applied: Vec<i64>,
    /// Versions this binary has that the database lacks.
    pub pending: Vec<i64>,
    /// Applied versions whose checksum differs from the embedded file (a
    /// released migration was edited).
    pub modified: Vec<i64>,
    /// Applied versions this binary does not know (a newer binary ran).
    pub unknown: Vec<i64>,
    /// A version whose migration failed half-way, if any.
    pub dirty: Option<i64>,
}

impl MigrationStatus {
    /// True when every embedded migration is applied, unchanged.
    pub fn is_current(&self) -> bool {
        self.pending.is_empty() && self.modified.is_empty() && self.dirty.is_none()
    }
}

fn migrator(pool: &Pool) -> &'static Migrator {
    match pool {
        Pool::Sqlite(_) => &SQLITE,
        Pool::Postgres(_) => &POSTGRES,
    }
}

/// Version and description of each embedded migration.
pub type MigrationList = Vec<(i64, String)>;

/// The migrations embedded for SQLite and for PostgreSQL, for the test
/// that keeps the two folders in step.
pub fn embedded_versions() -> (MigrationList, MigrationList) {
    let list = |m: &Migrator| {
        m.iter()
            .map(|x| (x.version, x.description.to_string()))
            .collect()
    };
    (list(&SQLITE), list(&POSTGRES))
}

pub(crate) async fn run(pool: &Pool) -> Result<(), StoreError> {
    match pool {
        Pool::Sqlite(p) => SQLITE.run(p).await?,
        Pool::Postgres(p) => POSTGRES.run(p).await?,
    }
    Ok(())
}

pub(crate) async fn status(pool: &Pool) -> Result<MigrationStatus, StoreError> {
    let (applied, dirty) = with_pool!(pool, p => {
        let mut conn = p.acquire().await?;
        let exists: bool = match pool {
            Pool::Sqlite(_) => sqlx::query_scalar(
                "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '_sqlx_migrations')",
            )
            .fetch_one(&mut *conn)
            .await?,
            Pool::Postgres(_) => sqlx::query_scalar("SELECT to_regclass('_sqlx_migrations') IS NOT NULL")
                .fetch_one(&mut *conn)
                .await?,
        };
        if exists {
            (conn.list_applied_migrations(TABLE).await?, conn.dirty_version(TABLE).await?)
        } else {
            (Vec::new(), None)
        }
    });
    let embedded = migrator(pool);
    let mut status = MigrationStatus {
        applied: Vec::new(),
        pending: Vec::new(),
        modified: Vec::new(),
        unknown: Vec::new(),
        dirty,
    };
    for migration in embedded.iter() {
        match applied.iter().find(|a| a.version == migration.version) {
            None => status.pending.push(migration.version),
            Some(_) if dirty == Some(migration.version) => {}
            Some(a) if a.checksum != migration.checksum => status.modified.push(migration.version),
            Some(_) => status.applied.push(migration.version),
        }
    }
    status.unknown = applied
        .iter()
        .map(|a| a.version)
        .filter(|v| !embedded.version_exists(*v))
        .collect();
    Ok(status)
}
