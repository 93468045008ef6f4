//! The driver of a run: offers attempts open loop as they come due, ticks the dispatcher while
//! attempts wait in the store, and hands every final disposition to the [`Ledger`].

use std::fmt;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::accounting::Ledger;
use super::plan::{Amount, Plan, attempt, attempt_index};
use crate::dispatch::task::Task;
use crate::dispatch::{Disposition, Settled, Shutdown, TickReport};
use crate::install::Handle;

/// The fewest attempts the harness lets wait in the store at once.
const MIN_WINDOW: u64 = 256;
/// The most settled attempts the driver reads at once.
const SETTLED_BATCH: usize = 1024;

/// `duration` in whole microseconds, short of the ledger's mark for an unsettled attempt.
fn micros(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX - 1)
}

/// `duration` in whole milliseconds, for the progress bar of a run for a duration.
fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

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
    handle: Handle,
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
    // Times the driver woke (one round of its loop each).
    wakes: u64,
    progress: Option<ProgressBar>,
    // The most attempts offered, whatever the plan.
    limit: Option<u64>,
}

impl Driver {
    pub(super) fn new(
        plan: &Plan,
        handle: Handle,
        show_progress: bool,
        limit: Option<u64>,
    ) -> Driver {
        let buffer_size = plan.buffer_size as u64;
        let workers = plan.workers.max(1) as u64;
        // Enough for a synchronous tick to amortise its round trip, and for a buffered tick to
        // refill the whole buffer with attempts to spare.
        let window = MIN_WINDOW.max(2 * buffer_size + workers);
        // A run of so many attempts fills its bar with those settled; a run for a duration
        // with its time, the settled attempts counted beside it.
        let progress = show_progress.then(|| {
            let (length, template) = match plan.amount {
                Amount::Attempts(attempts) => (
                    attempts,
                    "{spinner} {elapsed_precise} [{bar:40}] {pos}/{len} settled ({rate}), {eta} left",
                ),
                Amount::For(duration) => (
                    millis(duration),
                    "{spinner} {elapsed_precise} [{bar:40}] {msg} settled, {eta} left",
                ),
            };
            let bar = ProgressBar::with_draw_target(Some(length), ProgressDrawTarget::stderr());
            if let Ok(style) = ProgressStyle::with_template(template) {
                bar.set_style(
                    style
                        .with_key("rate", |state: &ProgressState, out: &mut dyn fmt::Write| {
                            let _ = write!(out, "{:.0}/s", state.per_sec());
                        })
                        .progress_chars("=> "),
                );
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
            handle,
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
            wakes: 0,
            progress,
            limit,
        }
    }

    /// The attempts limit the run stopped at before its plan was done, when it did: it reached
    /// the limit, and its plan asked for more (an unpaced run for a duration asks for as many
    /// as its time takes).
    pub(super) fn cut_at(&self) -> Option<u64> {
        let limit = self.limit.filter(|_| self.is_at_limit())?;
        self.planned()
            .is_none_or(|planned| planned > limit)
            .then_some(limit)
    }

    fn is_at_limit(&self) -> bool {
        self.limit.is_some_and(|limit| self.offered() >= limit)
    }

    fn offered(&self) -> u64 {
        self.ledger.offered()
    }

    /// What was offered and settled so far.
    pub(super) fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    /// The dispatcher the driver feeds.
    pub(super) fn handle(&self) -> &Handle {
        &self.handle
    }

    /// How many times the driver woke, for whatever reason: to offer, to tick, or to read a
    /// batch of settled attempts.
    pub(super) fn wakes(&self) -> u64 {
        self.wakes
    }

    fn micros_since_start(&self, at: Instant) -> u64 {
        micros(at.duration_since(self.started))
    }

    /// When attempt `index` is due, counted from the start of the run: `index / rate` seconds
    /// (never, past the end of the clock); `None` with `--rate 0`, where an attempt is due as
    /// soon as the window has room for it. The one place that says when an attempt is due:
    /// offering, its intended start and the driver's next wake all read it.
    fn due_after(&self, index: u64) -> Option<Duration> {
        (self.rate > 0.0)
            .then(|| Duration::try_from_secs_f64(index as f64 / self.rate).unwrap_or(Duration::MAX))
    }

    /// Whether every attempt of the plan has been offered, or the attempts limit reached.
    fn is_offering_done(&self, now: Instant) -> bool {
        self.is_at_limit() || self.is_plan_done(now)
    }

    /// Whether every attempt of the plan has been offered.
    fn is_plan_done(&self, now: Instant) -> bool {
        if let Some(planned) = self.planned() {
            return self.offered() >= planned;
        }
        // Only an unpaced run for a duration plans no count: it offers until its time is up.
        matches!(self.amount, Amount::For(duration) if now.duration_since(self.started) >= duration)
    }

    /// How many attempts the plan offers, when it says: all but an unpaced run for a duration.
    fn planned(&self) -> Option<u64> {
        match self.amount {
            Amount::Attempts(attempts) => Some(attempts),
            Amount::For(duration) if self.rate > 0.0 => {
                Some((duration.as_secs_f64() * self.rate).ceil() as u64)
            }
            Amount::For(_) => None,
        }
    }

    /// Whether the next attempt of the plan is due by `now` and the window has room for it.
    fn is_next_due(&self, now: Instant) -> bool {
        !self.is_offering_done(now)
            && self.room() > 0
            && self
                .due_after(self.offered())
                .is_none_or(|after| after <= now.duration_since(self.started))
    }

    /// When the next attempt comes due, if the window has room for it: at or before `now` when
    /// it is due already (the driver then wakes at once), `None` when only a settled attempt
    /// can make room.
    fn next_due(&self, now: Instant) -> Option<Instant> {
        if self.is_offering_done(now) || self.room() == 0 {
            return None;
        }
        self.started.checked_add(self.due_after(self.offered())?)
    }

    fn room(&self) -> u64 {
        self.window
            .saturating_sub(self.offered().saturating_sub(self.ledger.settled()))
    }

    /// Offers the attempts due by `now` that fit the window, in one message.
    async fn offer_due(&mut self, now: Instant) {
        let offered_at = now.duration_since(self.started);
        let mut tasks = Vec::new();
        while self.is_next_due(now) {
            let index = self.offered();
            let intended = self.due_after(index).unwrap_or(offered_at);
            self.ledger.offer(micros(intended), micros(offered_at));
            tasks.push(self.task(index));
        }
        if tasks.is_empty() {
            return;
        }
        // Each attempt's task id is its own index: every one is new. A dispatcher that stopped
        // takes none, and the run then ends with them counted as lost.
        self.pending += self.handle.offer_many(tasks).await.unwrap_or(0) as u64;
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

    fn tick(&mut self, reports: &mpsc::UnboundedSender<TickReport>) {
        self.ticking = true;
        self.force_tick = false;
        let tick = self.handle.tick();
        let reports = reports.clone();
        actix::spawn(async move {
            // The driver waits for this report; it is gone only when the driver returned.
            let _ = reports.send(tick.await);
        });
    }

    fn ticked(&mut self, report: TickReport) {
        self.ticking = false;
        let offered = report.offered as u64;
        self.pending = self.pending.saturating_sub(offered);
        self.taken += offered;
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
            Disposition::Waiting
            | Disposition::Rejected
            | Disposition::Backpressure
            | Disposition::Cancelled => {
                self.returned += 1;
                self.pending += 1;
            }
            Disposition::Superseded => self.returned += 1,
        }
    }

    /// Records a batch of settled attempts, all seen now.
    fn record_all(&mut self, batch: &mut Vec<Settled>) {
        let now = Instant::now();
        for settled in batch.drain(..) {
            self.record(settled, now);
        }
    }

    /// Drains the dispatcher and records what settled as it did (attempts handed back settle
    /// as deferred; they are counted from the store).
    pub(super) async fn drain(&mut self) {
        let drain = self.handle.stop().await;
        while let Some(settled) = self.handle.try_next_settled() {
            self.record(settled, Instant::now());
        }
        tracing::debug!(
            handed_back = drain.handed_back,
            "loadtest dispatcher drained"
        );
    }

    /// Offers, ticks and records until every offered attempt has settled, or nothing happened
    /// for three idle limits in a row after the last offer, or `stop` fired; answers whether
    /// `stop` ended it.
    pub(super) async fn drive(&mut self, stop: Option<Shutdown>) -> bool {
        let stopped = async {
            match &stop {
                Some(stop) => stop.triggered().await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(stopped);
        let (reports_tx, mut reports) = mpsc::unbounded_channel();
        let mut batch = Vec::with_capacity(SETTLED_BATCH);
        self.started = Instant::now();
        let mut idle_rounds = 0;
        loop {
            self.wakes += 1;
            // Checked before anything is offered: once it fired, nothing more is.
            if stop.as_ref().is_some_and(Shutdown::is_fired) {
                return true;
            }
            while let Ok(report) = reports.try_recv() {
                self.ticked(report);
            }
            let now = Instant::now();
            while let Some(settled) = self.handle.try_next_settled() {
                self.record(settled, now);
            }
            self.offer_due(now).await;
            if !self.ticking && self.is_tick_worth_it() {
                self.tick(&reports_tx);
            }
            self.show_progress(now);
            if self.is_offering_done(now)
                && self.ledger.settled() == self.offered()
                && !self.ticking
            {
                return false;
            }
            let idle_at = now + self.idle_limit;
            // An attempt that is due already makes the sleep end at once.
            let wake_at = self.next_due(now).map_or(idle_at, |due| due.min(idle_at));
            tokio::select! {
                biased;
                () = &mut stopped => return true,
                // Every settled attempt there is, up to a batch: 0 only once the channel closed.
                1.. = self.handle.next_settled_batch(&mut batch, SETTLED_BATCH) => {
                    self.record_all(&mut batch);
                    idle_rounds = 0;
                }
                Some(report) = reports.recv() => {
                    self.ticked(report);
                }
                () = tokio::time::sleep_until(wake_at) => {
                    if wake_at >= idle_at {
                        // Nothing settled for a while: tick anyway, in case an attempt waits
                        // that the harness does not know of, and give up after three rounds.
                        idle_rounds += 1;
                        self.force_tick = true;
                        if idle_rounds >= 3 && self.is_offering_done(Instant::now()) {
                            return false;
                        }
                    }
                }
            }
        }
    }

    /// Moves the progress bar to `now`: the attempts settled, or the time gone and the attempts
    /// settled in it.
    fn show_progress(&self, now: Instant) {
        let Some(bar) = &self.progress else {
            return;
        };
        match self.amount {
            Amount::Attempts(_) => bar.set_position(self.ledger.settled()),
            Amount::For(_) => {
                bar.set_position(millis(now.duration_since(self.started)));
                bar.set_message(self.ledger.settled().to_string());
            }
        }
    }

    pub(super) fn finish_progress(&self) {
        self.show_progress(Instant::now());
        if let Some(bar) = &self.progress {
            bar.finish_and_clear();
        }
    }
}
