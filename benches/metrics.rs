//! What recording one hook call costs: the cached handles of `metrics::Metrics` against the
//! labelled macros that look the series up on every call, under the Prometheus recorder the
//! binary installs, with an upkeep thread draining histograms as the exporter's own task does.
//!
//! `cargo bench --bench metrics`; the README quotes the figures.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use dexaflow_admission::admission::Outcome;
use dexaflow_admission::events::{HookEvents, Ignore};
use dexaflow_admission::metrics::{
    CHAIN_DURATION_SECONDS, DURATION_SECONDS, LATENCY_BUCKETS, Metrics, OUTCOME_LABEL,
    OUTCOMES_TOTAL,
};
use metrics::{counter, histogram};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};

/// Installs the recorder as `metrics::install` configures it, without the HTTP listener, and
/// drains histograms in the background every second (the exporter's own upkeep runs every 5s),
/// so that kept samples do not pile up over millions of iterations.
fn install_recorder() {
    let recorder = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Full(DURATION_SECONDS.to_owned()), &LATENCY_BUCKETS)
        .and_then(|builder| {
            builder.set_buckets_for_metric(
                Matcher::Full(CHAIN_DURATION_SECONDS.to_owned()),
                &LATENCY_BUCKETS,
            )
        })
        .expect("constant buckets")
        .build_recorder();
    let handle = recorder.handle();
    metrics::set_global_recorder(recorder).expect("the bench installs the only recorder");
    std::thread::spawn(move || {
        loop {
            std::thread::sleep(Duration::from_secs(1));
            handle.run_upkeep();
        }
    });
}

fn hook_call(c: &mut Criterion) {
    install_recorder();
    let metrics = Metrics::register();
    metrics.chain_started(&["bench"]);
    let elapsed = Duration::from_micros(120);
    let mut group = c.benchmark_group("hook_call");
    group.bench_function("no observer", |b| {
        b.iter(|| {
            Ignore.hook_call(
                black_box("bench"),
                black_box(Outcome::Admit),
                black_box(elapsed),
            )
        });
    });
    group.bench_function("cached handles", |b| {
        b.iter(|| {
            metrics.hook_call(
                black_box("bench"),
                black_box(Outcome::Admit),
                black_box(elapsed),
            )
        });
    });
    // The two halves of "cached handles", to show where the time goes.
    let counter = counter!(OUTCOMES_TOTAL, OUTCOME_LABEL => "admit");
    let histogram = histogram!(DURATION_SECONDS, OUTCOME_LABEL => "admit");
    group.bench_function("counter handle", |b| b.iter(|| counter.increment(1)));
    group.bench_function("histogram handle", |b| {
        b.iter(|| histogram.record(black_box(elapsed)))
    });
    group.bench_function("labelled macros", |b| {
        b.iter(|| {
            let outcome = black_box(Outcome::Admit).as_str();
            counter!(OUTCOMES_TOTAL, OUTCOME_LABEL => outcome).increment(1);
            histogram!(DURATION_SECONDS, OUTCOME_LABEL => outcome).record(black_box(elapsed));
        });
    });
    group.finish();
}

criterion_group!(benches, hook_call);
criterion_main!(benches);
