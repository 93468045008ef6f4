//! The `kubernetes` executor: builds one pod per admitted attempt.
//!
//! [`build_pod`] is pure (apart from the random name suffix) and carries the whole pod contract:
//! identity labels and annotation, the execution fields with every hook's change applied, the
//! resources, the agent token in the environment, a restricted security context and, in source
//! mode, the DAG source. Only a dedicated attempt gets a pod: a warm one goes to a warm worker
//! whose pod already exists. This crate has no Kubernetes client yet: with a dry-run directory
//! the executor writes each pod as a YAML manifest there, and without one it fails with
//! [`ExecutorError::NoCluster`]. Creating pods through a client comes later, behind the same
//! [`Executor`] trait.
//!
//! Every field the pod takes from the attempt passed the checks of what Kubernetes accepts
//! before the attempt's token was minted (the task's own in the built-in refusals, a hook's in
//! the chain), so every pod built here is one the API server accepts; the filter of reserved
//! keys below is a second line behind those checks.

use std::collections::BTreeMap;
use std::path::PathBuf;

use k8s_openapi::api::core::v1::{
    Capabilities, Container, DownwardAPIVolumeFile, DownwardAPIVolumeSource, EnvVar,
    ObjectFieldSelector, Pod, PodSecurityContext, PodSpec, ResourceRequirements, SeccompProfile,
    SecurityContext, Toleration as PodToleration, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use sha2::{Digest, Sha256};

use super::{
    AGENT_TOKEN_ENV, Admitted, ExecuteFuture, Executor, ExecutorError, Launched,
    TASK_INSTANCE_ID_ENV, is_reserved_env,
};
use crate::admission::{MAX_NAME, ResourceList, Toleration, is_reserved_key, label_value_problem};
use crate::dispatch::placement::{DedicatedReason, PodKind};

/// The label naming the attempt's DAG.
pub const LABEL_DAG_ID: &str = "dexaflow.io/dag-id";
/// The label naming the attempt's task.
pub const LABEL_TASK_ID: &str = "dexaflow.io/task-id";
/// The label naming the attempt's DAG run.
pub const LABEL_RUN_ID: &str = "dexaflow.io/run-id";
/// The label carrying the attempt's try number.
pub const LABEL_TRY_NUMBER: &str = "dexaflow.io/try-number";
/// The label carrying the attempt epoch, which tells two pods of one try apart.
pub const LABEL_ATTEMPT_EPOCH: &str = "dexaflow.io/attempt-epoch";
/// The label naming the attempt's tenant.
pub const LABEL_TENANT_ID: &str = "dexaflow.io/tenant-id";
/// The annotation carrying the exact task instance id (labels are sanitized and lossy).
pub const ANNOTATION_TASK_INSTANCE_ID: &str = "dexaflow.io/task-instance-id";
/// The annotation carrying a source-mode attempt's DAG source, projected into the container as
/// [`SOURCE_FILE`] (ADR 0067 §3).
pub const ANNOTATION_DAG_SOURCE: &str = "dexaflow.io/dag-source";
/// The directory a source-mode container reads its DAG source from, and its working directory.
pub const SOURCE_MOUNT_PATH: &str = "/opt/dexaflow/dag";
/// The file the DAG source is projected as, in [`SOURCE_MOUNT_PATH`].
pub const SOURCE_FILE: &str = "dag.py";
/// The name of the downward API volume that projects the DAG source.
const SOURCE_VOLUME: &str = "dexaflow-dag-source";

/// Hex characters of a SHA-256 that replace the overflow of a long label value.
const LABEL_HASH_LEN: usize = 12;
/// The group a non-root task's volumes are written as (the distroless `nonroot` GID).
const NON_ROOT_FS_GROUP: i64 = 65532;

/// Builds a pod per attempt and, with a dry-run directory, writes it as a manifest.
#[derive(Debug, Clone)]
pub struct Kubernetes {
    namespace: String,
    dry_run_dir: Option<PathBuf>,
    run_as_non_root: bool,
}

impl Kubernetes {
    /// An executor for pods in `namespace`.
    ///
    /// With `dry_run_dir`, each pod is written to `<dir>/<pod-name>.yaml` instead of created;
    /// without it every attempt fails with [`ExecutorError::NoCluster`] until a client exists.
    /// `run_as_non_root` is `executor.defaults.run_tasks_as_non_root`.
    pub fn new(
        namespace: impl Into<String>,
        dry_run_dir: Option<PathBuf>,
        run_as_non_root: bool,
    ) -> Kubernetes {
        Kubernetes {
            namespace: namespace.into(),
            dry_run_dir,
            run_as_non_root,
        }
    }

    async fn launch(&self, attempt: &Admitted) -> Result<Launched, ExecutorError> {
        if !attempt.placement.is_dedicated() {
            // A warm worker's pod exists already; the attempt is handed to it, not given a pod.
            tracing::debug!(task = %attempt.task.key, "warm attempt: no pod is built");
            return Ok(Launched::unfollowed());
        }
        let pod = build_pod(attempt, &self.namespace, self.run_as_non_root);
        let name = pod.metadata.name.clone().unwrap_or_default();
        let Some(dir) = &self.dry_run_dir else {
            return Err(ExecutorError::NoCluster {
                pod: name,
                namespace: self.namespace.clone(),
            });
        };
        let manifest = serde_yaml_ng::to_string(&pod).map_err(|source| ExecutorError::Encode {
            pod: name.clone(),
            source,
        })?;
        let path = dir.join(format!("{name}.yaml"));
        write_private(&path, manifest.as_bytes())
            .await
            .map_err(|source| ExecutorError::Write {
                path: path.display().to_string(),
                source,
            })?;
        Ok(Launched::unfollowed())
    }
}

impl Executor for Kubernetes {
    fn name(&self) -> &'static str {
        "kubernetes"
    }

    /// Builds a dedicated attempt's pod and writes it to the dry-run directory; a warm attempt
    /// gets no pod. The attempt is not followed further.
    fn execute<'a>(&'a self, attempt: &'a Admitted) -> ExecuteFuture<'a> {
        Box::pin(self.launch(attempt))
    }
}

/// Writes a manifest readable by its owner only: it carries the agent token.
async fn write_private(path: &std::path::Path, contents: &[u8]) -> std::io::Result<()> {
    use tokio::io::AsyncWriteExt;
    let mut options = tokio::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    options.mode(0o600);
    let mut file = options.open(path).await?;
    file.write_all(contents).await?;
    file.flush().await
}

/// The annotations the executor puts on an attempt's pod over the execution's own: the task
/// instance id and, in source mode, the DAG source.
///
/// They count toward the 256 KiB Kubernetes allows all annotations of a pod together, so the
/// built-in refusals count them too. `V` is each value itself (`&str`) where the pod is built,
/// or its length (`usize`) where only the size counts, so that counting allocates nothing.
pub(crate) fn own_annotations<V>(
    task_instance_id: V,
    source: Option<V>,
) -> impl Iterator<Item = (&'static str, V)> {
    std::iter::once((ANNOTATION_TASK_INSTANCE_ID, task_instance_id))
        .chain(source.map(|source| (ANNOTATION_DAG_SOURCE, source)))
}

/// Builds the pod of one admitted attempt.
///
/// - Name `dexaflow-<dag>-<task>-<try>-<8 random hex>`, a DNS label of at most 63 characters.
/// - Labels `dexaflow.io/{dag-id,task-id,run-id,try-number,attempt-epoch,tenant-id}` (see
///   [`label_value`]), merged over the execution labels; `own_annotations` merged over the
///   execution annotations. The executor's keys win, and execution keys under the reserved
///   `leoflow.io/` and `dexaflow.io/` prefixes are dropped.
/// - The execution's node selector, tolerations, priority class, service account and runtime
///   class; the effective resources (a quantity that does not parse is dropped).
/// - `restartPolicy: Never`, no mounted service-account token (the task authenticates with its
///   agent token, never to the Kubernetes API).
/// - One container `task` with the image and command, and the environment
///   `DEXAFLOW_AGENT_TOKEN`, `DEXAFLOW_TASK_INSTANCE_ID`, then the task's own without reserved
///   keys.
/// - A security context for the `restricted` Pod Security profile: no privilege escalation,
///   every capability dropped, the runtime's default seccomp profile and, with
///   `run_as_non_root`, a non-root user whose volumes are writable through `fsGroup`.
/// - In source mode (the attempt is placed `dedicated (source mode)`), the DAG source in the
///   annotation [`ANNOTATION_DAG_SOURCE`], projected read-only through a downward API volume as
///   [`SOURCE_FILE`] in [`SOURCE_MOUNT_PATH`], the container's working directory.
pub fn build_pod(attempt: &Admitted, namespace: &str, run_as_non_root: bool) -> Pod {
    let task = &attempt.task;
    let key = &task.key;
    let execution = &attempt.execution;

    let mut labels: BTreeMap<String, String> = execution
        .labels
        .iter()
        .filter(|(key, _)| !is_reserved_key(key))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    labels.extend([
        (LABEL_DAG_ID.to_owned(), label_value(&key.dag_id)),
        (LABEL_TASK_ID.to_owned(), label_value(&key.task_id)),
        (LABEL_RUN_ID.to_owned(), label_value(&key.run_id)),
        (LABEL_TRY_NUMBER.to_owned(), attempt.try_number.to_string()),
        (
            LABEL_ATTEMPT_EPOCH.to_owned(),
            attempt.attempt_epoch.to_string(),
        ),
        (LABEL_TENANT_ID.to_owned(), label_value(&key.tenant)),
    ]);
    // Placement judges source mode first, so the reason is source mode exactly when it applies.
    let source = match attempt.placement {
        PodKind::Dedicated(DedicatedReason::SourceMode) => task.source.as_deref(),
        _ => None,
    };
    let mut annotations: BTreeMap<String, String> = execution
        .annotations
        .iter()
        .filter(|(key, _)| !is_reserved_key(key))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    annotations.extend(
        own_annotations(attempt.task_instance_id.as_str(), source)
            .map(|(key, value)| (key.to_owned(), value.to_owned())),
    );

    let mut env = Vec::with_capacity(2 + task.env.len());
    env.push(env_var(AGENT_TOKEN_ENV, &attempt.token));
    env.push(env_var(TASK_INSTANCE_ID_ENV, &attempt.task_instance_id));
    env.extend(
        task.env
            .iter()
            .filter(|(key, _)| !is_reserved_env(key))
            .map(|(key, value)| env_var(key, value)),
    );

    let container = Container {
        name: "task".to_owned(),
        image: Some(attempt.image.clone()),
        image_pull_policy: Some("IfNotPresent".to_owned()),
        command: (!task.command.is_empty()).then(|| task.command.clone()),
        env: Some(env),
        resources: Some(ResourceRequirements {
            requests: quantities(&attempt.resources.requests),
            limits: quantities(&attempt.resources.limits),
            ..ResourceRequirements::default()
        }),
        security_context: Some(SecurityContext {
            allow_privilege_escalation: Some(false),
            capabilities: Some(Capabilities {
                drop: Some(vec!["ALL".to_owned()]),
                ..Capabilities::default()
            }),
            seccomp_profile: Some(SeccompProfile {
                type_: "RuntimeDefault".to_owned(),
                ..SeccompProfile::default()
            }),
            run_as_non_root: run_as_non_root.then_some(true),
            ..SecurityContext::default()
        }),
        working_dir: source.map(|_| SOURCE_MOUNT_PATH.to_owned()),
        volume_mounts: source.map(|_| {
            vec![VolumeMount {
                name: SOURCE_VOLUME.to_owned(),
                mount_path: SOURCE_MOUNT_PATH.to_owned(),
                read_only: Some(true),
                ..VolumeMount::default()
            }]
        }),
        ..Container::default()
    };

    let non_empty = |text: &str| (!text.is_empty()).then(|| text.to_owned());
    Pod {
        metadata: ObjectMeta {
            name: Some(pod_name(&key.dag_id, &key.task_id, attempt.try_number)),
            namespace: Some(namespace.to_owned()),
            labels: Some(labels),
            annotations: Some(annotations),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            restart_policy: Some("Never".to_owned()),
            automount_service_account_token: Some(false),
            security_context: run_as_non_root.then(|| PodSecurityContext {
                fs_group: Some(NON_ROOT_FS_GROUP),
                ..PodSecurityContext::default()
            }),
            node_selector: (!execution.node_selector.is_empty())
                .then(|| execution.node_selector.clone()),
            tolerations: (!execution.tolerations.is_empty())
                .then(|| execution.tolerations.iter().map(pod_toleration).collect()),
            priority_class_name: non_empty(&execution.priority_class),
            service_account_name: non_empty(&execution.service_account),
            runtime_class_name: non_empty(&execution.runtime_class_name),
            containers: vec![container],
            volumes: source.map(|_| vec![source_volume()]),
            ..PodSpec::default()
        }),
        status: None,
    }
}

/// The downward API volume that projects [`ANNOTATION_DAG_SOURCE`] as [`SOURCE_FILE`].
fn source_volume() -> Volume {
    Volume {
        name: SOURCE_VOLUME.to_owned(),
        downward_api: Some(DownwardAPIVolumeSource {
            items: Some(vec![DownwardAPIVolumeFile {
                path: SOURCE_FILE.to_owned(),
                field_ref: Some(ObjectFieldSelector {
                    field_path: format!("metadata.annotations['{ANNOTATION_DAG_SOURCE}']"),
                    ..ObjectFieldSelector::default()
                }),
                ..DownwardAPIVolumeFile::default()
            }]),
            ..DownwardAPIVolumeSource::default()
        }),
        ..Volume::default()
    }
}

/// The pod name: `dexaflow-<dag>-<task>-<try>` sanitized (a part that sanitizes to nothing is
/// left out) and cut so that, with `-` and eight random hex characters, it is a DNS label of at
/// most 63 characters.
pub fn pod_name(dag_id: &str, task_id: &str, try_number: u32) -> String {
    let suffix = format!("{:08x}", fastrand::u32(..));
    let try_number = try_number.to_string();
    let (dag, task) = (sanitize(dag_id), sanitize(task_id));
    let parts = ["dexaflow", dag.as_str(), task.as_str(), try_number.as_str()];
    let base = parts
        .iter()
        .filter(|part| !part.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join("-");
    let room = MAX_NAME - suffix.len() - 1;
    // `base` is ASCII after sanitizing, so any byte index is a character boundary.
    let base = base[..base.len().min(room)].trim_end_matches('-');
    format!("{base}-{suffix}")
}

/// An id as a label value, distinct for distinct ids and always valid.
///
/// An id that is a valid label value already is kept as it is. Any other (too long, empty, or
/// with characters a label value cannot hold) becomes its sanitized form cut to a prefix, then
/// `-` and 12 hex characters of the raw id's SHA-256: so two ids that sanitize alike, two long
/// ids that share a prefix, and ids that sanitize to nothing (just the 12 hex) stay distinct.
pub fn label_value(id: &str) -> String {
    if !id.is_empty() && label_value_problem(id).is_none() {
        return id.to_owned();
    }
    let hash: String = Sha256::digest(id.as_bytes())
        .iter()
        .take(LABEL_HASH_LEN / 2)
        .map(|byte| format!("{byte:02x}"))
        .collect();
    let sanitized: String = id
        .chars()
        .map(|ch| {
            if ch.is_ascii_alphanumeric() || matches!(ch, '-' | '_' | '.') {
                ch
            } else {
                '-'
            }
        })
        .collect();
    let edge = |ch: char| !ch.is_ascii_alphanumeric();
    let sanitized = sanitized.trim_matches(edge);
    // ASCII after sanitizing, so any byte index is a character boundary.
    let prefix =
        sanitized[..sanitized.len().min(MAX_NAME - LABEL_HASH_LEN - 1)].trim_end_matches(edge);
    if prefix.is_empty() {
        hash
    } else {
        format!("{prefix}-{hash}")
    }
}

/// Lower-cases `id`, turns every character other than `a-z`, `0-9` and `-` into `-`, and trims
/// `-` from both ends: a valid DNS label part (or nothing).
fn sanitize(id: &str) -> String {
    let mapped: String = id
        .chars()
        .map(|ch| {
            let ch = ch.to_ascii_lowercase();
            if ch.is_ascii_lowercase() || ch.is_ascii_digit() {
                ch
            } else {
                '-'
            }
        })
        .collect();
    mapped.trim_matches('-').to_owned()
}

fn env_var(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value: Some(value.to_owned()),
        ..EnvVar::default()
    }
}

fn pod_toleration(toleration: &Toleration) -> PodToleration {
    PodToleration {
        key: (!toleration.key.is_empty()).then(|| toleration.key.clone()),
        operator: Some(toleration.operator.as_str().to_owned()),
        value: (!toleration.value.is_empty()).then(|| toleration.value.clone()),
        effect: toleration.effect.map(|effect| effect.as_str().to_owned()),
        toleration_seconds: toleration.toleration_seconds,
    }
}

/// The quantities of a resource list that parse, under their Kubernetes names; `None` when
/// none do.
fn quantities(list: &ResourceList) -> Option<BTreeMap<String, Quantity>> {
    let quantities: BTreeMap<String, Quantity> = list
        .set()
        .filter(|(_, value)| crate::admission::parse_milli(value).is_ok())
        // Kubernetes spells resource names with hyphens: `ephemeral-storage`.
        .map(|(name, value)| (name.replace('_', "-"), Quantity(value.to_owned())))
        .collect();
    (!quantities.is_empty()).then_some(quantities)
}
