//! Buffered dispatch with its admission workers on threads of their own
//! (`scheduler.dispatch.worker_threads: 2`): nothing lost, nothing run twice, shutdown drains
//! the workers of every thread, and a panicking hook on a worker thread is recovered.
//!
//! The real clock throughout: worker threads run runtimes of their own, which a paused clock
//! does not reach. The tests assert outcomes, never durations.

#[path = "it/fakes/mod.rs"]
mod fakes;

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;
use std::time::Duration;

use dexaflow_admission::admission::{Decision, Hook, HookFuture, Request};
use dexaflow_admission::dispatch::task::{State, Task, TaskKey};
use dexaflow_admission::dispatch::{Disposition, Drain, Settings};
use fakes::{Harness, settings, start, supervision, task};
use tokio::sync::watch;

/// Buffered dispatch whose `workers` run on two threads of their own.
fn on_two_threads(buffer_size: usize, workers: usize) -> Settings {
    Settings {
        buffer_size,
        workers,
        worker_threads: 2,
        ..settings()
    }
}

fn tasks(count: usize) -> Vec<Task> {
    (0..count)
        .map(|index| task(&format!("t{index:05}")))
        .collect()
}

/// The threads a hook was called on.
#[derive(Default)]
struct Threads(Mutex<HashSet<ThreadId>>);

impl Threads {
    fn record(&self) {
        self.0
            .lock()
            .expect("no panic while recording")
            .insert(std::thread::current().id());
    }

    fn seen(&self) -> HashSet<ThreadId> {
        self.0.lock().expect("no panic while reading").clone()
    }
}

/// Admits every attempt, noting the thread it was called on.
#[derive(Default)]
struct Admitting {
    threads: Threads,
}

impl Hook for Admitting {
    fn name(&self) -> &str {
        "admitting"
    }

    fn is_remote(&self) -> bool {
        false
    }

    fn admit<'a>(&'a self, _: &'a Request) -> HookFuture<'a> {
        self.threads.record();
        Box::pin(async { Ok(Decision::Admit) })
    }
}

/// Admits, but only once released; counts the calls waiting to be.
struct Gated {
    threads: Threads,
    entered: watch::Sender<usize>,
    released: watch::Receiver<bool>,
}

impl Hook for Gated {
    fn name(&self) -> &str {
        "gated"
    }

    fn is_remote(&self) -> bool {
        false
    }

    fn admit<'a>(&'a self, _: &'a Request) -> HookFuture<'a> {
        self.threads.record();
        self.entered.send_modify(|entered| *entered += 1);
        let mut released = self.released.clone();
        Box::pin(async move {
            let _ = released.wait_for(|released| *released).await;
            Ok(Decision::Admit)
        })
    }
}

/// Panics on the task `t00000` and admits every other, noting where it panicked.
#[derive(Default)]
struct PanicsOnFirst {
    panicked_on: Threads,
}

impl Hook for PanicsOnFirst {
    fn name(&self) -> &str {
        "panics"
    }

    fn is_remote(&self) -> bool {
        false
    }

    fn admit<'a>(&'a self, request: &'a Request) -> HookFuture<'a> {
        Box::pin(async move {
            if request.task_id == "t00000" {
                self.panicked_on.record();
                panic!("boom on a worker thread");
            }
            Ok(Decision::Admit)
        })
    }
}

/// Receives settle events until `decided` of them are not deferrals, counting every event per
/// task instance.
async fn settle_events(
    harness: &mut Harness,
    decided: usize,
) -> BTreeMap<TaskKey, Vec<Disposition>> {
    let mut events: BTreeMap<TaskKey, Vec<Disposition>> = BTreeMap::new();
    let mut seen = 0;
    while seen < decided {
        let settled = harness.next_settled().await;
        if settled.disposition != Disposition::Deferred {
            seen += 1;
        }
        events
            .entry(settled.key)
            .or_default()
            .push(settled.disposition);
    }
    events
}

/// Waits, polling at most `bound`, until `done` holds.
async fn eventually(bound: Duration, mut done: impl FnMut() -> bool) {
    let polled = tokio::time::timeout(bound, async {
        while !done() {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await;
    assert!(
        polled.is_ok(),
        "the condition did not hold within {bound:?}"
    );
}

#[actix::test]
async fn every_attempt_settles_exactly_once_with_workers_on_two_threads() {
    const ATTEMPTS: usize = 10_000;
    let hook = Arc::new(Admitting::default());
    // A buffer that takes every attempt on one tick: no deferral, so one event per attempt.
    let mut harness = start(
        on_two_threads(16_384, 8),
        supervision(),
        vec![hook.clone() as Arc<dyn Hook>],
    );
    harness.offer_and_tick(tasks(ATTEMPTS)).await;

    let events = settle_events(&mut harness, ATTEMPTS).await;
    let drain = harness.dispatcher.send(Drain).await.expect("alive");

    assert_eq!(events.len(), ATTEMPTS, "a task instance never settled");
    for (key, dispositions) in &events {
        assert_eq!(dispositions, &[Disposition::Executed], "{key}");
    }
    assert!(
        harness.events.try_recv().is_err(),
        "an attempt settled after every one had"
    );
    let launched: BTreeSet<TaskKey> = harness
        .executor
        .calls()
        .into_iter()
        .map(|call| call.task.key.clone())
        .collect();
    assert_eq!(harness.executor.calls().len(), ATTEMPTS);
    assert_eq!(launched.len(), ATTEMPTS, "an attempt was executed twice");
    assert_eq!(harness.minter.minted().len(), ATTEMPTS);
    assert_eq!(harness.store.count(State::Queued), ATTEMPTS);
    assert_eq!(drain.handed_back, 0);
    let threads = hook.threads.seen();
    assert_eq!(threads.len(), 2, "the workers did not use both threads");
    assert!(!threads.contains(&std::thread::current().id()));
}

#[actix::test]
async fn shutdown_drains_the_workers_of_every_thread() {
    let (entered_tx, mut entered) = watch::channel(0);
    let (release, released) = watch::channel(false);
    let hook = Arc::new(Gated {
        threads: Threads::default(),
        entered: entered_tx,
        released,
    });
    let mut harness = start(
        on_two_threads(64, 4),
        supervision(),
        vec![hook.clone() as Arc<dyn Hook>],
    );
    harness.offer_and_tick(tasks(100)).await;
    // The 4 workers each hold an attempt in the hook; 60 wait in the buffer.
    let four_in_hooks = tokio::time::timeout(
        Duration::from_secs(30),
        entered.wait_for(|entered| *entered == 4),
    )
    .await
    .map(|entered| entered.is_ok());
    assert_eq!(
        four_in_hooks,
        Ok(true),
        "the workers did not take 4 attempts"
    );

    let dispatcher = harness.dispatcher.clone();
    let drain = actix::spawn(async move { dispatcher.send(Drain).await });
    // Release the hooks only once the drain has handed the buffer back.
    let store = harness.store.clone();
    eventually(Duration::from_secs(30), || {
        store.snapshot().iter().filter(|row| row.in_flight).count() == 4
    })
    .await;
    release.send_replace(true);
    let drain = drain.await.expect("drain ran").expect("alive");

    assert_eq!(drain.handed_back, 60);
    assert!(!drain.cancelled_in_flight);
    // The drain answered only once the attempts in every thread's hooks had settled.
    assert_eq!(harness.executor.calls().len(), 4);
    assert_eq!(harness.store.count(State::Queued), 4);
    assert_eq!(harness.store.count(State::Scheduled), 96);
    assert!(harness.store.snapshot().iter().all(|row| !row.in_flight));
    // No worker took another attempt once told to stop.
    assert_eq!(*entered.borrow(), 4);
    assert_eq!(hook.threads.seen().len(), 2);
    let events = settle_events(&mut harness, 4).await;
    let executed = events
        .values()
        .filter(|dispositions| dispositions.contains(&Disposition::Executed))
        .count();
    assert_eq!(executed, 4);
}

#[actix::test]
async fn a_panicking_hook_on_a_worker_thread_is_settled_unavailable_and_the_worker_keeps_working() {
    // The panic is on purpose; keep its message out of the test output.
    let quiet = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let hook = Arc::new(PanicsOnFirst::default());
    // One worker, so the worker that recovered is the one that runs the rest.
    let mut harness = start(
        Settings {
            buffer_size: 8,
            workers: 1,
            worker_threads: 1,
            ..settings()
        },
        supervision(),
        vec![hook.clone() as Arc<dyn Hook>],
    );
    harness.offer_and_tick(tasks(4)).await;
    let events = settle_events(&mut harness, 4).await;
    std::panic::set_hook(quiet);

    let panicked = task("t00000").key;
    assert_eq!(events[&panicked], [Disposition::Waiting]);
    let row = harness.store.get(&panicked).expect("stored");
    assert_eq!(row.state, State::Scheduled);
    assert!(!row.in_flight);
    assert!(!row.token_minted);
    assert_eq!(
        row.failure_reason.as_deref(),
        Some("admission hook unavailable: panics: panicked: boom on a worker thread")
    );
    for other in ["t00001", "t00002", "t00003"] {
        assert_eq!(events[&task(other).key], [Disposition::Executed], "{other}");
    }
    let launched: Vec<TaskKey> = harness
        .executor
        .calls()
        .into_iter()
        .map(|call| call.task.key.clone())
        .collect();
    assert!(!launched.contains(&panicked));
    assert_eq!(launched.len(), 3);
    let panicked_on = hook.panicked_on.seen();
    assert_eq!(panicked_on.len(), 1);
    assert!(!panicked_on.contains(&std::thread::current().id()));
}
