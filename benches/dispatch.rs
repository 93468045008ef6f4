//! Synchronous dispatch per attempt, as ADR 0100's consequences ask: without a hook, with a
//! no-op hook, and with a hook at its timeout, once its breaker is open and while it is closed.
//!
//! Each attempt is scheduled, taken from the store and dispatched through the real
//! [`Pipeline`] (built-in refusals, the supervised chain with its breaker actor, the HS256
//! token, placement, the `null` executor, the store's guarded writes), as a tick of one attempt
//! does. Building the attempts is not measured.
//!
//! `cargo bench --bench dispatch`; the README quotes the figures and the ratios.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::SystemRunner;
use criterion::{Criterion, criterion_group, criterion_main};
use dexaflow_admission::dispatch::{self, Pipeline, TaskStore};
use dexaflow_admission::events::Ignore;
use dexaflow_admission::loadtest::{self, Amount, HookFlag, Plan};
use dexaflow_admission::supervise::{self, BreakerSettings};

/// A pipeline for `plan` with a store sized for `attempts`; its hooks neither sleep nor jitter,
/// so it needs no timer thread.
///
/// Must run inside an actix system (the breakers are actors).
fn pipeline(plan: &Plan, attempts: usize) -> (Pipeline, TaskStore) {
    let store = TaskStore::with_capacity(attempts);
    (
        plan.pipeline(store.clone(), Arc::new(Ignore), None, None),
        store,
    )
}

/// Dispatches attempts `first..first + count` one by one, each as a tick of one attempt.
async fn dispatch_each(pipeline: &Pipeline, store: &TaskStore, first: u64, count: u64) -> Duration {
    let (_trigger, shutdown) = dispatch::signal();
    let tasks: Vec<_> = (first..first + count)
        .map(|index| loadtest::attempt(index, "tenant-0"))
        .collect();
    let started = Instant::now();
    for task in tasks {
        store.schedule(task);
        for (key, task) in store.take_ready(tokio::time::Instant::now(), 1) {
            black_box(pipeline.dispatch(&key, &task, &shutdown).await);
        }
    }
    started.elapsed()
}

/// Measures `iters` attempts on a fresh pipeline, after `warm_up` unmeasured ones (which open
/// the breaker of a hook at its timeout).
fn measure(system: &SystemRunner, plan: &Plan, warm_up: u64, iters: u64) -> Duration {
    system.block_on(async {
        let (pipeline, store) = pipeline(plan, (warm_up + iters) as usize);
        dispatch_each(&pipeline, &store, 0, warm_up).await;
        dispatch_each(&pipeline, &store, warm_up, iters).await
    })
}

fn plan(hooks: Vec<HookFlag>, supervise: supervise::Settings) -> Plan {
    Plan {
        amount: Amount::Attempts(1),
        hooks,
        supervise,
        ..Plan::default()
    }
}

fn synchronous(c: &mut Criterion) {
    let system = actix::System::new();

    let no_hook = plan(Vec::new(), supervise::Settings::default());
    c.bench_function("dispatch_no_hook", |b| {
        b.iter_custom(|iters| measure(&system, &no_hook, 0, iters));
    });

    let noop = plan(vec![HookFlag::Noop], supervise::Settings::default());
    c.bench_function("dispatch_noop_hook", |b| {
        b.iter_custom(|iters| measure(&system, &noop, 0, iters));
    });

    // The hook never answers: each of the first three calls waits out its 1 ms timeout, the
    // third opens the breaker for an hour, and every measured call is skipped by the gate.
    let failures = 3;
    let at_timeout = plan(
        vec![HookFlag::Timeout(1.0)],
        hung_hook_supervision(failures),
    );
    c.bench_function("dispatch_hook_at_timeout_sync", |b| {
        b.iter_custom(|iters| measure(&system, &at_timeout, u64::from(failures), iters));
    });

    // The same hook with its breaker closed for every measured call: each waits out the 1 ms
    // timeout, which the breaker counts. The breaker opens only after u32::MAX consecutive
    // failures (2^31 in effect), and each sample runs on a fresh pipeline, so a fresh breaker:
    // a sample would need 2^31 calls, some 25 days of 1 ms timeouts, to open it.
    let closed = plan(
        vec![HookFlag::Timeout(1.0)],
        hung_hook_supervision(u32::MAX),
    );
    c.bench_function("dispatch_hook_at_timeout_breaker_closed_sync", |b| {
        b.iter_custom(|iters| measure(&system, &closed, 0, iters));
    });
}

/// Supervision of a hook that never answers: a 1 ms timeout, and a breaker that opens after
/// `failures` consecutive failures and then stays open for an hour.
fn hung_hook_supervision(failures: u32) -> supervise::Settings {
    supervise::Settings {
        timeout: Duration::from_millis(1),
        chain_timeout: Duration::from_secs(1),
        fail_open: false,
        breaker: BreakerSettings {
            failures,
            backoff: Duration::from_secs(3600),
            max_backoff: Duration::from_secs(3600),
            jitter: 0.0,
        },
        hooks: Default::default(),
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(30)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = synchronous
}
criterion_main!(benches);
