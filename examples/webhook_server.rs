//! A `dexaflow.io/admission/v1` webhook server in a few dozen lines (ADR 0100 §8): it admits,
//! changes, holds and refuses by tenant, over TLS with a certificate it makes at start and writes
//! to `--ca-out` for clients to trust (their `ca_bundle`).
//!
//! ```sh
//! cargo run --example webhook_server -- --listen 127.0.0.1:8443 --ca-out target/webhook-ca.pem
//! cargo run -- dispatch --config examples/webhook.yaml --workload examples/workload.yaml
//! ```

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use dexaflow_admission::admission::{AnswerEnvelope, Changes, Decision, RequestEnvelope};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::service::service_fn;
use hyper::{Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use rustls::pki_types::PrivateKeyDer;

/// How long after start the `finance` tenant is held (a quarter-end freeze).
const FREEZE: Duration = Duration::from_secs(3);

#[derive(Debug, Parser)]
struct Args {
    /// Where to listen.
    #[arg(long, default_value = "127.0.0.1:8443")]
    listen: SocketAddr,
    /// Where to write the server's certificate, for clients to trust.
    #[arg(long, default_value = "target/webhook-ca.pem")]
    ca_out: PathBuf,
    /// How long to wait before each answer, standing for the work a real webhook does.
    #[arg(long, default_value = "0s", value_parser = humantime::parse_duration)]
    delay: Duration,
    /// Offer HTTP/1.1 only (by default HTTP/2 too, which clients prefer), to compare the two.
    #[arg(long)]
    http1_only: bool,
}

/// The answer to one call, by tenant.
pub fn answer(call: RequestEnvelope, started: Instant) -> AnswerEnvelope {
    let decision = match call.request.tenant.as_str() {
        "gpu-lab" => {
            let mut changes = Changes::default();
            changes.node_selector.insert("pool".into(), "gpu".into());
            changes.labels.insert("team".into(), "gpu-lab".into());
            Decision::AdmitWith(changes)
        }
        "finance" if started.elapsed() < FREEZE => {
            Decision::Hold("quarter-end close: deploys frozen".into())
        }
        "umbrella" => Decision::Refuse("tenant umbrella is suspended for unpaid invoices".into()),
        _ => Decision::Admit,
    };
    AnswerEnvelope::new(call.uid, decision)
}

async fn handle(
    request: hyper::Request<Incoming>,
    delay: Duration,
    started: Instant,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let body = Limited::new(request.into_body(), 1 << 20).collect().await;
    let call = body
        .ok()
        .and_then(|body| serde_json::from_slice(&body.to_bytes()).ok());
    let (status, json) = match call {
        Some(call) => {
            tokio::time::sleep(delay).await;
            (StatusCode::OK, serde_json::to_vec(&answer(call, started)))
        }
        None => (
            StatusCode::BAD_REQUEST,
            serde_json::to_vec(&"not a request"),
        ),
    };
    let response = Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(json.unwrap_or_default())));
    Ok(response.unwrap_or_default())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let made = rcgen::generate_simple_self_signed(["127.0.0.1".into(), "localhost".into()])?;
    std::fs::write(&args.ca_out, made.cert.pem())?;
    let key = PrivateKeyDer::Pkcs8(made.key_pair.serialize_der().into());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut tls = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(vec![made.cert.der().clone()], key)?;
    tls.alpn_protocols = if args.http1_only {
        vec![b"http/1.1".to_vec()]
    } else {
        vec![b"h2".to_vec(), b"http/1.1".to_vec()]
    };
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
    let listener = tokio::net::TcpListener::bind(args.listen).await?;
    let address = listener.local_addr()?;
    eprintln!(
        "https://{address}/admit (clients trust {})",
        args.ca_out.display()
    );
    let (delay, started) = (args.delay, Instant::now());
    loop {
        let (tcp, _) = listener.accept().await?;
        // An answer is a few small writes: send each at once rather than wait for an ACK.
        tcp.set_nodelay(true)?;
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            let Ok(tls) = acceptor.accept(tcp).await else {
                return;
            };
            let service = service_fn(move |request| handle(request, delay, started));
            let connection = auto::Builder::new(TokioExecutor::new());
            let _closed = connection
                .serve_connection(TokioIo::new(tls), service)
                .await;
        });
    }
}
