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
//! - one lookup per agent at a time (but for one that started before an
//!   invalidation or a reset): the calls that miss while a lookup of
//!   their agent is in flight wait for its answer, a hit, a miss or an
//!   error alike, instead of each asking the directory (when a busy agent's
//!   entry expires, or a reset drops it, every call in flight missed at
//!   once). A call that starts after an invalidation or a reset never
//!   waits for a lookup that started before it. The lookup runs in the
//!   call that started it: if that call goes away, its lookup goes with it
//!   (holding no connection), and the calls that waited for it are woken:
//!   one of them looks up, and the others wait for it.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use dashmap::DashMap;
use dashmap::mapref::entry::Entry;

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

/// What a lookup's answer is: the scope, none (not provisioned), or why
/// the directory could not say.
type Found = Result<Option<Arc<Scope>>, DirectoryError>;

/// How a flight ended, as the calls that waited for it learn it.
#[derive(Clone)]
enum Landed {
    /// The lookup answered.
    Answered(Found),
    /// The call that made the lookup went away (or panicked) first: its
    /// lookup went with it, and one of the waiting calls looks up.
    Abandoned,
}

/// The lookup in flight for one agent: made by one call (the leader), in
/// its own future; the calls that miss meanwhile wait for how it lands.
struct Flight {
    /// Tells this flight from a later one of the same agent.
    id: u64,
    landing: Arc<Mutex<Landing>>,
}

/// A flight's end, once known, and the calls to wake then.
#[derive(Default)]
struct Landing {
    landed: Option<Landed>,
    waiting: Vec<Waker>,
}

/// What a call that missed the cache does.
enum Role<'a> {
    /// Nothing: the scope was cached after all (a flight landed since it
    /// looked).
    Hit(Arc<Scope>),
    /// Waits for the flight in progress.
    Wait(Arc<Mutex<Landing>>),
    /// Makes the lookup itself.
    Lead(Leader<'a>),
}

/// The call that makes a flight's lookup. Dropped before it lands the
/// flight (its call went away, or the lookup panicked), it lands it as
/// abandoned, so that no call waits for a lookup nobody makes.
struct Leader<'a> {
    resolver: &'a ScopeResolver,
    agent: &'a AgentName,
    id: u64,
    /// The resolver's generation when the lookup started.
    started_at: u64,
    landing: Arc<Mutex<Landing>>,
    landed: bool,
}

impl Leader<'_> {
    /// Forgets the flight (if it is still the agent's) and wakes the calls
    /// that wait for it with how it ended.
    fn land(&mut self, how: Landed) {
        self.landed = true;
        {
            let mut flights = self.resolver.flights();
            if flights.get(self.agent).is_some_and(|f| f.id == self.id) {
                flights.remove(self.agent);
            }
        }
        let waiting = {
            let mut landing = self.landing.lock().unwrap_or_else(PoisonError::into_inner);
            landing.landed = Some(how);
            std::mem::take(&mut landing.waiting)
        };
        for waker in waiting {
            waker.wake();
        }
    }
}

impl Drop for Leader<'_> {
    fn drop(&mut self) {
        if !self.landed {
            self.land(Landed::Abandoned);
        }
    }
}

/// How the flight of `landing` ends, once it has.
fn landed(landing: &Mutex<Landing>) -> impl Future<Output = Landed> + '_ {
    std::future::poll_fn(move |cx| {
        let mut landing = landing.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(landed) = &landing.landed {
            return Poll::Ready(landed.clone());
        }
        if !landing.waiting.iter().any(|w| w.will_wake(cx.waker())) {
            landing.waiting.push(cx.waker().clone());
        }
        Poll::Pending
    })
}

/// Resolves an agent's project through a [`ProjectDirectory`], caching hits.
pub struct ScopeResolver {
    directory: Arc<dyn ProjectDirectory>,
    clock: Arc<dyn Clock>,
    ttl: Duration,
    slots: DashMap<AgentName, Slot>,
    /// The lookups in flight, by agent: taken on a miss, a landing, an
    /// invalidation and a reset, never held across an await.
    flights: Mutex<HashMap<AgentName, Flight>>,
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
    /// invalidation (and the last reset), and makes one otherwise.
    pub async fn resolve(&self, agent: &AgentName) -> Result<Arc<Scope>, ScopeError> {
        loop {
            if let Some(hit) = self.cached(agent) {
                return Ok(hit);
            }
            let found = match self.role(agent) {
                Role::Hit(scope) => return Ok(scope),
                Role::Wait(landing) => match landed(&landing).await {
                    Landed::Answered(found) => found,
                    // Its leader went away: look again.
                    Landed::Abandoned => continue,
                },
                Role::Lead(mut leader) => {
                    let found = self
                        .directory
                        .manager_scope(agent)
                        .await
                        .map(|found| found.map(Arc::new));
                    if let Ok(Some(scope)) = &found {
                        // Before the flight is forgotten: a call that then
                        // finds no flight finds the scope cached.
                        self.store(agent, scope, leader.started_at);
                    }
                    leader.land(Landed::Answered(found.clone()));
                    found
                }
            };
            return found?.ok_or_else(|| ScopeError::NotProvisioned {
                agent: agent.clone(),
            });
        }
    }

    /// The lookups in flight, locked (a panic while it was held leaves
    /// the map whole: every change to it is one call).
    fn flights(&self) -> MutexGuard<'_, HashMap<AgentName, Flight>> {
        self.flights.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// What a call that missed `agent` in the cache does: wait for the
    /// flight in progress, or lead a new one — or nothing, if, the lock
    /// taken, the scope is cached after all.
    fn role<'a>(&'a self, agent: &'a AgentName) -> Role<'a> {
        let mut flights = self.flights();
        if let Some(flight) = flights.get(agent) {
            return Role::Wait(flight.landing.clone());
        }
        if let Some(hit) = self.cached(agent) {
            return Role::Hit(hit);
        }
        let id = self.next_flight.fetch_add(1, Ordering::Relaxed);
        let landing = Arc::new(Mutex::new(Landing::default()));
        flights.insert(
            agent.clone(),
            Flight {
                id,
                landing: landing.clone(),
            },
        );
        Role::Lead(Leader {
            resolver: self,
            agent,
            id,
            // Read under the lock, which invalidations take after moving
            // it: a flight they do not forget started after them.
            started_at: self.generation.load(Ordering::Acquire),
            landing,
            landed: false,
        })
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
        self.flights().remove(agent);
    }

    /// Drops every entry; no later call waits for a lookup that started
    /// before.
    pub fn reset(&self) {
        let generation = self.generation.fetch_add(1, Ordering::AcqRel) + 1;
        // Never backwards: two resets may store out of order.
        self.reset_generation
            .fetch_max(generation, Ordering::AcqRel);
        self.slots.clear();
        self.flights().clear();
    }

    /// How many agents currently have a cached project.
    pub fn cached_len(&self) -> usize {
        self.slots.iter().filter(|s| s.value.is_some()).count()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::pin::Pin;
    use std::sync::atomic::AtomicUsize;
    use std::task::{Context, Wake};

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
        /// The next lookup to pass the gate panics.
        panic_once: std::sync::atomic::AtomicBool,
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
            assert!(
                !self.panic_once.swap(false, Ordering::SeqCst),
                "the directory panicked"
            );
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

    /// Counts its wakes.
    #[derive(Default)]
    struct Wakes(AtomicUsize);

    impl Wake for Wakes {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Polls once with a waker counting into `wakes`.
    fn poll_with(call: &mut Resolving, wakes: &Arc<Wakes>) -> Poll<Result<Arc<Scope>, ScopeError>> {
        let waker = Waker::from(wakes.clone());
        call.as_mut().poll(&mut Context::from_waker(&waker))
    }

    fn woken(wakes: &Arc<Wakes>) -> usize {
        wakes.0.load(Ordering::SeqCst)
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
            let wakes: Vec<Arc<Wakes>> = (0..8).map(|_| Arc::default()).collect();
            for (c, w) in calls.iter_mut().zip(&wakes) {
                assert!(poll_with(c, w).is_pending());
            }
            assert_eq!(dir.lookups(), round, "one lookup for the eight calls");
            gate.open();
            let first = match poll(&mut calls[0]) {
                Poll::Ready(Ok(scope)) => scope,
                _ => panic!("the first call did not get the lookup's answer"),
            };
            for (c, w) in calls[1..].iter_mut().zip(&wakes[1..]) {
                assert_eq!(woken(w), 1, "a waiting call is woken by the answer");
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
    fn a_landed_lookup_is_forgotten_before_its_waiting_calls_take_its_answer() {
        let (dir, _, resolver) = setup();
        dir.mount("project-alpha", &project("alpha"));
        dir.fail.store(true, Ordering::SeqCst);
        let gate = dir.hold();
        let mut leader = call(&resolver, "project-alpha");
        let mut waiting = call(&resolver, "project-alpha");
        assert!(poll(&mut leader).is_pending());
        assert!(poll(&mut waiting).is_pending());
        gate.open();
        assert!(matches!(
            poll(&mut leader),
            Poll::Ready(Err(ScopeError::Directory(_)))
        ));
        dir.fail.store(false, Ordering::SeqCst);
        // The waiting call has not taken the error yet; a new call does not
        // join the landed lookup.
        assert_eq!(answered(&mut call(&resolver, "project-alpha")), "alpha");
        assert_eq!(dir.lookups(), 2);
        assert!(matches!(
            poll(&mut waiting),
            Poll::Ready(Err(ScopeError::Directory(_)))
        ));
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
            // The older lookup answers the call that started before the
            // change, and lands without forgetting the newer flight: a
            // third call waits for that one.
            assert_eq!(answered(&mut before), "alpha");
            let mut third = call(&resolver, "project-alpha");
            assert!(poll(&mut third).is_pending());
            assert_eq!(dir.lookups(), 2);
            assert_eq!(answered(&mut after), "beta");
            assert_eq!(answered(&mut third), "beta");
            // The older answer was kept out of the cache.
            assert_eq!(answered(&mut call(&resolver, "project-alpha")), "beta");
            assert_eq!(dir.lookups(), 2);
        }
    }

    /// Two calls of `project-alpha` held at the gate: the one making the
    /// lookup, and one waiting for it with a waker that counts.
    fn leader_and_waiting(resolver: &Arc<ScopeResolver>) -> (Resolving, Resolving, Arc<Wakes>) {
        let mut leader = call(resolver, "project-alpha");
        let mut waiting = call(resolver, "project-alpha");
        let wakes = Arc::new(Wakes::default());
        assert!(poll(&mut leader).is_pending());
        assert!(poll_with(&mut waiting, &wakes).is_pending());
        (leader, waiting, wakes)
    }

    #[test]
    fn a_call_waiting_for_a_lookup_whose_call_went_away_is_woken_and_looks_up_itself() {
        let (dir, _, resolver) = setup();
        dir.mount("project-alpha", &project("alpha"));
        let gate = dir.hold();
        let (leader, mut waiting, wakes) = leader_and_waiting(&resolver);
        assert_eq!(dir.lookups(), 1);
        drop(leader);
        assert_eq!(dir.ended(), 1, "the lookup went with its call");
        assert_eq!(woken(&wakes), 1, "the waiting call is not left waiting");
        assert!(poll(&mut waiting).is_pending(), "a lookup of its own");
        assert_eq!(dir.lookups(), 2);
        gate.open();
        assert_eq!(answered(&mut waiting), "alpha");
        assert_eq!(resolver.cached_len(), 1);
    }

    #[test]
    fn the_calls_left_by_a_gone_leader_share_one_new_lookup() {
        let (dir, _, resolver) = setup();
        dir.mount("project-alpha", &project("alpha"));
        let gate = dir.hold();
        let (leader, mut first, first_wakes) = leader_and_waiting(&resolver);
        let mut second = call(&resolver, "project-alpha");
        let second_wakes = Arc::new(Wakes::default());
        assert!(poll_with(&mut second, &second_wakes).is_pending());
        drop(leader);
        assert_eq!((woken(&first_wakes), woken(&second_wakes)), (1, 1));
        assert!(poll(&mut first).is_pending(), "leads the new lookup");
        assert!(poll(&mut second).is_pending(), "waits for it");
        assert_eq!(dir.lookups(), 2);
        gate.open();
        assert_eq!(answered(&mut first), "alpha");
        assert_eq!(answered(&mut second), "alpha");
        assert_eq!(dir.lookups(), 2);
    }

    #[test]
    fn a_lookup_that_panics_leaves_no_call_waiting_and_the_next_one_answers() {
        let (dir, _, resolver) = setup();
        dir.mount("project-alpha", &project("alpha"));
        let gate = dir.hold();
        let (mut leader, mut waiting, wakes) = leader_and_waiting(&resolver);
        dir.panic_once.store(true, Ordering::SeqCst);
        gate.open();
        let polled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| poll(&mut leader)));
        assert!(polled.is_err(), "the lookup panicked");
        drop(leader);
        assert_eq!(woken(&wakes), 1, "the waiting call is not left waiting");
        assert_eq!(answered(&mut waiting), "alpha");
        assert_eq!(dir.lookups(), 2);
        assert_eq!(answered(&mut call(&resolver, "project-alpha")), "alpha");
        assert_eq!(dir.lookups(), 2, "cached");
    }

    #[test]
    fn a_lookup_whose_call_went_away_is_dropped_and_not_joined() {
        let (dir, _, resolver) = setup();
        dir.mount("project-alpha", &project("alpha"));
        let gate = dir.hold();
        let mut gone = call(&resolver, "project-alpha");
        assert!(poll(&mut gone).is_pending());
        drop(gone);
        assert_eq!(dir.ended(), 1, "dropped with its call");
        gate.open();
        assert_eq!(answered(&mut call(&resolver, "project-alpha")), "alpha");
        assert_eq!(dir.lookups(), 2, "a lookup of its own");
    }
}
