//! The workload file: what `dispatch` reads, and every problem it reports when reading it.

use std::time::Duration;

use dexaflow_admission::dispatch::settings::ExecutorSettings;
use dexaflow_admission::workload::{WorkloadError, WorkloadErrors, parse, parse_for};

/// The problems in `yaml`, one a line, as `dispatch` prints them.
fn problems(yaml: &str) -> Vec<String> {
    let errors: WorkloadErrors = parse(yaml).expect_err("the workload is invalid");
    errors.to_string().lines().map(str::to_owned).collect()
}

/// A workload of one run of tenant `acme`, DAG `etl`, run `r1`, with `tasks` as its task list.
fn run_with(tasks: &str) -> String {
    format!("runs:\n  - {{tenant: acme, dag_id: etl, run_id: r1, tasks: {tasks}}}\n")
}

#[test]
fn a_good_workload_gives_one_task_per_entry_with_the_run_s_ids() {
    let tasks = parse(&run_with(
        "[{task_id: a, command: [echo]}, {task_id: b, command: [sh]}]",
    ))
    .expect("valid");

    let keys: Vec<String> = tasks.iter().map(|task| task.key.to_string()).collect();
    assert_eq!(keys, ["acme/etl/r1/a", "acme/etl/r1/b"]);
    assert_eq!(tasks[1].command, ["sh"]);
}

#[test]
fn an_empty_file_and_runs_without_tasks_are_workloads_with_no_tasks() {
    assert!(parse("").expect("empty is valid").is_empty());
    assert!(parse("runs: []").expect("valid").is_empty());
    assert!(parse(&run_with("[]")).expect("valid").is_empty());
}

#[test]
fn every_problem_in_a_workload_is_reported_not_only_the_first() {
    let yaml = "runs:
  - tenant: acme
    dag_id: etl
    run_id: r1
    tasks:
      - {task_id: a, imgae: x}
      - {task_id: b, command: [echo]}
      - {task_id: b, command: [echo]}
      - {task_id: '', command: [echo]}
  - tenant: acme
    dag_id: etl
    run_id: r2
    owner: me
    tasks:
      - {task_id: c, pool_slots: many}
";
    let lines = problems(yaml);
    assert_eq!(
        lines[..4],
        [
            "runs[0].tasks[0]: unknown key \"imgae\"",
            "runs[0].tasks[2]: task acme/etl/r1/b appears twice",
            "runs[0].tasks[3].task_id: must not be empty",
            "runs[1]: unknown key \"owner\"",
        ]
    );
    assert_eq!(lines.len(), 5, "{lines:?}");
    assert!(
        lines[4].starts_with("runs[1].tasks[0].pool_slots: "),
        "{lines:?}"
    );
}

#[test]
fn each_field_of_the_wrong_shape_is_named() {
    let lines = problems(&run_with(
        "[{task_id: c, pool_slots: many, staging: often, command: [echo]}]",
    ));
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(
        lines[0]
            == "runs[0].tasks[0].pool_slots: expected an integer from 0 to 4294967295, got \"many\"",
        "{lines:?}"
    );
    assert!(
        lines[1].starts_with("runs[0].tasks[0].staging: invalid type: string \"often\""),
        "{lines:?}"
    );
}

#[test]
fn a_task_without_a_task_id_is_named_by_its_entry() {
    let lines = problems(&run_with("[{command: [echo]}]"));
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].starts_with("runs[0].tasks[0]: missing field `task_id`"),
        "{lines:?}"
    );
}

#[test]
fn a_task_may_not_set_the_run_s_ids_itself() {
    assert_eq!(
        problems(&run_with("[{task_id: a, tenant: other}]")),
        ["runs[0].tasks[0]: unknown key \"tenant\""]
    );
}

#[test]
fn empty_run_ids_are_each_named_once_for_the_run() {
    let yaml = "runs:
  - {tenant: '', dag_id: '', run_id: r1, tasks: [{task_id: a}, {task_id: b}]}
";
    assert_eq!(
        problems(yaml),
        [
            "runs[0].tenant: must not be empty",
            "runs[0].dag_id: must not be empty"
        ]
    );
}

#[test]
fn ids_with_control_or_format_characters_are_refused_and_shown_escaped() {
    let yaml = "runs:
  - tenant: \"acme\\n2026-01-01 INFO forged\"
    dag_id: \"etl\\u202e\"
    run_id: r1
    tasks:
      - {task_id: \"load\\e[31m\"}
";
    assert_eq!(
        problems(yaml),
        [
            "runs[0].tenant: \"acme\\u{a}2026-01-01 INFO forged\" contains a control or format character",
            "runs[0].dag_id: \"etl\\u{202e}\" contains a control or format character",
            "runs[0].tasks[0].task_id: \"load\\u{1b}[31m\" contains a control or format character",
        ]
    );
}

#[test]
fn reserved_label_and_annotation_keys_are_refused_naming_task_and_key() {
    let yaml = run_with(
        "[{task_id: load, execution: {labels: {Dexaflow.IO/tenant-id: x, team: data}, \
         annotations: {ci.leoflow.io/note: y, example.com/leoflow.io: ok, leoflow.iox/z: ok}}}]",
    );
    assert_eq!(
        problems(&yaml),
        [
            "runs[0].tasks[0]: task \"load\": execution.labels key \"Dexaflow.IO/tenant-id\" is under a prefix reserved for the orchestrator (leoflow.io/, dexaflow.io/ and their subdomains)",
            "runs[0].tasks[0]: task \"load\": execution.annotations key \"ci.leoflow.io/note\" is under a prefix reserved for the orchestrator (leoflow.io/, dexaflow.io/ and their subdomains)",
        ]
    );
}

#[test]
fn a_run_s_default_execution_timeout_applies_to_tasks_that_set_none() {
    let yaml = "runs:
  - tenant: acme
    dag_id: etl
    run_id: r1
    default_args: {execution_timeout_seconds: 600}
    tasks:
      - {task_id: inherits}
      - {task_id: own, execution_timeout_seconds: 5}
  - {tenant: acme, dag_id: etl, run_id: r2, tasks: [{task_id: none}]}
";
    let tasks = parse(yaml).expect("valid");

    let timeouts: Vec<Option<Duration>> =
        tasks.iter().map(|task| task.execution_timeout()).collect();
    assert_eq!(
        timeouts,
        [
            Some(Duration::from_secs(600)),
            Some(Duration::from_secs(5)),
            None
        ]
    );
}

#[test]
fn an_execution_timeout_of_zero_is_refused_where_it_is_set() {
    let yaml = "runs:
  - tenant: acme
    dag_id: etl
    run_id: r1
    default_args: {execution_timeout_seconds: 0}
    tasks:
      - {task_id: a, execution_timeout_seconds: 0}
";
    assert_eq!(
        problems(yaml),
        [
            "runs[0].default_args.execution_timeout_seconds: must be at least 1",
            "runs[0].tasks[0].execution_timeout_seconds: must be at least 1",
        ]
    );
}

#[test]
fn default_args_takes_only_what_a_task_inherits() {
    let lines = problems(
        "runs:\n  - {tenant: acme, dag_id: etl, run_id: r1, default_args: {owner: me}, tasks: []}\n",
    );
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].starts_with("runs[0].default_args.owner: unknown field `owner`"),
        "{lines:?}"
    );
}

#[test]
fn text_that_is_not_a_workload_is_one_error() {
    let errors = parse("runs: {a: 1}").expect_err("runs is not a list");
    assert!(
        matches!(errors.errors(), [WorkloadError::Syntax { .. }]),
        "{errors}"
    );
    assert!(
        errors
            .to_string()
            .starts_with("not a workload (a mapping with a runs list): "),
        "{errors}"
    );
}

#[test]
fn an_integer_beyond_64_bits_is_one_problem_among_the_others_naming_its_path() {
    let huge = "9".repeat(30);
    let problems = problems(&run_with(&format!(
        "[{{task_id: a, execution_timeout_seconds: {huge}}}, {{task_id: b, imgae: x}}, \
         {{task_id: c, env: {{N: {huge}}}}}]"
    )));

    assert!(
        problems.contains(
            &"runs[0].tasks[0].execution_timeout_seconds: an integer of 30 digits does not fit in 64 bits"
                .to_owned()
        ),
        "{problems:#?}"
    );
    assert!(
        problems.contains(
            &"runs[0].tasks[2].env.N: an integer of 30 digits does not fit in 64 bits".to_owned()
        ),
        "{problems:#?}"
    );
    assert!(
        problems
            .iter()
            .any(|line| line.starts_with("runs[0].tasks[1]: unknown key \"imgae\"")),
        "{problems:#?}"
    );
    assert!(
        problems.iter().all(|line| !line.contains(&huge)),
        "{problems:#?}"
    );
}

#[test]
fn a_field_of_the_wrong_type_does_not_hide_the_task_s_other_problems() {
    let lines = problems(&run_with(
        "[{task_id: '', pool_slots: -1, execution_timeout_seconds: 0, \
         execution: {labels: {dexaflow.io/team: data}}}]",
    ));

    assert_eq!(lines.len(), 4, "{lines:?}");
    assert!(
        lines[0] == "runs[0].tasks[0].pool_slots: expected an integer from 0 to 4294967295, got -1",
        "{lines:?}"
    );
    assert_eq!(
        lines[1..],
        [
            "runs[0].tasks[0].task_id: must not be empty",
            "runs[0].tasks[0].execution_timeout_seconds: must be at least 1",
            "runs[0].tasks[0]: task \"\": execution.labels key \"dexaflow.io/team\" is under a prefix reserved for the orchestrator (leoflow.io/, dexaflow.io/ and their subdomains)",
        ]
    );
    assert!(
        lines.iter().all(|line| !line.contains("missing field")),
        "{lines:?}"
    );
}

#[test]
fn a_bad_execution_field_does_not_hide_a_reserved_label_key_beside_it() {
    let lines = problems(&run_with(
        "[{task_id: a, execution: {tolerations: many, labels: {leoflow.io/x: y}}}]",
    ));

    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(
        lines[0].starts_with("runs[0].tasks[0].execution.tolerations: invalid type"),
        "{lines:?}"
    );
    assert!(
        lines[1].starts_with("runs[0].tasks[0]: task \"a\": execution.labels key \"leoflow.io/x\""),
        "{lines:?}"
    );
}

#[test]
fn a_dag_id_of_the_wrong_type_does_not_hide_the_run_s_other_problems() {
    let yaml = "runs:
  - tenant: ''
    dag_id: [etl]
    run_id: r1
    default_args: {execution_timeout_seconds: 0}
    tasks:
      - {task_id: a, pool_slots: many}
      - {task_id: a}
";
    let lines = problems(yaml);

    assert_eq!(lines.len(), 4, "{lines:?}");
    assert!(
        lines[0].starts_with("runs[0].dag_id: invalid type: sequence"),
        "{lines:?}"
    );
    assert_eq!(
        lines[1..3],
        [
            "runs[0].tenant: must not be empty",
            "runs[0].default_args.execution_timeout_seconds: must be at least 1",
        ]
    );
    assert!(
        lines[3]
            == "runs[0].tasks[0].pool_slots: expected an integer from 0 to 4294967295, got \"many\"",
        "{lines:?}"
    );
    // The run's ids stand in as placeholders: its tasks are not taken for duplicates.
    assert!(
        lines.iter().all(|line| !line.contains("appears twice")),
        "{lines:?}"
    );
}

#[test]
fn pool_slots_above_their_32_bits_are_refused_saying_their_range() {
    let lines = problems(&run_with(
        "[{task_id: a, pool_slots: 99999999999999999999}, {task_id: b, pool_slots: 5000000000}]",
    ));

    assert_eq!(
        lines,
        [
            "runs[0].tasks[0].pool_slots: expected an integer from 0 to 4294967295, got an integer of 20 digits (too large)",
            "runs[0].tasks[1].pool_slots: expected an integer from 0 to 4294967295, got 5000000000 (too large)",
        ]
    );
    assert!(
        lines.iter().all(|line| !line.contains("64 bits")),
        "{lines:?}"
    );
}

#[test]
fn an_integer_field_given_no_integer_says_what_it_takes_not_the_rust_type() {
    let lines = problems(&run_with(
        "[{task_id: a, pool_slots: 1.5, command: [echo]}, \
         {task_id: b, execution_timeout_seconds: soon, command: [echo]}]",
    ));

    assert_eq!(
        lines,
        [
            "runs[0].tasks[0].pool_slots: expected an integer from 0 to 4294967295, got 1.5",
            "runs[0].tasks[1].execution_timeout_seconds: expected a positive integer, got \"soon\"",
        ]
    );
    assert!(
        lines
            .iter()
            .all(|line| !line.contains("u32") && !line.contains("u64")),
        "{lines:?}"
    );
}

#[test]
fn a_bad_default_args_timeout_is_named_by_its_full_path() {
    let lines = problems(
        "runs:\n  - {tenant: acme, dag_id: etl, run_id: r1, \
         default_args: {execution_timeout_seconds: -5}, tasks: [{task_id: a, command: [echo]}]}\n",
    );

    assert_eq!(
        lines,
        ["runs[0].default_args.execution_timeout_seconds: expected a positive integer, got -5"]
    );
}

#[test]
fn a_task_without_a_command_is_refused_for_the_lite_executor_naming_the_field() {
    let yaml = run_with("[{task_id: a}, {task_id: b, command: []}, {task_id: c, command: [echo]}]");

    let errors = parse_for(&yaml, &ExecutorSettings::default()).expect_err("no command");

    let lines: Vec<String> = errors.to_string().lines().map(str::to_owned).collect();
    assert_eq!(
        lines,
        [
            "runs[0].tasks[0].command: required by the lite executor, which runs it as a local process",
            "runs[0].tasks[1].command: required by the lite executor, which runs it as a local process",
        ]
    );
}

#[test]
fn a_task_without_a_command_is_accepted_for_an_executor_that_runs_an_image() {
    let yaml = run_with("[{task_id: a, image: ghcr.io/acme/etl:1.2}]");
    let kubernetes = ExecutorSettings::Kubernetes {
        namespace: "dexaflow".to_owned(),
        dry_run_dir: None,
        run_as_non_root: true,
    };

    let tasks = parse_for(&yaml, &kubernetes).expect("a pod runs its image's entrypoint");

    assert_eq!(tasks.len(), 1);
    assert!(tasks[0].command.is_empty());
}
