//! The resource unit of ADR 0066: how a task's size (`pool_slots`) becomes CPU and memory.
//!
//! A task of size N may use at most N units and a dimension it leaves empty gets N units, so
//! every attempt ends up with CPU and memory requests and limits, and requests never exceed
//! limits. A value the task declares is never changed: the unit does not clamp or rewrite an
//! author's resources. A task that declares more than its size allows is a misfit: refused
//! under `enforce: refuse`, run and reported under `enforce: warn`. A task whose size is above
//! `max_size` is refused in both modes.

use std::fmt;

use thiserror::Error;

use super::settings::{Enforce, ResourceUnit};
use super::task::Task;
use crate::admission::{ResourceList, Resources, parse_milli};
pub use crate::admission::{cpu_quantity, memory_quantity};

/// What the unit made of a task that may run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fit {
    /// The task's declared size (`pool_slots`, 0 counted as 1): the slots its pool was charged
    /// and the size its empty dimensions were filled from.
    pub size: u32,
    /// The task's resources with every empty CPU and memory request and limit filled.
    pub resources: Resources,
    /// The misfit tolerated under `enforce: warn`, for the caller to log and count; `None` when
    /// the task fits.
    pub warning: Option<Misfit>,
}

/// A task that declares more CPU or memory than its size allows.
///
/// Its `Display` is the message the task instance shows when the misfit is refused, and the
/// error logged when it is tolerated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Misfit {
    /// The task id.
    pub task_id: String,
    /// The task's declared size.
    pub size: u32,
    /// The size its resources need.
    pub need: u32,
    /// One unit of CPU, as a Kubernetes quantity.
    pub unit_cpu: String,
    /// One unit of memory, as a Kubernetes quantity.
    pub unit_memory: String,
}

impl fmt::Display for Misfit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "task {:?} declares resources larger than its size: it is size {}, and one unit is {} \
             CPU and {} memory, so it needs size: {} (set it in dexaflow.yaml tasks.{}.size, or \
             pool_slots in dag.py)",
            self.task_id, self.size, self.unit_cpu, self.unit_memory, self.need, self.task_id
        )
    }
}

impl std::error::Error for Misfit {}

/// Why the unit refuses a task.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum UnitError {
    /// The task's size is above `executor.unit.max_size`; refused even under `enforce: warn`.
    #[error(
        "task {task_id:?} is size {size}, above this install's largest size {max_size} \
         (executor.unit.max_size)"
    )]
    TooLarge {
        /// The task id.
        task_id: String,
        /// The task's declared size.
        size: u32,
        /// The install's largest size.
        max_size: u32,
    },
    /// The task declares more than its size allows, under `enforce: refuse`.
    #[error(transparent)]
    Misfit(Misfit),
}

/// The task's declared size: `pool_slots`, with 0 meaning 1.
pub(crate) fn declared_size(task: &Task) -> u32 {
    task.pool_slots.max(1)
}

/// Decides `task` against `unit` and fills the resources it leaves empty.
///
/// The size a task needs is the largest, over its requests and limits, of its CPU and memory
/// each divided by one unit and rounded up; a value that does not parse counts as nothing
/// (`refuse_before_token` refuses such a task before it asks the unit). Each dimension is then
/// filled from the declared size: both empty gives size × unit for request and limit; only a
/// limit gives the limit for both; only a request gives the request and the larger of it and
/// size × unit as the limit.
///
/// # Errors
/// [`UnitError::TooLarge`] when the declared size is above `max_size`, and
/// [`UnitError::Misfit`] when the task needs more than its size under `enforce: refuse`.
pub fn fit(unit: &ResourceUnit, task: &Task) -> Result<Fit, UnitError> {
    let size = declared_size(task);
    if size > unit.max_size {
        return Err(UnitError::TooLarge {
            task_id: task.key.task_id.clone(),
            size,
            max_size: unit.max_size,
        });
    }
    let declared = &task.resources;
    let need = [&declared.requests, &declared.limits]
        .into_iter()
        .flat_map(|list| {
            [
                units_for(list.cpu.as_deref(), unit.cpu_milli),
                units_for(list.memory.as_deref(), unit.memory_milli),
            ]
        })
        .fold(size, u32::max);
    let mut warning = None;
    if need > size {
        let misfit = Misfit {
            task_id: task.key.task_id.clone(),
            size,
            need,
            unit_cpu: cpu_quantity(unit.cpu_milli),
            unit_memory: memory_quantity(unit.memory_milli),
        };
        match unit.enforce {
            Enforce::Refuse => return Err(UnitError::Misfit(misfit)),
            Enforce::Warn => warning = Some(misfit),
        }
    }
    let sized_cpu = cpu_quantity(unit.cpu_milli.saturating_mul(u128::from(size)));
    let sized_memory = memory_quantity(unit.memory_milli.saturating_mul(u128::from(size)));
    let (cpu_request, cpu_limit) = fill_dimension(
        declared.requests.cpu.as_deref(),
        declared.limits.cpu.as_deref(),
        sized_cpu,
    );
    let (memory_request, memory_limit) = fill_dimension(
        declared.requests.memory.as_deref(),
        declared.limits.memory.as_deref(),
        sized_memory,
    );
    let resources = Resources {
        requests: ResourceList {
            cpu: Some(cpu_request),
            memory: Some(memory_request),
            ephemeral_storage: declared.requests.ephemeral_storage.clone(),
        },
        limits: ResourceList {
            cpu: Some(cpu_limit),
            memory: Some(memory_limit),
            ephemeral_storage: declared.limits.ephemeral_storage.clone(),
        },
    };
    Ok(Fit {
        size,
        resources,
        warning,
    })
}

/// Completes one dimension's request and limit; declared values are returned as written.
fn fill_dimension(request: Option<&str>, limit: Option<&str>, sized: String) -> (String, String) {
    match (request, limit) {
        (None, None) => (sized.clone(), sized),
        (None, Some(limit)) => (limit.to_owned(), limit.to_owned()),
        (Some(request), None) => (request.to_owned(), larger(request, sized)),
        (Some(request), Some(limit)) => (request.to_owned(), limit.to_owned()),
    }
}

/// `sized` when it parses and is larger than `declared`, else `declared`.
fn larger(declared: &str, sized: String) -> String {
    match (parse_milli(declared), parse_milli(&sized)) {
        (Ok(declared_milli), Ok(sized_milli)) if sized_milli > declared_milli => sized,
        _ => declared.to_owned(),
    }
}

/// How many units `quantity` takes, rounded up; 0 when empty, unparsable or the unit is 0.
fn units_for(quantity: Option<&str>, unit_milli: u128) -> u32 {
    let Some(milli) = quantity.and_then(|quantity| parse_milli(quantity).ok()) else {
        return 0;
    };
    if unit_milli == 0 {
        return 0;
    }
    u32::try_from(milli.div_ceil(unit_milli)).unwrap_or(u32::MAX)
}
