//! The load-test harness behind the `loadtest` subcommand (ADR 0100 consequences): how fast the
//! dispatch path admits attempts, and what to set for `buffer_size` and `workers`.
//!
//! A run offers attempts to the real [`Dispatcher`](crate::dispatch::Dispatcher), ticked by the
//! harness, with its [`Pipeline`](crate::dispatch::Pipeline), task store, supervised chain
//! (breaker actors included) and the `null` executor, all in one actix system. The hooks are
//! synthetic, or real webhooks, described by `--hook SPEC` ([`HookFlag`]).
//!
//! - **Open loop.** With `--rate R` attempt *i* is due at *i*/R seconds; its latency runs from
//!   that intended start to its final disposition, so a stall of the dispatcher shows as latency
//!   rather than as fewer attempts. With `--rate 0` attempts are offered as fast as the
//!   dispatcher settles them, and latency runs from the offer. At most a window of attempts
//!   (twice the buffer plus the workers, and at least 256) waits in the task store at once;
//!   later ones wait in the harness, still timed from their intended start. With `--rate 0`
//!   latency therefore mostly measures that queue; use a rate below capacity to measure the
//!   latency of the dispatch path itself. An attempt that is due is offered at once: the
//!   driver sleeps until the next one is due, or not at all when it already is. It wakes on
//!   tokio's millisecond timer, so it offers up to a millisecond late; the report gives that
//!   lateness apart ([`Report::offer_lateness`]), the harness's share of every latency.
//! - **Batched reading.** The driver reads settled attempts as many at a time as have
//!   arrived, never waking once for each; the report counts its wakes
//!   ([`Report::harness_wakes`]).
//! - **Retry window zero.** A held or unavailable attempt fails at its first offer instead of
//!   being offered again for 15 minutes, and is reported as `held` or `unavailable`
//!   ([`AttemptOutcome`]). Deferred attempts (a full buffer) stay scheduled and are offered
//!   again by later ticks; the harness ticks until every offered attempt has settled.
//! - **Conservation.** At the end the dispatcher is drained and every offered attempt must be
//!   accounted for exactly once in the store: executed once (`queued`), refused or failed with
//!   a reason, or handed back (still `scheduled`). [`Report::check_conservation`] fails
//!   otherwise.
//!
//! - **Precise waits.** `sleep` and `jitter` hooks wait on a [`TimerThread`], which ends a wait
//!   within microseconds of its deadline where tokio's millisecond timer would double a 1 ms
//!   wait; its CPU time stands for the hooks' machines and is left out of the report.
//!
//! Modules: [`plan`] (what a run offers, through which hooks, and its validation), [`spec`]
//! (the SPEC grammar and the synthetic hooks), [`timer`] (the hooks' timer thread),
//! `harness` (a run from start to report: [`run`], [`run_blocking`]), `driver` (offering and ticking, the open
//! loop), `accounting` (what was offered and settled, and conservation), [`report`] (the table
//! and JSON), [`chart`] (the SVG charts of `--report DIR`), `Counter` (the harness's own
//! observer).

mod accounting;
pub mod chart;
mod counter;
mod cpu;
mod driver;
mod error;
mod harness;
pub mod memory;
pub mod plan;
pub mod report;
pub mod spec;
pub mod timer;

pub use error::LoadTestError;
pub use harness::{Options, run, run_blocking};
pub use plan::{Amount, Plan, attempt};
pub use report::{
    AttemptOutcome, BreakerTransitions, Latencies, Report, Throughput, check_report_dir,
};
pub use spec::{HookFlag, HookFlagError, WebhookFiles, parse_all};
pub use timer::{HookTimer, TimerThread};
