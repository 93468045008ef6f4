//! The harness: offers attempts open loop to a real dispatcher, follows each to its final
//! disposition, drains the dispatcher and checks that every attempt is accounted for once.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use actix::{Actor, Addr};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::LoadTestError;
use super::counter::Counter;
use super::cpu::process_cpu_time;
use super::report::{AttemptOutcome, Latencies, Report, Throughput};
use super::spec::{CHANGED_KEY, HookSpec, Synthetic, WebhookFiles};
use super::timer::{HookTimer, TimerThread};
use crate::admission::{Chain, Hook, Resources};
use crate::dispatch::executor::null::Null;
use crate::dispatch::settings::{
    Allowlist, ExecutorSettings, ResourceDefaults, SourceMode, TokenSettings,
};
use crate::dispatch::task::{State, Task, TaskExecution, TaskKey};
use crate::dispatch::token::Hs256Minter;
use crate::dispatch::{
    Dispatcher, Disposition, Drain, Offer, Parts, Pipeline, Settings, Settled, TaskInstance,
    TaskStore, Tick, TickReport, Ticking,
};
use crate::hooks::{SpecError, Webhook, WebhookSpec};
use crate::supervise::{self, Fanout, Observer, SupervisedChain};

/// How many attempts a run offers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Amount {
    /// This many (`--attempts N`).
    Attempts(u64),
    /// As many as the rate allows for this long (`--duration D`).
    For(Duration),
}

/// What a load test runs: the attempts, the dispatcher and the hook chain.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// How many attempts, or for how long.
    pub amount: Amount,
    /// Attempts per second, offered open loop at their intended start; 0 offers as fast as the
    /// dispatcher takes them.
    pub rate: f64,
    /// `scheduler.dispatch.buffer_size`: 0 runs the chain on the tick.
    pub buffer_size: usize,
    /// `scheduler.dispatch.workers` (0 is taken as 1).
    pub workers: usize,
    /// The hooks, in chain order.
    pub hooks: Vec<HookSpec>,
    /// The files of every `webhook:URL` hook.
    pub webhook_files: WebhookFiles,
    /// What `sleep` and `jitter` hooks wait on.
    pub hook_timer: HookTimer,
    /// How many tenants the attempts are spread over, round robin.
    pub tenants: usize,
    /// Timeouts, breakers and fail-open.
    pub supervise: supervise::Settings,
    /// Seeds the hooks' random draws and the token key.
    pub seed: u64,
}

impl Default for Plan {
    fn default() -> Plan {
        Plan {
            amount: Amount::Attempts(10_000),
            rate: 0.0,
            buffer_size: 0,
            workers: 1,
            hooks: Vec::new(),
            webhook_files: WebhookFiles::default(),
            hook_timer: HookTimer::Thread,
            tenants: 1,
            supervise: supervise::Settings::default(),
            seed: 1,
        }
    }
}

impl Plan {
    /// Checks the values a flag could have set wrong.
    ///
    /// # Errors
    /// [`LoadTestError::Option`] naming the flag.
    pub fn validate(&self) -> Result<(), LoadTestError> {
        let bad = |flag, problem: &str| {
            Err(LoadTestError::Option {
                flag,
                problem: problem.to_owned(),
            })
        };
        match self.amount {
            Amount::Attempts(0) => return bad("--attempts", "must be at least 1"),
            Amount::For(duration) if duration.is_zero() => {
                return bad("--duration", "must be longer than zero");
            }
            _ => {}
        }
        if !self.rate.is_finite() || self.rate < 0.0 {
            return bad(
                "--rate",
                "must be a number of attempts per second, 0 or more",
            );
        }
        if self.tenants == 0 {
            return bad("--tenants", "must be at least 1");
        }
        if self.supervise.timeout.is_zero() {
            return bad("--timeout", "must be longer than zero");
        }
        if self.supervise.chain_timeout.is_zero() {
            return bad("--chain-timeout", "must be longer than zero");
        }
        if self.supervise.breaker.failures == 0 {
            return bad("--breaker-failures", "must be at least 1");
        }
        if self.supervise.breaker.backoff > self.supervise.breaker.max_backoff {
            return bad(
                "--breaker-backoff",
                "must not be longer than --breaker-max-backoff",
            );
        }
        for (position, spec) in self.hooks.iter().enumerate() {
            let HookSpec::Webhook(url) = spec else {
                continue;
            };
            let problems = self.webhook_spec(position, url).check().err();
            // The first problem, against the flag it came from.
            if let Some(problem) = problems.as_deref().and_then(<[SpecError]>::first) {
                let flag = match problem {
                    SpecError::File {
                        field: "ca_bundle", ..
                    } => "--webhook-ca-bundle",
                    SpecError::File {
                        field: "bearer_token_file",
                        ..
                    } => "--webhook-bearer-token-file",
                    _ => "--hook",
                };
                return bad(flag, &problem.to_string());
            }
        }
        Ok(())
    }

    /// The webhook a `webhook:URL` hook at `position` is, with the plan's files.
    fn webhook_spec(&self, position: usize, url: &str) -> WebhookSpec {
        WebhookSpec {
            ca_bundle: self.webhook_files.ca_bundle.clone(),
            bearer_token_file: self.webhook_files.bearer_token_file.clone(),
            ..WebhookSpec::new(format!("webhook#{position}"), url)
        }
    }

    /// How many attempts the run offers, when that is known before it starts (at most ten
    /// million: a hint, not a limit).
    fn expected_attempts(&self) -> Option<usize> {
        let attempts = match self.amount {
            Amount::Attempts(attempts) => attempts,
            Amount::For(duration) if self.rate > 0.0 => {
                (duration.as_secs_f64() * self.rate).ceil() as u64
            }
            Amount::For(_) => return None,
        };
        usize::try_from(attempts.min(10_000_000)).ok()
    }

    /// One line saying what is run.
    pub fn describe(&self) -> String {
        let amount = match self.amount {
            Amount::Attempts(attempts) => format!("{attempts} attempts"),
            Amount::For(duration) => format!("for {}", humantime::format_duration(duration)),
        };
        let rate = if self.rate > 0.0 {
            format!("{} per second", self.rate)
        } else {
            "as fast as possible".to_owned()
        };
        let dispatch = if self.buffer_size == 0 {
            "synchronous".to_owned()
        } else {
            format!(
                "buffer {}, {} workers",
                self.buffer_size,
                self.workers.max(1)
            )
        };
        let hooks = if self.hooks.is_empty() {
            "no hook".to_owned()
        } else {
            self.hooks
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(" → ")
        };
        format!(
            "{amount} {rate}, {dispatch}, {hooks}, {} tenants, seed {}",
            self.tenants, self.seed
        )
    }

    /// The plan as a JSON object (durations in seconds).
    pub fn to_json(&self) -> Value {
        let breaker = &self.supervise.breaker;
        json!({
            "attempts": match self.amount { Amount::Attempts(n) => Some(n), Amount::For(_) => None },
            "duration_seconds": match self.amount { Amount::For(d) => Some(d.as_secs_f64()), Amount::Attempts(_) => None },
            "rate": self.rate,
            "buffer_size": self.buffer_size,
            "workers": self.workers.max(1),
            "hooks": self.hooks.iter().map(ToString::to_string).collect::<Vec<_>>(),
            "tenants": self.tenants,
            "timeout_seconds": self.supervise.timeout.as_secs_f64(),
            "chain_timeout_seconds": self.supervise.chain_timeout.as_secs_f64(),
            "fail_open": self.supervise.fail_open,
            "breaker_failures": breaker.failures,
            "breaker_backoff_seconds": breaker.backoff.as_secs_f64(),
            "breaker_max_backoff_seconds": breaker.max_backoff.as_secs_f64(),
            "seed": self.seed,
        })
    }

    /// The dispatcher settings of the run: the plan's buffer and workers, no unit, no
    /// allowlists, the `null` executor, and a zero retry window, so that a held or unavailable
    /// attempt fails at its first offer.
    pub fn dispatch_settings(&self) -> Settings {
        let mut rng = fastrand::Rng::with_seed(self.seed);
        Settings {
            buffer_size: self.buffer_size,
            workers: self.workers.max(1),
            // The harness ticks itself (`Ticking::Manual`).
            loop_interval: Duration::from_secs(1),
            retry_window: Duration::ZERO,
            drain_timeout: self.supervise.chain_timeout + Duration::from_secs(1),
            task_service_account: "dexaflow-task".to_owned(),
            defaults: ResourceDefaults::default(),
            unit: None,
            allowlist: Allowlist::default(),
            source_mode: SourceMode::default(),
            warm_pools: true,
            token: TokenSettings {
                secret: (0..32).map(|_| rng.u8(..)).collect(),
                ttl: Duration::from_secs(600),
            },
            executor: ExecutorSettings::Null,
        }
    }

    /// The [`TimerThread`] the plan's `sleep` and `jitter` hooks wait on, started now; `None`
    /// when it has no such hook or waits on [`HookTimer::Tokio`].
    ///
    /// # Panics
    /// When the operating system cannot start the thread.
    pub fn hook_timer_thread(&self) -> Option<TimerThread> {
        let waits = self
            .hooks
            .iter()
            .any(|spec| matches!(spec, HookSpec::Sleep(_) | HookSpec::Jitter { .. }));
        (waits && self.hook_timer == HookTimer::Thread).then(TimerThread::start)
    }

    /// The hooks of the plan, in chain order: the synthetic ones each seeded from the plan's
    /// seed, with `sleep` and `jitter` waiting on `timer` (or on tokio's timer without one), and
    /// the webhooks with the plan's files.
    pub fn synthetic_hooks(&self, timer: Option<&TimerThread>) -> Vec<Arc<dyn Hook>> {
        self.hooks
            .iter()
            .enumerate()
            .map(|(position, spec)| {
                if let HookSpec::Webhook(url) = spec {
                    return Arc::new(Webhook::from_spec(&self.webhook_spec(position, url)))
                        as Arc<dyn Hook>;
                }
                let hook = Synthetic::new(spec.clone(), position, self.seed);
                let hook = match timer {
                    Some(timer) => hook.waiting_on(timer.clone()),
                    None => hook,
                };
                Arc::new(hook) as Arc<dyn Hook>
            })
            .collect()
    }

    /// The pipeline a run of this plan drives: its synthetic hooks (waiting on `timer`) under
    /// supervision (one breaker actor each), the `null` executor and `store`. The benches use
    /// it as it is.
    ///
    /// # Panics
    /// Outside a running actix system (the breakers are actors).
    pub fn pipeline(
        &self,
        store: TaskStore,
        observer: Arc<dyn Observer>,
        events: Option<mpsc::UnboundedSender<Settled>>,
        timer: Option<&TimerThread>,
    ) -> Pipeline {
        let settings = Arc::new(self.dispatch_settings());
        let chain = self
            .synthetic_hooks(timer)
            .into_iter()
            .fold(Chain::new(settings.change_rules()), Chain::with_hook);
        let chain = (!chain.is_empty())
            .then(|| SupervisedChain::start(chain, &self.supervise, Arc::clone(&observer)));
        Pipeline::new(Parts {
            minter: Arc::new(Hs256Minter::new(settings.token.clone())),
            settings,
            store,
            chain,
            executor: Arc::new(Null),
            observer,
            events,
        })
    }
}

/// A [`Plan`] and how to run it.
#[derive(Clone, Default)]
pub struct Options {
    /// What to run.
    pub plan: Plan,
    /// Whether to draw a progress bar on stderr (when stderr is a terminal).
    pub show_progress: bool,
    /// Told of every hook call, breaker change and buffer event besides the harness's own
    /// counts: the metrics exporter, say.
    pub observer: Option<Arc<dyn Observer>>,
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("plan", &self.plan)
            .field("show_progress", &self.show_progress)
            .field("observer", &self.observer.is_some())
            .finish()
    }
}

/// Runs `options` in a new actix system on a thread of its own and returns the report as soon
/// as it is ready.
///
/// The thread then tears the system down, which frees the task store: seconds for a million
/// task instances. The caller does not wait for that, so a process that exits after printing
/// the report does not either; a caller that runs again at once shares the CPU with it.
///
/// # Errors
/// A [`LoadTestError`] when the plan is invalid, the thread could not start or stopped without
/// a report, or the dispatcher stopped. A run that lost attempts still returns its report: check
/// [`Report::check_conservation`].
pub fn run_blocking(options: Options) -> Result<Report, LoadTestError> {
    options.plan.validate()?;
    let (report_tx, report_rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("loadtest".to_owned())
        .spawn(move || {
            let system = actix::System::new();
            let report = system.block_on(run(options));
            // The caller may have gone; the system is torn down either way.
            let _ = report_tx.send(report);
            drop(system);
        })
        .map_err(LoadTestError::Thread)?;
    report_rx.recv().map_err(|_| LoadTestError::Aborted)?
}

/// Runs `options` on the current actix system: the real dispatcher (ticked by the harness),
/// pipeline, supervised chain with its breaker actors, task store and the `null` executor.
///
/// The retry window is zero, so that a held or unavailable attempt fails at its first offer
/// instead of being offered again for 15 minutes; the report counts those as `held` and
/// `unavailable`.
///
/// # Errors
/// As [`run_blocking`].
///
/// # Panics
/// Outside a running actix system.
pub async fn run(options: Options) -> Result<Report, LoadTestError> {
    let plan = options.plan;
    plan.validate()?;
    let counter = Arc::new(Counter::new());
    let observer: Arc<dyn Observer> = match options.observer {
        Some(extra) => Arc::new(Fanout(vec![counter.clone(), extra])),
        None => counter.clone(),
    };
    // Sized for the whole run, so that the store never stops the run to grow its index.
    let store = match plan.expected_attempts() {
        Some(attempts) => TaskStore::with_capacity(attempts),
        None => TaskStore::new(),
    };
    let (events_tx, mut events) = mpsc::unbounded_channel();
    let timer = plan.hook_timer_thread();
    let pipeline =
        Arc::new(plan.pipeline(store.clone(), observer, Some(events_tx), timer.as_ref()));
    let settings = Arc::new(plan.dispatch_settings());
    let dispatcher = Dispatcher::new(pipeline, settings, Ticking::Manual).start();

    let cpu_before = dispatch_cpu_time(timer.as_ref());
    let mut driver = Driver::new(&plan, dispatcher.clone(), options.show_progress);
    driver.drive(&mut events).await?;
    let drain = dispatcher
        .send(Drain)
        .await
        .map_err(|_| LoadTestError::DispatcherStopped)?;
    // Attempts handed back by the drain settle as deferred; they are counted from the store.
    while let Ok(settled) = events.try_recv() {
        driver.record(settled, Instant::now());
    }
    let cpu = cpu_before
        .zip(dispatch_cpu_time(timer.as_ref()))
        .map(|(before, after)| after.saturating_sub(before));
    driver.finish_progress();
    tracing::debug!(
        handed_back = drain.handed_back,
        "loadtest dispatcher drained"
    );
    Ok(driver.report(plan, &store, &counter, cpu))
}

/// The CPU time of the process but for the hooks' `timer` thread, which stands for the hooks'
/// own machines (see [`super::timer`]).
fn dispatch_cpu_time(timer: Option<&TimerThread>) -> Option<Duration> {
    let process = process_cpu_time()?;
    match timer {
        Some(timer) => Some(process.saturating_sub(timer.cpu_time()?)),
        None => Some(process),
    }
}

/// The attempt with index `index` of a load test: tenant `tenant`, DAG `loadtest`, run `run`,
/// task `a<index>` (zero-padded to nine digits, so that the store's key order is the offer
/// order), a `BashOperator` on a fixed image, and no resources or execution fields of its own.
pub fn attempt(index: u64, tenant: &str) -> Task {
    Task {
        key: TaskKey {
            tenant: tenant.to_owned(),
            dag_id: "loadtest".to_owned(),
            run_id: "run".to_owned(),
            task_id: format!("a{index:09}"),
        },
        operator: "BashOperator".to_owned(),
        image: IMAGE.to_owned(),
        command: vec!["true".to_owned()],
        env: BTreeMap::new(),
        source: None,
        staging: false,
        pool_slots: 0,
        resources: Resources::default(),
        execution: TaskExecution::default(),
    }
}

/// The image of every load-test attempt.
const IMAGE: &str = "ghcr.io/dexaflow/loadtest:1";
/// The prefix of a refusal's failure reason (the pipeline's `dispatch refused: `).
const REFUSED: &str = "dispatch refused: ";
/// The failure reason of a hold whose retry window is spent.
const HELD: &str = "dispatch_failed: admission hold: ";
/// The failure reason of an unavailable hook whose retry window is spent.
const UNAVAILABLE: &str = "dispatch_failed: admission hook unavailable: ";
/// The fewest attempts the harness lets wait in the store at once.
const MIN_WINDOW: u64 = 256;
/// Marks an attempt with no final disposition yet.
const UNSETTLED: u64 = u64::MAX;

/// What the harness knows of one attempt.
#[derive(Debug, Clone, Copy)]
struct Attempt {
    /// Microseconds from the start of the run to the intended start.
    intended: u64,
    /// Microseconds from the start of the run to the final disposition, or [`UNSETTLED`].
    settled: u64,
    /// The final disposition (executed, refused or failed).
    disposition: Option<Disposition>,
}

/// Offers attempts as they come due, ticks the dispatcher while attempts wait in the store,
/// and records every [`Settled`] event.
struct Driver {
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
    attempts: Vec<Attempt>,
    // Attempts settled once.
    settled: u64,
    settled_twice: u64,
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
    fn new(plan: &Plan, dispatcher: Addr<Dispatcher>, show_progress: bool) -> Driver {
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
            attempts: Vec::new(),
            settled: 0,
            settled_twice: 0,
            pending: 0,
            taken: 0,
            returned: 0,
            ticking: false,
            force_tick: false,
            progress,
        }
    }

    fn offered(&self) -> u64 {
        self.attempts.len() as u64
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
            .saturating_sub(self.offered().saturating_sub(self.settled))
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
            self.attempts.push(Attempt {
                intended,
                settled: UNSETTLED,
                disposition: None,
            });
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
    fn record(&mut self, settled: Settled, at: Instant) {
        let Some(index) = attempt_index(&settled.key.task_id) else {
            return;
        };
        let settled_at = self.micros_since_start(at);
        match settled.disposition {
            Disposition::Executed | Disposition::Refused | Disposition::Failed => {
                self.returned += 1;
                if let Some(attempt) = self.attempts.get_mut(index) {
                    if attempt.disposition.is_some() {
                        self.settled_twice += 1;
                    } else {
                        attempt.disposition = Some(settled.disposition);
                        attempt.settled = settled_at;
                        self.settled += 1;
                    }
                }
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
    async fn drive(
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
                bar.set_position(self.settled);
            }
            let now = Instant::now();
            if self.is_offering_done(now) && self.settled == self.offered() && !self.ticking {
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

    fn finish_progress(&self) {
        if let Some(bar) = &self.progress {
            bar.set_position(self.settled);
            bar.finish_and_clear();
        }
    }

    /// Accounts for every offered attempt against the store and builds the report.
    fn report(
        &self,
        plan: Plan,
        store: &TaskStore,
        counter: &Counter,
        cpu: Option<Duration>,
    ) -> Report {
        let mut outcomes: Vec<(AttemptOutcome, Latencies)> = AttemptOutcome::ALL
            .iter()
            .map(|outcome| (*outcome, Latencies::new()))
            .collect();
        let mut seen = vec![false; self.attempts.len()];
        let (mut lost, mut executed_twice, mut handed_back) = (0, 0, 0);
        store.for_each(|row| {
            let Some(index) = attempt_index(&row.task.key.task_id) else {
                return;
            };
            let Some(attempt) = self.attempts.get(index) else {
                return;
            };
            seen[index] = true;
            match account(row) {
                Account::ExecutedTwice => executed_twice += 1,
                Account::HandedBack if attempt.disposition.is_none() => handed_back += 1,
                Account::Settled(outcome) if agrees(outcome, attempt.disposition) => {
                    let latency = attempt.settled.saturating_sub(attempt.intended);
                    outcomes[outcome.index()]
                        .1
                        .record(Duration::from_micros(latency));
                }
                _ => lost += 1,
            }
        });
        lost += seen.iter().filter(|seen| !**seen).count() as u64;
        let last = self
            .attempts
            .iter()
            .filter(|attempt| attempt.settled != UNSETTLED)
            .map(|attempt| attempt.settled)
            .max()
            .unwrap_or(0);
        let elapsed = Duration::from_micros(last);
        let throughput = Throughput::of(
            elapsed,
            self.attempts
                .iter()
                .filter(|attempt| attempt.settled != UNSETTLED)
                .map(|attempt| Duration::from_micros(attempt.settled)),
            self.attempts
                .iter()
                .map(|attempt| Duration::from_micros(attempt.intended)),
        );
        Report {
            plan,
            offered: self.offered(),
            settled: self.settled,
            lost,
            executed_twice,
            settled_twice: self.settled_twice,
            handed_back,
            elapsed,
            cpu,
            deferred_at_capacity: counter.deferred_at_capacity(),
            outcomes,
            hook_calls: counter.hook_calls(),
            breaker: counter.breaker_transitions(),
            throughput,
        }
    }
}

/// The index of the attempt whose task id is `a<index>`.
fn attempt_index(task_id: &str) -> Option<usize> {
    task_id.strip_prefix('a')?.parse().ok()
}

/// Where a task instance stands at the end of a run.
enum Account {
    /// Final, with this outcome.
    Settled(AttemptOutcome),
    /// Still scheduled and not in flight: handed back, offered again by a later tick.
    HandedBack,
    /// Launched more than once.
    ExecutedTwice,
    /// Anything else.
    Lost,
}

fn account(row: &TaskInstance) -> Account {
    if row.executions > 1 {
        return Account::ExecutedTwice;
    }
    match (row.state, row.executions, row.failure_reason.as_deref()) {
        (State::Queued | State::Running | State::Success, 1, _) => {
            let changed = row
                .execution
                .as_ref()
                .is_some_and(|execution| execution.labels.contains_key(CHANGED_KEY));
            Account::Settled(if changed {
                AttemptOutcome::AdmitWith
            } else {
                AttemptOutcome::Executed
            })
        }
        (State::Failed, 0, Some(reason)) => Account::Settled(if reason.starts_with(REFUSED) {
            AttemptOutcome::Refused
        } else if reason.starts_with(HELD) {
            AttemptOutcome::Held
        } else if reason.starts_with(UNAVAILABLE) {
            AttemptOutcome::Unavailable
        } else {
            AttemptOutcome::Failed
        }),
        (State::Scheduled, 0, _) if !row.in_flight => Account::HandedBack,
        _ => Account::Lost,
    }
}

/// Whether the store's outcome agrees with the final disposition the pipeline reported.
fn agrees(outcome: AttemptOutcome, disposition: Option<Disposition>) -> bool {
    match outcome {
        AttemptOutcome::Executed | AttemptOutcome::AdmitWith => {
            disposition == Some(Disposition::Executed)
        }
        AttemptOutcome::Refused => disposition == Some(Disposition::Refused),
        AttemptOutcome::Held | AttemptOutcome::Unavailable | AttemptOutcome::Failed => {
            disposition == Some(Disposition::Failed)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(state: State, executions: u32, reason: Option<&str>) -> TaskInstance {
        TaskInstance {
            task: Arc::new(attempt(0, "tenant-0")),
            try_number: 1,
            state,
            failure_reason: reason.map(str::to_owned),
            attempt_epoch: 1,
            dispatch_attempts: 0,
            next_dispatch_at: None,
            waiting_since: None,
            in_flight: false,
            placement: None,
            execution: None,
            waited_for: None,
            token_minted: executions > 0,
            executions,
        }
    }

    fn outcome(row: &TaskInstance) -> Option<AttemptOutcome> {
        match account(row) {
            Account::Settled(outcome) => Some(outcome),
            _ => None,
        }
    }

    #[test]
    fn a_queued_row_executed_once_counts_as_executed() {
        assert_eq!(
            outcome(&row(State::Queued, 1, None)),
            Some(AttemptOutcome::Executed)
        );
    }

    #[test]
    fn a_row_executed_twice_is_caught() {
        assert!(matches!(
            account(&row(State::Queued, 2, None)),
            Account::ExecutedTwice
        ));
    }

    #[test]
    fn failure_reasons_tell_refused_held_and_unavailable_apart() {
        let cases = [
            ("dispatch refused: admission: no", AttemptOutcome::Refused),
            (
                "dispatch_failed: admission hold: later",
                AttemptOutcome::Held,
            ),
            (
                "dispatch_failed: admission hook unavailable: error#0: down",
                AttemptOutcome::Unavailable,
            ),
            (
                "dispatch_failed after 6 attempts: boom",
                AttemptOutcome::Failed,
            ),
        ];
        for (reason, expected) in cases {
            assert_eq!(
                outcome(&row(State::Failed, 0, Some(reason))),
                Some(expected)
            );
        }
    }

    #[test]
    fn a_failed_row_without_a_reason_is_lost() {
        assert!(matches!(
            account(&row(State::Failed, 0, None)),
            Account::Lost
        ));
    }

    #[test]
    fn a_scheduled_row_in_flight_at_the_end_is_lost() {
        let mut stranded = row(State::Scheduled, 0, None);
        stranded.in_flight = true;
        assert!(matches!(account(&stranded), Account::Lost));
        assert!(matches!(
            account(&row(State::Scheduled, 0, None)),
            Account::HandedBack
        ));
    }

    #[test]
    fn a_settled_outcome_must_agree_with_the_reported_disposition() {
        assert!(agrees(
            AttemptOutcome::AdmitWith,
            Some(Disposition::Executed)
        ));
        assert!(!agrees(AttemptOutcome::Refused, Some(Disposition::Failed)));
        assert!(!agrees(AttemptOutcome::Executed, None));
    }
}
