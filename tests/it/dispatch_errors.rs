//! Executor errors and token-mint errors through the dispatch pipeline, on the paused clock:
//! each rejects the attempt and spends a dispatch attempt, the backoff doubles from 5 s, and the
//! task fails after Dexaflow's 6 dispatch attempts with the last cause.

use crate::common;
use crate::fakes;

use std::time::Duration;

use common::on_paused_clock;
use dexaflow_admission::dispatch::executor::{Admitted, ExecutorError};
use dexaflow_admission::dispatch::task::State;
use dexaflow_admission::dispatch::{Disposition, MAX_DISPATCH_ATTEMPTS, Reason, dispatch_backoff};
use fakes::{Harness, RecordingExecutor, RecordingMinter, settings, start_with, supervision, task};

/// An executor error that is not backpressure, so that it spends a dispatch attempt.
fn no_command(attempt: &Admitted) -> ExecutorError {
    ExecutorError::NoCommand {
        task: attempt.task.key.task_id.clone(),
    }
}

fn failing_executor() -> Harness {
    start_with(
        settings(),
        supervision(),
        Vec::new(),
        RecordingExecutor::failing(no_command),
        RecordingMinter::default(),
    )
}

fn failing_minter() -> Harness {
    start_with(
        settings(),
        supervision(),
        Vec::new(),
        RecordingExecutor::default(),
        RecordingMinter::failing(),
    )
}

/// Advances the paused clock by `duration`, then runs one tick.
async fn tick_after(harness: &Harness, duration: Duration) {
    tokio::time::advance(duration).await;
    harness.run_tick().await;
}

/// Offers `load` and runs its attempts until every dispatch attempt is spent, each tick exactly
/// when the backoff of the attempt before ends.
async fn spend_every_attempt(harness: &mut Harness) {
    harness.offer_and_tick(vec![task("load")]).await;
    for attempts in 1..MAX_DISPATCH_ATTEMPTS {
        tick_after(harness, dispatch_backoff(attempts)).await;
    }
}

/// Reads the settlement of each dispatch attempt of task `load` and checks what each says: five
/// rejections for `cause`, then a failure with the reason the store recorded, then nothing.
async fn assert_settled_five_rejections_then_a_failure(harness: &mut Harness, cause: &Reason) {
    for attempt in 1..MAX_DISPATCH_ATTEMPTS {
        let settled = harness.next_settled().await;
        assert_eq!(
            (settled.disposition, settled.reason.as_ref()),
            (Disposition::Rejected, Some(cause)),
            "attempt {attempt}"
        );
    }
    let last = harness.next_settled().await;
    let row = harness.store.get(&task("load").key).expect("task stored");
    assert_eq!(last.disposition, Disposition::Failed);
    assert_eq!(
        last.reason.as_ref(),
        row.failure_reason.as_ref().map(|kept| kept.reason())
    );
    assert!(last.reason.is_some());
    let after = harness.events.try_recv();
    assert!(after.is_err(), "nothing settles after the last: {after:?}");
}

fn no_command_reason() -> Reason {
    Reason::Executor {
        cause: "task load has no command".to_owned(),
    }
}

fn empty_secret_reason() -> Reason {
    Reason::Token {
        task_instance_id: "acme.etl.r1.load".to_owned(),
        error: "agent token secret is empty".to_owned(),
    }
}

#[test]
fn executor_error_rejects_the_attempt_and_spends_one_dispatch_attempt() {
    on_paused_clock(async {
        let mut harness = failing_executor();

        harness.offer_and_tick(vec![task("load")]).await;

        let settled = harness.next_settled().await;
        let row = harness.store.get(&task("load").key).expect("task stored");
        assert_eq!(settled.disposition, Disposition::Rejected);
        assert_eq!(row.state, State::Scheduled);
        assert_eq!(row.dispatch_attempts, 1);
        let reason = row.failure_reason.expect("a rejection has a reason");
        assert_eq!(reason.reason(), &no_command_reason());
        assert_eq!(settled.reason.as_ref(), Some(reason.reason()));
        assert_eq!(harness.executor.calls().len(), 1);
        assert_eq!(row.placement, None);
    });
}

#[test]
fn rejected_attempt_is_not_offered_again_before_its_5_second_backoff_ends() {
    on_paused_clock(async {
        let harness = failing_executor();
        harness.offer_and_tick(vec![task("load")]).await;

        tick_after(&harness, Duration::from_millis(4_999)).await;
        let before = harness.executor.calls().len();
        tick_after(&harness, Duration::from_millis(1)).await;

        assert_eq!(before, 1);
        assert_eq!(harness.executor.calls().len(), 2);
    });
}

#[test]
fn second_rejection_backs_off_10_seconds() {
    on_paused_clock(async {
        let harness = failing_executor();
        harness.offer_and_tick(vec![task("load")]).await;
        tick_after(&harness, Duration::from_secs(5)).await;

        tick_after(&harness, Duration::from_millis(9_999)).await;
        let before = harness.store.get(&task("load").key).expect("task stored");
        tick_after(&harness, Duration::from_millis(1)).await;
        let after = harness.store.get(&task("load").key).expect("task stored");

        assert_eq!(before.dispatch_attempts, 2);
        assert_eq!(after.dispatch_attempts, 3);
        assert_eq!(harness.executor.calls().len(), 3);
    });
}

#[test]
fn task_fails_after_6_executor_errors_naming_the_last_and_is_not_offered_again() {
    on_paused_clock(async {
        let mut harness = failing_executor();

        spend_every_attempt(&mut harness).await;
        tick_after(&harness, Duration::from_secs(600)).await;

        assert_settled_five_rejections_then_a_failure(&mut harness, &no_command_reason()).await;
        let row = harness.store.get(&task("load").key).expect("task stored");
        assert_eq!(row.state, State::Failed);
        assert_eq!(
            row.failure_reason.as_deref(),
            Some("dispatch_failed after 6 attempts: task load has no command")
        );
        assert_eq!(harness.executor.calls().len(), 6);
        // The executor was only reached with a token: each attempt minted one.
        assert!(row.token_minted);
        assert_eq!(harness.minter.minted().len(), 6);
    });
}

#[test]
fn token_mint_error_rejects_the_attempt_without_calling_the_executor() {
    on_paused_clock(async {
        let mut harness = failing_minter();

        harness.offer_and_tick(vec![task("load")]).await;

        let settled = harness.next_settled().await;
        let row = harness.store.get(&task("load").key).expect("task stored");
        assert_eq!(settled.disposition, Disposition::Rejected);
        assert_eq!(row.state, State::Scheduled);
        assert_eq!(row.dispatch_attempts, 1);
        assert_eq!(
            row.failure_reason.as_deref(),
            Some("issuing agent token for acme.etl.r1.load: agent token secret is empty")
        );
        assert!(!row.token_minted);
        assert_eq!(harness.minter.minted().len(), 1);
        assert!(harness.executor.calls().is_empty());
    });
}

#[test]
fn token_mint_error_backs_off_5_seconds_then_10() {
    on_paused_clock(async {
        let harness = failing_minter();
        harness.offer_and_tick(vec![task("load")]).await;

        tick_after(&harness, Duration::from_millis(4_999)).await;
        let before_first = harness.minter.minted().len();
        tick_after(&harness, Duration::from_millis(1)).await;
        tick_after(&harness, Duration::from_millis(9_999)).await;
        let before_second = harness.minter.minted().len();
        tick_after(&harness, Duration::from_millis(1)).await;

        assert_eq!(before_first, 1);
        assert_eq!(before_second, 2);
        assert_eq!(harness.minter.minted().len(), 3);
        assert!(harness.executor.calls().is_empty());
    });
}

#[test]
fn task_fails_after_6_token_mint_errors_with_no_token_and_no_executor_call() {
    on_paused_clock(async {
        let mut harness = failing_minter();

        spend_every_attempt(&mut harness).await;
        tick_after(&harness, Duration::from_secs(600)).await;

        assert_settled_five_rejections_then_a_failure(&mut harness, &empty_secret_reason()).await;
        let row = harness.store.get(&task("load").key).expect("task stored");
        assert_eq!(row.state, State::Failed);
        assert_eq!(
            row.failure_reason.as_deref(),
            Some(
                "dispatch_failed after 6 attempts: issuing agent token for acme.etl.r1.load: \
                 agent token secret is empty"
            )
        );
        assert!(!row.token_minted);
        assert_eq!(harness.minter.minted().len(), 6);
        assert!(harness.executor.calls().is_empty());
    });
}
