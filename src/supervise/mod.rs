//! Supervision of every hook call (ADR 0100 §5): a breaker gate, a timeout capped by the chain
//! budget, and panic recovery, in that order, whoever drives the chain.
//!
//! - `catch_panic`: a panicking hook becomes [`crate::admission::HookError::Panicked`].
//! - [`timeout`] and [`Limit`]: a call past its hook's timeout becomes
//!   [`crate::admission::HookError::Elapsed`]; one that the chain budget cuts first,
//!   [`crate::admission::HookError::BudgetSpent`].
//! - [`Gate`]: one breaker per hook, its state machine in `breaker.rs` and an actor that keeps
//!   its timer and tells observers; the hot path reads the state from atomics and never waits
//!   for a message round trip. It logs each change of state, naming the hook and the cause; a
//!   hook's failures and the attempts it lets through under fail-open are logged too, at most
//!   once every few seconds per hook (`log.rs`).
//! - [`Supervised`]: fixes the order gate → timeout → catch_panic → hook.
//! - [`SupervisedChain`]: drives the admission chain with a supervised call per hook, and
//!   reports each call and breaker through [`crate::events::SupervisionEvents`];
//!   [`ChainBuilder`] makes one from hooks and an install's change rules, for the dispatcher and
//!   the webhook server alike.

mod breaker;
mod builder;
mod catch_panic;
mod chain;
mod gate;
mod log;
mod settings;
mod stack;
mod timeout;

pub use builder::ChainBuilder;
pub(crate) use catch_panic::{catch_panic, panic_message};
pub use chain::SupervisedChain;
pub use gate::{Gate, Pass};
pub use log::LOG_EVERY;
pub(crate) use log::Limiter;
pub use settings::{BreakerSettings, HookSettings, Settings};
pub use stack::Supervised;
pub(crate) use timeout::until;
pub use timeout::{Limit, timeout};
