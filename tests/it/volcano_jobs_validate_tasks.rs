//! Volcano's `/jobs/validate` rule: the task-level cases of Volcano's `admit_job_test.go`
//! (`TestValidateJobCreate`: partitions, network topology, the mpi master, dependencies,
//! pod-level resources; `TestValidateTaskTopoPolicy`), of its `util_test.go` (`TestTopoSort`)
//! and the matching e2e specs, one test each.
//!
//! `TestTopoSort` checks the sorted order too; the rule only uses whether the tasks form a
//! DAG, so the ports check the verdict. `TestValidateTaskTopoPolicy` calls the topology check
//! on a template without container names or images; as one request the template must be valid
//! first, so the ports name the container and give it an image.

use dexaflow_admission::volcano::FeatureGates;
use serde_json::{Value, json};

use super::volcano_jobs_validate::{Queues, create, denied, job, review, simple_job, task};

const BOTH_TIERS: &str =
    "must not specify 'highestTierAllowed' and 'highestTierName' in networkTopology simultaneously";

/// A job named `name` with one task `task-1` of `replicas` under `partition`, `minAvailable`
/// 1 and the task's `minAvailable` when given.
fn partitioned(name: &str, replicas: i32, partition: Value, min: Option<i32>) -> Value {
    let mut one = task("task-1", replicas);
    one["partitionPolicy"] = partition;
    if let Some(min) = min {
        one["minAvailable"] = json!(min);
    }
    job(
        name,
        json!({"minAvailable": 1, "queue": "default", "tasks": [one]}),
    )
}

fn both_tiers() -> Value {
    json!({"mode": "hard", "highestTierAllowed": 1, "highestTierName": "volcano.sh/hypernode"})
}

/// Volcano: TestValidateJobCreate, "PartitionSize-lessThanZero"
#[test]
fn a_negative_partition_size_is_refused_naming_task_and_job() {
    let job = partitioned(
        "PartitionSize-lessThanZero",
        8,
        json!({"partitionSize": -1, "totalPartitions": 8}),
        None,
    );
    assert_eq!(
        denied(create(&job)),
        "'PartitionSize' must be greater than 0 in task: task-1, job: PartitionSize-lessThanZero"
    );
}

/// Volcano: TestValidateJobCreate, "TotalPartitions-lessThanZero"
#[test]
fn a_negative_partition_count_is_refused_naming_task_and_job() {
    let job = partitioned(
        "TotalPartitions-lessThanZero",
        8,
        json!({"partitionSize": 8, "totalPartitions": -1}),
        None,
    );
    assert_eq!(
        denied(create(&job)),
        "'TotalPartitions' must be greater than 0 in task: task-1, job: TotalPartitions-lessThanZero"
    );
}

/// Volcano: TestValidateJobCreate, "task-with-invalid-PartitionPolicy" (replicas)
#[test]
fn replicas_other_than_partitions_times_size_are_refused() {
    let job = partitioned(
        "task-with-invalid-PartitionPolicy",
        8,
        json!({"partitionSize": 3, "totalPartitions": 2}),
        None,
    );
    assert_eq!(
        denied(create(&job)),
        "'Replicas' are not equal to TotalPartitions*PartitionSize in task: task-1, job: task-with-invalid-PartitionPolicy"
    );
}

/// Volcano: TestValidateJobCreate, "task-with-valid-PartitionPolicy"
#[test]
fn replicas_equal_to_partitions_times_size_are_allowed() {
    let job = partitioned(
        "task-with-valid-PartitionPolicy",
        8,
        json!({"partitionSize": 4, "totalPartitions": 2}),
        None,
    );
    assert_eq!(create(&job), Ok(()));
}

/// Volcano: TestValidateJobCreate, "task-with-valid-NetworkTopology-and-PartitionPolicy"
#[test]
fn a_tier_name_alone_on_job_and_partition_is_allowed() {
    let tier = json!({"mode": "hard", "highestTierName": "volcano.sh/hypernode"});
    let mut job = partitioned(
        "task-with-valid-NetworkTopology-and-PartitionPolicy",
        8,
        json!({"partitionSize": 4, "totalPartitions": 2, "networkTopology": tier}),
        None,
    );
    job["spec"]["networkTopology"] = tier;
    assert_eq!(create(&job), Ok(()));
}

/// Volcano: TestValidateJobCreate, "job-with-invalid-NetworkTopology-and-PartitionPolicy"
#[test]
fn both_tiers_on_job_and_partition_are_refused_twice_unseparated_as_volcano_joins_them() {
    let mut job = partitioned(
        "job-with-invalid-NetworkTopology-and-PartitionPolicy",
        8,
        json!({"partitionSize": 4, "totalPartitions": 2, "networkTopology": both_tiers()}),
        None,
    );
    job["spec"]["networkTopology"] = both_tiers();
    assert_eq!(denied(create(&job)), format!("{BOTH_TIERS}{BOTH_TIERS}"));
}

/// Volcano: TestValidateJobCreate, "job-with-invalid-NetworkTopology"
#[test]
fn both_tiers_on_the_job_are_refused() {
    let job = simple_job(
        "job-with-invalid-NetworkTopology",
        json!({"networkTopology": both_tiers()}),
    );
    assert_eq!(denied(create(&job)), BOTH_TIERS);
}

/// Volcano: TestValidateJobCreate, "task-with-invalid-PartitionPolicy" (network topology)
#[test]
fn both_tiers_on_a_partition_are_refused() {
    let job = partitioned(
        "task-with-invalid-PartitionPolicy",
        8,
        json!({"partitionSize": 4, "totalPartitions": 2, "networkTopology": both_tiers()}),
        None,
    );
    assert_eq!(denied(create(&job)), BOTH_TIERS);
}

/// Volcano: TestValidateJobCreate, "task-with-valid-PartitionPolicy-MinPartitions"
#[test]
fn min_partitions_without_a_task_min_available_is_allowed() {
    let job = partitioned(
        "task-with-valid-PartitionPolicy-MinPartitions",
        8,
        json!({"partitionSize": 4, "totalPartitions": 2, "minPartitions": 1}),
        None,
    );
    assert_eq!(create(&job), Ok(()));
}

/// Volcano: TestValidateJobCreate, "task-with-invalid-PartitionPolicy-MinPartitions-not-equal"
#[test]
fn a_task_min_available_other_than_min_partitions_times_size_is_refused() {
    let job = partitioned(
        "task-with-invalid-PartitionPolicy-MinPartitions",
        8,
        json!({"partitionSize": 2, "totalPartitions": 4, "minPartitions": 1}),
        Some(4),
    );
    assert_eq!(
        denied(create(&job)),
        "'MinAvailable' is not equal to MinPartitions*PartitionSize in task: task-1, job: task-with-invalid-PartitionPolicy-MinPartitions"
    );
}

/// Volcano: TestValidateJobCreate, "task-with-valid-PartitionPolicy-MinPartitions-equal"
#[test]
fn a_task_min_available_of_min_partitions_times_size_is_allowed() {
    let job = partitioned(
        "task-with-valid-PartitionPolicy-MinPartitions-equal",
        8,
        json!({"partitionSize": 2, "totalPartitions": 4, "minPartitions": 2}),
        Some(4),
    );
    assert_eq!(create(&job), Ok(()));
}

/// Volcano: TestValidateJobCreate, "task-with-PartitionPolicy-MinPartitions-omitted"
#[test]
fn a_task_min_available_without_min_partitions_is_not_compared_with_partitions() {
    let mut job = partitioned(
        "task-with-PartitionPolicy-MinPartitions-omitted",
        4,
        json!({"partitionSize": 2, "totalPartitions": 2}),
        Some(4),
    );
    job["spec"]["minAvailable"] = json!(4);
    assert_eq!(create(&job), Ok(()));
}

/// Volcano: e2e "Should reject job creation with task minAvailable greater than replicas"
#[test]
fn a_task_min_available_above_its_replicas_is_refused_naming_task_and_job() {
    let mut one = task("task-1", 3);
    one["minAvailable"] = json!(5);
    let job = job(
        "min-above",
        json!({"minAvailable": 1, "queue": "default", "tasks": [one]}),
    );
    assert_eq!(
        denied(create(&job)),
        "'minAvailable' is greater than 'replicas' in task: task-1, job: min-above;"
    );
}

/// A job of the given tasks (name, replicas), each container named as its task, with the `mpi`
/// plugin's `arguments`.
fn mpi_job(name: &str, tasks: &[(&str, i32)], arguments: Value) -> Value {
    let tasks: Vec<Value> = tasks
        .iter()
        .map(|(task_name, replicas)| {
            json!({"name": task_name, "replicas": replicas, "template": {"spec": {
            "containers": [{"name": task_name, "image": "busybox:1.24"}]}}})
        })
        .collect();
    job(
        name,
        json!({"minAvailable": 1, "queue": "default", "tasks": tasks,
               "plugins": {"mpi": arguments}}),
    )
}

/// Volcano: TestValidateJobCreate, "job-with-mpi-plugin-valid-master"
#[test]
fn an_mpi_master_naming_a_task_is_allowed() {
    let job = mpi_job(
        "job-with-mpi-plugin-valid-master",
        &[("launcher", 1), ("worker", 2)],
        json!(["--master=launcher"]),
    );
    assert_eq!(create(&job), Ok(()));
}

/// Volcano: TestValidateJobCreate, "job-with-mpi-plugin-valid-master-without-worker"
#[test]
fn an_mpi_master_without_a_worker_task_is_allowed() {
    let job = mpi_job(
        "job-with-mpi-plugin-valid-master",
        &[("launcher", 1)],
        json!(["--master=launcher"]),
    );
    assert_eq!(create(&job), Ok(()));
}

/// Volcano: TestValidateJobCreate, "job-with-mpi-plugin-invalid-master"
#[test]
fn an_mpi_master_naming_no_task_is_refused_and_nothing_else_is_reported() {
    let mut job = mpi_job(
        "job-with-mpi-plugin-invalid-master",
        &[("worker", 2)],
        json!(["--master=launcher"]),
    );
    job["spec"]["queue"] = json!("missing");
    assert_eq!(
        denied(create(&job)),
        "The specified mpi master task was not found"
    );
}

/// Volcano: the mpi plugin's flags, its master defaulting to `master`
#[test]
fn an_mpi_plugin_without_arguments_needs_a_task_named_master() {
    let job = mpi_job("mpi-default", &[("launcher", 1)], json!([]));
    assert_eq!(
        denied(create(&job)),
        "The specified mpi master task was not found"
    );
}

/// Volcano: the mpi plugin's flags, read as Go's flag package reads `-master name`
#[test]
fn an_mpi_master_given_as_a_separate_argument_is_read() {
    let job = mpi_job(
        "mpi-separate",
        &[("launcher", 1)],
        json!(["-port=22", "-master", "launcher"]),
    );
    assert_eq!(create(&job), Ok(()));
}

/// Volcano: the mpi plugin's flags, parsing stopping at an unknown flag
#[test]
fn an_mpi_master_after_an_unknown_flag_is_not_read() {
    let job = mpi_job(
        "mpi-unknown",
        &[("launcher", 1)],
        json!(["--verbose", "--master=launcher"]),
    );
    assert_eq!(
        denied(create(&job)),
        "The specified mpi master task was not found"
    );
}

/// Tasks `t1`, `t2`, `t3` with the given `dependsOn` names each (`None`: no `dependsOn`).
fn dependent(deps: [Option<&[&str]>; 3]) -> Value {
    let tasks: Vec<Value> = ["t1", "t2", "t3"]
        .iter()
        .zip(deps)
        .map(|(name, names)| {
            let mut one = task(name, 1);
            if let Some(names) = names {
                one["dependsOn"] = json!({"name": names});
            }
            one
        })
        .collect();
    job(
        "dag",
        json!({"minAvailable": 1, "queue": "default", "tasks": tasks}),
    )
}

const NOT_A_DAG: &str =
    "job has dependencies between tasks, but doesn't form a directed acyclic graph(DAG);";

/// Volcano: TestValidateJobCreate, "job with valid task depends on"; e2e "Should allow job
/// creation with valid task dependencies (DAG)"
#[test]
fn a_task_waiting_for_another_is_allowed() {
    let mut job = dependent([Some(&["t2"]), None, None]);
    if let Some(tasks) = job["spec"]["tasks"].as_array_mut() {
        tasks.truncate(2);
    }
    assert_eq!(create(&job), Ok(()));
}

/// Volcano: TestValidateJobCreate, "job with invalid task depends on"
#[test]
fn a_task_waiting_for_a_missing_task_is_refused_as_not_a_dag() {
    let mut job = dependent([Some(&["t3"]), None, None]);
    if let Some(tasks) = job["spec"]["tasks"].as_array_mut() {
        tasks.truncate(2);
    }
    assert_eq!(denied(create(&job)), NOT_A_DAG);
}

/// Volcano: TestTopoSort, "test-1"
#[test]
fn a_chain_of_dependencies_is_a_dag() {
    let job = dependent([Some(&["t2", "t3"]), Some(&["t3"]), Some(&[])]);
    assert_eq!(create(&job), Ok(()));
}

/// Volcano: TestTopoSort, "test-2"
#[test]
fn two_tasks_waiting_for_each_other_are_refused_as_not_a_dag() {
    let job = dependent([Some(&["t2"]), Some(&["t1"]), None]);
    assert_eq!(denied(create(&job)), NOT_A_DAG);
}

/// Volcano: TestTopoSort, "test-3"
#[test]
fn a_task_waiting_for_itself_is_refused_as_not_a_dag() {
    let job = dependent([Some(&["t2", "t3"]), Some(&["t2"]), None]);
    assert_eq!(denied(create(&job)), NOT_A_DAG);
}

/// Volcano: TestTopoSort, "test-4"
#[test]
fn dependencies_listed_out_of_order_are_a_dag() {
    let job = dependent([Some(&["t2", "t3"]), None, Some(&["t2"])]);
    assert_eq!(create(&job), Ok(()));
}

/// Volcano: validateJobCreate and topoSort: a repeated task name ends the task checks, and
/// the dependency check that follows counts each name once, so a repeated name among tasks
/// that wait for others is also not a DAG, loop or not.
#[test]
fn a_repeated_task_name_among_dependent_tasks_is_refused_for_both() {
    let both = format!("duplicated task name t1; {NOT_A_DAG}");
    let mut job = dependent([Some(&["t2"]), Some(&["t1"]), None]);
    job["spec"]["tasks"][2]["name"] = json!("t1");
    assert_eq!(denied(create(&job)), both);
    let mut chain = dependent([Some(&["t2"]), None, None]);
    assert_eq!(create(&chain), Ok(()));
    chain["spec"]["tasks"][2]["name"] = json!("t1");
    assert_eq!(denied(create(&chain)), both);
}

/// Volcano: validateJobCreate: only the tasks up to a repeated name say whether the dependency
/// check runs, so a task after it waiting for a missing task is not reported.
#[test]
fn dependencies_after_a_repeated_task_name_are_not_checked() {
    let mut job = dependent([None, None, Some(&["missing"])]);
    job["spec"]["tasks"][1]["name"] = json!("t1");
    assert_eq!(denied(create(&job)), "duplicated task name t1;");
    // Before the repeated name, the same dependency is reported.
    let mut job = dependent([Some(&["missing"]), None, None]);
    job["spec"]["tasks"][2]["name"] = json!("t1");
    assert_eq!(
        denied(create(&job)),
        format!("duplicated task name t1; {NOT_A_DAG}")
    );
}

/// A job whose one task has pod-level `resources` and a container of each `containers`
/// resources.
fn pod_level(resources: Value, containers: &[Value]) -> Value {
    let containers: Vec<Value> = containers
        .iter()
        .enumerate()
        .map(|(index, resources)| {
            json!({"name": format!("fake-name-{index}"), "image": "busybox:1.24",
                   "resources": resources})
        })
        .collect();
    let one = json!({"name": "task-1", "replicas": 1, "template": {"spec": {
        "resources": resources, "containers": containers}}});
    job(
        "invalid-job-with-pod-level-resources",
        json!({"minAvailable": 1, "queue": "default", "tasks": [one]}),
    )
}

fn with_gate(job: &Value, enabled: bool) -> Result<(), dexaflow_admission::volcano::Refusal> {
    let mut gates = FeatureGates::default();
    gates
        .set("PodLevelResources", enabled)
        .expect("a known gate");
    review("CREATE", job, None, &Queues::standard(), &gates)
}

/// Volcano: TestValidateJobCreate, "validate valid-job with pod level resources"
#[test]
fn pod_level_resources_covering_the_containers_are_allowed() {
    let both = json!({"cpu": "4", "memory": "8Gi", "hugepages-1Mi": "2Gi"});
    let container = json!({"cpu": "2", "memory": "4Gi", "hugepages-1Mi": "1Gi"});
    let job = pod_level(
        json!({"requests": both, "limits": both}),
        &[json!({"requests": container, "limits": container})],
    );
    assert_eq!(with_gate(&job, true), Ok(()));
}

/// Volcano's fixture: an init container and two containers, each requesting two CPUs.
fn two_cpus_each(pod: &Value) -> Value {
    let two = json!({"requests": {"cpu": "2"}});
    let mut job = pod_level(
        json!({"requests": pod, "limits": pod}),
        &[two.clone(), two.clone()],
    );
    job["spec"]["tasks"][0]["template"]["spec"]["initContainers"] =
        json!([{"name": "fake-name-init", "image": "busybox:1.24", "resources": two}]);
    job
}

/// Volcano: TestValidateJobCreate, "validate invalid-job with pod level resources less than
/// aggregate container resources"
#[test]
fn pod_level_requests_below_the_containers_sum_are_refused() {
    let pod = json!({"cpu": "2", "hugepages-1Mi": "2Gi", "hugepages-1Ki": "2Gi"});
    assert_eq!(
        denied(with_gate(&two_cpus_each(&pod), true)),
        "spec.task[0].template.spec.resources.requests[cpu]: Invalid value: \"2\": must be greater than or equal to aggregate container requests of 4."
    );
}

/// Beyond Volcano's tests: Kubernetes sums the containers' requests exactly; two requests whose
/// sum passes the largest amount this build holds still exceed a small pod-level request.
#[test]
fn containers_whose_requests_sum_past_the_largest_amount_exceed_the_pod_level_request() {
    let huge = json!({"requests": {"cpu": "1e35"}});
    let job = pod_level(
        json!({"requests": {"cpu": "1"}, "limits": {"cpu": "1"}}),
        &[huge.clone(), huge],
    );
    let message = denied(with_gate(&job, true));
    assert!(
        message.starts_with(
            "spec.task[0].template.spec.resources.requests[cpu]: Invalid value: \"1\": must be greater than or equal to aggregate container requests of "
        ),
        "{message}"
    );
}

/// Volcano: TestValidateJobCreate, "validate valid-job with pod level resources less than
/// aggregate container resources, but PodLevelResources disabled"
#[test]
fn pod_level_resources_are_not_checked_with_the_gate_off() {
    let pod = json!({"cpu": "2", "hugepages-1Mi": "2Gi", "hugepages-1Ki": "2Gi"});
    assert_eq!(with_gate(&two_cpus_each(&pod), false), Ok(()));
}

/// Volcano: TestValidateJobCreate, "validate invalid-job with pod level resource requests
/// greater than limits"
#[test]
fn pod_level_requests_above_pod_level_limits_are_refused() {
    let two = json!({"requests": {"cpu": "2"}, "limits": {"cpu": "2"}});
    let job = pod_level(
        json!({"requests": {"cpu": "6"}, "limits": {"cpu": "4"}}),
        &[two.clone(), two],
    );
    assert_eq!(
        denied(with_gate(&job, true)),
        "spec.task[0].template.spec.resources.requests: Invalid value: \"6\": must be less than or equal to cpu limit of 4."
    );
}

/// Kubernetes: validatePodResourceConsistency: a container's limit is held to the pod-level
/// limit of the same resource
#[test]
fn a_container_limit_above_the_pod_level_limit_is_refused() {
    let container = json!({"requests": {"cpu": "1"}, "limits": {"cpu": "3"}});
    let job = pod_level(
        json!({"requests": {"cpu": "2"}, "limits": {"cpu": "2"}}),
        &[container],
    );
    assert_eq!(
        denied(with_gate(&job, true)),
        "spec.task[0].template.spec.resources.containers[0][cpu].limits: Invalid value: \"3\": must be less than or equal to pod limits of 2."
    );
}

/// Kubernetes: validatePodResourceConsistency holds only the containers, not the init
/// containers, to the pod-level limits
#[test]
fn an_init_container_limit_above_the_pod_level_limit_is_allowed() {
    let mut job = pod_level(
        json!({"requests": {"cpu": "2"}, "limits": {"cpu": "2"}}),
        &[json!({"requests": {"cpu": "1"}})],
    );
    job["spec"]["tasks"][0]["template"]["spec"]["initContainers"] = json!([{"name": "init",
        "image": "busybox:1.24", "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "3"}}}]);
    assert_eq!(with_gate(&job, true), Ok(()));
}

/// Kubernetes: validatePodResourceConsistency compares every resource the containers request
/// with the pod-level request, a pod-level request left out counting as zero; the sum is
/// written as Go writes it (`1Gi`)
#[test]
fn a_request_the_pod_level_requests_leave_out_is_compared_with_zero() {
    let container = json!({"requests": {"cpu": "1", "memory": "1Gi"}});
    let job = pod_level(
        json!({"requests": {"cpu": "2"}, "limits": {"cpu": "2"}}),
        &[container],
    );
    assert_eq!(
        denied(with_gate(&job, true)),
        "spec.task[0].template.spec.resources.requests[memory]: Invalid value: \"0\": must be greater than or equal to aggregate container requests of 1Gi."
    );
}

/// Kubernetes: validatePodResourceConsistency: pod-level limits alone leave every pod-level
/// request at zero, since a template's pod-level requests are not defaulted as a pod's are
#[test]
fn pod_level_limits_without_requests_refuse_a_container_request() {
    let job = pod_level(
        json!({"limits": {"cpu": "2"}}),
        &[json!({"requests": {"cpu": "1"}})],
    );
    assert_eq!(
        denied(with_gate(&job, true)),
        "spec.task[0].template.spec.resources.requests[cpu]: Invalid value: \"0\": must be greater than or equal to aggregate container requests of 1."
    );
}

/// Kubernetes: validatePodResourceConsistency sums extended resources too, though the pod
/// level cannot request them
#[test]
fn an_extended_resource_a_container_requests_exceeds_the_pod_level_request() {
    let gpu = json!({"nvidia.com/gpu": "1"});
    let job = pod_level(
        json!({"requests": {"cpu": "2"}}),
        &[json!({"requests": gpu, "limits": gpu})],
    );
    assert_eq!(
        denied(with_gate(&job, true)),
        "spec.task[0].template.spec.resources.requests[nvidia.com/gpu]: Invalid value: \"0\": must be greater than or equal to aggregate container requests of 1."
    );
}

/// Kubernetes: validateResourceRequirements (through validatePodResourceRequirements): huge
/// pages at pod level need CPU or memory beside them
#[test]
fn pod_level_huge_pages_without_cpu_or_memory_are_refused() {
    let pages = json!({"hugepages-2Mi": "2Mi"});
    let job = pod_level(json!({"requests": pages, "limits": pages}), &[json!({})]);
    assert_eq!(
        denied(with_gate(&job, true)),
        "spec.task[0].template.spec.resources: Forbidden: HugePages require cpu or memory."
    );
}

/// Kubernetes: validateResourceRequirements (through ValidateContainerResourceRequirements):
/// a container's huge pages need CPU or memory beside them, whatever the gate
#[test]
fn a_container_asking_huge_pages_without_cpu_or_memory_is_refused() {
    let pages = json!({"hugepages-2Mi": "2Mi"});
    let mut job = pod_level(json!({}), &[json!({"requests": pages, "limits": pages})]);
    job["spec"]["tasks"][0]["template"]["spec"]
        .as_object_mut()
        .expect("a spec")
        .remove("resources");
    assert_eq!(
        denied(with_gate(&job, false)),
        "spec.task[0].template.spec.containers[0].resources: Forbidden: HugePages require cpu or memory."
    );
}

/// A job whose one task has pod-level CPU requests of `pod`, one container requesting one CPU
/// and the init containers `init` as (CPUs requested, whether it is a sidecar), in order.
fn with_init(pod: &str, init: &[(&str, bool)]) -> Value {
    let one = json!({"requests": {"cpu": "1"}});
    let mut job = pod_level(json!({"requests": {"cpu": pod}}), &[one]);
    let init: Vec<Value> = init
        .iter()
        .enumerate()
        .map(|(index, (cpu, sidecar))| {
            let mut container = json!({"name": format!("init-{index}"), "image": "busybox:1.24",
                "resources": {"requests": {"cpu": cpu}}});
            if *sidecar {
                container["restartPolicy"] = json!("Always");
            }
            container
        })
        .collect();
    job["spec"]["tasks"][0]["template"]["spec"]["initContainers"] = json!(init);
    job
}

/// Kubernetes' refusal of pod-level CPU requests `pod` below the containers' `aggregate`.
fn below_aggregate(pod: &str, aggregate: &str) -> String {
    format!(
        "spec.task[0].template.spec.resources.requests[cpu]: Invalid value: \"{pod}\": must be greater than or equal to aggregate container requests of {aggregate}."
    )
}

/// Kubernetes: validatePodResourceConsistency (AggregateContainerRequests): a sidecar's
/// request adds to the containers' sum, where a regular init container's only bounds it
#[test]
fn a_sidecar_counts_in_the_containers_sum() {
    assert_eq!(
        denied(with_gate(&with_init("1500m", &[("1", true)]), true)),
        below_aggregate("1500m", "2")
    );
    assert_eq!(
        with_gate(&with_init("1500m", &[("1", false)]), true),
        Ok(())
    );
}

/// Kubernetes: validatePodResourceConsistency (AggregateContainerRequests): a regular init
/// container runs beside the sidecars started before it, not those after it
#[test]
fn an_init_container_after_a_sidecar_counts_with_it() {
    assert_eq!(
        denied(with_gate(
            &with_init("2500m", &[("1", true), ("2", false)]),
            true
        )),
        below_aggregate("2500m", "3")
    );
    assert_eq!(
        with_gate(&with_init("2500m", &[("2", false), ("1", true)]), true),
        Ok(())
    );
}

/// Kubernetes: ValidatePodSpec checks the pod-level resources (validatePodResources) before
/// the restart policy (validateRestartPolicy)
#[test]
fn pod_level_resources_are_reported_before_the_restart_policy() {
    let two = json!({"requests": {"cpu": "2"}});
    let mut job = pod_level(json!({"requests": {"cpu": "1"}}), &[two]);
    job["spec"]["tasks"][0]["template"]["spec"]["restartPolicy"] = json!("X");
    let resources = "spec.task[0].template.spec.resources.requests[cpu]: Invalid value: \"1\": must be greater than or equal to aggregate container requests of 2. ";
    let restart = "template.spec.restartPolicy: Unsupported value: \"X\": supported values: \"Always\", \"OnFailure\", \"Never\".";
    assert_eq!(
        denied(with_gate(&job, true)),
        format!("{resources}{restart}")
    );
    // With the gate off, the restart policy is the one problem.
    assert_eq!(
        denied(with_gate(&job, false)),
        format!("spec.task[0].{restart}")
    );
}

/// A job whose one task runs a privileged init container (when `init`) or container.
fn privileged(init: bool) -> Value {
    let privileged = json!({"privileged": true});
    let mut one = task("task-1", 1);
    if init {
        one["template"]["spec"]["initContainers"] = json!([{"name": "init-fake-name",
            "image": "busybox:1.24", "securityContext": privileged}]);
    } else {
        one["template"]["spec"]["containers"][0]["securityContext"] = privileged;
    }
    job(
        "valid-job",
        json!({"minAvailable": 1, "queue": "default", "tasks": [one]}),
    )
}

/// Volcano: TestValidateJobCreate, "job with privileged init container"
#[test]
fn a_privileged_init_container_is_allowed() {
    assert_eq!(create(&privileged(true)), Ok(()));
}

/// Volcano: TestValidateJobCreate, "job with privileged container"
#[test]
fn a_privileged_container_is_allowed() {
    assert_eq!(create(&privileged(false)), Ok(()));
}

/// A job whose one task has the topology policy `restricted` and one container given `cpu`.
fn topology(cpu: &str) -> Value {
    let one = json!({"name": "task-1", "replicas": 5, "topologyPolicy": "restricted",
        "template": {"spec": {"containers": [{"name": "fake-name", "image": "busybox:1.24",
            "resources": {"limits": {"cpu": cpu, "memory": "2000"}}}]}}});
    job(
        "topology",
        json!({"minAvailable": 1, "queue": "default", "tasks": [one]}),
    )
}

/// Volcano: TestValidateTaskTopoPolicy, "test-1"
#[test]
fn a_topology_policy_with_whole_cpu_limits_is_allowed() {
    assert_eq!(create(&topology("1")), Ok(()));
}

/// Volcano: TestValidateTaskTopoPolicy, "test-2"
#[test]
fn a_topology_policy_with_a_fraction_of_a_cpu_is_refused_naming_task_and_container() {
    assert_eq!(
        denied(create(&topology("500m"))),
        "the cpu request isn't an integer in spec.task[0] container[0]."
    );
}
