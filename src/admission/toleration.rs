//! The typed toleration a request carries and a hook may append (ADR 0100 §1).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A Kubernetes toleration, typed so that the public shape does not freeze an untyped map.
///
/// The rules Kubernetes applies to it (an `Exists` toleration has no value, an empty key needs
/// `Exists`, `toleration_seconds` only with `NoExecute`) are checked when a hook appends one, as
/// `ChangeError::InvalidToleration`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Toleration {
    /// The taint key this toleration matches; empty matches every key (only with `Exists`).
    #[serde(default)]
    pub key: String,
    /// How the value is compared with the taint's value.
    #[serde(default)]
    pub operator: TolerationOperator,
    /// The value to match under `Equal`; must be empty under `Exists`.
    #[serde(default)]
    pub value: String,
    /// The taint effect this toleration matches; `None` matches every effect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effect: Option<TaintEffect>,
    /// How long a `NoExecute` taint is tolerated before eviction; `None` means forever.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toleration_seconds: Option<i64>,
}

/// How a toleration compares its value with a taint's value.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum TolerationOperator {
    /// Matches any value of the key; the toleration's own value must be empty.
    Exists,
    /// Matches when the values are equal; the Kubernetes default.
    #[default]
    Equal,
}

/// The effect of a taint that a toleration tolerates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum TaintEffect {
    /// New pods are not scheduled on the node.
    NoSchedule,
    /// The scheduler tries to avoid the node.
    PreferNoSchedule,
    /// Running pods are evicted unless they tolerate the taint.
    NoExecute,
}

impl TaintEffect {
    /// The effect's name as Kubernetes spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            TaintEffect::NoSchedule => "NoSchedule",
            TaintEffect::PreferNoSchedule => "PreferNoSchedule",
            TaintEffect::NoExecute => "NoExecute",
        }
    }
}

impl TolerationOperator {
    /// The operator's name as Kubernetes spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            TolerationOperator::Exists => "Exists",
            TolerationOperator::Equal => "Equal",
        }
    }
}
