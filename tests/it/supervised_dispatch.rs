//! Broken hooks on synchronous and on buffered dispatch, the chain budget, the full buffer,
//! fail-open, cancellation and drain (ADR 0100 §5).

use crate::common;
use crate::fakes;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{
    Answer, FakeHook, Gated, RecordingObserver, Sleeping, on_paused_clock, sample_request,
};
use dexaflow_admission::admission::{
    Chain, ChangeRules, Decision, Hook, HookError, HookFuture, Outcome, Request, Verdict,
};
use dexaflow_admission::dispatch::task::{State, Task};
use dexaflow_admission::dispatch::{Disposition, Drain, Offer, Reason, Settings, ShuttingDown};
use dexaflow_admission::events::{BreakerState, Ignore};
use dexaflow_admission::supervise::{LOG_EVERY, SupervisedChain};
use fakes::{Harness, settings, start, supervision, task};
use tokio::time::Instant;
use tracing_subscriber::fmt::MakeWriter;

/// How a broken hook breaks.
#[derive(Debug, Clone, Copy)]
enum Breakage {
    Error,
    Timeout,
    Panic,
}

/// A hook named `quota` that breaks as `breakage` says on every call.
fn broken(breakage: Breakage) -> Arc<FakeHook> {
    match breakage {
        Breakage::Error => FakeHook::failing(
            "quota",
            HookError::Failed("quota service said 503\n".to_owned()),
        ),
        Breakage::Timeout => FakeHook::pending("quota"),
        Breakage::Panic => FakeHook::panicking(
            "quota",
            "index out of bounds: the len is 0 but the index is 0",
        ),
    }
    .shared()
}

fn buffered() -> Settings {
    Settings {
        buffer_size: 8,
        workers: 2,
        ..settings()
    }
}

async fn dispatch_once_with_broken_hook(
    settings: Settings,
    breakage: Breakage,
) -> (Harness, Arc<FakeHook>) {
    tokio::time::pause();
    let hook = broken(breakage);
    let mut harness = start(settings, supervision(), vec![hook.clone() as Arc<dyn Hook>]);
    harness.offer_and_tick(vec![task("load")]).await;
    let settled = harness.next_settled().await;
    assert_eq!(settled.disposition, Disposition::Waiting);
    (harness, hook)
}

fn assert_unavailable(harness: &Harness, hook: &FakeHook, cause: &str) {
    let row = harness.store.get(&task("load").key).expect("task stored");
    assert_eq!(row.state, State::Scheduled);
    assert_eq!(
        row.failure_reason.as_deref(),
        Some(format!("admission hook unavailable: quota: {cause}").as_str())
    );
    assert_eq!(row.dispatch_attempts, 0);
    assert!(!row.token_minted);
    assert!(harness.minter.minted().is_empty());
    assert!(harness.executor.calls().is_empty());
    assert_eq!(hook.calls(), 1);
    assert_eq!(harness.gate(0).consecutive_failures(), 1);
}

#[actix::test]
async fn hook_error_on_synchronous_dispatch_leaves_the_attempt_waiting_with_the_cleaned_error() {
    let (harness, hook) = dispatch_once_with_broken_hook(settings(), Breakage::Error).await;
    assert_unavailable(&harness, &hook, "quota service said 503");
}

#[actix::test]
async fn hook_error_on_buffered_dispatch_leaves_the_attempt_waiting_with_the_cleaned_error() {
    let (harness, hook) = dispatch_once_with_broken_hook(buffered(), Breakage::Error).await;
    assert_unavailable(&harness, &hook, "quota service said 503");
}

#[actix::test]
async fn hook_timeout_on_synchronous_dispatch_leaves_the_attempt_waiting() {
    let (harness, hook) = dispatch_once_with_broken_hook(settings(), Breakage::Timeout).await;
    assert_unavailable(&harness, &hook, "timed out after 500ms");
}

#[actix::test]
async fn hook_timeout_on_buffered_dispatch_leaves_the_attempt_waiting() {
    let (harness, hook) = dispatch_once_with_broken_hook(buffered(), Breakage::Timeout).await;
    assert_unavailable(&harness, &hook, "timed out after 500ms");
}

#[actix::test]
async fn hook_panic_on_synchronous_dispatch_leaves_the_attempt_waiting_and_the_dispatcher_running()
{
    let (mut harness, hook) = dispatch_once_with_broken_hook(settings(), Breakage::Panic).await;
    assert_unavailable(
        &harness,
        &hook,
        "panicked: index out of bounds: the len is 0 but the index is 0",
    );
    // The dispatcher still runs: the next tick dispatches the attempt again.
    let report = harness.run_tick().await;
    assert_eq!(report.offered, 1);
    assert_eq!(
        harness.next_settled().await.disposition,
        Disposition::Waiting
    );
    assert_eq!(hook.calls(), 2);
}

#[actix::test]
async fn hook_panic_on_buffered_dispatch_leaves_the_attempt_waiting_and_the_worker_running() {
    let (mut harness, hook) = dispatch_once_with_broken_hook(buffered(), Breakage::Panic).await;
    assert_unavailable(
        &harness,
        &hook,
        "panicked: index out of bounds: the len is 0 but the index is 0",
    );
    harness.run_tick().await;
    assert_eq!(
        harness.next_settled().await.disposition,
        Disposition::Waiting
    );
    assert_eq!(hook.calls(), 2);
}

/// Supervision with a 500ms timeout and a 600ms chain budget, and breakers that open on the
/// first failure they count.
fn budget_of_600ms() -> dexaflow_admission::supervise::Settings {
    let mut supervision = supervision();
    supervision.timeout = Duration::from_millis(500);
    supervision.chain_timeout = Duration::from_millis(600);
    supervision.breaker.failures = 1;
    supervision
}

#[test]
fn chain_budget_spent_by_a_slow_first_hook_cuts_the_second_which_its_breaker_does_not_count() {
    on_paused_clock(async {
        let first = Sleeping::new("first", Duration::from_millis(400));
        let second = Sleeping::new("second", Duration::from_millis(300));
        let hooks: Vec<Arc<dyn Hook>> = vec![first.clone(), second.clone()];
        let mut harness = start(settings(), budget_of_600ms(), hooks);

        harness.offer_and_tick(vec![task("load")]).await;

        assert_eq!(
            harness.next_settled().await.disposition,
            Disposition::Waiting
        );
        let row = harness.store.get(&task("load").key).expect("task stored");
        assert_eq!(row.state, State::Scheduled);
        assert_eq!(
            row.failure_reason.as_deref(),
            Some("admission hook unavailable: second: cut after 200ms: the chain budget was spent")
        );
        assert_eq!(row.dispatch_attempts, 0);
        assert!(!row.token_minted);
        assert!(harness.minter.minted().is_empty());
        assert!(harness.executor.calls().is_empty());
        assert_eq!((first.calls(), second.calls()), (1, 1));
        for position in [0, 1] {
            let gate = harness.gate(position);
            assert_eq!(gate.consecutive_failures(), 0, "hook {position}");
            assert_eq!(
                gate.settled_state().await.expect("alive"),
                BreakerState::Closed,
                "hook {position}"
            );
        }
    });
}

#[test]
fn budget_cuts_count_as_budget_spent_and_under_fail_open_a_hook_with_no_budget_is_not_called() {
    on_paused_clock(async {
        let third = FakeHook::admitting("third").shared();
        let chain = Chain::new(ChangeRules::default())
            .with_hook(Sleeping::new("first", Duration::from_millis(400)))
            .with_hook(Sleeping::new("second", Duration::from_millis(300)))
            .with_hook(third.clone());
        let mut supervision = budget_of_600ms();
        supervision.fail_open = true;
        let observer = Arc::new(RecordingObserver::default());
        let supervised = SupervisedChain::start(chain, &supervision, observer.clone());
        let started = Instant::now();

        let verdict = supervised.admit(sample_request()).await;

        assert_eq!(
            verdict,
            Verdict::Admit {
                request: sample_request(),
                changes: Default::default(),
                changed_by: Vec::new(),
            }
        );
        assert_eq!(started.elapsed(), Duration::from_millis(600));
        assert_eq!(
            observer.outcomes(),
            [
                Outcome::Admit,
                Outcome::BudgetSpent,
                Outcome::FailOpen,
                Outcome::BudgetSpent,
                Outcome::FailOpen
            ]
        );
        assert_eq!(third.calls(), 0);
        for supervised_hook in supervised.hooks() {
            assert_eq!(supervised_hook.gate().consecutive_failures(), 0);
            assert_eq!(
                supervised_hook.gate().settled_state().await.expect("alive"),
                BreakerState::Closed
            );
        }
    });
}

#[test]
fn callers_budget_shorter_than_the_chain_budget_cuts_the_call_which_its_breaker_does_not_count() {
    on_paused_clock(async {
        let slow = Sleeping::new("slow", Duration::from_secs(5));
        let after = FakeHook::admitting("after").shared();
        let chain = Chain::new(ChangeRules::default())
            .with_hook(slow.clone())
            .with_hook(after.clone());
        let mut supervision = budget_of_600ms();
        supervision.timeout = Duration::from_secs(10);
        supervision.chain_timeout = Duration::from_secs(10);
        let observer = Arc::new(RecordingObserver::default());
        let supervised = SupervisedChain::start(chain, &supervision, observer.clone());
        let started = Instant::now();

        let verdict = supervised
            .admit_within(sample_request(), Duration::from_millis(300))
            .await;

        assert_eq!(
            verdict,
            Verdict::Unavailable {
                hook: "slow".to_owned(),
                error: HookError::BudgetSpent(Duration::from_millis(300)),
            }
        );
        assert_eq!(started.elapsed(), Duration::from_millis(300));
        assert_eq!(observer.outcomes(), [Outcome::BudgetSpent]);
        assert_eq!(slow.calls(), 1);
        assert_eq!(after.calls(), 0);
        let gate = supervised.hooks()[0].gate();
        assert_eq!(gate.consecutive_failures(), 0);
        assert_eq!(
            gate.settled_state().await.expect("alive"),
            BreakerState::Closed
        );
    });
}

#[actix::test]
async fn open_breaker_skips_the_hook_and_the_attempt_waits_without_a_timeout() {
    tokio::time::pause();
    let hook = broken(Breakage::Timeout);
    let mut supervision = supervision();
    supervision.breaker.failures = 1;
    let mut harness = start(settings(), supervision, vec![hook.clone() as Arc<dyn Hook>]);
    harness.offer(vec![task("a"), task("b")]).await;

    let started = tokio::time::Instant::now();
    harness.run_tick().await;
    let elapsed = started.elapsed();
    harness.next_settled().await;
    harness.next_settled().await;

    assert_eq!(hook.calls(), 1);
    // One timeout (tokio's timer rounds up to the next millisecond), not two.
    assert!(
        elapsed >= Duration::from_millis(500) && elapsed < Duration::from_millis(600),
        "{elapsed:?}"
    );
    let skipped = harness.store.get(&task("b").key).expect("stored");
    assert_eq!(
        skipped.failure_reason.as_deref(),
        Some("admission hook unavailable: quota: skipped while its breaker is open")
    );
    assert_eq!(
        harness.gate(0).settled_state().await.expect("alive"),
        BreakerState::Open
    );
}

#[actix::test]
async fn fail_open_admits_the_attempt_of_a_broken_hook_unchanged() {
    tokio::time::pause();
    let hook = broken(Breakage::Error);
    let mut supervision = supervision();
    supervision.fail_open = true;
    let mut harness = start(settings(), supervision, vec![hook as Arc<dyn Hook>]);

    harness.offer_and_tick(vec![task("load")]).await;

    assert_eq!(
        harness.next_settled().await.disposition,
        Disposition::Executed
    );
    // Unchanged: launched with the execution and placement it gets with no hook at all.
    let without = start(settings(), fakes::supervision(), Vec::new());
    without.offer_and_tick(vec![task("load")]).await;
    let (calls, expected) = (harness.executor.calls(), without.executor.calls());
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].execution, expected[0].execution);
    assert_eq!(calls[0].placement, expected[0].placement);
    assert_eq!(harness.minter.minted().len(), 1);
    assert_eq!(harness.gate(0).consecutive_failures(), 1);
}

#[actix::test]
async fn fail_open_never_admits_a_held_attempt() {
    let mut supervision = supervision();
    supervision.fail_open = true;
    let hook = FakeHook::holding("freeze", "frozen").shared();
    let mut harness = start(settings(), supervision, vec![hook as Arc<dyn Hook>]);

    harness.offer_and_tick(vec![task("load")]).await;

    assert_eq!(
        harness.next_settled().await.disposition,
        Disposition::Waiting
    );
    assert!(harness.executor.calls().is_empty());
    assert!(harness.minter.minted().is_empty());
}

#[actix::test]
async fn full_buffer_defers_the_attempt_without_spending_a_dispatch_attempt() {
    let hook = Gated::admitting();
    let settings = Settings {
        buffer_size: 1,
        workers: 1,
        ..settings()
    };
    let mut harness = start(settings, supervision(), vec![hook.clone() as Arc<dyn Hook>]);
    let tasks: Vec<Task> = ["a", "b", "c"].into_iter().map(task).collect();
    harness.offer(tasks).await;

    let report = harness.run_tick().await;
    let deferred = harness.next_settled().await;

    assert_eq!(report.offered, 1);
    assert_eq!(report.deferred, 1);
    assert_eq!(deferred.key, task("b").key);
    assert_eq!(deferred.disposition, Disposition::Deferred);
    for id in ["b", "c"] {
        let row = harness.store.get(&task(id).key).expect("stored");
        assert_eq!(row.state, State::Scheduled);
        assert_eq!(row.dispatch_attempts, 0);
        assert!(!row.in_flight);
        assert!(!row.token_minted);
    }
}

#[actix::test]
async fn deferred_attempt_is_dispatched_on_a_later_tick() {
    let hook = Gated::admitting();
    hook.release(10);
    let settings = Settings {
        buffer_size: 1,
        workers: 1,
        ..settings()
    };
    let mut harness = start(settings, supervision(), vec![hook as Arc<dyn Hook>]);
    harness.offer_and_tick(vec![task("a"), task("b")]).await;
    let first = [harness.next_settled().await, harness.next_settled().await];
    harness.run_tick().await;
    let second = harness.next_settled().await;

    assert!(first.iter().any(
        |settled| settled.key == task("b").key && settled.disposition == Disposition::Deferred
    ));
    assert!(first.iter().any(
        |settled| settled.key == task("a").key && settled.disposition == Disposition::Executed
    ));
    assert_eq!(
        (second.key, second.disposition),
        (task("b").key, Disposition::Executed)
    );
    assert_eq!(
        harness
            .store
            .get(&task("b").key)
            .map(|row| row.dispatch_attempts),
        Some(0)
    );
    assert_eq!(harness.executor.calls().len(), 2);
}

#[actix::test]
async fn drain_hands_back_buffered_attempts_and_lets_the_one_in_flight_finish() {
    let hook = Gated::admitting();
    let settings = Settings {
        buffer_size: 4,
        workers: 1,
        ..settings()
    };
    let mut harness = start(settings, supervision(), vec![hook.clone() as Arc<dyn Hook>]);
    let tasks: Vec<Task> = ["a", "b", "c"].into_iter().map(task).collect();
    harness.offer_and_tick(tasks).await;
    hook.until_called().await;

    let drain = harness.dispatcher.send(Drain);
    hook.release(1);
    let report = drain.await.expect("alive");

    assert_eq!(report.handed_back, 2);
    assert!(!report.cancelled_in_flight);
    assert_eq!(
        harness.store.get(&task("a").key).map(|row| row.state),
        Some(State::Queued)
    );
    for id in ["b", "c"] {
        let row = harness.store.get(&task(id).key).expect("stored");
        assert_eq!(
            (row.state, row.in_flight, row.token_minted),
            (State::Scheduled, false, false)
        );
    }
    assert_eq!(hook.calls(), 1);
    let mut dispositions = Vec::new();
    while let Ok(settled) = harness.events.try_recv() {
        dispositions.push(settled.disposition);
    }
    assert_eq!(
        dispositions
            .iter()
            .filter(|d| **d == Disposition::Deferred)
            .count(),
        2
    );
    assert_eq!(
        dispositions
            .iter()
            .filter(|d| **d == Disposition::Executed)
            .count(),
        1
    );
}

#[actix::test]
async fn drain_past_its_timeout_cancels_the_call_which_counts_nothing() {
    tokio::time::pause();
    let hook = Gated::admitting();
    let settings = Settings {
        buffer_size: 4,
        workers: 1,
        drain_timeout: Duration::from_millis(100),
        ..settings()
    };
    let mut harness = start(settings, supervision(), vec![hook.clone() as Arc<dyn Hook>]);
    harness.offer_and_tick(vec![task("a")]).await;
    hook.until_called().await;

    let report = harness.dispatcher.send(Drain).await.expect("alive");

    assert!(report.cancelled_in_flight);
    let row = harness.store.get(&task("a").key).expect("stored");
    assert_eq!(
        (row.state, row.in_flight, row.token_minted),
        (State::Scheduled, false, false)
    );
    assert_eq!(row.failure_reason, None);
    assert_eq!(harness.gate(0).consecutive_failures(), 0);
    assert_eq!(
        harness.next_settled().await.disposition,
        Disposition::Cancelled
    );
    assert!(harness.executor.calls().is_empty());
}

#[actix::test]
async fn dispatcher_takes_no_offers_after_drain() {
    let harness = start(settings(), supervision(), Vec::new());

    harness.dispatcher.send(Drain).await.expect("alive");
    let offered = harness
        .dispatcher
        .send(Offer(vec![task("late")]))
        .await
        .expect("alive");

    assert_eq!(offered, Err(ShuttingDown));
    assert!(harness.store.get(&task("late").key).is_none());
}

/// Holds tasks `a` and `b` for ever, admits every other.
struct HoldsFirstTwo;

impl Hook for HoldsFirstTwo {
    fn name(&self) -> &str {
        "holds-first-two"
    }

    fn is_remote(&self) -> bool {
        false
    }

    fn admit<'a>(&'a self, request: &'a Request) -> HookFuture<'a> {
        let held = matches!(request.task_id.as_str(), "a" | "b");
        Box::pin(async move {
            Ok(if held {
                Decision::Hold("frozen".to_owned())
            } else {
                Decision::Admit
            })
        })
    }
}

#[actix::test]
async fn attempts_held_on_every_tick_do_not_keep_later_attempts_from_the_buffer() {
    let settings = Settings {
        buffer_size: 2,
        workers: 1,
        ..settings()
    };
    let mut harness = start(
        settings,
        supervision(),
        vec![Arc::new(HoldsFirstTwo) as Arc<dyn Hook>],
    );
    let tasks: Vec<Task> = ["a", "b", "c", "d"].into_iter().map(task).collect();
    harness.offer(tasks).await;

    for _ in 0..4 {
        let report = harness.run_tick().await;
        for _ in 0..report.offered + report.deferred {
            harness.next_settled().await;
        }
    }

    for id in ["c", "d"] {
        assert_eq!(
            harness.store.get(&task(id).key).map(|row| row.state),
            Some(State::Queued),
            "{id}"
        );
    }
    for id in ["a", "b"] {
        let row = harness.store.get(&task(id).key).expect("stored");
        assert_eq!((row.state, row.token_minted), (State::Scheduled, false));
    }
    let launched: Vec<String> = harness
        .executor
        .calls()
        .iter()
        .map(|call| call.task.key.task_id.clone())
        .collect();
    assert_eq!(launched, ["c", "d"]);
}

#[actix::test]
async fn deferred_attempt_is_the_first_the_next_tick_offers() {
    let hook = Gated::admitting();
    hook.release(10);
    let settings = Settings {
        buffer_size: 1,
        workers: 1,
        ..settings()
    };
    let mut harness = start(settings, supervision(), vec![hook as Arc<dyn Hook>]);
    let tasks: Vec<Task> = ["a", "b", "c"].into_iter().map(task).collect();
    harness.offer_and_tick(tasks).await;
    let first = [harness.next_settled().await, harness.next_settled().await];
    harness.run_tick().await;
    let second = [harness.next_settled().await, harness.next_settled().await];

    assert!(
        first
            .iter()
            .any(|settled| (settled.key.clone(), settled.disposition)
                == (task("b").key, Disposition::Deferred))
    );
    assert!(
        second
            .iter()
            .any(|settled| (settled.key.clone(), settled.disposition)
                == (task("b").key, Disposition::Executed))
    );
    assert!(
        second
            .iter()
            .any(|settled| (settled.key.clone(), settled.disposition)
                == (task("c").key, Disposition::Deferred))
    );
}

/// A log sink a test can read back.
#[derive(Clone, Default)]
struct CapturedLog(Arc<Mutex<Vec<u8>>>);

impl CapturedLog {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().expect("no test panics while logging")).into_owned()
    }
}

impl std::io::Write for CapturedLog {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .expect("no test panics while logging")
            .extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for CapturedLog {
    type Writer = CapturedLog;

    fn make_writer(&'a self) -> CapturedLog {
        self.clone()
    }
}

/// Captures what this thread logs, at every level from `INFO` up, until the guard is dropped.
fn capture_log() -> (CapturedLog, tracing::subscriber::DefaultGuard) {
    let log = CapturedLog::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(log.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .finish();
    let guard = tracing::subscriber::set_default(subscriber);
    (log, guard)
}

/// What starting a supervised chain of one hook logs, with `fail_open` as given.
fn log_of_a_chain_starting(fail_open: bool) -> String {
    let (log, _logging) = capture_log();
    let mut supervision = supervision();
    supervision.fail_open = fail_open;
    let chain = Chain::new(ChangeRules::default()).with_hook(FakeHook::admitting("quota").shared());
    SupervisedChain::start(chain, &supervision, Arc::new(Ignore));
    log.text()
}

#[actix::test]
async fn fail_open_is_logged_as_a_warning_when_a_supervised_chain_starts_with_it() {
    let log = log_of_a_chain_starting(true);

    assert!(
        log.contains("WARN") && log.contains("fail-open is on"),
        "{log}"
    );
}

#[actix::test]
async fn nothing_about_fail_open_is_logged_when_it_is_off() {
    let log = log_of_a_chain_starting(false);

    assert!(!log.contains("fail-open"), "{log}");
}

// A hook whose timeout is the whole chain budget.

/// Supervision whose hooks' timeout is the whole chain budget, `budget`, with breakers that open
/// on the second failure they count and stay open for an hour.
fn timeout_equal_to_the_budget(budget: Duration) -> dexaflow_admission::supervise::Settings {
    let mut supervision = supervision();
    supervision.timeout = budget;
    supervision.chain_timeout = budget;
    supervision.breaker.failures = 2;
    supervision.breaker.backoff = Duration::from_secs(3600);
    supervision.breaker.max_backoff = Duration::from_secs(3600);
    supervision
}

/// Admits three attempts through a lone hook that never answers, its timeout equal to the chain
/// budget, and returns what the observer recorded and the hook.
async fn admit_three_through_a_hanging_hook_with_the_whole_budget(
    budget: Duration,
) -> (Vec<Verdict>, Arc<RecordingObserver>, Arc<FakeHook>) {
    let hook = FakeHook::pending("quota").shared();
    let chain = Chain::new(ChangeRules::default()).with_hook(hook.clone());
    let observer = Arc::new(RecordingObserver::default());
    let supervised = SupervisedChain::start(
        chain,
        &timeout_equal_to_the_budget(budget),
        observer.clone(),
    );
    let mut verdicts = Vec::new();
    for _ in 0..3 {
        verdicts.push(supervised.admit(sample_request()).await);
    }
    assert_eq!(
        supervised.hooks()[0]
            .gate()
            .settled_state()
            .await
            .expect("alive"),
        BreakerState::Open
    );
    (verdicts, observer, hook)
}

#[test]
fn lone_hook_whose_timeout_is_the_chain_budget_times_out_and_opens_its_breaker() {
    on_paused_clock(async {
        let budget = Duration::from_millis(500);
        let (verdicts, observer, hook) =
            admit_three_through_a_hanging_hook_with_the_whole_budget(budget).await;

        assert_eq!(
            observer.outcomes(),
            [Outcome::Timeout, Outcome::Timeout, Outcome::Skipped]
        );
        assert!(!observer.outcomes().contains(&Outcome::BudgetSpent));
        assert_eq!(hook.calls(), 2);
        assert_eq!(
            verdicts[0],
            Verdict::Unavailable {
                hook: "quota".to_owned(),
                error: HookError::Elapsed(budget),
            }
        );
        assert_eq!(observer.states_of("quota"), [BreakerState::Open]);
    });
}

// On the real clock the chain starts a few nanoseconds before its first call: that call must
// still get the whole budget, and running out of it is its own timeout, which its breaker counts.
#[actix::test]
async fn on_the_real_clock_a_lone_hook_whose_timeout_is_the_chain_budget_opens_its_breaker() {
    let (verdicts, observer, hook) =
        admit_three_through_a_hanging_hook_with_the_whole_budget(Duration::from_millis(20)).await;

    assert_eq!(
        observer.outcomes(),
        [Outcome::Timeout, Outcome::Timeout, Outcome::Skipped]
    );
    assert_eq!(hook.calls(), 2);
    assert!(
        verdicts.iter().all(|verdict| !matches!(
            verdict,
            Verdict::Unavailable {
                error: HookError::BudgetSpent(_),
                ..
            }
        )),
        "{verdicts:?}"
    );
}

#[test]
fn a_budget_cut_and_a_timeout_show_their_durations_rounded_for_a_person() {
    let unavailable = |error| Reason::Unavailable {
        hook: "webhook".to_owned(),
        error,
    };

    let cut = unavailable(HookError::BudgetSpent(Duration::from_nanos(1_999_999_699)));
    let timed_out = unavailable(HookError::Elapsed(Duration::from_nanos(479_999_800)));

    assert_eq!(
        cut.to_string(),
        "admission hook unavailable: webhook: cut after 2s: the chain budget was spent"
    );
    assert_eq!(
        timed_out.to_string(),
        "admission hook unavailable: webhook: timed out after 480ms"
    );
}

// What supervision logs.

const OUTAGE: &str = "quota service said 503";

fn outage() -> Answer {
    Err(HookError::Failed(OUTAGE.to_owned()))
}

/// The lines of `log` that contain `text`.
fn lines_with<'a>(log: &'a str, text: &str) -> Vec<&'a str> {
    log.lines().filter(|line| line.contains(text)).collect()
}

/// Supervises a chain of `hook` alone with `supervision`, telling nobody of its calls.
fn supervise_alone(
    hook: Arc<FakeHook>,
    supervision: &dexaflow_admission::supervise::Settings,
) -> SupervisedChain {
    let chain = Chain::new(ChangeRules::default()).with_hook(hook);
    SupervisedChain::start(chain, supervision, Arc::new(Ignore))
}

#[test]
fn a_burst_of_hook_failures_logs_one_line_naming_the_hook_and_the_cause() {
    on_paused_clock(async {
        let (log, _logging) = capture_log();
        let hook = FakeHook::answering("quota", outage()).shared();
        let chain = supervise_alone(hook.clone(), &supervision());

        for _ in 0..20 {
            chain.admit(sample_request()).await;
        }

        let text = log.text();
        let failures = lines_with(&text, "failed:");
        assert_eq!(hook.calls(), 20);
        assert_eq!(failures.len(), 1, "{text}");
        assert!(
            failures[0].contains("WARN")
                && failures[0].contains(&format!("hook \"quota\" failed: {OUTAGE}")),
            "{text}"
        );
        assert!(!failures[0].contains("not logged"), "{text}");
    });
}

#[test]
fn the_next_failure_line_comes_after_the_pause_and_counts_the_failures_left_out() {
    on_paused_clock(async {
        let (log, _logging) = capture_log();
        let hook = FakeHook::answering("quota", outage()).shared();
        let chain = supervise_alone(hook.clone(), &supervision());
        for _ in 0..20 {
            chain.admit(sample_request()).await;
        }
        tokio::time::advance(LOG_EVERY - Duration::from_millis(1)).await;
        chain.admit(sample_request()).await;
        let before_the_pause_ends = lines_with(&log.text(), "failed:").len();

        tokio::time::advance(Duration::from_millis(1)).await;
        chain.admit(sample_request()).await;

        let text = log.text();
        let failures = lines_with(&text, "failed:");
        assert_eq!(before_the_pause_ends, 1, "{text}");
        assert_eq!(failures.len(), 2, "{text}");
        assert!(
            failures[1].contains(&format!("hook \"quota\" failed: {OUTAGE}"))
                && failures[1].contains("20 more failures since the last line were not logged"),
            "{text}"
        );
    });
}

/// Fails the hook of `chain` until its breaker (opening at the second failure) opens, lets its
/// backoff of one second end, and calls it once more as the probe.
async fn open_and_probe(chain: &SupervisedChain) {
    chain.admit(sample_request()).await;
    chain.admit(sample_request()).await;
    let gate = chain.hooks()[0].gate();
    assert_eq!(
        gate.settled_state().await.expect("alive"),
        BreakerState::Open
    );
    tokio::time::advance(Duration::from_secs(1)).await;
    assert_eq!(
        gate.settled_state().await.expect("alive"),
        BreakerState::HalfOpen
    );
    chain.admit(sample_request()).await;
    gate.settled_state().await.expect("alive");
}

fn opens_at_the_second_failure() -> dexaflow_admission::supervise::Settings {
    let mut supervision = supervision();
    supervision.breaker.failures = 2;
    supervision
}

#[test]
fn a_breaker_opening_half_opening_and_closing_is_logged_naming_the_hook_and_the_cause() {
    on_paused_clock(async {
        let (log, _logging) = capture_log();
        let hook = FakeHook::scripted("quota", [outage(), outage(), Ok(Decision::Admit)]).shared();
        let chain = supervise_alone(hook.clone(), &opens_at_the_second_failure());

        open_and_probe(&chain).await;

        let text = log.text();
        let breaker = lines_with(&text, "breaker of hook \"quota\"");
        assert_eq!(hook.calls(), 3);
        assert_eq!(breaker.len(), 3, "{text}");
        assert!(
            breaker[0].contains("WARN")
                && breaker[0].contains(&format!(
                    "opened for 1s after 2 consecutive failures, the last: {OUTAGE}"
                )),
            "{text}"
        );
        assert!(
            breaker[1].contains("INFO") && breaker[1].contains("is half-open: its backoff ended"),
            "{text}"
        );
        assert!(
            breaker[2].contains("INFO") && breaker[2].contains("closed: its probe got an answer"),
            "{text}"
        );
    });
}

#[test]
fn a_failed_probe_is_logged_as_the_breaker_opening_again_with_its_cause() {
    on_paused_clock(async {
        let (log, _logging) = capture_log();
        let hook = FakeHook::answering("quota", outage()).shared();
        let chain = supervise_alone(hook.clone(), &opens_at_the_second_failure());

        open_and_probe(&chain).await;

        let text = log.text();
        let breaker = lines_with(&text, "breaker of hook \"quota\"");
        assert_eq!(breaker.len(), 3, "{text}");
        assert!(
            breaker[2].contains("WARN")
                && breaker[2].contains(&format!("opened again for 2s: its probe failed: {OUTAGE}")),
            "{text}"
        );
        assert!(!text.contains("closed"), "{text}");
    });
}

#[test]
fn fail_open_admissions_are_logged_once_naming_the_hook_and_the_cause() {
    on_paused_clock(async {
        let (log, _logging) = capture_log();
        let hook = FakeHook::answering("quota", outage()).shared();
        let mut supervision = supervision();
        supervision.fail_open = true;
        let chain = supervise_alone(hook.clone(), &supervision);

        let mut admitted = 0;
        for _ in 0..10 {
            if let Verdict::Admit { .. } = chain.admit(sample_request()).await {
                admitted += 1;
            }
        }

        let text = log.text();
        let fail_opens = lines_with(&text, "admitted unchanged");
        assert_eq!(admitted, 10);
        assert_eq!(fail_opens.len(), 1, "{text}");
        assert!(
            fail_opens[0].contains("WARN")
                && fail_opens[0].contains(&format!(
                    "hook \"quota\" gave no decision ({OUTAGE}) and fails open"
                )),
            "{text}"
        );
    });
}

// The same through the binary, as a user meets it: `loadtest` on a hook that never answers.

use crate::processes::BINARY;

/// How many failures open the breaker in [`loadtest_a_hanging_hook_with_the_whole_budget`].
const FAILURES_TO_OPEN: u64 = 10;

/// Runs `loadtest` with `RUST_LOG=warn` on a hook that never answers, its timeout the whole
/// chain budget, and a breaker that opens after [`FAILURES_TO_OPEN`] failures for an hour;
/// returns the JSON report and what the run logged.
fn loadtest_a_hanging_hook_with_the_whole_budget() -> (serde_json::Value, String) {
    let output = std::process::Command::new(BINARY)
        .args(["loadtest", "--attempts", "30", "--hook", "timeout:1"])
        .args(["--timeout", "20ms", "--chain-timeout", "20ms"])
        .args(["--breaker-failures", &FAILURES_TO_OPEN.to_string()])
        .args(["--breaker-backoff", "1h", "--breaker-max-backoff", "1h"])
        .args(["--output", "json", "--metrics-listen", "127.0.0.1:0"])
        .env("RUST_LOG", "warn")
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "{stderr}");
    let json = serde_json::from_slice(&output.stdout).expect("one JSON object");
    (json, stderr)
}

/// How many calls of the run in `json` came to `outcome`.
fn calls_that_came_to(json: &serde_json::Value, outcome: Outcome) -> u64 {
    json["hook_calls"][outcome.as_str()]["count"]
        .as_u64()
        .unwrap_or(0)
}

#[test]
fn loadtest_of_a_hook_that_never_answers_within_the_whole_budget_opens_its_breaker() {
    let (json, _) = loadtest_a_hanging_hook_with_the_whole_budget();

    assert_eq!(json["breaker_transitions"]["open"], 1, "{json}");
    assert_eq!(calls_that_came_to(&json, Outcome::BudgetSpent), 0, "{json}");
    assert!(
        calls_that_came_to(&json, Outcome::Timeout) >= FAILURES_TO_OPEN,
        "{json}"
    );
    assert!(calls_that_came_to(&json, Outcome::Skipped) > 0, "{json}");
}

#[test]
fn loadtest_logs_the_breaker_opening_and_fewer_failure_lines_than_failures() {
    let (json, stderr) = loadtest_a_hanging_hook_with_the_whole_budget();

    // The backoff is jittered: only its place in the line is checked.
    let openings = lines_with(&stderr, "breaker of hook \"timeout#0\" opened for ");
    let failures = lines_with(&stderr, "hook \"timeout#0\" failed: timed out after 20ms");
    assert_eq!(openings.len(), 1, "{stderr}");
    assert!(
        openings[0].contains(&format!(
            "s after {FAILURES_TO_OPEN} consecutive failures, the last: timed out after 20ms"
        )),
        "{stderr}"
    );
    assert!(!failures.is_empty(), "{stderr}");
    assert!(
        (failures.len() as u64) < calls_that_came_to(&json, Outcome::Timeout),
        "{stderr}"
    );
}

/// Records the time reported for each hook call and each chain.
#[derive(Debug, Default)]
struct Timings {
    calls: Mutex<Vec<(String, Duration)>>,
    chains: Mutex<Vec<Duration>>,
}

impl dexaflow_admission::events::HookEvents for Timings {
    fn hook_call(&self, hook: &str, _: Outcome, elapsed: Duration) {
        let mut calls = self.calls.lock().expect("no test panics holding it");
        calls.push((hook.to_owned(), elapsed));
    }

    fn chain_finished(&self, elapsed: Duration) {
        let mut chains = self.chains.lock().expect("no test panics holding it");
        chains.push(elapsed);
    }
}

impl dexaflow_admission::events::BreakerEvents for Timings {}

#[test]
fn each_call_is_reported_with_the_time_it_took_and_the_chain_with_the_time_of_its_calls() {
    on_paused_clock(async {
        let chain = Chain::new(ChangeRules::default())
            .with_hook(Sleeping::new("quota", Duration::from_millis(20)))
            .with_hook(Sleeping::new("placement", Duration::from_millis(30)));
        let timings = Arc::new(Timings::default());
        let supervised = SupervisedChain::start(chain, &supervision(), timings.clone());

        let verdict = supervised.admit(sample_request()).await;

        assert!(matches!(verdict, Verdict::Admit { .. }), "{verdict:?}");
        let calls = timings.calls.lock().expect("no test panics holding it");
        assert_eq!(
            *calls,
            [
                ("quota".to_owned(), Duration::from_millis(20)),
                ("placement".to_owned(), Duration::from_millis(30)),
            ]
        );
        let chains = timings.chains.lock().expect("no test panics holding it");
        assert_eq!(*chains, [Duration::from_millis(50)]);
    });
}
