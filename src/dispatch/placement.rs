//! Placement: whether an admitted attempt takes a dedicated pod or goes to a warm worker
//! (ADR 0058, ADR 0100 §4).
//!
//! A warm worker is built before its task is known, with the default task service account and
//! no placement of its own, so any attempt that needs something a warm worker lacks takes a
//! dedicated pod. An attempt a hook changed in any way takes one too (ADR 0100 §4), even when
//! the change is only labels or annotations: a warm worker's pod exists already and cannot take
//! them. The rule is evaluated on the execution fields with every hook's changes applied, so an
//! attempt a hook sent to a node pool takes a dedicated pod even when the register response
//! reported it warm.

use std::fmt;

use super::task::Task;
use crate::admission::Execution;

/// Which kind of pod an admitted attempt runs in: one of its own, or a warm worker. Not to be
/// confused with the `placement` hook ([`crate::hooks::Placement`]), which changes where a pod
/// is scheduled; this is only the dedicated-or-warm choice made after every hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PodKind {
    /// A pod of its own, for the reason given.
    Dedicated(DedicatedReason),
    /// A warm worker of its DAG version.
    Warm,
}

/// Why an attempt takes a dedicated pod instead of a warm worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DedicatedReason {
    /// Warm pools are disabled (`execution.warm_pools_enabled: false`).
    NoWarmPool,
    /// The attempt runs in source mode: a warm worker cannot carry its DAG source.
    SourceMode,
    /// The attempt mounts the run's staging volume, which a warm worker lacks.
    Staging,
    /// The executor policy forced a field onto the attempt or filled one of its limits.
    ExecutorPolicy,
    /// A hook changed the attempt: its node selector, tolerations, priority class, service
    /// account, runtime class, labels, annotations or limits. A warm worker's pod exists
    /// already and cannot take any of them.
    AdmissionChange,
    /// The service account is not the default one a warm worker runs as.
    ServiceAccount,
    /// The task sets a node selector, tolerations or a priority class of its own.
    PlacementFields,
    /// A runtime class is set. Only a built-in hook sets one, so the pipeline reports such an
    /// attempt as an admission change; the reason is kept for an execution judged on its own.
    RuntimeClass,
    /// With a resource unit set a warm worker is one unit: the task is larger (`pool_slots`
    /// above 1) or declares resources of its own.
    Size,
}

impl PodKind {
    /// The stable name of the placement for JSON and metrics: `dedicated` or `warm`.
    pub fn as_str(self) -> &'static str {
        match self {
            PodKind::Dedicated(_) => "dedicated",
            PodKind::Warm => "warm",
        }
    }

    /// Why the attempt is dedicated; `None` when it is warm.
    pub fn reason(self) -> Option<DedicatedReason> {
        match self {
            PodKind::Dedicated(reason) => Some(reason),
            PodKind::Warm => None,
        }
    }

    /// Whether the attempt takes a pod of its own.
    pub fn is_dedicated(self) -> bool {
        matches!(self, PodKind::Dedicated(_))
    }
}

impl DedicatedReason {
    /// The stable snake_case name of the reason for JSON: `placement_fields`, `no_warm_pool`...
    pub fn as_str(self) -> &'static str {
        match self {
            DedicatedReason::NoWarmPool => "no_warm_pool",
            DedicatedReason::SourceMode => "source_mode",
            DedicatedReason::Staging => "staging",
            DedicatedReason::ExecutorPolicy => "executor_policy",
            DedicatedReason::AdmissionChange => "admission_change",
            DedicatedReason::ServiceAccount => "service_account",
            DedicatedReason::PlacementFields => "placement_fields",
            DedicatedReason::RuntimeClass => "runtime_class",
            DedicatedReason::Size => "size",
        }
    }

    /// The reason in words, for a table column: `placement fields`, `no warm pool`...
    pub(crate) fn describe(self) -> &'static str {
        match self {
            DedicatedReason::NoWarmPool => "no warm pool",
            DedicatedReason::SourceMode => "source mode",
            DedicatedReason::Staging => "staging",
            DedicatedReason::ExecutorPolicy => "executor policy",
            DedicatedReason::AdmissionChange => "admission change",
            DedicatedReason::ServiceAccount => "service account",
            DedicatedReason::PlacementFields => "placement fields",
            DedicatedReason::RuntimeClass => "runtime class",
            DedicatedReason::Size => "size",
        }
    }
}

impl fmt::Display for DedicatedReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.describe())
    }
}

impl fmt::Display for PodKind {
    /// `warm`, or `dedicated (<reason>)` such as `dedicated (placement fields)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PodKind::Dedicated(reason) => write!(f, "dedicated ({reason})"),
            PodKind::Warm => f.write_str("warm"),
        }
    }
}

/// What the install's warm workers are, as placement needs to know it.
#[derive(Debug, Clone, Copy)]
pub struct WarmWorkers<'a> {
    /// `execution.warm_pools_enabled`.
    pub enabled: bool,
    /// `executor.task_service_account`: the service account a warm worker runs as.
    pub service_account: &'a str,
    /// Whether `executor.unit` is set: a warm worker is then one unit in size.
    pub unit_sized: bool,
}

/// Who changed an admitted attempt's fields, as placement weighs it: any change takes a
/// dedicated pod (ADR 0100 §4), and the reason says who made it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Changed {
    /// No hook changed anything: the fields are the task's own.
    Nothing,
    /// An operator's hook (Rust, a configured hook or a webhook) changed a field.
    ByHook,
    /// The executor policy forced a field onto the attempt or filled one of its limits.
    ByPolicy,
}

/// Decides where an admitted attempt runs.
///
/// `execution` is the attempt's execution with the default service account and every hook's
/// changes applied; `changed` says whether a hook, or the executor policy, changed the attempt;
/// `task` gives what a hook cannot change (staging, size, resources). The first reason found
/// wins, in this order: source mode, staging, the executor policy's forced fields or filled
/// limits, another hook's change, a service account
/// other than the warm workers' (an empty one means the default), placement fields, a runtime
/// class, a task a unit-sized warm worker cannot hold (Dexaflow's `warmEligible`: size 1
/// without resources of its own), warm pools disabled. With none the attempt goes warm.
pub fn place(
    execution: &Execution,
    changed: Changed,
    task: &Task,
    source_mode: bool,
    warm: WarmWorkers<'_>,
) -> PodKind {
    // The reasons that belong to the attempt come first, so that the table says why this
    // attempt needs its own pod even on an install without warm pools. Source mode and staging,
    // which no hook can change, come before a hook's change; the change comes before the fields,
    // so that the table says a hook decided it. Without a change the fields are the task's own.
    let reason = if source_mode {
        DedicatedReason::SourceMode
    } else if task.staging {
        DedicatedReason::Staging
    } else if changed == Changed::ByPolicy {
        DedicatedReason::ExecutorPolicy
    } else if changed == Changed::ByHook {
        DedicatedReason::AdmissionChange
    } else if !execution.service_account.is_empty()
        && execution.service_account != warm.service_account
    {
        DedicatedReason::ServiceAccount
    } else if !execution.node_selector.is_empty()
        || !execution.tolerations.is_empty()
        || !execution.priority_class.is_empty()
    {
        DedicatedReason::PlacementFields
    } else if !execution.runtime_class_name.is_empty() {
        DedicatedReason::RuntimeClass
    } else if warm.unit_sized && (task.pool_slots > 1 || !task.resources.is_empty()) {
        DedicatedReason::Size
    } else if !warm.enabled {
        DedicatedReason::NoWarmPool
    } else {
        return PodKind::Warm;
    };
    PodKind::Dedicated(reason)
}
