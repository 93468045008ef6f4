//! The events an observer is told name the hook they concern (issue 17, item 3), while the
//! metrics stay labelled by outcome only: public API only, through the front door.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::{FakeHook, RecordingObserver};
use dexaflow_admission::Install;
use dexaflow_admission::admission::Outcome;
use dexaflow_admission::dispatch::Disposition;
use dexaflow_admission::dispatch::task::Task;
use dexaflow_admission::events::BreakerState;
use dexaflow_admission::install::Handle;

/// Starts a dispatcher on the paused clock whose chain is `first` then `second`, each with a
/// breaker that opens at the first failure, and offers one attempt.
fn start(first: FakeHook, second: FakeHook) -> (Arc<RecordingObserver>, Handle) {
    tokio::time::pause();
    let recorder = Arc::new(RecordingObserver::default());
    let handle = Install::from_yaml("executor: {type: \"null\"}\nscheduler: {loop_interval_ms: 5}")
        .expect("a valid config")
        .manual_ticks()
        .supervise(|settings| {
            settings.breaker.failures = 1;
            settings.breaker.backoff = Duration::from_secs(600);
            settings.breaker.max_backoff = Duration::from_secs(600);
        })
        .hook(first.shared())
        .hook(second.shared())
        .observer(recorder.clone())
        .stream_settled()
        .start()
        .expect("inside an actix system");
    handle
        .offer(Task::new("acme", "etl", "run-1", "load"))
        .expect("a new task");
    (recorder, handle)
}

/// Ticks once and waits for the offer to settle; the chain reports every call before that.
async fn settle_one(handle: &mut Handle) -> Disposition {
    handle.tick().await;
    handle
        .next_settled()
        .await
        .expect("the attempt settles")
        .disposition
}

fn call(hook: &str, outcome: Outcome) -> (String, Outcome) {
    (hook.to_owned(), outcome)
}

#[actix::test]
async fn a_panic_and_the_breaker_it_opens_name_the_hook_that_panicked_and_not_the_one_before() {
    let (recorder, mut handle) = start(
        FakeHook::admitting("allow"),
        FakeHook::panicking("budget", "budget table missing"),
    );
    settle_one(&mut handle).await;
    assert_eq!(
        recorder.calls(),
        [
            call("allow", Outcome::Admit),
            call("budget", Outcome::Panic)
        ]
    );
    // The breaker reports from its own actor: a bounded wait on the paused clock.
    for _ in 0..1000 {
        if !recorder.states().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert_eq!(
        recorder.states(),
        [("budget".to_owned(), BreakerState::Open)],
        "only the hook that panicked has its breaker reported"
    );
}

#[actix::test]
async fn a_hold_names_the_hook_that_held_and_opens_no_breaker() {
    let (recorder, mut handle) = start(
        FakeHook::admitting("allow"),
        FakeHook::holding("budget", "over budget this hour"),
    );
    assert_eq!(settle_one(&mut handle).await, Disposition::Waiting);
    // A breaker the hold had opened would skip the hook on the next attempt: the second
    // attempt's calls show it was not, however late a breaker's own event would come.
    assert_eq!(settle_one(&mut handle).await, Disposition::Waiting);
    assert_eq!(
        recorder.calls(),
        [
            call("allow", Outcome::Admit),
            call("budget", Outcome::Hold),
            call("allow", Outcome::Admit),
            call("budget", Outcome::Hold),
        ],
        "each hold is told as the second hook's, each admit as the first's"
    );
    assert!(recorder.states().is_empty(), "{:?}", recorder.states());
}
