//! The executors: `lite` runs the command with the agent's environment and logs its output,
//! `kubernetes` builds the pod and writes it in dry-run mode, `null` returns at once.

#[path = "it/fakes/mod.rs"]
mod fakes;
#[path = "it/processes/mod.rs"]
mod processes;

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::path::{Component, PathBuf};
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use dexaflow_admission::admission::{
    Execution, ResourceList, Resources, TaintEffect, Toleration, TolerationOperator,
};
use dexaflow_admission::dispatch::executor::kubernetes::{Kubernetes, build_pod, label_value};
use dexaflow_admission::dispatch::executor::lite::Lite;
use dexaflow_admission::dispatch::executor::null::Null;
use dexaflow_admission::dispatch::executor::{
    Admitted, Completion, Ending, Executor, ExecutorError, Launched, Step, Steps, is_reserved_env,
};
use dexaflow_admission::dispatch::placement::{DedicatedReason, PodKind};
use dexaflow_admission::dispatch::task::Task;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use processes::{wait_for_line, wait_for_pid, wait_until_gone};
use rustix::io::Errno;
use tokio::sync::mpsc::error::TryRecvError;

const TOKEN: &str = "header.payload.signature";
const TI: &str = "acme.etl.manual__1.load";

fn admitted(command: &[&str]) -> Admitted {
    Admitted {
        task: Arc::new(Task {
            command: command.iter().map(|part| (*part).to_owned()).collect(),
            ..fakes::manual_task()
        }),
        image: "ghcr.io/acme/etl:1.2".to_owned(),
        task_instance_id: TI.to_owned(),
        try_number: 2,
        attempt_epoch: 7,
        resources: Resources::default(),
        execution: Execution {
            service_account: "dexaflow-task".to_owned(),
            ..Execution::default()
        },
        placement: PodKind::Dedicated(DedicatedReason::NoWarmPool),
        token: TOKEN.to_owned(),
    }
}

// ---- lite -------------------------------------------------------------------------------------

/// Reads an attempt's steps to its end: it must start, then end; returns how it ended.
async fn run_to_end(launched: Launched) -> Completion {
    let mut steps = launched.steps.expect("lite follows its attempts");
    let started = steps.recv().await;
    assert!(matches!(started, Some(Step::Started)), "{started:?}");
    next_end(&mut steps).await
}

/// The next step, which must be the attempt's end.
async fn next_end(steps: &mut Steps) -> Completion {
    match steps.recv().await {
        Some(Step::Ended(completion)) => completion,
        other => panic!("expected the attempt to end, got {other:?}"),
    }
}

/// A script that writes its shell's pid to `dir/leader.pid` and that of a `sleep 300` it
/// starts to `dir/child.pid`, then waits for the sleep; and the two files.
fn leader_and_child(dir: &std::path::Path) -> (String, PathBuf, PathBuf) {
    let (leader, child) = (dir.join("leader.pid"), dir.join("child.pid"));
    let script = format!(
        "echo $$ > {}; sleep 300 & echo $! > {}; wait",
        leader.display(),
        child.display()
    );
    (script, leader, child)
}

/// An attempt of task `task_id` whose command is `sh -c script`.
fn shell(task_id: &str, script: &str) -> Admitted {
    let mut attempt = admitted(&["sh", "-c", script]);
    Arc::make_mut(&mut attempt.task).key.task_id = task_id.to_owned();
    attempt
}

#[tokio::test]
async fn lite_records_a_failed_exit_code_with_the_output_in_the_attempt_log() {
    let dir = tempfile::tempdir().unwrap();
    let lite = Lite::new(dir.path());
    let attempt = admitted(&["sh", "-c", "echo $DEXAFLOW_TASK_INSTANCE_ID; exit 3"]);
    let launched = lite.execute(&attempt).await.unwrap();
    assert_eq!(
        run_to_end(launched).await,
        Completion::Failed(Ending::ExitCode(3))
    );
    let log = dir
        .path()
        .join("acme/etl/manual__1/load/try-2-attempt-7.log");
    assert_eq!(lite.log_path(&attempt), log);
    assert_eq!(std::fs::read_to_string(log).unwrap(), format!("{TI}\n"));
}

#[tokio::test]
async fn lite_records_a_zero_exit_as_success() {
    let dir = tempfile::tempdir().unwrap();
    let launched = Lite::new(dir.path())
        .execute(&admitted(&["true"]))
        .await
        .unwrap();
    assert_eq!(run_to_end(launched).await, Completion::Succeeded);
}

#[tokio::test]
async fn lite_sets_the_token_and_drops_a_forged_one_from_the_task_env() {
    let dir = tempfile::tempdir().unwrap();
    let lite = Lite::new(dir.path());
    let mut attempt = admitted(&[
        "sh",
        "-c",
        "echo token=$DEXAFLOW_AGENT_TOKEN; echo leo=${LEOFLOW_ADDR:-unset}; \
         echo lower=${dexaflow_agent_token:-unset}; echo plain=$PLAIN",
    ]);
    let env = &mut Arc::make_mut(&mut attempt.task).env;
    env.insert("DEXAFLOW_AGENT_TOKEN".to_owned(), "forged".to_owned());
    env.insert("dexaflow_agent_token".to_owned(), "forged".to_owned());
    env.insert("LEOFLOW_ADDR".to_owned(), "evil:443".to_owned());
    env.insert("PLAIN".to_owned(), "kept".to_owned());
    let launched = lite.execute(&attempt).await.unwrap();
    assert_eq!(run_to_end(launched).await, Completion::Succeeded);
    let log = std::fs::read_to_string(lite.log_path(&attempt)).unwrap();
    assert_eq!(
        log,
        format!("token={TOKEN}\nleo=unset\nlower=unset\nplain=kept\n")
    );
}

#[tokio::test]
async fn lite_does_not_pass_the_dispatcher_environment_on() {
    let dir = tempfile::tempdir().unwrap();
    let lite = Lite::new(dir.path());
    // Cargo sets CARGO_* variables for this test process; the task must see none of them.
    let attempt = admitted(&["sh", "-c", "env | cut -d= -f1 | sort"]);
    let launched = lite.execute(&attempt).await.unwrap();
    assert_eq!(run_to_end(launched).await, Completion::Succeeded);
    let log = std::fs::read_to_string(lite.log_path(&attempt)).unwrap();
    let names: Vec<&str> = log
        .lines()
        .filter(|name| !["PWD", "SHLVL", "_", "OLDPWD"].contains(name))
        .collect();
    assert_eq!(
        names,
        ["DEXAFLOW_AGENT_TOKEN", "DEXAFLOW_TASK_INSTANCE_ID", "PATH"]
    );
}

#[tokio::test]
async fn lite_reports_a_killed_process_by_its_signal() {
    let dir = tempfile::tempdir().unwrap();
    let launched = Lite::new(dir.path())
        .execute(&admitted(&["sh", "-c", "kill -9 $$"]))
        .await
        .unwrap();
    assert_eq!(
        run_to_end(launched).await,
        Completion::Failed(Ending::Killed(Some(9)))
    );
}

#[tokio::test]
async fn lite_refuses_a_task_without_a_command() {
    let dir = tempfile::tempdir().unwrap();
    let lite = Lite::new(dir.path());
    let error = lite.execute(&admitted(&[])).await.unwrap_err();
    assert!(matches!(error, ExecutorError::NoCommand { .. }));
    assert_eq!(
        error.to_string(),
        "task acme/etl/manual__1/load has no command"
    );
    assert!(!lite.log_path(&admitted(&[])).exists());
}

#[tokio::test]
async fn lite_reports_a_program_that_does_not_exist_as_a_launch_error_not_backpressure() {
    let dir = tempfile::tempdir().unwrap();
    let error = Lite::new(dir.path())
        .execute(&admitted(&["/nonexistent/program"]))
        .await
        .unwrap_err();
    assert!(
        matches!(error, ExecutorError::Spawn { ref program, .. } if program == "/nonexistent/program")
    );
    assert!(!error.is_backpressure());
}

#[test]
fn a_launch_that_finds_no_file_descriptors_or_processes_left_is_backpressure() {
    let spawn = |errno: i32| ExecutorError::Spawn {
        program: "sh".to_owned(),
        source: std::io::Error::from_raw_os_error(errno),
    };
    let log = |errno: i32| ExecutorError::Write {
        path: "/logs/a.log".to_owned(),
        source: std::io::Error::from_raw_os_error(errno),
    };
    for errno in [Errno::MFILE, Errno::NFILE, Errno::AGAIN, Errno::NOMEM] {
        assert!(spawn(errno.raw_os_error()).is_backpressure(), "{errno:?}");
        assert!(log(errno.raw_os_error()).is_backpressure(), "{errno:?}");
    }
    for errno in [Errno::NOENT, Errno::ACCESS, Errno::NOSPC] {
        assert!(!spawn(errno.raw_os_error()).is_backpressure(), "{errno:?}");
        assert!(!log(errno.raw_os_error()).is_backpressure(), "{errno:?}");
    }
}

#[test]
fn lite_keeps_every_log_inside_its_directory() {
    let lite = Lite::new("/logs");
    let mut attempt = admitted(&["true"]);
    let key = &mut Arc::make_mut(&mut attempt.task).key;
    key.tenant = "..".to_owned();
    key.dag_id = "../../etc".to_owned();
    key.run_id = String::new();
    key.task_id = ".hidden".to_owned();
    let path = lite.log_path(&attempt);
    assert_eq!(
        path,
        std::path::Path::new("/logs/%2E./%2E.%2F..%2Fetc/%/%2Ehidden/try-2-attempt-7.log")
    );
    assert!(
        path.components()
            .all(|part| matches!(part, Component::RootDir | Component::Normal(_)))
    );
}

#[test]
fn lite_gives_distinct_task_ids_distinct_log_paths() {
    let lite = Lite::new("/logs");
    let ids = [
        "a/b", "a_b", "a%2Fb", "a\\b", "a.b", ".a", "%2Ea", "", "%", "a\u{0}b", "é", "%C3%A9",
    ];
    let paths: BTreeSet<PathBuf> = ids
        .iter()
        .map(|id| {
            let mut attempt = admitted(&["true"]);
            Arc::make_mut(&mut attempt.task).key.task_id = (*id).to_owned();
            lite.log_path(&attempt)
        })
        .collect();
    assert_eq!(paths.len(), ids.len(), "{paths:?}");
    assert!(paths.iter().all(|path| path.parent().unwrap().parent()
        == Some(std::path::Path::new("/logs/acme/etl/manual__1"))));
}

#[test]
fn lite_cuts_a_long_id_to_a_bounded_component_that_stays_distinct() {
    let lite = Lite::new("/logs");
    let long = |last: char| {
        let mut attempt = admitted(&["true"]);
        Arc::make_mut(&mut attempt.task).key.task_id = format!("{}{last}", "/".repeat(400));
        lite.log_path(&attempt)
    };
    let (one, other) = (long('a'), long('b'));
    assert_ne!(one, other);
    for path in [&one, &other] {
        let component = path.parent().unwrap().file_name().unwrap();
        assert!(component.len() <= 200, "{component:?}");
    }
}

#[test]
fn two_attempts_of_one_try_get_distinct_logs() {
    let lite = Lite::new("/logs");
    let first = admitted(&["true"]);
    let mut second = first.clone();
    second.attempt_epoch += 1;
    assert_eq!(first.try_number, second.try_number);
    assert_ne!(lite.log_path(&first), lite.log_path(&second));
}

#[tokio::test]
async fn lite_kills_what_a_finished_command_left_running_in_its_group() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("child.pid");
    let script = format!("sleep 300 & echo $! > {}", pid_file.display());
    let lite = Lite::new(dir.path());
    let launched = lite.execute(&shell("leaves", &script)).await.unwrap();

    assert_eq!(run_to_end(launched).await, Completion::Succeeded);
    wait_until_gone(wait_for_pid(&pid_file));
}

#[tokio::test(start_paused = true)]
async fn an_attempt_past_its_execution_timeout_is_killed_with_its_group_and_fails() {
    let dir = tempfile::tempdir().unwrap();
    let (script, leader, child) = leader_and_child(dir.path());
    let mut attempt = shell("hangs", &script);
    Arc::make_mut(&mut attempt.task).execution_timeout_seconds = Some(2);
    let lite = Lite::new(dir.path());
    let mut steps = lite.execute(&attempt).await.unwrap().steps.unwrap();
    assert!(matches!(steps.recv().await, Some(Step::Started)));
    let pids = [wait_for_pid(&leader), wait_for_pid(&child)];

    assert_eq!(
        next_end(&mut steps).await,
        Completion::Failed(Ending::TimedOut { seconds: 2 })
    );
    for pid in pids {
        wait_until_gone(pid);
    }
}

// On the real clock: a paused one would run on to the timeout while the process exits.
#[tokio::test]
async fn an_attempt_within_its_execution_timeout_ends_as_its_command_does() {
    let dir = tempfile::tempdir().unwrap();
    let mut attempt = shell("quick", "exit 0");
    Arc::make_mut(&mut attempt.task).execution_timeout_seconds = Some(3600);
    let launched = Lite::new(dir.path()).execute(&attempt).await.unwrap();

    assert_eq!(run_to_end(launched).await, Completion::Succeeded);
}

#[tokio::test(start_paused = true)]
async fn a_launch_beyond_max_parallel_is_accepted_at_once_and_starts_when_a_slot_frees() {
    let dir = tempfile::tempdir().unwrap();
    let lite = Lite::new(dir.path()).with_max_parallel(1);
    let mut first = shell("first", "sleep 300");
    Arc::make_mut(&mut first.task).execution_timeout_seconds = Some(5);
    let done = dir.path().join("second.done");
    let second = shell("second", &format!("echo done > {}", done.display()));

    let mut first_steps = lite.execute(&first).await.unwrap().steps.unwrap();
    assert!(matches!(first_steps.recv().await, Some(Step::Started)));
    let mut second_steps = lite.execute(&second).await.unwrap().steps.unwrap();
    tokio::task::yield_now().await;
    assert!(
        matches!(second_steps.try_recv(), Err(TryRecvError::Empty)),
        "the second attempt waits for the first's slot"
    );
    assert!(!done.exists());

    // Nothing else to do: the paused clock runs on to the first attempt's timeout.
    assert!(matches!(second_steps.recv().await, Some(Step::Started)));
    assert_eq!(
        first_steps.try_recv().ok().map(|step| format!("{step:?}")),
        Some(format!(
            "{:?}",
            Step::Ended(Completion::Failed(Ending::TimedOut { seconds: 5 }))
        )),
        "the slot was freed by the first attempt's end"
    );
    assert_eq!(next_end(&mut second_steps).await, Completion::Succeeded);
    assert_eq!(wait_for_line(&done), "done");
}

#[tokio::test]
async fn shutdown_ends_running_attempts_with_their_groups_as_orphaned() {
    let dir = tempfile::tempdir().unwrap();
    let (script, leader, child) = leader_and_child(dir.path());
    let lite = Lite::new(dir.path()).with_kill_grace(Duration::from_secs(5));
    let mut steps = lite
        .execute(&shell("long", &script))
        .await
        .unwrap()
        .steps
        .unwrap();
    assert!(matches!(steps.recv().await, Some(Step::Started)));
    let pids = [wait_for_pid(&leader), wait_for_pid(&child)];

    lite.shutdown().await;

    assert_eq!(
        next_end(&mut steps).await,
        Completion::Failed(Ending::Orphaned)
    );
    for pid in pids {
        wait_until_gone(pid);
    }
}

#[tokio::test(start_paused = true)]
async fn shutdown_kills_a_group_that_ignores_term_once_the_grace_has_passed() {
    let dir = tempfile::tempdir().unwrap();
    let leader = dir.path().join("leader.pid");
    let script = format!(
        "trap '' TERM; echo $$ > {}; while :; do sleep 1; done",
        leader.display()
    );
    let lite = Lite::new(dir.path()).with_kill_grace(Duration::from_secs(30));
    let mut steps = lite
        .execute(&shell("stubborn", &script))
        .await
        .unwrap()
        .steps
        .unwrap();
    assert!(matches!(steps.recv().await, Some(Step::Started)));
    let pid = wait_for_pid(&leader);

    lite.shutdown().await;

    assert_eq!(
        next_end(&mut steps).await,
        Completion::Failed(Ending::Orphaned)
    );
    wait_until_gone(pid);
}

#[tokio::test]
async fn shutdown_hands_back_an_attempt_still_waiting_for_a_slot_without_starting_it() {
    let dir = tempfile::tempdir().unwrap();
    let lite = Lite::new(dir.path())
        .with_max_parallel(1)
        .with_kill_grace(Duration::from_secs(5));
    let started = dir.path().join("waiting.started");
    let mut running = lite
        .execute(&shell("running", "sleep 300"))
        .await
        .unwrap()
        .steps
        .unwrap();
    let waiting = shell("waiting", &format!("echo > {}", started.display()));
    let mut waiting_steps = lite.execute(&waiting).await.unwrap().steps.unwrap();

    lite.shutdown().await;

    assert!(matches!(waiting_steps.recv().await, Some(Step::HandedBack)));
    assert!(waiting_steps.recv().await.is_none(), "nothing follows");
    assert!(matches!(running.recv().await, Some(Step::Started)));
    assert_eq!(
        next_end(&mut running).await,
        Completion::Failed(Ending::Orphaned)
    );
    assert!(!started.exists());
    assert!(!lite.log_path(&waiting).exists());
}

#[tokio::test]
async fn after_shutdown_lite_hands_back_what_it_is_given_without_starting_it() {
    let dir = tempfile::tempdir().unwrap();
    let lite = Lite::new(dir.path());
    lite.shutdown().await;
    let attempt = admitted(&["true"]);

    let mut steps = lite.execute(&attempt).await.unwrap().steps.unwrap();

    assert!(matches!(steps.recv().await, Some(Step::HandedBack)));
    assert!(!lite.log_path(&attempt).exists());
}

#[test]
fn reserved_env_keys_are_matched_in_any_case() {
    assert!(is_reserved_env("DEXAFLOW_AGENT_TOKEN"));
    assert!(is_reserved_env("Dexaflow_x"));
    assert!(is_reserved_env("leoflow_addr"));
    assert!(!is_reserved_env("MY_DEXAFLOW_X"));
    assert!(!is_reserved_env("DEXAFLOW"));
}

// ---- kubernetes -------------------------------------------------------------------------------

fn pod_of(attempt: &Admitted) -> Pod {
    build_pod(attempt, "dexaflow-tasks", true)
}

#[test]
fn the_pod_name_is_a_dns_label_naming_dag_task_and_try() {
    let name = pod_of(&admitted(&["true"])).metadata.name.unwrap();
    let (base, suffix) = name.rsplit_once('-').unwrap();
    assert_eq!(base, "dexaflow-etl-load-2");
    assert_eq!(suffix.len(), 8);
    assert!(
        suffix
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    );
}

#[test]
fn a_long_pod_name_is_cut_to_63_characters() {
    let mut attempt = admitted(&["true"]);
    let key = &mut Arc::make_mut(&mut attempt.task).key;
    key.dag_id = "Very_Long.DAG-name".repeat(5);
    key.task_id = "Task With Spaces".to_owned();
    let name = pod_of(&attempt).metadata.name.unwrap();
    assert!(name.len() <= 63, "{name} is {} long", name.len());
    assert!(name.starts_with("dexaflow-very-long-dag-name"));
    assert!(
        name.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    );
    assert!(!name.contains("--"), "{name}");
}

#[test]
fn the_pod_carries_identity_labels_and_the_task_instance_annotation() {
    let pod = pod_of(&admitted(&["true"]));
    let labels = pod.metadata.labels.unwrap();
    let expected: BTreeMap<String, String> = [
        ("dexaflow.io/dag-id", "etl"),
        ("dexaflow.io/task-id", "load"),
        ("dexaflow.io/run-id", "manual__1"),
        ("dexaflow.io/try-number", "2"),
        ("dexaflow.io/attempt-epoch", "7"),
        ("dexaflow.io/tenant-id", "acme"),
    ]
    .into_iter()
    .map(|(key, value)| (key.to_owned(), value.to_owned()))
    .collect();
    assert_eq!(labels, expected);
    let annotations = pod.metadata.annotations.unwrap();
    assert_eq!(annotations["dexaflow.io/task-instance-id"], TI);
    assert_eq!(pod.metadata.namespace.as_deref(), Some("dexaflow-tasks"));
}

#[test]
fn a_long_label_value_becomes_a_prefix_and_a_hash() {
    let long = "r".repeat(80);
    let value = label_value(&long);
    assert_eq!(value.len(), 63);
    assert!(value.starts_with(&"r".repeat(50)));
    assert_ne!(label_value(&format!("{long}x")), value);
    let sanitized = label_value("Manual__2024-01-01T00:00:00+00:00");
    assert!(
        sanitized.starts_with("Manual__2024-01-01T00-00-00-00-00-"),
        "{sanitized}"
    );
}

#[test]
fn execution_labels_merge_under_the_executor_s_own() {
    let mut attempt = admitted(&["true"]);
    let labels = &mut attempt.execution.labels;
    labels.insert("team".to_owned(), "data".to_owned());
    labels.insert("dexaflow.io/dag-id".to_owned(), "forged".to_owned());
    labels.insert("leoflow.io/tenant-id".to_owned(), "forged".to_owned());
    attempt.execution.annotations.insert(
        "dexaflow.io/task-instance-id".to_owned(),
        "forged".to_owned(),
    );
    attempt
        .execution
        .annotations
        .insert("example.com/note".to_owned(), "hello".to_owned());
    let pod = pod_of(&attempt);
    let labels = pod.metadata.labels.unwrap();
    assert_eq!(labels["team"], "data");
    assert_eq!(labels["dexaflow.io/dag-id"], "etl");
    assert!(!labels.contains_key("leoflow.io/tenant-id"));
    let annotations = pod.metadata.annotations.unwrap();
    assert_eq!(annotations["dexaflow.io/task-instance-id"], TI);
    assert_eq!(annotations["example.com/note"], "hello");
}

#[test]
fn the_pod_spec_carries_the_execution_fields() {
    let mut attempt = admitted(&["true"]);
    attempt
        .execution
        .node_selector
        .insert("pool".to_owned(), "gpu".to_owned());
    attempt.execution.tolerations.push(Toleration {
        key: "gpu".to_owned(),
        operator: TolerationOperator::Equal,
        value: "true".to_owned(),
        effect: Some(TaintEffect::NoExecute),
        toleration_seconds: Some(30),
    });
    attempt.execution.tolerations.push(Toleration {
        key: String::new(),
        operator: TolerationOperator::Exists,
        value: String::new(),
        effect: None,
        toleration_seconds: None,
    });
    attempt.execution.priority_class = "high".to_owned();
    attempt.execution.runtime_class_name = "gvisor".to_owned();
    let spec = pod_of(&attempt).spec.unwrap();
    assert_eq!(spec.node_selector.unwrap()["pool"], "gpu");
    let tolerations = spec.tolerations.unwrap();
    assert_eq!(tolerations[0].key.as_deref(), Some("gpu"));
    assert_eq!(tolerations[0].operator.as_deref(), Some("Equal"));
    assert_eq!(tolerations[0].value.as_deref(), Some("true"));
    assert_eq!(tolerations[0].effect.as_deref(), Some("NoExecute"));
    assert_eq!(tolerations[0].toleration_seconds, Some(30));
    assert_eq!(tolerations[1].key, None);
    assert_eq!(tolerations[1].operator.as_deref(), Some("Exists"));
    assert_eq!(tolerations[1].effect, None);
    assert_eq!(spec.priority_class_name.as_deref(), Some("high"));
    assert_eq!(spec.runtime_class_name.as_deref(), Some("gvisor"));
    assert_eq!(spec.service_account_name.as_deref(), Some("dexaflow-task"));
    assert_eq!(spec.restart_policy.as_deref(), Some("Never"));
    assert_eq!(spec.automount_service_account_token, Some(false));
}

#[test]
fn an_attempt_without_placement_leaves_the_fields_unset() {
    let mut attempt = admitted(&["true"]);
    attempt.execution = Execution::default();
    let spec = pod_of(&attempt).spec.unwrap();
    assert_eq!(spec.node_selector, None);
    assert_eq!(spec.tolerations, None);
    assert_eq!(spec.priority_class_name, None);
    assert_eq!(spec.runtime_class_name, None);
    assert_eq!(spec.service_account_name, None);
}

#[test]
fn the_container_runs_the_image_and_command_with_the_agent_env_first() {
    let mut attempt = admitted(&["python", "-m", "task"]);
    let env = &mut Arc::make_mut(&mut attempt.task).env;
    env.insert("DEXAFLOW_AGENT_TOKEN".to_owned(), "forged".to_owned());
    env.insert("Leoflow_Addr".to_owned(), "evil".to_owned());
    env.insert("PLAIN".to_owned(), "kept".to_owned());
    let spec = pod_of(&attempt).spec.unwrap();
    assert_eq!(spec.containers.len(), 1);
    let container = &spec.containers[0];
    assert_eq!(container.name, "task");
    assert_eq!(container.image.as_deref(), Some("ghcr.io/acme/etl:1.2"));
    assert_eq!(
        container.command.as_deref(),
        Some(&["python".to_owned(), "-m".to_owned(), "task".to_owned()][..])
    );
    let env: Vec<(&str, &str)> = container
        .env
        .as_ref()
        .unwrap()
        .iter()
        .map(|var| (var.name.as_str(), var.value.as_deref().unwrap()))
        .collect();
    assert_eq!(
        env,
        [
            ("DEXAFLOW_AGENT_TOKEN", TOKEN),
            ("DEXAFLOW_TASK_INSTANCE_ID", TI),
            ("PLAIN", "kept"),
        ]
    );
}

#[test]
fn the_container_gets_the_effective_resources() {
    let mut attempt = admitted(&["true"]);
    attempt.resources = Resources {
        requests: ResourceList {
            cpu: Some("500m".to_owned()),
            memory: Some("1Gi".to_owned()),
            ephemeral_storage: None,
        },
        limits: ResourceList {
            cpu: Some("1".to_owned()),
            memory: Some("not a quantity".to_owned()),
            ephemeral_storage: Some("10Gi".to_owned()),
        },
    };
    let spec = pod_of(&attempt).spec.unwrap();
    let resources = spec.containers[0].resources.clone().unwrap();
    let requests = resources.requests.unwrap();
    assert_eq!(requests["cpu"], Quantity("500m".to_owned()));
    assert_eq!(requests["memory"], Quantity("1Gi".to_owned()));
    assert_eq!(requests.len(), 2);
    let limits = resources.limits.unwrap();
    assert_eq!(limits["cpu"], Quantity("1".to_owned()));
    assert_eq!(limits["ephemeral-storage"], Quantity("10Gi".to_owned()));
    assert!(
        !limits.contains_key("memory"),
        "an unparsable quantity is dropped"
    );
}

#[test]
fn the_container_runs_under_a_restricted_security_context() {
    let spec = pod_of(&admitted(&["true"])).spec.unwrap();
    let context = spec.containers[0].security_context.clone().unwrap();
    assert_eq!(context.allow_privilege_escalation, Some(false));
    assert_eq!(
        context.capabilities.unwrap().drop,
        Some(vec!["ALL".to_owned()])
    );
    assert_eq!(context.seccomp_profile.unwrap().type_, "RuntimeDefault");
    assert_eq!(context.run_as_non_root, Some(true));
    assert_eq!(spec.security_context.unwrap().fs_group, Some(65532));
}

#[test]
fn run_as_non_root_off_leaves_the_user_to_the_image() {
    let spec = build_pod(&admitted(&["true"]), "ns", false).spec.unwrap();
    let context = spec.containers[0].security_context.clone().unwrap();
    assert_eq!(context.run_as_non_root, None);
    assert_eq!(context.allow_privilege_escalation, Some(false));
    assert_eq!(spec.security_context, None);
}

#[tokio::test]
async fn dry_run_writes_the_pod_manifest_and_follows_no_steps() {
    let dir = tempfile::tempdir().unwrap();
    let executor = Kubernetes::new("dexaflow-tasks", Some(dir.path().to_owned()), true);
    let launched = executor.execute(&admitted(&["true"])).await.unwrap();
    assert!(launched.steps.is_none());
    let files: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1);
    let file = &files[0];
    let name = file.file_stem().unwrap().to_str().unwrap();
    assert!(name.starts_with("dexaflow-etl-load-2-"));
    assert_eq!(file.extension().unwrap(), "yaml");
    let pod: Pod = serde_yaml_ng::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    assert_eq!(pod.metadata.name.as_deref(), Some(name));
    assert_eq!(pod.metadata.namespace.as_deref(), Some("dexaflow-tasks"));
    assert_eq!(pod.spec.unwrap().containers[0].name, "task");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(file).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "the manifest carries a token: owner only");
    }
}

#[tokio::test]
async fn without_a_dry_run_directory_the_executor_says_it_has_no_cluster() {
    let executor = Kubernetes::new("dexaflow-tasks", None, true);
    let error = executor.execute(&admitted(&["true"])).await.unwrap_err();
    let ExecutorError::NoCluster { pod, namespace } = &error else {
        panic!("expected NoCluster, got {error:?}");
    };
    assert!(pod.starts_with("dexaflow-etl-load-2-"));
    assert_eq!(namespace, "dexaflow-tasks");
    assert!(
        error
            .to_string()
            .starts_with("no kubernetes client to create pod dexaflow-etl-load-2-")
    );
}

// ---- null -------------------------------------------------------------------------------------

#[test]
fn null_is_ready_on_the_first_poll_with_nothing_to_follow() {
    let attempt = admitted(&["true"]);
    let mut future = pin!(Null.execute(&attempt));
    let mut context = Context::from_waker(Waker::noop());
    let Poll::Ready(result) = future.as_mut().poll(&mut context) else {
        panic!("null must be ready at once");
    };
    assert!(result.unwrap().steps.is_none());
}

#[test]
fn executors_name_themselves_as_executor_type_does() {
    assert_eq!(Null.name(), "null");
    assert_eq!(Lite::new("/tmp").name(), "lite");
    assert_eq!(Kubernetes::new("ns", None, true).name(), "kubernetes");
}
