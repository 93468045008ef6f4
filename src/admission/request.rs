//! The request a hook decides on: a copy of one attempt, never the dispatcher's own state.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Toleration, is_below};

/// The `api_version` every request carries, on the webhook wire as in memory.
pub const API_VERSION: &str = "dexaflow.io/admission/v1";

/// One task attempt as a hook sees it (ADR 0100 §1).
///
/// It is built by value for each attempt, so a hook can neither read nor change the dispatcher's
/// state through it. It carries the effective values (resources after the unit or the defaults,
/// the service account after the default) and has no field for the environment, the source,
/// secrets or the agent token, so no hook can see them. On the webhook wire its fields sit at the
/// top level of a [`super::RequestEnvelope`], snake_case; decoding refuses unknown fields.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Request {
    /// Always `dexaflow.io/admission/v1` (`API_VERSION`); lets a webhook refuse a shape it does
    /// not know.
    pub api_version: String,
    /// The tenant that owns the DAG.
    pub tenant: String,
    /// The DAG id.
    pub dag_id: String,
    /// The DAG run id.
    pub run_id: String,
    /// The task id within the DAG.
    pub task_id: String,
    /// The try number of this attempt (1 for the first try).
    pub try_number: u32,
    /// The operator type of the task, such as `PythonOperator`.
    pub operator: String,
    /// The image the run resolved for this task.
    pub image: String,
    /// The resources after the resource unit or `executor.defaults` were applied.
    pub resources: Resources,
    /// The task's execution fields, with the default service account applied.
    pub execution: Execution,
    /// The attempt's size in resource units (1 when no unit is configured).
    pub size: u32,
    /// Whether the attempt would run in source mode (the DAG source on the runtime image).
    pub source_mode: bool,
}

/// Resource requests and limits, as Kubernetes quantities.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Resources {
    /// What the attempt is guaranteed.
    #[serde(default)]
    pub requests: ResourceList,
    /// What the attempt may use at most.
    #[serde(default)]
    pub limits: ResourceList,
}

/// One quantity per resource; `None` means unset.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResourceList {
    /// CPU, such as `500m` or `2`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<String>,
    /// Memory, such as `512Mi`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<String>,
    /// Ephemeral storage, such as `1Gi`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ephemeral_storage: Option<String>,
}

impl Resources {
    /// Whether neither a request nor a limit is set.
    pub fn is_empty(&self) -> bool {
        *self == Resources::default()
    }

    /// The first resource whose limit is below its request, which Kubernetes refuses, as
    /// `(resource, limit, request)`; `None` when every limit is at or above its request (or one
    /// of the two is unset).
    pub(crate) fn limit_below_request(&self) -> Option<(&'static str, &str, &str)> {
        self.limits.set().find_map(|(resource, limit)| {
            let request = self.requests.get(resource)?;
            is_below(limit, request).then_some((resource, limit, request))
        })
    }
}

impl ResourceList {
    /// The quantities that are set, each with its field's name as a request or a config spells
    /// it (`cpu`, `memory`, `ephemeral_storage`).
    pub fn set(&self) -> impl Iterator<Item = (&'static str, &str)> {
        [
            ("cpu", &self.cpu),
            ("memory", &self.memory),
            ("ephemeral_storage", &self.ephemeral_storage),
        ]
        .into_iter()
        .filter_map(|(name, value)| Some((name, value.as_deref()?)))
    }

    /// The quantity of the resource named as [`Self::set`] names it, when set.
    pub fn get(&self, resource: &str) -> Option<&str> {
        self.set()
            .find_map(|(name, value)| (name == resource).then_some(value))
    }
}

/// The execution fields of an attempt: where and as whom its pod runs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Execution {
    /// The service account, after `executor.task_service_account` filled an empty one.
    #[serde(default)]
    pub service_account: String,
    /// Whether the task itself chose the service account (false when the default applied).
    #[serde(default)]
    pub service_account_chosen: bool,
    /// Node labels the pod must match.
    #[serde(default, deserialize_with = "super::wire::unique_keys")]
    pub node_selector: BTreeMap<String, String>,
    /// Taints the pod tolerates.
    #[serde(default)]
    pub tolerations: Vec<Toleration>,
    /// The pod's priority class; empty for none.
    #[serde(default)]
    pub priority_class: String,
    /// The runtime class; only privileged hooks may set it.
    #[serde(default)]
    pub runtime_class_name: String,
    /// Labels put on the pod.
    #[serde(default, deserialize_with = "super::wire::unique_keys")]
    pub labels: BTreeMap<String, String>,
    /// Annotations put on the pod.
    #[serde(default, deserialize_with = "super::wire::unique_keys")]
    pub annotations: BTreeMap<String, String>,
}

impl Request {
    /// A request for one attempt with empty resources and execution fields, size 1.
    ///
    /// Meant for tests and examples; the dispatcher fills every field from the attempt.
    pub fn new(
        tenant: impl Into<String>,
        dag_id: impl Into<String>,
        task_id: impl Into<String>,
    ) -> Request {
        Request {
            api_version: API_VERSION.to_owned(),
            tenant: tenant.into(),
            dag_id: dag_id.into(),
            run_id: String::new(),
            task_id: task_id.into(),
            try_number: 1,
            operator: String::new(),
            image: String::new(),
            resources: Resources::default(),
            execution: Execution::default(),
            size: 1,
            source_mode: false,
        }
    }
}
