//! The webhook's config (ADR 0100 §8): `execution.admission.webhook.*` and `type: webhook`
//! entries, their own timeout and fail-open, and what fails at boot naming the key: a plain
//! `http` URL to a host that is not loopback, and a file that is missing or holds nothing usable.

use crate::webhook_fixture;

use std::path::Path;
use std::time::Duration;

use dexaflow_admission::config::Config;
use dexaflow_admission::hooks::{HookSpec, WebhookSpec};
use dexaflow_admission::supervise::HookSettings;
use webhook_fixture::Certs;

use crate::common::{NO_ENV, single_config_error as single_error};

/// The config `yaml` makes, or its errors, one a line.
fn load(yaml: &str) -> Result<Config, String> {
    Config::from_yaml_str(yaml, NO_ENV).map_err(|errors| errors.to_string())
}

fn parse(yaml: &str) -> Config {
    load(yaml).unwrap_or_else(|errors| panic!("config is valid:\n{errors}"))
}

fn webhook_of(config: &Config, name: &str) -> WebhookSpec {
    config
        .hooks
        .iter()
        .find_map(|spec| match spec {
            HookSpec::Webhook(webhook) if webhook.name == name => Some(webhook.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("a webhook named {name}"))
}

fn shorthand(fields: &str) -> String {
    format!("execution:\n  admission:\n    webhook:\n{fields}")
}

#[test]
fn webhook_url_declares_a_hook_named_webhook_after_the_listed_hooks() {
    let config = parse(
        "execution:
  admission:
    hooks:
      - {type: deny, name: suspended, match: {tenants: [umbrella]}}
    webhook:
      url: https://admission.example.com/admit
",
    );

    let names: Vec<&str> = config.hooks.iter().map(HookSpec::name).collect();
    assert_eq!(names, ["suspended", "webhook"]);
    assert_eq!(
        webhook_of(&config, "webhook"),
        WebhookSpec::new("webhook", "https://admission.example.com/admit")
    );
    assert!(config.supervise.hooks.is_empty(), "no setting of its own");
}

#[test]
fn webhook_url_can_come_from_the_environment() {
    let config = Config::from_yaml_str(
        "",
        [(
            "DEXAFLOW_EXECUTION_ADMISSION_WEBHOOK_URL",
            "https://admission.example.com/admit",
        )],
    )
    .unwrap_or_else(|errors| panic!("valid:\n{errors}"));

    assert_eq!(
        webhook_of(&config, "webhook").url,
        "https://admission.example.com/admit"
    );
}

#[test]
fn no_webhook_url_means_no_webhook() {
    let config = parse("");

    assert!(config.hooks.is_empty());
}

#[test]
fn webhook_own_timeout_and_fail_open_become_its_supervision_settings() {
    let config = parse(
        "execution:
  admission:
    timeout: 400ms
    hooks:
      - type: webhook
        name: quota
        url: https://quota.example.com/admit
        timeout: 250ms
      - type: webhook
        name: audit
        url: https://audit.example.com/admit
        fail_open: true
    webhook:
      url: https://admission.example.com/admit
      timeout: 1s
      fail_open: false
",
    );

    let own = &config.supervise.hooks;
    assert_eq!(
        own["quota"],
        HookSettings {
            timeout: Some(Duration::from_millis(250)),
            fail_open: None
        }
    );
    assert_eq!(
        own["audit"],
        HookSettings {
            timeout: None,
            fail_open: Some(true)
        }
    );
    assert_eq!(
        own["webhook"],
        HookSettings {
            timeout: Some(Duration::from_secs(1)),
            fail_open: Some(false)
        }
    );
    assert_eq!(
        config.supervise.timeout_of("quota"),
        Duration::from_millis(250)
    );
    assert_eq!(
        config.supervise.timeout_of("audit"),
        Duration::from_millis(400)
    );
    assert!(config.supervise.fail_open_of("audit"));
    assert!(!config.supervise.fail_open_of("quota"));
}

#[test]
fn http_url_to_a_host_that_is_not_loopback_fails_at_boot_naming_the_key() {
    assert_eq!(
        single_error(&shorthand(
            "      url: http://admission.example.com/admit\n"
        )),
        "execution.admission.webhook: url: must be https unless its host is loopback (127.0.0.0/8, ::1 or localhost), got \"http://admission.example.com/admit\""
    );
    assert_eq!(
        single_error(
            "execution:
  admission:
    hooks:
      - {type: webhook, name: quota, url: \"http://10.0.0.8/admit\"}
"
        ),
        "execution.admission.hooks[0]: url: must be https unless its host is loopback (127.0.0.0/8, ::1 or localhost), got \"http://10.0.0.8/admit\""
    );
}

#[test]
fn http_url_to_a_loopback_host_is_allowed() {
    for url in [
        "http://127.0.0.1:8443/admit",
        "http://localhost:8443/admit",
        "http://[::1]:8443/admit",
    ] {
        let config = parse(&shorthand(&format!("      url: \"{url}\"\n")));

        assert_eq!(webhook_of(&config, "webhook").url, url);
    }
}

#[test]
fn url_with_a_password_fails_at_boot_without_showing_it() {
    let error = single_error(&shorthand(
        "      url: https://svc:hunter2@admission.example.com/admit\n",
    ));

    assert_eq!(
        error,
        "execution.admission.webhook: url: must not carry a user or password (use bearer_token_file)"
    );
}

fn missing(dir: &Path, name: &str) -> String {
    dir.join(name).display().to_string()
}

#[test]
fn missing_files_fail_at_boot_each_naming_its_key() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (ca, token, cert, key) = (
        missing(dir.path(), "ca.pem"),
        missing(dir.path(), "token"),
        missing(dir.path(), "client.pem"),
        missing(dir.path(), "client-key.pem"),
    );

    let errors = load(&shorthand(&format!(
        "      url: https://admission.example.com/admit
      ca_bundle: {ca}
      bearer_token_file: {token}
      client_cert: {cert}
      client_key: {key}
"
    )))
    .expect_err("files are missing");

    let lines: Vec<&str> = errors.lines().collect();
    assert_eq!(lines.len(), 4, "{errors}");
    for (line, field, path) in [
        (lines[0], "ca_bundle", &ca),
        (lines[1], "client_cert", &cert),
        (lines[2], "client_key", &key),
        (lines[3], "bearer_token_file", &token),
    ] {
        assert!(
            line.starts_with(&format!("execution.admission.webhook: {field}: {path}: ")),
            "{line}"
        );
        assert!(line.contains("No such file"), "{line}");
    }
}

#[test]
fn file_without_what_it_must_hold_fails_at_boot_naming_the_key() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let empty = dir.path().join("empty");
    std::fs::write(&empty, "  \n").expect("writes");
    let empty = empty.display();

    let errors = load(&format!(
        "execution:
  admission:
    hooks:
      - type: webhook
        name: quota
        url: https://quota.example.com/admit
        ca_bundle: {empty}
        bearer_token_file: {empty}
"
    ))
    .expect_err("the files hold nothing");

    assert!(
        errors.contains(&format!(
            "execution.admission.hooks[0]: ca_bundle: {empty}: holds no PEM certificate"
        )),
        "{errors}"
    );
    assert!(
        errors.contains(&format!(
            "execution.admission.hooks[0]: bearer_token_file: {empty}: holds no token"
        )),
        "{errors}"
    );
}

#[test]
fn client_certificate_without_its_key_fails_at_boot() {
    let certs = Certs::new();

    let error = single_error(&shorthand(&format!(
        "      url: https://admission.example.com/admit\n      ca_bundle: {}\n      client_cert: {}\n",
        certs.ca.display(),
        certs.client_cert.display()
    )));

    assert_eq!(
        error,
        "execution.admission.webhook: client_cert and client_key: set both for mutual TLS, or neither"
    );
}

#[test]
fn readable_files_pass_the_boot_check() {
    let certs = Certs::new();
    let token = certs.dir.path().join("token");
    std::fs::write(&token, "a-token\n").expect("writes");

    let config = parse(&shorthand(&format!(
        "      url: https://admission.example.com/admit
      ca_bundle: {}
      bearer_token_file: {}
      client_cert: {}
      client_key: {}
",
        certs.ca.display(),
        token.display(),
        certs.client_cert.display(),
        certs.client_key.display()
    )));

    let webhook = webhook_of(&config, "webhook");
    assert_eq!(webhook.ca_bundle.as_deref(), Some(certs.ca.as_path()));
    assert_eq!(webhook.bearer_token_file.as_deref(), Some(token.as_path()));
}

#[test]
fn webhook_key_without_a_url_is_an_error() {
    assert_eq!(
        single_error(&shorthand("      timeout: 300ms\n")),
        "execution.admission.webhook.url is required when execution.admission.webhook.timeout is set"
    );
}

#[test]
fn webhook_timeout_longer_than_the_chain_budget_fails_naming_its_key() {
    assert_eq!(
        single_error(&shorthand(
            "      url: https://admission.example.com/admit\n      timeout: 5s\n"
        )),
        "execution.admission.webhook.timeout: expected a duration of at most execution.admission.chain_timeout (2s), got \"5s\""
    );
    assert_eq!(
        single_error(
            "execution:
  admission:
    hooks:
      - {type: webhook, name: quota, url: \"https://quota.example.com/admit\", timeout: 3s}
"
        ),
        "execution.admission.hooks[0].timeout: expected a duration of at most execution.admission.chain_timeout (2s), got \"3s\""
    );
}

#[test]
fn listed_hook_named_webhook_clashes_with_the_webhook_url() {
    let error = single_error(
        "execution:
  admission:
    hooks:
      - {type: deny, name: webhook, match: {tenants: [umbrella]}}
    webhook:
      url: https://admission.example.com/admit
",
    );

    assert_eq!(
        error,
        "execution.admission.webhook.url: duplicate hook name \"webhook\", already used by execution.admission.hooks[0].name"
    );
}

#[test]
fn webhook_entry_with_an_unknown_field_or_a_bad_timeout_fails() {
    for (entry, says) in [
        (
            "{type: webhook, name: q, url: \"https://q.example.com\", token: x}",
            "unknown field `token`",
        ),
        (
            "{type: webhook, name: q, url: \"https://q.example.com\", timeout: fast}",
            "timeout: expected a duration",
        ),
        (
            "{type: webhook, name: q, url: \"https://q.example.com\", timeout: 0s}",
            "timeout: must be above 0s",
        ),
    ] {
        let error = single_error(&format!(
            "execution:\n  admission:\n    hooks:\n      - {entry}\n"
        ));

        assert!(error.starts_with("execution.admission.hooks[0]"), "{error}");
        assert!(error.contains(says), "{entry}: {error}");
    }
}

#[test]
fn effective_config_shows_the_webhook_keys() {
    let config = parse(&shorthand(
        "      url: https://admission.example.com/admit\n      timeout: 300ms\n",
    ));

    let yaml = config.to_yaml();

    assert!(yaml.contains("webhook:\n"), "{yaml}");
    assert!(
        yaml.contains("url: https://admission.example.com/admit"),
        "{yaml}"
    );
    assert!(yaml.contains("timeout: 300ms"), "{yaml}");
}

#[test]
fn example_webhook_config_is_valid_once_the_example_server_wrote_its_certificate() {
    let certs = Certs::new();
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/webhook.yaml"
    ))
    .expect("the example config");
    assert!(text.contains("ca_bundle: ../target/webhook-ca.pem"));

    let config = parse(&text.replace("../target/webhook-ca.pem", &certs.ca.display().to_string()));

    let webhook = webhook_of(&config, "webhook");
    assert_eq!(webhook.url, "https://127.0.0.1:8443/tasks/admit");
    assert_eq!(config.hooks.len(), 1);
}
