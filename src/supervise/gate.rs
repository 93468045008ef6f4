//! The breaker's gate: what the hot path asks, without a message round trip, before each call,
//! and where it reports the call's end.
//!
//! The gate owns no state of its own: it asks the breaker's [`Machine`] and passes on every
//! transition it makes to the breaker actor with one message (see `super::breaker` for the state
//! machine and what counts as consecutive failures).

use std::sync::Arc;

use actix::Addr;

use super::BreakerSettings;
use super::breaker::{Breaker, CurrentState, Entry, Machine, Transitioned};
use crate::admission::HookError;
use crate::events::{BreakerEvents, BreakerState};

/// The hot path's view of one hook's breaker.
#[derive(Debug, Clone)]
pub struct Gate {
    machine: Arc<Machine>,
    breaker: Addr<Breaker>,
}

impl Gate {
    /// Starts the breaker of the hook named `hook` at `position` in the chain, on the current
    /// arbiter, and returns its gate. The breaker tells `observer` of every change of state.
    ///
    /// # Panics
    /// Outside a running actix system (the breaker is an actor).
    pub fn start(
        position: usize,
        hook: &str,
        settings: BreakerSettings,
        observer: Arc<dyn BreakerEvents>,
    ) -> Gate {
        let machine = Arc::new(Machine::new(settings));
        let breaker = Breaker::start(position, hook, Arc::clone(&machine), observer);
        Gate { machine, breaker }
    }

    /// The breaker's state now.
    pub fn state(&self) -> BreakerState {
        self.machine.state()
    }

    /// The state once the breaker has told observers of every transition made before this call:
    /// what a test or a status page wants, never the hot path (it waits for a message round
    /// trip).
    ///
    /// # Errors
    /// When the breaker actor has stopped.
    pub async fn settled_state(&self) -> Result<BreakerState, actix::MailboxError> {
        self.breaker.send(CurrentState).await
    }

    /// The failures of the current run: calls that failed with no answer from the hook since the
    /// first of them started.
    pub fn consecutive_failures(&self) -> u32 {
        self.machine.failures_in_run()
    }

    /// Asks to call the hook.
    ///
    /// # Errors
    /// [`HookError::Skipped`] while the breaker is open, or half-open with its one probe taken.
    pub fn enter(&self) -> Result<Pass<'_>, HookError> {
        let (entry, transition) = self.machine.enter();
        self.tell(transition);
        let kind = match entry {
            Entry::Call(ticket) => Kind::Call(ticket),
            Entry::Probe => Kind::Probe,
            Entry::Skip => return Err(HookError::Skipped),
        };
        Ok(Pass {
            gate: self,
            kind: Some(kind),
        })
    }

    fn tell(&self, transition: Option<Transitioned>) {
        if let Some(transition) = transition {
            self.breaker.do_send(transition);
        }
    }
}

/// Leave to call the hook once. Finish it with the call's result; dropping it unfinished (the
/// call was cancelled, or cut by the chain budget) counts nothing and frees a probe permit for
/// the next call.
#[derive(Debug)]
pub struct Pass<'g> {
    gate: &'g Gate,
    // `None` once finished.
    kind: Option<Kind>,
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    Call(u32),
    Probe,
}

impl Pass<'_> {
    /// Reports the call's end: `failure` is the error, timeout or panic it ended with (what the
    /// breaker counts, and its log line names when it opens), `None` for an answer.
    pub fn finish(mut self, failure: Option<&HookError>) {
        let machine = &self.gate.machine;
        let transition = match self.kind.take() {
            Some(Kind::Call(ticket)) => machine.call_finished(ticket, failure),
            Some(Kind::Probe) => Some(machine.probe_finished(failure)),
            None => None,
        };
        self.gate.tell(transition);
    }
}

impl Drop for Pass<'_> {
    fn drop(&mut self) {
        if let Some(Kind::Probe) = self.kind {
            self.gate.machine.probe_abandoned();
        }
    }
}
