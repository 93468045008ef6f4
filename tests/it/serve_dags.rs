//! `/dags/validate` over HTTPS, and its graph check on large inputs.

use crate::serve_support;

use dexaflow_admission::admission::MAX_REASON_BYTES;
use dexaflow_admission::serve::dags::{Dag, DagTask, problem};
use http::StatusCode;
use serde_json::{Value, json};
use serve_support::{Running, start};

fn request(tasks: Value) -> Value {
    json!({"api_version": "dexaflow.io/admission/v1", "uid": "dag-7", "dag": {"dag_id": "etl", "tasks": tasks}})
}

/// The JSON answer `running` gives to `body` posted to `/dags/validate`.
async fn validate(running: &Running, body: &Value) -> Value {
    running
        .client
        .post_json("/dags/validate", body)
        .await
        .json()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acyclic_dag_with_every_target_defined_is_allowed() {
    let running = start().await;
    let tasks = json!([
        {"task_id": "extract"},
        {"task_id": "transform", "depends_on": ["extract"]},
        {"task_id": "load", "depends_on": ["transform", "extract"]}
    ]);
    let answer = running
        .client
        .post_json("/dags/validate", &request(tasks))
        .await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(
        answer.json(),
        json!({"api_version": "dexaflow.io/admission/v1", "uid": "dag-7", "allowed": true, "reason": null})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dependency_on_an_undefined_task_is_refused_naming_it() {
    let running = start().await;
    let tasks = json!([{"task_id": "load", "depends_on": ["extract"]}]);
    let answer = validate(&running, &request(tasks)).await;
    assert_eq!(answer["allowed"], false);
    assert_eq!(answer["uid"], "dag-7");
    assert_eq!(
        answer["reason"],
        "task \"load\" depends on \"extract\", which is not defined"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cycle_is_refused_naming_one_cycle() {
    let running = start().await;
    let tasks = json!([
        {"task_id": "a"},
        {"task_id": "b", "depends_on": ["a", "d"]},
        {"task_id": "c", "depends_on": ["b"]},
        {"task_id": "d", "depends_on": ["c"]}
    ]);
    let answer = validate(&running, &request(tasks)).await;
    assert_eq!(answer["allowed"], false);
    assert_eq!(answer["reason"], "dependency cycle: b -> d -> c -> b");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cycle_through_long_task_ids_is_refused_with_a_reason_cut_to_the_reason_limit() {
    let running = start().await;
    let long = |name: &str| format!("{name}{}", "x".repeat(4_000));
    let tasks = json!([
        {"task_id": long("a"), "depends_on": [long("b")]},
        {"task_id": long("b"), "depends_on": [long("a")]}
    ]);
    let answer = validate(&running, &request(tasks)).await;
    assert_eq!(answer["allowed"], false);
    let reason = answer["reason"].as_str().unwrap();
    assert_eq!(reason.len(), MAX_REASON_BYTES);
    assert!(
        reason.starts_with(&format!("dependency cycle of 2 tasks: {}", long("a"))[..100]),
        "{reason}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cycle_too_long_for_a_reason_shows_its_length_its_start_and_an_ellipsis() {
    let running = start().await;
    let name = |index: usize| format!("task-{index:03}");
    let tasks: Vec<_> = (0..100)
        .map(|index| json!({"task_id": name(index), "depends_on": [name((index + 1) % 100)]}))
        .collect();

    let answer = validate(&running, &request(json!(tasks))).await;

    assert_eq!(answer["allowed"], false);
    let reason = answer["reason"].as_str().unwrap();
    assert!(reason.len() <= MAX_REASON_BYTES, "{}", reason.len());
    assert!(
        reason.starts_with("dependency cycle of 100 tasks: task-000 -> task-001 -> "),
        "{reason}"
    );
    assert!(reason.ends_with(" -> …"), "{reason}");
    assert!(!reason.contains("task-099"), "{reason}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_characters_in_a_cycles_task_ids_do_not_reach_the_reason() {
    let running = start().await;
    let tasks = json!([
        {"task_id": "a\u{1b}[2J", "depends_on": ["b\u{202e}"]},
        {"task_id": "b\u{202e}", "depends_on": ["a\u{1b}[2J"]}
    ]);
    let answer = validate(&running, &request(tasks)).await;
    assert_eq!(answer["allowed"], false);
    assert_eq!(answer["reason"], "dependency cycle: a[2J -> b -> a[2J");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_defined_twice_or_another_api_version_is_refused() {
    let running = start().await;
    let twice = json!([{"task_id": "a"}, {"task_id": "a"}]);
    let answer = validate(&running, &request(twice)).await;
    assert_eq!(answer["reason"], "task \"a\" is defined more than once");
    let mut other = request(json!([{"task_id": "a"}]));
    other["api_version"] = json!("dexaflow.io/admission/v2");
    let answer = validate(&running, &other).await;
    assert_eq!(answer["allowed"], false);
    assert_eq!(answer["api_version"], "dexaflow.io/admission/v2", "echoed");
    assert!(
        answer["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("api_version: "))
    );
}

fn chain(length: usize, back_edge: bool) -> Dag {
    let mut tasks: Vec<DagTask> = (0..length)
        .map(|index| DagTask {
            task_id: format!("t{index}"),
            depends_on: if index == 0 {
                vec![]
            } else {
                vec![format!("t{}", index - 1)]
            },
        })
        .collect();
    if back_edge {
        tasks[0].depends_on.push(format!("t{}", length - 1));
    }
    Dag {
        dag_id: "long".to_owned(),
        tasks,
    }
}

#[test]
fn a_long_chain_is_checked_without_recursion() {
    // Deep enough to overflow a recursive search's stack.
    assert_eq!(problem(&chain(200_000, false)), None);
    let reason = problem(&chain(200_000, true)).expect("a cycle");
    assert!(
        reason.starts_with("dependency cycle of 200000 tasks: t0 -> t199999 -> t199998"),
        "{}",
        &reason[..80]
    );
    assert!(reason.ends_with(" -> …"), "{reason}");
}

#[test]
fn a_self_dependency_is_a_cycle() {
    let dag = Dag {
        dag_id: "d".to_owned(),
        tasks: vec![DagTask {
            task_id: "a".to_owned(),
            depends_on: vec!["a".to_owned()],
        }],
    };
    assert_eq!(problem(&dag).as_deref(), Some("dependency cycle: a -> a"));
}
