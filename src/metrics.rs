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
//! The webhook server (`serve`) reports through [`ServerMetrics`]:
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `dexaflow_server_requests_total` | counter | `service`, `outcome` |
//! | `dexaflow_server_request_duration_seconds` | histogram, 50µs to 5s | `service` |
//! | `dexaflow_server_requests_in_flight` | gauge | none |
//! | `dexaflow_server_connections_waited_total` | counter | none |
//! | `dexaflow_server_resource_group_reloads_total` | counter | `result` |
//! | `dexaflow_server_certificate_reloads_total` | counter | `result` |
//!
//! `service` is a served path (`/pods/mutate`) or `none` for a path no service answers;
//! `outcome` is one of [`RequestOutcome::as_str`]; `result` is `ok` or `error`.
//!
//! `outcome` is one of [`Outcome::as_str`]; a fail-open call counts twice, once under its cause
//! (`error`, `timeout`, `panic`, `skipped`, `budget_spent`) and once as `fail_open`. `hook` is a hook's name from
//! the config, the only label that is not an outcome.
//!
//! [`Metrics`] builds one handle per metric and outcome once, so a hook call costs two atomic
//! updates and no label lookup; it implements the [`crate::events`] traits through which
//! supervision and the dispatcher report. [`install`] is called once per process (from `main`, or
//! from a test binary of its own): it binds the listen address (port 0 picks a free port),
//! starts the exporter, installs the process-wide recorder, and returns an [`Exporter`] that
//! gives the bound address and renders the same text in process.
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

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::Mutex;
use std::time::Duration;

use http::header::{CONTENT_TYPE, HeaderValue};
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use metrics::{
    Counter, Gauge, Histogram, Unit, counter, describe_counter, describe_gauge, describe_histogram,
    gauge, histogram,
};
use metrics_exporter_prometheus::{BuildError, Matcher, PrometheusBuilder, PrometheusHandle};
use thiserror::Error;

use crate::admission::Outcome;
use crate::events::{BreakerEvents, BreakerState, BufferEvents, HookEvents};
use crate::sync::lock;

/// `dexaflow_admission_outcomes_total{outcome}`: hook calls by outcome.
pub const OUTCOMES_TOTAL: &str = "dexaflow_admission_outcomes_total";
/// `dexaflow_admission_duration_seconds{outcome}`: the latency of one hook call.
pub const DURATION_SECONDS: &str = "dexaflow_admission_duration_seconds";
/// `dexaflow_admission_chain_duration_seconds`: the latency of a whole chain for one attempt.
pub const CHAIN_DURATION_SECONDS: &str = "dexaflow_admission_chain_duration_seconds";
/// `dexaflow_admission_breaker_state{hook}`: 0 closed, 1 half-open, 2 open.
pub const BREAKER_STATE: &str = "dexaflow_admission_breaker_state";
/// `dexaflow_dispatch_queue_depth`: attempts waiting in the dispatch buffer.
pub const QUEUE_DEPTH: &str = "dexaflow_dispatch_queue_depth";
/// `dexaflow_dispatch_buffer_capacity`: how many attempts the dispatch buffer holds at most.
pub const BUFFER_CAPACITY: &str = "dexaflow_dispatch_buffer_capacity";
/// `dexaflow_dispatch_at_capacity_total`: attempts deferred because the buffer was full.
pub const AT_CAPACITY_TOTAL: &str = "dexaflow_dispatch_at_capacity_total";
/// `dexaflow_dispatch_workers_busy`: admission workers running an attempt.
pub const WORKERS_BUSY: &str = "dexaflow_dispatch_workers_busy";

/// Where the exporter listens unless told otherwise (`metrics.listen`'s default): loopback only.
pub const DEFAULT_LISTEN: SocketAddr = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 9464));

/// The label of the outcome metrics; its values are [`Outcome::as_str`].
pub const OUTCOME_LABEL: &str = "outcome";
/// The label of the breaker gauge; its values are hook names.
pub const HOOK_LABEL: &str = "hook";

/// The upper bounds, in seconds, of both latency histograms: 50µs to 5s.
///
/// A hook's timeout defaults to 500ms and the chain budget to 2s, so the top buckets catch
/// calls that ran into either.
pub const LATENCY_BUCKETS: [f64; 16] = [
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0,
];

/// Why the exporter could not start.
#[derive(Debug, Error)]
pub enum MetricsError {
    /// The listen address could not be bound: in use, not local, or not permitted.
    #[error("cannot listen on {address}")]
    Listen {
        /// The address asked for.
        address: SocketAddr,
        /// What binding it returned.
        #[source]
        source: std::io::Error,
    },
    /// The exporter's thread could not be started.
    #[error("starting the metrics exporter thread")]
    Thread(#[source] std::io::Error),
    /// The exporter could not be built or its recorder installed (a second [`install`]).
    #[error("building the metrics exporter")]
    Exporter(#[source] BuildError),
}

/// The cached metric handles, one per metric and label value, reported to as an
/// [`crate::events::Observer`].
///
/// Build it once with [`install`] (or [`Metrics::register`] under a recorder of your own) and
/// pass it to supervision and the dispatcher as an `Arc<dyn Observer>`.
pub struct Metrics {
    /// `outcomes[outcome as usize]`, built for every [`Outcome::ALL`] so that every outcome is
    /// exported from the start, at zero, and a dashboard's query never finds no series.
    outcomes: [Counter; Outcome::ALL.len()],
    /// Hook-call latency, indexed like `outcomes`.
    durations: [Histogram; Outcome::ALL.len()],
    chain_duration: Histogram,
    /// One gauge per chain position, with the hook name it was built for. Breakers change state
    /// rarely, so a lock here costs nothing the hot path pays.
    breakers: Mutex<Vec<Option<(String, Gauge)>>>,
    /// The dispatch buffer's metrics; `None` in a process without a dispatcher (`serve`),
    /// where they would only ever read 0.
    dispatch: Option<DispatchGauges>,
}

/// The dispatch buffer's metric handles.
struct DispatchGauges {
    queue_depth: Gauge,
    buffer_capacity: Gauge,
    at_capacity: Counter,
    workers_busy: Gauge,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hooks = self.breakers.lock().map_or(0, |breakers| breakers.len());
        f.debug_struct("Metrics").field("hooks", &hooks).finish()
    }
}

impl Metrics {
    /// Describes every metric (help text and unit) and builds its handles with the recorder in
    /// effect: the global one after [`install`], or the one `metrics::with_local_recorder` sets.
    ///
    /// Every outcome's counter and histogram and every gauge exist from here on, at zero.
    pub fn register() -> Metrics {
        Metrics {
            dispatch: Some(DispatchGauges {
                queue_depth: gauge!(QUEUE_DEPTH),
                buffer_capacity: gauge!(BUFFER_CAPACITY),
                at_capacity: counter!(AT_CAPACITY_TOTAL),
                workers_busy: gauge!(WORKERS_BUSY),
            }),
            ..Metrics::register_hooks()
        }
    }

    /// Like [`Metrics::register`] without the `dexaflow_dispatch_*` metrics: for a process that
    /// runs hooks but no dispatcher (`serve`), where they would only ever read 0. Buffer events
    /// reported to it are dropped.
    pub fn register_hooks() -> Metrics {
        describe();
        Metrics {
            outcomes: Outcome::ALL
                .map(|outcome| counter!(OUTCOMES_TOTAL, OUTCOME_LABEL => outcome.as_str())),
            durations: Outcome::ALL
                .map(|outcome| histogram!(DURATION_SECONDS, OUTCOME_LABEL => outcome.as_str())),
            chain_duration: histogram!(CHAIN_DURATION_SECONDS),
            breakers: Mutex::new(Vec::new()),
            dispatch: None,
        }
    }

    /// Builds the breaker gauge of each hook, in chain order, at 0 (closed), so that the
    /// dashboard shows every hook before its breaker first changes.
    ///
    /// Call it under the same recorder as [`Metrics::register`]. A breaker of a position not
    /// named here gets its gauge when it first changes.
    #[must_use]
    pub fn with_hooks<'a>(self, hooks: impl IntoIterator<Item = &'a str>) -> Metrics {
        {
            let mut breakers = self.lock_breakers();
            breakers.clear();
            for hook in hooks {
                let gauge = breaker_gauge(hook);
                gauge.set(f64::from(BreakerState::Closed as u8));
                breakers.push(Some((hook.to_owned(), gauge)));
            }
        }
        self
    }

    fn lock_breakers(&self) -> std::sync::MutexGuard<'_, Vec<Option<(String, Gauge)>>> {
        // A panic while holding the lock leaves only a half-written gauge cache behind.
        lock(&self.breakers)
    }
}

impl Metrics {
    fn count(&self, outcome: Outcome, elapsed: Duration) {
        // `Outcome` is fieldless and `ALL` lists it in declaration order, so the discriminant
        // is the index (a unit test holds the two together).
        let index = outcome as usize;
        self.outcomes[index].increment(1);
        self.durations[index].record(elapsed);
    }
}

impl HookEvents for Metrics {
    /// Counts by outcome only: a hook's name would multiply the series by the chain's length
    /// for no panel that shows it (the breaker gauge is the one per-hook metric).
    fn hook_call(&self, _hook: &str, outcome: Outcome, elapsed: Duration) {
        self.count(outcome, elapsed);
    }

    fn chain_finished(&self, elapsed: Duration) {
        self.chain_duration.record(elapsed);
    }

    fn chain_cancelled(&self, elapsed: Duration) {
        self.count(Outcome::Cancelled, elapsed);
    }
}

impl BreakerEvents for Metrics {
    fn breaker_changed(&self, position: usize, hook: &str, state: BreakerState) {
        let mut breakers = self.lock_breakers();
        if breakers.len() <= position {
            breakers.resize_with(position + 1, || None);
        }
        let slot = &mut breakers[position];
        if !matches!(slot, Some((name, _)) if name == hook) {
            *slot = Some((hook.to_owned(), breaker_gauge(hook)));
        }
        if let Some((_, gauge)) = slot {
            gauge.set(f64::from(state as u8));
        }
    }
}

impl BufferEvents for Metrics {
    fn buffer_capacity(&self, capacity: usize) {
        if let Some(dispatch) = &self.dispatch {
            dispatch.buffer_capacity.set(capacity as f64);
        }
    }

    fn buffer_depth(&self, depth: usize) {
        if let Some(dispatch) = &self.dispatch {
            dispatch.queue_depth.set(depth as f64);
        }
    }

    fn deferred_at_capacity(&self) {
        if let Some(dispatch) = &self.dispatch {
            dispatch.at_capacity.increment(1);
        }
    }

    fn worker_busy(&self, busy: bool) {
        let Some(dispatch) = &self.dispatch else {
            return;
        };
        if busy {
            dispatch.workers_busy.increment(1.0);
        } else {
            dispatch.workers_busy.decrement(1.0);
        }
    }
}

fn breaker_gauge(hook: &str) -> Gauge {
    gauge!(BREAKER_STATE, HOOK_LABEL => hook.to_owned())
}

fn describe() {
    describe_counter!(
        OUTCOMES_TOTAL,
        Unit::Count,
        "Admission hook calls by outcome; a fail-open call counts under its cause and as fail_open"
    );
    describe_histogram!(
        DURATION_SECONDS,
        Unit::Seconds,
        "Latency of one supervised admission hook call, by outcome"
    );
    describe_histogram!(
        CHAIN_DURATION_SECONDS,
        Unit::Seconds,
        "Latency of the whole admission chain for one attempt"
    );
    describe_gauge!(
        BREAKER_STATE,
        Unit::Count,
        "State of each admission hook's breaker: 0 closed, 1 half-open, 2 open"
    );
    describe_gauge!(
        QUEUE_DEPTH,
        Unit::Count,
        "Attempts waiting in the bounded dispatch buffer"
    );
    describe_gauge!(
        BUFFER_CAPACITY,
        Unit::Count,
        "Attempts the bounded dispatch buffer holds at most; 0 for synchronous dispatch"
    );
    describe_counter!(
        AT_CAPACITY_TOTAL,
        Unit::Count,
        "Attempts deferred to a later tick because the dispatch buffer was full"
    );
    describe_gauge!(
        WORKERS_BUSY,
        Unit::Count,
        "Admission workers running an attempt"
    );
}

// ---------------------------------------------------------------------------------------------
// The webhook server's metrics.

/// `dexaflow_server_requests_total{service,outcome}`: requests the webhook server answered.
pub const SERVER_REQUESTS_TOTAL: &str = "dexaflow_server_requests_total";
/// `dexaflow_server_request_duration_seconds{service}`: from the request's head to the answer.
pub const SERVER_DURATION_SECONDS: &str = "dexaflow_server_request_duration_seconds";
/// `dexaflow_server_requests_in_flight`: requests being answered now.
pub const SERVER_IN_FLIGHT: &str = "dexaflow_server_requests_in_flight";
/// Connections that waited for a free place under `server.max_connections` before being served.
pub const SERVER_CONNECTIONS_WAITED_TOTAL: &str = "dexaflow_server_connections_waited_total";
/// `dexaflow_server_resource_group_reloads_total{result}`: resource group files taken in or not.
pub const GROUP_RELOADS_TOTAL: &str = "dexaflow_server_resource_group_reloads_total";
/// `dexaflow_server_certificate_reloads_total{result}`: certificate pairs taken in or not.
pub const CERTIFICATE_RELOADS_TOTAL: &str = "dexaflow_server_certificate_reloads_total";
/// The label naming the served path.
pub const SERVICE_LABEL: &str = "service";
/// The label of the reload counters: `ok` or `error`.
pub const RESULT_LABEL: &str = "result";
/// The `service` of a request whose path no service answers.
pub const NO_SERVICE: &str = "none";

/// How the webhook server answered one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestOutcome {
    /// 200, allowed without a patch.
    Allowed,
    /// 200, allowed with a patch.
    Patched,
    /// 200, not allowed.
    Denied,
    /// 4xx: the wrong method, media type, size or body.
    Invalid,
    /// 500: the handler panicked (or a validating service tried to answer with a patch).
    Panic,
    /// 503: the handler did not answer before its deadline.
    Timeout,
    /// 404: no service answers the path.
    NotFound,
    /// 200, held: not now, ask again later (`/tasks/admit`).
    Held,
    /// 503: the service could not decide (`/tasks/admit`: a hook broken, skipped by its
    /// breaker, or the chain budget spent).
    Unavailable,
    /// 401: the caller did not present the bearer token (`/tasks/admit`).
    Unauthorized,
}

impl RequestOutcome {
    /// Every outcome, in declaration order.
    pub const ALL: [RequestOutcome; 10] = [
        RequestOutcome::Allowed,
        RequestOutcome::Patched,
        RequestOutcome::Denied,
        RequestOutcome::Invalid,
        RequestOutcome::Panic,
        RequestOutcome::Timeout,
        RequestOutcome::NotFound,
        RequestOutcome::Held,
        RequestOutcome::Unavailable,
        RequestOutcome::Unauthorized,
    ];

    /// The outcome's label value.
    pub fn as_str(self) -> &'static str {
        match self {
            RequestOutcome::Allowed => "allowed",
            RequestOutcome::Patched => "patched",
            RequestOutcome::Denied => "denied",
            RequestOutcome::Invalid => "invalid",
            RequestOutcome::Panic => "panic",
            RequestOutcome::Timeout => "timeout",
            RequestOutcome::NotFound => "not_found",
            RequestOutcome::Held => "held",
            RequestOutcome::Unavailable => "unavailable",
            RequestOutcome::Unauthorized => "unauthorized",
        }
    }
}

/// What a reload counter counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reloaded {
    /// The resource groups file.
    ResourceGroups,
    /// The serving certificate and key.
    Certificate,
}

/// The webhook server's cached metric handles: the in-flight gauge, the reload counters and,
/// through [`ServerMetrics::service`], each service's own.
///
/// Build it under the recorder in effect, like [`Metrics::register`]; without one every handle
/// is a no-op, which is what a test that does not look at metrics wants.
#[derive(Debug, Clone)]
pub struct ServerMetrics {
    in_flight: Gauge,
    not_found: Counter,
    connections_waited: Counter,
    /// `[ResourceGroups, Certificate]` × `[ok, error]`.
    reloads: [[Counter; 2]; 2],
}

/// One service's handles: a counter per outcome and its latency histogram.
#[derive(Debug, Clone)]
pub struct ServiceMetrics {
    outcomes: [Counter; RequestOutcome::ALL.len()],
    duration: Histogram,
}

/// Holds one request in the in-flight gauge until dropped.
#[derive(Debug)]
pub struct InFlight(Gauge);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.decrement(1.0);
    }
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

    /// The handles of the service at `path`, every outcome at zero from here on.
    pub fn service(&self, path: &str) -> ServiceMetrics {
        ServiceMetrics {
            outcomes: RequestOutcome::ALL.map(|outcome| {
                counter!(
                    SERVER_REQUESTS_TOTAL,
                    SERVICE_LABEL => path.to_owned(),
                    OUTCOME_LABEL => outcome.as_str()
                )
            }),
            duration: histogram!(SERVER_DURATION_SECONDS, SERVICE_LABEL => path.to_owned()),
        }
    }

    /// Counts a request in flight until the guard is dropped.
    pub fn in_flight(&self) -> InFlight {
        self.in_flight.increment(1.0);
        InFlight(self.in_flight.clone())
    }

    /// Counts a request to a path no service answers.
    pub fn not_found(&self) {
        self.not_found.increment(1);
    }

    /// Counts a connection accepted while `server.max_connections` were open: it waits for
    /// one of them to close before it is served.
    pub fn connection_waited(&self) {
        self.connections_waited.increment(1);
    }

    /// Counts one reload of `what`, taken in (`ok`) or not.
    pub fn reloaded(&self, what: Reloaded, ok: bool) {
        let file = match what {
            Reloaded::ResourceGroups => 0,
            Reloaded::Certificate => 1,
        };
        self.reloads[file][usize::from(!ok)].increment(1);
    }
}

impl ServiceMetrics {
    /// Counts one answered request and its latency.
    pub fn answered(&self, outcome: RequestOutcome, elapsed: Duration) {
        // `RequestOutcome` is fieldless and `ALL` lists it in declaration order.
        self.outcomes[outcome as usize].increment(1);
        self.duration.record(elapsed);
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
    describe_counter!(
        CERTIFICATE_RELOADS_TOTAL,
        Unit::Count,
        "Serving certificate pairs the webhook server read after a change, by result (ok or error: the previous pair stays)"
    );
}

/// The Prometheus builder with the latency buckets set; no listener yet.
///
/// # Errors
/// Never for these constant buckets; the error is the builder's own.
fn builder() -> Result<PrometheusBuilder, BuildError> {
    PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Full(DURATION_SECONDS.to_owned()), &LATENCY_BUCKETS)?
        .set_buckets_for_metric(
            Matcher::Full(CHAIN_DURATION_SECONDS.to_owned()),
            &LATENCY_BUCKETS,
        )?
        .set_buckets_for_metric(
            Matcher::Full(SERVER_DURATION_SECONDS.to_owned()),
            &LATENCY_BUCKETS,
        )
}

/// The running exporter: where it listens and a handle that renders the same text in process.
///
/// Cheap to clone; every clone reads the one process-wide recorder [`install`] set.
#[derive(Debug, Clone)]
pub struct Exporter {
    address: SocketAddr,
    handle: PrometheusHandle,
}

impl Exporter {
    /// The address the exporter bound, port 0 resolved to the port the system chose.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// The URL a scraper reads: `http://ADDRESS/metrics`.
    pub fn url(&self) -> String {
        format!("http://{}{METRICS_PATH}", self.address)
    }

    /// Every metric in the Prometheus text format, as a scrape of [`Exporter::url`] returns it.
    pub fn render(&self) -> String {
        self.handle.render()
    }
}

/// What [`install`] returns: the handles to report to and the exporter serving them.
#[derive(Debug)]
pub struct Installed {
    /// The metric handles; hand them to supervision and the dispatcher as their observer.
    pub metrics: Metrics,
    /// Where the exporter listens, and its in-process rendering.
    pub exporter: Exporter,
}

/// The path the exporter is scraped on (it answers the same text on any path).
pub const METRICS_PATH: &str = "/metrics";

/// How often the exporter drains recorded latencies into its histograms when nobody scrapes,
/// so that memory stays bounded between scrapes (the exporter crate's own default).
const UPKEEP_EVERY: Duration = Duration::from_secs(5);

/// Binds `listen` (port 0 picks a free port), starts the Prometheus exporter on it, installs its
/// recorder as the process-wide one, and returns the handles to report to with the bound address.
///
/// The recorder is process-wide (the `metrics` crate's global): call it once per process, from
/// `main` or from a test binary of its own, before any actix system starts. The exporter runs on
/// a thread of its own with a current-thread tokio runtime, so it serves scrapes however busy the
/// dispatcher's arbiters are, and it outlives every system the process runs.
///
/// # Errors
/// [`MetricsError::Listen`] when `listen` cannot be bound (the address is in use, say),
/// [`MetricsError::Exporter`] when a recorder is already installed (a second call), and
/// [`MetricsError::Thread`] when the exporter's thread or runtime cannot start.
pub fn install(listen: SocketAddr) -> Result<Installed, MetricsError> {
    install_with(listen, Metrics::register)
}

/// [`install`] for a process without a dispatcher (`serve`): its [`Installed::metrics`] are
/// [`Metrics::register_hooks`]'s, so that no `dexaflow_dispatch_*` metric is exported there.
///
/// # Errors
/// As [`install`].
pub fn install_server(listen: SocketAddr) -> Result<Installed, MetricsError> {
    install_with(listen, Metrics::register_hooks)
}

fn install_with(listen: SocketAddr, register: fn() -> Metrics) -> Result<Installed, MetricsError> {
    let listen_error = |source| MetricsError::Listen {
        address: listen,
        source,
    };
    let listener = std::net::TcpListener::bind(listen).map_err(listen_error)?;
    let address = listener.local_addr().map_err(listen_error)?;
    listener.set_nonblocking(true).map_err(listen_error)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(MetricsError::Thread)?;
    let listener = {
        let _entered = runtime.enter();
        tokio::net::TcpListener::from_std(listener).map_err(listen_error)?
    };
    let recorder = builder().map_err(MetricsError::Exporter)?.build_recorder();
    let handle = recorder.handle();
    let metrics = metrics::with_local_recorder(&recorder, register);
    metrics::set_global_recorder(recorder)
        .map_err(|error| MetricsError::Exporter(BuildError::FailedToSetGlobalRecorder(error)))?;
    let served = handle.clone();
    std::thread::Builder::new()
        .name("metrics-exporter".to_owned())
        .spawn(move || runtime.block_on(serve(listener, served)))
        .map_err(MetricsError::Thread)?;
    Ok(Installed {
        metrics,
        exporter: Exporter { address, handle },
    })
}

/// How long the exporter waits after a failed accept before it tries again.
const ACCEPT_RETRY: Duration = Duration::from_millis(100);

/// Answers every connection on `listener` with the rendered metrics, and runs the recorder's
/// upkeep between scrapes; never returns.
async fn serve(listener: tokio::net::TcpListener, handle: PrometheusHandle) {
    let upkeep = handle.clone();
    tokio::spawn(async move {
        let mut every = tokio::time::interval(UPKEEP_EVERY);
        loop {
            every.tick().await;
            upkeep.run_upkeep();
        }
    });
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(error) => {
                // Out of file descriptors, say: a later accept may succeed, once a connection
                // elsewhere has closed; without the pause the loop would spin on the error.
                tracing::warn!("metrics exporter cannot accept a connection: {error}");
                tokio::time::sleep(ACCEPT_RETRY).await;
                continue;
            }
        };
        let handle = handle.clone();
        tokio::spawn(async move {
            let scrape = service_fn(move |_request: Request<Incoming>| {
                let body = Full::new(Bytes::from(handle.render()));
                let mut response = Response::new(body);
                response.headers_mut().insert(
                    CONTENT_TYPE,
                    HeaderValue::from_static("text/plain; version=0.0.4"),
                );
                std::future::ready(Ok::<_, std::convert::Infallible>(response))
            });
            if let Err(error) = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), scrape)
                .await
            {
                tracing::debug!("metrics scrape connection ended: {error}");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use metrics_exporter_prometheus::PrometheusRecorder;

    fn recorder() -> PrometheusRecorder {
        builder().expect("constant buckets").build_recorder()
    }

    fn sample(scrape: &str, series: &str) -> Option<f64> {
        scrape.lines().find_map(|line| {
            let value = line.strip_prefix(series)?.strip_prefix(' ')?;
            value.parse().ok()
        })
    }

    #[test]
    fn outcome_discriminants_index_all_outcomes() {
        for (index, outcome) in Outcome::ALL.into_iter().enumerate() {
            assert_eq!(outcome as usize, index, "{outcome:?}");
        }
    }

    #[test]
    fn every_outcome_is_exported_at_zero_from_the_start() {
        let recorder = recorder();
        let _metrics = metrics::with_local_recorder(&recorder, Metrics::register);
        let scrape = recorder.handle().render();
        for outcome in Outcome::ALL {
            let series = format!("{OUTCOMES_TOTAL}{{outcome=\"{}\"}}", outcome.as_str());
            assert_eq!(sample(&scrape, &series), Some(0.0), "{series} in\n{scrape}");
        }
        for gauge in [
            QUEUE_DEPTH,
            BUFFER_CAPACITY,
            WORKERS_BUSY,
            AT_CAPACITY_TOTAL,
        ] {
            assert_eq!(sample(&scrape, gauge), Some(0.0), "{gauge} in\n{scrape}");
        }
    }

    #[test]
    fn a_hook_call_counts_its_outcome_and_records_its_latency_in_the_buckets() {
        let recorder = recorder();
        let metrics = metrics::with_local_recorder(&recorder, Metrics::register);
        metrics.hook_call("freeze", Outcome::Hold, Duration::from_micros(70));
        metrics.hook_call("freeze", Outcome::Hold, Duration::from_millis(3));
        metrics.chain_finished(Duration::from_millis(4));
        let scrape = recorder.handle().render();
        assert_eq!(
            sample(
                &scrape,
                r#"dexaflow_admission_outcomes_total{outcome="hold"}"#
            ),
            Some(2.0)
        );
        assert_eq!(
            sample(
                &scrape,
                r#"dexaflow_admission_duration_seconds_bucket{outcome="hold",le="0.0001"}"#
            ),
            Some(1.0),
            "{scrape}"
        );
        assert_eq!(
            sample(
                &scrape,
                r#"dexaflow_admission_duration_seconds_bucket{outcome="hold",le="0.005"}"#
            ),
            Some(2.0)
        );
        assert_eq!(
            sample(&scrape, "dexaflow_admission_chain_duration_seconds_count"),
            Some(1.0)
        );
        assert_eq!(
            sample(
                &scrape,
                r#"dexaflow_admission_outcomes_total{outcome="admit"}"#
            ),
            Some(0.0)
        );
    }

    #[test]
    fn every_metric_has_help_text() {
        let recorder = recorder();
        let metrics =
            metrics::with_local_recorder(&recorder, || Metrics::register().with_hooks(["freeze"]));
        metrics.hook_call("freeze", Outcome::Admit, Duration::from_micros(1));
        metrics.chain_finished(Duration::from_micros(1));
        let scrape = recorder.handle().render();
        for name in [
            OUTCOMES_TOTAL,
            DURATION_SECONDS,
            CHAIN_DURATION_SECONDS,
            BREAKER_STATE,
            QUEUE_DEPTH,
            BUFFER_CAPACITY,
            AT_CAPACITY_TOTAL,
            WORKERS_BUSY,
        ] {
            assert!(
                scrape.contains(&format!("# HELP {name} ")),
                "{name} has no help in\n{scrape}"
            );
        }
    }

    #[test]
    fn breaker_gauge_starts_closed_per_hook_and_follows_changes() {
        let recorder = recorder();
        metrics::with_local_recorder(&recorder, || {
            let metrics = Metrics::register().with_hooks(["freeze", "deny"]);
            let scrape = recorder.handle().render();
            assert_eq!(
                sample(&scrape, r#"dexaflow_admission_breaker_state{hook="deny"}"#),
                Some(0.0)
            );
            metrics.breaker_changed(1, "deny", BreakerState::Open);
            metrics.breaker_changed(0, "freeze", BreakerState::HalfOpen);
            metrics.breaker_changed(2, "late", BreakerState::Open);
            let scrape = recorder.handle().render();
            assert_eq!(
                sample(&scrape, r#"dexaflow_admission_breaker_state{hook="deny"}"#),
                Some(2.0)
            );
            assert_eq!(
                sample(
                    &scrape,
                    r#"dexaflow_admission_breaker_state{hook="freeze"}"#
                ),
                Some(1.0)
            );
            assert_eq!(
                sample(&scrape, r#"dexaflow_admission_breaker_state{hook="late"}"#),
                Some(2.0)
            );
        });
    }

    #[test]
    fn buffer_gauges_follow_the_dispatcher() {
        let recorder = recorder();
        let metrics = metrics::with_local_recorder(&recorder, Metrics::register);
        metrics.buffer_capacity(8);
        metrics.buffer_depth(5);
        metrics.deferred_at_capacity();
        metrics.worker_busy(true);
        metrics.worker_busy(true);
        metrics.worker_busy(false);
        let scrape = recorder.handle().render();
        assert_eq!(sample(&scrape, BUFFER_CAPACITY), Some(8.0));
        assert_eq!(sample(&scrape, QUEUE_DEPTH), Some(5.0));
        assert_eq!(sample(&scrape, AT_CAPACITY_TOTAL), Some(1.0));
        assert_eq!(sample(&scrape, WORKERS_BUSY), Some(1.0));
    }

    #[test]
    fn server_outcome_discriminants_index_all_outcomes() {
        for (index, outcome) in RequestOutcome::ALL.into_iter().enumerate() {
            assert_eq!(outcome as usize, index, "{outcome:?}");
        }
    }

    #[test]
    fn server_requests_count_by_service_and_outcome_and_reloads_by_result() {
        let recorder = recorder();
        let metrics = metrics::with_local_recorder(&recorder, ServerMetrics::register);
        let mutate = metrics::with_local_recorder(&recorder, || metrics.service("/pods/mutate"));
        let scrape = recorder.handle().render();
        assert_eq!(
            sample(
                &scrape,
                r#"dexaflow_server_requests_total{service="/pods/mutate",outcome="panic"}"#
            ),
            Some(0.0),
            "{scrape}"
        );
        mutate.answered(RequestOutcome::Patched, Duration::from_micros(200));
        metrics.reloaded(Reloaded::Certificate, false);
        metrics.not_found();
        let guard = metrics.in_flight();
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
        drop(guard);
        let scrape = recorder.handle().render();
        assert_eq!(sample(&scrape, SERVER_IN_FLIGHT), Some(0.0));
        for name in [
            SERVER_REQUESTS_TOTAL,
            SERVER_DURATION_SECONDS,
            SERVER_IN_FLIGHT,
            GROUP_RELOADS_TOTAL,
            CERTIFICATE_RELOADS_TOTAL,
        ] {
            assert!(
                scrape.contains(&format!("# HELP {name} ")),
                "{name} has no help in\n{scrape}"
            );
        }
    }

    #[test]
    fn an_address_in_use_is_named_in_the_error() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
        let address = taken.local_addr().expect("bound");
        let error = install(address).expect_err("the port is taken");
        assert!(matches!(error, MetricsError::Listen { .. }), "{error:?}");
        assert_eq!(error.to_string(), format!("cannot listen on {address}"));
    }
}
