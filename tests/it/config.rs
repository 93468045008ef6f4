//! The config file: keys, defaults, validation that names every bad key, and env overrides.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use dexaflow_admission::config::{Config, ConfigError, ConfigErrors, EMBEDDED_DEFAULT};
use dexaflow_admission::dispatch::executor::lite;
use dexaflow_admission::dispatch::settings::{
    AllowedFields, Enforce, ExecutorSettings, MAX_BUFFER_SIZE, MAX_WORKERS,
};
use dexaflow_admission::hooks::HookSpec;

use crate::common::{NO_ENV, single_config_error as single_error};

fn parse(yaml: &str) -> Config {
    Config::from_yaml_str(yaml, NO_ENV)
        .unwrap_or_else(|errors| panic!("config is valid:\n{errors}"))
}

fn parse_with_env(yaml: &str, env: &[(&str, &str)]) -> Result<Config, ConfigErrors> {
    Config::from_yaml_str(yaml, env.iter().copied())
}

fn errors(yaml: &str) -> ConfigErrors {
    Config::from_yaml_str(yaml, NO_ENV).expect_err("config is invalid")
}

/// Asserts that `yaml` is refused with as many errors as `lines`, each starting one of them.
fn assert_exactly_reported(yaml: &str, lines: &[&str]) {
    let errors = errors(yaml);
    let text = errors.to_string();
    assert_eq!(errors.len(), lines.len(), "{text}");
    for line in lines {
        assert!(
            text.lines().any(|error| error.starts_with(line)),
            "{line} missing from:\n{text}"
        );
    }
}

// Defaults and the embedded config

#[test]
fn empty_file_gives_every_default() {
    let config = parse("");

    let dispatch = &config.dispatch;
    assert_eq!(dispatch.loop_interval, Duration::from_millis(1000));
    assert_eq!(dispatch.buffer_size, 0);
    assert_eq!(dispatch.workers, 1, "0 workers is floored to 1");
    assert_eq!(dispatch.retry_window, Duration::from_secs(15 * 60));
    assert_eq!(dispatch.drain_timeout, Duration::from_secs(15));
    assert_eq!(
        dispatch.executor,
        ExecutorSettings::Lite {
            log_dir: PathBuf::from("dexaflow-logs"),
            kill_grace: lite::DEFAULT_KILL_GRACE,
            max_parallel: lite::default_max_parallel(),
        }
    );
    assert_eq!(dispatch.task_service_account, "");
    assert_eq!(dispatch.defaults.cpu, None);
    assert_eq!(dispatch.defaults.memory, None);
    assert_eq!(dispatch.unit, None);
    assert_eq!(dispatch.allowlist.fields, AllowedFields::All);
    assert_eq!(dispatch.allowlist.service_accounts, None);
    assert_eq!(dispatch.allowlist.priority_classes, None);
    assert_eq!(dispatch.allowlist.images, None);
    assert!(!dispatch.source_mode.enabled);
    assert!(!dispatch.warm_pools);
    assert_eq!(dispatch.token.ttl, Duration::from_secs(10 * 60));
    assert_eq!(dispatch.token.secret.len(), 32);
    assert_eq!(config.supervise.timeout, Duration::from_millis(500));
    assert_eq!(config.supervise.chain_timeout, Duration::from_secs(2));
    assert!(!config.supervise.fail_open);
    assert_eq!(config.supervise.breaker.failures, 5);
    assert_eq!(config.supervise.breaker.backoff, Duration::from_secs(1));
    assert_eq!(
        config.supervise.breaker.max_backoff,
        Duration::from_secs(60)
    );
    assert!(config.hooks.is_empty());
    assert_eq!(
        config.metrics_listen,
        "127.0.0.1:9464".parse::<SocketAddr>().unwrap()
    );
}

#[test]
fn file_of_comments_and_empty_sections_gives_the_defaults() {
    let config = parse("# nothing yet\nscheduler:\nexecutor: {}\n");

    assert_eq!(config.dispatch.loop_interval, Duration::from_millis(1000));
    assert!(matches!(
        config.dispatch.executor,
        ExecutorSettings::Lite { .. }
    ));
}

#[test]
fn embedded_default_parses_with_the_demo_values() {
    let config = Config::embedded_default(NO_ENV).unwrap_or_else(|errors| panic!("{errors}"));

    assert_eq!(config.dispatch.loop_interval, Duration::from_millis(200));
    assert_eq!(config.dispatch.buffer_size, 0);
    assert_eq!(config.dispatch.retry_window, Duration::from_secs(15 * 60));
    assert_eq!(
        config.dispatch.executor,
        ExecutorSettings::Lite {
            log_dir: PathBuf::from("target/dexaflow-logs"),
            kill_grace: lite::DEFAULT_KILL_GRACE,
            max_parallel: lite::default_max_parallel(),
        }
    );
    let unit = config.dispatch.unit.expect("unit set");
    assert_eq!((unit.cpu.as_str(), unit.memory.as_str()), ("1", "2Gi"));
    assert_eq!(unit.enforce, Enforce::Refuse);
    assert_eq!(
        config.dispatch.allowlist.priority_classes,
        Some(BTreeSet::from([
            "high-priority".to_owned(),
            "default-priority".to_owned()
        ]))
    );
    let names: Vec<&str> = config.hooks.iter().map(HookSpec::name).collect();
    assert_eq!(
        names,
        ["finance-freeze", "suspended-tenants", "gpu-placement"]
    );
}

#[test]
fn embedded_default_is_the_example_file() {
    let example = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/dexaflow.yaml"
    ))
    .expect("example file");

    assert_eq!(EMBEDDED_DEFAULT, example);
}

#[test]
fn embedded_default_takes_environment_overrides() {
    let config = Config::embedded_default([("DEXAFLOW_EXECUTOR_TYPE", "null")])
        .unwrap_or_else(|errors| panic!("{errors}"));

    assert_eq!(config.dispatch.executor, ExecutorSettings::Null);
    assert_eq!(config.hooks.len(), 3);
}

// scheduler.*

#[test]
fn loop_interval_of_zero_is_refused() {
    let error = single_error("scheduler: {loop_interval_ms: 0, dispatch: {buffer_size: 4}}");

    assert_eq!(
        error,
        "scheduler.loop_interval_ms: expected a positive integer, got 0"
    );
}

#[test]
fn buffer_size_must_be_a_non_negative_integer() {
    let error = single_error("scheduler: {loop_interval_ms: 100, dispatch: {buffer_size: -1}}");

    assert_eq!(
        error,
        format!(
            "scheduler.dispatch.buffer_size: expected an integer from 0 to {MAX_BUFFER_SIZE}, got -1"
        )
    );
}

#[test]
fn buffer_size_above_its_maximum_is_refused_naming_the_key() {
    let error = single_error(&format!(
        "scheduler: {{dispatch: {{buffer_size: {}}}}}",
        MAX_BUFFER_SIZE + 1
    ));

    assert_eq!(
        error,
        format!(
            "scheduler.dispatch.buffer_size: expected an integer from 0 to {MAX_BUFFER_SIZE}, got {} (too large)",
            MAX_BUFFER_SIZE + 1
        )
    );
}

#[test]
fn workers_above_their_maximum_are_refused_naming_the_key() {
    let error = single_error(&format!(
        "scheduler: {{dispatch: {{buffer_size: 8, workers: {}}}}}",
        MAX_WORKERS + 1
    ));

    assert_eq!(
        error,
        format!(
            "scheduler.dispatch.workers: expected an integer from 0 to {MAX_WORKERS}, got {} (too large)",
            MAX_WORKERS + 1
        )
    );
}

#[test]
fn buffer_size_and_workers_at_their_maxima_are_accepted() {
    let config = parse(&format!(
        "scheduler: {{dispatch: {{buffer_size: {MAX_BUFFER_SIZE}, workers: {MAX_WORKERS}}}}}"
    ));

    assert_eq!(
        (config.dispatch.buffer_size, config.dispatch.workers),
        (MAX_BUFFER_SIZE, MAX_WORKERS)
    );
}

#[test]
fn an_integer_too_large_for_any_integer_says_it_is_too_large() {
    let error = single_error("scheduler: {dispatch: {buffer_size: 99999999999999999999999}}");

    assert_eq!(
        error,
        format!(
            "scheduler.dispatch.buffer_size: expected an integer from 0 to {MAX_BUFFER_SIZE}, got 99999999999999999999999 (too large)"
        )
    );
}

#[test]
fn an_integer_above_64_bits_is_too_large_even_for_an_unbounded_key() {
    let error = single_error("scheduler: {loop_interval_ms: 99999999999999999999999}");

    assert_eq!(
        error,
        "scheduler.loop_interval_ms: expected an integer from 1 to 18446744073709551615, got 99999999999999999999999 (too large)"
    );
}

#[test]
fn an_integer_too_large_for_64_bits_is_not_taken_for_text() {
    let error = single_error("executor: {task_service_account: 99999999999999999999999}");

    assert!(
        error.starts_with("executor.task_service_account: expected text"),
        "{error}"
    );
    assert!(error.ends_with("got 99999999999999999999999"), "{error}");
}

#[test]
fn an_environment_integer_too_large_says_it_is_too_large() {
    let errors = parse_with_env(
        "",
        &[(
            "DEXAFLOW_SCHEDULER_DISPATCH_BUFFER_SIZE",
            "99999999999999999999999",
        )],
    )
    .expect_err("too large");

    assert_eq!(
        errors.to_string(),
        format!(
            "scheduler.dispatch.buffer_size (from DEXAFLOW_SCHEDULER_DISPATCH_BUFFER_SIZE): expected an integer from 0 to {MAX_BUFFER_SIZE}, got \"99999999999999999999999\" (too large)"
        )
    );
}

#[test]
fn workers_must_be_an_integer() {
    let error = single_error("scheduler: {dispatch: {buffer_size: 512, workers: many}}");

    assert_eq!(
        error,
        format!(
            "scheduler.dispatch.workers: expected an integer from 0 to {MAX_WORKERS}, got \"many\""
        )
    );
}

#[test]
fn buffered_dispatch_keeps_its_size_and_workers() {
    let config = parse("scheduler: {dispatch: {buffer_size: 512, workers: 16}}");

    assert_eq!(
        (config.dispatch.buffer_size, config.dispatch.workers),
        (512, 16)
    );
}

#[test]
fn retry_window_must_be_a_duration() {
    let error = single_error("scheduler: {dispatch: {retry_window: forever, drain_timeout: 5s}}");

    assert_eq!(
        error,
        "scheduler.dispatch.retry_window: expected a duration such as \"15m\", got \"forever\""
    );
}

#[test]
fn a_negative_duration_is_refused_saying_it_is_negative() {
    let error = single_error("scheduler: {dispatch: {retry_window: -1s, drain_timeout: 5s}}");

    assert_eq!(
        error,
        "scheduler.dispatch.retry_window: expected a duration such as \"15m\", got \"-1s\" (negative duration)"
    );
}

#[test]
fn a_duration_in_an_unknown_unit_is_refused_naming_the_unit() {
    let error =
        single_error("scheduler: {dispatch: {retry_window: 2 fortnights, drain_timeout: 5s}}");

    assert_eq!(
        error,
        "scheduler.dispatch.retry_window: expected a duration such as \"15m\", got \"2 fortnights\" (unknown unit \"fortnights\" in duration)"
    );
}

#[test]
fn a_duration_past_292_years_is_refused_as_out_of_range() {
    let error =
        single_error("scheduler: {dispatch: {retry_window: 99999999999h, drain_timeout: 5s}}");

    assert_eq!(
        error,
        "scheduler.dispatch.retry_window: expected a duration such as \"15m\", got \"99999999999h\" (duration out of range: about 292 years at most)"
    );
}

#[test]
fn durations_take_spaced_components_and_go_fractions() {
    let config = parse("scheduler: {dispatch: {retry_window: \"1h 30m\", drain_timeout: 1.5s}}");

    assert_eq!(
        (config.dispatch.retry_window, config.dispatch.drain_timeout),
        (Duration::from_secs(90 * 60), Duration::from_millis(1500))
    );
}

#[test]
fn drain_timeout_must_be_a_duration() {
    let error = single_error("scheduler: {dispatch: {retry_window: 1m, drain_timeout: 15}}");

    assert_eq!(
        error,
        "scheduler.dispatch.drain_timeout: expected a duration such as \"15s\", got 15"
    );
}

// executor.*

#[test]
fn executor_type_must_be_a_known_executor() {
    let error = single_error("executor: {type: docker, task_namespace: jobs}");

    assert!(
        error.starts_with("executor.type: expected one of lite"),
        "{error}"
    );
    assert!(error.ends_with("got \"docker\""), "{error}");
}

#[test]
fn subprocess_is_an_alias_of_lite() {
    let config = parse("executor: {type: subprocess, lite: {log_dir: /tmp/logs}}");

    assert_eq!(
        config.dispatch.executor,
        ExecutorSettings::Lite {
            log_dir: PathBuf::from("/tmp/logs"),
            kill_grace: lite::DEFAULT_KILL_GRACE,
            max_parallel: lite::default_max_parallel(),
        }
    );
}

#[test]
fn a_bare_null_executor_type_is_refused_with_a_hint_to_quote_it() {
    let error = single_error("executor: {type: null}");

    assert!(error.starts_with("executor.type: expected"), "{error}");
    assert!(error.contains("quoted"), "{error}");
    assert_eq!(
        parse("executor: {type: 'null'}").dispatch.executor,
        ExecutorSettings::Null
    );
}

#[test]
fn kubernetes_executor_takes_namespace_dry_run_dir_and_non_root() {
    let config = parse(
        "executor: {type: kubernetes, task_namespace: jobs, kubernetes: {dry_run_dir: out}, defaults: {run_tasks_as_non_root: false}}",
    );

    assert_eq!(
        config.dispatch.executor,
        ExecutorSettings::Kubernetes {
            namespace: "jobs".into(),
            dry_run_dir: Some(PathBuf::from("out")),
            run_as_non_root: false,
        }
    );
}

#[test]
fn task_namespace_must_be_a_dns_label() {
    let error = single_error(
        "executor: {type: kubernetes, task_namespace: Jobs.Prod, kubernetes: {dry_run_dir: out}}",
    );

    assert!(
        error.starts_with("executor.task_namespace: expected a namespace name"),
        "{error}"
    );
    assert!(error.ends_with("got \"Jobs.Prod\""), "{error}");
}

#[test]
fn task_namespace_with_upper_case_or_over_63_characters_is_refused() {
    for namespace in ["Jobs".to_owned(), "j".repeat(64)] {
        let error = single_error(&format!("executor: {{task_namespace: {namespace}}}"));

        assert!(
            error.starts_with("executor.task_namespace: expected a namespace name"),
            "{error}"
        );
    }
    assert_eq!(
        parse(&format!(
            "executor: {{type: kubernetes, task_namespace: {}, kubernetes: {{dry_run_dir: out}}}}",
            "j".repeat(63)
        ))
        .dispatch
        .executor,
        ExecutorSettings::Kubernetes {
            namespace: "j".repeat(63),
            dry_run_dir: Some(PathBuf::from("out")),
            run_as_non_root: true,
        }
    );
}

#[test]
fn kubernetes_executor_without_a_dry_run_dir_fails_at_boot_naming_the_key() {
    let error = single_error("executor: {type: kubernetes, task_namespace: jobs}");

    assert!(
        error.starts_with(
            "executor.kubernetes.dry_run_dir is required when executor.type is kubernetes"
        ),
        "{error}"
    );
}

#[test]
fn kubernetes_executor_chosen_by_a_variable_names_it_when_the_dry_run_dir_is_missing() {
    let errors =
        parse_with_env("", &[("DEXAFLOW_EXECUTOR_TYPE", "kubernetes")]).expect_err("no dir");

    assert!(
        errors.to_string().starts_with(
            "executor.kubernetes.dry_run_dir is required when executor.type (from DEXAFLOW_EXECUTOR_TYPE) is kubernetes"
        ),
        "{errors}"
    );
}

#[test]
fn task_service_account_must_be_a_dns_subdomain() {
    let error = single_error("executor: {task_service_account: Task_Runner, task_namespace: jobs}");

    assert!(
        error.starts_with("executor.task_service_account: expected a service account"),
        "{error}"
    );
}

#[test]
fn default_cpu_must_be_a_quantity() {
    let error = single_error("executor: {defaults: {resources_cpu: lots, resources_memory: 1Gi}}");

    assert!(
        error.starts_with("executor.defaults.resources_cpu: expected a quantity"),
        "{error}"
    );
    assert!(error.ends_with("got \"lots\""), "{error}");
}

#[test]
fn default_memory_must_be_a_quantity() {
    let error = single_error("executor: {defaults: {resources_cpu: 500m, resources_memory: 1GB}}");

    assert!(
        error.starts_with("executor.defaults.resources_memory: expected a quantity"),
        "{error}"
    );
}

#[test]
fn defaults_keep_their_quantities_as_written() {
    let config = parse("executor: {defaults: {resources_cpu: 500m, resources_memory: 512Mi}}");

    assert_eq!(config.dispatch.defaults.cpu.as_deref(), Some("500m"));
    assert_eq!(config.dispatch.defaults.memory.as_deref(), Some("512Mi"));
}

#[test]
fn run_tasks_as_non_root_must_be_a_boolean() {
    let error =
        single_error("executor: {defaults: {run_tasks_as_non_root: yes, resources_cpu: '1'}}");

    assert_eq!(
        error,
        "executor.defaults.run_tasks_as_non_root: expected true or false, got \"yes\""
    );
}

#[test]
fn unit_is_parsed_into_thousandths() {
    let config = parse("executor: {unit: {cpu: 500m, memory: 1Gi, enforce: warn, max_size: 8}}");

    let unit = config.dispatch.unit.expect("unit set");
    assert_eq!(unit.cpu_milli, 500);
    assert_eq!(unit.memory_milli, 1024 * 1024 * 1024 * 1000);
    assert_eq!(unit.enforce, Enforce::Warn);
    assert_eq!(unit.max_size, 8);
}

#[test]
fn unit_accepts_a_bare_number_of_cpus() {
    let config = parse("executor: {unit: {cpu: 2, memory: 4Gi}}");

    assert_eq!(config.dispatch.unit.expect("unit set").cpu_milli, 2000);
}

#[test]
fn unit_cpu_must_be_a_positive_quantity() {
    let error = single_error("executor: {unit: {cpu: '0', memory: 2Gi}}");

    assert!(
        error.starts_with("executor.unit.cpu: expected a quantity above zero"),
        "{error}"
    );
    assert!(error.ends_with("got \"0\""), "{error}");
}

#[test]
fn unit_memory_must_be_a_quantity() {
    let error = single_error("executor: {unit: {cpu: '1', memory: two gigs}}");

    assert!(
        error.starts_with("executor.unit.memory: expected a quantity"),
        "{error}"
    );
}

#[test]
fn unit_needs_both_cpu_and_memory_or_neither() {
    let error = single_error("executor: {unit: {cpu: '1', enforce: refuse}}");

    assert_eq!(error, "executor.unit needs both cpu and memory, or neither");
}

#[test]
fn unit_enforce_is_refuse_or_warn() {
    let error = single_error("executor: {unit: {cpu: '1', memory: 2Gi, enforce: block}}");

    assert_eq!(
        error,
        "executor.unit.enforce: expected refuse or warn, got \"block\""
    );
}

#[test]
fn unit_max_size_is_between_1_and_1024() {
    let low = single_error("executor: {unit: {cpu: '1', memory: 2Gi, max_size: 0}}");
    let high = single_error("executor: {unit: {cpu: '1', memory: 2Gi, max_size: 1025}}");

    assert_eq!(
        low,
        "executor.unit.max_size: expected an integer from 1 to 1024, got 0"
    );
    assert_eq!(
        high,
        "executor.unit.max_size: expected an integer from 1 to 1024, got 1025 (too large)"
    );
    assert_eq!(
        parse("executor: {unit: {cpu: '1', memory: 2Gi, max_size: 1024}}")
            .dispatch
            .unit
            .unwrap()
            .max_size,
        1024
    );
}

#[test]
fn lite_log_dir_must_not_be_empty() {
    let error = single_error("executor: {type: lite, lite: {log_dir: ''}}");

    assert_eq!(
        error,
        "executor.lite.log_dir: expected a directory path, got \"\""
    );
}

#[test]
fn kubernetes_dry_run_dir_must_be_a_path() {
    let error = single_error("executor: {type: kubernetes, kubernetes: {dry_run_dir: [a]}}");

    assert_eq!(
        error,
        "executor.kubernetes.dry_run_dir: expected a directory path, got a list"
    );
}

// execution.*

#[test]
fn warm_pools_enabled_must_be_a_boolean() {
    let error = single_error("execution: {warm_pools_enabled: 1, source_mode: {enabled: false}}");

    assert_eq!(
        error,
        "execution.warm_pools_enabled: expected true or false, got 1"
    );
}

#[test]
fn source_mode_enabled_must_be_a_boolean() {
    let error = single_error("execution: {source_mode: {enabled: on}, warm_pools_enabled: true}");

    assert_eq!(
        error,
        "execution.source_mode.enabled: expected true or false, got \"on\""
    );
}

#[test]
fn source_mode_image_is_required_when_enabled() {
    let error = single_error("execution: {source_mode: {enabled: true}}");

    assert!(
        error.starts_with("execution.source_mode.image is required"),
        "{error}"
    );
}

#[test]
fn source_mode_image_must_be_pinned_by_digest() {
    let error = single_error("execution: {source_mode: {enabled: true, image: 'python:3.12'}}");

    assert!(
        error.starts_with("execution.source_mode.image: expected an image pinned by digest"),
        "{error}"
    );
    assert!(error.ends_with("got \"python:3.12\""), "{error}");
}

#[test]
fn source_mode_takes_an_image_pinned_by_digest() {
    let image = format!("ghcr.io/acme/runtime@sha256:{}", "ab".repeat(32));

    let config = parse(&format!(
        "execution: {{source_mode: {{enabled: true, image: '{image}'}}}}"
    ));

    assert!(config.dispatch.source_mode.enabled);
    assert_eq!(config.dispatch.source_mode.image, image);
}

#[test]
fn source_mode_image_with_an_upper_case_digest_is_refused() {
    let image = format!("ghcr.io/acme/runtime@sha256:{}", "AB".repeat(32));

    let error = single_error(&format!("execution: {{source_mode: {{image: '{image}'}}}}"));

    assert!(error.contains("pinned by digest"), "{error}");
}

#[test]
fn admission_timeout_must_be_a_duration() {
    let error = single_error("execution: {admission: {timeout: fast, chain_timeout: 2s}}");

    assert_eq!(
        error,
        "execution.admission.timeout: expected a duration such as \"500ms\", got \"fast\""
    );
}

#[test]
fn admission_timeout_must_be_above_zero() {
    let error = single_error("execution: {admission: {timeout: 0s}}");

    assert!(
        error.starts_with("execution.admission.timeout: expected a duration above 0s"),
        "{error}"
    );
}

#[test]
fn chain_timeout_must_be_at_least_the_hook_timeout() {
    let error = single_error("execution: {admission: {timeout: 3s, chain_timeout: 2s}}");

    assert_eq!(
        error,
        "execution.admission.chain_timeout: expected a duration of at least execution.admission.timeout (3s), got \"2s\""
    );
}

#[test]
fn fail_open_must_be_a_boolean() {
    let error = single_error("execution: {admission: {fail_open: sometimes, timeout: 1s}}");

    assert_eq!(
        error,
        "execution.admission.fail_open: expected true or false, got \"sometimes\""
    );
}

#[test]
fn breaker_failures_must_be_at_least_one() {
    let error = single_error("execution: {admission: {breaker: {failures: 0, backoff: 2s}}}");

    assert!(
        error.starts_with("execution.admission.breaker.failures: expected an integer from 1"),
        "{error}"
    );
}

#[test]
fn breaker_backoff_must_be_a_duration() {
    let error = single_error("execution: {admission: {breaker: {backoff: soon, failures: 3}}}");

    assert_eq!(
        error,
        "execution.admission.breaker.backoff: expected a duration such as \"1s\", got \"soon\""
    );
}

#[test]
fn breaker_max_backoff_must_be_at_least_the_backoff() {
    let error = single_error("execution: {admission: {breaker: {backoff: 10s, max_backoff: 5s}}}");

    assert!(error.starts_with("execution.admission.breaker.max_backoff: expected a duration of at least execution.admission.breaker.backoff (10s)"), "{error}");
}

#[test]
fn supervise_settings_are_read() {
    let config = parse(
        "execution: {admission: {timeout: 200ms, chain_timeout: 1s, fail_open: true, breaker: {failures: 3, backoff: 2s, max_backoff: 30s}}}",
    );

    let supervise = &config.supervise;
    assert_eq!(
        (supervise.timeout, supervise.chain_timeout),
        (Duration::from_millis(200), Duration::from_secs(1))
    );
    assert!(supervise.fail_open);
    assert_eq!(supervise.breaker.failures, 3);
    assert_eq!(
        (supervise.breaker.backoff, supervise.breaker.max_backoff),
        (Duration::from_secs(2), Duration::from_secs(30))
    );
}

// execution.admission.hooks

#[test]
fn hooks_must_be_a_list() {
    let error = single_error("execution: {admission: {hooks: {type: deny}}}");

    assert_eq!(
        error,
        "execution.admission.hooks: expected a list of hooks, got a mapping"
    );
}

#[test]
fn a_hook_with_an_unknown_field_is_named_by_its_position() {
    let error = single_error(
        "execution: {admission: {hooks: [{type: deny, name: ok, match: {tenants: [a]}}, {type: deny, name: bad, match: {tenant: [a]}}]}}",
    );

    assert!(
        error.starts_with("execution.admission.hooks[1]: unknown field `tenant`"),
        "{error}"
    );
}

#[test]
fn a_hook_of_an_unknown_type_is_refused() {
    let error = single_error("execution: {admission: {hooks: [{type: quota, name: q}]}}");

    assert!(
        error.starts_with("execution.admission.hooks[0]: unknown variant `quota`"),
        "{error}"
    );
}

#[test]
fn duplicate_hook_names_name_both_hooks() {
    let error = single_error(
        "execution: {admission: {hooks: [{type: freeze, name: x, for: 1s}, {type: deny, name: y, match: {tenants: [a]}}, {type: deny, name: x, match: {tenants: [b]}}]}}",
    );

    assert_eq!(
        error,
        "execution.admission.hooks[2].name: duplicate hook name \"x\", already used by execution.admission.hooks[0].name"
    );
}

#[test]
fn a_hook_needs_a_non_empty_name() {
    let error =
        single_error("execution: {admission: {hooks: [{type: freeze, name: '', for: 1s}]}}");

    assert_eq!(
        error,
        "execution.admission.hooks[0].name: expected a non-empty name, got \"\""
    );
}

#[test]
fn a_hook_name_kubernetes_would_not_take_as_a_label_value_is_refused() {
    let error = single_error(
        "execution: {admission: {hooks: [{type: deny, name: 'gpu placement', match: {tenants: [a]}}]}}",
    );

    assert!(
        error.starts_with(
            "execution.admission.hooks[0].name: expected a name Kubernetes accepts as a label value"
        ),
        "{error}"
    );
    assert!(error.ends_with("got \"gpu placement\""), "{error}");
}

#[test]
fn a_hook_name_longer_than_a_label_value_is_refused() {
    let name = "h".repeat(64);

    let error = single_error(&format!(
        "execution: {{admission: {{hooks: [{{type: freeze, name: {name}, for: 1s}}]}}}}"
    ));

    assert!(
        error.starts_with("execution.admission.hooks[0].name: expected a name"),
        "{error}"
    );
    assert!(error.contains("at most 63 characters"), "{error}");
}

#[test]
fn every_bad_change_of_a_placement_group_is_reported() {
    assert_exactly_reported(
        "execution: {admission: {hooks: [{type: placement, name: p, groups: [{set: {labels: {'bad key': x, ok: 'bad value!'}, node_selector: {'': y}}}]}]}}",
        &[
            "execution.admission.hooks[0]: groups[0].set: label key \"bad key\" is invalid: ",
            "execution.admission.hooks[0]: groups[0].set: label \"ok\" value \"bad value!\" is invalid: ",
            "execution.admission.hooks[0]: groups[0].set: node selector key \"\" is invalid: ",
        ],
    );
}

#[test]
fn a_placement_group_match_label_key_kubernetes_would_reject_is_refused() {
    let error = single_error(
        "execution: {admission: {hooks: [{type: placement, name: p, groups: [{match: {labels: {'not a key!': x}}, set: {priority_class: high}}]}]}}",
    );

    assert!(
        error.starts_with(
            "execution.admission.hooks[0]: groups[0].match: label key \"not a key!\" is invalid: "
        ),
        "{error}"
    );
}

#[test]
fn a_deny_hook_match_label_key_kubernetes_would_reject_is_refused() {
    let error = single_error(
        "execution: {admission: {hooks: [{type: deny, name: d, match: {labels: {'a/b/c': x}}}]}}",
    );

    assert!(
        error.starts_with("execution.admission.hooks[0]: match: label key \"a/b/c\" is invalid: "),
        "{error}"
    );
}

#[test]
fn a_group_that_does_not_parse_does_not_hide_the_other_groups_errors() {
    assert_exactly_reported(
        "execution: {admission: {hooks: [{type: placement, name: p, groups: [{set: {colour: red}}, {match: {tenant: [a]}, set: {labels: {'bad key': x}}}, {set: {labels: {'also bad': y}}}]}]}}",
        &[
            "execution.admission.hooks[0].groups[0].set: unknown field `colour`",
            "execution.admission.hooks[0].groups[1].match: unknown field `tenant`",
            "execution.admission.hooks[0]: groups[1].set: label key \"bad key\" is invalid: ",
            "execution.admission.hooks[0]: groups[2].set: label key \"also bad\" is invalid: ",
        ],
    );
}

#[test]
fn a_placement_group_written_as_lists_is_refused_naming_each_field() {
    // Each list holds the fields of its struct in order: serde would read them so, and the
    // group would place gpu-lab's attempts on pool gpu.
    assert_exactly_reported(
        "execution: {admission: {hooks: [{type: placement, name: p, groups: [{match: [[gpu-lab]], set: [{pool: gpu}]}]}]}}",
        &[
            "execution.admission.hooks[0].groups[0].match: invalid type: sequence, expected struct Matcher",
            "execution.admission.hooks[0].groups[0].set: invalid type: sequence, expected struct Changes",
        ],
    );
}

#[test]
fn a_deny_hook_whose_match_is_a_list_is_refused_naming_it() {
    let error = single_error(
        "execution: {admission: {hooks: [{type: deny, name: d, match: [[umbrella]], reason: unpaid}]}}",
    );

    assert!(
        error.starts_with(
            "execution.admission.hooks[0]: invalid type: sequence, expected struct Matcher"
        ),
        "{error}"
    );
}

#[test]
fn a_freeze_with_a_bad_window_names_the_hook_and_the_field() {
    let error =
        single_error("execution: {admission: {hooks: [{type: freeze, name: f, for: later}]}}");

    assert!(
        error.starts_with("execution.admission.hooks[0]: for: expected a duration"),
        "{error}"
    );
}

#[test]
fn a_hook_duration_that_is_negative_says_so() {
    let error =
        single_error("execution: {admission: {hooks: [{type: freeze, name: f, for: -5m}]}}");

    assert_eq!(
        error,
        "execution.admission.hooks[0]: for: expected a duration such as \"5s\", got \"-5m\" (negative duration)"
    );
}

#[test]
fn a_freeze_with_a_bad_from_and_a_bad_until_reports_both() {
    let errors = errors(
        "execution: {admission: {hooks: [{type: freeze, name: f, from: soon, until: later}]}}",
    );

    let text = errors.to_string();
    assert_eq!(
        text.lines().collect::<Vec<_>>(),
        [
            "execution.admission.hooks[0]: from: expected an RFC 3339 UTC timestamp such as \"2026-12-31T18:00:00Z\", got \"soon\"",
            "execution.admission.hooks[0]: until: expected an RFC 3339 UTC timestamp such as \"2026-12-31T18:00:00Z\", got \"later\"",
        ],
        "{text}"
    );
    assert_eq!(errors.len(), 2, "{text}");
}

#[test]
fn a_deny_hook_without_criteria_is_refused() {
    let error =
        single_error("execution: {admission: {hooks: [{type: deny, name: all, match: {}}]}}");

    assert_eq!(
        error,
        "execution.admission.hooks[0]: match: a deny hook needs at least one criterion"
    );
}

#[test]
fn a_placement_priority_class_outside_the_allowlist_is_refused_at_boot() {
    let error = single_error(
        "execution_allowlist: {priority_classes: [default-priority]}\nexecution: {admission: {hooks: [{type: placement, name: p, groups: [{set: {priority_class: high-priority}}]}]}}",
    );

    assert_eq!(
        error,
        "execution.admission.hooks[0]: groups[0].set: priority class \"high-priority\" is not in execution_allowlist.priority_classes"
    );
}

#[test]
fn hooks_keep_their_declared_order() {
    let config = parse(
        "execution: {admission: {hooks: [{type: deny, name: b, match: {tenants: [x]}}, {type: freeze, name: a, for: 1s}]}}",
    );

    let names: Vec<&str> = config.hooks.iter().map(HookSpec::name).collect();
    assert_eq!(names, ["b", "a"]);
}

// execution_allowlist.*

#[test]
fn allowlist_fields_takes_all_none_or_a_list_of_fields() {
    assert_eq!(
        parse("execution_allowlist: {fields: none}")
            .dispatch
            .allowlist
            .fields,
        AllowedFields::None
    );
    assert_eq!(
        parse("execution_allowlist: {fields: all}")
            .dispatch
            .allowlist
            .fields,
        AllowedFields::All
    );
    assert_eq!(
        parse("execution_allowlist: {fields: [labels, tolerations]}")
            .dispatch
            .allowlist
            .fields,
        AllowedFields::Only(BTreeSet::from([
            "labels".to_owned(),
            "tolerations".to_owned()
        ]))
    );
}

#[test]
fn allowlist_fields_refuses_an_unknown_field_naming_its_position() {
    let error = single_error("execution_allowlist: {fields: [labels, image], images: [ghcr.io/]}");

    assert!(
        error.starts_with("execution_allowlist.fields[1]: expected one of node_selector"),
        "{error}"
    );
    assert!(error.ends_with("got \"image\""), "{error}");
}

#[test]
fn allowlist_fields_refuses_other_words() {
    let error = single_error("execution_allowlist: {fields: some}");

    assert!(
        error.starts_with("execution_allowlist.fields: expected all, none or a list"),
        "{error}"
    );
}

#[test]
fn allowlist_service_accounts_must_be_a_list_of_names() {
    let error = single_error(
        "execution_allowlist: {service_accounts: [runner, 7, ''], priority_classes: [p]}",
    );

    assert_eq!(
        error,
        "execution_allowlist.service_accounts[1]: expected non-empty text, got 7"
    );
}

#[test]
fn allowlist_priority_classes_must_be_a_list() {
    let error =
        single_error("execution_allowlist: {priority_classes: high, service_accounts: [a]}");

    assert_eq!(
        error,
        "execution_allowlist.priority_classes: expected a list, got \"high\""
    );
}

#[test]
fn allowlist_images_are_kept_in_order() {
    let config = parse("execution_allowlist: {images: [ghcr.io/acme/, python]}");

    assert_eq!(
        config.dispatch.allowlist.images,
        Some(vec!["ghcr.io/acme/".to_owned(), "python".to_owned()])
    );
}

// auth.* and metrics.*

#[test]
fn agent_token_secret_is_used_as_given() {
    let secret = "0123456789abcdef0123456789abcdef";

    let config = parse(&format!("auth: {{agent_token_secret: '{secret}'}}"));

    assert_eq!(config.dispatch.token.secret, secret.as_bytes());
}

#[test]
fn a_short_agent_token_secret_is_refused_without_showing_it() {
    let error = single_error("auth: {agent_token_secret: hunter2, agent_token_ttl: 5m}");

    assert_eq!(
        error,
        "auth.agent_token_secret: expected a secret of at least 32 bytes, got 7 bytes"
    );
    assert!(!error.contains("hunter2"));
}

#[test]
fn a_secret_yaml_reads_as_a_number_is_refused_asking_to_quote_it() {
    let error = single_error("auth: {agent_token_secret: 31415}");

    assert!(
        error.starts_with("auth.agent_token_secret: expected text"),
        "{error}"
    );
    assert!(error.contains("quote"), "{error}");
    assert!(!error.contains("31415"), "{error}");
}

#[test]
fn a_secret_of_digits_too_long_for_64_bits_is_not_shown() {
    let error = single_error("auth: {agent_token_secret: 271828182845904523536028747135266249}");

    assert!(error.starts_with("auth.agent_token_secret: "), "{error}");
    assert!(!error.contains("2718281828"), "{error}");
}

#[test]
fn a_hex_secret_yaml_reads_as_a_number_is_not_shown_in_any_base() {
    let error = single_error("auth: {agent_token_secret: 0xfeedfacefeedfacefeedfacefeedface}");

    let decimal = u128::from_str_radix("feedfacefeedfacefeedfacefeedface", 16)
        .unwrap()
        .to_string();
    assert!(error.starts_with("auth.agent_token_secret: "), "{error}");
    assert!(!error.contains("feedface"), "{error}");
    assert!(!error.contains(&decimal[..12]), "{error}");
}

#[test]
fn a_secret_written_in_place_of_its_section_is_not_shown() {
    let error = single_error("auth: correct-horse-battery-staple-0123456789");

    assert_eq!(error, "auth: expected a mapping, got text");
}

#[test]
fn a_missing_agent_token_secret_is_generated_per_load() {
    let first = parse("");
    let second = parse("");

    assert_eq!(first.dispatch.token.secret.len(), 32);
    assert_ne!(first.dispatch.token.secret, second.dispatch.token.secret);
}

#[test]
fn agent_token_ttl_must_be_a_duration() {
    let error = single_error("auth: {agent_token_ttl: long}");

    assert_eq!(
        error,
        "auth.agent_token_ttl: expected a duration such as \"10m\", got \"long\""
    );
}

#[test]
fn metrics_listen_must_be_an_address() {
    let error = single_error("metrics: {listen: localhost}\nauth: {agent_token_ttl: 1m}");

    assert_eq!(
        error,
        "metrics.listen: expected an address such as \"127.0.0.1:9464\", got \"localhost\""
    );
}

#[test]
fn metrics_listen_is_read() {
    assert_eq!(
        parse("metrics: {listen: '0.0.0.0:9000'}").metrics_listen,
        "0.0.0.0:9000".parse::<SocketAddr>().unwrap()
    );
}

// Unknown keys and shapes

#[test]
fn a_misspelt_key_is_reported_with_its_full_path() {
    let error = single_error("scheduler: {dispatch: {bufer_size: 4, workers: 2}}");

    assert_eq!(error, "scheduler.dispatch.bufer_size: unknown key");
}

#[test]
fn unknown_keys_are_reported_at_every_level() {
    let errors = errors(
        "
colour: blue
scheduler: {tick: 1, dispatch: {size: 1}}
executor: {kind: lite, defaults: {cpu: 1}, unit: {gpu: 1}, lite: {dir: x}, kubernetes: {context: y}}
execution: {pools: 1, source_mode: {digest: z}, admission: {retries: 1, breaker: {jitter: 0.5}, webhook: {uri: x}}}
execution_allowlist: {volumes: []}
auth: {agent_token_transport: envvar}
metrics: {port: 9464}
",
    );

    let text = errors.to_string();
    let expected = [
        "colour",
        "scheduler.tick",
        "scheduler.dispatch.size",
        "executor.kind",
        "executor.defaults.cpu",
        "executor.unit.gpu",
        "executor.lite.dir",
        "executor.kubernetes.context",
        "execution.pools",
        "execution.source_mode.digest",
        "execution.admission.retries",
        "execution.admission.breaker.jitter",
        "execution.admission.webhook.uri",
        "execution_allowlist.volumes",
        "auth.agent_token_transport",
        "metrics.port",
    ];
    for key in expected {
        assert!(
            text.lines()
                .any(|line| line == format!("{key}: unknown key")),
            "{key} missing from:\n{text}"
        );
    }
    assert_eq!(errors.len(), expected.len(), "{text}");
}

#[test]
fn a_dotted_key_is_not_taken_as_a_path() {
    let error = single_error("scheduler.loop_interval_ms: 5");

    assert_eq!(error, "scheduler.loop_interval_ms: unknown key");
}

#[test]
fn a_section_that_is_not_a_mapping_is_refused() {
    let error = single_error("scheduler: 5");

    assert_eq!(error, "scheduler: expected a mapping, got 5");
}

#[test]
fn a_file_that_is_not_a_mapping_is_refused() {
    let error = single_error("- a\n- b\n");

    assert_eq!(error, "the config: expected a mapping, got a list");
}

#[test]
fn text_that_is_not_yaml_is_refused() {
    let errors = errors("scheduler: {loop_interval_ms: 5\n");

    assert!(matches!(errors.errors()[0], ConfigError::Syntax { .. }));
    assert!(
        errors
            .to_string()
            .starts_with("the config is not valid YAML: "),
        "{errors}"
    );
}

#[test]
fn every_error_is_reported_not_just_the_first() {
    let errors = errors(
        "scheduler: {loop_interval_ms: 0, dispatch: {bufer_size: 1}}\nexecution: {admission: {timeout: fast}}\nmetrics: {listen: nowhere}\n",
    );

    let text = errors.to_string();
    assert_eq!(errors.len(), 4, "{text}");
    assert_eq!(text.lines().count(), 4);
    assert!(text.contains("scheduler.loop_interval_ms: "));
    assert!(text.contains("scheduler.dispatch.bufer_size: unknown key"));
    assert!(text.contains("execution.admission.timeout: "));
    assert!(text.contains("metrics.listen: "));
}

// Environment overrides

#[test]
fn an_environment_variable_overrides_the_file() {
    let config = parse_with_env(
        "scheduler: {dispatch: {buffer_size: 4}}",
        &[("DEXAFLOW_SCHEDULER_DISPATCH_BUFFER_SIZE", "512")],
    )
    .expect("valid");

    assert_eq!(config.dispatch.buffer_size, 512);
}

#[test]
fn a_bad_environment_value_names_the_variable() {
    let errors =
        parse_with_env("", &[("DEXAFLOW_SCHEDULER_DISPATCH_BUFFER_SIZE", "x")]).expect_err("bad");

    assert_eq!(
        errors.to_string(),
        format!(
            "scheduler.dispatch.buffer_size (from DEXAFLOW_SCHEDULER_DISPATCH_BUFFER_SIZE): expected an integer from 0 to {MAX_BUFFER_SIZE}, got \"x\""
        )
    );
}

#[test]
fn unrelated_dexaflow_variables_are_ignored() {
    let config = parse_with_env(
        "",
        &[
            ("DEXAFLOW_AGENT_TOKEN", "abc"),
            ("DEXAFLOW_CONFIG", "/etc/dexaflow.yaml"),
            ("LEOFLOW_SCHEDULER_LOOP_INTERVAL_MS", "x"),
        ],
    )
    .expect("unrelated variables are ignored");

    assert!(config.hooks.is_empty());
    assert_eq!(config.dispatch.loop_interval, Duration::from_millis(1000));
}

#[test]
fn environment_values_take_each_keys_type() {
    let config = parse_with_env(
        "",
        &[
            ("DEXAFLOW_EXECUTION_ADMISSION_FAIL_OPEN", "true"),
            ("DEXAFLOW_EXECUTION_ADMISSION_TIMEOUT", "250ms"),
            ("DEXAFLOW_EXECUTOR_TYPE", "kubernetes"),
            ("DEXAFLOW_EXECUTOR_TASK_NAMESPACE", "jobs"),
            ("DEXAFLOW_EXECUTOR_KUBERNETES_DRY_RUN_DIR", "out"),
            (
                "DEXAFLOW_EXECUTION_ALLOWLIST_IMAGES",
                "ghcr.io/acme/, python",
            ),
            ("DEXAFLOW_EXECUTION_ALLOWLIST_FIELDS", "labels,annotations"),
            ("DEXAFLOW_EXECUTOR_UNIT_CPU", "1"),
            ("DEXAFLOW_EXECUTOR_UNIT_MEMORY", "2Gi"),
        ],
    )
    .unwrap_or_else(|errors| panic!("{errors}"));

    assert!(config.supervise.fail_open);
    assert_eq!(config.supervise.timeout, Duration::from_millis(250));
    assert!(
        matches!(&config.dispatch.executor, ExecutorSettings::Kubernetes { namespace, .. } if namespace == "jobs")
    );
    assert_eq!(
        config.dispatch.allowlist.images,
        Some(vec!["ghcr.io/acme/".to_owned(), "python".to_owned()])
    );
    assert_eq!(
        config.dispatch.allowlist.fields,
        AllowedFields::Only(BTreeSet::from([
            "labels".to_owned(),
            "annotations".to_owned()
        ]))
    );
    assert_eq!(config.dispatch.unit.expect("unit from env").memory, "2Gi");
}

#[test]
fn a_bad_environment_boolean_names_the_variable() {
    let errors =
        parse_with_env("", &[("DEXAFLOW_EXECUTION_ADMISSION_FAIL_OPEN", "yes")]).expect_err("bad");

    assert_eq!(
        errors.to_string(),
        "execution.admission.fail_open (from DEXAFLOW_EXECUTION_ADMISSION_FAIL_OPEN): expected true or false, got \"yes\""
    );
}

#[test]
fn source_mode_enabled_from_the_environment_is_named_when_the_image_is_missing() {
    let errors = parse_with_env("", &[("DEXAFLOW_EXECUTION_SOURCE_MODE_ENABLED", "true")])
        .expect_err("no image");

    assert!(
        errors.to_string().contains(
            "execution.source_mode.enabled (from DEXAFLOW_EXECUTION_SOURCE_MODE_ENABLED)"
        ),
        "{errors}"
    );
}

// Loading and rendering

#[test]
fn load_reads_a_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("dexaflow.yaml");
    std::fs::write(&path, "scheduler: {loop_interval_ms: 50}").expect("write");

    let config = Config::load(&path, NO_ENV).unwrap_or_else(|errors| panic!("{errors}"));

    assert_eq!(config.dispatch.loop_interval, Duration::from_millis(50));
}

#[test]
fn load_names_a_file_it_cannot_read() {
    let path = PathBuf::from("/nonexistent/dexaflow.yaml");

    let errors = Config::load(&path, NO_ENV).expect_err("no such file");

    assert!(
        errors
            .to_string()
            .starts_with("reading /nonexistent/dexaflow.yaml: "),
        "{errors}"
    );
}

#[test]
fn load_names_the_file_when_it_is_not_yaml() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("broken.yaml");
    std::fs::write(&path, "a: [").expect("write");

    let errors = Config::load(&path, NO_ENV).expect_err("broken");

    assert!(
        errors
            .to_string()
            .starts_with(&format!("{} is not valid YAML: ", path.display())),
        "{errors}"
    );
}

#[test]
fn rendered_config_parses_back_to_the_same_settings() {
    let config = Config::embedded_default([
        ("DEXAFLOW_SCHEDULER_DISPATCH_WORKERS", "3"),
        ("DEXAFLOW_EXECUTOR_TYPE", "null"),
    ])
    .unwrap_or_else(|errors| panic!("{errors}"));

    let again = parse(&config.to_yaml());

    assert_eq!(again.supervise, config.supervise);
    assert_eq!(again.hooks, config.hooks);
    assert_eq!(again.metrics_listen, config.metrics_listen);
    let mut dispatch = again.dispatch.clone();
    dispatch.token.secret = config.dispatch.token.secret.clone();
    assert_eq!(dispatch, config.dispatch);
}

#[test]
fn rendered_config_shows_defaults_but_never_the_secret() {
    let secret = "s3cr3t-s3cr3t-s3cr3t-s3cr3t-s3cr3t";
    let config = parse(&format!("auth: {{agent_token_secret: '{secret}'}}"));

    let text = config.to_yaml();

    assert!(!text.contains(secret), "{text}");
    assert!(text.contains("agent_token_secret is set"), "{text}");
    assert!(text.contains("retry_window: 15m"), "{text}");
    assert!(text.contains("timeout: 500ms"), "{text}");
}

#[test]
fn rendered_config_shows_an_unset_metrics_listen_as_unset_saying_where_each_command_listens() {
    let text = parse("").to_yaml();

    assert!(
        text.contains(
            "# metrics.listen is not set: serve listens on 127.0.0.1:9464, dispatch on a free port of 127.0.0.1\n"
        ),
        "{text}"
    );
    assert!(text.contains("metrics:\n  listen: null\n"), "{text}");
    assert!(!text.contains("listen: 127.0.0.1:9464"), "{text}");
}

#[test]
fn rendered_config_shows_a_set_metrics_listen_without_the_note() {
    let text = parse("metrics: {listen: 127.0.0.1:9464}").to_yaml();

    assert!(
        text.contains("metrics:\n  listen: 127.0.0.1:9464\n"),
        "{text}"
    );
    assert!(!text.contains("metrics.listen is not set"), "{text}");
}

#[test]
fn lite_kill_grace_and_max_parallel_are_read_from_the_file_and_the_environment() {
    let config = parse_with_env(
        "executor: {type: lite, lite: {log_dir: /tmp/logs, kill_grace: 3s}}",
        &[("DEXAFLOW_EXECUTOR_LITE_MAX_PARALLEL", "7")],
    )
    .expect("valid config");

    assert_eq!(
        config.dispatch.executor,
        ExecutorSettings::Lite {
            log_dir: PathBuf::from("/tmp/logs"),
            kill_grace: Duration::from_secs(3),
            max_parallel: 7,
        }
    );
    let shown = config.to_yaml();
    assert!(shown.contains("kill_grace: 3s"), "{shown}");
    assert!(shown.contains("max_parallel: 7"), "{shown}");
}

#[test]
fn lite_max_parallel_must_be_positive_and_kill_grace_a_duration() {
    let errors = errors("executor: {lite: {max_parallel: 0, kill_grace: soon}}");

    let lines: Vec<String> = errors.to_string().lines().map(str::to_owned).collect();
    assert_eq!(
        lines,
        [
            "executor.lite.kill_grace: expected a duration such as \"10s\", got \"soon\"",
            "executor.lite.max_parallel: expected an integer from 1 to 65536, got 0",
        ]
    );
}
