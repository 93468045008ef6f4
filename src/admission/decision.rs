//! What a hook answers: admit, admit with changes, hold or refuse (ADR 0100 §1, §3).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{ResourceList, Toleration};

/// A hook's answer for one attempt.
///
/// A `Refuse` is permanent and fails the task; a `Hold` is temporary and re-offers the attempt
/// until the retry window is spent. Both are the hook working, so neither counts toward its
/// breaker. On the webhook wire it travels as an [`super::AnswerEnvelope`].
///
/// The changes are boxed: a decision is moved through every layer that supervises a hook call
/// (panic recovery, timeout, breaker, the chain's record of it), several times per call, and a
/// decision with its changes inline was 240 bytes copied at each move; boxed, the copy is a few
/// words, and only a hook that changes something pays for the box.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Run the attempt as it is.
    Admit,
    /// Run the attempt with these changes, once they pass the change rules:
    /// `Decision::AdmitWith(Box::new(changes))`.
    AdmitWith(Box<Changes>),
    /// Do not run it yet; offer it again later. The reason is shown while it waits.
    Hold(String),
    /// Never run it; fail the task with this reason.
    Refuse(String),
}

/// What a hook may change on an attempt (ADR 0100 §3, §7).
///
/// Never the image, command, environment, namespace or resources. `runtime_class_name` and
/// `fill_limits` are for privileged hooks only (see [`super::Privilege`]); any other hook that
/// sets them is refused.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Changes {
    /// Merged into the node selector; the hook's keys win.
    #[serde(
        default,
        skip_serializing_if = "BTreeMap::is_empty",
        deserialize_with = "super::wire::unique_keys"
    )]
    pub node_selector: BTreeMap<String, String>,
    /// Appended to the tolerations.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
    /// Replaces the priority class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class: Option<String>,
    /// Replaces the service account.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account: Option<String>,
    /// Merged into the labels; the hook's keys win.
    #[serde(
        default,
        skip_serializing_if = "BTreeMap::is_empty",
        deserialize_with = "super::wire::unique_keys"
    )]
    pub labels: BTreeMap<String, String>,
    /// Merged into the annotations; the hook's keys win.
    #[serde(
        default,
        skip_serializing_if = "BTreeMap::is_empty",
        deserialize_with = "super::wire::unique_keys"
    )]
    pub annotations: BTreeMap<String, String>,
    /// Privileged hooks only: the runtime class of the pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_class_name: Option<String>,
    /// Privileged hooks only: limits for the resources that have none, within the attempt's size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fill_limits: Option<ResourceList>,
}

impl Changes {
    /// Whether these changes change nothing.
    pub fn is_empty(&self) -> bool {
        // Every field named, so that a new one cannot be forgotten here.
        let Changes {
            node_selector,
            tolerations,
            priority_class,
            service_account,
            labels,
            annotations,
            runtime_class_name,
            fill_limits,
        } = self;
        node_selector.is_empty()
            && tolerations.is_empty()
            && priority_class.is_none()
            && service_account.is_none()
            && labels.is_empty()
            && annotations.is_empty()
            && runtime_class_name.is_none()
            && fill_limits.is_none()
    }

    /// Whether these changes set a field only privileged hooks may set.
    pub fn has_privileged_field(&self) -> bool {
        self.runtime_class_name.is_some() || self.fill_limits.is_some()
    }

    /// Folds `later` into `self` as if both were applied in order.
    pub fn merge(&mut self, later: Changes) {
        self.node_selector.extend(later.node_selector);
        self.tolerations.extend(later.tolerations);
        self.labels.extend(later.labels);
        self.annotations.extend(later.annotations);
        if later.priority_class.is_some() {
            self.priority_class = later.priority_class;
        }
        if later.service_account.is_some() {
            self.service_account = later.service_account;
        }
        if later.runtime_class_name.is_some() {
            self.runtime_class_name = later.runtime_class_name;
        }
        if let Some(later_fill) = later.fill_limits {
            let fill = self.fill_limits.get_or_insert_with(ResourceList::default);
            fill.cpu = fill.cpu.take().or(later_fill.cpu);
            fill.memory = fill.memory.take().or(later_fill.memory);
            fill.ephemeral_storage = fill
                .ephemeral_storage
                .take()
                .or(later_fill.ephemeral_storage);
        }
    }
}
