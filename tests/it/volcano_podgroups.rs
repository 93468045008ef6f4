//! Volcano's `/podgroups/validate` and `/podgroups/mutate` rules, with the cases of Volcano's
//! `validate_podgroup_test.go` and `mutate_podgroup_test.go` ported one test each, and the four
//! specs of its e2e `podgroup_mutate_test.go` (three of them the same requests as unit cases,
//! named on those tests).

use crate::volcano_jobs_validate::denied;
use dexaflow_admission::volcano::{
    Operation, PodGroup, Queue, QueueView, Refusal, Review, ViewError, decode, mutate_podgroup,
    podgroup_reads_namespace, validate_podgroup,
};
use serde_json::{Value, json};
use std::sync::Arc;

/// A queue cache holding at most one queue.
struct OneQueue(Option<Queue>);

impl OneQueue {
    fn open_or_closed(state: &str) -> OneQueue {
        let value = json!({"metadata": {"name": "test-queue"}, "status": {"state": state}});
        OneQueue(decode("object", &value).expect("a queue"))
    }
}

impl QueueView for OneQueue {
    fn queue(&self, name: &str) -> Result<Arc<Queue>, ViewError> {
        self.0
            .clone()
            .filter(|queue| queue.name() == name)
            .map(Arc::new)
            .ok_or_else(|| ViewError::NotFound {
                name: name.to_owned(),
            })
    }
    fn children(&self, _parent: &str) -> Result<Vec<Arc<Queue>>, ViewError> {
        Ok(Vec::new())
    }
    fn queues_where(&self, keep: &dyn Fn(&Queue) -> bool) -> Result<Vec<Arc<Queue>>, ViewError> {
        Ok(self
            .0
            .iter()
            .filter(|queue| keep(queue))
            .cloned()
            .map(Arc::new)
            .collect())
    }
}

fn group(spec: Value) -> PodGroup {
    let value = json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "test-podgroup", "namespace": "test-ns"}, "spec": spec});
    decode("object", &value)
        .expect("a pod group")
        .expect("not null")
}

fn validate(spec: Value, view: &OneQueue) -> Result<(), Refusal> {
    let group = group(spec);
    let review = Review {
        operation: Operation::Create,
        name: "test-podgroup",
        namespace: "test-ns",
        object: Some(&group),
        old_object: None,
    };
    validate_podgroup(&review, view)
}

const BOTH_TIERS: &str = "must not specify 'highestTierAllowed' and 'highestTierName' in networkTopology simultaneously.";

/// Volcano: TestValidatePodGroup, "valid podgroup with open queue"
#[test]
fn a_pod_group_in_an_open_queue_is_allowed() {
    let view = OneQueue::open_or_closed("Open");
    assert_eq!(validate(json!({"queue": "test-queue"}), &view), Ok(()));
}

/// Volcano: TestValidatePodGroup, "invalid podgroup with closed queue"
#[test]
fn a_pod_group_in_a_closed_queue_is_refused_naming_the_queue_and_state() {
    let view = OneQueue::open_or_closed("Closed");
    assert_eq!(
        denied(validate(json!({"queue": "test-queue"}), &view)),
        "can only submit PodGroup to queue with state `Open`, queue `test-queue` status is `Closed`."
    );
}

/// Volcano: TestValidatePodGroup, "valid podgroup with empty queue"
#[test]
fn a_pod_group_without_a_queue_is_allowed_without_reading_the_cache() {
    assert_eq!(validate(json!({}), &OneQueue(None)), Ok(()));
}

/// Volcano: TestValidatePodGroup, "invalid podgroup with a queue that does not exist"
#[test]
fn a_pod_group_in_a_missing_queue_is_refused_naming_the_queue() {
    assert_eq!(
        denied(validate(json!({"queue": "test-queue"}), &OneQueue(None))),
        r#"unable to find queue: queue.scheduling.volcano.sh "test-queue" not found"#
    );
}

/// Go: checkQueueState reports the lister's NotFound error, which quotes the name with `%q`:
/// a control character as `\x01`, a soft hyphen as `\u00ad`.
#[test]
fn a_missing_queue_whose_name_has_unprintable_characters_is_quoted_as_go_quotes_it() {
    assert_eq!(
        denied(validate(json!({"queue": "q\u{1}\u{ad}é"}), &OneQueue(None))),
        r#"unable to find queue: queue.scheduling.volcano.sh "q\x01\u00adé" not found"#
    );
}

/// Volcano: TestValidatePodGroup, "valid podgroup configured with SubGroupPolicy containing HighestTierName"
#[test]
fn a_sub_group_naming_only_its_highest_tier_is_allowed() {
    let spec = json!({"subGroupPolicy": [{"name": "test-policy",
        "networkTopology": {"mode": "hard", "highestTierName": "volcano.sh/hypernode"}}]});
    assert_eq!(validate(spec, &OneQueue(None)), Ok(()));
}

/// Volcano: TestValidatePodGroup, "valid podgroup configured with SubGroupPolicy containing HighestTierAllowed"
#[test]
fn a_sub_group_numbering_only_its_highest_tier_is_allowed() {
    let spec = json!({"subGroupPolicy": [{"name": "test-policy",
        "networkTopology": {"mode": "hard", "highestTierAllowed": 1}}]});
    assert_eq!(validate(spec, &OneQueue(None)), Ok(()));
}

/// Volcano: TestValidatePodGroup, "invalid podgroup configured with SubGroupPolicy containing HighestTierAllowed and HighestTierName"
#[test]
fn a_sub_group_setting_both_tier_fields_is_refused_naming_the_policy() {
    let spec = json!({"subGroupPolicy": [{"name": "test-policy", "networkTopology":
        {"mode": "hard", "highestTierAllowed": 1, "highestTierName": "volcano.sh/hypernode"}}]});
    assert_eq!(
        denied(validate(spec, &OneQueue(None))),
        format!("in subGroupPolicy 'test-policy': {BOTH_TIERS}")
    );
}

/// Volcano: TestValidatePodGroup, "invalid podgroup configured with NetworkTopology containing HighestTierAllowed and HighestTierName"
#[test]
fn a_group_topology_setting_both_tier_fields_is_refused() {
    let spec = json!({"networkTopology":
        {"mode": "hard", "highestTierAllowed": 1, "highestTierName": "volcano.sh/hypernode"}});
    assert_eq!(denied(validate(spec, &OneQueue(None))), BOTH_TIERS);
}

/// Volcano: TestValidatePodGroup, "invalid podgroup failing both queue and networkTopology checks reports a separated message"
#[test]
fn a_missing_queue_and_a_bad_topology_are_reported_together() {
    let spec = json!({"queue": "test-queue", "networkTopology":
        {"mode": "hard", "highestTierAllowed": 1, "highestTierName": "volcano.sh/hypernode"}});
    assert_eq!(
        denied(validate(spec, &OneQueue(None))),
        format!(
            r#"unable to find queue: queue.scheduling.volcano.sh "test-queue" not found; {BOTH_TIERS}"#
        )
    );
}

/// The pod group after `/podgroups/mutate` with the namespace read `namespace_queue`.
fn mutated(queue: &str, namespace_queue: Result<Option<String>, ViewError>) -> Value {
    let group = group(json!({"queue": queue}));
    let review = Review {
        operation: Operation::Create,
        name: "test-podgroup",
        namespace: "test-ns",
        object: Some(&group),
        old_object: None,
    };
    let patch = mutate_podgroup(&review, namespace_queue).expect("a patch");
    let mut patched = serde_json::to_value(&group).expect("serialises");
    json_patch::patch(&mut patched, &patch).expect("the patch applies");
    patched
}

/// Volcano: Test_createPodGroupPatch, "podgroup with non-default queue"; and the e2e spec
/// "PodGroup Mutating E2E Test", "Should not modify podgroup with custom queue"
#[test]
fn a_pod_group_in_a_named_queue_keeps_it_and_needs_no_namespace_read() {
    let group = group(json!({"queue": "custom-queue"}));
    assert!(!podgroup_reads_namespace(&Operation::Create, &group));
    let patched = mutated("custom-queue", Ok(Some("ns-queue".to_owned())));
    assert_eq!(patched["spec"]["queue"], "custom-queue");
}

/// Volcano: Test_createPodGroupPatch, "podgroup with default queue and namespace with queue annotation";
/// and the e2e spec "Should set queue from namespace annotation when podgroup uses default queue"
#[test]
fn a_pod_group_in_the_default_queue_takes_its_namespaces_queue() {
    assert!(podgroup_reads_namespace(
        &Operation::Create,
        &group(json!({"queue": "default"}))
    ));
    let patched = mutated("default", Ok(Some("ns-queue".to_owned())));
    assert_eq!(patched["spec"]["queue"], "ns-queue");
}

/// Volcano: Test_createPodGroupPatch, "podgroup with default queue and namespace without queue annotation";
/// and the e2e spec "Should keep default queue when namespace has no queue annotation"
#[test]
fn a_pod_group_in_the_default_queue_stays_there_when_its_namespace_names_none() {
    let patched = mutated("default", Ok(None));
    assert_eq!(patched["spec"]["queue"], "default");
}

/// Volcano e2e: "PodGroup Mutating E2E Test", "Should handle multiple podgroups in same
/// namespace": of two pod groups created in an annotated namespace, the one in `default` takes
/// the namespace's queue and the one in a queue of its own keeps it.
#[test]
fn of_two_pod_groups_in_one_namespace_only_the_default_one_takes_its_queue() {
    let namespace_queue = || Ok(Some("ns-queue".to_owned()));

    let defaulted = mutated("default", namespace_queue());
    let custom = mutated("custom-queue", namespace_queue());

    assert_eq!(defaulted["spec"]["queue"], "ns-queue");
    assert_eq!(custom["spec"]["queue"], "custom-queue");
}

/// Not in Volcano's tests: a failed namespace read changes nothing and allows the pod group.
#[test]
fn a_failed_namespace_read_leaves_the_pod_group_in_the_default_queue() {
    let failed = Err(ViewError::Unavailable {
        reason: "namespaces \"test-ns\" is forbidden".to_owned(),
    });
    assert_eq!(mutated("default", failed)["spec"]["queue"], "default");
}
