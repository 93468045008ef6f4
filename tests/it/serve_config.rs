//! The `server` section of the config file: every key read, every bad one named, relative paths
//! resolved against the file's directory, every file `serve` cannot use named with its key, and
//! the other commands checking the section without needing a certificate.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use dexaflow_admission::config::{Config, check_server_files};
use dexaflow_admission::serve::{SettingNames, Settings, TlsFiles};
use dexaflow_admission::volcano::{FeatureGates, QueueSettings};

const NO_ENV: [(String, String); 0] = [];

fn load(text: &str, env: &[(&str, &str)]) -> Result<Settings, String> {
    let dir = tempfile::tempdir().expect("a directory");
    let path = dir.path().join("config.yaml");
    std::fs::write(&path, text).expect("write");
    let env = env
        .iter()
        .map(|(name, value)| (name.to_string(), value.to_string()));
    Config::load_with_server(&path, env)
        .map(|(_, settings)| settings)
        .map_err(|errors| errors.to_string())
}

#[test]
fn every_server_key_is_read() {
    let settings = load(
        r#"
server:
  listen: 0.0.0.0:9443
  probe_listen: 127.0.0.1:8081
  tls: {cert_file: /tls/tls.crt, key_file: /tls/tls.key, client_ca_file: /tls/ca.crt}
  auth: {bearer_token_file: /secrets/token}
  max_body_bytes: 1048576
  enabled_admission: /pods/mutate, /pods/validate
  resource_groups_file: /config/groups.yaml
  scheduler_names: [volcano, kube-batch]
  trusted_users: ["system:serviceaccount:dexaflow:dispatcher"]
  http2: true
  shutdown_grace: 20s
  max_connections: 100
  idle_timeout: 2m
  worker_threads: 1
  kubeconfig: /etc/kube/config
  volcano:
    max_queue_depth: 8
    enable_queue_allocated_pods_check: true
    enable_root_queue_protection: false
    feature_gates: {PodLevelResources: false}
"#,
        &[],
    )
    .expect("a valid section");
    let expected = Settings {
        listen: "0.0.0.0:9443".parse().expect("an address"),
        probe_listen: Some("127.0.0.1:8081".parse().expect("an address")),
        tls: TlsFiles {
            cert_file: PathBuf::from("/tls/tls.crt"),
            key_file: PathBuf::from("/tls/tls.key"),
        },
        client_ca_file: Some(PathBuf::from("/tls/ca.crt")),
        bearer_token_file: Some(PathBuf::from("/secrets/token")),
        max_body_bytes: 1_048_576,
        enabled_admission: Some(vec!["/pods/mutate".to_owned(), "/pods/validate".to_owned()]),
        resource_groups_file: Some(PathBuf::from("/config/groups.yaml")),
        scheduler_names: vec!["volcano".to_owned(), "kube-batch".to_owned()],
        trusted_users: vec!["system:serviceaccount:dexaflow:dispatcher".to_owned()],
        http2: true,
        shutdown_grace: Duration::from_secs(20),
        poll_interval: Settings::DEFAULT_POLL_INTERVAL,
        max_connections: 100,
        idle_timeout: Duration::from_secs(120),
        worker_threads: Some(1),
        kubeconfig: Some(PathBuf::from("/etc/kube/config")),
        volcano: QueueSettings {
            max_queue_depth: 8,
            enable_queue_allocated_pods_check: true,
            enable_root_queue_protection: false,
        },
        feature_gates: FeatureGates {
            pod_level_resources: false,
        },
        names: SettingNames {
            listen: "server.listen",
            probe_listen: "server.probe_listen",
            kubeconfig: "server.kubeconfig",
            client_ca_file: "server.tls.client_ca_file",
            bearer_token_file: "server.auth.bearer_token_file",
            enabled_admission: "server.enabled_admission",
        },
    };
    assert_eq!(settings, expected);
}

#[test]
fn unset_keys_take_their_defaults() {
    let settings =
        load("server: {tls: {cert_file: /c.pem, key_file: /k.pem}}", &[]).expect("valid");
    let defaults = Settings {
        // What errors call the settings: the config's keys, not the library's field names.
        names: settings.names,
        ..Settings::new(TlsFiles {
            cert_file: PathBuf::from("/c.pem"),
            key_file: PathBuf::from("/k.pem"),
        })
    };
    assert_eq!(settings, defaults);
    assert_eq!(settings.names.listen, "server.listen");
    assert_eq!(settings.listen, SocketAddr::from(([127, 0, 0, 1], 8443)));
    assert_eq!(settings.max_body_bytes, 3 * 1024 * 1024);
    assert_eq!(settings.scheduler_names, ["volcano"]);
    assert!(!settings.http2);
    assert_eq!(settings.max_connections, 512);
    assert_eq!(settings.idle_timeout, Duration::from_secs(30));
    assert_eq!(settings.worker_threads, None);
}

#[test]
fn the_certificate_files_are_required() {
    let errors = load("metrics: {listen: 127.0.0.1:9464}", &[]).expect_err("no certificate");
    assert!(
        errors.contains("server.tls.cert_file is required when serving"),
        "{errors}"
    );
    assert!(
        errors.contains("server.tls.key_file is required when serving"),
        "{errors}"
    );
}

#[test]
fn every_bad_key_is_named() {
    let errors = load(
        r#"
server:
  lisen: 127.0.0.1:1
  listen: nowhere
  tls: {cert_file: c.pem, key_file: ""}
  max_body_bytes: 0
  enabled_admission: []
  http2: maybe
  shutdown_grace: soon
"#,
        &[],
    )
    .expect_err("bad keys");
    for wanted in [
        "server.lisen: unknown key",
        "server.listen: expected an address such as \"127.0.0.1:8443\", got \"nowhere\"",
        "server.tls.key_file: expected a file path",
        "server.max_body_bytes: expected an integer from 1 to 4294967295, got 0",
        "server.enabled_admission: expected at least one path",
        "server.http2: expected true or false",
        "server.shutdown_grace: expected a duration",
    ] {
        assert!(errors.contains(wanted), "{wanted:?} missing from\n{errors}");
    }
    assert!(
        !errors.contains("is required"),
        "a bad key is not also missing:\n{errors}"
    );
}

#[test]
fn a_zero_or_absurd_connection_cap_idle_timeout_or_thread_count_is_refused_naming_its_key() {
    for (yaml, wanted) in [
        (
            "max_connections: 0",
            "server.max_connections: expected an integer from 1 to 1000000, got 0",
        ),
        (
            "max_connections: 1000001",
            "server.max_connections: expected an integer from 1 to 1000000",
        ),
        (
            "idle_timeout: 0s",
            "server.idle_timeout: expected a duration",
        ),
        (
            "idle_timeout: 1ms",
            r#"server.idle_timeout: expected a duration of at least 10ms such as "30s", got "1ms""#,
        ),
        (
            "idle_timeout: 2h",
            "server.idle_timeout: expected a duration of at most 1h",
        ),
        (
            "worker_threads: 0",
            "server.worker_threads: expected an integer from 1 to 256, got 0",
        ),
        (
            "worker_threads: 257",
            "server.worker_threads: expected an integer from 1 to 256",
        ),
    ] {
        let errors = load(
            &format!("server: {{tls: {{cert_file: c.pem, key_file: k.pem}}, {yaml}}}"),
            &[],
        )
        .expect_err(yaml);
        assert!(errors.contains(wanted), "{wanted:?} missing from\n{errors}");
    }
    let settings = load(
        "server: {tls: {cert_file: c.pem, key_file: k.pem}}",
        &[
            ("DEXAFLOW_SERVER_MAX_CONNECTIONS", "64"),
            ("DEXAFLOW_SERVER_IDLE_TIMEOUT", "500ms"),
            ("DEXAFLOW_SERVER_WORKER_THREADS", "3"),
        ],
    )
    .expect("valid");
    assert_eq!(settings.max_connections, 64);
    assert_eq!(settings.idle_timeout, Duration::from_millis(500));
    assert_eq!(settings.worker_threads, Some(3));
}

#[test]
fn volcano_flags_take_volcano_s_defaults_and_their_variables_and_a_bad_depth_is_named() {
    let defaults = load("server: {tls: {cert_file: c.pem, key_file: k.pem}}", &[])
        .expect("valid")
        .volcano;
    let overridden = load(
        "server: {tls: {cert_file: c.pem, key_file: k.pem}}",
        &[
            ("DEXAFLOW_SERVER_VOLCANO_MAX_QUEUE_DEPTH", "3"),
            (
                "DEXAFLOW_SERVER_VOLCANO_ENABLE_ROOT_QUEUE_PROTECTION",
                "false",
            ),
            ("DEXAFLOW_SERVER_KUBECONFIG", "/etc/kube/config"),
        ],
    )
    .expect("valid");
    let errors = load(
        "server: {tls: {cert_file: c.pem, key_file: k.pem}, volcano: {max_queue_depth: 0}}",
        &[],
    )
    .expect_err("a depth of 0");

    assert_eq!(defaults, QueueSettings::default());
    assert_eq!(defaults.max_queue_depth, 5);
    assert!(!defaults.enable_queue_allocated_pods_check);
    assert!(defaults.enable_root_queue_protection);
    assert_eq!(overridden.volcano.max_queue_depth, 3);
    assert!(!overridden.volcano.enable_root_queue_protection);
    assert!(!overridden.volcano.enable_queue_allocated_pods_check);
    assert_eq!(
        overridden.kubeconfig,
        Some(PathBuf::from("/etc/kube/config"))
    );
    assert!(
        errors.contains("server.volcano.max_queue_depth: expected an integer from 1 to 100, got 0"),
        "{errors}"
    );
}

#[test]
fn feature_gates_default_to_kubernetes_and_take_volcano_s_flag_syntax_in_the_variable() {
    let base = "server: {tls: {cert_file: c.pem, key_file: k.pem}}";

    let defaults = load(base, &[]).expect("valid").feature_gates;
    let from_variable = load(
        base,
        &[(
            "DEXAFLOW_SERVER_VOLCANO_FEATURE_GATES",
            "PodLevelResources=false",
        )],
    )
    .expect("valid")
    .feature_gates;

    assert!(defaults.pod_level_resources, "on since Kubernetes 1.34");
    assert_eq!(defaults, FeatureGates::default());
    assert!(!from_variable.pod_level_resources);
}

#[test]
fn an_unknown_feature_gate_or_a_value_not_a_flag_is_refused_naming_the_gate() {
    let unknown = load(
        "server: {tls: {cert_file: c.pem, key_file: k.pem}, volcano: {feature_gates: {PodSchedulingReadiness: true}}}",
        &[],
    )
    .expect_err("a gate that changes no verdict");
    let not_a_flag = load(
        "server: {tls: {cert_file: c.pem, key_file: k.pem}}",
        &[(
            "DEXAFLOW_SERVER_VOLCANO_FEATURE_GATES",
            "PodLevelResources=maybe",
        )],
    )
    .expect_err("not true or false");

    assert!(
        unknown.contains("server.volcano.feature_gates.PodSchedulingReadiness: expected a feature gate that changes an admission verdict (PodLevelResources), got PodSchedulingReadiness"),
        "{unknown}"
    );
    assert!(
        not_a_flag.contains("server.volcano.feature_gates.PodLevelResources")
            && not_a_flag.contains("DEXAFLOW_SERVER_VOLCANO_FEATURE_GATES")
            && not_a_flag.contains("expected true or false, got \"maybe\""),
        "{not_a_flag}"
    );
}

#[test]
fn server_keys_have_environment_overrides() {
    let settings = load(
        "server: {tls: {cert_file: c.pem, key_file: k.pem}}",
        &[
            ("DEXAFLOW_SERVER_LISTEN", "127.0.0.1:9000"),
            ("DEXAFLOW_SERVER_TRUSTED_USERS", "alice, bob"),
            ("DEXAFLOW_SERVER_ENABLED_ADMISSION", "/pods/mutate"),
        ],
    )
    .expect("valid");
    assert_eq!(settings.listen, SocketAddr::from(([127, 0, 0, 1], 9000)));
    assert_eq!(settings.trusted_users, ["alice", "bob"]);
    assert_eq!(
        settings.enabled_admission,
        Some(vec!["/pods/mutate".to_owned()])
    );
}

#[test]
fn other_commands_check_the_server_section_without_needing_a_certificate() {
    let errors = Config::from_yaml_str("server: {lisen: nowhere, tls: 7}\n", NO_ENV)
        .expect_err("a misspelt key fails every command")
        .to_string();
    assert!(errors.contains("server.lisen: unknown key"), "{errors}");
    assert!(
        errors.contains("server.tls: expected a mapping, got 7"),
        "{errors}"
    );
    assert!(!errors.contains("is required"), "{errors}");

    let text = "server: {listen: 127.0.0.1:9443}\nscheduler: {dispatch: {workers: 3}}\n";
    let config = Config::from_yaml_str(text, NO_ENV).expect("no certificate is needed");
    assert_eq!(config.dispatch.workers, 3);
    assert!(
        config.to_yaml().contains("listen: 127.0.0.1:9443"),
        "{}",
        config.to_yaml()
    );
}

#[test]
fn relative_paths_in_the_file_are_resolved_against_its_directory_and_the_environment_s_are_not() {
    let dir = tempfile::tempdir().expect("a directory");
    let path = dir.path().join("config.yaml");
    std::fs::write(
        &path,
        "server:\n  tls: {cert_file: tls/c.pem, key_file: /abs/k.pem}\n  resource_groups_file: ../groups.yaml\n",
    )
    .expect("write");

    let (_, settings) =
        Config::load_with_server(&path, [("DEXAFLOW_SERVER_TLS_CLIENT_CA_FILE", "ca/ca.pem")])
            .expect("valid");

    assert_eq!(settings.tls.cert_file, dir.path().join("tls/c.pem"));
    assert_eq!(settings.tls.key_file, PathBuf::from("/abs/k.pem"));
    assert_eq!(
        settings.resource_groups_file,
        Some(dir.path().join("../groups.yaml"))
    );
    assert_eq!(settings.client_ca_file, Some(PathBuf::from("ca/ca.pem")));
}

#[test]
fn every_server_file_that_cannot_be_used_is_reported_naming_its_key() {
    let dir = tempfile::tempdir().expect("a directory");
    let file = |name: &str| dir.path().join(name);
    std::fs::write(file("token"), "").expect("write");
    std::fs::write(file("groups.yaml"), "groups: [").expect("write");
    std::fs::write(file("tls.crt"), "not PEM").expect("write");
    let settings = Settings {
        client_ca_file: Some(file("ca.crt")),
        bearer_token_file: Some(file("token")),
        resource_groups_file: Some(file("groups.yaml")),
        ..Settings::new(TlsFiles {
            cert_file: file("tls.crt"),
            key_file: file("tls.key"),
        })
    };

    let errors = check_server_files(&settings)
        .expect_err("four bad files")
        .to_string();

    let lines: Vec<&str> = errors.lines().collect();
    let expected = [
        format!(
            "server.tls.key_file: reading {}: ",
            file("tls.key").display()
        ),
        format!(
            "server.tls.client_ca_file: reading {}: ",
            file("ca.crt").display()
        ),
        format!(
            "server.auth.bearer_token_file: {}: no token",
            file("token").display()
        ),
        format!(
            "server.resource_groups_file: {}: ",
            file("groups.yaml").display()
        ),
    ];
    assert_eq!(lines.len(), expected.len(), "{errors}");
    for (line, expected) in lines.iter().zip(&expected) {
        assert!(
            line.starts_with(expected.as_str()),
            "{expected:?} is not the start of {line:?}"
        );
    }
}

#[test]
fn a_certificate_that_does_not_parse_is_reported_against_its_key() {
    let dir = tempfile::tempdir().expect("a directory");
    let cert = dir.path().join("tls.crt");
    let key = dir.path().join("tls.key");
    std::fs::write(&cert, "not PEM").expect("write");
    std::fs::write(&key, "not PEM either").expect("write");

    let errors = check_server_files(&Settings::new(TlsFiles {
        cert_file: cert.clone(),
        key_file: key,
    }))
    .expect_err("no certificate")
    .to_string();

    assert!(
        errors.starts_with(&format!(
            "server.tls.cert_file: {}: expected a PEM certificate chain",
            cert.display()
        )),
        "{errors}"
    );
}

#[test]
fn a_bad_key_outside_the_server_section_is_reported_with_the_servers() {
    let errors = load(
        "server: {tls: {cert_file: c.pem, key_file: k.pem}, http2: 1}\nscheduler: {dispatch: {workers: x}}\n",
        &[],
    )
    .expect_err("two bad keys");
    assert!(errors.contains("scheduler.dispatch.workers"), "{errors}");
    assert!(errors.contains("server.http2"), "{errors}");
}

#[test]
fn the_example_serve_config_is_valid() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/serve.yaml");
    let (config, settings) = Config::load_with_server(&path, NO_ENV).expect("the example is valid");
    assert_eq!(
        settings.resource_groups_file,
        Some(Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/resource-groups.yaml"))
    );

    assert_eq!(
        config.metrics_listen,
        SocketAddr::from(([127, 0, 0, 1], 9465))
    );
    let groups = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/resource-groups.yaml"),
    )
    .expect("the example groups");
    let groups = dexaflow_admission::serve::parse_groups(
        Path::new("examples/resource-groups.yaml"),
        &groups,
    )
    .expect("the example groups are valid");
    assert_eq!(groups.len(), 4);
}

#[test]
fn a_certificate_and_key_given_the_wrong_way_round_are_each_said_to_hold_the_other() {
    let dir = tempfile::tempdir().expect("a directory");
    let files = crate::serve_support::Authority::new()
        .issue()
        .write_to(dir.path());

    let errors = check_server_files(&Settings::new(TlsFiles {
        cert_file: files.key_file.clone(),
        key_file: files.cert_file.clone(),
    }))
    .expect_err("swapped")
    .to_string();

    assert!(
        errors.contains(&format!(
            "server.tls.cert_file: {}: expected a PEM certificate chain, found a private key (are cert_file and key_file swapped?)",
            files.key_file.display()
        )),
        "{errors}"
    );
    assert!(
        errors.contains(&format!(
            "server.tls.key_file: {}: expected a PEM private key, found a certificate (are cert_file and key_file swapped?)",
            files.cert_file.display()
        )),
        "{errors}"
    );
}

#[test]
fn a_key_file_naming_the_certificate_is_reported_against_the_key_file() {
    let dir = tempfile::tempdir().expect("a directory");
    let files = crate::serve_support::Authority::new()
        .issue()
        .write_to(dir.path());

    let errors = check_server_files(&Settings::new(TlsFiles {
        cert_file: files.cert_file.clone(),
        key_file: files.cert_file.clone(),
    }))
    .expect_err("no key in the certificate's file")
    .to_string();

    assert!(
        errors.starts_with(&format!(
            "server.tls.key_file: {}: expected a PEM private key",
            files.cert_file.display()
        )),
        "{errors}"
    );
    assert!(!errors.contains("server.tls.cert_file"), "{errors}");
}

const TLS: &str = "  tls: {cert_file: /tls/tls.crt, key_file: /tls/tls.key}\n";

#[test]
fn a_metrics_listener_on_the_servers_address_is_refused_naming_both_keys() {
    let error = load(
        &format!("server:\n  listen: 127.0.0.1:8443\n{TLS}"),
        &[("DEXAFLOW_METRICS_LISTEN", "127.0.0.1:8443")],
    )
    .expect_err("two listeners on one address");

    assert_eq!(
        error,
        "metrics.listen (from DEXAFLOW_METRICS_LISTEN): expected an address no other listener takes (server.listen listens on 127.0.0.1:8443), got 127.0.0.1:8443"
    );
}

#[test]
fn a_probe_listener_on_the_metrics_default_is_refused_saying_it_is_the_default() {
    let error = load(
        &format!("server:\n  probe_listen: 0.0.0.0:9464\n{TLS}"),
        &[],
    )
    .expect_err("the probes on the exporter's default port");

    assert_eq!(
        error,
        "server.probe_listen: expected an address no other listener takes (metrics.listen, by default, listens on 127.0.0.1:9464), got 0.0.0.0:9464"
    );
}

#[test]
fn listeners_on_port_0_or_other_ports_do_not_collide() {
    for (listen, probe, metrics) in [
        ("127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"),
        ("127.0.0.1:8443", "127.0.0.2:8443", "127.0.0.1:9465"),
    ] {
        let settings = load(
            &format!("server:\n  listen: {listen}\n  probe_listen: {probe}\n{TLS}"),
            &[("DEXAFLOW_METRICS_LISTEN", metrics)],
        )
        .expect("listeners of their own");

        assert_eq!(settings.listen.to_string(), listen);
    }
}
