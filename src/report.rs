//! How the `dispatch` command shows task instances: a table for people, JSON for programs.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use crate::admission::{Toleration, escape_controls};
use crate::dispatch::TaskInstance;
use crate::dispatch::task::State;

/// One task instance as `--output json` prints it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Row {
    /// The tenant.
    pub tenant: String,
    /// The DAG id.
    pub dag_id: String,
    /// The run id.
    pub run_id: String,
    /// The task id.
    pub task_id: String,
    /// The try number.
    pub try_number: u32,
    /// The state, as Dexaflow spells it.
    pub state: &'static str,
    /// Why it failed or what it waits for; `null` when nothing.
    pub failure_reason: Option<String>,
    /// What the attempt waited for before it was admitted (`admission hold: ...`); `null` when
    /// it was admitted at its first offer.
    pub admitted_after: Option<String>,
    /// `dedicated (<reason>)` or `warm` once admitted; `null` before.
    pub placement: Option<String>,
    /// The node selector it runs with (after every hook's changes).
    pub node_selector: BTreeMap<String, String>,
    /// The tolerations it runs with.
    pub tolerations: Vec<Toleration>,
    /// The service account it runs with.
    pub service_account: String,
    /// The priority class it runs with.
    pub priority_class: String,
    /// The labels it runs with.
    pub labels: BTreeMap<String, String>,
    /// Whether an agent token was minted for it.
    pub token_minted: bool,
}

impl Row {
    /// The row of one task instance.
    pub fn of(instance: &TaskInstance) -> Row {
        let key = &instance.task.key;
        let execution = instance.execution.clone().unwrap_or_default();
        Row {
            tenant: key.tenant.clone(),
            dag_id: key.dag_id.clone(),
            run_id: key.run_id.clone(),
            task_id: key.task_id.clone(),
            try_number: instance.try_number,
            state: instance.state.as_str(),
            failure_reason: instance.failure_reason.as_ref().map(ToString::to_string),
            admitted_after: instance.waited_for.as_ref().map(ToString::to_string),
            placement: instance.placement.as_ref().map(ToString::to_string),
            node_selector: execution.node_selector,
            tolerations: execution.tolerations,
            service_account: execution.service_account,
            priority_class: execution.priority_class,
            labels: execution.labels,
            token_minted: instance.token_minted,
        }
    }
}

/// The task instances as a JSON array.
///
/// # Errors
/// Only if serialization fails, which plain rows never do.
pub fn json(instances: &[TaskInstance]) -> serde_json::Result<String> {
    let rows: Vec<Row> = instances.iter().map(Row::of).collect();
    serde_json::to_string_pretty(&rows)
}

/// The task instances as an aligned text table with a header; nothing when there are none, so
/// that the [`summary`] alone says so.
///
/// Every cell is printed through [`escape_controls`], so that no id or reason can end its line
/// or rewrite the terminal.
pub fn table(instances: &[TaskInstance]) -> String {
    if instances.is_empty() {
        return String::new();
    }
    let header = [
        "TENANT",
        "DAG",
        "RUN",
        "TASK",
        "TRY",
        "STATE",
        "PLACEMENT",
        "REASON",
    ];
    let rows: Vec<[String; 8]> = instances
        .iter()
        .map(|instance| {
            let row = Row::of(instance);
            [
                row.tenant,
                row.dag_id,
                row.run_id,
                row.task_id,
                row.try_number.to_string(),
                row.state.to_owned(),
                row.placement.unwrap_or_else(|| "-".to_owned()),
                match (row.failure_reason, row.admitted_after) {
                    (Some(reason), _) => reason,
                    (None, Some(waited)) => format!("admitted after {waited}"),
                    (None, None) => "-".to_owned(),
                },
            ]
            .map(|cell| escape_controls(&cell).into_owned())
        })
        .collect();
    let mut widths = header.map(str::len);
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: &[&str]| {
        let last = cells.len() - 1;
        for (index, (cell, width)) in cells.iter().zip(widths).enumerate() {
            if index == last {
                out.push_str(cell);
            } else {
                let _ = write!(out, "{cell:<width$}  ");
            }
        }
        out.push('\n');
    };
    line(&header);
    for row in &rows {
        let cells: Vec<&str> = row.iter().map(String::as_str).collect();
        line(&cells);
    }
    out
}

/// One line counting task instances by state, such as
/// `6 task instances: 3 success, 3 failed (2 refused); 4 tokens minted`, or saying that there
/// are none.
pub fn summary(instances: &[TaskInstance]) -> String {
    if instances.is_empty() {
        return "no task instances: the workload has no tasks".to_owned();
    }
    let mut by_state: BTreeMap<&str, usize> = BTreeMap::new();
    for instance in instances {
        *by_state.entry(instance.state.as_str()).or_default() += 1;
    }
    let refused = instances
        .iter()
        .filter(|instance| {
            instance.state == State::Failed
                && instance
                    .failure_reason
                    .as_ref()
                    .is_some_and(|reason| reason.reason().is_refusal())
        })
        .count();
    let tokens = instances
        .iter()
        .filter(|instance| instance.token_minted)
        .count();
    let states: Vec<String> = by_state
        .iter()
        .map(|(state, count)| {
            if *state == "failed" && refused > 0 {
                format!("{count} {state} ({refused} refused)")
            } else {
                format!("{count} {state}")
            }
        })
        .collect();
    format!(
        "{} task instances: {}; {tokens} tokens minted",
        instances.len(),
        states.join(", ")
    )
}
