//! Migrations: embedded, applied at start, idempotent, reported.

use crate::harness::{databases, migrated};

#[tokio::test]
async fn a_fresh_database_reports_pending_then_current_after_migrate() {
    for db in databases().await {
        let before = db.store.migration_status().await.unwrap();
        assert!(!before.is_current(), "{}", db.name);
        assert_eq!(before.pending, vec![1, 2, 3, 4, 5], "{}", db.name);
        db.store.migrate().await.unwrap();
        db.store.migrate().await.unwrap(); // idempotent
        let after = db.store.migration_status().await.unwrap();
        assert!(after.is_current(), "{}: {after:?}", db.name);
        assert_eq!(after.applied, vec![1, 2, 3, 4, 5]);
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
