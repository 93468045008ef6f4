//! The per-hook breaker and the supervised call (ADR 0100 §5), on tokio's paused clock with no
//! jitter.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::{FakeHook, sample_request};
use dexaflow_admission::admission::{Decision, Hook, HookError, HookFuture, Request};
use dexaflow_admission::supervise::{
    Breaker, BreakerSettings, BreakerState, Gate, Ignore, Supervised,
};
use tokio::sync::Semaphore;
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
    let gate = Breaker::start_for(0, hook.name(), breaker_settings(failures), Arc::new(Ignore));
    Supervised::new(hook, gate)
}

async fn settled(gate: &Gate) -> BreakerState {
    gate.settled_state().await.expect("breaker alive")
}

/// A hook that counts its calls and answers once the test adds a permit to its gate.
struct Gated {
    calls: AtomicUsize,
    permits: Semaphore,
    answer: Result<Decision, HookError>,
}

impl Gated {
    fn new(answer: Result<Decision, HookError>) -> Arc<Gated> {
        Arc::new(Gated {
            calls: AtomicUsize::new(0),
            permits: Semaphore::new(0),
            answer,
        })
    }
}

impl Hook for Gated {
    fn name(&self) -> &str {
        "gated"
    }

    fn admit<'a>(&'a self, _: &'a Request) -> HookFuture<'a> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            self.permits
                .acquire()
                .await
                .expect("semaphore open")
                .forget();
            self.answer.clone()
        })
    }
}

async fn fail_times(supervised: &Supervised, times: u32) {
    for _ in 0..times {
        let result = supervised.call(&sample_request(), LIMIT).await;
        assert!(matches!(result, Err(HookError::Failed(_))), "{result:?}");
    }
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
    let error = || Err(HookError::Failed("down".to_owned()));
    let hook = FakeHook::scripted(
        "quota",
        [error(), error(), Ok(Decision::Admit), error(), error()],
    )
    .shared();
    let supervised = supervise(hook.clone(), 3);

    for _ in 0..5 {
        let _ = supervised.call(&sample_request(), LIMIT).await;
    }

    assert_eq!(settled(supervised.gate()).await, BreakerState::Closed);
    assert_eq!(supervised.gate().consecutive_failures(), 2);
}

#[actix::test]
async fn refuse_and_hold_are_the_hook_working_and_never_count() {
    tokio::time::pause();
    let hook = FakeHook::scripted(
        "policy",
        [
            Err(HookError::Failed("down".to_owned())),
            Ok(Decision::Refuse("no".to_owned())),
            Err(HookError::Failed("down".to_owned())),
            Ok(Decision::Hold("later".to_owned())),
            Err(HookError::Failed("down".to_owned())),
        ],
    )
    .shared();
    let supervised = supervise(hook.clone(), 2);

    for _ in 0..5 {
        let _ = supervised.call(&sample_request(), LIMIT).await;
    }

    assert_eq!(settled(supervised.gate()).await, BreakerState::Closed);
    assert_eq!(supervised.gate().consecutive_failures(), 1);
}

#[actix::test]
async fn timeouts_and_panics_count_as_failures() {
    tokio::time::pause();
    struct Broken(AtomicUsize);
    impl Hook for Broken {
        fn name(&self) -> &str {
            "broken"
        }
        fn admit<'a>(&'a self, _: &'a Request) -> HookFuture<'a> {
            if self.0.fetch_add(1, Ordering::SeqCst) == 0 {
                Box::pin(std::future::pending())
            } else {
                panic!("hook blew up")
            }
        }
    }
    let supervised = supervise(Arc::new(Broken(AtomicUsize::new(0))), 2);

    let timed_out = supervised.call(&sample_request(), LIMIT).await;
    let panicked = supervised.call(&sample_request(), LIMIT).await;

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
    let skipped = supervised.call(&sample_request(), LIMIT).await;

    assert_eq!(skipped, Err(HookError::Skipped));
    assert_eq!(started.elapsed(), Duration::ZERO);
    assert_eq!(hook.calls(), 2);
}

#[actix::test]
async fn after_the_backoff_exactly_one_of_many_concurrent_calls_probes_the_hook() {
    tokio::time::pause();
    let hook = Gated::new(Ok(Decision::Admit));
    let supervised = supervise(hook.clone(), 1);
    let pass = supervised.gate().enter().expect("closed");
    pass.finish(true);
    assert_eq!(settled(supervised.gate()).await, BreakerState::Open);

    tokio::time::advance(Duration::from_secs(1)).await;
    assert_eq!(settled(supervised.gate()).await, BreakerState::HalfOpen);
    let request = sample_request();
    let calls: Vec<_> = (0..16).map(|_| supervised.call(&request, LIMIT)).collect();
    hook.permits.add_permits(16);
    let results = futures_join_all(calls).await;

    assert_eq!(hook.calls.load(Ordering::SeqCst), 1);
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
async fn successful_probe_closes_the_breaker() {
    tokio::time::pause();
    let hook = FakeHook::scripted(
        "quota",
        [
            Err(HookError::Failed("down".to_owned())),
            Ok(Decision::Admit),
            Ok(Decision::Admit),
        ],
    )
    .shared();
    let supervised = supervise(hook.clone(), 1);
    let _ = supervised.call(&sample_request(), LIMIT).await;
    assert_eq!(settled(supervised.gate()).await, BreakerState::Open);
    tokio::time::advance(Duration::from_secs(1)).await;
    assert_eq!(settled(supervised.gate()).await, BreakerState::HalfOpen);

    let probe = supervised.call(&sample_request(), LIMIT).await;
    let state = settled(supervised.gate()).await;
    let next = supervised.call(&sample_request(), LIMIT).await;

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
    let answer = healthy.call(&sample_request(), LIMIT).await;

    assert_eq!(settled(broken.gate()).await, BreakerState::Open);
    assert_eq!(settled(healthy.gate()).await, BreakerState::Closed);
    assert_eq!(answer, Ok(Decision::Admit));
}

#[actix::test]
async fn cancelled_call_is_not_counted_by_the_breaker() {
    tokio::time::pause();
    let hook = Gated::new(Err(HookError::Failed("down".to_owned())));
    let supervised = supervise(hook.clone(), 1);
    let request = sample_request();

    {
        let call = supervised.call(&request, LIMIT);
        tokio::pin!(call);
        assert!(futures_poll_once(call.as_mut()).await.is_none());
    }

    assert_eq!(hook.calls.load(Ordering::SeqCst), 1);
    assert_eq!(supervised.gate().consecutive_failures(), 0);
    assert_eq!(settled(supervised.gate()).await, BreakerState::Closed);
}

#[actix::test]
async fn cancelled_probe_leaves_the_probe_to_the_next_call() {
    tokio::time::pause();
    let hook = Gated::new(Ok(Decision::Admit));
    let supervised = supervise(hook.clone(), 1);
    supervised.gate().enter().expect("closed").finish(true);
    assert_eq!(settled(supervised.gate()).await, BreakerState::Open);
    tokio::time::advance(Duration::from_secs(1)).await;
    assert_eq!(settled(supervised.gate()).await, BreakerState::HalfOpen);
    let request = sample_request();

    {
        let probe = supervised.call(&request, LIMIT);
        tokio::pin!(probe);
        assert!(futures_poll_once(probe.as_mut()).await.is_none());
    }
    hook.permits.add_permits(1);
    let next = supervised.call(&request, LIMIT).await;

    assert_eq!(next, Ok(Decision::Admit));
    assert_eq!(hook.calls.load(Ordering::SeqCst), 2);
    assert_eq!(settled(supervised.gate()).await, BreakerState::Closed);
}

#[actix::test]
async fn hook_that_panics_while_building_its_future_is_caught() {
    struct PanicsEarly;
    impl Hook for PanicsEarly {
        fn name(&self) -> &str {
            "early"
        }
        fn admit<'a>(&'a self, _: &'a Request) -> HookFuture<'a> {
            panic!("{}", String::from("bad config"))
        }
    }
    let supervised = supervise(Arc::new(PanicsEarly), 5);

    let result = supervised.call(&sample_request(), LIMIT).await;

    assert_eq!(result, Err(HookError::Panicked("bad config".to_owned())));
    assert_eq!(supervised.gate().consecutive_failures(), 1);
}

/// Polls `future` once; `None` if it was pending.
async fn futures_poll_once<F: std::future::Future + Unpin>(future: F) -> Option<F::Output> {
    let mut future = future;
    std::future::poll_fn(|cx| {
        std::task::Poll::Ready(match std::pin::Pin::new(&mut future).poll(cx) {
            std::task::Poll::Ready(output) => Some(output),
            std::task::Poll::Pending => None,
        })
    })
    .await
}

/// Runs every future to completion concurrently on this task, keeping their order.
async fn futures_join_all<F: std::future::Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut futures: Vec<_> = futures.into_iter().map(Box::pin).collect();
    let mut outputs: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        for (future, output) in futures.iter_mut().zip(outputs.iter_mut()) {
            if output.is_none() {
                if let std::task::Poll::Ready(value) = future.as_mut().poll(cx) {
                    *output = Some(value);
                }
            }
        }
        if outputs.iter().all(Option::is_some) {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    })
    .await;
    outputs
        .into_iter()
        .map(|output| output.expect("every future finished"))
        .collect()
}
