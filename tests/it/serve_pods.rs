//! `/pods/mutate` and `/pods/validate` with AdmissionReviews as the API server sends them.

use crate::serve_support;

use base64::Engine;
use http::StatusCode;
use serde_json::{Value, json};
use serve_support::{Running, start_with};

/// What the API server sent for `kubectl create deployment trainer -n ml-training` once the
/// ReplicaSet controller created the pod: a Pod CREATE from `generateName`, so the object has
/// no namespace of its own; defaults (scheduler, tolerations, service account) already filled.
const POD_CREATE: &str = r#"{
  "kind": "AdmissionReview",
  "apiVersion": "admission.k8s.io/v1",
  "request": {
    "uid": "0df28fbd-5f5f-11e8-a6b6-42010a800002",
    "kind": {"group": "", "version": "v1", "kind": "Pod"},
    "resource": {"group": "", "version": "v1", "resource": "pods"},
    "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
    "requestResource": {"group": "", "version": "v1", "resource": "pods"},
    "namespace": "ml-training",
    "operation": "CREATE",
    "userInfo": {
      "username": "system:serviceaccount:kube-system:replicaset-controller",
      "uid": "a7e0ab33-5f29-11e8-8a3c-42010a800002",
      "groups": ["system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"]
    },
    "object": {
      "kind": "Pod",
      "apiVersion": "v1",
      "metadata": {
        "generateName": "trainer-7d9c5b6f4-",
        "creationTimestamp": null,
        "labels": {"app": "trainer", "pod-template-hash": "7d9c5b6f4"},
        "ownerReferences": [{
          "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "trainer-7d9c5b6f4",
          "uid": "0de9b2d2-5f5f-11e8-a6b6-42010a800002", "controller": true, "blockOwnerDeletion": true
        }]
      },
      "spec": {
        "volumes": [{"name": "kube-api-access-x2x7b", "projected": {"sources": [{"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}}], "defaultMode": 420}}],
        "containers": [{
          "name": "trainer",
          "image": "ghcr.io/acme/trainer:1.4",
          "resources": {},
          "volumeMounts": [{"name": "kube-api-access-x2x7b", "readOnly": true, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}],
          "terminationMessagePath": "/dev/termination-log",
          "terminationMessagePolicy": "File",
          "imagePullPolicy": "IfNotPresent"
        }],
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "serviceAccountName": "default",
        "serviceAccount": "default",
        "securityContext": {},
        "schedulerName": "default-scheduler",
        "tolerations": [
          {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
          {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
        ],
        "priority": 0,
        "enableServiceLinks": true,
        "preemptionPolicy": "PreemptLowerPriority"
      },
      "status": {}
    },
    "oldObject": null,
    "dryRun": false,
    "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}
  }
}"#;

const GROUPS: &str = r#"
resourceGroups:
  - resourceGroup: gpu
    object: {key: namespace, value: [ml-training]}
    schedulerName: volcano
    labels: {accelerator: nvidia, kubernetes.io/os: linux-gpu}
    tolerations:
      - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}
      - {key: node.kubernetes.io/not-ready, operator: Exists, effect: NoExecute, tolerationSeconds: 300}
    affinity: '{"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}]}}}'
  - resourceGroup: cpu
    object: {key: annotation, value: ["volcano.sh/resource-group: cpu-intensive"]}
    labels: {workload-type: cpu}
  - resourceGroup: batch
    object: {key: label, value: ["team: batch"]}
    labels: {pool: spot}
  - resourceGroup: edge
    labels: {zone: edge}
"#;

fn review() -> Value {
    serde_json::from_str(POD_CREATE).expect("the fixture is JSON")
}

async fn start() -> Running {
    start_with(
        |settings, dir| {
            let path = dir.join("groups.yaml");
            std::fs::write(&path, GROUPS).expect("write the groups");
            settings.resource_groups_file = Some(path);
            settings.trusted_users =
                vec!["system:serviceaccount:dexaflow:dexaflow-dispatcher".to_owned()];
        },
        |registry| registry,
        None,
    )
    .await
}

/// The pod the answer's patch makes of the review's object; the object itself when no patch.
pub(crate) fn patched(review: &Value, answer: &Value) -> Value {
    let mut pod = review["request"]["object"].clone();
    if let Some(patch) = answer["response"]["patch"].as_str() {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(patch)
            .expect("the patch is base64");
        let patch: json_patch::Patch = serde_json::from_slice(&bytes).expect("a JSON Patch");
        json_patch::patch(&mut pod, &patch).expect("the patch applies to the object");
    }
    pod
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutate_applies_the_first_group_that_takes_the_pod_as_a_base64_json_patch() {
    let running = start().await;
    let review = review();
    let answer = running.client.post_json("/pods/mutate", &review).await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.content_type(), "application/json");
    let answer = answer.json();
    assert_eq!(answer["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(answer["kind"], "AdmissionReview");
    assert_eq!(
        answer["response"]["uid"],
        "0df28fbd-5f5f-11e8-a6b6-42010a800002"
    );
    assert_eq!(answer["response"]["allowed"], true);
    assert_eq!(answer["response"]["patchType"], "JSONPatch");

    let mut expected = review["request"]["object"].clone();
    let spec = &mut expected["spec"];
    // Merged: the group's keys win, the pod's others stay.
    spec["nodeSelector"] = json!({"kubernetes.io/os": "linux-gpu", "accelerator": "nvidia"});
    // Appended, without the one the pod already has.
    spec["tolerations"]
        .as_array_mut()
        .expect("tolerations")
        .push(json!({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}));
    spec["affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}]}}});
    spec["schedulerName"] = json!("volcano");
    assert_eq!(patched(&review, &answer), expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_without_a_namespace_is_matched_on_the_requests_namespace() {
    let running = start().await;
    let mut review = review();
    assert!(
        review["request"]["object"]["metadata"]
            .get("namespace")
            .is_none()
    );
    review["request"]["namespace"] = json!("web");
    let answer = running
        .client
        .post_json("/pods/mutate", &review)
        .await
        .json();
    assert_eq!(answer["response"]["allowed"], true);
    assert!(
        answer["response"].get("patch").is_none(),
        "web is no group's namespace"
    );
    // The object's own namespace wins over the request's.
    review["request"]["object"]["metadata"]["namespace"] = json!("ml-training");
    let answer = running
        .client
        .post_json("/pods/mutate", &review)
        .await
        .json();
    assert_eq!(answer["response"]["patchType"], "JSONPatch");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_no_group_takes_is_allowed_with_neither_patch_nor_patch_type() {
    let running = start().await;
    let mut review = review();
    review["request"]["namespace"] = json!("web");
    let answer = running.client.post_json("/pods/mutate", &review).await;
    assert_eq!(answer.status, StatusCode::OK);
    let response = &answer.json()["response"];
    assert_eq!(response["allowed"], true);
    assert!(response.get("patch").is_none());
    assert!(response.get("patchType").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_match_on_annotation_label_or_the_default_annotation() {
    let running = start().await;
    let cases = [
        (
            "annotations",
            "volcano.sh/resource-group",
            "cpu-intensive",
            json!({"workload-type": "cpu"}),
        ),
        ("labels", "team", "batch", json!({"pool": "spot"})),
        (
            "annotations",
            "volcano.sh/resource-group",
            "edge",
            json!({"zone": "edge"}),
        ),
    ];
    for (field, key, value, selector) in cases {
        let mut review = review();
        review["request"]["namespace"] = json!("web");
        let object = &mut review["request"]["object"];
        object["metadata"][field] = json!({key: value});
        object["spec"]
            .as_object_mut()
            .expect("spec")
            .remove("nodeSelector");
        let answer = running
            .client
            .post_json("/pods/mutate", &review)
            .await
            .json();
        let pod = patched(&review, &answer);
        assert_eq!(
            pod["spec"]["nodeSelector"], selector,
            "{field} {key}: {value}"
        );
        assert_eq!(
            pod["spec"]["schedulerName"], "default-scheduler",
            "no scheduler in these groups"
        );
        assert!(pod["spec"].get("affinity").is_none());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_with_an_affinity_keeps_it() {
    let running = start().await;
    let mut review = review();
    let own = json!({"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "trainer"}}}}]}});
    review["request"]["object"]["spec"]["affinity"] = own.clone();
    let answer = running
        .client
        .post_json("/pods/mutate", &review)
        .await
        .json();
    let pod = patched(&review, &answer);
    assert_eq!(pod["spec"]["affinity"], own);
    assert_eq!(
        pod["spec"]["nodeSelector"]["accelerator"], "nvidia",
        "the rest of the group applies"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutate_allows_an_operation_other_than_create_unchanged() {
    let running = start().await;
    let mut review = review();
    review["request"]["operation"] = json!("UPDATE");
    let answer = running
        .client
        .post_json("/pods/mutate", &review)
        .await
        .json();
    assert_eq!(answer["response"]["allowed"], true);
    assert!(answer["response"].get("patch").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validate_allows_a_delete_unchecked() {
    let running = start().await;
    let mut review = review();
    forged(&mut review, "labels", "dexaflow.io/tenant");
    review["request"]["operation"] = json!("DELETE");
    review["request"]["oldObject"] = review["request"]["object"].take();
    let response = validate(&running, &review).await;
    assert_eq!(response["allowed"], true);
    assert!(response.get("status").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_review_of_another_version_is_answered_400() {
    let running = start().await;
    let mut review = review();
    review["apiVersion"] = json!("admission.k8s.io/v1beta1");
    let answer = running.client.post_json("/pods/mutate", &review).await;
    answer.assert_error(StatusCode::BAD_REQUEST, "admission.k8s.io/v1beta1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_review_without_a_request_is_answered_400() {
    let running = start().await;
    let answer = running
        .client
        .post_json(
            "/pods/validate",
            &json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}),
        )
        .await;
    answer.assert_error(StatusCode::BAD_REQUEST, "missing field `request`");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_review_field_of_the_wrong_type_is_answered_400_naming_its_path() {
    let running = start().await;
    let mut review = review();
    review["request"]["uid"] = json!(7);
    let answer = running.client.post_json("/pods/validate", &review).await;
    answer.assert_error(
        StatusCode::BAD_REQUEST,
        "request.uid: invalid type: integer `7`",
    );
    assert!(answer.json().get("uid").is_none(), "{:?}", answer.json());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_review_of_another_kind_is_refused_as_a_bad_request() {
    let running = start().await;
    let mut review = review();
    review["request"]["kind"] = json!({"group": "apps", "version": "v1", "kind": "Deployment"});
    let answer = running
        .client
        .post_json("/pods/mutate", &review)
        .await
        .json();
    assert_eq!(answer["response"]["allowed"], false);
    assert_eq!(answer["response"]["status"]["code"], 400);
    assert!(answer["response"].get("patch").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutate_refuses_an_object_that_is_not_a_pod_as_a_bad_request_saying_why() {
    let running = start().await;
    let mut review = review();
    review["request"]["object"]["metadata"]["labels"] = json!({"team": 7});

    let answer = running.client.post_json("/pods/mutate", &review).await;

    assert_object_refused(
        &answer,
        "the object is not a pod: invalid type: integer `7`",
    );
}

/// Asserts that the review was answered (it is sound: 200) and its object refused as a bad
/// request, the message starting with `words`, and not patched.
fn assert_object_refused(answer: &serve_support::Answer, words: &str) {
    assert_eq!(answer.status, StatusCode::OK);
    let answer = answer.json();
    assert_eq!(answer["response"]["allowed"], false);
    assert_eq!(answer["response"]["status"]["code"], 400);
    let message = answer["response"]["status"]["message"]
        .as_str()
        .expect("a message");
    assert!(message.starts_with(words), "{message}");
    assert!(answer["response"].get("patch").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutate_refuses_a_pod_whose_metadata_is_an_array_as_a_bad_request() {
    let running = start().await;
    let mut review = review();
    // The name and namespace in order: serde's derived decoder of a struct would take them.
    review["request"]["object"]["metadata"] = json!(["p", "default"]);

    let answer = running.client.post_json("/pods/mutate", &review).await;

    assert_object_refused(&answer, "the object is not a pod: invalid type: sequence");
}

/// The `response` of `/pods/validate` to `review`.
async fn validate(running: &Running, review: &Value) -> Value {
    running
        .client
        .post_json("/pods/validate", review)
        .await
        .json()["response"]
        .clone()
}

fn forged(review: &mut Value, field: &str, key: &str) {
    let object = &mut review["request"]["object"];
    object["spec"]["schedulerName"] = json!("volcano");
    object["metadata"][field] = json!({key: "acme", "app": "trainer"});
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validate_refuses_a_dexaflow_key_naming_it_when_the_user_is_not_trusted() {
    let running = start().await;
    for (field, key, what) in [
        (
            "labels",
            "dexaflow.io/tenant",
            "label \"dexaflow.io/tenant\"",
        ),
        (
            "annotations",
            "tasks.leoflow.io/run",
            "annotation \"tasks.leoflow.io/run\"",
        ),
    ] {
        let mut review = review();
        forged(&mut review, field, key);
        let answer = running.client.post_json("/pods/validate", &review).await;
        assert_eq!(answer.status, StatusCode::OK);
        let response = &answer.json()["response"];
        assert_eq!(response["uid"], "0df28fbd-5f5f-11e8-a6b6-42010a800002");
        assert_eq!(response["allowed"], false);
        assert_eq!(response["status"]["code"], 403);
        let message = response["status"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(what), "{message:?} names {what}");
        assert!(
            message.contains("replicaset-controller"),
            "{message:?} names the user"
        );
        assert!(response.get("patch").is_none() && response.get("patchType").is_none());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validate_allows_a_dexaflow_key_from_a_trusted_user() {
    let running = start().await;
    let mut review = review();
    forged(&mut review, "labels", "dexaflow.io/tenant");
    review["request"]["userInfo"]["username"] =
        json!("system:serviceaccount:dexaflow:dexaflow-dispatcher");
    let response = validate(&running, &review).await;
    assert_eq!(response["allowed"], true);
    assert!(response.get("status").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validate_refuses_a_dexaflow_key_whatever_the_scheduler() {
    let running = start().await;
    for scheduler in [Some("default-scheduler"), Some("my-scheduler"), None] {
        let mut review = review();
        forged(&mut review, "labels", "dexaflow.io/tenant");
        let spec = review["request"]["object"]["spec"]
            .as_object_mut()
            .expect("spec");
        match scheduler {
            Some(name) => spec.insert("schedulerName".to_owned(), json!(name)),
            None => spec.remove("schedulerName"),
        };
        let response = validate(&running, &review).await;
        assert_eq!(response["allowed"], false, "{scheduler:?}");
        assert_eq!(response["status"]["code"], 403, "{scheduler:?}");
        let message = response["status"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("dexaflow.io/tenant"), "{message:?}");
    }
}

/// `review` made an UPDATE of a pod that had `old_labels`, to the pod with `new_labels`.
fn update(review: &mut Value, old_labels: Value, new_labels: Value) {
    let request = &mut review["request"];
    request["operation"] = json!("UPDATE");
    request["options"] = json!({"kind": "UpdateOptions", "apiVersion": "meta.k8s.io/v1"});
    request["object"]["metadata"]["name"] = json!("trainer-7d9c5b6f4-x2x7b");
    request["object"]["metadata"]["labels"] = new_labels;
    let mut old = request["object"].clone();
    old["metadata"]["labels"] = old_labels;
    request["oldObject"] = old;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_adding_or_changing_a_dexaflow_key_is_refused_for_an_untrusted_user() {
    let running = start().await;
    for (old, new, words) in [
        (
            json!({"app": "trainer"}),
            json!({"app": "trainer", "dexaflow.io/tenant": "acme"}),
            "the update adds the label \"dexaflow.io/tenant\"",
        ),
        (
            json!({"app": "trainer", "dexaflow.io/tenant": "acme"}),
            json!({"app": "trainer", "dexaflow.io/tenant": "umbrella"}),
            "the update changes the label \"dexaflow.io/tenant\"",
        ),
    ] {
        let mut review = review();
        update(&mut review, old, new);
        let response = validate(&running, &review).await;
        assert_eq!(response["allowed"], false, "{words}");
        assert_eq!(response["status"]["code"], 403);
        let message = response["status"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(words), "{message:?} should say {words:?}");
        assert!(message.contains("replicaset-controller"), "{message:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_keeping_a_dexaflow_key_unchanged_is_allowed() {
    let running = start().await;
    let mut review = review();
    update(
        &mut review,
        json!({"app": "trainer", "dexaflow.io/tenant": "acme"}),
        json!({"app": "trainer-v2", "dexaflow.io/tenant": "acme"}),
    );
    let response = validate(&running, &review).await;
    assert_eq!(response["allowed"], true);
    assert!(response.get("status").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_from_a_trusted_user_may_change_a_dexaflow_key() {
    let running = start().await;
    let mut review = review();
    update(
        &mut review,
        json!({"dexaflow.io/tenant": "acme"}),
        json!({"dexaflow.io/tenant": "umbrella"}),
    );
    review["request"]["userInfo"]["username"] =
        json!("system:serviceaccount:dexaflow:dexaflow-dispatcher");
    let response = validate(&running, &review).await;
    assert_eq!(response["allowed"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validate_checks_volcanos_disruption_budget_only_on_pods_of_its_schedulers() {
    let running = start().await;
    let cases = [
        (json!({"volcano.sh/jdb-min-available": "2"}), None),
        (json!({"volcano.sh/jdb-max-unavailable": "25%"}), None),
        (
            json!({"volcano.sh/jdb-min-available": "0"}),
            Some(
                "invalid value <\"0\"> for volcano.sh/jdb-min-available, it must be a positive integer",
            ),
        ),
        (
            json!({"volcano.sh/jdb-max-unavailable": "100%"}),
            Some("it must be a valid percentage which between 1% ~ 99%"),
        ),
        (
            json!({"volcano.sh/jdb-min-available": "1", "volcano.sh/jdb-max-unavailable": "1"}),
            Some("not allow configure multiple annotations"),
        ),
    ];
    for (annotations, refusal) in cases {
        for scheduler in ["volcano", "default-scheduler"] {
            let mut review = review();
            let object = &mut review["request"]["object"];
            object["spec"]["schedulerName"] = json!(scheduler);
            object["metadata"]["annotations"] = annotations.clone();
            let response = validate(&running, &review).await;
            match refusal.filter(|_| scheduler == "volcano") {
                Some(words) => {
                    assert_eq!(response["allowed"], false, "{annotations} {scheduler}");
                    let message = response["status"]["message"].as_str().unwrap_or_default();
                    assert!(message.contains(words), "{message:?} should say {words:?}");
                }
                None => assert_eq!(response["allowed"], true, "{annotations} {scheduler}"),
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validate_allows_a_volcano_pod_without_dexaflow_keys() {
    let running = start().await;
    let mut review = review();
    forged(&mut review, "labels", "example.com/tenant");
    let response = validate(&running, &review).await;
    assert_eq!(response["allowed"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutate_skips_a_toleration_the_pod_has_with_an_omitted_operator_or_null_fields() {
    let running = start_with(
        |settings, dir| {
            let path = dir.join("groups.yaml");
            std::fs::write(
                &path,
                r#"
resourceGroups:
  - resourceGroup: ml
    object: {key: namespace, value: [ml-training]}
    tolerations:
      - {key: dedicated, operator: Equal, value: ml, effect: NoSchedule}
      - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}
      - {key: spot, value: "true", effect: NoSchedule}
"#,
            )
            .expect("write the groups");
            settings.resource_groups_file = Some(path);
        },
        |registry| registry,
        None,
    )
    .await;
    let mut review = review();
    let own = json!([
        {"key": "dedicated", "value": "ml", "effect": "NoSchedule"},
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule", "value": null, "tolerationSeconds": null},
    ]);
    review["request"]["object"]["spec"]["tolerations"] = own.clone();

    let answer = running
        .client
        .post_json("/pods/mutate", &review)
        .await
        .json();

    let pod = patched(&review, &answer);
    let mut expected = own.as_array().expect("an array").clone();
    expected.push(json!({"key": "spot", "value": "true", "effect": "NoSchedule"}));
    assert_eq!(pod["spec"]["tolerations"], Value::Array(expected));
}

/// The lines of `page`'s first code block after the line `opening`, up to the block's next
/// blank line or its end, joined: one JSON document the page shows folded over lines.
fn shown_after(page: &str, opening: &str) -> Value {
    let lines: String = page
        .lines()
        .skip_while(|line| *line != opening)
        .skip(1)
        .take_while(|line| !line.is_empty() && !line.starts_with("```"))
        .collect();
    serde_json::from_str(&lines)
        .unwrap_or_else(|error| panic!("what follows {opening:?} is not JSON: {error}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pods_mutate_exchange_shown_in_the_server_page_is_what_serve_answers() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let page = std::fs::read_to_string(root.join("docs/server.md")).expect("read docs/server.md");
    let groups = root.join("examples/resource-groups.yaml");
    let running = start_with(
        |settings, _| settings.resource_groups_file = Some(groups),
        |registry| registry,
        None,
    )
    .await;
    let review = shown_after(&page, "POST /pods/mutate?timeout=5s");
    let shown_answer = shown_after(&page, "200 application/json");

    let answer = running
        .client
        .post_json("/pods/mutate?timeout=5s", &review)
        .await;
    assert_eq!(answer.status, StatusCode::OK);
    let answer = answer.json();
    assert_eq!(answer, shown_answer);
    // The page's decoded patch is the answer's, and it changes the pod.
    let patch = base64::engine::general_purpose::STANDARD
        .decode(answer["response"]["patch"].as_str().expect("a patch"))
        .expect("base64");
    let patch: Value = serde_json::from_slice(&patch).expect("JSON");
    let decoded_block = page
        .split("The patch, decoded:")
        .nth(1)
        .and_then(|rest| rest.split("```json").nth(1))
        .and_then(|block| block.split("```").next())
        .expect("the page shows the patch decoded");
    let shown_patch: Value =
        serde_json::from_str(decoded_block).expect("the decoded patch is JSON");
    assert_eq!(patch, shown_patch);
    assert_ne!(patched(&review, &answer), review["request"]["object"]);
}
