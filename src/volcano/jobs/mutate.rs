//! `/jobs/mutate`: a new job's defaults.

use json_patch::PatchOperation;
use serde_json::Value;

use super::super::DEFAULT_SCHEDULER;
use super::super::job::{Job, JobSpec, TaskSpec};
use super::super::patch::{add, onto_empty_spec, replace};
use super::super::queue::DEFAULT_QUEUE;
use super::super::review::{Operation, Refusal, Review};
use super::NEEDS_SVC;

/// The retries of a job or task that sets none.
const DEFAULT_MAX_RETRY: i32 = 3;

/// Volcano's `/jobs/mutate` for one request (CREATE only): the patch in Volcano's order.
///
/// `/spec/queue` `default` when empty; `/spec/schedulerName` the first of `scheduler_names`
/// (`volcano` when there is none) when empty; `/spec/maxRetry` 3 when 0; one replace of
/// `/spec/tasks` when a task changes (name `default<index>` when empty, `dnsPolicy`
/// `ClusterFirstWithHostNet` for host-network pods without one, `minAvailable` from the
/// partition policy when it sets `minPartitions`, else the replicas, `maxRetry` 3 when 0);
/// `/spec/minAvailable` the sum of the tasks' when 0; a replace of `/spec/plugins` whenever
/// plugins are set, adding `svc` for tensorflow, mpi, pytorch and ray and `ssh` for mpi. A job
/// whose spec is empty, absent or `null` gets those defaults as one add of the whole spec,
/// where Volcano's adds below `/spec` could not be applied to an absent one.
///
/// # Errors
/// [`Refusal::UnknownOperation`] for any operation but CREATE; [`Refusal::Undecodable`] when
/// the request has no object.
pub fn mutate_job(
    review: &Review<'_, Job>,
    scheduler_names: &[String],
) -> Result<Vec<PatchOperation>, Refusal> {
    if review.operation != Operation::Create {
        return Err(Refusal::unknown_operation(&review.operation, "'CREATE'"));
    }
    let job = review.object.ok_or_else(|| Refusal::missing("object"))?;
    let spec = &job.spec;
    let mut patch = Vec::new();
    if spec.queue.is_empty() {
        patch.push(add(&["spec", "queue"], Value::from(DEFAULT_QUEUE)));
    }
    if spec.scheduler_name.is_empty() {
        let name = scheduler_names
            .first()
            .map_or(DEFAULT_SCHEDULER, String::as_str);
        patch.push(add(&["spec", "schedulerName"], Value::from(name)));
    }
    if spec.max_retry == 0 {
        patch.push(add(&["spec", "maxRetry"], Value::from(DEFAULT_MAX_RETRY)));
    }
    let (tasks, changed) = default_tasks(&spec.tasks);
    if changed {
        let value = serde_json::to_value(&tasks).map_err(|error| Refusal::Undecodable {
            field: "object",
            at: "spec.tasks".to_owned(),
            reason: error.to_string(),
        })?;
        patch.push(replace(&["spec", "tasks"], value));
    }
    if spec.min_available == 0 {
        // The sum is taken after the task defaults, as Volcano's mutation of its own copy does,
        // in 64 bits where Volcano's int32 wraps; a sum past int32 is refused, since the field
        // could not hold it and no Go client could read the job back.
        let sum: i64 = tasks
            .iter()
            .map(|task| i64::from(task.min_available.unwrap_or(task.replicas)))
            .sum();
        if i32::try_from(sum).is_err() {
            return Err(Refusal::Denied(format!(
                "spec.minAvailable: Invalid value: {sum}: the sum of the tasks' minAvailable \
                 (replicas where unset) must fit in a 32-bit integer"
            )));
        }
        patch.push(add(&["spec", "minAvailable"], Value::from(sum)));
    }
    if let Some(plugins) = &spec.plugins {
        let mut plugins = plugins.clone();
        if NEEDS_SVC.iter().any(|name| plugins.contains_key(*name)) {
            plugins.entry("svc".to_owned()).or_default();
        }
        if plugins.contains_key("mpi") {
            plugins.entry("ssh".to_owned()).or_default();
        }
        patch.push(replace(&["spec", "plugins"], serde_json::json!(plugins)));
    }
    if *spec == JobSpec::default() {
        return Ok(onto_empty_spec(patch));
    }
    Ok(patch)
}

/// The tasks with their defaults, and whether any changed.
fn default_tasks(tasks: &[TaskSpec]) -> (Vec<TaskSpec>, bool) {
    let mut changed = false;
    let tasks = tasks
        .iter()
        .enumerate()
        .map(|(index, task)| {
            let mut task = task.clone();
            if task.name.is_empty() {
                task.name = format!("default{index}");
                changed = true;
            }
            if let Some(pod) = task.template.spec.as_mut() {
                if pod.host_network == Some(true)
                    && pod.dns_policy.as_deref().unwrap_or("").is_empty()
                {
                    pod.dns_policy = Some("ClusterFirstWithHostNet".to_owned());
                    changed = true;
                }
            }
            if task.min_available.is_none() {
                let partitions = task
                    .partition_policy
                    .as_ref()
                    .filter(|policy| policy.min_partitions > 0);
                task.min_available = Some(match partitions {
                    Some(policy) => policy.min_partitions.saturating_mul(policy.partition_size),
                    None => task.replicas,
                });
                changed = true;
            }
            if task.max_retry == 0 {
                task.max_retry = DEFAULT_MAX_RETRY;
                changed = true;
            }
            task
        })
        .collect();
    (tasks, changed)
}
