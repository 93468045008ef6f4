//! How the `dispatch` command shows task instances: a table for people, JSON for programs.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;
use unicode_width::UnicodeWidthStr;

use crate::admission::{Toleration, escape_controls};
use crate::dispatch::TaskInstance;
use crate::dispatch::task::{State, TaskKey};

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
/// Every cell is printed through `escape_controls`, so that no id or reason can end its line
/// or rewrite the terminal, and padded by the columns it takes on a terminal (a CJK character or
/// an emoji takes two), so that the columns line up whatever the ids are written in.
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
    let mut widths = header.map(UnicodeWidthStr::width);
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.width());
        }
    }
    let mut out = String::new();
    let mut line = |cells: &[&str]| {
        let last = cells.len() - 1;
        for (index, (cell, width)) in cells.iter().zip(widths).enumerate() {
            out.push_str(cell);
            if index != last {
                // Two spaces between columns, after the cell's own padding.
                let padding = width.saturating_sub(cell.width()) + 2;
                out.extend(std::iter::repeat_n(' ', padding));
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
/// `6 task instances: 3 success, 3 failed (2 refused); 4 tokens minted` (`1 task instance`,
/// `1 token minted` for one), or saying that there are none.
pub fn summary(instances: &[TaskInstance]) -> String {
    if instances.is_empty() {
        return "no task instances: the workload has no tasks".to_owned();
    }
    // By name, so that the states read in the same order every time.
    let mut by_state: BTreeMap<&str, (State, usize)> = BTreeMap::new();
    for instance in instances {
        by_state
            .entry(instance.state.as_str())
            .or_insert((instance.state, 0))
            .1 += 1;
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
        .map(|(name, (state, count))| {
            if *state == State::Failed && refused > 0 {
                format!("{count} {name} ({refused} refused)")
            } else {
                format!("{count} {name}")
            }
        })
        .collect();
    format!(
        "{}: {}; {} minted",
        counted(instances.len(), "task instance", "task instances"),
        states.join(", "),
        counted(tokens, "token", "tokens")
    )
}

/// `count` and the noun, singular for one: `1 token`, `2 tokens`, `0 tokens`.
fn counted(count: usize, one: &str, many: &str) -> String {
    format!("{count} {}", if count == 1 { one } else { many })
}

/// The progress line `dispatch` keeps on a terminal while it waits: how many task instances
/// are still to settle, and what one of them waits for, when one waits (a hook's hold, a hook
/// that is unavailable), so that a long wait says why.
///
/// Shown each task instance through [`Progress::see`], it keeps the waiting one with the
/// smallest key, so that the line does not jump between instances from one check to the next.
#[derive(Debug, Default)]
pub struct Progress {
    waiting: Option<(TaskKey, String)>,
}

impl Progress {
    /// The longest reason the line shows, in terminal columns, so that on a wide terminal the
    /// task instance it is about stays in view (the whole line is cut to the terminal's width
    /// by [`Progress::rewrite`]).
    const MAX_REASON_WIDTH: usize = 60;

    /// Takes `instance` into account.
    pub fn see(&mut self, instance: &TaskInstance) {
        if instance.state != State::Scheduled {
            return;
        }
        let Some(reason) = &instance.failure_reason else {
            return;
        };
        let key = &instance.task.key;
        if self.waiting.as_ref().is_some_and(|(shown, _)| shown <= key) {
            return;
        }
        self.waiting = Some((key.clone(), reason.to_string()));
    }

    /// The line for `unsettled` task instances, such as `waiting for 2 task instances to
    /// settle; finance/close/r1/report: admission hold: quarter-end close`, and no more than
    /// that: the caller rewrites it in place.
    pub fn line(&self, unsettled: usize) -> String {
        let mut line = format!(
            "waiting for {} to settle",
            counted(unsettled, "task instance", "task instances")
        );
        if let Some((key, reason)) = &self.waiting {
            let _ = write!(
                line,
                "; {key}: {}",
                cut_to_width(&escape_controls(reason), Progress::MAX_REASON_WIDTH)
            );
        }
        line
    }

    /// `line` as it replaces a line `shown` columns wide on a terminal `columns` wide: cut to
    /// fit short of the last column (a line that wraps is rewritten only in its last row, and
    /// a terminal may wrap on the last column), after a carriage return, and padded with
    /// spaces over what is left of the longer line before it (no escape sequence, which
    /// `NO_COLOR` readers and dumb terminals do not want). Returns the text and the width now
    /// shown.
    pub fn rewrite(line: &str, shown: usize, columns: usize) -> (String, usize) {
        let line = cut_to_width(line, columns.saturating_sub(1).max(1));
        let width = line.width();
        let padding = shown.saturating_sub(width);
        let text = format!("\r{line}{}", " ".repeat(padding));
        (text, width)
    }
}

/// How many columns the terminal on standard error has now (it may be resized while a line is
/// rewritten on it); 80, the common default, when it does not say.
pub fn terminal_columns() -> usize {
    rustix::termios::tcgetwinsize(std::io::stderr())
        .ok()
        .map(|size| usize::from(size.ws_col))
        .filter(|&columns| columns > 0)
        .unwrap_or(80)
}

/// `text` cut to at most `width` terminal columns, with `…` in place of what was cut.
fn cut_to_width(text: &str, width: usize) -> String {
    if text.width() <= width {
        return text.to_owned();
    }
    let mut cut = String::new();
    let mut used = 0;
    for ch in text.chars() {
        let ch_width = unicode_width::UnicodeWidthChar::width(ch).unwrap_or(0);
        if used + ch_width + 1 > width {
            break;
        }
        used += ch_width;
        cut.push(ch);
    }
    cut.push('…');
    cut
}
