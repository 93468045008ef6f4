//! A job's lifecycle policies, volumes and task dependencies, as Volcano checks them.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use super::super::job::{Job, LifecyclePolicy, VolumeSpec};
use super::super::names::{dns_subdomain, go_list};
use super::super::review::{invalid, quoted};

/// The events a policy may name (Volcano's externally usable ones).
const EVENTS: [&str; 8] = [
    "*",
    "PodFailed",
    "PodEvicted",
    "PodPending",
    "Unknown",
    "TaskCompleted",
    "TaskFailed",
    "JobUpdated",
];

/// The actions a policy may take (Volcano's externally usable ones).
const ACTIONS: [&str; 8] = [
    "AbortJob",
    "RestartJob",
    "RestartTask",
    "RestartPod",
    "RestartPartition",
    "TerminateJob",
    "CompleteJob",
    "ResumeJob",
];

/// The first problem of `policies` (and the `*` rule), with the valid events and actions, in
/// Volcano's words; `path` names the list (`spec.policies`, `spec.tasks.policies`).
pub(super) fn policies_problem(policies: &[LifecyclePolicy], path: &str) -> Option<String> {
    let mut errors = Vec::new();
    let mut events_seen = HashSet::new();
    let mut codes_seen = HashSet::new();
    for policy in policies {
        let has_event = !policy.event.is_empty() || !policy.events.is_empty();
        if has_event && policy.exit_code.is_some() {
            errors.push("must not specify event and exitCode simultaneously".to_owned());
            break;
        }
        let Some(code) = policy.exit_code.filter(|_| !has_event) else {
            if !has_event {
                errors.push("either event and exitCode should be specified".to_owned());
                break;
            }
            if let Some(error) = event_problem(policy, path, &mut events_seen) {
                errors.push(error);
                break;
            }
            continue;
        };
        if code == 0 {
            errors.push("0 is not a valid error code".to_owned());
            break;
        }
        if !codes_seen.insert(code) {
            errors.push(format!("duplicate exitCode {code}"));
            break;
        }
    }
    if events_seen.contains("*") && events_seen.len() > 1 {
        errors.push("if there's * here, no other policy should be here".to_owned());
    }
    if errors.is_empty() {
        return None;
    }
    Some(format!(
        "{} valid events are [{}], valid actions are [{}];",
        multierror(&errors),
        EVENTS.join(" "),
        ACTIONS.join(" ")
    ))
}

/// The first bad event, bad action or repeated event of one policy.
fn event_problem<'a>(
    policy: &'a LifecyclePolicy,
    path: &str,
    seen: &mut HashSet<&'a str>,
) -> Option<String> {
    // In order, each once: a set beside the list keeps a long list linear.
    let mut events: Vec<&str> = Vec::new();
    let mut listed = HashSet::new();
    let named = policy.events.iter().map(String::as_str);
    for event in named.chain((!policy.event.is_empty()).then_some(policy.event.as_str())) {
        if listed.insert(event) {
            events.push(event);
        }
    }
    for event in events {
        if !EVENTS.contains(&event) {
            return Some(invalid(path, &quoted(event), "invalid policy event"));
        }
        if !ACTIONS.contains(&policy.action.as_str()) {
            return Some(invalid(
                path,
                &quoted(&policy.action),
                "invalid policy action",
            ));
        }
        if !seen.insert(event) {
            return Some(format!("duplicate event {event}  across different policy"));
        }
    }
    None
}

/// Several errors as hashicorp's multierror prints them.
fn multierror(errors: &[String]) -> String {
    if let [one] = errors {
        return format!("1 error occurred:\n\t* {one}\n\n");
    }
    let points: Vec<String> = errors.iter().map(|error| format!("* {error}")).collect();
    format!(
        "{} errors occurred:\n\t{}\n\n",
        errors.len(),
        points.join("\n\t")
    )
}

/// The first problem of the job's volumes: a mount path present and unique, and a claim or an
/// existing claim's (valid) name, not both.
pub(super) fn volumes_problem(volumes: &[VolumeSpec]) -> Option<String> {
    let mut paths = HashSet::new();
    for volume in volumes {
        if volume.mount_path.is_empty() {
            return Some(" mountPath is required;".to_owned());
        }
        if paths.contains(volume.mount_path.as_str()) {
            return Some(format!(" duplicated mountPath: {};", volume.mount_path));
        }
        let name = &volume.volume_claim_name;
        if volume.volume_claim.is_none() && name.is_empty() {
            return Some(" either VolumeClaim or VolumeClaimName must be specified;".to_owned());
        }
        if !name.is_empty() {
            if volume.volume_claim.is_some() {
                return Some("conflict: If you want to use an existing PVC, just specify VolumeClaimName.If you want to create a new PVC, you do not need to specify VolumeClaimName".to_owned());
            }
            let problems = dns_subdomain(name);
            if !problems.is_empty() {
                return Some(format!(
                    "invalid VolumeClaimName {name} : {}",
                    go_list(&problems)
                ));
            }
        }
        paths.insert(volume.mount_path.as_str());
    }
    None
}

/// Whether the tasks' `dependsOn` form a directed acyclic graph, counted as Volcano counts it:
/// a task naming a missing task, or one task twice, never becomes ready; a repeated task name
/// keeps the last task's count, and a count taken below zero by a loop never comes back to
/// zero, so the repeated task is not counted ready twice.
pub(super) fn is_dag(job: &Job) -> bool {
    let tasks = &job.spec.tasks;
    let mut waiting: HashMap<&str, i64> = HashMap::new();
    let mut dependents: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for task in tasks {
        let names = task.depends_on.as_ref().map_or(&[][..], |d| &d.name[..]);
        let count = i64::try_from(names.len()).unwrap_or(i64::MAX);
        waiting.insert(task.name.as_str(), count);
        for name in names {
            dependents
                .entry(name.as_str())
                .or_default()
                .insert(&task.name);
        }
    }
    let mut ready: Vec<&str> = waiting
        .iter()
        .filter(|(_, count)| **count == 0)
        .map(|(name, _)| *name)
        .collect();
    let mut done = 0;
    while let Some(name) = ready.pop() {
        done += 1;
        for dependent in dependents.remove(name).unwrap_or_default() {
            if let Some(count) = waiting.get_mut(dependent) {
                *count -= 1;
                if *count == 0 {
                    ready.push(dependent);
                }
            }
        }
    }
    done == tasks.len()
}
