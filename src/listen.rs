//! Accepting connections, written once for every listener of the crate: the webhook server's
//! HTTPS listener, its probes and the metrics exporter.
//!
//! An accept can fail for reasons that pass (out of file descriptors until a connection closes
//! elsewhere, a connection reset before it was taken): every listener logs the failure, pauses
//! [`ACCEPT_RETRY`] so that it does not spin on the error, and accepts again.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use http::Response;
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};

/// How long a listener waits after a failed accept before it accepts again.
pub(crate) const ACCEPT_RETRY: Duration = Duration::from_millis(50);

/// The next connection on `listener` and its peer. A failed accept is logged, naming the
/// listener (`what`), and tried again after [`ACCEPT_RETRY`].
///
/// # Cancel safety
/// Cancel safe: a connection is taken only when the future completes.
pub(crate) async fn next(listener: &TcpListener, what: &str) -> (TcpStream, SocketAddr) {
    loop {
        match listener.accept().await {
            Ok(accepted) => return accepted,
            Err(error) => {
                tracing::warn!("{what}: accepting a connection: {error}");
                tokio::time::sleep(ACCEPT_RETRY).await;
            }
        }
    }
}

/// Serves plain HTTP/1.1 on `listener` until the task running it is dropped: each request is
/// answered by `respond`, given its path. For small answers computed in place (probes, the
/// metrics text); a head that takes longer than hyper's default 30 s closes its connection.
pub(crate) async fn serve_plain<F>(listener: TcpListener, what: &'static str, respond: F)
where
    F: Fn(&str) -> Response<Full<Bytes>> + Clone + Send + Sync + 'static,
{
    loop {
        let (stream, peer) = next(&listener, what).await;
        let respond = respond.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request: http::Request<Incoming>| {
                std::future::ready(Ok::<_, Infallible>(respond(request.uri().path())))
            });
            if let Err(error) = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                tracing::debug!(%peer, "{what}: connection ended: {error}");
            }
        });
    }
}
