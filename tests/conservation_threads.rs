//! Nothing is lost with the admission workers on threads of their own: the chaos mix through
//! buffered dispatch on two worker threads, with a shutdown in the middle, and the load test's
//! chaos mix (`panic`, `error`, `timeout`, `hold`, `refuse` together) on two worker threads.
//!
//! The real clock: worker threads run runtimes of their own, which a paused clock does not
//! reach. The tests assert outcomes, never durations.

#[path = "it/fakes/mod.rs"]
mod fakes;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use dexaflow_admission::admission::{Hook, HookFuture, Request};
use dexaflow_admission::dispatch::task::{State, Task, TaskKey};
use dexaflow_admission::dispatch::{Drain, Offer, Settings, Tick};
use dexaflow_admission::loadtest::{self, AttemptOutcome, Options, Plan};
use fakes::{settings, start, supervision, task};

const ATTEMPTS: usize = 20_000;

/// Admits, changes, holds, refuses, errors, hangs or panics, by the task's number modulo 7, so
/// that every behaviour runs on both threads.
struct ChaosByTask;

impl Hook for ChaosByTask {
    fn name(&self) -> &str {
        "chaos"
    }

    fn is_remote(&self) -> bool {
        false
    }

    fn admit<'a>(&'a self, request: &'a Request) -> HookFuture<'a> {
        let number: usize = request.task_id[1..].parse().expect("tasks are numbered");
        Box::pin(fakes::chaos(number % 7))
    }
}

fn tasks() -> Vec<Task> {
    (0..ATTEMPTS)
        .map(|index| task(&format!("t{index:06}")))
        .collect()
}

#[actix::test]
async fn every_attempt_ends_exactly_once_on_two_worker_threads_through_a_shutdown_in_the_middle() {
    // 1 in 7 calls panics on purpose; keep their messages out of the test output.
    let quiet = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let settings = Settings {
        buffer_size: 256,
        workers: 16,
        worker_threads: 2,
        drain_timeout: Duration::from_millis(100),
        ..settings()
    };
    let mut supervision = supervision();
    supervision.timeout = Duration::from_millis(5);
    supervision.breaker.failures = 8;
    supervision.breaker.backoff = Duration::from_millis(10);
    let mut harness = start(
        settings,
        supervision,
        vec![Arc::new(ChaosByTask) as Arc<dyn Hook>],
    );
    harness
        .dispatcher
        .send(Offer(tasks()))
        .await
        .expect("alive")
        .expect("offers");

    // Tick every 2ms, as the scheduler loop would, until a third of the attempts are decided
    // (3 in 7 can be: the others wait, each task's hook answering the same way every time).
    let mut decided_events: BTreeMap<TaskKey, usize> = BTreeMap::new();
    let mut decided = 0;
    let mut ticks = tokio::time::interval(Duration::from_millis(2));
    while decided < ATTEMPTS / 3 {
        tokio::select! {
            _ = ticks.tick() => {
                harness.dispatcher.send(Tick).await.expect("alive");
            }
            settled = harness.events.recv() => {
                let settled = settled.expect("the pipeline outlives the test");
                if settled.disposition.is_final() {
                    decided += 1;
                    *decided_events.entry(settled.key).or_default() += 1;
                }
            }
        }
    }
    let drain = harness.dispatcher.send(Drain).await.expect("alive");
    std::panic::set_hook(quiet);
    while let Ok(settled) = harness.events.try_recv() {
        if settled.disposition.is_final() {
            *decided_events.entry(settled.key).or_default() += 1;
        }
    }

    let instances = harness.store.snapshot();
    assert_eq!(instances.len(), ATTEMPTS);
    let (mut executed, mut refused, mut handed_back) = (0, 0, 0);
    for instance in &instances {
        let key = &instance.task.key;
        match instance.state {
            State::Queued => {
                assert_eq!(instance.executions, 1, "{key}");
                assert!(instance.token_minted);
                executed += 1;
            }
            State::Failed => {
                assert!(!instance.token_minted, "{key} was refused but has a token");
                assert_eq!(instance.executions, 0);
                refused += 1;
            }
            State::Scheduled => {
                assert!(!instance.in_flight, "{key} is stranded in flight");
                assert!(!instance.token_minted, "{key} waits but has a token");
                assert_eq!(instance.executions, 0);
                assert!(!decided_events.contains_key(key), "{key} decided but waits");
                handed_back += 1;
                continue;
            }
            other => panic!("{key} ended {other}"),
        }
        assert_eq!(decided_events.get(key), Some(&1), "{key} decided not once");
    }
    assert_eq!(executed + refused + handed_back, ATTEMPTS);
    assert!(
        executed > 0 && refused > 0 && handed_back > 0,
        "{executed} {refused} {handed_back}"
    );
    let calls = harness.executor.calls();
    assert_eq!(calls.len(), executed);
    let mut launched: Vec<&TaskKey> = calls.iter().map(|call| &call.task.key).collect();
    launched.sort_unstable();
    launched.dedup();
    assert_eq!(launched.len(), executed, "an attempt was executed twice");
    assert!(drain.handed_back > 0);
}

#[test]
fn the_load_tests_chaos_mix_on_two_worker_threads_loses_nothing_and_runs_nothing_twice() {
    // The mix panics on purpose; keep the messages out of the test output.
    let quiet = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let mut plan = Plan {
        amount: loadtest::Amount::Attempts(20_000),
        buffer_size: 256,
        workers: 16,
        worker_threads: 2,
        hooks: loadtest::parse_all(&[
            "panic:0.05",
            "error:0.05",
            "timeout:0.05",
            "hold:0.05",
            "refuse:0.05",
        ])
        .expect("valid specs"),
        seed: 11,
        ..Plan::default()
    };
    plan.supervise.timeout = Duration::from_millis(5);
    plan.supervise.chain_timeout = Duration::from_millis(50);
    plan.supervise.breaker.failures = u32::MAX;
    let report = loadtest::run_blocking(Options {
        plan,
        ..Options::default()
    })
    .expect("the run completes");
    std::panic::set_hook(quiet);

    assert!(report.is_conserved());
    assert_eq!(report.lost, 0, "lost attempts");
    assert_eq!(report.executed_twice, 0, "attempts executed twice");
    assert_eq!(report.settled_twice, 0, "attempts settled twice");
    assert_eq!(report.settled, report.offered);
    assert_eq!(report.offered, 20_000);
    for outcome in [
        AttemptOutcome::Executed,
        AttemptOutcome::Refused,
        AttemptOutcome::Held,
        AttemptOutcome::Unavailable,
    ] {
        assert!(report.count(outcome) > 0, "no attempt was {outcome:?}");
    }
}
