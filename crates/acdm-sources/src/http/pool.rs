//! Each upstream host's request slots and connections.
//!
//! A host allows `cap` requests in flight at once, and keeps at most `cap`
//! connections open (in use, idle or being made): one request per
//! HTTP/1.1 connection, so a slot is also the right to a connection.
//!
//! **The slot queue.** A call that finds every slot taken joins one FIFO
//! queue per host, whatever runtime it runs on. A slot given back goes
//! straight to the longest waiter — the giver hands it over through that
//! waiter's one-shot channel, which wakes it; no timer and no sleep is in
//! the hand-over (the caller bounds its whole wait by its deadline). A
//! waiter that gives up first passes on a slot handed to it as it left.
//!
//! **Connections and runtimes.** A connection's I/O runs in a task on the
//! runtime that made it (the service runs one current-thread runtime per
//! core, its lanes). A slot takes, in this order: an idle connection made
//! on its own runtime (no wake crosses a thread); a new connection, while
//! the host has fewer than `cap` open; else an idle connection of another
//! runtime, which then carries requests from this one. While calls wait,
//! every connection is in use, so the connection a freed slot leaves idle
//! is the one its waiter gets: a slot that moves to another runtime never
//! waits for a connect, never closes a connection to make room for one, and
//! the host never holds more than `cap` sockets. (The client this replaced
//! handed idle connections only to their own runtime: a slot moving to
//! another one connected anew while the idle ones sat elsewhere, up to
//! twice the cap of sockets, closing the oldest idle ones to keep its
//! list at the cap.)

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::client::conn::http1::SendRequest;
use tokio::sync::oneshot;
use tokio::task::AbortHandle;
use tokio::time::Instant;

/// One connection: the handle that sends requests on it, and the task
/// that runs its I/O (aborted when the connection is dropped, so a
/// connection given up on closes at once).
pub(super) struct Conn {
    pub(super) sender: SendRequest<Full<Bytes>>,
    task: AbortHandle,
    /// Whether it served a request before the one it carries now.
    pub(super) reused: bool,
    idle_since: Instant,
    /// The runtime its task runs on.
    runtime: Option<tokio::runtime::Id>,
}

impl Conn {
    /// A connection just made, whose I/O runs in `task`.
    pub(super) fn new(sender: SendRequest<Full<Bytes>>, task: AbortHandle) -> Self {
        Self {
            sender,
            task,
            reused: false,
            idle_since: Instant::now(),
            runtime: current_runtime(),
        }
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conn")
            .field("reused", &self.reused)
            .finish_non_exhaustive()
    }
}

/// The runtime the caller runs on, if any.
fn current_runtime() -> Option<tokio::runtime::Id> {
    tokio::runtime::Handle::try_current()
        .ok()
        .map(|handle| handle.id())
}

/// One upstream host's slots and connections.
pub(super) struct Host {
    cap: usize,
    idle_timeout: Duration,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Slots held.
    busy: usize,
    /// Connections open: idle, in use, or being made.
    open: usize,
    /// Idle connections, the most recently used last.
    idle: Vec<Conn>,
    /// Calls waiting for a slot, the longest waiting first.
    waiters: VecDeque<oneshot::Sender<()>>,
}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host")
            .field("cap", &self.cap)
            .finish_non_exhaustive()
    }
}

/// What a slot's holder does for a connection.
pub(super) enum Pick {
    /// Use this idle one (check that it is still ready first).
    Idle(Conn),
    /// Make one: the host counted it as open.
    Connect,
}

impl Host {
    /// A host of `cap` slots (at least one) whose idle connections are
    /// kept for `idle_timeout`.
    pub(super) fn new(cap: usize, idle_timeout: Duration) -> Self {
        Self {
            cap: cap.max(1),
            idle_timeout,
            state: Mutex::default(),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A slot, now or once one is handed over: the longest waiting call
    /// gets the next one given back. Waits without bound: the caller
    /// bounds the wait by its deadline, and a wait dropped passes on a slot
    /// handed to it meanwhile.
    pub(super) async fn slot(self: &Arc<Self>) -> Slot {
        let receiver = {
            let mut state = self.state();
            if state.busy < self.cap && state.waiters.is_empty() {
                state.busy += 1;
                return Slot::new(self.clone());
            }
            let (sender, receiver) = oneshot::channel();
            state.waiters.push_back(sender);
            receiver
        };
        let mut waiting = Waiting {
            host: self,
            receiver,
        };
        // A sender is only dropped unsent by a host that saw its receiver
        // closed, which this one is not: the wait ends with a slot.
        let _ = (&mut waiting.receiver).await;
        Slot::new(self.clone())
    }

    /// Gives a slot back, with its connection when that can carry another
    /// request: to the longest waiter, or to the free ones.
    fn release(&self, conn: Option<Conn>, counted: bool) {
        let mut state = self.state();
        match conn {
            Some(mut conn) => {
                conn.idle_since = Instant::now();
                state.idle.push(conn);
            }
            None if counted => state.open = state.open.saturating_sub(1),
            None => {}
        }
        while let Some(waiter) = state.waiters.pop_front() {
            // A waiter that left is skipped: its receiver is closed.
            if waiter.send(()).is_ok() {
                return;
            }
        }
        state.busy = state.busy.saturating_sub(1);
    }

    /// What a slot's holder uses: an idle connection of its own runtime, a
    /// new one while fewer than the cap are open, else another runtime's
    /// idle connection. Expired idle connections and those their server
    /// closed are dropped on the way.
    fn pick(&self) -> Pick {
        let now = Instant::now();
        let here = current_runtime();
        let mut state = self.state();
        let before = state.idle.len();
        let timeout = self.idle_timeout;
        state.idle.retain(|conn| {
            now.saturating_duration_since(conn.idle_since) < timeout && !conn.sender.is_closed()
        });
        let dropped = before - state.idle.len();
        state.open = state.open.saturating_sub(dropped);
        if let Some(at) = state.idle.iter().rposition(|conn| conn.runtime == here) {
            return Pick::Idle(state.idle.remove(at));
        }
        if state.open < self.cap {
            state.open += 1;
            return Pick::Connect;
        }
        match state.idle.pop() {
            Some(conn) => Pick::Idle(conn),
            // Cannot happen while every slot holder owns at most one
            // open connection; connecting is the safe answer if it does.
            None => {
                state.open += 1;
                Pick::Connect
            }
        }
    }

    /// Counts a connection that was counted open as closed (a connect
    /// that failed).
    fn closed(&self) {
        let mut state = self.state();
        state.open = state.open.saturating_sub(1);
    }

    /// Slots held, connections open, idle and calls waiting (tests).
    #[cfg(test)]
    pub(super) fn counts(&self) -> (usize, usize, usize, usize) {
        let state = self.state();
        let waiting = state.waiters.iter().filter(|w| !w.is_closed()).count();
        (state.busy, state.open, state.idle.len(), waiting)
    }
}

/// A call waiting in the queue; dropped before its slot came, it passes
/// on a slot handed to it as it left.
struct Waiting<'a> {
    host: &'a Arc<Host>,
    receiver: oneshot::Receiver<()>,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.receiver.close();
        // Handed over before the close: the slot is this call's to give on.
        if self.receiver.try_recv().is_ok() {
            self.host.release(None, false);
        }
    }
}

/// A slot of a host, and the connection its request uses. Dropped, it
/// goes back to the host — with its connection when [`Slot::keep`] said
/// that connection can carry another request, else closing it.
pub(super) struct Slot {
    host: Arc<Host>,
    conn: Option<Conn>,
    /// Whether the host counts a connection of this slot as open (held,
    /// or being made).
    counted: bool,
    keep: bool,
}

impl std::fmt::Debug for Slot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slot")
            .field("conn", &self.conn)
            .finish_non_exhaustive()
    }
}

impl Slot {
    fn new(host: Arc<Host>) -> Self {
        Self {
            host,
            conn: None,
            counted: false,
            keep: false,
        }
    }

    /// What to use for a connection (see [`Host::pick`]); a pick of
    /// [`Pick::Connect`] is counted open until [`Slot::connected`] or
    /// [`Slot::discard`].
    pub(super) fn pick(&mut self) -> Pick {
        self.discard();
        self.counted = true;
        self.host.pick()
    }

    /// The connection now carrying this slot's request.
    pub(super) fn connected(&mut self, conn: Conn) -> &mut Conn {
        self.conn.insert(conn)
    }

    /// Closes this slot's connection (or counts a connect that failed as
    /// closed).
    pub(super) fn discard(&mut self) {
        self.conn = None;
        if std::mem::take(&mut self.counted) {
            self.host.closed();
        }
    }

    /// Closes this slot's connection and makes a new one in its place (the
    /// host's count of open connections unchanged).
    pub(super) fn renew(&mut self) -> Pick {
        self.conn = None;
        if !self.counted {
            return self.pick();
        }
        Pick::Connect
    }

    /// Keeps the connection for the next request when the slot is given
    /// back: its answer was read whole.
    pub(super) fn keep(&mut self) {
        self.keep = true;
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let conn = self.conn.take().filter(|_| self.keep).map(|mut conn| {
            conn.reused = true;
            conn
        });
        self.host.release(conn, self.counted);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_freed_slot_goes_to_the_longest_waiter_and_one_that_left_passes_it_on() {
        let host = Arc::new(Host::new(1, Duration::from_secs(60)));
        let first = host.slot().await;
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut waiters = Vec::new();
        for n in 0..4 {
            let (host, order) = (host.clone(), order.clone());
            waiters.push(tokio::spawn(async move {
                let slot = host.slot().await;
                order.lock().unwrap().push(n);
                slot
            }));
            // Each is queued before the next starts.
            tokio::task::yield_now().await;
        }
        assert_eq!(host.counts(), (1, 0, 0, 4));
        // The second waiter leaves; the others are served in order, each
        // when the one before gives its slot back.
        waiters.remove(1).abort();
        tokio::task::yield_now().await;
        drop(first);
        for expected in [vec![0], vec![0, 2], vec![0, 2, 3]] {
            let slot = waiters.remove(0).await.unwrap();
            assert_eq!(*order.lock().unwrap(), expected);
            assert_eq!(host.counts().0, 1, "one slot held at a time");
            drop(slot);
        }
        assert_eq!(host.counts(), (0, 0, 0, 0));
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiter_dropped_as_its_slot_came_passes_it_on() {
        let host = Arc::new(Host::new(1, Duration::from_secs(60)));
        let first = host.slot().await;
        let mut leaving = Box::pin(host.slot());
        // Queued, then handed the slot, then dropped before it ran.
        assert!(
            futures_util::FutureExt::now_or_never(leaving.as_mut()).is_none(),
            "queued"
        );
        let next = tokio::spawn({
            let host = host.clone();
            async move { host.slot().await }
        });
        tokio::task::yield_now().await;
        drop(first);
        drop(leaving);
        let slot = next.await.unwrap();
        assert_eq!(host.counts().0, 1);
        drop(slot);
        assert_eq!(host.counts(), (0, 0, 0, 0));
    }

    #[tokio::test]
    async fn a_connect_that_fails_is_not_counted_open() {
        let host = Arc::new(Host::new(2, Duration::from_secs(60)));
        let mut slot = host.slot().await;
        assert!(matches!(slot.pick(), Pick::Connect));
        assert_eq!(host.counts().1, 1);
        slot.discard();
        assert_eq!(host.counts().1, 0);
        drop(slot);
        assert_eq!(host.counts(), (0, 0, 0, 0));
    }
}
