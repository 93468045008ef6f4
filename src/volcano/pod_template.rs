//! A task's pod template as a Volcano job carries it: the fields Volcano's job rules read, typed
//! as Kubernetes types them, and every other field kept as sent (`rest`, at each level).
//!
//! Why not Kubernetes' own `PodTemplateSpec`: decoding one builds the whole pod, about 2 KB per
//! container and 3 KB per volume, mostly moved from place to place, where the rules read a
//! handful of fields; and it drops the fields it does not know, so a job that `/jobs/mutate`
//! patches would lose a field newer than this build's Kubernetes types. Kept as sent, a field
//! is neither lost nor re-typed. The API server has checked the template against the job
//! resource's schema before any webhook sees it, so the fields kept are not checked again.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Fields kept as sent, by name.
type Rest = BTreeMap<String, Value>;

/// A pod template (`template` of a job's task).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PodTemplate {
    /// The pods' spec.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spec: Option<TemplatePodSpec>,
    /// Every other field, as sent (`metadata` among them).
    #[serde(flatten)]
    pub rest: Rest,
}

/// A pod template's spec.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TemplatePodSpec {
    /// The pod's containers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub containers: Option<Vec<TemplateContainer>>,
    /// The containers run before them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub init_containers: Option<Vec<TemplateContainer>>,
    /// The volumes the containers may mount.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub volumes: Option<Vec<TemplateVolume>>,
    /// `Always`, `OnFailure` or `Never`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restart_policy: Option<String>,
    /// Pod-level resources.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resources: Option<TemplateResources>,
    /// Whether the pod uses the node's network.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_network: Option<bool>,
    /// How the pod's DNS is set up.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dns_policy: Option<String>,
    /// Every other field, as sent.
    #[serde(flatten)]
    pub rest: Rest,
}

/// A container (or init container) of a pod template.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TemplateContainer {
    /// The container's name.
    pub name: String,
    /// The container's image.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// The ports it exposes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ports: Option<Vec<TemplatePort>>,
    /// The volumes it mounts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub volume_mounts: Option<Vec<TemplateMount>>,
    /// What it requests and may use at most.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resources: Option<TemplateResources>,
    /// Every other field, as sent.
    #[serde(flatten)]
    pub rest: Rest,
}

impl TemplateContainer {
    /// Whether the container is a sidecar: an init container restarted `Always`, which keeps
    /// running beside the pod's containers.
    pub fn is_sidecar(&self) -> bool {
        self.rest.get("restartPolicy").and_then(Value::as_str) == Some("Always")
    }
}

/// A port a container exposes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TemplatePort {
    /// The port's name, when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The port in the container; 0 when missing.
    pub container_port: i32,
    /// The port on the node.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_port: Option<i32>,
    /// Every other field, as sent.
    #[serde(flatten)]
    pub rest: Rest,
}

/// A volume a container mounts.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TemplateMount {
    /// The volume's name.
    pub name: String,
    /// Where it is mounted.
    pub mount_path: String,
    /// Every other field, as sent.
    #[serde(flatten)]
    pub rest: Rest,
}

/// A volume of a pod template.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TemplateVolume {
    /// The volume's name.
    pub name: String,
    /// Every other field, as sent: its source (`emptyDir`, `configMap`, ...).
    #[serde(flatten)]
    pub rest: Rest,
}

impl TemplateVolume {
    /// Whether the volume names a source: some field besides its name, not `null`.
    pub fn has_source(&self) -> bool {
        self.rest.values().any(|field| !field.is_null())
    }
}

/// A container's (or the pod's) resource requests and limits.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TemplateResources {
    /// What is requested, by resource name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requests: Option<BTreeMap<String, Quantity>>,
    /// The most that may be used, by resource name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limits: Option<BTreeMap<String, Quantity>>,
    /// Every other field, as sent (`claims`).
    #[serde(flatten)]
    pub rest: Rest,
}
