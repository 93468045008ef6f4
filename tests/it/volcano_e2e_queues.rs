//! Volcano's end-to-end queue validation specs, `test/e2e/admission/queue_validation_test.go`
//! ("Queue Validating E2E Test"), ported as the admission requests Volcano's webhooks receive
//! for each spec and the answers they must give. The API server runs `/queues/mutate` on a
//! CREATE, then the Queue CRD's schema, then `/queues/validate`; so a spec's CREATE is here its
//! queue defaulted by our `/queues/mutate` and then judged by our `/queues/validate`, against
//! the cluster of Volcano's e2e install (the queues `root` and `default`, and what the spec made
//! before).
//!
//! Ported: 21 of the 22 specs. Not ported, because no webhook receives its request:
//! - "Should reject queue update with negative weight": an UPDATE setting `spec.weight` to -1 is
//!   refused by the CRD's schema (`minimum: 1`), which the API server applies before any
//!   validating webhook; `/queues/mutate` is registered for CREATE only.
//!
//! "Should reject queue creation with negative weight" is refused by the same schema, but its
//! CREATE reaches `/queues/mutate` first: ported as that request, which must leave the weight
//! to the schema rather than default it to a valid one.

use crate::volcano_jobs_validate::denied;
use crate::volcano_queues::{Cache, create, delete, to_queue, update};

use dexaflow_admission::volcano::{Operation, QueueSettings, Refusal, Review, mutate_queue};
use serde_json::{Value, json};

/// The queues of Volcano's e2e install, and `extra` made by the spec before.
fn cluster(extra: &[Value]) -> Cache {
    let mut queues = vec![
        json!({"metadata": {"name": "root"}, "spec": {"weight": 1}, "status": {"state": "Open"}}),
        json!({"metadata": {"name": "default"}, "spec": {"weight": 1, "reclaimable": true},
            "status": {"state": "Open"}}),
    ];
    queues.extend_from_slice(extra);
    Cache::of(&queues)
}

/// `queue` as `/queues/mutate` leaves it on a CREATE: its patch applied.
fn mutated(queue: &Value) -> Value {
    let typed = to_queue(queue);
    let review = Review {
        operation: Operation::Create,
        name: typed.name(),
        namespace: "",
        object: Some(&typed),
        old_object: None,
    };
    let operations = mutate_queue(&review).expect("a CREATE is mutated");
    let mut patched = queue.clone();
    json_patch::patch(&mut patched, &json_patch::Patch(operations)).expect("the patch applies");
    patched
}

/// A CREATE of `queue` through both webhooks, in the cluster `cache`.
fn admit(queue: &Value, cache: &Cache) -> Result<(), Refusal> {
    create(&mutated(queue), cache)
}

/// A queue named `name` with the `spec` the spec gives it.
fn queue(name: &str, spec: Value) -> Value {
    json!({"metadata": {"name": name}, "spec": spec})
}

/// Volcano: "Queue Validating E2E Test", "Should allow queue creation with valid state (Open)"
#[test]
fn a_queue_created_open_is_allowed() {
    let mut open = queue("test-queue-open", json!({"weight": 1}));
    open["status"] = json!({"state": "Open"});

    assert_eq!(admit(&open, &cluster(&[])), Ok(()));
}

/// Volcano: "Queue Validating E2E Test", "Should allow queue creation with valid state
/// (Closed)"
#[test]
fn a_queue_created_closed_is_allowed() {
    let mut closed = queue("test-queue-closed-queue", json!({"weight": 1}));
    closed["status"] = json!({"state": "Closed"});

    assert_eq!(admit(&closed, &cluster(&[])), Ok(()));
}

/// Volcano: "Queue Validating E2E Test", "Should allow queue creation without state set"
#[test]
fn a_queue_created_without_a_state_is_allowed() {
    let stateless = queue("test-queue-no-state", json!({"weight": 1}));

    assert_eq!(admit(&stateless, &cluster(&[])), Ok(()));
}

/// Volcano: "Queue Validating E2E Test", "Should reject queue creation with negative weight":
/// the CRD's schema refuses it after `/queues/mutate`, which must not make it valid first.
#[test]
fn a_negative_weight_is_left_for_the_schema_to_refuse_not_defaulted() {
    let negative = queue("test-queue-weight-negative", json!({"weight": -1}));

    let defaulted = mutated(&negative);

    assert_eq!(defaulted["spec"]["weight"], -1);
    assert_eq!(defaulted["metadata"], negative["metadata"]);
}

/// Volcano: "Queue Validating E2E Test", "Should allow queue creation without weight specified
/// (uses default)"
#[test]
fn a_queue_without_a_weight_is_allowed_with_weight_one() {
    let unweighted = queue("test-queue-weight-default", json!({}));

    let defaulted = mutated(&unweighted);

    assert_eq!(defaulted["spec"]["weight"], 1);
    assert_eq!(create(&defaulted, &cluster(&[])), Ok(()));
}

/// Volcano: "Queue Validating E2E Test", "Should allow queue creation with only deserved
/// resource"
#[test]
fn a_queue_with_only_a_deserved_share_is_allowed() {
    let deserved = queue(
        "test-queue-deserved-only",
        json!({"weight": 1, "deserved": {"cpu": "1", "memory": "1Gi"}}),
    );

    assert_eq!(admit(&deserved, &cluster(&[])), Ok(()));
}

/// Volcano: "Queue Validating E2E Test", "Should reject queue creation with only guarantee
/// resource (deserved required)"
#[test]
fn a_guarantee_without_a_deserved_share_is_refused() {
    let guaranteed = queue(
        "test-queue-guarantee-only",
        json!({"weight": 1, "guarantee": {"resource": {"cpu": "1", "memory": "1Gi"}}}),
    );

    let message = denied(admit(&guaranteed, &cluster(&[])));

    assert!(message.contains("must be >= guarantee"), "{message}");
}

/// Volcano: "Queue Validating E2E Test", "Should reject queue creation with capability less
/// than deserved"
#[test]
fn a_capability_below_the_deserved_share_is_refused() {
    let capped = queue(
        "test-queue-capability-less-deserved",
        json!({"weight": 1, "capability": {"cpu": "1", "memory": "1Gi"},
            "deserved": {"cpu": "2", "memory": "1Gi"}}),
    );

    let message = denied(admit(&capped, &cluster(&[])));

    assert!(message.contains("must be <= capability"), "{message}");
}

/// Volcano: "Queue Validating E2E Test", "Should reject queue creation with capability less
/// than guarantee"
#[test]
fn a_capability_below_the_guarantee_is_refused() {
    let capped = queue(
        "test-queue-capability-less-guarantee",
        json!({"weight": 1, "capability": {"cpu": "1", "memory": "1Gi"},
            "guarantee": {"resource": {"cpu": "2", "memory": "3Gi"}}}),
    );

    let message = denied(admit(&capped, &cluster(&[])));

    assert!(message.contains("must be >= guarantee"), "{message}");
}

/// Volcano: "Queue Validating E2E Test", "Should reject queue creation with deserved less than
/// guarantee"
#[test]
fn a_deserved_share_below_the_guarantee_is_refused() {
    let short = queue(
        "test-queue-deserved-less-guarantee",
        json!({"weight": 1, "deserved": {"cpu": "2", "memory": "1Gi"},
            "guarantee": {"resource": {"cpu": "2", "memory": "3Gi"}}}),
    );

    let message = denied(admit(&short, &cluster(&[])));

    assert!(message.contains("must be >= guarantee"), "{message}");
}

/// Volcano: "Queue Validating E2E Test", "Should allow queue creation with deserved resource
/// type not in capability"
#[test]
fn a_deserved_resource_the_capability_does_not_name_is_allowed() {
    let wider = queue(
        "test-queue-deserved-type-not-in-capability",
        json!({"weight": 1, "capability": {"cpu": "10"},
            "deserved": {"cpu": "5", "memory": "10Gi"}}),
    );

    assert_eq!(admit(&wider, &cluster(&[])), Ok(()));
}

/// Volcano: "Queue Validating E2E Test", "Should allow queue creation with guarantee resource
/// type not in capability"
#[test]
fn a_guaranteed_resource_the_capability_does_not_name_is_allowed() {
    let wider = queue(
        "test-queue-guarantee-type-not-in-capability",
        json!({"weight": 1, "capability": {"cpu": "10"},
            "deserved": {"cpu": "5", "memory": "8Gi"},
            "guarantee": {"resource": {"cpu": "5", "memory": "8Gi"}}}),
    );

    assert_eq!(admit(&wider, &cluster(&[])), Ok(()));
}

/// Volcano: "Queue Validating E2E Test", "Should reject queue creation with guarantee resource
/// type not in deserved"
#[test]
fn a_guaranteed_resource_the_deserved_share_does_not_name_is_refused() {
    let uncovered = queue(
        "test-queue-guarantee-type-not-in-deserved",
        json!({"weight": 1, "deserved": {"cpu": "10"},
            "guarantee": {"resource": {"cpu": "5", "memory": "8Gi"}}}),
    );

    let message = denied(admit(&uncovered, &cluster(&[])));

    assert!(message.contains("must be >= guarantee"), "{message}");
}

/// A queue named `name` carrying the hierarchy annotations, `weights` left out when `None`.
fn hierarchical(name: &str, hierarchy: &str, weights: Option<&str>) -> Value {
    let mut annotations = json!({"volcano.sh/hierarchy": hierarchy});
    if let Some(weights) = weights {
        annotations["volcano.sh/hierarchy-weights"] = json!(weights);
    }
    json!({"metadata": {"name": name, "annotations": annotations}, "spec": {"weight": 1}})
}

/// Volcano: "Queue Validating E2E Test", "Should reject queue creation with only hierarchy
/// annotation but no weights"
#[test]
fn a_hierarchy_without_its_weights_is_refused() {
    let half = hierarchical("hierarchy-only-queue", "a", None);

    let message = denied(admit(&half, &cluster(&[])));

    // Volcano reads the absent weights as one empty weight, which is no number.
    assert!(message.contains("is invalid number"), "{message}");
}

/// Volcano: "Queue Validating E2E Test", "Should reject queue creation with mismatched
/// hierarchy annotation lengths"
#[test]
fn a_hierarchy_shorter_than_its_weights_is_refused() {
    let mismatched = hierarchical("mismatched-hierarchy-queue", "a/b", Some("1/2/3"));

    let message = denied(admit(&mismatched, &cluster(&[])));

    assert!(message.contains("must have the same length"), "{message}");
}

/// Volcano: "Queue Validating E2E Test", "Should reject queue creation with mismatched
/// hierarchy and weights"
#[test]
fn a_hierarchy_under_root_with_one_weight_too_many_is_refused() {
    let mismatched = hierarchical("test-queue-hierarchy-mismatch", "root/a/b", Some("1/2/3/4"));

    let message = denied(admit(&mismatched, &cluster(&[])));

    assert!(message.contains("must have the same length"), "{message}");
}

/// Volcano: "Queue Validating E2E Test", "Should reject queue creation with negative
/// hierarchical weight"
#[test]
fn a_negative_weight_in_the_hierarchy_is_refused_naming_it() {
    let negative = hierarchical(
        "test-queue-negative-hierarchy-weight",
        "root/a/b",
        Some("1/-1/3"),
    );

    let message = denied(admit(&negative, &cluster(&[])));

    assert!(message.contains("-1"), "{message}");
}

/// Volcano: "Queue Validating E2E Test", "Should reject queue creation with invalid
/// hierarchical weight format"
#[test]
fn a_weight_in_the_hierarchy_that_is_no_number_is_refused_naming_it() {
    let unparsable = hierarchical(
        "test-queue-invalid-hierarchy-weight",
        "root/a/b",
        Some("1/a/3"),
    );

    let message = denied(admit(&unparsable, &cluster(&[])));

    assert!(message.contains("1/a/3"), "{message}");
}

/// Volcano: "Queue Validating E2E Test", "Should allow queue state update from Open to Closed"
#[test]
fn closing_an_open_queue_is_allowed() {
    let mut open = mutated(&queue("test-queue-update-state", json!({"weight": 1})));
    open["status"] = json!({"state": "Open"});
    let mut closed = open.clone();
    closed["status"]["state"] = json!("Closed");

    assert_eq!(update(&open, &closed, &cluster(&[open.clone()])), Ok(()));
}

/// Volcano: "Queue Validating E2E Test", "Should allow deletion of regular queues"
#[test]
fn deleting_a_queue_without_children_is_allowed() {
    let deletable = mutated(&queue("test-queue-deletable", json!({"weight": 1})));

    let made = cluster(&[deletable]);

    assert_eq!(
        delete("test-queue-deletable", &made, &QueueSettings::default()),
        Ok(())
    );
}

/// Volcano: "Queue Validating E2E Test", "Should allow hierarchical queue creation with valid
/// parent": the parent under `root`, then its child, each judged with what was made before.
#[test]
fn a_parent_under_root_then_its_child_are_both_allowed() {
    let parent = queue("test-parent-queue", json!({"weight": 1, "parent": "root"}));
    let child = queue(
        "test-child-queue",
        json!({"weight": 1, "parent": "test-parent-queue"}),
    );

    let parent_made = admit(&parent, &cluster(&[]));
    let child_made = admit(&child, &cluster(&[mutated(&parent)]));

    assert_eq!(parent_made, Ok(()));
    assert_eq!(child_made, Ok(()));
    let message = denied(admit(&child, &cluster(&[])));
    assert!(
        message.contains("test-parent-queue"),
        "without its parent made first the child is refused: {message}"
    );
}
