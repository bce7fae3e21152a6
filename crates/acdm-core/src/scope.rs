//! The scope resolver: `agent_name → project`, the anti-BOLA core (spec §3.3).
//!
//! The LLM never chooses the project. The project is looked up from the
//! agent's name in the authoritative mount table (behind the
//! [`ProjectDirectory`] port) together with what every call of that agent
//! needs of it — its mounts and its members' roles — as one [`Scope`], and
//! cached briefly in process, so a read costs no database round trip:
//!
//! - only hits are cached (5 minutes by default), so a newly provisioned
//!   agent is seen on its very next call;
//! - [`ScopeResolver::invalidate`] and [`ScopeResolver::reset`] drop entries
//!   at once, and a lookup that was already in flight when they ran cannot
//!   put its (possibly stale) answer back into the cache;
//! - the store moves one epoch with every change of agent mounts, mounts and
//!   members, and every server resets its resolver when it moves (announced
//!   by PostgreSQL, polled as the fallback), so a revoked mount or role is
//!   obeyed within the revocation bound, not the TTL;
//! - one lookup per agent at a time: the calls that miss while a lookup of
//!   their agent is in flight wait for its answer, a hit, a miss or an
//!   error alike, instead of each asking the directory (when a busy agent's
//!   entry expires, or a reset drops it, every call in flight missed at
//!   once). A call that starts after an invalidation or a reset never
//!   waits for a lookup that started before it, and a lookup whose callers
//!   have all gone away is dropped, not left holding a connection.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use dashmap::DashMap;
use dashmap::mapref::entry::Entry;
use futures_util::FutureExt as _;
use futures_util::future::{BoxFuture, Shared, WeakShared};

use std::collections::HashMap;

use crate::domain::{MemberRole, Mount, ProjectRef};
use crate::names::{AgentName, UserId};

/// Default lifetime of a cached hit.
pub const DEFAULT_CACHE_TTL: Duration = Duration::from_secs(300);

/// An agent's project and what its calls need of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    /// The project the agent manages.
    pub project: ProjectRef,
    /// The project's mounts, by name.
    pub mounts: Vec<Mount>,
    /// Each member's role.
    members: HashMap<UserId, MemberRole>,
}

impl Scope {
    /// The scope of `project` with its `mounts` and `members`.
    pub fn new(
        project: ProjectRef,
        mounts: Vec<Mount>,
        members: impl IntoIterator<Item = (UserId, MemberRole)>,
    ) -> Self {
        Self {
            project,
            mounts,
            members: members.into_iter().collect(),
        }
    }

    /// `user`'s role in the project; `None` when not a member.
    pub fn role_of(&self, user: &UserId) -> Option<MemberRole> {
        self.members.get(user).copied()
    }
}

/// The authoritative source of agent → project mappings (implemented by the
/// store over the `agent_mounts` table).
#[async_trait]
pub trait ProjectDirectory: Send + Sync {
    /// The scope of the project for which `agent` is the active (not
    /// unmounted) manager.
    async fn manager_scope(&self, agent: &AgentName) -> Result<Option<Scope>, DirectoryError>;
}

/// The directory could not answer (for example the database is down).
/// Cloned to every call that waited for the failed lookup.
#[derive(Debug, Clone, thiserror::Error)]
#[error("project directory unavailable")]
pub struct DirectoryError {
    #[source]
    source: Arc<dyn std::error::Error + Send + Sync>,
}

impl DirectoryError {
    /// Wraps the underlying error; it is logged, never shown to callers.
    pub fn new(source: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Self {
            source: Arc::from(source.into()),
        }
    }
}

/// Why no scope could be resolved.
#[derive(Debug, thiserror::Error)]
pub enum ScopeError {
    /// The agent is not an active manager of any project.
    #[error("agent {agent} is not a provisioned project manager")]
    NotProvisioned {
        /// The agent that asked.
        agent: AgentName,
    },
    /// The directory failed; retryable.
    #[error(transparent)]
    Directory(#[from] DirectoryError),
}

/// A source of "now", so cache expiry can be tested without sleeping.
pub trait Clock: Send + Sync {
    /// The current instant.
    fn now(&self) -> Instant;
}

/// The real monotonic clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// A clock that only moves when told to; for tests.
#[derive(Debug)]
pub struct ManualClock {
    base: Instant,
    offset: Mutex<Duration>,
}

impl ManualClock {
    /// A clock standing at the current instant.
    pub fn new() -> Self {
        Self {
            base: Instant::now(),
            offset: Mutex::new(Duration::ZERO),
        }
    }

    /// Moves the clock forward.
    pub fn advance(&self, by: Duration) {
        let mut offset = self.offset.lock().unwrap_or_else(|p| p.into_inner());
        *offset += by;
    }
}

impl Default for ManualClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Instant {
        let offset = *self.offset.lock().unwrap_or_else(|p| p.into_inner());
        self.base + offset
    }
}

/// One cache slot. A slot without a value is a tombstone: it remembers that
/// the agent was invalidated at `generation`, so an older lookup still in
/// flight cannot fill it.
#[derive(Debug, Clone)]
struct Slot {
    generation: u64,
    value: Option<(Arc<Scope>, Instant)>,
}

/// A directory lookup, shared by the calls that wait for it.
type Lookup = Shared<BoxFuture<'static, Result<Option<Arc<Scope>>, DirectoryError>>>;

/// The lookup in flight for one agent. Only the calls waiting for it keep
/// it alive: here it is held weakly.
struct Flight {
    /// Tells this flight from a later one of the same agent.
    id: u64,
    /// The resolver's generation when it started.
    started_at: u64,
    lookup: WeakShared<BoxFuture<'static, Result<Option<Arc<Scope>>, DirectoryError>>>,
}

/// Resolves an agent's project through a [`ProjectDirectory`], caching hits.
pub struct ScopeResolver {
    directory: Arc<dyn ProjectDirectory>,
    clock: Arc<dyn Clock>,
    ttl: Duration,
    slots: DashMap<AgentName, Slot>,
    /// The lookups in flight, by agent: taken only on a miss, never held
    /// across an await.
    flights: Mutex<std::collections::HashMap<AgentName, Flight>>,
    /// The next flight's id.
    next_flight: AtomicU64,
    /// Bumped by every invalidation and reset; a lookup remembers the value
    /// it started at.
    generation: AtomicU64,
    /// The generation of the last full reset.
    reset_generation: AtomicU64,
}

impl std::fmt::Debug for ScopeResolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScopeResolver")
            .field("ttl", &self.ttl)
            .field("cached", &self.cached_len())
            .finish_non_exhaustive()
    }
}

impl ScopeResolver {
    /// A resolver over `directory` whose hits live for `ttl`.
    pub fn new(directory: Arc<dyn ProjectDirectory>, ttl: Duration) -> Self {
        Self::with_clock(directory, ttl, Arc::new(SystemClock))
    }

    /// Same, with an explicit clock.
    pub fn with_clock(
        directory: Arc<dyn ProjectDirectory>,
        ttl: Duration,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self {
            directory,
            clock,
            ttl,
            slots: DashMap::new(),
            flights: Mutex::default(),
            next_flight: AtomicU64::new(0),
            generation: AtomicU64::new(0),
            reset_generation: AtomicU64::new(0),
        }
    }

    /// The scope of the project `agent` manages. Misses and errors are
    /// never cached. On a cache miss, the call waits for the lookup of
    /// `agent` in flight, if one started after the agent's last
    /// invalidation (and the last reset), and starts one otherwise.
    pub async fn resolve(&self, agent: &AgentName) -> Result<Arc<Scope>, ScopeError> {
        if let Some(hit) = self.cached(agent) {
            return Ok(hit);
        }
        let (id, started_at, lookup) = match self.join_or_start(agent) {
            Ok(hit) => return Ok(hit),
            Err(flight) => flight,
        };
        let found = lookup.await;
        if let Ok(Some(scope)) = &found {
            // Before the flight lands: a call that then finds no flight
            // finds the scope cached (`join_or_start`).
            self.store(agent, scope, started_at);
        }
        self.land(agent, id);
        found?.ok_or_else(|| ScopeError::NotProvisioned {
            agent: agent.clone(),
        })
    }

    /// The lookup of `agent` to wait for: the one in flight, or a new one.
    /// `Ok` when, the lock taken, the scope is cached after all (a flight
    /// landed since the caller looked).
    fn join_or_start(&self, agent: &AgentName) -> Result<Arc<Scope>, (u64, u64, Lookup)> {
        let mut flights = self.flights.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(flight) = flights.get(agent)
            && let Some(lookup) = flight.lookup.upgrade()
        {
            return Err((flight.id, flight.started_at, lookup));
        }
        if let Some(hit) = self.cached(agent) {
            return Ok(hit);
        }
        // Read under the lock, which invalidations take after moving it.
        let started_at = self.generation.load(Ordering::Acquire);
        let directory = self.directory.clone();
        let asked = agent.clone();
        let lookup: Lookup = async move {
            let found = directory.manager_scope(&asked).await?;
            Ok(found.map(Arc::new))
        }
        .boxed()
        .shared();
        let id = self.next_flight.fetch_add(1, Ordering::Relaxed);
        // A lookup not yet polled cannot have finished: it downgrades.
        if let Some(weak) = lookup.downgrade() {
            flights.insert(
                agent.clone(),
                Flight {
                    id,
                    started_at,
                    lookup: weak,
                },
            );
        }
        Err((id, started_at, lookup))
    }

    /// Forgets flight `id` of `agent` once answered (every call that
    /// waited for it tries; the first one does it).
    fn land(&self, agent: &AgentName, id: u64) {
        let mut flights = self.flights.lock().unwrap_or_else(PoisonError::into_inner);
        if flights.get(agent).is_some_and(|flight| flight.id == id) {
            flights.remove(agent);
        }
    }

    /// The scope of the project `agent` manages if it is cached and fresh,
    /// without a lookup: what [`ScopeResolver::resolve`] answers first.
    pub fn cached(&self, agent: &AgentName) -> Option<Arc<Scope>> {
        let slot = self.slots.get(agent)?;
        let (scope, stored_at) = slot.value.as_ref()?;
        let fresh = self.clock.now().saturating_duration_since(*stored_at) < self.ttl;
        fresh.then(|| scope.clone())
    }

    /// Caches `project` unless an invalidation of this agent, or a reset,
    /// happened after the lookup started. The check and the write happen
    /// under the slot's lock, which invalidation also takes.
    fn store(&self, agent: &AgentName, scope: &Arc<Scope>, started_at: u64) {
        if self.reset_generation.load(Ordering::Acquire) > started_at {
            return;
        }
        let value = Some((scope.clone(), self.clock.now()));
        match self.slots.entry(agent.clone()) {
            Entry::Occupied(mut occupied) => {
                if occupied.get().generation <= started_at {
                    occupied.get_mut().value = value;
                }
            }
            Entry::Vacant(vacant) => {
                // A reset may have cleared this slot after the check above;
                // re-check under the shard lock.
                if self.reset_generation.load(Ordering::Acquire) <= started_at {
                    vacant.insert(Slot {
                        generation: started_at,
                        value,
                    });
                }
            }
        }
    }

    /// Drops `agent`'s entry; its next call goes to the directory, and
    /// does not wait for a lookup that started before.
    pub fn invalidate(&self, agent: &AgentName) {
        let generation = self.generation.fetch_add(1, Ordering::AcqRel) + 1;
        self.slots.insert(
            agent.clone(),
            Slot {
                generation,
                value: None,
            },
        );
        self.flights
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(agent);
    }

    /// Drops every entry; no later call waits for a lookup that started
    /// before.
    pub fn reset(&self) {
        let generation = self.generation.fetch_add(1, Ordering::AcqRel) + 1;
        // Never backwards: two resets may store out of order.
        self.reset_generation
            .fetch_max(generation, Ordering::AcqRel);
        self.slots.clear();
        self.flights
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    /// How many agents currently have a cached project.
    pub fn cached_len(&self) -> usize {
        self.slots.iter().filter(|s| s.value.is_some()).count()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::future::Future;
    use std::pin::Pin;
    use std::sync::atomic::AtomicUsize;
    use std::task::{Context, Poll, Waker};

    use futures_executor::block_on;

    use super::*;
    use crate::domain::ProjectId;
    use crate::names::{ProjectName, ProjectSlug};

    /// An in-memory directory that counts lookups and can run a hook in the
    /// middle of one (to simulate a concurrent invalidation).
    #[derive(Default)]
    struct FakeDirectory {
        managers: Mutex<HashMap<String, ProjectRef>>,
        lookups: AtomicUsize,
        /// Lookups that answered or were dropped.
        ended: AtomicUsize,
        fail: std::sync::atomic::AtomicBool,
        during_lookup: Mutex<Option<Box<dyn FnOnce() + Send>>>,
        /// When set, a lookup that has read its answer waits for it to
        /// open before giving it.
        gate: Mutex<Option<Arc<Gate>>>,
    }

    /// Shut until opened; what waits on it is woken then.
    #[derive(Default)]
    struct Gate {
        open: std::sync::atomic::AtomicBool,
        wakers: Mutex<Vec<Waker>>,
    }

    impl Gate {
        fn open(&self) {
            self.open.store(true, Ordering::SeqCst);
            for waker in self.wakers.lock().unwrap().drain(..) {
                waker.wake();
            }
        }

        async fn wait(&self) {
            std::future::poll_fn(|cx| {
                if self.open.load(Ordering::SeqCst) {
                    Poll::Ready(())
                } else {
                    self.wakers.lock().unwrap().push(cx.waker().clone());
                    Poll::Pending
                }
            })
            .await;
        }
    }

    /// Counts a lookup as ended when it answers or is dropped.
    struct Ended<'a>(&'a AtomicUsize);

    impl Drop for Ended<'_> {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    impl FakeDirectory {
        fn mount(&self, agent: &str, project: &ProjectRef) {
            self.managers
                .lock()
                .unwrap()
                .insert(agent.to_owned(), project.clone());
        }
        fn unmount(&self, agent: &str) {
            self.managers.lock().unwrap().remove(agent);
        }
        fn lookups(&self) -> usize {
            self.lookups.load(Ordering::SeqCst)
        }
        fn ended(&self) -> usize {
            self.ended.load(Ordering::SeqCst)
        }
        /// Holds every lookup's answer from now until the gate opens.
        fn hold(&self) -> Arc<Gate> {
            let gate = Arc::new(Gate::default());
            *self.gate.lock().unwrap() = Some(gate.clone());
            gate
        }
    }

    #[async_trait]
    impl ProjectDirectory for FakeDirectory {
        async fn manager_scope(&self, agent: &AgentName) -> Result<Option<Scope>, DirectoryError> {
            self.lookups.fetch_add(1, Ordering::SeqCst);
            let _ended = Ended(&self.ended);
            let gate = self.gate.lock().unwrap().clone();
            if self.fail.load(Ordering::SeqCst) {
                if let Some(gate) = gate {
                    gate.wait().await;
                }
                return Err(DirectoryError::new("database is down"));
            }
            let answer = self
                .managers
                .lock()
                .unwrap()
                .get(agent.as_str())
                .cloned()
                .map(|project| Scope::new(project, Vec::new(), []));
            let hook = self.during_lookup.lock().unwrap().take();
            if let Some(hook) = hook {
                hook();
            }
            if let Some(gate) = gate {
                gate.wait().await;
            }
            Ok(answer)
        }
    }

    fn project(slug: &str) -> ProjectRef {
        ProjectRef {
            id: ProjectId::new_random(),
            slug: ProjectSlug::parse(slug).unwrap(),
            name: ProjectName::parse(&slug.to_uppercase()).unwrap(),
        }
    }

    fn agent(name: &str) -> AgentName {
        AgentName::parse(name).unwrap()
    }

    fn setup() -> (Arc<FakeDirectory>, Arc<ManualClock>, Arc<ScopeResolver>) {
        let dir = Arc::new(FakeDirectory::default());
        let clock = Arc::new(ManualClock::new());
        let resolver = Arc::new(ScopeResolver::with_clock(
            dir.clone(),
            DEFAULT_CACHE_TTL,
            clock.clone(),
        ));
        (dir, clock, resolver)
    }

    #[test]
    fn a_newly_provisioned_agent_resolves_right_after_a_miss() {
        let (dir, _, resolver) = setup();
        let a = agent("project-alpha");
        let err = block_on(resolver.resolve(&a)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "agent project-alpha is not a provisioned project manager"
        );
        let alpha = project("alpha");
        dir.mount("project-alpha", &alpha);
        assert_eq!(
            block_on(resolver.resolve(&a)).unwrap().project.clone(),
            alpha
        );
        assert_eq!(dir.lookups(), 2);
    }

    #[test]
    fn hits_are_cached_until_the_ttl_and_then_reloaded() {
        let (dir, clock, resolver) = setup();
        let a = agent("project-alpha");
        dir.mount("project-alpha", &project("alpha"));
        for _ in 0..5 {
            block_on(resolver.resolve(&a)).unwrap();
        }
        assert_eq!(dir.lookups(), 1);
        clock.advance(DEFAULT_CACHE_TTL - Duration::from_secs(1));
        block_on(resolver.resolve(&a)).unwrap();
        assert_eq!(dir.lookups(), 1);
        clock.advance(Duration::from_secs(1));
        block_on(resolver.resolve(&a)).unwrap();
        assert_eq!(dir.lookups(), 2);
    }

    #[test]
    fn misses_and_errors_are_never_cached() {
        let (dir, _, resolver) = setup();
        let a = agent("ghost");
        for _ in 0..3 {
            assert!(matches!(
                block_on(resolver.resolve(&a)),
                Err(ScopeError::NotProvisioned { .. })
            ));
        }
        dir.fail.store(true, Ordering::SeqCst);
        assert!(matches!(
            block_on(resolver.resolve(&a)),
            Err(ScopeError::Directory(_))
        ));
        assert_eq!(dir.lookups(), 4);
        assert_eq!(resolver.cached_len(), 0);
    }

    #[test]
    fn invalidate_drops_one_agent_and_reset_drops_all() {
        let (dir, _, resolver) = setup();
        let (a, b) = (agent("project-alpha"), agent("project-beta"));
        dir.mount("project-alpha", &project("alpha"));
        dir.mount("project-beta", &project("beta"));
        block_on(resolver.resolve(&a)).unwrap();
        block_on(resolver.resolve(&b)).unwrap();
        assert_eq!(resolver.cached_len(), 2);

        dir.unmount("project-alpha");
        resolver.invalidate(&a);
        assert_eq!(resolver.cached_len(), 1);
        assert!(block_on(resolver.resolve(&a)).is_err());
        block_on(resolver.resolve(&b)).unwrap();
        assert_eq!(dir.lookups(), 3);

        resolver.reset();
        assert_eq!(resolver.cached_len(), 0);
        block_on(resolver.resolve(&b)).unwrap();
        assert_eq!(dir.lookups(), 4);
    }

    #[test]
    fn an_invalidation_during_a_lookup_keeps_the_stale_answer_out() {
        let (dir, _, resolver) = setup();
        let a = agent("project-alpha");
        dir.mount("project-alpha", &project("alpha"));
        // The lookup reads "alpha", then the agent is unmounted and
        // invalidated before the lookup stores its answer.
        let (d, r, a2) = (dir.clone(), resolver.clone(), a.clone());
        *dir.during_lookup.lock().unwrap() = Some(Box::new(move || {
            d.unmount("project-alpha");
            r.invalidate(&a2);
        }));
        assert!(block_on(resolver.resolve(&a)).is_ok()); // answered from the read
        assert_eq!(resolver.cached_len(), 0);
        assert!(block_on(resolver.resolve(&a)).is_err()); // and not cached
    }

    #[test]
    fn a_reset_during_a_lookup_keeps_the_stale_answer_out() {
        let (dir, _, resolver) = setup();
        let a = agent("project-alpha");
        dir.mount("project-alpha", &project("alpha"));
        let (d, r) = (dir.clone(), resolver.clone());
        *dir.during_lookup.lock().unwrap() = Some(Box::new(move || {
            d.unmount("project-alpha");
            r.reset();
        }));
        assert!(block_on(resolver.resolve(&a)).is_ok());
        assert_eq!(resolver.cached_len(), 0);
        assert!(block_on(resolver.resolve(&a)).is_err());
    }

    #[test]
    fn a_move_to_another_project_is_seen_after_invalidation() {
        let (dir, _, resolver) = setup();
        let a = agent("project-alpha");
        let (alpha, beta) = (project("alpha"), project("beta"));
        dir.mount("project-alpha", &alpha);
        assert_eq!(
            block_on(resolver.resolve(&a)).unwrap().project.clone(),
            alpha
        );
        dir.mount("project-alpha", &beta);
        assert_eq!(
            block_on(resolver.resolve(&a)).unwrap().project.clone(),
            alpha,
            "cached"
        );
        resolver.invalidate(&a);
        assert_eq!(
            block_on(resolver.resolve(&a)).unwrap().project.clone(),
            beta
        );
    }

    #[test]
    fn concurrent_resolution_from_many_threads_agrees() {
        let (dir, _, resolver) = setup();
        let alpha = project("alpha");
        dir.mount("project-alpha", &alpha);
        let handles: Vec<_> = (0..8)
            .map(|i| {
                let r = resolver.clone();
                std::thread::spawn(move || {
                    for _ in 0..200 {
                        let a = agent("project-alpha");
                        let p = block_on(r.resolve(&a)).unwrap().project.clone();
                        assert_eq!(p.slug.as_str(), "alpha");
                        if i == 0 {
                            r.invalidate(&a);
                        }
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert!(dir.lookups() >= 2, "invalidations forced reloads");
    }

    type Resolving = Pin<Box<dyn Future<Output = Result<Arc<Scope>, ScopeError>> + Send>>;

    /// A call of `resolver` for `name`, not yet polled.
    fn call(resolver: &Arc<ScopeResolver>, name: &str) -> Resolving {
        let (resolver, agent) = (resolver.clone(), agent(name));
        Box::pin(async move { resolver.resolve(&agent).await })
    }

    /// Polls once, as an executor would when woken.
    fn poll(call: &mut Resolving) -> Poll<Result<Arc<Scope>, ScopeError>> {
        call.as_mut().poll(&mut Context::from_waker(Waker::noop()))
    }

    /// The slug a finished call answered.
    fn answered(call: &mut Resolving) -> String {
        match poll(call) {
            Poll::Ready(Ok(scope)) => scope.project.slug.as_str().to_owned(),
            Poll::Ready(Err(error)) => panic!("answered {error}"),
            Poll::Pending => panic!("still waiting"),
        }
    }

    #[test]
    fn the_calls_that_miss_together_wait_for_one_lookup() {
        let (dir, clock, resolver) = setup();
        dir.mount("project-alpha", &project("alpha"));
        for round in 1..=2 {
            let gate = dir.hold();
            let mut calls: Vec<Resolving> =
                (0..8).map(|_| call(&resolver, "project-alpha")).collect();
            for c in &mut calls {
                assert!(poll(c).is_pending());
            }
            assert_eq!(dir.lookups(), round, "one lookup for the eight calls");
            gate.open();
            let first = match poll(&mut calls[0]) {
                Poll::Ready(Ok(scope)) => scope,
                _ => panic!("the first call did not get the lookup's answer"),
            };
            for c in &mut calls[1..] {
                match poll(c) {
                    Poll::Ready(Ok(scope)) => assert!(Arc::ptr_eq(&scope, &first)),
                    _ => panic!("a waiting call did not get the lookup's answer"),
                }
            }
            assert_eq!(dir.lookups(), round);
            assert_eq!(resolver.cached_len(), 1);
            // Expired: the next eight miss together again.
            clock.advance(DEFAULT_CACHE_TTL);
        }
    }

    #[test]
    fn a_failed_lookup_answers_its_waiting_calls_and_is_not_kept() {
        let (dir, _, resolver) = setup();
        dir.mount("project-alpha", &project("alpha"));
        dir.fail.store(true, Ordering::SeqCst);
        let gate = dir.hold();
        let mut calls: Vec<Resolving> = (0..5).map(|_| call(&resolver, "project-alpha")).collect();
        for c in &mut calls {
            assert!(poll(c).is_pending());
        }
        gate.open();
        for c in &mut calls {
            assert!(matches!(
                poll(c),
                Poll::Ready(Err(ScopeError::Directory(_)))
            ));
        }
        assert_eq!(
            dir.lookups(),
            1,
            "the waiting calls did not retry one by one"
        );
        dir.fail.store(false, Ordering::SeqCst);
        assert_eq!(answered(&mut call(&resolver, "project-alpha")), "alpha");
        assert_eq!(dir.lookups(), 2, "the error was not kept");
    }

    #[test]
    fn a_call_after_an_invalidation_or_reset_does_not_wait_for_an_older_lookup() {
        for reset in [false, true] {
            let (dir, _, resolver) = setup();
            let a = agent("project-alpha");
            dir.mount("project-alpha", &project("alpha"));
            let gate = dir.hold();
            let mut before = call(&resolver, "project-alpha");
            assert!(poll(&mut before).is_pending(), "read alpha, answer held");
            // Moved to beta, and the resolver told so.
            dir.mount("project-alpha", &project("beta"));
            if reset {
                resolver.reset();
            } else {
                resolver.invalidate(&a);
            }
            let mut after = call(&resolver, "project-alpha");
            assert!(poll(&mut after).is_pending());
            assert_eq!(dir.lookups(), 2, "a lookup of its own");
            gate.open();
            assert_eq!(answered(&mut after), "beta");
            // The older lookup answers the call that started before the
            // change, and is kept out of the cache.
            assert_eq!(answered(&mut before), "alpha");
            assert_eq!(answered(&mut call(&resolver, "project-alpha")), "beta");
            assert_eq!(dir.lookups(), 2);
        }
    }

    #[test]
    fn a_lookup_goes_on_for_the_calls_left_when_its_first_caller_goes_away() {
        let (dir, _, resolver) = setup();
        dir.mount("project-alpha", &project("alpha"));
        let gate = dir.hold();
        let mut first = call(&resolver, "project-alpha");
        let mut second = call(&resolver, "project-alpha");
        assert!(poll(&mut first).is_pending());
        assert!(poll(&mut second).is_pending());
        drop(first);
        assert_eq!(dir.ended(), 0, "still wanted");
        gate.open();
        assert_eq!(answered(&mut second), "alpha");
        assert_eq!((dir.lookups(), dir.ended()), (1, 1));
        assert_eq!(resolver.cached_len(), 1);
    }

    #[test]
    fn a_lookup_whose_callers_all_went_away_is_dropped_and_not_joined() {
        let (dir, _, resolver) = setup();
        dir.mount("project-alpha", &project("alpha"));
        let gate = dir.hold();
        let mut gone = call(&resolver, "project-alpha");
        assert!(poll(&mut gone).is_pending());
        drop(gone);
        assert_eq!(dir.ended(), 1, "dropped with its last caller");
        gate.open();
        assert_eq!(answered(&mut call(&resolver, "project-alpha")), "alpha");
        assert_eq!(dir.lookups(), 2, "a lookup of its own");
    }
}
