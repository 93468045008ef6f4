//! The outcome metrics and their Prometheus exporter (ADR 0100 §5, last bullet): every metric
//! name lives here, and nothing is ever labelled by tenant, DAG or task.
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `dexaflow_admission_outcomes_total` | counter | `outcome` |
//! | `dexaflow_admission_duration_seconds` | histogram, 50µs to 5s | `outcome` |
//! | `dexaflow_admission_chain_duration_seconds` | histogram, 50µs to 5s | none |
//! | `dexaflow_admission_breaker_state` | gauge: 0 closed, 1 half-open, 2 open | `hook` |
//! | `dexaflow_dispatch_queue_depth` | gauge | none |
//! | `dexaflow_dispatch_buffer_capacity` | gauge | none |
//! | `dexaflow_dispatch_at_capacity_total` | counter | none |
//! | `dexaflow_dispatch_workers_busy` | gauge | none |
//!
//! The `dexaflow_dispatch_*` metrics exist only where a dispatcher runs: `serve` installs the
//! exporter with [`install_server`], which leaves them out.
//!
//! The webhook server (`serve`) reports through [`ServerMetrics`], its
//! [`crate::events::ServerEvents`]:
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `dexaflow_server_requests_total` | counter | `service`, `outcome` |
//! | `dexaflow_server_request_duration_seconds` | histogram, 50µs to 5s | `service` |
//! | `dexaflow_server_requests_in_flight` | gauge | none |
//! | `dexaflow_server_connections_open` | gauge | none |
//! | `dexaflow_server_connections_waited_total` | counter | none |
//! | `dexaflow_server_resource_group_reloads_total` | counter | `result` |
//! | `dexaflow_server_certificate_reloads_total` | counter | `result` |
//!
//! `service` is a served path (`/pods/mutate`) or `none` for a path no service answers;
//! `outcome` is one of [`crate::events::RequestOutcome::as_str`]; `result` is `ok` or `error`.
//!
//! For the hook metrics, `outcome` is one of [`crate::admission::Outcome::as_str`]; a fail-open call counts twice, once under its cause
//! (`error`, `timeout`, `panic`, `skipped`, `budget_spent`) and once as `fail_open`. `hook` is a hook's name from
//! the config, the only label that is not an outcome.
//!
//! [`Metrics`] builds one handle per metric and outcome once, so a hook call costs two atomic
//! updates and no label lookup; it implements the [`crate::events`] traits through which
//! supervision and the dispatcher report. [`install`] is called once per process (from `main`, or
//! from a test binary of its own): it binds the listen address (port 0 picks a free port),
//! starts the exporter, installs the process-wide recorder, and returns an [`Exporter`] that
//! gives the bound address and renders the same text in process. A supervised chain tells
//! [`Metrics`] its hooks' names when it starts, and each hook's breaker gauge exists from then
//! on, at 0.
//!
//! | file | job |
//! |---|---|
//! | `dispatch.rs` | the hook and dispatch metrics' names and [`Metrics`] |
//! | `server.rs` | the webhook server's names, [`ServerMetrics`] and `ServiceMetrics` |
//! | `exporter.rs` | [`install`], the exporter's listener, [`Exporter`] |
//!
//! ```
//! use std::time::Duration;
//! use dexaflow_admission::admission::Outcome;
//! use dexaflow_admission::metrics::Metrics;
//! use dexaflow_admission::events::HookEvents;
//! use metrics_exporter_prometheus::PrometheusBuilder;
//!
//! // A recorder of its own, so the example installs nothing process-wide.
//! let recorder = PrometheusBuilder::new().build_recorder();
//! let metrics = metrics::with_local_recorder(&recorder, Metrics::register);
//! metrics.hook_call("freeze", Outcome::Refuse, Duration::from_micros(80));
//! let scrape = recorder.handle().render();
//! assert!(scrape.contains(r#"dexaflow_admission_outcomes_total{outcome="refuse"} 1"#));
//! ```

mod dispatch;
mod exporter;
mod server;

pub use dispatch::{
    AT_CAPACITY_TOTAL, BREAKER_STATE, BUFFER_CAPACITY, CHAIN_DURATION_SECONDS, DURATION_SECONDS,
    HOOK_LABEL, LATENCY_BUCKETS, Metrics, OUTCOME_LABEL, OUTCOMES_TOTAL, QUEUE_DEPTH, WORKERS_BUSY,
};
pub use exporter::{
    DEFAULT_LISTEN, Exporter, Installed, METRICS_PATH, MetricsError, install, install_server,
};
pub use server::{
    CACHE_LAST_UPDATE, CACHE_SYNCED, CACHE_WATCH_FAILURES_TOTAL, CERTIFICATE_RELOADS_TOTAL,
    GROUP_RELOADS_TOTAL, NO_SERVICE, RESOURCE_LABEL, RESULT_LABEL, SERVER_CONNECTIONS_OPEN,
    SERVER_CONNECTIONS_WAITED_TOTAL, SERVER_DURATION_SECONDS, SERVER_IN_FLIGHT,
    SERVER_REQUESTS_TOTAL, SERVICE_LABEL, ServerMetrics,
};

/// What the unit tests of every file share: a recorder of their own, and one series read back.
#[cfg(test)]
mod testing {
    use metrics_exporter_prometheus::PrometheusRecorder;

    /// A recorder with the exporter's buckets and no listener.
    pub(super) fn recorder() -> PrometheusRecorder {
        super::exporter::builder()
            .expect("constant buckets")
            .build_recorder()
    }

    /// The value of `series` (its name and labels, exactly) in `scrape`.
    pub(super) fn sample(scrape: &str, series: &str) -> Option<f64> {
        scrape.lines().find_map(|line| {
            let value = line.strip_prefix(series)?.strip_prefix(' ')?;
            value.parse().ok()
        })
    }
}
