//! The executor policy (ADR 0063) as the last built-in hook of the chain (ADR 0100 §7).
//!
//! `executor.policy` forces fields onto every attempt and restricts what an attempt may have,
//! whoever set it: the DAG author or an earlier hook. Being the chain's last hook, it sees the
//! request as every other hook left it, so no operator hook (Rust, built-in or webhook) can undo
//! what it forces or slip past what it restricts. It depends only on [`crate::admission`], so
//! the webhook server can run it as well as the dispatcher.
//!
//! - [`PolicySpec`] (`spec.rs`): the config, decoded strictly and checked at boot; every error
//!   names its key path inside `executor.policy`.
//! - `apply.rs`: the rules in Dexaflow's order, each refusal one of
//!   [`crate::admission::PolicyRule`].
//! - [`Policy`]: the hook. Its forced values (runtime class, node selector, tolerations,
//!   service account) and the limits it fills are its changes; a broken rule is its refusal,
//!   `refused by executor policy: <rule>`.
//!
//! `placement.allow_dag_placement` is the one rule the hook does not apply: it is about the
//! DAG author's own fields, which the dispatcher checks with its built-in refusals
//! ([`crate::admission::refuse_dag_placement`]).
//!
//! ```yaml
//! executor:
//!   policy:
//!     runtime_class_name: gvisor
//!     service_account: {force: etl-runner, allowed: [etl-runner]}
//!     placement:
//!       node_selector: {pool: tenant-jobs}
//!       tolerations: [{key: dedicated, operator: Equal, value: tenant-jobs, effect: NoSchedule}]
//!       allow_dag_placement: false
//!       allowed_priority_classes: [batch-low]
//!     metadata: {allowed_label_prefixes: [team.example.com/]}
//!     resources: {max: {cpu: "4", memory: 16Gi, ephemeral_storage: 20Gi}}
//!     images: {allowed: [ghcr.io/acme/, python]}
//! ```

mod apply;
mod spec;

use super::LocalRule;
use crate::admission::{Request, Unit};

pub use spec::{
    ImageRules, MetadataRules, PlacementRules, PolicyError, PolicySpec, Quantity, ResourceMax,
    ResourceRules, ServiceAccountRules,
};

/// The name the policy hook has in the chain, as refusals of its changes, logs and the breaker
/// gauge show it; no configured hook may take it.
pub const POLICY_HOOK: &str = "executor-policy";

/// The executor policy as a hook: [`crate::hooks::chain`] registers it last and privileged.
#[derive(Debug, Clone)]
pub struct Policy {
    rules: apply::Rules,
}

impl Policy {
    /// The policy `spec` describes; `unit` is the install's resource unit, which bounds a filled
    /// CPU or memory limit by the attempt's size (`None` without a unit).
    ///
    /// The spec is expected to have passed [`PolicySpec::check`], as `Config` does.
    pub fn new(spec: &PolicySpec, unit: Option<Unit>) -> Policy {
        Policy {
            rules: apply::Rules::new(spec, unit),
        }
    }
}

impl LocalRule for Policy {
    fn rule_name(&self) -> &str {
        POLICY_HOOK
    }

    fn decide(&self, request: &Request) -> crate::admission::Decision {
        self.rules.decide(request)
    }
}
