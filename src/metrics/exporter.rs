//! The Prometheus exporter: [`install`] sets the process-wide recorder and serves its text on a
//! listener of its own.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::time::Duration;

use http::header::{CONTENT_TYPE, HeaderValue};
use http_body_util::Full;
use hyper::Response;
use hyper::body::Bytes;
use metrics_exporter_prometheus::{BuildError, Matcher, PrometheusBuilder, PrometheusHandle};
use thiserror::Error;

use crate::listen;

use super::{
    CHAIN_DURATION_SECONDS, DURATION_SECONDS, LATENCY_BUCKETS, Metrics, SERVER_DURATION_SECONDS,
};

/// Where the exporter listens unless told otherwise (`metrics.listen`'s default): loopback only.
pub const DEFAULT_LISTEN: SocketAddr = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 9464));

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

/// The Prometheus builder with the latency buckets set; no listener yet.
///
/// # Errors
/// Never for these constant buckets; the error is the builder's own.
pub(super) fn builder() -> Result<PrometheusBuilder, BuildError> {
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

/// The path the exporter is scraped on (it answers the same text to a `GET` of any path).
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
/// `Metrics::register_hooks`'s, so that no `dexaflow_dispatch_*` metric is exported there.
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

/// Answers every request on `listener`, whatever its path, with the rendered metrics, and runs
/// the recorder's upkeep between scrapes; never returns.
async fn serve(listener: tokio::net::TcpListener, handle: PrometheusHandle) {
    let upkeep = handle.clone();
    tokio::spawn(async move {
        let mut every = tokio::time::interval(UPKEEP_EVERY);
        loop {
            every.tick().await;
            upkeep.run_upkeep();
        }
    });
    listen::serve_plain(listener, "metrics exporter", move |_path| {
        let mut response = Response::new(Full::new(Bytes::from(handle.render())));
        response.headers_mut().insert(
            CONTENT_TYPE,
            HeaderValue::from_static("text/plain; version=0.0.4"),
        );
        response
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_in_use_is_named_in_the_error() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
        let address = taken.local_addr().expect("bound");
        let error = install(address).expect_err("the port is taken");
        assert!(matches!(error, MetricsError::Listen { .. }), "{error:?}");
        assert_eq!(error.to_string(), format!("cannot listen on {address}"));
    }
}
