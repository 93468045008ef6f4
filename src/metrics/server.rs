//! The webhook server's metric names and handles: [`ServerMetrics`], the observer `serve`
//! reports to through [`ServerEvents`], and [`ServiceMetrics`], one per served path.

use std::sync::Arc;
use std::time::Duration;

use metrics::{
    Counter, Gauge, Histogram, Unit, counter, describe_counter, describe_gauge, describe_histogram,
    gauge, histogram,
};

use super::OUTCOME_LABEL;
use crate::events::{ClusterEvents, RequestOutcome, ServerEvents, ServiceEvents, WatchedFile};

/// `dexaflow_server_requests_total{service,outcome}`: requests the webhook server answered.
pub const SERVER_REQUESTS_TOTAL: &str = "dexaflow_server_requests_total";
/// `dexaflow_server_request_duration_seconds{service}`: from the request's head to the answer.
pub const SERVER_DURATION_SECONDS: &str = "dexaflow_server_request_duration_seconds";
/// `dexaflow_server_requests_in_flight`: requests being answered now.
pub const SERVER_IN_FLIGHT: &str = "dexaflow_server_requests_in_flight";
/// `dexaflow_server_connections_open`: connections holding a place under
/// `server.max_connections` now.
pub const SERVER_CONNECTIONS_OPEN: &str = "dexaflow_server_connections_open";
/// Connections that waited for a free place under `server.max_connections` before being served.
pub const SERVER_CONNECTIONS_WAITED_TOTAL: &str = "dexaflow_server_connections_waited_total";
/// `dexaflow_server_resource_group_reloads_total{result}`: resource group files taken in or not.
pub const GROUP_RELOADS_TOTAL: &str = "dexaflow_server_resource_group_reloads_total";
/// `dexaflow_server_certificate_reloads_total{result}`: certificate pairs taken in or not.
pub const CERTIFICATE_RELOADS_TOTAL: &str = "dexaflow_server_certificate_reloads_total";
/// `dexaflow_server_cache_synced{resource}`: 1 once the cache of cluster objects has held a
/// complete list, 0 before.
pub const CACHE_SYNCED: &str = "dexaflow_server_cache_synced";
/// `dexaflow_server_cache_last_update_timestamp_seconds{resource}`: when the cache last took in
/// a change (Unix seconds); `time() - ` it is the cache's age.
pub const CACHE_LAST_UPDATE: &str = "dexaflow_server_cache_last_update_timestamp_seconds";
/// `dexaflow_server_cache_watch_failures_total{resource}`: lists and watches of the cache's
/// objects that failed (each tried again after a backoff).
pub const CACHE_WATCH_FAILURES_TOTAL: &str = "dexaflow_server_cache_watch_failures_total";
/// The label naming a cache's objects (`queues`).
pub const RESOURCE_LABEL: &str = "resource";
/// The label naming the served path.
pub const SERVICE_LABEL: &str = "service";
/// The label of the reload counters: `ok` or `error`.
pub const RESULT_LABEL: &str = "result";
/// The `service` of a request whose path no service answers.
pub const NO_SERVICE: &str = "none";

/// The webhook server's cached metric handles, reported to as its [`ServerEvents`]: the
/// in-flight and connection gauges, the reload counters and, through
/// [`ServerEvents::service`], each service's own `ServiceMetrics`.
///
/// Build it under the recorder in effect, like [`super::Metrics::register`]; without one every
/// handle is a no-op.
#[derive(Debug, Clone)]
pub struct ServerMetrics {
    in_flight: Gauge,
    not_found: Counter,
    connections_open: Gauge,
    connections_waited: Counter,
    /// `[ResourceGroups, Certificates]` × `[ok, error]`.
    reloads: [[Counter; 2]; 2],
}

/// One service's handles: a counter per outcome, its latency histogram and the server's
/// in-flight gauge, built once per served path so that a request costs no lookup.
#[derive(Debug, Clone)]
pub(crate) struct ServiceMetrics {
    /// Indexed by [`RequestOutcome::index`].
    outcomes: [Counter; RequestOutcome::ALL.len()],
    duration: Histogram,
    in_flight: Gauge,
}

impl ServerMetrics {
    /// Describes the server's metrics and builds the handles shared by every service; every
    /// reload counter exists from here on, at zero.
    pub fn register() -> ServerMetrics {
        describe_server();
        let reloads = |name: &'static str| {
            ["ok", "error"].map(|result| counter!(name, RESULT_LABEL => result))
        };
        ServerMetrics {
            in_flight: gauge!(SERVER_IN_FLIGHT),
            connections_open: gauge!(SERVER_CONNECTIONS_OPEN),
            connections_waited: counter!(SERVER_CONNECTIONS_WAITED_TOTAL),
            not_found: counter!(
                SERVER_REQUESTS_TOTAL,
                SERVICE_LABEL => NO_SERVICE,
                OUTCOME_LABEL => RequestOutcome::NotFound.as_str()
            ),
            reloads: [
                reloads(GROUP_RELOADS_TOTAL),
                reloads(CERTIFICATE_RELOADS_TOTAL),
            ],
        }
    }

    /// The handles of the service at `path`, every outcome at zero from here on. Call it under
    /// the recorder [`ServerMetrics::register`] ran under.
    pub(crate) fn service_metrics(&self, path: &str) -> ServiceMetrics {
        ServiceMetrics {
            outcomes: RequestOutcome::ALL.map(|outcome| {
                counter!(
                    SERVER_REQUESTS_TOTAL,
                    SERVICE_LABEL => path.to_owned(),
                    OUTCOME_LABEL => outcome.as_str()
                )
            }),
            duration: histogram!(SERVER_DURATION_SECONDS, SERVICE_LABEL => path.to_owned()),
            in_flight: self.in_flight.clone(),
        }
    }
}

impl ServerEvents for ServerMetrics {
    fn service(&self, path: &str) -> Arc<dyn ServiceEvents> {
        Arc::new(self.service_metrics(path))
    }

    fn request_not_found(&self) {
        self.not_found.increment(1);
    }

    fn connection_opened(&self) {
        self.connections_open.increment(1.0);
    }

    fn connection_closed(&self) {
        self.connections_open.decrement(1.0);
    }

    fn connection_waited(&self) {
        self.connections_waited.increment(1);
    }

    fn reloaded(&self, file: WatchedFile, ok: bool) {
        let file = match file {
            WatchedFile::ResourceGroups => 0,
            WatchedFile::Certificates => 1,
        };
        self.reloads[file][usize::from(!ok)].increment(1);
    }
}

/// The caches are few and change rarely: each report registers its handle, so that a cache
/// named only when the server starts needs nothing built before.
impl ClusterEvents for ServerMetrics {
    /// Both series exist from the start, so that the first sync and the first failure show as
    /// changes (a counter first seen at 1 has no rate).
    fn cache_started(&self, resource: &str) {
        gauge!(CACHE_SYNCED, RESOURCE_LABEL => resource.to_owned()).set(0.0);
        counter!(CACHE_WATCH_FAILURES_TOTAL, RESOURCE_LABEL => resource.to_owned()).increment(0);
    }

    fn cache_synced(&self, resource: &str) {
        gauge!(CACHE_SYNCED, RESOURCE_LABEL => resource.to_owned()).set(1.0);
    }

    fn cache_updated(&self, resource: &str) {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        gauge!(CACHE_LAST_UPDATE, RESOURCE_LABEL => resource.to_owned()).set(now.as_secs_f64());
    }

    fn watch_failed(&self, resource: &str) {
        counter!(CACHE_WATCH_FAILURES_TOTAL, RESOURCE_LABEL => resource.to_owned()).increment(1);
    }
}

impl ServiceEvents for ServiceMetrics {
    fn request_started(&self) {
        self.in_flight.increment(1.0);
    }

    fn request_answered(&self, outcome: RequestOutcome, elapsed: Duration) {
        self.in_flight.decrement(1.0);
        self.outcomes[outcome.index()].increment(1);
        self.duration.record(elapsed);
    }

    fn request_abandoned(&self, _elapsed: Duration) {
        self.in_flight.decrement(1.0);
    }
}

fn describe_server() {
    describe_counter!(
        SERVER_REQUESTS_TOTAL,
        Unit::Count,
        "Requests the webhook server answered, by service (path) and outcome"
    );
    describe_histogram!(
        SERVER_DURATION_SECONDS,
        Unit::Seconds,
        "Latency of the webhook server's answers, by service (path)"
    );
    describe_gauge!(
        SERVER_IN_FLIGHT,
        Unit::Count,
        "Requests the webhook server is answering now"
    );
    describe_gauge!(
        SERVER_CONNECTIONS_OPEN,
        Unit::Count,
        "Connections the webhook server holds open now, at most server.max_connections"
    );
    describe_counter!(
        SERVER_CONNECTIONS_WAITED_TOTAL,
        Unit::Count,
        "Connections that waited, unserved, for another to close because the webhook server had server.max_connections open"
    );
    describe_counter!(
        GROUP_RELOADS_TOTAL,
        Unit::Count,
        "Resource group files the webhook server read after a change, by result (ok or error: the previous groups stay)"
    );
    describe_gauge!(
        CACHE_SYNCED,
        Unit::Count,
        "1 once the webhook server's cache of cluster objects (by resource) has held a complete list"
    );
    describe_gauge!(
        CACHE_LAST_UPDATE,
        Unit::Seconds,
        "When the webhook server's cache of cluster objects (by resource) last took in a change, Unix seconds"
    );
    describe_counter!(
        CACHE_WATCH_FAILURES_TOTAL,
        Unit::Count,
        "Lists and watches of cluster objects (by resource) that failed, each tried again after a backoff"
    );
    describe_counter!(
        CERTIFICATE_RELOADS_TOTAL,
        Unit::Count,
        "Serving certificate pairs the webhook server read after a change, by result (ok or error: the previous pair stays)"
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::Ruling;
    use crate::metrics::testing::{recorder, sample};

    #[test]
    fn a_cache_reports_synced_its_last_update_and_its_failures_by_resource() {
        let recorder = recorder();
        let metrics = metrics::with_local_recorder(&recorder, ServerMetrics::register);
        metrics::with_local_recorder(&recorder, || {
            metrics.watch_failed("queues");
            metrics.watch_failed("queues");
            metrics.cache_synced("queues");
            metrics.cache_updated("queues");
        });
        let scrape = recorder.handle().render();
        assert_eq!(
            sample(
                &scrape,
                r#"dexaflow_server_cache_synced{resource="queues"}"#
            ),
            Some(1.0)
        );
        assert_eq!(
            sample(
                &scrape,
                r#"dexaflow_server_cache_watch_failures_total{resource="queues"}"#
            ),
            Some(2.0)
        );
        let updated = sample(
            &scrape,
            r#"dexaflow_server_cache_last_update_timestamp_seconds{resource="queues"}"#,
        )
        .expect("a last update");
        assert!(updated > 1.7e9, "a Unix time, got {updated}");
        for name in [CACHE_SYNCED, CACHE_LAST_UPDATE, CACHE_WATCH_FAILURES_TOTAL] {
            assert!(
                scrape.contains(&format!("# HELP {name} ")),
                "{name}\n{scrape}"
            );
        }
    }

    #[test]
    fn a_started_cache_reads_unsynced_with_no_failure_and_no_update() {
        let recorder = recorder();
        let metrics = metrics::with_local_recorder(&recorder, ServerMetrics::register);
        metrics::with_local_recorder(&recorder, || metrics.cache_started("queues"));
        let scrape = recorder.handle().render();

        assert_eq!(
            sample(
                &scrape,
                r#"dexaflow_server_cache_synced{resource="queues"}"#
            ),
            Some(0.0)
        );
        assert_eq!(
            sample(
                &scrape,
                r#"dexaflow_server_cache_watch_failures_total{resource="queues"}"#
            ),
            Some(0.0)
        );
        assert_eq!(
            sample(
                &scrape,
                r#"dexaflow_server_cache_last_update_timestamp_seconds{resource="queues"}"#
            ),
            None,
            "nothing was taken in yet"
        );
    }

    #[test]
    fn server_requests_count_by_service_and_outcome_and_reloads_by_result() {
        let recorder = recorder();
        let metrics = metrics::with_local_recorder(&recorder, ServerMetrics::register);
        let mutate = metrics::with_local_recorder(&recorder, || metrics.service("/pods/mutate"));
        let validate =
            metrics::with_local_recorder(&recorder, || metrics.service("/pods/validate"));
        let scrape = recorder.handle().render();
        assert_eq!(
            sample(
                &scrape,
                r#"dexaflow_server_requests_total{service="/pods/mutate",outcome="panic"}"#
            ),
            Some(0.0),
            "{scrape}"
        );
        mutate.request_started();
        mutate.request_answered(
            RequestOutcome::Ruled(Ruling::Patched),
            Duration::from_micros(200),
        );
        metrics.reloaded(WatchedFile::Certificates, false);
        metrics.request_not_found();
        validate.request_started();
        metrics.connection_opened();
        let scrape = recorder.handle().render();
        assert_eq!(
            sample(
                &scrape,
                r#"dexaflow_server_requests_total{service="/pods/mutate",outcome="patched"}"#
            ),
            Some(1.0)
        );
        assert_eq!(
            sample(
                &scrape,
                r#"dexaflow_server_request_duration_seconds_bucket{service="/pods/mutate",le="0.00025"}"#
            ),
            Some(1.0),
            "{scrape}"
        );
        assert_eq!(
            sample(
                &scrape,
                r#"dexaflow_server_certificate_reloads_total{result="error"}"#
            ),
            Some(1.0)
        );
        assert_eq!(
            sample(
                &scrape,
                r#"dexaflow_server_certificate_reloads_total{result="ok"}"#
            ),
            Some(0.0)
        );
        assert_eq!(
            sample(
                &scrape,
                r#"dexaflow_server_resource_group_reloads_total{result="error"}"#
            ),
            Some(0.0)
        );
        assert_eq!(
            sample(
                &scrape,
                r#"dexaflow_server_requests_total{service="none",outcome="not_found"}"#
            ),
            Some(1.0)
        );
        assert_eq!(sample(&scrape, SERVER_IN_FLIGHT), Some(1.0));
        assert_eq!(sample(&scrape, SERVER_CONNECTIONS_OPEN), Some(1.0));
        validate.request_abandoned(Duration::from_millis(1));
        metrics.connection_closed();
        let scrape = recorder.handle().render();
        assert_eq!(sample(&scrape, SERVER_IN_FLIGHT), Some(0.0));
        assert_eq!(sample(&scrape, SERVER_CONNECTIONS_OPEN), Some(0.0));
        for name in [
            SERVER_REQUESTS_TOTAL,
            SERVER_DURATION_SECONDS,
            SERVER_IN_FLIGHT,
            SERVER_CONNECTIONS_OPEN,
            SERVER_CONNECTIONS_WAITED_TOTAL,
            GROUP_RELOADS_TOTAL,
            CERTIFICATE_RELOADS_TOTAL,
        ] {
            assert!(
                scrape.contains(&format!("# HELP {name} ")),
                "{name} has no help in\n{scrape}"
            );
        }
    }
}
