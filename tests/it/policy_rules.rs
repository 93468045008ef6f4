//! The executor policy's rules on one request, without a dispatcher: the order of the checks,
//! unset and empty rules, the image match, and the fill bounded by the unit (ADR 0063, ADR 0066).

use dexaflow_admission::admission::{ChangeRules, Decision, Request, ResourceList, Unit, Verdict};
use dexaflow_admission::hooks::{LocalRule, Policy, PolicySpec};

fn spec(yaml: &str) -> PolicySpec {
    let value: serde_yaml_ng::Value = serde_yaml_ng::from_str(yaml).expect("YAML");
    PolicySpec::decode(value).expect("a valid policy")
}

fn decide(policy: &str, request: &Request) -> Decision {
    Policy::new(&spec(policy), None).decide(request)
}

fn request() -> Request {
    let mut request = Request::new("acme", "etl", "load");
    request.image = "ghcr.io/acme/etl:1.2".to_owned();
    request.execution.service_account = "dexaflow-task".to_owned();
    request
}

fn refusal(decision: Decision) -> String {
    match decision {
        Decision::Refuse(reason) => reason,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

const ONE_GI: u128 = 1024 * 1024 * 1024;

/// One unit of 1 CPU and 2Gi.
fn unit() -> Unit {
    Unit {
        cpu_milli: 1_000,
        memory_milli: 2 * ONE_GI * 1000,
    }
}

#[test]
fn a_policy_with_no_rule_admits_unchanged() {
    assert_eq!(decide("{}", &request()), Decision::Admit);
}

#[test]
fn an_empty_list_allows_nothing() {
    assert_eq!(
        refusal(decide("{images: {allowed: []}}", &request())),
        "refused by executor policy: image \"ghcr.io/acme/etl:1.2\" is not in images.allowed"
    );
}

#[test]
fn the_image_is_checked_before_the_service_account() {
    let mut both = request();
    both.image = "evil.io/x:1".to_owned();

    let reason = refusal(decide(
        "{images: {allowed: [python]}, service_account: {allowed: [etl-runner]}}",
        &both,
    ));

    assert!(reason.contains("image \"evil.io/x:1\""), "{reason}");
}

#[test]
fn a_repository_entry_admits_a_tag_or_a_digest_but_not_a_longer_name() {
    let policy = "{images: {allowed: [ghcr.io/acme/etl]}}";
    let mut digest = request();
    digest.image = "ghcr.io/acme/etl@sha256:abc".to_owned();
    let mut longer = request();
    longer.image = "ghcr.io/acme/etl-evil:1".to_owned();

    assert_eq!(decide(policy, &request()), Decision::Admit);
    assert_eq!(decide(policy, &digest), Decision::Admit);
    assert_eq!(
        refusal(decide(policy, &longer)),
        "refused by executor policy: image \"ghcr.io/acme/etl-evil:1\" is not in images.allowed"
    );
}

#[test]
fn an_attempt_without_an_image_chooses_none_to_check() {
    let mut lite = request();
    lite.image = String::new();

    assert_eq!(
        decide("{images: {allowed: [python]}}", &lite),
        Decision::Admit
    );
}

#[test]
fn the_forced_service_account_is_what_allowed_checks() {
    let mut chosen = request();
    chosen.execution.service_account = "admin".to_owned();

    let decision = decide(
        "{service_account: {force: etl-runner, allowed: [etl-runner]}}",
        &chosen,
    );

    let Decision::AdmitWith(changes) = decision else {
        panic!("admitted with the force, got {decision:?}");
    };
    assert_eq!(changes.service_account.as_deref(), Some("etl-runner"));
}

#[test]
fn an_attempt_with_no_service_account_is_held_to_allowed_too() {
    let mut unnamed = request();
    unnamed.execution.service_account = String::new();

    assert_eq!(
        refusal(decide(
            "{service_account: {allowed: [etl-runner]}}",
            &unnamed
        )),
        "refused by executor policy: execution.service_account \"\" is not in service_account.allowed"
    );
}

#[test]
fn no_priority_class_is_not_a_priority_class_to_refuse() {
    assert_eq!(
        decide("{placement: {allowed_priority_classes: []}}", &request()),
        Decision::Admit
    );
}

#[test]
fn the_priority_class_is_checked_before_the_labels() {
    let mut both = request();
    both.execution.priority_class = "critical".to_owned();
    both.execution.labels.insert("x".to_owned(), "y".to_owned());

    let reason = refusal(decide(
        "{placement: {allowed_priority_classes: []}, metadata: {allowed_label_prefixes: []}}",
        &both,
    ));

    assert!(reason.contains("priority_class_name"), "{reason}");
}

#[test]
fn the_labels_are_checked_before_the_resources() {
    let mut both = request();
    both.execution.labels.insert("x".to_owned(), "y".to_owned());
    both.resources.limits.cpu = Some("64".to_owned());

    let reason = refusal(decide(
        "{metadata: {allowed_label_prefixes: []}, resources: {max: {cpu: 4}}}",
        &both,
    ));

    assert!(reason.contains("execution.labels \"x\""), "{reason}");
}

#[test]
fn a_refused_attempt_gets_none_of_the_forced_values() {
    let mut evil = request();
    evil.image = "evil.io/x:1".to_owned();

    let decision = decide(
        "{runtime_class_name: gvisor, images: {allowed: [python]}}",
        &evil,
    );

    assert!(matches!(decision, Decision::Refuse(_)), "{decision:?}");
}

#[test]
fn a_quantity_at_the_maximum_is_admitted() {
    let mut at_max = request();
    at_max.resources.requests.memory = Some("16Gi".to_owned());
    at_max.resources.limits.memory = Some("16384Mi".to_owned());

    assert_eq!(
        decide("{resources: {max: {memory: 16Gi}}}", &at_max),
        Decision::Admit
    );
}

#[test]
fn a_quantity_that_does_not_parse_is_refused_rather_than_let_past_the_maximum() {
    let mut bad = request();
    bad.resources.limits.cpu = Some("lots".to_owned());

    assert_eq!(
        refusal(decide("{resources: {max: {cpu: 4}}}", &bad)),
        "refused by executor policy: resources.limits.cpu: \"lots\" is not a Kubernetes quantity such as \"500m\", \"2\" or \"512Mi\""
    );
}

#[test]
fn a_fill_is_never_above_the_attempt_s_size_times_the_unit() {
    let mut size_two = request();
    size_two.size = 2;

    let decision = Policy::new(
        &spec("{resources: {max: {cpu: 4, memory: 16Gi}}}"),
        Some(unit()),
    )
    .decide(&size_two);

    let Decision::AdmitWith(changes) = decision else {
        panic!("admitted with a fill, got {decision:?}");
    };
    assert_eq!(
        changes.fill_limits,
        Some(ResourceList {
            cpu: Some("2".to_owned()),
            memory: Some("4Gi".to_owned()),
            ephemeral_storage: None,
        })
    );
}

#[test]
fn a_maximum_below_the_size_is_the_fill() {
    let mut size_eight = request();
    size_eight.size = 8;

    let decision =
        Policy::new(&spec("{resources: {max: {cpu: 4}}}"), Some(unit())).decide(&size_eight);

    let Decision::AdmitWith(changes) = decision else {
        panic!("admitted with a fill, got {decision:?}");
    };
    assert_eq!(
        changes.fill_limits.and_then(|fill| fill.cpu).as_deref(),
        Some("4")
    );
}

#[test]
fn the_chain_accepts_the_policy_s_fill_within_the_unit() {
    let rules = ChangeRules {
        unit: Some(unit()),
        ..ChangeRules::default()
    };
    let policy = spec("{resources: {max: {cpu: 4, memory: 16Gi}}}");
    let chain = dexaflow_admission::hooks::chain(&[], Some(&policy), rules);
    let mut size_two = request();
    size_two.size = 2;
    size_two.resources.requests.cpu = Some("1".to_owned());

    let verdict = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime")
        .block_on(chain.admit(size_two));

    let Verdict::Admit { request, .. } = verdict else {
        panic!("admitted, got {verdict:?}");
    };
    assert_eq!(request.resources.limits.cpu.as_deref(), Some("2"));
    assert_eq!(request.resources.limits.memory.as_deref(), Some("4Gi"));
    assert_eq!(request.resources.requests.cpu.as_deref(), Some("1"));
}
