//! The scope resolver over the real store, and revocation across servers.

use std::sync::Arc;
use std::time::{Duration, Instant};

use acdm_core::ScopeResolver;
use acdm_core::scope::{DEFAULT_CACHE_TTL, ScopeError};
use tokio_util::sync::CancellationToken;

use crate::harness::migrated;
use crate::provisioning::{agent, base, name, slug};

#[tokio::test]
async fn a_newly_provisioned_agent_is_resolved_at_once_after_a_miss() {
    for db in migrated().await {
        let resolver = ScopeResolver::new(Arc::new(db.store.clone()), DEFAULT_CACHE_TTL);
        let a = agent("project-alpha");
        let miss = resolver.resolve(&a).await.unwrap_err();
        assert!(
            matches!(miss, ScopeError::NotProvisioned { .. }),
            "{}",
            db.name
        );
        db.store
            .create_project(&slug("alpha"), &name("Alpha"), &base())
            .await
            .unwrap();
        db.store.mount_agent(&a, &slug("alpha")).await.unwrap();
        let hit = resolver.resolve(&a).await.unwrap();
        assert_eq!(hit.slug.as_str(), "alpha", "{}", db.name);
        db.finish().await;
    }
}

/// Waits until `check` holds, for at most `limit`; returns how long it took.
async fn eventually(limit: Duration, mut check: impl AsyncFnMut() -> bool) -> Option<Duration> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if check().await {
            return Some(start.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    None
}

#[tokio::test]
async fn an_unmount_reaches_every_server_within_seconds_not_the_ttl() {
    for db in migrated().await {
        db.store
            .create_project(&slug("alpha"), &name("Alpha"), &base())
            .await
            .unwrap();
        db.store
            .create_project(&slug("beta"), &name("Beta"), &base())
            .await
            .unwrap();
        let a = agent("project-alpha");
        db.store.mount_agent(&a, &slug("alpha")).await.unwrap();

        // Two "servers", each with its own pool, cache and watcher.
        let shutdown = CancellationToken::new();
        let mut servers = Vec::new();
        for _ in 0..2 {
            let store = db.open_again().await;
            let resolver = Arc::new(ScopeResolver::new(
                Arc::new(store.clone()),
                DEFAULT_CACHE_TTL,
            ));
            acdm_store::spawn_scope_watcher(
                store,
                resolver.clone(),
                Duration::from_millis(100),
                shutdown.clone(),
            )
            .await;
            servers.push(resolver);
        }
        for r in &servers {
            assert_eq!(r.resolve(&a).await.unwrap().slug.as_str(), "alpha");
            assert_eq!(r.cached_len(), 1, "warm cache");
        }

        // A move to another project, made by a third party (the CLI).
        db.store.mount_agent(&a, &slug("beta")).await.unwrap();
        for r in &servers {
            let took = eventually(Duration::from_secs(5), async || {
                r.resolve(&a).await.is_ok_and(|p| p.slug.as_str() == "beta")
            })
            .await;
            assert!(took.is_some(), "{}: move not seen within 5 s", db.name);
        }

        // An unmount.
        db.store.unmount_agent(&a).await.unwrap();
        for r in &servers {
            let took = eventually(Duration::from_secs(5), async || {
                r.resolve(&a).await.is_err()
            })
            .await;
            assert!(took.is_some(), "{}: unmount not seen within 5 s", db.name);
        }
        shutdown.cancel();
        db.finish().await;
    }
}
