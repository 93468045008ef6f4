//! `dispatch` with the lite executor, on the built binary: a process a task started outside its
//! attempt's process group (`setsid`) does not outlive the dispatcher, whether SIGTERM or
//! Ctrl-C (SIGINT) stops it or its run completes; and what a finished command left in its
//! group, which the dispatcher adopts, is reaped rather than left a zombie; and a task's command
//! does not outlive a dispatcher killed with `kill -9`, which runs no shutdown (Linux).

#[path = "it/processes/mod.rs"]
mod processes;

use std::path::Path;
use std::process::{Child, Stdio};

use dexaflow_admission::dispatch::executor::lite::ORPHANED;
use processes::{
    dispatch, is_running, lite_config, wait_for_pid, wait_until, wait_until_gone, workload,
};
use rustix::process::{Pid, Signal, getpgid, kill_process};
use serde_json::Value;

/// Kills, when dropped, the dispatcher and every process of its task the test learnt of, so that
/// a failing test leaves nothing running.
#[derive(Default)]
struct Cleanup {
    dispatcher: Option<Child>,
    pids: Vec<i32>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if let Some(dispatcher) = &mut self.dispatcher {
            let _ = dispatcher.kill();
            let _ = dispatcher.wait();
        }
        for &pid in &self.pids {
            if is_running(pid) {
                let _ = kill_process(Pid::from_raw(pid).unwrap(), Signal::KILL);
            }
        }
    }
}

/// Starts `dispatch --output json` of `workload` under a lite config, into the clean-up.
fn start(dir: &Path, workload: &Path, cleanup: &mut Cleanup) {
    let config = lite_config(dir, "", "", "");
    let child = dispatch(&config, workload)
        .args(["--output", "json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary starts");
    cleanup.dispatcher = Some(child);
}

/// Starts `dispatch --output json` of one task, `escapes`, whose shell starts a `sleep` in a
/// session of its own (outside the attempt's process group) and becomes a `sleep` itself; the
/// shell's pid is written to `dir/leader.pid`, the escaped sleep's to `dir/escaped.pid`.
/// Returns once both run, with their pids in the clean-up.
fn start_escaping_task(dir: &Path, cleanup: &mut Cleanup) -> (i32, i32) {
    let tasks = format!(
        "      - task_id: escapes
        command: [sh, -c, 'echo $$ > {0}/leader.pid; setsid sleep 1000 & echo $! > {0}/escaped.pid; exec sleep 1000']
",
        dir.display()
    );
    start(dir, &workload(dir, "", &tasks), cleanup);
    let leader = wait_for_pid(&dir.join("leader.pid"));
    cleanup.pids.push(leader);
    let escaped = wait_for_pid(&dir.join("escaped.pid"));
    cleanup.pids.push(escaped);
    (leader, escaped)
}

/// Sends `signal` to the dispatcher, waits for it to exit and checks it drained: exit code 2
/// and its one task orphaned.
fn stop_dispatcher(cleanup: &mut Cleanup, signal: Signal) {
    let child = cleanup.dispatcher.take().expect("a dispatcher was started");
    let pid = Pid::from_raw(i32::try_from(child.id()).unwrap()).unwrap();
    kill_process(pid, signal).expect("the dispatcher runs");
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    let rows: Vec<Value> = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|error| panic!("JSON rows ({error}); stderr {stderr:?}"));
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["failure_reason"], ORPHANED, "{rows:?}");
}

/// What both signals must show: the escaped process ran, outside the attempt's group, while the
/// dispatcher did, and neither it nor the attempt's shell outlives it.
fn assert_nothing_outlives_a_dispatcher_stopped_by(signal: Signal) {
    let dir = tempfile::tempdir().unwrap();
    let mut cleanup = Cleanup::default();
    let (leader, escaped) = start_escaping_task(dir.path(), &mut cleanup);
    // Its pid is written as soon as it is forked, before it calls `setsid`.
    wait_until("the escaped process to leave its attempt's group", || {
        getpgid(Pid::from_raw(escaped)).ok() != getpgid(Pid::from_raw(leader)).ok()
    });
    assert!(
        is_running(escaped),
        "the escaped process runs until the signal"
    );

    stop_dispatcher(&mut cleanup, signal);

    // Ended before the dispatcher exited: the poll only lets the kernel finish the kill.
    wait_until_gone(leader);
    wait_until_gone(escaped);
}

#[test]
fn a_process_that_left_its_attempts_group_does_not_outlive_a_dispatcher_stopped_by_sigterm() {
    assert_nothing_outlives_a_dispatcher_stopped_by(Signal::TERM);
}

#[test]
fn a_process_that_left_its_attempts_group_does_not_outlive_a_dispatcher_stopped_by_ctrl_c() {
    assert_nothing_outlives_a_dispatcher_stopped_by(Signal::INT);
}

#[test]
fn what_a_finished_command_left_in_its_group_is_killed_and_reaped_while_the_dispatcher_runs() {
    let dir = tempfile::tempdir().unwrap();
    let mut cleanup = Cleanup::default();
    let tasks = format!(
        "      - task_id: leaves
        command: [sh, -c, 'sleep 1000 & echo $! > {0}/left.pid']
      - task_id: stays
        command: [sh, -c, 'echo $$ > {0}/stays.pid; exec sleep 1000']
",
        dir.path().display()
    );
    start(dir.path(), &workload(dir.path(), "", &tasks), &mut cleanup);
    cleanup
        .pids
        .push(wait_for_pid(&dir.path().join("stays.pid")));
    let left = wait_for_pid(&dir.path().join("left.pid"));
    cleanup.pids.push(left);

    // Gone from `/proc` altogether: killed with its group, and reaped by the dispatcher that
    // adopted it when its shell exited, not left a zombie.
    wait_until(&format!("process {left} to be reaped"), || {
        !Path::new(&format!("/proc/{left}")).exists()
    });
    let dispatcher = cleanup
        .dispatcher
        .as_mut()
        .expect("a dispatcher was started");
    assert!(
        dispatcher.try_wait().unwrap().is_none(),
        "the dispatcher still runs, or its exit reaped the process"
    );
}

#[test]
fn a_process_that_left_its_attempts_group_does_not_outlive_a_dispatcher_that_completed_its_run() {
    let dir = tempfile::tempdir().unwrap();
    let mut cleanup = Cleanup::default();
    let config = lite_config(dir.path(), "", "", "");
    let escaped_file = dir.path().join("escaped.pid");
    // The shell ends once the escaped process has left its group, which it says by writing its
    // pid after `setsid`: ended before, it would be killed with the group.
    let tasks = format!(
        "      - task_id: escapes
        command: [sh, -c, 'setsid sh -c \"echo \\$\\$ > {0}; exec sleep 1000\" & while [ ! -s {0} ]; do sleep 0.01; done']
",
        escaped_file.display()
    );

    let output = dispatch(&config, &workload(dir.path(), "", &tasks))
        .args(["--output", "json"])
        .output()
        .expect("the binary runs");
    let escaped = wait_for_pid(&escaped_file);
    cleanup.pids.push(escaped);

    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let rows: Vec<Value> = serde_json::from_slice(&output.stdout).expect("JSON rows");
    assert_eq!(rows[0]["state"], "success", "{rows:?}");
    wait_until_gone(escaped);
}

#[cfg(target_os = "linux")]
#[test]
fn a_tasks_command_does_not_outlive_a_dispatcher_killed_with_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let mut cleanup = Cleanup::default();
    let tasks = format!(
        "      - task_id: runs
        command: [sh, -c, 'echo $$ > {0}/command.pid; exec sleep 1000']
",
        dir.path().display()
    );
    start(dir.path(), &workload(dir.path(), "", &tasks), &mut cleanup);
    let command = wait_for_pid(&dir.path().join("command.pid"));
    cleanup.pids.push(command);
    assert!(is_running(command), "the command runs until the kill");

    let mut dispatcher = cleanup.dispatcher.take().expect("a dispatcher was started");
    dispatcher.kill().expect("the dispatcher runs");
    let status = dispatcher.wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(Signal::KILL.as_raw()),
        "the dispatcher died of the kill, running no shutdown"
    );

    // Killed by the kernel with the dispatcher, as its parent-death signal; nothing else is
    // left to end it.
    wait_until_gone(command);
}

/// `unshare` that puts what follows in a PID namespace of its own, with its own `/proc`, whose
/// group and session leaders stay outside it: as a container or CI sandbox started from a shell
/// runs the dispatcher. `None`, with the reason printed, where this machine does not allow it.
fn in_a_pid_namespace_led_from_outside() -> Option<std::process::Command> {
    let probe = std::process::Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc", "cat", "/proc/self/stat"])
        .output();
    let stat = match probe {
        Ok(output) if output.status.success() => {
            String::from_utf8_lossy(&output.stdout).into_owned()
        }
        Ok(output) => {
            eprintln!(
                "skipped: unshare cannot make a PID namespace here: {}",
                String::from_utf8_lossy(&output.stderr)
            );
            return None;
        }
        Err(error) => {
            eprintln!("skipped: no unshare here: {error}");
            return None;
        }
    };
    let (_, fields) = stat.rsplit_once(')').expect("a stat line");
    let session = fields.split_whitespace().nth(3);
    assert_eq!(
        session,
        Some("0"),
        "in the namespace, the session leader is outside it: {stat}"
    );
    let mut command = std::process::Command::new("unshare");
    command.args(["--pid", "--fork", "--mount-proc"]);
    Some(command)
}

#[cfg(target_os = "linux")]
#[test]
fn dispatch_in_a_pid_namespace_whose_session_leader_is_outside_it_runs_its_tasks_and_exits_0() {
    let Some(mut command) = in_a_pid_namespace_led_from_outside() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let config = lite_config(dir.path(), "", "", "");
    let tasks = "      - task_id: runs\n        command: [sh, -c, 'exit 0']\n";
    let output = command
        .arg(processes::BINARY)
        .arg("dispatch")
        .arg("--config")
        .arg(&config)
        .arg("--workload")
        .arg(workload(dir.path(), "", tasks))
        .args(["--output", "json"])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .stdin(std::process::Stdio::null())
        .output()
        .expect("unshare runs");

    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let rows: Vec<Value> = serde_json::from_slice(&output.stdout).expect("JSON rows");
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["state"], "success", "{rows:?}");
}
