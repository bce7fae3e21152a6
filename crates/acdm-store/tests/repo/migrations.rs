//! Migrations: embedded, applied at start, idempotent, reported.

use crate::harness::{databases, migrated};

#[tokio::test]
async fn a_fresh_database_reports_pending_then_current_after_migrate() {
    for db in databases().await {
        let before = db.store.migration_status().await.unwrap();
        assert!(!before.is_current(), "{}", db.name);
        assert_eq!(before.pending, vec![1, 2, 3, 4, 5, 6, 7, 8], "{}", db.name);
        db.store.migrate().await.unwrap();
        db.store.migrate().await.unwrap(); // idempotent
        let after = db.store.migration_status().await.unwrap();
        assert!(after.is_current(), "{}: {after:?}", db.name);
        assert_eq!(after.applied, vec![1, 2, 3, 4, 5, 6, 7, 8]);
        assert!(after.unknown.is_empty() && after.modified.is_empty());
        db.store.ping().await.unwrap();
        db.finish().await;
    }
}

#[tokio::test]
async fn the_two_migration_folders_stay_in_step() {
    let (sqlite, postgres) = acdm_store::embedded_versions();
    assert!(!sqlite.is_empty());
    assert_eq!(
        sqlite, postgres,
        "same versions and descriptions on both backends"
    );
}

#[tokio::test]
async fn the_backend_is_reported_and_the_sqlite_file_is_created() {
    for db in migrated().await {
        assert_eq!(db.store.backend().as_str(), db.name);
        if let acdm_store::DatabaseTarget::Sqlite { path } = &db.config.target {
            assert!(path.is_file(), "{} created", path.display());
        }
        db.finish().await;
    }
}

#[tokio::test]
async fn an_unparsable_postgres_url_is_a_configuration_error_that_hides_the_url() {
    use acdm_store::{DatabaseConfig, DatabaseTarget, Store, StoreError};
    let url = secrecy::SecretString::from("postgres://user:hunter2@db:notaport/acdm");
    let target = DatabaseTarget::from_url(&url).unwrap();
    let err = Store::connect(&DatabaseConfig::new(target))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Config(_)), "{err:?}");
    assert!(!err.is_unavailable(), "not retryable");
    assert!(!format!("{err:?} {err}").contains("hunter2"));
}

/// A connection of another "process" to the SQLite file at `path` (SQLite's
/// locks hold between connections of one process too).
async fn other_holder(path: &std::path::Path) -> sqlx::SqliteConnection {
    use sqlx::ConnectOptions;
    sqlx::sqlite::SqliteConnectOptions::new()
        .filename(path)
        .connect()
        .await
        .unwrap()
}

#[tokio::test]
async fn a_sqlite_file_locked_by_another_process_is_named_with_its_lock() {
    use sqlx::Executor;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("acdm.sqlite3");
    let mut config =
        acdm_store::DatabaseConfig::new(acdm_store::DatabaseTarget::Sqlite { path: path.clone() });
    config.acquire_timeout = std::time::Duration::from_millis(500);
    let store = acdm_store::Store::connect(&config).await.unwrap();
    store.migrate().await.unwrap();
    store.check_writable().await.unwrap();

    // A write transaction left open elsewhere: reads pass, writes cannot,
    // and the store says so.
    let mut holder = other_holder(&path).await;
    holder.execute("BEGIN IMMEDIATE").await.unwrap();
    store.ping().await.unwrap();
    let error = store.check_writable().await.unwrap_err().to_string();
    assert!(
        error.contains("locked for writing by another process"),
        "{error}"
    );
    assert!(error.contains("acdm.sqlite3"), "{error}");
    holder.execute("ROLLBACK").await.unwrap();
    store.check_writable().await.unwrap();
    store.close().await;

    // An exclusive lock (locking_mode=EXCLUSIVE, then a write): a server
    // cannot even start, and says why instead of "pool timed out".
    holder
        .execute("PRAGMA locking_mode = EXCLUSIVE")
        .await
        .unwrap();
    holder.execute("BEGIN EXCLUSIVE").await.unwrap();
    let error = acdm_store::Store::connect(&config)
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("exclusive lock"), "{error}");
    assert!(error.contains("locking_mode=EXCLUSIVE"), "{error}");
    assert!(!error.contains("pool timed out"), "{error}");
    drop(holder);
}
