//! The traits through which the dispatch path is observed: hook calls, breakers and the dispatch
//! buffer (ADR 0100 §5, last bullet).
//!
//! A leaf: it uses nothing of the crate but the contract's plain [`Outcome`], so that the
//! metrics exporter and the load test's counter implement it without knowing supervision or the
//! dispatcher, and those report without knowing metric names or reports.
//!
//! - [`HookEvents`]: one call of a named hook ended with an outcome; one chain ended or was
//!   cancelled.
//! - [`BreakerEvents`]: a hook's breaker moved to a [`BreakerState`].
//! - [`BufferEvents`]: the dispatch buffer's capacity and depth, deferrals when it is full, busy
//!   admission workers.
//! - [`SupervisionEvents`] (hook calls and breakers: what a supervised chain reports) and
//!   [`Observer`] (all three: what the dispatch path reports) are implemented for every type
//!   that implements their parts.
//!
//! Another component's events (the webhook server's requests, say) belong in a trait of their
//! own here, apart from [`Observer`], so that no reporter is handed methods it never calls.
//!
//! Every method has a no-op default and is called on the hot path: keep an implementation to a
//! few atomic operations.

use std::sync::Arc;
use std::time::Duration;

use crate::admission::Outcome;

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
