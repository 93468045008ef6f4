//! The `placement` hook: Volcano's resource groups for task attempts.

use serde::{Deserialize, Serialize};

use std::collections::BTreeMap;

use super::LocalRule;
use crate::admission::{ChangeError, ChangeRules, Changes, Decision, Privilege, Request};

use super::{Matcher, SpecError};

/// The config of a `placement` hook: resource groups, tried in order.
///
/// Modelled on Volcano's resource groups (`resourceGroups` in its admission configuration): a
/// group says which attempts it takes and what it puts on them. Unlike Volcano, which matches on
/// one namespace or annotation, a group here matches with a full [`Matcher`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlacementSpec {
    /// The hook's name, unique in the chain.
    pub name: String,
    /// The groups, in the order they are tried; at least one.
    pub groups: Vec<ResourceGroup>,
}

/// One resource group: the attempts it takes and the changes it makes to them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResourceGroup {
    /// Which attempts belong to the group; empty takes every attempt, a catch-all for the last
    /// group.
    #[serde(rename = "match", default, skip_serializing_if = "Matcher::is_empty")]
    pub matcher: Matcher,
    /// What the group puts on its attempts: typically `node_selector`, `tolerations`, `labels`
    /// and `priority_class`. An empty `set` takes attempts away from later groups unchanged.
    #[serde(default)]
    pub set: Changes,
}

/// A hook that places attempts by resource group.
///
/// The first group whose matcher matches wins: its changes are the answer
/// ([`Decision::AdmitWith`]) and later groups are not looked at, so order groups from the most
/// specific to the most general. An attempt no group matches, or whose group sets nothing, is
/// admitted unchanged. The chain still checks the changes on every attempt
/// ([`ChangeRules::check`]); [`PlacementSpec::check`] checks them once at boot as well.
#[derive(Debug, Clone)]
pub struct Placement {
    name: String,
    groups: Vec<ResourceGroup>,
}

impl PlacementSpec {
    /// Checks every group's matcher and changes against the install's `rules`, so that a group
    /// the chain would refuse on every attempt, or that could never match, fails at boot
    /// instead.
    ///
    /// # Errors
    /// [`SpecError::NoGroups`] when there is no group, else every [`SpecError::InvalidMatch`]
    /// and [`SpecError::InvalidChange`] of every group.
    pub fn check(&self, rules: &ChangeRules) -> Result<(), Vec<SpecError>> {
        if self.groups.is_empty() {
            return Err(vec![SpecError::NoGroups]);
        }
        let errors: Vec<SpecError> = self
            .groups
            .iter()
            .enumerate()
            .flat_map(|(group, resource_group)| {
                let matcher = resource_group
                    .matcher
                    .problems()
                    .into_iter()
                    .map(move |problem| SpecError::InvalidMatch {
                        group: Some(group),
                        problem,
                    });
                let set = change_problems(rules, &resource_group.set)
                    .into_iter()
                    .map(move |problem| SpecError::InvalidChange { group, problem });
                matcher.chain(set)
            })
            .collect();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors)
        }
    }
}

/// Every rule `set` breaks, where [`ChangeRules::check`] stops at the first: each entry and
/// field is checked on its own, then the whole set when no part failed, for what only the whole
/// shows (the annotations' total size, and any field not named here).
fn change_problems(rules: &ChangeRules, set: &Changes) -> Vec<ChangeError> {
    // The rules look at the request only for the total annotation size, which an empty request
    // leaves entirely to the group.
    let request = Request::new("", "", "");
    let check = |part: Changes| rules.check(&part, Privilege::Unprivileged, &request).err();
    let entry = |(key, value): (&String, &String)| BTreeMap::from([(key.clone(), value.clone())]);
    let parts = (set.node_selector.iter().map(|pair| Changes {
        node_selector: entry(pair),
        ..Changes::default()
    }))
    .chain(set.labels.iter().map(|pair| Changes {
        labels: entry(pair),
        ..Changes::default()
    }))
    .chain(set.annotations.iter().map(|pair| Changes {
        annotations: entry(pair),
        ..Changes::default()
    }))
    .chain(set.service_account.iter().map(|name| Changes {
        service_account: Some(name.clone()),
        ..Changes::default()
    }))
    .chain(set.priority_class.iter().map(|name| Changes {
        priority_class: Some(name.clone()),
        ..Changes::default()
    }))
    .chain(set.has_privileged_field().then(|| Changes {
        runtime_class_name: set.runtime_class_name.clone(),
        fill_limits: set.fill_limits.clone(),
        ..Changes::default()
    }));
    let mut problems: Vec<ChangeError> = parts.filter_map(check).collect();
    for (index, toleration) in set.tolerations.iter().enumerate() {
        let alone = Changes {
            tolerations: vec![toleration.clone()],
            ..Changes::default()
        };
        if let Some(mut problem) = check(alone) {
            // Checked alone, it is the first; the message names its place in the group.
            if let ChangeError::InvalidToleration { index: at, .. } = &mut problem {
                *at = index;
            }
            problems.push(problem);
        }
    }
    if problems.is_empty() {
        problems.extend(check(set.clone()));
    }
    problems
}

impl Placement {
    /// The hook the spec describes, once [`PlacementSpec::check`] passes against the install's
    /// `rules` (`dispatch::Settings::change_rules`): what a program that builds the hook itself
    /// calls, so that it is held to what the config path checks.
    ///
    /// # Errors
    /// What [`PlacementSpec::check`] finds.
    pub fn checked(spec: &PlacementSpec, rules: &ChangeRules) -> Result<Placement, Vec<SpecError>> {
        spec.check(rules).map(|()| Placement::new(spec))
    }

    /// The hook the spec describes, unchecked (the config path checked it at load).
    pub fn new(spec: &PlacementSpec) -> Placement {
        Placement {
            name: spec.name.clone(),
            groups: spec.groups.clone(),
        }
    }
}

impl LocalRule for Placement {
    fn rule_name(&self) -> &str {
        &self.name
    }

    fn decide(&self, request: &Request) -> Decision {
        match self
            .groups
            .iter()
            .find(|group| group.matcher.matches(request))
        {
            Some(group) if !group.set.is_empty() => {
                Decision::AdmitWith(Box::new(group.set.clone()))
            }
            _ => Decision::Admit,
        }
    }
}
