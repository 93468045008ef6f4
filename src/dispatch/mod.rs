//! The dispatch path of ADR 0100 §2: resolve the attempt, the built-in refusals, the effective
//! values, the hook chain, the changes, the token, placement and the executor.
//!
//! - [`Dispatcher`]: the actor that ticks and feeds the pipeline, synchronously or through the
//!   bounded buffer (`buffer.rs`) its admission workers (`worker.rs`) drain.
//! - [`Pipeline`]: everything that happens to one attempt, in order; one function for both drivers.
//! - [`refusals`], [`effective`], [`unit`](mod@unit), [`token`], [`placement`], [`executor`]:
//!   the steps.
//! - [`TaskStore`]: task instances with Dexaflow's states, and why each failed or waits as a
//!   typed [`Reason`] its reason text is rendered from.

mod buffer;
mod dispatcher;
pub mod effective;
pub mod executor;
mod launch;
mod pipeline;
pub mod placement;
mod reason;
pub mod refusals;
pub mod settings;
mod shutdown;
mod store;
pub mod task;
pub mod token;
pub mod unit;
mod worker;

pub use dispatcher::{
    Dispatcher, Drain, DrainReport, JoinThreads, Offer, ShuttingDown, Tick, TickReport, Ticking,
};
pub use pipeline::{Disposition, Parts, Pipeline, Settled};
pub use reason::{FailureReason, Reason};
pub use settings::Settings;
pub use shutdown::{Shutdown, Trigger, signal};
pub use store::{MAX_DISPATCH_ATTEMPTS, TaskInstance, TaskStore, Waited, Write, dispatch_backoff};
