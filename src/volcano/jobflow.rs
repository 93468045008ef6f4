//! Volcano's job flow (`flow.volcano.sh/v1alpha1`) as its API server sends it: camelCase,
//! missing fields defaulted, `apiVersion` and `kind` optional, other fields kept as sent.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A job flow: job templates run in the order their dependencies give.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct JobFlow {
    /// `flow.volcano.sh/v1alpha1`, when sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// `JobFlow`, when sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The job flow's name and namespace.
    pub metadata: ObjectMeta,
    /// The flows.
    pub spec: JobFlowSpec,
}

/// A job flow's spec.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct JobFlowSpec {
    /// The flows, each a job template and what it waits for.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub flows: Vec<Flow>,
    /// Every other field (`jobRetainPolicy`), as sent.
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

/// One flow of a job flow.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Flow {
    /// The job template's name.
    pub name: String,
    /// What the flow waits for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub depends_on: Option<FlowDependsOn>,
    /// Every other field (`patch`), as sent.
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

/// What a flow waits for.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct FlowDependsOn {
    /// The flows that must finish first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub targets: Vec<String>,
    /// Every other field (`probe`), as sent.
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}
