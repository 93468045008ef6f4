//! The policy's rules applied to one request, in Dexaflow's order.

use crate::admission::{
    Changes, Decision, PolicyRefusal, PolicyRule, Request, ResourceList, Unit, cpu_quantity,
    image_allowed, memory_quantity, parse_milli,
};

use super::{PolicySpec, Quantity};

/// The policy's rules, ready to apply to every attempt.
#[derive(Debug, Clone)]
pub(super) struct Rules {
    spec: PolicySpec,
    /// What the policy forces onto every attempt, built once.
    forced: Changes,
    /// The resource unit, which bounds a filled CPU or memory limit by the attempt's size.
    unit: Option<Unit>,
}

impl Rules {
    pub(super) fn new(spec: &PolicySpec, unit: Option<Unit>) -> Rules {
        Rules {
            spec: spec.clone(),
            forced: spec.forced(),
            unit,
        }
    }

    /// Applies the rules to `request` in Dexaflow's order: the image, the service account (the
    /// force, then `allowed` on the result), the priority class, the forced placement, the
    /// labels and annotations, the resources (refused over the maximum, empty limits filled),
    /// the runtime class. DAG placement is not checked here: it is about the DAG's own fields,
    /// which the dispatcher checks before any hook (see
    /// [`crate::admission::refuse_dag_placement`]).
    pub(super) fn decide(&self, request: &Request) -> Decision {
        match self.changes(request) {
            Ok(changes) if changes.is_empty() => Decision::Admit,
            Ok(changes) => Decision::AdmitWith(Box::new(changes)),
            Err(rule) => Decision::Refuse(PolicyRefusal(rule).to_string()),
        }
    }

    fn changes(&self, request: &Request) -> Result<Changes, PolicyRule> {
        let spec = &self.spec;
        let execution = &request.execution;
        // An empty image chooses nothing, as for `execution_allowlist.images`.
        if let Some(allowed) = &spec.images.allowed {
            if !request.image.is_empty() && !image_allowed(&request.image, allowed) {
                return Err(PolicyRule::Image {
                    image: request.image.clone(),
                });
            }
        }
        let service_account = self
            .forced
            .service_account
            .as_ref()
            .unwrap_or(&execution.service_account);
        if let Some(allowed) = &spec.service_account.allowed {
            if !allowed.contains(service_account) {
                return Err(PolicyRule::ServiceAccount {
                    name: service_account.clone(),
                });
            }
        }
        // An empty priority class is none chosen.
        let priority_class = &execution.priority_class;
        if let Some(allowed) = &spec.placement.allowed_priority_classes {
            if !priority_class.is_empty() && !allowed.contains(priority_class) {
                return Err(PolicyRule::PriorityClass {
                    name: priority_class.clone(),
                });
            }
        }
        let metadata = &spec.metadata;
        for (field, keys, prefixes) in [
            (
                "labels",
                &execution.labels,
                &metadata.allowed_label_prefixes,
            ),
            (
                "annotations",
                &execution.annotations,
                &metadata.allowed_annotation_prefixes,
            ),
        ] {
            let Some(prefixes) = prefixes else { continue };
            // The maps are sorted, so the first key found is the first in sorted order.
            if let Some(key) = keys.keys().find(|key| {
                !prefixes
                    .iter()
                    .any(|prefix| key.starts_with(prefix.as_str()))
            }) {
                return Err(PolicyRule::Metadata {
                    field,
                    key: key.clone(),
                });
            }
        }
        let fill_limits = self.fill_limits(request)?;
        Ok(Changes {
            fill_limits,
            ..self.forced.clone()
        })
    }

    /// Refuses a request or limit over `resources.max`, then fills each empty limit that has a
    /// maximum with it, never above the attempt's size times the unit.
    fn fill_limits(&self, request: &Request) -> Result<Option<ResourceList>, PolicyRule> {
        let max = &self.spec.resources.max;
        let resources = &request.resources;
        for (list_name, list) in [
            ("requests", &resources.requests),
            ("limits", &resources.limits),
        ] {
            for (resource, quantity) in list.set() {
                let Some(max) = max.of(resource) else {
                    continue;
                };
                let field = || format!("{list_name}.{resource}");
                let milli = parse_milli(quantity).map_err(|error| PolicyRule::NotAQuantity {
                    field: field(),
                    error,
                })?;
                if milli > max.milli {
                    return Err(PolicyRule::OverMax {
                        field: field(),
                        quantity: quantity.to_owned(),
                        max: max.text.clone(),
                    });
                }
            }
        }
        let limits = &resources.limits;
        let size = u128::from(request.size.max(1));
        let ceiling = |per_unit: fn(&Unit) -> u128| {
            self.unit
                .as_ref()
                .map(|unit| per_unit(unit).saturating_mul(size))
        };
        let fill = ResourceList {
            cpu: empty_with_max(&limits.cpu, &max.cpu)
                .map(|max| within(max, ceiling(|unit| unit.cpu_milli), cpu_quantity)),
            // Whole bytes, rounded down, so that the fill never exceeds the ceiling.
            memory: empty_with_max(&limits.memory, &max.memory).map(|max| {
                let ceiling = ceiling(|unit| unit.memory_milli).map(|milli| milli / 1000 * 1000);
                within(max, ceiling, memory_quantity)
            }),
            ephemeral_storage: empty_with_max(&limits.ephemeral_storage, &max.ephemeral_storage)
                .map(|max| max.text.clone()),
        };
        Ok((fill != ResourceList::default()).then_some(fill))
    }
}

/// The maximum to fill an empty limit with: `None` when the limit is set or has no maximum.
fn empty_with_max<'m>(limit: &Option<String>, max: &'m Option<Quantity>) -> Option<&'m Quantity> {
    match limit {
        None => max.as_ref(),
        Some(_) => None,
    }
}

/// The maximum, or the ceiling written by `format` when the ceiling is lower.
fn within(max: &Quantity, ceiling: Option<u128>, format: fn(u128) -> String) -> String {
    match ceiling {
        Some(ceiling) if ceiling < max.milli => format(ceiling),
        _ => max.text.clone(),
    }
}
