//! The deadline of one hook call.

use std::future::Future;
use std::task::Poll;
use std::time::Duration;

use tokio::time::Instant;

/// How long one supervised call may take: the hook's timeout, capped by what is left of the chain
/// budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    timeout: Duration,
    budget_left: Duration,
}

impl Limit {
    /// A call bounded by `timeout` alone.
    pub fn timeout(timeout: Duration) -> Limit {
        Limit {
            timeout,
            budget_left: Duration::MAX,
        }
    }

    /// A call bounded by `timeout` and by the `budget_left` of its chain, whichever is shorter.
    pub fn within_budget(timeout: Duration, budget_left: Duration) -> Limit {
        Limit {
            timeout,
            budget_left,
        }
    }

    /// How long the call may take.
    pub fn duration(self) -> Duration {
        self.timeout.min(self.budget_left)
    }

    /// Whether what is left of the chain budget, not the hook's own timeout, ends the call: the
    /// hooks before it spent part of the budget, so running out is not the hook's failure.
    pub(crate) fn is_set_by_budget(self) -> bool {
        self.budget_left < self.timeout
    }
}

/// Runs `call` until `limit` has passed: `None` if it has not answered by then.
///
/// The answer is checked against the deadline when it arrives, so an answer later than the
/// deadline is no answer, however coarse the timer (tokio's counts whole milliseconds, and fires
/// late on a busy runtime). An answer at the deadline exactly wins the tie: tokio polls the call
/// before the timer.
///
/// # Cancel safety
/// Dropping the returned future drops the call; nothing is reported.
pub async fn timeout<F: Future>(limit: Duration, call: F) -> Option<F::Output> {
    timeout_from(Instant::now(), limit, call).await.0
}

/// [`timeout`] for a call that started at `started`, with the time it ended: the clock read
/// that checks its answer against the deadline, so that whoever times the call reads the clock
/// no more.
pub(crate) async fn timeout_from<F: Future>(
    started: Instant,
    limit: Duration,
    call: F,
) -> (Option<F::Output>, Instant) {
    let Some(deadline) = started.checked_add(limit) else {
        // Past the end of the clock: no deadline at all.
        let answer = call.await;
        return (Some(answer), Instant::now());
    };
    let answer = until(deadline, call).await;
    let ended = Instant::now();
    (answer.filter(|_| ended <= deadline), ended)
}

/// Runs `call` until `deadline`: `None` if it has not answered by then.
///
/// The call is polled once before any timer is made: most calls answer on their first poll,
/// and a timer costs a clone of the runtime's handle, shared by every worker thread.
///
/// # Cancel safety
/// Dropping the returned future drops the call.
pub(crate) async fn until<F: Future>(deadline: Instant, call: F) -> Option<F::Output> {
    let mut call = std::pin::pin!(call);
    let first = std::future::poll_fn(|cx| Poll::Ready(call.as_mut().poll(cx))).await;
    if let Poll::Ready(answer) = first {
        return Some(answer);
    }
    tokio::time::timeout_at(deadline, call).await.ok()
}

#[cfg(test)]
mod tests {
    use std::pin::pin;
    use std::task::{Context, Waker};

    use super::*;

    #[test]
    fn a_call_that_answers_at_once_needs_no_timer_and_so_no_runtime() {
        let deadline = Instant::now() + Duration::from_secs(1);
        let mut call = pin!(until(deadline, std::future::ready(5)));

        // Outside any tokio runtime, making a timer would panic.
        let polled = call.as_mut().poll(&mut Context::from_waker(Waker::noop()));

        assert_eq!(polled, Poll::Ready(Some(5)));
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_still_waiting_at_its_deadline_is_no_answer() {
        let deadline = Instant::now() + Duration::from_millis(10);

        let answer = until(deadline, std::future::pending::<u8>()).await;

        assert_eq!(answer, None);
        assert!(Instant::now() >= deadline, "gave up before the deadline");
    }
}
