//! A request's deadline, seen by every upstream call it makes.
//!
//! The adapters run each request inside [`within`]; [`HttpClient`]
//! (`crate::http`) ends every call by the sooner of its own budget and
//! this deadline, so a request that makes several upstream calls (a write:
//! look, keep a copy, write) still answers by its deadline — and before the
//! caller stops waiting, when the caller said how long it waits. It is a
//! task-local value: it follows the request's future, not threads.
//!
//! [`HttpClient`]: crate::http::HttpClient

use std::future::Future;

use tokio::time::Instant;

tokio::task_local! {
    static DEADLINE: Instant;
}

/// A request's deadline as a request extension, for work the request hands
/// to another task (which does not inherit the task-local value).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadline(pub Instant);

/// Runs `future` with `deadline` as its deadline (or the current one, if
/// it is already inside a sooner one).
pub async fn within<F: Future>(deadline: Instant, future: F) -> F::Output {
    DEADLINE.scope(sooner(deadline), future).await
}

/// The deadline of the running request, if it has one.
pub fn current() -> Option<Instant> {
    DEADLINE.try_with(|deadline| *deadline).ok()
}

/// `deadline`, or the running request's when that is sooner.
pub fn sooner(deadline: Instant) -> Instant {
    current().map_or(deadline, |current| current.min(deadline))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_sooner_deadline_wins_and_stays_with_the_future() {
        let now = Instant::now();
        assert_eq!(current(), None);
        assert_eq!(sooner(now), now);
        let outer = now + Duration::from_secs(5);
        within(outer, async {
            assert_eq!(current(), Some(outer));
            assert_eq!(sooner(now + Duration::from_secs(9)), outer);
            within(now + Duration::from_secs(9), async {
                assert_eq!(
                    current(),
                    Some(outer),
                    "a later deadline does not extend it"
                );
            })
            .await;
            within(now + Duration::from_secs(1), async {
                assert_eq!(current(), Some(now + Duration::from_secs(1)));
            })
            .await;
        })
        .await;
        assert_eq!(current(), None);
    }
}
