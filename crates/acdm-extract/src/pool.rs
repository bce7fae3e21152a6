//! The pool: each document read by a fresh child process, at most
//! `processes` at once (callers queue first come, first served), killed
//! after `wall_seconds`, its answer capped; results cached by the caller's
//! key in an LRU bounded by bytes of text (failures too, so a hostile
//! document is not read again on every call). The parent never parses a
//! document itself.

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{Semaphore, watch};

use crate::error::ExtractError;
use crate::format::{Extracted, Format};
use crate::limits::Limits;
use crate::wire::{Answer, Request};

/// What one extraction gives.
type Outcome = Result<Arc<Extracted>, ExtractError>;

/// How much of a child's stderr is kept (to tell how it died).
const STDERR_CAP: u64 = 16 * 1024;

/// The answer's bytes besides the text: JSON quoting and the warnings.
const ANSWER_OVERHEAD: u64 = 64 * 1024;

/// What a cache entry costs besides its text and key.
const ENTRY_OVERHEAD: u64 = 128;

/// Signals a child may die of.
const SIGABRT: i32 = 6;
const SIGKILL: i32 = 9;
const SIGXCPU: i32 = 24;
const SIGXFSZ: i32 = 25;

/// How an [`Extractor`] runs its children.
#[derive(Debug, Clone)]
pub struct ExtractorConfig {
    /// The program a child runs: the service binary (with `args` naming
    /// its hidden `extract` subcommand) or `acdm-extract-child`.
    pub program: PathBuf,
    /// Its arguments, e.g. `["extract"]`.
    pub args: Vec<OsString>,
    /// How many children may run at once (2); at least 1.
    pub processes: usize,
    /// Each document's limits (the child applies them to itself).
    pub limits: Limits,
    /// The most bytes of text the cache holds (64 MiB); 0 caches nothing.
    pub cache_bytes: u64,
}

impl ExtractorConfig {
    /// A configuration running `program` with `args`, with the default
    /// process count, limits and cache size.
    #[must_use]
    pub fn new(program: impl Into<PathBuf>, args: Vec<OsString>) -> Self {
        Self {
            program: program.into(),
            args,
            processes: 2,
            limits: Limits::default(),
            cache_bytes: 64 * 1024 * 1024,
        }
    }
}

/// What an [`Extractor`] has done, for metrics.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExtractorStats {
    /// Calls of [`Extractor::extract`].
    pub requests: u64,
    /// Calls answered from the cache (or by waiting for the same key's
    /// extraction in progress), without a child of their own.
    pub cache_hits: u64,
    /// Children started.
    pub extractions: u64,
    /// Children running now.
    pub children_running: u64,
    /// Failed extractions, by [`ExtractError::reason`].
    pub failures: BTreeMap<&'static str, u64>,
    /// Results in the cache.
    pub cache_entries: u64,
    /// What they cost, in bytes (text, key and overhead).
    pub cache_bytes: u64,
}

/// Reads documents in child processes; cheap to clone (the clones share
/// the pool and the cache).
#[derive(Debug, Clone)]
pub struct Extractor {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    config: ExtractorConfig,
    slots: Semaphore,
    state: Mutex<State>,
    requests: AtomicU64,
    cache_hits: AtomicU64,
    extractions: AtomicU64,
    running: AtomicU64,
    failures: Mutex<BTreeMap<&'static str, u64>>,
}

#[derive(Debug)]
struct State {
    cache: Cache,
    /// Extractions in progress by key, for callers of the same key to wait for.
    inflight: HashMap<String, watch::Receiver<Option<Outcome>>>,
}

/// What a caller of a key does.
enum Role {
    Hit(Outcome),
    Follow(watch::Receiver<Option<Outcome>>),
    Lead(watch::Sender<Option<Outcome>>),
}

impl Extractor {
    /// A pool running children as `config` says.
    #[must_use]
    pub fn new(config: ExtractorConfig) -> Self {
        let processes = config.processes.max(1);
        let cache = Cache::new(config.cache_bytes);
        Self {
            inner: Arc::new(Inner {
                config,
                slots: Semaphore::new(processes),
                state: Mutex::new(State {
                    cache,
                    inflight: HashMap::new(),
                }),
                requests: AtomicU64::new(0),
                cache_hits: AtomicU64::new(0),
                extractions: AtomicU64::new(0),
                running: AtomicU64::new(0),
                failures: Mutex::new(BTreeMap::new()),
            }),
        }
    }

    /// Reads `bytes` as a document of `format`, in a child process, or
    /// answers from the cache when `cache_key` (the caller's: a path and
    /// its ETag, say) was read before. Callers of a key being read wait
    /// for that reading rather than start another.
    ///
    /// # Errors
    ///
    /// Why the document cannot be read ([`ExtractError::reason`]): what the
    /// child said, or how it died — `timed_out` (wall-clock or CPU time),
    /// `out_of_memory`, `too_large` (its answer), `crashed` (a crash or an
    /// answer that cannot be parsed), `unavailable` (it cannot be started).
    pub async fn extract(&self, format: Format, cache_key: Option<&str>, bytes: Bytes) -> Outcome {
        let inner = &self.inner;
        inner.requests.fetch_add(1, Ordering::Relaxed);
        let Some(key) = cache_key else {
            return inner.run(format, bytes).await;
        };
        let key = format!("{}\u{0}{key}", format.as_str());
        loop {
            let role = {
                let mut state = inner.lock_state();
                if let Some(hit) = state.cache.get(&key) {
                    Role::Hit(hit)
                } else if let Some(receiver) = state.inflight.get(&key) {
                    Role::Follow(receiver.clone())
                } else {
                    let (sender, receiver) = watch::channel(None);
                    state.inflight.insert(key.clone(), receiver);
                    Role::Lead(sender)
                }
            };
            match role {
                Role::Hit(outcome) => {
                    inner.cache_hits.fetch_add(1, Ordering::Relaxed);
                    return outcome;
                }
                Role::Follow(mut receiver) => {
                    let outcome = receiver
                        .wait_for(Option::is_some)
                        .await
                        .ok()
                        .and_then(|outcome| outcome.clone());
                    if let Some(outcome) = outcome {
                        inner.cache_hits.fetch_add(1, Ordering::Relaxed);
                        return outcome;
                    }
                    // The leader was cancelled: take its place.
                }
                Role::Lead(sender) => {
                    let mut lead = Lead {
                        inner,
                        key: &key,
                        done: false,
                    };
                    let outcome = inner.run(format, bytes.clone()).await;
                    {
                        let mut state = inner.lock_state();
                        if cacheable(&outcome) {
                            state.cache.insert(&key, outcome.clone());
                        }
                        state.inflight.remove(&key);
                        lead.done = true;
                    }
                    let _ = sender.send(Some(outcome.clone()));
                    return outcome;
                }
            }
        }
    }

    /// The cached outcome of reading `cache_key` as `format`, if there is
    /// one: lets a caller skip fetching a document's bytes whose text (or
    /// failure) it already has. Counted as a cache hit.
    #[must_use]
    pub fn cached(
        &self,
        format: Format,
        cache_key: &str,
    ) -> Option<Result<Arc<Extracted>, ExtractError>> {
        let key = format!("{}\u{0}{cache_key}", format.as_str());
        let hit = self.inner.lock_state().cache.get(&key);
        if hit.is_some() {
            self.inner.requests.fetch_add(1, Ordering::Relaxed);
            self.inner.cache_hits.fetch_add(1, Ordering::Relaxed);
        }
        hit
    }

    /// What the pool has done so far.
    #[must_use]
    pub fn stats(&self) -> ExtractorStats {
        let inner = &self.inner;
        let (cache_entries, cache_bytes) = {
            let state = inner.lock_state();
            (
                u64::try_from(state.cache.entries.len()).unwrap_or(u64::MAX),
                state.cache.used,
            )
        };
        ExtractorStats {
            requests: inner.requests.load(Ordering::Relaxed),
            cache_hits: inner.cache_hits.load(Ordering::Relaxed),
            extractions: inner.extractions.load(Ordering::Relaxed),
            children_running: inner.running.load(Ordering::Relaxed),
            failures: inner
                .failures
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
            cache_entries,
            cache_bytes,
        }
    }
}

/// A failure worth remembering: not one of the extractor's own.
fn cacheable(outcome: &Outcome) -> bool {
    !matches!(outcome, Err(ExtractError::Unavailable(_)))
}

/// The leader of a key's extraction; if it is dropped unfinished
/// (cancelled), its key is no longer in progress.
struct Lead<'a> {
    inner: &'a Inner,
    key: &'a str,
    done: bool,
}

impl Drop for Lead<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.inner.lock_state().inflight.remove(self.key);
        }
    }
}

/// Counts a running child while it lives.
struct Running<'a>(&'a AtomicU64);

impl<'a> Running<'a> {
    fn new(counter: &'a AtomicU64) -> Self {
        counter.fetch_add(1, Ordering::Relaxed);
        Self(counter)
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Inner {
    fn lock_state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    async fn run(&self, format: Format, bytes: Bytes) -> Outcome {
        let outcome = self.run_child(format, bytes).await;
        if let Err(error) = &outcome {
            *self
                .failures
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .entry(error.reason())
                .or_insert(0) += 1;
        }
        outcome.map(Arc::new)
    }

    async fn run_child(&self, format: Format, bytes: Bytes) -> Result<Extracted, ExtractError> {
        let limits = &self.config.limits;
        if u64::try_from(bytes.len()).unwrap_or(u64::MAX) > limits.max_input_bytes {
            return Err(ExtractError::TooLarge(format!(
                "the document is {} bytes, more than the {} bytes a document may have to be read",
                bytes.len(),
                limits.max_input_bytes
            )));
        }
        let mut header = serde_json::to_vec(&Request {
            format,
            limits: limits.clone(),
        })
        .map_err(|_| {
            ExtractError::Unavailable("the extractor's request cannot be written".to_owned())
        })?;
        header.push(b'\n');
        let _slot = self.slots.acquire().await.map_err(|_| {
            ExtractError::Unavailable("the document extractor is shut down".to_owned())
        })?;
        self.extractions.fetch_add(1, Ordering::Relaxed);
        let _running = Running::new(&self.running);
        // Nothing of the service's environment (its tokens, the upstreams'
        // passwords) reaches a process that parses untrusted bytes.
        let mut child = tokio::process::Command::new(&self.config.program)
            .args(&self.config.args)
            .env_clear()
            .env("PATH", crate::CHILD_PATH)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|error| {
                ExtractError::Unavailable(format!(
                    "the document extractor cannot be started ({}); the service is misconfigured",
                    error.kind()
                ))
            })?;
        let (Some(mut stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(ExtractError::Unavailable(
                "the document extractor's pipes cannot be opened".to_owned(),
            ));
        };
        let cap = limits
            .max_output_bytes
            .saturating_mul(2)
            .saturating_add(ANSWER_OVERHEAD);
        let write = async move {
            if stdin.write_all(&header).await.is_ok() && stdin.write_all(&bytes).await.is_ok() {
                let _ = stdin.shutdown().await;
            }
        };
        let read_answer = async move {
            let mut answer = Vec::new();
            let mut stdout = stdout.take(cap.saturating_add(1));
            let _ = stdout.read_to_end(&mut answer).await;
            // Dropping stdout here makes a child that writes more fail.
            answer
        };
        let read_errors = async move {
            let mut errors = Vec::new();
            let mut stderr = stderr.take(STDERR_CAP);
            let _ = stderr.read_to_end(&mut errors).await;
            // Past the cap, the rest is drained so the child never blocks.
            let mut rest = stderr.into_inner();
            let _ = tokio::io::copy(&mut rest, &mut tokio::io::sink()).await;
            errors
        };
        let wall = Duration::from_secs(limits.wall_seconds);
        let finished = tokio::time::timeout(wall, async {
            let ((), answer, errors) = tokio::join!(write, read_answer, read_errors);
            let status = child.wait().await;
            (answer, errors, status)
        })
        .await;
        let Ok((answer, errors, status)) = finished else {
            let _ = child.kill().await;
            return Err(ExtractError::TimedOut(format!(
                "reading the document took longer than {} s; it was stopped and cannot be read in \
                 time",
                limits.wall_seconds
            )));
        };
        if u64::try_from(answer.len()).unwrap_or(u64::MAX) > cap {
            return Err(crate::markdown::too_large(
                usize::try_from(limits.max_output_bytes).unwrap_or(usize::MAX),
            ));
        }
        match serde_json::from_slice::<Answer>(&answer) {
            Ok(answer) => answer.into_result(),
            Err(_) => Err(died(status.ok(), &errors, limits)),
        }
    }
}

/// Why a child gave no answer, from how it ended and what it said on stderr.
fn died(status: Option<ExitStatus>, stderr: &[u8], limits: &Limits) -> ExtractError {
    use std::os::unix::process::ExitStatusExt;
    let said = String::from_utf8_lossy(stderr);
    let out_of_memory = || {
        ExtractError::OutOfMemory(format!(
            "reading the document needed more than {} MiB of memory; it was stopped and cannot be \
             read",
            limits.memory_bytes / (1024 * 1024)
        ))
    };
    if said.contains("memory allocation of") || said.contains("bad_alloc") {
        return out_of_memory();
    }
    if said.contains("has overflowed its stack") {
        return crate::xml::too_deep(limits.max_depth);
    }
    match status.and_then(|s| s.signal()) {
        Some(SIGXCPU) => ExtractError::TimedOut(format!(
            "reading the document used more than {} s of CPU time; it was stopped and cannot be \
             read in time",
            limits.cpu_seconds
        )),
        Some(SIGKILL) => out_of_memory(),
        Some(SIGXFSZ) => ExtractError::TooLarge(
            "reading the document wrote more than it may; it was stopped".to_owned(),
        ),
        Some(SIGABRT) => ExtractError::Crashed(
            "the extractor aborted on this document; it cannot be read".to_owned(),
        ),
        Some(signal) => ExtractError::Crashed(format!(
            "the extractor crashed on this document (signal {signal}); it cannot be read"
        )),
        None => ExtractError::Crashed(
            "the extractor gave no valid answer for this document; it cannot be read".to_owned(),
        ),
    }
}

/// Results by key, least recently used evicted first, bounded by bytes.
#[derive(Debug)]
struct Cache {
    max: u64,
    used: u64,
    tick: u64,
    entries: HashMap<String, Entry>,
    /// Keys by their last use.
    order: BTreeMap<u64, String>,
}

#[derive(Debug)]
struct Entry {
    outcome: Outcome,
    cost: u64,
    tick: u64,
}

impl Cache {
    fn new(max: u64) -> Self {
        Self {
            max,
            used: 0,
            tick: 0,
            entries: HashMap::new(),
            order: BTreeMap::new(),
        }
    }

    fn get(&mut self, key: &str) -> Option<Outcome> {
        self.tick += 1;
        let tick = self.tick;
        let entry = self.entries.get_mut(key)?;
        self.order.remove(&entry.tick);
        entry.tick = tick;
        self.order.insert(tick, key.to_owned());
        Some(entry.outcome.clone())
    }

    fn insert(&mut self, key: &str, outcome: Outcome) {
        let size = match &outcome {
            Ok(extracted) => extracted.text.len(),
            Err(error) => error.message().len(),
        };
        let cost = u64::try_from(size.saturating_add(key.len()))
            .unwrap_or(u64::MAX)
            .saturating_add(ENTRY_OVERHEAD);
        self.remove(key);
        if cost > self.max {
            return;
        }
        while self.used.saturating_add(cost) > self.max {
            let Some((_, oldest)) = self.order.pop_first() else {
                break;
            };
            if let Some(entry) = self.entries.remove(&oldest) {
                self.used = self.used.saturating_sub(entry.cost);
            }
        }
        self.tick += 1;
        self.order.insert(self.tick, key.to_owned());
        self.entries.insert(
            key.to_owned(),
            Entry {
                outcome,
                cost,
                tick: self.tick,
            },
        );
        self.used = self.used.saturating_add(cost);
    }

    fn remove(&mut self, key: &str) {
        if let Some(entry) = self.entries.remove(key) {
            self.order.remove(&entry.tick);
            self.used = self.used.saturating_sub(entry.cost);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::Cache;
    use crate::format::{Extracted, Format, Via};

    fn text(n: usize) -> super::Outcome {
        Ok(Arc::new(Extracted {
            format: Format::Html,
            text: "x".repeat(n),
            via: Via::Native,
            warnings: Vec::new(),
        }))
    }

    #[test]
    fn the_cache_evicts_the_least_recently_used_within_its_bytes() {
        let mut cache = Cache::new(3 * (1000 + 1 + 128));
        cache.insert("a", text(1000));
        cache.insert("b", text(1000));
        cache.insert("c", text(1000));
        assert!(cache.get("a").is_some());
        cache.insert("d", text(1000));
        assert!(cache.get("b").is_none(), "b was the least recently used");
        assert!(cache.get("a").is_some() && cache.get("c").is_some() && cache.get("d").is_some());
        assert!(cache.used <= cache.max);
        cache.insert("huge", text(10_000));
        assert!(
            cache.get("huge").is_none(),
            "an entry larger than the cache is not kept"
        );
    }
}
