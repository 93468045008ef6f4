//! The executor's directories are checked when `dispatch` starts: one that cannot be used fails
//! the start, naming its key and the directory, before anything is dispatched, instead of every
//! attempt retrying until its window closes.

#![cfg(unix)]

use crate::processes;

use std::path::Path;
use std::process::Output;

/// A workload of one task that would create `ran` if it ran.
fn one_task(dir: &Path, ran: &Path) -> std::path::PathBuf {
    processes::workload(
        dir,
        "",
        &format!(
            "      - {{task_id: a, image: busybox, command: [touch, {}]}}\n",
            ran.display()
        ),
    )
}

/// `dispatch` under `config` (lines after `executor:`), with a retry window short enough that
/// a start that is not refused still ends.
fn dispatch(dir: &Path, executor: &str, ran: &Path) -> Output {
    let config = processes::write(
        dir,
        "dexaflow.yaml",
        &format!(
            "scheduler: {{loop_interval_ms: 20, dispatch: {{retry_window: 1s}}}}\n\
             executor:\n{executor}\
             metrics: {{listen: \"127.0.0.1:0\"}}\n"
        ),
    );
    processes::dispatch(&config, &one_task(dir, ran))
        .output()
        .expect("the binary runs")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Checks that the start failed naming `key` and `path`, and that nothing was dispatched.
fn assert_refused_at_start(output: &Output, key: &str, path: &Path, ran: &Path) {
    let stderr = stderr(output);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    let line = format!("dexaflow-admission: {key}: {}: ", path.display());
    assert!(stderr.contains(&line), "{line:?} missing from\n{stderr}");
    assert!(output.stdout.is_empty(), "no task instance is printed");
    assert!(!stderr.contains("metrics: listening"), "{stderr}");
    assert!(!ran.exists(), "the task ran");
}

#[test]
fn a_missing_dry_run_dir_fails_the_start_naming_the_key_and_the_directory() {
    let dir = tempfile::tempdir().expect("a directory");
    let ran = dir.path().join("ran");
    let missing = dir.path().join("manifests");

    let output = dispatch(
        dir.path(),
        &format!(
            "  type: kubernetes\n  kubernetes: {{dry_run_dir: {}}}\n",
            missing.display()
        ),
        &ran,
    );

    assert_refused_at_start(&output, "executor.kubernetes.dry_run_dir", &missing, &ran);
    assert!(!missing.exists(), "the directory is not made");
}

#[test]
fn a_dry_run_dir_that_is_a_file_fails_the_start() {
    let dir = tempfile::tempdir().expect("a directory");
    let ran = dir.path().join("ran");
    let file = processes::write(dir.path(), "manifests", "not a directory\n");

    let output = dispatch(
        dir.path(),
        "  type: kubernetes\n  kubernetes: {dry_run_dir: manifests}\n",
        &ran,
    );

    assert_refused_at_start(&output, "executor.kubernetes.dry_run_dir", &file, &ran);
}

#[test]
fn a_lite_log_dir_that_cannot_be_created_fails_the_start() {
    let dir = tempfile::tempdir().expect("a directory");
    let ran = dir.path().join("ran");
    processes::write(dir.path(), "file", "a file, not a directory\n");
    let log_dir = dir.path().join("file/logs");

    let output = dispatch(
        dir.path(),
        "  type: lite\n  lite: {log_dir: file/logs}\n",
        &ran,
    );

    assert_refused_at_start(&output, "executor.lite.log_dir", &log_dir, &ran);
}

#[test]
fn a_lite_log_dir_that_is_a_file_fails_the_start_saying_it_is_no_directory() {
    let dir = tempfile::tempdir().expect("a directory");
    let ran = dir.path().join("ran");
    let file = processes::write(dir.path(), "logs", "a file, not a directory\n");

    let output = dispatch(dir.path(), "  type: lite\n  lite: {log_dir: logs}\n", &ran);

    assert_refused_at_start(&output, "executor.lite.log_dir", &file, &ran);
    let stderr = stderr(&output);
    assert!(stderr.contains("not a directory"), "{stderr}");
    assert!(!stderr.contains("File exists"), "{stderr}");
}

#[test]
fn a_missing_lite_log_dir_is_made_at_start_and_the_task_runs() {
    let dir = tempfile::tempdir().expect("a directory");
    let ran = dir.path().join("ran");
    let log_dir = dir.path().join("logs/deeper");

    let output = dispatch(
        dir.path(),
        "  type: lite\n  lite: {log_dir: logs/deeper}\n",
        &ran,
    );

    assert!(output.status.success(), "{}", stderr(&output));
    assert!(log_dir.is_dir());
    assert!(ran.exists(), "the task ran");
}
