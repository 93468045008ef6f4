//! The task store: one row per task instance with Dexaflow's states and a failure reason.
//!
//! Every write is guarded the way Dexaflow's SQL is (`... WHERE state='scheduled'`), so a write
//! that lost a race changes nothing and says so. The store is shared by the dispatcher, its
//! workers and executor completions; no lock of it is ever held across an await.
//!
//! The rows are split into 64 shards by a hash of the task key, each behind a lock of its
//! own, so that admission workers on different threads writing different tasks do not wait for
//! each other: an attempt's own writes (`resolve`, `record_token`, `mark_queued`, `mark_running`,
//! `complete`, and the in-flight guard's `hand_back` of an attempt that left `scheduled`) take
//! only its shard's lock. The tick's index of offerable rows has a lock of its own, taken by
//! `take_ready`, by `schedule` and by a hand-back that leaves the row offerable. Lock order: the
//! index, then a shard; never the index while a shard is held.

use std::collections::BTreeMap;
use std::hash::BuildHasher;
use std::ops::Bound::{self, Excluded, Included, Unbounded};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;

use super::executor::Completion;
use super::placement::PodKind;
use super::reason::{FailureReason, Reason};
use super::task::{State, Task, TaskKey};
use crate::admission::{Execution, HookError};
use crate::sync::lock;

/// The most dispatch attempts an executor error may spend (Dexaflow's `dispatchMaxAttempts`).
pub const MAX_DISPATCH_ATTEMPTS: u32 = 6;

/// How many shards the task store's rows are split into, each with a lock of its own: enough
/// that admission workers on a few dozen threads rarely meet on one (a power of two, so that a
/// shard is chosen with a mask).
const SHARDS: usize = 64;

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
    /// worker), so that it is not offered twice. Set when the tick takes the row, cleared only
    /// by [`TaskStore::hand_back`] (or `TaskStore::defer`), which whoever took it calls once
    /// the attempt is written.
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
    /// `scheduled` nor `running`, nor `queued` with its executor following it, nor still in the
    /// hands of the dispatch that wrote it.
    pub fn is_settled(&self) -> bool {
        if self.in_flight {
            return false;
        }
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
pub(crate) enum Requeue {
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

/// What spending a dispatch attempt did: the task is offered again after its backoff, or that
/// was its last attempt and it failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Spent {
    /// Attempts remain: still scheduled, offered again once the backoff has passed.
    Retrying,
    /// The last attempt is spent: the task failed as `dispatch_failed`.
    Failed,
    /// The row was not scheduled; nothing changed.
    Superseded,
}

/// The task instances, shared between the dispatcher, its workers and executor completions.
#[derive(Debug, Clone)]
pub struct TaskStore {
    inner: Arc<Shared>,
}

impl Default for TaskStore {
    fn default() -> TaskStore {
        TaskStore::with_capacity(0)
    }
}

/// Hashes task keys, once per look-up: the hash chooses the shard and finds the row in it.
/// Every attempt looks its row up several times, and a key is four strings: std's SipHash made
/// those lookups a tenth of an attempt's cost. Foldhash is seeded at random per process and per
/// store, so colliding task ids cannot be written in advance; it is only minimally resistant to
/// an attacker who studies a running store's timing.
type KeyHasher = foldhash::fast::RandomState;

/// The rows of one shard, found by their key's hash (a table rather than a map, so that the
/// hash that chose the shard is not computed again).
type Rows = hashbrown::HashTable<TaskInstance>;

/// The bits of a key's hash that choose its shard: above those a shard's table indexes by (its
/// low bits, for any table of fewer than 2^32 slots) and below those it tags slots with (its
/// top 7 bits), so that the rows of one shard still spread over its table.
const SHARD_SHIFT: u32 = 32;

/// One locked shard and the hash of the key it was chosen for.
struct Locked<'a> {
    rows: MutexGuard<'a, Rows>,
    hash: u64,
    hasher: &'a KeyHasher,
}

impl Locked<'_> {
    fn get(&self, key: &TaskKey) -> Option<&TaskInstance> {
        self.rows.find(self.hash, |row| row.task.key == *key)
    }

    fn get_mut(&mut self, key: &TaskKey) -> Option<&mut TaskInstance> {
        self.rows.find_mut(self.hash, |row| row.task.key == *key)
    }

    /// Adds the row of the key the shard was chosen for, which is not in it yet.
    fn insert(&mut self, row: TaskInstance) {
        let hasher = self.hasher;
        self.rows
            .insert_unique(self.hash, row, |row| hasher.hash_one(&row.task.key));
    }
}

/// One shard, aligned to a cache line pair so that two shards' locks taken on two cores do not
/// share one.
#[derive(Debug)]
#[repr(align(128))]
struct Shard(Mutex<Rows>);

/// What the store's clones share: the sharded rows and the tick's index.
#[derive(Debug)]
struct Shared {
    shards: Box<[Shard]>,
    hasher: KeyHasher,
    offerable: Mutex<Offerable>,
}

/// The index of the rows that may be offered, so that a tick costs what it offers, not the size
/// of the store.
#[derive(Debug, Default)]
struct Offerable {
    // Every scheduled row that is not in flight, in key order, with the instant before which it
    // is not offered (a backoff), if any. A hint: `take_ready` checks each row it takes under
    // its shard's lock, and forgets a key whose row is no longer offerable.
    ready_at: BTreeMap<TaskKey, Option<Instant>>,
    // Where the next tick starts: after the last key a tick took, or at a deferred key.
    resume: Option<Bound<TaskKey>>,
}

impl TaskStore {
    /// An empty store.
    pub fn new() -> TaskStore {
        TaskStore::default()
    }

    /// An empty store with room for about `rows` task instances, so that filling it up to that
    /// many seldom stops to grow a shard (a load test knows how many attempts it offers).
    pub fn with_capacity(rows: usize) -> TaskStore {
        // Keys spread over the shards at random: leave room for the fuller ones.
        let per_shard = rows.div_ceil(SHARDS);
        let per_shard = if rows == 0 {
            0
        } else {
            per_shard + per_shard / 8 + 16
        };
        let shards = (0..SHARDS)
            .map(|_| Shard(Mutex::new(Rows::with_capacity(per_shard))))
            .collect();
        TaskStore {
            inner: Arc::new(Shared {
                shards,
                hasher: KeyHasher::default(),
                offerable: Mutex::new(Offerable::default()),
            }),
        }
    }

    /// The locked shard that holds `key`'s row.
    fn shard(&self, key: &TaskKey) -> Locked<'_> {
        let hash = self.inner.hasher.hash_one(key);
        // Truncating the hash is the point: these bits choose the shard.
        #[allow(clippy::cast_possible_truncation)]
        let index = (hash >> SHARD_SHIFT) as usize & (SHARDS - 1);
        Locked {
            rows: lock(&self.inner.shards[index].0),
            hash,
            hasher: &self.inner.hasher,
        }
    }

    /// The locked index of offerable rows. Never taken while a shard is held.
    fn offerable(&self) -> MutexGuard<'_, Offerable> {
        lock(&self.inner.offerable)
    }

    /// Every shard in turn, each locked while `visit` runs.
    fn each_shard(&self, mut visit: impl FnMut(&Rows)) {
        for shard in &self.inner.shards {
            visit(&lock(&shard.0));
        }
    }

    /// Clears the in-flight mark of `key`, and returns when it may be offered next (`Some`) if
    /// it is still scheduled, so that the caller puts it back in the index.
    fn release(&self, key: &TaskKey) -> Option<Option<Instant>> {
        let mut rows = self.shard(key);
        let row = rows.get_mut(key)?;
        row.in_flight = false;
        (row.state == State::Scheduled).then_some(row.next_dispatch_at)
    }

    /// Adds a task as `scheduled` for its first try; a task already present is left alone.
    pub fn schedule(&self, task: Task) -> Write {
        self.schedule_try(task, 1)
    }

    /// Adds a task as `scheduled` for try `try_number` (a retry: 2 or more).
    ///
    /// A task already present is scheduled again only for a later try once its previous try
    /// settled ([`TaskInstance::is_settled`]): the row starts afresh for that try, keeping its
    /// attempt epoch so that a late write of the earlier try is refused. Any other offer of a
    /// present task (the same or an earlier try, or a later one while the previous try is still
    /// going) is a duplicate and changes nothing: [`Write::Superseded`].
    pub fn schedule_try(&self, task: Task, try_number: u32) -> Write {
        let key = task.key.clone();
        {
            let mut rows = self.shard(&key);
            match rows.get_mut(&key) {
                Some(row) if row.try_number >= try_number || !row.is_settled() => {
                    return Write::Superseded;
                }
                Some(row) => {
                    let epoch = row.attempt_epoch;
                    *row = TaskInstance::new(Arc::new(task));
                    row.try_number = try_number;
                    row.attempt_epoch = epoch;
                }
                None => {
                    let mut row = TaskInstance::new(Arc::new(task));
                    row.try_number = try_number;
                    rows.insert(row);
                }
            }
        }
        self.offerable().ready_at.insert(key, None);
        Write::Applied
    }

    /// The scheduled tasks ready to be offered at `now` (at most `limit`), marked in flight, in
    /// key order. Tasks still backing off stay for a later tick.
    pub fn take_ready(&self, now: Instant, limit: usize) -> Vec<(TaskKey, Arc<Task>)> {
        let mut guard = self.offerable();
        let index = &mut *guard;
        // Start after the last task taken and wrap around, so that tasks offered again on every
        // tick (held, waiting on a hook) cannot keep later tasks from their turn; Dexaflow's
        // scheduler rotates the same way after a deferral.
        let (after, wrapped) = match &index.resume {
            Some(start) => {
                // The keys before the start, for the wrap-around: the complement of `start`.
                let before = match start {
                    Excluded(key) => Included(key),
                    Included(key) => Excluded(key),
                    Unbounded => Unbounded,
                };
                (
                    index
                        .ready_at
                        .range::<TaskKey, _>((start.as_ref(), Unbounded)),
                    Some(index.ready_at.range::<TaskKey, _>((Unbounded, before))),
                )
            }
            None => (index.ready_at.range::<TaskKey, _>(..), None),
        };
        let mut taken = Vec::new();
        let mut forgotten = Vec::new();
        for (key, ready_at) in after.chain(wrapped.into_iter().flatten()) {
            if taken.len() == limit {
                break;
            }
            if ready_at.is_some_and(|at| at > now) {
                continue;
            }
            match self.shard(key).get_mut(key) {
                Some(row) if row.state == State::Scheduled && !row.in_flight => {
                    row.in_flight = true;
                    taken.push((key.clone(), Arc::clone(&row.task)));
                }
                _ => forgotten.push(key.clone()),
            }
        }
        if let Some((last, _)) = taken.last() {
            index.resume = Some(Excluded(last.clone()));
        }
        for (key, _) in &taken {
            index.ready_at.remove(key);
        }
        for key in &forgotten {
            index.ready_at.remove(key);
        }
        taken
    }

    /// Hands an in-flight attempt back without a decision (deferred, cancelled or drained): it
    /// stays scheduled and is offered again, and nothing is spent.
    pub fn hand_back(&self, key: &TaskKey) {
        if let Some(ready_at) = self.release(key) {
            self.offerable().ready_at.insert(key.clone(), ready_at);
        }
    }

    /// Hands back an attempt the buffer had no room for, and makes it the first the next tick
    /// takes, so that a deferral delays an attempt by one tick, never by a whole rotation.
    pub(crate) fn defer(&self, key: &TaskKey) {
        let released = self.release(key);
        let mut index = self.offerable();
        if let Some(ready_at) = released {
            index.ready_at.insert(key.clone(), ready_at);
        }
        index.resume = Some(Included(key.clone()));
    }

    /// Resolves an attempt: claims the next attempt epoch (consumed even if a later check
    /// refuses) and returns the try number and epoch, or `None` when the task is not scheduled.
    pub fn resolve(&self, key: &TaskKey) -> Option<(u32, u64)> {
        let mut rows = self.shard(key);
        let row = rows.get_mut(key)?;
        if row.state != State::Scheduled {
            return None;
        }
        row.attempt_epoch += 1;
        Some((row.try_number, row.attempt_epoch))
    }

    /// Fails a refused task at once, without retries (Dexaflow's `FailDispatchExhausted` with a
    /// `dispatch refused: ` reason). `reason` is one of the refusals
    /// (`Reason::is_refusal`).
    pub fn fail_refused(&self, key: &TaskKey, reason: Reason) -> Write {
        let mut rows = self.shard(key);
        match rows.get_mut(key) {
            Some(row) if row.state == State::Scheduled => {
                row.state = State::Failed;
                row.failure_reason = Some(FailureReason::new(reason));
                row.next_dispatch_at = None;
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
        let mut rows = self.shard(key);
        let Some(row) = rows.get_mut(key) else {
            return Waited::Superseded;
        };
        if row.state != State::Scheduled {
            return Waited::Superseded;
        }
        let since = *row.waiting_since.get_or_insert(now);
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
        if let Some(row) = self.shard(key).get_mut(key) {
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
        let mut rows = self.shard(key);
        match rows.get_mut(key) {
            Some(row) if row.state == State::Scheduled && row.attempt_epoch == epoch => {
                row.state = State::Queued;
                if row.waiting_since.take().is_some() {
                    row.waited_for = row.failure_reason.take();
                }
                row.failure_reason = None;
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
        match self.shard(key).get_mut(key) {
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
    pub(crate) fn record_dispatch_failure(
        &self,
        key: &TaskKey,
        cause: Reason,
        now: Instant,
    ) -> Spent {
        let mut rows = self.shard(key);
        match rows.get_mut(key) {
            Some(row) if row.state == State::Scheduled => {
                row.spend_dispatch_attempt(cause, now);
                if row.state == State::Failed {
                    Spent::Failed
                } else {
                    Spent::Retrying
                }
            }
            _ => Spent::Superseded,
        }
    }

    /// Records that the executor had no resources to launch the attempt (Dexaflow's
    /// `RecordDispatchBackpressure`): no dispatch attempt is spent, and it is offered again after
    /// the backoff its next attempt would have.
    pub fn record_dispatch_backpressure(&self, key: &TaskKey, now: Instant) -> Write {
        let mut rows = self.shard(key);
        match rows.get_mut(key) {
            Some(row) if row.state == State::Scheduled => {
                row.back_off(now);
                Write::Applied
            }
            _ => Write::Superseded,
        }
    }

    /// Puts a `queued` attempt whose process never started back to `scheduled` (Dexaflow's
    /// `RequeueDispatch`), guarded on the state and the attempt epoch; [`Requeue`] says what it
    /// costs. A requeue that spends the last dispatch attempt fails the task instead.
    pub(crate) fn requeue(&self, key: &TaskKey, epoch: u64, why: Requeue, now: Instant) -> Write {
        let mut rows = self.shard(key);
        let Some(row) = rows.get_mut(key) else {
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
        let offerable = (row.state == State::Scheduled).then_some(row.next_dispatch_at);
        drop(rows);
        if let Some(ready_at) = offerable {
            self.offerable().ready_at.insert(key.clone(), ready_at);
        }
        Write::Applied
    }

    /// Records how a followed attempt ended, guarded on the attempt epoch: `queued` or
    /// `running` becomes `success` or `failed`.
    pub fn complete(&self, key: &TaskKey, epoch: u64, completion: Completion) -> Write {
        let mut rows = self.shard(key);
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
        self.shard(key).get(key).cloned()
    }

    /// Why the task instance `key` last failed or waited, copied without the rest of its row.
    pub fn failure_reason(&self, key: &TaskKey) -> Option<Reason> {
        let rows = self.shard(key);
        rows.get(key)?
            .failure_reason
            .as_ref()
            .map(|kept| kept.reason().clone())
    }

    /// A copy of every task instance, in key order.
    pub fn snapshot(&self) -> Vec<TaskInstance> {
        let mut rows = Vec::new();
        self.each_shard(|shard| rows.extend(shard.iter().cloned()));
        rows.sort_by(|a, b| a.task.key.cmp(&b.task.key));
        rows
    }

    /// Calls `visit` with every task instance, in no particular order, without copying them.
    ///
    /// Each shard's lock is held while its rows are visited: `visit` must not call the store.
    /// Rows written meanwhile are seen as they were when their shard was visited.
    pub(crate) fn for_each(&self, mut visit: impl FnMut(&TaskInstance)) {
        self.each_shard(|shard| shard.iter().for_each(&mut visit));
    }

    /// How many task instances are not settled ([`TaskInstance::is_settled`]).
    pub fn count_unsettled(&self) -> usize {
        let mut unsettled = 0;
        self.for_each(|row| unsettled += usize::from(!row.is_settled()));
        unsettled
    }

    /// How many task instances are in `state`.
    pub fn count(&self, state: State) -> usize {
        let mut count = 0;
        self.for_each(|row| count += usize::from(row.state == state));
        count
    }
}

/// Dexaflow's dispatch backoff: 5s·2^(n−1), at most 5 minutes, no jitter.
pub fn dispatch_backoff(attempts: u32) -> Duration {
    let doublings = attempts.saturating_sub(1).min(16);
    Duration::from_secs(5)
        .saturating_mul(1 << doublings)
        .min(Duration::from_secs(300))
}
