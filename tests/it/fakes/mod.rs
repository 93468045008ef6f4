//! Fakes for dispatch tests: an executor and a token minter that record what they were asked,
//! and settings and tasks to build a dispatcher from.
//!
//! A module of the `it` test binary, and compiled again by `#[path]` into other binaries (the
//! tests of their own in `tests/`, a bench), each of which uses only part of it, so items unused
//! there would warn; the allow below is for that and nothing else.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix::{Actor, Addr};
use dexaflow_admission::admission::{Changes, Decision, Hook, HookError};
use dexaflow_admission::dispatch::executor::{
    Admitted, ExecuteFuture, Executor, ExecutorError, Launched,
};
use dexaflow_admission::dispatch::settings::{
    Allowlist, Enforce, ExecutorSettings, PolicySettings, ResourceDefaults, ResourceUnit,
    SourceMode, TokenSettings,
};
use dexaflow_admission::dispatch::task::{Task, TaskExecution, TaskKey};
use dexaflow_admission::dispatch::token::{AgentIdentity, Minter, TokenError};
use dexaflow_admission::dispatch::{
    Dispatcher, Offer, Parts, Pipeline, Settings, Settled, TaskInstance, TaskStore, Tick,
    TickReport, Ticking,
};
use dexaflow_admission::events::Ignore;
use dexaflow_admission::supervise::{self, BreakerSettings, ChainBuilder, Gate, SupervisedChain};
use tokio::sync::mpsc;

/// The chaos mix's answer for `roll` (0 to 6): admit, admit with a label changed, hold, refuse,
/// fail, never answer or panic, so that a hook's every behaviour runs in one test.
pub async fn chaos(roll: usize) -> Result<Decision, HookError> {
    match roll {
        0 => Ok(Decision::Admit),
        1 => {
            let mut changes = Changes::default();
            changes
                .labels
                .insert("chaos".to_owned(), "changed".to_owned());
            Ok(Decision::AdmitWith(Box::new(changes)))
        }
        2 => Ok(Decision::Hold("try later".to_owned())),
        3 => Ok(Decision::Refuse("no".to_owned())),
        4 => Err(HookError::Failed("backend down".to_owned())),
        5 => std::future::pending().await,
        _ => panic!("chaos"),
    }
}

/// An executor that launches nothing and records every attempt it was given; built
/// [`failing`](RecordingExecutor::failing), it refuses every launch.
#[derive(Debug, Default)]
pub struct RecordingExecutor {
    calls: Mutex<Vec<Admitted>>,
    failure: Option<fn(&Admitted) -> ExecutorError>,
}

impl RecordingExecutor {
    /// An executor that records every attempt and fails to launch it with `failure`'s error.
    pub fn failing(failure: fn(&Admitted) -> ExecutorError) -> RecordingExecutor {
        RecordingExecutor {
            failure: Some(failure),
            ..RecordingExecutor::default()
        }
    }

    /// Every attempt the executor was asked to launch.
    pub fn calls(&self) -> Vec<Admitted> {
        self.calls
            .lock()
            .expect("no test panics holding the record")
            .clone()
    }
}

impl Executor for RecordingExecutor {
    fn name(&self) -> &'static str {
        "recording"
    }

    fn execute<'a>(&'a self, attempt: &'a Admitted) -> ExecuteFuture<'a> {
        self.calls
            .lock()
            .expect("no test panics holding the record")
            .push(attempt.clone());
        let launched = match self.failure {
            Some(failure) => Err(failure(attempt)),
            None => Ok(Launched::unfollowed()),
        };
        Box::pin(async move { launched })
    }
}

/// A minter that hands out `token-<n>` and records every identity it was asked to mint for;
/// built [`failing`](RecordingMinter::failing), it mints nothing.
#[derive(Debug, Default)]
pub struct RecordingMinter {
    minted: Mutex<Vec<AgentIdentity>>,
    fails: bool,
}

impl RecordingMinter {
    /// A minter that records every identity and fails each mint as an empty secret would.
    pub fn failing() -> RecordingMinter {
        RecordingMinter {
            fails: true,
            ..RecordingMinter::default()
        }
    }

    /// Every identity a token was asked for (minted, unless the minter fails).
    pub fn minted(&self) -> Vec<AgentIdentity> {
        self.minted
            .lock()
            .expect("no test panics holding the record")
            .clone()
    }
}

impl Minter for RecordingMinter {
    fn mint(&self, identity: &AgentIdentity) -> Result<String, TokenError> {
        let mut minted = self
            .minted
            .lock()
            .expect("no test panics holding the record");
        minted.push(identity.clone());
        if self.fails {
            return Err(TokenError::EmptySecret);
        }
        Ok(format!("token-{}", minted.len()))
    }
}

/// Settings for synchronous dispatch with no unit, no allowlist and warm pools on, so that an
/// attempt nothing changed goes warm.
pub fn settings() -> Settings {
    Settings {
        buffer_size: 0,
        workers: 1,
        worker_threads: 0,
        loop_interval: Duration::from_secs(1),
        retry_window: Duration::from_secs(15 * 60),
        drain_timeout: Duration::from_secs(15),
        task_service_account: "dexaflow-task".to_owned(),
        defaults: ResourceDefaults::default(),
        unit: None,
        allowlist: Allowlist::default(),
        policy: PolicySettings::default(),
        source_mode: SourceMode::default(),
        warm_pools: true,
        token: TokenSettings {
            secret: b"test-secret".to_vec(),
            ttl: Duration::from_secs(600),
        },
        executor: ExecutorSettings::Null,
    }
}

/// A unit of 1 CPU and 2Gi, refusing misfits.
pub fn unit() -> ResourceUnit {
    ResourceUnit {
        cpu: "1".to_owned(),
        memory: "2Gi".to_owned(),
        cpu_milli: 1_000,
        memory_milli: 2 * 1024 * 1024 * 1024 * 1000,
        enforce: Enforce::Refuse,
        max_size: 64,
    }
}

/// Supervision with a breaker that never opens within a test (unless a test lowers it) and no
/// jitter.
pub fn supervision() -> supervise::Settings {
    supervise::Settings {
        timeout: Duration::from_millis(500),
        chain_timeout: Duration::from_secs(2),
        fail_open: false,
        breaker: BreakerSettings {
            failures: 1000,
            backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(60),
            jitter: 0.0,
        },
        hooks: Default::default(),
    }
}

/// The key of task `task_id` of tenant `acme`, DAG `etl`, run `run_id`.
pub fn key(run_id: &str, task_id: &str) -> TaskKey {
    TaskKey {
        tenant: "acme".to_owned(),
        dag_id: "etl".to_owned(),
        run_id: run_id.to_owned(),
        task_id: task_id.to_owned(),
    }
}

/// A plain task of tenant `acme`, DAG `etl`, run `r1`.
pub fn task(task_id: &str) -> Task {
    Task {
        key: key("r1", task_id),
        operator: "BashOperator".to_owned(),
        image: "ghcr.io/acme/etl:1.2".to_owned(),
        command: vec!["true".to_owned()],
        env: BTreeMap::new(),
        source: None,
        staging: false,
        pool_slots: 0,
        resources: Default::default(),
        execution: TaskExecution::default(),
        execution_timeout_seconds: None,
    }
}

/// Task `load` of the manual run `manual__1`, one slot large: the attempt (task instance
/// `acme.etl.manual__1.load`) the tests of single steps (refusals, placement, executors) are
/// written for, byte counts of its pod's own annotations included.
pub fn manual_task() -> Task {
    Task {
        key: key("manual__1", "load"),
        pool_slots: 1,
        ..task("load")
    }
}

/// Everything a dispatch test looks at afterwards.
pub struct Harness {
    /// The dispatcher, ticking only when sent `Tick`.
    pub dispatcher: Addr<Dispatcher>,
    /// The pipeline it runs.
    pub pipeline: Arc<Pipeline>,
    /// The task store.
    pub store: TaskStore,
    /// What the executor was asked to launch.
    pub executor: Arc<RecordingExecutor>,
    /// What tokens were minted.
    pub minter: Arc<RecordingMinter>,
    /// The supervised chain (with its breaker gates), when hooks were given.
    pub chain: Option<SupervisedChain>,
    /// One event per offer that reached a disposition.
    pub events: mpsc::UnboundedReceiver<Settled>,
}

impl Harness {
    /// Waits for the next settled offer.
    pub async fn next_settled(&mut self) -> Settled {
        self.events
            .recv()
            .await
            .expect("the pipeline outlives the test")
    }

    /// Offers `tasks` to the dispatcher, which takes them.
    pub async fn offer(&self, tasks: Vec<Task>) {
        self.dispatcher
            .send(Offer(tasks))
            .await
            .expect("dispatcher alive")
            .expect("takes offers");
    }

    /// Offers `tasks` to the dispatcher and runs one tick.
    pub async fn offer_and_tick(&self, tasks: Vec<Task>) {
        self.offer(tasks).await;
        self.run_tick().await;
    }

    /// Runs one tick and returns its report, without waiting for anything to settle (a tick
    /// may have nothing ready).
    pub async fn run_tick(&self) -> TickReport {
        self.dispatcher.send(Tick).await.expect("dispatcher alive")
    }

    /// Offers `task`, ticks once, waits for the offer to settle and returns its task instance.
    pub async fn dispatch(&mut self, task: Task) -> TaskInstance {
        let key = task.key.clone();
        let offered = self.dispatcher.send(Offer(vec![task])).await;
        offered.expect("alive").expect("takes offers");
        self.tick(&key).await
    }

    /// Ticks once, waits for an offer to settle and returns the task instance of `key`.
    pub async fn tick(&mut self, key: &TaskKey) -> TaskInstance {
        self.dispatcher.send(Tick).await.expect("alive");
        self.next_settled().await;
        self.store.get(key).expect("the task is stored")
    }

    /// The breaker gate of the hook at `position`.
    pub fn gate(&self, position: usize) -> &Gate {
        self.chain.as_ref().expect("hooks were given").hooks()[position].gate()
    }
}

/// Starts a manually ticked dispatcher with `hooks` under `settings` and `supervision`.
///
/// Must run inside an actix system (`#[actix::test]`).
pub fn start(
    settings: Settings,
    supervision: supervise::Settings,
    hooks: Vec<Arc<dyn Hook>>,
) -> Harness {
    start_with(
        settings,
        supervision,
        hooks,
        RecordingExecutor::default(),
        RecordingMinter::default(),
    )
}

/// Starts a manually ticked dispatcher as [`start`] does, launching with `executor` and minting
/// with `minter`.
///
/// Must run inside an actix system (`#[actix::test]`).
pub fn start_with(
    settings: Settings,
    supervision: supervise::Settings,
    hooks: Vec<Arc<dyn Hook>>,
    executor: RecordingExecutor,
    minter: RecordingMinter,
) -> Harness {
    // The rules the binary builds from the same settings, the resource unit included.
    let chain = ChainBuilder::new(settings.change_rules(), supervision)
        .hooks(hooks)
        .start();
    let store = TaskStore::new();
    let executor = Arc::new(executor);
    let minter = Arc::new(minter);
    let (events_tx, events) = mpsc::unbounded_channel();
    let pipeline = Arc::new(Pipeline::new(Parts {
        settings: Arc::new(settings),
        store: store.clone(),
        chain: chain.clone(),
        minter: minter.clone(),
        executor: executor.clone(),
        observer: Arc::new(Ignore),
        events: Some(events_tx),
    }));
    let dispatcher = Dispatcher::new(Arc::clone(&pipeline), Ticking::Manual).start();
    Harness {
        dispatcher,
        pipeline,
        store,
        executor,
        minter,
        chain,
        events,
    }
}
