//! The driver of a run: offers attempts open loop as they come due, ticks the dispatcher while
//! attempts wait in the store, and hands every final disposition to the [`Ledger`].

use std::time::Duration;

use actix::Addr;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::LoadTestError;
use super::accounting::Ledger;
use super::plan::{Amount, Plan, attempt, attempt_index};
use crate::dispatch::task::Task;
use crate::dispatch::{Dispatcher, Disposition, Offer, Settled, Tick, TickReport};

/// The fewest attempts the harness lets wait in the store at once.
const MIN_WINDOW: u64 = 256;

/// Offers attempts as they come due, ticks the dispatcher while attempts wait in the store,
/// and records every [`Settled`] event.
pub(super) struct Driver {
    rate: f64,
    amount: Amount,
    buffered: bool,
    buffer_size: u64,
    workers: u64,
    // The most attempts offered and not yet settled: keeps the store's scheduled rows (which
    // each tick walks) bounded while the harness holds the attempts not offered yet. Their
    // latency still counts from their intended start, so a stall shows.
    window: u64,
    idle_limit: Duration,
    dispatcher: Addr<Dispatcher>,
    tenants: Vec<String>,
    started: Instant,
    ledger: Ledger,
    // Attempts scheduled in the store and not in flight, as far as the harness can tell.
    pending: u64,
    // Attempts ticks took into dispatch, and dispatches that ended (buffered: left the buffer).
    taken: u64,
    returned: u64,
    ticking: bool,
    force_tick: bool,
    progress: Option<ProgressBar>,
}

impl Driver {
    pub(super) fn new(plan: &Plan, dispatcher: Addr<Dispatcher>, show_progress: bool) -> Driver {
        let buffer_size = plan.buffer_size as u64;
        let workers = plan.workers.max(1) as u64;
        // Enough for a synchronous tick to amortise its round trip, and for a buffered tick to
        // refill the whole buffer with attempts to spare.
        let window = MIN_WINDOW.max(2 * buffer_size + workers);
        let progress = show_progress.then(|| {
            let bar = match plan.amount {
                Amount::Attempts(attempts) => {
                    ProgressBar::with_draw_target(Some(attempts), ProgressDrawTarget::stderr())
                }
                Amount::For(_) => ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr()),
            };
            if let Ok(style) = ProgressStyle::with_template(
                "{spinner} {elapsed_precise} [{bar:40}] {pos}/{len} settled ({per_sec})",
            ) {
                bar.set_style(style.progress_chars("=> "));
            }
            bar
        });
        Driver {
            rate: plan.rate,
            amount: plan.amount,
            buffered: buffer_size > 0,
            buffer_size,
            workers,
            window,
            idle_limit: plan.supervise.chain_timeout
                + plan.supervise.timeout
                + Duration::from_secs(1),
            dispatcher,
            tenants: (0..plan.tenants)
                .map(|tenant| format!("tenant-{tenant}"))
                .collect(),
            started: Instant::now(),
            ledger: Ledger::default(),
            pending: 0,
            taken: 0,
            returned: 0,
            ticking: false,
            force_tick: false,
            progress,
        }
    }

    fn offered(&self) -> u64 {
        self.ledger.offered()
    }

    /// What was offered and settled so far.
    pub(super) fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    fn micros_since_start(&self, at: Instant) -> u64 {
        u64::try_from(at.duration_since(self.started).as_micros()).unwrap_or(u64::MAX - 1)
    }

    /// How many attempts should have been offered by `now`, whatever the window.
    fn due(&self, now: Instant) -> u64 {
        let elapsed = now.duration_since(self.started);
        if self.rate > 0.0 {
            // Attempt i is due at i / rate seconds.
            let due = (elapsed.as_secs_f64() * self.rate).floor() as u64 + 1;
            match self.amount {
                Amount::Attempts(attempts) => due.min(attempts),
                Amount::For(duration) => {
                    due.min((duration.as_secs_f64() * self.rate).ceil() as u64)
                }
            }
        } else {
            match self.amount {
                Amount::Attempts(attempts) => attempts,
                Amount::For(duration) if elapsed < duration => u64::MAX,
                Amount::For(_) => self.offered(),
            }
        }
    }

    /// Whether every attempt of the plan has been offered.
    fn is_offering_done(&self, now: Instant) -> bool {
        match self.amount {
            Amount::Attempts(attempts) => self.offered() >= attempts,
            Amount::For(duration) => {
                if self.rate > 0.0 {
                    self.offered() >= (duration.as_secs_f64() * self.rate).ceil() as u64
                } else {
                    now.duration_since(self.started) >= duration
                }
            }
        }
    }

    /// When the next attempt comes due, if it is not due yet and the window has room for it.
    fn next_due(&self, now: Instant) -> Option<Instant> {
        if self.rate <= 0.0 || self.is_offering_done(now) || self.room() == 0 {
            return None;
        }
        let at = self.started + Duration::from_secs_f64(self.offered() as f64 / self.rate);
        (at > now).then_some(at)
    }

    fn room(&self) -> u64 {
        self.window
            .saturating_sub(self.offered().saturating_sub(self.ledger.settled()))
    }

    /// Offers the attempts due by `now` that fit the window.
    async fn offer_due(&mut self, now: Instant) -> Result<(), LoadTestError> {
        let count = self
            .due(now)
            .saturating_sub(self.offered())
            .min(self.room());
        if count == 0 {
            return Ok(());
        }
        let first = self.offered();
        let offered_at = self.micros_since_start(now);
        let mut tasks = Vec::with_capacity(count as usize);
        for index in first..first + count {
            let intended = if self.rate > 0.0 {
                (index as f64 / self.rate * 1e6) as u64
            } else {
                offered_at
            };
            self.ledger.offer(intended);
            tasks.push(self.task(index));
        }
        self.pending += count;
        match self.dispatcher.send(Offer(tasks)).await {
            Ok(Ok(_)) => Ok(()),
            _ => Err(LoadTestError::DispatcherStopped),
        }
    }

    fn task(&self, index: u64) -> Task {
        attempt(
            index,
            &self.tenants[(index % self.tenants.len() as u64) as usize],
        )
    }

    /// Whether a tick now would dispatch something worth the tick.
    fn is_tick_worth_it(&self) -> bool {
        if self.force_tick {
            return true;
        }
        if self.pending == 0 {
            return false;
        }
        if !self.buffered {
            return true;
        }
        // Tick once a quarter of the buffer (or every waiting attempt) fits, so that a full
        // buffer is not ticked at again and again while the workers catch up.
        let in_dispatch = self.taken.saturating_sub(self.returned);
        let room = (self.buffer_size + self.workers).saturating_sub(in_dispatch);
        room >= (self.buffer_size / 4).max(1).min(self.pending)
    }

    fn tick(&mut self, reports: &mpsc::UnboundedSender<Option<TickReport>>) {
        self.ticking = true;
        self.force_tick = false;
        let tick = self.dispatcher.send(Tick);
        let reports = reports.clone();
        actix::spawn(async move {
            // The driver waits for this report; it is gone only when the driver returned.
            let _ = reports.send(tick.await.ok());
        });
    }

    fn ticked(&mut self, report: Option<TickReport>) -> Result<(), LoadTestError> {
        self.ticking = false;
        let report = report.ok_or(LoadTestError::DispatcherStopped)?;
        let offered = report.offered as u64;
        self.pending = self.pending.saturating_sub(offered);
        self.taken += offered;
        Ok(())
    }

    /// Records one offer's disposition, seen at `at`.
    pub(super) fn record(&mut self, settled: Settled, at: Instant) {
        let Some(index) = attempt_index(&settled.key.task_id) else {
            return;
        };
        let settled_at = self.micros_since_start(at);
        match settled.disposition {
            Disposition::Executed | Disposition::Refused | Disposition::Failed => {
                self.returned += 1;
                self.ledger.settle(index, settled.disposition, settled_at);
            }
            // Handed back at the tick for a later one; counted by the observer.
            Disposition::Deferred => {}
            // Scheduled again: offered on a later tick.
            Disposition::Waiting | Disposition::Rejected | Disposition::Cancelled => {
                self.returned += 1;
                self.pending += 1;
            }
            Disposition::Superseded => self.returned += 1,
        }
    }

    /// Offers, ticks and records until every offered attempt has settled, or nothing happened
    /// for three idle limits in a row after the last offer.
    pub(super) async fn drive(
        &mut self,
        events: &mut mpsc::UnboundedReceiver<Settled>,
    ) -> Result<(), LoadTestError> {
        let (reports_tx, mut reports) = mpsc::unbounded_channel();
        self.started = Instant::now();
        let mut idle_rounds = 0;
        loop {
            while let Ok(report) = reports.try_recv() {
                self.ticked(report)?;
            }
            while let Ok(settled) = events.try_recv() {
                self.record(settled, Instant::now());
            }
            let now = Instant::now();
            self.offer_due(now).await?;
            if !self.ticking && self.is_tick_worth_it() {
                self.tick(&reports_tx);
            }
            if let Some(bar) = &self.progress {
                bar.set_position(self.ledger.settled());
            }
            let now = Instant::now();
            if self.is_offering_done(now)
                && self.ledger.settled() == self.offered()
                && !self.ticking
            {
                return Ok(());
            }
            let idle_at = now + self.idle_limit;
            let wake_at = self.next_due(now).map_or(idle_at, |due| due.min(idle_at));
            tokio::select! {
                Some(settled) = events.recv() => {
                    self.record(settled, Instant::now());
                    idle_rounds = 0;
                }
                Some(report) = reports.recv() => {
                    self.ticked(report)?;
                }
                () = tokio::time::sleep_until(wake_at) => {
                    if wake_at >= idle_at {
                        // Nothing settled for a while: tick anyway, in case an attempt waits
                        // that the harness does not know of, and give up after three rounds.
                        idle_rounds += 1;
                        self.force_tick = true;
                        if idle_rounds >= 3 && self.is_offering_done(Instant::now()) {
                            return Ok(());
                        }
                    }
                }
            }
        }
    }

    pub(super) fn finish_progress(&self) {
        if let Some(bar) = &self.progress {
            bar.set_position(self.ledger.settled());
            bar.finish_and_clear();
        }
    }
}
