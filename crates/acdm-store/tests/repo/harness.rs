//! Fresh databases for each test: a SQLite file in a temporary folder,
//! always, and a PostgreSQL schema when `ACDM_TEST_DATABASE_URL` is set.
//! When it is set, PostgreSQL must work: an unreachable server fails the
//! test instead of skipping it.

use std::path::PathBuf;

use acdm_store::{DatabaseConfig, DatabaseTarget, Store};
use secrecy::SecretString;
use sqlx::Connection;

/// One database a case runs against.
pub(crate) struct TestDb {
    /// `sqlite` or `postgres`, for assertion messages.
    pub(crate) name: &'static str,
    /// A connected store, not yet migrated.
    pub(crate) store: Store,
    /// How to open a second, independent store on the same database.
    pub(crate) config: DatabaseConfig,
    cleanup: Cleanup,
}

enum Cleanup {
    Dir(#[expect(dead_code, reason = "held to delete the folder on drop")] tempfile::TempDir),
    Schema { admin_url: String, schema: String },
}

impl TestDb {
    /// Drops the PostgreSQL schema (the SQLite folder goes on drop).
    pub(crate) async fn finish(self) {
        self.store.close().await;
        if let Cleanup::Schema { admin_url, schema } = &self.cleanup {
            let mut conn = sqlx::PgConnection::connect(admin_url).await.unwrap();
            let sql = format!("DROP SCHEMA IF EXISTS {schema} CASCADE");
            sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
                .execute(&mut conn)
                .await
                .unwrap();
        }
    }

    /// A second store on the same database, as another server would open it.
    pub(crate) async fn open_again(&self) -> Store {
        Store::connect(&self.config).await.unwrap()
    }
}

/// The PostgreSQL URL tests must use, if any.
#[expect(
    clippy::disallowed_methods,
    reason = "a test: CI names its PostgreSQL in the environment"
)]
pub(crate) fn postgres_url() -> Option<String> {
    std::env::var("ACDM_TEST_DATABASE_URL")
        .ok()
        .filter(|u| !u.trim().is_empty())
}

async fn sqlite() -> TestDb {
    let dir = tempfile::tempdir().unwrap();
    let path: PathBuf = dir.path().join("nested/acdm.sqlite3");
    let config = DatabaseConfig::new(DatabaseTarget::Sqlite { path });
    let store = Store::connect(&config).await.unwrap();
    TestDb {
        name: "sqlite",
        store,
        config,
        cleanup: Cleanup::Dir(dir),
    }
}

async fn postgres(admin_url: String) -> TestDb {
    let schema = format!("acdm_t_{}", uuid::Uuid::new_v4().simple());
    let mut admin = sqlx::PgConnection::connect(&admin_url)
        .await
        .unwrap_or_else(|e| {
            panic!("ACDM_TEST_DATABASE_URL is set but PostgreSQL is unreachable: {e}")
        });
    let sql = format!("CREATE SCHEMA {schema}");
    sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
        .execute(&mut admin)
        .await
        .unwrap();
    admin.close().await.unwrap();
    let separator = if admin_url.contains('?') { '&' } else { '?' };
    let url = format!("{admin_url}{separator}options=-c%20search_path%3D{schema}");
    let config = DatabaseConfig::new(DatabaseTarget::Postgres {
        url: SecretString::from(url),
    });
    let store = Store::connect(&config).await.unwrap();
    TestDb {
        name: "postgres",
        store,
        config,
        cleanup: Cleanup::Schema { admin_url, schema },
    }
}

/// The databases every repository case runs against.
pub(crate) async fn databases() -> Vec<TestDb> {
    let mut dbs = vec![sqlite().await];
    if let Some(url) = postgres_url() {
        dbs.push(postgres(url).await);
    }
    dbs
}

/// Same, migrated.
pub(crate) async fn migrated() -> Vec<TestDb> {
    let dbs = databases().await;
    for db in &dbs {
        db.store
            .migrate()
            .await
            .unwrap_or_else(|e| panic!("{}: {e:?}", db.name));
    }
    dbs
}

/// A time from RFC 3339 text.
pub(crate) fn at(text: &str) -> chrono::DateTime<chrono::Utc> {
    text.parse().unwrap()
}

/// A user id.
pub(crate) fn user(id: &str) -> acdm_core::UserId {
    acdm_core::UserId::parse(id).unwrap()
}

/// A new project `slug` (its name the slug in capitals).
pub(crate) async fn project(store: &Store, slug: &str) -> acdm_core::domain::ProjectRef {
    store
        .create_project(
            &acdm_core::ProjectSlug::parse(slug).unwrap(),
            &acdm_core::ProjectName::parse(&slug.to_uppercase()).unwrap(),
            &acdm_core::AbsPath::parse("/Projects").unwrap(),
        )
        .await
        .unwrap()
        .project
        .to_ref()
}
