//! Placement: a dedicated pod for any attempt a warm worker cannot serve or a hook changed,
//! judged on the execution with the hook's changes applied.

use crate::common;
use crate::fakes;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::{FakeHook, annotation, label, node_selector};
use dexaflow_admission::admission::{Changes, Execution, Hook, Toleration, TolerationOperator};
use dexaflow_admission::dispatch::placement::{
    Changed, DedicatedReason, PodKind, WarmWorkers, place,
};
use dexaflow_admission::dispatch::task::Task;

const DEFAULT_SA: &str = "dexaflow-task";

fn task() -> Task {
    fakes::manual_task()
}

/// The plain task, `size` resource units large.
fn task_of_size(size: u32) -> Task {
    Task {
        pool_slots: size,
        ..task()
    }
}

fn execution() -> Execution {
    Execution {
        service_account: DEFAULT_SA.to_owned(),
        ..Execution::default()
    }
}

/// Warm workers running as [`DEFAULT_SA`], enabled or not, without a resource unit.
fn workers(enabled: bool) -> WarmWorkers<'static> {
    WarmWorkers {
        enabled,
        service_account: DEFAULT_SA,
        unit_sized: false,
    }
}

/// Unit-sized warm workers, enabled.
fn unit_sized_workers() -> WarmWorkers<'static> {
    WarmWorkers {
        unit_sized: true,
        ..workers(true)
    }
}

/// Where an attempt no hook changed goes, with warm pools on.
fn warm(execution: &Execution, task: &Task) -> PodKind {
    place(execution, Changed::Nothing, task, false, workers(true))
}

/// Where an attempt a hook changed goes, with warm pools on.
fn changed(execution: &Execution, task: &Task) -> PodKind {
    place(execution, Changed::ByHook, task, false, workers(true))
}

#[test]
fn a_plain_attempt_goes_warm() {
    assert_eq!(warm(&execution(), &task()), PodKind::Warm);
}

#[test]
fn an_empty_service_account_counts_as_the_default() {
    let execution = Execution::default();
    assert_eq!(warm(&execution, &task()), PodKind::Warm);
}

#[test]
fn every_attempt_is_dedicated_while_warm_pools_are_disabled() {
    assert_eq!(
        place(
            &execution(),
            Changed::Nothing,
            &task(),
            false,
            workers(false)
        ),
        PodKind::Dedicated(DedicatedReason::NoWarmPool)
    );
}

#[test]
fn a_source_mode_attempt_is_dedicated() {
    assert_eq!(
        place(&execution(), Changed::Nothing, &task(), true, workers(true)),
        PodKind::Dedicated(DedicatedReason::SourceMode)
    );
}

#[test]
fn a_staging_attempt_is_dedicated() {
    let task = Task {
        staging: true,
        ..task()
    };
    assert_eq!(
        warm(&execution(), &task),
        PodKind::Dedicated(DedicatedReason::Staging)
    );
}

#[test]
fn a_service_account_other_than_the_default_is_dedicated() {
    let execution = Execution {
        service_account: "etl-runner".to_owned(),
        ..execution()
    };
    assert_eq!(
        warm(&execution, &task()),
        PodKind::Dedicated(DedicatedReason::ServiceAccount)
    );
}

#[test]
fn a_node_selector_is_dedicated() {
    let mut execution = execution();
    execution
        .node_selector
        .insert("pool".to_owned(), "gpu".to_owned());
    assert_eq!(
        warm(&execution, &task()),
        PodKind::Dedicated(DedicatedReason::PlacementFields)
    );
}

#[test]
fn a_toleration_is_dedicated() {
    let mut execution = execution();
    execution.tolerations.push(Toleration {
        key: "gpu".to_owned(),
        operator: TolerationOperator::Exists,
        value: String::new(),
        effect: None,
        toleration_seconds: None,
    });
    assert_eq!(
        warm(&execution, &task()),
        PodKind::Dedicated(DedicatedReason::PlacementFields)
    );
}

#[test]
fn a_priority_class_is_dedicated() {
    let execution = Execution {
        priority_class: "high".to_owned(),
        ..execution()
    };
    assert_eq!(
        warm(&execution, &task()),
        PodKind::Dedicated(DedicatedReason::PlacementFields)
    );
}

#[test]
fn a_runtime_class_is_dedicated() {
    let execution = Execution {
        runtime_class_name: "gvisor".to_owned(),
        ..execution()
    };
    assert_eq!(
        warm(&execution, &task()),
        PodKind::Dedicated(DedicatedReason::RuntimeClass)
    );
}

#[test]
fn a_hook_set_node_selector_is_dedicated_as_an_admission_change_although_the_task_set_none() {
    // The task declares no placement; the execution carries a hook's change.
    let task = task();
    assert!(!task.execution.has_placement());
    let mut execution = execution();
    execution
        .node_selector
        .insert("tenant-pool".to_owned(), "acme".to_owned());
    assert_eq!(
        changed(&execution, &task),
        PodKind::Dedicated(DedicatedReason::AdmissionChange)
    );
}

#[test]
fn a_hook_change_of_labels_alone_takes_a_dedicated_pod() {
    let mut execution = execution();
    execution
        .labels
        .insert("team".to_owned(), "data".to_owned());
    assert_eq!(
        changed(&execution, &task()),
        PodKind::Dedicated(DedicatedReason::AdmissionChange)
    );
    assert_eq!(warm(&execution, &task()), PodKind::Warm);
}

#[test]
fn a_hook_change_of_annotations_alone_takes_a_dedicated_pod() {
    let mut execution = execution();
    execution
        .annotations
        .insert("example.com/note".to_owned(), "x".to_owned());
    assert_eq!(
        changed(&execution, &task()),
        PodKind::Dedicated(DedicatedReason::AdmissionChange)
    );
    assert_eq!(warm(&execution, &task()), PodKind::Warm);
}

#[test]
fn a_hook_change_is_the_reason_shown_before_the_task_s_own_placement_fields() {
    let execution = Execution {
        priority_class: "high".to_owned(),
        ..execution()
    };
    assert_eq!(
        changed(&execution, &task()),
        PodKind::Dedicated(DedicatedReason::AdmissionChange)
    );
    assert_eq!(
        warm(&execution, &task()),
        PodKind::Dedicated(DedicatedReason::PlacementFields)
    );
}

#[test]
fn source_mode_and_staging_are_the_reasons_shown_before_a_hook_change() {
    assert_eq!(
        place(&execution(), Changed::ByHook, &task(), true, workers(true)),
        PodKind::Dedicated(DedicatedReason::SourceMode)
    );
    let staging = Task {
        staging: true,
        ..task()
    };
    assert_eq!(
        changed(&execution(), &staging),
        PodKind::Dedicated(DedicatedReason::Staging)
    );
}

#[test]
fn the_task_s_own_placement_fields_are_judged_on_the_execution_passed_in() {
    // The execution passed in is the effective one; the task's fields are already in it, and a
    // task field missing from it is not looked up again.
    let mut task = task();
    task.execution
        .node_selector
        .insert("pool".to_owned(), "gpu".to_owned());
    assert_eq!(warm(&execution(), &task), PodKind::Warm);
}

#[test]
fn the_task_s_own_labels_and_annotations_alone_stay_warm() {
    let mut execution = execution();
    execution
        .labels
        .insert("team".to_owned(), "data".to_owned());
    execution
        .annotations
        .insert("example.com/note".to_owned(), "x".to_owned());
    assert_eq!(warm(&execution, &task()), PodKind::Warm);
}

#[test]
fn the_attempts_own_reason_is_reported_before_disabled_warm_pools() {
    let execution = Execution {
        priority_class: "high".to_owned(),
        ..execution()
    };
    assert_eq!(
        place(&execution, Changed::Nothing, &task(), false, workers(false)),
        PodKind::Dedicated(DedicatedReason::PlacementFields)
    );
}

#[test]
fn a_task_of_more_than_one_unit_takes_a_dedicated_pod_when_warm_workers_are_one_unit() {
    let large = task_of_size(2);
    assert_eq!(
        place(
            &execution(),
            Changed::Nothing,
            &large,
            false,
            unit_sized_workers()
        ),
        PodKind::Dedicated(DedicatedReason::Size)
    );
    assert_eq!(
        place(
            &execution(),
            Changed::Nothing,
            &task(),
            false,
            unit_sized_workers()
        ),
        PodKind::Warm
    );
}

#[test]
fn a_task_with_resources_of_its_own_takes_a_dedicated_pod_when_warm_workers_are_one_unit() {
    let mut sized = task();
    sized.resources.requests.cpu = Some("500m".to_owned());
    assert_eq!(
        place(
            &execution(),
            Changed::Nothing,
            &sized,
            false,
            unit_sized_workers()
        ),
        PodKind::Dedicated(DedicatedReason::Size)
    );
}

#[test]
fn a_hooks_change_is_the_reason_shown_before_the_tasks_size() {
    let large = task_of_size(2);
    let execution = Execution {
        node_selector: BTreeMap::from([("pool".to_owned(), "gpu".to_owned())]),
        ..execution()
    };
    assert_eq!(
        place(
            &execution,
            Changed::ByHook,
            &large,
            false,
            unit_sized_workers()
        ),
        PodKind::Dedicated(DedicatedReason::AdmissionChange)
    );
}

#[test]
fn the_tasks_size_is_the_reason_shown_before_disabled_warm_pools() {
    let large = task_of_size(2);
    let disabled = WarmWorkers {
        enabled: false,
        ..unit_sized_workers()
    };
    assert_eq!(
        place(&execution(), Changed::Nothing, &large, false, disabled),
        PodKind::Dedicated(DedicatedReason::Size)
    );
}

#[test]
fn without_a_unit_a_tasks_size_and_resources_do_not_keep_it_from_a_warm_worker() {
    let mut large = task_of_size(4);
    large.resources.limits.memory = Some("8Gi".to_owned());
    assert_eq!(warm(&execution(), &large), PodKind::Warm);
}

#[test]
fn placements_print_short_words_for_a_table() {
    let printed = |reason| PodKind::Dedicated(reason).to_string();
    assert_eq!(PodKind::Warm.to_string(), "warm");
    assert_eq!(
        printed(DedicatedReason::PlacementFields),
        "dedicated (placement fields)"
    );
    assert_eq!(
        printed(DedicatedReason::ServiceAccount),
        "dedicated (service account)"
    );
    assert_eq!(
        printed(DedicatedReason::RuntimeClass),
        "dedicated (runtime class)"
    );
    assert_eq!(
        printed(DedicatedReason::SourceMode),
        "dedicated (source mode)"
    );
    assert_eq!(printed(DedicatedReason::Staging), "dedicated (staging)");
    assert_eq!(
        printed(DedicatedReason::AdmissionChange),
        "dedicated (admission change)"
    );
    assert_eq!(printed(DedicatedReason::Size), "dedicated (size)");
    assert_eq!(
        printed(DedicatedReason::NoWarmPool),
        "dedicated (no warm pool)"
    );
}

#[test]
fn placements_have_stable_names_for_json() {
    let dedicated = PodKind::Dedicated(DedicatedReason::PlacementFields);
    assert_eq!(dedicated.as_str(), "dedicated");
    assert_eq!(
        dedicated.reason().map(DedicatedReason::as_str),
        Some("placement_fields")
    );
    assert!(dedicated.is_dedicated());
    assert_eq!(PodKind::Warm.as_str(), "warm");
    assert_eq!(PodKind::Warm.reason(), None);
    assert!(!PodKind::Warm.is_dedicated());
    assert_eq!(
        DedicatedReason::AdmissionChange.as_str(),
        "admission_change"
    );
}

// ---- through the dispatcher -------------------------------------------------------------------

/// Where the one attempt of a task goes through a hook that admits it with `changes`, checking
/// that the hook was called once, one token was minted and the executor got the attempt.
async fn placement_after(changes: Changes) -> PodKind {
    let hook = FakeHook::changing("hook", changes).shared();
    let hooks: Vec<Arc<dyn Hook>> = vec![hook.clone()];
    let harness = fakes::start(fakes::settings(), fakes::supervision(), hooks);
    harness.offer_and_tick(vec![fakes::task("load")]).await;
    assert_eq!(hook.calls(), 1);
    assert_eq!(harness.minter.minted().len(), 1);
    let calls = harness.executor.calls();
    assert_eq!(calls.len(), 1, "one launch");
    let row = harness
        .store
        .get(&fakes::task("load").key)
        .expect("task stored");
    assert_eq!(row.placement, Some(calls[0].placement));
    calls[0].placement
}

const ADMISSION_CHANGE: PodKind = PodKind::Dedicated(DedicatedReason::AdmissionChange);

#[actix::test]
async fn a_hook_that_changes_only_a_label_sends_the_attempt_to_a_dedicated_pod() {
    assert_eq!(
        placement_after(label("team", "data")).await,
        ADMISSION_CHANGE
    );
}

#[actix::test]
async fn a_hook_that_changes_only_an_annotation_sends_the_attempt_to_a_dedicated_pod() {
    let changes = annotation("example.com/owner", "data-team");
    assert_eq!(placement_after(changes).await, ADMISSION_CHANGE);
}

#[actix::test]
async fn a_hook_set_node_selector_is_placed_as_an_admission_change() {
    let changes = node_selector("pool", "gpu");
    assert_eq!(placement_after(changes).await, ADMISSION_CHANGE);
}

#[actix::test]
async fn a_hook_that_admits_with_empty_changes_leaves_the_attempt_warm() {
    assert_eq!(placement_after(Changes::default()).await, PodKind::Warm);
}

#[test]
fn the_executor_policy_is_the_reason_shown_over_another_hook_s_change() {
    let execution = Execution {
        node_selector: BTreeMap::from([("pool".to_owned(), "tenant-jobs".to_owned())]),
        ..execution()
    };

    assert_eq!(
        place(&execution, Changed::ByPolicy, &task(), false, workers(true)),
        PodKind::Dedicated(DedicatedReason::ExecutorPolicy)
    );
    assert_eq!(
        place(&execution, Changed::ByPolicy, &task(), true, workers(true)),
        PodKind::Dedicated(DedicatedReason::SourceMode),
        "source mode, which no hook can change, is still shown first"
    );
}
