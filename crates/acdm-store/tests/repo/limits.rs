//! Rate limits shared by every server: the bucket in the database and the
//! leases servers take from it.

use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use acdm_core::limit::{Admission, Rate, RateLimiter};
use acdm_core::scope::ManualClock as MonotonicClock;
use acdm_store::{ManualClock, SharedLimiter};

use crate::harness::{at, migrated};

fn rate(per_minute: u32, burst: u32) -> Rate {
    Rate::new(per_minute, burst).unwrap()
}

#[tokio::test]
async fn a_bucket_grants_its_burst_then_refuses_with_how_long_to_wait() {
    for db in migrated().await {
        // One call every 10 s (a slow machine refills nothing), four at
        // once.
        let r = rate(6, 4);
        let first = db.store.lease_calls("agent:a", r, 3).await.unwrap();
        assert_eq!(first.granted, 3, "{}", db.name);
        let second = db.store.lease_calls("agent:a", r, 3).await.unwrap();
        assert_eq!(second.granted, 1, "{}: only the burst's last call", db.name);
        let refused = db.store.lease_calls("agent:a", r, 1).await.unwrap();
        assert_eq!(refused.granted, 0, "{}", db.name);
        let wait = refused.retry_after.unwrap();
        assert!(
            wait > Duration::from_secs(5) && wait <= Duration::from_secs(10),
            "{}: {wait:?}",
            db.name
        );
        // Another key has its own bucket.
        let other = db.store.lease_calls("agent:b", r, 2).await.unwrap();
        assert_eq!(other.granted, 2, "{}", db.name);
        db.finish().await;
    }
}

#[tokio::test]
async fn time_refills_the_bucket_one_call_per_interval() {
    // SQLite runs on the store's clock, which a test can move.
    for db in migrated()
        .await
        .into_iter()
        .filter(|db| db.name == "sqlite")
    {
        let clock = ManualClock::new(at("2026-01-05T09:00:00Z"));
        let store = db.store.clone().with_clock(clock.clock());
        let r = rate(60, 2);
        assert_eq!(store.lease_calls("k", r, 5).await.unwrap().granted, 2);
        assert_eq!(store.lease_calls("k", r, 5).await.unwrap().granted, 0);
        clock.advance(Duration::from_millis(1_500));
        assert_eq!(store.lease_calls("k", r, 5).await.unwrap().granted, 1);
        clock.advance(Duration::from_secs(3_600));
        assert_eq!(store.lease_calls("k", r, 5).await.unwrap().granted, 2);
        db.finish().await;
    }
}

#[tokio::test]
async fn servers_sharing_a_database_share_the_limit() {
    for db in migrated().await {
        // Three servers, each its own pool and its own leases (growing
        // with each server's demand). A rate whose burst is 30 and that refills one call every
        // 10 s (so a slow machine changes nothing): together they grant 30
        // at once, however the calls are spread over them.
        let r = rate(6, 30);
        let mut servers = Vec::new();
        for _ in 0..3 {
            servers.push(Arc::new(SharedLimiter::new(
                db.open_again().await,
                Duration::from_secs(100),
            )));
        }
        let mut allowed = 0;
        let mut refused = 0;
        for call in 0..90 {
            match servers[call % 3].admit("agent:x", r).await {
                Admission::Allowed => allowed += 1,
                Admission::Limited { retry_after } => {
                    assert!(retry_after <= Duration::from_secs(10), "{retry_after:?}");
                    refused += 1;
                }
            }
        }
        assert!(
            (28..=30).contains(&allowed),
            "{}: {allowed} allowed, {refused} refused",
            db.name
        );
        db.finish().await;
    }
}

#[tokio::test]
async fn a_server_leases_what_it_was_asked_for_and_serves_it_from_memory() {
    for db in migrated().await {
        // A call every 10 s (no time a slow machine takes refills the
        // bucket), bursts of 20 (leases of at most 10), a demand window of
        // an hour. Eight calls lease 1, 2, 4 and 8 calls as demand grows:
        // four round trips, and 15 of the burst taken (7 of them still in
        // the server's memory), so the bucket has 5 left.
        let r = rate(6, 20);
        let limiter = SharedLimiter::new(db.store.clone(), Duration::from_secs(3600));
        for call in 0..8 {
            assert_eq!(
                limiter.admit("k", r).await,
                Admission::Allowed,
                "{}: call {call}",
                db.name
            );
        }
        let rest = db.store.lease_calls("k", r, 100).await.unwrap();
        assert_eq!(rest.granted, 5, "{}", db.name);
        // The server's leased calls are still served.
        for call in 0..7 {
            assert_eq!(
                limiter.admit("k", r).await,
                Admission::Allowed,
                "{}: leased call {call}",
                db.name
            );
        }
        assert!(
            matches!(limiter.admit("k", r).await, Admission::Limited { .. }),
            "{}",
            db.name
        );
        db.finish().await;
    }
}

/// What `future` gives when first polled, without waiting: `None` when it
/// would wait (for the database, say).
fn at_once<F: Future>(future: F) -> Option<F::Output> {
    match pin!(future).poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(output) => Some(output),
        Poll::Pending => None,
    }
}

#[tokio::test]
async fn a_busy_key_is_leased_again_before_its_lease_runs_out() {
    for db in migrated().await {
        // Leases for 10 s, on a clock the test moves; a bucket far larger
        // than the calls made, refilling one call a minute (nothing in
        // the time a slow machine takes).
        let clock = Arc::new(MonotonicClock::new());
        let window = Duration::from_secs(10);
        let limiter = SharedLimiter::with_clock(db.store.clone(), window, clock.clone());
        let r = rate(1, 10_000);
        // Leases of 1, 2, 4, 8 and 16 calls as the demand grows: 11 left.
        for call in 0..20 {
            assert_eq!(
                limiter.admit("k", r).await,
                Admission::Allowed,
                "{}: call {call}",
                db.name
            );
        }
        assert_eq!(limiter.leased("k"), 11, "{}", db.name);
        // Half the window on: served from memory.
        clock.advance(window / 2);
        assert_eq!(
            at_once(limiter.admit("k", r)),
            Some(Admission::Allowed),
            "{}",
            db.name
        );
        assert_eq!(limiter.leased("k"), 10, "{}", db.name);
        // In its last quarter: served from memory, and the next lease is
        // taken in the background, topping the 9 left up to the demand.
        clock.advance(window * 3 / 10);
        assert_eq!(
            at_once(limiter.admit("k", r)),
            Some(Admission::Allowed),
            "{}",
            db.name
        );
        let mut polls = 0;
        while limiter.leased("k") == 9 {
            polls += 1;
            assert!(polls < 2_000, "{}: no lease was taken ahead", db.name);
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(limiter.leased("k"), 22, "{}", db.name);
        // The first lease's window is over: the calls go on from memory,
        // none waits for the database.
        clock.advance(window / 4);
        for call in 0..22 {
            assert_eq!(
                at_once(limiter.admit("k", r)),
                Some(Admission::Allowed),
                "{}: call {call} waited for the database",
                db.name
            );
        }
        // The bucket counted the five leases and the one ahead, and no
        // more: 31 + 13 calls taken.
        let rest = db.store.lease_calls("k", r, 10_000).await.unwrap();
        assert_eq!(rest.granted, 10_000 - 44, "{}", db.name);
        db.finish().await;
    }
}

#[tokio::test]
async fn a_refusal_is_remembered_until_its_wait_is_over() {
    for db in migrated().await {
        let r = rate(6, 2);
        let limiter = SharedLimiter::new(db.store.clone(), Duration::from_secs(3600));
        assert_eq!(limiter.admit("k", r).await, Admission::Allowed);
        assert_eq!(limiter.admit("k", r).await, Admission::Allowed);
        let Admission::Limited { retry_after } = limiter.admit("k", r).await else {
            unreachable!("{}: the burst is spent", db.name);
        };
        assert!(retry_after > Duration::from_secs(5), "{retry_after:?}");
        // Nothing can be granted before the wait is over, on any server:
        // this one answers from memory, whatever the bucket says now.
        db.store.reset_rate_buckets().await.unwrap();
        assert!(
            matches!(limiter.admit("k", r).await, Admission::Limited { .. }),
            "{}",
            db.name
        );
        // Another key is not affected.
        assert_eq!(limiter.admit("other", r).await, Admission::Allowed);
        db.finish().await;
    }
}

#[tokio::test]
async fn idle_buckets_are_pruned() {
    for db in migrated()
        .await
        .into_iter()
        .filter(|db| db.name == "sqlite")
    {
        let clock = ManualClock::new(at("2026-01-05T09:00:00Z"));
        let store = db.store.clone().with_clock(clock.clock());
        let r = rate(60, 2);
        store.lease_calls("old", r, 1).await.unwrap();
        clock.advance(acdm_store::IDLE_BUCKET + Duration::from_secs(10));
        store.lease_calls("new", r, 1).await.unwrap();
        assert_eq!(store.prune_rate_buckets().await.unwrap(), 1);
        assert_eq!(store.prune_rate_buckets().await.unwrap(), 0);
        db.finish().await;
    }
}
