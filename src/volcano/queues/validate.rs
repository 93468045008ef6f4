//! `/queues/validate`: a queue's own fields, its place in the hierarchy, and deletion.

use super::super::queue::{DEFAULT_QUEUE, ROOT_QUEUE};
use super::super::queue::{Queue, ResourceList};
use super::super::resource::{quantity_value_errors, signed_nano};
use super::super::review::{Operation, Refusal, Review, aggregate, invalid, quoted};
use super::super::view::QueueView;
use super::hierarchy::{check_parent, check_resources, pods_allocated};
use super::{HIERARCHY, HIERARCHY_WEIGHTS, QueueSettings};

/// Volcano's `/queues/validate` for one request (CREATE, UPDATE or DELETE).
///
/// CREATE and UPDATE check the queue's quantities (none negative; guarantee ≤ deserved ≤
/// capability), its state, its hierarchy annotations, its parent (on CREATE, or when the parent
/// changes), the `root` queue's fixed resources, and its resources against its parent, siblings
/// and children. DELETE refuses `default` and `root`, a queue missing from the cache, and a
/// queue with children (or, with the setting on, allocated pods).
///
/// # Errors
/// [`Refusal::Denied`] with Volcano's message; [`Refusal::UnknownOperation`] for any other
/// operation; [`Refusal::Undecodable`] when CREATE or UPDATE lacks its object or old object.
pub fn validate_queue(
    review: &Review<'_, Queue>,
    view: &dyn QueueView,
    settings: &QueueSettings,
) -> Result<(), Refusal> {
    match review.operation {
        Operation::Create | Operation::Update => {
            let queue = review.object.ok_or_else(|| Refusal::missing("object"))?;
            check_fields(queue, view)?;
            let old = match review.operation {
                Operation::Update => Some(
                    review
                        .old_object
                        .ok_or_else(|| Refusal::missing("oldObject"))?,
                ),
                _ => None,
            };
            if old.is_none_or(|old| old.spec.parent != queue.spec.parent) {
                check_parent(queue, view, settings).map_err(Refusal::Denied)?;
            }
            if let Some(old) = old {
                if settings.enable_root_queue_protection
                    && queue.name() == ROOT_QUEUE
                    && !same_resources(queue, old)
                {
                    return Err(Refusal::denied(
                        "root queue's resource attributes (capability, deserved, guarantee) cannot be modified",
                    ));
                }
            }
            let needs_resources = queue.name() != ROOT_QUEUE
                && old.is_none_or(|old| {
                    old.spec.parent != queue.spec.parent || !same_resources(queue, old)
                });
            if needs_resources {
                check_resources(queue, view).map_err(Refusal::Denied)?;
            }
            Ok(())
        }
        Operation::Delete => check_delete(review.name, view, settings).map_err(Refusal::Denied),
        Operation::Other(_) => Err(Refusal::unknown_operation(
            &review.operation,
            "`CREATE`, `UPDATE` or `DELETE`",
        )),
    }
}

/// The queue's own fields, every problem at once as apimachinery's aggregate.
fn check_fields(queue: &Queue, view: &dyn QueueView) -> Result<(), Refusal> {
    let mut errors = check_quantities(queue);
    errors.extend(check_state(&queue.status.state));
    errors.extend(check_hierarchy_annotations(queue, view));
    match aggregate(errors) {
        Some(message) => Err(Refusal::Denied(message)),
        None => Ok(()),
    }
}

const SPEC: &str = "requestBody.spec";

/// Kubernetes' checks of each quantity, then guarantee ≤ deserved ≤ capability.
fn check_quantities(queue: &Queue) -> Vec<String> {
    let spec = &queue.spec;
    let mut errors = Vec::new();
    check_values(&spec.capability, &format!("{SPEC}.capability"), &mut errors);
    check_values(&spec.deserved, &format!("{SPEC}.deserved"), &mut errors);
    for (name, guarantee) in &spec.guarantee.resource {
        quantity_value_errors(
            name,
            &guarantee.0,
            &format_args!("{SPEC}.guarantee.resource.{name}"),
            &mut errors,
        );
        let path = format!("{SPEC}.deserved.{name}");
        let Some(deserved) = spec.deserved.get(name) else {
            let detail = format!(
                "deserved[{name}] must be >= guarantee[{name}]={}",
                guarantee.0
            );
            errors.push(invalid(&path, &quoted("<nil>"), &detail));
            continue;
        };
        if let (Some(d), Some(g)) = (signed_nano(&deserved.0), signed_nano(&guarantee.0)) {
            if d < g {
                let detail = format!(
                    "deserved[{name}]={} must be >= guarantee[{name}]={}",
                    deserved.0, guarantee.0
                );
                errors.push(invalid(&path, &quoted(&deserved.0), &detail));
            }
        }
    }
    for (name, deserved) in &spec.deserved {
        let Some(capability) = spec.capability.get(name) else {
            continue;
        };
        if let (Some(d), Some(c)) = (signed_nano(&deserved.0), signed_nano(&capability.0)) {
            if d > c {
                let detail = format!(
                    "deserved[{name}]={} must be <= capability[{name}]={}",
                    deserved.0, capability.0
                );
                errors.push(invalid(
                    &format!("{SPEC}.deserved.{name}"),
                    &quoted(&deserved.0),
                    &detail,
                ));
            }
        }
    }
    errors
}

fn check_values(list: &ResourceList, path: &str, errors: &mut Vec<String>) {
    for (name, quantity) in list {
        quantity_value_errors(name, &quantity.0, &format_args!("{path}.{name}"), errors);
    }
}

/// The state, when set, is `Open` or `Closed`.
fn check_state(state: &str) -> Option<String> {
    if state.is_empty() || state == "Open" || state == "Closed" {
        return None;
    }
    Some(invalid(
        &format!("{SPEC}.state"),
        &quoted(state),
        "queue state must be in [Open Closed]",
    ))
}

/// The hierarchy annotations: as many weights as levels, each a number above 0, and no other
/// queue below this queue's path.
fn check_hierarchy_annotations(queue: &Queue, view: &dyn QueueView) -> Option<String> {
    let path = "requestBody.metadata.annotations";
    let hierarchy = queue.annotation(HIERARCHY);
    let weights = queue.annotation(HIERARCHY_WEIGHTS);
    if hierarchy.is_empty() && weights.is_empty() {
        return None;
    }
    if hierarchy.split('/').count() != weights.split('/').count() {
        let detail = format!("{HIERARCHY} must have the same length with {HIERARCHY_WEIGHTS}");
        return Some(invalid(path, &quoted(hierarchy), &detail));
    }
    for weight in weights.split('/') {
        let detail = match parse_weight(weight) {
            Err(problem) => format!(
                "{weight} in the {weights} is invalid number: strconv.ParseFloat: parsing {}: {problem}",
                quoted(weight)
            ),
            Ok(value) if value <= 0.0 => {
                format!("{weight} in the {weights} must be larger than 0")
            }
            Ok(_) => continue,
        };
        return Some(invalid(path, &quoted(weights), &detail));
    }
    let below = format!("{hierarchy}/");
    let is_below = |other: &Queue| {
        let other_hierarchy = other.annotation(HIERARCHY);
        !other_hierarchy.is_empty()
            && other.name() != queue.name()
            && other_hierarchy.starts_with(&below)
    };
    let first_below = match view.queues_where(&is_below) {
        Ok(queues) => queues.into_iter().next()?,
        Err(error) => {
            let detail = format!("checking {HIERARCHY}, list queues failed: {error}");
            return Some(invalid(path, &quoted(hierarchy), &detail));
        }
    };
    let detail = format!(
        "{hierarchy} is not allowed to be in the sub path of {} of queue {}",
        first_below.annotation(HIERARCHY),
        first_below.name()
    );
    Some(invalid(path, &quoted(hierarchy), &detail))
}

/// A hierarchy weight read as Go's `strconv.ParseFloat` reads it, or its error's words: a
/// sign only before a number or an infinity, and a finite number too large for a float out of
/// range. (Go's hexadecimal floats and `_` between digits are not read.)
fn parse_weight(weight: &str) -> Result<f64, &'static str> {
    let unsigned = weight.trim_start_matches(['+', '-']);
    let spelled = |word: &str| unsigned.eq_ignore_ascii_case(word);
    let is_infinity = spelled("inf") || spelled("infinity");
    if spelled("nan") && unsigned.len() != weight.len() || weight.len() - unsigned.len() > 1 {
        return Err("invalid syntax");
    }
    match weight.parse::<f64>() {
        Ok(value) if value.is_infinite() && !is_infinity => Err("value out of range"),
        Ok(value) => Ok(value),
        Err(_) => Err("invalid syntax"),
    }
}

/// Whether capability, deserved and guarantee are the same quantities in both queues.
fn same_resources(queue: &Queue, old: &Queue) -> bool {
    same_list(&queue.spec.capability, &old.spec.capability)
        && same_list(&queue.spec.deserved, &old.spec.deserved)
        && same_list(&queue.spec.guarantee.resource, &old.spec.guarantee.resource)
}

/// Two lists name the same resources with equal quantities (`1000m` equals `1`).
fn same_list(left: &ResourceList, right: &ResourceList) -> bool {
    left.len() == right.len()
        && left.iter().all(|(name, quantity)| {
            right.get(name).is_some_and(|other| {
                match (signed_nano(&quantity.0), signed_nano(&other.0)) {
                    (Some(a), Some(b)) => a == b,
                    _ => quantity.0 == other.0,
                }
            })
        })
}

/// DELETE: never `default` or `root`; the queue must be in the cache and have no children.
fn check_delete(name: &str, view: &dyn QueueView, settings: &QueueSettings) -> Result<(), String> {
    if name == DEFAULT_QUEUE || name == ROOT_QUEUE {
        return Err(format!("`{name}` queue can not be deleted"));
    }
    let queue = view.queue(name).map_err(|error| error.to_string())?;
    if settings.enable_queue_allocated_pods_check {
        let pods = pods_allocated(&queue);
        if pods != 0 {
            return Err(format!(
                "queue {name} cannot be deleted because it has allocated Pods: {pods}"
            ));
        }
    }
    let children = view.children(name).map_err(|error| {
        format!("failed to list child queues: failed to get child queues for queue {name}: {error}")
    })?;
    if !children.is_empty() {
        let names: Vec<&str> = children.iter().map(|child| child.name()).collect();
        return Err(format!(
            "queue {name} can not be deleted because it has {} child queues: {}",
            names.len(),
            names.join(", ")
        ));
    }
    Ok(())
}
