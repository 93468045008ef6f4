//! The harness's own observer: counts hook calls by outcome with their latency, breaker
//! transitions and at-capacity deferrals.

use std::hash::BuildHasher;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::report::{BreakerTransitions, Latencies};
use crate::admission::Outcome;
use crate::events::{BreakerEvents, BreakerState, BufferEvents, HookEvents};
use crate::sync::lock;

/// How many sets of hook-call histograms a [`Counter`] keeps: a few per thread that calls hooks
/// on any sensible `--worker-threads`, so that two threads rarely share one.
const SHARDS: usize = 16;

/// Counts what supervision and the dispatcher report during a run.
///
/// Every method is a lock of an uncontended mutex or an atomic add, since this runs on the
/// dispatch path: hook calls are counted in one of 16 sets of histograms chosen by the
/// calling thread, so that admission workers on threads of their own (`--worker-threads`) do
/// not all take one lock for every call.
#[derive(Debug)]
pub(crate) struct Counter {
    // Per shard, one histogram per hook-call outcome, in the order of `Outcome::ALL`, made on
    // the outcome's first call in the shard (a histogram is a few hundred KiB).
    calls: Box<[Mutex<Vec<Option<Latencies>>>]>,
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
    pub(crate) fn new() -> Counter {
        Counter {
            calls: (0..SHARDS)
                .map(|_| Mutex::new(Outcome::ALL.iter().map(|_| None).collect()))
                .collect(),
            opened: AtomicU64::new(0),
            half_opened: AtomicU64::new(0),
            closed: AtomicU64::new(0),
            deferred: AtomicU64::new(0),
        }
    }

    /// Hook calls by outcome, with their latency, for the outcomes that happened.
    pub(crate) fn hook_calls(&self) -> Vec<(Outcome, Latencies)> {
        let mut merged: Vec<Latencies> = Outcome::ALL.iter().map(|_| Latencies::new()).collect();
        for shard in &self.calls {
            let shard = lock(shard);
            for (total, latencies) in merged.iter_mut().zip(shard.iter()) {
                if let Some(latencies) = latencies {
                    total.merge(latencies);
                }
            }
        }
        Outcome::ALL
            .iter()
            .copied()
            .zip(merged)
            .filter(|(_, latencies)| latencies.count() > 0)
            .collect()
    }

    /// How often breakers moved to each state.
    pub(crate) fn breaker_transitions(&self) -> BreakerTransitions {
        BreakerTransitions {
            open: self.opened.load(Ordering::Relaxed),
            half_open: self.half_opened.load(Ordering::Relaxed),
            closed: self.closed.load(Ordering::Relaxed),
        }
    }

    /// How many attempts found the buffer full.
    pub(crate) fn deferred_at_capacity(&self) -> u64 {
        self.deferred.load(Ordering::Relaxed)
    }
}

impl HookEvents for Counter {
    fn hook_call(&self, _hook: &str, outcome: Outcome, elapsed: Duration) {
        self.record(outcome, elapsed);
    }

    fn chain_cancelled(&self, elapsed: Duration) {
        self.record(Outcome::Cancelled, elapsed);
    }
}

impl Counter {
    fn record(&self, outcome: Outcome, elapsed: Duration) {
        let Some(index) = Outcome::ALL.iter().position(|known| *known == outcome) else {
            return;
        };
        let thread = foldhash::fast::FixedState::default().hash_one(std::thread::current().id());
        let shard = &self.calls[thread as usize % SHARDS];
        let mut calls = lock(shard);
        calls[index]
            .get_or_insert_with(Latencies::new)
            .record(elapsed);
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
