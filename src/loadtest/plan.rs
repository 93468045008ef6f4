//! The plan of a run: how many attempts at what rate, the dispatcher's buffer and workers, the
//! synthetic hooks and their supervision; what a flag could have set wrong; and the dispatcher
//! settings, hooks and pipeline the plan stands for.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::LoadTestError;
use super::spec::{HookFlag, Synthetic, WebhookFiles};
use super::timer::{HookTimer, TimerThread};
use crate::admission::Hook;
use crate::config::{
    BREAKER_FAILURE_COUNTS, BUFFER_SIZES, Mismatch, WORKER_COUNTS, WORKER_THREAD_COUNTS,
    chain_holds_a_call, duration_at_least, integer_in, max_backoff_covers_backoff,
};
use crate::dispatch::executor::null::Null;
use crate::dispatch::settings::{
    DEFAULT_BUFFER_SIZE, DEFAULT_WORKERS, ExecutorSettings, TokenSettings, effective_workers,
};
use crate::dispatch::task::Task;
use crate::dispatch::token::Hs256Minter;
use crate::dispatch::{Parts, Pipeline, Settings, Settled, TaskStore};
use crate::events::Observer;
use crate::hooks::{SpecError, Webhook, WebhookSpec};
use crate::install::Install;
use crate::supervise::{self, ChainBuilder};

/// The rates `--rate` takes besides 0: slower than one attempt in 1,000 s is no load, and
/// faster than a million a second is more than one process can offer.
const RATES: std::ops::RangeInclusive<f64> = 0.001..=1_000_000.0;
/// The tenant counts `--tenants` takes: each tenant's name is made once, before the run.
const TENANT_COUNTS: std::ops::RangeInclusive<u64> = 1..=100_000;
/// The seconds of a paced run its store is sized for before it starts.
const PRESIZED_SECONDS: f64 = 10.0;
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
    /// `scheduler.dispatch.worker_threads`: 0 runs the workers on the harness's thread.
    pub worker_threads: usize,
    /// The hooks, in chain order.
    pub hooks: Vec<HookFlag>,
    /// The files of every `webhook:URL` hook.
    pub webhook_files: WebhookFiles,
    /// What `sleep` and `jitter` hooks wait on.
    pub hook_timer: HookTimer,
    /// How many tenants the attempts are spread over, round robin: 1 to 100,000.
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
            buffer_size: DEFAULT_BUFFER_SIZE,
            workers: effective_workers(DEFAULT_WORKERS),
            // Not the config's default: the workers run on the harness's own thread, which a run
            // on tokio's paused clock needs (`loadtest --worker-threads` defaults to the config's).
            worker_threads: 0,
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
        if self.rate != 0.0 && !RATES.contains(&self.rate) {
            return bad(
                "--rate",
                &format!(
                    "must be 0 (as fast as they settle) or from {} to {} attempts per second",
                    RATES.start(),
                    RATES.end()
                ),
            );
        }
        // The flags that stand for config keys, by the config's own rules and words.
        let mismatch = |flag, mismatch: Mismatch| bad(flag, &mismatch.to_string());
        for (flag, count, range) in [
            ("--buffer-size", self.buffer_size, BUFFER_SIZES),
            ("--workers", self.workers, WORKER_COUNTS),
            (
                "--worker-threads",
                self.worker_threads,
                WORKER_THREAD_COUNTS,
            ),
            ("--tenants", self.tenants, TENANT_COUNTS),
        ] {
            let count = u64::try_from(count).unwrap_or(u64::MAX);
            if let Err(error) = integer_in(count, &count.to_string(), &range) {
                return mismatch(flag, error);
            }
        }
        let failures = u64::from(self.supervise.breaker.failures);
        if let Err(error) = integer_in(failures, &failures.to_string(), &BREAKER_FAILURE_COUNTS) {
            return mismatch("--breaker-failures", error);
        }
        let defaults = supervise::Settings::default();
        let breaker = &self.supervise.breaker;
        for (flag, duration, example) in [
            ("--timeout", self.supervise.timeout, defaults.timeout),
            (
                "--chain-timeout",
                self.supervise.chain_timeout,
                defaults.chain_timeout,
            ),
            (
                "--breaker-backoff",
                breaker.backoff,
                defaults.breaker.backoff,
            ),
            (
                "--breaker-max-backoff",
                breaker.max_backoff,
                defaults.breaker.max_backoff,
            ),
        ] {
            let shown = format!("{:?}", humantime::format_duration(duration).to_string());
            if let Err(error) =
                duration_at_least(duration, Duration::from_nanos(1), example, &shown)
            {
                return mismatch(flag, error);
            }
        }
        if let Err(error) = chain_holds_a_call(
            self.supervise.timeout,
            self.supervise.chain_timeout,
            "--timeout",
        ) {
            return mismatch("--chain-timeout", error);
        }
        if let Err(error) =
            max_backoff_covers_backoff(breaker.backoff, breaker.max_backoff, "--breaker-backoff")
        {
            return mismatch("--breaker-max-backoff", error);
        }
        let has_webhook = self
            .hooks
            .iter()
            .any(|spec| matches!(spec, HookFlag::Webhook(_)));
        if !has_webhook {
            // A file for no webhook is a flag given for nothing: most likely a --hook forgotten.
            for (flag, given) in [
                ("--webhook-ca-bundle", &self.webhook_files.ca_bundle),
                (
                    "--webhook-bearer-token-file",
                    &self.webhook_files.bearer_token_file,
                ),
            ] {
                if given.is_some() {
                    return bad(flag, "is for webhook:URL hooks, and no --hook is one");
                }
            }
        }
        for (position, spec) in self.hooks.iter().enumerate() {
            let HookFlag::Webhook(url) = spec else {
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

    /// How many task instances to size the store for before the run starts, so that it seldom
    /// stops to grow: every attempt of a run that offers a known number as fast as it can, and
    /// of a paced run what it offers in its first [`PRESIZED_SECONDS`] (at most ten million: a
    /// hint, not a limit). A store sized for a whole long paced run would have its early rows
    /// land all over memory not yet touched (rows are spread over the table by their hash), so
    /// that the kernel zeroes a fresh page for nearly each of them, gigabytes in all, and the
    /// run offers seconds late; a store that grows touches only about what it holds.
    pub(super) fn store_rows(&self) -> Option<usize> {
        let paced = self.rate * PRESIZED_SECONDS;
        let rows = match self.amount {
            Amount::Attempts(attempts) if self.rate == 0.0 => attempts,
            Amount::Attempts(attempts) => attempts.min(paced.ceil() as u64),
            Amount::For(_) if self.rate == 0.0 => return None,
            Amount::For(duration) => (duration.as_secs_f64() * self.rate).min(paced).ceil() as u64,
        };
        usize::try_from(rows.min(10_000_000)).ok()
    }

    /// One line saying what is run.
    pub(crate) fn describe(&self) -> String {
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
                "buffer {}, {} workers on {}",
                self.buffer_size,
                self.workers.max(1),
                match self.worker_threads {
                    0 => "the dispatcher's thread".to_owned(),
                    1 => "1 thread".to_owned(),
                    threads => format!("{threads} threads"),
                }
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
        let tenants = match self.tenants {
            1 => "1 tenant".to_owned(),
            tenants => format!("{tenants} tenants"),
        };
        format!(
            "{amount} {rate}, {dispatch}, {hooks}, {tenants}, seed {}",
            self.seed
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
            "worker_threads": self.worker_threads,
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

    /// The dispatcher settings of the run: the plan's buffer and workers, the `null` executor,
    /// a zero retry window, so that a held or unavailable attempt fails at its first offer, and
    /// a token secret drawn from the seed; every other field as [`Settings::default`] has it.
    pub(crate) fn dispatch_settings(&self) -> Settings {
        let mut rng = fastrand::Rng::with_seed(self.seed);
        let defaults = Settings::default();
        Settings {
            buffer_size: self.buffer_size,
            workers: self.workers.max(1),
            worker_threads: self.worker_threads,
            // The harness ticks itself (`Ticking::Manual`).
            loop_interval: Duration::from_secs(1),
            retry_window: Duration::ZERO,
            drain_timeout: self.supervise.chain_timeout + Duration::from_secs(1),
            task_service_account: "dexaflow-task".to_owned(),
            warm_pools: true,
            token: TokenSettings {
                secret: (0..32).map(|_| rng.u8(..)).collect(),
                ..defaults.token
            },
            executor: ExecutorSettings::Null,
            ..defaults
        }
    }

    /// The [`TimerThread`] the plan's `sleep` and `jitter` hooks wait on, started now; `None`
    /// when it has no such hook or waits on [`HookTimer::Tokio`].
    ///
    /// # Panics
    /// When the operating system cannot start the thread.
    pub(crate) fn hook_timer_thread(&self) -> Option<TimerThread> {
        let waits = self
            .hooks
            .iter()
            .any(|spec| matches!(spec, HookFlag::Sleep(_) | HookFlag::Jitter { .. }));
        (waits && self.hook_timer == HookTimer::Thread).then(TimerThread::start)
    }

    /// The hooks of the plan, in chain order: the synthetic ones each seeded from the plan's
    /// seed, with `sleep` and `jitter` waiting on `timer` (or on tokio's timer without one), and
    /// the webhooks with the plan's files.
    pub(crate) fn synthetic_hooks(&self, timer: Option<&TimerThread>) -> Vec<Arc<dyn Hook>> {
        self.hooks
            .iter()
            .enumerate()
            .map(|(position, spec)| {
                if let HookFlag::Webhook(url) = spec {
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

    /// The install a run of this plan starts: the plan's dispatch settings and supervision, its
    /// hooks in order (`sleep` and `jitter` waiting on `timer`), ticks by the harness, and every
    /// settled attempt streamed to it.
    pub fn install(&self, timer: Option<&TimerThread>) -> Install {
        self.synthetic_hooks(timer)
            .into_iter()
            .fold(Install::new(self.dispatch_settings()), Install::hook)
            .supervise(|supervise| *supervise = self.supervise.clone())
            .manual_ticks()
            .stream_settled()
    }

    /// A bare pipeline of this plan, with no dispatcher, for `benches/dispatch.rs`, which
    /// measures one attempt at a time through [`Pipeline::dispatch`] and so cannot go through
    /// [`Install`] (whose dispatcher owns the pipeline): its synthetic
    /// hooks (waiting on `timer`) under supervision (one breaker actor each), the `null`
    /// executor and `store`. A run assembles through [`Plan::install`]; this is the one other
    /// assembly, and it reports no breaker states.
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
        let chain = ChainBuilder::new(settings.change_rules(), self.supervise.clone())
            .hooks(self.synthetic_hooks(timer))
            .observer(observer.clone())
            .start();
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

/// The attempt with index `index` of a load test: tenant `tenant`, DAG `loadtest`, run `run`,
/// task `a<index>` (zero-padded to nine digits, so that the store's key order is the offer
/// order), a `BashOperator` on a fixed image, and no resources or execution fields of its own.
pub fn attempt(index: u64, tenant: &str) -> Task {
    Task::new(tenant, "loadtest", "run", format!("a{index:09}"))
        .with_operator("BashOperator")
        .with_image(IMAGE)
        .with_command(["true"])
}

/// The image of every load-test attempt.
const IMAGE: &str = "ghcr.io/dexaflow/loadtest:1";

/// The index of the attempt whose task id is `a<index>`, as [`attempt`] names it.
pub(super) fn attempt_index(task_id: &str) -> Option<usize> {
    task_id.strip_prefix('a')?.parse().ok()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{Amount, Plan};

    fn plan(amount: Amount, rate: f64) -> Plan {
        Plan {
            amount,
            rate,
            ..Plan::default()
        }
    }

    #[test]
    fn a_run_of_known_length_at_full_speed_sizes_its_store_for_every_attempt() {
        assert_eq!(
            plan(Amount::Attempts(2_000_000), 0.0).store_rows(),
            Some(2_000_000)
        );
    }

    #[test]
    fn a_long_paced_run_sizes_its_store_for_its_first_ten_seconds_only() {
        let hour = plan(Amount::For(Duration::from_secs(3600)), 1000.0);
        let million = plan(Amount::Attempts(1_000_000), 1000.0);

        assert_eq!(hour.store_rows(), Some(10_000));
        assert_eq!(million.store_rows(), Some(10_000));
    }

    #[test]
    fn a_short_paced_run_sizes_its_store_for_all_it_offers() {
        let attempts = plan(Amount::Attempts(60_000), 20_000.0);
        let seconds = plan(Amount::For(Duration::from_secs(2)), 20_000.0);

        assert_eq!(attempts.store_rows(), Some(60_000));
        assert_eq!(seconds.store_rows(), Some(40_000));
    }

    #[test]
    fn a_run_for_a_time_at_full_speed_does_not_size_its_store() {
        assert_eq!(
            plan(Amount::For(Duration::from_secs(60)), 0.0).store_rows(),
            None
        );
    }
}
