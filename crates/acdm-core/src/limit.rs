//! Rate limits (spec §9): the arithmetic of one shared token bucket, and
//! the port an adapter asks before it serves a call.
//!
//! A limit is a [`Rate`] — so many calls per minute, with a burst — kept as
//! GCRA's one number per key, the *theoretical arrival time* (TAT): each
//! call moves it one interval forward from `max(TAT, now)`, and a call is
//! refused while that would put it more than `burst` intervals ahead of
//! now. [`take`] generalises this to taking `want` calls at once and
//! granting as many as the bucket holds, which is what lets several
//! replicas share one bucket in the database without a round trip per
//! call: each replica *leases* a few calls at a time and serves them from
//! memory (see `acdm_store::limits`). Every leased call has been counted in
//! the shared bucket, so the deployment as a whole never exceeds the rate
//! plus its burst, however many replicas there are.
//!
//! Time is in whole microseconds, handed in by the caller (the database's
//! clock on PostgreSQL), so the arithmetic is exact and testable.

use std::time::Duration;

use async_trait::async_trait;

/// Microseconds in a minute.
const MINUTE_US: i64 = 60_000_000;

/// A rate: `per_minute` calls a minute on average, and up to `burst` at
/// once after a quiet spell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Rate {
    per_minute: u32,
    burst: u32,
}

impl Rate {
    /// `per_minute` calls a minute with bursts of `burst`; `None` when
    /// either is zero (no limit can be zero: turn it off instead).
    pub fn new(per_minute: u32, burst: u32) -> Option<Self> {
        (per_minute > 0 && burst > 0).then_some(Self { per_minute, burst })
    }

    /// Calls a minute.
    pub fn per_minute(self) -> u32 {
        self.per_minute
    }

    /// Calls allowed at once.
    pub fn burst(self) -> u32 {
        self.burst
    }

    /// The interval between two calls at the steady rate, in microseconds
    /// (at least 1).
    pub fn interval_us(self) -> i64 {
        (MINUTE_US / i64::from(self.per_minute)).max(1)
    }

    /// How many calls a server leases at once when it was asked for
    /// `demand` calls of this key lately: that many, at least one and at
    /// most half the burst (so one server's lease never empties the bucket
    /// for the others). A busy key then costs about one lease per demand
    /// window, a quiet one a lease per call.
    pub fn lease_size(self, demand: u32) -> u32 {
        demand.clamp(1, (self.burst / 2).max(1))
    }
}

impl std::fmt::Display for Rate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} calls a minute (bursts of {})",
            self.per_minute, self.burst
        )
    }
}

/// What [`take`] decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Taken {
    /// Calls granted: from 0 to what was asked.
    pub granted: u32,
    /// The bucket's new TAT (unchanged when nothing was granted).
    pub tat_us: i64,
    /// When nothing was granted: how long until one call would be.
    pub retry_after: Option<Duration>,
}

/// Takes up to `want` calls from a bucket whose TAT is `tat_us` (`None`:
/// a bucket never used, or idle long enough to be forgotten) at `now_us`.
pub fn take(tat_us: Option<i64>, now_us: i64, rate: Rate, want: u32) -> Taken {
    let interval = rate.interval_us();
    let start = tat_us.map_or(now_us, |tat| tat.max(now_us));
    // Calls the bucket holds now: those whose arrival would not put the
    // TAT more than `burst` intervals past now.
    let room = (now_us + i64::from(rate.burst) * interval - start) / interval;
    let granted = room.clamp(0, i64::from(want));
    if granted == 0 {
        return Taken {
            granted: 0,
            tat_us: tat_us.unwrap_or(now_us),
            retry_after: Some(wait(start, now_us, rate)),
        };
    }
    Taken {
        granted: u32::try_from(granted).unwrap_or(0),
        tat_us: start + granted * interval,
        retry_after: None,
    }
}

/// How long until one call fits in a bucket whose TAT is `tat_us` (at
/// least a microsecond): `max(TAT, now) + interval - burst·interval - now`.
/// What a refusal answers, even when the bucket was read after the refusal
/// and has room by then: a refused call is never admitted uncounted.
pub fn wait(tat_us: i64, now_us: i64, rate: Rate) -> Duration {
    let interval = rate.interval_us();
    let wait_us = tat_us.max(now_us) + interval - i64::from(rate.burst) * interval - now_us;
    Duration::from_micros(u64::try_from(wait_us.max(1)).unwrap_or(1))
}

/// Whether a call may go ahead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Serve it.
    Allowed,
    /// Refuse it with `rate_limited`: the limit was reached.
    Limited {
        /// How long until a call would be allowed again.
        retry_after: Duration,
    },
}

impl Admission {
    /// The whole seconds to put in `Retry-After` (at least 1).
    pub fn retry_after_seconds(retry_after: Duration) -> u64 {
        retry_after.as_secs() + u64::from(retry_after.subsec_nanos() > 0)
    }
}

/// The port an adapter asks before serving a call: one bucket per `key`
/// (an agent's calls, an agent's writes, an MCP tool), shared by every
/// replica of the deployment. Implemented by the store.
#[async_trait]
pub trait RateLimiter: Send + Sync {
    /// Counts one call against `key`'s bucket at `rate`.
    async fn admit(&self, key: &str, rate: Rate) -> Admission;
}

/// A limiter that admits everything: for servers with limits off, and
/// for tests of other things.
#[derive(Debug, Default, Clone, Copy)]
pub struct Unlimited;

#[async_trait]
impl RateLimiter for Unlimited {
    async fn admit(&self, _key: &str, _rate: Rate) -> Admission {
        Admission::Allowed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rate(per_minute: u32, burst: u32) -> Rate {
        Rate::new(per_minute, burst).expect("a valid rate")
    }

    const SECOND: i64 = 1_000_000;

    #[test]
    fn a_rate_of_zero_is_not_a_rate() {
        assert_eq!(Rate::new(0, 5), None);
        assert_eq!(Rate::new(5, 0), None);
        assert_eq!(rate(60, 1).interval_us(), SECOND);
    }

    #[test]
    fn a_fresh_bucket_grants_its_burst_then_one_call_per_interval() {
        let r = rate(60, 3); // one a second, three at once
        let now = 100 * SECOND;
        let first = take(None, now, r, 10);
        assert_eq!(first.granted, 3);
        assert_eq!(first.tat_us, now + 3 * SECOND);
        let refused = take(Some(first.tat_us), now, r, 1);
        assert_eq!(refused.granted, 0);
        assert_eq!(refused.tat_us, first.tat_us, "a refusal changes nothing");
        assert_eq!(refused.retry_after, Some(Duration::from_secs(1)));
        let later = take(Some(first.tat_us), now + SECOND, r, 5);
        assert_eq!(later.granted, 1);
        assert_eq!(later.tat_us, now + 4 * SECOND);
    }

    #[test]
    fn calls_one_by_one_match_calls_taken_in_leases() {
        // Over a simulated minute at twice the rate, granting one at a time
        // or in leases of four grants the same number of calls.
        let r = rate(600, 20);
        let mut one = None;
        let mut leased = None;
        let (mut ones, mut leases) = (0u32, 0u32);
        for tick in 0..2_400 {
            let now = i64::from(tick) * 25_000; // every 25 ms for a minute
            let t = take(one, now, r, 1);
            ones += t.granted;
            one = Some(t.tat_us);
            if tick % 4 == 0 {
                let t = take(leased, now, r, 4);
                leases += t.granted;
                leased = Some(t.tat_us);
            }
        }
        // The burst of 20, then one every 100 ms until 59.975 s: 20 + 599,
        // each way (leases lose at most the last lease's rest).
        assert_eq!(ones, 619);
        assert!((616..=619).contains(&leases), "{leases}");
    }

    #[test]
    fn a_long_idle_bucket_holds_no_more_than_its_burst() {
        let r = rate(60, 5);
        let t = take(Some(0), 3_600 * SECOND, r, 100);
        assert_eq!(t.granted, 5);
    }

    #[test]
    fn leases_follow_demand_from_one_call_to_half_the_burst() {
        assert_eq!(rate(60, 10).lease_size(0), 1);
        assert_eq!(rate(60, 10).lease_size(3), 3);
        assert_eq!(rate(60, 10).lease_size(40), 5);
        assert_eq!(rate(60, 1).lease_size(40), 1);
    }

    #[test]
    fn a_refusal_always_waits_even_when_the_bucket_has_room_by_then() {
        let r = rate(60, 2);
        // TAT two intervals ahead: full; one interval to wait.
        assert_eq!(wait(2 * SECOND, 0, r), Duration::from_secs(1));
        // Read later, with room: still a wait (the smallest one).
        assert_eq!(wait(0, 10 * SECOND, r), Duration::from_micros(1));
    }

    #[test]
    fn retry_after_rounds_up_to_whole_seconds() {
        assert_eq!(Admission::retry_after_seconds(Duration::from_millis(1)), 1);
        assert_eq!(Admission::retry_after_seconds(Duration::from_secs(2)), 2);
        assert_eq!(
            Admission::retry_after_seconds(Duration::from_millis(2_001)),
            3
        );
    }
}
