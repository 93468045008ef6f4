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
//!   bounded buffer and its [`dispatch::AdmissionWorker`]s, the [`dispatch::Pipeline`] both
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
//!   manager): pod mutation by resource groups, pod and DAG validation, over HTTPS.
//! - [`loadtest`]: the load-test harness behind the `loadtest` subcommand: synthetic hooks, an
//!   open-loop driver of the real dispatcher, conservation, the report and its charts.
//!
//! # Example
//! A hook that places one tenant on its own node pool, chained and asked about one attempt:
//!
//! ```
//! use std::sync::Arc;
//! use dexaflow_admission::admission::{
//!     Chain, ChangeRules, Changes, Decision, Hook, HookFuture, Request, Verdict,
//! };
//!
//! struct TenantPool;
//!
//! impl Hook for TenantPool {
//!     fn name(&self) -> &str {
//!         "tenant-pool"
//!     }
//!     fn admit<'a>(&'a self, request: &'a Request) -> HookFuture<'a> {
//!         Box::pin(async move {
//!             let mut changes = Changes::default();
//!             changes.node_selector.insert("pool".into(), request.tenant.clone());
//!             Ok(Decision::AdmitWith(changes))
//!         })
//!     }
//! }
//!
//! # fn main() {
//! let chain = Chain::new(ChangeRules::default()).with_hook(Arc::new(TenantPool));
//! let verdict = futures_lite_block_on(chain.admit(Request::new("acme", "etl", "load")));
//! let Verdict::Admit { request, .. } = verdict else { panic!("admitted") };
//! assert_eq!(request.execution.node_selector["pool"], "acme");
//! # }
//! # fn futures_lite_block_on<F: std::future::Future>(future: F) -> F::Output {
//! #     tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(future)
//! # }
//! ```

#![deny(missing_docs)]
#![warn(missing_debug_implementations, unreachable_pub)]
#![forbid(unsafe_code)]

pub mod admission;
pub mod config;
pub mod dispatch;
pub mod events;
pub mod hooks;
pub mod loadtest;
pub mod metrics;
pub mod report;
pub mod serve;
pub mod supervise;
pub mod workload;
