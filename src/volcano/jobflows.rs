//! `/jobflows/validate`: a job flow's dependencies form a DAG of defined flows.

use std::collections::{BTreeMap, BTreeSet};

use super::jobflow::JobFlow;
use super::review::{Operation, Refusal, Review};

/// Volcano's `/jobflows/validate` for one request (CREATE or UPDATE).
///
/// Every `dependsOn` target must name a flow, and the dependencies must have no cycle (a flow
/// depending on itself included). As in Volcano, flows are keyed by name: a repeated name
/// replaces the earlier flow of that name, and the message is trimmed of the blanks (Unicode
/// white space) an undefined target's name may end with.
///
/// # Errors
/// [`Refusal::Denied`] with Volcano's message; [`Refusal::UnknownOperation`] for any operation
/// but CREATE and UPDATE; [`Refusal::Undecodable`] when the request has no object.
pub fn validate_jobflow(review: &Review<'_, JobFlow>) -> Result<(), Refusal> {
    if !matches!(review.operation, Operation::Create | Operation::Update) {
        return Err(Refusal::unknown_operation(
            &review.operation,
            "'CREATE' or 'UPDATE'",
        ));
    }
    let flow = review.object.ok_or_else(|| Refusal::missing("object"))?;
    let graph: BTreeMap<&str, Vec<&str>> = flow
        .spec
        .flows
        .iter()
        .map(|flow| {
            let targets = flow.depends_on.as_ref().map_or_else(Vec::new, |depends| {
                depends.targets.iter().map(String::as_str).collect()
            });
            (flow.name.as_str(), targets)
        })
        .collect();
    // Each name once: flows that share a name share its last targets, checked once.
    let mut checked = BTreeSet::new();
    if let Some(missing) = flow.spec.flows.iter().find_map(|flow| {
        let name = flow.name.as_str();
        if !checked.insert(name) {
            return None;
        }
        graph[name]
            .iter()
            .find(|target| !graph.contains_key(*target))
    }) {
        return Err(Refusal::denied(
            format!("jobflow Flow is not DAG: vertex is not defined: {missing}").trim_end(),
        ));
    }
    if has_cycle(&graph) {
        return Err(Refusal::denied("jobflow Flow is not DAG"));
    }
    Ok(())
}

/// Whether the dependencies loop, by a depth-first walk that marks the flows on its path.
fn has_cycle(graph: &BTreeMap<&str, Vec<&str>>) -> bool {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        OnPath,
        Done,
    }
    let mut marks: BTreeMap<&str, Mark> = BTreeMap::new();
    for &start in graph.keys() {
        if marks.contains_key(start) {
            continue;
        }
        // An explicit stack of (flow, next target index): deep flows cannot overflow the stack.
        let mut stack = vec![(start, 0usize)];
        marks.insert(start, Mark::OnPath);
        while let Some((node, next)) = stack.pop() {
            let targets = graph.get(node).map_or(&[][..], Vec::as_slice);
            let Some(&target) = targets.get(next) else {
                marks.insert(node, Mark::Done);
                continue;
            };
            stack.push((node, next + 1));
            match marks.get(target) {
                Some(Mark::OnPath) => return true,
                Some(Mark::Done) => {}
                None => {
                    marks.insert(target, Mark::OnPath);
                    stack.push((target, 0));
                }
            }
        }
    }
    false
}
