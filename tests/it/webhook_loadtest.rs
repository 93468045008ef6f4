//! `loadtest --hook webhook:URL` runs the real webhook hook against a real HTTPS server on
//! 127.0.0.1, with the files of `--webhook-ca-bundle` and `--webhook-bearer-token-file`.

use crate::processes::BINARY;
use crate::webhook_fixture;

use std::path::PathBuf;

use dexaflow_admission::admission::Decision;
use dexaflow_admission::loadtest::{
    self, Amount, AttemptOutcome, HookFlag, LoadTestError, Options, Plan, WebhookFiles,
};
use webhook_fixture::{Certs, Server, Transport, deciding};

fn plan(url: String, files: WebhookFiles) -> Plan {
    Plan {
        amount: Amount::Attempts(200),
        buffer_size: 16,
        workers: 8,
        hooks: vec![HookFlag::Webhook(url)],
        webhook_files: files,
        ..Plan::default()
    }
}

#[test]
fn load_test_calls_the_webhook_once_per_attempt_with_its_files() {
    let certs = Certs::new();
    let server = Server::start(&certs, Transport::Tls, deciding(|_| Decision::Admit));
    let token = certs.dir.path().join("token");
    std::fs::write(&token, "load-token\n").expect("writes the token");
    let files = WebhookFiles {
        ca_bundle: Some(certs.ca.clone()),
        bearer_token_file: Some(token),
    };

    let report = loadtest::run_blocking(Options {
        plan: plan(server.url(), files),
        ..Options::default()
    })
    .expect("the run completes");

    assert!(report.is_conserved());
    assert_eq!(report.count(AttemptOutcome::Executed), 200);
    assert_eq!(report.count(AttemptOutcome::Unavailable), 0);
    let seen = server.seen();
    assert_eq!(seen.len(), 200);
    assert!(
        seen.iter()
            .all(|call| call.headers["authorization"] == "Bearer load-token")
    );
}

#[test]
fn load_test_with_a_missing_ca_bundle_fails_naming_its_flag() {
    let missing = PathBuf::from("/nonexistent/webhook-ca.pem");
    let files = WebhookFiles {
        ca_bundle: Some(missing),
        bearer_token_file: None,
    };

    let error = plan("https://127.0.0.1:8443/admit".to_owned(), files)
        .validate()
        .expect_err("the CA bundle is missing");

    assert!(
        matches!(
            &error,
            LoadTestError::Option {
                flag: "--webhook-ca-bundle",
                ..
            }
        ),
        "{error}"
    );
}

#[test]
fn load_test_webhook_to_a_plain_http_host_that_is_not_loopback_fails_naming_the_hook_flag() {
    let error = plan(
        "http://admission.example.com/admit".to_owned(),
        WebhookFiles::default(),
    )
    .validate()
    .expect_err("not https");

    assert_eq!(
        error.to_string(),
        "--hook: url: must be https unless its host is loopback (127.0.0.0/8, ::1 or localhost), got \"http://admission.example.com/admit\""
    );
}

#[test]
fn loadtest_command_refuses_a_plain_http_webhook_to_another_host_before_any_call() {
    let output = std::process::Command::new(BINARY)
        .args([
            "loadtest",
            "--attempts",
            "10",
            "--metrics-listen",
            "127.0.0.1:0",
            "--hook",
            "webhook:http://admission.example.com/admit",
        ])
        .output()
        .expect("runs");

    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--hook: url: must be https unless its host is loopback"),
        "{stderr}"
    );
}
