//! Volcano's `/jobs/mutate` rule, with the cases of Volcano's `mutate_job_test.go` and the specs
//! of its e2e `job_mutate_test.go` ported one test each: each applies the patch to the job as
//! sent and compares the result.

use dexaflow_admission::volcano::{Job, Operation, Refusal, Review, decode, mutate_job};
use json_patch::PatchOperation;
use serde_json::{Value, json};

fn patch_of(operation: &str, object: &Value) -> Result<Vec<PatchOperation>, Refusal> {
    let job: Job = decode("object", object).expect("a job").expect("not null");
    let review = Review {
        operation: Operation::parse(operation),
        name: "job",
        namespace: "test",
        object: Some(&job),
        old_object: None,
    };
    mutate_job(&review, &["volcano".to_owned()])
}

/// The job after Volcano's CREATE patch.
fn mutated(object: &Value) -> Value {
    let patch = patch_of("CREATE", object).expect("a patch");
    let mut patched = object.clone();
    json_patch::patch(&mut patched, &patch).expect("the patch applies");
    patched
}

fn template() -> Value {
    json!({"metadata": {"labels": {"name": "test"}},
           "spec": {"containers": [{"name": "fake-name", "image": "busybox:1.24"}]}})
}

fn job(spec: Value) -> Value {
    json!({"metadata": {"name": "path-task-name", "namespace": "test"}, "spec": spec})
}

/// A job with every job-level default set, so that only task defaults change it.
fn job_with_tasks(tasks: Value) -> Value {
    job(
        json!({"queue": "q", "schedulerName": "volcano", "maxRetry": 1, "minAvailable": 1,
               "tasks": tasks}),
    )
}

/// Volcano: TestCreatePatchExecution, "patch default task"
#[test]
fn unnamed_tasks_get_names_retries_and_a_minimum_from_replicas_or_partitions() {
    let topology = json!({"mode": "hard", "highestTierAllowed": 1});
    let object = job_with_tasks(json!([
        {"replicas": 1, "template": template()},
        {"replicas": 2, "minAvailable": 1, "template": template()},
        {"replicas": 1, "template": template(), "partitionPolicy":
            {"totalPartitions": 1, "minPartitions": 1, "partitionSize": 1, "networkTopology": topology}},
        {"replicas": 1, "template": template(), "partitionPolicy":
            {"totalPartitions": 1, "partitionSize": 1, "networkTopology": topology}},
    ]));
    let mut expected = object.clone();
    for (index, task) in expected["spec"]["tasks"]
        .as_array_mut()
        .expect("tasks")
        .iter_mut()
        .enumerate()
    {
        task["name"] = json!(format!("default{index}"));
        task["maxRetry"] = json!(3);
        task["minAvailable"] = json!(1);
    }
    assert_eq!(mutated(&object), expected);
}

fn partitioned_task(replicas: i32, policy: Value) -> Value {
    json!({"name": "task-1", "replicas": replicas, "partitionPolicy": policy,
           "template": {"spec": {"containers": [{"name": "test", "image": "busybox:1.24"}]}}})
}

/// The one task of the job after the patch.
fn mutated_task(task: Value) -> Value {
    mutated(&job_with_tasks(json!([task])))["spec"]["tasks"][0].clone()
}

/// Volcano: TestMutateSpecPartitionPolicyDefaults, "MinAvailable is set to MinPartitions * PartitionSize when PartitionPolicy exists"
#[test]
fn a_partitioned_task_needs_its_minimum_partitions_of_pods() {
    let task = partitioned_task(
        9,
        json!({"totalPartitions": 3, "minPartitions": 2, "partitionSize": 3}),
    );
    let mut expected = task.clone();
    expected["minAvailable"] = json!(6);
    expected["maxRetry"] = json!(3);
    assert_eq!(mutated_task(task), expected);
}

/// Volcano: TestMutateSpecPartitionPolicyDefaults, "MinAvailable falls back to Replicas when PartitionPolicy is set but MinPartitions is omitted"
#[test]
fn a_partitioned_task_without_minimum_partitions_needs_all_its_replicas() {
    let task = partitioned_task(4, json!({"totalPartitions": 2, "partitionSize": 2}));
    let mut expected = task.clone();
    expected["minAvailable"] = json!(4);
    expected["maxRetry"] = json!(3);
    assert_eq!(mutated_task(task), expected);
}

/// Volcano: TestMutateSpecPartitionPolicyDefaults, "MinAvailable is set to Replicas when no PartitionPolicy"
#[test]
fn a_task_without_partitions_needs_all_its_replicas() {
    let task = json!({"name": "task-1", "replicas": 5,
        "template": {"spec": {"containers": [{"name": "test", "image": "busybox:1.24"}]}}});
    let mut expected = task.clone();
    expected["minAvailable"] = json!(5);
    expected["maxRetry"] = json!(3);
    assert_eq!(mutated_task(task), expected);
}

/// Not in Volcano's tests: `patchDefaultMinAvailable` sums in Go's int32, which wraps to a
/// negative minimum; the sum is refused instead of patched past what the field holds.
#[test]
fn a_job_minimum_past_int32_is_refused_and_not_patched() {
    let object = job(
        json!({"queue": "q", "schedulerName": "volcano", "maxRetry": 1, "tasks": [
            {"name": "a", "replicas": i32::MAX, "maxRetry": 1, "template": template()},
            {"name": "b", "replicas": i32::MAX, "maxRetry": 1, "template": template()},
        ]}),
    );

    let refused = patch_of("CREATE", &object);

    assert_eq!(
        refused,
        Err(Refusal::Denied(
            "spec.minAvailable: Invalid value: 4294967294: the sum of the tasks' minAvailable \
             (replicas where unset) must fit in a 32-bit integer"
                .to_owned()
        ))
    );
}

/// Not in Volcano's tests: the job-level defaults, in Volcano's order, the job's minimum the
/// sum of its tasks' after their defaults.
#[test]
fn a_bare_job_gets_queue_scheduler_retries_tasks_and_minimum_in_that_order() {
    let object = job(json!({"tasks": [
        {"name": "a", "replicas": 2, "maxRetry": 1, "template": template()},
        {"name": "b", "replicas": 3, "minAvailable": 1, "maxRetry": 1, "template": template()},
    ]}));
    let paths: Vec<String> = patch_of("CREATE", &object)
        .expect("a patch")
        .iter()
        .map(|operation| operation.path().to_string())
        .collect();
    assert_eq!(
        paths,
        [
            "/spec/queue",
            "/spec/schedulerName",
            "/spec/maxRetry",
            "/spec/tasks",
            "/spec/minAvailable"
        ]
    );
    let patched = mutated(&object);
    assert_eq!(patched["spec"]["queue"], "default");
    assert_eq!(patched["spec"]["schedulerName"], "volcano");
    assert_eq!(patched["spec"]["maxRetry"], 3);
    assert_eq!(patched["spec"]["minAvailable"], 3);
    assert!(patched["spec"].get("plugins").is_none());
}

/// Not in Volcano's tests: mpi brings `svc` and `ssh`, other plugins are kept as they are.
#[test]
fn the_mpi_plugin_brings_the_svc_and_ssh_plugins() {
    let object = job(
        json!({"queue": "q", "schedulerName": "s", "maxRetry": 1, "minAvailable": 1,
        "plugins": {"mpi": ["--port=22"], "env": []}}),
    );
    let patched = mutated(&object);
    assert_eq!(
        patched["spec"]["plugins"],
        json!({"mpi": ["--port=22"], "env": [], "svc": [], "ssh": []})
    );
}

/// Not in Volcano's tests: a host-network pod without a DNS policy gets the one that resolves
/// cluster names.
#[test]
fn a_host_network_task_gets_the_cluster_first_with_host_net_dns_policy() {
    let task = json!({"name": "t", "replicas": 1, "minAvailable": 1, "maxRetry": 1,
        "template": {"spec": {"hostNetwork": true, "containers": [{"name": "c", "image": "i"}]}}});
    let patched = mutated_task(task);
    assert_eq!(
        patched["template"]["spec"]["dnsPolicy"],
        "ClusterFirstWithHostNet"
    );
}

/// Not in Volcano's tests: Volcano's Go types drop a template field they do not know, and its
/// patch, which replaces the tasks, removes it from the job; here every field is kept as sent.
#[test]
fn a_template_field_this_build_does_not_know_is_kept_by_the_patch_that_replaces_the_tasks() {
    let task = json!({"replicas": 1, "template": {
        "metadata": {"labels": {"app": "trainer"}, "futureMeta": 1},
        "spec": {"futurePodField": {"on": true}, "containers": [
            {"name": "main", "image": "busybox:1.24", "futureContainerField": ["a", "b"],
             "ports": [{"containerPort": 80, "futurePortField": "x"}],
             "resources": {"requests": {"cpu": "1"}, "futureResourceField": 2}}]}}});
    let mut expected = task.clone();
    expected["name"] = json!("default0");
    expected["minAvailable"] = json!(1);
    expected["maxRetry"] = json!(3);

    let patched = mutated_task(task);

    assert_eq!(patched, expected);
    assert_eq!(
        patched["template"]["spec"]["futurePodField"],
        json!({"on": true})
    );
}

/// Not in Volcano's tests: where Volcano sends the patch `null`, the mutator answers an empty
/// patch.
#[test]
fn a_job_with_every_default_set_gets_an_empty_patch() {
    let object = job_with_tasks(json!([
        {"name": "t", "replicas": 1, "minAvailable": 1, "maxRetry": 1, "template": template()}
    ]));
    assert_eq!(patch_of("CREATE", &object), Ok(Vec::new()));
}

/// Not in Volcano's tests: the mutator is registered for CREATE only.
#[test]
fn the_job_mutator_answers_an_update_as_an_unknown_operation() {
    let refusal = patch_of("UPDATE", &job(json!({}))).expect_err("refused");
    assert!(
        matches!(refusal, Refusal::UnknownOperation { ref operation, .. } if operation == "UPDATE")
    );
}

// Volcano's e2e specs of `test/e2e/admission/job_mutate_test.go` ("Job Mutating E2E Test",
// every spec), each the one CREATE its webhook receives, judged by the job the patch makes.

/// A job of one one-pod task, with `spec`'s fields.
fn one_task_job(spec: Value) -> Value {
    let mut spec = spec;
    spec["tasks"] = json!([{"name": "task-1", "replicas": 1, "template": template()}]);
    job(spec)
}

/// Volcano e2e: "Should add default queue when not specified"
#[test]
fn e2e_a_job_without_a_queue_goes_to_default() {
    assert_eq!(
        mutated(&one_task_job(json!({})))["spec"]["queue"],
        "default"
    );
}

/// Volcano e2e: "Should add default scheduler name when not specified"
#[test]
fn e2e_a_job_without_a_scheduler_gets_the_configured_one() {
    assert_eq!(
        mutated(&one_task_job(json!({})))["spec"]["schedulerName"],
        "volcano"
    );
}

/// Volcano e2e: "Should add default maxRetry when not specified"
#[test]
fn e2e_a_job_without_retries_gets_three() {
    assert_eq!(mutated(&one_task_job(json!({})))["spec"]["maxRetry"], 3);
}

/// Volcano e2e: "Should calculate and set default minAvailable when not specified"
#[test]
fn e2e_a_job_s_minimum_is_the_sum_of_its_tasks_replicas() {
    let job = job(json!({"tasks": [
        {"name": "task-1", "replicas": 2, "template": template()},
        {"name": "task-2", "replicas": 3, "template": template()}]}));
    assert_eq!(mutated(&job)["spec"]["minAvailable"], 5);
}

/// Volcano e2e: "Should calculate minAvailable considering task-level minAvailable when specified"
#[test]
fn e2e_a_job_s_minimum_counts_a_task_s_own_minimum() {
    let job = job(json!({"tasks": [
        {"name": "task-1", "replicas": 2, "minAvailable": 1, "template": template()},
        {"name": "task-2", "replicas": 3, "template": template()}]}));
    assert_eq!(mutated(&job)["spec"]["minAvailable"], 4);
}

/// The plugins of a one-task job with `plugins`, once mutated.
fn mutated_plugins(plugins: Value) -> Value {
    mutated(&one_task_job(json!({"plugins": plugins})))["spec"]["plugins"].clone()
}

/// Volcano e2e: "Should add svc plugin for tensorflow plugin"
#[test]
fn e2e_tensorflow_gets_the_svc_plugin() {
    let plugins = mutated_plugins(json!({"tensorflow": []}));
    assert!(
        plugins.get("svc").is_some() && plugins.get("tensorflow").is_some(),
        "{plugins}"
    );
}

/// Volcano e2e: "Should add svc plugin for mpi plugin"
#[test]
fn e2e_mpi_gets_the_svc_plugin() {
    let plugins = mutated_plugins(json!({"mpi": []}));
    assert!(
        plugins.get("svc").is_some() && plugins.get("mpi").is_some(),
        "{plugins}"
    );
}

/// Volcano e2e: "Should add svc plugin for pytorch plugin"
#[test]
fn e2e_pytorch_gets_the_svc_plugin() {
    let plugins = mutated_plugins(json!({"pytorch": []}));
    assert!(
        plugins.get("svc").is_some() && plugins.get("pytorch").is_some(),
        "{plugins}"
    );
}

/// Volcano e2e: "Should add ssh plugin for mpi plugin"
#[test]
fn e2e_mpi_gets_the_ssh_plugin_too() {
    let plugins = mutated_plugins(json!({"mpi": []}));
    assert!(
        plugins.get("ssh").is_some() && plugins.get("svc").is_some(),
        "{plugins}"
    );
}

/// Volcano e2e: "Should not override existing plugins"
#[test]
fn e2e_an_svc_plugin_s_own_arguments_are_kept() {
    let plugins = mutated_plugins(json!({"tensorflow": [], "svc": ["--enable-networking"]}));
    assert_eq!(plugins["svc"], json!(["--enable-networking"]));
    assert!(plugins.get("tensorflow").is_some(), "{plugins}");
}

/// Volcano e2e: "Should preserve existing field values when specified"
#[test]
fn e2e_every_value_the_job_sets_is_kept() {
    let job = job(json!({"minAvailable": 2, "queue": "custom-queue-job",
        "schedulerName": "custom-sched", "maxRetry": 10, "tasks": [
        {"name": "custom-task", "replicas": 3, "minAvailable": 2, "maxRetry": 5,
         "template": template()}]}));
    let spec = mutated(&job)["spec"].clone();
    assert_eq!(spec["minAvailable"], 2);
    assert_eq!(spec["queue"], "custom-queue-job");
    assert_eq!(spec["schedulerName"], "custom-sched");
    assert_eq!(spec["maxRetry"], 10);
    assert_eq!(spec["tasks"][0]["name"], "custom-task");
    assert_eq!(spec["tasks"][0]["minAvailable"], 2);
    assert_eq!(spec["tasks"][0]["maxRetry"], 5);
}

/// Not in Volcano's tests: a job sent without a spec gets the job-level defaults as one add of
/// the whole spec, which applies (Volcano's adds below `/spec` fail in the API server, and
/// the job is then refused by `/jobs/validate` for having no task, not by an internal error).
#[test]
fn a_job_without_a_spec_gets_its_defaults_as_one_add_of_the_spec_that_applies() {
    let object = json!({"metadata": {"name": "bare", "namespace": "test"}});

    let patch = serde_json::to_value(patch_of("CREATE", &object).expect("a patch")).expect("json");

    assert_eq!(
        patch,
        json!([{"op": "add", "path": "/spec", "value": {
            "queue": "default", "schedulerName": "volcano", "maxRetry": 3, "minAvailable": 0}}])
    );
    assert_eq!(mutated(&object)["spec"]["queue"], "default");
}
