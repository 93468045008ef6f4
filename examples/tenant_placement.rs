//! Per-tenant placement in a few lines, the first consequence of ADR 0100.
//!
//! `TenantPlacement` sends each tenant's attempts to its own node pool: it adds a node-selector
//! entry that picks the pool's nodes and a toleration for the taint that keeps other tenants off
//! them. A tenant without a pool is refused with a reason the task instance shows. A second hook,
//! `Freeze`, holds one DAG during a freeze window; it runs after placement and sees its changes.
//!
//! The example builds the chain, asks it about three attempts and prints each verdict:
//!
//! ```text
//! cargo run --example tenant_placement
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;

use dexaflow_admission::Install;
use dexaflow_admission::admission::{
    Chain, Changes, Decision, Hook, HookFuture, Request, TaintEffect, Toleration,
    TolerationOperator, Verdict,
};

/// The node label and taint key that mark a node as belonging to a tenant's pool.
const POOL_KEY: &str = "pool.example.com/tenant";

/// Places each tenant on its node pool; refuses tenants that have none.
struct TenantPlacement {
    /// Tenant name to node pool name.
    pools: BTreeMap<String, String>,
}

impl Hook for TenantPlacement {
    fn name(&self) -> &str {
        "tenant-placement"
    }

    fn is_remote(&self) -> bool {
        false
    }

    fn admit<'a>(&'a self, request: &'a Request) -> HookFuture<'a> {
        Box::pin(async move {
            let Some(pool) = self.pools.get(&request.tenant) else {
                return Ok(Decision::Refuse(format!(
                    "tenant {} has no node pool; ask the platform team for one",
                    request.tenant
                )));
            };
            let mut changes = Changes::default();
            changes
                .node_selector
                .insert(POOL_KEY.to_owned(), pool.clone());
            changes.tolerations.push(Toleration {
                key: POOL_KEY.to_owned(),
                operator: TolerationOperator::Equal,
                value: pool.clone(),
                effect: Some(TaintEffect::NoSchedule),
                toleration_seconds: None,
            });
            Ok(Decision::AdmitWith(Box::new(changes)))
        })
    }
}

/// Holds every attempt of one DAG, as an operator would during a freeze window.
struct Freeze {
    dag_id: &'static str,
}

impl Hook for Freeze {
    fn name(&self) -> &str {
        "freeze"
    }

    fn is_remote(&self) -> bool {
        false
    }

    fn admit<'a>(&'a self, request: &'a Request) -> HookFuture<'a> {
        Box::pin(async move {
            Ok(if request.dag_id == self.dag_id {
                Decision::Hold(format!("{} is frozen until 18:00 UTC", self.dag_id))
            } else {
                Decision::Admit
            })
        })
    }
}

fn main() {
    let pools = BTreeMap::from([
        ("acme".to_owned(), "acme-gpu".to_owned()),
        ("globex".to_owned(), "globex-batch".to_owned()),
    ]);
    // The changes must pass the install's own rules (its allowlists, default service account
    // and unit), never rules made up here: `ChangeRules::default()` would allow any priority
    // class or service account a hook sets.
    let install = Install::defaults().expect("the defaults are valid");
    let chain = Chain::new(install.settings().change_rules())
        .with_hook(Arc::new(TenantPlacement { pools }))
        .with_hook(Arc::new(Freeze {
            dag_id: "month_end_close",
        }));

    let attempts = [
        Request::new("acme", "train_model", "fit"),
        Request::new("globex", "month_end_close", "ledger"),
        Request::new("initech", "reports", "render"),
    ];

    // The contract does no I/O of its own; a current-thread runtime is all the hooks need here.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a current-thread runtime needs no resources that can be missing");
    for attempt in attempts {
        let label = format!("{}/{}/{}", attempt.tenant, attempt.dag_id, attempt.task_id);
        match runtime.block_on(chain.admit(attempt)) {
            Verdict::Admit { request, .. } => {
                let tolerations: Vec<String> = request
                    .execution
                    .tolerations
                    .iter()
                    .map(|t| {
                        let effect = t.effect.map_or("", TaintEffect::as_str);
                        format!("{}={}:{effect}", t.key, t.value)
                    })
                    .collect();
                println!(
                    "{label}: admitted, node selector {:?}, tolerations {tolerations:?}",
                    request.execution.node_selector
                );
            }
            Verdict::Hold { hook, reason } => println!("{label}: held by {hook}: {reason}"),
            Verdict::Refuse { hook, reason } => {
                println!(
                    "{label}: refused by {hook}; the task shows \"dispatch refused: admission: {reason}\""
                )
            }
            Verdict::Unavailable { hook, error } => {
                println!("{label}: admission hook unavailable: {hook}: {error}")
            }
        }
    }
}
