//! The admission contract's pure pieces on the hot path: the reason cleaner, the change rules
//! (`ChangeRules::check` followed by `apply_changes`) on a typical placement change, and the
//! executor policy with every rule set, as the chain runs it on each attempt.
//!
//! `cargo bench --bench admission`; the README quotes the figures.

use std::collections::BTreeSet;
use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use dexaflow_admission::admission::{
    ChangeRules, Changes, Decision, Privilege, Request, TaintEffect, Toleration,
    TolerationOperator, Unit, apply_changes, clean_reason,
};
use dexaflow_admission::hooks::{LocalRule, Policy, PolicySpec};

fn reason_cleaner(c: &mut Criterion) {
    let short = "tenant umbrella is suspended for unpaid invoices\n";
    let hostile = format!(
        "frozen\u{7}\u{202e} until 18:00 {}",
        "quarter-end close: deploys frozen; ".repeat(40)
    );
    let mut group = c.benchmark_group("clean_reason");
    group.bench_function("short", |b| b.iter(|| clean_reason(black_box(short))));
    group.bench_function("long_with_controls", |b| {
        b.iter(|| clean_reason(black_box(&hostile)))
    });
    group.finish();
}

fn placement_change() -> Changes {
    let mut changes = Changes::default();
    changes
        .node_selector
        .insert("pool.example.com/tenant".to_owned(), "acme".to_owned());
    changes.tolerations.push(Toleration {
        key: "dedicated".to_owned(),
        operator: TolerationOperator::Equal,
        value: "gpu".to_owned(),
        effect: Some(TaintEffect::NoSchedule),
        toleration_seconds: None,
    });
    changes.priority_class = Some("batch-high".to_owned());
    changes.labels.insert(
        "team.example.com/owner".to_owned(),
        "data-platform".to_owned(),
    );
    changes.annotations.insert(
        "example.com/admitted-by".to_owned(),
        "tenant-placement".to_owned(),
    );
    changes
}

fn change_rules(c: &mut Criterion) {
    let rules = ChangeRules {
        service_accounts: None,
        priority_classes: Some(BTreeSet::from(["batch-high".to_owned()])),
        default_service_account: "dexaflow-task".to_owned(),
        unit: None,
    };
    let changes = placement_change();
    let request = Request::new("acme", "etl", "load");
    c.bench_function("change_rules/check_and_apply", |b| {
        b.iter_batched_ref(
            || request.clone(),
            |request| {
                rules
                    .check(black_box(&changes), Privilege::Unprivileged, request)
                    .expect("the change passes");
                apply_changes(request, black_box(&changes));
            },
            criterion::BatchSize::SmallInput,
        )
    });
}

/// A policy with every rule set, as examples/policy.yaml declares it.
const EVERY_RULE: &str = "
runtime_class_name: gvisor
service_account: {force: etl-runner, allowed: [etl-runner, reporting]}
placement:
  node_selector: {pool: tenant-jobs}
  tolerations: [{key: dedicated, operator: Equal, value: tenant-jobs, effect: NoSchedule}]
  allow_dag_placement: false
  allowed_priority_classes: [batch-low, batch-high]
metadata:
  allowed_label_prefixes: [team.example.com/, app]
  allowed_annotation_prefixes: [team.example.com/]
resources: {max: {cpu: 4, memory: 16Gi, ephemeral_storage: 20Gi}}
images: {allowed: [ghcr.io/acme/, python]}
";

/// The policy's decision on an attempt that passes every rule and gets every forced value and
/// a fill, then the chain's check and apply of those changes: what the policy costs an attempt.
fn executor_policy(c: &mut Criterion) {
    let value: serde_yaml_ng::Value = serde_yaml_ng::from_str(EVERY_RULE).expect("YAML");
    let spec = PolicySpec::decode(value).expect("a valid policy");
    let rules = ChangeRules {
        service_accounts: None,
        priority_classes: Some(BTreeSet::from(["batch-high".to_owned()])),
        default_service_account: "dexaflow-task".to_owned(),
        unit: Some(Unit {
            cpu_milli: 1_000,
            memory_milli: 2 * 1024 * 1024 * 1024 * 1000,
        }),
    };
    let policy = Policy::new(&spec, rules.unit);
    let mut request = Request::new("acme", "etl", "load");
    request.image = "ghcr.io/acme/etl:1.2".to_owned();
    request.size = 2;
    request.execution.service_account = "dexaflow-task".to_owned();
    request.execution.priority_class = "batch-high".to_owned();
    request
        .execution
        .labels
        .insert("team.example.com/owner".to_owned(), "data".to_owned());
    request.resources.requests.cpu = Some("1".to_owned());
    request.resources.requests.memory = Some("1Gi".to_owned());
    c.bench_function("executor_policy/every_rule", |b| {
        b.iter_batched_ref(
            || request.clone(),
            |request| {
                let Decision::AdmitWith(changes) = policy.decide(black_box(request)) else {
                    panic!("the attempt passes every rule");
                };
                rules
                    .check(&changes, Privilege::Privileged, request)
                    .expect("the policy's changes pass");
                apply_changes(request, &changes);
            },
            criterion::BatchSize::SmallInput,
        )
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(50)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = reason_cleaner, change_rules, executor_policy
}
criterion_main!(benches);
