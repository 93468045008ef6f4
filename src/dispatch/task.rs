//! The task attempts the dispatcher is offered, and the task instances it keeps.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::admission::{Resources, Toleration, escape_controls};

/// Identifies one task instance: a task of one DAG run of one tenant.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TaskKey {
    /// The tenant that owns the DAG.
    pub tenant: String,
    /// The DAG id.
    pub dag_id: String,
    /// The DAG run id.
    pub run_id: String,
    /// The task id.
    pub task_id: String,
}

impl TaskKey {
    /// The task instance id: `tenant.dag_id.run_id.task_id`, the name the agent token is
    /// issued for and the pod carries as an annotation.
    pub fn task_instance_id(&self) -> String {
        self.parts().join(TASK_INSTANCE_ID_SEPARATOR)
    }

    /// The length in bytes of [`TaskKey::task_instance_id`], counted without building it: every
    /// attempt's built-in refusals need only the size of the pod annotation that carries it.
    pub(crate) fn task_instance_id_len(&self) -> usize {
        let parts = self.parts();
        let separators = TASK_INSTANCE_ID_SEPARATOR.len() * (parts.len() - 1);
        parts.iter().map(|part| part.len()).sum::<usize>() + separators
    }

    /// The four ids, in the task instance id's order.
    fn parts(&self) -> [&str; 4] {
        [&self.tenant, &self.dag_id, &self.run_id, &self.task_id]
    }
}

const TASK_INSTANCE_ID_SEPARATOR: &str = ".";

/// `tenant/dag/run/task`, each id with its control and format characters escaped
/// (`escape_controls`), so that a key in a log line or an error cannot forge another line.
impl fmt::Display for TaskKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/{}/{}/{}",
            escape_controls(&self.tenant),
            escape_controls(&self.dag_id),
            escape_controls(&self.run_id),
            escape_controls(&self.task_id)
        )
    }
}

/// A task as its DAG declares it: what the dispatcher is asked to run.
///
/// The execution fields here are the DAG author's own; the built-in refusals check them against
/// the execution allowlist before any hook runs (ADR 0100 §4).
///
/// Its serde form flattens the key, so `deny_unknown_fields` cannot be used here; the workload
/// loader checks the keys of each task itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Task {
    /// Which task instance this is.
    #[serde(flatten)]
    pub key: TaskKey,
    /// The operator type, such as `BashOperator`.
    #[serde(default)]
    pub operator: String,
    /// The image the run resolved; empty means the runtime image (source mode).
    #[serde(default)]
    pub image: String,
    /// The command `lite` runs as a subprocess (and the pod's container command).
    #[serde(default)]
    pub command: Vec<String>,
    /// The task's environment; never shown to a hook.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// The DAG source, present when the DAG runs in source mode; never shown to a hook.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Whether the attempt needs a staging volume (always a dedicated pod).
    #[serde(default)]
    pub staging: bool,
    /// The task's declared size in resource units (`pool_slots`; 0 means 1).
    #[serde(default)]
    pub pool_slots: u32,
    /// The task's declared resources.
    #[serde(default)]
    pub resources: Resources,
    /// The task's own execution fields.
    #[serde(default)]
    pub execution: TaskExecution,
    /// How long an attempt may run before its executor ends it and the task fails with
    /// `execution timed out after Ns` (Dexaflow's TaskSpec field); `None` for no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution_timeout_seconds: Option<u64>,
}

/// The execution fields a DAG author set on a task (Dexaflow's `domain.Execution`, the part this
/// crate uses).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskExecution {
    /// The service account; empty means `executor.task_service_account`.
    #[serde(default)]
    pub service_account: String,
    /// Node labels the pod must match.
    #[serde(default)]
    pub node_selector: BTreeMap<String, String>,
    /// Taints the pod tolerates.
    #[serde(default)]
    pub tolerations: Vec<Toleration>,
    /// The priority class; empty for none.
    #[serde(default)]
    pub priority_class_name: String,
    /// Labels for the pod.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Annotations for the pod.
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

impl Task {
    /// The keys a task may have in a workload file, in declaration order.
    pub(crate) const FIELDS: [&'static str; 14] = [
        "tenant",
        "dag_id",
        "run_id",
        "task_id",
        "operator",
        "image",
        "command",
        "env",
        "source",
        "staging",
        "pool_slots",
        "resources",
        "execution",
        "execution_timeout_seconds",
    ];

    /// A task of run `run_id` of `dag_id` of `tenant`, with nothing else declared: the runtime
    /// image, no command, one resource unit, no execution fields of its own. Fill the rest with
    /// the `with_` setters or the public fields.
    pub fn new(
        tenant: impl Into<String>,
        dag_id: impl Into<String>,
        run_id: impl Into<String>,
        task_id: impl Into<String>,
    ) -> Task {
        Task {
            key: TaskKey {
                tenant: tenant.into(),
                dag_id: dag_id.into(),
                run_id: run_id.into(),
                task_id: task_id.into(),
            },
            operator: String::new(),
            image: String::new(),
            command: Vec::new(),
            env: BTreeMap::new(),
            source: None,
            staging: false,
            pool_slots: 0,
            resources: Resources::default(),
            execution: TaskExecution::default(),
            execution_timeout_seconds: None,
        }
    }

    /// The task with its operator type, such as `BashOperator`.
    pub fn with_operator(mut self, operator: impl Into<String>) -> Task {
        self.operator = operator.into();
        self
    }

    /// The task with `image` (empty: the runtime image).
    pub fn with_image(mut self, image: impl Into<String>) -> Task {
        self.image = image.into();
        self
    }

    /// The task with `command`, what `lite` runs and the pod's container command.
    pub fn with_command(mut self, command: impl IntoIterator<Item = impl Into<String>>) -> Task {
        self.command = command.into_iter().map(Into::into).collect();
        self
    }

    /// The task with its author's own `execution` fields.
    pub fn with_execution(mut self, execution: TaskExecution) -> Task {
        self.execution = execution;
        self
    }

    /// The task with its declared `resources`.
    pub fn with_resources(mut self, resources: Resources) -> Task {
        self.resources = resources;
        self
    }

    /// The task with the environment variable `name` set to `value` (never shown to a hook).
    pub fn with_env(mut self, name: impl Into<String>, value: impl Into<String>) -> Task {
        self.env.insert(name.into(), value.into());
        self
    }

    /// The task with its DAG `source`, for a DAG that runs in source mode (never shown to a
    /// hook).
    pub fn with_source(mut self, source: impl Into<String>) -> Task {
        self.source = Some(source.into());
        self
    }

    /// The task needing a staging volume (always a dedicated pod).
    pub fn with_staging(mut self) -> Task {
        self.staging = true;
        self
    }

    /// The task with its declared size in resource units (`pool_slots`; 0 means 1).
    pub fn with_pool_slots(mut self, pool_slots: u32) -> Task {
        self.pool_slots = pool_slots;
        self
    }

    /// The task with an execution timeout of whole `seconds`: its executor ends an attempt that
    /// runs longer.
    pub fn with_execution_timeout(mut self, seconds: u64) -> Task {
        self.execution_timeout_seconds = Some(seconds);
        self
    }

    /// [`Task::execution_timeout_seconds`] as a duration.
    pub fn execution_timeout(&self) -> Option<std::time::Duration> {
        self.execution_timeout_seconds
            .map(std::time::Duration::from_secs)
    }
}

impl TaskExecution {
    /// The names of the execution fields the author set, as `execution_allowlist.fields` names
    /// them: `node_selector`, `tolerations`, `service_account`, `priority_class_name`, `labels`,
    /// `annotations`.
    pub(crate) fn set_fields(&self) -> Vec<&'static str> {
        let mut fields = Vec::new();
        if !self.node_selector.is_empty() {
            fields.push("node_selector");
        }
        if !self.tolerations.is_empty() {
            fields.push("tolerations");
        }
        if !self.service_account.is_empty() {
            fields.push("service_account");
        }
        if !self.priority_class_name.is_empty() {
            fields.push("priority_class_name");
        }
        if !self.labels.is_empty() {
            fields.push("labels");
        }
        if !self.annotations.is_empty() {
            fields.push("annotations");
        }
        fields
    }

    /// Whether the author set any placement field (node selector, tolerations, priority class),
    /// which takes the attempt to a dedicated pod.
    pub fn has_placement(&self) -> bool {
        !self.node_selector.is_empty()
            || !self.tolerations.is_empty()
            || !self.priority_class_name.is_empty()
    }
}

/// Task-instance states, as Dexaflow names them.
///
/// `dispatch_failed` is not a state: such a task is `failed` with its reason in
/// `failure_reason`.
///
/// One of three words for what happened to an attempt, each at its own level: a hook call ends
/// with an [`Outcome`](crate::admission::Outcome) (what the metrics count: `admit`, `refuse`,
/// `timeout`, ...); one offer of the attempt ends with a
/// [`Disposition`](crate::dispatch::Disposition) (executed, refused, waiting, deferred, ...);
/// and the task instance is left in a `State`, which several offers may share (a held attempt
/// stays `scheduled` through many `waiting` offers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// Not yet scheduled.
    None,
    /// Waiting for dispatch; also where held and deferred attempts wait.
    Scheduled,
    /// Handed to an executor.
    Queued,
    /// The executor reports it running.
    Running,
    /// Finished successfully.
    Success,
    /// Failed, with the reason in `failure_reason`.
    Failed,
    /// Failed and waiting for its next try.
    UpForRetry,
    /// Waiting to be rescheduled by a sensor.
    UpForReschedule,
    /// Skipped by a branch.
    Skipped,
    /// An upstream task failed.
    UpstreamFailed,
}

impl State {
    /// The state's name as Dexaflow spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            State::None => "none",
            State::Scheduled => "scheduled",
            State::Queued => "queued",
            State::Running => "running",
            State::Success => "success",
            State::Failed => "failed",
            State::UpForRetry => "up_for_retry",
            State::UpForReschedule => "up_for_reschedule",
            State::Skipped => "skipped",
            State::UpstreamFailed => "upstream_failed",
        }
    }

    /// Whether the state is final for this try.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            State::Success | State::Failed | State::Skipped | State::UpstreamFailed
        )
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
