//! The embedded migrations (`migrations/sqlite`, `migrations/postgres` at
//! the repository root) and how far a database has got with them.

use std::borrow::Cow;
use std::sync::LazyLock;

use sqlx::SqlSafeStr;
use sqlx::migrate::{Migrate, Migration, MigrationType, Migrator};

use crate::db::{Pool, with_pool};
use crate::error::StoreError;

/// The migration files, compiled in: one list of names, read from both
/// folders (they stay in step), each file as its name and its SQL. A test
/// keeps the list equal to each folder.
macro_rules! embedded {
    ($($file:literal),+ $(,)?) => {
        /// `migrations/sqlite`, file by file.
        const SQLITE_FILES: &[(&str, &str)] =
            &[$(($file, include_str!(concat!("../../../migrations/sqlite/", $file)))),+];
        /// `migrations/postgres`, file by file.
        const POSTGRES_FILES: &[(&str, &str)] =
            &[$(($file, include_str!(concat!("../../../migrations/postgres/", $file)))),+];
    };
}

embedded!(
    "0001_provisioning.sql",
    "0002_storage_events.sql",
    "0003_project_name_key.sql",
    "0004_business.sql",
    "0005_project.sql",
    "0006_replicas.sql",
    "0007_scope_cache.sql",
    "0008_approvals.sql",
);

static SQLITE: LazyLock<Migrator> = LazyLock::new(|| migrator_of(SQLITE_FILES));
static POSTGRES: LazyLock<Migrator> = LazyLock::new(|| migrator_of(POSTGRES_FILES));

/// A migrator over embedded files, read as sqlx's `migrate!` reads a
/// folder: `<version>_<description>.sql`, the description's underscores
/// as spaces, a leading `-- no-transaction` opting out of the
/// transaction, and the checksum of the SQL as written (so databases
/// migrated by `migrate!` see the same checksums). `migrate!` itself is
/// not used: it needs sqlx's macros crate, which builds sqlx, both
/// drivers and SQLite's C library a second time for the compiler.
fn migrator_of(files: &'static [(&'static str, &'static str)]) -> Migrator {
    let migrations = files
        .iter()
        .filter_map(|&(file, sql)| {
            let (version, rest) = file.split_once('_')?;
            let version = version.parse::<i64>().ok()?;
            let description = rest.strip_suffix(".sql")?.replace('_', " ");
            Some(Migration::new(
                version,
                Cow::Owned(description),
                MigrationType::Simple,
                sql.into_sql_str(),
                sql.starts_with("-- no-transaction"),
            ))
        })
        .collect();
    Migrator::with_migrations(migrations)
}

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
        Pool::Sqlite(_) => LazyLock::force(&SQLITE),
        Pool::Postgres(_) => LazyLock::force(&POSTGRES),
    }
}

/// Version and description of each embedded migration.
pub type MigrationList = Vec<(i64, String)>;

/// The migrations embedded for SQLite and for PostgreSQL, for the tests
/// that keep the two folders in step and each list equal to its folder.
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

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    /// What sqlx reads from a folder at run time, as `migrate!` reads it
    /// at build time.
    async fn read_folder(folder: &str) -> Migrator {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../migrations")
            .join(folder);
        Migrator::new(path).await.unwrap()
    }

    fn same(embedded: &Migrator, folder: &Migrator, name: &str) {
        let shape = |m: &Migrator| {
            m.iter()
                .map(|x| {
                    (
                        x.version,
                        x.description.to_string(),
                        x.migration_type,
                        x.checksum.to_vec(),
                        x.no_tx,
                        x.sql.as_str().to_owned(),
                    )
                })
                .collect::<Vec<_>>()
        };
        let folder = shape(folder);
        assert!(!folder.is_empty(), "{name}: no migration in the folder");
        assert_eq!(
            shape(embedded),
            folder,
            "{name}: the embedded list must name every file of migrations/{name}, in order"
        );
    }

    /// Every file of each folder is embedded, with the version,
    /// description, checksum and transaction mode sqlx gives it: a file
    /// added to a folder and not to its list, or the other way round,
    /// fails here; and databases migrated before see the same checksums.
    #[tokio::test]
    async fn each_embedded_list_is_its_folder_as_sqlx_reads_it() {
        same(&SQLITE, &read_folder("sqlite").await, "sqlite");
        same(&POSTGRES, &read_folder("postgres").await, "postgres");
    }
}
