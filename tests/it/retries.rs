//! Retries through the front door (`dexaflow_admission::install`), as a library user drives
//! them: a later try of a settled task reaches the hooks with its try number, and an offer of a
//! try already made is reported as a duplicate.

use crate::common;

use std::sync::Arc;

use common::FakeHook;
use dexaflow_admission::dispatch::task::{State, Task};
use dexaflow_admission::install::OfferError;
use dexaflow_admission::{Handle, Install};

/// Starts a dispatcher on the paused clock with one admitting hook that records what it is
/// asked, and gives the task every test offers.
fn start() -> (Arc<FakeHook>, Handle, Task) {
    tokio::time::pause();
    let hook = FakeHook::admitting("try-recorder").shared();
    let handle = Install::from_yaml("executor: {type: \"null\"}\nscheduler: {loop_interval_ms: 5}")
        .expect("a valid config")
        .manual_ticks()
        .hook(hook.clone())
        .start()
        .expect("inside actix");
    (hook, handle, Task::new("acme", "etl", "run-1", "load"))
}

/// The try number of each request the hook was asked about, in order.
fn tries(hook: &FakeHook) -> Vec<u32> {
    hook.seen()
        .iter()
        .map(|request| request.try_number)
        .collect()
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
    assert_eq!(tries(&hook), [1, 2]);
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
    assert_eq!(tries(&hook), [2], "each try admitted once");
    let row = handle.instance(&task.key).expect("offered");
    assert_eq!((row.state, row.try_number), (State::Queued, 2));
}
