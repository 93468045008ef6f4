//! A real webhook server on 127.0.0.1 for the webhook tests: HTTPS (HTTP/1.1 and HTTP/2) with
//! certificates made at start, or plain HTTP; it records every request and answers from a
//! handler the test gives.
//!
//! A module of the `it` test binary, and compiled again by `#[path]` into other binaries (the
//! tests of their own in `tests/`, a bench), each of which uses only part of it, so items unused
//! there would warn; the allow below is for that and nothing else.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use dexaflow_admission::admission::{AnswerEnvelope, Decision, RequestEnvelope};
use dexaflow_admission::hooks::WebhookSpec;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Bytes, Frame, Incoming};
use hyper::header::HeaderMap;
use hyper::service::service_fn;
use hyper::{Method, Response, StatusCode, Uri, Version};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
use rustls::RootCertStore;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use tempfile::TempDir;
use tokio::sync::oneshot;

/// Certificates for one test, as PEM files in a temporary directory: a CA and a server
/// certificate it signed (for 127.0.0.1 and localhost), a client CA and a client certificate it
/// signed, and a CA that signed nothing the server presents.
pub struct Certs {
    /// Holds the files; removed when the certificates are dropped.
    pub dir: TempDir,
    /// The CA that signed the server's certificate: what a client's `ca_bundle` names.
    pub ca: PathBuf,
    /// A CA that signed nothing the server presents.
    pub other_ca: PathBuf,
    /// The client certificate, signed by the client CA the server requires under mutual TLS.
    pub client_cert: PathBuf,
    /// Its key.
    pub client_key: PathBuf,
    server_chain: Vec<CertificateDer<'static>>,
    server_key: Vec<u8>,
    client_ca: CertificateDer<'static>,
}

/// A CA: its certificate and key.
struct Authority {
    cert: rcgen::Certificate,
    key: KeyPair,
}

fn authority(name: &str) -> Authority {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("no names is valid");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name);
    let key = KeyPair::generate().expect("a key pair");
    let cert = params.self_signed(&key).expect("a CA certificate");
    Authority { cert, key }
}

fn leaf(names: &[&str], issuer: &Authority) -> (rcgen::Certificate, KeyPair) {
    let names: Vec<String> = names.iter().map(|name| (*name).to_owned()).collect();
    let params = CertificateParams::new(names).expect("valid names");
    let key = KeyPair::generate().expect("a key pair");
    let cert = params
        .signed_by(&key, &issuer.cert, &issuer.key)
        .expect("a signed certificate");
    (cert, key)
}

impl Certs {
    /// Makes every certificate and writes the PEM files a client reads.
    pub fn new() -> Certs {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let ca = authority("webhook test CA");
        let other = authority("another CA");
        let client_ca = authority("webhook test client CA");
        let (server, server_key) = leaf(&["127.0.0.1", "localhost"], &ca);
        let (client, client_key) = leaf(&["dexaflow-admission"], &client_ca);
        let write = |name: &str, pem: String| {
            let path = dir.path().join(name);
            std::fs::write(&path, pem).expect("writes a PEM file");
            path
        };
        Certs {
            ca: write("ca.pem", ca.cert.pem()),
            other_ca: write("other-ca.pem", other.cert.pem()),
            client_cert: write("client.pem", client.pem()),
            client_key: write("client-key.pem", client_key.serialize_pem()),
            server_chain: vec![server.der().clone(), ca.cert.der().clone()],
            server_key: server_key.serialize_der(),
            client_ca: client_ca.cert.der().clone(),
            dir,
        }
    }

    /// A webhook named `webhook` at `url` that trusts the server's CA.
    pub fn webhook(&self, url: &str) -> WebhookSpec {
        WebhookSpec {
            ca_bundle: Some(self.ca.clone()),
            ..WebhookSpec::new("webhook", url)
        }
    }
}

/// How the server talks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// HTTPS, offering HTTP/2 and HTTP/1.1.
    Tls,
    /// HTTPS that requires a client certificate signed by the client CA.
    MutualTls,
    /// Plain HTTP.
    Plain,
}

/// One request the server received.
#[derive(Debug, Clone)]
pub struct Seen {
    /// The method.
    pub method: Method,
    /// The request target, with its query.
    pub uri: Uri,
    /// HTTP/1.1 or HTTP/2.
    pub version: Version,
    /// The headers.
    pub headers: HeaderMap,
    /// The body.
    pub body: Bytes,
    /// Which accepted connection it came on, counting from 0.
    pub connection: usize,
}

impl Seen {
    /// The body as the request envelope it should be.
    pub fn envelope(&self) -> RequestEnvelope {
        serde_json::from_slice(&self.body).expect("the client sends a request envelope")
    }
}

/// What the server answers.
pub enum Reply {
    /// `status` with this `Content-Type` (none when `None`), extra headers and body.
    Raw {
        /// The status.
        status: StatusCode,
        /// The `Content-Type`.
        content_type: Option<&'static str>,
        /// More headers, such as `Location`.
        headers: Vec<(&'static str, String)>,
        /// The body.
        body: Vec<u8>,
    },
    /// 200, `application/json`, a body that never ends, in chunks of 16 KiB without a
    /// `Content-Length`.
    Endless,
    /// No answer at all, ever.
    Never,
}

impl Reply {
    /// 200, `application/json`, `value` as the body.
    pub fn json(value: impl serde::Serialize) -> Reply {
        Reply::Raw {
            status: StatusCode::OK,
            content_type: Some("application/json"),
            headers: Vec::new(),
            body: serde_json::to_vec(&value).expect("encodes"),
        }
    }

    /// The answer to the request `seen` carrying `decision`.
    pub fn decision(seen: &Seen, decision: Decision) -> Reply {
        Reply::json(AnswerEnvelope::new(seen.envelope().uid, decision))
    }
}

/// What the server does with each request.
pub type Handler = Arc<dyn Fn(&Seen) -> Reply + Send + Sync>;

/// A handler that answers every request with `decide`'s decision for it.
pub fn deciding(decide: impl Fn(&RequestEnvelope) -> Decision + Send + Sync + 'static) -> Handler {
    Arc::new(move |seen: &Seen| Reply::decision(seen, decide(&seen.envelope())))
}

/// A running server; stopped when dropped.
pub struct Server {
    /// Where it listens.
    pub address: SocketAddr,
    transport: Transport,
    seen: Arc<Mutex<Vec<Seen>>>,
    connections: Arc<AtomicUsize>,
    _stop: oneshot::Sender<()>,
}

impl Server {
    /// Starts a server on 127.0.0.1 (a free port) on a thread of its own.
    pub fn start(certs: &Certs, transport: Transport, handler: Handler) -> Server {
        let acceptor = match transport {
            Transport::Plain => None,
            Transport::Tls | Transport::MutualTls => Some(tls_acceptor(certs, transport)),
        };
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
        listener.set_nonblocking(true).expect("non-blocking");
        let address = listener.local_addr().expect("bound");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let connections = Arc::new(AtomicUsize::new(0));
        let (stop, stopped) = oneshot::channel();
        let (record, counter) = (Arc::clone(&seen), Arc::clone(&connections));
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime");
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).expect("tokio listener");
                tokio::select! {
                    _ = stopped => {}
                    () = accept(listener, acceptor, handler, record, counter) => {}
                }
            });
        });
        Server {
            address,
            transport,
            seen,
            connections,
            _stop: stop,
        }
    }

    /// The URL of its `/admit` path.
    pub fn url(&self) -> String {
        let scheme = match self.transport {
            Transport::Plain => "http",
            Transport::Tls | Transport::MutualTls => "https",
        };
        format!("{scheme}://{}/admit", self.address)
    }

    /// Every request received so far, in order.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen
            .lock()
            .expect("no panic holding the record")
            .clone()
    }

    /// How many connections were accepted (TLS handshakes included, done or not).
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

fn tls_acceptor(certs: &Certs, transport: Transport) -> tokio_rustls::TlsAcceptor {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .expect("TLS versions");
    let builder = if transport == Transport::MutualTls {
        let mut roots = RootCertStore::empty();
        roots
            .add(certs.client_ca.clone())
            .expect("a CA certificate");
        let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
            .expect("a client verifier");
        builder.with_client_cert_verifier(verifier)
    } else {
        builder.with_no_client_auth()
    };
    let key = PrivateKeyDer::Pkcs8(certs.server_key.clone().into());
    let mut config = builder
        .with_single_cert(certs.server_chain.clone(), key)
        .expect("a server certificate");
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    tokio_rustls::TlsAcceptor::from(Arc::new(config))
}

async fn accept(
    listener: tokio::net::TcpListener,
    acceptor: Option<tokio_rustls::TlsAcceptor>,
    handler: Handler,
    seen: Arc<Mutex<Vec<Seen>>>,
    connections: Arc<AtomicUsize>,
) {
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            continue;
        };
        // As a real server should: answers are not held back waiting for an ACK.
        let _ = tcp.set_nodelay(true);
        let connection = connections.fetch_add(1, Ordering::SeqCst);
        let (acceptor, handler, seen) = (acceptor.clone(), Arc::clone(&handler), Arc::clone(&seen));
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                respond(request, connection, Arc::clone(&handler), Arc::clone(&seen))
            });
            let builder = auto::Builder::new(TokioExecutor::new());
            let _closed = match acceptor {
                Some(acceptor) => match acceptor.accept(tcp).await {
                    Ok(tls) => builder.serve_connection(TokioIo::new(tls), service).await,
                    Err(_) => return,
                },
                None => builder.serve_connection(TokioIo::new(tcp), service).await,
            };
        });
    }
}

type Outgoing = Response<http_body_util::combinators::BoxBody<Bytes, Infallible>>;

async fn respond(
    request: hyper::Request<Incoming>,
    connection: usize,
    handler: Handler,
    seen: Arc<Mutex<Vec<Seen>>>,
) -> Result<Outgoing, Infallible> {
    let (parts, body) = request.into_parts();
    let body = body
        .collect()
        .await
        .map(|body| body.to_bytes())
        .unwrap_or_default();
    let request = Seen {
        method: parts.method,
        uri: parts.uri,
        version: parts.version,
        headers: parts.headers,
        body,
        connection,
    };
    seen.lock()
        .expect("no panic holding the record")
        .push(request.clone());
    let reply = handler(&request);
    let response = match reply {
        Reply::Never => std::future::pending().await,
        Reply::Endless => Response::builder()
            .header("content-type", "application/json")
            .body(Endless.boxed()),
        Reply::Raw {
            status,
            content_type,
            headers,
            body,
        } => {
            let mut response = Response::builder().status(status);
            if let Some(content_type) = content_type {
                response = response.header("content-type", content_type);
            }
            for (name, value) in headers {
                response = response.header(name, value);
            }
            response.body(Full::new(Bytes::from(body)).boxed())
        }
    };
    Ok(response.expect("a valid response"))
}

/// A body of 16 KiB chunks that never ends, with no size known in advance.
struct Endless;

impl Body for Endless {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Poll::Ready(Some(Ok(Frame::data(Bytes::from(vec![b' '; 16 * 1024])))))
    }
}

/// Answers from a script, one reply per request, then `then` for every later one.
pub fn scripted(replies: Vec<Handler>, then: Handler) -> Handler {
    let replies = Mutex::new(VecDeque::from(replies));
    Arc::new(move |seen: &Seen| {
        let next = replies
            .lock()
            .expect("no panic holding the script")
            .pop_front();
        next.unwrap_or_else(|| Arc::clone(&then))(seen)
    })
}
