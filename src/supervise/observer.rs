//! What supervision reports as it goes: per-call outcomes, chain latency and breaker changes.
//!
//! The metrics exporter and the load-test harness implement [`Observer`]; supervision only calls
//! it, so it knows nothing of metric names or reports.

use std::time::Duration;

use super::BreakerState;
use crate::admission::Outcome;

/// Receives facts from supervised chains and breakers. Every method has a no-op default.
///
/// Methods are called on the hot path: keep them to a few atomic operations.
pub trait Observer: Send + Sync {
    /// One hook call ended with `outcome` after `elapsed`.
    fn hook_call(&self, outcome: Outcome, elapsed: Duration) {
        let _ = (outcome, elapsed);
    }

    /// The whole chain for one attempt took `elapsed`.
    fn chain_finished(&self, elapsed: Duration) {
        let _ = elapsed;
    }

    /// The breaker of the hook at `position` named `hook` moved to `state`.
    fn breaker_changed(&self, position: usize, hook: &str, state: BreakerState) {
        let _ = (position, hook, state);
    }

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

/// An observer that ignores everything.
#[derive(Debug, Clone, Copy, Default)]
pub struct Ignore;

impl Observer for Ignore {}

/// Tells every observer in turn: the metrics exporter and a load test's own counts, say.
#[derive(Clone, Default)]
pub struct Fanout(pub Vec<std::sync::Arc<dyn Observer>>);

impl std::fmt::Debug for Fanout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fanout")
            .field("observers", &self.0.len())
            .finish()
    }
}

impl Observer for Fanout {
    fn hook_call(&self, outcome: Outcome, elapsed: Duration) {
        self.0
            .iter()
            .for_each(|observer| observer.hook_call(outcome, elapsed));
    }

    fn chain_finished(&self, elapsed: Duration) {
        self.0
            .iter()
            .for_each(|observer| observer.chain_finished(elapsed));
    }

    fn breaker_changed(&self, position: usize, hook: &str, state: BreakerState) {
        self.0
            .iter()
            .for_each(|observer| observer.breaker_changed(position, hook, state));
    }

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
