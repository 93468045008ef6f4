//! `DEXAFLOW_` variables: the process environment as the operating system gives it (names and
//! values that may not be UTF-8), unknown variables, and the documented ones that are no key.

#![cfg(unix)]

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::time::Duration;

use dexaflow_admission::config::{Config, ConfigErrors, non_config_variables};
use dexaflow_admission::dispatch::executor::TASK_VARIABLES;

fn bytes(value: &[u8]) -> OsString {
    OsString::from_vec(value.to_vec())
}

fn with_env(env: Vec<(OsString, OsString)>) -> Result<Config, ConfigErrors> {
    Config::from_yaml_str("", env)
}

#[test]
fn a_value_that_is_not_utf8_outside_dexaflow_is_ignored() {
    let config = with_env(vec![
        ("ZZ".into(), bytes(b"x\xff")),
        (bytes(b"Z\xffZ"), "1".into()),
    ])
    .unwrap_or_else(|errors| panic!("{errors}"));

    assert_eq!(config.dispatch.buffer_size, 0);
}

#[test]
fn a_config_variable_that_is_not_utf8_names_the_key_and_the_variable_only() {
    let errors = with_env(vec![(
        "DEXAFLOW_EXECUTOR_TASK_NAMESPACE".into(),
        bytes(b"jobs\xff"),
    )])
    .expect_err("not UTF-8");

    let text = errors.to_string();
    assert_eq!(errors.len(), 1, "{text}");
    assert!(
        text.starts_with(
            "executor.task_namespace (from DEXAFLOW_EXECUTOR_TASK_NAMESPACE): expected UTF-8 text"
        ),
        "{text}"
    );
    assert!(!text.contains("jobs"), "{text}");
}

#[test]
fn a_dexaflow_variable_whose_name_is_not_utf8_is_an_error() {
    let errors =
        with_env(vec![(bytes(b"DEXAFLOW_WORK\xffERS"), "4".into())]).expect_err("not UTF-8");

    let text = errors.to_string();
    assert_eq!(errors.len(), 1, "{text}");
    assert!(text.starts_with("DEXAFLOW_WORK"), "{text}");
    assert!(text.contains("unknown variable"), "{text}");
}

#[test]
fn a_secret_variable_that_is_not_utf8_shows_no_part_of_it() {
    let errors = with_env(vec![(
        "DEXAFLOW_AUTH_AGENT_TOKEN_SECRET".into(),
        bytes(b"correct-horse-battery-staple-0123\xff"),
    )])
    .expect_err("not UTF-8");

    let text = errors.to_string();
    assert!(
        text.starts_with("auth.agent_token_secret (from DEXAFLOW_AUTH_AGENT_TOKEN_SECRET): "),
        "{text}"
    );
    assert!(!text.contains("horse"), "{text}");
    assert!(!text.contains("0123"), "{text}");
}

#[test]
fn an_unknown_dexaflow_variable_fails_naming_the_nearest_variable() {
    let errors = with_env(vec![(
        "DEXAFLOW_SCHEDULER_DISPATCH_BUFERSIZE".into(),
        "512".into(),
    )])
    .expect_err("unknown variable");

    assert_eq!(
        errors.to_string(),
        "DEXAFLOW_SCHEDULER_DISPATCH_BUFERSIZE: unknown variable; did you mean DEXAFLOW_SCHEDULER_DISPATCH_BUFFER_SIZE?"
    );
}

#[test]
fn an_unknown_variable_far_from_every_key_suggests_nothing() {
    let errors =
        with_env(vec![("DEXAFLOW_COLOUR".into(), "blue".into())]).expect_err("unknown variable");

    assert_eq!(errors.to_string(), "DEXAFLOW_COLOUR: unknown variable");
}

#[test]
fn an_unknown_variable_never_shows_its_value() {
    let errors = with_env(vec![(
        "DEXAFLOW_AUTH_AGENT_TOKEN_SECRT".into(),
        "hunter2hunter2hunter2hunter2hunter2".into(),
    )])
    .expect_err("unknown variable");

    let text = errors.to_string();
    assert!(
        text.contains("did you mean DEXAFLOW_AUTH_AGENT_TOKEN_SECRET?"),
        "{text}"
    );
    assert!(!text.contains("hunter"), "{text}");
}

#[test]
fn every_unknown_variable_is_reported_with_the_bad_keys() {
    let errors = Config::from_yaml_str(
        "scheduler: {loop_interval_ms: 0}",
        [("DEXAFLOW_A", "1"), ("DEXAFLOW_B", "2")],
    )
    .expect_err("bad");

    let text = errors.to_string();
    assert_eq!(errors.len(), 3, "{text}");
    assert!(text.contains("DEXAFLOW_A: unknown variable"), "{text}");
    assert!(text.contains("DEXAFLOW_B: unknown variable"), "{text}");
    assert!(text.contains("scheduler.loop_interval_ms: "), "{text}");
}

#[test]
fn the_hooks_key_has_no_variable_and_says_so() {
    let errors = Config::from_yaml_str("", [("DEXAFLOW_EXECUTION_ADMISSION_HOOKS", "[oops")])
        .expect_err("hooks belong in the file");

    assert_eq!(
        errors.to_string(),
        "DEXAFLOW_EXECUTION_ADMISSION_HOOKS: unknown variable; execution.admission.hooks is read from the file only"
    );
}

#[test]
fn the_documented_variables_that_are_no_key_are_accepted_whatever_their_value() {
    let env: Vec<(OsString, OsString)> = non_config_variables()
        .map(|name| (name.into(), bytes(b"\xff anything")))
        .collect();

    let config = with_env(env).unwrap_or_else(|errors| panic!("{errors}"));

    assert_eq!(config.dispatch.loop_interval, Duration::from_millis(1000));
}

#[test]
fn the_non_config_variables_are_the_config_file_and_what_executors_set_for_tasks() {
    let names: Vec<&str> = non_config_variables().collect();

    assert!(names.contains(&"DEXAFLOW_CONFIG"), "{names:?}");
    for name in TASK_VARIABLES {
        assert!(names.contains(name), "{name} missing from {names:?}");
    }
    assert_eq!(names.len(), TASK_VARIABLES.len() + 1, "{names:?}");
}
