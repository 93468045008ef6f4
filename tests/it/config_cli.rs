//! `check-config` as a user runs it, with the environment the process really has: bytes that are
//! not UTF-8, misspelt variables and secrets never crash it or reach its output; and every
//! command checking every section it knows, the `server` section included.

#![cfg(unix)]

use crate::processes;

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::Path;
use std::process::{Command, Output};

use serde_yaml_ng::Value;

use crate::processes::BINARY;

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

/// `check-config --config <path>`, with only `env` besides `PATH`.
fn check_config_file(path: &Path, env: &[(&str, &str)]) -> Output {
    processes::dexaflow()
        .arg("check-config")
        .arg("--config")
        .arg(path)
        .envs(env.iter().copied())
        .output()
        .expect("the binary runs")
}

#[test]
fn check_config_refuses_a_misspelt_server_key() {
    let dir = tempfile::tempdir().expect("a directory");
    let config = processes::write(dir.path(), "dexaflow.yaml", "server: {lisen: 1}\n");

    let output = check_config_file(&config, &[]);

    let stderr = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("server.lisen: unknown key"), "{stderr}");
    assert!(output.stdout.is_empty(), "no config is printed");
}

#[test]
fn check_config_refuses_a_bad_server_value_from_the_environment() {
    let dir = tempfile::tempdir().expect("a directory");
    let config = processes::write(dir.path(), "dexaflow.yaml", "");

    let output = check_config_file(&config, &[("DEXAFLOW_SERVER_HTTP2", "maybe")]);

    let stderr = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("server.http2 (from DEXAFLOW_SERVER_HTTP2): expected true or false"),
        "{stderr}"
    );
    assert!(output.stdout.is_empty(), "no config is printed");
}

#[test]
fn check_config_prints_the_server_section_with_its_paths_resolved_against_the_file() {
    let dir = tempfile::tempdir().expect("a directory");
    let config = processes::write(
        dir.path(),
        "dexaflow.yaml",
        "server: {listen: \"127.0.0.1:9443\", tls: {cert_file: tls/tls.crt}}\n",
    );

    let working = tempfile::tempdir().expect("a directory");

    let output = processes::dexaflow()
        .args(["check-config", "--config"])
        .arg(&config)
        .env("DEXAFLOW_SERVER_TLS_KEY_FILE", "tls/tls.key")
        .current_dir(working.path())
        .output()
        .expect("the binary runs");

    let stderr = stderr(&output);
    assert!(output.status.success(), "{stderr}");
    let printed: Value = serde_yaml_ng::from_slice(&output.stdout).expect("YAML");
    let server = &printed["server"];
    assert_eq!(server["listen"].as_str(), Some("127.0.0.1:9443"));
    let cert = dir.path().join("tls/tls.crt");
    assert_eq!(server["tls"]["cert_file"].as_str(), cert.to_str());
    // A path from the environment is relative to the working directory, and shown so.
    let key = working.path().join("tls/tls.key");
    assert_eq!(server["tls"]["key_file"].as_str(), key.to_str());
}

#[test]
fn the_printed_config_saved_elsewhere_and_checked_again_prints_the_same() {
    let dir = tempfile::tempdir().expect("a directory");
    let config = processes::write(
        dir.path(),
        "dexaflow.yaml",
        "server: {tls: {cert_file: tls/tls.crt, key_file: tls/tls.key}}
executor: {lite: {log_dir: logs}}
",
    );
    let first = check_config_file(&config, &[]);
    let elsewhere = tempfile::tempdir().expect("a directory");
    let saved = processes::write(
        elsewhere.path(),
        "effective.yaml",
        std::str::from_utf8(&first.stdout).expect("UTF-8"),
    );

    let second = check_config_file(&saved, &[]);

    assert!(second.status.success(), "{}", stderr(&second));
    assert_eq!(
        String::from_utf8_lossy(&second.stdout),
        String::from_utf8_lossy(&first.stdout)
    );
    let printed: Value = serde_yaml_ng::from_slice(&second.stdout).expect("YAML");
    let logs = dir.path().join("logs");
    assert_eq!(
        printed["executor"]["lite"]["log_dir"].as_str(),
        logs.to_str()
    );
}

#[test]
fn dispatch_refuses_a_misspelt_server_key_and_dispatches_nothing() {
    let dir = tempfile::tempdir().expect("a directory");
    let ran = dir.path().join("ran");
    let config = processes::lite_config(dir.path(), "", "", "server: {lisen: 1}\n");
    let workload = processes::workload(
        dir.path(),
        "",
        &format!(
            "      - {{task_id: a, command: [touch, {}]}}\n",
            ran.display()
        ),
    );

    let output = processes::dispatch(&config, &workload)
        .output()
        .expect("the binary runs");

    let stderr = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("server.lisen: unknown key"), "{stderr}");
    assert!(output.stdout.is_empty(), "no table is printed");
    assert!(!ran.exists(), "the task ran");
}

#[test]
fn an_unknown_variable_s_name_reaches_the_terminal_escaped() {
    let output = check_config(&[("DEXAFLOW_X\u{1b}]0;owned\u{7}", OsString::from("1"))]);

    let stderr = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("DEXAFLOW_X\\u{1b}]0;owned\\u{7}: unknown variable"),
        "{stderr}"
    );
    assert!(!stderr.contains('\u{1b}'), "{stderr:?}");
    assert!(!stderr.contains('\u{7}'), "{stderr:?}");
}

#[test]
fn serve_reports_every_file_it_cannot_use_each_naming_its_key() {
    let dir = tempfile::tempdir().expect("a directory");
    processes::write(dir.path(), "token", "  \n");
    processes::write(dir.path(), "groups.yaml", "groups: [\n");
    let config = processes::write(
        dir.path(),
        "serve.yaml",
        "server:\n  listen: 127.0.0.1:0\n\
         \x20 tls: {cert_file: tls.crt, key_file: tls.key, client_ca_file: ca.crt}\n\
         \x20 auth: {bearer_token_file: token}\n\
         \x20 resource_groups_file: groups.yaml\n\
         metrics: {listen: \"127.0.0.1:0\"}\n",
    );

    let output = processes::dexaflow()
        .arg("serve")
        .arg("--config")
        .arg(&config)
        .output()
        .expect("the binary runs");

    let stderr = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    for (key, file) in [
        ("server.tls.cert_file", "tls.crt"),
        ("server.tls.key_file", "tls.key"),
        ("server.tls.client_ca_file", "ca.crt"),
        ("server.auth.bearer_token_file", "token"),
        ("server.resource_groups_file", "groups.yaml"),
    ] {
        let path = dir.path().join(file);
        assert!(
            stderr
                .lines()
                .any(|line| line.starts_with(key) && line.contains(&*path.to_string_lossy())),
            "{key} naming {} missing from\n{stderr}",
            path.display()
        );
    }
    assert!(!stderr.contains("metrics: listening"), "{stderr}");
    assert!(output.stdout.is_empty(), "nothing is served");
}
