//! Volcano's queue services over real HTTPS, reading a real API server on 127.0.0.1 through
//! the server's own client: readiness waits for the queue cache's first sync, a queue added
//! after start is seen by the next review, and with no service that reads the cluster enabled
//! the server needs no kubeconfig.

use crate::apiserver::{self, ApiServer};
use crate::serve_support::{self, Running, eventually, probe, recorder, sample, start_with};

use std::path::PathBuf;
use std::sync::Arc;

use base64::Engine;
use dexaflow_admission::metrics::CACHE_WATCH_FAILURES_TOTAL;
use dexaflow_admission::serve::Kind;
use dexaflow_admission::serve::services::BUILTIN_SERVICES;
use http::StatusCode;
use metrics_exporter_prometheus::PrometheusRecorder;
use serde_json::{Value, json};

const TOKEN: &str = "volcano-reader-token";

/// An AdmissionReview as the API server sends it for a queue.
fn queue_review(operation: &str, queue: Value) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "0b7f6c1e-queue",
            "kind": {"group": "scheduling.volcano.sh", "version": "v1beta1", "kind": "Queue"},
            "resource": {"group": "scheduling.volcano.sh", "version": "v1beta1", "resource": "queues"},
            "name": queue["metadata"]["name"],
            "operation": operation,
            "userInfo": {"username": "kubernetes-admin"},
            "object": queue,
        }
    })
}

/// A server with the services at `paths` enabled, reading `api`'s cluster.
async fn serve_paths(api: &ApiServer, paths: Vec<String>) -> (Running, tempfile::TempDir) {
    let kube = tempfile::tempdir().expect("a directory");
    let kubeconfig = api.kubeconfig(kube.path(), TOKEN);
    let running = start_with(
        move |settings, _| {
            settings.kubeconfig = Some(kubeconfig);
            settings.enabled_admission = Some(paths);
        },
        |builder| builder,
        None,
    )
    .await;
    (running, kube)
}

/// A server with Volcano's queue services enabled, reading `api`'s cluster.
async fn serve_queues(api: &ApiServer) -> (Running, tempfile::TempDir) {
    let paths = ["/queues/validate", "/queues/mutate"];
    serve_paths(api, paths.map(str::to_owned).to_vec()).await
}

/// The answer `running` gives to `review` at `path`, as JSON.
async fn answer_to(running: &Running, path: &str, review: &Value) -> Value {
    running.client.post_json(path, review).await.json()
}

/// The message of an answer's status; empty when it has none.
fn status_message(answer: &Value) -> &str {
    answer["response"]["status"]["message"]
        .as_str()
        .unwrap_or_default()
}

/// The JSON Patch an answer carries, decoded from its base64.
fn patch_of(answer: &Value) -> Value {
    let patch = base64::engine::general_purpose::STANDARD
        .decode(answer["response"]["patch"].as_str().expect("a patch"))
        .expect("base64");
    serde_json::from_slice(&patch).expect("JSON")
}

async fn until_ready(running: &Running) {
    let address = running.server.probe_addr().expect("a probe listener");
    eventually("ready", || async move {
        (probe(address, "/readyz").await == Some(StatusCode::OK)).then_some(())
    })
    .await;
}

fn child_of_team() -> Value {
    json!({"metadata": {"name": "child"}, "spec": {"weight": 1, "parent": "team"}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_is_unready_and_answers_503_until_the_queue_cache_synced() {
    let api = ApiServer::start(TOKEN).await;
    api.put_queue("team", json!({"weight": 1}));
    api.forbid(true);
    let (running, _kube) = serve_queues(&api).await;
    let address = running.server.probe_addr().expect("a probe listener");

    let unsynced = running
        .client
        .post_json("/queues/validate", &queue_review("CREATE", child_of_team()))
        .await;

    assert_eq!(
        probe(address, "/readyz").await,
        Some(StatusCode::SERVICE_UNAVAILABLE)
    );
    unsynced.assert_error(StatusCode::SERVICE_UNAVAILABLE, "has not synced");
    api.forbid(false);
    until_ready(&running).await;
    let synced = running
        .client
        .post_json("/queues/validate", &queue_review("CREATE", child_of_team()))
        .await;
    assert_eq!(synced.status, StatusCode::OK);
    assert_eq!(
        synced.json()["response"]["allowed"],
        true,
        "{:?}",
        synced.json()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parent_queue_added_after_start_is_seen_by_the_next_review() {
    let api = ApiServer::start(TOKEN).await;
    api.put_queue("default", json!({"weight": 1}));
    let (running, _kube) = serve_queues(&api).await;
    until_ready(&running).await;

    let before = answer_to(
        &running,
        "/queues/validate",
        &queue_review("CREATE", child_of_team()),
    )
    .await;
    api.put_queue("team", json!({"weight": 1}));
    let client = running.client.clone();
    let after = eventually("the new parent seen", move || {
        let client = client.clone();
        async move {
            let answer = client
                .post_json("/queues/validate", &queue_review("CREATE", child_of_team()))
                .await
                .json();
            (answer["response"]["allowed"] == true).then_some(answer)
        }
    })
    .await;

    assert_eq!(before["response"]["allowed"], false);
    let message = status_message(&before);
    assert!(
        message.contains("team") && message.contains("not found"),
        "{message}"
    );
    assert!(after["response"]["status"].is_null());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_defaults_are_patched_and_nothing_to_change_sends_no_patch() {
    let api = ApiServer::start(TOKEN).await;
    let (running, _kube) = serve_queues(&api).await;

    let bare = answer_to(
        &running,
        "/queues/mutate",
        &queue_review("CREATE", json!({"metadata": {"name": "q"}, "spec": {}})),
    )
    .await;
    let complete = answer_to(
        &running,
        "/queues/mutate",
        &queue_review(
            "CREATE",
            json!({"metadata": {"name": "q"}, "spec": {"weight": 2, "reclaimable": false}}),
        ),
    )
    .await;

    // An empty spec is given the defaults whole, as an absent one must be.
    assert_eq!(
        patch_of(&bare),
        json!([{"op": "add", "path": "/spec", "value": {"reclaimable": true, "weight": 1}}])
    );
    assert_eq!(complete["response"]["allowed"], true);
    assert!(complete["response"]["patch"].is_null(), "{complete}");
    assert!(complete["response"]["patchType"].is_null(), "{complete}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_operation_is_a_bad_request_not_a_verdict() {
    let api = ApiServer::start(TOKEN).await;
    let (running, _kube) = serve_queues(&api).await;

    let answer = answer_to(
        &running,
        "/queues/mutate",
        &queue_review("CONNECT", json!({"metadata": {"name": "q"}, "spec": {}})),
    )
    .await;

    assert_eq!(answer["response"]["allowed"], false);
    assert_eq!(answer["response"]["status"]["code"], 400);
    assert!(answer["response"]["patch"].is_null());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_that_is_not_a_queue_is_a_bad_request_naming_the_object() {
    let api = ApiServer::start(TOKEN).await;
    let (running, _kube) = serve_queues(&api).await;
    let not_a_queue = json!({"metadata": {"name": "q"}, "spec": {"weight": "heavy"}});

    let answer = running
        .client
        .post_json("/queues/mutate", &queue_review("CREATE", not_a_queue))
        .await;

    assert_eq!(answer.status, StatusCode::OK);
    let answer = answer.json();
    assert_eq!(answer["response"]["uid"], "0b7f6c1e-queue");
    assert_bad_request(
        &answer,
        "request.object.spec.weight: invalid type: string \"heavy\"",
    );
}

/// Asserts that `answer` refuses its review as a bad request whose message starts with
/// `words`, with no patch.
fn assert_bad_request(answer: &Value, words: &str) {
    assert_eq!(answer["response"]["allowed"], false);
    assert_eq!(answer["response"]["status"]["code"], 400);
    let message = status_message(answer);
    assert!(message.starts_with(words), "{message}");
    assert!(answer["response"]["patch"].is_null());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_whose_spec_is_an_array_is_a_bad_request_and_not_patched() {
    let api = ApiServer::start(TOKEN).await;
    let (running, _kube) = serve_queues(&api).await;
    // A weight as the spec's first field: serde's derived decoder of a struct would take it,
    // Go's refuses it.
    let array_spec = json!({"metadata": {"name": "q"}, "spec": [1]});

    let answer = answer_to(
        &running,
        "/queues/mutate",
        &queue_review("CREATE", array_spec),
    )
    .await;

    assert_bad_request(&answer, "request.object.spec: invalid type: sequence");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_old_object_that_is_not_a_queue_is_a_bad_request_naming_it_though_the_object_is_one() {
    let api = ApiServer::start(TOKEN).await;
    let (running, _kube) = serve_queues(&api).await;
    let mut review = queue_review("UPDATE", json!({"metadata": {"name": "q"}, "spec": {}}));
    review["request"]["oldObject"] = json!({"metadata": {"name": "q"}, "spec": {"weight": []}});

    let answer = answer_to(&running, "/queues/mutate", &review).await;

    assert_bad_request(&answer, "request.oldObject.spec.weight: invalid type");
    let message = status_message(&answer);
    assert!(!message.contains("request.object:"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_no_service_that_reads_the_cluster_the_server_starts_without_a_kubeconfig() {
    let running = start_with(
        |settings, _| {
            settings.kubeconfig = Some(PathBuf::from("/nonexistent/kubeconfig"));
            settings.enabled_admission = Some(vec![
                "/pods/mutate".to_owned(),
                "/pods/validate".to_owned(),
                "/queues/mutate".to_owned(),
            ]);
        },
        |builder| builder,
        None,
    )
    .await;

    until_ready(&running).await;
    let answer = running
        .client
        .post_json(
            "/queues/mutate",
            &queue_review(
                "CREATE",
                json!({"metadata": {"name": "q"}, "spec": {"weight": 1, "reclaimable": true}}),
            ),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kubeconfig_that_cannot_be_read_fails_the_start_naming_it() {
    let dir = tempfile::tempdir().expect("a directory");
    let mut settings =
        serve_support::settings(serve_support::Authority::new().issue().write_to(dir.path()));
    settings.kubeconfig = Some(PathBuf::from("/nonexistent/kubeconfig"));
    settings.enabled_admission = Some(vec!["/queues/validate".to_owned()]);

    let error = dexaflow_admission::serve::Server::builder(settings)
        .start()
        .await
        .expect_err("no kubeconfig there");

    let text = dexaflow_admission::admission::error_chain(&error);
    assert!(text.contains("/nonexistent/kubeconfig"), "{text}");
    assert!(text.contains("connecting to the cluster"), "{text}");
}

/// An AdmissionReview of a pod group in `namespace`, in the queue `queue`.
fn podgroup_review(namespace: &str, queue: &str) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "5c1d2e3f-podgroup",
            "kind": {"group": "scheduling.volcano.sh", "version": "v1beta1", "kind": "PodGroup"},
            "resource": {"group": "scheduling.volcano.sh", "version": "v1beta1", "resource": "podgroups"},
            "name": "pg",
            "namespace": namespace,
            "operation": "CREATE",
            "userInfo": {"username": "system:serviceaccount:volcano-system:volcano-controllers"},
            "object": {"metadata": {"name": "pg", "namespace": namespace}, "spec": {"queue": queue, "minMember": 1}},
        }
    })
}

/// Fails when `api` was asked for the namespace `name`.
fn assert_no_read_of_namespace(api: &ApiServer, name: &str) {
    let path = format!("/api/v1/namespaces/{name}");
    let requests = api.requests();
    assert!(
        !requests.iter().any(|request| request.contains(&path)),
        "no read of namespace {name}: {requests:?}"
    );
}

/// A server with every built-in service of the table enabled, reading `api`'s cluster.
async fn serve_every_volcano_service(api: &ApiServer) -> (Running, tempfile::TempDir) {
    let paths = BUILTIN_SERVICES
        .iter()
        .map(|service| service.path.to_owned());
    serve_paths(api, paths.collect()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_group_in_the_default_queue_takes_its_namespace_s_queue() {
    let (api, running, _kube) = serve_beside_an_annotated_namespace().await;

    let defaulted = answer_to(
        &running,
        "/podgroups/mutate",
        &podgroup_review("team-a", "default"),
    )
    .await;
    let named = answer_to(
        &running,
        "/podgroups/mutate",
        &podgroup_review("team-a", "batch"),
    )
    .await;

    let patch = patch_of(&defaulted);
    assert_eq!(
        patch,
        json!([{"op": "add", "path": "/spec/queue", "value": "research"}])
    );
    assert_eq!(named["response"]["allowed"], true);
    assert!(
        named["response"]["patch"].is_null(),
        "a named queue is kept"
    );
    let namespace_reads = api
        .requests()
        .iter()
        .filter(|request| request.contains("/api/v1/namespaces/team-a"))
        .count();
    assert_eq!(
        namespace_reads, 1,
        "only the default queue reads the namespace"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_group_whose_namespace_cannot_be_read_is_denied_naming_the_namespace() {
    let api = ApiServer::start(TOKEN).await;
    let (running, _kube) = serve_every_volcano_service(&api).await;

    let answer = answer_to(
        &running,
        "/podgroups/mutate",
        &podgroup_review("ghost", "default"),
    )
    .await;

    assert_eq!(answer["response"]["allowed"], false);
    let message = status_message(&answer);
    assert!(message.contains("\"ghost\" not found"), "{message}");
    assert!(answer["response"]["patch"].is_null());
}

/// A name that is no namespace's is never put in the path of a read (where `/`, `?` or `#`
/// would change what is read): the pod group is denied naming it, and nothing is read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_group_whose_namespace_is_no_valid_name_is_denied_without_a_read() {
    let (api, running, _kube) = serve_beside_an_annotated_namespace().await;

    let answer = answer_to(
        &running,
        "/podgroups/mutate",
        &podgroup_review("team-a?watch=1", "default"),
    )
    .await;

    assert_eq!(answer["response"]["allowed"], false);
    let message = status_message(&answer);
    assert!(
        message.contains(
            r#"namespace "team-a?watch=1" is not a valid name: a lowercase RFC 1123 label"#
        ),
        "{message}"
    );
    assert!(answer["response"]["patch"].is_null());
    assert_no_read_of_namespace(&api, "team-a");
}

/// Volcano reads the namespace the pod group names (`podgroup.Namespace`), not the request's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_group_takes_the_queue_of_the_namespace_its_object_names() {
    let (api, running, _kube) = serve_beside_an_annotated_namespace().await;
    let mut review = podgroup_review("elsewhere", "default");
    review["request"]["object"]["metadata"]["namespace"] = json!("team-a");

    let answer = answer_to(&running, "/podgroups/mutate", &review).await;

    assert_eq!(
        patch_of(&answer),
        json!([{"op": "add", "path": "/spec/queue", "value": "research"}])
    );
    assert_no_read_of_namespace(&api, "elsewhere");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_review_of_another_resource_is_refused_naming_the_one_the_path_is_for() {
    let api = ApiServer::start(TOKEN).await;
    let (running, _kube) = serve_every_volcano_service(&api).await;

    // A job sent to the job flows' path, as a webhook configuration with a wrong path would.
    let answer = answer_to(&running, "/jobflows/validate", &job_review("default")).await;

    assert_eq!(answer["response"]["allowed"], false);
    assert_eq!(answer["response"]["status"]["code"], 400);
    assert_eq!(
        answer["response"]["status"]["message"],
        "expect resource to be {flow.volcano.sh v1alpha1 jobflows}, got {batch.volcano.sh v1alpha1 jobs}"
    );
}

/// A server with every service enabled, reading a cluster whose namespace `team-a` names the
/// queue `research`.
async fn serve_beside_an_annotated_namespace() -> (ApiServer, Running, tempfile::TempDir) {
    let api = ApiServer::start(TOKEN).await;
    api.put_team_a_in_research();
    let (running, kube) = serve_every_volcano_service(&api).await;
    (api, running, kube)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_review_of_another_resource_at_the_pod_group_defaults_reads_no_namespace() {
    let (api, running, _kube) = serve_beside_an_annotated_namespace().await;
    let mut review = podgroup_review("team-a", "default");
    review["request"]["resource"]["resource"] = json!("queues");

    let answer = answer_to(&running, "/podgroups/mutate", &review).await;

    assert_eq!(answer["response"]["allowed"], false);
    assert!(answer["response"]["patch"].is_null());
    assert_no_read_of_namespace(&api, "team-a");
}

/// Volcano: mutatePodgroup refuses any operation but CREATE; the namespace is not read first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_at_the_pod_group_defaults_is_refused_without_reading_the_namespace() {
    let (api, running, _kube) = serve_beside_an_annotated_namespace().await;
    let mut review = podgroup_review("team-a", "default");
    review["request"]["operation"] = json!("UPDATE");

    let answer = answer_to(&running, "/podgroups/mutate", &review).await;

    assert_eq!(answer["response"]["allowed"], false, "{answer}");
    assert_eq!(answer["response"]["status"]["code"], 400, "{answer}");
    assert!(answer["response"]["patch"].is_null());
    assert_no_read_of_namespace(&api, "team-a");
}

/// The kind and an object of `resource` that every service registered for it allows: its
/// queue is `default`, which the test API server holds, open.
fn allowed_object(resource: &str) -> (&'static str, Value) {
    let job_spec = json!({"queue": "default", "minAvailable": 1, "tasks": [{"name": "worker",
        "replicas": 1, "template": {"spec": {"containers": [{"name": "main", "image": "busybox"}]}}}]});
    match resource {
        "pods" => (
            "Pod",
            json!({"metadata": {"name": "p", "namespace": "team-a"},
            "spec": {"containers": [{"name": "main", "image": "busybox"}]}}),
        ),
        "jobs" => (
            "Job",
            json!({"metadata": {"name": "j", "namespace": "team-a"}, "spec": job_spec}),
        ),
        "queues" => (
            "Queue",
            json!({"metadata": {"name": "team"}, "spec": {"weight": 1}}),
        ),
        "podgroups" => (
            "PodGroup",
            json!({"metadata": {"name": "pg", "namespace": "team-a"},
            "spec": {"queue": "default", "minMember": 1}}),
        ),
        "cronjobs" => (
            "CronJob",
            json!({"metadata": {"name": "cj", "namespace": "team-a"},
            "spec": {"schedule": "*/5 * * * *", "jobTemplate": {"spec": job_spec}}}),
        ),
        "jobflows" => (
            "JobFlow",
            json!({"metadata": {"name": "f", "namespace": "team-a"},
            "spec": {"flows": [{"name": "a"}]}}),
        ),
        "hypernodes" => (
            "HyperNode",
            json!({"metadata": {"name": "h"}, "spec": {"tier": 1,
            "members": [{"type": "Node", "selector": {"exactMatch": {"name": "n1"}}}]}}),
        ),
        other => panic!("the test has no object for {other}: give it one"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_service_of_the_table_answers_a_review_of_its_resource_when_enabled() {
    let api = ApiServer::start(TOKEN).await;
    api.put_queue("default", json!({"weight": 1}));
    api.put_namespace("team-a", json!({}));
    let (running, _kube) = serve_every_volcano_service(&api).await;
    until_ready(&running).await;

    for service in BUILTIN_SERVICES {
        let Some(admits) = service.admits else {
            continue;
        };
        let (kind, object) = allowed_object(admits.resource);
        let review = json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": format!("uid-{}", service.path),
                "kind": {"group": admits.group, "version": admits.version, "kind": kind},
                "resource": {"group": admits.group, "version": admits.version, "resource": admits.resource},
                "name": object["metadata"]["name"],
                "namespace": object["metadata"]["namespace"].as_str().unwrap_or_default(),
                "operation": admits.operations[0],
                "userInfo": {"username": "kubernetes-admin"},
                "object": object,
            }
        });

        let answer = running.client.post_json(service.path, &review).await;

        assert_eq!(answer.status, StatusCode::OK, "{}", service.path);
        let body = answer.json();
        assert_eq!(
            body["response"]["uid"], review["request"]["uid"],
            "{}",
            service.path
        );
        assert_eq!(
            body["response"]["allowed"], true,
            "{}: {body}",
            service.path
        );
        if service.kind == Kind::Validating {
            assert!(
                body["response"]["patch"].is_null(),
                "{} sent a patch",
                service.path
            );
        }
    }
}

/// The failed lists and watches of the queue cache `recorder` has counted.
fn queue_watch_failures(recorder: &PrometheusRecorder) -> f64 {
    sample(
        &recorder.handle().render(),
        &format!("{CACHE_WATCH_FAILURES_TOTAL}{{resource=\"queues\"}}"),
    )
    .unwrap_or_default()
}

/// A server with `/queues/validate` alone, reading the cluster of `kubeconfig`, counted by
/// `recorder`.
async fn serve_queue_validation(
    kubeconfig: PathBuf,
    recorder: &Arc<PrometheusRecorder>,
) -> Running {
    start_with(
        move |settings, _| {
            settings.kubeconfig = Some(kubeconfig);
            settings.enabled_admission = Some(vec!["/queues/validate".to_owned()]);
        },
        |builder| builder,
        Some(recorder),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_server_down_at_start_keeps_the_server_unready_and_its_failures_counted() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let address = closed.local_addr().expect("bound");
    drop(closed);
    let kube = tempfile::tempdir().expect("a directory");
    let kubeconfig = apiserver::kubeconfig(kube.path(), &format!("http://{address}"), TOKEN);
    let recorder = recorder();
    let running = serve_queue_validation(kubeconfig, &recorder).await;

    let failures = eventually("a failed list to be counted", || {
        let failures = queue_watch_failures(&recorder);
        async move { (failures >= 1.0).then_some(failures) }
    })
    .await;

    assert!(failures >= 1.0);
    let probes = running.server.probe_addr().expect("a probe listener");
    assert_eq!(
        probe(probes, "/readyz").await,
        Some(StatusCode::SERVICE_UNAVAILABLE)
    );
    running
        .client
        .post_json("/queues/validate", &queue_review("CREATE", child_of_team()))
        .await
        .assert_error(StatusCode::SERVICE_UNAVAILABLE, "has not synced");
    assert_eq!(
        probe(probes, "/healthz").await,
        Some(StatusCode::OK),
        "the server itself is alive"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_server_lost_after_the_sync_leaves_the_last_queues_served() {
    let api = ApiServer::start(TOKEN).await;
    api.put_queue("team", json!({"weight": 1}));
    let kube = tempfile::tempdir().expect("a directory");
    let recorder = recorder();
    let running = serve_queue_validation(api.kubeconfig(kube.path(), TOKEN), &recorder).await;
    until_ready(&running).await;
    // Synced is listed: the watch that follows the list may not be open yet, and one opened
    // after the break would not be broken.
    eventually("the watch to open", || async {
        (api.watches() > 0).then_some(())
    })
    .await;

    api.forbid(true);
    api.break_watches();
    eventually("the refused watch to be counted", || {
        let failures = queue_watch_failures(&recorder);
        async move { (failures >= 1.0).then_some(()) }
    })
    .await;
    let answer = running
        .client
        .post_json("/queues/validate", &queue_review("CREATE", child_of_team()))
        .await;

    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(
        answer.json()["response"]["allowed"],
        true,
        "the parent queue is still known"
    );
    assert_eq!(
        probe(running.server.probe_addr().expect("probes"), "/readyz").await,
        Some(StatusCode::OK),
        "a cache that synced once stays ready"
    );
}

/// An AdmissionReview of a CREATE of a one-task job in `queue`, as the API server sends it.
fn job_review(queue: &str) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "9d2c4e6a-job",
            "kind": {"group": "batch.volcano.sh", "version": "v1alpha1", "kind": "Job"},
            "resource": {"group": "batch.volcano.sh", "version": "v1alpha1", "resource": "jobs"},
            "name": "train",
            "namespace": "team-a",
            "operation": "CREATE",
            "userInfo": {"username": "kubernetes-admin"},
            "object": {"metadata": {"name": "train", "namespace": "team-a"}, "spec": {
                "queue": queue, "minAvailable": 1, "tasks": [{"name": "worker", "replicas": 1,
                "template": {"spec": {"containers": [{"name": "main", "image": "busybox"}]}}}]}},
        }
    })
}

/// Every Volcano service, ready, beside an API server holding the open queue `team`.
async fn serve_beside_queue_team() -> (ApiServer, Running, tempfile::TempDir) {
    let api = ApiServer::start(TOKEN).await;
    api.put_queue("team", json!({"weight": 1}));
    let (running, kube) = serve_every_volcano_service(&api).await;
    until_ready(&running).await;
    (api, running, kube)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_closed_after_start_refuses_the_next_job_submitted_to_it() {
    let (api, running, _kube) = serve_beside_queue_team().await;
    let open = answer_to(&running, "/jobs/validate", &job_review("team")).await;

    api.put_queue_in_state("team", json!({"weight": 1}), "Closed");
    let client = running.client.clone();
    let closed = eventually("the closed queue seen", move || {
        let client = client.clone();
        async move {
            let answer = client
                .post_json("/jobs/validate", &job_review("team"))
                .await
                .json();
            (answer["response"]["allowed"] == false).then_some(answer)
        }
    })
    .await;

    assert_eq!(open["response"]["allowed"], true, "{open}");
    assert_eq!(
        closed["response"]["status"]["message"],
        "can only submit job to queue with state `Open`, queue `team` status is `Closed`;"
    );
}

/// Go: encoding/json reads a member of `null` as its zero value, so a job whose `volumes` and
/// `policies` are `null` is judged on what it has, over the wire as in the rule.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_whose_lists_are_null_is_judged_as_go_reads_it_not_refused_as_undecodable() {
    let (_api, running, _kube) = serve_beside_queue_team().await;
    let mut review = job_review("team");
    review["request"]["object"]["spec"]["volumes"] = Value::Null;
    review["request"]["object"]["spec"]["policies"] = Value::Null;

    let response = running.client.post_json("/jobs/validate", &review).await;

    assert_eq!(response.status, StatusCode::OK, "{:?}", response.body);
    let answer = response.json();
    assert_eq!(answer["response"]["allowed"], true, "{answer}");
    assert_eq!(status_message(&answer), "");
}

/// A field of the wrong type deep in a job is named by its path from the object, through the
/// task and its pod template, not only as `request.object`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_field_of_the_wrong_type_is_a_bad_request_naming_its_path() {
    let (_api, running, _kube) = serve_beside_queue_team().await;
    let mut review = job_review("team");
    review["request"]["object"]["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["ports"] =
        json!([{"containerPort": "http"}]);

    let answer = answer_to(&running, "/jobs/validate", &review).await;

    assert_bad_request(
        &answer,
        "request.object.spec.tasks[0].template.spec.containers[0].ports[0].containerPort: invalid type: string \"http\", expected i32",
    );
}

/// The same for a field of the job's own spec, where its value is out of range.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_number_out_of_range_is_a_bad_request_naming_its_path() {
    let (_api, running, _kube) = serve_beside_queue_team().await;
    let mut review = job_review("team");
    review["request"]["object"]["spec"]["minAvailable"] = json!(2_147_483_648_u64);

    let answer = answer_to(&running, "/jobs/mutate", &review).await;

    assert_bad_request(
        &answer,
        "request.object.spec.minAvailable: invalid value: integer `2147483648`, expected i32",
    );
}
