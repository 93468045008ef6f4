//! The admission contract's pure pieces on the hot path: the reason cleaner, and the change
//! rules (`ChangeRules::check` followed by `apply_changes`) on a typical placement change.
//!
//! `cargo bench --bench admission`; the README quotes the figures.

use std::collections::BTreeSet;
use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use dexaflow_admission::admission::{
    ChangeRules, Changes, Privilege, Request, TaintEffect, Toleration, TolerationOperator,
    apply_changes, clean_reason,
};

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

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(50)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = reason_cleaner, change_rules
}
criterion_main!(benches);
