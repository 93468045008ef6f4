//! Volcano's `/queues/validate` and `/queues/mutate` rules, with the cases of Volcano's
//! `validate_queue_test.go` and `mutate_queue_test.go` ported one test each.

use crate::volcano_jobs_validate::denied;
use std::collections::BTreeMap;

use dexaflow_admission::volcano::{
    Operation, Queue, QueueSettings, QueueView, Refusal, Review, ViewError, decode, mutate_queue,
    validate_queue,
};
use json_patch::PatchOperation;
use serde_json::{Value, json};
use std::sync::Arc;

/// A queue cache over a map, as Volcano's informer holds them.
#[derive(Default)]
pub(crate) struct Cache(BTreeMap<String, Queue>);

impl Cache {
    /// The cache holding `queues`.
    pub(crate) fn of(queues: &[Value]) -> Cache {
        Cache::from_queues(queues.iter().map(to_queue))
    }

    /// The cache holding `queues`, each under its name.
    pub(crate) fn from_queues(queues: impl IntoIterator<Item = Queue>) -> Cache {
        Cache(
            queues
                .into_iter()
                .map(|queue| (queue.name().to_owned(), queue))
                .collect(),
        )
    }
}

impl QueueView for Cache {
    fn queue(&self, name: &str) -> Result<Arc<Queue>, ViewError> {
        self.0
            .get(name)
            .cloned()
            .map(Arc::new)
            .ok_or_else(|| ViewError::NotFound {
                name: name.to_owned(),
            })
    }
    fn children(&self, parent: &str) -> Result<Vec<Arc<Queue>>, ViewError> {
        Ok(self
            .0
            .values()
            .filter(|queue| queue.spec.parent == parent)
            .cloned()
            .map(Arc::new)
            .collect())
    }
    fn queues_where(&self, keep: &dyn Fn(&Queue) -> bool) -> Result<Vec<Arc<Queue>>, ViewError> {
        Ok(self
            .0
            .values()
            .filter(|queue| keep(queue))
            .cloned()
            .map(Arc::new)
            .collect())
    }
}

pub(crate) fn to_queue(value: &Value) -> Queue {
    decode("object", value).expect("a queue").expect("not null")
}

/// A queue named `name` under `parent` with weight 1 and the given spec fields.
fn queue(name: &str, parent: &str, spec: Value) -> Value {
    let mut value = json!({"metadata": {"name": name}, "spec": {"weight": 1, "parent": parent}});
    for (key, field) in spec.as_object().expect("an object") {
        value["spec"][key] = field.clone();
    }
    value
}

/// A queue with the state `state` (empty: unset) and nothing else but weight 1.
fn with_state(name: &str, state: &str) -> Value {
    let mut value = json!({"metadata": {"name": name}, "spec": {"weight": 1}});
    if !state.is_empty() {
        value["status"] = json!({"state": state});
    }
    value
}

/// A queue carrying the two hierarchy annotations.
fn hierarchical(name: &str, hierarchy: &str, weights: &str) -> Value {
    json!({
        "metadata": {"name": name, "annotations": {
            "volcano.sh/hierarchy": hierarchy, "volcano.sh/hierarchy-weights": weights}},
        "spec": {"weight": 1}
    })
}

fn run(
    operation: &str,
    name: &str,
    object: Option<&Value>,
    old: Option<&Value>,
    cache: &Cache,
    settings: &QueueSettings,
) -> Result<(), Refusal> {
    let object = object.map(to_queue);
    let old = old.map(to_queue);
    let review = Review {
        operation: Operation::parse(operation),
        name,
        namespace: "",
        object: object.as_ref(),
        old_object: old.as_ref(),
    };
    validate_queue(&review, cache, settings)
}

/// A CREATE of `object` validated against `cache`.
pub(crate) fn create(object: &Value, cache: &Cache) -> Result<(), Refusal> {
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    run(
        "CREATE",
        name,
        Some(object),
        None,
        cache,
        &QueueSettings::default(),
    )
}

/// An UPDATE of `old` to `object` validated against `cache`.
pub(crate) fn update(old: &Value, object: &Value, cache: &Cache) -> Result<(), Refusal> {
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    run(
        "UPDATE",
        name,
        Some(object),
        Some(old),
        cache,
        &QueueSettings::default(),
    )
}

/// A DELETE as the API server sends it: the name, no object.
pub(crate) fn delete(name: &str, cache: &Cache, settings: &QueueSettings) -> Result<(), Refusal> {
    run("DELETE", name, None, None, cache, settings)
}

fn checking_pods() -> QueueSettings {
    QueueSettings {
        enable_queue_allocated_pods_check: true,
        ..QueueSettings::default()
    }
}

/// The cache of Volcano's `TestAdmitQueues`.
fn admit_cache() -> Cache {
    Cache::of(&[
        with_state("open-state-for-delete", "Open"),
        with_state("closed-state-for-delete", "Closed"),
        hierarchical("ordinary-hierarchical-queue", "root/node1/node2", "1/2/3"),
        with_state("positive-weight-for-update", ""),
    ])
}

const WRONG_STATE: &str =
    r#"requestBody.spec.state: Invalid value: "wrong": queue state must be in [Open Closed]"#;

/// Volcano: TestAdmitQueues, "Normal Case State Not Set During Creating"
#[test]
fn a_queue_without_a_state_is_created() {
    let cache = admit_cache();
    assert_eq!(
        create(&with_state("normal-case-not-set", ""), &cache),
        Ok(())
    );
}

/// Volcano: TestAdmitQueues, "Normal Case Set State of Open During Creating"
#[test]
fn an_open_queue_is_created() {
    let cache = admit_cache();
    assert_eq!(
        create(&with_state("normal-case-set-open", "Open"), &cache),
        Ok(())
    );
}

/// Volcano: TestAdmitQueues, "Normal Case Set State of Closed During Creating"
#[test]
fn a_closed_queue_is_created() {
    let cache = admit_cache();
    assert_eq!(
        create(&with_state("normal-case-set-closed", "Closed"), &cache),
        Ok(())
    );
}

/// Volcano: TestAdmitQueues, "Abnormal Case Wrong State Configured During Creating"
#[test]
fn a_queue_in_an_unknown_state_is_refused_at_creation_naming_the_state() {
    let cache = admit_cache();
    let message = denied(create(&with_state("abnormal-case", "wrong"), &cache));
    assert_eq!(message, WRONG_STATE);
}

/// Volcano: TestAdmitQueues, "Normal Case Changing State From Open to Closed During Updating"
#[test]
fn an_open_queue_may_be_closed() {
    let cache = admit_cache();
    let verdict = update(&with_state("q", "Open"), &with_state("q", "Closed"), &cache);
    assert_eq!(verdict, Ok(()));
}

/// Volcano: TestAdmitQueues, "Normal Case Changing State From Closed to Open During Updating"
#[test]
fn a_closed_queue_may_be_opened() {
    let cache = admit_cache();
    let verdict = update(&with_state("q", "Closed"), &with_state("q", "Open"), &cache);
    assert_eq!(verdict, Ok(()));
}

/// Volcano: TestAdmitQueues, "Abnormal Case Changing State From Open to Wrong State During Updating"
#[test]
fn an_update_to_an_unknown_state_is_refused_naming_the_state() {
    let cache = admit_cache();
    let verdict = update(&with_state("q", "Open"), &with_state("q", "wrong"), &cache);
    assert_eq!(denied(verdict), WRONG_STATE);
}

/// Volcano: TestAdmitQueues, "Normal Case Queue With Closed State Can Be Deleted"
#[test]
fn a_closed_queue_without_children_is_deleted() {
    let cache = admit_cache();
    let verdict = delete("closed-state-for-delete", &cache, &QueueSettings::default());
    assert_eq!(verdict, Ok(()));
}

/// Volcano: TestAdmitQueues, "Normal Case Queue With Open State Can Be Deleted (Until close queue in kubectl supported)"
#[test]
fn an_open_queue_without_children_is_deleted() {
    let cache = admit_cache();
    let verdict = delete("open-state-for-delete", &cache, &QueueSettings::default());
    assert_eq!(verdict, Ok(()));
}

/// Volcano: TestAdmitQueues, "Normal Case Hierarchy Is A Substring of Another Queue"
#[test]
fn a_hierarchy_that_is_only_a_text_prefix_of_another_is_allowed() {
    let cache = admit_cache();
    let object = hierarchical("substring", "root/node", "1/4");
    assert_eq!(create(&object, &cache), Ok(()));
}

/// Volcano: TestAdmitQueues, "Abnormal Case default Queue Can Not Be Deleted"
#[test]
fn the_default_queue_is_never_deleted() {
    let cache = Cache::of(&[with_state("default", "Open")]);
    let message = denied(delete("default", &cache, &QueueSettings::default()));
    assert_eq!(message, "`default` queue can not be deleted");
}

/// Volcano: TestAdmitQueues, "Invalid Action"
#[test]
fn an_operation_other_than_create_update_or_delete_is_an_unknown_operation_not_a_denial() {
    let cache = admit_cache();
    let object = with_state("open-state-for-delete", "Open");
    let verdict = run(
        "Invalid",
        "default",
        Some(&object),
        None,
        &cache,
        &QueueSettings::default(),
    );
    let refusal = verdict.expect_err("refused");
    assert!(
        matches!(refusal, Refusal::UnknownOperation { ref operation, .. } if operation == "Invalid")
    );
    assert_eq!(
        refusal.to_string(),
        "invalid operation `Invalid`, expect operation to be `CREATE`, `UPDATE` or `DELETE`"
    );
}

/// Volcano: TestAdmitQueues, "Create queue without resource"
#[test]
fn a_queue_without_resources_is_created() {
    let cache = admit_cache();
    assert_eq!(
        create(&queue("resource-not-set", "", json!({})), &cache),
        Ok(())
    );
}

/// Volcano: TestAdmitQueues, "Create queue with deserved resource"
#[test]
fn a_queue_with_only_deserved_resources_is_created() {
    let cache = admit_cache();
    let object = queue(
        "only-deserved-set",
        "",
        json!({"deserved": {"cpu": "1", "memory": "1Gi"}}),
    );
    assert_eq!(create(&object, &cache), Ok(()));
}

/// Volcano: TestAdmitQueues, "Create queue with guarantee but no deserved should be rejected"
#[test]
fn a_guarantee_without_a_deserved_amount_is_refused_naming_the_resource() {
    let cache = admit_cache();
    let object = queue(
        "only-guarantee-set",
        "",
        json!({"guarantee": {"resource": {"cpu": "1"}}}),
    );
    assert_eq!(
        denied(create(&object, &cache)),
        r#"requestBody.spec.deserved.cpu: Invalid value: "<nil>": deserved[cpu] must be >= guarantee[cpu]=1"#
    );
}

/// Volcano: TestAdmitQueues, "Create queue with capability less deserved"
#[test]
fn a_deserved_amount_above_the_capability_is_refused_naming_both() {
    let cache = admit_cache();
    let object = queue(
        "capability-less-deserved",
        "",
        json!({"capability": {"cpu": "1", "memory": "1Gi"}, "deserved": {"cpu": "2", "memory": "1Gi"}}),
    );
    assert_eq!(
        denied(create(&object, &cache)),
        r#"requestBody.spec.deserved.cpu: Invalid value: "2": deserved[cpu]=2 must be <= capability[cpu]=1"#
    );
}

/// Volcano: TestAdmitQueues, "Create queue with deserved less guarantee"
#[test]
fn a_deserved_amount_below_the_guarantee_is_refused_naming_both() {
    let cache = admit_cache();
    let object = queue(
        "deserved-less-guarantee",
        "",
        json!({"deserved": {"cpu": "2", "memory": "1Gi"},
               "guarantee": {"resource": {"cpu": "2", "memory": "3Gi"}}}),
    );
    assert_eq!(
        denied(create(&object, &cache)),
        r#"requestBody.spec.deserved.memory: Invalid value: "1Gi": deserved[memory]=1Gi must be >= guarantee[memory]=3Gi"#
    );
}

/// Volcano: TestAdmitQueues, "Abnormal Case Hierarchy And Weights Do Not Match"
#[test]
fn a_hierarchy_and_weights_of_different_lengths_are_refused() {
    let cache = admit_cache();
    let object = hierarchical("mismatch", "root/a/b", "1/2/3/4");
    assert_eq!(
        denied(create(&object, &cache)),
        r#"requestBody.metadata.annotations: Invalid value: "root/a/b": volcano.sh/hierarchy must have the same length with volcano.sh/hierarchy-weights"#
    );
}

/// Volcano: TestAdmitQueues, "Abnormal Case Weights Is Negative"
#[test]
fn a_negative_hierarchy_weight_is_refused_naming_it() {
    let cache = admit_cache();
    let object = hierarchical("negative", "root/a/b", "1/-1/3");
    assert_eq!(
        denied(create(&object, &cache)),
        r#"requestBody.metadata.annotations: Invalid value: "1/-1/3": -1 in the 1/-1/3 must be larger than 0"#
    );
}

/// Volcano: TestAdmitQueues, "Abnormal Case Weights Is Format Illegal"
#[test]
fn a_hierarchy_weight_that_is_not_a_number_is_refused_naming_it() {
    let cache = admit_cache();
    let object = hierarchical("illegal", "root/a/b", "1/a/3");
    assert_eq!(
        denied(create(&object, &cache)),
        r#"requestBody.metadata.annotations: Invalid value: "1/a/3": a in the 1/a/3 is invalid number: strconv.ParseFloat: parsing "a": invalid syntax"#
    );
}

/// Volcano: TestAdmitQueues, "Abnormal Case Hierarchy Is In Sub Path of Another Queue"
#[test]
fn a_hierarchy_above_another_queues_hierarchy_is_refused_naming_that_queue() {
    let cache = admit_cache();
    let object = hierarchical("above", "root/node1", "1/4");
    assert_eq!(
        denied(create(&object, &cache)),
        r#"requestBody.metadata.annotations: Invalid value: "root/node1": root/node1 is not allowed to be in the sub path of root/node1/node2 of queue ordinary-hierarchical-queue"#
    );
}

fn pods(count: &str) -> Value {
    json!({"allocated": {"pods": count}})
}

fn with_status(mut value: Value, status: Value) -> Value {
    value["status"] = status;
    value
}

fn resources(cpu: &str, memory: &str) -> Value {
    json!({"cpu": cpu, "memory": memory})
}

/// The cache of Volcano's `TestAdmitHierarchicalQueues`.
fn hierarchy_cache() -> Cache {
    Cache::of(&[
        with_status(queue("queue-with-jobs", "root", json!({})), pods("1")),
        with_status(queue("queue-without-jobs", "root", json!({})), pods("0")),
        queue("child-queue", "queue-with-child-queues", json!({})),
        queue("queue-with-child-queues", "root", json!({})),
        with_status(
            queue("parent-queue-has-child-with-jobs", "root", json!({})),
            pods("1"),
        ),
        with_status(
            queue(
                "child-queue-a-with-jobs",
                "parent-queue-has-child-with-jobs",
                json!({}),
            ),
            pods("1"),
        ),
        queue("queue-without-child-queues", "root", json!({})),
        queue(
            "parent-queue-resource-test",
            "root",
            json!({"capability": resources("10", "20Gi"),
                   "guarantee": {"resource": resources("8", "16Gi")}}),
        ),
        queue(
            "sibling-queue-resource-test",
            "parent-queue-resource-test",
            json!({"capability": resources("3", "6Gi"),
                   "guarantee": {"resource": resources("2", "4Gi")}}),
        ),
        queue(
            "parent-queue-small-capability",
            "root",
            json!({"capability": resources("5", "10Gi")}),
        ),
        queue(
            "child-queue-larger-capability",
            "parent-queue-small-capability",
            json!({"capability": resources("10", "20Gi")}),
        ),
        parent_to_update(),
        queue(
            "child-queue-a",
            "parent-queue-to-update",
            json!({"capability": resources("12", "24Gi"),
                   "guarantee": {"resource": resources("8", "16Gi")}}),
        ),
        queue(
            "child-queue-b-for-update",
            "parent-queue-to-update",
            json!({"capability": resources("8", "16Gi"),
                   "guarantee": {"resource": resources("5", "10Gi")}}),
        ),
        queue(
            "parent-queue-empty-parent",
            "",
            json!({"capability": resources("100", "100Gi")}),
        ),
        queue(
            "child-of-empty-parent",
            "parent-queue-empty-parent",
            json!({"capability": resources("50", "50Gi")}),
        ),
    ])
}

fn parent_to_update() -> Value {
    queue(
        "parent-queue-to-update",
        "root",
        json!({"capability": resources("20", "40Gi"),
               "guarantee": {"resource": resources("15", "30Gi")}}),
    )
}

fn create_checking_pods(object: &Value, cache: &Cache) -> Result<(), Refusal> {
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    run("CREATE", name, Some(object), None, cache, &checking_pods())
}

/// Volcano: TestAdmitHierarchicalQueues, "Queue cannot use itself as parent"
#[test]
fn a_queue_that_is_its_own_parent_is_refused() {
    let object = queue(
        "self-referencing-queue",
        "self-referencing-queue",
        json!({}),
    );
    assert_eq!(
        denied(create_checking_pods(&object, &hierarchy_cache())),
        "queue self-referencing-queue cannot use itself as parent"
    );
}

/// Volcano: TestAdmitHierarchicalQueues, "Parent Queue has jobs"
#[test]
fn a_childless_parent_with_allocated_pods_is_refused_as_a_parent() {
    let object = queue("parent-queue-with-jobs", "queue-with-jobs", json!({}));
    assert_eq!(
        denied(create_checking_pods(&object, &hierarchy_cache())),
        "queue queue-with-jobs cannot be the parent queue of queue parent-queue-with-jobs because it has allocated Pods: 1"
    );
}

/// Volcano: TestAdmitHierarchicalQueues, "Parent Queue has no jobs"
#[test]
fn a_childless_parent_without_pods_is_accepted_as_a_parent() {
    let object = queue("parent-queue-without-jobs", "queue-without-jobs", json!({}));
    assert_eq!(create_checking_pods(&object, &hierarchy_cache()), Ok(()));
}

/// Volcano: TestAdmitHierarchicalQueues, "Parent Queue has child with jobs"
#[test]
fn a_parent_that_already_has_children_is_accepted_whatever_its_pods() {
    let object = queue(
        "child-queue-b",
        "parent-queue-has-child-with-jobs",
        json!({}),
    );
    assert_eq!(create_checking_pods(&object, &hierarchy_cache()), Ok(()));
}

/// Volcano: TestAdmitHierarchicalQueues, "Delete queue with child queue"
#[test]
fn a_queue_with_children_is_not_deleted_and_the_children_are_named() {
    let message = denied(delete(
        "queue-with-child-queues",
        &hierarchy_cache(),
        &checking_pods(),
    ));
    assert_eq!(
        message,
        "queue queue-with-child-queues can not be deleted because it has 1 child queues: child-queue"
    );
}

/// Volcano: TestAdmitHierarchicalQueues, "Delete queue with allocated pods"
#[test]
fn with_the_pods_check_on_a_queue_with_allocated_pods_is_not_deleted() {
    let message = denied(delete(
        "queue-with-jobs",
        &hierarchy_cache(),
        &checking_pods(),
    ));
    assert_eq!(
        message,
        "queue queue-with-jobs cannot be deleted because it has allocated Pods: 1"
    );
}

/// Volcano: TestAdmitHierarchicalQueues, "Delete queue without child queue"
#[test]
fn a_queue_without_children_or_pods_is_deleted() {
    let verdict = delete(
        "queue-without-child-queues",
        &hierarchy_cache(),
        &checking_pods(),
    );
    assert_eq!(verdict, Ok(()));
}

/// Volcano: TestAdmitHierarchicalQueues, "Child capability exceeds parent capability"
#[test]
fn a_capability_above_the_parents_is_refused_naming_the_resource_and_both_amounts() {
    let object = queue(
        "child-capability-exceeds-parent",
        "parent-queue-resource-test",
        json!({"capability": resources("20", "40Gi")}),
    );
    assert_eq!(
        denied(create_checking_pods(&object, &hierarchy_cache())),
        "queue child-capability-exceeds-parent capability[cpu]=20 exceeds its ancestor's capability=10"
    );
}

/// Volcano: TestAdmitHierarchicalQueues, "Siblings guarantee sum exceeds parent guarantee"
#[test]
fn siblings_guarantees_above_the_parents_are_refused_with_both_sums() {
    let object = queue(
        "siblings-guarantee-exceeds",
        "parent-queue-resource-test",
        json!({"capability": resources("7", "14Gi"), "deserved": resources("7", "14Gi"),
               "guarantee": {"resource": resources("7", "14Gi")}}),
    );
    assert_eq!(
        denied(create_checking_pods(&object, &hierarchy_cache())),
        "parent queue parent-queue-resource-test validation failed: sum of children's guarantee \
         (cpu 9000.00, memory 19327352832.00) exceeds parent's guarantee limit (cpu 8000.00, memory 17179869184.00)"
    );
}

/// Volcano: TestAdmitHierarchicalQueues, "Parent capability less than child capability on UPDATE"
#[test]
fn lowering_a_capability_below_a_childs_is_refused_naming_both() {
    let updated = queue(
        "parent-queue-to-update",
        "root",
        json!({"capability": resources("10", "20Gi"), "deserved": resources("10", "20Gi"),
               "guarantee": {"resource": resources("8", "16Gi")}}),
    );
    assert_eq!(
        denied(update(&parent_to_update(), &updated, &hierarchy_cache())),
        "queue parent-queue-to-update capability[cpu]=10 is smaller than its descendants' max capability=12"
    );
}

/// Volcano: TestAdmitHierarchicalQueues, "Sum of children's guarantee exceeds parent guarantee on UPDATE"
#[test]
fn lowering_a_guarantee_below_the_childrens_sum_is_refused_with_both_sums() {
    let updated = queue(
        "parent-queue-to-update",
        "root",
        json!({"capability": resources("20", "40Gi"), "deserved": resources("20", "40Gi"),
               "guarantee": {"resource": resources("10", "20Gi")}}),
    );
    assert_eq!(
        denied(update(&parent_to_update(), &updated, &hierarchy_cache())),
        "queue parent-queue-to-update validation failed: sum of children's guarantee \
         (cpu 13000.00, memory 27917287424.00) exceeds parent's guarantee limit (cpu 10000.00, memory 21474836480.00)"
    );
}

/// Volcano: TestAdmitHierarchicalQueues, "Update queue with empty parent - should validate child constraints"
#[test]
fn a_top_level_queue_without_a_parent_field_is_still_checked_against_its_children() {
    let old = queue(
        "parent-queue-empty-parent",
        "",
        json!({"capability": resources("100", "100Gi")}),
    );
    let updated = queue(
        "parent-queue-empty-parent",
        "",
        json!({"capability": resources("30", "30Gi")}),
    );
    assert_eq!(
        denied(update(&old, &updated, &hierarchy_cache())),
        "queue parent-queue-empty-parent capability[cpu]=30 is smaller than its descendants' max capability=50"
    );
}

/// Volcano: TestAdmitHierarchicalQueues, "Queue with negative capability should be rejected"
#[test]
fn a_negative_capability_is_refused_naming_the_field_and_value() {
    let object = queue(
        "queue-negative-capability",
        "root",
        json!({"capability": {"cpu": "-10"}}),
    );
    assert_eq!(
        denied(create_checking_pods(&object, &hierarchy_cache())),
        r#"requestBody.spec.capability.cpu: Invalid value: "-10": must be greater than or equal to 0"#
    );
}

/// Volcano: TestAdmitHierarchicalQueues, "Queue with negative deserved should be rejected"
#[test]
fn a_negative_deserved_amount_is_refused_naming_the_field_and_value() {
    let object = queue(
        "queue-negative-deserved",
        "root",
        json!({"deserved": {"cpu": "-5"}}),
    );
    assert_eq!(
        denied(create_checking_pods(&object, &hierarchy_cache())),
        r#"requestBody.spec.deserved.cpu: Invalid value: "-5": must be greater than or equal to 0"#
    );
}

/// Volcano: TestAdmitHierarchicalQueues, "Queue with negative guarantee should be rejected"
#[test]
fn a_negative_guarantee_is_refused_with_every_problem_in_one_aggregate() {
    let object = queue(
        "queue-negative-guarantee",
        "root",
        json!({"guarantee": {"resource": {"cpu": "-2"}}}),
    );
    assert_eq!(
        denied(create_checking_pods(&object, &hierarchy_cache())),
        r#"[requestBody.spec.guarantee.resource.cpu: Invalid value: "-2": must be greater than or equal to 0, requestBody.spec.deserved.cpu: Invalid value: "<nil>": deserved[cpu] must be >= guarantee[cpu]=-2]"#
    );
}

/// The chain root → q1 → q2 of Volcano's `TestValidateQueueDepthDynamic`, and q3 under q2.
fn depth_verdict(max_queue_depth: usize) -> Result<(), Refusal> {
    let cache = Cache::of(&[queue("q1", "root", json!({})), queue("q2", "q1", json!({}))]);
    let settings = QueueSettings {
        max_queue_depth,
        ..QueueSettings::default()
    };
    let q3 = queue("q3", "q2", json!({}));
    run("CREATE", "q3", Some(&q3), None, &cache, &settings)
}

/// Volcano: TestValidateQueueDepthDynamic, "Depth 3 is allowed when maxDepth is 5"
#[test]
fn a_third_level_queue_is_allowed_under_a_depth_limit_of_five() {
    assert_eq!(depth_verdict(5), Ok(()));
}

/// Volcano: TestValidateQueueDepthDynamic, "Depth 3 is allowed when maxDepth is 3"
#[test]
fn a_third_level_queue_is_allowed_under_a_depth_limit_of_three() {
    assert_eq!(depth_verdict(3), Ok(()));
}

/// Volcano: TestValidateQueueDepthDynamic, "Depth 3 is rejected when maxDepth is 2"
#[test]
fn a_third_level_queue_is_refused_under_a_depth_limit_of_two_naming_the_limit() {
    assert_eq!(
        denied(depth_verdict(2)),
        "queue q3 exceeds the maximum allowed depth of 2"
    );
}

/// The hierarchy of Volcano's `TestValidateChildAgainstAncestorForCapability`.
fn ancestor_cache() -> Cache {
    Cache::of(&[
        queue(
            "ancestor-gp",
            "root",
            json!({"capability": {"cpu": "100", "memory": "100Gi", "nvidia.com/gpu": "8"}}),
        ),
        queue(
            "ancestor-p",
            "ancestor-gp",
            json!({"capability": resources("50", "50Gi")}),
        ),
        queue("ancestor-p-nocap", "ancestor-gp", json!({})),
    ])
}

fn create_child(name: &str, parent: &str, capability: Value) -> Result<(), Refusal> {
    let object = queue(name, parent, json!({"capability": capability}));
    create(&object, &ancestor_cache())
}

/// Volcano: TestValidateChildAgainstAncestorForCapability, "Child CPU exceeds direct parent capability"
#[test]
fn a_cpu_capability_above_the_parents_is_refused() {
    let verdict = create_child("child-exceed-cpu", "ancestor-p", json!({"cpu": "60"}));
    assert_eq!(
        denied(verdict),
        "queue child-exceed-cpu capability[cpu]=60 exceeds its ancestor's capability=50"
    );
}

/// Volcano: TestValidateChildAgainstAncestorForCapability, "Child memory exceeds grandparent capability (skips parent with lower limit)"
#[test]
fn a_memory_capability_above_the_nearest_ancestors_is_refused() {
    let verdict = create_child("child-exceed-mem", "ancestor-p", json!({"memory": "55Gi"}));
    assert_eq!(
        denied(verdict),
        "queue child-exceed-mem capability[memory]=55Gi exceeds its ancestor's capability=50Gi"
    );
}

/// Volcano: TestValidateChildAgainstAncestorForCapability, "Child GPU exceeds grandparent capability (parent has no GPU)"
#[test]
fn a_gpu_capability_is_checked_against_the_first_ancestor_that_sets_one() {
    let verdict = create_child(
        "child-exceed-gpu",
        "ancestor-p",
        json!({"nvidia.com/gpu": "10"}),
    );
    assert_eq!(
        denied(verdict),
        "queue child-exceed-gpu capability[nvidia.com/gpu]=10000.00 exceeds its ancestor's capability=8000.00"
    );
}

/// Volcano: TestValidateChildAgainstAncestorForCapability, "Child within all ancestor limits"
#[test]
fn a_capability_within_every_ancestors_is_allowed() {
    let capability = json!({"cpu": "40", "memory": "40Gi", "nvidia.com/gpu": "4"});
    assert_eq!(
        create_child("child-within-limits", "ancestor-p", capability),
        Ok(())
    );
}

/// Volcano: TestValidateChildAgainstAncestorForCapability, "Child without capability should pass"
#[test]
fn a_child_without_a_capability_is_allowed() {
    assert_eq!(
        create_child("child-no-cap", "ancestor-p", json!({})),
        Ok(())
    );
}

/// Volcano: TestValidateChildAgainstAncestorForCapability, "Child under parent without capability - checks grandparent"
#[test]
fn under_a_parent_without_capability_the_grandparents_limit_refuses() {
    let verdict = create_child(
        "child-under-nocap",
        "ancestor-p-nocap",
        json!({"cpu": "200"}),
    );
    assert_eq!(
        denied(verdict),
        "queue child-under-nocap capability[cpu]=200 exceeds its ancestor's capability=100"
    );
}

/// Volcano: TestValidateChildAgainstAncestorForCapability, "Child under parent without capability - within grandparent limits"
#[test]
fn under_a_parent_without_capability_the_grandparents_limit_allows() {
    let verdict = create_child(
        "child-under-nocap-ok",
        "ancestor-p-nocap",
        json!({"cpu": "80"}),
    );
    assert_eq!(verdict, Ok(()));
}

fn parent_a() -> Value {
    queue(
        "vc-parent-a",
        "root",
        json!({"capability": {"cpu": "20", "memory": "20Gi", "nvidia.com/gpu": "4"},
               "guarantee": {"resource": resources("20", "20Gi")},
               "deserved": resources("20", "20Gi")}),
    )
}

fn parent_b() -> Value {
    queue(
        "vc-parent-b",
        "root",
        json!({"capability": resources("50", "50Gi"),
               "guarantee": {"resource": resources("50", "50Gi")},
               "deserved": resources("50", "50Gi")}),
    )
}

/// Creates `parent` over a cache holding it, `children` and the grandchild of Volcano's
/// `TestValidateChildrenConstraintsForCapability`.
fn create_parent_over(parent: Value, children: &[Value]) -> Result<(), Refusal> {
    let mut queues = vec![
        parent.clone(),
        queue(
            "vc-grandchild-a1-1",
            "vc-child-a1",
            json!({"capability": {"cpu": "25"}}),
        ),
    ];
    queues.extend_from_slice(children);
    create(&parent, &Cache::of(&queues))
}

/// Volcano: TestValidateChildrenConstraintsForCapability, "Grandchild CPU exceeds parent capability via subtree (child has no CPU cap)"
#[test]
fn a_grandchilds_capability_counts_when_the_child_sets_none() {
    let children = [
        queue(
            "vc-child-a1",
            "vc-parent-a",
            json!({"capability": {"memory": "15Gi"}}),
        ),
        queue(
            "vc-child-a2",
            "vc-parent-a",
            json!({"capability": {"cpu": "10", "memory": "10Gi", "nvidia.com/gpu": "3"}}),
        ),
    ];
    assert_eq!(
        denied(create_parent_over(parent_a(), &children)),
        "queue vc-parent-a capability[cpu]=20 is smaller than its descendants' max capability=25"
    );
}

/// Volcano: TestValidateChildrenConstraintsForCapability, "All children within parent capability"
#[test]
fn children_within_the_parents_capability_are_allowed() {
    let children = [
        queue(
            "vc-child-b1",
            "vc-parent-b",
            json!({"capability": {"cpu": "30"}}),
        ),
        queue(
            "vc-child-b2",
            "vc-parent-b",
            json!({"capability": {"cpu": "20"}}),
        ),
    ];
    assert_eq!(create_parent_over(parent_b(), &children), Ok(()));
}

/// Volcano: TestValidateChildrenConstraintsForCapability, "Parent without capability skips capability check"
#[test]
fn a_parent_without_capability_is_not_checked_against_its_children() {
    let parent = queue("vc-parent-c", "root", json!({}));
    let children = [queue(
        "vc-child-c1",
        "vc-parent-c",
        json!({"capability": {"cpu": "100"}}),
    )];
    assert_eq!(create_parent_over(parent, &children), Ok(()));
}

/// Volcano: TestValidateChildrenConstraintsForCapability, "Parent with no children"
#[test]
fn a_parent_without_children_is_allowed() {
    assert_eq!(create_parent_over(parent_b(), &[]), Ok(()));
}

/// Volcano: TestValidateChildrenConstraintsForCapability, "Child GPU capability within parent GPU limit"
#[test]
fn a_childs_gpu_capability_within_the_parents_is_allowed() {
    let children = [queue(
        "child-gpu-ok",
        "vc-parent-a",
        json!({"capability": {"nvidia.com/gpu": "3"}}),
    )];
    assert_eq!(create_parent_over(parent_a(), &children), Ok(()));
}

/// Volcano: TestValidateChildrenConstraintsForCapability, "Child GPU capability exceeds parent GPU limit via subtree"
#[test]
fn a_childs_gpu_capability_above_the_parents_is_refused() {
    let children = [queue(
        "child-gpu-exceed",
        "vc-parent-a",
        json!({"capability": {"nvidia.com/gpu": "5"}}),
    )];
    assert_eq!(
        denied(create_parent_over(parent_a(), &children)),
        "queue vc-parent-a capability[nvidia.com/gpu]=4000.00 is smaller than its descendants' max capability=5000.00"
    );
}

/// Not in Volcano's tests: a loop of parents in the cache ends the ancestor walk of an
/// update (Volcano's walk would not end).
#[test]
fn a_loop_of_parents_in_the_cache_does_not_hang_the_capability_check() {
    let cache = Cache::of(&[
        queue("loop-a", "loop-b", json!({})),
        queue("loop-b", "loop-a", json!({})),
    ]);
    let old = queue("child", "loop-a", json!({"capability": {"cpu": "1"}}));
    let updated = queue("child", "loop-a", json!({"capability": {"cpu": "2"}}));
    assert_eq!(update(&old, &updated, &cache), Ok(()));
}

/// The mutator's patch of `object` under `operation`.
fn patch_of(operation: &str, object: &Value) -> Result<Vec<PatchOperation>, Refusal> {
    let queue = to_queue(object);
    let review = Review {
        operation: Operation::parse(operation),
        name: queue.name(),
        namespace: "",
        object: Some(&queue),
        old_object: None,
    };
    mutate_queue(&review)
}

fn mutate(operation: &str, object: &Value) -> Result<Value, Refusal> {
    let patch = patch_of(operation, object)?;
    let mut patched = object.clone();
    json_patch::patch(&mut patched, &patch).expect("the patch applies");
    Ok(patched)
}

/// Volcano: TestMutateQueues, "Normal Case Refresh Default Open State and Reclaimable For Queue"
#[test]
fn a_new_queue_without_reclaimable_is_made_reclaimable_and_nothing_else_changes() {
    let object = with_state("normal-case-refresh-default-state", "");
    let mut expected = object.clone();
    expected["spec"]["reclaimable"] = json!(true);
    assert_eq!(mutate("CREATE", &object), Ok(expected));
}

/// Volcano: TestMutateQueues, "Invalid Action"
#[test]
fn the_queue_mutator_answers_an_operation_other_than_create_as_unknown() {
    let object = with_state("normal-case-set-open", "Open");
    let refusal = mutate("Invalid", &object).expect_err("refused");
    assert_eq!(
        refusal,
        Refusal::UnknownOperation {
            operation: "Invalid".to_owned(),
            expected: "`CREATE`"
        }
    );
    assert_eq!(
        refusal.to_string(),
        "invalid operation `Invalid`, expect operation to be `CREATE`"
    );
}

/// Volcano: TestMutateQueues, "Normal Case Append Default Root to The HDRF Attributes"
#[test]
fn a_hierarchy_without_root_gets_a_root_level_and_weight() {
    let mut object = hierarchical("qeueu-hierarchy-without-root", "a/b/c", "2/3/4");
    object["spec"]["reclaimable"] = json!(true);
    object["status"] = json!({"state": "Open"});
    let mut expected = object.clone();
    expected["metadata"]["annotations"] = json!({
        "volcano.sh/hierarchy": "root/a/b/c", "volcano.sh/hierarchy-weights": "1/2/3/4"});
    assert_eq!(mutate("CREATE", &object), Ok(expected));
}

/// Not in Volcano's tests: where Volcano sends the patch `null`, the mutator answers an empty
/// patch.
#[test]
fn a_queue_with_every_default_set_gets_an_empty_patch() {
    let mut object = with_state("complete", "Open");
    object["spec"]["reclaimable"] = json!(false);
    assert_eq!(patch_of("CREATE", &object), Ok(Vec::new()));
}

/// Not in Volcano's tests: a queue with weight 0 is given weight 1.
#[test]
fn a_queue_without_a_weight_is_given_weight_one() {
    let object = json!({"metadata": {"name": "weightless"}, "spec": {"reclaimable": true}});
    let mut expected = object.clone();
    expected["spec"]["weight"] = json!(1);
    assert_eq!(mutate("CREATE", &object), Ok(expected));
}

/// Not in Volcano's tests: a queue sent without a spec (the CRD does not require one) gets its
/// defaults as one add of the whole spec, which applies; Volcano's adds below `/spec` do not.
#[test]
fn a_queue_without_a_spec_gets_its_defaults_as_one_add_of_the_spec_that_applies() {
    for object in [
        json!({"metadata": {"name": "bare"}}),
        json!({"metadata": {"name": "bare"}, "spec": null}),
    ] {
        let mut expected = object.clone();
        expected["spec"] = json!({"reclaimable": true, "weight": 1});

        let patched = mutate("CREATE", &object);

        assert_eq!(patched, Ok(expected), "{object}");
    }
}

/// Not in Volcano's tests: a queue whose spec sets a field keeps the field-by-field patch.
#[test]
fn a_queue_with_a_spec_field_set_is_patched_field_by_field() {
    let object = json!({"metadata": {"name": "q"}, "spec": {"weight": 4}});

    let patch = serde_json::to_value(patch_of("CREATE", &object).expect("mutated")).expect("json");

    assert_eq!(
        patch,
        json!([{"op": "add", "path": "/spec/reclaimable", "value": true}])
    );
}

// Kubernetes' quantity rules as Volcano reaches them through `resource.Quantity`: beyond
// Volcano's table tests, each checked against the Kubernetes code Volcano calls.

#[test]
fn quantities_in_micro_and_nano_units_are_quantities() {
    let object = queue(
        "fine-grained",
        "root",
        json!({"capability": {"cpu": "2u", "memory": "5000n"}, "deserved": {"cpu": "1u"}}),
    );
    assert_eq!(create(&object, &admit_cache()), Ok(()));
}

#[test]
fn a_negative_fraction_of_a_counted_resource_is_refused_as_negative_and_as_not_whole() {
    let object = queue(
        "negative-pods",
        "root",
        json!({"capability": {"pods": "-1.5"}}),
    );
    assert_eq!(
        denied(create(&object, &admit_cache())),
        r#"[requestBody.spec.capability.pods: Invalid value: "-1.5": must be greater than or equal to 0, requestBody.spec.capability.pods: Invalid value: "-1.5": must be an integer]"#
    );
}

#[test]
fn deserved_above_capability_by_less_than_a_thousandth_is_refused() {
    let object = queue(
        "fine-excess",
        "root",
        json!({"capability": {"cpu": "1.0001"}, "deserved": {"cpu": "1.0002"}}),
    );
    assert_eq!(
        denied(create(&object, &admit_cache())),
        r#"requestBody.spec.deserved.cpu: Invalid value: "1.0002": deserved[cpu]=1.0002 must be <= capability[cpu]=1.0001"#
    );
}

#[test]
fn the_root_queues_capability_written_another_way_is_no_change() {
    let old = queue("root", "", json!({"capability": {"cpu": "1"}}));
    let object = queue("root", "", json!({"capability": {"cpu": "1000m"}}));
    assert_eq!(update(&old, &object, &admit_cache()), Ok(()));
}

#[test]
fn the_root_queues_capability_changed_by_less_than_a_thousandth_is_refused() {
    let old = queue("root", "", json!({"capability": {"cpu": "1.0001"}}));
    let object = queue("root", "", json!({"capability": {"cpu": "1.0002"}}));
    assert_eq!(
        denied(update(&old, &object, &admit_cache())),
        "root queue's resource attributes (capability, deserved, guarantee) cannot be modified"
    );
}

#[test]
fn a_prefixed_resource_that_is_not_a_qualified_name_may_be_a_fraction() {
    let object = queue(
        "odd-resource",
        "root",
        json!({"capability": {"a/b/c": "0.5", "example.com/-bad": "0.5"}}),
    );
    assert_eq!(create(&object, &admit_cache()), Ok(()));
}

#[test]
fn an_extended_resource_must_be_whole() {
    let object = queue(
        "half-gpu",
        "root",
        json!({"capability": {"nvidia.com/gpu": "0.5"}}),
    );
    assert_eq!(
        denied(create(&object, &admit_cache())),
        r#"requestBody.spec.capability.nvidia.com/gpu: Invalid value: "0.5": must be an integer"#
    );
}

#[test]
fn a_weight_too_large_for_a_float_is_refused_as_out_of_range() {
    let object = hierarchical("big", "root/big", "1/1e400");
    assert_eq!(
        denied(create(&object, &admit_cache())),
        r#"requestBody.metadata.annotations: Invalid value: "1/1e400": 1e400 in the 1/1e400 is invalid number: strconv.ParseFloat: parsing "1e400": value out of range"#
    );
}

#[test]
fn a_negative_weight_too_large_for_a_float_is_out_of_range_not_below_zero() {
    let object = hierarchical("big", "root/big", "1/-1e400");
    assert_eq!(
        denied(create(&object, &admit_cache())),
        r#"requestBody.metadata.annotations: Invalid value: "1/-1e400": -1e400 in the 1/-1e400 is invalid number: strconv.ParseFloat: parsing "-1e400": value out of range"#
    );
}

#[test]
fn a_signed_nan_weight_is_invalid_syntax() {
    let object = hierarchical("nan", "root/nan", "1/+nan");
    assert_eq!(
        denied(create(&object, &admit_cache())),
        r#"requestBody.metadata.annotations: Invalid value: "1/+nan": +nan in the 1/+nan is invalid number: strconv.ParseFloat: parsing "+nan": invalid syntax"#
    );
}

#[test]
fn an_infinite_weight_spelled_out_is_a_number() {
    let object = hierarchical("endless", "root/endless", "1/+Inf");
    assert_eq!(create(&object, &admit_cache()), Ok(()));
}
