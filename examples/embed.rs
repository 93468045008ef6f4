//! Embedding the dispatch path in a Rust orchestrator, through the front door (`Install`).
//!
//! A budget hook of the program's own places each tenant on its node pool and refuses a tenant
//! over budget; it runs after the built-in `deny` hook and before the built-in `placement` hook.
//! Attempts go through buffered dispatch; each settled attempt is printed with the hook that
//! decided, then the hook-call outcomes an observer counted and the breakers' states.
//!
//! ```text
//! cargo run --example embed
//! ```

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dexaflow_admission::Install;
use dexaflow_admission::admission::{Changes, Decision, Hook, HookFuture, Outcome, Request};
use dexaflow_admission::dispatch::task::Task;
use dexaflow_admission::events::{BreakerEvents, BufferEvents, HookEvents};
use dexaflow_admission::hooks::{Deny, DenySpec, Matcher, Placement, PlacementSpec, ResourceGroup};

/// Places each tenant on its own node pool; refuses a tenant whose budget is spent.
struct Budget {
    /// Tenant to (node pool, attempts left this hour).
    tenants: Mutex<BTreeMap<String, (String, u32)>>,
}

impl Hook for Budget {
    fn name(&self) -> &str {
        "budget"
    }

    fn is_remote(&self) -> bool {
        false
    }

    fn admit<'a>(&'a self, request: &'a Request) -> HookFuture<'a> {
        let decision = {
            let mut tenants = self.tenants.lock().unwrap_or_else(|e| e.into_inner());
            match tenants.get_mut(&request.tenant) {
                None => Decision::Refuse(format!("tenant {} has no budget", request.tenant)),
                Some((_, 0)) => Decision::Refuse("budget spent for this hour".to_owned()),
                Some((pool, left)) => {
                    *left -= 1;
                    let mut changes = Changes::default();
                    changes
                        .node_selector
                        .insert("pool".to_owned(), pool.clone());
                    Decision::AdmitWith(Box::new(changes))
                }
            }
        };
        Box::pin(async move { Ok(decision) })
    }
}

/// Counts hook-call outcomes, as a metrics exporter would (labelled by outcome only).
#[derive(Default)]
struct Counts(Mutex<BTreeMap<Outcome, u64>>);

impl HookEvents for Counts {
    fn hook_call(&self, _: &str, outcome: Outcome, _: Duration) {
        *self
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(outcome)
            .or_default() += 1;
    }
}
impl BreakerEvents for Counts {}
impl BufferEvents for Counts {}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let deny = DenySpec {
        name: "deny-sandbox".to_owned(),
        matcher: Matcher {
            tenants: vec!["sandbox".to_owned()],
            ..Matcher::default()
        },
        reason: Some("sandbox tenants do not run in production".to_owned()),
    };
    let mut gpu = Changes::default();
    gpu.labels.insert("class".to_owned(), "gpu".to_owned());
    let placement = PlacementSpec {
        name: "placement".to_owned(),
        groups: vec![ResourceGroup {
            matcher: Matcher {
                dag_ids: vec!["train".to_owned()],
                ..Matcher::default()
            },
            set: gpu,
        }],
    };
    let budget = Budget {
        tenants: Mutex::new(BTreeMap::from([
            ("acme".to_owned(), ("acme-pool".to_owned(), 2)),
            ("globex".to_owned(), ("globex-pool".to_owned(), 5)),
        ])),
    };
    let counts = Arc::new(Counts::default());

    // The settings: the defaults, a `null` executor (nothing is launched), buffered dispatch.
    let install = Install::from_yaml("executor: {type: \"null\"}")?.configure(|settings| {
        settings.buffer_size = 64;
        settings.workers = 2;
        settings.loop_interval = Duration::from_millis(10);
    });
    // Checked as the config path checks them, the placement against the install's own rules.
    let deny = Deny::checked(&deny).map_err(|errors| format!("{errors:?}"))?;
    let rules = install.settings().change_rules();
    let placement =
        Placement::checked(&placement, &rules).map_err(|errors| format!("{errors:?}"))?;
    let install = install
        .hook(Arc::new(deny))
        .hook(Arc::new(budget))
        .hook(Arc::new(placement))
        .observer(counts.clone())
        .stream_settled();

    let attempts = [
        ("acme", "train", "fit"),
        ("acme", "etl", "load"),
        ("acme", "etl", "report"),
        ("globex", "train", "fit"),
        ("sandbox", "etl", "load"),
        ("initech", "etl", "load"),
    ];
    let breakers = install.run_blocking(|mut handle| async move {
        for (tenant, dag, task) in attempts {
            handle
                .offer(Task::new(tenant, dag, "run-1", task))
                .expect("each attempt once");
        }
        handle.wait_settled().await;
        while let Some(settled) = handle.try_next_settled() {
            // Why it was refused, or where it was placed.
            let detail = match &settled.reason {
                Some(reason) => reason.to_string(),
                None => handle
                    .instance(&settled.key)
                    .and_then(|row| row.execution)
                    .map(|execution| format!("{:?}", execution.node_selector))
                    .unwrap_or_default(),
            };
            println!(
                "{:<28} {:<9} by {:<13} {detail}",
                settled.key.to_string(),
                settled.disposition.as_str(),
                settled.deciding_hook().unwrap_or("-"),
            );
        }
        let breakers = handle.breakers();
        handle.drain().await;
        breakers
    })?;

    let counts = counts.0.lock().unwrap_or_else(|e| e.into_inner());
    println!("hook calls by outcome: {counts:?}");
    println!("breakers: {breakers:?}");
    Ok(())
}
