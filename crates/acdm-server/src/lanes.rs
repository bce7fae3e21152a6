//! The threads connections are served on: one event loop per core, each a
//! tokio current-thread runtime, as nginx runs one worker process per
//! core (`ACDM_CONNECTION_THREADS`).
//!
//! The accept loop hands each new connection to the lane with the fewest
//! open connections, and it stays there: its requests, the upstream
//! exchanges they make and the tasks they spawn run on that thread. The
//! upstream client hands an idle connection only to a request on the
//! runtime that made it, so an answer from upstream wakes the thread that
//! waits for it. On one work-stealing runtime, every readiness event woke
//! a task that either worker might run, and the wake-ups between the
//! workers cost about a fifth of the hot path's CPU (`docs/performance.md`,
//! "One event loop per core").
//!
//! Two kinds of work do cross threads. An MCP session (`ACDM_MCP_SESSIONS`)
//! runs on the thread of the connection that opened it, whichever
//! connection brings its later calls. A PostgreSQL connection does its
//! I/O in the task that uses it, and is registered with the event loop
//! of the thread that opened it, which other threads and the periodic
//! tasks then share; the hot path's reads do not query the database.
//!
//! The trade-off is nginx's: a request that computes for long holds up the
//! other connections of its lane, where a work-stealing runtime would
//! have moved them. Nothing the service answers computes for long (a
//! folder listing renders in tens of microseconds; file hashing and
//! SQLite run on threads of their own).
//!
//! Everything else (the accept loop, the periodic tasks, the database
//! pool's upkeep) stays on the main runtime. The lanes stop after the
//! database closes: a pooled connection made during a request is
//! registered with its lane's event loop.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::sync::oneshot;
use tokio::task::JoinSet;

/// How long a stopping lane waits for blocking work its requests started.
const LANE_STOP_WAIT: Duration = Duration::from_secs(1);

thread_local! {
    /// A lane's blocking thread's log subscriber, for the thread's life
    /// (its body is tokio's).
    static BLOCKING_LOG: std::cell::RefCell<Option<tracing::dispatcher::DefaultGuard>> =
        const { std::cell::RefCell::new(None) };
}

/// Makes `log` this new thread's subscriber if it has none: when no
/// global one is set and `log` is one.
fn log_here(log: &tracing::Dispatch) -> Option<tracing::dispatcher::DefaultGuard> {
    use tracing::subscriber::NoSubscriber;
    let none_here = tracing::dispatcher::get_default(|here| here.is::<NoSubscriber>());
    (none_here && !log.is::<NoSubscriber>()).then(|| tracing::dispatcher::set_default(log))
}

/// How far ahead each lane always has a timer set ([`keep_a_timer_set`]).
const TIMER_HORIZON: Duration = Duration::from_secs(1);

/// Keeps a timer set at most [`TIMER_HORIZON`] ahead on this thread's
/// event loop, for ever.
///
/// tokio's time driver wakes its event loop — an 8-byte write to an
/// eventfd, a system call, then a turn of the loop that finds nothing but
/// that — whenever a timer is set sooner than the soonest it knew of when
/// it last looked (and, knowing none, for every timer): it may be asleep
/// until then. A request sets two, its deadline and its upstream
/// attempt's, seconds ahead, and the soonest it knew of was often later
/// (a connection's header timeout, 30 s): 0.17–0.27 of those writes per
/// answer (`docs/performance.md`). With a timer of its own always sooner
/// than a second ahead, a timer set further ahead never wakes the loop.
/// This one costs, a second, the turn of the loop it fires in and one
/// such write: set again once it has fired, it is sooner than any left.
async fn keep_a_timer_set() {
    loop {
        tokio::time::sleep(TIMER_HORIZON).await;
    }
}

/// The connection threads, or none (connections run on the caller's
/// runtime).
#[derive(Debug)]
pub struct Lanes {
    lanes: Vec<Lane>,
}

#[derive(Debug)]
struct Lane {
    handle: Handle,
    /// Connections open on it.
    open: Arc<AtomicUsize>,
    /// Dropped, or sent to, to stop it.
    stop: oneshot::Sender<()>,
    thread: std::thread::JoinHandle<()>,
}

/// A connection's place on its lane, given back when the connection ends.
struct Seat(Arc<AtomicUsize>);

impl Drop for Seat {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Lanes {
    /// No threads of their own: connections run on the runtime that
    /// accepts them.
    pub fn none() -> Self {
        Self { lanes: Vec::new() }
    }

    /// `count` threads (`acdm-lane-N`), each running its own event loop.
    ///
    /// They log where the caller logs. A server sets a global subscriber,
    /// which every thread uses. Without one (a test that scopes its own
    /// to its thread), the caller's is made theirs, and their blocking
    /// threads'. Only then: once any thread has a scoped subscriber,
    /// tracing looks up a thread-local one on every event and span of
    /// every thread (several µs per MCP file read, in one measurement).
    pub fn start(count: usize) -> std::io::Result<Self> {
        let log = tracing::dispatcher::get_default(Clone::clone);
        let mut lanes = Vec::with_capacity(count);
        for index in 0..count {
            let blocking_log = log.clone();
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .on_thread_start(move || {
                    if let Some(guard) = log_here(&blocking_log) {
                        BLOCKING_LOG.with(|kept| *kept.borrow_mut() = Some(guard));
                    }
                })
                // The threads blocking work may take, shared out: as many
                // in all as one runtime has by default.
                .max_blocking_threads((512 / count).max(1))
                .thread_name(format!("acdm-lane-{index}-blocking"))
                .build()?;
            let handle = runtime.handle().clone();
            let (stop, stopped) = oneshot::channel::<()>();
            let log = log.clone();
            let thread = std::thread::Builder::new()
                .name(format!("acdm-lane-{index}"))
                .spawn(move || {
                    let _log = log_here(&log);
                    runtime.block_on(async {
                        tokio::select! {
                            _ = stopped => {}
                            () = keep_a_timer_set() => {}
                        }
                    });
                    // Tasks still there (none once the connections
                    // drained) are dropped.
                    runtime.shutdown_timeout(LANE_STOP_WAIT);
                })?;
            lanes.push(Lane {
                handle,
                open: Arc::default(),
                stop,
                thread,
            });
        }
        Ok(Self { lanes })
    }

    /// The number of threads.
    pub fn count(&self) -> usize {
        self.lanes.len()
    }

    /// Runs `connection` in `set`: on the lane with the fewest open
    /// connections, or here when there are no lanes.
    pub(crate) fn spawn(
        &self,
        set: &mut JoinSet<()>,
        connection: impl Future<Output = ()> + Send + 'static,
    ) {
        let Some(lane) = self
            .lanes
            .iter()
            .min_by_key(|l| l.open.load(Ordering::Relaxed))
        else {
            set.spawn(connection);
            return;
        };
        lane.open.fetch_add(1, Ordering::Relaxed);
        let seat = Seat(lane.open.clone());
        set.spawn_on(
            async move {
                let _seat = seat;
                connection.await;
            },
            &lane.handle,
        );
    }

    /// Stops every thread, once what runs on them is no longer needed:
    /// tasks still there are dropped.
    pub async fn stop(self) {
        let threads: Vec<_> = self
            .lanes
            .into_iter()
            .map(|lane| {
                let _ = lane.stop.send(());
                lane.thread
            })
            .collect();
        if threads.is_empty() {
            return;
        }
        let joined = tokio::task::spawn_blocking(move || {
            for thread in threads {
                let _ = thread.join();
            }
        });
        let _ = joined.await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn thread_name() -> String {
        std::thread::current().name().unwrap_or("").to_owned()
    }

    /// Spawns a connection on `lanes` that holds its seat until `release`
    /// is dropped or sent to; returns the name of the thread it runs on.
    async fn hold(lanes: &Lanes, set: &mut JoinSet<()>) -> (String, oneshot::Sender<()>) {
        let (started, ready) = oneshot::channel();
        let (release, released) = oneshot::channel::<()>();
        lanes.spawn(set, async move {
            let _ = started.send(thread_name());
            let _ = released.await;
        });
        (ready.await.unwrap(), release)
    }

    fn open_on(lanes: &Lanes) -> Vec<usize> {
        lanes
            .lanes
            .iter()
            .map(|l| l.open.load(Ordering::Relaxed))
            .collect()
    }

    #[tokio::test]
    async fn each_connection_goes_to_the_least_busy_lane_and_runs_there() {
        let lanes = Lanes::start(2).unwrap();
        let mut set = JoinSet::new();
        let (a, release_a) = hold(&lanes, &mut set).await;
        let (b, _release_b) = hold(&lanes, &mut set).await;
        let (c, release_c) = hold(&lanes, &mut set).await;
        assert_eq!([a, b, c], ["acdm-lane-0", "acdm-lane-1", "acdm-lane-0"]);
        assert_eq!(open_on(&lanes), [2, 1]);
        // Both of lane 0's end: it has fewer now, and takes the next one
        // (taking turns would have given it to lane 1).
        drop((release_a, release_c));
        for _ in 0..2 {
            set.join_next().await.unwrap().unwrap();
        }
        assert_eq!(open_on(&lanes), [0, 1]);
        let (d, _release_d) = hold(&lanes, &mut set).await;
        assert_eq!(d, "acdm-lane-0");
        assert_eq!(open_on(&lanes), [1, 1]);
        lanes.stop().await;
        while set.join_next().await.is_some() {}
        assert!(set.is_empty());
    }

    #[tokio::test]
    async fn without_lanes_connections_run_on_the_callers_runtime() {
        let lanes = Lanes::none();
        let mut set = JoinSet::new();
        let here = Handle::current().id();
        lanes.spawn(&mut set, async move {
            assert_eq!(Handle::current().id(), here);
        });
        set.join_next().await.unwrap().unwrap();
        assert_eq!(lanes.count(), 0);
        lanes.stop().await;
    }

    #[tokio::test(flavor = "current_thread")]
    async fn lanes_log_where_the_thread_that_started_them_logs() {
        let seen = acdm_test_support::logs::LogCapture::default();
        let subscriber = tracing_subscriber::fmt().with_writer(seen.clone()).finish();
        let _scoped = tracing::subscriber::set_default(subscriber);
        let lanes = Lanes::start(1).unwrap();
        let mut set = JoinSet::new();
        lanes.spawn(&mut set, async {
            tracing::info!("on the lane");
            tokio::task::spawn_blocking(|| tracing::info!("on its blocking thread"))
                .await
                .unwrap();
        });
        set.join_next().await.unwrap().unwrap();
        lanes.stop().await;
        let text = seen.text();
        assert!(text.contains("on the lane"), "{text}");
        assert!(text.contains("on its blocking thread"), "{text}");
    }

    #[tokio::test]
    async fn stopping_drops_what_still_runs_on_a_lane() {
        let lanes = Lanes::start(1).unwrap();
        let mut set = JoinSet::new();
        let (started, ready) = oneshot::channel();
        let (_never, forever) = oneshot::channel::<()>();
        lanes.spawn(&mut set, async move {
            let _ = started.send(());
            let _ = forever.await;
        });
        ready.await.unwrap();
        lanes.stop().await;
        let ended = set.join_next().await.unwrap();
        assert!(ended.unwrap_err().is_cancelled());
    }
}
