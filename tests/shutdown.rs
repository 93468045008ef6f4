//! `dispatch` with the lite executor as a process among others, on the built binary: SIGTERM
//! and Ctrl-C (SIGINT) drain it alike, no process a task started outlives it, a task that hangs
//! ends at its execution timeout, and many tasks run under a small limit of open files. And
//! `loadtest`, stopped by Ctrl-C, reports what it measured.

#[path = "it/processes/mod.rs"]
mod processes;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus, Stdio};

use dexaflow_admission::dispatch::executor::lite::ORPHANED;
use processes::{dispatch, lite_config, wait_for_pid, wait_until_gone, workload};
use rustix::process::{Pid, Signal, kill_process};
use serde_json::Value;

/// A workload whose task `long` writes its shell's pid and its `sleep` child's pid under `dir`,
/// then waits; and whose task `next` would write `dir/next.ran` if it ever started.
fn long_workload(dir: &Path) -> PathBuf {
    let tasks = format!(
        "      - task_id: long
        command: [sh, -c, 'echo $$ > {0}/leader.pid; sleep 300 & echo $! > {0}/child.pid; wait']
      - task_id: next
        command: [sh, -c, 'echo > {0}/next.ran']
",
        dir.display()
    );
    workload(dir, "", &tasks)
}

/// Starts `dispatch --output json` under a config whose lite executor runs one attempt at a
/// time, so that `next` waits for `long`'s slot. `buffer_size` above 0 dispatches through the
/// buffer and its admission workers, on threads of their own (the default `worker_threads`).
fn start(dir: &Path, buffer_size: usize) -> Child {
    let config = lite_config(dir, "max_parallel: 1", "", "");
    dispatch(&config, &long_workload(dir))
        .env(
            "DEXAFLOW_SCHEDULER_DISPATCH_BUFFER_SIZE",
            buffer_size.to_string(),
        )
        .args(["--output", "json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary starts")
}

/// What the dispatcher printed after `signal` once its task `long` ran, and the pids `long`
/// started.
struct Interrupted {
    status: ExitStatus,
    rows: Vec<Value>,
    stderr: String,
    pids: [i32; 2],
}

/// Sends `signal` to `child`, then reads everything it writes on its stdout and on `stderr`
/// (its stderr, or what is left of it) and waits for it to exit.
fn signal_and_collect(
    child: &mut Child,
    mut stderr: impl Read,
    signal: Signal,
) -> (ExitStatus, String, String) {
    let pid = Pid::from_raw(i32::try_from(child.id()).unwrap()).unwrap();
    kill_process(pid, signal).expect("the process runs");
    let (mut stdout, mut rest) = (String::new(), String::new());
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    stderr.read_to_string(&mut rest).unwrap();
    (child.wait().unwrap(), stdout, rest)
}

/// Interrupts a synchronous `dispatch` with `signal` once `long` runs.
fn interrupt(dir: &Path, signal: Signal) -> Interrupted {
    interrupt_buffered(dir, signal, 0)
}

/// [`interrupt`] with a dispatch buffer of `buffer_size`.
fn interrupt_buffered(dir: &Path, signal: Signal, buffer_size: usize) -> Interrupted {
    let mut child = start(dir, buffer_size);
    let pids = [
        wait_for_pid(&dir.join("leader.pid")),
        wait_for_pid(&dir.join("child.pid")),
    ];
    let stderr = child.stderr.take().unwrap();
    let (status, stdout, stderr) = signal_and_collect(&mut child, stderr, signal);
    let rows = serde_json::from_str(&stdout)
        .unwrap_or_else(|error| panic!("JSON rows ({error}): {stdout:?}; stderr {stderr:?}"));
    Interrupted {
        status,
        rows,
        stderr,
        pids,
    }
}

/// `(task_id, state, failure_reason, token_minted)` of each row.
fn summary(rows: &[Value]) -> Vec<(String, String, Option<String>, bool)> {
    rows.iter()
        .map(|row| {
            (
                row["task_id"].as_str().unwrap().to_owned(),
                row["state"].as_str().unwrap().to_owned(),
                row["failure_reason"].as_str().map(str::to_owned),
                row["token_minted"].as_bool().unwrap(),
            )
        })
        .collect()
}

/// What an interrupted run must show, whichever signal interrupted it: the running task
/// orphaned, the one waiting for a slot handed back unstarted, and the interruption said once.
fn assert_drained(interrupted: &Interrupted, dir: &Path) {
    assert_eq!(
        summary(&interrupted.rows),
        [
            (
                "long".to_owned(),
                "failed".to_owned(),
                Some(ORPHANED.to_owned()),
                true
            ),
            ("next".to_owned(), "scheduled".to_owned(), None, true),
        ]
    );
    assert_eq!(
        processes::after_stopping_line(&interrupted.stderr),
        "dexaflow-admission: interrupted before every task instance settled (1 left scheduled)\n"
    );
    assert_eq!(interrupted.status.code(), Some(2));
    assert!(!dir.join("next.ran").exists());
}

#[test]
fn sigterm_drains_prints_the_task_instances_and_exits_as_ctrl_c_does() {
    let dir = tempfile::tempdir().unwrap();

    let interrupted = interrupt(dir.path(), Signal::TERM);

    assert_drained(&interrupted, dir.path());
}

#[test]
fn ctrl_c_drains_prints_the_task_instances_and_exits_2() {
    let dir = tempfile::tempdir().unwrap();

    let interrupted = interrupt(dir.path(), Signal::INT);

    assert_drained(&interrupted, dir.path());
}

#[test]
fn no_process_a_task_started_outlives_the_dispatcher_it_ran_under() {
    let dir = tempfile::tempdir().unwrap();

    let interrupted = interrupt(dir.path(), Signal::TERM);

    // Killed before the dispatcher exited: the poll only lets the kernel finish the kill.
    for pid in interrupted.pids {
        wait_until_gone(pid);
    }
}

#[test]
fn sigterm_drains_a_buffered_dispatcher_whose_workers_have_threads_of_their_own_alike() {
    let dir = tempfile::tempdir().unwrap();

    let interrupted = interrupt_buffered(dir.path(), Signal::TERM, 16);

    assert_drained(&interrupted, dir.path());
    for pid in interrupted.pids {
        wait_until_gone(pid);
    }
}

#[test]
fn a_hanging_task_fails_at_its_execution_timeout_and_the_run_completes() {
    let dir = tempfile::tempdir().unwrap();
    let config = lite_config(dir.path(), "", "", "");
    let workload = workload(
        dir.path(),
        "    default_args: {execution_timeout_seconds: 1}\n",
        "      - {task_id: hangs, command: [sleep, '300']}\n",
    );

    let output = dispatch(&config, &workload)
        .args(["--output", "json"])
        .output()
        .expect("the binary runs");

    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let rows: Vec<Value> = serde_json::from_slice(&output.stdout).expect("JSON rows");
    assert_eq!(
        summary(&rows),
        [(
            "hangs".to_owned(),
            "failed".to_owned(),
            Some("execution timed out after 1s".to_owned()),
            true
        )]
    );
}

#[test]
fn five_hundred_sleeping_tasks_all_succeed_under_a_limit_of_128_open_files() {
    let dir = tempfile::tempdir().unwrap();
    // More attempts may run at once than there are descriptors: launches that find none left
    // are backpressure, offered again until they get one.
    let config = lite_config(dir.path(), "max_parallel: 500", "", "");
    let tasks: String = (0..500)
        .map(|index| format!("      - {{task_id: t{index:03}, command: [sleep, '1']}}\n"))
        .collect();
    let workload = workload(dir.path(), "", &tasks);
    let line = format!(
        "ulimit -n 128 && exec {} dispatch --output json --config {} --workload {}",
        processes::BINARY,
        config.display(),
        workload.display()
    );

    let mut shell = std::process::Command::new("sh");
    shell
        .env_clear()
        .env("RUST_LOG", "warn")
        .args(["-c", &line]);
    if let Some(path) = std::env::var_os("PATH") {
        shell.env("PATH", path);
    }
    let output = shell.stdin(Stdio::null()).output().expect("sh runs");

    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let rows: Vec<Value> = serde_json::from_slice(&output.stdout).expect("JSON rows");
    assert_eq!(rows.len(), 500);
    let not_successes: Vec<&Value> = rows
        .iter()
        .filter(|row| row["state"] != "success")
        .collect();
    assert!(not_successes.is_empty(), "{not_successes:?}");
    assert!(
        stderr.contains("backing off and re-offering (not counted against dispatch budget)"),
        "the limit was reached, or this test proves nothing"
    );
}

#[test]
fn ctrl_c_stops_a_loadtest_which_reports_what_it_measured_and_exits_2() {
    let mut child = std::process::Command::new(processes::BINARY)
        .args([
            "loadtest",
            "--duration",
            "10m",
            "--rate",
            "1000",
            "--hook",
            "noop",
        ])
        .args(["--metrics-listen", "127.0.0.1:0", "--output", "json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary starts");
    // The exporter's line comes once the run listens for signals.
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut started = String::new();
    std::io::BufRead::read_line(&mut stderr, &mut started).unwrap();
    assert!(started.starts_with("metrics: listening on"), "{started:?}");
    let (status, stdout, rest) = signal_and_collect(&mut child, stderr, Signal::INT);

    assert_eq!(status.code(), Some(2), "{rest}");
    let report: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|error| panic!("a JSON report ({error}): {stdout:?}; stderr {rest:?}"));
    assert_eq!(report["interrupted"], true);
    assert_eq!(report["lost"], 0);
    let offered = report["offered"].as_u64().expect("a count");
    assert!(
        offered < 600_000,
        "ten minutes at 1000/s were not all offered: {offered}"
    );
    assert!(
        rest.contains(&format!(
            "interrupted: the report covers what was offered before the signal ({offered} offered)"
        )),
        "{rest}"
    );
}
