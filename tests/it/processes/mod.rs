//! Helpers for tests that run real processes: wait for a file a task writes, read a pid it
//! wrote, and tell whether a process still runs. Waits are bounded polls, never fixed sleeps.
//!
//! A module of the `it` test binary, and compiled again by `#[path]` into other binaries (the
//! tests of their own in `tests/`, a bench), each of which uses only part of it, so items unused
//! there would warn; the allow below is for that and nothing else.
#![allow(dead_code)]

use std::path::Path;
use std::time::{Duration, Instant};

/// The binary under test, as Cargo built it for the tests.
pub const BINARY: &str = env!("CARGO_BIN_EXE_dexaflow-admission");

/// A workload of one task (`true`) for each of the tenants acme, gpu-lab, finance and umbrella,
/// for the tests that send each tenant's attempt to a hook that judges by tenant.
pub const FOUR_TENANTS: &str = "runs:
  - {tenant: acme, dag_id: etl, run_id: r1, tasks: [{task_id: extract, command: [\"true\"]}]}
  - {tenant: gpu-lab, dag_id: train, run_id: r1, tasks: [{task_id: fit, command: [\"true\"]}]}
  - {tenant: finance, dag_id: close, run_id: r1, tasks: [{task_id: report, command: [\"true\"]}]}
  - {tenant: umbrella, dag_id: billing, run_id: r1, tasks: [{task_id: invoice, command: [\"true\"]}]}
";

/// How long a poll waits before the test fails: far longer than anything it waits for takes.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// Calls `check`, `every` apart, until it gives a value, and returns it: a bounded poll of
/// something outside the test (a child process, its log, a server), never a wait for time to
/// pass. Once `deadline` has passed, the test fails with the reason `check` last gave.
pub fn poll_until<T>(
    deadline: Instant,
    every: Duration,
    mut check: impl FnMut() -> Result<T, String>,
) -> T {
    loop {
        match check() {
            Ok(value) => return value,
            Err(why) => assert!(Instant::now() < deadline, "{why}"),
        }
        std::thread::sleep(every);
    }
}

/// Polls `check` until it is true, failing the test naming `what` after [`PATIENCE`].
pub fn wait_until(what: &str, mut check: impl FnMut() -> bool) {
    poll_until(Instant::now() + PATIENCE, Duration::from_millis(10), || {
        check()
            .then_some(())
            .ok_or_else(|| format!("gave up waiting for {what}"))
    });
}

/// Waits until a task has written a whole line to `path` and returns it without the newline.
pub fn wait_for_line(path: &Path) -> String {
    let mut line = String::new();
    wait_until(
        &format!("{} to be written", path.display()),
        || match std::fs::read_to_string(path) {
            Ok(text) if text.ends_with('\n') => {
                line = text.trim_end().to_owned();
                true
            }
            _ => false,
        },
    );
    line
}

/// Waits for the pid a task wrote to `path`.
pub fn wait_for_pid(path: &Path) -> i32 {
    let line = wait_for_line(path);
    line.parse()
        .unwrap_or_else(|_| panic!("{} holds a pid, not {line:?}", path.display()))
}

/// Whether process `pid` runs: it exists and is not a zombie waiting to be reaped (a killed
/// grandchild is reaped by whoever adopted it, in its own time).
pub fn is_running(pid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // The state follows the command name, which is in parentheses and may hold spaces.
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next());
    state != Some("Z") && state != Some("X")
}

/// Waits until process `pid` no longer runs.
pub fn wait_until_gone(pid: i32) {
    wait_until(&format!("process {pid} to end"), || !is_running(pid));
}

/// The `dexaflow-admission` binary as a command, with an environment of `PATH` alone, so that
/// no `DEXAFLOW_` or `RUST_LOG` variable of the test's own reaches it.
pub fn dexaflow() -> std::process::Command {
    let mut command = std::process::Command::new(BINARY);
    command.env_clear();
    if let Some(path) = std::env::var_os("PATH") {
        command.env("PATH", path);
    }
    command
}

/// `stderr` without its first line when that line names the metrics address, as every command
/// that exports metrics prints it first: what the command said besides.
pub fn without_metrics_line(stderr: &str) -> &str {
    match stderr.split_once('\n') {
        Some((first, rest)) if first.starts_with("metrics: listening on http://") => rest,
        _ => stderr,
    }
}

/// What an interrupted `dispatch` said after its metrics line, without the line that says it is
/// stopping (checked to be there, first, saying that a second signal does not cut it short).
pub fn after_stopping_line(stderr: &str) -> &str {
    let rest = without_metrics_line(stderr);
    match rest.split_once('\n') {
        Some((first, after))
            if first.starts_with("stopping: ") && first.ends_with("no task outlives dispatch)") =>
        {
            after
        }
        _ => panic!("no stopping line first in {stderr:?}"),
    }
}

/// `dexaflow-admission dispatch` of `workload` under `config`; more flags may follow.
pub fn dispatch(config: &Path, workload: &Path) -> std::process::Command {
    let mut command = dexaflow();
    command
        .arg("dispatch")
        .arg("--config")
        .arg(config)
        .arg("--workload")
        .arg(workload)
        .stdin(std::process::Stdio::null());
    command
}

/// Writes `text` to `dir/name` and returns the path.
pub fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("the temporary directory is writable");
    path
}

/// Writes `dir/workload.yaml`: one run of tenant `acme`, DAG `etl`, run `r1`, with `run` (more
/// keys of the run, each line indented by four spaces) and `tasks` (its task list, one entry a
/// line indented by six spaces).
pub fn workload(dir: &Path, run: &str, tasks: &str) -> std::path::PathBuf {
    let text = format!(
        "runs:\n  - tenant: acme\n    dag_id: etl\n    run_id: r1\n{run}    tasks:\n{tasks}"
    );
    write(dir, "workload.yaml", &text)
}

/// A lite config that ticks every 20 ms, logs under `dir/logs` and exports metrics on a port of
/// its own; `lite` adds keys to `executor.lite` (`max_parallel: 1`), `executor` adds lines to
/// `executor` (`  unit: {...}`), `extra` adds sections at the end.
pub fn lite_config(dir: &Path, lite: &str, executor: &str, extra: &str) -> std::path::PathBuf {
    let text = format!(
        "scheduler: {{loop_interval_ms: 20}}\n\
         executor:\n  type: lite\n  lite: {{log_dir: {}, kill_grace: 5s, {lite}}}\n{executor}\
         metrics: {{listen: \"127.0.0.1:0\"}}\n{extra}",
        dir.join("logs").display()
    );
    write(dir, "dexaflow.yaml", &text)
}
