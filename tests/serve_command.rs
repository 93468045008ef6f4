//! The `serve` subcommand's wiring: what it says when it cannot start.

mod serve_support;

use std::process::Command;

const BINARY: &str = env!("CARGO_BIN_EXE_dexaflow-admission");

/// Runs `serve` with a config naming certificate files in `dir` (which may not exist) and
/// `extra` arguments; returns the exit code and standard error.
fn serve(dir: &std::path::Path, extra: &[&str]) -> (Option<i32>, String) {
    let config = dir.join("config.yaml");
    let text = format!(
        "server:\n  listen: 127.0.0.1:0\n  tls: {{cert_file: {0}/tls.crt, key_file: {0}/tls.key}}\nmetrics: {{listen: 127.0.0.1:0}}\n",
        dir.display()
    );
    std::fs::write(&config, text).expect("write the config");
    let output = Command::new(BINARY)
        .arg("serve")
        .arg("--config")
        .arg(&config)
        .args(extra)
        .output()
        .expect("run the binary");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn an_unknown_enabled_admission_path_fails_the_start_naming_the_flag() {
    let dir = tempfile::tempdir().expect("a directory");
    serve_support::Authority::new().issue().write_to(dir.path());
    let (code, stderr) = serve(
        dir.path(),
        &["--enabled-admission", "/pods/mutate, /jobs/validate"],
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr
            .contains("--enabled-admission: enabled admission \"/jobs/validate\" is not a service"),
        "{stderr}"
    );
}

#[test]
fn a_missing_certificate_file_fails_the_start_naming_it() {
    let dir = tempfile::tempdir().expect("a directory");
    let (code, stderr) = serve(dir.path(), &[]);
    assert_eq!(code, Some(2), "{stderr}");
    for (key, file) in [
        ("server.tls.cert_file", "tls.crt"),
        ("server.tls.key_file", "tls.key"),
    ] {
        let line = format!("{key}: reading {}: ", dir.path().join(file).display());
        assert!(stderr.contains(&line), "{line:?} missing from\n{stderr}");
    }
}
