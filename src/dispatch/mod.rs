//! The dispatch path of ADR 0100 §2: resolve the attempt, the built-in refusals, the effective
//! values, the hook chain, the changes, the token, placement and the executor.
//!
//! - [`Dispatcher`]: the actor that ticks and feeds the pipeline, synchronously or through the
//!   bounded buffer (`buffer.rs`) its [`AdmissionWorker`]s drain.
//! - [`Pipeline`]: everything that happens to one attempt, in order; one function for both drivers.
//! - [`refusals`], [`unit`](mod@unit), [`token`], [`placement`], [`executor`]: the steps.
//! - [`TaskStore`]: task instances with Dexaflow's states, and why each failed or waits as a
//!   typed [`Reason`] its reason text is rendered from.

mod buffer;
mod dispatcher;
pub mod executor;
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

pub use buffer::{AT_CAPACITY, Job};
pub use dispatcher::{
    Dispatcher, Drain, DrainReport, Offer, ShuttingDown, Tick, TickReport, Ticking,
};
pub use pipeline::{Disposition, Parts, Pipeline, Settled, task_instance_id, task_instance_id_len};
pub use reason::{FailureReason, Reason};
pub use settings::Settings;
pub use shutdown::{Shutdown, Tracked, Tracker, Trigger, signal};
pub use store::{
    MAX_DISPATCH_ATTEMPTS, Requeue, Spent, TaskInstance, TaskStore, Waited, Write, dispatch_backoff,
};
pub use worker::{AdmissionWorker, JobRunner, Stop, Wake};
