//! Rate limits that hold for the whole deployment (spec §9), at the cost
//! of a database round trip per *lease*, not per call.
//!
//! Each key's bucket lives in `rate_buckets` (GCRA's theoretical arrival
//! time, [`acdm_core::limit::take`]). A server does not ask the database
//! about every call: it leases a few calls at once — about
//! [`SharedLimiter::lease_window`] worth at the key's rate, at most half
//! the burst — and serves them from memory. Every leased call has already
//! been counted in the shared bucket, so N replicas together never grant
//! more than the rate (plus its burst); a lease not used within
//! [`LEASE_LIFETIME`] is dropped, which can only grant less. With slow
//! rates (an agent's ten writes a minute) a lease is a single call and
//! every call is a round trip, which such rates can afford; with fast ones
//! (a tool's thousands a minute) one round trip serves many calls.
//!
//! On PostgreSQL the lease is one statement (`INSERT … ON CONFLICT DO
//! UPDATE … WHERE … RETURNING`) on the database's clock, so replicas'
//! clocks do not matter. On SQLite (one host) it is the same statement on
//! the store's clock. When the database cannot be reached the server
//! falls back to a bucket of its own in memory (logged): limits then hold
//! per server, not per deployment, until the database answers again.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use acdm_core::limit::{self, Admission, Rate, RateLimiter, Taken};
use async_trait::async_trait;
use dashmap::DashMap;
use tokio::time::Instant;

use crate::db::with_pool;
use crate::{Store, StoreError};

/// How long leased calls stay usable. A server that leased calls and then
/// fell quiet must not spend them much later as a burst on top of what
/// the bucket grants the others meanwhile.
pub const LEASE_LIFETIME: Duration = Duration::from_secs(1);

/// How often a failing database is logged while the limiter falls back.
const FALLBACK_WARNING: Duration = Duration::from_secs(60);

/// Buckets whose TAT is this far in the past are full again and can be
/// forgotten ([`Store::prune_rate_buckets`]).
pub const IDLE_BUCKET: Duration = Duration::from_secs(3600);

impl Store {
    /// Takes up to `want` calls from `key`'s bucket at `rate`, on the
    /// database's clock (PostgreSQL) or the store's (SQLite).
    pub async fn lease_calls(&self, key: &str, rate: Rate, want: u32) -> Result<Taken, StoreError> {
        let (want, burst, interval) =
            (i64::from(want), i64::from(rate.burst()), rate.interval_us());
        let granted: Option<(i64, i64, i64)> = match &self.pool {
            crate::db::Pool::Postgres(p) => sqlx::query_as(
                "WITH clock AS (SELECT (EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::BIGINT AS now_us)
                 INSERT INTO rate_buckets AS b (key, tat_us, granted)
                 SELECT $1, now_us + LEAST($2, $3) * $4, LEAST($2, $3) FROM clock
                 ON CONFLICT (key) DO UPDATE SET
                     granted = LEAST($2, ((SELECT now_us FROM clock) + $3 * $4 - GREATEST(b.tat_us, (SELECT now_us FROM clock))) / $4),
                     tat_us = GREATEST(b.tat_us, (SELECT now_us FROM clock))
                         + LEAST($2, ((SELECT now_us FROM clock) + $3 * $4 - GREATEST(b.tat_us, (SELECT now_us FROM clock))) / $4) * $4
                 WHERE ((SELECT now_us FROM clock) + $3 * $4 - GREATEST(b.tat_us, (SELECT now_us FROM clock))) / $4 >= 1
                 RETURNING granted::BIGINT, tat_us, (SELECT now_us FROM clock)",
            )
            .bind(key)
            .bind(want)
            .bind(burst)
            .bind(interval)
            .fetch_optional(p)
            .await?,
            crate::db::Pool::Sqlite(p) => {
                let now_us = self.now().timestamp_micros();
                sqlx::query_as(
                    "INSERT INTO rate_buckets AS b (key, tat_us, granted)
                     VALUES ($1, $5 + min($2, $3) * $4, min($2, $3))
                     ON CONFLICT (key) DO UPDATE SET
                         granted = min($2, ($5 + $3 * $4 - max(b.tat_us, $5)) / $4),
                         tat_us = max(b.tat_us, $5) + min($2, ($5 + $3 * $4 - max(b.tat_us, $5)) / $4) * $4
                     WHERE ($5 + $3 * $4 - max(b.tat_us, $5)) / $4 >= 1
                     RETURNING granted, tat_us, $5",
                )
                .bind(key)
                .bind(want)
                .bind(burst)
                .bind(interval)
                .bind(now_us)
                .fetch_optional(p)
                .await?
            }
        };
        if let Some((granted, tat_us, _)) = granted {
            return Ok(Taken {
                granted: u32::try_from(granted).unwrap_or(0),
                tat_us,
                retry_after: None,
            });
        }
        // Refused: nothing was written; read the bucket to say how long.
        let (tat_us, now_us): (i64, i64) = match &self.pool {
            crate::db::Pool::Postgres(p) => {
                sqlx::query_as(
                    "SELECT tat_us, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::BIGINT
                 FROM rate_buckets WHERE key = $1",
                )
                .bind(key)
                .fetch_one(p)
                .await?
            }
            crate::db::Pool::Sqlite(p) => {
                let now_us = self.now().timestamp_micros();
                sqlx::query_as("SELECT tat_us, $2 FROM rate_buckets WHERE key = $1")
                    .bind(key)
                    .bind(now_us)
                    .fetch_one(p)
                    .await?
            }
        };
        Ok(limit::take(Some(tat_us), now_us, rate, 1))
    }

    /// Forgets buckets idle for [`IDLE_BUCKET`] (a forgotten bucket is a
    /// full one, which is what they hold by then); the number removed.
    pub async fn prune_rate_buckets(&self) -> Result<u64, StoreError> {
        let idle_us = i64::try_from(IDLE_BUCKET.as_micros()).unwrap_or(i64::MAX);
        let result = match &self.pool {
            crate::db::Pool::Postgres(p) => sqlx::query(
                "DELETE FROM rate_buckets
                 WHERE tat_us < (EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::BIGINT - $1",
            )
            .bind(idle_us)
            .execute(p)
            .await?
            .rows_affected(),
            crate::db::Pool::Sqlite(p) => sqlx::query("DELETE FROM rate_buckets WHERE tat_us < $1")
                .bind(self.now().timestamp_micros() - idle_us)
                .execute(p)
                .await?
                .rows_affected(),
        };
        Ok(result)
    }

    /// Empties every bucket (tests and benchmarks start from full ones).
    pub async fn reset_rate_buckets(&self) -> Result<(), StoreError> {
        with_pool!(&self.pool, p => sqlx::query("DELETE FROM rate_buckets").execute(p).await.map(drop)?);
        Ok(())
    }
}

/// One key's state in one server.
#[derive(Debug, Default)]
struct Key {
    /// Calls leased and not yet served.
    local: Mutex<Local>,
    /// Held by the one call that is leasing more, so the others wait for
    /// its lease instead of each asking the database.
    leasing: tokio::sync::Mutex<()>,
}

#[derive(Debug, Default)]
struct Local {
    calls: u32,
    until: Option<Instant>,
    /// The bucket used while the database cannot be reached.
    fallback_tat_us: Option<i64>,
}

impl Key {
    /// Serves one call from the lease, if it holds one.
    fn take_leased(&self, now: Instant) -> bool {
        let mut local = self.local.lock().unwrap_or_else(|p| p.into_inner());
        if local.calls > 0 && local.until.is_some_and(|until| now < until) {
            local.calls -= 1;
            true
        } else {
            false
        }
    }
}

/// The deployment-wide [`RateLimiter`] over a [`Store`].
#[derive(Debug)]
pub struct SharedLimiter {
    store: Store,
    lease_window: Duration,
    keys: DashMap<String, Arc<Key>>,
    /// Microseconds on the server's monotonic clock, for the fallback.
    epoch: Instant,
    warned_at: Mutex<Option<Instant>>,
}

impl SharedLimiter {
    /// A limiter whose buckets live in `store`, leasing about
    /// `lease_window` of calls at a time (`Duration::ZERO`: one call per
    /// round trip, for measuring what leasing saves).
    pub fn new(store: Store, lease_window: Duration) -> Self {
        Self {
            store,
            lease_window,
            keys: DashMap::new(),
            epoch: Instant::now(),
            warned_at: Mutex::new(None),
        }
    }

    /// How much a lease covers.
    pub fn lease_window(&self) -> Duration {
        self.lease_window
    }

    fn key(&self, key: &str) -> Arc<Key> {
        if let Some(found) = self.keys.get(key) {
            return found.clone();
        }
        self.keys.entry(key.to_owned()).or_default().clone()
    }

    /// Decides from this server's own bucket (the database is down).
    fn fallback(&self, state: &Key, rate: Rate, now: Instant, error: &StoreError) -> Admission {
        {
            let mut warned = self.warned_at.lock().unwrap_or_else(|p| p.into_inner());
            if warned.is_none_or(|at| now.duration_since(at) >= FALLBACK_WARNING) {
                *warned = Some(now);
                tracing::warn!(%error, "rate limits cannot reach the database; each server limits on its own until it answers");
            }
        }
        let now_us = i64::try_from(now.duration_since(self.epoch).as_micros()).unwrap_or(i64::MAX);
        let mut local = state.local.lock().unwrap_or_else(|p| p.into_inner());
        let taken = limit::take(local.fallback_tat_us, now_us, rate, 1);
        local.fallback_tat_us = Some(taken.tat_us);
        match taken.retry_after {
            None => Admission::Allowed,
            Some(retry_after) => Admission::Limited { retry_after },
        }
    }
}

#[async_trait]
impl RateLimiter for SharedLimiter {
    async fn admit(&self, key: &str, rate: Rate) -> Admission {
        let state = self.key(key);
        if state.take_leased(Instant::now()) {
            return Admission::Allowed;
        }
        let _leasing = state.leasing.lock().await;
        // Another call may have leased while this one waited.
        if state.take_leased(Instant::now()) {
            return Admission::Allowed;
        }
        let want = if self.lease_window.is_zero() {
            1
        } else {
            rate.lease_size(self.lease_window)
        };
        match self.store.lease_calls(key, rate, want).await {
            Ok(Taken {
                granted: 0,
                retry_after,
                ..
            }) => Admission::Limited {
                retry_after: retry_after.unwrap_or(Duration::from_secs(1)),
            },
            Ok(taken) => {
                let mut local = state.local.lock().unwrap_or_else(|p| p.into_inner());
                local.calls = taken.granted - 1;
                local.until = Some(Instant::now() + LEASE_LIFETIME);
                Admission::Allowed
            }
            Err(error) => self.fallback(&state, rate, Instant::now(), &error),
        }
    }
}
