//! The task store as its writers use it: attempts written from several threads at once, the
//! tick's index seeing what a worker thread handed back, and the retry of a settled task.

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use dexaflow_admission::admission::Execution;
use dexaflow_admission::dispatch::executor::{Completion, Ending};
use dexaflow_admission::dispatch::placement::PodKind;
use dexaflow_admission::dispatch::task::{State, Task, TaskKey};
use dexaflow_admission::dispatch::{Reason, TaskStore, Waited, Write, dispatch_backoff};
use tokio::time::Instant;

fn task(id: &str) -> Task {
    Task::new("acme", "etl", "run-1", id)
}

fn keys(taken: &[(TaskKey, Arc<Task>)]) -> Vec<TaskKey> {
    taken.iter().map(|(key, _)| key.clone()).collect()
}

/// Runs one executed attempt of `key` as a worker does: resolve, token, queued, hand back.
fn execute(store: &TaskStore, key: &TaskKey, followed: bool) -> u64 {
    let (_, epoch) = store.resolve(key).expect("the task is scheduled");
    store.record_token(key);
    assert_eq!(
        store.mark_queued(key, epoch, PodKind::Warm, Execution::default(), followed),
        Write::Applied
    );
    store.hand_back(key);
    epoch
}

#[test]
fn attempts_written_from_two_threads_at_once_each_settle_exactly_once() {
    const TASKS: usize = 4_000;
    let store = TaskStore::new();
    for index in 0..TASKS {
        assert_eq!(
            store.schedule(task(&format!("t{index:05}"))),
            Write::Applied
        );
    }
    let taken = keys(&store.take_ready(Instant::now(), usize::MAX));
    assert_eq!(taken.len(), TASKS);
    let start = Arc::new(Barrier::new(2));
    let workers: Vec<_> = taken
        .chunks(TASKS / 2)
        .map(|half| {
            let (store, half, start) = (store.clone(), half.to_vec(), Arc::clone(&start));
            thread::spawn(move || {
                start.wait();
                for key in &half {
                    execute(&store, key, false);
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().expect("the worker thread finishes");
    }
    let rows = store.snapshot();
    assert_eq!(rows.len(), TASKS);
    for row in &rows {
        assert_eq!(row.state, State::Queued, "{}", row.task.key);
        assert_eq!(row.executions, 1, "{} executed once", row.task.key);
        assert!(row.token_minted && !row.in_flight, "{}", row.task.key);
    }
    assert_eq!(store.count_unsettled(), 0);
    assert!(
        store.take_ready(Instant::now(), usize::MAX).is_empty(),
        "nothing executed is offered again"
    );
}

/// A store holding task `a`, taken by a tick at `now`: the key a worker thread then owns.
fn one_taken(now: Instant) -> (TaskStore, TaskKey) {
    let store = TaskStore::new();
    store.schedule(task("a"));
    let taken = keys(&store.take_ready(now, usize::MAX));
    assert_eq!(taken.len(), 1);
    (store, taken[0].clone())
}

/// Runs `attempt` on a thread of its own, as a worker thread runs a resolved attempt of `key`,
/// then hands the attempt back; returns what `attempt` wrote.
fn on_worker_thread<T: Send + 'static>(
    store: &TaskStore,
    key: &TaskKey,
    attempt: impl FnOnce(&TaskStore, &TaskKey) -> T + Send + 'static,
) -> T {
    let (store, key) = (store.clone(), key.clone());
    thread::spawn(move || {
        store.resolve(&key).expect("scheduled");
        let written = attempt(&store, &key);
        store.hand_back(&key);
        written
    })
    .join()
    .expect("the worker thread")
}

#[test]
fn a_tick_takes_again_an_attempt_a_worker_thread_handed_back() {
    let now = Instant::now();
    let (store, key) = one_taken(now);
    assert!(
        store.take_ready(now, usize::MAX).is_empty(),
        "not offered while in flight"
    );
    let waited = on_worker_thread(&store, &key, move |store, key| {
        let held = Reason::Held {
            hook: "quota".to_owned(),
            reason: "later".to_owned(),
        };
        store.wait(key, held, now, Duration::from_secs(60))
    });
    assert_eq!(waited, Waited::Waiting);
    assert_eq!(keys(&store.take_ready(now, usize::MAX)), vec![key]);
}

#[test]
fn a_backoff_written_on_a_worker_thread_keeps_the_task_from_the_tick_until_it_is_due() {
    let now = Instant::now();
    let (store, key) = one_taken(now);
    let written = on_worker_thread(&store, &key, move |store, key| {
        store.record_dispatch_backpressure(key, now)
    });
    assert_eq!(written, Write::Applied);
    let due = now + dispatch_backoff(1);
    assert!(
        store
            .take_ready(due - Duration::from_millis(1), usize::MAX)
            .is_empty()
    );
    assert_eq!(keys(&store.take_ready(due, usize::MAX)), vec![key.clone()]);
    let row = store.get(&key).expect("stored");
    assert_eq!(row.dispatch_attempts, 0, "backpressure spends nothing");
}

/// Offers try `try_number` of task `a` and executes it as [`execute`] does; returns its key and
/// the attempt's epoch.
fn executed_try(store: &TaskStore, try_number: u32, followed: bool) -> (TaskKey, u64) {
    assert_eq!(store.schedule_try(task("a"), try_number), Write::Applied);
    let taken = keys(&store.take_ready(Instant::now(), usize::MAX));
    assert_eq!(taken.len(), 1);
    let epoch = execute(store, &taken[0], followed);
    (taken[0].clone(), epoch)
}

#[test]
fn a_later_try_of_a_settled_task_is_scheduled_afresh_for_that_try() {
    let store = TaskStore::new();
    let (key, first) = executed_try(&store, 1, true);
    store.complete(&key, first, Completion::Failed(Ending::ExitCode(1)));
    assert_eq!(store.get(&key).map(|row| row.state), Some(State::Failed));

    assert_eq!(store.schedule_try(task("a"), 2), Write::Applied);
    let row = store.get(&key).expect("stored");
    assert_eq!((row.state, row.try_number), (State::Scheduled, 2));
    assert_eq!((row.executions, row.token_minted), (0, false));
    assert_eq!(row.failure_reason, None);
    assert_eq!(
        keys(&store.take_ready(Instant::now(), usize::MAX)),
        vec![key.clone()]
    );
    assert_eq!(store.resolve(&key), Some((2, first + 1)));
}

#[test]
fn a_late_write_of_the_earlier_try_changes_nothing_after_a_retry() {
    let store = TaskStore::new();
    let (key, first) = executed_try(&store, 1, false);
    let (_, second) = executed_try(&store, 2, true);
    assert_ne!(first, second);
    assert_eq!(store.mark_running(&key, first), Write::Superseded);
    assert_eq!(
        store.complete(&key, first, Completion::Succeeded),
        Write::Superseded
    );
    let row = store.get(&key).expect("stored");
    assert_eq!((row.state, row.try_number), (State::Queued, 2));
}

#[test]
fn the_same_or_an_earlier_try_of_a_settled_task_is_a_duplicate() {
    let store = TaskStore::new();
    let (key, _) = executed_try(&store, 2, false);
    let before = store.get(&key).expect("stored");
    assert!(before.is_settled());
    assert_eq!(store.schedule_try(task("a"), 2), Write::Superseded);
    assert_eq!(store.schedule(task("a")), Write::Superseded);
    assert_eq!(store.get(&key), Some(before), "nothing changed");
    assert!(store.take_ready(Instant::now(), usize::MAX).is_empty());
}

#[test]
fn a_later_try_while_the_previous_try_is_still_going_is_a_duplicate() {
    let store = TaskStore::new();
    let key = task("a").key;
    assert_eq!(store.schedule(task("a")), Write::Applied);
    assert_eq!(
        store.schedule_try(task("a"), 2),
        Write::Superseded,
        "scheduled"
    );
    assert_eq!(
        keys(&store.take_ready(Instant::now(), usize::MAX)),
        vec![key.clone()]
    );
    let (_, epoch) = store.resolve(&key).expect("scheduled");
    assert_eq!(
        store.mark_queued(&key, epoch, PodKind::Warm, Execution::default(), false),
        Write::Applied
    );
    assert_eq!(
        store.schedule_try(task("a"), 2),
        Write::Superseded,
        "written but not yet handed back by its dispatch"
    );
    store.hand_back(&key);
    assert_eq!(store.schedule_try(task("a"), 2), Write::Applied);
}
