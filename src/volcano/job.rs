//! Volcano's job (`batch.volcano.sh/v1alpha1`) as its API server sends it: camelCase, missing
//! fields defaulted, `apiVersion` and `kind` optional. Fields the rules do not read are kept as
//! sent (`rest`), so that a patch replacing the tasks loses nothing of them.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PersistentVolumeClaimSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::pod_template::PodTemplate;

/// A Volcano job.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Job {
    /// `batch.volcano.sh/v1alpha1`, when sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// `Job`, when sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The job's name, namespace, labels and annotations.
    pub metadata: ObjectMeta,
    /// What the job runs.
    pub spec: JobSpec,
    /// The job's status, kept as sent.
    #[serde(skip_serializing_if = "Value::is_null")]
    pub status: Value,
}

/// A job's spec.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct JobSpec {
    /// The scheduler that places the job's pods; empty until the mutator sets it.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub scheduler_name: String,
    /// How many pods must run for the job to run; 0 until the mutator sums the tasks'.
    #[serde(skip_serializing_if = "is_zero")]
    pub min_available: i32,
    /// Volumes mounted into every pod of the job.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<VolumeSpec>,
    /// The job's tasks.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tasks: Vec<TaskSpec>,
    /// What the job does on events.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub policies: Vec<LifecyclePolicy>,
    /// The job's plugins and their arguments; `None` when unset (not the same as empty).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plugins: Option<BTreeMap<String, Vec<String>>>,
    /// The queue the job is submitted to; empty until the mutator sets `default`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub queue: String,
    /// How many times the job is retried; 0 until the mutator sets 3.
    #[serde(skip_serializing_if = "is_zero")]
    pub max_retry: i32,
    /// How long a finished job is kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttl_seconds_after_finished: Option<i32>,
    /// The priority class of the job's pods.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub priority_class_name: String,
    /// How many pods must succeed for the job to succeed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_success: Option<i32>,
    /// The job's network-topology constraint.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network_topology: Option<NetworkTopologySpec>,
    /// Every other field, as sent (`runningEstimate` among them).
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

/// One task of a job: a pod template run `replicas` times.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TaskSpec {
    /// The task's name; empty until the mutator sets `default<index>`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// How many pods the task runs.
    #[serde(skip_serializing_if = "is_zero")]
    pub replicas: i32,
    /// How many of them must run; `None` until the mutator sets it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_available: Option<i32>,
    /// The pods' template.
    pub template: PodTemplate,
    /// What the task does on events.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub policies: Vec<LifecyclePolicy>,
    /// The NUMA topology policy (`none`, `best-effort`, `restricted`, `single-numa-node`).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub topology_policy: String,
    /// How many times the task is retried; 0 until the mutator sets 3.
    #[serde(skip_serializing_if = "is_zero")]
    pub max_retry: i32,
    /// The tasks this one waits for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub depends_on: Option<DependsOn>,
    /// How the task's pods are split into partitions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partition_policy: Option<PartitionPolicySpec>,
    /// Every other field, as sent.
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

/// A job-level volume.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct VolumeSpec {
    /// Where the volume is mounted in every container.
    pub mount_path: String,
    /// An existing claim's name, or the name of the claim Volcano makes.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub volume_claim_name: String,
    /// The claim Volcano makes for the job.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub volume_claim: Option<PersistentVolumeClaimSpec>,
}

/// What a job or task does on an event or exit code.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct LifecyclePolicy {
    /// The action (`AbortJob`, `RestartJob`, `RestartTask`, `RestartPod`, ...).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub action: String,
    /// One event (`PodFailed`, `*`, ...).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub event: String,
    /// Several events.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<String>,
    /// An exit code instead of events.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// How long to wait before the action, as a Go duration (`10m`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
}

/// A network-topology constraint.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct NetworkTopologySpec {
    /// `hard` or `soft`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub mode: String,
    /// The highest tier the pods may span.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub highest_tier_allowed: Option<i64>,
    /// The highest tier by name.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub highest_tier_name: String,
}

/// Why a network topology that names its highest tier both ways is refused, in Volcano's words
/// (the pod-group rule ends it with a full stop, the job rule does not).
pub(crate) const BOTH_TIERS: &str =
    "must not specify 'highestTierAllowed' and 'highestTierName' in networkTopology simultaneously";

impl NetworkTopologySpec {
    /// Whether the highest tier is given both by number and by name, which Volcano refuses.
    pub(crate) fn sets_both_tiers(&self) -> bool {
        self.highest_tier_allowed.is_some() && !self.highest_tier_name.is_empty()
    }
}

/// How a task's pods are split into partitions.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PartitionPolicySpec {
    /// How many partitions.
    pub total_partitions: i32,
    /// How many pods in each.
    pub partition_size: i32,
    /// The topology constraint of each partition.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network_topology: Option<NetworkTopologySpec>,
    /// How many partitions must run; 0 when unset.
    #[serde(skip_serializing_if = "is_zero")]
    pub min_partitions: i32,
}

/// The tasks a task waits for.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DependsOn {
    /// The tasks' names.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub name: Vec<String>,
    /// `any` or `all`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub iteration: String,
}

fn is_zero(value: &i32) -> bool {
    *value == 0
}
