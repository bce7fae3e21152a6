//! Keeping every server's scope cache honest: a background task polls the
//! scope epoch and drops the resolver's cache whenever it moves, so an
//! unmount or a move made through any server, or the CLI, takes effect
//! everywhere within one poll interval rather than after the cache TTL.

use std::sync::Arc;
use std::time::Duration;

use acdm_core::ScopeResolver;
use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

use crate::Store;

/// Reads the epoch once, then starts the watcher; it stops when
/// `shutdown` is cancelled. Call it before serving requests.
///
/// The cache is dropped on the first successful read (anything cached
/// before it is unverified) and whenever the epoch cannot be read, so a
/// server that cannot see revocations does not keep serving from its cache.
pub async fn spawn_scope_watcher(
    store: Store,
    resolver: Arc<ScopeResolver>,
    interval: Duration,
    shutdown: CancellationToken,
) -> JoinHandle<()> {
    let mut last_seen: Option<i64> = None;
    check(&store, &resolver, &mut last_seen).await;
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
        ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = shutdown.cancelled() => break,
                _ = ticker.tick() => check(&store, &resolver, &mut last_seen).await,
            }
        }
    })
}

async fn check(store: &Store, resolver: &ScopeResolver, last_seen: &mut Option<i64>) {
    match store.scope_epoch().await {
        Ok(epoch) if *last_seen != Some(epoch) => {
            if last_seen.is_some() {
                tracing::info!(epoch, "agent mounts changed; scope cache dropped");
            }
            resolver.reset();
            *last_seen = Some(epoch);
        }
        Ok(_) => {}
        Err(error) => {
            tracing::warn!(error = %error, "cannot read the scope epoch; scope cache dropped");
            resolver.reset();
        }
    }
}
