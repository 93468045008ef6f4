//! Supervision of every hook call (ADR 0100 §5): a breaker gate, a timeout capped by the chain
//! budget, and panic recovery, in that order, on synchronous dispatch and on the workers alike.
//!
//! - [`catch_panic`]: a panicking hook becomes [`crate::admission::HookError::Panicked`].
//! - [`timeout`]: a call past its limit becomes [`crate::admission::HookError::Elapsed`].
//! - [`Gate`] and [`Breaker`]: one breaker actor per hook; the hot path reads its state from an
//!   atomic and never waits for a message round trip.
//! - [`Supervised`]: fixes the order gate → timeout → catch_panic → hook.
//! - [`SupervisedChain`]: drives the admission chain with a supervised call per hook.
//! - [`AdmissionWorker`]: an actor that drains the bounded dispatch buffer.

mod breaker;
mod catch_panic;
mod chain;
mod gate;
mod observer;
mod settings;
mod stack;
mod timeout;
mod worker;

pub use breaker::{Breaker, CurrentState, Opened, ProbeFinished};
pub use catch_panic::{CatchPanic, catch_panic, panic_message};
pub use chain::SupervisedChain;
pub use gate::{BreakerState, Gate, Pass};
pub use observer::{Fanout, Ignore, Observer};
pub use settings::{BreakerSettings, HookSettings, Settings};
pub use stack::Supervised;
pub use timeout::timeout;
pub use worker::{AdmissionWorker, Run, Stop, Wake};
