//! Keeping every server's scope cache honest: the scope watcher reads the
//! scope epoch and drops the resolver's cache whenever it moves, so an
//! unmount or a move made through any server, or the CLI, takes effect
//! everywhere within one poll interval rather than after the cache TTL.
//!
//! This module does one round ([`ScopeWatcher::poll_once`]); the binary
//! runs it every `ACDM_SCOPE_POLL_MILLIS`, and at once when PostgreSQL
//! announces a change ([`Store::changes`]): every committed change to the
//! scope epoch or to the operator's switches is announced by a trigger on
//! the channel `acdm_changes`, so servers follow it within milliseconds
//! and the poll remains only as the fallback (a lost listener connection,
//! SQLite).

use std::sync::Arc;

use acdm_core::ScopeResolver;
use sqlx::postgres::PgListener;

use crate::db::Pool;
use crate::{Store, StoreError};

/// The channel the triggers announce changes on.
const CHANNEL: &str = "acdm_changes";

/// A change announced by the database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// The agent mounts changed (the scope epoch moved).
    Scope,
    /// An operator's switch (the kill switch) changed.
    Switches,
    /// The listener lost its connection and has reconnected: changes made
    /// meanwhile were not announced, so anything may have changed.
    Missed,
}

/// The changes the database announces to this server (PostgreSQL).
pub struct Changes {
    listener: PgListener,
}

impl std::fmt::Debug for Changes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Changes")
    }
}

impl Store {
    /// Starts listening for announced changes: `None` on SQLite, which
    /// announces nothing (its servers poll).
    pub async fn changes(&self) -> Result<Option<Changes>, StoreError> {
        let Pool::Postgres(pool) = &self.pool else {
            return Ok(None);
        };
        let mut listener = PgListener::connect_with(pool).await?;
        listener.listen(CHANNEL).await?;
        Ok(Some(Changes { listener }))
    }
}

impl Changes {
    /// The next change. After a lost connection the listener reconnects
    /// and answers [`Change::Missed`] once.
    pub async fn next(&mut self) -> Result<Change, StoreError> {
        loop {
            match self.listener.try_recv().await? {
                None => return Ok(Change::Missed),
                Some(note) => match note.payload() {
                    "scope_epoch" => return Ok(Change::Scope),
                    "runtime_switches" => return Ok(Change::Switches),
                    // Announcements of tables this server does not follow.
                    _ => {}
                },
            }
        }
    }
}

/// What one round of the watcher saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EpochCheck {
    /// The first successful read: the cache was dropped, as anything
    /// cached before it is unverified.
    First(i64),
    /// The epoch moved: the cache was dropped.
    Changed {
        /// The epoch seen before.
        from: i64,
        /// The epoch now.
        to: i64,
    },
    /// Nothing changed; the cache was kept.
    Unchanged(i64),
}

/// Follows the scope epoch for one resolver.
#[derive(Debug)]
pub struct ScopeWatcher {
    store: Store,
    resolver: Arc<ScopeResolver>,
    last_seen: Option<i64>,
}

impl ScopeWatcher {
    /// A watcher of `store`'s epoch that resets `resolver`. Nothing is read
    /// until the first [`ScopeWatcher::poll_once`]; call it once before
    /// serving requests.
    pub fn new(store: Store, resolver: Arc<ScopeResolver>) -> Self {
        Self {
            store,
            resolver,
            last_seen: None,
        }
    }

    /// One round: reads the epoch and drops the cache on the first
    /// successful read and whenever the epoch moved. When the epoch cannot
    /// be read the cache is dropped too (fail closed: a server that cannot
    /// see revocations does not keep serving from its cache) and the error
    /// is returned.
    pub async fn poll_once(&mut self) -> Result<EpochCheck, StoreError> {
        let epoch = match self.store.scope_epoch().await {
            Ok(epoch) => epoch,
            Err(error) => {
                self.resolver.reset();
                return Err(error);
            }
        };
        let check = match self.last_seen {
            None => EpochCheck::First(epoch),
            Some(seen) if seen == epoch => return Ok(EpochCheck::Unchanged(epoch)),
            Some(seen) => {
                tracing::info!(epoch, "agent mounts changed; scope cache dropped");
                EpochCheck::Changed {
                    from: seen,
                    to: epoch,
                }
            }
        };
        self.resolver.reset();
        self.last_seen = Some(epoch);
        Ok(check)
    }
}
