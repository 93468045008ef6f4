//! The front door for a program that embeds the dispatch path: settings, hooks, an executor and
//! an observer in, a running dispatcher [`Handle`] out (ADR 0100 §1, §6). The `dispatch`
//! command assembles its dispatcher here too, so there is one way to do it.
//!
//! The change rules a hook's changes must pass always come from the install's settings
//! ([`crate::dispatch::Settings::change_rules`]: its allowlists, default task service account
//! and resource unit); nothing passed through the front door can replace them. The config's own
//! hooks run first, then the hooks given to [`Install::hook`] in the order given, then the
//! executor policy when the config sets one, always last.
//!
//! [`Install::run_blocking`] starts what it needs and blocks; [`Install::start`] is for a
//! program already inside an actix system (`#[actix::main]`, or [`crate::actix::System`]).

use std::future::Future;
use std::path::Path;
use std::sync::{Arc, Mutex};

use actix::{Actor, Addr};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::admission::{Chain, Hook, is_control_or_format};
use crate::config::{Config, ConfigErrors};
use crate::dispatch::executor::{self, Executor};
use crate::dispatch::task::{Task, TaskKey};
use crate::dispatch::token::{Hs256Minter, Minter};
use crate::dispatch::{
    Dispatcher, Drain, DrainReport, JoinThreads, Offer, Parts, Pipeline, Settings, Settled,
    ShuttingDown, TaskInstance, TaskStore, Tick, TickReport, Ticking, Write,
};
use crate::events::{BreakerEvents, BreakerState, BufferEvents, Fanout, HookEvents, Observer};
use crate::hooks::{HookSpec, POLICY_HOOK, PolicySpec};
use crate::supervise::{self, ChainBuilder};
use crate::sync::lock;

/// What could not be installed or started.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    /// The config (a file, YAML text or the defaults) is not valid.
    #[error("the config is not valid")]
    Config(#[source] ConfigErrors),
    /// [`Install::start`] was called outside a running actix system, where the breakers (actors)
    /// cannot start.
    #[error(
        "supervision needs a running actix system: call Install::start inside one, or use Install::run_blocking"
    )]
    NoSystem,
    /// [`Install::run_blocking`] was called on a thread already running an async runtime, which
    /// it would have to block: call [`Install::start`] there instead.
    #[error(
        "Install::run_blocking blocks its thread, so it cannot run inside an async runtime: call Install::start there"
    )]
    InsideRuntime,
    /// A hook given to [`Install::hook`] has an empty name (or only white space): the reasons
    /// and the breaker gauge it keys would name nothing.
    #[error("a hook added with Install::hook has an empty name ({0:?})")]
    EmptyHookName(String),
    /// A hook given to [`Install::hook`] has a name with a control or format character, which
    /// would reach every reason, log line and metric label that names the hook.
    #[error("hook name {0:?} holds a control or format character")]
    HookNameControl(String),
    /// A hook given to [`Install::hook`] is named as the executor policy's hook, whose name the
    /// install keeps for it.
    #[error("hook name {0:?} is reserved for the executor policy's hook")]
    ReservedHookName(String),
    /// A hook given to [`Install::hook`] has the name of a hook before it in the chain (the
    /// config's, or one added before): two breakers would share one gauge and one name in
    /// reasons.
    #[error("hook name {0:?} is taken by another hook of the chain")]
    DuplicateHookName(String),
}

/// Why an offer was not taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OfferError {
    /// The task is already stored for this try or a later one, or its previous try has not
    /// settled yet: the offer changed nothing.
    #[error("task instance {0} was already offered")]
    Duplicate(TaskKey),
    /// A try number is counted from 1.
    #[error("task instance {0}: try_number must be 1 or more, got 0")]
    ZeroTry(TaskKey),
    /// [`Handle::stop`] or [`Handle::drain`] has begun: nothing would dispatch the task, so it
    /// was not stored.
    #[error("task instance {0} was not offered: the dispatcher is draining")]
    ShuttingDown(TaskKey),
}

/// A builder of a dispatcher: the settings, the hooks in order, the executor and the observer.
///
/// ```
/// use std::time::Duration;
/// use dexaflow_admission::Install;
/// use dexaflow_admission::dispatch::task::Task;
///
/// let install = Install::from_yaml("executor: {type: \"null\"}")?
///     .configure(|settings| settings.loop_interval = Duration::from_millis(5));
/// let states = install.run_blocking(|handle| async move {
///     handle.offer(Task::new("acme", "etl", "run-1", "load")).expect("a new task");
///     handle.wait_settled().await;
///     handle.drain().await.instances.iter().map(|row| row.state).collect::<Vec<_>>()
/// })?;
/// assert_eq!(states.len(), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Install {
    dispatch: Settings,
    supervise: supervise::Settings,
    // The config's own hooks and executor policy, built into the chain at start.
    config_hooks: Vec<HookSpec>,
    policy: Option<PolicySpec>,
    hooks: Vec<Arc<dyn Hook>>,
    executor: Option<Arc<dyn Executor>>,
    minter: Option<Arc<dyn Minter>>,
    observer: Option<Arc<dyn Observer>>,
    ticking: Option<Ticking>,
    stream_settled: bool,
    expected_tasks: Option<usize>,
}

impl std::fmt::Debug for Install {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Install")
            .field("dispatch", &self.dispatch)
            .field("supervise", &self.supervise)
            .field("config_hooks", &self.config_hooks.len())
            .field("hooks", &self.hooks.len())
            .finish()
    }
}

impl Install {
    /// An install of `settings`, supervised with [`supervise::Settings::default`] and with no
    /// hook of its own: [`Settings::default`] and its public fields, without a config.
    pub fn new(settings: Settings) -> Install {
        Install {
            dispatch: settings,
            supervise: supervise::Settings::default(),
            config_hooks: Vec::new(),
            policy: None,
            hooks: Vec::new(),
            executor: None,
            minter: None,
            observer: None,
            ticking: None,
            stream_settled: false,
            expected_tasks: None,
        }
    }

    /// An install of `config` as loaded ([`Config::load`], [`Config::from_yaml_str`]): its
    /// settings, its hooks and its executor policy.
    pub fn from_config(config: Config) -> Install {
        Install {
            supervise: config.supervise,
            config_hooks: config.hooks,
            policy: config.policy,
            ..Install::new(config.dispatch)
        }
    }

    /// An install with every setting at its default, to change with [`Install::configure`].
    ///
    /// # Errors
    /// [`InstallError::Config`] only where the system has no random generator for the agent
    /// token secret (then give one in YAML with [`Install::from_yaml`]).
    pub fn defaults() -> Result<Install, InstallError> {
        Install::from_yaml("")
    }

    /// An install of the config in YAML `text`, without environment overrides.
    ///
    /// # Errors
    /// [`InstallError::Config`] naming every bad key.
    pub fn from_yaml(text: &str) -> Result<Install, InstallError> {
        let no_env: [(&str, &str); 0] = [];
        Config::from_yaml_str(text, no_env)
            .map(Install::from_config)
            .map_err(InstallError::Config)
    }

    /// An install of the config file at `path`, with the process's `DEXAFLOW_` overrides.
    ///
    /// # Errors
    /// [`InstallError::Config`] when the file cannot be read or names a bad key.
    pub fn from_file(path: &Path) -> Result<Install, InstallError> {
        Config::load(path, std::env::vars_os())
            .map(Install::from_config)
            .map_err(InstallError::Config)
    }

    /// Changes the dispatch settings (buffer size, workers, allowlists, ...). The change rules
    /// are read from them when the install starts.
    pub fn configure(mut self, change: impl FnOnce(&mut Settings)) -> Install {
        change(&mut self.dispatch);
        self
    }

    /// Changes how hook calls are supervised (timeouts, chain budget, fail-open, breakers).
    pub fn supervise(mut self, change: impl FnOnce(&mut supervise::Settings)) -> Install {
        change(&mut self.supervise);
        self
    }

    /// Adds `hook` after the config's hooks and the hooks added so far, before the executor
    /// policy.
    ///
    /// Its name keys its breaker gauge and appears in reasons, so it must be non-empty, free of
    /// control and format characters, other than `executor-policy` (the policy's), and unique
    /// in the chain: [`Install::start`] and [`Install::run_blocking`] refuse the install
    /// otherwise, with the [`InstallError`] that names the name.
    pub fn hook(mut self, hook: Arc<dyn Hook>) -> Install {
        self.hooks.push(hook);
        self
    }

    /// Runs admitted attempts on `executor` instead of the one the settings name.
    pub fn executor(mut self, executor: Arc<dyn Executor>) -> Install {
        self.executor = Some(executor);
        self
    }

    /// Mints agent tokens with `minter` instead of the settings' HS256 minter.
    pub fn minter(mut self, minter: Arc<dyn Minter>) -> Install {
        self.minter = Some(minter);
        self
    }

    /// Tells `observer` of every hook call, breaker change and buffer change (the
    /// [`crate::metrics::Metrics`] exporter is one).
    pub fn observer(mut self, observer: Arc<dyn Observer>) -> Install {
        self.observer = Some(observer);
        self
    }

    /// Ticks only when [`Handle::tick`] is called (and while [`Handle::wait_settled`] waits),
    /// instead of every `scheduler.loop_interval_ms`.
    pub fn manual_ticks(mut self) -> Install {
        self.ticking = Some(Ticking::Manual);
        self
    }

    /// Keeps every settled attempt for [`Handle::next_settled`]. Without it nothing is kept:
    /// a program that never reads them does not pay for them, nor hold them in memory.
    pub fn stream_settled(mut self) -> Install {
        self.stream_settled = true;
        self
    }

    /// Sizes the task store for `tasks` task instances up front, so that it never stops to
    /// grow its index while attempts are offered: for a run whose size is known.
    pub fn expected_tasks(mut self, tasks: usize) -> Install {
        self.expected_tasks = Some(tasks);
        self
    }

    /// The settings as they stand.
    pub fn settings(&self) -> &Settings {
        &self.dispatch
    }

    /// The chain: the config's hooks, the added ones, the policy last, under the install's
    /// own change rules.
    fn chain(&self) -> Chain {
        let chain = crate::hooks::chain(
            &self.config_hooks,
            self.policy.as_ref(),
            self.dispatch.change_rules(),
        );
        self.hooks.iter().cloned().fold(chain, Chain::with_hook)
    }

    /// Checks the name of every hook given to [`Install::hook`], in order, against the hooks
    /// before it.
    fn check_hook_names(&self) -> Result<(), InstallError> {
        let mut taken: Vec<&str> = self.config_hooks.iter().map(HookSpec::name).collect();
        for hook in &self.hooks {
            let name = hook.name();
            if name.trim().is_empty() {
                return Err(InstallError::EmptyHookName(name.to_owned()));
            }
            if name.chars().any(is_control_or_format) {
                return Err(InstallError::HookNameControl(name.to_owned()));
            }
            if name == POLICY_HOOK {
                return Err(InstallError::ReservedHookName(name.to_owned()));
            }
            if taken.contains(&name) {
                return Err(InstallError::DuplicateHookName(name.to_owned()));
            }
            taken.push(name);
        }
        Ok(())
    }

    /// Starts the breakers, the dispatcher and its workers, and returns the handle that feeds
    /// them.
    ///
    /// # Errors
    /// [`InstallError::NoSystem`] outside a running actix system; the error naming a hook
    /// given to [`Install::hook`] whose name is empty, holds a control character, is reserved
    /// or is taken.
    pub fn start(self) -> Result<Handle, InstallError> {
        self.check_hook_names()?;
        if actix::System::try_current().is_none() {
            return Err(InstallError::NoSystem);
        }
        let chain = self.chain();
        let breakers = Arc::new(Breakers::new(&chain));
        let mut observers: Vec<Arc<dyn Observer>> = vec![breakers.clone()];
        observers.extend(self.observer);
        let observer: Arc<dyn Observer> = Arc::new(Fanout(observers));
        let settings = Arc::new(self.dispatch);
        let chain = ChainBuilder::from_chain(chain, self.supervise)
            .observer(observer.clone())
            .start();
        let (events, settled) = if self.stream_settled {
            let (events, settled) = mpsc::unbounded_channel();
            (Some(events), Some(settled))
        } else {
            (None, None)
        };
        let store = match self.expected_tasks {
            Some(tasks) => TaskStore::with_capacity(tasks),
            None => TaskStore::new(),
        };
        let pipeline = Arc::new(Pipeline::new(Parts {
            store: store.clone(),
            chain,
            minter: self
                .minter
                .unwrap_or_else(|| Arc::new(Hs256Minter::new(settings.token.clone()))),
            executor: self
                .executor
                .unwrap_or_else(|| executor::from_settings(&settings.executor)),
            observer,
            events,
            settings: Arc::clone(&settings),
        }));
        let ticking = self
            .ticking
            .unwrap_or(Ticking::Every(settings.loop_interval));
        let dispatcher = Dispatcher::new(Arc::clone(&pipeline), ticking).start();
        Ok(Handle {
            store,
            pipeline,
            dispatcher,
            settled,
            breakers,
            ticking,
            interval: settings.loop_interval,
            stopping: false,
        })
    }

    /// Starts an actix system on this thread, starts the install in it, runs `body` with the
    /// handle to the end and returns what it returns; the system stops when this returns.
    ///
    /// # Errors
    /// [`InstallError::InsideRuntime`] when called on a thread that runs an async runtime (use
    /// [`Install::start`] there); the errors of [`Install::start`], but
    /// [`InstallError::NoSystem`] never in practice: the system is started first.
    ///
    /// # Panics
    /// When the operating system cannot start a runtime.
    pub fn run_blocking<F, T>(self, body: impl FnOnce(Handle) -> F) -> Result<T, InstallError>
    where
        F: Future<Output = T>,
    {
        if tokio::runtime::Handle::try_current().is_ok() {
            return Err(InstallError::InsideRuntime);
        }
        let system = actix::System::new();
        system.block_on(async move {
            let handle = self.start()?;
            Ok(body(handle).await)
        })
    }
}

/// A running dispatcher: offer attempts, tick, read each settled attempt, wait, drain.
pub struct Handle {
    store: TaskStore,
    pipeline: Arc<Pipeline>,
    dispatcher: Addr<Dispatcher>,
    settled: Option<mpsc::UnboundedReceiver<Settled>>,
    breakers: Arc<Breakers>,
    ticking: Ticking,
    interval: std::time::Duration,
    // Set by `stop` before the dispatcher drains, so that an offer made afterwards is refused
    // instead of stored where no tick will ever take it.
    stopping: bool,
}

impl std::fmt::Debug for Handle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handle")
            .field("pipeline", &self.pipeline)
            .finish()
    }
}

/// One offer of an attempt that ended, as [`Handle::next_settled`] streams it.
pub use crate::dispatch::Settled as Settlement;

/// How [`Handle::drain`] or [`Handle::settle_all`] ended.
#[derive(Debug, Clone)]
pub struct Drained {
    /// Every task instance, in key order.
    pub instances: Vec<TaskInstance>,
    /// What draining the dispatcher did.
    pub drain: DrainReport,
}

impl Handle {
    /// Offers `task` for its first try.
    ///
    /// # Errors
    /// [`OfferError::Duplicate`] when the task is already stored,
    /// [`OfferError::ShuttingDown`] once [`Handle::stop`] has begun.
    pub fn offer(&self, task: Task) -> Result<(), OfferError> {
        self.offer_try(task, 1)
    }

    /// Offers `task` for try `try_number` (a retry carries 2 or more): hooks see it in the
    /// request's `try_number`. A later try of a task whose previous try settled replaces it.
    ///
    /// # Errors
    /// [`OfferError::Duplicate`] when the task is stored for this try or a later one, or its
    /// previous try has not settled,
    /// [`OfferError::ZeroTry`] for try 0,
    /// [`OfferError::ShuttingDown`] once [`Handle::stop`] has begun.
    pub fn offer_try(&self, task: Task, try_number: u32) -> Result<(), OfferError> {
        if try_number == 0 {
            return Err(OfferError::ZeroTry(task.key));
        }
        if self.stopping {
            return Err(OfferError::ShuttingDown(task.key));
        }
        let key = task.key.clone();
        match self.store.schedule_try(task, try_number) {
            Write::Applied => Ok(()),
            Write::Superseded => Err(OfferError::Duplicate(key)),
        }
    }

    /// Offers `tasks` for their first try in one message to the dispatcher, for a caller that
    /// offers many at once; answers how many were new (a task instance already stored is left
    /// alone and not counted, as [`Handle::offer`] would report it).
    ///
    /// # Errors
    /// [`ShuttingDown`] once the dispatcher is draining or gone.
    ///
    /// # Cancel safety
    /// Dropping the future does not take the offer back: the dispatcher has it already.
    pub async fn offer_many(&self, tasks: Vec<Task>) -> Result<usize, ShuttingDown> {
        self.dispatcher
            .send(Offer(tasks))
            .await
            .unwrap_or(Err(ShuttingDown))
    }

    /// Runs one tick: the dispatcher is sent the tick when this is called, and the future
    /// resolves with what it did (buffered: once its attempts are in the buffer). It borrows
    /// nothing, so it can be spawned or kept while the handle is used.
    ///
    /// # Cancel safety
    /// Dropping the future does not stop the tick: the dispatcher has it already.
    pub fn tick(&self) -> impl Future<Output = TickReport> + 'static {
        let tick = self.dispatcher.send(Tick);
        async move {
            tick.await.unwrap_or(TickReport {
                skipped: true,
                ..TickReport::default()
            })
        }
    }

    /// The next attempt that settled, waiting for one; `None` once every settlement has been
    /// read after [`Handle::stop`], or at once when the install did not
    /// [`Install::stream_settled`].
    ///
    /// # Cancel safety
    /// Cancel safe: a settlement not returned stays for the next call.
    pub async fn next_settled(&mut self) -> Option<Settlement> {
        self.settled.as_mut()?.recv().await
    }

    /// Waits for at least one settled attempt and moves up to `limit` of those that have
    /// settled into `batch`; returns how many, 0 only when no more can come (as
    /// [`Handle::next_settled`]'s `None`).
    ///
    /// # Cancel safety
    /// Cancel safe: nothing is taken unless the future returns.
    pub async fn next_settled_batch(&mut self, batch: &mut Vec<Settlement>, limit: usize) -> usize {
        match self.settled.as_mut() {
            Some(settled) => settled.recv_many(batch, limit).await,
            None => 0,
        }
    }

    /// The next attempt that settled, if one has.
    pub fn try_next_settled(&mut self) -> Option<Settlement> {
        self.settled.as_mut()?.try_recv().ok()
    }

    /// Waits until every task instance offered is settled ([`TaskInstance::is_settled`]),
    /// ticking on each check when ticks are manual.
    pub async fn wait_settled(&self) {
        self.settle_all(std::future::pending(), |_| {}).await;
    }

    /// Waits as [`Handle::wait_settled`] does, or until `shutdown` resolves; `progress` is told
    /// after each check how many task instances are not yet settled. Returns whether `shutdown`
    /// cut the wait.
    pub async fn settle_all(
        &self,
        shutdown: impl Future<Output = ()>,
        mut progress: impl FnMut(usize),
    ) -> bool {
        let mut checks = tokio::time::interval_at(Instant::now() + self.interval, self.interval);
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                () = &mut shutdown => return true,
                _ = checks.tick() => {
                    let unsettled = self.store.count_unsettled();
                    progress(unsettled);
                    if unsettled == 0 {
                        return false;
                    }
                    if self.ticking == Ticking::Manual {
                        self.tick().await;
                    }
                }
            }
        }
    }

    /// Each hook's breaker state, in chain order.
    pub fn breakers(&self) -> Vec<(String, BreakerState)> {
        self.breakers.snapshot()
    }

    /// Every task instance, in key order.
    pub fn instances(&self) -> Vec<TaskInstance> {
        self.store.snapshot()
    }

    /// Shows `visit` every task instance, in no particular order, without copying them; each
    /// one's shard of the store is locked while it is shown, so `visit` must not call back into
    /// the handle.
    pub fn for_each_instance(&self, visit: impl FnMut(&TaskInstance)) {
        self.store.for_each(visit);
    }

    /// The task instance `key`, when offered.
    pub fn instance(&self, key: &TaskKey) -> Option<TaskInstance> {
        self.store.get(key)
    }

    /// How many admission requests were built: none for as long as no hook is registered.
    pub fn requests_built(&self) -> u64 {
        self.pipeline.requests_built()
    }

    /// Stops taking ticks, gives attempts in flight the drain timeout, hands buffered ones back
    /// as scheduled, stops the executor, waits until every step it sent is written, and returns
    /// every task instance.
    pub async fn drain(mut self) -> Drained {
        let drain = self.stop().await;
        Drained {
            instances: self.store.snapshot(),
            drain,
        }
    }

    /// Drains as [`Handle::drain`] does but keeps the handle, to read what settled last
    /// ([`Handle::next_settled`] returns each, then `None`) and the task instances in place
    /// ([`Handle::for_each_instance`]). Ticks after it are skipped and offers refused
    /// ([`OfferError::ShuttingDown`]).
    pub async fn stop(&mut self) -> DrainReport {
        self.stopping = true;
        let drain = self.dispatcher.send(Drain).await.unwrap_or_default();
        // Only once no dispatch is in flight can nothing more be launched.
        self.pipeline.shut_down().await;
        // The executor's processes and the followers of their steps ran on the workers' threads.
        let _ = self.dispatcher.send(JoinThreads).await;
        // Nothing more can settle: what did is still read, then the stream ends.
        if let Some(settled) = &mut self.settled {
            settled.close();
        }
        drain
    }
}

/// Each hook's breaker state, kept from the breakers' events.
struct Breakers(Mutex<Vec<(String, BreakerState)>>);

impl Breakers {
    fn new(chain: &Chain) -> Breakers {
        let states = chain
            .hooks()
            .iter()
            .map(|hook| (hook.name().to_owned(), BreakerState::Closed))
            .collect();
        Breakers(Mutex::new(states))
    }

    fn snapshot(&self) -> Vec<(String, BreakerState)> {
        lock(&self.0).clone()
    }
}

impl HookEvents for Breakers {}
impl BufferEvents for Breakers {}

impl BreakerEvents for Breakers {
    fn breaker_changed(&self, position: usize, _: &str, state: BreakerState) {
        let mut states = lock(&self.0);
        if let Some(entry) = states.get_mut(position) {
            entry.1 = state;
        }
    }
}
