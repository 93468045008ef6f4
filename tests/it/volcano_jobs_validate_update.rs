//! Volcano's `/jobs/validate` rule on UPDATE: the cases of Volcano's `admit_job_test.go`
//! (`TestValidateJobUpdate`) and the update specs of its e2e `job_validation_test.go`, one
//! test each, and the rule's other refusals in its order.
//!
//! The e2e specs update a job the API server stored after the mutator's defaults; the ports
//! start from Volcano's unit-test job instead, since the rule compares only the two specs.

use dexaflow_admission::volcano::{FeatureGates, Refusal};
use serde_json::{Value, json};

use super::volcano_jobs_validate::{Queues, denied, job, review, task, update};

/// Volcano's `newJob`: `minAvailable` 5, one task `task-1` of 5 replicas, one policy.
fn stored() -> Value {
    job(
        "valid-job",
        json!({"minAvailable": 5, "queue": "default", "tasks": [task("task-1", 5)],
               "policies": [{"event": "PodEvicted", "action": "RestartTask"}]}),
    )
}

/// The stored job with `minAvailable` and the task's replicas changed, and a new status and
/// resource version, as in Volcano's test.
fn scaled(min_available: i32, replicas: i32) -> Value {
    let mut job = stored();
    job["metadata"]["resourceVersion"] = json!("502593");
    job["status"] = json!({"succeeded": 2});
    job["spec"]["minAvailable"] = json!(min_available);
    job["spec"]["tasks"][0]["replicas"] = json!(replicas);
    job
}

const OTHER_FIELDS: &str = "job updates may not change fields other than `minAvailable`, `tasks[*].replicas under spec` and `PriorityClassName`";

/// Volcano: TestValidateJobUpdate, "scale up"
#[test]
fn scaling_a_task_up_is_allowed() {
    assert_eq!(update(&stored(), &scaled(5, 6)), Ok(()));
}

/// Volcano: TestValidateJobUpdate, "invalid scale down with replicas less than minAvailable";
/// e2e "Should reject job update with invalid minAvailable greater than total replicas"
#[test]
fn scaling_below_the_job_min_available_is_refused() {
    assert_eq!(
        denied(update(&stored(), &scaled(5, 4))),
        "job 'minAvailable' must not be greater than total replicas"
    );
}

/// Volcano: TestValidateJobUpdate, "scale down"; e2e "Should allow job update with valid
/// changes to minAvailable and replicas"
#[test]
fn scaling_down_with_a_lower_min_available_is_allowed() {
    assert_eq!(update(&stored(), &scaled(3, 4)), Ok(()));
}

/// Volcano: TestValidateJobUpdate, "invalid add task"
#[test]
fn adding_a_task_while_scaling_is_refused() {
    let mut job = scaled(5, 4);
    if let Some(tasks) = job["spec"]["tasks"].as_array_mut() {
        tasks.push(task("task-2", 5));
    }
    // 4 + 5 replicas cover minAvailable 5: the refusal is the added task.
    assert_eq!(
        denied(update(&stored(), &job)),
        "job updates may not add or remove tasks"
    );
}

/// Volcano: e2e "Should reject job update attempting to add new tasks"
#[test]
fn adding_a_task_is_refused() {
    let mut job = stored();
    if let Some(tasks) = job["spec"]["tasks"].as_array_mut() {
        tasks.push(task("new-task", 2));
    }
    assert_eq!(
        denied(update(&stored(), &job)),
        "job updates may not add or remove tasks"
    );
}

/// Volcano: TestValidateJobUpdate, "invalid mutate task's fields other than replicas"
#[test]
fn renaming_a_task_is_refused() {
    let mut job = scaled(5, 5);
    job["spec"]["tasks"][0]["name"] = json!("mutated-name");
    assert_eq!(denied(update(&stored(), &job)), OTHER_FIELDS);
}

/// Volcano: TestValidateJobUpdate, "invalid mutate job's spec other than minAvailable"; e2e
/// "Should reject job update attempting to change queue name"
#[test]
fn moving_a_job_to_another_queue_is_refused() {
    let mut job = scaled(5, 5);
    job["spec"]["queue"] = json!("mutated-queue");
    assert_eq!(denied(update(&stored(), &job)), OTHER_FIELDS);
}

/// Volcano: validateJobUpdate, the priority class may change
#[test]
fn changing_the_priority_class_is_allowed() {
    let mut job = stored();
    job["spec"]["priorityClassName"] = json!("high");
    assert_eq!(update(&stored(), &job), Ok(()));
}

/// Volcano: validateJobUpdate, a task's minAvailable may change within its replicas
#[test]
fn changing_a_task_min_available_within_its_replicas_is_allowed() {
    let mut job = stored();
    job["spec"]["tasks"][0]["minAvailable"] = json!(2);
    assert_eq!(update(&stored(), &job), Ok(()));
}

/// Volcano: validateJobUpdate, a task's minAvailable above its replicas
#[test]
fn a_task_min_available_above_its_replicas_is_refused_on_update() {
    let mut job = stored();
    job["spec"]["tasks"][0]["minAvailable"] = json!(6);
    assert_eq!(
        denied(update(&stored(), &job)),
        "'minAvailable' must be <= 'replicas' in task: task-1"
    );
}

/// Volcano: validateJobUpdate, negative replicas come first
#[test]
fn negative_task_replicas_are_refused_on_update() {
    assert_eq!(
        denied(update(&stored(), &scaled(0, -1))),
        "'replicas' must be >= 0 in task: task-1"
    );
}

/// Volcano: validateJobUpdate, a negative task minAvailable
#[test]
fn a_negative_task_min_available_is_refused_on_update() {
    let mut job = stored();
    job["spec"]["tasks"][0]["minAvailable"] = json!(-1);
    assert_eq!(
        denied(update(&stored(), &job)),
        "'minAvailable' must be >= 0 in task: task-1"
    );
}

/// Volcano: validateJobUpdate, a negative job minAvailable
#[test]
fn a_negative_job_min_available_is_refused_on_update() {
    assert_eq!(
        denied(update(&stored(), &scaled(-1, 5))),
        "job 'minAvailable' must be >= 0"
    );
}

/// Volcano: validateJobUpdate, both tiers in the job's network topology
#[test]
fn both_tiers_are_refused_on_update() {
    let mut job = stored();
    job["spec"]["networkTopology"] = json!({"highestTierAllowed": 1, "highestTierName": "x"});
    assert_eq!(
        denied(update(&stored(), &job)),
        "must not specify 'highestTierAllowed' and 'highestTierName' in networkTopology simultaneously"
    );
}

/// Volcano: validateJobUpdate, the claim name the controller fills in for a volume with a claim
#[test]
fn the_claim_name_of_a_volume_with_a_claim_may_be_filled_in() {
    let claim = json!({"mountPath": "/data", "volumeClaim": {"accessModes": ["ReadWriteOnce"]}});
    let mut old = stored();
    old["spec"]["volumes"] = json!([claim]);
    let mut new = old.clone();
    new["spec"]["volumes"][0]["volumeClaimName"] = json!("valid-job-pvc-abc");
    assert_eq!(update(&old, &new), Ok(()));
}

/// Volcano: validateJobUpdate, an existing claim's name may not change
#[test]
fn the_claim_name_of_a_volume_without_a_claim_may_not_change() {
    let mut old = stored();
    old["spec"]["volumes"] = json!([{"mountPath": "/data", "volumeClaimName": "pvc1"}]);
    let mut new = old.clone();
    new["spec"]["volumes"][0]["volumeClaimName"] = json!("pvc2");
    assert_eq!(denied(update(&old, &new)), OTHER_FIELDS);
}

/// Volcano: validateJobUpdate reads no queue (the update's queue is missing from the cache)
#[test]
fn an_update_does_not_read_the_queue() {
    let mut old = stored();
    old["spec"]["queue"] = json!("gone");
    assert_eq!(update(&old, &old.clone()), Ok(()));
}

/// Volcano: AdmitJobs, an update without its old object
#[test]
fn an_update_without_the_old_job_is_undecodable() {
    let verdict = review(
        "UPDATE",
        &stored(),
        None,
        &Queues::of(&[]),
        &FeatureGates::default(),
    );
    assert!(
        matches!(
            verdict,
            Err(Refusal::Undecodable {
                field: "oldObject",
                ..
            })
        ),
        "{verdict:?}"
    );
}

/// The stored job with its container requesting `cpu`.
fn requesting(cpu: &str) -> Value {
    let mut job = stored();
    job["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["resources"] =
        json!({"requests": {"cpu": cpu}});
    job
}

/// Volcano: validateJobUpdate compares with apimachinery's semantic equality (quantities by
/// value)
#[test]
fn a_quantity_written_in_another_unit_is_not_a_change() {
    assert_eq!(update(&requesting("1"), &requesting("1000m")), Ok(()));
}

/// Volcano: validateJobUpdate, a quantity of another value
#[test]
fn a_changed_quantity_is_refused() {
    assert_eq!(
        denied(update(&requesting("1"), &requesting("2"))),
        OTHER_FIELDS
    );
}

/// Volcano: validateJobUpdate compares with apimachinery's semantic equality (an empty list is
/// the same as none)
#[test]
fn an_empty_list_is_the_same_as_none() {
    let mut job = stored();
    job["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["args"] = json!([]);
    assert_eq!(update(&stored(), &job), Ok(()));
}

/// The stored job with `change` applied to its task's pod spec.
fn with_pod_spec(change: impl FnOnce(&mut Value)) -> Value {
    let mut job = stored();
    change(&mut job["spec"]["tasks"][0]["template"]["spec"]);
    job
}

/// The stored job with an `emptyDir` volume limited to `size`.
fn sized(size: &str) -> Value {
    with_pod_spec(|spec| {
        spec["volumes"] = json!([{"name": "v", "emptyDir": {"sizeLimit": size}}]);
    })
}

/// Volcano: validateJobUpdate compares with apimachinery's semantic equality, which compares
/// every quantity by value, a volume's `sizeLimit` as a container's requests
#[test]
fn a_size_limit_written_in_another_unit_is_not_a_change() {
    assert_eq!(update(&sized("1Gi"), &sized("1024Mi")), Ok(()));
    assert_eq!(denied(update(&sized("1Gi"), &sized("2Gi"))), OTHER_FIELDS);
}

/// The stored job whose pod prefers pods matching `selector`.
fn selecting(selector: Option<Value>) -> Value {
    with_pod_spec(|spec| {
        let mut term = json!({"topologyKey": "kubernetes.io/hostname"});
        if let Some(selector) = selector {
            term["labelSelector"] = selector;
        }
        spec["affinity"] =
            json!({"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}});
    })
}

/// Volcano: validateJobUpdate compares with apimachinery's semantic equality: a struct's map
/// left out equals an empty one, but a pointer to an empty struct is not nil
#[test]
fn an_empty_map_in_a_selector_is_the_same_as_none() {
    let matching = Some(json!({"matchLabels": {}}));
    assert_eq!(
        update(&selecting(Some(json!({}))), &selecting(matching)),
        Ok(())
    );
    assert_eq!(
        denied(update(&selecting(None), &selecting(Some(json!({}))))),
        OTHER_FIELDS
    );
}

/// Volcano: validateJobUpdate compares with apimachinery's semantic equality: an empty map is
/// the same as none, but a map with an entry is not, even when the entry is empty
#[test]
fn a_plugin_with_no_arguments_is_a_change() {
    let mut job = stored();
    job["spec"]["plugins"] = json!({"svc": []});
    assert_eq!(denied(update(&stored(), &job)), OTHER_FIELDS);
    job["spec"]["plugins"] = json!({});
    assert_eq!(update(&stored(), &job), Ok(()));
}

/// Volcano: validateJobUpdate compares typed objects: a plain field at its zero value is the
/// same as left out, a pointer field at zero is not
#[test]
fn a_zero_is_the_same_as_none_except_in_a_pointer_field() {
    let host = with_pod_spec(|spec| spec["hostNetwork"] = json!(false));
    assert_eq!(update(&stored(), &host), Ok(()));
    let grace = with_pod_spec(|spec| spec["terminationGracePeriodSeconds"] = json!(0));
    assert_eq!(denied(update(&stored(), &grace)), OTHER_FIELDS);
}
