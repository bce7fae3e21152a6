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

mod approvals;
mod business;
mod clock;
mod config;
mod db;
mod error;
mod events;
mod limits;
mod migrations;
mod project;
mod provisioning;
mod watch;

use acdm_core::AgentName;
use acdm_core::scope::{DirectoryError, ProjectDirectory, Scope};
use async_trait::async_trait;

pub use approvals::{ApprovalFilter, OutboxBacklog, OutboxMessage};
pub use business::{CalendarItem, Page};
pub use clock::{Clock, ManualClock};
pub use config::{DatabaseConfig, DatabaseTarget, TargetError};
pub use db::Backend;
pub use error::StoreError;
pub use events::{EventFilter, NC_WRITES_SWITCH, SwitchState};
pub use limits::{IDLE_BUCKET, SharedLimiter};
pub use migrations::{MigrationList, MigrationStatus, embedded_versions};
pub use project::JournalStamp;
pub use provisioning::{AgentMountChange, Upsert};
pub use watch::{Change, Changes, EpochCheck, ScopeWatcher};

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

    /// Whether the database takes writes now: on SQLite, a connection of
    /// its own takes a write lock and gives it back (waiting a second at
    /// most), so a lock another process holds is named
    /// ([`StoreError::Locked`]) and no pooled connection is ever left in a
    /// transaction; on PostgreSQL, whether the server is read-only (a
    /// standby).
    pub async fn check_writable(&self) -> Result<(), StoreError> {
        self.check_writable_within(db::LOCK_PATIENCE).await
    }

    /// [`Store::check_writable`], waiting `patience` at most for SQLite's
    /// write lock (readiness answers a probe within its own budget).
    pub async fn check_writable_within(
        &self,
        patience: std::time::Duration,
    ) -> Result<(), StoreError> {
        match &self.pool {
            Pool::Sqlite(p) => match Self::sqlite_lock_holder(p, patience).await {
                Some(locked) => Err(locked),
                None => Ok(()),
            },
            Pool::Postgres(p) => {
                let read_only: String = sqlx::query_scalar("SHOW transaction_read_only")
                    .fetch_one(p)
                    .await?;
                if read_only == "on" {
                    return Err(StoreError::Locked(
                        "the PostgreSQL database takes no writes (transaction_read_only is on: a standby, or default_transaction_read_only set)".to_owned(),
                    ));
                }
                Ok(())
            }
        }
    }

    /// On SQLite, the lock another process holds on the file, named; `None`
    /// when there is none (and always on PostgreSQL).
    pub async fn lock_holder(&self) -> Option<StoreError> {
        let Pool::Sqlite(p) = &self.pool else {
            return None;
        };
        Self::sqlite_lock_holder(p, db::LOCK_PATIENCE).await
    }

    /// The lock another process holds on the pool's SQLite file, waiting
    /// `patience` at most to take it.
    async fn sqlite_lock_holder(
        p: &sqlx::SqlitePool,
        patience: std::time::Duration,
    ) -> Option<StoreError> {
        let options = p.connect_options();
        let path = options.get_filename();
        db::sqlite_lock(path, patience)
            .await
            .map(|lock| db::locked(path, lock))
    }

    /// Closes the pool, waiting for connections in use to come back.
    pub async fn close(&self) {
        with_pool!(&self.pool, p => p.close().await);
    }
}

impl Store {
    /// The scope of the project `agent` manages: the project, its mounts
    /// and its members' roles (what the scope resolver caches).
    pub async fn manager_scope(&self, agent: &AgentName) -> Result<Option<Scope>, StoreError> {
        let Some(project) = self.manager_project(agent).await? else {
            return Ok(None);
        };
        let mounts = self.project_mounts(project.id).await?;
        let members = self.members_info(project.id).await?;
        Ok(Some(Scope::new(
            project,
            mounts,
            members.into_iter().map(|m| (m.user_id, m.role)),
        )))
    }
}

#[async_trait]
impl ProjectDirectory for Store {
    async fn manager_scope(&self, agent: &AgentName) -> Result<Option<Scope>, DirectoryError> {
        Store::manager_scope(self, agent)
            .await
            .map_err(DirectoryError::new)
    }
}
