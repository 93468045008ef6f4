//! The built-in refusals that run before any hook and before the agent token (ADR 0100 §2, §4).
//!
//! [`refuse_before_token`] checks, in this order: the declared quantities, the resource unit,
//! the execution allowlist on the DAG's own fields (which fields, service accounts, priority
//! classes), the executor policy's `placement.allow_dag_placement`, what Kubernetes accepts in those fields and in the environment's names, limits not
//! below requests, the source-mode size or the image allowlist (and, on the kubernetes
//! executor, that there is an image), and the annotations' total size with the pod's own. The
//! first refusal wins. An attempt that passes gets its [`Effective`] values
//! ([`effective`](super::effective)), which the hook's request is built from.
//!
//! The Kubernetes checks are the ones a hook's changes pass (`crate::admission::check_entries`
//! and its siblings), and they run on every executor: a task that a pod could not carry is
//! refused the same way on lite.

use std::collections::BTreeMap;

use thiserror::Error;

use super::effective::{Effective, Sized, is_source_mode};
use super::executor::kubernetes::{ANNOTATION_TASK_INSTANCE_ID, own_annotations};
use super::settings::{AllowedFields, ExecutorSettings, Settings};
use super::task::Task;
use super::unit::UnitError;
use crate::admission::{
    ChangeError, Field, MAX_ANNOTATIONS_BYTES, PolicyRefusal, QuantityError, Resources,
    annotations_bytes, check_annotations_size, check_entries, check_name, check_tolerations,
    env_name_problem, image_allowed, parse_milli, refuse_dag_placement,
};

/// The longest task instance id (`tenant.dag_id.run_id.task_id`) an attempt may have: its pod
/// carries the id as an annotation, and a pod's annotations hold [`MAX_ANNOTATIONS_BYTES`]
/// together, keys included.
pub const MAX_TASK_INSTANCE_ID_BYTES: usize =
    MAX_ANNOTATIONS_BYTES - ANNOTATION_TASK_INSTANCE_ID.len();

/// Why a built-in check refused an attempt. Permanent: the task fails without retries.
///
/// The `Display` is the bare cause; the caller prefixes `dispatch refused: `.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Refusal {
    /// A resource the task declares is not a quantity Kubernetes would accept.
    #[error("resources.{field}: {error}")]
    NotAQuantity {
        /// The resource, such as `requests.cpu`.
        field: String,
        /// What does not parse.
        error: QuantityError,
    },
    /// The resource unit refused the task (ADR 0066).
    #[error(transparent)]
    Unit(#[from] UnitError),
    /// The task sets an execution field `execution_allowlist.fields` does not allow.
    #[error("execution.{field} is set but execution_allowlist.fields does not allow it")]
    FieldNotAllowed {
        /// The field, as `execution_allowlist.fields` names it.
        field: &'static str,
    },
    /// The task's own service account is outside `execution_allowlist.service_accounts`.
    #[error("execution.service_account {name:?} is not in execution_allowlist.service_accounts")]
    ServiceAccountNotAllowed {
        /// The service account.
        name: String,
    },
    /// The task's own priority class is outside `execution_allowlist.priority_classes`.
    #[error(
        "execution.priority_class_name {name:?} is not in execution_allowlist.priority_classes"
    )]
    PriorityClassNotAllowed {
        /// The priority class.
        name: String,
    },
    /// The executor policy refused the DAG's own placement fields
    /// (`placement.allow_dag_placement: false`).
    #[error(transparent)]
    Policy(#[from] PolicyRefusal),
    /// One of the task's own execution fields holds what Kubernetes would reject: a label,
    /// annotation or node-selector key or value, a toleration, a service account or priority
    /// class name, or annotations too large together with the pod's own.
    #[error("{field}: {error}")]
    Invalid {
        /// The field, such as `execution.labels`.
        field: &'static str,
        /// What is wrong in it, as a hook's change would be told.
        error: ChangeError,
    },
    /// A task instance id longer than [`MAX_TASK_INSTANCE_ID_BYTES`]: no pod could carry it.
    #[error(
        "task instance id (tenant.dag_id.run_id.task_id) is {bytes} bytes, over the {limit} byte \
         limit; its longest part is {longest} ({longest_bytes} bytes)"
    )]
    TaskInstanceIdTooLong {
        /// The id's length.
        bytes: usize,
        /// [`MAX_TASK_INSTANCE_ID_BYTES`].
        limit: usize,
        /// `tenant`, `dag_id`, `run_id` or `task_id`: the part to shorten first.
        longest: &'static str,
        /// That part's length.
        longest_bytes: usize,
    },
    /// A resource limit below its request, which Kubernetes refuses.
    #[error("resources.limits.{resource}: {limit:?} is below the request {request:?}")]
    LimitBelowRequest {
        /// `cpu`, `memory` or `ephemeral_storage`.
        resource: &'static str,
        /// The limit.
        limit: String,
        /// The request.
        request: String,
    },
    /// An environment variable name Kubernetes would reject in a container.
    #[error("env: variable name {name:?} is invalid: {problem}")]
    InvalidEnvName {
        /// The name.
        name: String,
        /// What is wrong with it.
        problem: String,
    },
    /// On the kubernetes executor, an image a pod cannot run: none, or one with whitespace
    /// around it.
    #[error("image: {image:?} is invalid: {problem}")]
    InvalidImage {
        /// The image.
        image: String,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// The task's image matches no entry of `execution_allowlist.images`.
    #[error("image {image:?} is not in execution_allowlist.images")]
    ImageNotAllowed {
        /// The image.
        image: String,
    },
    /// A source-mode DAG whose source is over the limit.
    #[error(
        "source mode: DAG {dag_id:?} source is {bytes} bytes, over the {limit} byte limit; build \
         an image instead"
    )]
    SourceTooLarge {
        /// The DAG id.
        dag_id: String,
        /// The source's size.
        bytes: usize,
        /// The largest source allowed.
        limit: usize,
    },
    /// A DAG on the runtime image that carries no source.
    #[error("source mode: DAG {dag_id:?} uses the runtime image but has no source")]
    NoSource {
        /// The DAG id.
        dag_id: String,
    },
}

/// Refuses a task instance id no pod could carry, naming its longest part, rather than leave
/// the annotations' total to blame the task's own annotations.
fn check_task_instance_id(task: &Task) -> Result<(), Refusal> {
    let bytes = task.key.task_instance_id_len();
    if bytes <= MAX_TASK_INSTANCE_ID_BYTES {
        return Ok(());
    }
    let key = &task.key;
    let (longest, longest_bytes) = [
        ("tenant", key.tenant.len()),
        ("dag_id", key.dag_id.len()),
        ("run_id", key.run_id.len()),
        ("task_id", key.task_id.len()),
    ]
    .into_iter()
    .max_by_key(|(_, len)| *len)
    .expect("four parts");
    Err(Refusal::TaskInstanceIdTooLong {
        bytes,
        limit: MAX_TASK_INSTANCE_ID_BYTES,
        longest,
        longest_bytes,
    })
}

/// Refuses the first declared resource that is not a Kubernetes quantity.
fn check_quantities(resources: &Resources) -> Result<(), Refusal> {
    for (list, quantities) in [
        ("requests", &resources.requests),
        ("limits", &resources.limits),
    ] {
        for (resource, value) in quantities.set() {
            if let Err(error) = parse_milli(value) {
                return Err(Refusal::NotAQuantity {
                    field: format!("{list}.{resource}"),
                    error,
                });
            }
        }
    }
    Ok(())
}

/// Runs the built-in refusals on one attempt and computes its effective values.
///
/// Order: the task instance id's length (a pod carries it as an annotation,
/// [`MAX_TASK_INSTANCE_ID_BYTES`]); the declared quantities (one Kubernetes would refuse would otherwise count as nothing
/// against the unit and leave the pod without it); the resource unit; the execution allowlist
/// on the DAG's own fields (which fields may be set, then the service account, where the
/// default task service account and an empty one are exempt, then the priority class); the
/// executor policy's `placement.allow_dag_placement` on the same fields; what
/// Kubernetes accepts in the DAG's own fields (`check_own_fields`); limits not below
/// requests, on the effective resources; the source-mode size when source mode applies (it is
/// enabled and the task's image is empty or the runtime image), else the image allowlist for an
/// image the task names itself (not an empty one) and, on the kubernetes executor, that the
/// image is one a pod can run; and last the annotations' total with those the executor adds to
/// the pod (`check_pod_annotations`). The first refusal wins. It reads only the task and the
/// settings, so it is cheap to run on every attempt and needs no hook.
///
/// # Errors
/// The first [`Refusal`] found.
pub fn refuse_before_token(task: &Task, settings: &Settings) -> Result<Effective, Refusal> {
    check_task_instance_id(task)?;
    check_quantities(&task.resources)?;
    let sized = Sized::of(task, settings)?;
    check_allowlist(task, settings)?;
    if !settings.policy.allow_dag_placement {
        refuse_dag_placement(&task.execution.set_fields())?;
    }
    check_own_fields(task)?;
    if let Some((resource, limit, request)) = sized.resources.limit_below_request() {
        return Err(Refusal::LimitBelowRequest {
            resource,
            limit: limit.to_owned(),
            request: request.to_owned(),
        });
    }
    let source_mode = is_source_mode(task, settings);
    if source_mode {
        check_source(task, settings.source_mode.max_bytes)?;
    } else {
        check_image(&task.image, settings)?;
    }
    check_pod_annotations(&task.execution.annotations, task, source_mode).map_err(|error| {
        Refusal::Invalid {
            field: "execution.annotations",
            error,
        }
    })?;
    Ok(Effective::new(task, settings, sized, source_mode))
}

fn check_allowlist(task: &Task, settings: &Settings) -> Result<(), Refusal> {
    let allowlist = &settings.allowlist;
    let own = &task.execution;
    match &allowlist.fields {
        AllowedFields::All => {}
        AllowedFields::None => {
            if let Some(field) = own.set_fields().into_iter().next() {
                return Err(Refusal::FieldNotAllowed { field });
            }
        }
        AllowedFields::Only(allowed) => {
            if let Some(field) = own
                .set_fields()
                .into_iter()
                .find(|field| !allowed.contains(*field))
            {
                return Err(Refusal::FieldNotAllowed { field });
            }
        }
    }
    let name = &own.service_account;
    if !name.is_empty()
        && *name != settings.task_service_account
        && allowlist
            .service_accounts
            .as_ref()
            .is_some_and(|list| !list.contains(name))
    {
        return Err(Refusal::ServiceAccountNotAllowed { name: name.clone() });
    }
    let name = &own.priority_class_name;
    if !name.is_empty()
        && allowlist
            .priority_classes
            .as_ref()
            .is_some_and(|list| !list.contains(name))
    {
        return Err(Refusal::PriorityClassNotAllowed { name: name.clone() });
    }
    Ok(())
}

/// Checks the task's own execution fields and environment names against what Kubernetes
/// accepts, with the checks a hook's changes pass: labels, annotation keys (lower-cased first),
/// node-selector entries, tolerations, the service account and priority class names (when
/// set), then the environment's variable names.
///
/// # Errors
/// [`Refusal::Invalid`] naming the field, or [`Refusal::InvalidEnvName`].
pub(crate) fn check_own_fields(task: &Task) -> Result<(), Refusal> {
    let own = &task.execution;
    let invalid = |field: &'static str| move |error| Refusal::Invalid { field, error };
    check_entries(Field::Label, &own.labels).map_err(invalid("execution.labels"))?;
    check_entries(Field::Annotation, &own.annotations).map_err(invalid("execution.annotations"))?;
    check_entries(Field::NodeSelector, &own.node_selector)
        .map_err(invalid("execution.node_selector"))?;
    check_tolerations(&own.tolerations).map_err(invalid("execution.tolerations"))?;
    if !own.service_account.is_empty() {
        check_name("service account", &own.service_account)
            .map_err(invalid("execution.service_account"))?;
    }
    if !own.priority_class_name.is_empty() {
        check_name("priority class", &own.priority_class_name)
            .map_err(invalid("execution.priority_class_name"))?;
    }
    for name in task.env.keys() {
        if let Some(problem) = env_name_problem(name) {
            return Err(Refusal::InvalidEnvName {
                name: name.clone(),
                problem,
            });
        }
    }
    Ok(())
}

/// Checks that `annotations`, with those the executor adds to the attempt's pod (the task
/// instance id and, in source mode, the DAG source: [`own_annotations`]), fit the 256 KiB
/// Kubernetes allows a pod's annotations together.
///
/// The built-in refusals run it on the task's own annotations; the pipeline runs it again on
/// the annotations a hook changed, which the chain counted without the pod's own.
///
/// # Errors
/// [`ChangeError::AnnotationsTooLarge`] with the total.
pub(crate) fn check_pod_annotations(
    annotations: &BTreeMap<String, String>,
    task: &Task,
    source_mode: bool,
) -> Result<(), ChangeError> {
    let source = source_mode.then_some(task.source.as_deref()).flatten();
    let own: usize = own_annotations(task.key.task_instance_id_len(), source.map(str::len))
        .map(|(key, value)| key.len() + value)
        .sum();
    check_annotations_size(annotations_bytes(annotations) + own)
}

/// Checks a task's own image. The runtime image of source mode is the install's and is not
/// checked (the caller skips it). An empty image chooses nothing and passes the allowlist, but
/// not the kubernetes executor, whose pod needs one.
fn check_image(image: &str, settings: &Settings) -> Result<(), Refusal> {
    if let Some(allowed) = &settings.allowlist.images {
        if !image.is_empty() && !image_allowed(image, allowed) {
            return Err(Refusal::ImageNotAllowed {
                image: image.to_owned(),
            });
        }
    }
    if matches!(settings.executor, ExecutorSettings::Kubernetes { .. }) {
        let problem = if image.is_empty() {
            Some("a pod needs an image")
        } else if image.trim() != image {
            Some("must not have whitespace around it")
        } else {
            None
        };
        if let Some(problem) = problem {
            return Err(Refusal::InvalidImage {
                image: image.to_owned(),
                problem,
            });
        }
    }
    Ok(())
}

fn check_source(task: &Task, limit: usize) -> Result<(), Refusal> {
    let dag_id = || task.key.dag_id.clone();
    match task.source.as_deref() {
        None | Some("") => Err(Refusal::NoSource { dag_id: dag_id() }),
        Some(source) if source.len() > limit => Err(Refusal::SourceTooLarge {
            dag_id: dag_id(),
            bytes: source.len(),
            limit,
        }),
        Some(_) => Ok(()),
    }
}
