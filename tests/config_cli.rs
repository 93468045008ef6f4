//! `check-config` as a user runs it, with the environment the process really has: bytes that are
//! not UTF-8, misspelt variables and secrets never crash it or reach its output.

#![cfg(unix)]

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::process::{Command, Output};

const BINARY: &str = env!("CARGO_BIN_EXE_dexaflow-admission");

/// `check-config` on the embedded default, with only `env` in its environment.
fn check_config(env: &[(&str, OsString)]) -> Output {
    Command::new(BINARY)
        .arg("check-config")
        .env_clear()
        .envs(env.iter().map(|(name, value)| (name, value)))
        .output()
        .expect("the binary runs")
}

fn bytes(value: &[u8]) -> OsString {
    OsString::from_vec(value.to_vec())
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn a_variable_that_is_not_utf8_and_not_dexaflow_is_ignored() {
    let output = check_config(&[("ZZ", bytes(b"x\xff"))]);

    let stderr = stderr(&output);
    assert!(output.status.success(), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("buffer_size: 0"),
        "the effective config is printed"
    );
}

#[test]
fn a_dexaflow_variable_that_is_not_utf8_fails_naming_it_without_its_value() {
    let output = check_config(&[("DEXAFLOW_SCHEDULER_DISPATCH_WORKERS", bytes(b"seven\xff"))]);

    let stderr = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        stderr.contains("DEXAFLOW_SCHEDULER_DISPATCH_WORKERS"),
        "{stderr}"
    );
    assert!(!stderr.contains("seven"), "{stderr}");
    assert!(output.stdout.is_empty(), "no config is printed");
}

#[test]
fn a_secret_that_is_not_utf8_fails_naming_its_key_without_any_of_it() {
    let output = check_config(&[(
        "DEXAFLOW_AUTH_AGENT_TOKEN_SECRET",
        bytes(b"hunter2hunter2hunter2hunter2hunter2\xff"),
    )]);

    let stderr = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("auth.agent_token_secret"), "{stderr}");
    assert!(!stderr.contains("hunter"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn a_misspelt_variable_fails_at_boot_naming_the_nearest_one() {
    let output = check_config(&[(
        "DEXAFLOW_SCHEDULER_DISPATCH_BUFERSIZE",
        OsString::from("512"),
    )]);

    let stderr = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(
            "DEXAFLOW_SCHEDULER_DISPATCH_BUFERSIZE: unknown variable; did you mean DEXAFLOW_SCHEDULER_DISPATCH_BUFFER_SIZE?"
        ),
        "{stderr}"
    );
    assert!(output.stdout.is_empty(), "no config is printed");
}
