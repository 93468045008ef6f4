//! The baseline of the README's load figures: a minimal hyper server that answers every request
//! with one fixed JSON body, over the same TLS as `serve` (rustls with the ring provider, the
//! same PEM files, HTTP/1.1 only, `TCP_NODELAY`) and with the same allocator, so that what
//! `serve` costs beyond it shows.
//!
//! ```sh
//! cargo run --release --example fixed_tls_server -- --listen 127.0.0.1:8444 \
//!   --cert target/serve-tls/tls.crt --key target/serve-tls/tls.key
//! ```

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use clap::Parser;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

// As `serve`'s binary does, so that the two differ by what `serve` does, not by the allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// What every request is answered: an admit of the size `/tasks/admit` sends.
const ANSWER: &str =
    r#"{"api_version":"dexaflow.io/admission/v1","uid":"8d0f3a1e","decision":"admit"}"#;

#[derive(Debug, Parser)]
struct Args {
    /// Where to listen.
    #[arg(long, default_value = "127.0.0.1:8444")]
    listen: SocketAddr,
    /// The certificate chain, PEM (the one `serve` uses).
    #[arg(long)]
    cert: PathBuf,
    /// Its private key, PEM.
    #[arg(long)]
    key: PathBuf,
}

async fn handle(request: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    // Read the body as `serve` does (bounded), then answer without looking at it.
    let _ = Limited::new(request.into_body(), 3 << 20).collect().await;
    let response = Response::builder()
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from_static(ANSWER.as_bytes())));
    Ok(response.unwrap_or_default())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let chain = CertificateDer::pem_file_iter(&args.cert)?.collect::<Result<Vec<_>, _>>()?;
    let key = PrivateKeyDer::from_pem_file(&args.key)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut tls = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(chain, key)?;
    tls.alpn_protocols = vec![b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
    let listener = tokio::net::TcpListener::bind(args.listen).await?;
    println!("serving https://{}", listener.local_addr()?);
    let builder = Arc::new(auto::Builder::new(TokioExecutor::new()).http1_only());
    loop {
        let (tcp, _) = listener.accept().await?;
        tcp.set_nodelay(true)?;
        let (acceptor, builder) = (acceptor.clone(), Arc::clone(&builder));
        tokio::spawn(async move {
            let Ok(tls) = acceptor.accept(tcp).await else {
                return;
            };
            let _closed = builder
                .serve_connection(TokioIo::new(tls), service_fn(handle))
                .await;
        });
    }
}
