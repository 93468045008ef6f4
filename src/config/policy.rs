//! The `executor.policy` section (ADR 0063): decoded strictly by [`PolicySpec`], read from the
//! file only, and checked against the change rules the chain applies.

use serde_yaml_ng::Value;

use super::keys::POLICY;
use super::reader::Reader;
use super::{ConfigError, Key};
use crate::admission::ChangeRules;
use crate::dispatch::settings::PolicySettings;
use crate::hooks::PolicySpec;

impl Reader {
    /// `executor.policy`, decoded strictly; `None` when unset (absent or null).
    pub(super) fn policy(&mut self) -> Option<PolicySpec> {
        let value = self.found.get(POLICY).map(|raw| raw.value.clone())?;
        if value.is_null() {
            return None;
        }
        match PolicySpec::decode(value) {
            Ok(spec) => {
                let shown = serde_yaml_ng::to_value(&spec).unwrap_or(Value::Null);
                self.effective.insert(POLICY, shown);
                Some(spec)
            }
            Err(source) => {
                self.errors.push(ConfigError::Policy {
                    key: Key::file(POLICY),
                    source,
                });
                None
            }
        }
    }

    /// Reports every forced value of `policy` that the chain's `rules` would refuse.
    pub(super) fn check_policy(&mut self, policy: Option<&PolicySpec>, rules: &ChangeRules) {
        let Some(Err(problems)) = policy.map(|spec| spec.check(rules)) else {
            return;
        };
        self.errors
            .extend(problems.into_iter().map(|source| ConfigError::Policy {
                key: Key::file(POLICY),
                source,
            }));
    }
}

/// What the dispatcher needs of the policy before any hook runs: whether a DAG may place its
/// own attempts, and whether the policy forces anything (which takes a dedicated pod).
pub(super) fn settings(policy: Option<&PolicySpec>) -> PolicySettings {
    policy.map_or_else(PolicySettings::default, |spec| PolicySettings {
        allow_dag_placement: spec.placement.allow_dag_placement,
        forces_fields: spec.forces_fields(),
    })
}
