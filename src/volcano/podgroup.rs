//! Volcano's pod group (`scheduling.volcano.sh/v1beta1`) as its API server sends it: camelCase,
//! missing fields defaulted, `apiVersion` and `kind` optional, other fields kept as sent.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::job::NetworkTopologySpec;

/// A pod group: the gang of pods the scheduler places together.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PodGroup {
    /// `scheduling.volcano.sh/v1beta1`, when sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// `PodGroup`, when sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The pod group's name and namespace.
    pub metadata: ObjectMeta,
    /// What the gang needs.
    pub spec: PodGroupSpec,
    /// The pod group's status, kept as sent.
    #[serde(skip_serializing_if = "Value::is_null")]
    pub status: Value,
}

impl PodGroup {
    /// The pod group's namespace, empty when unset.
    pub fn namespace(&self) -> &str {
        self.metadata.namespace.as_deref().unwrap_or_default()
    }
}

/// A pod group's spec; the fields the rules read are typed, the rest kept as sent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PodGroupSpec {
    /// The queue the gang is submitted to; empty for none.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub queue: String,
    /// The gang's network-topology constraint.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network_topology: Option<NetworkTopologySpec>,
    /// The constraints of the gang's sub-groups.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sub_group_policy: Vec<SubGroupPolicySpec>,
    /// Every other field (`minMember`, `minTaskMember`, `minResources`, ...), as sent.
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

/// One sub-group policy of a pod group.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SubGroupPolicySpec {
    /// The policy's name.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// The sub-group's network-topology constraint.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network_topology: Option<NetworkTopologySpec>,
    /// Every other field, as sent.
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}
