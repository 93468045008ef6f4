//! Step 3 of the dispatch path (ADR 0100 §1): the values an attempt runs with once the built-in
//! refusals passed it, and the [`Request`] a hook sees, built from them.
//!
//! The effective values are what Dexaflow applies after the token today, computed before the
//! hook so that it sees them: the resources after the resource unit or `executor.defaults`, and
//! the service account after the default, with a flag for whether the task chose it.

use super::settings::{ResourceDefaults, Settings};
use super::task::Task;
use super::unit::{self, Misfit, UnitError};
use crate::admission::{API_VERSION, Execution, Request, ResourceList, Resources};

/// The values an attempt runs with once the built-in refusals passed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Effective {
    /// The image the attempt runs: the task's own, or the source-mode runtime image when the
    /// task names none and source mode applies.
    pub image: String,
    /// The resources after the resource unit, or without one the task's own, else
    /// `executor.defaults`.
    pub resources: Resources,
    /// The service account: the task's own, else the default task service account.
    pub service_account: String,
    /// Whether the task chose the service account itself (false when the default applied).
    pub service_account_chosen: bool,
    /// The attempt's size in resource units: the declared size with a unit, 1 without one.
    pub size: u32,
    /// Whether the attempt runs in source mode (its DAG source on the runtime image).
    pub source_mode: bool,
    /// A misfit tolerated under `executor.unit.enforce: warn`, which the caller logs as
    /// `task does not fit its size; running it under executor.unit.enforce=warn`.
    pub unit_warning: Option<Misfit>,
}

/// An attempt's size and resources, as the resource unit or the defaults make them.
pub(crate) struct Sized {
    size: u32,
    pub(crate) resources: Resources,
    unit_warning: Option<Misfit>,
}

impl Sized {
    /// Sizes `task`: with a resource unit, its declared size in units and the resources the unit
    /// gives it; without one, a size of 1 and [`resources_without_unit`].
    ///
    /// # Errors
    /// The unit's refusal of a task that does not fit its size.
    pub(crate) fn of(task: &Task, settings: &Settings) -> Result<Sized, UnitError> {
        Ok(match &settings.unit {
            Some(resource_unit) => {
                let fit = unit::fit(resource_unit, task)?;
                Sized {
                    size: fit.size,
                    resources: fit.resources,
                    unit_warning: fit.warning,
                }
            }
            None => Sized {
                size: 1,
                resources: resources_without_unit(&task.resources, &settings.defaults),
                unit_warning: None,
            },
        })
    }
}

/// Whether `task` runs in source mode: it is enabled and the task's image is empty or the
/// runtime image.
pub(crate) fn is_source_mode(task: &Task, settings: &Settings) -> bool {
    settings.source_mode.enabled
        && (task.image.is_empty() || task.image == settings.source_mode.image)
}

impl Effective {
    /// The effective values of `task`, sized as `sized`, in source mode or not.
    pub(crate) fn new(task: &Task, settings: &Settings, sized: Sized, source_mode: bool) -> Self {
        let image = if source_mode && task.image.is_empty() {
            settings.source_mode.image.clone()
        } else {
            task.image.clone()
        };
        let chosen = !task.execution.service_account.is_empty();
        let service_account = if chosen {
            task.execution.service_account.clone()
        } else {
            settings.task_service_account.clone()
        };
        Effective {
            image,
            resources: sized.resources,
            service_account,
            service_account_chosen: chosen,
            size: sized.size,
            source_mode,
            unit_warning: sized.unit_warning,
        }
    }
}

/// Builds the request a hook sees for one attempt, from the task, its effective values and the
/// try number.
///
/// It copies the identity, operator and execution fields and takes the image, resources,
/// service account, size and source mode from `effective`. It never copies the environment, the
/// source, the command or a token: [`Request`] has no field for them.
pub fn build_request(task: &Task, effective: &Effective, try_number: u32) -> Request {
    Request {
        api_version: API_VERSION.to_owned(),
        tenant: task.key.tenant.clone(),
        dag_id: task.key.dag_id.clone(),
        run_id: task.key.run_id.clone(),
        task_id: task.key.task_id.clone(),
        try_number,
        operator: task.operator.clone(),
        image: effective.image.clone(),
        resources: effective.resources.clone(),
        execution: effective_execution(task, effective),
        size: effective.size,
        source_mode: effective.source_mode,
    }
}

/// The execution fields an attempt runs with when no hook changes them: the task's own, with
/// the effective service account.
///
/// The path without hooks uses it directly, so that no [`Request`] is built; [`build_request`]
/// uses it for the request's execution.
pub fn effective_execution(task: &Task, effective: &Effective) -> Execution {
    let own = &task.execution;
    Execution {
        service_account: effective.service_account.clone(),
        service_account_chosen: effective.service_account_chosen,
        node_selector: own.node_selector.clone(),
        tolerations: own.tolerations.clone(),
        priority_class: own.priority_class_name.clone(),
        runtime_class_name: String::new(),
        labels: own.labels.clone(),
        annotations: own.annotations.clone(),
    }
}

/// The resources of a task when no unit is set: its own when it declares any, else the CPU and
/// memory of `executor.defaults` as requests and limits.
fn resources_without_unit(declared: &Resources, defaults: &ResourceDefaults) -> Resources {
    if !declared.is_empty() {
        return declared.clone();
    }
    let list = ResourceList {
        cpu: defaults.cpu.clone(),
        memory: defaults.memory.clone(),
        ephemeral_storage: None,
    };
    Resources {
        requests: list.clone(),
        limits: list,
    }
}
