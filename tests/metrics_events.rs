//! The events an observer is told name the hook they concern (issue 17, item 3), while the
//! metrics stay labelled by outcome only: public API only, through the front door.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use dexaflow_admission::Install;
use dexaflow_admission::admission::{Decision, Hook, HookFuture, Outcome, Request};
use dexaflow_admission::dispatch::task::Task;
use dexaflow_admission::events::{BreakerEvents, BreakerState, BufferEvents, HookEvents};
use dexaflow_admission::install::Handle;

/// A hook named `name` that answers `decide`, or panics when `decide` is `None`.
struct Scripted {
    name: &'static str,
    decide: Option<fn() -> Decision>,
}

impl Hook for Scripted {
    fn name(&self) -> &str {
        self.name
    }
    fn admit<'a>(&'a self, _: &'a Request) -> HookFuture<'a> {
        let decide = self.decide;
        Box::pin(async move {
            match decide {
                Some(decide) => Ok(decide()),
                None => panic!("budget table missing"),
            }
        })
    }
}

fn hook(name: &'static str, decide: Option<fn() -> Decision>) -> Arc<Scripted> {
    Arc::new(Scripted { name, decide })
}

/// Records every hook call and breaker change with the hook it names.
#[derive(Default)]
struct Recorder {
    calls: Mutex<Vec<(String, Outcome)>>,
    breakers: Mutex<Vec<(String, BreakerState)>>,
}

impl HookEvents for Recorder {
    fn hook_call(&self, hook: &str, outcome: Outcome, _: Duration) {
        self.calls
            .lock()
            .expect("no panic while recording")
            .push((hook.to_owned(), outcome));
    }
}

impl BreakerEvents for Recorder {
    fn breaker_changed(&self, _: usize, hook: &str, state: BreakerState) {
        self.breakers
            .lock()
            .expect("no panic while recording")
            .push((hook.to_owned(), state));
    }
}

impl BufferEvents for Recorder {}

impl Recorder {
    fn calls(&self) -> Vec<(String, Outcome)> {
        self.calls.lock().expect("no panic while recording").clone()
    }
    fn breakers(&self) -> Vec<(String, BreakerState)> {
        self.breakers
            .lock()
            .expect("no panic while recording")
            .clone()
    }
}

/// Runs one attempt through `first` then `second`, with a breaker that opens at the first
/// failure, until it settles, and returns what the observer was told.
async fn run(first: Arc<Scripted>, second: Arc<Scripted>) -> (Arc<Recorder>, Handle) {
    tokio::time::pause();
    let recorder = Arc::new(Recorder::default());
    let mut handle =
        Install::from_yaml("executor: {type: \"null\"}\nscheduler: {loop_interval_ms: 5}")
            .expect("a valid config")
            .manual_ticks()
            .supervise(|settings| {
                settings.breaker.failures = 1;
                settings.breaker.backoff = Duration::from_secs(600);
                settings.breaker.max_backoff = Duration::from_secs(600);
            })
            .hook(first)
            .hook(second)
            .observer(recorder.clone())
            .stream_settled()
            .start()
            .expect("inside an actix system");
    handle
        .offer(Task::new("acme", "etl", "run-1", "load"))
        .expect("a new task");
    handle.tick().await;
    // The chain reports every call before the attempt settles.
    handle.next_settled().await.expect("the attempt settles");
    (recorder, handle)
}

fn admit() -> Decision {
    Decision::Admit
}

fn hold() -> Decision {
    Decision::Hold("over budget this hour".to_owned())
}

#[actix::test]
async fn a_panic_and_the_breaker_it_opens_name_the_hook_that_panicked_and_not_the_one_before() {
    let (recorder, _running) = run(hook("allow", Some(admit)), hook("budget", None)).await;
    let calls = recorder.calls();
    assert_eq!(
        calls,
        vec![
            ("allow".to_owned(), Outcome::Admit),
            ("budget".to_owned(), Outcome::Panic),
        ]
    );
    // The breaker reports from its own actor: a bounded wait on the paused clock.
    for _ in 0..1000 {
        if !recorder.breakers().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert_eq!(
        recorder.breakers(),
        vec![("budget".to_owned(), BreakerState::Open)],
        "only the hook that panicked has its breaker reported"
    );
}

#[actix::test]
async fn a_hold_names_the_hook_that_held_and_no_breaker_changes() {
    let (recorder, _running) = run(hook("allow", Some(admit)), hook("budget", Some(hold))).await;
    assert_eq!(
        recorder.calls(),
        vec![
            ("allow".to_owned(), Outcome::Admit),
            ("budget".to_owned(), Outcome::Hold),
        ],
        "the hold is told as the second hook's, the admit as the first's"
    );
    assert!(recorder.breakers().is_empty(), "{:?}", recorder.breakers());
}
