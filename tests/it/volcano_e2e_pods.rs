//! Volcano's end-to-end pod mutation specs, `test/e2e/admission/pod_mutate_test.go` ("Pod
//! Mutating E2E Test"), all twelve, ported over HTTPS as the Pod CREATE each sends to
//! `/pods/mutate`. Volcano's e2e install runs its webhook with the Helm chart's admission
//! config, whose resource groups are all commented out: no group takes any pod, so every spec's
//! pod must come back unchanged, which is what each spec checks of the pod it created. The pods
//! arrive as the API server sends them, with `schedulerName: default-scheduler` already set.

use crate::serve_support::{Running, start_with};
use crate::volcano_pods_mutate::mutate;

use serde_json::{Value, json};

/// An admission config as Volcano's chart ships it: every resource group commented out.
const NO_GROUPS: &str = "\
# resourceGroups:
# - resourceGroup: cpu
#   schedulerName: volcano
#   labels:
#     volcano.sh/nodetype: cpu
";

async fn serve_without_groups() -> Running {
    start_with(
        |settings, dir| {
            let path = dir.join("volcano-admission.conf");
            std::fs::write(&path, NO_GROUPS).expect("write the config");
            settings.resource_groups_file = Some(path);
        },
        |builder| builder,
        None,
    )
    .await
}

/// The spec's pod `name` in namespace `e2e-ns`, one busybox container, with the `metadata`
/// and `spec` fields given merged in, as the API server sends it.
fn pod(name: &str, metadata: Value, spec: Value) -> Value {
    let mut pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "e2e-ns"},
        "spec": {"containers": [{"name": "test-container", "image": "busybox:1.24"}],
            "schedulerName": "default-scheduler"}});
    for (key, value) in metadata.as_object().expect("an object") {
        pod["metadata"][key] = value.clone();
    }
    for (key, value) in spec.as_object().expect("an object") {
        pod["spec"][key] = value.clone();
    }
    pod
}

/// The pod `/pods/mutate` creates of `pod`, checked to be allowed without a patch.
async fn created(pod: Value) -> Value {
    let running = serve_without_groups().await;

    let (created, answer) = mutate(&running, pod.clone()).await;

    assert_eq!(answer["response"]["allowed"], true);
    assert!(
        answer["response"]["patch"].is_null(),
        "no group, no patch: {answer}"
    );
    assert_eq!(created, pod);
    created
}

/// Volcano: "Pod Mutating E2E Test", "Should add nodeSelector for management namespace pods"
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_gets_no_node_selector_without_a_group() {
    let created = created(pod("management-pod", json!({}), json!({}))).await;

    assert!(created["spec"].get("nodeSelector").is_none());
}

/// The pod of a spec annotated `volcano.sh/resource-group: group`.
fn annotated(name: &str, group: &str) -> Value {
    pod(
        name,
        json!({"annotations": {"volcano.sh/resource-group": group}}),
        json!({}),
    )
}

/// Volcano: "Pod Mutating E2E Test", "Should add nodeSelector for pods with cpu
/// resource-group annotation"
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_annotated_for_the_cpu_group_keeps_its_annotation_and_gets_no_selector() {
    let created = created(annotated("cpu-pod", "cpu")).await;

    assert!(created["spec"].get("nodeSelector").is_none());
    assert_eq!(
        created["metadata"]["annotations"]["volcano.sh/resource-group"],
        "cpu"
    );
}

/// Volcano: "Pod Mutating E2E Test", "Should add nodeSelector for pods with gpu
/// resource-group annotation"
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_annotated_for_the_gpu_group_keeps_its_annotation_and_gets_no_selector() {
    let created = created(annotated("gpu-pod", "gpu")).await;

    assert!(created["spec"].get("nodeSelector").is_none());
    assert_eq!(
        created["metadata"]["annotations"]["volcano.sh/resource-group"],
        "gpu"
    );
}

/// Volcano: "Pod Mutating E2E Test", "Should add affinity for management namespace pods": the
/// spec checks the node affinity only when an affinity was added; none is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_gets_no_affinity_without_a_group() {
    let created = created(pod("affinity-pod", json!({}), json!({}))).await;

    assert!(created["spec"].get("affinity").is_none());
}

/// Volcano: "Pod Mutating E2E Test", "Should not override existing affinity"
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_s_own_affinity_is_kept_whole() {
    let affinity = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "custom-key", "operator": "In", "values": ["custom-value"]}]}]}}});

    let created = created(pod(
        "existing-affinity-pod",
        json!({}),
        json!({"affinity": affinity}),
    ))
    .await;

    assert_eq!(created["spec"]["affinity"], affinity);
}

/// Volcano: "Pod Mutating E2E Test", "Should add tolerations for management namespace pods":
/// the spec checks tolerations only when some were added; none are.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_gets_no_toleration_without_a_group() {
    let created = created(pod("tolerations-pod", json!({}), json!({}))).await;

    assert!(created["spec"].get("tolerations").is_none());
}

/// Volcano: "Pod Mutating E2E Test", "Should append tolerations to existing ones"
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_s_own_tolerations_are_kept() {
    let tolerations = json!([{"key": "existing-taint", "operator": "Equal",
        "value": "existing-value", "effect": "NoSchedule"}]);

    let created = created(pod(
        "existing-tolerations-pod",
        json!({}),
        json!({"tolerations": tolerations}),
    ))
    .await;

    assert_eq!(created["spec"]["tolerations"], tolerations);
}

/// Volcano: "Pod Mutating E2E Test", "Should set scheduler name based on resource group"
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_annotated_for_a_group_keeps_the_default_scheduler() {
    let created = created(annotated("scheduler-pod", "cpu")).await;

    assert_eq!(created["spec"]["schedulerName"], "default-scheduler");
}

/// Volcano: "Pod Mutating E2E Test", "Should merge nodeSelector with existing ones"
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_s_own_node_selector_is_kept_and_nothing_is_merged_in() {
    let mut merging = annotated("merge-nodeselector-pod", "cpu");
    merging["spec"]["nodeSelector"] = json!({"existing-label": "existing-value"});

    let created = created(merging).await;

    assert_eq!(
        created["spec"]["nodeSelector"],
        json!({"existing-label": "existing-value"})
    );
}

/// Volcano: "Pod Mutating E2E Test", "Should not mutate pods that don't match any resource
/// group"
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_no_group_takes_is_not_mutated() {
    let created = created(pod("normal-pod", json!({}), json!({}))).await;

    assert!(created["spec"].get("nodeSelector").is_none());
    assert!(created["spec"].get("affinity").is_none());
    assert_eq!(created["spec"]["schedulerName"], "default-scheduler");
}

/// Volcano: "Pod Mutating E2E Test", "Should handle pods with custom annotation-based resource
/// group matching"
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_annotated_for_an_unknown_group_is_created_with_its_name_and_annotation() {
    let created = created(annotated("custom-annotation-pod", "custom-group")).await;

    assert_eq!(created["metadata"]["name"], "custom-annotation-pod");
    assert_eq!(
        created["metadata"]["annotations"]["volcano.sh/resource-group"],
        "custom-group"
    );
}

/// Volcano: "Pod Mutating E2E Test", "Should preserve existing scheduler name when already
/// specified"
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_s_own_scheduler_name_is_kept() {
    let created = created(pod(
        "existing-scheduler-pod",
        json!({}),
        json!({"schedulerName": "custom-scheduler"}),
    ))
    .await;

    assert_eq!(created["spec"]["schedulerName"], "custom-scheduler");
}
