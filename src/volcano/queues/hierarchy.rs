//! A queue against its parent, ancestors, siblings and children (`spec.parent`).

use std::collections::HashSet;
use std::sync::Arc;

use super::super::queue::Queue;
use super::super::resource::{Amounts, format_amount, signed_milli};
use super::super::view::QueueView;
use super::{QueueSettings, is_top_level};

/// The pods allocated to a queue (`status.allocated.pods`), rounded up to whole pods.
pub(super) fn pods_allocated(queue: &Queue) -> i128 {
    queue
        .status
        .allocated
        .get("pods")
        .and_then(|pods| signed_milli(&pods.0))
        .map_or(0, |milli| (milli + 999).div_euclid(1000))
}

/// The parent: not the queue itself, within the depth limit, in the cache, and, when it has
/// no children yet, without pods of its own.
pub(super) fn check_parent(
    queue: &Queue,
    view: &dyn QueueView,
    settings: &QueueSettings,
) -> Result<(), String> {
    let name = queue.name();
    let parent_name = queue.spec.parent.as_str();
    if is_top_level(parent_name) {
        return Ok(());
    }
    if parent_name == name {
        return Err(format!("queue {name} cannot use itself as parent"));
    }
    check_depth(queue, view, settings.max_queue_depth)?;
    let parent = view
        .queue(parent_name)
        .map_err(|error| format!("failed to get parent queue of queue {name}: {error}"))?;
    let siblings = view
        .children(parent_name)
        .map_err(|error| format!("failed to list child queues of queue {parent_name}: {error}"))?;
    let pods = pods_allocated(&parent);
    if siblings.is_empty() && pods != 0 {
        return Err(format!(
            "queue {parent_name} cannot be the parent queue of queue {name} because it has allocated Pods: {pods}"
        ));
    }
    Ok(())
}

/// The queue's depth below `root` (itself 1, each ancestor one more) is at most `max_depth`.
fn check_depth(queue: &Queue, view: &dyn QueueView, max_depth: usize) -> Result<(), String> {
    let name = queue.name();
    let mut depth = 1;
    let mut parent = queue.spec.parent.clone();
    while !is_top_level(&parent) {
        depth += 1;
        if depth > max_depth {
            return Err(format!(
                "queue {name} exceeds the maximum allowed depth of {max_depth}"
            ));
        }
        let ancestor = view.queue(&parent).map_err(|error| {
            format!("failed to get parent queue {parent} of queue {name}: {error}")
        })?;
        parent.clone_from(&ancestor.spec.parent);
    }
    Ok(())
}

/// The queue's resources: its capability within its nearest ancestors', its and its siblings'
/// guarantee and deserved within its parent's, and its children's within its own.
pub(super) fn check_resources(queue: &Queue, view: &dyn QueueView) -> Result<(), String> {
    let parent_name = queue.spec.parent.as_str();
    if !is_top_level(parent_name) {
        let parent = view
            .queue(parent_name)
            .map_err(|error| format!("parent queue {parent_name} not found: {error}"))?;
        check_against_ancestors(queue, view)?;
        let siblings = view
            .children(parent_name)
            .map_err(|error| format!("failed to get sibling queues: {error}"))?;
        let others = siblings
            .iter()
            .map(|sibling| &**sibling)
            .filter(|sibling| sibling.name() != queue.name());
        check_sums(
            &parent,
            others.chain(std::iter::once(queue)),
            "parent queue",
        )?;
    }
    let children = view
        .children(queue.name())
        .map_err(|error| format!("failed to get child queues: {error}"))?;
    if !children.is_empty() {
        check_against_descendants(queue, &children, view)?;
        check_sums(queue, children.iter().map(|child| &**child), "queue")?;
    }
    Ok(())
}

/// Each resource of the queue's capability is within the nearest ancestor that sets it.
fn check_against_ancestors(queue: &Queue, view: &dyn QueueView) -> Result<(), String> {
    let own = Amounts::of(&queue.spec.capability);
    for resource in own.names() {
        let value = own.get(&resource);
        if let Some(limit) = nearest_ancestor_capability(queue, &resource, view) {
            if value > limit {
                return Err(format!(
                    "queue {} capability[{resource}]={} exceeds its ancestor's capability={}",
                    queue.name(),
                    format_amount(&resource, value),
                    format_amount(&resource, limit)
                ));
            }
        }
    }
    Ok(())
}

/// The capability of the nearest ancestor that sets `resource` above zero; `None` when none
/// does, an ancestor is missing, or the parents loop.
fn nearest_ancestor_capability(
    queue: &Queue,
    resource: &str,
    view: &dyn QueueView,
) -> Option<i128> {
    let mut seen = HashSet::new();
    let mut parent = queue.spec.parent.clone();
    while !is_top_level(&parent) && seen.insert(parent.clone()) {
        let ancestor = view.queue(&parent).ok()?;
        let value = Amounts::of(&ancestor.spec.capability).get(resource);
        if value > 0 {
            return Some(value);
        }
        parent.clone_from(&ancestor.spec.parent);
    }
    None
}

/// Each resource of the queue's capability is at least the largest capability set below it.
fn check_against_descendants(
    queue: &Queue,
    children: &[Arc<Queue>],
    view: &dyn QueueView,
) -> Result<(), String> {
    let own = Amounts::of(&queue.spec.capability);
    for resource in own.names() {
        let value = own.get(&resource);
        let mut seen = HashSet::from([queue.name().to_owned()]);
        let largest = children
            .iter()
            .map(|child| subtree_capability(child, &resource, view, &mut seen))
            .max()
            .unwrap_or(0);
        if value < largest {
            return Err(format!(
                "queue {} capability[{resource}]={} is smaller than its descendants' max capability={}",
                queue.name(),
                format_amount(&resource, value),
                format_amount(&resource, largest)
            ));
        }
    }
    Ok(())
}

/// The queue's own capability of `resource` when set above zero, else the largest below it;
/// queues already `seen` (a loop in the cache) count as zero.
fn subtree_capability(
    queue: &Queue,
    resource: &str,
    view: &dyn QueueView,
    seen: &mut HashSet<String>,
) -> i128 {
    let own = Amounts::of(&queue.spec.capability).get(resource);
    if own > 0 {
        return own;
    }
    if !seen.insert(queue.name().to_owned()) {
        return 0;
    }
    // Volcano skips a subtree whose children cannot be read.
    let children = view.children(queue.name()).unwrap_or_default();
    children
        .iter()
        .map(|child| subtree_capability(child, resource, view, seen))
        .max()
        .unwrap_or(0)
        .max(0)
}

/// The children's guarantee and deserved, summed in order, never exceed the parent's.
fn check_sums<'q>(
    parent: &Queue,
    children: impl Iterator<Item = &'q Queue>,
    who: &str,
) -> Result<(), String> {
    let guarantee_limit = Amounts::of(&parent.spec.guarantee.resource);
    let deserved_limit = Amounts::of(&parent.spec.deserved);
    let mut guarantee = Amounts::default();
    let mut deserved = Amounts::default();
    for child in children {
        guarantee.add(&Amounts::of(&child.spec.guarantee.resource));
        if guarantee_limit.is_exceeded_by(&guarantee) {
            return Err(format!(
                "{who} {} validation failed: sum of children's guarantee ({guarantee}) exceeds parent's guarantee limit ({guarantee_limit})",
                parent.name()
            ));
        }
        deserved.add(&Amounts::of(&child.spec.deserved));
        if deserved_limit.is_exceeded_by(&deserved) {
            return Err(format!(
                "{who} {} validation failed: sum of children's deserved ({deserved}) exceeds parent's deserved limit ({deserved_limit})",
                parent.name()
            ));
        }
    }
    Ok(())
}
