//! Periodic tasks: the one way the service runs a library's `poll_once`
//! every interval (the scope watcher, the kill-switch follower, the
//! reconciler).
//!
//! [`Periodic::start`] runs a first round before returning (so the server
//! starts with a fresh scope cache, a known kill switch and settled
//! events), then spawns a task, named in its log lines, that runs one
//! round per interval (`MissedTickBehavior::Delay`: a slow round pushes
//! the next one back instead of causing a burst). A failed round is logged
//! and the task goes on; a failure repeated round after round is logged
//! as a warning once, then at most every [`REPEAT_WARNING`], and its end
//! is logged too. On shutdown each task stops at its next tick (a round in
//! progress finishes), and [`Periodic::join`] awaits them all, aborting
//! what is still running at its deadline.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, Level};

/// How often a failure that keeps repeating is logged as a warning again.
pub const REPEAT_WARNING: Duration = Duration::from_secs(300);

/// One round of a periodic task.
pub trait Round: Send + 'static {
    /// What a round did (logged at debug level).
    type Done: fmt::Debug + Send;
    /// Why a round failed.
    type Error: fmt::Display + Send;
    /// Does one round.
    fn poll_once(&mut self) -> impl Future<Output = Result<Self::Done, Self::Error>> + Send;
}

/// The service's periodic tasks, stopped by one shutdown token.
#[derive(Debug)]
pub struct Periodic {
    shutdown: CancellationToken,
    tasks: Vec<(&'static str, JoinHandle<()>)>,
}

impl Periodic {
    /// No tasks yet; the ones started stop when `shutdown` is cancelled.
    pub fn new(shutdown: CancellationToken) -> Self {
        Self {
            shutdown,
            tasks: Vec::new(),
        }
    }

    /// Runs one round of `round` now and waits for it, then spawns the task
    /// `name` that runs a round every `interval` (the first one `interval`
    /// from now) until shutdown.
    pub async fn start<R: Round>(&mut self, name: &'static str, interval: Duration, round: R) {
        self.start_nudged(name, interval, round, Arc::new(Notify::new()))
            .await;
    }

    /// [`Periodic::start`], with a round also run as soon as `nudge` is
    /// notified (a change announced by the database); the interval goes
    /// on as the fallback.
    pub async fn start_nudged<R: Round>(
        &mut self,
        name: &'static str,
        interval: Duration,
        mut round: R,
        nudge: Arc<Notify>,
    ) {
        let span = tracing::info_span!("periodic", task = name);
        let mut log = RoundLog::default();
        log.record(round.poll_once().instrument(span.clone()).await);
        self.spawn_rounds(name, interval, round, nudge, log);
    }

    /// Spawns the task `name` that runs a round of `round` every
    /// `interval`, the first one `interval` from now: for housekeeping that
    /// the server does not need before it serves.
    pub fn start_later<R: Round>(&mut self, name: &'static str, interval: Duration, round: R) {
        self.spawn_rounds(
            name,
            interval,
            round,
            Arc::new(Notify::new()),
            RoundLog::default(),
        );
    }

    fn spawn_rounds<R: Round>(
        &mut self,
        name: &'static str,
        interval: Duration,
        mut round: R,
        nudge: Arc<Notify>,
        mut log: RoundLog,
    ) {
        let span = tracing::info_span!("periodic", task = name);
        let shutdown = self.shutdown.clone();
        let handle = tokio::spawn(
            async move {
                let mut ticker = tokio::time::interval_at(Instant::now() + interval, interval);
                ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
                loop {
                    tokio::select! {
                        biased;
                        () = shutdown.cancelled() => break,
                        () = nudge.notified() => ticker.reset(),
                        _ = ticker.tick() => {}
                    }
                    log.record(round.poll_once().await);
                }
                tracing::debug!("periodic task stopped");
            }
            .instrument(span),
        );
        self.tasks.push((name, handle));
    }

    /// Spawns the long-running task `name` (it must end when `shutdown`
    /// is cancelled), awaited like the periodic ones.
    pub fn spawn<F>(&mut self, name: &'static str, task: impl FnOnce(CancellationToken) -> F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let span = tracing::info_span!("periodic", task = name);
        let handle = tokio::spawn(task(self.shutdown.clone()).instrument(span));
        self.tasks.push((name, handle));
    }

    /// Stops every task (cancelling the shutdown token, if nobody has yet)
    /// and waits for them; a task still running a round after `within` is
    /// aborted.
    pub async fn join(self, within: Duration) {
        self.shutdown.cancel();
        let deadline = Instant::now() + within;
        for (name, mut handle) in self.tasks {
            tokio::select! {
                result = &mut handle => {
                    if let Err(error) = result.map_err(|e| e.to_string()) {
                        tracing::error!(task = name, %error, "periodic task ended abnormally");
                    }
                }
                () = tokio::time::sleep_until(deadline) => {
                    tracing::warn!(task = name, "periodic task still running at the drain deadline; aborted");
                    handle.abort();
                    let _ = handle.await;
                }
            }
        }
    }
}

/// What the log has said about a task's failures.
#[derive(Debug, Default)]
struct RoundLog {
    /// Failed rounds in a row.
    failures: u64,
    /// When the last warning was logged.
    warned_at: Option<Instant>,
}

impl RoundLog {
    /// Logs `outcome`; returns the level of the line logged.
    fn record<D: fmt::Debug, E: fmt::Display>(&mut self, outcome: Result<D, E>) -> Level {
        match outcome {
            Ok(done) => {
                let recovered = self.failures > 0;
                if recovered {
                    tracing::info!(failed_rounds = self.failures, "periodic task recovered");
                } else {
                    tracing::debug!(?done, "periodic round done");
                }
                self.failures = 0;
                self.warned_at = None;
                if recovered { Level::INFO } else { Level::DEBUG }
            }
            Err(error) => {
                self.failures += 1;
                let now = Instant::now();
                if self
                    .warned_at
                    .is_none_or(|at| now.duration_since(at) >= REPEAT_WARNING)
                {
                    self.warned_at = Some(now);
                    tracing::warn!(%error, failed_rounds = self.failures, "periodic round failed");
                    Level::WARN
                } else {
                    tracing::debug!(%error, failed_rounds = self.failures, "periodic round failed again");
                    Level::DEBUG
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    /// Counts its rounds; fails the ones listed; hangs on `hang_on`.
    struct Counting {
        rounds: Arc<AtomicU32>,
        fail_on: Vec<u32>,
        hang_on: Option<u32>,
    }

    impl Round for Counting {
        type Done = u32;
        type Error = String;
        async fn poll_once(&mut self) -> Result<u32, String> {
            let n = self.rounds.fetch_add(1, Ordering::SeqCst) + 1;
            if self.hang_on == Some(n) {
                std::future::pending::<()>().await;
            }
            if self.fail_on.contains(&n) {
                Err(format!("round {n} failed"))
            } else {
                Ok(n)
            }
        }
    }

    fn counting(fail_on: Vec<u32>, hang_on: Option<u32>) -> (Counting, Arc<AtomicU32>) {
        let rounds = Arc::new(AtomicU32::new(0));
        (
            Counting {
                rounds: rounds.clone(),
                fail_on,
                hang_on,
            },
            rounds,
        )
    }

    const EVERY: Duration = Duration::from_secs(30);

    /// Lets the clock run to `EVERY × rounds + half an interval` from
    /// `start`, so every tick before it has fired and none is pending.
    async fn until(start: Instant, intervals: u32) {
        tokio::time::sleep_until(start + EVERY * intervals + EVERY / 2).await;
    }

    #[tokio::test(start_paused = true)]
    async fn rounds_run_once_at_start_then_every_interval_and_a_failure_does_not_stop_them() {
        let (round, rounds) = counting(vec![1, 2], None);
        let shutdown = CancellationToken::new();
        let mut periodic = Periodic::new(shutdown.clone());
        let start = Instant::now();
        periodic.start("counting", EVERY, round).await;
        assert_eq!(
            rounds.load(Ordering::SeqCst),
            1,
            "one round before start returns"
        );
        tokio::time::sleep_until(start + EVERY - Duration::from_millis(1)).await;
        assert_eq!(rounds.load(Ordering::SeqCst), 1, "none before the interval");
        until(start, 1).await;
        assert_eq!(
            rounds.load(Ordering::SeqCst),
            2,
            "failed rounds 1 and 2 did not stop it"
        );
        until(start, 4).await;
        assert_eq!(rounds.load(Ordering::SeqCst), 5, "one round per interval");
        periodic.join(Duration::from_secs(5)).await;
        assert!(shutdown.is_cancelled(), "join stops the tasks");
    }

    #[tokio::test(start_paused = true)]
    async fn a_cancelled_token_stops_the_task_and_join_awaits_it() {
        let (round, rounds) = counting(vec![], None);
        let shutdown = CancellationToken::new();
        let mut periodic = Periodic::new(shutdown.child_token());
        let start = Instant::now();
        periodic.start("counting", EVERY, round).await;
        until(start, 2).await;
        assert_eq!(rounds.load(Ordering::SeqCst), 3);
        shutdown.cancel();
        let joined = Instant::now();
        periodic.join(Duration::from_secs(3600)).await;
        assert!(
            joined.elapsed() < Duration::from_secs(3600),
            "an idle task stops at once, not at the deadline"
        );
        until(start, 10).await;
        assert_eq!(rounds.load(Ordering::SeqCst), 3, "no round after shutdown");
    }

    #[tokio::test(start_paused = true)]
    async fn a_repeated_failure_warns_once_per_period_and_its_end_is_said() {
        let mut log = RoundLog::default();
        let failed = || Err::<(), _>("database down");
        assert_eq!(log.record(Ok::<_, &str>(())), Level::DEBUG);
        assert_eq!(log.record(failed()), Level::WARN, "the first failure warns");
        for _ in 0..10 {
            tokio::time::advance(Duration::from_secs(2)).await;
            assert_eq!(log.record(failed()), Level::DEBUG, "not every round");
        }
        tokio::time::advance(REPEAT_WARNING).await;
        assert_eq!(log.record(failed()), Level::WARN, "again after the period");
        assert_eq!(log.record(Ok::<_, &str>(())), Level::INFO, "the recovery");
        assert_eq!(
            log.record(failed()),
            Level::WARN,
            "a new failure warns at once"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_round_still_running_at_the_deadline_is_aborted() {
        let (round, rounds) = counting(vec![], Some(2));
        let mut periodic = Periodic::new(CancellationToken::new());
        let start = Instant::now();
        periodic.start("stuck", EVERY, round).await;
        until(start, 3).await;
        assert_eq!(
            rounds.load(Ordering::SeqCst),
            2,
            "round 2 hangs, so no round 3"
        );
        let joined = Instant::now();
        periodic.join(Duration::from_secs(5)).await;
        assert_eq!(
            joined.elapsed(),
            Duration::from_secs(5),
            "aborted at the deadline"
        );
    }
}
