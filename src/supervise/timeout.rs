//! The deadline of one hook call.

use std::future::Future;
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
    let deadline = Instant::now().checked_add(limit);
    let Some(deadline) = deadline else {
        // Past the end of the clock: no deadline at all.
        return Some(call.await);
    };
    let answer = tokio::time::timeout_at(deadline, call).await.ok()?;
    (Instant::now() <= deadline).then_some(answer)
}
