//! The one place that fixes the order of supervision around a hook call:
//! breaker gate, then timeout, then panic recovery, then the hook.

use std::sync::Arc;
use std::time::Duration;

use super::log::HookLog;
use tokio::time::Instant;

use super::timeout::timeout_from;
use super::{Gate, Limit, Pass, catch_panic};
use crate::admission::{Decision, Hook, HookError, Request};

/// A hook with its breaker gate.
#[derive(Clone)]
pub struct Supervised {
    hook: Arc<dyn Hook>,
    gate: Gate,
    // Shared by the clones, so that the hook's log lines are limited however many workers
    // call it.
    log: Arc<HookLog>,
}

impl std::fmt::Debug for Supervised {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Supervised")
            .field("hook", &self.hook.name())
            .field("gate", &self.gate)
            .finish()
    }
}

impl Supervised {
    /// Puts `hook` behind `gate`.
    pub fn new(hook: Arc<dyn Hook>, gate: Gate) -> Supervised {
        Supervised {
            hook,
            gate,
            log: Arc::new(HookLog::new()),
        }
    }

    /// The hook's name in the chain, as its events name it.
    pub fn name(&self) -> &str {
        self.hook.name()
    }

    /// The hook's breaker gate.
    pub fn gate(&self) -> &Gate {
        &self.gate
    }

    /// Logs that an attempt runs unchanged because this hook gave no decision (`error`) and
    /// fails open: rate-limited, as the hook's failures are.
    pub(crate) fn log_failed_open(&self, error: &HookError) {
        self.log.failed_open(self.hook.name(), error);
    }

    /// Calls the hook once under supervision, within `limit`.
    ///
    /// # Errors
    /// [`HookError::BudgetSpent`] when the chain budget is spent (the hook is not called) or runs
    /// out during the call before the hook's own timeout; [`HookError::Skipped`] when the breaker
    /// is open (the hook is not called and no time is spent); [`HookError::Elapsed`] past the
    /// hook's own timeout; [`HookError::Panicked`] when the hook panics; or the hook's own error.
    /// The breaker counts the last three, never the first two, and they are logged (at most one
    /// line every few seconds per hook, saying how many were left out).
    ///
    /// # Cancel safety
    /// Dropping the future drops the hook call and counts nothing toward the breaker.
    pub async fn call(&self, request: &Request, limit: Limit) -> Result<Decision, HookError> {
        self.call_from(request, limit, Instant::now()).await.0
    }

    /// [`Supervised::call`] for a call that starts at `started`, with the time it ended
    /// (`started` for a call not made), so that the chain times it without reading the clock
    /// again.
    pub(crate) async fn call_from(
        &self,
        request: &Request,
        limit: Limit,
        started: Instant,
    ) -> (Result<Decision, HookError>, Instant) {
        let allowed = limit.duration();
        if limit.is_set_by_budget() && allowed.is_zero() {
            return (Err(HookError::BudgetSpent(Duration::ZERO)), started);
        }
        let pass = match self.gate.enter() {
            Ok(pass) => pass,
            Err(skipped) => return (Err(skipped), started),
        };
        let call = async {
            catch_panic(|| self.hook.admit_within(request, allowed))
                .await
                .unwrap_or_else(|message| Err(HookError::Panicked(message)))
        };
        let (answer, ended) = timeout_from(started, allowed, call).await;
        let result = match answer {
            Some(result) => self.finished(pass, result),
            // Cut by the budget the hooks before it spent: dropping the pass counts nothing.
            None if limit.is_set_by_budget() => Err(HookError::BudgetSpent(allowed)),
            None => self.finished(pass, Err(HookError::Elapsed(allowed))),
        };
        (result, ended)
    }

    /// Reports the end of a call the hook answered, failed or ran out of its own time on.
    fn finished(
        &self,
        pass: Pass<'_>,
        result: Result<Decision, HookError>,
    ) -> Result<Decision, HookError> {
        let failure = result.as_ref().err();
        if let Some(failure) = failure {
            self.log.failed(self.hook.name(), failure);
        }
        pass.finish(failure);
        result
    }
}
