//! A hook's breaker: the whole state machine, and the actor that keeps its time and tells
//! observers.
//!
//! # States
//! Closed, calls pass and failures are counted in runs (below). The failure that makes a run
//! reach `failures` opens the breaker at once, on the hot path, so that the very next call is
//! skipped. Open, every call is skipped until the backoff ends (`backoff` at first, doubled after
//! each failed probe up to `max_backoff`, each moved by up to `jitter` of itself and never past
//! `max_backoff`); the breaker is then half-open and exactly one call probes the hook. A probe
//! that gets an answer closes the breaker; one that fails opens it again. A probe that is
//! cancelled, or cut by the chain budget, leaves the probe to the next call.
//!
//! # Consecutive failures
//! Runs are counted in the order calls start, not the order they end. Each call takes a ticket
//! as it passes the gate. An answer (any decision) ends the run and moves its start to the next
//! ticket; a failure joins the run only if its call started after the hook last answered. So a
//! run of `failures` is that many calls that failed with no answer from the hook since the first
//! of them started. Concurrency cannot fake one: slow calls that fail together after a fast call
//! has answered overlapped a working hook, and do not count. Only errors, timeouts and panics are
//! failures; a cancelled call, a skip or a cut by the chain budget counts nothing at all.
//!
//! # Who does what
//! [`Machine`] holds the state in atomics, and each transition is one compare-and-swap in one of
//! its methods: the gates (`super::gate`) call them on the hot path, with no message round
//! trip, and the breaker's own timer calls the one that makes an open breaker half-open when its
//! backoff ends. Whoever makes a transition sends it to the [`Breaker`] actor, with its cause,
//! and the actor tells observers and the log each transition exactly once and in the order they
//! happened, and keeps the timer.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use actix::{Actor, Addr, AsyncContext, Context, Handler, Message, MessageResult, SpawnHandle};
use tokio::time::Instant;

use super::BreakerSettings;
use crate::admission::{HookError, display_duration};
use crate::events::{BreakerEvents, BreakerState};

/// Where the machine is. `HalfOpen` and `Probing` both show as [`BreakerState::HalfOpen`]: they
/// differ only in whether the one probe has been taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Closed,
    Open,
    HalfOpen,
    Probing,
}

/// The machine's state word: the phase, how many times the backoff has doubled, and the number
/// of the last transition observers are told of, which also tells one opening from the next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Word {
    phase: Phase,
    doublings: u8,
    seq: u64,
}

impl Word {
    const PHASE_BITS: u32 = 2;
    const DOUBLINGS_BITS: u32 = 6;
    const SEQ_SHIFT: u32 = Word::PHASE_BITS + Word::DOUBLINGS_BITS;

    fn pack(self) -> u64 {
        let phase = match self.phase {
            Phase::Closed => 0,
            Phase::Open => 1,
            Phase::HalfOpen => 2,
            Phase::Probing => 3,
        };
        (self.seq << Word::SEQ_SHIFT) | (u64::from(self.doublings) << Word::PHASE_BITS) | phase
    }

    fn unpack(word: u64) -> Word {
        let phase = match word & 0b11 {
            0 => Phase::Closed,
            1 => Phase::Open,
            2 => Phase::HalfOpen,
            _ => Phase::Probing,
        };
        Word {
            phase,
            doublings: ((word >> Word::PHASE_BITS) & 0b11_1111) as u8,
            seq: word >> Word::SEQ_SHIFT,
        }
    }

    /// The next transition observers are told of, into `phase`.
    fn then(self, phase: Phase, doublings: u8) -> Word {
        Word {
            phase,
            doublings,
            seq: self.seq + 1,
        }
    }
}

/// The most doublings the state word holds; the backoff reaches `max_backoff` long before.
const MAX_DOUBLINGS: u8 = 63;

/// `until` while no backoff end is known: closed, or opened a moment ago and not yet written.
const NEVER: u64 = u64::MAX;

/// Runs longer than this act as this long: tickets wrap at 2^32, and the run compares them by
/// their distance, which must stay below 2^31.
const MAX_RUN: u32 = 1 << 31;

/// A transition, as its maker sends it to the breaker: the `seq`-th change of state, into `to`.
/// Sent by a gate or by the breaker's timer; always delivered (`do_send`), as transitions are
/// rare and a lost one would leave observers wrong.
#[derive(Debug, Clone, PartialEq, Eq, Message)]
#[rtype(result = "()")]
pub(crate) struct Transitioned {
    seq: u64,
    to: BreakerState,
    // When an opening's backoff ends, in nanoseconds from the machine's base.
    until: Option<u64>,
    cause: Cause,
}

/// Why the breaker changed state, as its log line says.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Cause {
    /// A run of `run` consecutive failures opened it for `backoff`; the last failure was `last`.
    Failures {
        run: u32,
        last: String,
        backoff: Duration,
    },
    /// Its probe failed with `last`, which opened it again for `backoff`.
    ProbeFailed { last: String, backoff: Duration },
    /// Its backoff ended: the next call probes the hook.
    BackoffEnded,
    /// Its probe got an answer.
    ProbeAnswered,
}

/// What a gate may do with one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Entry {
    /// Call the hook; the ticket orders the call among the others (see the module docs).
    Call(u32),
    /// Call the hook as the breaker's one probe.
    Probe,
    /// Skip the hook.
    Skip,
}

/// The breaker's state machine, shared by its gates and its actor.
#[derive(Debug)]
pub(crate) struct Machine {
    settings: BreakerSettings,
    base: Instant,
    /// The packed [`Word`].
    word: AtomicU64,
    /// When the backoff of the current opening ends, in nanoseconds from `base`, or [`NEVER`].
    /// Written before a probe's failure publishes the phase, and after an opening from closed
    /// publishes it (the opener that wins is the only one that may), so a gate never lets a
    /// probe through on a stale value.
    until: AtomicU64,
    /// The next call's ticket.
    tickets: AtomicU32,
    /// The current run: the first ticket that may join it (high half) and its failures (low).
    run: AtomicU64,
}

impl Machine {
    /// A closed breaker.
    pub(crate) fn new(settings: BreakerSettings) -> Machine {
        Machine {
            settings,
            base: Instant::now(),
            word: AtomicU64::new(
                Word {
                    phase: Phase::Closed,
                    doublings: 0,
                    seq: 0,
                }
                .pack(),
            ),
            until: AtomicU64::new(NEVER),
            tickets: AtomicU32::new(0),
            run: AtomicU64::new(0),
        }
    }

    fn word(&self) -> (u64, Word) {
        let packed = self.word.load(Ordering::Acquire);
        (packed, Word::unpack(packed))
    }

    fn swap(&self, current: u64, next: Word) -> bool {
        self.word
            .compare_exchange(current, next.pack(), Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    fn now(&self) -> u64 {
        u64::try_from(self.base.elapsed().as_nanos()).unwrap_or(NEVER - 1)
    }

    fn backoff_ended(&self) -> bool {
        self.now() >= self.until.load(Ordering::Acquire)
    }

    /// The state now: an open breaker whose backoff has ended is half-open.
    pub(crate) fn state(&self) -> BreakerState {
        match self.word().1.phase {
            Phase::Closed => BreakerState::Closed,
            Phase::Open if !self.backoff_ended() => BreakerState::Open,
            Phase::Open | Phase::HalfOpen | Phase::Probing => BreakerState::HalfOpen,
        }
    }

    /// The failures of the current run.
    pub(crate) fn failures_in_run(&self) -> u32 {
        unpack_run(self.run.load(Ordering::Acquire)).1
    }

    /// Decides what a call may do, and makes the breaker half-open when the call is the first to
    /// find its backoff ended.
    pub(crate) fn enter(&self) -> (Entry, Option<Transitioned>) {
        loop {
            let (current, word) = self.word();
            match word.phase {
                Phase::Closed => {
                    let ticket = self.tickets.fetch_add(1, Ordering::AcqRel);
                    return (Entry::Call(ticket), None);
                }
                Phase::Probing => return (Entry::Skip, None),
                Phase::Open if !self.backoff_ended() => return (Entry::Skip, None),
                Phase::Open => {
                    let next = word.then(Phase::Probing, word.doublings);
                    if self.swap(current, next) {
                        let half_open = Transitioned {
                            seq: next.seq,
                            to: BreakerState::HalfOpen,
                            until: None,
                            cause: Cause::BackoffEnded,
                        };
                        return (Entry::Probe, Some(half_open));
                    }
                }
                Phase::HalfOpen => {
                    let probing = Word {
                        phase: Phase::Probing,
                        ..word
                    };
                    if self.swap(current, probing) {
                        return (Entry::Probe, None);
                    }
                }
            }
        }
    }

    /// Counts the end of the call that held `ticket`: an answer (`failure` is `None`) ends the
    /// run, a failure may join it and, the run long enough, open the breaker.
    pub(crate) fn call_finished(
        &self,
        ticket: u32,
        failure: Option<&HookError>,
    ) -> Option<Transitioned> {
        let Some(failure) = failure else {
            let fresh = pack_run(self.tickets.load(Ordering::Acquire), 0);
            if self.run.load(Ordering::Acquire) != fresh {
                self.run.store(fresh, Ordering::Release);
            }
            return None;
        };
        let failures = loop {
            let current = self.run.load(Ordering::Acquire);
            let (since, failures) = unpack_run(current);
            if !started_at_or_after(ticket, since) {
                // The hook answered a call that started after this one.
                return None;
            }
            let failures = failures.saturating_add(1);
            if self
                .run
                .compare_exchange(
                    current,
                    pack_run(since, failures),
                    Ordering::AcqRel,
                    Ordering::Acquire,
                )
                .is_ok()
            {
                break failures;
            }
        };
        if failures < self.settings.failures.clamp(1, MAX_RUN) {
            return None;
        }
        let (current, word) = self.word();
        if word.phase != Phase::Closed {
            return None;
        }
        let backoff = self.backoff(0);
        let until = self.now().saturating_add(nanos(backoff));
        let next = word.then(Phase::Open, 0);
        // Another call that ended the same run may have opened it first.
        if !self.swap(current, next) {
            return None;
        }
        self.until.store(until, Ordering::Release);
        Some(Transitioned {
            seq: next.seq,
            to: BreakerState::Open,
            until: Some(until),
            cause: Cause::Failures {
                run: failures,
                last: failure.cleaned(),
                backoff,
            },
        })
    }

    /// Ends the probe: an answer (`failure` is `None`) closes the breaker, a failure opens it
    /// again with the backoff doubled. Only the one call holding the probe calls this.
    pub(crate) fn probe_finished(&self, failure: Option<&HookError>) -> Transitioned {
        let (_, word) = self.word();
        debug_assert_eq!(word.phase, Phase::Probing);
        if let Some(failure) = failure {
            let doublings = if self.doubled(word.doublings) < self.settings.max_backoff {
                (word.doublings + 1).min(MAX_DOUBLINGS)
            } else {
                word.doublings
            };
            let backoff = self.backoff(doublings);
            let until = self.now().saturating_add(nanos(backoff));
            let next = word.then(Phase::Open, doublings);
            // Nobody else writes while the probe is out: publish the backoff end, then the phase.
            self.until.store(until, Ordering::Release);
            self.word.store(next.pack(), Ordering::Release);
            Transitioned {
                seq: next.seq,
                to: BreakerState::Open,
                until: Some(until),
                cause: Cause::ProbeFailed {
                    last: failure.cleaned(),
                    backoff,
                },
            }
        } else {
            let next = word.then(Phase::Closed, 0);
            self.until.store(NEVER, Ordering::Release);
            // Calls that started before the close cannot join the new run.
            self.run.store(
                pack_run(self.tickets.load(Ordering::Acquire), 0),
                Ordering::Release,
            );
            self.word.store(next.pack(), Ordering::Release);
            Transitioned {
                seq: next.seq,
                to: BreakerState::Closed,
                until: None,
                cause: Cause::ProbeAnswered,
            }
        }
    }

    /// Gives the probe back unfinished (the call was cancelled or cut by the chain budget), for
    /// the next call to take.
    pub(crate) fn probe_abandoned(&self) {
        let (_, word) = self.word();
        debug_assert_eq!(word.phase, Phase::Probing);
        let half_open = Word {
            phase: Phase::HalfOpen,
            ..word
        };
        self.word.store(half_open.pack(), Ordering::Release);
    }

    /// Makes an open breaker half-open if its backoff has ended: the breaker's own timer, for a
    /// breaker no call has come to probe.
    fn half_open_if_due(&self) -> Option<Transitioned> {
        let (current, word) = self.word();
        if word.phase != Phase::Open || !self.backoff_ended() {
            return None;
        }
        let next = word.then(Phase::HalfOpen, word.doublings);
        self.swap(current, next).then_some(Transitioned {
            seq: next.seq,
            to: BreakerState::HalfOpen,
            until: None,
            cause: Cause::BackoffEnded,
        })
    }

    /// `backoff` doubled `doublings` times, up to `max_backoff`.
    fn doubled(&self, doublings: u8) -> Duration {
        let settings = &self.settings;
        (0..doublings).fold(settings.backoff, |backoff, _| {
            backoff.saturating_mul(2).min(settings.max_backoff)
        })
    }

    /// The open period after `doublings` failed probes: jittered, never past `max_backoff`.
    fn backoff(&self, doublings: u8) -> Duration {
        jittered(self.doubled(doublings), self.settings.jitter).min(self.settings.max_backoff)
    }

    fn until_from_now(&self, until: u64) -> Duration {
        Duration::from_nanos(until.saturating_sub(self.now()))
    }
}

/// `duration` in nanoseconds, as the atomics hold times.
pub(super) fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(NEVER - 1)
}

fn pack_run(since: u32, failures: u32) -> u64 {
    (u64::from(since) << 32) | u64::from(failures)
}

fn unpack_run(run: u64) -> (u32, u32) {
    ((run >> 32) as u32, run as u32)
}

/// Whether the call with `ticket` started at or after the call with `since`, tickets wrapping.
fn started_at_or_after(ticket: u32, since: u32) -> bool {
    ticket.wrapping_sub(since) < MAX_RUN
}

/// `backoff` moved by up to `jitter` of itself either way, so that breakers opened together do
/// not probe together.
fn jittered(backoff: Duration, jitter: f64) -> Duration {
    let jitter = jitter.clamp(0.0, 1.0);
    if jitter == 0.0 {
        return backoff;
    }
    let factor = 1.0 + jitter * (fastrand::f64() * 2.0 - 1.0);
    backoff.mul_f64(factor)
}

/// A hook's breaker actor: tells observers of each transition, in order, and makes the breaker
/// half-open when a backoff ends with no call to probe. Started by [`super::Gate::start`].
pub(crate) struct Breaker {
    position: usize,
    hook: String,
    machine: Arc<Machine>,
    observer: Arc<dyn BreakerEvents>,
    /// The number of the last transition observers were told of.
    told: u64,
    /// Transitions that arrived before an earlier one (from gates on other threads).
    early: BTreeMap<u64, Transitioned>,
    half_open_timer: Option<SpawnHandle>,
}

impl std::fmt::Debug for Breaker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Breaker")
            .field("hook", &self.hook)
            .field("machine", &self.machine)
            .field("told", &self.told)
            .finish()
    }
}

/// Asks for the state once every transition made before it, a backoff that has ended included,
/// has been told to observers. Sent by [`super::Gate::settled_state`]; a reply, so never dropped.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "BreakerState")]
pub(crate) struct CurrentState;

impl Breaker {
    /// Starts the breaker of the hook named `hook` at `position` in the chain, over `machine`,
    /// on the current arbiter.
    ///
    /// # Panics
    /// Outside a running actix system.
    pub(crate) fn start(
        position: usize,
        hook: &str,
        machine: Arc<Machine>,
        observer: Arc<dyn BreakerEvents>,
    ) -> Addr<Breaker> {
        Breaker {
            position,
            hook: hook.to_owned(),
            machine,
            observer,
            told: 0,
            early: BTreeMap::new(),
            half_open_timer: None,
        }
        .start()
    }

    fn tell(&mut self, transition: Transitioned, ctx: &mut Context<Self>) {
        self.early.insert(transition.seq, transition);
        while let Some(next) = self.early.remove(&(self.told + 1)) {
            self.told = next.seq;
            log_transition(&self.hook, &next.cause);
            self.observer
                .breaker_changed(self.position, &self.hook, next.to);
            if let Some(until) = next.until {
                self.half_open_when_backoff_ends(until, ctx);
            }
        }
    }

    fn half_open_when_backoff_ends(&mut self, until: u64, ctx: &mut Context<Self>) {
        if let Some(timer) = self.half_open_timer.take() {
            ctx.cancel_future(timer);
        }
        let wait = self.machine.until_from_now(until);
        if wait.is_zero() {
            self.half_open_if_due(ctx);
            return;
        }
        self.half_open_timer = Some(ctx.run_later(wait, |breaker, ctx| {
            breaker.half_open_timer = None;
            breaker.half_open_if_due(ctx);
        }));
    }

    /// Makes the breaker half-open and tells observers, if it is open and its backoff has ended;
    /// nothing if a call found the backoff ended first.
    fn half_open_if_due(&mut self, ctx: &mut Context<Self>) {
        if let Some(half_open) = self.machine.half_open_if_due() {
            self.tell(half_open, ctx);
        }
    }
}

/// Logs a transition of the breaker of `hook`: an opening as a warning, a recovery (half-open,
/// closed) as information.
fn log_transition(hook: &str, cause: &Cause) {
    match cause {
        Cause::Failures { run, last, backoff } => tracing::warn!(
            "breaker of hook {hook:?} opened for {} after {run} consecutive failures, the last: {last}",
            display_duration(*backoff)
        ),
        Cause::ProbeFailed { last, backoff } => tracing::warn!(
            "breaker of hook {hook:?} opened again for {}: its probe failed: {last}",
            display_duration(*backoff)
        ),
        Cause::BackoffEnded => tracing::info!(
            "breaker of hook {hook:?} is half-open: its backoff ended, and the next call probes the hook"
        ),
        Cause::ProbeAnswered => {
            tracing::info!("breaker of hook {hook:?} closed: its probe got an answer")
        }
    }
}

impl Actor for Breaker {
    type Context = Context<Self>;
}

impl Handler<Transitioned> for Breaker {
    type Result = ();

    fn handle(&mut self, transition: Transitioned, ctx: &mut Context<Self>) {
        self.tell(transition, ctx);
    }
}

impl Handler<CurrentState> for Breaker {
    type Result = MessageResult<CurrentState>;

    fn handle(&mut self, _: CurrentState, ctx: &mut Context<Self>) -> Self::Result {
        // A backoff that has ended is a transition made, even if the timer has not fired yet.
        self.half_open_if_due(ctx);
        MessageResult(self.machine.state())
    }
}
