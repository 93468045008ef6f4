//! An open-loop HTTPS client at a fixed rate, for the README's latency figures where `wrk2` is
//! not installed: each request is due at its own time (the start plus its index over the rate),
//! and its latency runs from when it was due, so that a stall shows in the figures instead of
//! delaying the requests after it. Requests are spread over `--connections` kept-alive
//! HTTP/1.1 connections, each sending its share in turn; a connection still busy when its next
//! request falls due sends it late, and that lateness is counted. When a connection sleeps until
//! a request is due, the latency runs from when it woke, so that the client's own timer (1 ms
//! steps) is not counted against the server.
//!
//! ```sh
//! cargo run --release --example rate_client -- --url https://localhost:8443/tasks/admit \
//!   --ca target/serve-tls/tls.crt --body target/admit.json --rate 1000 --duration 30s
//! ```

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::{Request, Uri};
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::time::Instant;

#[derive(Debug, Parser)]
struct Args {
    /// The https URL to POST to.
    #[arg(long)]
    url: Uri,
    /// The CA bundle the server's certificate chains to, PEM.
    #[arg(long)]
    ca: PathBuf,
    /// The JSON body of every request.
    #[arg(long)]
    body: PathBuf,
    /// Requests per second.
    #[arg(long, default_value_t = 1000.0)]
    rate: f64,
    /// How long to send.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    duration: Duration,
    /// Kept-alive connections the requests are spread over.
    #[arg(long, default_value_t = 16)]
    connections: usize,
}

/// One connection's share: requests `first`, `first + every`, ... due before `end`.
async fn connection(
    args: Arc<Args>,
    tls: tokio_rustls::TlsConnector,
    body: Bytes,
    start: Instant,
    first: usize,
) -> Result<(Vec<Duration>, usize), Box<dyn std::error::Error + Send + Sync>> {
    let host = args.url.host().ok_or("the URL has no host")?.to_owned();
    let port = args.url.port_u16().unwrap_or(443);
    let tcp = tokio::net::TcpStream::connect((host.as_str(), port)).await?;
    tcp.set_nodelay(true)?;
    let stream = tls
        .connect(ServerName::try_from(host.clone())?, tcp)
        .await?;
    let (mut sender, driver) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(driver);
    let interval = Duration::from_secs_f64(1.0 / args.rate);
    let (mut latencies, mut failed) = (Vec::new(), 0);
    let mut index = first;
    loop {
        let due = start + interval.mul_f64(index as f64);
        if due >= start + args.duration {
            return Ok((latencies, failed));
        }
        let from = if Instant::now() < due {
            tokio::time::sleep_until(due).await;
            Instant::now()
        } else {
            due
        };
        let request = Request::post(args.url.path())
            .header(hyper::header::HOST, host.as_str())
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .body(Full::new(body.clone()))?;
        let response = sender.send_request(request).await?;
        let ok = response.status().is_success();
        response.into_body().collect().await?;
        latencies.push(from.elapsed());
        failed += usize::from(!ok);
        index += args.connections;
    }
}

fn at(sorted: &[Duration], quantile: f64) -> Duration {
    let rank = ((sorted.len() as f64 * quantile).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let args = Arc::new(Args::parse());
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(&args.ca)? {
        roots.add(cert?)?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config));
    let body = Bytes::from(std::fs::read(&args.body)?);
    // Connections are opened before the clock starts, so that handshakes are not counted.
    let start = Instant::now() + Duration::from_millis(200);
    let tasks: Vec<_> = (0..args.connections)
        .map(|first| {
            tokio::spawn(connection(
                Arc::clone(&args),
                tls.clone(),
                body.clone(),
                start,
                first,
            ))
        })
        .collect();
    let (mut all, mut failed) = (Vec::new(), 0);
    for task in tasks {
        let (latencies, failures) = task.await??;
        all.extend(latencies);
        failed += failures;
    }
    if all.is_empty() {
        return Err("no request was sent".into());
    }
    all.sort_unstable();
    println!(
        "{} requests at {}/s over {:?} ({} not 2xx): p50 {:?}  p99 {:?}  p99.9 {:?}  max {:?}",
        all.len(),
        args.rate,
        args.duration,
        failed,
        at(&all, 0.5),
        at(&all, 0.99),
        at(&all, 0.999),
        all[all.len() - 1]
    );
    Ok(())
}
