//! Every pod manifest the kubernetes executor writes is one the API server accepts (issue 12,
//! B.7): the hostile workload of `tests/data/hostile/` (ids that are long, unicode or start with
//! a digit, and keys and values Kubernetes rejects in every field a task sets) is dispatched by
//! the binary with the kubernetes executor writing into a temporary dry-run directory, and every
//! manifest is checked by [`apiserver`], the API server's pod validation on the fields this
//! project sets, written here from Kubernetes' rules and independently of the crate's checks.
//! `.ci/run` also runs the `kubernetes-validate` schema check over the same manifests.

use crate::processes::BINARY;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use dexaflow_admission::config::Config;
use dexaflow_admission::dispatch::effective::{Effective, effective_execution};
use dexaflow_admission::dispatch::executor::Admitted;
use dexaflow_admission::dispatch::executor::kubernetes::{ANNOTATION_TASK_INSTANCE_ID, build_pod};
use dexaflow_admission::dispatch::placement::{DedicatedReason, PodKind};
use dexaflow_admission::dispatch::task::Task;
use dexaflow_admission::workload;
use k8s_openapi::api::core::v1::Pod;
use serde_json::Value;

const CONFIG: &str = "tests/data/hostile/dexaflow.yaml";
const WORKLOAD: &str = "tests/data/hostile/workload.yaml";
/// The config's `executor.task_service_account`, `executor.task_namespace` and source-mode
/// image, for the pods a task would get if nothing checked it.
const DEFAULT_SERVICE_ACCOUNT: &str = "dexaflow-task";
const NAMESPACE: &str = "dexaflow-tasks";
const RUNTIME_IMAGE: &str = "ghcr.io/dexadata/runtime@sha256:4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945";
/// The workload's convention: a task whose id starts so sets something Kubernetes rejects.
const HOSTILE: &str = "bad-";

/// What one `dispatch` of the hostile workload left: a row per task instance, keyed by task
/// instance id, and the manifests written, each with the task instance id it carries.
struct Dispatched {
    rows: BTreeMap<String, Value>,
    manifests: Vec<(String, Pod)>,
}

fn dispatch_hostile_workload() -> Dispatched {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let output = Command::new(BINARY)
        .args(["dispatch", "--config", CONFIG, "--workload", WORKLOAD])
        .args(["--output", "json", "--metrics-listen", "127.0.0.1:0"])
        .env("DEXAFLOW_EXECUTOR_KUBERNETES_DRY_RUN_DIR", dir.path())
        .output()
        .expect("the binary runs");
    assert!(
        output.status.success(),
        "dispatch failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let rows: Vec<Value> = serde_json::from_slice(&output.stdout).expect("a JSON array of rows");
    let rows = rows
        .into_iter()
        .map(|row| {
            let id = ["tenant", "dag_id", "run_id", "task_id"]
                .map(|field| row[field].as_str().expect("ids are strings").to_owned())
                .join(".");
            (id, row)
        })
        .collect();
    Dispatched {
        rows,
        manifests: manifests(dir.path()),
    }
}

fn manifests(dir: &Path) -> Vec<(String, Pod)> {
    std::fs::read_dir(dir)
        .expect("the dry-run directory")
        .map(|entry| {
            let path = entry.expect("a directory entry").path();
            let text = std::fs::read_to_string(&path).expect("a manifest");
            let pod: Pod = serde_yaml_ng::from_str(&text)
                .unwrap_or_else(|error| panic!("{} is no pod: {error}", path.display()));
            let id = pod
                .metadata
                .annotations
                .as_ref()
                .and_then(|annotations| annotations.get(ANNOTATION_TASK_INSTANCE_ID))
                .cloned()
                .unwrap_or_else(|| panic!("{} names no task instance", path.display()));
            (id, pod)
        })
        .collect()
}

fn hostile_tasks() -> Vec<Task> {
    let config = Config::load(Path::new(CONFIG), crate::common::NO_ENV).expect("the config loads");
    workload::load(Path::new(WORKLOAD), &config.dispatch.executor)
        .expect("the hostile workload loads")
}

/// The pod `task` would get if nothing checked it: its own fields, the default service account,
/// the runtime image and its source when it names no image.
fn unchecked_pod(task: &Task) -> Pod {
    let source_mode = task.image.is_empty();
    let chosen = !task.execution.service_account.is_empty();
    let effective = Effective {
        image: if source_mode {
            RUNTIME_IMAGE.to_owned()
        } else {
            task.image.clone()
        },
        resources: task.resources.clone(),
        service_account: if chosen {
            task.execution.service_account.clone()
        } else {
            DEFAULT_SERVICE_ACCOUNT.to_owned()
        },
        service_account_chosen: chosen,
        size: 1,
        source_mode,
        unit_warning: None,
    };
    let attempt = Admitted {
        task: Arc::new(task.clone()),
        image: effective.image.clone(),
        task_instance_id: task.key.task_instance_id(),
        try_number: 1,
        attempt_epoch: 1,
        resources: effective.resources.clone(),
        execution: effective_execution(task, &effective),
        placement: PodKind::Dedicated(if source_mode {
            DedicatedReason::SourceMode
        } else {
            DedicatedReason::NoWarmPool
        }),
        token: "token".to_owned(),
    };
    build_pod(&attempt, NAMESPACE, true)
}

#[test]
fn every_manifest_written_for_the_hostile_workload_is_a_pod_the_api_server_accepts() {
    let dispatched = dispatch_hostile_workload();
    assert!(
        dispatched.manifests.len() >= 10,
        "the hostile workload must write pods to check, wrote {}",
        dispatched.manifests.len()
    );
    let problems: Vec<String> = dispatched
        .manifests
        .iter()
        .flat_map(|(id, pod)| {
            apiserver::validate_pod(pod)
                .into_iter()
                .map(move |problem| format!("{id}: {problem}"))
        })
        .collect();
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn every_hostile_task_is_refused_with_no_token_and_no_pod_and_every_other_runs_with_one_pod() {
    let dispatched = dispatch_hostile_workload();
    let tasks = hostile_tasks();
    assert_eq!(dispatched.rows.len(), tasks.len(), "one row per task");
    for task in &tasks {
        let id = task.key.task_instance_id();
        let row = &dispatched.rows[&id];
        let pods = dispatched
            .manifests
            .iter()
            .filter(|(pod_id, _)| *pod_id == id)
            .count();
        if task.key.task_id.starts_with(HOSTILE) {
            assert_eq!(row["state"], "failed", "{id}: {row}");
            let reason = row["failure_reason"].as_str().unwrap_or_default();
            assert!(reason.starts_with("dispatch refused: "), "{id}: {reason}");
            assert_eq!(row["token_minted"], false, "{id}");
            assert_eq!(pods, 0, "{id} got a pod");
        } else {
            assert_eq!(row["state"], "queued", "{id}: {row}");
            assert_eq!(row["token_minted"], true, "{id}");
            assert_eq!(pods, 1, "{id} got {pods} pods");
        }
    }
}

#[test]
fn every_hostile_task_whose_pod_would_be_invalid_is_refused_with_no_token() {
    let tasks = hostile_tasks();
    let would_be_invalid: Vec<&Task> = tasks
        .iter()
        .filter(|task| !apiserver::validate_pod(&unchecked_pod(task)).is_empty())
        .collect();
    assert!(
        would_be_invalid.len() >= 15,
        "the hostile workload must hold pods the API server would reject, has {}",
        would_be_invalid.len()
    );
    let dispatched = dispatch_hostile_workload();
    for task in would_be_invalid {
        let id = task.key.task_instance_id();
        let row = &dispatched.rows[&id];
        assert_eq!(row["state"], "failed", "{id}: {row}");
        let reason = row["failure_reason"].as_str().unwrap_or_default();
        assert!(reason.starts_with("dispatch refused: "), "{id}: {reason}");
        assert_eq!(row["token_minted"], false, "{id}");
        assert!(
            dispatched.manifests.iter().all(|(pod_id, _)| *pod_id != id),
            "{id} got a pod"
        );
    }
}

#[test]
fn the_hostile_workload_s_ids_give_every_pod_distinct_identity_labels() {
    let dispatched = dispatch_hostile_workload();
    let identities: BTreeSet<Vec<String>> = dispatched
        .manifests
        .iter()
        .map(|(_, pod)| {
            let labels = pod.metadata.labels.as_ref().expect("identity labels");
            ["tenant-id", "dag-id", "run-id", "task-id"]
                .map(|name| labels[&format!("dexaflow.io/{name}")].clone())
                .to_vec()
        })
        .collect();
    assert_eq!(identities.len(), dispatched.manifests.len());
    assert!(
        identities.iter().all(|identity| !identity[3].is_empty()),
        "{identities:#?}"
    );
}

/// The API server's validation of a pod (Kubernetes 1.34, `pkg/apis/core/validation` and
/// `apimachinery/pkg/util/validation`), on the fields this project sets.
mod apiserver {
    use std::collections::{BTreeMap, BTreeSet};

    use k8s_openapi::api::core::v1::{Container, Pod, Toleration};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    const MAX_DNS_LABEL: usize = 63;
    const MAX_DNS_SUBDOMAIN: usize = 253;
    const MAX_NAME_PART: usize = 63;
    const MAX_LABEL_VALUE: usize = 63;
    const MAX_ANNOTATIONS: usize = 256 * 1024;

    /// Every problem the API server would report for `pod`; empty when it accepts it.
    pub fn validate_pod(pod: &Pod) -> Vec<String> {
        let mut problems = Vec::new();
        let meta = &pod.metadata;
        match meta.name.as_deref() {
            Some(name) if is_dns_subdomain(name) => {}
            name => problems.push(format!("metadata.name {name:?}: not a DNS subdomain")),
        }
        match meta.namespace.as_deref() {
            Some(namespace) if is_dns_label(namespace) => {}
            namespace => {
                problems.push(format!("metadata.namespace {namespace:?}: not a DNS label"))
            }
        }
        let none = BTreeMap::new();
        check_labels(
            "metadata.labels",
            meta.labels.as_ref().unwrap_or(&none),
            &mut problems,
        );
        let annotations = meta.annotations.as_ref().unwrap_or(&none);
        let mut total = 0;
        for (key, value) in annotations {
            // ValidateAnnotations: the key lower-cased, then a qualified name.
            if !is_qualified_name(&key.to_lowercase()) {
                problems.push(format!(
                    "metadata.annotations: key {key:?} is not a qualified name"
                ));
            }
            total += key.len() + value.len();
        }
        if total > MAX_ANNOTATIONS {
            problems.push(format!(
                "metadata.annotations: {total} bytes, over {MAX_ANNOTATIONS}"
            ));
        }
        let Some(spec) = &pod.spec else {
            problems.push("spec: required".to_owned());
            return problems;
        };
        check_labels(
            "spec.nodeSelector",
            spec.node_selector.as_ref().unwrap_or(&none),
            &mut problems,
        );
        for (index, toleration) in spec.tolerations.iter().flatten().enumerate() {
            check_toleration(index, toleration, &mut problems);
        }
        for (field, name) in [
            ("serviceAccountName", &spec.service_account_name),
            ("priorityClassName", &spec.priority_class_name),
            ("runtimeClassName", &spec.runtime_class_name),
        ] {
            if let Some(name) = name {
                if !is_dns_subdomain(name) {
                    problems.push(format!("spec.{field} {name:?}: not a DNS subdomain"));
                }
            }
        }
        if !matches!(
            spec.restart_policy.as_deref(),
            None | Some("Always" | "OnFailure" | "Never")
        ) {
            problems.push(format!("spec.restartPolicy {:?}", spec.restart_policy));
        }
        let mut volumes = BTreeSet::new();
        for volume in spec.volumes.iter().flatten() {
            if !is_dns_label(&volume.name) || !volumes.insert(volume.name.clone()) {
                problems.push(format!(
                    "spec.volumes: name {:?} invalid or repeated",
                    volume.name
                ));
            }
            for item in volume
                .downward_api
                .iter()
                .flat_map(|source| source.items.iter().flatten())
            {
                let path = &item.path;
                if path.is_empty() || path.starts_with('/') || path.split('/').any(|p| p == "..") {
                    problems.push(format!(
                        "downwardAPI item path {path:?}: not a relative path"
                    ));
                }
                let field_path = item
                    .field_ref
                    .as_ref()
                    .map(|field| field.field_path.as_str());
                let key = field_path
                    .and_then(|path| path.strip_prefix("metadata.annotations['"))
                    .and_then(|rest| rest.strip_suffix("']"));
                match key {
                    Some(key) if is_qualified_name(&key.to_lowercase()) => {}
                    _ => problems.push(format!("downwardAPI fieldRef {field_path:?}: unsupported")),
                }
            }
        }
        if spec.containers.is_empty() {
            problems.push("spec.containers: required".to_owned());
        }
        for container in &spec.containers {
            check_container(container, &volumes, &mut problems);
        }
        problems
    }

    fn check_labels(field: &str, labels: &BTreeMap<String, String>, problems: &mut Vec<String>) {
        for (key, value) in labels {
            if !is_qualified_name(key) {
                problems.push(format!("{field}: key {key:?} is not a qualified name"));
            }
            if !is_label_value(value) {
                problems.push(format!(
                    "{field}: {key:?} value {value:?} is not a label value"
                ));
            }
        }
    }

    fn check_toleration(index: usize, toleration: &Toleration, problems: &mut Vec<String>) {
        let mut problem = |text: &str| problems.push(format!("spec.tolerations[{index}]: {text}"));
        let key = toleration.key.as_deref().unwrap_or_default();
        let operator = toleration.operator.as_deref().unwrap_or_default();
        let value = toleration.value.as_deref().unwrap_or_default();
        let effect = toleration.effect.as_deref().unwrap_or_default();
        if !key.is_empty() && !is_qualified_name(key) {
            problem("key is not a qualified name");
        }
        if key.is_empty() && operator != "Exists" {
            problem("operator must be Exists when key is empty");
        }
        if toleration.toleration_seconds.is_some() && effect != "NoExecute" {
            problem("effect must be NoExecute when tolerationSeconds is set");
        }
        match operator {
            "" | "Equal" if !is_label_value(value) => problem("value is not a label value"),
            "" | "Equal" => {}
            "Exists" if !value.is_empty() => problem("value must be empty when operator is Exists"),
            "Exists" => {}
            other => problem(&format!("unsupported operator {other:?}")),
        }
        if !matches!(effect, "" | "NoSchedule" | "PreferNoSchedule" | "NoExecute") {
            problem(&format!("unsupported effect {effect:?}"));
        }
    }

    fn check_container(
        container: &Container,
        volumes: &BTreeSet<String>,
        problems: &mut Vec<String>,
    ) {
        let mut problem =
            |text: String| problems.push(format!("container {:?}: {text}", container.name));
        if !is_dns_label(&container.name) {
            problem("name is not a DNS label".to_owned());
        }
        match container.image.as_deref() {
            Some(image) if !image.is_empty() && image.trim() == image => {}
            image => problem(format!(
                "image {image:?} is empty or has whitespace around it"
            )),
        }
        for var in container.env.iter().flatten() {
            // IsEnvVarName, relaxed (the default since 1.32, GA in 1.34).
            let printable = var
                .name
                .bytes()
                .all(|b| (32..=126).contains(&b) && b != b'=');
            if var.name.is_empty() || !printable {
                problem(format!("env name {:?} is invalid", var.name));
            }
        }
        for mount in container.volume_mounts.iter().flatten() {
            if !volumes.contains(&mount.name) || mount.mount_path.is_empty() {
                problem(format!(
                    "volume mount {:?} names no volume or no path",
                    mount.name
                ));
            }
        }
        let Some(resources) = &container.resources else {
            return;
        };
        let none = BTreeMap::new();
        let requests = resources.requests.as_ref().unwrap_or(&none);
        let limits = resources.limits.as_ref().unwrap_or(&none);
        for (list, quantities) in [("requests", requests), ("limits", limits)] {
            for (name, quantity) in quantities {
                if !matches!(name.as_str(), "cpu" | "memory" | "ephemeral-storage") {
                    problem(format!("resources.{list}: unsupported resource {name:?}"));
                }
                match value_of(quantity) {
                    Some(value) if value >= 0.0 => {}
                    _ => problem(format!(
                        "resources.{list}.{name}: {:?} is no quantity",
                        quantity.0
                    )),
                }
            }
        }
        for (name, limit) in limits {
            let (Some(request), Some(limit)) =
                (requests.get(name).and_then(value_of), value_of(limit))
            else {
                continue;
            };
            if request > limit * (1.0 + 1e-12) {
                problem(format!(
                    "resources.requests.{name} must be at most the limit"
                ));
            }
        }
    }

    /// A quantity's value, as `resource.ParseQuantity` reads
    /// `^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$`; `None` when it does not parse.
    fn value_of(quantity: &Quantity) -> Option<f64> {
        let text = quantity.0.as_str();
        let unsigned = text.strip_prefix(['+', '-']).unwrap_or(text);
        let sign = if text.starts_with('-') { -1.0 } else { 1.0 };
        let number_end = unsigned
            .find(|ch: char| !(ch.is_ascii_digit() || ch == '.'))
            .unwrap_or(unsigned.len());
        let (number, suffix) = unsigned.split_at(number_end);
        if number.matches('.').count() > 1 || !number.bytes().any(|b| b.is_ascii_digit()) {
            return None;
        }
        let number: f64 = number.parse().ok()?;
        let binary = |power: i32| Some(2f64.powi(10 * power));
        let scale = match suffix {
            "" => Some(1.0),
            "n" => Some(1e-9),
            "u" => Some(1e-6),
            "m" => Some(1e-3),
            "k" => Some(1e3),
            "M" => Some(1e6),
            "G" => Some(1e9),
            "T" => Some(1e12),
            "P" => Some(1e15),
            "E" => Some(1e18),
            "Ki" => binary(1),
            "Mi" => binary(2),
            "Gi" => binary(3),
            "Ti" => binary(4),
            "Pi" => binary(5),
            "Ei" => binary(6),
            other => {
                let exponent = other.strip_prefix(['e', 'E'])?;
                let digits = exponent.strip_prefix(['+', '-']).unwrap_or(exponent);
                if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                    return None;
                }
                Some(10f64.powi(exponent.parse().ok()?))
            }
        }?;
        Some(sign * number * scale)
    }

    /// `IsDNS1123Label`.
    fn is_dns_label(text: &str) -> bool {
        (1..=MAX_DNS_LABEL).contains(&text.len())
            && edged(text, |b| {
                b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'
            })
    }

    /// `IsDNS1123Subdomain`.
    fn is_dns_subdomain(text: &str) -> bool {
        (1..=MAX_DNS_SUBDOMAIN).contains(&text.len())
            && text.split('.').all(|part| {
                edged(part, |b| {
                    b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'
                })
            })
    }

    /// `IsQualifiedName`: `[prefix/]name`.
    fn is_qualified_name(text: &str) -> bool {
        let parts: Vec<&str> = text.split('/').collect();
        let (prefix, name) = match parts.as_slice() {
            [name] => (None, *name),
            [prefix, name] => (Some(*prefix), *name),
            _ => return false,
        };
        prefix.is_none_or(is_dns_subdomain)
            && (1..=MAX_NAME_PART).contains(&name.len())
            && edged(name, is_name_byte)
    }

    /// `IsValidLabelValue`.
    fn is_label_value(text: &str) -> bool {
        text.is_empty() || (text.len() <= MAX_LABEL_VALUE && edged(text, is_name_byte))
    }

    fn is_name_byte(b: u8) -> bool {
        b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.')
    }

    /// Non-empty, every byte allowed, and alphanumeric at both ends.
    fn edged(text: &str, allowed: impl Fn(u8) -> bool) -> bool {
        let bytes = text.as_bytes();
        match (bytes.first(), bytes.last()) {
            (Some(first), Some(last)) => {
                first.is_ascii_alphanumeric()
                    && last.is_ascii_alphanumeric()
                    && bytes.iter().all(|&b| allowed(b))
            }
            _ => false,
        }
    }
}
