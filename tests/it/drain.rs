//! Draining a synchronous dispatcher (`buffer_size: 0`) with an attempt in flight on its tick,
//! on the paused clock: the attempt finishes within the drain timeout or is cancelled past it,
//! the rest of the tick is handed back, and ticks after drain or during a running tick are
//! skipped.

use crate::common;
use crate::fakes;

use std::sync::Arc;
use std::time::Duration;

use common::{FakeHook, Gated, on_paused_clock};
use dexaflow_admission::admission::Hook;
use dexaflow_admission::dispatch::task::State;
use dexaflow_admission::dispatch::{Disposition, Drain, Settings, Tick};
use fakes::{Harness, settings, start, supervision, task};

/// A synchronous dispatcher draining within 100 ms, whose chain is an admitting hook then a
/// gated one, with `tasks` offered and the first of them in flight on a running tick, held by
/// the gated hook.
async fn in_flight(tasks: &[&str]) -> (Harness, Arc<FakeHook>, Arc<Gated>) {
    let settings = Settings {
        drain_timeout: Duration::from_millis(100),
        ..settings()
    };
    let first = FakeHook::admitting("quota").shared();
    let gated = Gated::admitting();
    let hooks: Vec<Arc<dyn Hook>> = vec![first.clone(), gated.clone()];
    let harness = start(settings, supervision(), hooks);
    harness
        .offer(tasks.iter().copied().map(task).collect())
        .await;
    // The tick runs on the dispatcher, not on this future: sending queues it.
    let _tick = harness.dispatcher.send(Tick);
    gated.until_called().await;
    (harness, first, gated)
}

#[test]
fn attempt_in_flight_finishes_when_it_answers_within_the_drain_timeout() {
    on_paused_clock(async {
        let (mut harness, _, gated) = in_flight(&["a"]).await;

        let drain = harness.dispatcher.send(Drain);
        gated.release(1);
        let report = drain.await.expect("dispatcher alive");

        assert!(!report.cancelled_in_flight);
        let row = harness.store.get(&task("a").key).expect("stored");
        assert_eq!((row.state, row.token_minted), (State::Queued, true));
        assert_eq!(harness.executor.calls().len(), 1);
        assert_eq!(
            harness.next_settled().await.disposition,
            Disposition::Executed
        );
    });
}

#[test]
fn attempt_in_flight_past_the_drain_timeout_is_cancelled_and_handed_back() {
    on_paused_clock(async {
        let (mut harness, _, _) = in_flight(&["a"]).await;

        let report = harness.dispatcher.send(Drain).await.expect("alive");

        assert!(report.cancelled_in_flight);
        assert_eq!(
            harness.next_settled().await.disposition,
            Disposition::Cancelled
        );
        let row = harness.store.get(&task("a").key).expect("stored");
        assert_eq!(
            (row.state, row.in_flight, row.token_minted),
            (State::Scheduled, false, false)
        );
        assert_eq!(row.failure_reason, None);
        assert_eq!(row.dispatch_attempts, 0);
        assert!(harness.minter.minted().is_empty());
        assert!(harness.executor.calls().is_empty());
    });
}

#[test]
fn cancelled_attempt_is_counted_by_no_breaker() {
    on_paused_clock(async {
        let (harness, first, gated) = in_flight(&["a"]).await;

        harness.dispatcher.send(Drain).await.expect("alive");

        assert_eq!((first.calls(), gated.calls()), (1, 1));
        assert_eq!(harness.gate(0).consecutive_failures(), 0);
        assert_eq!(harness.gate(1).consecutive_failures(), 0);
    });
}

#[test]
fn rest_of_the_tick_is_handed_back_untouched_when_drain_begins() {
    on_paused_clock(async {
        let (harness, first, gated) = in_flight(&["a", "b", "c"]).await;

        let drain = harness.dispatcher.send(Drain);
        gated.release(3);
        drain.await.expect("alive");

        for id in ["b", "c"] {
            let row = harness.store.get(&task(id).key).expect("stored");
            assert_eq!(
                (row.state, row.in_flight, row.token_minted),
                (State::Scheduled, false, false)
            );
            assert_eq!(row.failure_reason, None);
        }
        assert_eq!((first.calls(), gated.calls()), (1, 1));
        assert_eq!(harness.executor.calls().len(), 1);
    });
}

#[test]
fn rest_of_the_tick_is_handed_back_when_drain_cancels_the_attempt_in_flight() {
    on_paused_clock(async {
        let (harness, first, gated) = in_flight(&["a", "b"]).await;

        let report = harness.dispatcher.send(Drain).await.expect("alive");

        assert!(report.cancelled_in_flight);
        let row = harness.store.get(&task("b").key).expect("stored");
        assert_eq!(
            (row.state, row.in_flight, row.token_minted),
            (State::Scheduled, false, false)
        );
        assert_eq!((first.calls(), gated.calls()), (1, 1));
        assert!(harness.executor.calls().is_empty());
    });
}

#[test]
fn tick_after_drain_is_skipped_and_dispatches_nothing() {
    on_paused_clock(async {
        let harness = start(settings(), supervision(), Vec::new());
        harness.offer(vec![task("a")]).await;
        harness.dispatcher.send(Drain).await.expect("alive");

        let report = harness.run_tick().await;

        assert!(report.skipped);
        assert_eq!(report.offered, 0);
        let row = harness.store.get(&task("a").key).expect("stored");
        assert_eq!((row.state, row.in_flight), (State::Scheduled, false));
        assert!(harness.minter.minted().is_empty());
        assert!(harness.executor.calls().is_empty());
    });
}

#[test]
fn tick_during_a_running_tick_is_skipped_and_calls_no_hook_again() {
    on_paused_clock(async {
        let (harness, first, gated) = in_flight(&["a", "b"]).await;

        let second = harness.run_tick().await;

        assert!(second.skipped);
        assert_eq!(second.offered, 0);
        assert_eq!((first.calls(), gated.calls()), (1, 1));
        let row = harness.store.get(&task("b").key).expect("stored");
        assert_eq!((row.state, row.token_minted), (State::Scheduled, false));
        assert!(harness.executor.calls().is_empty());
    });
}
