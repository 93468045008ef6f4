//! `/podgroups/validate` and `/podgroups/mutate`: Volcano's rules for pod groups.

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, PatchOperation};
use serde_json::Value;

use super::job::{BOTH_TIERS, NetworkTopologySpec};
use super::podgroup::PodGroup;
use super::queue::DEFAULT_QUEUE;
use super::review::{Operation, Refusal, Review};
use super::view::{QueueView, ViewError};

/// The namespace annotation naming the queue of the namespace's pod groups.
pub const QUEUE_NAME_ANNOTATION: &str = "scheduling.volcano.sh/queue-name";

/// Volcano's `/podgroups/validate` for one request (CREATE only).
///
/// The queue, when named, must be in the cache and `Open`; the network topology, of the group
/// and of its sub-group policies, must not set both `highestTierAllowed` and
/// `highestTierName`. Both problems are reported at once, joined with `; `.
///
/// # Errors
/// [`Refusal::Denied`] with Volcano's message; [`Refusal::UnknownOperation`] for any operation
/// but CREATE; [`Refusal::Undecodable`] when the request has no object.
pub fn validate_podgroup(
    review: &Review<'_, PodGroup>,
    view: &dyn QueueView,
) -> Result<(), Refusal> {
    if review.operation != Operation::Create {
        return Err(Refusal::unknown_operation(&review.operation, "`CREATE`"));
    }
    let group = review.object.ok_or_else(|| Refusal::missing("object"))?;
    let problems: Vec<String> = [
        queue_problem(&group.spec.queue, view),
        topology_problem(group),
    ]
    .into_iter()
    .flatten()
    .collect();
    if problems.is_empty() {
        Ok(())
    } else {
        Err(Refusal::Denied(problems.join("; ")))
    }
}

/// The queue, when named, is in the cache and open.
fn queue_problem(name: &str, view: &dyn QueueView) -> Option<String> {
    if name.is_empty() {
        return None;
    }
    match view.queue(name) {
        Err(error) => Some(format!("unable to find queue: {error}")),
        Ok(queue) if queue.status.state != "Open" => Some(format!(
            "can only submit PodGroup to queue with state `Open`, queue `{}` status is `{}`.",
            queue.name(),
            queue.status.state
        )),
        Ok(_) => None,
    }
}

/// The group's topology and its first offending sub-group policy, in one sentence each.
fn topology_problem(group: &PodGroup) -> Option<String> {
    let mut problems = Vec::new();
    if group
        .spec
        .network_topology
        .as_ref()
        .is_some_and(NetworkTopologySpec::sets_both_tiers)
    {
        problems.push(format!("{BOTH_TIERS}."));
    }
    let policies = &group.spec.sub_group_policy;
    if let Some(policy) = policies.iter().find(|policy| {
        policy
            .network_topology
            .as_ref()
            .is_some_and(NetworkTopologySpec::sets_both_tiers)
    }) {
        problems.push(format!(
            "in subGroupPolicy '{}': {BOTH_TIERS}.",
            policy.name
        ));
    }
    (!problems.is_empty()).then(|| problems.join(" "))
}

/// Whether `/podgroups/mutate` needs the pod group's namespace for `operation`: only to create
/// a group in the `default` queue (any other operation is refused without it).
pub fn podgroup_reads_namespace(operation: &Operation, group: &PodGroup) -> bool {
    *operation == Operation::Create && group.spec.queue == DEFAULT_QUEUE
}

/// Volcano's `/podgroups/mutate` for one request (CREATE only).
///
/// A pod group in the `default` queue takes the queue its namespace's
/// `scheduling.volcano.sh/queue-name` annotation names. `namespace_queue` is that annotation
/// as the server read it (`Ok(None)` when the namespace has none); the server reads it only
/// when [`podgroup_reads_namespace`] says so, and passes anything otherwise. A failed read
/// changes nothing and still allows the pod group, as in Volcano.
///
/// # Errors
/// [`Refusal::UnknownOperation`] for any operation but CREATE; [`Refusal::Undecodable`] when
/// the request has no object.
pub fn mutate_podgroup(
    review: &Review<'_, PodGroup>,
    namespace_queue: Result<Option<String>, ViewError>,
) -> Result<Vec<PatchOperation>, Refusal> {
    if review.operation != Operation::Create {
        return Err(Refusal::unknown_operation(&review.operation, "`CREATE`"));
    }
    let group = review.object.ok_or_else(|| Refusal::missing("object"))?;
    if !podgroup_reads_namespace(&review.operation, group) {
        return Ok(Vec::new());
    }
    Ok(match namespace_queue {
        Ok(Some(queue)) => vec![PatchOperation::Add(AddOperation {
            path: PointerBuf::from_tokens(["spec", "queue"]),
            value: Value::from(queue),
        })],
        Ok(None) | Err(_) => Vec::new(),
    })
}
