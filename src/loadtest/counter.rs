//! The harness's own observer: counts hook calls by outcome with their latency, breaker
//! transitions and at-capacity deferrals.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::report::{BreakerTransitions, Latencies};
use crate::admission::Outcome;
use crate::events::{BreakerEvents, BreakerState, BufferEvents, HookEvents};

/// Counts what supervision and the dispatcher report during a run.
///
/// Every method is a lock of an uncontended mutex or an atomic add: the dispatcher and its
/// workers share one thread in the harness, and this runs on their hot path.
#[derive(Debug)]
pub struct Counter {
    // One histogram per hook-call outcome, in the order of `Outcome::ALL`.
    calls: Mutex<Vec<Latencies>>,
    opened: AtomicU64,
    half_opened: AtomicU64,
    closed: AtomicU64,
    deferred: AtomicU64,
}

impl Default for Counter {
    fn default() -> Counter {
        Counter::new()
    }
}

impl Counter {
    /// A counter with nothing counted.
    pub fn new() -> Counter {
        Counter {
            calls: Mutex::new(Outcome::ALL.iter().map(|_| Latencies::new()).collect()),
            opened: AtomicU64::new(0),
            half_opened: AtomicU64::new(0),
            closed: AtomicU64::new(0),
            deferred: AtomicU64::new(0),
        }
    }

    /// Hook calls by outcome, with their latency, for the outcomes that happened.
    pub fn hook_calls(&self) -> Vec<(Outcome, Latencies)> {
        let calls = self
            .calls
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        Outcome::ALL
            .iter()
            .zip(calls.iter())
            .filter(|(_, latencies)| latencies.count() > 0)
            .map(|(outcome, latencies)| (*outcome, latencies.clone()))
            .collect()
    }

    /// How often breakers moved to each state.
    pub fn breaker_transitions(&self) -> BreakerTransitions {
        BreakerTransitions {
            open: self.opened.load(Ordering::Relaxed),
            half_open: self.half_opened.load(Ordering::Relaxed),
            closed: self.closed.load(Ordering::Relaxed),
        }
    }

    /// How many attempts found the buffer full.
    pub fn deferred_at_capacity(&self) -> u64 {
        self.deferred.load(Ordering::Relaxed)
    }
}

impl HookEvents for Counter {
    fn hook_call(&self, outcome: Outcome, elapsed: Duration) {
        let Some(index) = Outcome::ALL.iter().position(|known| *known == outcome) else {
            return;
        };
        let mut calls = self
            .calls
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        calls[index].record(elapsed);
    }
}

impl BreakerEvents for Counter {
    fn breaker_changed(&self, _position: usize, _hook: &str, state: BreakerState) {
        let counter = match state {
            BreakerState::Open => &self.opened,
            BreakerState::HalfOpen => &self.half_opened,
            BreakerState::Closed => &self.closed,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

impl BufferEvents for Counter {
    fn deferred_at_capacity(&self) {
        self.deferred.fetch_add(1, Ordering::Relaxed);
    }
}
