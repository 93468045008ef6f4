//! The breaker's gate: what the hot path reads, without a message round trip, before each call.
//!
//! The [`super::Breaker`] actor owns the state machine after a breaker opens (probes, backoffs,
//! observers) and publishes the state in an atomic; the gate reads it. Consecutive failures are
//! counted here, with atomics: the call that reaches the threshold opens the breaker at once and
//! tells the breaker with one message. A probe's outcome is always delivered.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use actix::Addr;

use super::BreakerSettings;
use super::breaker::{Breaker, CurrentState, Opened, ProbeFinished, jittered};
use tokio::time::Instant;

use crate::admission::HookError;

/// A breaker's state, as the `dexaflow_admission_breaker_state` gauge shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum BreakerState {
    /// Calls pass.
    Closed = 0,
    /// The backoff has passed: one call may probe the hook, every other call is skipped.
    HalfOpen = 1,
    /// Calls are skipped without calling the hook.
    Open = 2,
}

impl BreakerState {
    fn from_u8(value: u8) -> BreakerState {
        match value {
            0 => BreakerState::Closed,
            1 => BreakerState::HalfOpen,
            _ => BreakerState::Open,
        }
    }
}

/// The state a breaker shares with its gates.
///
/// An open breaker also publishes when its backoff ends, so that a gate lets the probe through
/// the moment it may, however busy the breaker's arbiter is; the breaker's own timer then
/// records the half-open state for observers.
#[derive(Debug)]
pub(crate) struct Shared {
    state: AtomicU8,
    probe_taken: AtomicBool,
    consecutive_failures: AtomicU32,
    base: Instant,
    open_until_nanos: AtomicU64,
}

impl Shared {
    pub(crate) fn new() -> Shared {
        Shared {
            state: AtomicU8::new(BreakerState::Closed as u8),
            probe_taken: AtomicBool::new(false),
            consecutive_failures: AtomicU32::new(0),
            base: Instant::now(),
            open_until_nanos: AtomicU64::new(0),
        }
    }

    /// The state now: an open breaker whose backoff has ended is half-open.
    pub(crate) fn state(&self) -> BreakerState {
        let state = BreakerState::from_u8(self.state.load(Ordering::Acquire));
        if state == BreakerState::Open && self.backoff_ended() {
            BreakerState::HalfOpen
        } else {
            state
        }
    }

    fn backoff_ended(&self) -> bool {
        let until = Duration::from_nanos(self.open_until_nanos.load(Ordering::Acquire));
        self.base.elapsed() >= until
    }

    /// Opens a closed breaker for `open_for`; `false` if it was not closed (another call or
    /// the breaker got there first).
    pub(crate) fn open_if_closed(&self, open_for: Duration) -> bool {
        if self.state.load(Ordering::Acquire) != BreakerState::Closed as u8 {
            return false;
        }
        let until = self.base.elapsed() + open_for;
        let nanos = u64::try_from(until.as_nanos()).unwrap_or(u64::MAX);
        self.open_until_nanos.store(nanos, Ordering::Release);
        self.state
            .compare_exchange(
                BreakerState::Closed as u8,
                BreakerState::Open as u8,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok()
    }

    /// Publishes `state`; `open_for` is the backoff when opening.
    pub(crate) fn publish(&self, state: BreakerState, open_for: Duration) {
        if state == BreakerState::Closed {
            self.consecutive_failures.store(0, Ordering::Release);
        }
        if state == BreakerState::Open {
            let until = self.base.elapsed() + open_for;
            let nanos = u64::try_from(until.as_nanos()).unwrap_or(u64::MAX);
            self.open_until_nanos.store(nanos, Ordering::Release);
        }
        self.probe_taken.store(false, Ordering::Release);
        self.state.store(state as u8, Ordering::Release);
    }
}

/// The hot path's view of one hook's breaker.
#[derive(Debug, Clone)]
pub struct Gate {
    shared: Arc<Shared>,
    settings: BreakerSettings,
    breaker: Addr<Breaker>,
}

impl Gate {
    pub(crate) fn new(
        shared: Arc<Shared>,
        settings: BreakerSettings,
        breaker: Addr<Breaker>,
    ) -> Gate {
        Gate {
            shared,
            settings,
            breaker,
        }
    }

    /// The breaker's state as last published.
    pub fn state(&self) -> BreakerState {
        self.shared.state()
    }

    /// The state once the breaker has handled every report sent before this call: what a test
    /// or a status page wants, never the hot path (it waits for a message round trip).
    ///
    /// # Errors
    /// When the breaker actor has stopped.
    pub async fn settled_state(&self) -> Result<BreakerState, actix::MailboxError> {
        self.breaker.send(CurrentState).await
    }

    /// The failures counted in a row while closed.
    pub fn consecutive_failures(&self) -> u32 {
        self.shared.consecutive_failures.load(Ordering::Acquire)
    }

    /// Asks to call the hook.
    ///
    /// # Errors
    /// [`HookError::Skipped`] while the breaker is open, or half-open with its one probe taken.
    pub fn enter(&self) -> Result<Pass<'_>, HookError> {
        match self.shared.state() {
            BreakerState::Closed => Ok(Pass {
                gate: self,
                probe: false,
            }),
            BreakerState::Open => Err(HookError::Skipped),
            BreakerState::HalfOpen => {
                let taken = self.shared.probe_taken.compare_exchange(
                    false,
                    true,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                );
                match taken {
                    Ok(_) => Ok(Pass {
                        gate: self,
                        probe: true,
                    }),
                    Err(_) => Err(HookError::Skipped),
                }
            }
        }
    }
}

/// Leave to call the hook once. Finish it with the call's result; dropping it unfinished (the
/// call was cancelled) counts nothing and frees a probe permit for the next call.
#[derive(Debug)]
pub struct Pass<'g> {
    gate: &'g Gate,
    probe: bool,
}

impl Pass<'_> {
    /// Whether this call is the breaker's probe.
    pub fn is_probe(&self) -> bool {
        self.probe
    }

    /// Reports the call's end: `failed` for an error, a timeout or a panic.
    pub fn finish(mut self, failed: bool) {
        let gate = self.gate;
        if self.probe {
            // The permit passes to the breaker, which frees it with the state it publishes next.
            self.probe = false;
            gate.breaker.do_send(ProbeFinished { succeeded: !failed });
            return;
        }
        let counter = &gate.shared.consecutive_failures;
        if failed {
            if counter.fetch_add(1, Ordering::AcqRel) + 1 == gate.settings.failures.max(1) {
                // Open at once, so that the very next call is skipped; the breaker takes over
                // from here (observers, probes, the next backoff).
                let open_for = jittered(gate.settings.backoff, gate.settings.jitter);
                if gate.shared.open_if_closed(open_for) {
                    gate.breaker.do_send(Opened { open_for });
                }
            }
        } else if counter.load(Ordering::Acquire) != 0 {
            counter.store(0, Ordering::Release);
        }
    }
}

impl Drop for Pass<'_> {
    fn drop(&mut self) {
        if self.probe {
            self.gate.shared.probe_taken.store(false, Ordering::Release);
        }
    }
}
