//! The dispatch pipeline: everything that happens to one attempt, in ADR 0100's order.
//!
//! One function, [`Pipeline::dispatch`], serves both drivers: the synchronous tick
//! (`buffer_size: 0`) and the admission workers (`buffer_size > 0`).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::mpsc;
use tokio::time::Instant;

use super::Settings;
use super::effective::{Effective, build_request, effective_execution};
use super::executor::{Admitted, Executor};
use super::launch::{Follower, LaunchFailure};
use super::placement::{Changed, WarmWorkers, place};
use super::reason::Reason;
use super::refusals::{check_pod_annotations, refuse_before_token};
use super::shutdown::{Shutdown, Tracker};
use super::store::{Spent, TaskStore, Waited, Write};
use super::task::{Task, TaskKey};
use super::token::{AgentIdentity, Minter};
use crate::admission::{Changes, Execution, Request, Resources, Verdict};
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
    /// Whether the offer ended the task instance's dispatch: launched, refused or failed. Every
    /// other disposition leaves the task scheduled, to be offered again or not at all.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            Disposition::Executed | Disposition::Refused | Disposition::Failed
        )
    }

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
struct Settling {
    disposition: Disposition,
    try_number: Option<u32>,
    reason: Option<Reason>,
    changed_by: Vec<String>,
}

impl From<Disposition> for Settling {
    fn from(disposition: Disposition) -> Settling {
        Settling {
            disposition,
            try_number: None,
            reason: None,
            changed_by: Vec::new(),
        }
    }
}

/// The dispatch path for one install: settings, the chain, the token minter, the executor and
/// the store.
///
/// The drivers (the synchronous tick, the buffer and its workers) use it through its verbs:
/// take ready attempts, dispatch each, hand back or defer what they do not dispatch; its parts
/// stay its own.
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
    /// The supervised hook chain; `None` when no hook is registered, as
    /// [`ChainBuilder::start`](crate::supervise::ChainBuilder::start) returns it.
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

/// Where a deferred attempt's next turn comes.
pub(crate) enum Turn {
    /// First on the next tick: it found the buffer full.
    First,
    /// In key order, as any other scheduled attempt.
    InOrder,
}

/// What a step of [`Pipeline::steps`] leaves for the next one, or, as `Err`, how the attempt
/// ended at that step.
type Onward<T> = Result<T, Settling>;

/// The fields an admitted attempt runs with, and whether a hook or the policy changed them.
struct Admission {
    resources: Resources,
    execution: Execution,
    changed: Changed,
}

impl Admission {
    /// The attempt's own fields with its effective values, when no hook is registered.
    fn unchanged(task: &Task, effective: &Effective) -> Admission {
        Admission {
            resources: effective.resources.clone(),
            execution: effective_execution(task, effective),
            changed: Changed::Nothing,
        }
    }
}

// Each step's `Err` is how the attempt settles, returned at once: boxing it would allocate on
// every early end.
#[allow(clippy::result_large_err)]
impl Pipeline {
    /// Assembles the pipeline.
    pub fn new(parts: Parts) -> Pipeline {
        Pipeline {
            settings: parts.settings,
            store: parts.store,
            chain: parts.chain,
            minter: parts.minter,
            executor: parts.executor,
            observer: parts.observer,
            events: parts.events,
            requests_built: AtomicU64::new(0),
            followers: Tracker::default(),
        }
    }

    /// How many admission requests were built: zero for as long as no hook is registered.
    pub fn requests_built(&self) -> u64 {
        self.requests_built.load(Ordering::Relaxed)
    }

    /// The install's dispatch settings, which the drivers run under.
    pub(crate) fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Who the buffer tells of its depth, capacity, deferrals and busy workers.
    pub(crate) fn observer(&self) -> Arc<dyn Observer> {
        Arc::clone(&self.observer)
    }

    /// Adds `tasks` to the store as scheduled; returns how many were new.
    pub(crate) fn schedule(&self, tasks: Vec<Task>) -> usize {
        tasks
            .into_iter()
            .map(|task| self.store.schedule(task))
            .filter(|written| *written == Write::Applied)
            .count()
    }

    /// Takes up to `limit` attempts that are ready now, each marked in flight until it is
    /// dispatched, handed back or deferred.
    pub(crate) fn take_ready(&self, limit: usize) -> Vec<(TaskKey, Arc<Task>)> {
        self.store.take_ready(Instant::now(), limit)
    }

    /// Hands a taken attempt back undispatched, still scheduled with nothing spent.
    pub(crate) fn hand_back(&self, key: &TaskKey) {
        self.store.hand_back(key);
    }

    /// Hands a buffered attempt back, still scheduled with nothing spent, and settles it as
    /// deferred: the one place a buffered attempt is deferred.
    pub(crate) fn defer(&self, key: &TaskKey, turn: Turn) {
        match turn {
            Turn::First => self.store.defer(key),
            Turn::InOrder => self.store.hand_back(key),
        }
        self.send(key, Disposition::Deferred.into());
    }

    /// Stops the executor (it hands back or ends every attempt it still follows) and waits
    /// until every step it reported is written to the store: the last step of shutdown, once
    /// no dispatch is in flight.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping it stops waiting; the executor's shutdown may be left half done.
    pub async fn shut_down(&self) {
        self.executor.shutdown().await;
        self.followers.idle().await;
    }

    fn send(&self, key: &TaskKey, settling: Settling) {
        if let Some(events) = &self.events {
            // A listener that went away wants no more events.
            let _ = events.send(Settled {
                key: key.clone(),
                disposition: settling.disposition,
                try_number: settling.try_number,
                reason: settling.reason,
                changed_by: settling.changed_by,
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
        let settling = self.run(key, task, shutdown).await;
        drop(in_flight);
        let disposition = settling.disposition;
        self.send(key, settling);
        disposition
    }

    async fn run(&self, key: &TaskKey, task: &Arc<Task>, shutdown: &Shutdown) -> Settling {
        // 1. Resolve: the epoch is consumed even if a later check refuses.
        let Some((try_number, epoch)) = self.store.resolve(key) else {
            return Disposition::Superseded.into();
        };
        let settling = match self.steps(key, task, shutdown, try_number, epoch).await {
            Ok(settling) | Err(settling) => settling,
        };
        Settling {
            try_number: Some(try_number),
            ..settling
        }
    }

    /// Steps 2 to 8 of an attempt resolved as try `try_number`, epoch `epoch`, in ADR 0100's
    /// order: the built-in refusals and effective values, admission (refuse, hold or an
    /// unavailable hook end it there), the changes, the token, placement and the launch. Each
    /// step that ends the attempt returns its settling as `Err`.
    async fn steps(
        &self,
        key: &TaskKey,
        task: &Arc<Task>,
        shutdown: &Shutdown,
        try_number: u32,
        epoch: u64,
    ) -> Onward<Settling> {
        let effective = self.refuse_before_token(key, task)?;
        let (admission, changed_by) =
            match self.admit(task, &effective, try_number, shutdown).await? {
                // No hook: one check, and no request is built.
                None => (Admission::unchanged(task, &effective), Vec::new()),
                Some(verdict) => {
                    let (request, changes, changed_by) = self.hold_or_refuse(key, verdict)?;
                    let admission = self.apply_changes(key, task, &effective, request, &changes)?;
                    (admission, changed_by)
                }
            };
        let token = self.mint_token(key, try_number, epoch)?;
        let admitted = self.place_admitted(task, effective, admission, token, try_number, epoch);
        Ok(self.launch(key, admitted, epoch, changed_by).await)
    }

    /// Steps 2 and 3, the built-in refusals and the effective values of an attempt they pass.
    fn refuse_before_token(&self, key: &TaskKey, task: &Task) -> Onward<Effective> {
        let effective = refuse_before_token(task, &self.settings)
            .map_err(|refusal| self.refuse(key, Reason::Refused(refusal)))?;
        if let Some(warning) = &effective.unit_warning {
            tracing::warn!(task = %key, %warning, "task does not fit its size; running it under executor.unit.enforce=warn");
        }
        Ok(effective)
    }

    /// Step 4, admission, the chain's verdict on the attempt's request; `None` when no hook is
    /// registered. Shutdown cancels it.
    async fn admit(
        &self,
        task: &Task,
        effective: &Effective,
        try_number: u32,
        shutdown: &Shutdown,
    ) -> Onward<Option<Verdict>> {
        let Some(chain) = &self.chain else {
            return Ok(None);
        };
        self.requests_built.fetch_add(1, Ordering::Relaxed);
        let request = build_request(task, effective, try_number);
        let started = Instant::now();
        tokio::select! {
            biased;
            () = shutdown.triggered() => {
                self.observer.chain_cancelled(started.elapsed());
                // `dispatch`'s in-flight guard hands the attempt back; a second hand-back here
                // could clear the mark of a later tick's take.
                Err(Disposition::Cancelled.into())
            }
            verdict = chain.admit(request) => Ok(Some(verdict)),
        }
    }

    /// Refuse ends the attempt for good, Hold and an unavailable hook make it wait; an admitted
    /// attempt goes on with its changed request, the changes and who made them.
    fn hold_or_refuse(
        &self,
        key: &TaskKey,
        verdict: Verdict,
    ) -> Onward<(Request, Changes, Vec<String>)> {
        match verdict {
            Verdict::Admit {
                request,
                changes,
                changed_by,
            } => Ok((request, changes, changed_by)),
            Verdict::Refuse { hook, reason } => {
                Err(self.refuse(key, Reason::RefusedByHook { hook, reason }))
            }
            Verdict::Hold { hook, reason } => Err(self.wait(key, Reason::Held { hook, reason })),
            Verdict::Unavailable { hook, error } => {
                Err(self.wait(key, Reason::Unavailable { hook, error }))
            }
        }
    }

    /// Step 5, the admitted changes: refused when the hooks' annotations and the pod's own
    /// are too large together, else the fields the attempt runs with and who changed them.
    fn apply_changes(
        &self,
        key: &TaskKey,
        task: &Task,
        effective: &Effective,
        request: Request,
        changes: &Changes,
    ) -> Onward<Admission> {
        // The chain counted the hooks' annotations without the pod's own.
        if !changes.annotations.is_empty() {
            let annotations = &request.execution.annotations;
            check_pod_annotations(annotations, task, effective.source_mode)
                .map_err(|error| self.refuse(key, Reason::ChangesRefused(error)))?;
        }
        // Only a privileged hook may fill limits, and the policy is the one that does; its
        // forced fields are on every attempt it admits.
        let changed =
            if self.settings.policy.forces_fields || request.resources != effective.resources {
                Changed::ByPolicy
            } else if changes.is_empty() {
                Changed::Nothing
            } else {
                Changed::ByHook
            };
        Ok(Admission {
            resources: request.resources,
            execution: request.execution,
            changed,
        })
    }

    /// Step 6, the agent token, only now that the attempt is admitted; a token that cannot be
    /// minted spends a dispatch attempt.
    fn mint_token(&self, key: &TaskKey, try_number: u32, epoch: u64) -> Onward<String> {
        let task_instance_id = key.task_instance_id();
        let identity = AgentIdentity::new(key, task_instance_id.clone(), try_number, epoch);
        match self.minter.mint(&identity) {
            Ok(token) => {
                self.store.record_token(key);
                Ok(token)
            }
            Err(error) => {
                let cause = Reason::Token {
                    task_instance_id,
                    error: error.to_string(),
                };
                LaunchFailure::log_rejected(key, &cause);
                Err(self.reject(key, cause))
            }
        }
    }

    /// Step 7, placement, on the fields with every change applied: the attempt as the
    /// executor gets it.
    fn place_admitted(
        &self,
        task: &Arc<Task>,
        effective: Effective,
        admission: Admission,
        token: String,
        try_number: u32,
        epoch: u64,
    ) -> Admitted {
        let placement = place(
            &admission.execution,
            admission.changed,
            task,
            effective.source_mode,
            WarmWorkers {
                enabled: self.settings.warm_pools,
                service_account: &self.settings.task_service_account,
                unit_sized: self.settings.unit.is_some(),
            },
        );
        Admitted {
            task: Arc::clone(task),
            image: effective.image,
            task_instance_id: task.key.task_instance_id(),
            try_number,
            attempt_epoch: epoch,
            resources: admission.resources,
            execution: admission.execution,
            placement,
            token,
        }
    }

    /// Step 8, the launch: the executor runs the attempt, and the store shows it queued, followed
    /// when the executor reports its steps.
    async fn launch(
        &self,
        key: &TaskKey,
        admitted: Admitted,
        epoch: u64,
        changed_by: Vec<String>,
    ) -> Settling {
        let launched = match self.executor.execute(&admitted).await {
            Ok(launched) => launched,
            Err(error) => {
                return match LaunchFailure::of(key, &error) {
                    LaunchFailure::Backpressure => self.back_off(key),
                    LaunchFailure::Rejected(cause) => self.reject(key, cause),
                };
            }
        };
        // Counted before the row leaves `scheduled`, so that the attempt is never neither
        // scheduled nor followed while its executor still reports on it.
        let follower = launched.steps.map(|steps| {
            Follower::new(
                self.store.clone(),
                key.clone(),
                epoch,
                steps,
                self.followers.track(),
            )
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
        Settling {
            changed_by,
            ..Disposition::Executed.into()
        }
    }

    fn refuse(&self, key: &TaskKey, reason: Reason) -> Settling {
        tracing::debug!(task = %key, %reason, "dispatch refused; failing task");
        let kept = self.is_listened().then(|| reason.clone());
        match self.store.fail_refused(key, reason) {
            Write::Applied => Settling {
                reason: kept,
                ..Disposition::Refused.into()
            },
            Write::Superseded => Disposition::Superseded.into(),
        }
    }

    fn wait(&self, key: &TaskKey, reason: Reason) -> Settling {
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
        Settling {
            reason: self.recorded_reason(key),
            ..disposition.into()
        }
    }

    fn back_off(&self, key: &TaskKey) -> Settling {
        match self.store.record_dispatch_backpressure(key, Instant::now()) {
            Write::Applied => Disposition::Backpressure,
            Write::Superseded => Disposition::Superseded,
        }
        .into()
    }

    fn reject(&self, key: &TaskKey, cause: Reason) -> Settling {
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
        Settling {
            reason: self.recorded_reason(key),
            ..disposition.into()
        }
    }
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
