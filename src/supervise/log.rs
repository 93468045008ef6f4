//! What supervision logs about one hook's calls: its failures, and the attempts it let through
//! unchanged because it fails open. A broken hook fails every call, thousands a second under
//! load, so each kind is logged at most once per [`LOG_EVERY`] per hook, the line saying how many
//! were left out since the one before. (Its breaker's transitions are rare, and are logged each
//! by the breaker itself, `super::breaker`.)

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use super::breaker::nanos;
use crate::admission::HookError;

/// The shortest time between two log lines of one kind about one hook: two of its failures, or
/// two attempts it let through under fail-open.
pub const LOG_EVERY: Duration = Duration::from_secs(5);

/// The rate-limited log of one hook's failures and fail-open admissions, shared by every clone
/// of its supervised call.
#[derive(Debug)]
pub(crate) struct HookLog {
    failures: Limiter,
    fail_opens: Limiter,
}

impl HookLog {
    /// A log that writes the first line of each kind at once.
    pub(crate) fn new() -> HookLog {
        HookLog {
            failures: Limiter::new(LOG_EVERY),
            fail_opens: Limiter::new(LOG_EVERY),
        }
    }

    /// Logs that a call to `hook` failed with `failure` (an error, a timeout or a panic), unless
    /// a failure of it was logged less than [`LOG_EVERY`] ago.
    pub(crate) fn failed(&self, hook: &str, failure: &HookError) {
        if let Some(left_out) = self.failures.take() {
            tracing::warn!(
                "hook {hook:?} failed: {}{}",
                failure.cleaned(),
                left_out_since(left_out, "failures")
            );
        }
    }

    /// Logs that an attempt runs unchanged because `hook` gave no decision (`error`) and fails
    /// open, unless such an admission was logged less than [`LOG_EVERY`] ago.
    pub(crate) fn failed_open(&self, hook: &str, error: &HookError) {
        if let Some(left_out) = self.fail_opens.take() {
            tracing::warn!(
                "attempt admitted unchanged: hook {hook:?} gave no decision ({}) and fails open{}",
                error.cleaned(),
                left_out_since(left_out, "such admissions")
            );
        }
    }
}

/// What a line adds when `left_out` lines of its kind (`what`) were left out before it.
fn left_out_since(left_out: u64, what: &str) -> String {
    if left_out == 0 {
        String::new()
    } else {
        format!("; {left_out} more {what} since the last line were not logged")
    }
}

/// At most one log line per period, for an event that can come thousands of times a second.
/// Only calls that would log touch it, and then two atomics and no lock; it reads tokio's
/// clock, so that a test drives it on a paused clock.
#[derive(Debug)]
pub(crate) struct Limiter {
    base: Instant,
    /// The period, in nanoseconds.
    every: u64,
    /// Nanoseconds from `base` before which no line is written.
    next: AtomicU64,
    /// Lines left out since the last one written.
    left_out: AtomicU64,
}

impl Limiter {
    /// A limiter letting one line through per `every`.
    pub(crate) fn new(every: Duration) -> Limiter {
        Limiter {
            base: Instant::now(),
            every: nanos(every),
            next: AtomicU64::new(0),
            left_out: AtomicU64::new(0),
        }
    }

    /// `Some(lines left out before it)` when a line may be written now; `None`, counted as left
    /// out, when one was written less than the period ago or another caller takes this turn.
    pub(crate) fn take(&self) -> Option<u64> {
        let now = nanos(self.base.elapsed());
        let next = self.next.load(Ordering::Acquire);
        let turn = now >= next
            && self
                .next
                .compare_exchange(
                    next,
                    now.saturating_add(self.every),
                    Ordering::AcqRel,
                    Ordering::Acquire,
                )
                .is_ok();
        if turn {
            Some(self.left_out.swap(0, Ordering::AcqRel))
        } else {
            self.left_out.fetch_add(1, Ordering::Relaxed);
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn one_line_per_period_passes_and_the_rest_are_counted_into_the_next() {
        let limiter = Limiter::new(Duration::from_secs(10));
        assert_eq!(limiter.take(), Some(0));
        assert_eq!(limiter.take(), None);
        tokio::time::advance(Duration::from_secs(9)).await;
        assert_eq!(limiter.take(), None);
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(limiter.take(), Some(2));
        assert_eq!(limiter.take(), None);
    }
}
