//! Nothing is lost: 100,000 attempts through buffered dispatch with a hook that answers at
//! random, and a shutdown in the middle (DESIGN.md "Nothing is lost").

#[path = "it/fakes/mod.rs"]
mod fakes;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dexaflow_admission::admission::{Hook, HookFuture, Request};
use dexaflow_admission::dispatch::task::{State, Task, TaskKey};
use dexaflow_admission::dispatch::{Disposition, Drain, Offer, Settings, Settled, Tick};
use fakes::{settings, start, supervision, task};

const ATTEMPTS: usize = 100_000;

/// A hook that admits, changes, holds, refuses, errors, times out or panics, at random from a
/// fixed seed.
struct Chaos {
    rng: Mutex<fastrand::Rng>,
}

impl Hook for Chaos {
    fn name(&self) -> &str {
        "chaos"
    }

    fn is_remote(&self) -> bool {
        false
    }

    fn admit<'a>(&'a self, _: &'a Request) -> HookFuture<'a> {
        let roll = self.rng.lock().expect("no panic while rolling").u8(0..7);
        Box::pin(fakes::chaos(roll.into()))
    }
}

/// The settle events of each task instance: its final dispositions, in order.
#[derive(Default)]
struct Settles {
    finals: HashMap<TaskKey, Vec<Disposition>>,
}

impl Settles {
    fn record(&mut self, settled: Settled) {
        let finals = self.finals.entry(settled.key).or_default();
        if settled.disposition.is_final() {
            finals.push(settled.disposition);
        }
    }

    /// Asserts that `key` was settled with exactly one final disposition, `disposition`.
    fn assert_final_once(&self, key: &TaskKey, disposition: Disposition) {
        assert_eq!(
            self.finals.get(key).map(Vec::as_slice),
            Some([disposition].as_slice()),
            "{key} was not settled exactly once as {}",
            disposition.as_str()
        );
    }

    /// Asserts that `key`, still scheduled, was never settled with a final disposition.
    fn assert_no_final(&self, key: &TaskKey) {
        let finals = self.finals.get(key).map(Vec::as_slice).unwrap_or_default();
        assert!(
            finals.is_empty(),
            "{key} is scheduled but settled {finals:?}"
        );
    }
}

fn tasks() -> Vec<Task> {
    (0..ATTEMPTS)
        .map(|index| task(&format!("t{index:06}")))
        .collect()
}

#[actix::test]
async fn every_attempt_ends_exactly_once_through_a_shutdown_in_the_middle() {
    tokio::time::pause();
    // 1 in 7 calls panics on purpose; keep their messages out of the test output.
    let quiet = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let hook = Arc::new(Chaos {
        rng: Mutex::new(fastrand::Rng::with_seed(7)),
    });
    let settings = Settings {
        buffer_size: 256,
        workers: 8,
        drain_timeout: Duration::from_millis(100),
        ..settings()
    };
    let mut supervision = supervision();
    supervision.timeout = Duration::from_millis(20);
    supervision.breaker.failures = 8;
    supervision.breaker.backoff = Duration::from_millis(10);
    let mut harness = start(settings, supervision, vec![hook as Arc<dyn Hook>]);
    harness
        .dispatcher
        .send(Offer(tasks()))
        .await
        .expect("alive")
        .expect("offers");

    // Tick every (virtual) 10ms, as the scheduler loop would, until half the attempts are decided.
    let mut settled_events = Settles::default();
    let mut decided = 0;
    let mut ticks = tokio::time::interval(Duration::from_millis(10));
    while decided < ATTEMPTS / 2 {
        tokio::select! {
            _ = ticks.tick() => {
                harness.dispatcher.send(Tick).await.expect("alive");
            }
            settled = harness.events.recv() => {
                let settled = settled.expect("the pipeline outlives the test");
                if settled.disposition.is_final() {
                    decided += 1;
                }
                settled_events.record(settled);
            }
        }
    }
    let drain = harness.dispatcher.send(Drain).await.expect("alive");
    std::panic::set_hook(quiet);
    // Drain returns once every dispatch has settled, so every event is queued by now.
    while let Ok(settled) = harness.events.try_recv() {
        settled_events.record(settled);
    }

    let instances = harness.store.snapshot();
    assert_eq!(instances.len(), ATTEMPTS);
    let (mut executed, mut refused, mut handed_back) = (0, 0, 0);
    for instance in &instances {
        match instance.state {
            State::Queued => {
                assert_eq!(instance.executions, 1, "{}", instance.task.key);
                settled_events.assert_final_once(&instance.task.key, Disposition::Executed);
                assert!(instance.token_minted);
                executed += 1;
            }
            State::Failed => {
                let reason = instance.failure_reason.as_deref().unwrap_or_default();
                assert!(
                    reason.starts_with("dispatch refused: admission: "),
                    "{reason}"
                );
                assert!(
                    !instance.token_minted,
                    "{} was refused but has a token",
                    instance.task.key
                );
                assert_eq!(instance.executions, 0);
                settled_events.assert_final_once(&instance.task.key, Disposition::Refused);
                refused += 1;
            }
            State::Scheduled => {
                assert!(
                    !instance.in_flight,
                    "{} is stranded in flight",
                    instance.task.key
                );
                assert!(
                    !instance.token_minted,
                    "{} waits but has a token",
                    instance.task.key
                );
                assert_eq!(instance.executions, 0);
                settled_events.assert_no_final(&instance.task.key);
                handed_back += 1;
            }
            other => panic!("{} ended {other}", instance.task.key),
        }
    }
    assert_eq!(executed + refused + handed_back, ATTEMPTS);
    assert!(
        executed > 0 && refused > 0 && handed_back > 0,
        "{executed} {refused} {handed_back}"
    );
    assert_eq!(harness.executor.calls().len(), executed);
    let mut launched: Vec<&TaskKey> = Vec::new();
    let calls = harness.executor.calls();
    launched.extend(calls.iter().map(|call| &call.task.key));
    launched.sort_unstable();
    launched.dedup();
    assert_eq!(launched.len(), executed, "an attempt was executed twice");
    assert!(drain.handed_back > 0);
}
