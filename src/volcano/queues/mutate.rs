//! `/queues/mutate`: a new queue's defaults.

use json_patch::PatchOperation;
use serde_json::Value;

use super::super::patch::{add, onto_empty_spec};
use super::super::queue::ROOT_QUEUE;
use super::super::queue::{Queue, QueueSpec};
use super::super::review::{Operation, Refusal, Review};
use super::{HIERARCHY, HIERARCHY_WEIGHTS};

/// Volcano's `/queues/mutate` for one request (CREATE only): the patch in Volcano's order.
///
/// When both hierarchy annotations are set and the hierarchy does not start with `root`, both
/// get a `root` level (`root/` and `1/` in front); then `spec.reclaimable` is set to `true`
/// when unset and `spec.weight` to 1 when 0. Nothing to change is an empty patch. A queue
/// whose spec is empty, absent or `null` gets the spec's defaults as one add of the whole spec,
/// where Volcano's adds below `/spec` could not be applied to an absent one.
///
/// # Errors
/// [`Refusal::UnknownOperation`] for any operation but CREATE; [`Refusal::Undecodable`] when
/// the request has no object.
pub fn mutate_queue(review: &Review<'_, Queue>) -> Result<Vec<PatchOperation>, Refusal> {
    if review.operation != Operation::Create {
        return Err(Refusal::unknown_operation(&review.operation, "`CREATE`"));
    }
    let queue = review.object.ok_or_else(|| Refusal::missing("object"))?;
    let mut patch = Vec::new();
    let hierarchy = queue.annotation(HIERARCHY);
    let weights = queue.annotation(HIERARCHY_WEIGHTS);
    // Volcano tests the prefix `root` as text, so `rooted/a` is left as it is.
    if !hierarchy.is_empty() && !weights.is_empty() && !hierarchy.starts_with(ROOT_QUEUE) {
        patch.push(add(
            &["metadata", "annotations", HIERARCHY],
            Value::from(format!("{ROOT_QUEUE}/{hierarchy}")),
        ));
        patch.push(add(
            &["metadata", "annotations", HIERARCHY_WEIGHTS],
            Value::from(format!("1/{weights}")),
        ));
    }
    if queue.spec.reclaimable.is_none() {
        patch.push(add(&["spec", "reclaimable"], Value::Bool(true)));
    }
    if queue.spec.weight == 0 {
        patch.push(add(&["spec", "weight"], Value::from(1)));
    }
    if queue.spec == QueueSpec::default() {
        return Ok(onto_empty_spec(patch));
    }
    Ok(patch)
}
