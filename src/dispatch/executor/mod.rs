//! Executors: what runs an admitted attempt. `lite` runs a local subprocess, `kubernetes` builds a
//! pod, `null` accepts at once for load tests.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use thiserror::Error;
use tokio::sync::mpsc;

pub mod kubernetes;
pub mod lite;
pub mod null;

use super::placement::PodKind;
use super::settings::ExecutorSettings;
use super::task::Task;
use crate::admission::{Execution, Resources};

/// An attempt that passed every check and has its token: all an executor may use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admitted {
    /// The task as its DAG declares it (command, environment, image, source), shared with the
    /// store's row rather than copied for every launch.
    pub task: Arc<Task>,
    /// The image it runs: the task's own, or the source-mode runtime image.
    pub image: String,
    /// The task instance id, such as `acme.etl.manual__1.load`.
    pub task_instance_id: String,
    /// The try number of this attempt.
    pub try_number: u32,
    /// The attempt epoch claimed when the attempt was resolved.
    pub attempt_epoch: u64,
    /// The effective resources: after the unit or the defaults, and any built-in fill.
    pub resources: Resources,
    /// The effective execution fields: the default service account and every hook's changes
    /// applied.
    pub execution: Execution,
    /// Where it runs.
    pub placement: PodKind,
    /// The agent token minted for this attempt.
    pub token: String,
}

/// How a launched attempt ended, as an executor reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Completion {
    /// The task succeeded.
    Succeeded,
    /// The task failed, and how.
    Failed(Ending),
}

/// How a launched attempt failed, as its executor reports it. Its `Display` is the reason the
/// task instance shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// Its command exited with this code: `exit code 3`.
    ExitCode(i32),
    /// A signal ended its command: `killed by signal 9`, or `killed by signal` where the
    /// platform does not say which.
    Killed(Option<i32>),
    /// It ran past its task's execution timeout, in whole seconds, and was ended:
    /// `execution timed out after 30s`.
    TimedOut {
        /// The task's execution timeout.
        seconds: u64,
    },
    /// The dispatcher shut down while it ran, and it was ended ([`lite::ORPHANED`]).
    Orphaned,
    /// Its process could not be waited for; the text is the error's.
    Unwaitable(String),
}

impl std::fmt::Display for Ending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Ending::ExitCode(code) => write!(f, "exit code {code}"),
            Ending::Killed(Some(signal)) => write!(f, "killed by signal {signal}"),
            Ending::Killed(None) => f.write_str("killed by signal"),
            Ending::TimedOut { seconds } => write!(f, "execution timed out after {seconds}s"),
            Ending::Orphaned => f.write_str(lite::ORPHANED),
            Ending::Unwaitable(error) => write!(f, "waiting for the process: {error}"),
        }
    }
}

/// One step of a launched attempt its executor follows, in the order they happen: at most one
/// [`Step::Started`], then exactly one of the others.
#[derive(Debug)]
pub enum Step {
    /// Its process started: the task instance is `running`.
    Started,
    /// It ended, after [`Step::Started`].
    Ended(Completion),
    /// Its process could not be started when its turn came (the executor had accepted it as
    /// `queued`): the attempt goes back to `scheduled` as a launch error at dispatch does, as
    /// backpressure or spending a dispatch attempt.
    NotStarted(ExecutorError),
    /// The executor shut down before the attempt's turn came: it goes back to `scheduled`, with
    /// nothing spent.
    HandedBack,
}

/// The steps of one launched attempt, as its executor sends them.
pub type Steps = mpsc::UnboundedReceiver<Step>;

/// What an executor hands back once it accepted an attempt.
#[derive(Debug)]
pub struct Launched {
    /// The attempt's steps from here on; `None` when the executor does not follow the attempt
    /// further (a pod that was created, the `null` executor), which then stays `queued`.
    pub steps: Option<Steps>,
}

impl Launched {
    /// An attempt the executor does not follow after launching it.
    pub fn unfollowed() -> Launched {
        Launched { steps: None }
    }
}

/// Why an executor could not launch an attempt. Spends a dispatch attempt (Dexaflow's
/// `Rejected`).
#[derive(Debug, Error)]
pub enum ExecutorError {
    /// The subprocess could not be started.
    #[error("starting {program:?}")]
    Spawn {
        /// The program.
        program: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A file the executor writes (a log, a manifest) could not be written.
    #[error("writing {path}")]
    Write {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The task has nothing to run.
    #[error("task {task} has no command")]
    NoCommand {
        /// The task.
        task: String,
    },
    /// The Kubernetes executor has no cluster client: this crate only builds pods and, with a
    /// dry-run directory, writes them as manifests.
    #[error("no kubernetes client to create pod {pod} in namespace {namespace:?}")]
    NoCluster {
        /// The pod that would have been created.
        pod: String,
        /// The namespace it would have been created in.
        namespace: String,
    },
    /// A manifest could not be encoded.
    #[error("encoding the manifest of pod {pod}")]
    Encode {
        /// The pod.
        pod: String,
        /// Why.
        #[source]
        source: serde_yaml_ng::Error,
    },
}

impl ExecutorError {
    /// Whether the launch failed for lack of resources on the host (too many open files or
    /// processes, no memory): Dexaflow's backpressure, re-offered without spending a dispatch
    /// attempt, since the same launch succeeds once something else has ended.
    pub fn is_backpressure(&self) -> bool {
        use rustix::io::Errno;
        match self {
            ExecutorError::Spawn { source, .. } | ExecutorError::Write { source, .. } => {
                Errno::from_io_error(source).is_some_and(|errno| {
                    [Errno::MFILE, Errno::NFILE, Errno::AGAIN, Errno::NOMEM].contains(&errno)
                })
            }
            ExecutorError::NoCommand { .. }
            | ExecutorError::NoCluster { .. }
            | ExecutorError::Encode { .. } => false,
        }
    }
}

/// The variable that carries the attempt's agent token into the task.
pub const AGENT_TOKEN_ENV: &str = "DEXAFLOW_AGENT_TOKEN";

/// The variable that carries the task instance id into the task.
pub const TASK_INSTANCE_ID_ENV: &str = "DEXAFLOW_TASK_INSTANCE_ID";

/// Every variable an executor sets in a task's environment; the config accepts them in the
/// dispatcher's own environment too, as variables that are no config key.
pub const TASK_VARIABLES: &[&str] = &[AGENT_TOKEN_ENV, TASK_INSTANCE_ID_ENV];

/// Whether a task environment key is reserved for the orchestrator (`LEOFLOW_` or `DEXAFLOW_`
/// in any case), so that a DAG author cannot set or forge the agent's own variables.
///
/// Executors drop such keys from the task's environment before adding their own.
pub fn is_reserved_env(key: &str) -> bool {
    ["LEOFLOW_", "DEXAFLOW_"].iter().any(|prefix| {
        key.get(..prefix.len())
            .is_some_and(|head| head.eq_ignore_ascii_case(prefix))
    })
}

/// The executor `settings` describe.
pub fn from_settings(settings: &ExecutorSettings) -> Arc<dyn Executor> {
    match settings {
        ExecutorSettings::Lite {
            log_dir,
            kill_grace,
            max_parallel,
        } => Arc::new(
            lite::Lite::new(log_dir.clone())
                .with_kill_grace(*kill_grace)
                .with_max_parallel(*max_parallel),
        ),
        ExecutorSettings::Kubernetes {
            namespace,
            dry_run_dir,
            run_as_non_root,
        } => Arc::new(kubernetes::Kubernetes::new(
            namespace.clone(),
            dry_run_dir.clone(),
            *run_as_non_root,
        )),
        ExecutorSettings::Null => Arc::new(null::Null),
    }
}

/// The future an executor returns.
pub type ExecuteFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Launched, ExecutorError>> + Send + 'a>>;

/// The future [`Executor::shutdown`] returns.
pub(crate) type ShutdownFuture<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// Runs admitted attempts.
pub trait Executor: Send + Sync {
    /// The executor's name as `executor.type` spells it.
    fn name(&self) -> &'static str;

    /// Launches one admitted attempt.
    ///
    /// # Errors
    /// An [`ExecutorError`] when the attempt could not be launched.
    fn execute<'a>(&'a self, attempt: &'a Admitted) -> ExecuteFuture<'a>;

    /// Stops the executor when the dispatcher shuts down, once the admission drain is done: it
    /// launches nothing more, and every attempt it follows sends its last [`Step`] (an attempt
    /// not yet started is handed back, a running one is ended). Resolves once all have.
    ///
    /// The default does nothing: an executor that follows no attempt has nothing to stop.
    fn shutdown(&self) -> ShutdownFuture<'_> {
        Box::pin(std::future::ready(()))
    }
}
