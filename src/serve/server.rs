//! The listeners: HTTPS for the services, plain HTTP for the probes, and graceful shutdown.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use http::{Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use tokio_rustls::TlsAcceptor;

use super::ServeError;
use super::answer::{MAX_HEADER_BYTES, Shared, answer};
use super::auth::BearerToken;
use super::registry::Router;
use super::settings::Settings;
use super::threads::{ConnectionThreads, SpawnOn};
use super::tls::{Certificates, server_config};
use crate::cluster::Watching;
use crate::events::ServerEvents;
use crate::listen;
use crate::supervise::Limiter;

/// How long a client may take to complete the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// At most one log line per this period for client certificates refused.
const REFUSAL_LOG_EVERY: Duration = Duration::from_secs(10);

/// The largest request head hyper reads (HTTP/1.1's read buffer, HTTP/2's header list):
/// room for a long URI and header fields a little past [`MAX_HEADER_BYTES`], so that the serve
/// function answers those 431 with a JSON body; past this hyper answers 431 itself, with none.
const MAX_HEAD_BYTES: usize = 4 * MAX_HEADER_BYTES;

/// A started server: both listeners bound, certificates and services loaded, ready.
///
/// Drive it with [`Server::run_until`]; dropping it instead stops accepting at once.
#[derive(Debug)]
pub struct Server {
    address: SocketAddr,
    probe_address: Option<SocketAddr>,
    ready: Arc<AtomicBool>,
    stop_accepting: watch::Sender<bool>,
    accept: tokio::task::JoinHandle<GracefulShutdown>,
    /// Dropped after the grace period (or with the server): the connections still open end.
    connection_threads: Option<Arc<ConnectionThreads>>,
    probes: Option<tokio::task::JoinHandle<()>>,
    grace: Duration,
    _certificates: Certificates,
    /// The watches keeping the caches the services read.
    _watching: Vec<Watching>,
}

impl Server {
    /// Reads the bearer token file, loads the certificates (watched from here on), binds both
    /// listeners and starts serving `router`'s services, telling `events` of connections and
    /// certificate reloads. Readiness is true from here on. Call it inside a multi-threaded
    /// tokio runtime: the accept loop, the probes and HTTP/2's streams run on it, and each
    /// connection on one of the server's own connection threads ([`Settings::worker_threads`]
    /// of them).
    ///
    /// # Errors
    /// Any [`ServeError`]: a bad certificate, key, CA bundle or token file, an address that
    /// cannot be bound, or [`ServeError::Unauthenticated`] when a service for authenticated
    /// callers would answer anyone.
    pub(crate) async fn start(
        settings: &Settings,
        router: Router,
        events: Arc<dyn ServerEvents>,
        conditions: Vec<ReadyCondition>,
        watching: Vec<Watching>,
    ) -> Result<Server, ServeError> {
        let bearer_token = settings
            .bearer_token_file
            .as_deref()
            .map(BearerToken::load)
            .transpose()?;
        let anyone_reaches = bearer_token.is_none()
            && settings.client_ca_file.is_none()
            && !settings.listen.ip().is_loopback();
        if let Some(path) = router
            .authenticated_paths()
            .first()
            .filter(|_| anyone_reaches)
        {
            return Err(ServeError::Unauthenticated {
                path: (*path).to_owned(),
                listen: settings.listen,
                names: Box::new(settings.names),
            });
        }
        let certificates =
            Certificates::watch(&settings.tls, settings.poll_interval, Arc::clone(&events))?;
        let tls = server_config(
            Arc::clone(&certificates.resolver),
            settings.client_ca_file.as_deref(),
            settings.http2,
        )?;
        for (path, kind) in router.paths() {
            tracing::info!(path, kind = kind.as_str(), "serving");
        }
        let shared = Arc::new(Shared {
            router,
            max_body_bytes: settings.max_body_bytes,
            bearer_token,
            events,
        });
        // Started before anything listens: a start that fails leaves nothing serving.
        let connection_threads = Arc::new(ConnectionThreads::start(settings.threads()).await?);
        let listener = bind(settings.listen, settings.names.listen).await?;
        let address = listener.local_addr().map_err(|source| ServeError::Listen {
            setting: settings.names.listen,
            address: settings.listen,
            source,
        })?;
        let ready = Arc::new(AtomicBool::new(false));
        let (probes, probe_address) = match settings.probe_listen {
            Some(listen) => {
                let setting = settings.names.probe_listen;
                let listener = bind(listen, setting).await?;
                let bound = listener.local_addr().map_err(|source| ServeError::Listen {
                    setting,
                    address: listen,
                    source,
                })?;
                let task = tokio::spawn(serve_probes(listener, Arc::clone(&ready), conditions));
                (Some(task), Some(bound))
            }
            None => (None, None),
        };
        let (stop_accepting, stopped) = watch::channel(false);
        let mut builder = auto::Builder::new(SpawnOn(tokio::runtime::Handle::current()));
        builder
            .http1()
            .timer(TokioTimer::new())
            // Armed while waiting for a head, whether the connection is new, idle after an
            // answer, or receiving a head slowly (slowloris): past it hyper closes it.
            .header_read_timeout(settings.idle_timeout)
            .max_buf_size(MAX_HEAD_BYTES);
        builder
            .http2()
            .max_header_list_size(u32::try_from(MAX_HEAD_BYTES).unwrap_or(u32::MAX));
        let builder = if settings.http2 {
            builder
        } else {
            builder.http1_only()
        };
        let accept = tokio::spawn(accept(
            listener,
            TlsAcceptor::from(tls),
            Arc::new(builder),
            Arc::clone(&connection_threads),
            shared,
            Arc::new(Semaphore::new(
                settings.max_connections.clamp(1, Semaphore::MAX_PERMITS),
            )),
            stopped,
        ));
        ready.store(true, Ordering::SeqCst);
        tracing::info!(
            %address,
            connection_threads = connection_threads.len(),
            "webhook server listening"
        );
        Ok(Server {
            address,
            probe_address,
            ready,
            stop_accepting,
            accept,
            connection_threads: Some(connection_threads),
            probes,
            grace: settings.shutdown_grace,
            _certificates: certificates,
            _watching: watching,
        })
    }

    /// The HTTPS listener's address (the port chosen when `listen` asked for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.address
    }

    /// The probe listener's address, when there is one.
    pub fn probe_addr(&self) -> Option<SocketAddr> {
        self.probe_address
    }

    /// Serves until `shutdown` completes, then shuts down gracefully: readiness goes false,
    /// the listener stops accepting, and requests in flight get the grace period to finish
    /// (connections still open after it are closed with the threads they are served on).
    /// Returns how many connections were still open when the grace period ran out.
    ///
    /// # Cancel safety
    /// Dropping the future before `shutdown` completes stops accepting at once, without grace.
    pub async fn run_until(mut self, shutdown: impl Future<Output = ()>) -> usize {
        shutdown.await;
        self.ready.store(false, Ordering::SeqCst);
        tracing::info!("shutting down: not ready, no new connections");
        let _ = self.stop_accepting.send(true);
        let left = match (&mut self.accept).await {
            Ok(graceful) => {
                let open = graceful.count();
                match tokio::time::timeout(self.grace, graceful.shutdown()).await {
                    Ok(()) => 0,
                    Err(_) => {
                        tracing::warn!(open, "grace period over; closing connections still open");
                        open
                    }
                }
            }
            Err(error) => {
                tracing::error!("the accept loop ended early: {error}");
                0
            }
        };
        self.connection_threads = None;
        if let Some(probes) = self.probes.take() {
            probes.abort();
        }
        tracing::info!("webhook server stopped");
        left
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.accept.abort();
        if let Some(probes) = &self.probes {
            probes.abort();
        }
    }
}

/// A listener on `address`, the value of `setting`.
async fn bind(address: SocketAddr, setting: &'static str) -> Result<TcpListener, ServeError> {
    TcpListener::bind(address)
        .await
        .map_err(|source| ServeError::Listen {
            setting,
            address,
            source,
        })
}

/// Accepts connections until told to stop, handing each to a connection thread; returns the
/// handle that drains those still open.
///
/// Each connection holds one of `places` for its life. A connection accepted when there is
/// none waits, unserved, for one (and is counted); meanwhile no other is accepted, so further
/// clients wait in the listen backlog.
async fn accept(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    builder: Arc<auto::Builder<SpawnOn>>,
    threads: Arc<ConnectionThreads>,
    shared: Arc<Shared>,
    places: Arc<Semaphore>,
    mut stopped: watch::Receiver<bool>,
) -> GracefulShutdown {
    let graceful = GracefulShutdown::new();
    let refusals = Arc::new(Limiter::new(REFUSAL_LOG_EVERY));
    loop {
        let (stream, peer) = tokio::select! {
            _ = stopped.changed() => break,
            accepted = listen::next(&listener, "webhook server") => accepted,
        };
        let place = match Arc::clone(&places).try_acquire_owned() {
            Ok(place) => place,
            Err(_) => {
                shared.events.connection_waited();
                tokio::select! {
                    _ = stopped.changed() => break,
                    place = Arc::clone(&places).acquire_owned() => match place {
                        Ok(place) => place,
                        // Never closed: the semaphore lives as long as this loop.
                        Err(_) => break,
                    },
                }
            }
        };
        // An answer is a few small writes: send each at once rather than wait for the client's
        // delayed ACK (Nagle), which would add tens of milliseconds to a kept-alive connection.
        if let Err(error) = stream.set_nodelay(true) {
            tracing::debug!(%peer, "setting TCP_NODELAY: {error}");
        }
        // Out of this runtime's I/O driver, into the connection thread's.
        let stream = match stream.into_std() {
            Ok(stream) => stream,
            Err(error) => {
                tracing::debug!(%peer, "handing the connection over: {error}");
                continue;
            }
        };
        let acceptor = acceptor.clone();
        let builder = Arc::clone(&builder);
        let shared = Arc::clone(&shared);
        let refusals = Arc::clone(&refusals);
        let watcher = graceful.watcher();
        threads.serve(async move {
            let _place = place;
            let _open = Open::new(Arc::clone(&shared.events));
            let stream = match TcpStream::from_std(stream) {
                Ok(stream) => stream,
                Err(error) => {
                    tracing::debug!(%peer, "taking the connection over: {error}");
                    return;
                }
            };
            let stream =
                match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                    Ok(Ok(stream)) => stream,
                    Ok(Err(error)) if is_client_certificate_error(&error) => {
                        if let Some(held_back) = refusals.take() {
                            tracing::warn!(
                                %peer,
                                held_back,
                                "client certificate refused: {error}"
                            );
                        }
                        return;
                    }
                    Ok(Err(error)) => {
                        tracing::debug!(%peer, "TLS handshake failed: {error}");
                        return;
                    }
                    Err(_) => {
                        tracing::debug!(%peer, "TLS handshake timed out");
                        return;
                    }
                };
            let service = service_fn(move |request: Request<Incoming>| {
                let shared = Arc::clone(&shared);
                async move { Ok::<_, Infallible>(answer(shared, request).await) }
            });
            let connection = builder.serve_connection(TokioIo::new(stream), service);
            if let Err(error) = watcher.watch(connection).await {
                tracing::debug!(%peer, "connection ended: {error}");
            }
        });
    }
    graceful
}

/// Reports a connection open until dropped, with its place under the cap.
struct Open(Arc<dyn ServerEvents>);

impl Open {
    fn new(events: Arc<dyn ServerEvents>) -> Open {
        events.connection_opened();
        Open(events)
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.0.connection_closed();
    }
}

/// Whether a failed handshake is a client certificate refused (missing, or not signed by the
/// client CA): mutual TLS doing its work, which an operator wants to see.
fn is_client_certificate_error(error: &std::io::Error) -> bool {
    error
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        .is_some_and(|error| {
            matches!(
                error,
                rustls::Error::InvalidCertificate(_) | rustls::Error::NoCertificatesPresented
            )
        })
}

/// Something besides the listener that must hold before the server is ready, such as a cache
/// that has synced: its name, as `/readyz` shows it while it does not hold, and the check.
#[derive(Clone)]
pub(crate) struct ReadyCondition {
    pub(crate) name: String,
    pub(crate) holds: Arc<dyn Fn() -> bool + Send + Sync>,
}

/// Serves `/healthz` (always 200 while the process runs) and `/readyz` (200 when ready and
/// every condition holds, 503 naming the first that does not otherwise) over plain HTTP/1.1.
async fn serve_probes(
    listener: TcpListener,
    ready: Arc<AtomicBool>,
    conditions: Vec<ReadyCondition>,
) {
    listen::serve_plain(listener, "probes", move |path| {
        // Readiness goes false only when shutdown begins.
        let unready = if !ready.load(Ordering::SeqCst) {
            Some("shutting down".to_owned())
        } else {
            conditions
                .iter()
                .find(|condition| !(condition.holds)())
                .map(|condition| format!("waiting for {}", condition.name))
        };
        probe(path, unready.as_deref())
    })
    .await;
}

/// The answer to a probe of `path`; `unready` says why the server is not ready, if it is not.
fn probe(path: &str, unready: Option<&str>) -> Response<Full<Bytes>> {
    let (status, text) = match (path, unready) {
        ("/healthz", _) => (StatusCode::OK, Bytes::from_static(b"ok\n")),
        ("/readyz", None) => (StatusCode::OK, Bytes::from_static(b"ready\n")),
        ("/readyz", Some(why)) => (
            StatusCode::SERVICE_UNAVAILABLE,
            Bytes::from(format!("not ready: {why}\n")),
        ),
        _ => (StatusCode::NOT_FOUND, Bytes::from_static(b"not found\n")),
    };
    let mut response = Response::new(Full::new(text));
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_unready_probe_names_what_readiness_waits_for() {
        let response = probe("/readyz", Some("waiting for the queue cache"));
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        let body = http_body_util::BodyExt::collect(response.into_body())
            .await
            .expect("a full body")
            .to_bytes();
        assert_eq!(&body[..], b"not ready: waiting for the queue cache\n");
        assert_eq!(probe("/readyz", None).status(), StatusCode::OK);
        assert_eq!(probe("/healthz", Some("anything")).status(), StatusCode::OK);
    }
}
