//! What follows a launch: how a launch error is handled, and the follower that writes a
//! launched attempt's steps to the store as its executor reports them.

use tokio::time::Instant;

use super::executor::{ExecutorError, Step, Steps};
use super::reason::Reason;
use super::shutdown::Tracked;
use super::store::{Requeue, TaskStore};
use super::task::TaskKey;
use crate::admission::error_chain;

/// How a launch error is handled, as Dexaflow's `handleDispatchFailure` classifies it.
pub(super) enum LaunchFailure {
    /// No resources on the host: offered again after a backoff, nothing spent.
    Backpressure,
    /// Anything else: a dispatch attempt is spent on this cause.
    Rejected(Reason),
}

impl LaunchFailure {
    /// Classifies `error` and logs it with Dexaflow's words.
    pub(super) fn of(key: &TaskKey, error: &ExecutorError) -> LaunchFailure {
        let cause = error_chain(error);
        if error.is_backpressure() {
            tracing::warn!(task = %key, %cause, "dispatch hit cluster backpressure; backing off and re-offering (not counted against dispatch budget)");
            LaunchFailure::Backpressure
        } else {
            let cause = Reason::Executor { cause };
            LaunchFailure::log_rejected(key, &cause);
            LaunchFailure::Rejected(cause)
        }
    }

    pub(super) fn log_rejected(key: &TaskKey, cause: &Reason) {
        tracing::warn!(task = %key, %cause, "dispatch failed; backing off before re-attempt");
    }
}

/// Writes the steps of one launched attempt to the store as its executor reports them.
pub(super) struct Follower {
    store: TaskStore,
    key: TaskKey,
    epoch: u64,
    steps: Steps,
    // Held until the last step is written: shutdown waits for it.
    _tracked: Tracked,
}

impl Follower {
    /// A follower of the attempt `key` launched at `epoch`, reading its executor's `steps`,
    /// counted by `tracked` until it has written the last one.
    pub(super) fn new(
        store: TaskStore,
        key: TaskKey,
        epoch: u64,
        steps: Steps,
        tracked: Tracked,
    ) -> Follower {
        Follower {
            store,
            key,
            epoch,
            steps,
            _tracked: tracked,
        }
    }

    /// Writes each step as it comes, until the executor stops reporting.
    pub(super) async fn follow(mut self) {
        while let Some(step) = self.steps.recv().await {
            let (store, key, epoch) = (&self.store, &self.key, self.epoch);
            match step {
                Step::Started => store.mark_running(key, epoch),
                Step::Ended(completion) => store.complete(key, epoch, completion),
                Step::NotStarted(error) => {
                    let why = match LaunchFailure::of(key, &error) {
                        LaunchFailure::Backpressure => Requeue::Backpressure,
                        LaunchFailure::Rejected(cause) => Requeue::Rejected(cause),
                    };
                    store.requeue(key, epoch, why, Instant::now())
                }
                Step::HandedBack => store.requeue(key, epoch, Requeue::HandedBack, Instant::now()),
            };
        }
    }
}
