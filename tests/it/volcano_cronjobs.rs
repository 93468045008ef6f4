//! Volcano's `/cronjobs/validate` rule, with the cases of Volcano's `admit_cronjob_test.go` and
//! the cronjob creations of its e2e suite (`test/e2e/cronjob/cronjob_basic.go`) ported one
//! test each, and the checks this rule adds beyond Volcano's.
//!
//! Volcano's spec and name cases call its internal checks one at a time; each is ported as a
//! whole request whose other parts are valid, so the answer is that check's. Every case is one
//! admission request: none was left out.

use crate::volcano_jobs_validate::denied;
use dexaflow_admission::volcano::{
    CronJob, FeatureGates, Operation, Refusal, Review, decode, validate_cronjob,
};
use serde_json::{Value, json};

/// A cronjob as Volcano's tests build one: the job template of `getJobTemplate`, the `Allow`
/// policy, and `changes` merged into the spec (a `null` removes a field).
fn cronjob(name: &str, changes: Value) -> CronJob {
    let mut spec = json!({
        "schedule": "* * * * *",
        "concurrencyPolicy": "Allow",
        "jobTemplate": {"spec": {
            "minAvailable": 1,
            "queue": "default",
            "tasks": [{"name": "task-1", "replicas": 1, "template": {
                "metadata": {"labels": {"name": "test"}},
                "spec": {"containers": [{"name": "fake-name", "image": "busybox:1.24"}]}}}],
            "policies": [{"event": "PodEvicted", "action": "RestartTask"}]}}
    });
    if let (Some(spec), Value::Object(changes)) = (spec.as_object_mut(), changes) {
        for (key, value) in changes {
            if value.is_null() {
                spec.remove(&key);
            } else {
                spec.insert(key, value);
            }
        }
    }
    let value = json!({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "CronJob",
        "metadata": {"name": name, "namespace": "default"}, "spec": spec});
    decode("object", &value)
        .expect("a cronjob")
        .expect("not null")
}

fn review(operation: Operation, cronjob: &CronJob) -> Result<(), Refusal> {
    validate_cronjob(
        &Review {
            operation,
            name: cronjob.metadata.name.as_deref().unwrap_or_default(),
            namespace: "default",
            object: Some(cronjob),
            old_object: None,
        },
        &FeatureGates::default(),
    )
}

/// The verdict on creating `cronjob`.
fn create(cronjob: &CronJob) -> Result<(), Refusal> {
    review(Operation::Create, cronjob)
}

/// The verdict on creating Volcano's test cronjob (`cronvcjob`) with `changes` to its spec.
fn create_spec(changes: Value) -> Result<(), Refusal> {
    create(&cronjob("cronvcjob", changes))
}

const NAME_RULE: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', \
    and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or \
    '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const TOO_LONG: &str = "cronJob name must be no more than 52 characters to accommodate job name \
    suffix (max 63 total)";
const UNKNOWN_AND_INVALID: &str = "unknown timeZone invalid timeZone";

/// Volcano: TestValidateCronjobSpec, "validate valid-cronjob"
#[test]
fn an_every_minute_schedule_is_allowed() {
    assert_eq!(create_spec(json!({})), Ok(()));
}

/// Volcano: TestValidateCronjobSpec, "validate non-standard scheduled"
#[test]
fn an_every_descriptor_is_allowed() {
    assert_eq!(create_spec(json!({"schedule": "@every 1m"})), Ok(()));
}

/// Volcano: TestValidateCronjobSpec, "validate correct timeZone"
#[test]
fn a_known_time_zone_is_allowed() {
    let changes = json!({"schedule": "*/5 * * * *", "timeZone": "Pacific/Honolulu"});
    assert_eq!(create_spec(changes), Ok(()));
}

/// Volcano: TestValidateCronjobSpec, "validate contain TZ schedule"
#[test]
fn a_time_zone_inside_the_schedule_is_refused() {
    let changes = json!({"schedule": "TZ=UTC 0 20 * * *", "timeZone": "Pacific/Honolulu"});
    assert_eq!(
        denied(create_spec(changes)),
        "schedule should not contain TZ or CRON_TZ, TZ should only be set in the timeZone field"
    );
}

/// Volcano: TestValidateCronjobSpec, "validate error schedule"
#[test]
fn a_schedule_that_does_not_parse_is_refused() {
    let changes = json!({"schedule": "error schedule", "timeZone": "Pacific/Honolulu"});
    assert_eq!(
        denied(create_spec(changes)),
        "schedule is not a valid cron expression"
    );
}

/// Volcano: TestValidateCronjobSpec, "validate empty schedule"
#[test]
fn an_empty_schedule_is_refused() {
    let changes = json!({"schedule": "", "timeZone": "Pacific/Honolulu"});
    assert_eq!(
        denied(create_spec(changes)),
        "schedule is required, but got empty"
    );
}

/// Volcano: TestValidateCronjobSpec, "validate unknown . timezone". Volcano also loads the name
/// as a file path, which on a host with zone files finds `Asia/Shanghai` and leaves out
/// "invalid timeZone"; the database here names no such zone.
#[test]
fn a_dot_part_in_the_time_zone_is_refused() {
    let changes = json!({"schedule": "*/5 * * * *", "timeZone": "Asia/./Shanghai"});
    assert_eq!(denied(create_spec(changes)), UNKNOWN_AND_INVALID);
}

/// Volcano: TestValidateCronjobSpec, "validate unknown _ timezone"
#[test]
fn a_time_zone_part_starting_with_a_hyphen_is_refused() {
    let changes = json!({"schedule": "*/5 * * * *", "timeZone": "America/-NewYork"});
    assert_eq!(denied(create_spec(changes)), UNKNOWN_AND_INVALID);
}

/// Volcano: TestValidateCronjobSpec, "validate unknown space timezone"
#[test]
fn a_blank_in_the_time_zone_is_refused() {
    let changes = json!({"schedule": "*/5 * * * *", "timeZone": "New York"});
    assert_eq!(denied(create_spec(changes)), UNKNOWN_AND_INVALID);
}

/// Volcano: TestValidateCronjobSpec, "validate unknown ! timezone"
#[test]
fn a_punctuation_mark_in_the_time_zone_is_refused() {
    let changes = json!({"schedule": "*/5 * * * *", "timeZone": "UTC!"});
    assert_eq!(denied(create_spec(changes)), UNKNOWN_AND_INVALID);
}

/// Volcano: TestValidateCronjobSpec, "validate Local timezone"
#[test]
fn the_local_time_zone_is_refused() {
    let changes = json!({"schedule": "*/5 * * * *", "timeZone": "Local"});
    assert_eq!(
        denied(create_spec(changes)),
        "timeZone can't be Local, and must be defined in https://www.iana.org/time-zones"
    );
}

/// Volcano: TestValidateCronjobSpec, "validate empty timezone"
#[test]
fn an_empty_time_zone_is_refused_after_the_empty_schedule() {
    let changes = json!({"schedule": "", "timeZone": ""});
    assert_eq!(
        denied(create_spec(changes)),
        "schedule is required, but got empty timeZone must be nil or non-empty string, got empty \
         string"
    );
}

/// Volcano: TestValidateCronjobSpec, "validate error timezone"
#[test]
fn a_misspelt_time_zone_is_refused_after_the_empty_schedule() {
    let changes = json!({"schedule": "", "timeZone": "Amerrica/New_York"});
    assert_eq!(
        denied(create_spec(changes)),
        "schedule is required, but got empty invalid timeZone"
    );
}

/// Volcano: TestValidateCronJobName, "valid name"
#[test]
fn a_lower_case_hyphenated_name_is_allowed() {
    assert_eq!(create(&cronjob("my-cronjob", json!({}))), Ok(()));
}

/// Volcano: TestValidateCronJobName, "exactly max length"
#[test]
fn a_name_of_52_characters_is_allowed() {
    assert_eq!(create(&cronjob(&"a".repeat(52), json!({}))), Ok(()));
}

/// Volcano: TestValidateCronJobName, "too long name"
#[test]
fn a_name_of_65_characters_is_refused_for_the_job_name_suffix() {
    assert_eq!(
        denied(create(&cronjob(&"a".repeat(65), json!({})))),
        TOO_LONG
    );
}

/// Volcano: TestValidateCronJobName, "invalid chars"
#[test]
fn a_name_starting_with_a_hyphen_is_refused_as_no_qualified_name() {
    assert_eq!(
        denied(create(&cronjob("-UPPERCASE", json!({})))),
        format!("invalid cronJob name \"-UPPERCASE\": {NAME_RULE}")
    );
}

/// Volcano: TestValidateCronJobSeparatesMultipleErrors
#[test]
fn a_schedule_problem_and_a_name_problem_are_joined_with_a_semicolon() {
    let cronjob = cronjob(&"a".repeat(53), json!({"schedule": "error schedule"}));
    assert_eq!(
        denied(create(&cronjob)),
        format!("schedule is not a valid cron expression; {TOO_LONG}")
    );
}

/// Volcano: TestValidateCronJobSingleErrorHasNoSeparator
#[test]
fn a_single_problem_stands_alone() {
    let cronjob = cronjob("valid-cronjob", json!({"schedule": ""}));
    assert_eq!(
        denied(create(&cronjob)),
        "schedule is required, but got empty"
    );
}

/// Volcano e2e: "Create and schedule basic cronjob", "CronJob with allow concurrency", "many
/// miss schedule" and "remove finished job from cronjob active" each create this cronjob.
#[test]
fn the_e2e_every_minute_cronjobs_are_allowed() {
    for name in [
        "test-cronjob",
        "allow-cronjob",
        "many-miss-cronjob",
        "process-finished-job-cronjob",
    ] {
        assert_eq!(create(&cronjob(name, json!({}))), Ok(()), "{name}");
    }
}

/// Volcano e2e: "CronJob with suspend functionality"
#[test]
fn a_suspended_cronjob_with_a_step_of_one_is_allowed() {
    let changes = json!({"schedule": "*/1 * * * *", "suspend": true});
    assert_eq!(create(&cronjob("suspended-cronjob", changes)), Ok(()));
}

/// Volcano e2e: "CronJob with forbid concurrency"
#[test]
fn a_forbid_cronjob_is_allowed() {
    let changes = json!({"concurrencyPolicy": "Forbid"});
    assert_eq!(create(&cronjob("forbid-cronjob", changes)), Ok(()));
}

/// Volcano e2e: "CronJob with replace concurrency"
#[test]
fn a_replace_cronjob_is_allowed() {
    let changes = json!({"concurrencyPolicy": "Replace"});
    assert_eq!(create(&cronjob("replace-cronjob", changes)), Ok(()));
}

/// Volcano e2e: "delete finished and suc jobs with limit"
#[test]
fn a_success_history_limit_of_one_is_allowed() {
    let changes = json!({"successfulJobsHistoryLimit": 1});
    assert_eq!(create(&cronjob("suc-limit-cronjob", changes)), Ok(()));
}

/// Volcano e2e: "delete finished and fail jobs with limit"
#[test]
fn a_failure_history_limit_of_one_is_allowed() {
    let changes = json!({"failedJobsHistoryLimit": 1});
    assert_eq!(create(&cronjob("fail-limit-cronjob", changes)), Ok(()));
}

/// Not in Volcano's tests: an UPDATE is judged on its new object as a CREATE is.
#[test]
fn an_update_is_refused_as_a_create_is() {
    let cronjob = cronjob("cronvcjob", json!({"schedule": "61 * * * *"}));
    assert_eq!(
        denied(review(Operation::Update, &cronjob)),
        "schedule is not a valid cron expression"
    );
}

/// Not in Volcano's tests: a DELETE is not a cronjob operation.
#[test]
fn a_delete_is_an_unknown_operation() {
    let verdict = validate_cronjob(
        &Review {
            operation: Operation::Delete,
            name: "cronvcjob",
            namespace: "default",
            object: None,
            old_object: None,
        },
        &FeatureGates::default(),
    );
    assert!(
        matches!(verdict, Err(Refusal::UnknownOperation { ref operation, .. }) if operation == "DELETE"),
        "{verdict:?}"
    );
}

/// Not in Volcano's tests: a CREATE with no object cannot be judged.
#[test]
fn a_create_without_an_object_is_undecodable() {
    let verdict = validate_cronjob(
        &Review {
            operation: Operation::Create,
            name: "cronvcjob",
            namespace: "default",
            object: None,
            old_object: None,
        },
        &FeatureGates::default(),
    );
    assert!(
        matches!(
            verdict,
            Err(Refusal::Undecodable {
                field: "object",
                ..
            })
        ),
        "{verdict:?}"
    );
}

/// Not in Volcano's tests: a `null` time zone is unset, not empty.
#[test]
fn a_null_time_zone_is_allowed() {
    assert_eq!(create_spec(json!({"timeZone": null})), Ok(()));
}

/// Not in Volcano's tests: `UTC` (which Go knows without zone files) and the `Etc` zones with a
/// `+` are known.
#[test]
fn utc_and_etc_offset_zones_are_allowed() {
    for zone in ["UTC", "Etc/GMT+5", "Etc/GMT-14"] {
        assert_eq!(create_spec(json!({"timeZone": zone})), Ok(()), "{zone}");
    }
}

/// Not in Volcano's tests: zone names are matched in their own case, as zone files are found
/// on Linux.
#[test]
fn a_zone_name_in_the_wrong_case_is_refused() {
    assert_eq!(
        denied(create_spec(json!({"timeZone": "europe/berlin"}))),
        "invalid timeZone"
    );
}

/// Not in Volcano's tests: `Local` is refused in any case, and only that message is given.
#[test]
fn the_local_time_zone_is_refused_in_any_case() {
    assert_eq!(
        denied(create_spec(json!({"timeZone": "lOCAL"}))),
        "timeZone can't be Local, and must be defined in https://www.iana.org/time-zones"
    );
}

/// Not in Volcano's tests: a part may be 14 characters, not 15, and each bad part counts.
#[test]
fn each_time_zone_part_longer_than_14_characters_is_refused() {
    let allowed = json!({"timeZone": "America/Argentina/ComodRivadavia"});
    assert_eq!(create_spec(allowed), Ok(()));
    let refused = json!({"timeZone": "Abcdefghijklmno/Abcdefghijklmnop"});
    assert_eq!(
        denied(create_spec(refused)),
        "unknown timeZone unknown timeZone invalid timeZone"
    );
}

/// Beyond Volcano: the concurrency policy is one the controller knows.
#[test]
fn an_unknown_concurrency_policy_is_refused_naming_the_supported_ones() {
    assert_eq!(
        denied(create_spec(json!({"concurrencyPolicy": "Sometimes"}))),
        "spec.concurrencyPolicy: Unsupported value: \"Sometimes\": supported values: \"Allow\", \
         \"Forbid\", \"Replace\""
    );
    assert_eq!(create_spec(json!({"concurrencyPolicy": null})), Ok(()));
}

/// Beyond Volcano: the starting deadline is not negative.
#[test]
fn a_negative_starting_deadline_is_refused() {
    assert_eq!(
        denied(create_spec(json!({"startingDeadlineSeconds": -1}))),
        "spec.startingDeadlineSeconds: Invalid value: -1: must be greater than or equal to 0"
    );
    assert_eq!(create_spec(json!({"startingDeadlineSeconds": 0})), Ok(()));
}

/// Beyond Volcano: neither history limit is negative; each is named.
#[test]
fn negative_history_limits_are_refused_each_by_name() {
    let changes = json!({"successfulJobsHistoryLimit": -3, "failedJobsHistoryLimit": -1});
    assert_eq!(
        denied(create_spec(changes)),
        "spec.successfulJobsHistoryLimit: Invalid value: -3: must be greater than or equal to 0; \
         spec.failedJobsHistoryLimit: Invalid value: -1: must be greater than or equal to 0"
    );
    let zero = json!({"successfulJobsHistoryLimit": 0, "failedJobsHistoryLimit": 0});
    assert_eq!(create_spec(zero), Ok(()));
}

/// Beyond Volcano: its messages come first, then the field errors.
#[test]
fn field_errors_follow_volcanos_messages() {
    let cronjob = cronjob(
        "Bad_",
        json!({"schedule": "", "concurrencyPolicy": "Never"}),
    );
    assert_eq!(
        denied(create(&cronjob)),
        format!(
            "schedule is required, but got empty; invalid cronJob name \"Bad_\": {NAME_RULE}; \
             spec.concurrencyPolicy: Unsupported value: \"Never\": supported values: \"Allow\", \
             \"Forbid\", \"Replace\""
        )
    );
}

/// Not in Volcano's tests: the job a cronjob makes is judged as `/jobs/validate` judges a new
/// job, so that a template no job could pass is refused when it is written.
#[test]
fn a_job_template_without_tasks_is_refused_as_such_a_job_would_be() {
    let verdict = create_spec(json!({"jobTemplate": {"spec": {"queue": "default", "tasks": []}}}));

    assert_eq!(
        denied(verdict),
        "spec.jobTemplate: No task specified in job spec"
    );
}

/// Not in Volcano's tests: a template's pod-template problem is named under `spec.jobTemplate`.
#[test]
fn a_job_template_whose_container_has_no_image_is_refused_naming_the_field() {
    let verdict = create_spec(
        json!({"jobTemplate": {"spec": {"queue": "default", "tasks": [
        {"name": "task-1", "replicas": 1, "template": {"spec": {"containers": [{"name": "main"}]}}}]}}}),
    );

    assert_eq!(
        denied(verdict),
        "spec.jobTemplate: spec.task[0].template.spec.containers[0].image: Required value."
    );
}

/// Not in Volcano's tests: the template's queue is read when each job is made, not when the
/// cronjob is written (the cronjob service reads no cluster).
#[test]
fn a_job_template_naming_a_queue_not_yet_made_is_allowed() {
    let verdict = create_spec(
        json!({"jobTemplate": {"spec": {"queue": "made-later", "tasks": [
        {"name": "task-1", "replicas": 1, "template": {"spec": {"containers": [
            {"name": "main", "image": "busybox"}]}}}]}}}),
    );

    assert_eq!(verdict, Ok(()));
}
