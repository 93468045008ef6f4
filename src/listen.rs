//! Accepting connections, written once for every listener of the crate: the webhook server's
//! HTTPS listener, its probes and the metrics exporter.
//!
//! An accept can fail for reasons that pass (out of file descriptors until a connection closes
//! elsewhere, a connection reset before it was taken): every listener logs the failure, pauses
//! [`ACCEPT_RETRY`] so that it does not spin on the error, and accepts again.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use http::header::ALLOW;
use http::{HeaderValue, Method, Response, StatusCode};
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};

/// The answer to a method other than `GET` or `HEAD` on a plain listener.
fn only_get() -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from_static(
        b"only GET and HEAD are allowed\n",
    )));
    *response.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
    response
        .headers_mut()
        .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
    response
}

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

/// Serves plain HTTP/1.1 on `listener` until the task running it is dropped: each `GET` (or
/// `HEAD`) is answered by `respond`, given its path, and any other method 405. For small
/// answers computed in place (probes, the metrics text), which only ever read; a head that
/// takes longer than hyper's default 30 s closes its connection.
pub(crate) async fn serve_plain<F>(listener: TcpListener, what: &'static str, respond: F)
where
    F: Fn(&str) -> Response<Full<Bytes>> + Clone + Send + Sync + 'static,
{
    loop {
        let (stream, peer) = next(&listener, what).await;
        let respond = respond.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request: http::Request<Incoming>| {
                let response = match *request.method() {
                    Method::GET | Method::HEAD => respond(request.uri().path()),
                    _ => only_get(),
                };
                std::future::ready(Ok::<_, Infallible>(response))
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
