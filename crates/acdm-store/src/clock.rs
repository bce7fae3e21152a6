//! Where the store's timestamps come from.
//!
//! Every `created_at`, `updated_at`, `changed_at`, `mounted_at` and
//! `unmounted_at` the store writes is read from one [`Clock`]: the system
//! clock by default, a [`ManualClock`] in tests that need distinct or
//! ordered timestamps without sleeping ([`crate::Store::with_clock`]).

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, SubsecRound, TimeDelta, Utc};

/// A source of "now", cheap to clone.
#[derive(Clone)]
pub struct Clock(Arc<dyn Fn() -> DateTime<Utc> + Send + Sync>);

impl Clock {
    /// The system clock (`Utc::now`).
    pub fn system() -> Self {
        Self(Arc::new(Utc::now))
    }

    /// A clock that reads `now`.
    pub fn from_fn(now: impl Fn() -> DateTime<Utc> + Send + Sync + 'static) -> Self {
        Self(Arc::new(now))
    }

    /// Now, kept to the microsecond (PostgreSQL's precision), so both
    /// backends return what was written.
    pub(crate) fn now(&self) -> DateTime<Utc> {
        (self.0)().trunc_subsecs(6)
    }
}

impl Default for Clock {
    fn default() -> Self {
        Self::system()
    }
}

impl fmt::Debug for Clock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Clock")
    }
}

/// A clock that stands still until it is advanced: for tests.
#[derive(Debug, Clone)]
pub struct ManualClock(Arc<Mutex<DateTime<Utc>>>);

impl ManualClock {
    /// A clock reading `start`.
    pub fn new(start: DateTime<Utc>) -> Self {
        Self(Arc::new(Mutex::new(start)))
    }

    /// What it reads now.
    pub fn now(&self) -> DateTime<Utc> {
        *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Moves it forward by `by`.
    pub fn advance(&self, by: Duration) {
        let by = TimeDelta::from_std(by).unwrap_or(TimeDelta::MAX);
        let mut now = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *now = now
            .checked_add_signed(by)
            .unwrap_or(DateTime::<Utc>::MAX_UTC);
    }

    /// A [`Clock`] reading this one.
    pub fn clock(&self) -> Clock {
        let manual = self.clone();
        Clock::from_fn(move || manual.now())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_only_when_advanced_and_reads_to_the_microsecond() {
        let start = DateTime::parse_from_rfc3339("2026-01-02T03:04:05.123456789Z")
            .unwrap()
            .with_timezone(&Utc);
        let manual = ManualClock::new(start);
        let clock = manual.clock();
        assert_eq!(clock.now(), start.trunc_subsecs(6));
        assert_eq!(clock.now(), clock.now());
        manual.advance(Duration::from_millis(2));
        assert_eq!(
            clock.now() - start.trunc_subsecs(6),
            TimeDelta::milliseconds(2)
        );
    }
}
