//! The workload file of the `dispatch` command: DAG runs and their tasks, offered to the
//! dispatcher as scheduled task instances.
//!
//! ```yaml
//! runs:
//!   - tenant: acme
//!     dag_id: etl
//!     run_id: manual__1
//!     tasks:
//!       - task_id: extract
//!         image: ghcr.io/acme/etl:1.2
//!         command: [sh, -c, "echo extracting"]
//! ```

use std::path::Path;

use serde::Deserialize;
use serde_yaml_ng::{Mapping, Value};
use thiserror::Error;

use crate::dispatch::task::Task;

/// Why a workload file could not be loaded. Each names the file and, where it can, the entry.
#[derive(Debug, Error)]
pub enum WorkloadError {
    /// The file could not be read.
    #[error("reading workload {path}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is not YAML of the expected shape.
    #[error("workload {path}: {problem}")]
    Invalid {
        /// The file.
        path: String,
        /// What is wrong and where, such as `runs[0].tasks[2]: unknown key "imgae"`.
        problem: String,
    },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Workload {
    runs: Vec<Run>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Run {
    tenant: String,
    dag_id: String,
    run_id: String,
    tasks: Vec<Mapping>,
}

/// Reads the workload at `path`.
///
/// # Errors
/// A [`WorkloadError`] when the file cannot be read or an entry is malformed.
pub fn load(path: &Path) -> Result<Vec<Task>, WorkloadError> {
    let text = std::fs::read_to_string(path).map_err(|source| WorkloadError::Read {
        path: path.display().to_string(),
        source,
    })?;
    parse(&text).map_err(|problem| WorkloadError::Invalid {
        path: path.display().to_string(),
        problem,
    })
}

/// Parses a workload from YAML text; the error says which entry is wrong and how.
///
/// # Errors
/// The problem, prefixed with where it is (`runs[0].tasks[2]: ...`).
pub fn parse(text: &str) -> Result<Vec<Task>, String> {
    let workload: Workload = serde_yaml_ng::from_str(text).map_err(|error| error.to_string())?;
    let mut tasks = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for (run_index, run) in workload.runs.into_iter().enumerate() {
        for (task_index, mut entry) in run.tasks.into_iter().enumerate() {
            let at = format!("runs[{run_index}].tasks[{task_index}]");
            for key in entry.keys() {
                let known = key.as_str().is_some_and(|key| {
                    Task::FIELDS.contains(&key) && !matches!(key, "tenant" | "dag_id" | "run_id")
                });
                if !known {
                    return Err(format!("{at}: unknown key {}", describe(key)));
                }
            }
            entry.insert("tenant".into(), run.tenant.clone().into());
            entry.insert("dag_id".into(), run.dag_id.clone().into());
            entry.insert("run_id".into(), run.run_id.clone().into());
            let task: Task = serde_yaml_ng::from_value(Value::Mapping(entry))
                .map_err(|error| format!("{at}: {error}"))?;
            if !seen.insert(task.key.clone()) {
                return Err(format!("{at}: task {} appears twice", task.key));
            }
            tasks.push(task);
        }
    }
    Ok(tasks)
}

fn describe(key: &Value) -> String {
    match key.as_str() {
        Some(key) => format!("{key:?}"),
        None => format!("{key:?}"),
    }
}
