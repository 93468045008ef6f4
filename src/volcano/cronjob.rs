//! Volcano's cronjob (`batch.volcano.sh/v1alpha1`) as its API server sends it: camelCase,
//! missing fields defaulted, `apiVersion` and `kind` optional, other fields kept as sent.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::job::JobSpec;

/// A Volcano cronjob: a job template run on a schedule.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct CronJob {
    /// `batch.volcano.sh/v1alpha1`, when sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// `CronJob`, when sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The cronjob's name and namespace.
    pub metadata: ObjectMeta,
    /// The schedule and the job it runs.
    pub spec: CronJobSpec,
    /// The cronjob's status, kept as sent.
    #[serde(skip_serializing_if = "Value::is_null")]
    pub status: Value,
}

/// A cronjob's spec.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct CronJobSpec {
    /// When the job runs, in cron's five-field form or a descriptor such as `@every 1m`.
    pub schedule: String,
    /// The IANA time zone the schedule is read in; `None` when unset, which is not the same as
    /// empty (an empty zone is refused).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
    /// How late a missed run may still start, in seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub starting_deadline_seconds: Option<i64>,
    /// `Allow`, `Forbid` or `Replace`: what a run does while the last one still runs; empty
    /// when unset (the CRD's default is `Allow`).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub concurrency_policy: String,
    /// Whether runs are held.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,
    /// The job each run creates.
    pub job_template: JobTemplateSpec,
    /// How many succeeded jobs are kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub successful_jobs_history_limit: Option<i32>,
    /// How many failed jobs are kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed_jobs_history_limit: Option<i32>,
    /// Every other field, as sent.
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

/// The job a cronjob creates on each run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct JobTemplateSpec {
    /// The labels and annotations of the jobs created.
    pub metadata: ObjectMeta,
    /// The jobs' spec.
    pub spec: JobSpec,
}
