//! The dispatch pipeline: everything that happens to one attempt, in ADR 0100's order.
//!
//! One function, [`Pipeline::dispatch`], serves both drivers: the synchronous tick
//! (`buffer_size: 0`) and the admission workers (`buffer_size > 0`).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::mpsc;
use tokio::time::Instant;

use super::Settings;
use super::executor::{Admitted, Executor, ExecutorError, Step, Steps};
use super::placement::{Changed, WarmWorkers, place};
use super::reason::Reason;
use super::refusals::{
    build_request, check_pod_annotations, effective_execution, refuse_before_token,
};
use super::shutdown::{Shutdown, Tracked, Tracker};
use super::store::{Requeue, Spent, TaskStore, Waited, Write};
use super::task::{Task, TaskKey};
use super::token::{AgentIdentity, Minter};
use crate::admission::{Verdict, error_chain};
use crate::events::Observer;
use crate::supervise::SupervisedChain;

/// How one offer of an attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Disposition {
    /// Launched by the executor: the task is queued.
    Executed,
    /// Refused by a built-in check or a hook: the task failed at once, without retries.
    Refused,
    /// Held, or a hook was unavailable: the task stays scheduled and is offered again.
    Waiting,
    /// The retry window or the dispatch attempts are spent: the task failed.
    Failed,
    /// The executor could not launch it: a dispatch attempt is spent and it is offered again
    /// after a backoff.
    Rejected,
    /// The executor had no resources to launch it (too many open files or processes): it is
    /// offered again after a backoff, and nothing is spent.
    Backpressure,
    /// Shutdown cancelled the dispatch: handed back, scheduled, nothing spent.
    Cancelled,
    /// The buffer was full, or the attempt was still buffered at shutdown: handed back,
    /// scheduled, nothing spent.
    Deferred,
    /// The task was no longer scheduled when the attempt resolved or was written.
    Superseded,
}

impl Disposition {
    /// A stable lower-case name, for reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Disposition::Executed => "executed",
            Disposition::Refused => "refused",
            Disposition::Waiting => "waiting",
            Disposition::Failed => "failed",
            Disposition::Rejected => "rejected",
            Disposition::Backpressure => "backpressure",
            Disposition::Cancelled => "cancelled",
            Disposition::Deferred => "deferred",
            Disposition::Superseded => "superseded",
        }
    }
}

/// Sent for every offer once it has a disposition: how this offer ended, and why, as the
/// pipeline decided it (not read back later from a task instance that may have moved on).
///
/// Its [`Disposition`] is how this offer ended; the task instance's
/// [`State`](super::task::State) is where the task stands after it; the hook calls'
/// [`Outcome`](crate::admission::Outcome)s go to the observer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settled {
    /// The task instance.
    pub key: TaskKey,
    /// How the offer ended.
    pub disposition: Disposition,
    /// The try number the hooks saw; `None` when the offer ended before the attempt was
    /// resolved (deferred, or superseded before it began).
    pub try_number: Option<u32>,
    /// Why the task failed, or what it waits for, as recorded by this offer; `None` when the
    /// offer recorded no reason (executed, deferred, cancelled, backpressure, superseded).
    pub reason: Option<Reason>,
    /// The hooks whose changes the admitted attempt carries, in chain order; empty when no hook
    /// changed it or it was not admitted.
    pub changed_by: Vec<String>,
}

impl Settled {
    /// The hook that decided: the one that refused, held or was unavailable, else the last hook
    /// that changed the admitted attempt; `None` when a built-in check or the executor decided,
    /// or every hook admitted it unchanged.
    pub fn deciding_hook(&self) -> Option<&str> {
        let Some(mut reason) = self.reason.as_ref() else {
            return self.changed_by.last().map(String::as_str);
        };
        while let Reason::RetryWindowSpent(waited) = reason {
            reason = waited;
        }
        match reason {
            Reason::RefusedByHook { hook, .. }
            | Reason::Held { hook, .. }
            | Reason::Unavailable { hook, .. } => Some(hook),
            _ => None,
        }
    }
}

/// How one offer ended, before it is sent as [`Settled`].
struct Ending {
    disposition: Disposition,
    try_number: Option<u32>,
    reason: Option<Reason>,
    changed_by: Vec<String>,
}

impl From<Disposition> for Ending {
    fn from(disposition: Disposition) -> Ending {
        Ending {
            disposition,
            try_number: None,
            reason: None,
            changed_by: Vec::new(),
        }
    }
}

/// The dispatch path for one install: settings, the chain, the token minter, the executor and
/// the store.
pub struct Pipeline {
    settings: Arc<Settings>,
    store: TaskStore,
    chain: Option<SupervisedChain>,
    minter: Arc<dyn Minter>,
    executor: Arc<dyn Executor>,
    observer: Arc<dyn Observer>,
    events: Option<mpsc::UnboundedSender<Settled>>,
    requests_built: AtomicU64,
    followers: Tracker,
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline")
            .field("chain", &self.chain)
            .field("executor", &self.executor.name())
            .finish()
    }
}

/// What [`Pipeline`] is built from.
pub struct Parts {
    /// The install's dispatch settings.
    pub settings: Arc<Settings>,
    /// The task store.
    pub store: TaskStore,
    /// The supervised hook chain; `None` or empty when no hook is registered.
    pub chain: Option<SupervisedChain>,
    /// Mints agent tokens.
    pub minter: Arc<dyn Minter>,
    /// Runs admitted attempts.
    pub executor: Arc<dyn Executor>,
    /// Told of cancelled calls and of the buffer (depth, capacity, deferrals, busy workers).
    pub observer: Arc<dyn Observer>,
    /// Receives a [`Settled`] for every offer, when set.
    pub events: Option<mpsc::UnboundedSender<Settled>>,
}

impl std::fmt::Debug for Parts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Parts").field("chain", &self.chain).finish()
    }
}

impl Pipeline {
    /// Assembles the pipeline.
    pub fn new(parts: Parts) -> Pipeline {
        Pipeline {
            settings: parts.settings,
            store: parts.store,
            chain: parts.chain.filter(|chain| !chain.is_empty()),
            minter: parts.minter,
            executor: parts.executor,
            observer: parts.observer,
            events: parts.events,
            requests_built: AtomicU64::new(0),
            followers: Tracker::default(),
        }
    }

    /// The store the pipeline writes.
    pub fn store(&self) -> &TaskStore {
        &self.store
    }

    /// Who is told of calls, breakers and the buffer.
    pub fn observer(&self) -> &dyn Observer {
        self.observer.as_ref()
    }

    /// How many admission requests were built: zero for as long as no hook is registered.
    pub fn requests_built(&self) -> u64 {
        self.requests_built.load(Ordering::Relaxed)
    }

    /// The executor that runs admitted attempts.
    pub fn executor(&self) -> &dyn Executor {
        self.executor.as_ref()
    }

    /// Counts the launched attempts whose steps the pipeline still follows, so that shutdown
    /// can wait until the last of them is written to the store.
    pub fn followers(&self) -> &Tracker {
        &self.followers
    }

    /// Tells the event listener, if any, how an offer ended that recorded no reason (a
    /// deferral).
    pub fn settle(&self, key: &TaskKey, disposition: Disposition) {
        self.send(key, disposition.into());
    }

    fn send(&self, key: &TaskKey, ending: Ending) {
        if let Some(events) = &self.events {
            // A listener that went away wants no more events.
            let _ = events.send(Settled {
                key: key.clone(),
                disposition: ending.disposition,
                try_number: ending.try_number,
                reason: ending.reason,
                changed_by: ending.changed_by,
            });
        }
    }

    /// Whether anyone listens for [`Settled`] events: only then is a reason kept for them.
    fn is_listened(&self) -> bool {
        self.events.is_some()
    }

    /// The reason the store now shows for `key`, read right after this offer wrote it, when
    /// anyone listens.
    fn recorded_reason(&self, key: &TaskKey) -> Option<Reason> {
        if !self.is_listened() {
            return None;
        }
        self.store.failure_reason(key)
    }

    /// Dispatches one attempt of `task`, which the caller took from the store as in flight.
    ///
    /// # Cancel safety
    /// Cancellation is by `shutdown`, not by dropping: a shutdown during the hook chain hands the
    /// attempt back as scheduled, counting nothing toward any breaker. Dropping the future
    /// mid-chain does the same, without the `cancelled` outcome being reported.
    pub async fn dispatch(
        &self,
        key: &TaskKey,
        task: &Arc<Task>,
        shutdown: &Shutdown,
    ) -> Disposition {
        let in_flight = InFlight {
            store: &self.store,
            key,
        };
        let ending = self.run(key, task, shutdown).await;
        drop(in_flight);
        let disposition = ending.disposition;
        self.send(key, ending);
        disposition
    }

    async fn run(&self, key: &TaskKey, task: &Arc<Task>, shutdown: &Shutdown) -> Ending {
        // 1. Resolve: the epoch is consumed even if a later check refuses.
        let Some((try_number, epoch)) = self.store.resolve(key) else {
            return Disposition::Superseded.into();
        };
        let ending = self.resolved(key, task, shutdown, try_number, epoch).await;
        Ending {
            try_number: Some(try_number),
            ..ending
        }
    }

    /// Steps 2 to 8 of an attempt resolved as try `try_number`, epoch `epoch`.
    async fn resolved(
        &self,
        key: &TaskKey,
        task: &Arc<Task>,
        shutdown: &Shutdown,
        try_number: u32,
        epoch: u64,
    ) -> Ending {
        // 2. Built-in refusals, 3. effective values.
        let effective = match refuse_before_token(task, &self.settings) {
            Ok(effective) => effective,
            Err(refusal) => return self.refuse(key, Reason::Refused(refusal)),
        };
        if let Some(warning) = &effective.unit_warning {
            tracing::warn!(task = %key, %warning, "task does not fit its size; running it under executor.unit.enforce=warn");
        }
        // 4. Admission, 5. the admitted changes.
        let (resources, execution, changed, changed_by) = match &self.chain {
            None => (
                effective.resources.clone(),
                effective_execution(task, &effective),
                Changed::Nothing,
                Vec::new(),
            ),
            Some(chain) => {
                self.requests_built.fetch_add(1, Ordering::Relaxed);
                let request = build_request(task, &effective, try_number);
                let started = Instant::now();
                let verdict = tokio::select! {
                    biased;
                    () = shutdown.triggered() => {
                        self.observer.chain_cancelled(started.elapsed());
                        // `dispatch`'s in-flight guard hands the attempt back; a second
                        // hand-back here could clear the mark of a later tick's take.
                        return Disposition::Cancelled.into();
                    }
                    verdict = chain.admit(request) => verdict,
                };
                match verdict {
                    Verdict::Admit {
                        request,
                        changes,
                        changed_by,
                    } => {
                        // The chain counted the hooks' annotations without the pod's own.
                        if !changes.annotations.is_empty() {
                            let annotations = &request.execution.annotations;
                            if let Err(error) =
                                check_pod_annotations(annotations, task, effective.source_mode)
                            {
                                return self.refuse(key, Reason::ChangesRefused(error));
                            }
                        }
                        // Only a privileged hook may fill limits, and the policy is the one
                        // that does; its forced fields are on every attempt it admits.
                        let changed = if self.settings.policy.forces_fields
                            || request.resources != effective.resources
                        {
                            Changed::ByPolicy
                        } else if changes.is_empty() {
                            Changed::Nothing
                        } else {
                            Changed::ByHook
                        };
                        (request.resources, request.execution, changed, changed_by)
                    }
                    Verdict::Refuse { hook, reason } => {
                        return self.refuse(key, Reason::RefusedByHook { hook, reason });
                    }
                    Verdict::Hold { hook, reason } => {
                        return self.wait(key, Reason::Held { hook, reason });
                    }
                    Verdict::Unavailable { hook, error } => {
                        return self.wait(key, Reason::Unavailable { hook, error });
                    }
                }
            }
        };
        // 6. The agent token, only now that the attempt is admitted.
        let task_instance_id = task_instance_id(key);
        let identity = AgentIdentity::new(key, task_instance_id.clone(), try_number, epoch);
        let token = match self.minter.mint(&identity) {
            Ok(token) => token,
            Err(error) => {
                let cause = Reason::Token {
                    task_instance_id,
                    error: error.to_string(),
                };
                LaunchFailure::log_rejected(key, &cause);
                return self.reject(key, cause);
            }
        };
        self.store.record_token(key);
        // 7. Placement, on the fields with every change applied.
        let placement = place(
            &execution,
            changed,
            task,
            effective.source_mode,
            WarmWorkers {
                enabled: self.settings.warm_pools,
                service_account: &self.settings.task_service_account,
                unit_sized: self.settings.unit.is_some(),
            },
        );
        let admitted = Admitted {
            task: Arc::clone(task),
            image: effective.image.clone(),
            task_instance_id,
            try_number,
            attempt_epoch: epoch,
            resources,
            execution,
            placement,
            token,
        };
        // 8. The executor.
        match self.executor.execute(&admitted).await {
            Ok(launched) => {
                // Counted before the row leaves `scheduled`, so that the attempt is never
                // neither scheduled nor followed while its executor still reports on it.
                let follower = launched.steps.map(|steps| Follower {
                    store: self.store.clone(),
                    key: key.clone(),
                    epoch,
                    steps,
                    _tracked: self.followers.track(),
                });
                let written = self.store.mark_queued(
                    key,
                    epoch,
                    admitted.placement,
                    admitted.execution,
                    follower.is_some(),
                );
                if written == Write::Superseded {
                    return Disposition::Superseded.into();
                }
                if let Some(follower) = follower {
                    tokio::spawn(follower.follow());
                }
                Ending {
                    changed_by,
                    ..Disposition::Executed.into()
                }
            }
            Err(error) => match LaunchFailure::of(key, &error) {
                LaunchFailure::Backpressure => self.back_off(key),
                LaunchFailure::Rejected(cause) => self.reject(key, cause),
            },
        }
    }

    fn refuse(&self, key: &TaskKey, reason: Reason) -> Ending {
        tracing::debug!(task = %key, %reason, "dispatch refused; failing task");
        let kept = self.is_listened().then(|| reason.clone());
        match self.store.fail_refused(key, reason) {
            Write::Applied => Ending {
                reason: kept,
                ..Disposition::Refused.into()
            },
            Write::Superseded => Disposition::Superseded.into(),
        }
    }

    fn wait(&self, key: &TaskKey, reason: Reason) -> Ending {
        let disposition =
            match self
                .store
                .wait(key, reason, Instant::now(), self.settings.retry_window)
            {
                Waited::Waiting => Disposition::Waiting,
                Waited::Failed => Disposition::Failed,
                Waited::Superseded => return Disposition::Superseded.into(),
            };
        // The store may keep an earlier cause or wrap it as the retry window spent: what it
        // recorded is what this offer settled with.
        Ending {
            reason: self.recorded_reason(key),
            ..disposition.into()
        }
    }

    fn back_off(&self, key: &TaskKey) -> Ending {
        match self.store.record_dispatch_backpressure(key, Instant::now()) {
            Write::Applied => Disposition::Backpressure,
            Write::Superseded => Disposition::Superseded,
        }
        .into()
    }

    fn reject(&self, key: &TaskKey, cause: Reason) -> Ending {
        let disposition = match self
            .store
            .record_dispatch_failure(key, cause, Instant::now())
        {
            Spent::Retrying => Disposition::Rejected,
            Spent::Failed => Disposition::Failed,
            Spent::Superseded => return Disposition::Superseded.into(),
        };
        // The last attempt wraps the cause as `dispatch_failed`: what the store recorded is
        // what this offer settled with.
        Ending {
            reason: self.recorded_reason(key),
            ..disposition.into()
        }
    }
}

/// How a launch error is handled, as Dexaflow's `handleDispatchFailure` classifies it.
enum LaunchFailure {
    /// No resources on the host: offered again after a backoff, nothing spent.
    Backpressure,
    /// Anything else: a dispatch attempt is spent on this cause.
    Rejected(Reason),
}

impl LaunchFailure {
    /// Classifies `error` and logs it with Dexaflow's words.
    fn of(key: &TaskKey, error: &ExecutorError) -> LaunchFailure {
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

    fn log_rejected(key: &TaskKey, cause: &Reason) {
        tracing::warn!(task = %key, %cause, "dispatch failed; backing off before re-attempt");
    }
}

/// Writes the steps of one launched attempt to the store as its executor reports them.
struct Follower {
    store: TaskStore,
    key: TaskKey,
    epoch: u64,
    steps: Steps,
    // Held until the last step is written: shutdown waits for it.
    _tracked: Tracked,
}

impl Follower {
    async fn follow(mut self) {
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

/// The task instance id of a task key: `tenant.dag.run.task`.
pub fn task_instance_id(key: &TaskKey) -> String {
    task_instance_id_parts(key).join(TASK_INSTANCE_ID_SEPARATOR)
}

/// The length in bytes of [`task_instance_id`] of `key`, counted without building it: every
/// attempt's built-in refusals need only the size of the pod annotation that carries it.
pub fn task_instance_id_len(key: &TaskKey) -> usize {
    let parts = task_instance_id_parts(key);
    let separators = TASK_INSTANCE_ID_SEPARATOR.len() * (parts.len() - 1);
    parts.iter().map(|part| part.len()).sum::<usize>() + separators
}

const TASK_INSTANCE_ID_SEPARATOR: &str = ".";

fn task_instance_id_parts(key: &TaskKey) -> [&str; 4] {
    [&key.tenant, &key.dag_id, &key.run_id, &key.task_id]
}

/// Clears the in-flight mark however the dispatch ends, so that a dropped dispatch is offered
/// again instead of stranded.
struct InFlight<'a> {
    store: &'a TaskStore,
    key: &'a TaskKey,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.store.hand_back(self.key);
    }
}
