//! The commands end to end, on the built binary: `dispatch` from a config and a workload to the
//! table or JSON rows, `check-config`, the exit codes and error lines for a bad config and a bad
//! workload, an empty workload, output to a closed pipe or a full device, colour; and the
//! table and summary `src/report.rs` builds for them.

use crate::fakes;
use crate::processes;

use std::io::Read as _;
use std::process::{Output, Stdio};
use std::time::Duration;

use dexaflow_admission::admission::ChangeError;
use dexaflow_admission::dispatch::refusals::Refusal;
use dexaflow_admission::dispatch::{Reason, TaskStore};
use dexaflow_admission::report;
use fakes::task;
use processes::{dexaflow, lite_config, workload, write};
use serde_json::Value;
use tokio::time::Instant;

/// The unit of 1 CPU and 2Gi, so that a task asking for 4 CPUs is refused.
const UNIT: &str = "  unit: {cpu: \"1\", memory: 2Gi}\n";

/// One task that succeeds, one whose command fails, one the unit refuses before its token.
const THREE_OUTCOMES: &str = "      - {task_id: extract, command: [sh, -c, 'echo extracting']}
      - {task_id: load, command: [sh, -c, 'exit 4']}
      - task_id: aggregate
        command: [sh, -c, 'echo never']
        resources: {requests: {cpu: '4'}}
";

fn run(command: &mut std::process::Command) -> Output {
    command
        .stdin(Stdio::null())
        .output()
        .expect("the binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).expect("output is UTF-8")
}

/// What `dispatch` of `workload` under `config`, with `args` after them, did.
fn dispatch(config: &std::path::Path, workload: &std::path::Path, args: &[&str]) -> Output {
    run(processes::dispatch(config, workload).args(args))
}

#[test]
fn dispatch_prints_one_json_row_per_task_instance_with_its_token_column() {
    let dir = tempfile::tempdir().unwrap();
    let config = lite_config(dir.path(), "", UNIT, "");
    let workload = workload(dir.path(), "", THREE_OUTCOMES);

    let output = dispatch(&config, &workload, &["--output", "json"]);

    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let rows: Vec<Value> = serde_json::from_slice(&output.stdout).expect("JSON rows");
    let seen: Vec<(&str, &str, Option<&str>, bool)> = rows
        .iter()
        .map(|row| {
            (
                row["task_id"].as_str().unwrap(),
                row["state"].as_str().unwrap(),
                row["failure_reason"].as_str(),
                row["token_minted"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(seen[1], ("extract", "success", None, true));
    assert_eq!(seen[2], ("load", "failed", Some("exit code 4"), true));
    let (task, state, reason, token) = seen[0];
    assert_eq!((task, state, token), ("aggregate", "failed", false));
    assert!(
        reason.is_some_and(|reason| reason.starts_with("dispatch refused: task \"aggregate\"")),
        "{reason:?}"
    );
    assert_eq!(rows.len(), 3);
    assert!(rows.iter().all(|row| row["tenant"] == "acme"
        && row["dag_id"] == "etl"
        && row["run_id"] == "r1"
        && row["try_number"] == 1));
    let log = std::fs::read_to_string(
        dir.path()
            .join("logs/acme/etl/r1/extract/try-1-attempt-1.log"),
    )
    .expect("the successful task logged");
    assert_eq!(log, "extracting\n");
}

#[test]
fn dispatch_prints_the_table_and_its_summary() {
    let dir = tempfile::tempdir().unwrap();
    let config = lite_config(dir.path(), "", UNIT, "");
    let workload = workload(dir.path(), "", THREE_OUTCOMES);

    let output = dispatch(&config, &workload, &[]);

    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 5, "{stdout}");
    let columns = |line: &str| {
        line.split_whitespace()
            .take(7)
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(columns(lines[0]), "TENANT DAG RUN TASK TRY STATE PLACEMENT");
    assert!(lines[1].starts_with("acme    etl  r1   aggregate  1    failed   -"));
    assert_eq!(columns(lines[2]), "acme etl r1 extract 1 success dedicated");
    assert!(lines[3].ends_with("exit code 4"), "{stdout}");
    assert_eq!(
        lines[4],
        "3 task instances: 2 failed (1 refused), 1 success; 2 tokens minted"
    );
}

#[test]
fn check_config_prints_the_effective_config_with_defaults_and_overrides() {
    let dir = tempfile::tempdir().unwrap();
    let config = lite_config(dir.path(), "max_parallel: 3", "", "");

    let output = run(dexaflow()
        .args(["check-config", "--config"])
        .arg(&config)
        .env("DEXAFLOW_SCHEDULER_DISPATCH_BUFFER_SIZE", "64"));

    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    assert!(
        stdout.starts_with(
            "# auth.agent_token_secret is not set: a random secret is generated for this process\n"
        ),
        "{stdout}"
    );
    let yaml: serde_yaml_ng::Value = serde_yaml_ng::from_str(&stdout).expect("YAML");
    assert_eq!(yaml["scheduler"]["dispatch"]["buffer_size"], 64);
    assert_eq!(yaml["scheduler"]["loop_interval_ms"], 20);
    assert_eq!(yaml["scheduler"]["dispatch"]["drain_timeout"], "15s");
    assert_eq!(yaml["executor"]["lite"]["max_parallel"], 3);
    assert_eq!(yaml["executor"]["lite"]["kill_grace"], "5s");
    assert!(output.stderr.is_empty());
}

#[test]
fn a_bad_variable_without_a_config_file_is_not_blamed_on_the_embedded_default() {
    let output = run(dexaflow()
        .arg("check-config")
        .env("DEXAFLOW_SCHEDULER_DISPATCH_BUFFER_SIZE", "lots"));

    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        text(&output.stderr),
        "dexaflow-admission: the embedded default config, with the DEXAFLOW_ variables over it, is not valid:\n\
         scheduler.dispatch.buffer_size (from DEXAFLOW_SCHEDULER_DISPATCH_BUFFER_SIZE): expected an integer from 0 to 65536, got \"lots\"\n"
    );
    assert!(output.stdout.is_empty());
}

#[test]
fn check_config_shows_the_server_lists_in_use_when_unset_never_null() {
    let dir = tempfile::tempdir().unwrap();
    let config = write(dir.path(), "server.yaml", "server: {}\n");

    let output = run(dexaflow().args(["check-config", "--config"]).arg(&config));

    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let yaml: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text(&output.stdout)).expect("YAML");
    let server = &yaml["server"];
    assert_eq!(
        server["scheduler_names"],
        serde_yaml_ng::Value::Sequence(vec!["volcano".into()])
    );
    assert_eq!(
        server["trusted_users"],
        serde_yaml_ng::Value::Sequence(Vec::new())
    );
}

#[test]
fn a_bad_config_exits_2_naming_every_bad_key_and_prints_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let config = write(
        dir.path(),
        "bad.yaml",
        "scheduler: {dispatch: {bufer_size: 1}}\nexecutor: {lite: {max_parallel: 0}}\n",
    );
    let workload = workload(dir.path(), "", THREE_OUTCOMES);

    for output in [
        run(dexaflow().args(["check-config", "--config"]).arg(&config)),
        dispatch(&config, &workload, &[]),
    ] {
        assert_eq!(output.status.code(), Some(2));
        assert!(output.stdout.is_empty());
        let stderr = text(&output.stderr);
        assert_eq!(
            stderr,
            format!(
                "dexaflow-admission: {} is not valid:\n\
                 scheduler.dispatch.bufer_size: unknown key\n\
                 executor.lite.max_parallel: expected an integer from 1 to 65536, got 0\n",
                config.display()
            )
        );
    }
    assert!(!dir.path().join("logs").exists(), "nothing was dispatched");
}

#[test]
fn an_error_shows_control_characters_of_a_path_or_key_escaped_never_raw() {
    let dir = tempfile::tempdir().unwrap();
    let config = write(
        dir.path(),
        "\u{1b}[31mred.yaml",
        "scheduler: {\"bad\u{202e}key\": 1}\n",
    );

    let output = run(dexaflow().args(["check-config", "--config"]).arg(&config));

    assert_eq!(output.status.code(), Some(2));
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("\\u{1b}[31mred.yaml is not valid:\n"),
        "{stderr}"
    );
    assert!(
        stderr.contains("scheduler.bad\\u{202e}key: unknown key\n"),
        "{stderr}"
    );
    assert!(
        !stderr.contains('\u{1b}') && !stderr.contains('\u{202e}'),
        "{stderr:?}"
    );
}

#[test]
fn check_config_refuses_an_enabled_path_no_service_answers_as_serve_would() {
    let dir = tempfile::tempdir().unwrap();
    let config = write(
        dir.path(),
        "paths.yaml",
        "server: {enabled_admission: [/pods/mutate, /nope/validate]}\n",
    );

    let output = run(dexaflow().args(["check-config", "--config"]).arg(&config));

    assert_eq!(output.status.code(), Some(2));
    assert!(output.stdout.is_empty(), "no effective config is printed");
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains(
            "server.enabled_admission[1]: expected the path of a service (/pods/mutate, "
        ) && stderr.contains(", /tasks/admit), got \"/nope/validate\""),
        "{stderr}"
    );
    assert!(
        !stderr.contains("[0]"),
        "the known path is not named: {stderr}"
    );
}

#[test]
fn a_bad_workload_exits_2_naming_the_unknown_key_and_the_duplicate_task() {
    let dir = tempfile::tempdir().unwrap();
    let config = lite_config(dir.path(), "", "", "");
    let workload = workload(
        dir.path(),
        "",
        "      - {task_id: a, commnd: [echo]}
      - {task_id: b, command: [echo]}
      - {task_id: b, command: [echo]}
",
    );

    let output = dispatch(&config, &workload, &[]);

    assert_eq!(output.status.code(), Some(2));
    assert!(output.stdout.is_empty());
    assert_eq!(
        text(&output.stderr),
        format!(
            "dexaflow-admission: workload {} is not valid:\n\
             runs[0].tasks[0]: unknown key \"commnd\"\n\
             runs[0].tasks[0].command: required by the lite executor, which runs it as a local process\n\
             runs[0].tasks[2]: task acme/etl/r1/b appears twice\n",
            workload.display()
        )
    );
    assert!(!dir.path().join("logs").exists(), "nothing was dispatched");
}

#[test]
fn a_workload_that_cannot_be_read_exits_2_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let config = lite_config(dir.path(), "", "", "");
    let missing = dir.path().join("missing.yaml");

    let output = dispatch(&config, &missing, &[]);

    assert_eq!(output.status.code(), Some(2));
    let stderr = text(&output.stderr);
    assert!(
        stderr.starts_with(&format!(
            "dexaflow-admission: workload {0} is not valid:\nreading {0}: ",
            missing.display()
        )),
        "{stderr}"
    );
}

#[test]
fn an_empty_workload_says_so_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let config = lite_config(dir.path(), "", "", "");
    let workload = write(dir.path(), "workload.yaml", "runs: []\n");

    let table = dispatch(&config, &workload, &[]);
    let json = dispatch(&config, &workload, &["--output", "json"]);

    assert_eq!(table.status.code(), Some(0));
    assert_eq!(
        text(&table.stdout),
        "no task instances: the workload has no tasks\n"
    );
    assert!(table.stderr.is_empty(), "{}", text(&table.stderr));
    assert_eq!(json.status.code(), Some(0));
    assert_eq!(text(&json.stdout), "[]\n");
}

/// Asserts that a command whose output could not be written said so in one line, exited
/// non-zero and did not panic.
fn assert_one_line_about_stdout(status: std::process::ExitStatus, stderr: &str, cause: &str) {
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let stderr = processes::without_metrics_line(stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("dexaflow-admission: writing to standard output: "),
        "{stderr}"
    );
    assert!(stderr.contains(cause), "{stderr}");
}

/// Runs the binary with `args`, its stdout a pipe whose reader has gone before the command
/// starts, as `| head -1` leaves it once it has its line: a shell waits for a line on its stdin,
/// which the test writes once it has closed the reader, then runs the command in its place.
fn into_a_closed_pipe(args: &[&std::ffi::OsStr]) -> (std::process::ExitStatus, String) {
    let mut child = std::process::Command::new("sh")
        .args(["-c", r#"read -r _; exec "$0" "$@""#])
        .arg(processes::BINARY)
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the shell starts");
    drop(child.stdout.take());
    let mut gate = child.stdin.take().unwrap();
    std::io::Write::write_all(&mut gate, b"go\n").unwrap();
    drop(gate);
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    (child.wait().unwrap(), stderr)
}

/// Asserts that a command whose reader went away exited 0 and said nothing but where its
/// metrics were.
fn assert_quiet_success(status: std::process::ExitStatus, stderr: &str) {
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert_eq!(processes::without_metrics_line(stderr), "", "{stderr}");
}

#[test]
fn dispatch_into_a_closed_pipe_exits_0_and_says_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let config = lite_config(dir.path(), "", UNIT, "");
    let workload = workload(dir.path(), "", THREE_OUTCOMES);

    let (status, stderr) = into_a_closed_pipe(&[
        "dispatch".as_ref(),
        "--config".as_ref(),
        config.as_os_str(),
        "--workload".as_ref(),
        workload.as_os_str(),
    ]);

    assert_quiet_success(status, &stderr);
}

#[test]
fn loadtest_into_a_closed_pipe_exits_0_and_says_nothing() {
    let (status, stderr) =
        into_a_closed_pipe(&["loadtest".as_ref(), "--attempts".as_ref(), "10".as_ref()]);

    assert_quiet_success(status, &stderr);
}

#[test]
fn check_config_into_a_closed_pipe_exits_0_and_says_nothing() {
    let (status, stderr) = into_a_closed_pipe(&["check-config".as_ref()]);

    assert_quiet_success(status, &stderr);
}

/// Runs the binary with `args` and its standard output on `/dev/full`, and checks that it says
/// so in one line on stderr and exits non-zero.
fn assert_full_device_reported(args: &[&str]) {
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("/dev/full exists on Linux");

    let output = dexaflow()
        .args(args)
        .stdin(Stdio::null())
        .stdout(full)
        .output()
        .expect("the binary runs");

    assert_one_line_about_stdout(
        output.status,
        &text(&output.stderr),
        "No space left on device",
    );
}

#[test]
fn stdout_on_a_full_device_gives_one_line_on_stderr_and_a_nonzero_exit() {
    assert_full_device_reported(&["check-config"]);
}

#[test]
fn help_on_a_full_device_gives_one_line_on_stderr_and_a_nonzero_exit() {
    for args in [&["--help"][..], &["serve", "--help"], &["--version"]] {
        assert_full_device_reported(args);
    }
}

#[test]
fn help_into_a_closed_pipe_exits_0_and_says_nothing() {
    let (status, stderr) = into_a_closed_pipe(&["--help".as_ref()]);

    assert_quiet_success(status, &stderr);
}

/// A config whose chain has a hook and `fail_open: true`, which `dispatch` warns about at boot.
fn fail_open_config(dir: &std::path::Path) -> std::path::PathBuf {
    lite_config(
        dir,
        "",
        "",
        "execution:\n  admission:\n    fail_open: true\n    hooks:\n      \
         - {type: deny, name: nobody, match: {tenants: [nobody]}, reason: no}\n",
    )
}

#[test]
fn no_colour_codes_reach_a_stderr_that_is_not_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let config = fail_open_config(dir.path());
    let workload = workload(dir.path(), "", THREE_OUTCOMES);

    let output = dispatch(&config, &workload, &[]);

    let stderr = text(&output.stderr);
    assert!(stderr.contains("fail-open is on"), "{stderr}");
    assert!(!stderr.contains('\u{1b}'), "{stderr:?}");
}

/// Runs `dispatch` with stdout and stderr on a terminal (`script` gives it one) and returns
/// what the terminal showed.
fn on_a_terminal(dir: &std::path::Path, no_color: Option<&str>) -> String {
    let config = fail_open_config(dir);
    let workload = workload(dir, "", THREE_OUTCOMES);
    dispatch_on_a_terminal(&config, &workload, no_color)
}

/// Runs `dispatch` of `workload` under `config` on a terminal and returns what it showed.
fn dispatch_on_a_terminal(
    config: &std::path::Path,
    workload: &std::path::Path,
    no_color: Option<&str>,
) -> String {
    let line = format!(
        "{} dispatch --config {} --workload {}",
        processes::BINARY,
        config.display(),
        workload.display()
    );
    let mut script = std::process::Command::new("script");
    script
        .env_clear()
        .args(["-q", "-e", "-c", &line, "/dev/null"]);
    if let Some(path) = std::env::var_os("PATH") {
        script.env("PATH", path);
    }
    if let Some(value) = no_color {
        script.env("NO_COLOR", value);
    }
    let output = run(&mut script);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn no_color_turns_colour_off_on_a_terminal() {
    let dir = tempfile::tempdir().unwrap();

    let coloured = on_a_terminal(dir.path(), None);
    let plain = on_a_terminal(dir.path(), Some("1"));

    assert!(coloured.contains("fail-open is on"), "{coloured:?}");
    assert!(
        coloured.contains('\u{1b}'),
        "a terminal gets colour: {coloured:?}"
    );
    assert!(plain.contains("fail-open is on"), "{plain:?}");
    assert!(!plain.contains("\u{1b}["), "{plain:?}");
}

// ---- the table and the summary ------------------------------------------------------------------
#[test]
fn the_table_escapes_every_cell_so_that_no_id_or_reason_forges_a_line() {
    let store = TaskStore::new();
    let forged = task("load\n2026-12-01 acme etl r1 fake 1 success warm -\u{1b}[2K");
    store.schedule(forged.clone());
    store.fail_refused(
        &forged.key,
        Reason::RefusedByHook {
            hook: "deny".to_owned(),
            reason: "no\r\u{202e}way".to_owned(),
        },
    );

    let table = report::table(&store.snapshot());

    assert_eq!(table.lines().count(), 2, "{table}");
    let row = table.lines().nth(1).unwrap();
    assert!(
        row.contains("load\\u{a}2026-12-01 acme etl r1 fake 1 success warm -\\u{1b}[2K"),
        "{row}"
    );
    assert!(
        row.ends_with("dispatch refused: admission: no\\u{d}\\u{202e}way"),
        "{row}"
    );
    assert!(!table.contains('\u{1b}') && !table.contains('\r'));
}

#[test]
fn a_task_key_in_a_log_line_or_an_error_is_escaped() {
    let key = task("load\n\u{1b}[31mforged").key;

    assert_eq!(key.to_string(), "acme/etl/r1/load\\u{a}\\u{1b}[31mforged");
}

#[test]
fn the_summary_counts_states_refusals_and_tokens() {
    let store = TaskStore::new();
    for id in ["a", "b", "c"] {
        store.schedule(task(id));
    }
    store.fail_refused(
        &task("a").key,
        Reason::RefusedByHook {
            hook: "deny".to_owned(),
            reason: "no".to_owned(),
        },
    );
    store.record_token(&task("b").key);

    let summary = report::summary(&store.snapshot());

    assert_eq!(
        summary,
        "3 task instances: 1 failed (1 refused), 2 scheduled; 1 token minted"
    );
}

#[test]
fn the_summary_counts_refusals_by_their_typed_reason_not_their_text() {
    let store = TaskStore::new();
    for id in ["a", "b", "c", "d"] {
        store.schedule(task(id));
    }
    store.fail_refused(
        &task("a").key,
        Reason::Refused(Refusal::ImageNotAllowed {
            image: "evil.io/x:1".to_owned(),
        }),
    );
    store.fail_refused(
        &task("b").key,
        Reason::ChangesRefused(ChangeError::AnnotationsTooLarge { bytes: 300_000 }),
    );
    store.fail_refused(
        &task("c").key,
        Reason::RefusedByHook {
            hook: "deny".to_owned(),
            reason: "no".to_owned(),
        },
    );
    // A hold whose window is spent fails the task, however its hook words the reason.
    let held = Reason::Held {
        hook: "freeze".to_owned(),
        reason: "dispatch refused: admission: later".to_owned(),
    };
    store.wait(&task("d").key, held, Instant::now(), Duration::ZERO);

    let summary = report::summary(&store.snapshot());

    assert_eq!(
        summary,
        "4 task instances: 4 failed (3 refused); 0 tokens minted"
    );
}

#[test]
fn no_task_instances_give_no_table_and_a_summary_that_says_so() {
    assert_eq!(report::table(&[]), "");
    assert_eq!(
        report::summary(&[]),
        "no task instances: the workload has no tasks"
    );
}

#[test]
fn the_summary_of_one_task_instance_and_one_token_is_singular() {
    let dir = tempfile::tempdir().unwrap();
    let config = lite_config(dir.path(), "", "", "");
    let workload = workload(
        dir.path(),
        "",
        "      - {task_id: extract, command: ['true']}\n",
    );

    let output = dispatch(&config, &workload, &[]);

    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    assert_eq!(
        stdout.lines().last(),
        Some("1 task instance: 1 success; 1 token minted"),
        "{stdout}"
    );
}

#[test]
fn the_table_lines_up_ids_of_wide_characters() {
    let dir = tempfile::tempdir().unwrap();
    let config = lite_config(dir.path(), "", "", "");
    let tasks = "      - {task_id: 抽出データ, command: ['true']}
      - {task_id: 🚀🚀, command: ['true']}
      - {task_id: load, command: ['true']}
";
    let workload = workload(dir.path(), "", tasks);

    let output = dispatch(&config, &workload, &[]);

    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 5, "{stdout}");
    // The terminal column each line's STATE cell starts at.
    let column = |line: &str, cell: &str| {
        let at = line
            .find(cell)
            .unwrap_or_else(|| panic!("{cell} in {line}"));
        unicode_width::UnicodeWidthStr::width(&line[..at])
    };
    let state = column(lines[0], "STATE");
    for row in &lines[1..4] {
        assert_eq!(column(row, "success"), state, "{stdout}");
    }
    assert!(
        stdout.contains("抽出データ") && stdout.contains("🚀🚀"),
        "{stdout}"
    );
}

/// A lite config with no `metrics` section, logging under `dir/logs`.
fn config_without_metrics(dir: &std::path::Path) -> std::path::PathBuf {
    let text = format!(
        "scheduler: {{loop_interval_ms: 20}}\nexecutor: {{type: lite, lite: {{log_dir: {}}}}}\n",
        dir.join("logs").display()
    );
    write(dir, "dexaflow.yaml", &text)
}

/// The address a command's first line on stderr says its exporter listens on.
fn metrics_address(line: &str) -> std::net::SocketAddr {
    line.strip_prefix("metrics: listening on http://")
        .and_then(|rest| rest.trim_end().strip_suffix("/metrics"))
        .unwrap_or_else(|| panic!("a metrics line, not {line:?}"))
        .parse()
        .expect("an address")
}

#[test]
fn two_dispatch_runs_at_once_each_export_metrics_on_a_port_of_their_own() {
    let gate = tempfile::tempdir().unwrap();
    let go = gate.path().join("go");
    let tasks = format!(
        "      - task_id: wait\n        command: [sh, -c, 'while [ ! -e {} ]; do sleep 0.01; done']\n",
        go.display()
    );
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let mut runs: Vec<_> = dirs
        .iter()
        .map(|dir| {
            let config = config_without_metrics(dir.path());
            let workload = workload(dir.path(), "", &tasks);
            let mut child = processes::dispatch(&config, &workload)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("the binary starts");
            let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
            let mut first = String::new();
            std::io::BufRead::read_line(&mut stderr, &mut first).unwrap();
            (child, stderr, first)
        })
        .collect();
    // Both are running, their one task waiting, when both lines have been read.
    write(gate.path(), "go", "");

    let mut ports = Vec::new();
    for (child, stderr, first) in &mut runs {
        let mut rest = String::new();
        stderr.read_to_string(&mut rest).unwrap();
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(0), "{first}{rest}");
        let address = metrics_address(first);
        assert!(address.ip().is_loopback(), "{address}");
        ports.push(address.port());
    }
    assert_ne!(ports[0], ports[1]);
    assert!(!ports.contains(&9464), "{ports:?}");
}

#[test]
fn dispatch_listens_where_metrics_listen_says_when_it_is_set() {
    let dir = tempfile::tempdir().unwrap();
    // A port the system picked and this test holds, so that only one process can want it.
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = held.local_addr().unwrap();
    let config = lite_config(dir.path(), "", "", "");
    let yaml = std::fs::read_to_string(&config)
        .unwrap()
        .replace("127.0.0.1:0", &address.to_string());
    let config = write(dir.path(), "dexaflow.yaml", &yaml);
    let workload = workload(
        dir.path(),
        "",
        "      - {task_id: extract, command: ['true']}\n",
    );

    let output = dispatch(&config, &workload, &[]);

    // The key was obeyed: the port is taken, and the error names the key.
    assert_eq!(output.status.code(), Some(2));
    let stderr = text(&output.stderr);
    assert!(stderr.contains("metrics.listen: "), "{stderr}");
    assert!(output.stdout.is_empty());
}

#[test]
fn an_interrupt_after_nothing_was_left_scheduled_does_not_say_some_was() {
    let dir = tempfile::tempdir().unwrap();
    let config = lite_config(dir.path(), "", "", "");
    let pid_file = dir.path().join("long.pid");
    let tasks = format!(
        "      - task_id: long\n        command: [sh, -c, 'echo $$ > {}; sleep 300']\n",
        pid_file.display()
    );
    let workload = workload(dir.path(), "", &tasks);
    let child = processes::dispatch(&config, &workload)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary starts");
    processes::wait_for_pid(&pid_file);

    let pid = rustix::process::Pid::from_raw(i32::try_from(child.id()).unwrap()).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).expect("it runs");
    let output = child.wait_with_output().unwrap();

    let stderr = text(&output.stderr);
    assert_eq!(
        processes::after_stopping_line(&stderr),
        "dexaflow-admission: interrupted: no task instance was left scheduled\n"
    );
    assert!(
        !stderr.contains("before every task instance settled"),
        "{stderr}"
    );
    assert_eq!(output.status.code(), Some(2));
    assert!(text(&output.stdout).contains("1 task instance: 1 failed"));
}

#[test]
fn the_progress_line_shows_what_a_held_task_instance_waits_for() {
    let store = TaskStore::new();
    for id in ["a", "b", "c"] {
        store.schedule(task(id));
    }
    let held = |reason: &str| Reason::Held {
        hook: "finance-freeze".to_owned(),
        reason: reason.to_owned(),
    };
    let now = Instant::now();
    store.wait(&task("c").key, held("later"), now, Duration::from_secs(60));
    store.wait(
        &task("b").key,
        held("quarter-end close"),
        now,
        Duration::from_secs(60),
    );

    let mut progress = report::Progress::default();
    for instance in store.snapshot().iter().rev() {
        progress.see(instance);
    }
    let line = progress.line(3);

    assert_eq!(
        line,
        format!(
            "waiting for 3 task instances to settle; acme/etl/r1/b: {}",
            store
                .get(&task("b").key)
                .unwrap()
                .failure_reason
                .unwrap()
                .as_str()
        )
    );
    assert!(line.contains("quarter-end close"), "{line:?}");
    assert!(!line.contains("later"), "{line:?}");
}

#[test]
fn a_shorter_progress_line_covers_the_longer_one_before_it_with_spaces() {
    let (first, shown) = report::Progress::rewrite("waiting: 抽出", 0, 80);
    let (second, now) = report::Progress::rewrite("done", shown, 80);

    assert_eq!(first, "\rwaiting: 抽出");
    assert_eq!(shown, 13);
    assert_eq!(second, format!("\rdone{}", " ".repeat(9)));
    assert_eq!(now, 4);
}

#[test]
fn a_progress_line_wider_than_the_terminal_is_cut_short_of_its_last_column() {
    let line = format!("waiting for 1 task instance to settle; {}", "x".repeat(100));

    let (text, shown) = report::Progress::rewrite(&line, 0, 80);

    assert_eq!(shown, 79);
    assert_eq!(text, format!("\r{}…", &line[..78]));
    assert!(!text.contains('\n'), "{text:?}");
}

#[test]
fn the_progress_line_without_a_wait_counts_alone() {
    assert_eq!(
        report::Progress::default().line(1),
        "waiting for 1 task instance to settle"
    );
}

/// The duration at `path` (keys) in the example config `name`.
fn example_duration(name: &str, path: &[&str]) -> Duration {
    let text = std::fs::read_to_string(format!("{}/examples/{name}", env!("CARGO_MANIFEST_DIR")))
        .expect("the example exists");
    let mut value: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).expect("YAML");
    for key in path {
        value = match key.parse::<usize>() {
            Ok(index) => value[index].clone(),
            Err(_) => value[*key].clone(),
        };
    }
    humantime::parse_duration(value.as_str().expect("a duration")).expect("a duration")
}

#[test]
fn the_examples_of_dispatch_against_serve_settle_in_seconds() {
    let freeze = example_duration(
        "serve.yaml",
        &["execution", "admission", "hooks", "1", "for"],
    );
    let retry_window = example_duration("webhook.yaml", &["scheduler", "dispatch", "retry_window"]);

    assert!(freeze <= Duration::from_secs(10), "{freeze:?}");
    assert!(retry_window <= Duration::from_secs(60), "{retry_window:?}");
    assert!(freeze < retry_window, "the hold ends before the window");
}

#[test]
fn the_progress_line_on_a_terminal_shows_why_a_task_instance_waits() {
    let dir = tempfile::tempdir().unwrap();
    let config = lite_config(
        dir.path(),
        "",
        "",
        "execution:\n  admission:\n    hooks:\n      \
         - {type: freeze, name: freeze, tenants: [acme], after: 0s, for: 3s, reason: quarter-end close}\n",
    );
    let workload = workload(
        dir.path(),
        "",
        "      - {task_id: extract, command: ['true']}\n",
    );

    let shown = dispatch_on_a_terminal(&config, &workload, Some("1"));

    assert!(
        shown.contains("waiting for 1 task instance to settle; acme/etl/r1/extract: ")
            && shown.contains("quarter-end close"),
        "{shown:?}"
    );
    assert!(
        shown.contains("1 task instance: 1 success; 1 token minted"),
        "{shown:?}"
    );
}
