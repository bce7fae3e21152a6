//! The scope resolver over the real store, and revocation across servers.

use std::sync::Arc;

use acdm_core::ScopeResolver;
use acdm_core::scope::{DEFAULT_CACHE_TTL, ScopeError};
use acdm_store::{EpochCheck, ScopeWatcher};

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
        assert_eq!(hit.project.slug.as_str(), "alpha", "{}", db.name);
        db.finish().await;
    }
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

        // Two "servers", each with its own pool, cache and watcher. The
        // binary runs one watcher round every ACDM_SCOPE_POLL_MILLIS (its
        // periodic helper is tested on the interval); here each round is
        // run by hand, so the test says which round sees what.
        let mut servers = Vec::new();
        for _ in 0..2 {
            let store = db.open_again().await;
            let resolver = Arc::new(ScopeResolver::new(
                Arc::new(store.clone()),
                DEFAULT_CACHE_TTL,
            ));
            let mut watcher = ScopeWatcher::new(store, resolver.clone());
            assert!(
                matches!(watcher.poll_once().await.unwrap(), EpochCheck::First(_)),
                "{}",
                db.name
            );
            servers.push((resolver, watcher));
        }
        for (r, w) in &mut servers {
            assert_eq!(r.resolve(&a).await.unwrap().project.slug.as_str(), "alpha");
            assert_eq!(r.cached_len(), 1, "warm cache");
            assert!(matches!(
                w.poll_once().await.unwrap(),
                EpochCheck::Unchanged(_)
            ));
            assert_eq!(
                r.cached_len(),
                1,
                "{}: an unchanged epoch keeps the cache",
                db.name
            );
        }

        // A move to another project, made by a third party (the CLI): the
        // cache (TTL of minutes) still answers until the next round, which
        // drops it.
        db.store.mount_agent(&a, &slug("beta")).await.unwrap();
        for (r, w) in &mut servers {
            assert_eq!(
                r.resolve(&a).await.unwrap().project.slug.as_str(),
                "alpha",
                "cached"
            );
            assert!(
                matches!(w.poll_once().await.unwrap(), EpochCheck::Changed { from, to } if to > from),
                "{}",
                db.name
            );
            assert_eq!(r.cached_len(), 0);
            assert_eq!(
                r.resolve(&a).await.unwrap().project.slug.as_str(),
                "beta",
                "{}: move seen after one round",
                db.name
            );
        }

        // An unmount.
        db.store.unmount_agent(&a).await.unwrap();
        for (r, w) in &mut servers {
            assert!(matches!(
                w.poll_once().await.unwrap(),
                EpochCheck::Changed { .. }
            ));
            assert!(
                r.resolve(&a).await.is_err(),
                "{}: unmount seen after one round",
                db.name
            );
        }
        drop(servers);
        db.finish().await;
    }
}

#[tokio::test]
async fn an_unreadable_epoch_drops_the_cache_and_fails_the_round() {
    for db in migrated().await {
        db.store
            .create_project(&slug("alpha"), &name("Alpha"), &base())
            .await
            .unwrap();
        let a = agent("project-alpha");
        db.store.mount_agent(&a, &slug("alpha")).await.unwrap();
        let store = db.open_again().await;
        let resolver = Arc::new(ScopeResolver::new(
            Arc::new(db.store.clone()),
            DEFAULT_CACHE_TTL,
        ));
        let mut watcher = ScopeWatcher::new(store.clone(), resolver.clone());
        watcher.poll_once().await.unwrap();
        resolver.resolve(&a).await.unwrap();
        assert_eq!(resolver.cached_len(), 1);
        store.close().await;
        assert!(watcher.poll_once().await.is_err(), "{}", db.name);
        assert_eq!(resolver.cached_len(), 0, "{}: fail closed", db.name);
        db.finish().await;
    }
}

#[tokio::test]
async fn postgresql_announces_agent_mount_and_switch_changes_to_every_listener() {
    for db in migrated().await {
        let Some(mut changes) = db.store.changes().await.unwrap() else {
            assert_eq!(db.name, "sqlite", "only SQLite announces nothing");
            db.finish().await;
            continue;
        };
        // Another server changes an agent mount, then the kill switch.
        let other = db.open_again().await;
        other
            .create_project(&slug("alpha"), &name("Alpha"), &base())
            .await
            .unwrap();
        other
            .mount_agent(&agent("project-alpha"), &slug("alpha"))
            .await
            .unwrap();
        other
            .set_switch(
                acdm_store::NC_WRITES_SWITCH,
                false,
                Some("u-ops"),
                Some("test"),
            )
            .await
            .unwrap();
        // Other tests' schemas share the channel, so more may come: wait
        // until both were announced.
        let (mut scope, mut switches) = (false, false);
        while !(scope && switches) {
            let change = tokio::time::timeout(std::time::Duration::from_secs(10), changes.next())
                .await
                .expect("both changes are announced")
                .unwrap();
            match change {
                acdm_store::Change::Scope => scope = true,
                acdm_store::Change::Switches => switches = true,
                acdm_store::Change::Missed => {}
            }
        }
        // The listener holds a connection of the pool, which closes only
        // once it is back.
        drop(changes);
        db.finish().await;
    }
}

#[tokio::test]
async fn a_role_or_mount_change_anywhere_reaches_every_servers_cached_scope() {
    use acdm_core::domain::MemberRole;
    for db in migrated().await {
        db.store
            .create_project(&slug("alpha"), &name("Alpha"), &base())
            .await
            .unwrap();
        let a = agent("project-alpha");
        db.store.mount_agent(&a, &slug("alpha")).await.unwrap();
        let u = crate::harness::user("u-1");
        db.store
            .set_member(&slug("alpha"), &u, MemberRole::Member)
            .await
            .unwrap();
        // A server with its own pool, cache and watcher.
        let server = db.open_again().await;
        let resolver = Arc::new(ScopeResolver::new(
            Arc::new(server.clone()),
            DEFAULT_CACHE_TTL,
        ));
        let mut watcher = ScopeWatcher::new(server, resolver.clone());
        watcher.poll_once().await.unwrap();
        let scope = resolver.resolve(&a).await.unwrap();
        assert_eq!(scope.role_of(&u), Some(MemberRole::Member), "{}", db.name);
        assert!(scope.mounts.iter().all(|m| m.writable), "{}", db.name);

        // Another server (or the CLI) demotes the member: the epoch moves
        // with it, so this server's next round drops its cached scope.
        db.store
            .set_member(&slug("alpha"), &u, MemberRole::Viewer)
            .await
            .unwrap();
        assert_eq!(
            resolver.resolve(&a).await.unwrap().role_of(&u),
            Some(MemberRole::Member),
            "{}: cached until the watcher sees the epoch move",
            db.name
        );
        assert!(
            matches!(
                watcher.poll_once().await.unwrap(),
                EpochCheck::Changed { .. }
            ),
            "{}",
            db.name
        );
        assert_eq!(
            resolver.resolve(&a).await.unwrap().role_of(&u),
            Some(MemberRole::Viewer),
            "{}",
            db.name
        );

        // A mount made read-only, and a member removed: the same.
        let project_mount = acdm_core::MountName::parse("project").unwrap();
        db.store
            .set_mount(&slug("alpha"), &project_mount, None, false, &base())
            .await
            .unwrap();
        db.store.remove_member(&slug("alpha"), &u).await.unwrap();
        assert!(
            matches!(
                watcher.poll_once().await.unwrap(),
                EpochCheck::Changed { .. }
            ),
            "{}",
            db.name
        );
        let scope = resolver.resolve(&a).await.unwrap();
        assert!(scope.mounts.iter().all(|m| !m.writable), "{}", db.name);
        assert_eq!(scope.role_of(&u), None, "{}", db.name);
        // Nothing changed: the cache is kept.
        assert!(
            matches!(watcher.poll_once().await.unwrap(), EpochCheck::Unchanged(_)),
            "{}",
            db.name
        );
        db.finish().await;
    }
}
