//! Buffered dispatch throughput: attempts per second through the bounded buffer and its
//! admission workers, for buffers of 64 and 1024 and 1, 4, 16 and 64 workers, with a `noop`
//! hook and a `sleep:1ms` hook, and synchronous dispatch through the same harness as the
//! baseline; then buffer 1024 with 16 workers on 2 worker threads against synchronous, with a
//! `noop` hook and a CPU-bound `spin:20us` hook.
//!
//! Each sample is a load-test run (`loadtest::run`) of as many attempts as criterion asks for,
//! offered as fast as the dispatcher settles them; the time is the run's own, from the first
//! offer to the last attempt settled, so starting and tearing down the dispatcher is not
//! measured. Criterion reports it per attempt and as attempts per second.
//!
//! `cargo bench --bench buffered`; the README quotes the figures.

use std::time::Duration;

use criterion::measurement::WallTime;
use criterion::{
    BenchmarkGroup, BenchmarkId, Criterion, Throughput, criterion_group, criterion_main,
};
use dexaflow_admission::loadtest::{self, Amount, HookFlag, Options, Plan};

/// Runs `iters` attempts through `plan`'s buffer and workers and returns the run's time.
fn measure(plan: &Plan, iters: u64) -> Duration {
    let plan = Plan {
        amount: Amount::Attempts(iters.max(1)),
        ..plan.clone()
    };
    let report = actix::System::new()
        .block_on(loadtest::run(Options {
            plan,
            ..Options::default()
        }))
        .expect("the run completes");
    assert!(report.is_conserved(), "attempts lost or executed twice");
    report.elapsed
}

/// A group named `name` per attempt, opened with the baseline: the same harness with `hook` on
/// the synchronous tick, for the buffered-against-synchronous ratio.
fn against_synchronous<'c>(
    c: &'c mut Criterion,
    name: String,
    hook: &HookFlag,
) -> BenchmarkGroup<'c, WallTime> {
    let mut group = c.benchmark_group(name);
    group.throughput(Throughput::Elements(1));
    let synchronous = Plan {
        hooks: vec![hook.clone()],
        ..Plan::default()
    };
    group.bench_with_input("synchronous", &synchronous, |b, plan| {
        b.iter_custom(|iters| measure(plan, iters))
    });
    group
}

fn buffered(c: &mut Criterion) {
    for (name, hook) in [
        ("noop", HookFlag::Noop),
        ("sleep_1ms", HookFlag::Sleep(Duration::from_millis(1))),
    ] {
        let mut group = against_synchronous(c, format!("buffered_throughput/{name}"), &hook);
        for buffer_size in [64, 1024] {
            for workers in [1, 4, 16, 64] {
                let plan = Plan {
                    buffer_size,
                    workers,
                    hooks: vec![hook.clone()],
                    ..Plan::default()
                };
                group.bench_with_input(
                    BenchmarkId::new(
                        format!("buffer_{buffer_size}"),
                        format!("workers_{workers}"),
                    ),
                    &plan,
                    |b, plan| b.iter_custom(|iters| measure(plan, iters)),
                );
            }
        }
        group.finish();
    }
}

/// Buffered dispatch with the workers on threads of their own against synchronous dispatch.
fn worker_threads(c: &mut Criterion) {
    for (name, hook) in [
        ("noop", HookFlag::Noop),
        ("spin_20us", HookFlag::Spin(Duration::from_micros(20))),
    ] {
        let mut group = against_synchronous(c, format!("worker_threads/{name}"), &hook);
        let threaded = Plan {
            buffer_size: 1024,
            workers: 16,
            worker_threads: 2,
            hooks: vec![hook],
            ..Plan::default()
        };
        group.bench_with_input("buffer_1024_workers_16_threads_2", &threaded, |b, plan| {
            b.iter_custom(|iters| measure(plan, iters))
        });
        group.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = buffered, worker_threads
}
criterion_main!(benches);
