//! The breaker actor: one per hook, owning the state machine and the backoff timers.
//!
//! Closed, it lets calls pass while the gates count consecutive failures; the call that reaches
//! `failures` opens it and sends [`Opened`]. Open, it publishes when its backoff ends (doubling after each failed
//! probe, with jitter, up to `max_backoff`); from then it is half-open, and exactly one call
//! probes the hook: its [`ProbeFinished`] closes the breaker or opens it again. Only errors, timeouts and panics are
//! failures; a cancelled call is nothing at all.

use std::sync::Arc;
use std::time::Duration;

use actix::{Actor, AsyncContext, Context, Handler, Message, MessageResult, SpawnHandle};

use super::gate::{Gate, Shared};
use super::{BreakerSettings, BreakerState, Observer};

/// A hook's breaker. Start one with [`Breaker::start_for`]; the hot path holds its [`Gate`].
pub struct Breaker {
    position: usize,
    hook: String,
    settings: BreakerSettings,
    shared: Arc<Shared>,
    next_backoff: Duration,
    half_open_timer: Option<SpawnHandle>,
    observer: Arc<dyn Observer>,
}

impl std::fmt::Debug for Breaker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Breaker")
            .field("hook", &self.hook)
            .field("state", &self.shared.state())
            .field("next_backoff", &self.next_backoff)
            .finish()
    }
}

/// Sent by the gate whose failed call made the count reach the threshold, after it opened the
/// breaker for `open_for`. Always delivered (`do_send`): one message per opening, never routine.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "()")]
pub struct Opened {
    /// The backoff the gate published, jitter included.
    pub open_for: Duration,
}

/// Sent by the gate whose call was the probe, with how it went. Always delivered: a lost probe
/// outcome would leave the breaker half-open with its permit taken.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "()")]
pub struct ProbeFinished {
    /// Whether the hook answered (any decision), rather than failing.
    pub succeeded: bool,
}

/// Asks for the state once every message sent before it has been handled. Sent by
/// [`Gate::settled_state`]; a reply, so never dropped.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "BreakerState")]
pub struct CurrentState;

impl Breaker {
    /// Starts the breaker of the hook named `hook` at `position` in the chain on the current
    /// arbiter, and returns the gate the hot path reads.
    ///
    /// # Panics
    /// Outside a running actix system.
    pub fn start_for(
        position: usize,
        hook: &str,
        settings: BreakerSettings,
        observer: Arc<dyn Observer>,
    ) -> Gate {
        let shared = Arc::new(Shared::new());
        let gate_settings = settings.clone();
        let breaker = Breaker {
            position,
            hook: hook.to_owned(),
            next_backoff: settings.backoff,
            settings,
            shared: Arc::clone(&shared),
            half_open_timer: None,
            observer,
        };
        Gate::new(shared, gate_settings, breaker.start())
    }

    fn close(&mut self) {
        self.shared.publish(BreakerState::Closed, Duration::ZERO);
        self.observer
            .breaker_changed(self.position, &self.hook, BreakerState::Closed);
    }

    fn open(&mut self, ctx: &mut Context<Self>) {
        let wait = jittered(self.next_backoff, self.settings.jitter);
        self.shared.publish(BreakerState::Open, wait);
        self.opened(wait, ctx);
    }

    fn opened(&mut self, wait: Duration, ctx: &mut Context<Self>) {
        self.observer
            .breaker_changed(self.position, &self.hook, BreakerState::Open);
        if let Some(timer) = self.half_open_timer.take() {
            ctx.cancel_future(timer);
        }
        // Gates see the backoff end by themselves; the timer tells observers.
        self.half_open_timer = Some(ctx.run_later(wait, |breaker, _| {
            breaker.half_open_timer = None;
            if breaker.shared.state() == BreakerState::HalfOpen {
                breaker.observer.breaker_changed(
                    breaker.position,
                    &breaker.hook,
                    BreakerState::HalfOpen,
                );
            }
        }));
    }
}

impl Actor for Breaker {
    type Context = Context<Self>;
}

impl Handler<Opened> for Breaker {
    type Result = ();

    fn handle(&mut self, opened: Opened, ctx: &mut Context<Self>) {
        self.next_backoff = self.settings.backoff;
        self.opened(opened.open_for, ctx);
    }
}

impl Handler<ProbeFinished> for Breaker {
    type Result = ();

    fn handle(&mut self, probe: ProbeFinished, ctx: &mut Context<Self>) {
        if self.shared.state() != BreakerState::HalfOpen {
            return;
        }
        if probe.succeeded {
            self.close();
        } else {
            self.next_backoff = (self.next_backoff * 2).min(self.settings.max_backoff);
            self.open(ctx);
        }
    }
}

/// `backoff` moved by up to `jitter` of itself either way, so that breakers opened together do
/// not probe together.
pub(crate) fn jittered(backoff: Duration, jitter: f64) -> Duration {
    let jitter = jitter.clamp(0.0, 1.0);
    if jitter == 0.0 {
        return backoff;
    }
    let factor = 1.0 + jitter * (fastrand::f64() * 2.0 - 1.0);
    backoff.mul_f64(factor)
}

impl Handler<CurrentState> for Breaker {
    type Result = MessageResult<CurrentState>;

    fn handle(&mut self, _: CurrentState, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.shared.state())
    }
}
