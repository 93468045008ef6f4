//! The task store: one row per task instance with Dexaflow's states and a failure reason.
//!
//! Every write is guarded the way Dexaflow's SQL is (`... WHERE state='scheduled'`), so a write
//! that lost a race changes nothing and says so. The store is shared by the dispatcher, its
//! workers and executor completions; its lock is never held across an await.

use std::collections::{BTreeSet, HashMap};
use std::ops::Bound::{self, Excluded, Included, Unbounded};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;

use super::executor::Completion;
use super::placement::PodKind;
use super::reason::{FailureReason, Reason};
use super::task::{State, Task, TaskKey};
use crate::admission::{Execution, HookError};

/// The most dispatch attempts an executor error may spend (Dexaflow's `dispatchMaxAttempts`).
pub const MAX_DISPATCH_ATTEMPTS: u32 = 6;

/// One task instance as the store keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskInstance {
    /// The task as its DAG declares it.
    pub task: Arc<Task>,
    /// The try number (1 for the first try); dispatch never changes it.
    pub try_number: u32,
    /// The state.
    pub state: State,
    /// Why it failed, or what it is waiting for while scheduled; `None` when nothing to say.
    pub failure_reason: Option<FailureReason>,
    /// Bumped each time an attempt is resolved, so a late write of an older attempt is refused.
    pub attempt_epoch: u64,
    /// Dispatch attempts spent by executor errors; holds, deferrals and an unavailable hook
    /// spend none.
    pub dispatch_attempts: u32,
    /// Not re-offered before this instant (backoff after an executor error).
    pub next_dispatch_at: Option<Instant>,
    /// When the current run of holds or unavailable hooks started: the retry window's start.
    pub waiting_since: Option<Instant>,
    /// Whether an attempt is being dispatched right now (on the tick, in the buffer or on a
    /// worker), so that it is not offered twice.
    pub in_flight: bool,
    /// Where the admitted attempt runs.
    pub placement: Option<PodKind>,
    /// The execution fields the admitted attempt runs with.
    pub execution: Option<Execution>,
    /// What the attempt last waited for (a hold, an unavailable hook) before it was admitted.
    pub waited_for: Option<FailureReason>,
    /// Whether an agent token was minted for this task instance.
    pub token_minted: bool,
    /// How many times an executor launched it; more than one is a bug the load test looks for.
    pub executions: u32,
    /// Whether its executor follows the launched attempt and will report how it goes on
    /// (`running`, then how it ended); `false` once it has.
    pub followed: bool,
}

impl TaskInstance {
    /// `task` as it is first scheduled: for its first try, with nothing recorded yet.
    pub fn new(task: Arc<Task>) -> TaskInstance {
        TaskInstance {
            task,
            try_number: 1,
            state: State::Scheduled,
            failure_reason: None,
            attempt_epoch: 0,
            dispatch_attempts: 0,
            next_dispatch_at: None,
            waiting_since: None,
            in_flight: false,
            placement: None,
            execution: None,
            waited_for: None,
            token_minted: false,
            executions: 0,
            followed: false,
        }
    }

    /// Whether nothing more happens to the task instance in this run: it is neither
    /// `scheduled` nor `running`, nor `queued` with its executor following it.
    pub fn is_settled(&self) -> bool {
        match self.state {
            State::Scheduled | State::Running => false,
            State::Queued => !self.followed,
            _ => true,
        }
    }

    /// Spends a dispatch attempt on `cause` and backs off, or fails the task once
    /// [`MAX_DISPATCH_ATTEMPTS`] are spent.
    fn spend_dispatch_attempt(&mut self, cause: Reason, now: Instant) {
        let attempts = self.dispatch_attempts + 1;
        if attempts >= MAX_DISPATCH_ATTEMPTS {
            self.state = State::Failed;
            self.failure_reason = Some(FailureReason::new(Reason::DispatchFailed {
                attempts,
                last: Box::new(cause),
            }));
            self.next_dispatch_at = None;
        } else {
            self.dispatch_attempts = attempts;
            self.failure_reason = Some(FailureReason::new(cause));
            self.next_dispatch_at = Some(now + dispatch_backoff(attempts));
        }
    }

    /// Backs off without spending a dispatch attempt: for as long as the next attempt would.
    fn back_off(&mut self, now: Instant) {
        self.next_dispatch_at = Some(now + dispatch_backoff(self.dispatch_attempts + 1));
    }
}

/// Why a `queued` attempt goes back to `scheduled`, and what that costs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requeue {
    /// The executor shut down before the process started: nothing is spent, and it is offered
    /// at once to whoever dispatches next.
    HandedBack,
    /// The process could not start for lack of resources: nothing is spent, and it backs off.
    Backpressure,
    /// The process could not start for this cause: a dispatch attempt is spent.
    Rejected(Reason),
}

/// What a guarded write did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Write {
    /// The row changed.
    Applied,
    /// The row was not in the state the write expects (or is unknown); nothing changed.
    Superseded,
}

/// What recording a wait did: the task still waits, or its retry window is spent and it failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waited {
    /// Still scheduled, re-offered on a later tick.
    Waiting,
    /// The retry window is spent: the task failed as `dispatch_failed`.
    Failed,
    /// The row was not scheduled; nothing changed.
    Superseded,
}

/// The task instances, shared between the dispatcher, its workers and executor completions.
#[derive(Debug, Clone, Default)]
pub struct TaskStore {
    inner: Arc<Mutex<Rows>>,
}

/// Hashes task keys for the rows' index. Every attempt looks its row up several times, and a
/// key is four strings: std's SipHash made those lookups a tenth of an attempt's cost. Foldhash
/// is seeded at random per process, so colliding task ids cannot be written in advance; it is
/// only minimally resistant to an attacker who studies a running store's timing.
type KeyHasher = foldhash::fast::RandomState;

/// The rows and an index of the ones that may be offered, so that a tick costs what it offers,
/// not the size of the store.
#[derive(Debug, Default)]
struct Rows {
    by_key: HashMap<TaskKey, TaskInstance, KeyHasher>,
    // Every scheduled row that is not in flight, in key order.
    offerable: BTreeSet<TaskKey>,
    // Where the next tick starts: after the last key a tick took, or at a deferred key.
    resume: Option<Bound<TaskKey>>,
}

impl Rows {
    fn get_mut(&mut self, key: &TaskKey) -> Option<&mut TaskInstance> {
        self.by_key.get_mut(key)
    }

    /// Clears the in-flight mark of `key` and makes it offerable again if it is still scheduled.
    fn release(&mut self, key: &TaskKey) {
        if let Some(row) = self.by_key.get_mut(key) {
            row.in_flight = false;
            if row.state == State::Scheduled {
                self.offerable.insert(key.clone());
            }
        }
    }
}

impl TaskStore {
    /// An empty store.
    pub fn new() -> TaskStore {
        TaskStore::default()
    }

    /// An empty store with room for `rows` task instances, so that filling it up to that many
    /// never stops to grow its index (a load test knows how many attempts it offers).
    pub fn with_capacity(rows: usize) -> TaskStore {
        let rows = Rows {
            by_key: HashMap::with_capacity_and_hasher(rows, KeyHasher::default()),
            offerable: BTreeSet::new(),
            resume: None,
        };
        TaskStore {
            inner: Arc::new(Mutex::new(rows)),
        }
    }

    fn rows(&self) -> MutexGuard<'_, Rows> {
        // A panic while holding the lock leaves plain data behind; keep serving it.
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Adds a task as `scheduled` for its first try; a task already present is left alone.
    pub fn schedule(&self, task: Task) -> Write {
        self.schedule_try(task, 1)
    }

    /// Adds a task as `scheduled` for try `try_number` (a retry: 2 or more); a task already
    /// present is left alone, whatever its try.
    pub fn schedule_try(&self, task: Task, try_number: u32) -> Write {
        let key = task.key.clone();
        let mut rows = self.rows();
        if rows.by_key.contains_key(&key) {
            return Write::Superseded;
        }
        rows.offerable.insert(key.clone());
        let mut row = TaskInstance::new(Arc::new(task));
        row.try_number = try_number;
        rows.by_key.insert(key, row);
        Write::Applied
    }

    /// The scheduled tasks ready to be offered at `now` (at most `limit`), marked in flight, in
    /// key order. Tasks still backing off stay for a later tick.
    pub fn take_ready(&self, now: Instant, limit: usize) -> Vec<(TaskKey, Arc<Task>)> {
        let mut guard = self.rows();
        let rows = &mut *guard;
        // Start after the last task taken and wrap around, so that tasks offered again on every
        // tick (held, waiting on a hook) cannot keep later tasks from their turn; Dexaflow's
        // scheduler rotates the same way after a deferral.
        let (after, wrapped) = match &rows.resume {
            Some(start) => {
                // The keys before the start, for the wrap-around: the complement of `start`.
                let before = match start {
                    Excluded(key) => Included(key),
                    Included(key) => Excluded(key),
                    Unbounded => Unbounded,
                };
                (
                    rows.offerable
                        .range::<TaskKey, _>((start.as_ref(), Unbounded)),
                    Some(rows.offerable.range::<TaskKey, _>((Unbounded, before))),
                )
            }
            None => (rows.offerable.range::<TaskKey, _>(..), None),
        };
        let mut taken = Vec::new();
        for key in after.chain(wrapped.into_iter().flatten()) {
            if taken.len() == limit {
                break;
            }
            let row = rows
                .by_key
                .get(key)
                .expect("the offerable index only holds stored keys");
            if row.next_dispatch_at.is_none_or(|at| at <= now) {
                taken.push(key.clone());
            }
        }
        if let Some(last) = taken.last() {
            rows.resume = Some(Excluded(last.clone()));
        }
        taken
            .into_iter()
            .map(|key| {
                rows.offerable.remove(&key);
                let row = rows
                    .by_key
                    .get_mut(&key)
                    .expect("key was just read under the same lock");
                row.in_flight = true;
                let task = Arc::clone(&row.task);
                (key, task)
            })
            .collect()
    }

    /// Hands an in-flight attempt back without a decision (deferred, cancelled or drained): it
    /// stays scheduled and is offered again, and nothing is spent.
    pub fn hand_back(&self, key: &TaskKey) {
        self.rows().release(key);
    }

    /// Hands back an attempt the buffer had no room for, and makes it the first the next tick
    /// takes, so that a deferral delays an attempt by one tick, never by a whole rotation.
    pub fn defer(&self, key: &TaskKey) {
        let mut rows = self.rows();
        rows.release(key);
        rows.resume = Some(Included(key.clone()));
    }

    /// Resolves an attempt: claims the next attempt epoch (consumed even if a later check
    /// refuses) and returns the try number and epoch, or `None` when the task is not scheduled.
    pub fn resolve(&self, key: &TaskKey) -> Option<(u32, u64)> {
        let mut rows = self.rows();
        let row = rows.get_mut(key)?;
        if row.state != State::Scheduled {
            return None;
        }
        row.attempt_epoch += 1;
        Some((row.try_number, row.attempt_epoch))
    }

    /// Fails a refused task at once, without retries (Dexaflow's `FailDispatchExhausted` with a
    /// `dispatch refused: ` reason). `reason` is one of the refusals
    /// ([`Reason::is_refusal`]).
    pub fn fail_refused(&self, key: &TaskKey, reason: Reason) -> Write {
        let mut rows = self.rows();
        match rows.get_mut(key) {
            Some(row) if row.state == State::Scheduled => {
                row.state = State::Failed;
                row.failure_reason = Some(FailureReason::new(reason));
                row.next_dispatch_at = None;
                row.in_flight = false;
                Write::Applied
            }
            _ => Write::Superseded,
        }
    }

    /// Records that a hold or an unavailable hook made the attempt wait, showing `reason`.
    ///
    /// No dispatch attempt is spent. Once `retry_window` has passed since the first wait of
    /// this run of waits, the task fails with `dispatch_failed: <reason>`
    /// ([`Reason::RetryWindowSpent`]).
    pub fn wait(
        &self,
        key: &TaskKey,
        reason: Reason,
        now: Instant,
        retry_window: Duration,
    ) -> Waited {
        let mut rows = self.rows();
        let Some(row) = rows.get_mut(key) else {
            return Waited::Superseded;
        };
        if row.state != State::Scheduled {
            return Waited::Superseded;
        }
        let since = *row.waiting_since.get_or_insert(now);
        row.in_flight = false;
        // A breaker that opened after a failure says less than the failure: keep the first cause.
        let reason = match (
            &reason,
            row.failure_reason.as_ref().map(|kept| kept.reason()),
        ) {
            (
                Reason::Unavailable {
                    hook,
                    error: HookError::Skipped,
                },
                Some(kept @ Reason::Unavailable { hook: first, .. }),
            ) if hook == first => kept.clone(),
            _ => reason,
        };
        if now.duration_since(since) >= retry_window {
            row.state = State::Failed;
            row.failure_reason = Some(FailureReason::new(Reason::RetryWindowSpent(Box::new(
                reason,
            ))));
            Waited::Failed
        } else {
            row.failure_reason = Some(FailureReason::new(reason));
            Waited::Waiting
        }
    }

    /// Records that a token was minted for the attempt.
    pub fn record_token(&self, key: &TaskKey) {
        if let Some(row) = self.rows().get_mut(key) {
            row.token_minted = true;
        }
    }

    /// Marks a launched attempt `queued`, guarded on the state and the attempt epoch.
    ///
    /// `followed` says whether its executor reports its steps from here on (a lite process),
    /// or leaves it `queued` (a pod that was created, the `null` executor).
    pub fn mark_queued(
        &self,
        key: &TaskKey,
        epoch: u64,
        placement: PodKind,
        execution: Execution,
        followed: bool,
    ) -> Write {
        let mut rows = self.rows();
        match rows.get_mut(key) {
            Some(row) if row.state == State::Scheduled && row.attempt_epoch == epoch => {
                row.state = State::Queued;
                if row.waiting_since.take().is_some() {
                    row.waited_for = row.failure_reason.take();
                }
                row.failure_reason = None;
                row.in_flight = false;
                row.placement = Some(placement);
                row.execution = Some(execution);
                row.followed = followed;
                row.executions += 1;
                Write::Applied
            }
            _ => Write::Superseded,
        }
    }

    /// Marks a queued attempt `running` once its process started, guarded on the attempt epoch.
    pub fn mark_running(&self, key: &TaskKey, epoch: u64) -> Write {
        match self.rows().get_mut(key) {
            Some(row) if row.state == State::Queued && row.attempt_epoch == epoch => {
                row.state = State::Running;
                Write::Applied
            }
            _ => Write::Superseded,
        }
    }

    /// Records an executor error at dispatch (Dexaflow's `Rejected`): spends a dispatch attempt
    /// and backs off (5s·2^(n−1), at most 5 minutes), or fails the task after
    /// [`MAX_DISPATCH_ATTEMPTS`].
    pub fn record_dispatch_failure(&self, key: &TaskKey, cause: Reason, now: Instant) -> Write {
        let mut rows = self.rows();
        match rows.get_mut(key) {
            Some(row) if row.state == State::Scheduled => {
                row.in_flight = false;
                row.spend_dispatch_attempt(cause, now);
                Write::Applied
            }
            _ => Write::Superseded,
        }
    }

    /// Records that the executor had no resources to launch the attempt (Dexaflow's
    /// `RecordDispatchBackpressure`): no dispatch attempt is spent, and it is offered again after
    /// the backoff its next attempt would have.
    pub fn record_dispatch_backpressure(&self, key: &TaskKey, now: Instant) -> Write {
        let mut rows = self.rows();
        match rows.get_mut(key) {
            Some(row) if row.state == State::Scheduled => {
                row.in_flight = false;
                row.back_off(now);
                Write::Applied
            }
            _ => Write::Superseded,
        }
    }

    /// Puts a `queued` attempt whose process never started back to `scheduled` (Dexaflow's
    /// `RequeueDispatch`), guarded on the state and the attempt epoch; [`Requeue`] says what it
    /// costs. A requeue that spends the last dispatch attempt fails the task instead.
    pub fn requeue(&self, key: &TaskKey, epoch: u64, why: Requeue, now: Instant) -> Write {
        let mut guard = self.rows();
        let rows = &mut *guard;
        let Some(row) = rows.by_key.get_mut(key) else {
            return Write::Superseded;
        };
        if row.state != State::Queued || row.attempt_epoch != epoch {
            return Write::Superseded;
        }
        row.state = State::Scheduled;
        row.placement = None;
        row.execution = None;
        row.followed = false;
        // The attempt never ran: the load test's count of executions must not see it.
        row.executions = row.executions.saturating_sub(1);
        match why {
            Requeue::HandedBack => {}
            Requeue::Backpressure => row.back_off(now),
            Requeue::Rejected(cause) => row.spend_dispatch_attempt(cause, now),
        }
        if row.state == State::Scheduled {
            rows.offerable.insert(key.clone());
        }
        Write::Applied
    }

    /// Records how a followed attempt ended, guarded on the attempt epoch: `queued` or
    /// `running` becomes `success` or `failed`.
    pub fn complete(&self, key: &TaskKey, epoch: u64, completion: Completion) -> Write {
        let mut rows = self.rows();
        match rows.get_mut(key) {
            Some(row)
                if matches!(row.state, State::Queued | State::Running)
                    && row.attempt_epoch == epoch =>
            {
                match completion {
                    Completion::Succeeded => row.state = State::Success,
                    Completion::Failed(how) => {
                        row.state = State::Failed;
                        row.failure_reason = Some(FailureReason::new(Reason::Ended(how)));
                    }
                }
                row.followed = false;
                Write::Applied
            }
            _ => Write::Superseded,
        }
    }

    /// A copy of one task instance.
    pub fn get(&self, key: &TaskKey) -> Option<TaskInstance> {
        self.rows().by_key.get(key).cloned()
    }

    /// A copy of every task instance, in key order.
    pub fn snapshot(&self) -> Vec<TaskInstance> {
        let mut rows: Vec<_> = self.rows().by_key.values().cloned().collect();
        rows.sort_by(|a, b| a.task.key.cmp(&b.task.key));
        rows
    }

    /// Calls `visit` with every task instance, in no particular order, without copying them.
    ///
    /// The store's lock is held throughout: `visit` must not call the store.
    pub fn for_each(&self, visit: impl FnMut(&TaskInstance)) {
        self.rows().by_key.values().for_each(visit);
    }

    /// How many task instances are not settled ([`TaskInstance::is_settled`]).
    pub fn count_unsettled(&self) -> usize {
        self.rows()
            .by_key
            .values()
            .filter(|row| !row.is_settled())
            .count()
    }

    /// How many task instances are in `state`.
    pub fn count(&self, state: State) -> usize {
        self.rows()
            .by_key
            .values()
            .filter(|row| row.state == state)
            .count()
    }
}

/// Dexaflow's dispatch backoff: 5s·2^(n−1), at most 5 minutes, no jitter.
pub fn dispatch_backoff(attempts: u32) -> Duration {
    let doublings = attempts.saturating_sub(1).min(16);
    Duration::from_secs(5)
        .saturating_mul(1 << doublings)
        .min(Duration::from_secs(300))
}
