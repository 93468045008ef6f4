//! `executor.policy` in the config: strict decoding, boot errors that name their key path, no
//! environment overrides, and the chain that puts the policy last (ADR 0063, ADR 0100 §7).

use crate::common;

use std::sync::Arc;

use common::FakeHook;
use dexaflow_admission::admission::{Chain, ChangeRules, Hook};
use dexaflow_admission::config::Config;
use dexaflow_admission::dispatch::settings::PolicySettings;
use dexaflow_admission::hooks::{self, POLICY_HOOK};

use crate::common::{NO_ENV, single_config_error};

fn parse(yaml: &str) -> Config {
    Config::from_yaml_str(yaml, NO_ENV)
        .unwrap_or_else(|errors| panic!("config is valid:\n{errors}"))
}

/// The one error a config whose `executor.policy` is `policy` has, as its line.
fn single_error(policy: &str) -> String {
    single_config_error(&format!("executor: {{policy: {policy}}}"))
}

// ---- decoding --------------------------------------------------------------------------------

#[test]
fn every_rule_is_read_from_the_file() {
    let config = parse(include_str!("../../examples/policy.yaml"));

    let spec = config.policy.expect("the example sets a policy");
    assert_eq!(spec.runtime_class_name.as_deref(), Some("gvisor"));
    assert_eq!(spec.service_account.force.as_deref(), Some("etl-runner"));
    assert_eq!(spec.placement.node_selector["pool"], "tenant-jobs");
    assert_eq!(spec.placement.tolerations[0].key, "dedicated");
    assert!(!spec.placement.allow_dag_placement);
    assert_eq!(
        spec.placement.allowed_priority_classes,
        Some(vec!["batch-low".to_owned(), "batch-high".to_owned()])
    );
    assert_eq!(
        spec.resources
            .max
            .memory
            .as_ref()
            .map(|max| max.text.as_str()),
        Some("16Gi")
    );
    assert_eq!(
        config.dispatch.policy,
        PolicySettings {
            allow_dag_placement: false,
            forces_fields: true,
        }
    );
}

#[test]
fn without_a_policy_nothing_is_set_and_dag_placement_is_allowed() {
    let config = parse("executor: {type: lite}");

    assert_eq!(config.policy, None);
    assert_eq!(config.dispatch.policy, PolicySettings::default());
    assert!(config.dispatch.policy.allow_dag_placement);
    assert!(!config.dispatch.policy.forces_fields);
}

#[test]
fn a_policy_that_only_restricts_forces_nothing() {
    let config = parse("executor: {policy: {images: {allowed: [ghcr.io/acme/]}}}");

    assert!(config.policy.is_some());
    assert!(!config.dispatch.policy.forces_fields);
}

#[test]
fn a_numeric_maximum_reads_as_the_quantity() {
    let config = parse("executor: {policy: {resources: {max: {cpu: 4}}}}");

    let max = config.policy.unwrap().resources.max.cpu.unwrap();
    assert_eq!((max.text.as_str(), max.milli), ("4", 4_000));
}

#[test]
fn the_policy_has_no_environment_override_and_its_variables_are_refused() {
    let env = [
        ("DEXAFLOW_EXECUTOR_POLICY", "{runtime_class_name: gvisor}"),
        ("DEXAFLOW_EXECUTOR_POLICY_RUNTIME_CLASS_NAME", "gvisor"),
    ];

    let errors = Config::from_yaml_str("", env)
        .expect_err("a policy is read from the file only")
        .to_string();

    assert!(
        errors.contains(
            "DEXAFLOW_EXECUTOR_POLICY: unknown variable; executor.policy is read from the file only"
        ),
        "{errors}"
    );
    assert!(
        errors.contains("DEXAFLOW_EXECUTOR_POLICY_RUNTIME_CLASS_NAME: unknown variable"),
        "{errors}"
    );
    assert!(
        !errors.contains("gvisor"),
        "a variable's value is never shown: {errors}"
    );
}

#[test]
fn the_effective_config_shows_the_policy() {
    let config = parse("executor: {policy: {images: {allowed: [python]}}}");

    let yaml = config.to_yaml();
    let shown: serde_yaml_ng::Value = serde_yaml_ng::from_str(&yaml).unwrap();
    assert_eq!(
        shown["executor"]["policy"]["images"]["allowed"][0].as_str(),
        Some("python"),
        "{yaml}"
    );
}

// ---- boot errors, each naming its key path ----------------------------------------------------

#[test]
fn an_unknown_key_is_named_by_its_path() {
    assert_eq!(
        single_error("{placement: {node_selectr: {pool: a}}}"),
        "executor.policy: placement.node_selectr: unknown field `node_selectr`, expected one of \
         `node_selector`, `tolerations`, `allow_dag_placement`, `allowed_priority_classes`"
    );
}

#[test]
fn an_unknown_section_is_named() {
    assert!(
        single_error("{volumes: []}")
            .starts_with("executor.policy: volumes: unknown field `volumes`"),
    );
}

#[test]
fn a_bad_quantity_is_named_by_its_path() {
    assert_eq!(
        single_error("{resources: {max: {memory: lots}}}"),
        "executor.policy: resources.max.memory: \"lots\" is not a Kubernetes quantity such as \
         \"500m\", \"2\" or \"512Mi\""
    );
}

#[test]
fn a_zero_maximum_is_refused() {
    assert_eq!(
        single_error("{resources: {max: {cpu: '0'}}}"),
        "executor.policy: resources.max.cpu: \"0\" must be above zero"
    );
}

#[test]
fn a_toleration_of_an_unknown_operator_is_named_by_its_path() {
    assert_eq!(
        single_error("{placement: {tolerations: [{key: gpu, operator: Among}]}}"),
        "executor.policy: placement.tolerations[0].operator: unknown variant `Among`, expected \
         `Exists` or `Equal`"
    );
}

#[test]
fn a_toleration_kubernetes_would_reject_is_refused() {
    assert_eq!(
        single_error("{placement: {tolerations: [{key: gpu, operator: Exists, value: a100}]}}"),
        "executor.policy: placement.tolerations: toleration 0 (key \"gpu\") is invalid: operator \
         Exists takes no value"
    );
}

#[test]
fn a_forced_node_selector_key_kubernetes_would_reject_is_refused() {
    assert!(
        single_error("{placement: {node_selector: {'bad key': a}}}").starts_with(
            "executor.policy: placement.node_selector: node selector key \"bad key\" is invalid"
        ),
    );
}

#[test]
fn a_forced_runtime_class_that_is_not_a_name_is_refused() {
    assert!(
        single_error("{runtime_class_name: gVisor}").starts_with(
            "executor.policy: runtime_class_name: runtime class \"gVisor\" is invalid"
        ),
    );
}

#[test]
fn a_forced_service_account_outside_allowed_is_refused() {
    assert_eq!(
        single_error("{service_account: {force: admin, allowed: [etl-runner]}}"),
        "executor.policy: service_account.force: \"admin\" is not in service_account.allowed"
    );
}

#[test]
fn a_forced_service_account_outside_the_execution_allowlist_is_refused() {
    let errors = Config::from_yaml_str(
        "execution_allowlist: {service_accounts: [etl-runner]}\nexecutor: {policy: {service_account: {force: admin}}}",
        NO_ENV,
    )
    .expect_err("config is invalid");

    assert_eq!(
        errors.to_string(),
        "executor.policy: service_account.force: service account \"admin\" is not in \
         execution_allowlist.service_accounts"
    );
}

#[test]
fn an_empty_prefix_that_would_allow_every_label_is_refused() {
    assert_eq!(
        single_error("{metadata: {allowed_label_prefixes: [team/, '']}}"),
        "executor.policy: metadata.allowed_label_prefixes[1]: an empty entry is not allowed: \
         write a value, or leave the rule unset"
    );
}

#[test]
fn an_empty_entry_is_refused_in_every_list() {
    for (policy, path) in [
        (
            "{service_account: {allowed: ['']}}",
            "service_account.allowed[0]",
        ),
        (
            "{placement: {allowed_priority_classes: [' ']}}",
            "placement.allowed_priority_classes[0]",
        ),
        (
            "{metadata: {allowed_annotation_prefixes: ['']}}",
            "metadata.allowed_annotation_prefixes[0]",
        ),
        ("{images: {allowed: [python, '']}}", "images.allowed[1]"),
    ] {
        let error = single_error(policy);
        assert!(
            error.starts_with(&format!("executor.policy: {path}: an empty entry")),
            "{error}"
        );
    }
}

#[test]
fn a_list_of_the_wrong_type_is_named_by_its_path() {
    assert!(
        single_error("{images: {allowed: ghcr.io/acme/}}")
            .starts_with("executor.policy: images.allowed: invalid type: string"),
    );
}

#[test]
fn every_problem_of_a_policy_is_reported() {
    let errors = Config::from_yaml_str(
        "executor: {policy: {service_account: {force: admin, allowed: ['']}, runtime_class_name: gVisor}}",
        NO_ENV,
    )
    .expect_err("config is invalid");

    assert_eq!(errors.len(), 3, "{errors}");
}

#[test]
fn a_hook_may_not_take_the_policy_s_name() {
    let errors = Config::from_yaml_str(
        "execution: {admission: {hooks: [{type: deny, name: executor-policy, match: {tenants: [a]}}]}}",
        NO_ENV,
    )
    .expect_err("config is invalid");

    assert_eq!(
        errors.to_string(),
        "execution.admission.hooks[0].name: expected a name other than \"executor-policy\", which \
         is executor.policy's, got \"executor-policy\""
    );
}

// ---- the chain ---------------------------------------------------------------------------------

fn names(chain: &Chain) -> Vec<String> {
    chain
        .hooks()
        .iter()
        .map(|hook| hook.name().to_owned())
        .collect()
}

/// The chain `config` declares, as `dispatch` builds it.
fn configured_chain(config: &Config) -> Chain {
    hooks::chain(
        &config.hooks,
        config.policy.as_ref(),
        config.dispatch.change_rules(),
    )
}

#[test]
fn the_policy_is_appended_after_every_configured_hook() {
    let config = parse(
        "execution: {admission: {hooks: [{type: deny, name: suspended, match: {tenants: [x]}}, {type: freeze, name: quarter-end, for: 1s}]}}\nexecutor: {policy: {runtime_class_name: gvisor}}",
    );

    let chain = configured_chain(&config);

    assert_eq!(names(&chain), ["suspended", "quarter-end", POLICY_HOOK]);
}

#[test]
fn a_hook_registered_after_the_policy_still_runs_before_it() {
    let spec = parse("executor: {policy: {runtime_class_name: gvisor}}").policy;
    let late: Arc<dyn Hook> = FakeHook::admitting("late").shared();

    let chain = hooks::chain(&[], spec.as_ref(), ChangeRules::default()).with_hook(late);

    assert_eq!(names(&chain), ["late", POLICY_HOOK]);
}

#[test]
fn without_a_policy_the_chain_is_the_configured_hooks_alone() {
    let config = parse(
        "execution: {admission: {hooks: [{type: deny, name: suspended, match: {tenants: [x]}}]}}",
    );

    let chain = configured_chain(&config);

    assert_eq!(names(&chain), ["suspended"]);
}
