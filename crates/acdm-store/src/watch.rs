//! Keeping every server's scope cache honest: the scope watcher reads the
//! scope epoch and drops the resolver's cache whenever it moves, so an
//! unmount or a move made through any server, or the CLI, takes effect
//! everywhere within one poll interval rather than after the cache TTL.
//!
//! This module does one round ([`ScopeWatcher::poll_once`]); the binary
//! runs it every `ACDM_SCOPE_POLL_MILLIS`.

use std::sync::Arc;

use acdm_core::ScopeResolver;

use crate::{Store, StoreError};

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
