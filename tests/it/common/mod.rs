//! Test fakes shared by the integration tests: a scripted hook that records what it saw, an
//! observer that records what supervision reported, and a paused clock that starts on a timer
//! tick.
//!
//! A module of the `it` test binary, and compiled again by `#[path]` into other binaries (the
//! tests of their own in `tests/`, a bench), each of which uses only part of it, so items unused
//! there would warn; the allow below is for that and nothing else.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use std::time::Duration;

use tokio::sync::{Notify, Semaphore};

use dexaflow_admission::admission::{
    Changes, Decision, Hook, HookError, HookFuture, Outcome, Request, TaintEffect, Toleration,
    TolerationOperator,
};
use dexaflow_admission::dispatch::task::Task;
use dexaflow_admission::events::{BreakerEvents, BreakerState, BufferEvents, HookEvents};
use dexaflow_admission::{Handle, Install};

/// One answer a [`FakeHook`] gives.
pub type Answer = Result<Decision, HookError>;

/// What a [`FakeHook`] does on one call: answer, never answer, or panic while answering.
// Most acts are answers; boxing them would only add noise to every script.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum Act {
    /// Answers at once.
    Answer(Answer),
    /// Never answers (a hook that hangs, for timeouts and cancellation).
    Pending,
    /// Panics with this message when its future is polled.
    Panic(String),
}

/// A hook that answers from a script and records every request it was shown.
///
/// Answers are taken from the script in order; once the script is empty the fixed answer (if
/// any) is given to every later call. A call with neither panics, naming the hook, so a test
/// that calls a hook more often than it planned fails loudly.
#[derive(Debug)]
pub struct FakeHook {
    name: String,
    script: Mutex<VecDeque<Act>>,
    fixed: Option<Act>,
    seen: Arc<Mutex<Vec<Request>>>,
    log: Option<CallLog>,
}

/// The names of hooks in the order they were called, shared by several [`FakeHook`]s.
pub type CallLog = Arc<Mutex<Vec<String>>>;

impl FakeHook {
    /// A hook named `name` that gives `answer` to every call.
    pub fn answering(name: &str, answer: Answer) -> FakeHook {
        FakeHook::acting(name, Act::Answer(answer))
    }

    /// A hook named `name` that does `act` on every call.
    pub fn acting(name: &str, act: Act) -> FakeHook {
        FakeHook {
            name: name.to_owned(),
            script: Mutex::new(VecDeque::new()),
            fixed: Some(act),
            seen: Arc::new(Mutex::new(Vec::new())),
            log: None,
        }
    }

    /// A hook named `name` that gives `answers` in order, then panics if called again.
    pub fn scripted(name: &str, answers: impl IntoIterator<Item = Answer>) -> FakeHook {
        FakeHook::scripted_acts(name, answers.into_iter().map(Act::Answer))
    }

    /// A hook named `name` that does `acts` in order, then panics if called again.
    pub fn scripted_acts(name: &str, acts: impl IntoIterator<Item = Act>) -> FakeHook {
        FakeHook {
            script: Mutex::new(acts.into_iter().collect()),
            fixed: None,
            ..FakeHook::admitting(name)
        }
    }

    /// A hook that never answers any call.
    pub fn pending(name: &str) -> FakeHook {
        FakeHook::acting(name, Act::Pending)
    }

    /// A hook that panics with `message` on every call.
    pub fn panicking(name: &str, message: &str) -> FakeHook {
        FakeHook::acting(name, Act::Panic(message.to_owned()))
    }

    /// A hook that admits every attempt unchanged.
    pub fn admitting(name: &str) -> FakeHook {
        FakeHook::answering(name, Ok(Decision::Admit))
    }

    /// A hook that admits every attempt with `changes`.
    pub fn changing(name: &str, changes: Changes) -> FakeHook {
        FakeHook::answering(name, Ok(Decision::AdmitWith(Box::new(changes))))
    }

    /// A hook that refuses every attempt with `reason`.
    pub fn refusing(name: &str, reason: &str) -> FakeHook {
        FakeHook::answering(name, Ok(Decision::Refuse(reason.to_owned())))
    }

    /// A hook that holds every attempt with `reason`.
    pub fn holding(name: &str, reason: &str) -> FakeHook {
        FakeHook::answering(name, Ok(Decision::Hold(reason.to_owned())))
    }

    /// A hook whose every call fails with `error`.
    pub fn failing(name: &str, error: HookError) -> FakeHook {
        FakeHook::answering(name, Err(error))
    }

    /// Also writes the hook's name to `log` on every call, to see the order across hooks.
    pub fn logging_to(mut self, log: &CallLog) -> FakeHook {
        self.log = Some(Arc::clone(log));
        self
    }

    /// Wraps the hook in an `Arc`, ready to register and to inspect afterwards.
    pub fn shared(self) -> Arc<FakeHook> {
        Arc::new(self)
    }

    /// The shared record of requests, for a test that needs it after the hook is gone.
    pub fn recorder(&self) -> Arc<Mutex<Vec<Request>>> {
        Arc::clone(&self.seen)
    }

    /// Every request the hook was shown, in call order.
    pub fn seen(&self) -> Vec<Request> {
        self.seen
            .lock()
            .expect("no test panics while holding the record")
            .clone()
    }

    /// How many times the hook was called.
    pub fn calls(&self) -> usize {
        self.seen
            .lock()
            .expect("no test panics while holding the record")
            .len()
    }

    fn next_act(&self) -> Act {
        let scripted = self
            .script
            .lock()
            .expect("no test panics while holding the script")
            .pop_front();
        match (scripted, &self.fixed) {
            (Some(act), _) => act,
            (None, Some(act)) => act.clone(),
            (None, None) => panic!(
                "fake hook {:?} was called more often than scripted",
                self.name
            ),
        }
    }
}

impl Hook for FakeHook {
    fn name(&self) -> &str {
        &self.name
    }

    fn is_remote(&self) -> bool {
        false
    }

    fn admit<'a>(&'a self, request: &'a Request) -> HookFuture<'a> {
        self.seen
            .lock()
            .expect("no test panics while holding the record")
            .push(request.clone());
        if let Some(log) = &self.log {
            log.lock()
                .expect("no test panics while holding the log")
                .push(self.name.clone());
        }
        let act = self.next_act();
        Box::pin(async move {
            match act {
                Act::Answer(answer) => answer,
                Act::Pending => std::future::pending().await,
                Act::Panic(message) => panic!("{message}"),
            }
        })
    }
}

/// Runs `test` in an actix system whose tokio clock is paused from the runtime's first instant.
///
/// tokio's timer counts whole milliseconds from the runtime's start, and a paused clock moves to
/// the tick a timer fires on. `tokio::time::pause()` inside `#[actix::test]` freezes the clock
/// some microseconds past a tick, so every timer then fires up to a millisecond after its
/// deadline; here the clock sits on a tick, and a timer of whole milliseconds fires at its
/// deadline exactly.
pub fn on_paused_clock<F: Future>(test: F) -> F::Output {
    actix::System::with_tokio_rt(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .expect("a current-thread runtime starts")
    })
    .block_on(test)
}

/// A hook that admits every attempt after `duration` on tokio's clock, and counts its calls.
#[derive(Debug)]
pub struct Sleeping {
    name: String,
    duration: Duration,
    calls: AtomicUsize,
}

impl Sleeping {
    /// A hook named `name` that admits after `duration`.
    pub fn new(name: &str, duration: Duration) -> Arc<Sleeping> {
        Arc::new(Sleeping {
            name: name.to_owned(),
            duration,
            calls: AtomicUsize::new(0),
        })
    }

    /// How many times the hook was called.
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

impl Hook for Sleeping {
    fn name(&self) -> &str {
        &self.name
    }

    fn is_remote(&self) -> bool {
        false
    }

    fn admit<'a>(&'a self, _: &'a Request) -> HookFuture<'a> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            tokio::time::sleep(self.duration).await;
            Ok(Decision::Admit)
        })
    }
}

/// A hook that answers only once the test releases it, counts its calls and signals each one:
/// an attempt held in flight for as long as a test needs.
#[derive(Debug)]
pub struct Gated {
    answer: Answer,
    calls: AtomicUsize,
    called: Notify,
    permits: Semaphore,
}

impl Gated {
    /// A hook named `gated` that gives `answer` to each call the test releases.
    pub fn answering(answer: Answer) -> Arc<Gated> {
        Arc::new(Gated {
            answer,
            calls: AtomicUsize::new(0),
            called: Notify::new(),
            permits: Semaphore::new(0),
        })
    }

    /// A gated hook that admits every call it is released for.
    pub fn admitting() -> Arc<Gated> {
        Gated::answering(Ok(Decision::Admit))
    }

    /// Lets `calls` more calls answer.
    pub fn release(&self, calls: usize) {
        self.permits.add_permits(calls);
    }

    /// How many times the hook was called.
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    /// Waits until the hook has been called, failing instead of waiting for ever if it never
    /// is.
    ///
    /// # Panics
    /// If no call comes within a minute of tokio's clock (at once on a paused clock with
    /// nothing else to run).
    pub async fn until_called(&self) {
        // A guard, not a measurement.
        tokio::time::timeout(Duration::from_secs(60), self.called.notified())
            .await
            .expect("the gated hook is called");
    }
}

impl Hook for Gated {
    fn name(&self) -> &str {
        "gated"
    }

    fn is_remote(&self) -> bool {
        false
    }

    fn admit<'a>(&'a self, _: &'a Request) -> HookFuture<'a> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.called.notify_one();
        Box::pin(async move {
            self.permits
                .acquire()
                .await
                .expect("the gate's semaphore is never closed")
                .forget();
            self.answer.clone()
        })
    }
}

/// A new, empty call log.
pub fn call_log() -> CallLog {
    Arc::new(Mutex::new(Vec::new()))
}

/// The names in `log`, in call order.
pub fn logged(log: &CallLog) -> Vec<String> {
    log.lock()
        .expect("no test panics while holding the log")
        .clone()
}

/// A request for tenant `acme`, DAG `etl`, task `load`, with one label and a node selector, so
/// that merges have something to merge into.
pub fn sample_request() -> Request {
    let mut request = Request::new("acme", "etl", "load");
    request.run_id = "scheduled__2026-10-29T00:00:00".to_owned();
    request.operator = "PythonOperator".to_owned();
    request.image = "registry.example.com/etl:1.4".to_owned();
    request.execution.service_account = "dexaflow-task".to_owned();
    request
        .execution
        .node_selector
        .insert("disk".to_owned(), "ssd".to_owned());
    request
        .execution
        .labels
        .insert("team".to_owned(), "data".to_owned());
    request
}

/// Changes that set one node-selector entry.
pub fn node_selector(key: &str, value: &str) -> Changes {
    let mut changes = Changes::default();
    changes
        .node_selector
        .insert(key.to_owned(), value.to_owned());
    changes
}

/// Changes that set one label.
pub fn label(key: &str, value: &str) -> Changes {
    let mut changes = Changes::default();
    changes.labels.insert(key.to_owned(), value.to_owned());
    changes
}

/// Changes that set one annotation.
pub fn annotation(key: &str, value: &str) -> Changes {
    let mut changes = Changes::default();
    changes.annotations.insert(key.to_owned(), value.to_owned());
    changes
}

/// Changes that append one toleration.
pub fn toleration(toleration: Toleration) -> Changes {
    Changes {
        tolerations: vec![toleration],
        ..Changes::default()
    }
}

/// A toleration `key=value:NoSchedule` under `Equal`.
pub fn equal_toleration(key: &str, value: &str) -> Toleration {
    Toleration {
        key: key.to_owned(),
        operator: TolerationOperator::Equal,
        value: value.to_owned(),
        effect: Some(TaintEffect::NoSchedule),
        toleration_seconds: None,
    }
}

/// An observer that records every hook call (the hook it names and its outcome) and breaker
/// change, in order.
#[derive(Debug, Default)]
pub struct RecordingObserver {
    calls: Mutex<Vec<(String, Outcome)>>,
    states: Mutex<Vec<(String, BreakerState)>>,
}

impl RecordingObserver {
    /// Every hook call reported, with the hook it named, in order.
    pub fn calls(&self) -> Vec<(String, Outcome)> {
        self.calls
            .lock()
            .expect("no test panics while holding the record")
            .clone()
    }

    /// Every hook-call outcome reported, in order.
    pub fn outcomes(&self) -> Vec<Outcome> {
        self.calls()
            .into_iter()
            .map(|(_, outcome)| outcome)
            .collect()
    }

    /// Every breaker change reported, with the hook it named, in order.
    pub fn states(&self) -> Vec<(String, BreakerState)> {
        self.states
            .lock()
            .expect("no test panics while holding the record")
            .clone()
    }

    /// Every state the breaker of `hook` was reported moving to, in order.
    pub fn states_of(&self, hook: &str) -> Vec<BreakerState> {
        self.states()
            .into_iter()
            .filter(|(name, _)| name == hook)
            .map(|(_, state)| state)
            .collect()
    }
}

impl HookEvents for RecordingObserver {
    fn hook_call(&self, hook: &str, outcome: Outcome, _: Duration) {
        self.calls
            .lock()
            .expect("no test panics while holding the record")
            .push((hook.to_owned(), outcome));
    }
}

impl BreakerEvents for RecordingObserver {
    fn breaker_changed(&self, _: usize, hook: &str, state: BreakerState) {
        self.states
            .lock()
            .expect("no test panics while holding the record")
            .push((hook.to_owned(), state));
    }
}

impl BufferEvents for RecordingObserver {}

/// An install on the `null` executor, ticked by hand, that streams its settled attempts: the
/// front door as most of its tests drive it.
pub fn manual_install() -> Install {
    Install::from_yaml("executor: {type: \"null\"}\nscheduler: {loop_interval_ms: 5}")
        .expect("a valid config")
        .manual_ticks()
        .stream_settled()
}

/// The task the front-door tests offer: `acme`'s `load` in run `run-1` of DAG `etl`.
pub fn load_task() -> Task {
    Task::new("acme", "etl", "run-1", "load")
}

/// Offers [`load_task`] on `handle` for its first try, and returns it.
pub fn offer_load(handle: &Handle) -> Task {
    let task = load_task();
    handle.offer(task.clone()).expect("a new task");
    task
}

/// No environment variables: what a config read in a test sees.
pub const NO_ENV: [(&str, &str); 0] = [];

/// The one error the config `yaml` has, as its line; a second one (a valid neighbour key
/// reported too, say) fails the test.
pub fn single_config_error(yaml: &str) -> String {
    let errors = dexaflow_admission::config::Config::from_yaml_str(yaml, NO_ENV)
        .expect_err("config is invalid");
    assert_eq!(errors.len(), 1, "exactly one error expected:\n{errors}");
    errors.to_string()
}
