//! acdm-store: the database behind acdm-backend.
//!
//! One [`Store`] over either an embedded SQLite file (the default: created
//! on first start, WAL mode) or PostgreSQL (production), with the same SQL
//! and the same test suite on both. Migrations are embedded from the
//! repository's `migrations/` folder and run at start-up.
//!
//! It owns provisioning (projects, members, mounts, agent mounts), the
//! [`ProjectDirectory`] the scope resolver reads, and the scope-epoch
//! watcher that makes revocations reach every server within seconds.
//!
//! **Architecture invariant:** depends on acdm-core only among workspace
//! crates; knows nothing of HTTP or MCP. Only the binary reads the
//! environment and builds a [`DatabaseConfig`].

mod business;
mod clock;
mod config;
mod db;
mod error;
mod events;
mod migrations;
mod project;
mod provisioning;
mod watch;

use acdm_core::AgentName;
use acdm_core::domain::ProjectRef;
use acdm_core::scope::{DirectoryError, ProjectDirectory};
use async_trait::async_trait;

pub use business::{CalendarItem, Page};
pub use clock::{Clock, ManualClock};
pub use config::{DatabaseConfig, DatabaseTarget, TargetError};
pub use db::Backend;
pub use error::StoreError;
pub use events::{EventFilter, NC_WRITES_SWITCH, SwitchState};
pub use migrations::{MigrationList, MigrationStatus, embedded_versions};
pub use project::JournalStamp;
pub use provisioning::{AgentMountChange, Upsert};
pub use watch::{EpochCheck, ScopeWatcher};

use db::{Pool, with_pool};

/// The database: a cheap-to-clone handle over a connection pool.
#[derive(Debug, Clone)]
pub struct Store {
    pool: Pool,
    /// Where the timestamps the store writes come from: injectable so
    /// tests order events without sleeping.
    clock: Clock,
}

impl Store {
    /// Connects (creating the SQLite file and folder if needed). Does not
    /// migrate; call [`Store::migrate`].
    pub async fn connect(config: &DatabaseConfig) -> Result<Self, StoreError> {
        Ok(Self {
            pool: db::connect(config).await?,
            clock: Clock::system(),
        })
    }

    /// The same store (same pool), stamping what it writes with `clock`
    /// instead of the system clock.
    pub fn with_clock(self, clock: Clock) -> Self {
        Self { clock, ..self }
    }

    /// Now, by the store's clock, to the microsecond (what the store
    /// stamps, and what "upcoming" is measured from).
    pub fn now(&self) -> chrono::DateTime<chrono::Utc> {
        self.clock.now()
    }

    /// Which backend this store runs on.
    pub fn backend(&self) -> Backend {
        match self.pool {
            Pool::Sqlite(_) => Backend::Sqlite,
            Pool::Postgres(_) => Backend::Postgres,
        }
    }

    /// Applies every embedded migration not yet applied. Safe to run from
    /// several servers at once (PostgreSQL takes an advisory lock).
    pub async fn migrate(&self) -> Result<(), StoreError> {
        migrations::run(&self.pool).await
    }

    /// How far the database is with the embedded migrations.
    pub async fn migration_status(&self) -> Result<MigrationStatus, StoreError> {
        migrations::status(&self.pool).await
    }

    /// One round trip to the database.
    pub async fn ping(&self) -> Result<(), StoreError> {
        let one: i32 =
            with_pool!(&self.pool, p => sqlx::query_scalar("SELECT 1").fetch_one(p).await?);
        debug_assert_eq!(one, 1);
        Ok(())
    }

    /// Closes the pool, waiting for connections in use to come back.
    pub async fn close(&self) {
        with_pool!(&self.pool, p => p.close().await);
    }
}

#[async_trait]
impl ProjectDirectory for Store {
    async fn manager_project(
        &self,
        agent: &AgentName,
    ) -> Result<Option<ProjectRef>, DirectoryError> {
        Store::manager_project(self, agent)
            .await
            .map_err(DirectoryError::new)
    }
}
