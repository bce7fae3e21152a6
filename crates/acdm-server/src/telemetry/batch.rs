//! Log lines handed to a writer thread, which writes them in batches.
//!
//! Writing each line to standard error was a system call on the request's
//! own thread per request (and, to a file, the file system's work with it):
//! about a twentieth of a read's CPU (docs/performance.md). Here a line is
//! appended to a shared buffer under a lock, and one thread writes what
//! has gathered, then waits [`BATCH_WINDOW`] for more before writing again.
//! Lines keep their order and are never split or dropped: when
//! [`MAX_PENDING`] bytes wait, a logging thread waits for the writer.
//!
//! A line reaches standard error within about [`BATCH_WINDOW`] of being
//! logged (so a plain `eprintln!` may come out before a line logged just
//! before it). The [`Flush`] guard, dropped when `main` returns, writes
//! what is left and stops the thread — waiting at most [`FLUSH_WAIT`] for
//! a standard error that does not take them — and lines logged after that
//! are written directly, still after every earlier one. Should the writer
//! thread die, lines are written directly too, so no logger waits for
//! ever. A process killed outright (`SIGKILL`) loses at most the lines of
//! its last window.

use std::cell::Cell;
use std::io::Write;
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tracing_subscriber::fmt::MakeWriter;

/// How long the writer lets lines gather after a write.
pub(super) const BATCH_WINDOW: Duration = Duration::from_millis(2);

/// Bytes waiting for the writer beyond which a logging thread waits.
pub(super) const MAX_PENDING: usize = 1 << 20;

/// A buffer kept past a write is at most this large.
const MAX_KEPT: usize = 256 * 1024;

/// How long the guard's drop waits for the writer to write what is left.
pub(super) const FLUSH_WAIT: Duration = Duration::from_secs(2);

thread_local! {
    /// True on the writer thread: a line it logs itself is written
    /// directly (it would otherwise wait for itself).
    static ON_WRITER: Cell<bool> = const { Cell::new(false) };
}

/// What `JsonLines` writes to: the shared buffer.
#[derive(Clone)]
pub(super) struct Batched {
    shared: Arc<Shared>,
}

/// Stops the writer thread after writing every line logged before it is
/// dropped.
#[must_use = "dropping the guard stops batching; keep it until the process ends"]
pub struct Flush {
    shared: Arc<Shared>,
    /// Disconnected when the writer thread ends.
    writer_gone: Receiver<()>,
}

struct Shared {
    state: Mutex<State>,
    /// The writer waits here, asleep, for a line.
    wake: Condvar,
    /// Logging threads wait here for room.
    room: Condvar,
    /// Where lines go: the writer's, and the loggers' once it has stopped.
    out: Mutex<Box<dyn Write + Send>>,
}

#[derive(Default)]
struct State {
    pending: Vec<u8>,
    writer_asleep: bool,
    /// The guard was dropped: the writer writes what is pending and ends.
    closed: bool,
    /// The writer has ended (or died): lines are written directly.
    writer_done: bool,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A thread that panicked while holding the lock left whole lines
    // behind: every change under it is one append or one swap.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Batched {
    /// Batches lines to `out` on a thread of its own.
    pub(super) fn spawn(out: impl Write + Send + 'static) -> std::io::Result<(Self, Flush)> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
            room: Condvar::new(),
            out: Mutex::new(Box::new(out)),
        });
        let writer = shared.clone();
        let (done, writer_gone) = std::sync::mpsc::channel::<()>();
        std::thread::Builder::new()
            .name("log-writer".to_owned())
            .spawn(move || {
                let _done = done;
                ON_WRITER.with(|on| on.set(true));
                let _ended = Ended(&writer);
                writer.run();
            })?;
        Ok((
            Self {
                shared: shared.clone(),
            },
            Flush {
                shared,
                writer_gone,
            },
        ))
    }
}

/// Marks the writer ended when its thread ends, by returning or by a
/// panic (a writer that panicked), and wakes every waiting logger.
struct Ended<'a>(&'a Shared);

impl Drop for Ended<'_> {
    fn drop(&mut self) {
        {
            let mut state = lock(&self.0.state);
            state.closed = true;
            state.writer_done = true;
        }
        self.0.room.notify_all();
    }
}

impl Shared {
    fn push(&self, line: &[u8]) {
        if ON_WRITER.with(Cell::get) {
            let _ = lock(&self.out).write_all(line);
            return;
        }
        let mut state = lock(&self.state);
        // Once closed, the writer is writing what is left: no more waiting
        // for room (the buffer is bounded by what is logged meanwhile).
        while state.pending.len() >= MAX_PENDING && !state.closed {
            state = self
                .room
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        if state.writer_done {
            // After every earlier line: the writer wrote them all before
            // it marked itself done.
            drop(state);
            let _ = lock(&self.out).write_all(line);
            return;
        }
        state.pending.extend_from_slice(line);
        if state.writer_asleep {
            state.writer_asleep = false;
            self.wake.notify_one();
        }
    }

    fn run(&self) {
        let mut batch = Vec::new();
        loop {
            let mut state = lock(&self.state);
            while state.pending.is_empty() {
                if state.closed {
                    // Under the lock that a logger checks: every line it
                    // appended before this was written above.
                    state.writer_done = true;
                    return;
                }
                state.writer_asleep = true;
                state = self
                    .wake
                    .wait(state)
                    .unwrap_or_else(PoisonError::into_inner);
            }
            std::mem::swap(&mut state.pending, &mut batch);
            let closing = state.closed;
            drop(state);
            self.room.notify_all();
            let _ = lock(&self.out).write_all(&batch);
            batch.clear();
            if batch.capacity() > MAX_KEPT {
                batch = Vec::new();
            }
            if !closing {
                std::thread::sleep(BATCH_WINDOW);
            }
        }
    }
}

impl Drop for Flush {
    fn drop(&mut self) {
        {
            let mut state = lock(&self.shared.state);
            state.closed = true;
            state.writer_asleep = false;
        }
        self.shared.wake.notify_one();
        self.shared.room.notify_all();
        // The writer ends once it has written what is pending; a standard
        // error that takes nothing does not hold the process for ever.
        let _ = self.writer_gone.recv_timeout(FLUSH_WAIT);
        let _ = lock(&self.shared.out).flush();
    }
}

/// One line's writer: `JsonLines` writes each line with one `write_all`.
pub(super) struct Line<'a>(&'a Shared);

impl Write for Line<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.push(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Batched {
    type Writer = Line<'a>;

    fn make_writer(&'a self) -> Line<'a> {
        Line(&self.shared)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Barrier;

    use super::*;

    /// A `Write` into shared memory, counting the writes.
    #[derive(Clone, Default)]
    struct Sink {
        bytes: Arc<Mutex<Vec<u8>>>,
        writes: Arc<Mutex<usize>>,
    }

    impl Write for Sink {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            lock(&self.bytes).extend_from_slice(buf);
            *lock(&self.writes) += 1;
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn every_line_of_every_thread_is_written_whole_in_its_threads_order_by_the_flush() {
        let sink = Sink::default();
        let (batched, flush) = Batched::spawn(sink.clone()).unwrap();
        let threads = 4;
        let lines = 2_000;
        let start = Arc::new(Barrier::new(threads));
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let batched = batched.clone();
                let start = start.clone();
                std::thread::spawn(move || {
                    start.wait();
                    for i in 0..lines {
                        let line = format!(
                            "{{\"thread\":{t},\"line\":{i},\"pad\":\"{}\"}}\n",
                            "x".repeat(i % 97)
                        );
                        batched.make_writer().write_all(line.as_bytes()).unwrap();
                    }
                })
            })
            .collect();
        for handle in handles {
            handle.join().unwrap();
        }
        drop(flush);
        let text = String::from_utf8(lock(&sink.bytes).clone()).unwrap();
        let mut next = vec![0; threads];
        for line in text.lines() {
            let value: serde_json::Value = serde_json::from_str(line).unwrap();
            let t = usize::try_from(value["thread"].as_u64().unwrap()).unwrap();
            assert_eq!(value["line"].as_u64().unwrap(), next[t] as u64, "{line}");
            next[t] += 1;
        }
        assert_eq!(next, vec![lines; threads]);
        assert!(
            *lock(&sink.writes) < threads * lines,
            "lines were written in batches, not one write each"
        );
    }

    #[test]
    fn a_line_logged_after_the_flush_is_written_at_once() {
        let sink = Sink::default();
        let (batched, flush) = Batched::spawn(sink.clone()).unwrap();
        batched.make_writer().write_all(b"before\n").unwrap();
        drop(flush);
        assert_eq!(lock(&sink.bytes).as_slice(), b"before\n");
        batched.make_writer().write_all(b"after\n").unwrap();
        assert_eq!(lock(&sink.bytes).as_slice(), b"before\nafter\n");
    }

    #[test]
    fn lines_logged_while_the_guard_drops_keep_their_order_and_none_is_lost() {
        let sink = Sink::default();
        let (batched, flush) = Batched::spawn(sink.clone()).unwrap();
        let lines = 20_000;
        let started = Arc::new(Barrier::new(2));
        let logger = {
            let started = started.clone();
            std::thread::spawn(move || {
                for i in 0..lines {
                    if i == 100 {
                        started.wait();
                    }
                    batched
                        .make_writer()
                        .write_all(format!("{i}\n").as_bytes())
                        .unwrap();
                }
            })
        };
        started.wait();
        drop(flush);
        logger.join().unwrap();
        let text = String::from_utf8(lock(&sink.bytes).clone()).unwrap();
        let numbers: Vec<usize> = text.lines().map(|l| l.parse().unwrap()).collect();
        assert_eq!(numbers, (0..lines).collect::<Vec<_>>());
    }

    #[test]
    fn a_writer_that_dies_leaves_no_logger_waiting() {
        /// Panics on its first write.
        struct Broken;
        impl Write for Broken {
            fn write(&mut self, _buf: &[u8]) -> std::io::Result<usize> {
                panic!("the log's output broke");
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let (batched, flush) = Batched::spawn(Broken).unwrap();
        let line = vec![b'x'; 64 * 1024];
        // More than the buffer holds: without the writer, a logger would
        // wait for room for ever. Each later line panics in `Broken` (the
        // direct write), which the logger catches here.
        for _ in 0..2 * MAX_PENDING / line.len() {
            let batched = batched.clone();
            let line = line.clone();
            let _ = std::thread::spawn(move || batched.make_writer().write_all(&line)).join();
        }
        assert!(lock(&batched.shared.state).writer_done);
        drop(flush);
    }

    #[test]
    fn a_full_buffer_makes_the_logger_wait_rather_than_lose_a_line() {
        /// A sink that blocks until released, so lines pile up.
        struct Gate(Arc<(Mutex<bool>, Condvar)>, Sink);
        impl Write for Gate {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                let (open, turn) = &*self.0;
                let mut open = lock(open);
                while !*open {
                    open = turn.wait(open).unwrap();
                }
                self.1.write(buf)
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let gate = Arc::new((Mutex::new(false), Condvar::new()));
        let sink = Sink::default();
        let (batched, flush) = Batched::spawn(Gate(gate.clone(), sink.clone())).unwrap();
        let line = vec![b'x'; 64 * 1024 - 1]
            .into_iter()
            .chain([b'\n'])
            .collect::<Vec<_>>();
        let count = 2 * MAX_PENDING / line.len() + 4;
        let logger = {
            let batched = batched.clone();
            let line = line.clone();
            std::thread::spawn(move || {
                for _ in 0..count {
                    batched.make_writer().write_all(&line).unwrap();
                }
            })
        };
        // The logger cannot finish while the sink is shut: the buffer is
        // bounded, so it waits (it never drops a line to go on).
        while lock(&batched.shared.state).pending.len() < MAX_PENDING {
            std::thread::yield_now();
        }
        assert!(!logger.is_finished());
        {
            let (open, turn) = &*gate;
            *lock(open) = true;
            turn.notify_all();
        }
        logger.join().unwrap();
        drop(flush);
        assert_eq!(lock(&sink.bytes).len(), count * line.len());
    }
}
