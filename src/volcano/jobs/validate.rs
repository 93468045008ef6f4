//! `/jobs/validate`: a new job's tasks, policies, plugins, volumes and queue; what an update
//! may change.

use std::collections::HashSet;

use serde_json::Value;

use super::super::gates::FeatureGates;
use super::super::job::{BOTH_TIERS, Job, JobSpec, NetworkTopologySpec, TaskSpec};
use super::super::names::{go_list, qualified_name_errors};
use super::super::queue::ROOT_QUEUE;
use super::super::review::{Operation, Refusal, Review};
use super::super::view::QueueView;
use super::derived::derived_name_problems;
use super::policies::{is_dag, policies_problem, volumes_problem};
use super::semantic::canonical;
use super::template::template_problems;

/// The job plugins Volcano's controller knows.
const PLUGINS: [&str; 8] = [
    "ssh",
    "env",
    "svc",
    "tensorflow",
    "mpi",
    "pytorch",
    "hcclrank",
    "ray",
];
/// The `mpi` plugin's master task when its arguments name none.
const DEFAULT_MPI_MASTER: &str = "master";
/// Why an update changing anything else is refused.
const FIXED_FIELDS: &str = "job updates may not change fields other than `minAvailable`, `tasks[*].replicas under spec` and `PriorityClassName`";
/// Volcano's `/jobs/validate` for one request (CREATE or UPDATE).
///
/// CREATE refuses a job without tasks or whose `mpi` plugin names a missing master task, and
/// otherwise reports every problem at once, in Volcano's order and words: network topology,
/// each task's (`minAvailable` ≤ replicas, unique name, policies, pod name, pod template,
/// partition policy), the job's name, `minAvailable` ≤ total replicas, policies, unknown
/// plugins, volumes, the queue (in the cache, `Open`, not `root`, without child queues) and
/// the task dependencies (a DAG); then, beyond Volcano, the names the job's controller and
/// plugins derive from it. UPDATE allows only `minAvailable`, task `replicas` and
/// `minAvailable`, and `priorityClassName` to change, and reads no queue.
///
/// # Errors
/// [`Refusal::Denied`] with Volcano's message; [`Refusal::UnknownOperation`] for any other
/// operation; [`Refusal::Undecodable`] when the object (or, for UPDATE, the old object) is
/// missing.
pub fn validate_job(
    review: &Review<'_, Job>,
    queues: &dyn QueueView,
    gates: &FeatureGates,
) -> Result<(), Refusal> {
    match review.operation {
        Operation::Create => {
            let job = review.object.ok_or_else(|| Refusal::missing("object"))?;
            let message = create_problems(job, review.namespace, Some(queues), gates);
            match message.trim() {
                "" => Ok(()),
                message => Err(Refusal::denied(message)),
            }
        }
        Operation::Update => {
            let job = review.object.ok_or_else(|| Refusal::missing("object"))?;
            let old = review
                .old_object
                .ok_or_else(|| Refusal::missing("oldObject"))?;
            update_problem(old, job).map_or(Ok(()), |message| Err(Refusal::Denied(message)))
        }
        _ => Err(Refusal::unknown_operation(
            &review.operation,
            "'CREATE' or 'UPDATE'",
        )),
    }
}

/// Every problem of `job` that needs no cluster (all of `/jobs/validate`'s CREATE checks but
/// the queue's), concatenated and trimmed: how a cronjob's job template is judged, since the
/// queue it names is read when each job is created from it.
pub(crate) fn template_job_problems(job: &Job, namespace: &str, gates: &FeatureGates) -> String {
    create_problems(job, namespace, None, gates)
        .trim()
        .to_owned()
}

/// Every problem of a new job, concatenated as Volcano builds its message (untrimmed); the queue
/// is checked only when `queues` is given.
fn create_problems(
    job: &Job,
    namespace: &str,
    queues: Option<&dyn QueueView>,
    gates: &FeatureGates,
) -> String {
    let spec = &job.spec;
    let name = job.metadata.name.as_deref().unwrap_or_default();
    if spec.tasks.is_empty() {
        return "No task specified in job spec".to_owned();
    }
    if let Some(arguments) = spec.plugins.as_ref().and_then(|plugins| plugins.get("mpi")) {
        let master = mpi_master(arguments);
        if !spec.tasks.iter().any(|task| task.name == master) {
            return "The specified mpi master task was not found".to_owned();
        }
    }
    let namespace = job
        .metadata
        .namespace
        .as_deref()
        .filter(|namespace| !namespace.is_empty())
        .unwrap_or(namespace);
    let mut message = topology_problem(spec.network_topology.as_ref()).to_owned();
    let mut names = HashSet::new();
    let mut total_replicas: i64 = 0;
    // As Volcano, only the tasks up to a repeated name (it included) say whether any task
    // depends on another.
    let mut depends = false;
    for (index, task) in spec.tasks.iter().enumerate() {
        depends |= task.depends_on.is_some();
        if task.min_available.is_some_and(|min| min > task.replicas) {
            message.push_str(&format!(
                " 'minAvailable' is greater than 'replicas' in task: {}, job: {name};",
                task.name
            ));
        }
        total_replicas += i64::from(task.replicas);
        if !names.insert(task.name.as_str()) {
            message.push_str(&format!(" duplicated task name {};", task.name));
            break;
        }
        if let Some(problem) = policies_problem(&task.policies, "spec.tasks.policies") {
            message.push_str(&problem);
        }
        let pod = [name, "-", &task.name, "-", &index.to_string()].concat();
        let problems = qualified_name_errors(&pod);
        if !problems.is_empty() {
            message.push_str(&format!(
                "create pod with name {pod} validate failed {};",
                go_list(&problems)
            ));
        }
        message.push_str(&template_problems(task, index, namespace, gates));
        message.push_str(&partition_problem(task, name));
    }
    let problems = qualified_name_errors(name);
    if !problems.is_empty() {
        message.push_str(&format!(
            "create job with name {name} validate failed {}",
            go_list(&problems)
        ));
    }
    if total_replicas < i64::from(spec.min_available) {
        message.push_str(" job 'minAvailable' should not be greater than total replicas in tasks;");
    }
    if let Some(problem) = policies_problem(&spec.policies, "spec.policies") {
        message.push_str(&problem);
    }
    for plugin in spec.plugins.iter().flat_map(|plugins| plugins.keys()) {
        if !PLUGINS.contains(&plugin.as_str()) {
            message.push_str(&format!(" unable to find job plugin: {plugin};"));
        }
    }
    message.extend(volumes_problem(&spec.volumes));
    if let Some(queues) = queues {
        message.push_str(&queue_problems(&spec.queue, queues));
    }
    if depends && !is_dag(job) {
        message.push_str(
            " job has dependencies between tasks, but doesn't form a directed acyclic graph(DAG);",
        );
    }
    for problem in derived_name_problems(job) {
        message.push_str(&format!(" {problem};"));
    }
    message
}

/// The master task the `mpi` plugin's arguments name, read as Go's flag package reads them
/// (`--master=x`, `-master x`; parsing stops at the first non-flag or unknown flag).
fn mpi_master(arguments: &[String]) -> &str {
    let mut master = DEFAULT_MPI_MASTER;
    let mut rest = arguments.iter();
    while let Some(argument) = rest.next() {
        let Some(flag) = argument
            .strip_prefix("--")
            .or_else(|| argument.strip_prefix('-'))
            .filter(|flag| !flag.is_empty() && !flag.starts_with(['-', '=']))
        else {
            break;
        };
        let (flag, inline) = match flag.split_once('=') {
            Some((flag, value)) => (flag, Some(value)),
            None => (flag, None),
        };
        if flag != "master" && flag != "worker" && flag != "port" {
            break;
        }
        let Some(value) = inline.or_else(|| rest.next().map(String::as_str)) else {
            break;
        };
        match flag {
            "master" => master = value,
            "port" if value.parse::<i64>().is_err() => break,
            _ => {}
        }
    }
    master
}

fn topology_problem(topology: Option<&NetworkTopologySpec>) -> &'static str {
    if topology.is_some_and(NetworkTopologySpec::sets_both_tiers) {
        BOTH_TIERS
    } else {
        ""
    }
}

/// The partition policy's first problem and its topology's, in Volcano's words (no separator).
fn partition_problem(task: &TaskSpec, job: &str) -> String {
    let Some(policy) = &task.partition_policy else {
        return String::new();
    };
    let of = format!("in task: {}, job: {job}", task.name);
    let size = i64::from(policy.partition_size);
    let mut message = if policy.total_partitions <= 0 {
        format!("'TotalPartitions' must be greater than 0 {of}")
    } else if policy.partition_size <= 0 {
        format!("'PartitionSize' must be greater than 0 {of}")
    } else if i64::from(task.replicas) != i64::from(policy.total_partitions) * size {
        format!("'Replicas' are not equal to TotalPartitions*PartitionSize {of}")
    } else if task.min_available.is_some_and(|min| {
        policy.min_partitions > 0 && i64::from(policy.min_partitions) * size != i64::from(min)
    }) {
        format!("'MinAvailable' is not equal to MinPartitions*PartitionSize {of}")
    } else {
        String::new()
    };
    message.push_str(topology_problem(policy.network_topology.as_ref()));
    message
}

/// The queue is in the cache, open, not `root`, and has no child queues.
fn queue_problems(name: &str, queues: &dyn QueueView) -> String {
    let queue = match queues.queue(name) {
        Ok(queue) => queue,
        Err(error) => return format!(" unable to find job queue: {error};"),
    };
    let mut message = String::new();
    if queue.status.state != "Open" {
        message.push_str(&format!(
            " can only submit job to queue with state `Open`, queue `{}` status is `{}`;",
            queue.name(),
            queue.status.state
        ));
    }
    if queue.name() == ROOT_QUEUE {
        message.push_str(" can not submit job to root queue;");
        return message;
    }
    match queues.children(queue.name()) {
        Err(error) => message.push_str(&format!(
            "failed to get child queues for queue {}: {error};",
            queue.name()
        )),
        Ok(children) if !children.is_empty() => message.push_str(&format!(
            " can only submit job to leaf queue, queue `{}` has {} child queues;",
            queue.name(),
            children.len()
        )),
        Ok(_) => {}
    }
    message
}

/// The first reason an update is refused, in Volcano's words.
fn update_problem(old: &Job, new: &Job) -> Option<String> {
    let mut total_replicas: i64 = 0;
    let name = new.metadata.name.as_deref().unwrap_or_default();
    for task in &new.spec.tasks {
        if task.replicas < 0 {
            return Some(format!("'replicas' must be >= 0 in task: {}", task.name));
        }
        match task.min_available {
            Some(min) if min < 0 => {
                return Some(format!(
                    "'minAvailable' must be >= 0 in task: {}",
                    task.name
                ));
            }
            Some(min) if min > task.replicas => {
                return Some(format!(
                    "'minAvailable' must be <= 'replicas' in task: {}",
                    task.name
                ));
            }
            _ => {}
        }
        let problem = partition_problem(task, name);
        if !problem.is_empty() {
            return Some(problem);
        }
        total_replicas += i64::from(task.replicas);
    }
    if i64::from(new.spec.min_available) > total_replicas {
        return Some("job 'minAvailable' must not be greater than total replicas".to_owned());
    }
    if new.spec.min_available < 0 {
        return Some("job 'minAvailable' must be >= 0".to_owned());
    }
    let topology = topology_problem(new.spec.network_topology.as_ref());
    if !topology.is_empty() {
        return Some(topology.to_owned());
    }
    if old.spec.tasks.len() != new.spec.tasks.len() {
        return Some("job updates may not add or remove tasks".to_owned());
    }
    if semantic(&comparable(&new.spec, &old.spec)) != semantic(&comparable(&old.spec, &old.spec)) {
        return Some(FIXED_FIELDS.to_owned());
    }
    None
}

/// `spec` with what an update may change taken from `old`, claim names of volumes with a
/// claim blanked (the controller fills them).
fn comparable(spec: &JobSpec, old: &JobSpec) -> JobSpec {
    let mut spec = spec.clone();
    spec.min_available = old.min_available;
    spec.priority_class_name
        .clone_from(&old.priority_class_name);
    for (task, old) in spec.tasks.iter_mut().zip(&old.tasks) {
        task.replicas = old.replicas;
        task.min_available = old.min_available;
    }
    for volume in &mut spec.volumes {
        if volume.volume_claim.is_some() {
            volume.volume_claim_name.clear();
        }
    }
    spec
}

/// The spec as apimachinery's semantic equality sees it (see [`canonical`]).
fn semantic(spec: &JobSpec) -> Value {
    canonical(serde_json::to_value(spec).unwrap_or(Value::Null))
}
