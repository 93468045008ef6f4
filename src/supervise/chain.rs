//! The supervised driver of the hook chain: the one every caller runs, however it drives
//! attempts.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::{Gate, Limit, Settings, Supervised};
use crate::admission::{Chain, HookError, Outcome, Request, Verdict};
use crate::events::SupervisionEvents;

/// A chain whose every call is supervised: breaker gate, timeout, panic recovery.
///
/// Each call gets `min(its hook's timeout, what is left of chain_timeout)`, so several slow
/// hooks cannot stall one attempt past the chain budget, which starts with the first hook the
/// chain calls (one its breaker skips spends none). A hook's timeout and fail-open are its
/// own where [`Settings::hooks`] sets them (a webhook's), the admission settings otherwise. A
/// call that the rest of the budget ends, rather than its own timeout, is cut because the hooks
/// before it spent the budget: it is [`crate::admission::HookError::BudgetSpent`], its breaker
/// does not count it, and a hook with no budget left is not called at all. Either makes the
/// attempt unavailable, or under fail-open is passed over, as any broken call.
#[derive(Clone)]
pub struct SupervisedChain {
    chain: Chain,
    hooks: Vec<Supervised>,
    // `own[i]`: the timeout and fail-open of `hooks[i]`.
    own: Vec<(Duration, bool)>,
    chain_timeout: Duration,
    observer: Arc<dyn SupervisionEvents>,
}

impl std::fmt::Debug for SupervisedChain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SupervisedChain")
            .field("hooks", &self.hooks)
            .field("own", &self.own)
            .field("chain_timeout", &self.chain_timeout)
            .finish()
    }
}

impl SupervisedChain {
    /// Starts one breaker per hook of `chain` on the current arbiter and supervises the chain.
    ///
    /// `settings.fail_open` overrides the chain's own fail-open flag. When it is set and the chain
    /// has a hook, this logs a warning, and so does a hook that fails open by its own setting
    /// while the admission setting does not: every command that supervises a chain says so at
    /// boot.
    ///
    /// # Panics
    /// Outside a running actix system (the breakers are actors).
    pub fn start(
        chain: Chain,
        settings: &Settings,
        observer: Arc<dyn SupervisionEvents>,
    ) -> SupervisedChain {
        let chain = chain.with_fail_open(settings.fail_open);
        let names: Vec<&str> = chain.hooks().iter().map(|hook| hook.name()).collect();
        observer.chain_started(&names);
        if settings.fail_open && !chain.is_empty() {
            tracing::warn!(
                "fail-open is on: an attempt whose hook errors, times out, panics, is skipped by its breaker or is cut by the chain budget runs unchanged"
            );
        }
        let hooks = chain
            .hooks()
            .iter()
            .enumerate()
            .map(|(position, hook)| {
                let gate = Gate::start(
                    position,
                    hook.name(),
                    settings.breaker.clone(),
                    observer.clone(),
                );
                Supervised::new(Arc::clone(hook), gate)
            })
            .collect();
        let own = chain
            .hooks()
            .iter()
            .map(|hook| {
                let fail_open = settings.fail_open_of(hook.name());
                if fail_open && !settings.fail_open {
                    tracing::warn!(
                        "hook {:?} fails open: an attempt whose call to it errors, times out, panics or is skipped by its breaker runs unchanged",
                        hook.name()
                    );
                }
                (settings.timeout_of(hook.name()), fail_open)
            })
            .collect();
        SupervisedChain {
            chain,
            hooks,
            own,
            chain_timeout: settings.chain_timeout,
            observer,
        }
    }

    /// Whether no hook is registered.
    pub fn is_empty(&self) -> bool {
        self.chain.is_empty()
    }

    /// The supervised hooks in chain order.
    pub fn hooks(&self) -> &[Supervised] {
        &self.hooks
    }

    /// Runs every hook on `request` under supervision and returns the verdict.
    ///
    /// # Cancel safety
    /// Dropping the future drops the call in progress; it counts neither toward the breaker nor
    /// as fail-open, and nothing is reported for it.
    pub async fn admit(&self, request: Request) -> Verdict {
        self.admit_within(request, Duration::MAX).await
    }

    /// Runs every hook on `request` as [`SupervisedChain::admit`] does, within `budget` as well:
    /// the time its caller has left (a webhook caller's deadline), from now.
    ///
    /// The chain then has `min(chain_timeout, budget)`. A call that `budget` cuts before its
    /// hook's own timeout is [`crate::admission::HookError::BudgetSpent`], which its breaker does
    /// not count, and a hook reached with none of it left is not called: the caller's deadline
    /// is no failure of the hook's.
    ///
    /// # Cancel safety
    /// As [`SupervisedChain::admit`].
    pub async fn admit_within(&self, request: Request, budget: Duration) -> Verdict {
        let started = Instant::now();
        // `None` past the end of the clock: the caller sets no bound.
        let caller_ends = started.checked_add(budget);
        // The budget starts with the first call that runs a hook: until then no hook has spent
        // any of it, and a call that runs out of it alone ran out of its own time. (Counting
        // from `started` would give the first call a few nanoseconds less than the whole budget,
        // and call its timeout a cut by the hooks before it.)
        let mut budget_ends = None;
        let mut last_ended = started;
        let mut run = self.chain.start(request);
        while run.next_hook().is_some() {
            let hook = &self.hooks[run.position()];
            let (timeout, fail_open) = self.own[run.position()];
            // A budget shorter than the timeout bounds every call, the first included: running
            // into it alone is then the hook's own timeout, not a cut by the hooks before it.
            let timeout = timeout.min(self.chain_timeout);
            let call_started = Instant::now();
            let left_of = |ends: Instant| ends.saturating_duration_since(call_started);
            let budget_left = budget_ends
                .map_or(self.chain_timeout, left_of)
                .min(caller_ends.map_or(Duration::MAX, left_of));
            let limit = Limit::within_budget(timeout, budget_left);
            let (result, ended) = hook.call_from(run.request(), limit, call_started).await;
            last_ended = ended;
            // A skipped hook spent nothing: it was not called.
            if budget_ends.is_none() && !matches!(result, Err(HookError::Skipped)) {
                // `None` past the end of the clock: a budget that never ends.
                budget_ends = call_started.checked_add(self.chain_timeout);
            }
            if let (true, Err(error)) = (fail_open, &result) {
                hook.log_failed_open(error);
            }
            let recorded = run.record_failing_open(result, fail_open);
            let elapsed = ended.saturating_duration_since(call_started);
            self.observer
                .hook_call(hook.name(), recorded.outcome, elapsed);
            if recorded.failed_open {
                self.observer
                    .hook_call(hook.name(), Outcome::FailOpen, elapsed);
            }
        }
        // The last call's end is the chain's: what follows it only records its result.
        self.observer
            .chain_finished(last_ended.saturating_duration_since(started));
        run.finish()
    }
}
