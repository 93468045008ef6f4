//! Retries through the front door (`dexaflow_admission::install`), as a library user drives
//! them: a later try of a settled task reaches the hooks with its try number, and an offer of a
//! try already made is reported as a duplicate.

use std::sync::{Arc, Mutex};

use dexaflow_admission::admission::{Decision, Hook, HookFuture, Request};
use dexaflow_admission::dispatch::task::{State, Task};
use dexaflow_admission::install::OfferError;
use dexaflow_admission::{Handle, Install};

/// Admits every attempt and records the try number each request carried.
#[derive(Default)]
struct TryRecorder {
    seen: Mutex<Vec<u32>>,
}

impl TryRecorder {
    fn seen(&self) -> Vec<u32> {
        self.seen.lock().expect("no panic while recording").clone()
    }
}

impl Hook for TryRecorder {
    fn name(&self) -> &str {
        "try-recorder"
    }

    fn admit<'a>(&'a self, request: &'a Request) -> HookFuture<'a> {
        self.seen
            .lock()
            .expect("no panic while recording")
            .push(request.try_number);
        Box::pin(async { Ok(Decision::Admit) })
    }
}

/// Starts a dispatcher on the paused clock with a [`TryRecorder`] as its one hook, and gives
/// the task every test offers.
fn start() -> (Arc<TryRecorder>, Handle, Task) {
    tokio::time::pause();
    let hook = Arc::new(TryRecorder::default());
    let handle = Install::from_yaml("executor: {type: \"null\"}\nscheduler: {loop_interval_ms: 5}")
        .expect("a valid config")
        .manual_ticks()
        .hook(hook.clone())
        .start()
        .expect("inside actix");
    (hook, handle, Task::new("acme", "etl", "run-1", "load"))
}

#[actix::test]
async fn a_retry_of_a_settled_task_reaches_the_hooks_with_its_try_number() {
    let (hook, handle, task) = start();
    handle.offer(task.clone()).expect("a new task");
    handle.wait_settled().await;
    handle
        .offer_try(task.clone(), 2)
        .expect("the next try of a settled task");
    handle.wait_settled().await;
    assert_eq!(hook.seen(), [1, 2]);
    let row = handle.instance(&task.key).expect("offered");
    assert_eq!(
        (row.state, row.try_number, row.executions),
        (State::Queued, 2, 1)
    );
}

#[actix::test]
async fn an_offer_of_a_try_already_made_is_reported_and_reaches_no_hook() {
    let (hook, handle, task) = start();
    handle.offer_try(task.clone(), 2).expect("a new task");
    handle.wait_settled().await;
    let duplicate = Err(OfferError::Duplicate(task.key.clone()));
    assert_eq!(handle.offer_try(task.clone(), 2), duplicate);
    assert_eq!(handle.offer(task.clone()), duplicate);
    handle.wait_settled().await;
    assert_eq!(hook.seen(), [2], "each try admitted once");
    let row = handle.instance(&task.key).expect("offered");
    assert_eq!((row.state, row.try_number), (State::Queued, 2));
}
