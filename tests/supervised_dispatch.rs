//! Broken hooks on synchronous and on buffered dispatch, the full buffer, fail-open,
//! cancellation and drain (ADR 0100 §5).

mod common;
mod fakes;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::FakeHook;
use dexaflow_admission::admission::{Decision, Hook, HookError, HookFuture, Request};
use dexaflow_admission::dispatch::task::{State, Task};
use dexaflow_admission::dispatch::{Disposition, Drain, Offer, Settings, Tick};
use dexaflow_admission::supervise::BreakerState;
use fakes::{Harness, settings, start, supervision, task};
use tokio::sync::Semaphore;

/// How a broken hook breaks.
#[derive(Debug, Clone, Copy)]
enum Breakage {
    Error,
    Timeout,
    Panic,
}

/// A hook that breaks the same way on every call and counts its calls.
struct Broken {
    breakage: Breakage,
    calls: AtomicUsize,
}

impl Hook for Broken {
    fn name(&self) -> &str {
        "quota"
    }

    fn admit<'a>(&'a self, _: &'a Request) -> HookFuture<'a> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let breakage = self.breakage;
        Box::pin(async move {
            match breakage {
                Breakage::Error => Err(HookError::Failed("quota service said 503\n".to_owned())),
                Breakage::Timeout => std::future::pending().await,
                Breakage::Panic => panic!("index out of bounds: the len is 0 but the index is 0"),
            }
        })
    }
}

fn buffered() -> Settings {
    Settings {
        buffer_size: 8,
        workers: 2,
        ..settings()
    }
}

async fn dispatch_once_with_broken_hook(
    settings: Settings,
    breakage: Breakage,
) -> (Harness, Arc<Broken>) {
    tokio::time::pause();
    let hook = Arc::new(Broken {
        breakage,
        calls: AtomicUsize::new(0),
    });
    let mut harness = start(settings, supervision(), vec![hook.clone() as Arc<dyn Hook>]);
    harness
        .dispatcher
        .send(Offer(vec![task("load")]))
        .await
        .expect("alive")
        .expect("takes offers");
    harness.dispatcher.send(Tick).await.expect("alive");
    let settled = harness.next_settled().await;
    assert_eq!(settled.disposition, Disposition::Waiting);
    (harness, hook)
}

fn assert_unavailable(harness: &Harness, hook: &Broken, cause: &str) {
    let row = harness.store.get(&task("load").key).expect("task stored");
    assert_eq!(row.state, State::Scheduled);
    assert_eq!(
        row.failure_reason.as_deref(),
        Some(format!("admission hook unavailable: quota: {cause}").as_str())
    );
    assert_eq!(row.dispatch_attempts, 0);
    assert!(!row.token_minted);
    assert!(harness.minter.minted().is_empty());
    assert!(harness.executor.calls().is_empty());
    assert_eq!(hook.calls.load(Ordering::SeqCst), 1);
    assert_eq!(harness.gate(0).consecutive_failures(), 1);
}

#[actix::test]
async fn hook_error_on_synchronous_dispatch_leaves_the_attempt_waiting_with_the_cleaned_error() {
    let (harness, hook) = dispatch_once_with_broken_hook(settings(), Breakage::Error).await;
    assert_unavailable(&harness, &hook, "quota service said 503");
}

#[actix::test]
async fn hook_error_on_buffered_dispatch_leaves_the_attempt_waiting_with_the_cleaned_error() {
    let (harness, hook) = dispatch_once_with_broken_hook(buffered(), Breakage::Error).await;
    assert_unavailable(&harness, &hook, "quota service said 503");
}

#[actix::test]
async fn hook_timeout_on_synchronous_dispatch_leaves_the_attempt_waiting() {
    let (harness, hook) = dispatch_once_with_broken_hook(settings(), Breakage::Timeout).await;
    assert_unavailable(&harness, &hook, "timed out after 500ms");
}

#[actix::test]
async fn hook_timeout_on_buffered_dispatch_leaves_the_attempt_waiting() {
    let (harness, hook) = dispatch_once_with_broken_hook(buffered(), Breakage::Timeout).await;
    assert_unavailable(&harness, &hook, "timed out after 500ms");
}

#[actix::test]
async fn hook_panic_on_synchronous_dispatch_leaves_the_attempt_waiting_and_the_dispatcher_running()
{
    let (harness, hook) = dispatch_once_with_broken_hook(settings(), Breakage::Panic).await;
    assert_unavailable(
        &harness,
        &hook,
        "panicked: index out of bounds: the len is 0 but the index is 0",
    );
    assert!(harness.dispatcher.send(Tick).await.is_ok());
}

#[actix::test]
async fn hook_panic_on_buffered_dispatch_leaves_the_attempt_waiting_and_the_worker_running() {
    let (mut harness, hook) = dispatch_once_with_broken_hook(buffered(), Breakage::Panic).await;
    assert_unavailable(
        &harness,
        &hook,
        "panicked: index out of bounds: the len is 0 but the index is 0",
    );
    harness.dispatcher.send(Tick).await.expect("alive");
    assert_eq!(
        harness.next_settled().await.disposition,
        Disposition::Waiting
    );
    assert_eq!(hook.calls.load(Ordering::SeqCst), 2);
}

#[actix::test]
async fn chain_budget_caps_the_timeout_of_each_call() {
    tokio::time::pause();
    let slow = Arc::new(Broken {
        breakage: Breakage::Timeout,
        calls: AtomicUsize::new(0),
    });
    let mut supervision = supervision();
    supervision.chain_timeout = Duration::from_millis(300);
    let mut harness = start(settings(), supervision, vec![slow as Arc<dyn Hook>]);

    harness
        .dispatcher
        .send(Offer(vec![task("load")]))
        .await
        .expect("alive")
        .expect("offers");
    harness.dispatcher.send(Tick).await.expect("alive");
    harness.next_settled().await;

    let row = harness.store.get(&task("load").key).expect("task stored");
    assert_eq!(
        row.failure_reason.as_deref(),
        Some("admission hook unavailable: quota: timed out after 300ms")
    );
}

#[actix::test]
async fn open_breaker_skips_the_hook_and_the_attempt_waits_without_a_timeout() {
    tokio::time::pause();
    let hook = Arc::new(Broken {
        breakage: Breakage::Timeout,
        calls: AtomicUsize::new(0),
    });
    let mut supervision = supervision();
    supervision.breaker.failures = 1;
    let mut harness = start(settings(), supervision, vec![hook.clone() as Arc<dyn Hook>]);
    harness
        .dispatcher
        .send(Offer(vec![task("a"), task("b")]))
        .await
        .expect("alive")
        .expect("offers");

    let started = tokio::time::Instant::now();
    harness.dispatcher.send(Tick).await.expect("alive");
    let elapsed = started.elapsed();
    harness.next_settled().await;
    harness.next_settled().await;

    assert_eq!(hook.calls.load(Ordering::SeqCst), 1);
    // One timeout (tokio's timer rounds up to the next millisecond), not two.
    assert!(
        elapsed >= Duration::from_millis(500) && elapsed < Duration::from_millis(600),
        "{elapsed:?}"
    );
    let skipped = harness.store.get(&task("b").key).expect("stored");
    assert_eq!(
        skipped.failure_reason.as_deref(),
        Some("admission hook unavailable: quota: skipped while its breaker is open")
    );
    assert_eq!(
        harness.gate(0).settled_state().await.expect("alive"),
        BreakerState::Open
    );
}

#[actix::test]
async fn fail_open_admits_the_attempt_of_a_broken_hook_unchanged() {
    tokio::time::pause();
    let hook = Arc::new(Broken {
        breakage: Breakage::Error,
        calls: AtomicUsize::new(0),
    });
    let mut supervision = supervision();
    supervision.fail_open = true;
    let mut harness = start(settings(), supervision, vec![hook as Arc<dyn Hook>]);

    harness
        .dispatcher
        .send(Offer(vec![task("load")]))
        .await
        .expect("alive")
        .expect("offers");
    harness.dispatcher.send(Tick).await.expect("alive");

    assert_eq!(
        harness.next_settled().await.disposition,
        Disposition::Executed
    );
    let calls = harness.executor.calls();
    assert_eq!(calls.len(), 1);
    assert!(calls[0].execution.node_selector.is_empty());
    assert_eq!(harness.minter.minted().len(), 1);
    assert_eq!(harness.gate(0).consecutive_failures(), 1);
}

#[actix::test]
async fn fail_open_never_admits_a_held_attempt() {
    let mut supervision = supervision();
    supervision.fail_open = true;
    let hook = FakeHook::holding("freeze", "frozen").shared();
    let mut harness = start(settings(), supervision, vec![hook as Arc<dyn Hook>]);

    harness
        .dispatcher
        .send(Offer(vec![task("load")]))
        .await
        .expect("alive")
        .expect("offers");
    harness.dispatcher.send(Tick).await.expect("alive");

    assert_eq!(
        harness.next_settled().await.disposition,
        Disposition::Waiting
    );
    assert!(harness.executor.calls().is_empty());
    assert!(harness.minter.minted().is_empty());
}

/// A hook that admits once the test adds a permit, and counts its calls.
struct Gated {
    calls: AtomicUsize,
    permits: Semaphore,
}

impl Hook for Gated {
    fn name(&self) -> &str {
        "gated"
    }

    fn admit<'a>(&'a self, _: &'a Request) -> HookFuture<'a> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            self.permits.acquire().await.expect("open").forget();
            Ok(Decision::Admit)
        })
    }
}

fn gated() -> Arc<Gated> {
    Arc::new(Gated {
        calls: AtomicUsize::new(0),
        permits: Semaphore::new(0),
    })
}

#[actix::test]
async fn full_buffer_defers_the_attempt_without_spending_a_dispatch_attempt() {
    let hook = gated();
    let settings = Settings {
        buffer_size: 1,
        workers: 1,
        ..settings()
    };
    let mut harness = start(settings, supervision(), vec![hook.clone() as Arc<dyn Hook>]);
    let tasks: Vec<Task> = ["a", "b", "c"].into_iter().map(task).collect();
    harness
        .dispatcher
        .send(Offer(tasks))
        .await
        .expect("alive")
        .expect("offers");

    let report = harness.dispatcher.send(Tick).await.expect("alive");
    let deferred = harness.next_settled().await;

    assert_eq!(report.offered, 1);
    assert_eq!(report.deferred, 1);
    assert_eq!(deferred.key, task("b").key);
    assert_eq!(deferred.disposition, Disposition::Deferred);
    for id in ["b", "c"] {
        let row = harness.store.get(&task(id).key).expect("stored");
        assert_eq!(row.state, State::Scheduled);
        assert_eq!(row.dispatch_attempts, 0);
        assert!(!row.in_flight);
        assert!(!row.token_minted);
    }
}

#[actix::test]
async fn deferred_attempt_is_dispatched_on_a_later_tick() {
    let hook = gated();
    hook.permits.add_permits(10);
    let settings = Settings {
        buffer_size: 1,
        workers: 1,
        ..settings()
    };
    let mut harness = start(settings, supervision(), vec![hook as Arc<dyn Hook>]);
    harness
        .dispatcher
        .send(Offer(vec![task("a"), task("b")]))
        .await
        .expect("alive")
        .expect("offers");

    harness.dispatcher.send(Tick).await.expect("alive");
    let first = [harness.next_settled().await, harness.next_settled().await];
    harness.dispatcher.send(Tick).await.expect("alive");
    let second = harness.next_settled().await;

    assert!(first.iter().any(
        |settled| settled.key == task("b").key && settled.disposition == Disposition::Deferred
    ));
    assert!(first.iter().any(
        |settled| settled.key == task("a").key && settled.disposition == Disposition::Executed
    ));
    assert_eq!(
        (second.key, second.disposition),
        (task("b").key, Disposition::Executed)
    );
    assert_eq!(
        harness
            .store
            .get(&task("b").key)
            .map(|row| row.dispatch_attempts),
        Some(0)
    );
    assert_eq!(harness.executor.calls().len(), 2);
}

#[actix::test]
async fn drain_hands_back_buffered_attempts_and_lets_the_one_in_flight_finish() {
    let hook = gated();
    let settings = Settings {
        buffer_size: 4,
        workers: 1,
        ..settings()
    };
    let mut harness = start(settings, supervision(), vec![hook.clone() as Arc<dyn Hook>]);
    let tasks: Vec<Task> = ["a", "b", "c"].into_iter().map(task).collect();
    harness
        .dispatcher
        .send(Offer(tasks))
        .await
        .expect("alive")
        .expect("offers");
    harness.dispatcher.send(Tick).await.expect("alive");
    while hook.calls.load(Ordering::SeqCst) == 0 {
        tokio::task::yield_now().await;
    }

    let drain = harness.dispatcher.send(Drain);
    hook.permits.add_permits(1);
    let report = drain.await.expect("alive");

    assert_eq!(report.handed_back, 2);
    assert!(!report.cancelled_in_flight);
    assert_eq!(
        harness.store.get(&task("a").key).map(|row| row.state),
        Some(State::Queued)
    );
    for id in ["b", "c"] {
        let row = harness.store.get(&task(id).key).expect("stored");
        assert_eq!(
            (row.state, row.in_flight, row.token_minted),
            (State::Scheduled, false, false)
        );
    }
    assert_eq!(hook.calls.load(Ordering::SeqCst), 1);
    let mut dispositions = Vec::new();
    while let Ok(settled) = harness.events.try_recv() {
        dispositions.push(settled.disposition);
    }
    assert_eq!(
        dispositions
            .iter()
            .filter(|d| **d == Disposition::Deferred)
            .count(),
        2
    );
    assert_eq!(
        dispositions
            .iter()
            .filter(|d| **d == Disposition::Executed)
            .count(),
        1
    );
}

#[actix::test]
async fn drain_past_its_timeout_cancels_the_call_which_counts_nothing() {
    tokio::time::pause();
    let hook = gated();
    let settings = Settings {
        buffer_size: 4,
        workers: 1,
        drain_timeout: Duration::from_millis(100),
        ..settings()
    };
    let mut harness = start(settings, supervision(), vec![hook.clone() as Arc<dyn Hook>]);
    harness
        .dispatcher
        .send(Offer(vec![task("a")]))
        .await
        .expect("alive")
        .expect("offers");
    harness.dispatcher.send(Tick).await.expect("alive");
    while hook.calls.load(Ordering::SeqCst) == 0 {
        tokio::task::yield_now().await;
    }

    let report = harness.dispatcher.send(Drain).await.expect("alive");

    assert!(report.cancelled_in_flight);
    let row = harness.store.get(&task("a").key).expect("stored");
    assert_eq!(
        (row.state, row.in_flight, row.token_minted),
        (State::Scheduled, false, false)
    );
    assert_eq!(row.failure_reason, None);
    assert_eq!(harness.gate(0).consecutive_failures(), 0);
    assert_eq!(
        harness.next_settled().await.disposition,
        Disposition::Cancelled
    );
    assert!(harness.executor.calls().is_empty());
}

#[actix::test]
async fn dispatcher_takes_no_offers_after_drain() {
    let harness = start(settings(), supervision(), Vec::new());

    harness.dispatcher.send(Drain).await.expect("alive");
    let offered = harness
        .dispatcher
        .send(Offer(vec![task("late")]))
        .await
        .expect("alive");

    assert!(offered.is_err());
    assert!(harness.store.get(&task("late").key).is_none());
}

/// Holds tasks `a` and `b` for ever, admits every other.
struct HoldsFirstTwo;

impl Hook for HoldsFirstTwo {
    fn name(&self) -> &str {
        "holds-first-two"
    }

    fn admit<'a>(&'a self, request: &'a Request) -> HookFuture<'a> {
        let held = matches!(request.task_id.as_str(), "a" | "b");
        Box::pin(async move {
            Ok(if held {
                Decision::Hold("frozen".to_owned())
            } else {
                Decision::Admit
            })
        })
    }
}

#[actix::test]
async fn attempts_held_on_every_tick_do_not_keep_later_attempts_from_the_buffer() {
    let settings = Settings {
        buffer_size: 2,
        workers: 1,
        ..settings()
    };
    let mut harness = start(
        settings,
        supervision(),
        vec![Arc::new(HoldsFirstTwo) as Arc<dyn Hook>],
    );
    let tasks: Vec<Task> = ["a", "b", "c", "d"].into_iter().map(task).collect();
    harness
        .dispatcher
        .send(Offer(tasks))
        .await
        .expect("alive")
        .expect("offers");

    let mut offers = 0;
    for _ in 0..4 {
        let report = harness.dispatcher.send(Tick).await.expect("alive");
        for _ in 0..report.offered + report.deferred {
            harness.next_settled().await;
        }
        offers += report.offered;
    }

    for id in ["c", "d"] {
        assert_eq!(
            harness.store.get(&task(id).key).map(|row| row.state),
            Some(State::Queued),
            "{id}"
        );
    }
    for id in ["a", "b"] {
        let row = harness.store.get(&task(id).key).expect("stored");
        assert_eq!((row.state, row.token_minted), (State::Scheduled, false));
    }
    assert!(offers >= 4);
}

#[actix::test]
async fn deferred_attempt_is_the_first_the_next_tick_offers() {
    let hook = gated();
    hook.permits.add_permits(10);
    let settings = Settings {
        buffer_size: 1,
        workers: 1,
        ..settings()
    };
    let mut harness = start(settings, supervision(), vec![hook as Arc<dyn Hook>]);
    let tasks: Vec<Task> = ["a", "b", "c"].into_iter().map(task).collect();
    harness
        .dispatcher
        .send(Offer(tasks))
        .await
        .expect("alive")
        .expect("offers");

    harness.dispatcher.send(Tick).await.expect("alive");
    let first = [harness.next_settled().await, harness.next_settled().await];
    harness.dispatcher.send(Tick).await.expect("alive");
    let second = [harness.next_settled().await, harness.next_settled().await];

    assert!(
        first
            .iter()
            .any(|settled| (settled.key.clone(), settled.disposition)
                == (task("b").key, Disposition::Deferred))
    );
    assert!(
        second
            .iter()
            .any(|settled| (settled.key.clone(), settled.disposition)
                == (task("b").key, Disposition::Executed))
    );
    assert!(
        second
            .iter()
            .any(|settled| (settled.key.clone(), settled.disposition)
                == (task("c").key, Disposition::Deferred))
    );
}
