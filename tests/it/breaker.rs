//! The per-hook breaker and the supervised call (ADR 0100 §5): what a breaker counts, when it
//! opens and probes, the deadline of a call and the chain budget's cut, on tokio's paused clock.

use crate::common;

use std::future::Future;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use common::{Act, FakeHook, Gated, RecordingObserver, Sleeping, on_paused_clock, sample_request};
use dexaflow_admission::admission::{Decision, Hook, HookError, HookFuture, Request};
use dexaflow_admission::events::{BreakerState, Ignore, Observer};
use dexaflow_admission::supervise::{BreakerSettings, Gate, Limit, Supervised};
use tokio::time::Instant;

const LIMIT: Duration = Duration::from_millis(500);

fn breaker_settings(failures: u32) -> BreakerSettings {
    BreakerSettings {
        failures,
        backoff: Duration::from_secs(1),
        max_backoff: Duration::from_secs(60),
        jitter: 0.0,
    }
}

fn supervise(hook: Arc<dyn Hook>, failures: u32) -> Supervised {
    supervise_with(hook, breaker_settings(failures), Arc::new(Ignore))
}

fn supervise_with(
    hook: Arc<dyn Hook>,
    settings: BreakerSettings,
    observer: Arc<dyn Observer>,
) -> Supervised {
    let gate = Gate::start(0, hook.name(), settings, observer);
    Supervised::new(hook, gate)
}

/// A call bounded by [`LIMIT`] alone.
fn limit() -> Limit {
    Limit::timeout(LIMIT)
}

async fn settled(gate: &Gate) -> BreakerState {
    gate.settled_state().await.expect("breaker alive")
}

fn down_error() -> HookError {
    HookError::Failed("down".to_owned())
}

fn down() -> Result<Decision, HookError> {
    Err(down_error())
}

async fn fail_times(supervised: &Supervised, times: u32) {
    for _ in 0..times {
        let result = supervised.call(&sample_request(), limit()).await;
        assert!(matches!(result, Err(HookError::Failed(_))), "{result:?}");
    }
}

/// Makes `times` calls one after the other and returns their results.
async fn call_times(supervised: &Supervised, times: usize) -> Vec<Result<Decision, HookError>> {
    let mut results = Vec::new();
    for _ in 0..times {
        results.push(supervised.call(&sample_request(), limit()).await);
    }
    results
}

/// Asserts that the breaker stays open for `period` exactly (jitter 0), then is half-open.
async fn assert_open_for(gate: &Gate, period: Duration) {
    tokio::time::advance(period - Duration::from_millis(1)).await;
    assert_eq!(settled(gate).await, BreakerState::Open, "before {period:?}");
    tokio::time::advance(Duration::from_millis(1)).await;
    assert_eq!(settled(gate).await, BreakerState::HalfOpen, "at {period:?}");
}

/// How long the breaker stays open from now, measured in steps of `step`.
async fn measure_open(gate: &Gate, step: Duration) -> Duration {
    let started = Instant::now();
    while gate.state() == BreakerState::Open {
        assert!(
            started.elapsed() < Duration::from_secs(3600),
            "never half-open"
        );
        tokio::time::advance(step).await;
    }
    started.elapsed()
}

#[actix::test]
async fn breaker_opens_after_the_configured_consecutive_failures() {
    tokio::time::pause();
    let hook = FakeHook::failing("quota", HookError::Failed("down".to_owned())).shared();
    let supervised = supervise(hook.clone(), 3);

    fail_times(&supervised, 2).await;
    let after_two = settled(supervised.gate()).await;
    fail_times(&supervised, 1).await;

    assert_eq!(after_two, BreakerState::Closed);
    assert_eq!(settled(supervised.gate()).await, BreakerState::Open);
    assert_eq!(hook.calls(), 3);
}

#[actix::test]
async fn success_between_failures_resets_the_count() {
    tokio::time::pause();
    let hook = FakeHook::scripted(
        "quota",
        [down(), down(), Ok(Decision::Admit), down(), down()],
    )
    .shared();
    let supervised = supervise(hook.clone(), 3);

    let results = call_times(&supervised, 5).await;

    assert_eq!(
        results,
        [down(), down(), Ok(Decision::Admit), down(), down()]
    );
    assert_eq!(settled(supervised.gate()).await, BreakerState::Closed);
    assert_eq!(supervised.gate().consecutive_failures(), 2);
}

#[actix::test]
async fn refuse_and_hold_are_the_hook_working_and_never_count() {
    tokio::time::pause();
    let answers = [
        down(),
        Ok(Decision::Refuse("no".to_owned())),
        down(),
        Ok(Decision::Hold("later".to_owned())),
        down(),
    ];
    let hook = FakeHook::scripted("policy", answers.clone()).shared();
    let supervised = supervise(hook.clone(), 2);

    let results = call_times(&supervised, 5).await;

    assert_eq!(results, answers);
    assert_eq!(settled(supervised.gate()).await, BreakerState::Closed);
    assert_eq!(supervised.gate().consecutive_failures(), 1);
}

#[actix::test]
async fn timeouts_and_panics_count_as_failures() {
    tokio::time::pause();
    let broken = FakeHook::scripted_acts(
        "broken",
        [Act::Pending, Act::Panic("hook blew up".to_owned())],
    );
    let supervised = supervise(broken.shared(), 2);

    let timed_out = supervised.call(&sample_request(), limit()).await;
    let panicked = supervised.call(&sample_request(), limit()).await;

    assert_eq!(timed_out, Err(HookError::Elapsed(LIMIT)));
    assert_eq!(
        panicked,
        Err(HookError::Panicked("hook blew up".to_owned()))
    );
    assert_eq!(settled(supervised.gate()).await, BreakerState::Open);
}

#[actix::test]
async fn open_breaker_skips_the_hook_without_calling_it_or_waiting() {
    tokio::time::pause();
    let hook = FakeHook::failing("quota", HookError::Failed("down".to_owned())).shared();
    let supervised = supervise(hook.clone(), 2);
    fail_times(&supervised, 2).await;
    assert_eq!(settled(supervised.gate()).await, BreakerState::Open);

    let started = Instant::now();
    let skipped = supervised.call(&sample_request(), limit()).await;

    assert_eq!(skipped, Err(HookError::Skipped));
    assert_eq!(started.elapsed(), Duration::ZERO);
    assert_eq!(hook.calls(), 2);
}

#[actix::test]
async fn after_the_backoff_exactly_one_of_many_concurrent_calls_probes_the_hook() {
    tokio::time::pause();
    let hook = Gated::admitting();
    let supervised = supervise(hook.clone(), 1);
    let pass = supervised.gate().enter().expect("closed");
    pass.finish(Some(&down_error()));
    assert_eq!(settled(supervised.gate()).await, BreakerState::Open);

    tokio::time::advance(Duration::from_secs(1)).await;
    assert_eq!(settled(supervised.gate()).await, BreakerState::HalfOpen);
    let request = sample_request();
    let calls: Vec<_> = (0..16)
        .map(|_| supervised.call(&request, limit()))
        .collect();
    // Every call starts while the probe waits for its permit.
    let (results, ()) = tokio::join!(futures_join_all(calls), async {
        tokio::task::yield_now().await;
        hook.release(16);
    });

    assert_eq!(hook.calls(), 1);
    assert_eq!(results.iter().filter(|result| result.is_ok()).count(), 1);
    assert_eq!(
        results
            .iter()
            .filter(|result| **result == Err(HookError::Skipped))
            .count(),
        15
    );
    assert_eq!(settled(supervised.gate()).await, BreakerState::Closed);
}

#[actix::test]
async fn failed_probe_reopens_the_breaker_with_double_the_backoff() {
    tokio::time::pause();
    let hook = FakeHook::failing("quota", HookError::Failed("down".to_owned())).shared();
    let supervised = supervise(hook.clone(), 1);
    fail_times(&supervised, 1).await;
    assert_eq!(settled(supervised.gate()).await, BreakerState::Open);
    tokio::time::advance(Duration::from_secs(1)).await;
    assert_eq!(settled(supervised.gate()).await, BreakerState::HalfOpen);

    fail_times(&supervised, 1).await;
    let after_probe = settled(supervised.gate()).await;
    tokio::time::advance(Duration::from_millis(1999)).await;
    let before_double = settled(supervised.gate()).await;
    tokio::time::advance(Duration::from_millis(1)).await;
    let after_double = settled(supervised.gate()).await;

    assert_eq!(after_probe, BreakerState::Open);
    assert_eq!(before_double, BreakerState::Open);
    assert_eq!(after_double, BreakerState::HalfOpen);
    assert_eq!(hook.calls(), 2);
}

#[actix::test]
async fn backoff_doubles_after_each_failed_probe_and_stops_at_max_backoff() {
    tokio::time::pause();
    let hook = FakeHook::failing("quota", HookError::Failed("down".to_owned())).shared();
    let settings = BreakerSettings {
        max_backoff: Duration::from_secs(5),
        ..breaker_settings(1)
    };
    let supervised = supervise_with(hook.clone(), settings, Arc::new(Ignore));
    fail_times(&supervised, 1).await;

    for seconds in [1, 2, 4, 5, 5] {
        assert_open_for(supervised.gate(), Duration::from_secs(seconds)).await;
        fail_times(&supervised, 1).await;
    }

    assert_eq!(settled(supervised.gate()).await, BreakerState::Open);
    assert_eq!(hook.calls(), 6);
}

#[actix::test]
async fn jitter_moves_each_doubled_backoff_by_at_most_its_fraction() {
    tokio::time::pause();
    let hook = FakeHook::failing("quota", HookError::Failed("down".to_owned())).shared();
    let settings = BreakerSettings {
        jitter: 0.5,
        ..breaker_settings(1)
    };
    let supervised = supervise_with(hook, settings, Arc::new(Ignore));
    let step = Duration::from_millis(10);
    fail_times(&supervised, 1).await;

    let mut periods = Vec::new();
    for seconds in [1_u32, 2, 4, 8] {
        let doubled = Duration::from_secs(u64::from(seconds));
        let period = measure_open(supervised.gate(), step).await;
        assert!(
            period >= doubled / 2 && period <= doubled * 3 / 2 + step,
            "{period:?} for a backoff of {doubled:?}"
        );
        periods.push((period, doubled));
        fail_times(&supervised, 1).await;
    }

    // Each period without jitter would be its doubled backoff to the step; four such are a
    // chance of about one in a hundred million.
    assert!(
        periods
            .iter()
            .any(|(period, doubled)| period.abs_diff(*doubled) > step),
        "no backoff was moved: {periods:?}"
    );
}

#[actix::test]
async fn jitter_never_takes_a_backoff_past_max_backoff() {
    tokio::time::pause();
    let hook = FakeHook::failing("quota", HookError::Failed("down".to_owned())).shared();
    let settings = BreakerSettings {
        failures: 1,
        backoff: Duration::from_secs(4),
        max_backoff: Duration::from_secs(5),
        jitter: 0.5,
    };
    let supervised = supervise_with(hook, settings, Arc::new(Ignore));
    fail_times(&supervised, 1).await;

    for _ in 0..8 {
        let period = measure_open(supervised.gate(), Duration::from_millis(10)).await;
        assert!(period <= Duration::from_secs(5), "{period:?}");
        fail_times(&supervised, 1).await;
    }
}

#[actix::test]
async fn successful_probe_closes_the_breaker() {
    tokio::time::pause();
    let hook =
        FakeHook::scripted("quota", [down(), Ok(Decision::Admit), Ok(Decision::Admit)]).shared();
    let supervised = supervise(hook.clone(), 1);
    let failed = supervised.call(&sample_request(), limit()).await;
    assert_eq!(failed, down());
    assert_eq!(settled(supervised.gate()).await, BreakerState::Open);
    tokio::time::advance(Duration::from_secs(1)).await;
    assert_eq!(settled(supervised.gate()).await, BreakerState::HalfOpen);

    let probe = supervised.call(&sample_request(), limit()).await;
    let state = settled(supervised.gate()).await;
    let next = supervised.call(&sample_request(), limit()).await;

    assert_eq!(probe, Ok(Decision::Admit));
    assert_eq!(state, BreakerState::Closed);
    assert_eq!(next, Ok(Decision::Admit));
    assert_eq!(hook.calls(), 3);
}

#[actix::test]
async fn two_hooks_have_independent_breakers() {
    tokio::time::pause();
    let broken = FakeHook::failing("broken", HookError::Failed("down".to_owned())).shared();
    let healthy = FakeHook::admitting("healthy").shared();
    let broken = supervise(broken, 1);
    let healthy = supervise(healthy.clone(), 1);

    fail_times(&broken, 1).await;
    let answer = healthy.call(&sample_request(), limit()).await;

    assert_eq!(settled(broken.gate()).await, BreakerState::Open);
    assert_eq!(settled(healthy.gate()).await, BreakerState::Closed);
    assert_eq!(answer, Ok(Decision::Admit));
}

#[actix::test]
async fn cancelled_call_is_not_counted_by_the_breaker() {
    tokio::time::pause();
    let hook = Gated::answering(down());
    let supervised = supervise(hook.clone(), 1);
    let request = sample_request();

    {
        let call = supervised.call(&request, limit());
        tokio::pin!(call);
        assert!(futures_poll_once(call.as_mut()).await.is_none());
    }

    assert_eq!(hook.calls(), 1);
    assert_eq!(supervised.gate().consecutive_failures(), 0);
    assert_eq!(settled(supervised.gate()).await, BreakerState::Closed);
}

#[actix::test]
async fn cancelled_probe_leaves_the_probe_to_the_next_call() {
    tokio::time::pause();
    let hook = Gated::admitting();
    let supervised = supervise(hook.clone(), 1);
    supervised
        .gate()
        .enter()
        .expect("closed")
        .finish(Some(&down_error()));
    assert_eq!(settled(supervised.gate()).await, BreakerState::Open);
    tokio::time::advance(Duration::from_secs(1)).await;
    assert_eq!(settled(supervised.gate()).await, BreakerState::HalfOpen);
    let request = sample_request();

    {
        let probe = supervised.call(&request, limit());
        tokio::pin!(probe);
        assert!(futures_poll_once(probe.as_mut()).await.is_none());
    }
    hook.release(1);
    let next = supervised.call(&request, limit()).await;

    assert_eq!(next, Ok(Decision::Admit));
    assert_eq!(hook.calls(), 2);
    assert_eq!(settled(supervised.gate()).await, BreakerState::Closed);
}

#[actix::test]
async fn hook_that_panics_while_building_its_future_is_caught() {
    struct PanicsEarly;
    impl Hook for PanicsEarly {
        fn name(&self) -> &str {
            "early"
        }
        fn is_remote(&self) -> bool {
            false
        }
        fn admit<'a>(&'a self, _: &'a Request) -> HookFuture<'a> {
            panic!("{}", String::from("bad config"))
        }
    }
    let supervised = supervise(Arc::new(PanicsEarly), 5);

    let result = supervised.call(&sample_request(), limit()).await;

    assert_eq!(result, Err(HookError::Panicked("bad config".to_owned())));
    assert_eq!(supervised.gate().consecutive_failures(), 1);
}

// Consecutive failures under concurrency.

#[actix::test]
async fn failures_of_calls_that_overlap_an_answer_never_make_a_run() {
    tokio::time::pause();
    let admit = || Act::Answer(Ok(Decision::Admit));
    let hook = FakeHook::scripted_acts(
        "steps",
        [
            Act::Pending,
            admit(),
            Act::Pending,
            admit(),
            Act::Pending,
            admit(),
        ],
    )
    .shared();
    let supervised = supervise(hook.clone(), 3);
    let request = sample_request();

    // Three calls hang, each started just before a call that the hook answers at once: in the
    // order they end, three failures follow three answers.
    let mut hanging = Vec::new();
    let mut answered = Vec::new();
    for _ in 0..3 {
        let mut call = Box::pin(supervised.call(&request, limit()));
        assert!(futures_poll_once(call.as_mut()).await.is_none());
        hanging.push(call);
        answered.push(supervised.call(&request, limit()).await);
    }
    let timed_out = futures_join_all(hanging).await;

    assert_eq!(answered, vec![Ok(Decision::Admit); 3]);
    assert_eq!(timed_out, vec![Err(HookError::Elapsed(LIMIT)); 3]);
    assert_eq!(hook.calls(), 6);
    assert_eq!(supervised.gate().consecutive_failures(), 0);
    assert_eq!(settled(supervised.gate()).await, BreakerState::Closed);
}

#[actix::test]
async fn concurrent_calls_that_all_fail_with_no_answer_open_the_breaker() {
    tokio::time::pause();
    let hook =
        FakeHook::scripted_acts("steps", [Act::Pending, Act::Pending, Act::Pending]).shared();
    let supervised = supervise(hook.clone(), 3);
    let request = sample_request();

    let calls = (0..3).map(|_| supervised.call(&request, limit())).collect();
    let results = futures_join_all(calls).await;

    assert_eq!(results, vec![Err(HookError::Elapsed(LIMIT)); 3]);
    assert_eq!(hook.calls(), 3);
    assert_eq!(settled(supervised.gate()).await, BreakerState::Open);
}

// Every transition reaches observers.

/// Opens the breaker of a one-failure hook whose backoff ends half a millisecond past a timer
/// tick, so that the breaker's own timer fires a millisecond after a call can find the backoff
/// ended; then lets a call probe at the moment it may, and returns the probe's result.
async fn probe_before_the_breakers_timer(
    probe_answer: Result<Decision, HookError>,
    observer: &Arc<RecordingObserver>,
) -> (Supervised, Result<Decision, HookError>) {
    let backoff = Duration::from_micros(1_000_500);
    let settings = BreakerSettings {
        backoff,
        ..breaker_settings(1)
    };
    let hook = FakeHook::scripted("quota", [down(), probe_answer]).shared();
    let supervised = supervise_with(hook, settings, Arc::clone(observer) as Arc<dyn Observer>);
    fail_times(&supervised, 1).await;
    // The breaker sets its timer now, for the tick after the backoff ends.
    settled(supervised.gate()).await;
    tokio::time::advance(backoff).await;
    let probe = supervised.call(&sample_request(), limit()).await;
    // Past the timer's tick too, so that a half-open it would report is reported.
    tokio::time::advance(Duration::from_millis(1)).await;
    settled(supervised.gate()).await;
    (supervised, probe)
}

#[test]
fn a_close_reaches_observers_after_the_half_open_a_probe_found_first() {
    on_paused_clock(async {
        let observer = Arc::new(RecordingObserver::default());

        let (supervised, probe) =
            probe_before_the_breakers_timer(Ok(Decision::Admit), &observer).await;

        assert_eq!(probe, Ok(Decision::Admit));
        assert_eq!(
            observer.states_of("quota"),
            [
                BreakerState::Open,
                BreakerState::HalfOpen,
                BreakerState::Closed
            ]
        );
        assert_eq!(supervised.gate().state(), BreakerState::Closed);
    });
}

#[test]
fn a_reopening_reaches_observers_after_the_half_open_a_probe_found_first() {
    on_paused_clock(async {
        let observer = Arc::new(RecordingObserver::default());

        let (supervised, probe) = probe_before_the_breakers_timer(down(), &observer).await;

        assert_eq!(probe, down());
        assert_eq!(
            observer.states_of("quota"),
            [
                BreakerState::Open,
                BreakerState::HalfOpen,
                BreakerState::Open
            ]
        );
        assert_eq!(supervised.gate().state(), BreakerState::Open);
    });
}

#[actix::test]
async fn breakers_timer_reports_the_half_open_when_no_call_comes_to_probe() {
    tokio::time::pause();
    let observer = Arc::new(RecordingObserver::default());
    let hook = FakeHook::failing("quota", HookError::Failed("down".to_owned())).shared();
    let supervised = supervise_with(
        hook.clone(),
        breaker_settings(1),
        Arc::clone(&observer) as Arc<dyn Observer>,
    );
    fail_times(&supervised, 1).await;
    // The breaker sets its timer now.
    settled(supervised.gate()).await;

    // Nothing asks the breaker anything: the paused clock moves to the breaker's timer, which
    // fires within a tick of the backoff's end, before this wait ends a tick later.
    tokio::time::sleep(Duration::from_millis(1001)).await;

    assert_eq!(
        observer.states_of("quota"),
        [BreakerState::Open, BreakerState::HalfOpen]
    );
    assert_eq!(hook.calls(), 1);
}

// The deadline of a call.

#[test]
fn answer_after_the_deadline_is_a_timeout_even_when_the_timer_fires_with_it() {
    on_paused_clock(async {
        // tokio's timer counts whole milliseconds, so the 10.3ms deadline and the 10.6ms answer
        // both fire on the 11ms tick, where tokio polls the call before its timer.
        let limit = Duration::from_micros(10_300);
        let hook = Sleeping::new("late", Duration::from_micros(10_600));
        let supervised = supervise(hook.clone(), 5);

        let result = supervised
            .call(&sample_request(), Limit::timeout(limit))
            .await;

        assert_eq!(result, Err(HookError::Elapsed(limit)));
        assert_eq!(hook.calls(), 1);
        assert_eq!(supervised.gate().consecutive_failures(), 1);
    });
}

#[test]
fn answer_ready_at_the_deadline_wins_the_tie_with_the_timer() {
    on_paused_clock(async {
        let hook = Sleeping::new("on-time", LIMIT);
        let supervised = supervise(hook.clone(), 1);
        let started = Instant::now();

        let result = supervised.call(&sample_request(), limit()).await;

        assert_eq!(result, Ok(Decision::Admit));
        assert_eq!(started.elapsed(), LIMIT);
        assert_eq!(supervised.gate().consecutive_failures(), 0);
    });
}

// The chain budget's cut.

#[test]
fn call_cut_by_the_chain_budget_is_budget_spent_and_not_counted_by_the_breaker() {
    on_paused_clock(async {
        let hook = Sleeping::new("healthy", Duration::from_millis(300));
        let supervised = supervise(hook.clone(), 1);
        let started = Instant::now();

        let result = supervised
            .call(
                &sample_request(),
                Limit::within_budget(LIMIT, Duration::from_millis(200)),
            )
            .await;

        assert_eq!(
            result,
            Err(HookError::BudgetSpent(Duration::from_millis(200)))
        );
        assert_eq!(started.elapsed(), Duration::from_millis(200));
        assert_eq!(hook.calls(), 1);
        assert_eq!(supervised.gate().consecutive_failures(), 0);
        assert_eq!(settled(supervised.gate()).await, BreakerState::Closed);
    });
}

#[actix::test]
async fn hook_with_no_chain_budget_left_is_not_called() {
    tokio::time::pause();
    let hook = FakeHook::admitting("late").shared();
    let supervised = supervise(hook.clone(), 1);
    let started = Instant::now();

    let result = supervised
        .call(
            &sample_request(),
            Limit::within_budget(LIMIT, Duration::ZERO),
        )
        .await;

    assert_eq!(result, Err(HookError::BudgetSpent(Duration::ZERO)));
    assert_eq!(started.elapsed(), Duration::ZERO);
    assert_eq!(hook.calls(), 0);
    assert_eq!(settled(supervised.gate()).await, BreakerState::Closed);
}

#[actix::test]
async fn probe_cut_by_the_chain_budget_leaves_the_probe_to_the_next_call() {
    tokio::time::pause();
    let hook = FakeHook::scripted_acts(
        "steps",
        [
            Act::Answer(down()),
            Act::Pending,
            Act::Answer(Ok(Decision::Admit)),
        ],
    )
    .shared();
    let supervised = supervise(hook.clone(), 1);
    fail_times(&supervised, 1).await;
    tokio::time::advance(Duration::from_secs(1)).await;

    let cut = supervised
        .call(
            &sample_request(),
            Limit::within_budget(LIMIT, Duration::from_millis(100)),
        )
        .await;
    let after_cut = settled(supervised.gate()).await;
    let next = supervised.call(&sample_request(), limit()).await;

    assert_eq!(cut, Err(HookError::BudgetSpent(Duration::from_millis(100))));
    assert_eq!(after_cut, BreakerState::HalfOpen);
    assert_eq!(next, Ok(Decision::Admit));
    assert_eq!(hook.calls(), 3);
    assert_eq!(settled(supervised.gate()).await, BreakerState::Closed);
}

/// Polls `future` once; `None` if it was pending.
async fn futures_poll_once<F: Future + Unpin>(future: F) -> Option<F::Output> {
    let mut future = future;
    std::future::poll_fn(|cx| {
        Poll::Ready(match std::pin::Pin::new(&mut future).poll(cx) {
            Poll::Ready(output) => Some(output),
            Poll::Pending => None,
        })
    })
    .await
}

/// Runs every future to completion concurrently on this task, keeping their order.
async fn futures_join_all<F: Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut futures: Vec<_> = futures.into_iter().map(Box::pin).collect();
    let mut outputs: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        for (future, output) in futures.iter_mut().zip(outputs.iter_mut()) {
            if output.is_none() {
                if let Poll::Ready(value) = future.as_mut().poll(cx) {
                    *output = Some(value);
                }
            }
        }
        if outputs.iter().all(Option::is_some) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
    .await;
    outputs
        .into_iter()
        .map(|output| output.expect("every future finished"))
        .collect()
}
