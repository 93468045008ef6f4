//! Volcano's `/jobs/validate` rule: the job-level cases of Volcano's `admit_job_test.go`
//! (`TestValidateJobCreate`: tasks, policies, plugins, volumes, queue) and the one-request
//! specs of its `test/e2e/admission/job_validation_test.go`, one test each. The helpers here
//! serve the other `volcano_jobs_validate_*` files too.
//!
//! Not ported, because no admission request to this rule can express them:
//! - the e2e specs refusing a negative `minAvailable`, `maxRetry`, `ttlSecondsAfterFinished`,
//!   task `replicas` or task `minAvailable`, a task name that is not a DNS label, and an empty
//!   volume `mountPath` with the schema's wording: the CRD's schema and Volcano's
//!   ValidatingAdmissionPolicy refuse them in the API server, before any webhook;
//! - `mpi_test.go`: it tests `AddDependsOn`, which no webhook calls (its call in the job
//!   mutator is commented out).

use dexaflow_admission::volcano::{
    FeatureGates, Job, Operation, Queue, QueueView, Refusal, Review, ViewError, decode,
    validate_job,
};
use serde_json::{Value, json};
use std::sync::Arc;

/// The queue cache of these tests: the one of the queue tests, filled by state and parent.
pub(crate) use crate::volcano_queues::Cache as Queues;

impl Queues {
    /// `default` open, and Volcano's hierarchy fixture: `root`, `parentQueue` under it and
    /// `childQueue` under that, all open.
    pub(crate) fn standard() -> Queues {
        Queues::of_states(&[
            ("default", "Open", ""),
            ("root", "Open", ""),
            ("parentQueue", "Open", "root"),
            ("childQueue", "Open", "parentQueue"),
        ])
    }

    /// Queues by (name, state, parent).
    pub(crate) fn of_states(queues: &[(&str, &str, &str)]) -> Queues {
        let queues = queues.iter().map(|(name, state, parent)| {
            let value = json!({"metadata": {"name": name}, "spec": {"parent": parent},
                "status": {"state": state}});
            crate::volcano_queues::to_queue(&value)
        });
        Queues::from_queues(queues)
    }
}

/// Volcano's usual pod template: one `busybox:1.24` container named `fake-name`.
pub(crate) fn template() -> Value {
    json!({"metadata": {"labels": {"name": "test"}},
           "spec": {"containers": [{"name": "fake-name", "image": "busybox:1.24"}]}})
}

/// A task running Volcano's usual template.
pub(crate) fn task(name: &str, replicas: i32) -> Value {
    json!({"name": name, "replicas": replicas, "template": template()})
}

/// A job named `name` in namespace `test` with `spec`.
pub(crate) fn job(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
           "metadata": {"name": name, "namespace": "test"}, "spec": spec})
}

/// A job in the `default` queue, `minAvailable` 1, with one task `task-1` of one replica and
/// `extra` merged into its spec.
pub(crate) fn simple_job(name: &str, extra: Value) -> Value {
    let mut spec = json!({"minAvailable": 1, "queue": "default", "tasks": [task("task-1", 1)]});
    if let (Some(spec), Value::Object(extra)) = (spec.as_object_mut(), extra) {
        spec.extend(extra);
    }
    job(name, spec)
}

fn decoded(value: &Value) -> Job {
    decode("object", value).expect("a job").expect("not null")
}

/// The verdict on `operation` of `object` (and `old`), against `queues` and `gates`.
pub(crate) fn review(
    operation: &str,
    object: &Value,
    old: Option<&Value>,
    queues: &Queues,
    gates: &FeatureGates,
) -> Result<(), Refusal> {
    let job = decoded(object);
    let old = old.map(decoded);
    let review = Review {
        operation: Operation::parse(operation),
        name: job.metadata.name.as_deref().unwrap_or_default(),
        namespace: "test",
        object: Some(&job),
        old_object: old.as_ref(),
    };
    validate_job(&review, queues, gates)
}

/// The verdict on creating `object` with the standard queues and default gates.
pub(crate) fn create(object: &Value) -> Result<(), Refusal> {
    review(
        "CREATE",
        object,
        None,
        &Queues::standard(),
        &FeatureGates::default(),
    )
}

/// The verdict on updating `old` to `new`; the queue cache is empty, since an update reads none.
pub(crate) fn update(old: &Value, new: &Value) -> Result<(), Refusal> {
    review(
        "UPDATE",
        new,
        Some(old),
        &Queues::of_states(&[]),
        &FeatureGates::default(),
    )
}

/// The denial's message, failing on any other verdict.
pub(crate) fn denied(verdict: Result<(), Refusal>) -> String {
    match verdict {
        Err(Refusal::Denied(message)) => message,
        other => panic!("expected a denial, got {other:?}"),
    }
}

/// The valid events and actions Volcano appends to a policy problem.
pub(crate) const VALID_POLICIES: &str = " valid events are [* PodFailed PodEvicted PodPending Unknown TaskCompleted TaskFailed JobUpdated], valid actions are [AbortJob RestartJob RestartTask RestartPod RestartPartition TerminateJob CompleteJob ResumeJob];";

/// A single policy error as Volcano reports it, trimmed as the whole message is.
fn policy_message(error: &str) -> String {
    format!("1 error occurred:\n\t* {error}\n\n{VALID_POLICIES}")
}

/// Volcano: TestValidateJobCreate, "simple-valid-job"; e2e "Should allow job creation with
/// valid configuration"
#[test]
fn a_job_with_one_valid_task_in_an_open_queue_is_allowed() {
    assert_eq!(create(&simple_job("simple-valid-job", json!({}))), Ok(()));
}

/// Volcano: TestValidateJobCreate, "simple-valid-job-with-policy"
#[test]
fn a_job_with_a_valid_event_policy_is_allowed() {
    let policies = json!({"policies": [{"event": "PodEvicted", "action": "RestartTask"}]});
    assert_eq!(create(&simple_job("valid-job", policies)), Ok(()));
}

/// Volcano: TestValidateJobCreate, "duplicate-task-job"; e2e "Should reject job creation with
/// duplicate task names"
#[test]
fn two_tasks_of_one_name_are_refused_naming_it() {
    let tasks = json!([task("duplicated-task-1", 1), task("duplicated-task-1", 1)]);
    let job = job(
        "duplicate-task-job",
        json!({"minAvailable": 1, "queue": "default", "tasks": tasks}),
    );
    assert_eq!(
        denied(create(&job)),
        "duplicated task name duplicated-task-1;"
    );
}

/// Volcano: TestValidateJobCreate, "job-policy-duplicated"; e2e "Should reject job creation
/// with duplicate policy events"
#[test]
fn one_event_in_two_job_policies_is_refused_with_the_valid_events_and_actions() {
    let policies = json!({"policies": [{"event": "PodFailed", "action": "AbortJob"},
                                       {"event": "PodFailed", "action": "RestartJob"}]});
    assert_eq!(
        denied(create(&simple_job("job-policy-duplicated", policies))),
        policy_message("duplicate event PodFailed  across different policy")
    );
}

/// Volcano: TestValidateJobCreate, "Min Available illegal"; e2e "Should reject job creation
/// with job minAvailable greater than total replicas"
#[test]
fn a_job_min_available_above_its_replicas_is_refused() {
    let job = simple_job("job-min-illegal", json!({"minAvailable": 2}));
    assert_eq!(
        denied(create(&job)),
        "job 'minAvailable' should not be greater than total replicas in tasks;"
    );
}

/// Volcano: TestValidateJobCreate, "Job Plugin illegal"
#[test]
fn an_unknown_plugin_is_refused_naming_it() {
    let job = simple_job("job-plugin-illegal", json!({"plugins": {"big_plugin": []}}));
    assert_eq!(
        denied(create(&job)),
        "unable to find job plugin: big_plugin;"
    );
}

/// Volcano: the job plugins its controller registers (ssh, env, svc, tensorflow, mpi,
/// pytorch, hcclrank, ray)
#[test]
fn every_plugin_volcano_knows_is_allowed() {
    let plugins = json!({"ssh": [], "env": [], "svc": [], "tensorflow": [], "pytorch": [],
                         "hcclrank": [], "ray": [], "mpi": ["--master=task-1"]});
    let job = simple_job("plugins", json!({"plugins": plugins}));
    assert_eq!(create(&job), Ok(()));
}

/// Volcano: TestValidateJobCreate, "no-task"; e2e "Should reject job creation with no tasks
/// specified"
#[test]
fn a_job_without_tasks_is_refused_and_nothing_else_is_reported() {
    let job = job(
        "no-task",
        json!({"minAvailable": 1, "queue": "missing", "plugins": {"big_plugin": []}}),
    );
    assert_eq!(denied(create(&job)), "No task specified in job spec");
}

/// Volcano: TestValidateJobCreate, "replica-lessThanZero"
#[test]
fn a_negative_task_replicas_counts_against_the_job_min_available() {
    let job = job(
        "replica-lessThanZero",
        json!({"minAvailable": 1, "queue": "default", "tasks": [task("task-1", -1)]}),
    );
    assert_eq!(
        denied(create(&job)),
        "job 'minAvailable' should not be greater than total replicas in tasks;"
    );
}

/// Volcano: TestValidateJobCreate, "job-policy-withExitCode" (event and exit code); e2e
/// "Should reject job creation with policy event and exit code specified simultaneously"
#[test]
fn a_policy_with_an_event_and_an_exit_code_is_refused() {
    let policies =
        json!({"policies": [{"event": "PodFailed", "action": "AbortJob", "exitCode": -1}]});
    assert_eq!(
        denied(create(&simple_job("job-policy-withExitCode", policies))),
        policy_message("must not specify event and exitCode simultaneously")
    );
}

/// Volcano: TestValidateJobCreate, "policy-noEvent-noExCode"; e2e "Should reject job creation
/// with policy having neither event nor exit code"
#[test]
fn a_policy_with_neither_event_nor_exit_code_is_refused() {
    let policies = json!({"policies": [{"action": "AbortJob"}]});
    assert_eq!(
        denied(create(&simple_job("policy-noEvent-noExCode", policies))),
        policy_message("either event and exitCode should be specified")
    );
}

/// Volcano: TestValidateJobCreate, "invalid-policy-event"
#[test]
fn an_unknown_policy_event_is_refused_quoting_it() {
    let policies = json!({"policies": [{"event": "someFakeEvent", "action": "AbortJob"}]});
    assert_eq!(
        denied(create(&simple_job("invalid-policy-event", policies))),
        policy_message("spec.policies: Invalid value: \"someFakeEvent\": invalid policy event")
    );
}

/// Volcano: TestValidateJobCreate, "invalid-policy-action"; e2e "Should reject job creation
/// with invalid policy action"
#[test]
fn an_unknown_policy_action_is_refused_quoting_it() {
    let policies = json!({"policies": [{"event": "PodEvicted", "action": "someFakeAction"}]});
    assert_eq!(
        denied(create(&simple_job("invalid-policy-action", policies))),
        policy_message("spec.policies: Invalid value: \"someFakeAction\": invalid policy action")
    );
}

/// Volcano: TestValidateJobCreate, "policy-extcode-zero"; e2e "Should reject job creation with
/// policy exit code zero"
#[test]
fn an_exit_code_of_zero_is_refused() {
    let policies = json!({"policies": [{"action": "AbortJob", "exitCode": 0}]});
    assert_eq!(
        denied(create(&simple_job("policy-extcode-zero", policies))),
        policy_message("0 is not a valid error code")
    );
}

/// Volcano: TestValidateJobCreate, "duplicate-exitcode"; e2e "Should reject job creation with
/// duplicate policy exit codes"
#[test]
fn one_exit_code_in_two_policies_is_refused_naming_it() {
    let policies = json!({"policies": [{"action": "AbortJob", "exitCode": 1},
                                       {"action": "RestartJob", "exitCode": 1}]});
    assert_eq!(
        denied(create(&simple_job("duplicate-exitcode", policies))),
        policy_message("duplicate exitCode 1")
    );
}

/// Volcano: TestValidateJobCreate, "job-policy-withExitCode" (any event and another); e2e
/// "Should reject job creation with AnyEvent policy and other event policies"
#[test]
fn the_any_event_beside_another_job_policy_is_refused() {
    let policies = json!({"policies": [{"event": "*", "action": "AbortJob"},
                                       {"event": "PodFailed", "action": "RestartJob"}]});
    assert_eq!(
        denied(create(&simple_job("any-and-other", policies))),
        policy_message("if there's * here, no other policy should be here")
    );
}

/// Volcano: TestValidateJobCreate, "taskpolicy-withAnyandOthrEvent"
#[test]
fn the_any_event_beside_another_task_policy_is_refused() {
    let mut one = task("task-1", 1);
    one["policies"] = json!([{"event": "*", "action": "AbortJob"},
                             {"event": "PodFailed", "action": "RestartJob"}]);
    let job = job(
        "taskpolicy-withAnyandOthrEvent",
        json!({"minAvailable": 1, "queue": "default", "tasks": [one]}),
    );
    assert_eq!(
        denied(create(&job)),
        policy_message("if there's * here, no other policy should be here")
    );
}

/// Volcano: util.go's validatePolicies, a policy without event or exit code after the any
/// event and another: both errors, in hashicorp multierror's list
#[test]
fn two_policy_errors_are_listed_together() {
    let policies = json!({"policies": [{"event": "*", "action": "AbortJob"},
                                       {"event": "PodFailed", "action": "RestartJob"},
                                       {"action": "AbortJob"}]});
    assert_eq!(
        denied(create(&simple_job("two-errors", policies))),
        format!(
            "2 errors occurred:\n\t* either event and exitCode should be specified\n\t* if there's * here, no other policy should be here\n\n{VALID_POLICIES}"
        )
    );
}

/// Volcano: TestValidateJobCreate, "invalid-mount-volume"
#[test]
fn a_volume_without_a_mount_path_is_refused() {
    let extra = json!({"policies": [{"event": "*", "action": "AbortJob"}],
                       "volumes": [{"mountPath": ""}]});
    assert_eq!(
        denied(create(&simple_job("invalid-mount-volume", extra))),
        "mountPath is required;"
    );
}

/// Volcano: TestValidateJobCreate, "duplicate-mount-volume"; e2e "Should reject job creation
/// with duplicate volume mount paths"
#[test]
fn two_volumes_at_one_mount_path_are_refused_naming_it() {
    let extra = json!({"volumes": [{"mountPath": "/var", "volumeClaimName": "pvc1"},
                                   {"mountPath": "/var", "volumeClaimName": "pvc2"}]});
    assert_eq!(
        denied(create(&simple_job("duplicate-mount-volume", extra))),
        "duplicated mountPath: /var;"
    );
}

/// Volcano: TestValidateJobCreate, "volume without VolumeClaimName and VolumeClaim"; e2e
/// "Should reject job creation with volume without claim name or claim spec"
#[test]
fn a_volume_without_claim_or_claim_name_is_refused() {
    let extra = json!({"volumes": [{"mountPath": "/var"}]});
    assert_eq!(
        denied(create(&simple_job("invalid-volume", extra))),
        "either VolumeClaim or VolumeClaimName must be specified;"
    );
}

/// Volcano: util.go's validateIO, a claim and a claim name together
#[test]
fn a_volume_with_both_claim_and_claim_name_is_refused() {
    let extra = json!({"volumes": [{"mountPath": "/var", "volumeClaimName": "pvc1",
                                    "volumeClaim": {"accessModes": ["ReadWriteOnce"]}}]});
    assert_eq!(
        denied(create(&simple_job("both-claims", extra))),
        "conflict: If you want to use an existing PVC, just specify VolumeClaimName.If you want to create a new PVC, you do not need to specify VolumeClaimName"
    );
}

/// Volcano: util.go's validateIO, a claim name that is not a DNS subdomain
#[test]
fn a_claim_name_that_is_not_a_dns_subdomain_is_refused_quoting_kubernetes() {
    let extra = json!({"volumes": [{"mountPath": "/var", "volumeClaimName": "PVC_1"}]});
    assert_eq!(
        denied(create(&simple_job("bad-claim", extra))),
        "invalid VolumeClaimName PVC_1 : [a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')]"
    );
}

/// Volcano: TestValidateJobCreate, "job-with-noQueue"
#[test]
fn a_job_in_a_missing_queue_is_refused_naming_the_queue() {
    let job = simple_job("job-with-noQueue", json!({"queue": "jobQueue"}));
    assert_eq!(
        denied(create(&job)),
        "unable to find job queue: queue.scheduling.volcano.sh \"jobQueue\" not found;"
    );
}

/// Volcano: admit_job.go, a queue that is not open
#[test]
fn a_job_in_a_closed_queue_is_refused_naming_the_queue_and_state() {
    let queues = Queues::of_states(&[("default", "Closed", "")]);
    let job = simple_job("closed", json!({}));
    assert_eq!(
        denied(review(
            "CREATE",
            &job,
            None,
            &queues,
            &FeatureGates::default()
        )),
        "can only submit job to queue with state `Open`, queue `default` status is `Closed`;"
    );
}

/// Volcano: TestValidateHierarchyCreate, "job-with-rootQueue"
#[test]
fn a_job_in_the_root_queue_is_refused() {
    let job = simple_job("job-with-noQueue", json!({"queue": "root"}));
    assert_eq!(denied(create(&job)), "can not submit job to root queue;");
}

/// Volcano: TestValidateHierarchyCreate, "job-with-parentQueue"
#[test]
fn a_job_in_a_queue_with_children_is_refused_counting_them() {
    let job = simple_job("job-with-parentQueue", json!({"queue": "parentQueue"}));
    assert_eq!(
        denied(create(&job)),
        "can only submit job to leaf queue, queue `parentQueue` has 1 child queues;"
    );
}

/// Volcano: TestValidateHierarchyCreate, "job-with-leafQueue"
#[test]
fn a_job_in_a_leaf_queue_is_allowed() {
    let job = simple_job("job-with-leafQueue", json!({"queue": "childQueue"}));
    assert_eq!(create(&job), Ok(()));
}

/// Volcano: admit_job.go, every problem of a job reported in one message, in Volcano's order
#[test]
fn several_problems_are_reported_together_in_volcanos_order() {
    let job = simple_job(
        "several",
        json!({"minAvailable": 3, "plugins": {"nope": []}, "queue": "missing"}),
    );
    assert_eq!(
        denied(create(&job)),
        "job 'minAvailable' should not be greater than total replicas in tasks; unable to find job plugin: nope; unable to find job queue: queue.scheduling.volcano.sh \"missing\" not found;"
    );
}

/// Volcano: AdmitJobs, an operation it is not registered for
#[test]
fn a_delete_is_answered_as_an_unknown_operation() {
    let job = simple_job("deleted", json!({}));
    let verdict = review(
        "DELETE",
        &job,
        None,
        &Queues::standard(),
        &FeatureGates::default(),
    );
    assert_eq!(
        verdict,
        Err(Refusal::UnknownOperation {
            operation: "DELETE".to_owned(),
            expected: "'CREATE' or 'UPDATE'",
        })
    );
}

/// Not in Volcano's tests: unknown plugins, which Go reports in random map order, by name here
#[test]
fn unknown_plugins_are_reported_by_name() {
    let job = simple_job("plugins", json!({"plugins": {"zeta": [], "alpha": []}}));
    assert_eq!(
        denied(create(&job)),
        "unable to find job plugin: alpha; unable to find job plugin: zeta;"
    );
}

/// A cache that holds an open `default` queue but cannot list children.
struct NoChildren;

impl QueueView for NoChildren {
    fn queue(&self, name: &str) -> Result<Arc<Queue>, ViewError> {
        Queues::standard().queue(name)
    }
    fn children(&self, _parent: &str) -> Result<Vec<Arc<Queue>>, ViewError> {
        Err(ViewError::Unavailable {
            reason: "cache not synced".to_owned(),
        })
    }
    fn queues_where(&self, keep: &dyn Fn(&Queue) -> bool) -> Result<Vec<Arc<Queue>>, ViewError> {
        Queues::standard().queues_where(keep)
    }
}

/// Not in Volcano's tests: the child queues cannot be read
#[test]
fn a_failed_read_of_child_queues_is_refused_naming_the_queue_and_reason() {
    let job = simple_job("no-children", json!({}));
    let verdict = validate_job(
        &Review {
            operation: Operation::Create,
            name: "no-children",
            namespace: "test",
            object: Some(&decoded(&job)),
            old_object: None,
        },
        &NoChildren,
        &FeatureGates::default(),
    );
    assert_eq!(
        denied(verdict),
        "failed to get child queues for queue default: cache not synced;"
    );
}

/// Go: encoding/json decodes a `null` list as an empty one, so a job whose `tasks` are `null`
/// reaches Volcano's rule and gets its message, not a decoding error (validateJobCreate)
#[test]
fn a_job_whose_tasks_are_null_is_refused_as_having_no_tasks() {
    let job = job(
        "null-tasks",
        json!({"minAvailable": 1, "queue": "default", "tasks": null}),
    );
    assert_eq!(denied(create(&job)), "No task specified in job spec");
}

/// Go: encoding/json decodes a `null` list as an empty one, so `volumes: null` is no volume
#[test]
fn a_job_whose_volumes_are_null_is_allowed() {
    let job = simple_job("null-volumes", json!({"volumes": null, "policies": null}));
    assert_eq!(create(&job), Ok(()));
}
