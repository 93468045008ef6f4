//! The dispatch path on synchronous dispatch (`buffer_size: 0`): ADR 0100 §2, §4, §5, §6.

use crate::common;
use crate::fakes;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use common::{FakeHook, node_selector};
use dexaflow_admission::admission::{Changes, Hook, HookError};
use dexaflow_admission::dispatch::placement::PodKind;
use dexaflow_admission::dispatch::task::State;
use fakes::{settings, start, supervision, task, unit};

fn hooks(list: Vec<Arc<FakeHook>>) -> Vec<Arc<dyn Hook>> {
    list.into_iter().map(|hook| hook as Arc<dyn Hook>).collect()
}

#[actix::test]
async fn attempt_refused_by_a_builtin_check_gets_no_token_no_placement_and_no_executor_call() {
    let mut settings = settings();
    settings.unit = Some(unit());
    let harness = start(settings, supervision(), Vec::new());
    let mut big = task("aggregate");
    big.resources.requests.cpu = Some("4".to_owned());

    harness.offer_and_tick(vec![big.clone()]).await;

    let row = harness.store.get(&big.key).expect("task stored");
    assert_eq!(row.state, State::Failed);
    let reason = row.failure_reason.expect("a refusal has a reason");
    assert!(
        reason.starts_with(
            "dispatch refused: task \"aggregate\" declares resources larger than its size"
        ),
        "{reason}"
    );
    assert!(harness.minter.minted().is_empty());
    assert!(!row.token_minted);
    assert_eq!(row.placement, None);
    assert!(harness.executor.calls().is_empty());
}

#[actix::test]
async fn attempt_refused_by_a_hook_gets_no_token_no_placement_and_no_executor_call() {
    let hook = FakeHook::refusing("budget", "tenant acme is over budget").shared();
    let harness = start(settings(), supervision(), hooks(vec![hook.clone()]));

    harness.offer_and_tick(vec![task("load")]).await;

    let row = harness.store.get(&task("load").key).expect("task stored");
    assert_eq!(row.state, State::Failed);
    assert_eq!(
        row.failure_reason.as_deref(),
        Some("dispatch refused: admission: tenant acme is over budget")
    );
    assert_eq!(hook.calls(), 1);
    assert!(harness.minter.minted().is_empty());
    assert_eq!(row.placement, None);
    assert!(harness.executor.calls().is_empty());
}

#[actix::test]
async fn refused_attempt_is_not_offered_again() {
    let hook = FakeHook::refusing("budget", "over budget").shared();
    let harness = start(settings(), supervision(), hooks(vec![hook.clone()]));

    harness.offer_and_tick(vec![task("load")]).await;
    harness.run_tick().await;

    assert_eq!(hook.calls(), 1);
    assert_eq!(
        harness
            .store
            .get(&task("load").key)
            .map(|row| row.dispatch_attempts),
        Some(0)
    );
}

#[actix::test]
async fn held_attempt_is_offered_again_without_spending_dispatch_attempts() {
    let hook = FakeHook::holding("freeze", "quarter-end close").shared();
    let harness = start(settings(), supervision(), hooks(vec![hook.clone()]));

    harness.offer_and_tick(vec![task("load")]).await;
    harness.run_tick().await;

    let row = harness.store.get(&task("load").key).expect("task stored");
    assert_eq!(hook.calls(), 2);
    assert_eq!(row.state, State::Scheduled);
    assert_eq!(
        row.failure_reason.as_deref(),
        Some("admission hold: quarter-end close")
    );
    assert_eq!(row.dispatch_attempts, 0);
    assert!(harness.minter.minted().is_empty());
    assert!(harness.executor.calls().is_empty());
}

#[actix::test]
async fn held_attempt_fails_with_its_reason_once_the_retry_window_is_spent() {
    tokio::time::pause();
    let hook = FakeHook::holding("freeze", "quarter-end close").shared();
    let harness = start(settings(), supervision(), hooks(vec![hook.clone()]));

    harness.offer_and_tick(vec![task("load")]).await;
    tokio::time::advance(Duration::from_secs(15 * 60 - 1)).await;
    harness.run_tick().await;
    let before = harness.store.get(&task("load").key).expect("task stored");
    tokio::time::advance(Duration::from_secs(1)).await;
    harness.run_tick().await;
    let after = harness.store.get(&task("load").key).expect("task stored");

    assert_eq!(before.state, State::Scheduled);
    assert_eq!(after.state, State::Failed);
    assert_eq!(
        after.failure_reason.as_deref(),
        Some("dispatch_failed: admission hold: quarter-end close")
    );
    assert_eq!(after.dispatch_attempts, 0);
    assert!(harness.minter.minted().is_empty());
    assert!(harness.executor.calls().is_empty());
}

#[actix::test]
async fn broken_hook_fails_the_attempt_as_dispatch_failed_naming_the_hook_after_the_window() {
    tokio::time::pause();
    let hook =
        FakeHook::failing("quota", HookError::Failed("connection refused".to_owned())).shared();
    let harness = start(settings(), supervision(), hooks(vec![hook.clone()]));

    harness.offer_and_tick(vec![task("load")]).await;
    let waiting = harness.store.get(&task("load").key).expect("task stored");
    tokio::time::advance(Duration::from_secs(15 * 60)).await;
    harness.run_tick().await;
    let failed = harness.store.get(&task("load").key).expect("task stored");

    assert_eq!(waiting.state, State::Scheduled);
    assert_eq!(
        waiting.failure_reason.as_deref(),
        Some("admission hook unavailable: quota: connection refused")
    );
    assert_eq!(failed.state, State::Failed);
    assert_eq!(
        failed.failure_reason.as_deref(),
        Some("dispatch_failed: admission hook unavailable: quota: connection refused")
    );
    assert_eq!(failed.dispatch_attempts, 0);
    assert!(harness.minter.minted().is_empty());
}

#[actix::test]
async fn hook_changes_are_applied_before_placement_so_a_node_selector_takes_a_dedicated_pod() {
    let hook = FakeHook::changing("gpu", node_selector("pool", "gpu")).shared();
    let harness = start(settings(), supervision(), hooks(vec![hook]));

    harness.offer_and_tick(vec![task("fit")]).await;

    let calls = harness.executor.calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(
        calls[0]
            .execution
            .node_selector
            .get("pool")
            .map(String::as_str),
        Some("gpu")
    );
    assert!(
        matches!(calls[0].placement, PodKind::Dedicated(_)),
        "{:?}",
        calls[0].placement
    );
    assert_eq!(harness.minter.minted().len(), 1);
}

#[actix::test]
async fn attempt_no_hook_changed_is_placed_exactly_as_with_no_hook() {
    let with_hook = start(
        settings(),
        supervision(),
        hooks(vec![FakeHook::admitting("noop").shared()]),
    );
    let without = start(settings(), supervision(), Vec::new());

    with_hook.offer_and_tick(vec![task("load")]).await;
    without.offer_and_tick(vec![task("load")]).await;

    let (changed, plain) = (with_hook.executor.calls(), without.executor.calls());
    assert_eq!(changed.len(), 1);
    assert_eq!(changed[0].placement, PodKind::Warm);
    assert_eq!(changed[0].placement, plain[0].placement);
    assert_eq!(changed[0].execution, plain[0].execution);
    assert_eq!(changed[0].resources, plain[0].resources);
}

#[actix::test]
async fn hook_set_service_account_outside_the_allowlist_refuses_the_attempt_naming_the_hook() {
    let mut settings = settings();
    settings.allowlist.service_accounts = Some(BTreeSet::from(["etl-runner".to_owned()]));
    let changes = Changes {
        service_account: Some("cluster-admin".to_owned()),
        ..Changes::default()
    };
    let harness = start(
        settings,
        supervision(),
        hooks(vec![FakeHook::changing("escalate", changes).shared()]),
    );

    harness.offer_and_tick(vec![task("load")]).await;

    let row = harness.store.get(&task("load").key).expect("task stored");
    assert_eq!(row.state, State::Failed);
    assert_eq!(
        row.failure_reason.as_deref(),
        Some(
            "dispatch refused: admission: hook \"escalate\": service account \"cluster-admin\" is not in execution_allowlist.service_accounts"
        )
    );
    assert!(harness.minter.minted().is_empty());
    assert!(harness.executor.calls().is_empty());
}

#[actix::test]
async fn hook_may_set_the_default_task_service_account_outside_the_allowlist() {
    let mut settings = settings();
    settings.allowlist.service_accounts = Some(BTreeSet::from(["etl-runner".to_owned()]));
    let changes = Changes {
        service_account: Some("dexaflow-task".to_owned()),
        ..Changes::default()
    };
    let harness = start(
        settings,
        supervision(),
        hooks(vec![FakeHook::changing("reset", changes).shared()]),
    );

    harness.offer_and_tick(vec![task("load")]).await;

    let calls = harness.executor.calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].execution.service_account, "dexaflow-task");
    assert_eq!(
        harness.store.get(&task("load").key).map(|row| row.state),
        Some(State::Queued)
    );
}

#[actix::test]
async fn builtin_refusals_run_before_any_hook_is_called() {
    let mut settings = settings();
    settings.allowlist.images = Some(vec!["ghcr.io/trusted/".to_owned()]);
    let hook = FakeHook::admitting("noop").shared();
    let harness = start(settings, supervision(), hooks(vec![hook.clone()]));

    harness.offer_and_tick(vec![task("load")]).await;

    let row = harness.store.get(&task("load").key).expect("task stored");
    assert_eq!(row.state, State::Failed);
    assert_eq!(
        row.failure_reason.as_deref(),
        Some(
            "dispatch refused: image \"ghcr.io/acme/etl:1.2\" is not in execution_allowlist.images"
        )
    );
    assert_eq!(hook.calls(), 0);
}

#[actix::test]
async fn with_no_hook_registered_no_request_is_built() {
    let without = start(settings(), supervision(), Vec::new());
    let with_hook = start(
        settings(),
        supervision(),
        hooks(vec![FakeHook::admitting("noop").shared()]),
    );

    without.offer_and_tick(vec![task("load")]).await;
    with_hook.offer_and_tick(vec![task("load")]).await;

    assert_eq!(without.pipeline.requests_built(), 0);
    assert_eq!(without.executor.calls().len(), 1);
    assert_eq!(with_hook.pipeline.requests_built(), 1);
}

#[actix::test]
async fn admitted_attempt_gets_one_token_for_its_identity_and_is_queued() {
    let harness = start(
        settings(),
        supervision(),
        hooks(vec![FakeHook::admitting("noop").shared()]),
    );

    harness.offer_and_tick(vec![task("load")]).await;

    let minted = harness.minter.minted();
    assert_eq!(minted.len(), 1);
    assert_eq!(minted[0].task_instance_id, "acme.etl.r1.load");
    assert_eq!(minted[0].try_number, 1);
    assert_eq!(minted[0].attempt_epoch, 1);
    let calls = harness.executor.calls();
    assert_eq!(calls[0].token, "token-1");
    let row = harness.store.get(&task("load").key).expect("task stored");
    assert_eq!(row.state, State::Queued);
    assert!(row.token_minted);
}

#[actix::test]
async fn hook_sees_the_effective_service_account_and_never_the_environment() {
    let hook = FakeHook::admitting("observer").shared();
    let harness = start(settings(), supervision(), hooks(vec![hook.clone()]));
    let mut secretive = task("load");
    secretive
        .env
        .insert("API_KEY".to_owned(), "hunter2".to_owned());

    harness.offer_and_tick(vec![secretive]).await;

    let seen = hook.seen();
    assert_eq!(seen[0].execution.service_account, "dexaflow-task");
    assert!(!seen[0].execution.service_account_chosen);
    let wire = serde_json::to_string(&seen[0]).expect("requests serialize");
    assert!(!wire.contains("hunter2"));
}
