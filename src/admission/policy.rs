//! The executor policy's refusals (ADR 0063, made the chain's last hook by ADR 0100 §7).
//!
//! Their messages are written here once, because two places refuse with them: the policy hook
//! (`crate::hooks::Policy`), on the request as every earlier hook left it, and the dispatcher's
//! built-in refusals, which check `placement.allow_dag_placement` on the DAG author's own fields
//! before any hook runs (a hook's placement is not DAG placement, ADR 0100 §4).

use thiserror::Error;

use super::QuantityError;

/// The DAG author's execution fields that are placement, as `execution_allowlist.fields` names
/// them, in the order a refusal names the first one set.
const DAG_PLACEMENT_FIELDS: [&str; 3] = ["node_selector", "tolerations", "priority_class_name"];

/// An attempt the executor policy refused: `refused by executor policy: <rule>`.
///
/// A hook refusal shows it after `dispatch refused: admission: `; the built-in DAG-placement
/// refusal after `dispatch refused: `.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("refused by executor policy: {0}")]
pub struct PolicyRefusal(pub PolicyRule);

/// The rule of the executor policy an attempt broke, in the words Dexaflow uses.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PolicyRule {
    /// The image matches no entry of `images.allowed`.
    #[error("image {image:?} is not in images.allowed")]
    Image {
        /// The image.
        image: String,
    },
    /// The service account, after the default and any force, is outside
    /// `service_account.allowed`.
    #[error("execution.service_account {name:?} is not in service_account.allowed")]
    ServiceAccount {
        /// The service account.
        name: String,
    },
    /// The DAG sets a placement field itself while `placement.allow_dag_placement` is false.
    #[error("execution.{field} is set but placement.allow_dag_placement is false")]
    DagPlacement {
        /// `node_selector`, `tolerations` or `priority_class_name`.
        field: &'static str,
    },
    /// The priority class is outside `placement.allowed_priority_classes`.
    #[error("execution.priority_class_name {name:?} is not in placement.allowed_priority_classes")]
    PriorityClass {
        /// The priority class.
        name: String,
    },
    /// A label or annotation key starts with none of the allowed prefixes.
    #[error("execution.{field} {key:?} does not start with an allowed prefix")]
    Metadata {
        /// `labels` or `annotations`.
        field: &'static str,
        /// The first such key, in sorted order.
        key: String,
    },
    /// A request or limit above `resources.max`: refused, never lowered.
    #[error("resources.{field} {quantity:?} exceeds resources.max {max}")]
    OverMax {
        /// Such as `limits.memory`.
        field: String,
        /// The quantity asked for.
        quantity: String,
        /// The maximum, as the config writes it.
        max: String,
    },
    /// A request or limit that is not a quantity, so that it cannot be held to `resources.max`.
    #[error("resources.{field}: {error}")]
    NotAQuantity {
        /// Such as `requests.cpu`.
        field: String,
        /// What does not parse.
        error: QuantityError,
    },
}

/// Refuses a DAG that sets a placement field itself, for an install whose policy sets
/// `placement.allow_dag_placement: false`.
///
/// `set_fields` are the execution fields the DAG author set, named as `execution_allowlist.fields`
/// names them; the node selector, tolerations and priority class are placement. The dispatcher
/// calls it with its built-in refusals, before any hook, only when the policy forbids DAG
/// placement.
///
/// # Errors
/// [`PolicyRule::DagPlacement`] naming the first placement field set.
pub(crate) fn refuse_dag_placement(set_fields: &[&str]) -> Result<(), PolicyRefusal> {
    match DAG_PLACEMENT_FIELDS
        .into_iter()
        .find(|field| set_fields.contains(field))
    {
        Some(field) => Err(PolicyRefusal(PolicyRule::DagPlacement { field })),
        None => Ok(()),
    }
}
