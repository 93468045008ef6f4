//! Volcano's `/pods/mutate` table test, ported: the resource groups of Volcano's
//! `AdmissionConfiguration`, served unchanged, patch a pod as Volcano's patch does. Each case
//! compares the pod our answer makes with the pod Volcano's expected patch makes.
//!
//! Volcano: `pkg/webhooks/admission/pods/mutate/mutate_pod_test.go`, `TestMutatePods`, all four
//! cases.

use crate::serve_pods::patched;
use crate::serve_support::{Running, start_with};

use http::StatusCode;
use serde_json::{Value, json};

/// The test's `AdmissionConfiguration`, as a Volcano user writes it in the ConfigMap.
const VOLCANO_GROUPS: &str = r#"
resourceGroups:
  - resourceGroup: management
    object:
      key: namespace
      value: [mng-ns-1, mng-ns-2]
    schedulerName: default-scheduler
    tolerations:
      - {key: mng-taint-1, operator: Exists, effect: NoSchedule}
    affinity: '{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"kubernetes.io/os","operator":"In","values":["linux"]}]}]}}}'
    labels:
      volcano.sh/nodetype: management
  - resourceGroup: cpu
    object:
      key: annotation
      value: ["volcano.sh/resource-group: cpu"]
    schedulerName: volcano
    labels:
      volcano.sh/nodetype: cpu
  - resourceGroup: gpu
    schedulerName: volcano
    labels:
      volcano.sh/nodetype: gpu
"#;

async fn serve_volcano_groups() -> Running {
    start_with(
        |settings, dir| {
            let path = dir.join("volcano-admission.conf");
            std::fs::write(&path, VOLCANO_GROUPS).expect("write the groups");
            settings.resource_groups_file = Some(path);
        },
        |builder| builder,
        None,
    )
    .await
}

/// A Pod CREATE of `pod` in the namespace `default` unless the pod names its own.
fn pod_review(pod: Value) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "7a3e9b1c-pod",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": pod["metadata"]["namespace"].as_str().unwrap_or("default"),
            "operation": "CREATE",
            "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller"},
            "object": pod,
        }
    })
}

/// The pod our `/pods/mutate` makes of `pod`, and the answer.
pub(crate) async fn mutate(running: &Running, pod: Value) -> (Value, Value) {
    let review = pod_review(pod);
    let answer = running.client.post_json("/pods/mutate", &review).await;
    assert_eq!(answer.status, StatusCode::OK);
    let answer = answer.json();
    (patched(&review, &answer), answer)
}

/// `pod` with Volcano's expected patch applied.
fn with_volcano_patch(mut pod: Value, patch: Value) -> Value {
    let patch: json_patch::Patch = serde_json::from_value(patch).expect("a JSON Patch");
    json_patch::patch(&mut pod, &patch).expect("Volcano's patch applies");
    pod
}

/// Volcano: `TestMutatePods`, case "test-1".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_in_a_management_namespace_gets_the_management_group_s_selector_affinity_and_toleration()
 {
    let running = serve_volcano_groups().await;
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"namespace": "mng-ns-1", "name": "mng-pod"},
        "spec": {"schedulerName": "default-scheduler"}});

    let (ours, _) = mutate(&running, pod.clone()).await;

    let volcano = with_volcano_patch(
        pod,
        json!([
            {"op": "add", "path": "/spec/nodeSelector", "value": {"volcano.sh/nodetype": "management"}},
            {"op": "add", "path": "/spec/affinity", "value": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}]}]}}}},
            {"op": "add", "path": "/spec/tolerations", "value": [{"key": "mng-taint-1", "operator": "Exists", "effect": "NoSchedule"}]},
            {"op": "add", "path": "/spec/schedulerName", "value": "default-scheduler"},
        ]),
    );
    assert_eq!(ours, volcano);
}

/// Volcano: `TestMutatePods`, case "test-2".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_annotated_for_the_cpu_group_gets_its_selector_and_scheduler() {
    let running = serve_volcano_groups().await;
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "cpu-pod", "annotations": {"volcano.sh/resource-group": "cpu"}},
        "spec": {}});

    let (ours, _) = mutate(&running, pod.clone()).await;

    let volcano = with_volcano_patch(
        pod,
        json!([
            {"op": "add", "path": "/spec/nodeSelector", "value": {"volcano.sh/nodetype": "cpu"}},
            {"op": "add", "path": "/spec/schedulerName", "value": "volcano"},
        ]),
    );
    assert_eq!(ours, volcano);
    assert!(
        ours["spec"].get("tolerations").is_none() && ours["spec"].get("affinity").is_none(),
        "nothing of the management group: {ours}"
    );
}

/// Volcano: `TestMutatePods`, case "test-3": a group without an `object` takes the pods
/// carrying the default annotation with its name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_annotated_with_a_group_without_an_object_gets_that_group() {
    let running = serve_volcano_groups().await;
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "gpu-pod", "annotations": {"volcano.sh/resource-group": "gpu"}},
        "spec": {}});

    let (ours, _) = mutate(&running, pod.clone()).await;

    let volcano = with_volcano_patch(
        pod,
        json!([
            {"op": "add", "path": "/spec/nodeSelector", "value": {"volcano.sh/nodetype": "gpu"}},
            {"op": "add", "path": "/spec/schedulerName", "value": "volcano"},
        ]),
    );
    assert_eq!(ours, volcano);
}

/// Volcano: `TestMutatePods`, case "test-4": Volcano's patch is `null`; ours is none at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_no_group_takes_is_allowed_without_a_patch() {
    let running = serve_volcano_groups().await;
    let pod =
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "normal-pod"}, "spec": {}});

    let (ours, answer) = mutate(&running, pod.clone()).await;

    assert_eq!(answer["response"]["allowed"], true);
    assert!(answer["response"]["patch"].is_null(), "{answer}");
    assert!(answer["response"]["patchType"].is_null(), "{answer}");
    assert_eq!(ours, pod);
}
