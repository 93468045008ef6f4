//! dexaflow-admission decides, for every task attempt a Dexaflow orchestrator dispatches, whether
//! it runs, runs changed, waits or is refused, before the attempt's agent token is minted and
//! before any pod exists (ADR 0100).
//!
//! # Layout
//! - [`admission`]: the contract (ADR 0100 §1, §3, §4, §6, §7): [`admission::Request`],
//!   [`admission::Decision`], [`admission::Changes`], the [`admission::Hook`] trait, the
//!   [`admission::Chain`], the rules for changes, the reason cleaner and the webhook's wire
//!   types (§8). No actors or I/O.
//! - [`dispatch`]: the dispatch path (§2, §4, §5): the [`dispatch::Dispatcher`] actor, the
//!   bounded buffer and its admission workers, the [`dispatch::Pipeline`] both
//!   drivers run, built-in refusals, token, placement, executors and the task store, where
//!   each task instance keeps why it failed or waits as a typed [`dispatch::Reason`].
//! - [`supervise`]: every hook call under a timeout, panic recovery and a breaker actor per hook
//!   (§5), and the supervised chain.
//! - [`events`]: the traits through which hook calls, breakers and the dispatch buffer are
//!   observed; a leaf that uses only the contract's plain types.
//! - [`hooks`]: the built-in `placement`, `freeze` and `deny` hooks a config can declare, and
//!   the `webhook` hook that asks an HTTPS endpoint (§8), and the executor policy (ADR 0063),
//!   the chain's last hook (§7).
//! - [`metrics`]: the outcome-only metrics (§5, last bullet) as cached handles reported to
//!   through [`events::Observer`], and the Prometheus exporter.
//! - [`config`]: the YAML config, its validation and `DEXAFLOW_` overrides.
//! - [`workload`] and [`report`]: what the `dispatch` command reads and prints.
//! - [`serve`]: the webhook server behind the `serve` subcommand (§8 and Volcano's webhook
//!   manager): pod mutation by resource groups, pod and DAG validation, over HTTPS; its front
//!   door is [`serve::Server::builder`].
//! - [`volcano`]: Volcano's admission rules (its `vc-webhook-manager`) as pure functions over
//!   typed objects and a read-only view of the cluster: verdicts, messages and patches.
//! - [`loadtest`]: the load-test harness behind the `loadtest` subcommand: synthetic hooks, an
//!   open-loop driver of the real dispatcher, conservation, the report and its charts.
//!
//! - [`install`]: the front door for a program that embeds the dispatch path: settings, hooks,
//!   an executor and an observer in, a running dispatcher [`Handle`] out. The `dispatch` command
//!   assembles its dispatcher there too.
//! - [`cluster`]: the cluster reads of Volcano's services through kube-rs: a watched cache of
//!   queues, a namespace's annotation within a deadline.
//! - `listen` (crate-private): the one accept loop every listener runs.
//!
//! # Example: the front door
//! A hook of the program's own, after the config's hooks, under the install's own change rules
//! (its allowlists, default service account and unit): attempts offered, each settled attempt
//! read back with the hook that decided, then drained.
//!
//! ```
//! use std::sync::Arc;
//! use dexaflow_admission::Install;
//! use dexaflow_admission::admission::{Changes, Decision, Hook, HookFuture, Request};
//! use dexaflow_admission::dispatch::{Disposition, task::Task};
//!
//! /// Places each tenant on its own node pool; refuses the tenant `sandbox`.
//! struct TenantPool;
//!
//! impl Hook for TenantPool {
//!     fn name(&self) -> &str {
//!         "tenant-pool"
//!     }
//!     fn is_remote(&self) -> bool {
//!         false
//!     }
//!     fn admit<'a>(&'a self, request: &'a Request) -> HookFuture<'a> {
//!         Box::pin(async move {
//!             if request.tenant == "sandbox" {
//!                 return Ok(Decision::Refuse("no sandbox in production".into()));
//!             }
//!             let mut changes = Changes::default();
//!             changes.node_selector.insert("pool".into(), request.tenant.clone());
//!             Ok(Decision::AdmitWith(Box::new(changes)))
//!         })
//!     }
//! }
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let install = Install::from_yaml("executor: {type: \"null\"}")?
//!     .configure(|settings| settings.buffer_size = 16)
//!     .stream_settled()
//!     .hook(Arc::new(TenantPool));
//! let settled = install.run_blocking(|mut handle| async move {
//!     handle.offer(Task::new("acme", "etl", "run-1", "load")).expect("new");
//!     handle.offer(Task::new("sandbox", "etl", "run-1", "load")).expect("new");
//!     handle.wait_settled().await;
//!     let mut settled = Vec::new();
//!     while let Some(attempt) = handle.try_next_settled() {
//!         settled.push((attempt.key.tenant.clone(), attempt.disposition,
//!                       attempt.deciding_hook().map(str::to_owned)));
//!     }
//!     handle.drain().await;
//!     settled
//! })?;
//! // The hook decided both: it placed acme on its pool and refused sandbox.
//! assert!(settled.contains(&("acme".into(), Disposition::Executed, Some("tenant-pool".into()))));
//! assert!(settled.contains(&("sandbox".into(), Disposition::Refused, Some("tenant-pool".into()))));
//! # Ok(())
//! # }
//! ```
//!
//! # One attempt, three vocabularies
//! An attempt is described at three levels, and each word belongs to one of them only:
//!
//! | Type | Says | Examples | Where it shows |
//! |---|---|---|---|
//! | [`admission::Outcome`] | what one hook call gave | `admit`, `admit_with`, `hold`, `refuse`, `timeout`, `panic`, `skipped` | the metrics' `outcome` label, [`events::HookEvents`] |
//! | [`dispatch::Disposition`] | how one offer of the attempt ended in the dispatcher | `executed`, `refused`, `waiting`, `rejected`, `deferred` | [`install::Settlement`], the load test's counts |
//! | [`dispatch::task::State`] | where the task instance stands in the store (Dexaflow's states) | `scheduled`, `queued`, `running`, `failed` | the `dispatch` command's rows |
//!
//! One offer runs every hook of the chain (many outcomes) and ends in one disposition, which
//! leaves the task instance in one state; several offers may share a state (a held attempt
//! stays `scheduled` through many `waiting` offers).
//!
//! # Panics and unwinding
//! A hook that panics is caught and counted as unavailable, which depends on unwinding: a program
//! that embeds this crate must keep `panic = "unwind"` (the default) in every profile; with
//! `panic = "abort"` one hook's panic ends the whole process.

#![deny(missing_docs)]
#![warn(missing_debug_implementations, unreachable_pub)]
#![forbid(unsafe_code)]

pub mod admission;
pub mod cluster;
pub mod config;
pub mod dispatch;
pub mod events;
pub mod hooks;
pub mod install;
mod listen;
pub mod loadtest;
pub mod metrics;
pub mod report;
pub mod serve;
pub mod supervise;
mod sync;
mod token_file;
pub mod volcano;
pub mod workload;

pub use install::{Handle, Install};

/// The actor framework the dispatcher and the breakers run on, for the types of it that appear in
/// public signatures ([`dispatch::Dispatcher`] is an actor); the front door needs none of it.
pub use actix;
/// The async runtime under [`actix`], for the types of it that appear in public signatures
/// ([`dispatch::Parts`] takes a channel sender); the front door needs none of it.
pub use tokio;
