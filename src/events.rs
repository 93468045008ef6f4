//! The traits through which the dispatch path and the webhook server are observed: hook calls,
//! breakers, the dispatch buffer (ADR 0100 §5, last bullet), and the server's requests.
//!
//! A leaf: it uses nothing of the crate but the contract's plain [`Outcome`], so that the
//! metrics exporter and the load test's counter implement it without knowing supervision, the
//! dispatcher or the server, and those report without knowing metric names or reports.
//!
//! - [`HookEvents`]: a chain started with its hooks' names; one call of a named hook ended with
//!   an outcome; one chain ended or was cancelled.
//! - [`BreakerEvents`]: a hook's breaker moved to a [`BreakerState`].
//! - [`BufferEvents`]: the dispatch buffer's capacity and depth, deferrals when it is full, busy
//!   admission workers.
//! - [`SupervisionEvents`] (hook calls and breakers: what a supervised chain reports) and
//!   [`Observer`] (all three: what the dispatch path reports) are implemented for every type
//!   that implements their parts.
//! - [`ServerEvents`] and [`ServiceEvents`]: the webhook server's connections, reloads and,
//!   per service, requests started and answered with their [`RequestOutcome`]. Apart from
//!   [`Observer`], so that no reporter is handed methods it never calls.
//! - [`ClusterEvents`]: the caches of cluster objects the server reads, synced, updated, or
//!   failing to list or watch.
//!
//! Every method has a no-op default and is called on the hot path: keep an implementation to a
//! few atomic operations. [`Ignore`] is the observer that wants none of it.

use std::sync::Arc;
use std::time::Duration;

/// How one hook call ended, as every observer is told it: the admission contract's own
/// classification, part of this module's vocabulary so that an observer needs no other room.
pub use crate::admission::Outcome;

/// A breaker's state; its discriminant is the value the breaker gauge shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum BreakerState {
    /// Calls pass.
    Closed = 0,
    /// The backoff has passed: one call may probe the hook, every other call is skipped.
    HalfOpen = 1,
    /// Calls are skipped without calling the hook.
    Open = 2,
}

/// Hook calls and chains, as supervision and the dispatcher report them.
pub trait HookEvents: Send + Sync {
    /// One call of the hook named `hook` (its name in the chain, as [`BreakerEvents`] gives it)
    /// ended with `outcome` after `elapsed`: admitted, changed, held, refused, or unavailable
    /// (an error, a timeout, a panic, skipped by its breaker, the chain budget spent). A call
    /// that failed open is reported twice, under its cause and as [`Outcome::FailOpen`], both
    /// naming the hook.
    fn hook_call(&self, hook: &str, outcome: Outcome, elapsed: Duration) {
        let _ = (hook, outcome, elapsed);
    }

    /// A supervised chain started with `hooks`, named in chain order (position `i` is the hook
    /// [`BreakerEvents::breaker_changed`] names at position `i`), each breaker closed: told
    /// once per chain, before any of its calls, so that nothing needs the names earlier.
    fn chain_started(&self, hooks: &[&str]) {
        let _ = hooks;
    }

    /// The whole chain for one attempt took `elapsed`.
    fn chain_finished(&self, elapsed: Duration) {
        let _ = elapsed;
    }

    /// Shutdown cancelled an attempt's chain after `elapsed`, during a hook call; the hook is
    /// not known where the cancellation happens (the dispatcher drops the chain's future), so
    /// this names none. Counted as [`Outcome::Cancelled`].
    fn chain_cancelled(&self, elapsed: Duration) {
        let _ = elapsed;
    }
}

/// Breaker transitions, as each hook's breaker actor reports them, in order.
pub trait BreakerEvents: Send + Sync {
    /// The breaker of the hook at `position` named `hook` moved to `state`.
    fn breaker_changed(&self, position: usize, hook: &str, state: BreakerState) {
        let _ = (position, hook, state);
    }
}

/// The dispatch buffer and its admission workers, as the dispatcher reports them.
pub trait BufferEvents: Send + Sync {
    /// The dispatch buffer holds `capacity` attempts at most (told once, at start).
    fn buffer_capacity(&self, capacity: usize) {
        let _ = capacity;
    }

    /// The dispatch buffer now holds `depth` attempts.
    fn buffer_depth(&self, depth: usize) {
        let _ = depth;
    }

    /// An attempt found the buffer full and was deferred to a later tick.
    fn deferred_at_capacity(&self) {}

    /// An admission worker took an attempt (`true`) or finished one (`false`).
    fn worker_busy(&self, busy: bool) {
        let _ = busy;
    }
}

/// What a supervised chain reports: its hook calls and its breakers. Implemented for every type
/// that implements both.
pub trait SupervisionEvents: HookEvents + BreakerEvents {}

impl<T: HookEvents + BreakerEvents + ?Sized> SupervisionEvents for T {}

/// What the dispatch path reports: hook calls, breakers and the buffer. Implemented for every
/// type that implements the three; the metrics exporter and the load test's counter are two.
pub trait Observer: SupervisionEvents + BufferEvents {}

impl<T: SupervisionEvents + BufferEvents + ?Sized> Observer for T {}

/// An observer that ignores everything.
#[derive(Debug, Clone, Copy, Default)]
pub struct Ignore;

impl HookEvents for Ignore {}
impl BreakerEvents for Ignore {}
impl BufferEvents for Ignore {}
impl ServerEvents for Ignore {}
impl ServiceEvents for Ignore {}
impl ClusterEvents for Ignore {}

/// Tells every observer in turn: the metrics exporter and a load test's own counts, say.
#[derive(Clone, Default)]
pub struct Fanout(pub Vec<Arc<dyn Observer>>);

impl std::fmt::Debug for Fanout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fanout")
            .field("observers", &self.0.len())
            .finish()
    }
}

impl HookEvents for Fanout {
    fn chain_started(&self, hooks: &[&str]) {
        self.0
            .iter()
            .for_each(|observer| observer.chain_started(hooks));
    }

    fn hook_call(&self, hook: &str, outcome: Outcome, elapsed: Duration) {
        self.0
            .iter()
            .for_each(|observer| observer.hook_call(hook, outcome, elapsed));
    }

    fn chain_finished(&self, elapsed: Duration) {
        self.0
            .iter()
            .for_each(|observer| observer.chain_finished(elapsed));
    }

    fn chain_cancelled(&self, elapsed: Duration) {
        self.0
            .iter()
            .for_each(|observer| observer.chain_cancelled(elapsed));
    }
}

impl BreakerEvents for Fanout {
    fn breaker_changed(&self, position: usize, hook: &str, state: BreakerState) {
        self.0
            .iter()
            .for_each(|observer| observer.breaker_changed(position, hook, state));
    }
}

impl BufferEvents for Fanout {
    fn buffer_capacity(&self, capacity: usize) {
        self.0
            .iter()
            .for_each(|observer| observer.buffer_capacity(capacity));
    }

    fn buffer_depth(&self, depth: usize) {
        self.0
            .iter()
            .for_each(|observer| observer.buffer_depth(depth));
    }

    fn deferred_at_capacity(&self) {
        self.0
            .iter()
            .for_each(|observer| observer.deferred_at_capacity());
    }

    fn worker_busy(&self, busy: bool) {
        self.0
            .iter()
            .for_each(|observer| observer.worker_busy(busy));
    }
}

/// What a service's answer says: the handler's decision, sent with a 200.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ruling {
    /// Allowed as it is.
    Allowed,
    /// Allowed with changes: a patch, or a `dexaflow.io/admission/v1` `admit_with`. Only a
    /// mutating service may answer so.
    Patched,
    /// Not allowed.
    Denied,
    /// Not now: the caller asks again later (a `dexaflow.io/admission/v1` `hold`).
    Held,
}

/// How the webhook server answered one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestOutcome {
    /// 200: the service's handler decided, and its answer says this.
    Ruled(Ruling),
    /// 4xx: the wrong method, media type, size or body.
    Invalid,
    /// 500: the handler panicked (or a validating service tried to answer with a patch).
    Panic,
    /// 503: the handler did not answer before its deadline.
    Timeout,
    /// 404: no service answers the path.
    NotFound,
    /// 503: the service could not decide (`/tasks/admit`: a hook broken, skipped by its
    /// breaker, or the chain budget spent).
    Unavailable,
    /// 401: the caller did not present the bearer token (`/tasks/admit`).
    Unauthorized,
}

impl RequestOutcome {
    /// Every outcome; [`RequestOutcome::index`] is the position in this list.
    pub const ALL: [RequestOutcome; 10] = [
        RequestOutcome::Ruled(Ruling::Allowed),
        RequestOutcome::Ruled(Ruling::Patched),
        RequestOutcome::Ruled(Ruling::Denied),
        RequestOutcome::Invalid,
        RequestOutcome::Panic,
        RequestOutcome::Timeout,
        RequestOutcome::NotFound,
        RequestOutcome::Ruled(Ruling::Held),
        RequestOutcome::Unavailable,
        RequestOutcome::Unauthorized,
    ];

    /// The outcome's position in [`RequestOutcome::ALL`]: an index for handles built per
    /// outcome.
    pub fn index(self) -> usize {
        match self {
            RequestOutcome::Ruled(Ruling::Allowed) => 0,
            RequestOutcome::Ruled(Ruling::Patched) => 1,
            RequestOutcome::Ruled(Ruling::Denied) => 2,
            RequestOutcome::Invalid => 3,
            RequestOutcome::Panic => 4,
            RequestOutcome::Timeout => 5,
            RequestOutcome::NotFound => 6,
            RequestOutcome::Ruled(Ruling::Held) => 7,
            RequestOutcome::Unavailable => 8,
            RequestOutcome::Unauthorized => 9,
        }
    }

    /// The outcome's name, as the metrics label it.
    pub fn as_str(self) -> &'static str {
        match self {
            RequestOutcome::Ruled(Ruling::Allowed) => "allowed",
            RequestOutcome::Ruled(Ruling::Patched) => "patched",
            RequestOutcome::Ruled(Ruling::Denied) => "denied",
            RequestOutcome::Ruled(Ruling::Held) => "held",
            RequestOutcome::Invalid => "invalid",
            RequestOutcome::Panic => "panic",
            RequestOutcome::Timeout => "timeout",
            RequestOutcome::NotFound => "not_found",
            RequestOutcome::Unavailable => "unavailable",
            RequestOutcome::Unauthorized => "unauthorized",
        }
    }
}

/// A file the webhook server watches and re-reads when it changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchedFile {
    /// The serving certificate and its key, read as a pair.
    Certificates,
    /// The resource groups file `/pods/mutate` applies.
    ResourceGroups,
}

/// The webhook server's connections and reloads, the caches of cluster objects it reads, and
/// the observer of each service it serves.
pub trait ServerEvents: ClusterEvents + Send + Sync {
    /// The server will serve `path`: the observer its requests are reported to. Asked once per
    /// service when the router is built, so that a request reports to a handle of its own
    /// without a lookup; an observer that counts nothing per service returns [`Ignore`].
    fn service(&self, path: &str) -> Arc<dyn ServiceEvents> {
        let _ = path;
        Arc::new(Ignore)
    }

    /// A request reached a path no service answers (answered 404).
    fn request_not_found(&self) {}

    /// A connection was accepted and holds a place under the connection cap until
    /// [`ServerEvents::connection_closed`].
    fn connection_opened(&self) {}

    /// A connection [`ServerEvents::connection_opened`] reported ended.
    fn connection_closed(&self) {}

    /// A connection was accepted while the cap's every place was taken: it waits, unserved,
    /// for one to free.
    fn connection_waited(&self) {}

    /// `file` changed and was read again: taken in (`ok`), or refused, the previous value kept.
    fn reloaded(&self, file: WatchedFile, ok: bool) {
        let _ = (file, ok);
    }
}

/// The caches of cluster objects the webhook server reads (Volcano's queues), each named by
/// its resource (`queues`).
pub trait ClusterEvents: Send + Sync {
    /// The cache of `resource` starts listing: not synced yet, and nothing failed.
    fn cache_started(&self, resource: &str) {
        let _ = resource;
    }

    /// The cache of `resource` holds a complete list from the API server: from the first time
    /// on, reviews that read it are answered.
    fn cache_synced(&self, resource: &str) {
        let _ = resource;
    }

    /// An object of `resource` was added, changed or deleted in the cache (a relist included).
    fn cache_updated(&self, resource: &str) {
        let _ = resource;
    }

    /// Listing or watching `resource` failed; it is tried again after a backoff, and the cache
    /// keeps what it held.
    fn watch_failed(&self, resource: &str) {
        let _ = resource;
    }
}

/// One service's requests, reported to the observer [`ServerEvents::service`] gave for it.
/// Every started request ends with exactly one of [`ServiceEvents::request_answered`] and
/// [`ServiceEvents::request_abandoned`].
pub trait ServiceEvents: Send + Sync {
    /// A request to the service began being answered.
    fn request_started(&self) {}

    /// The request was answered with `outcome`, `elapsed` after it started.
    fn request_answered(&self, outcome: RequestOutcome, elapsed: Duration) {
        let _ = (outcome, elapsed);
    }

    /// The request ended unanswered after `elapsed`: its connection closed first.
    fn request_abandoned(&self, elapsed: Duration) {
        let _ = elapsed;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_outcome_indexes_its_place_in_all() {
        for (index, outcome) in RequestOutcome::ALL.into_iter().enumerate() {
            assert_eq!(outcome.index(), index, "{outcome:?}");
        }
    }
}
