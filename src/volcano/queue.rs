//! Volcano's queue as its API server sends it: camelCase, missing fields defaulted, unknown
//! fields ignored, `apiVersion` and `kind` optional.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

/// The queue at the top of every hierarchy, which a job may not be submitted to.
pub(crate) const ROOT_QUEUE: &str = "root";
/// The queue Volcano creates, where a job or pod group that names no queue goes.
pub(crate) const DEFAULT_QUEUE: &str = "default";

/// A resource list: resource name to quantity, as Kubernetes' `ResourceList`.
pub type ResourceList = BTreeMap<String, Quantity>;

/// A queue (`scheduling.volcano.sh/v1beta1`, cluster-scoped).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Queue {
    /// `scheduling.volcano.sh/v1beta1`, when sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// `Queue`, when sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The queue's name and annotations (the hierarchy annotations among them).
    pub metadata: ObjectMeta,
    /// What the queue is given.
    pub spec: QueueSpec,
    /// What the scheduler reports.
    pub status: QueueStatus,
}

impl Queue {
    /// The queue's name, empty when unset.
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }

    /// The annotation `key`, empty when unset (as Go reads a missing map key).
    pub fn annotation(&self, key: &str) -> &str {
        self.metadata
            .annotations
            .as_ref()
            .and_then(|annotations| annotations.get(key))
            .map_or("", String::as_str)
    }
}

/// A queue's spec; the fields the rules read are typed, the rest kept as JSON.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct QueueSpec {
    /// The queue's share weight; 0 when unset (the mutator sets 1).
    #[serde(skip_serializing_if = "is_zero")]
    pub weight: i32,
    /// The most the queue may use.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub capability: ResourceList,
    /// Whether other queues may reclaim what this queue uses beyond its share; `None` unset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reclaimable: Option<bool>,
    /// What the queue is guaranteed.
    #[serde(skip_serializing_if = "Guarantee::is_empty")]
    pub guarantee: Guarantee,
    /// What the queue deserves.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub deserved: ResourceList,
    /// The parent queue's name; empty or `root` for a top-level queue.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub parent: String,
    /// The queue's type (free text in Volcano's API).
    #[serde(rename = "type", skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// The queue's priority.
    #[serde(skip_serializing_if = "is_zero")]
    pub priority: i32,
    /// Volcano's extend clusters, kept as sent.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub extend_clusters: Vec<serde_json::Value>,
    /// Volcano's queue affinity, kept as sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub affinity: Option<serde_json::Value>,
}

/// A queue's guarantee.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Guarantee {
    /// The guaranteed resources.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub resource: ResourceList,
}

impl Guarantee {
    fn is_empty(&self) -> bool {
        self.resource.is_empty()
    }
}

/// A queue's status; the rules read its state and what is allocated.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct QueueStatus {
    /// `Open`, `Closed`, `Closing` or `Unknown`; empty when unset.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub state: String,
    /// The resources allocated to the queue's pods (`pods` counts them).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub allocated: ResourceList,
}

fn is_zero(value: &i32) -> bool {
    *value == 0
}
