//! Rate limits that hold for the whole deployment (spec §9), at the cost
//! of a database round trip per *lease*, not per call.
//!
//! Each key's bucket lives in `rate_buckets` (GCRA's theoretical arrival
//! time, [`acdm_core::limit::take`]). A server does not ask the database
//! about every call: it leases as many calls as it was asked for in the
//! last lease window ([`SharedLimiter::new`]; at least one, at most half
//! the burst) and serves them from memory, so a busy key costs about one
//! round trip per window and server, and a quiet one a round trip per
//! call. Every leased call has already been counted in the shared bucket,
//! so N replicas together never grant more than the rate plus its burst,
//! and the calls they hold (at most half the burst each); what a server
//! has not used by the end of a lease's window, and has not carried over
//! into a lease taken ahead, is dropped. A refusal is remembered until
//! its `retry_after` (nothing can be granted before then, on any server),
//! so an agent that keeps calling past its limit costs no round trips
//! either.
//!
//! A busy key's next lease is taken ahead, once per lease: the first call
//! served in the last quarter of a lease's window starts, in the
//! background, a lease that tops the calls left up to the recent demand
//! (the busier of the last two demand windows), and the calls left carry
//! over into the new lease's window, so the server holds at most one
//! lease's worth. As long as the demand is steady, the key's calls do not
//! wait for the database; taken when the lease ran out, every call of the
//! key waited for that one round trip, once a window. When demand outgrows
//! a lease, or the lease ahead is refused or fails, the call that finds
//! the calls out leases as before.
//!
//! On PostgreSQL the lease is one statement (`INSERT … ON CONFLICT DO
//! UPDATE … WHERE … RETURNING`) on the database's clock, so replicas'
//! clocks do not matter. On SQLite (one host) it is the same statement on
//! the store's clock. When the database cannot be reached the server
//! falls back to a bucket of its own in memory (logged): limits then hold
//! per server, not per deployment, until the database answers again.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use acdm_core::limit::{self, Admission, Rate, RateLimiter, Taken};
use acdm_core::scope::{Clock, SystemClock};
use async_trait::async_trait;
use dashmap::DashMap;

use crate::db::with_pool;
use crate::{Store, StoreError};

/// How often a failing database is logged while the limiter falls back.
const FALLBACK_WARNING: Duration = Duration::from_secs(60);

/// A busy key's next lease is taken once at most this part of its
/// lease's window is left (a quarter).
const AHEAD: u32 = 4;

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
        // The bucket may have room by the time it is read: the answer
        // stays a refusal (the smallest wait), never an uncounted grant.
        let read: Option<(i64, i64)> = match &self.pool {
            crate::db::Pool::Postgres(p) => {
                sqlx::query_as(
                    "SELECT tat_us, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::BIGINT
                     FROM rate_buckets WHERE key = $1",
                )
                .bind(key)
                .fetch_optional(p)
                .await?
            }
            crate::db::Pool::Sqlite(p) => {
                let now_us = self.now().timestamp_micros();
                sqlx::query_as("SELECT tat_us, $2 FROM rate_buckets WHERE key = $1")
                    .bind(key)
                    .bind(now_us)
                    .fetch_optional(p)
                    .await?
            }
        };
        // A bucket removed meanwhile (pruned, reset) is full again.
        let (tat_us, now_us) = read.unwrap_or((0, 0));
        Ok(Taken {
            granted: 0,
            tat_us,
            retry_after: Some(limit::wait(tat_us, now_us, rate)),
        })
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
    /// Calls leased and not yet served, usable until `until`.
    calls: u32,
    until: Option<Instant>,
    /// No call can be granted before this (the last refusal's wait).
    refused_until: Option<Instant>,
    /// Calls asked for in the current demand window, and in the one
    /// before; the current one started at `window_start`.
    demand: u32,
    demand_before: u32,
    window_start: Option<Instant>,
    /// The bucket used while the database cannot be reached.
    fallback_tat_us: Option<i64>,
    /// The end (`until`) of the lease a lease ahead was last started for:
    /// one attempt per lease, whatever comes of it.
    ahead_for: Option<Instant>,
}

impl Local {
    /// Counts one call asked for at `now`, in windows of `window`.
    fn count_demand(&mut self, now: Instant, window: Duration) {
        let start = *self.window_start.get_or_insert(now);
        let elapsed = now.saturating_duration_since(start);
        if elapsed >= window {
            self.demand_before = if elapsed < window * 2 { self.demand } else { 0 };
            self.demand = 0;
            self.window_start = Some(now);
        }
        self.demand = self.demand.saturating_add(1);
    }

    /// What a lease should cover: the busier of the two windows.
    fn recent_demand(&self) -> u32 {
        self.demand.max(self.demand_before)
    }

    /// Decides from memory when it can: `Some` when leased calls are left
    /// or a refusal still holds.
    fn decide(&mut self, now: Instant) -> Option<Admission> {
        if let Some(until) = self.refused_until {
            if now < until {
                return Some(Admission::Limited {
                    retry_after: until - now,
                });
            }
            self.refused_until = None;
        }
        if self.calls > 0 && self.until.is_some_and(|until| now < until) {
            self.calls -= 1;
            return Some(Admission::Allowed);
        }
        None
    }

    /// Whether the lease serving calls at `now` is in the last quarter of
    /// its `window`.
    fn nearly_out(&self, now: Instant, window: Duration) -> bool {
        self.until
            .is_some_and(|until| until.saturating_duration_since(now) <= window / AHEAD)
    }

    /// Whether a lease ahead should be started at `now`, and for how
    /// many calls: enough to top the calls left up to the recent demand.
    /// Marks the lease as having had its attempt.
    fn start_ahead(&mut self, now: Instant, window: Duration, rate: Rate) -> Option<Ahead> {
        let until = self.until?;
        if window.is_zero() || self.ahead_for == Some(until) || !self.nearly_out(now, window) {
            return None;
        }
        let want = rate
            .lease_size(self.recent_demand())
            .saturating_sub(self.calls);
        if want == 0 {
            // Enough left for now: a later call of this quarter may find
            // the demand grown.
            return None;
        }
        self.ahead_for = Some(until);
        Some(Ahead { until, want })
    }

    /// Whether `ahead` still has a use at `now`: the lease it was started
    /// for is still the one serving and no refusal holds (else a call that
    /// found the calls out has leased, or been refused, itself).
    fn wants(&self, ahead: Ahead, now: Instant) -> bool {
        self.until == Some(ahead.until) && self.refused_until.is_none_or(|r| now >= r)
    }

    /// Adds `granted` calls leased ahead at `now` to the lease ending at
    /// `ahead.until`, for a new `window`, if it [`Local::wants`] them.
    fn add_ahead(&mut self, ahead: Ahead, granted: u32, now: Instant, window: Duration) {
        // The task checked this before it leased, and holds the lease
        // lock that every change of `until` and `refused_until` takes: a
        // guard, should that ever change.
        if !self.wants(ahead, now) {
            return;
        }
        let left = if now < ahead.until { self.calls } else { 0 };
        self.calls = left.saturating_add(granted);
        self.until = Some(now + window);
    }
}

impl Key {
    fn local(&self) -> std::sync::MutexGuard<'_, Local> {
        self.local.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A lease ahead: for the lease ending at `until`, `want` calls.
#[derive(Debug, Clone, Copy)]
struct Ahead {
    until: Instant,
    want: u32,
}

/// The deployment-wide [`RateLimiter`] over a [`Store`].
pub struct SharedLimiter {
    store: Store,
    lease_window: Duration,
    clock: Arc<dyn Clock>,
    keys: DashMap<String, Arc<Key>>,
    /// Microseconds on the server's monotonic clock, for the fallback.
    epoch: Instant,
    warned_at: Mutex<Option<Instant>>,
}

impl std::fmt::Debug for SharedLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedLimiter")
            .field("lease_window", &self.lease_window)
            .field("keys", &self.keys.len())
            .finish_non_exhaustive()
    }
}

impl SharedLimiter {
    /// A limiter whose buckets live in `store`, leasing as many calls as
    /// were asked for in the last `lease_window` (what is unused at the
    /// end of a lease's window, and not carried over, is dropped);
    /// `Duration::ZERO`: one call per round trip, for measuring what
    /// leasing saves.
    pub fn new(store: Store, lease_window: Duration) -> Self {
        Self::with_clock(store, lease_window, Arc::new(SystemClock))
    }

    /// Same, on `clock` (leases' windows and remembered refusals): for
    /// tests that move time.
    pub fn with_clock(store: Store, lease_window: Duration, clock: Arc<dyn Clock>) -> Self {
        Self {
            store,
            lease_window,
            keys: DashMap::new(),
            epoch: clock.now(),
            clock,
            warned_at: Mutex::new(None),
        }
    }

    /// The calls this server holds for `key`, leased and not yet served,
    /// whose window is not over (a refusal remembered may still hold them
    /// back): what a test or an operator's view can see of the leases.
    pub fn leased(&self, key: &str) -> u32 {
        let Some(state) = self.keys.get(key).map(|found| found.clone()) else {
            return 0;
        };
        let local = state.local();
        if local.until.is_some_and(|until| self.clock.now() < until) {
            local.calls
        } else {
            0
        }
    }

    /// Takes `ahead.want` more calls for `key` in the background, on this
    /// runtime (none: not at all).
    fn lease_ahead(&self, key: &str, state: &Arc<Key>, rate: Rate, ahead: Ahead) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (store, state, key, window, clock) = (
            self.store.clone(),
            state.clone(),
            key.to_owned(),
            self.lease_window,
            self.clock.clone(),
        );
        runtime.spawn(async move {
            let _leasing = state.leasing.lock().await;
            // A call that found the calls out may have leased, or been
            // refused, while this one waited for its turn.
            if !state.local().wants(ahead, clock.now()) {
                return;
            }
            // Refused or failed: the calls left are served until their
            // window is over, and the call that finds them out leases (or
            // falls back, logged) then.
            match store.lease_calls(&key, rate, ahead.want).await {
                Ok(taken) if taken.granted > 0 => {
                    state
                        .local()
                        .add_ahead(ahead, taken.granted, clock.now(), window);
                }
                Ok(_) => {}
                Err(error) => tracing::debug!(%error, "a rate limit's lease ahead failed"),
            }
        });
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
        let mut local = state.local();
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
        {
            let now = self.clock.now();
            let mut local = state.local();
            local.count_demand(now, self.lease_window);
            if let Some(decided) = local.decide(now) {
                if decided == Admission::Allowed
                    && let Some(ahead) = local.start_ahead(now, self.lease_window, rate)
                {
                    drop(local);
                    self.lease_ahead(key, &state, rate, ahead);
                }
                return decided;
            }
        }
        let _leasing = state.leasing.lock().await;
        // Another call may have leased, or been refused, meanwhile.
        let want = {
            let mut local = state.local();
            if let Some(decided) = local.decide(self.clock.now()) {
                return decided;
            }
            if self.lease_window.is_zero() {
                1
            } else {
                rate.lease_size(local.recent_demand())
            }
        };
        match self.store.lease_calls(key, rate, want).await {
            Ok(Taken {
                granted: 0,
                retry_after,
                ..
            }) => {
                let retry_after = retry_after.unwrap_or(Duration::from_secs(1));
                state.local().refused_until = Some(self.clock.now() + retry_after);
                Admission::Limited { retry_after }
            }
            Ok(taken) => {
                let mut local = state.local();
                local.calls = taken.granted - 1;
                local.until = Some(self.clock.now() + self.lease_window);
                Admission::Allowed
            }
            Err(error) => self.fallback(&state, rate, self.clock.now(), &error),
        }
    }
}
