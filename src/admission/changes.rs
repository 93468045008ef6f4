//! The rules for what a hook may change (ADR 0100 §3, §4, §7), and applying changes that passed.
//!
//! The checks of what Kubernetes accepts ([`check_entries`], [`check_tolerations`],
//! [`check_name`], [`check_annotations_size`]) are public so that the dispatcher holds a DAG's
//! own execution fields to the very same rules before any hook runs.

use std::collections::{BTreeMap, BTreeSet};

use thiserror::Error;

use super::names::{
    is_reserved_key, label_value_problem, qualified_name_problem, subdomain_problem,
};
use super::quantity::{is_below, parse_milli};
use super::{Changes, Privilege, Request, TaintEffect, Toleration, TolerationOperator};

/// The most bytes all annotation keys and values of a pod may take together, as Kubernetes
/// checks it.
pub const MAX_ANNOTATIONS_BYTES: usize = 256 * 1024;

/// The install's rules for changes, fixed at boot.
///
/// Built by the dispatcher from its settings; the admission module never reads config itself.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChangeRules {
    /// `execution_allowlist.service_accounts`: when set, a hook-set service account must be in it.
    pub service_accounts: Option<BTreeSet<String>>,
    /// `execution_allowlist.priority_classes`: when set, a hook-set priority class must be in it.
    pub priority_classes: Option<BTreeSet<String>>,
    /// The default task service account, which a hook may always set.
    pub default_service_account: String,
    /// The resource unit, which bounds limits a privileged hook fills; `None` when not configured.
    pub unit: Option<Unit>,
}

/// One resource unit (ADR 0066), in thousandths: millicores of CPU and milli-bytes of memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unit {
    /// CPU per unit, in millicores.
    pub cpu_milli: u128,
    /// Memory per unit, in thousandths of a byte (see [`super::parse_milli`]).
    pub memory_milli: u128,
}

/// Where a key or value sits, for the message that names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    /// A pod label.
    Label,
    /// A pod annotation.
    Annotation,
    /// A node-selector entry.
    NodeSelector,
}

impl std::fmt::Display for Field {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Field::Label => "label",
            Field::Annotation => "annotation",
            Field::NodeSelector => "node selector",
        })
    }
}

/// Why a hook's change, or a DAG's own execution field, was refused. The chain prefixes it with
/// the hook's name; the dispatcher's built-in refusal with the field.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ChangeError {
    /// A label or annotation key under `leoflow.io/` or `dexaflow.io/`.
    #[error("{field} key {key:?} is reserved")]
    ReservedKey {
        /// Label or annotation.
        field: Field,
        /// The key.
        key: String,
    },
    /// A key Kubernetes would reject.
    #[error("{field} key {key:?} is invalid: {problem}")]
    InvalidKey {
        /// Where the key is.
        field: Field,
        /// The key.
        key: String,
        /// What is wrong with it.
        problem: String,
    },
    /// A label or node-selector value Kubernetes would reject.
    #[error("{field} {key:?} value {value:?} is invalid: {problem}")]
    InvalidValue {
        /// Where the value is.
        field: Field,
        /// The key it belongs to.
        key: String,
        /// The value.
        value: String,
        /// What is wrong with it.
        problem: String,
    },
    /// The annotations together would exceed what Kubernetes stores.
    #[error("annotations would take {bytes} bytes, over the {MAX_ANNOTATIONS_BYTES} byte limit")]
    AnnotationsTooLarge {
        /// Bytes of all keys and values after the change.
        bytes: usize,
    },
    /// A toleration Kubernetes would reject.
    #[error("toleration {index} (key {key:?}) is invalid: {problem}")]
    InvalidToleration {
        /// Its position among the tolerations checked: those the hook appended, or the task's
        /// own.
        index: usize,
        /// Its key.
        key: String,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// A service account or priority class name Kubernetes would reject.
    #[error("{field} {name:?} is invalid: {problem}")]
    InvalidName {
        /// `service account`, `priority class` or `runtime class`.
        field: &'static str,
        /// The name.
        name: String,
        /// What is wrong with it.
        problem: String,
    },
    /// A service account outside `execution_allowlist.service_accounts`.
    #[error("service account {name:?} is not in execution_allowlist.service_accounts")]
    ServiceAccountNotAllowed {
        /// The service account.
        name: String,
    },
    /// A remote hook (a webhook) set a service account while
    /// `execution_allowlist.service_accounts` is not set (ADR 0100 §8).
    #[error(
        "service account {name:?} may be set by a webhook only when execution_allowlist.service_accounts is set"
    )]
    RemoteServiceAccount {
        /// The service account.
        name: String,
    },
    /// A priority class outside `execution_allowlist.priority_classes`.
    #[error("priority class {name:?} is not in execution_allowlist.priority_classes")]
    PriorityClassNotAllowed {
        /// The priority class.
        name: String,
    },
    /// An unprivileged hook set a field only a privileged hook may set (see [`Privilege`]).
    #[error("{field} may only be set by a privileged hook")]
    NotPrivileged {
        /// `runtime_class_name` or `fill_limits`.
        field: &'static str,
    },
    /// A privileged hook filled a limit that does not parse, is below the request or above the
    /// attempt's size.
    #[error("fill_limits.{resource} {quantity:?} is invalid: {problem}")]
    InvalidFill {
        /// `cpu`, `memory` or `ephemeral_storage`.
        resource: &'static str,
        /// The quantity.
        quantity: String,
        /// What is wrong with it.
        problem: String,
    },
}

impl ChangeRules {
    /// Checks `changes` from a hook registered with `privilege` against these rules and against
    /// what Kubernetes accepts, for the request as it stands before the changes.
    ///
    /// The privilege is the one the chain recorded when it registered the hook
    /// ([`super::Chain::privilege`]), never one the hook claims.
    ///
    /// # Errors
    /// The first [`ChangeError`] found; the request must then be left as it was.
    pub fn check(
        &self,
        changes: &Changes,
        privilege: Privilege,
        request: &Request,
    ) -> Result<(), ChangeError> {
        if privilege == Privilege::Unprivileged {
            if changes.runtime_class_name.is_some() {
                return Err(ChangeError::NotPrivileged {
                    field: "runtime_class_name",
                });
            }
            if changes.fill_limits.is_some() {
                return Err(ChangeError::NotPrivileged {
                    field: "fill_limits",
                });
            }
        }
        check_entries(Field::NodeSelector, &changes.node_selector)?;
        check_entries(Field::Label, &changes.labels)?;
        check_entries(Field::Annotation, &changes.annotations)?;
        if !changes.annotations.is_empty() {
            let mut merged = request.execution.annotations.clone();
            merged.extend(changes.annotations.clone());
            check_annotations_size(annotations_bytes(&merged))?;
        }
        check_tolerations(&changes.tolerations)?;
        if let Some(name) = &changes.service_account {
            check_name("service account", name)?;
            let allowed = name == &self.default_service_account
                || self
                    .service_accounts
                    .as_ref()
                    .is_none_or(|list| list.contains(name));
            if !allowed {
                return Err(ChangeError::ServiceAccountNotAllowed { name: name.clone() });
            }
        }
        if let Some(name) = &changes.priority_class {
            check_name("priority class", name)?;
            if self
                .priority_classes
                .as_ref()
                .is_some_and(|list| !list.contains(name))
            {
                return Err(ChangeError::PriorityClassNotAllowed { name: name.clone() });
            }
        }
        if let Some(name) = &changes.runtime_class_name {
            check_name("runtime class", name)?;
        }
        if let Some(fill) = &changes.fill_limits {
            let requests = &request.resources.requests;
            let ceiling = |per_unit: fn(&Unit) -> u128| {
                self.unit
                    .map(|unit| per_unit(&unit) * u128::from(request.size.max(1)))
            };
            self.check_fill(
                "cpu",
                &fill.cpu,
                &requests.cpu,
                ceiling(|unit| unit.cpu_milli),
            )?;
            self.check_fill(
                "memory",
                &fill.memory,
                &requests.memory,
                ceiling(|unit| unit.memory_milli),
            )?;
            self.check_fill(
                "ephemeral_storage",
                &fill.ephemeral_storage,
                &requests.ephemeral_storage,
                None,
            )?;
        }
        Ok(())
    }

    /// Checks what a remote hook ([`super::Hook::is_remote`], a webhook) may not change beyond
    /// [`ChangeRules::check`]: the service account, unless `execution_allowlist.service_accounts`
    /// is set, so that whoever controls the endpoint cannot move a task onto any service account
    /// of the namespace (ADR 0100 §8). Setting the default task service account, or the one the
    /// attempt already has, changes no privilege and stays allowed.
    ///
    /// # Errors
    /// [`ChangeError::RemoteServiceAccount`].
    pub(crate) fn check_remote(
        &self,
        changes: &Changes,
        request: &Request,
    ) -> Result<(), ChangeError> {
        match &changes.service_account {
            Some(name)
                if self.service_accounts.is_none()
                    && name != &self.default_service_account
                    && name != &request.execution.service_account =>
            {
                Err(ChangeError::RemoteServiceAccount { name: name.clone() })
            }
            _ => Ok(()),
        }
    }

    fn check_fill(
        &self,
        resource: &'static str,
        fill: &Option<String>,
        request: &Option<String>,
        ceiling: Option<u128>,
    ) -> Result<(), ChangeError> {
        let Some(quantity) = fill else {
            return Ok(());
        };
        let invalid = |problem: String| ChangeError::InvalidFill {
            resource,
            quantity: quantity.clone(),
            problem,
        };
        let limit = parse_milli(quantity).map_err(|error| invalid(error.to_string()))?;
        if request
            .as_deref()
            .is_some_and(|request| is_below(quantity, request))
        {
            return Err(invalid("below the request".to_owned()));
        }
        if ceiling.is_some_and(|ceiling| limit > ceiling) {
            return Err(invalid("above what the attempt's size allows".to_owned()));
        }
        Ok(())
    }
}

/// Applies changes that passed [`ChangeRules::check`] to a request.
///
/// Node selector, labels and annotations merge with the change's keys winning; tolerations are
/// appended; a set priority class, service account or runtime class replaces the old one;
/// `fill_limits` fills only limits that are empty.
pub fn apply_changes(request: &mut Request, changes: &Changes) {
    let execution = &mut request.execution;
    execution.node_selector.extend(
        changes
            .node_selector
            .iter()
            .map(|(k, v)| (k.clone(), v.clone())),
    );
    execution
        .tolerations
        .extend(changes.tolerations.iter().cloned());
    execution
        .labels
        .extend(changes.labels.iter().map(|(k, v)| (k.clone(), v.clone())));
    execution.annotations.extend(
        changes
            .annotations
            .iter()
            .map(|(k, v)| (k.clone(), v.clone())),
    );
    if let Some(priority_class) = &changes.priority_class {
        execution.priority_class.clone_from(priority_class);
    }
    if let Some(service_account) = &changes.service_account {
        execution.service_account.clone_from(service_account);
    }
    if let Some(runtime_class) = &changes.runtime_class_name {
        execution.runtime_class_name.clone_from(runtime_class);
    }
    if let Some(fill) = &changes.fill_limits {
        let limits = &mut request.resources.limits;
        for (limit, filled) in [
            (&mut limits.cpu, &fill.cpu),
            (&mut limits.memory, &fill.memory),
            (&mut limits.ephemeral_storage, &fill.ephemeral_storage),
        ] {
            if limit.is_none() {
                limit.clone_from(filled);
            }
        }
    }
}

/// Checks the entries of one map of an attempt against what Kubernetes accepts there.
///
/// - Labels: each key a qualified name outside the reserved prefixes ([`is_reserved_key`]),
///   each value a label value.
/// - Annotations: each key, lower-cased first as Kubernetes does before it validates one,
///   outside the reserved prefixes and a qualified name; values are free text (their total
///   size is [`check_annotations_size`]'s). Only ASCII is lower-cased: any other character
///   makes a key invalid anyway, so a key Kubernetes would fold into a reserved prefix (a
///   Kelvin sign, a dotted capital I) is refused as invalid.
/// - Node selector: each key a qualified name, each value a label value. Node labels are the
///   cluster's, so no prefix is reserved there.
///
/// # Errors
/// The first entry, in key order, that Kubernetes would reject.
pub(crate) fn check_entries(
    field: Field,
    entries: &BTreeMap<String, String>,
) -> Result<(), ChangeError> {
    for (key, value) in entries {
        if field != Field::NodeSelector && is_reserved_key(key) {
            return Err(ChangeError::ReservedKey {
                field,
                key: key.clone(),
            });
        }
        let problem = if field == Field::Annotation {
            qualified_name_problem(&key.to_ascii_lowercase())
        } else {
            qualified_name_problem(key)
        };
        if let Some(problem) = problem {
            return Err(ChangeError::InvalidKey {
                field,
                key: key.clone(),
                problem,
            });
        }
        if field == Field::Annotation {
            continue;
        }
        if let Some(problem) = label_value_problem(value) {
            return Err(ChangeError::InvalidValue {
                field,
                key: key.clone(),
                value: value.clone(),
                problem,
            });
        }
    }
    Ok(())
}

/// The bytes annotations take as Kubernetes counts them toward [`MAX_ANNOTATIONS_BYTES`]: every
/// key and every value.
pub(crate) fn annotations_bytes<'a>(
    annotations: impl IntoIterator<Item = (&'a String, &'a String)>,
) -> usize {
    annotations
        .into_iter()
        .map(|(key, value)| key.len() + value.len())
        .sum()
}

/// Checks that annotations of `bytes` in all ([`annotations_bytes`]) fit what Kubernetes
/// stores.
///
/// # Errors
/// [`ChangeError::AnnotationsTooLarge`] above [`MAX_ANNOTATIONS_BYTES`].
pub(crate) fn check_annotations_size(bytes: usize) -> Result<(), ChangeError> {
    if bytes > MAX_ANNOTATIONS_BYTES {
        return Err(ChangeError::AnnotationsTooLarge { bytes });
    }
    Ok(())
}

/// Checks tolerations against the rules Kubernetes applies to each: a key, when set, is a
/// qualified name; an empty key needs operator `Exists`; `Exists` takes no value and `Equal`
/// a label value; `toleration_seconds` needs effect `NoExecute`.
///
/// # Errors
/// [`ChangeError::InvalidToleration`] for the first that fails, by its position in
/// `tolerations`.
pub(crate) fn check_tolerations(tolerations: &[Toleration]) -> Result<(), ChangeError> {
    for (index, toleration) in tolerations.iter().enumerate() {
        if let Some(problem) = toleration_problem(toleration) {
            return Err(ChangeError::InvalidToleration {
                index,
                key: toleration.key.clone(),
                problem,
            });
        }
    }
    Ok(())
}

/// Checks that `name`, the value of `field` (`service account`, `priority class` or
/// `runtime class`), is a DNS subdomain, as Kubernetes requires of each.
///
/// # Errors
/// [`ChangeError::InvalidName`] naming the field and the name.
pub(crate) fn check_name(field: &'static str, name: &str) -> Result<(), ChangeError> {
    match subdomain_problem(name) {
        Some(problem) => Err(ChangeError::InvalidName {
            field,
            name: name.to_owned(),
            problem,
        }),
        None => Ok(()),
    }
}

fn toleration_problem(toleration: &Toleration) -> Option<&'static str> {
    if toleration.key.is_empty() && toleration.operator != TolerationOperator::Exists {
        return Some("an empty key needs operator Exists");
    }
    if !toleration.key.is_empty() && qualified_name_problem(&toleration.key).is_some() {
        return Some("the key is not a qualified name");
    }
    match toleration.operator {
        TolerationOperator::Exists if !toleration.value.is_empty() => {
            return Some("operator Exists takes no value");
        }
        TolerationOperator::Equal if label_value_problem(&toleration.value).is_some() => {
            return Some("the value is not a valid label value");
        }
        _ => {}
    }
    if toleration.toleration_seconds.is_some() && toleration.effect != Some(TaintEffect::NoExecute)
    {
        return Some("toleration_seconds needs effect NoExecute");
    }
    None
}
