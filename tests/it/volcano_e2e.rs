//! Volcano's end-to-end admission specs that are one admission request with a known answer,
//! ported against the pure rules: `test/e2e/admission/podgroup_validation_test.go` (both specs)
//! and `test/e2e/admission/queue_mutate_test.go` (all four). Volcano runs them against a real
//! API server; each is here the one request its webhook receives and the answer it must give.

use dexaflow_admission::volcano::{
    Operation, PodGroup, Queue, QueueView, Review, ViewError, decode, mutate_queue,
    validate_podgroup,
};
use serde_json::{Value, json};
use std::sync::Arc;

/// The e2e spec's cache: one queue, `Open` once the spec has updated its status.
struct OpenQueue(Queue);

impl QueueView for OpenQueue {
    fn queue(&self, name: &str) -> Result<Arc<Queue>, ViewError> {
        if self.0.name() == name {
            Ok(Arc::new(self.0.clone()))
        } else {
            Err(ViewError::NotFound {
                name: name.to_owned(),
            })
        }
    }

    fn children(&self, _parent: &str) -> Result<Vec<Arc<Queue>>, ViewError> {
        Ok(Vec::new())
    }

    fn queues_where(&self, keep: &dyn Fn(&Queue) -> bool) -> Result<Vec<Arc<Queue>>, ViewError> {
        Ok(Some(&self.0)
            .filter(|queue| keep(queue))
            .cloned()
            .map(Arc::new)
            .into_iter()
            .collect())
    }
}

fn decoded<T: serde::de::DeserializeOwned>(value: &Value) -> T {
    decode("object", value).expect("decodes").expect("not null")
}

fn create<'a, T>(name: &'a str, object: &'a T) -> Review<'a, T> {
    Review {
        operation: Operation::Create,
        name,
        namespace: "e2e-ns",
        object: Some(object),
        old_object: None,
    }
}

fn open_queue(name: &str) -> OpenQueue {
    OpenQueue(decoded(&json!({
        "metadata": {"name": name}, "spec": {"weight": 1}, "status": {"state": "Open"}
    })))
}

/// Volcano: "PodGroup Validating E2E Test", "Should allow PodGroup creation with valid open queue"
#[test]
fn a_pod_group_in_an_open_queue_made_before_it_is_allowed() {
    let view = open_queue("test-queue-open");
    let group: PodGroup = decoded(&json!({
        "metadata": {"name": "test-podgroup-valid", "namespace": "e2e-ns"},
        "spec": {"queue": "test-queue-open", "minMember": 1}
    }));

    assert_eq!(
        validate_podgroup(&create("test-podgroup-valid", &group), &view),
        Ok(())
    );
}

/// Volcano: "PodGroup Validating E2E Test", "Should allow PodGroup creation without queue
/// specified": no queue is read, so even an empty cache allows it.
#[test]
fn a_pod_group_without_a_queue_is_allowed_without_reading_one() {
    let view = open_queue("some-other-queue");
    let group: PodGroup = decoded(&json!({
        "metadata": {"name": "test-podgroup-no-queue", "namespace": "e2e-ns"},
        "spec": {"queue": "", "minMember": 1}
    }));

    assert_eq!(
        validate_podgroup(&create("test-podgroup-no-queue", &group), &view),
        Ok(())
    );
}

/// The queue `spec` makes once `/queues/mutate`'s patch is applied to it.
fn mutated(spec: Value) -> Value {
    let object = json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
        "metadata": {"name": "e2e-queue"}, "spec": spec});
    let queue: Queue = decoded(&object);
    let patch = mutate_queue(&create("e2e-queue", &queue)).expect("a CREATE is mutated");
    let mut patched = object;
    json_patch::patch(&mut patched, &patch).expect("the patch applies");
    patched
}

/// Volcano: "Queue Mutating E2E Test", "Should set default reclaimable to true when not
/// specified"
#[test]
fn a_queue_without_reclaimable_is_made_reclaimable_and_keeps_its_weight() {
    let queue = mutated(json!({"weight": 1}));

    assert_eq!(queue["spec"]["reclaimable"], true);
    assert_eq!(queue["spec"]["weight"], 1);
}

/// Volcano: "Queue Mutating E2E Test", "Should set default weight to 1 when not specified"
#[test]
fn a_queue_without_a_weight_gets_weight_one_and_keeps_its_reclaimable() {
    let queue = mutated(json!({"reclaimable": true}));

    assert_eq!(queue["spec"]["weight"], 1);
    assert_eq!(queue["spec"]["reclaimable"], true);
}

/// Volcano: "Queue Mutating E2E Test", "Should apply both default reclaimable and weight when
/// not specified"
#[test]
fn a_queue_with_neither_gets_both_defaults() {
    let queue = mutated(json!({}));

    assert_eq!(queue["spec"]["weight"], 1);
    assert_eq!(queue["spec"]["reclaimable"], true);
}

/// Volcano: "Queue Mutating E2E Test", "Should preserve existing field values when specified"
#[test]
fn a_queue_s_own_weight_and_reclaimable_false_are_kept() {
    let queue = mutated(json!({"weight": 5, "reclaimable": false}));

    assert_eq!(queue["spec"]["weight"], 5);
    assert_eq!(queue["spec"]["reclaimable"], false);
}
