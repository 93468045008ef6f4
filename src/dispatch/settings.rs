//! The dispatcher's settings, as plain values: `config.rs` builds them from the YAML file, and
//! a program that embeds the crate may start from [`Settings::default`].
//!
//! Each default is a constant here, which the config reads for an unset key: one copy of each.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use crate::admission::{ChangeRules, Unit};

/// The default `scheduler.loop_interval_ms`: a tick a second, as Dexaflow's scheduler.
pub const DEFAULT_LOOP_INTERVAL_MS: u64 = 1_000;

/// The default `scheduler.dispatch.buffer_size`: 0, the chain runs on the tick (synchronous
/// dispatch), as Dexaflow does without ADR 0100's buffer.
pub const DEFAULT_BUFFER_SIZE: usize = 0;

/// The default `scheduler.dispatch.workers` as written: 0, which `effective_workers` takes
/// as 1.
pub const DEFAULT_WORKERS: usize = 0;

/// The admission workers `scheduler.dispatch.workers` stands for: at least one, so that a
/// buffer is always drained.
pub(crate) fn effective_workers(workers: usize) -> usize {
    workers.max(1)
}

/// The default `scheduler.dispatch.retry_window` (ADR 0093): 15 minutes.
pub const DEFAULT_RETRY_WINDOW: Duration = Duration::from_secs(15 * 60);

/// The default `scheduler.dispatch.drain_timeout`: 15 seconds.
pub const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_secs(15);

/// The default `executor.task_service_account`: none, the namespace's default account.
pub const DEFAULT_TASK_SERVICE_ACCOUNT: &str = "";

/// The default `execution.warm_pools_enabled`: off, every attempt takes a dedicated pod.
pub const DEFAULT_WARM_POOLS: bool = false;

/// The default `auth.agent_token_ttl`: 10 minutes.
pub const DEFAULT_TOKEN_TTL: Duration = Duration::from_secs(10 * 60);

/// The default `executor.lite.log_dir`, relative to the working directory.
pub const DEFAULT_LOG_DIR: &str = "dexaflow-logs";

/// The fewest bytes `auth.agent_token_secret` may have: an HS256 key should be as long as the
/// hash (RFC 7518 §3.2). A generated secret has this many.
pub(crate) const MIN_SECRET_BYTES: usize = 32;

/// The largest `scheduler.dispatch.buffer_size`.
///
/// The buffer is allocated whole when the dispatcher starts: one slot per attempt, each a
/// task key and a pointer (about 110 bytes), so the largest buffer takes about 7 MiB before an
/// attempt is offered. A buffer deeper than what a few ticks make ready only delays the
/// at-capacity signal that tells the scheduler to slow down.
pub const MAX_BUFFER_SIZE: usize = 65_536;

/// The largest `scheduler.dispatch.workers`.
///
/// A worker is an actor, not a thread (a few KiB of mailbox and state), and each holds at most
/// one hook call in flight: the workers bound how many calls a hook (a webhook's connections)
/// sees at once, which is what the maximum keeps sane.
pub const MAX_WORKERS: usize = 1_024;

/// The default `scheduler.dispatch.worker_threads`: two threads of admission workers.
///
/// Two is what a CPU-bound hook needs to use a second core beside the dispatcher's own thread,
/// and costs two idle threads where the hooks wait on the network instead. A fixed number
/// rather than the core count keeps the effective config the same on every machine; an install
/// whose policy evaluation is the bottleneck on a larger machine raises it.
pub const DEFAULT_WORKER_THREADS: usize = 2;

/// The largest `scheduler.dispatch.worker_threads`: more threads than workers would sit idle,
/// and more than a few dozen only contend for the cores.
pub const MAX_WORKER_THREADS: usize = 64;

/// Everything the dispatch path needs to know about the install.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// `scheduler.dispatch.buffer_size`: 0 runs the chain on the tick; above 0, the bounded
    /// buffer's capacity in attempts.
    pub buffer_size: usize,
    /// `scheduler.dispatch.workers`: admission workers draining the buffer (floored to 1).
    pub workers: usize,
    /// `scheduler.dispatch.worker_threads`: the threads (actix arbiters) the admission workers
    /// are spread over; 0 runs every worker on the dispatcher's own thread, as tests on tokio's
    /// paused clock need.
    pub worker_threads: usize,
    /// `scheduler.loop_interval_ms`: time between ticks.
    pub loop_interval: Duration,
    /// `scheduler.dispatch.retry_window` (ADR 0093): how long a held or unavailable attempt is
    /// re-offered before it fails.
    pub retry_window: Duration,
    /// `scheduler.dispatch.drain_timeout`: how long shutdown waits for in-flight attempts.
    pub drain_timeout: Duration,
    /// `executor.task_service_account`: the service account of a task that names none.
    pub task_service_account: String,
    /// `executor.defaults`: resources of a task that declares none, when no unit is set.
    pub defaults: ResourceDefaults,
    /// `executor.unit`: the resource unit (ADR 0066), when configured.
    pub unit: Option<ResourceUnit>,
    /// `execution_allowlist`: what a DAG's own execution fields may be.
    pub allowlist: Allowlist,
    /// What the dispatcher itself needs of `executor.policy`, whose rules run as the chain's
    /// last hook.
    pub policy: PolicySettings,
    /// `execution.source_mode`.
    pub source_mode: SourceMode,
    /// `execution.warm_pools_enabled`: whether an attempt that needs no dedicated pod goes warm.
    pub warm_pools: bool,
    /// `auth.*`: how agent tokens are minted.
    pub token: TokenSettings,
    /// `executor.*`: which executor runs admitted attempts.
    pub executor: ExecutorSettings,
}

impl Default for Settings {
    /// The settings of an empty config file: synchronous dispatch, one worker, the `lite`
    /// executor, no unit, no allowlist, no policy, and an agent token secret of 32 random bytes
    /// for this process (empty where the system has no random generator: every token is then
    /// refused, never signed with a predictable key; set one).
    fn default() -> Settings {
        Settings {
            buffer_size: DEFAULT_BUFFER_SIZE,
            workers: effective_workers(DEFAULT_WORKERS),
            worker_threads: DEFAULT_WORKER_THREADS,
            loop_interval: Duration::from_millis(DEFAULT_LOOP_INTERVAL_MS),
            retry_window: DEFAULT_RETRY_WINDOW,
            drain_timeout: DEFAULT_DRAIN_TIMEOUT,
            task_service_account: DEFAULT_TASK_SERVICE_ACCOUNT.to_owned(),
            defaults: ResourceDefaults::default(),
            unit: None,
            allowlist: Allowlist::default(),
            policy: PolicySettings::default(),
            source_mode: SourceMode::default(),
            warm_pools: DEFAULT_WARM_POOLS,
            token: TokenSettings {
                secret: TokenSettings::random_secret().unwrap_or_default(),
                ttl: DEFAULT_TOKEN_TTL,
            },
            executor: ExecutorSettings::default(),
        }
    }
}

impl Settings {
    /// The rules a hook's changes must pass on this install: the allowlists, the default task
    /// service account (always allowed) and the unit that bounds built-in limit fills.
    pub fn change_rules(&self) -> ChangeRules {
        ChangeRules {
            service_accounts: self.allowlist.service_accounts.clone(),
            priority_classes: self.allowlist.priority_classes.clone(),
            default_service_account: self.task_service_account.clone(),
            unit: self.unit.as_ref().map(|unit| Unit {
                cpu_milli: unit.cpu_milli,
                memory_milli: unit.memory_milli,
            }),
        }
    }
}

/// `executor.defaults`: resources for a task that declares none.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourceDefaults {
    /// `executor.defaults.resources_cpu`.
    pub cpu: Option<String>,
    /// `executor.defaults.resources_memory`.
    pub memory: Option<String>,
}

/// `executor.unit.enforce`: what a task whose resources exceed its size gets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Enforce {
    /// Refuse the attempt (the default).
    #[default]
    Refuse,
    /// Log a warning and run it anyway.
    Warn,
}

/// The resource unit of ADR 0066: one size is this much CPU and memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceUnit {
    /// `executor.unit.cpu`, as written (for messages).
    pub cpu: String,
    /// `executor.unit.memory`, as written (for messages).
    pub memory: String,
    /// `executor.unit.cpu` in millicores.
    pub cpu_milli: u128,
    /// `executor.unit.memory` in thousandths of a byte.
    pub memory_milli: u128,
    /// `executor.unit.enforce`.
    pub enforce: Enforce,
    /// `executor.unit.max_size`: the largest size a task may have (default 64).
    pub max_size: u32,
}

/// `execution_allowlist.fields`: which execution fields a DAG may set itself.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum AllowedFields {
    /// Every field (the default).
    #[default]
    All,
    /// No field.
    None,
    /// Only these fields.
    Only(BTreeSet<String>),
}

/// `execution_allowlist.*`: checked on the DAG's own fields before any hook runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Allowlist {
    /// `execution_allowlist.fields`.
    pub fields: AllowedFields,
    /// `execution_allowlist.service_accounts`; `None` allows any.
    pub service_accounts: Option<BTreeSet<String>>,
    /// `execution_allowlist.priority_classes`; `None` allows any.
    pub priority_classes: Option<BTreeSet<String>>,
    /// `execution_allowlist.images`; `None` allows any. An entry ending in `/` is a prefix; any
    /// other must equal the image's repository (without tag or digest).
    pub images: Option<Vec<String>>,
}

/// The part of `executor.policy` the dispatcher applies itself; the rest is the policy hook's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicySettings {
    /// `executor.policy.placement.allow_dag_placement`: whether a DAG may set its own node
    /// selector, tolerations and priority class; checked with the built-in refusals, before any
    /// hook. True when unset, as every unset rule of the policy allows.
    pub allow_dag_placement: bool,
    /// Whether the policy forces a field onto every attempt it admits (`runtime_class_name`,
    /// `service_account.force`, `placement.node_selector` or `placement.tolerations`), so that
    /// every such attempt takes a dedicated pod for the policy's sake.
    pub forces_fields: bool,
}

impl Default for PolicySettings {
    /// No policy: DAG placement allowed, nothing forced.
    fn default() -> PolicySettings {
        PolicySettings {
            allow_dag_placement: true,
            forces_fields: false,
        }
    }
}

/// `execution.source_mode`: running a DAG's source on a pinned runtime image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceMode {
    /// `execution.source_mode.enabled`.
    pub enabled: bool,
    /// `execution.source_mode.image`, pinned by digest.
    pub image: String,
    /// The largest source in bytes (128 KiB).
    pub max_bytes: usize,
}

impl Default for SourceMode {
    fn default() -> SourceMode {
        SourceMode {
            enabled: false,
            image: String::new(),
            max_bytes: 128 * 1024,
        }
    }
}

/// `auth.*`: the agent token. Its `Debug` output leaves the secret out.
#[derive(Clone, PartialEq, Eq)]
pub struct TokenSettings {
    /// `auth.agent_token_secret`: the HS256 key.
    pub secret: Vec<u8>,
    /// How long a freshly minted token lives.
    pub ttl: Duration,
}

impl TokenSettings {
    /// [`MIN_SECRET_BYTES`] random bytes from the operating system's cryptographic generator,
    /// for an agent token secret that lives as long as the process.
    ///
    /// # Errors
    /// The generator's error, where the system has none.
    pub(crate) fn random_secret() -> Result<Vec<u8>, getrandom::Error> {
        let mut secret = vec![0; MIN_SECRET_BYTES];
        getrandom::fill(&mut secret)?;
        Ok(secret)
    }
}

impl std::fmt::Debug for TokenSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Settings are logged and printed in test failures; the key must never be.
        f.debug_struct("TokenSettings")
            .field("secret", &format_args!("<{} bytes>", self.secret.len()))
            .field("ttl", &self.ttl)
            .finish()
    }
}

/// `executor.type` and its own settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecutorSettings {
    /// Runs each attempt's command as a local subprocess.
    Lite {
        /// `executor.lite.log_dir`: one log file per attempt.
        log_dir: PathBuf,
        /// `executor.lite.kill_grace`: how long a task's processes get between TERM and KILL
        /// when the dispatcher shuts down or the task runs past its execution timeout.
        kill_grace: Duration,
        /// `executor.lite.max_parallel`: the most attempts whose processes run at once; more are
        /// accepted as `queued` and start when a slot frees.
        max_parallel: usize,
    },
    /// Builds a pod per attempt.
    Kubernetes {
        /// `executor.task_namespace`.
        namespace: String,
        /// `executor.kubernetes.dry_run_dir`: write manifests here instead of creating pods.
        dry_run_dir: Option<PathBuf>,
        /// `executor.defaults.run_tasks_as_non_root`.
        run_as_non_root: bool,
    },
    /// Accepts every attempt at once, for load tests.
    Null,
}

impl ExecutorSettings {
    /// Whether this executor needs a command in every task: `lite` runs the command as a local
    /// process and has nothing else to run, where a pod runs its image's own entrypoint without
    /// one and `null` runs nothing.
    pub fn needs_command(&self) -> bool {
        matches!(self, ExecutorSettings::Lite { .. })
    }
}

impl Default for ExecutorSettings {
    /// `lite`, logging to [`DEFAULT_LOG_DIR`], with its default grace and parallelism.
    fn default() -> ExecutorSettings {
        ExecutorSettings::Lite {
            log_dir: PathBuf::from(DEFAULT_LOG_DIR),
            kill_grace: super::executor::lite::DEFAULT_KILL_GRACE,
            max_parallel: super::executor::lite::default_max_parallel(),
        }
    }
}
