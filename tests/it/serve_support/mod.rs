//! What the `serve_*` tests share: certificates made in the test, a server on 127.0.0.1 port
//! 0, and a real HTTPS client (hyper over rustls).

// A module of `it`, and compiled again by `#[path]` into the binaries of their own in `tests/`,
// each of which uses only its own part of it.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::processes;

use dexaflow_admission::events::{
    ClusterEvents, Ignore, RequestOutcome, ServerEvents, ServiceEvents, WatchedFile,
};
use dexaflow_admission::metrics::ServerMetrics;
use dexaflow_admission::serve::{Server, ServerBuilder, Settings, TlsFiles};
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Bytes};
use hyper_util::rt::TokioIo;
use metrics_exporter_prometheus::PrometheusRecorder;
use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair, SanType};
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::Value;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

/// A CA that signs serving certificates, so that a client trusting it accepts every one.
pub struct Authority {
    key: KeyPair,
    cert: rcgen::Certificate,
}

/// A serving certificate and its key, as PEM.
pub struct Pair {
    pub cert_pem: String,
    pub key_pem: String,
    pub der: CertificateDer<'static>,
}

impl Authority {
    pub fn new() -> Authority {
        let key = KeyPair::generate().expect("a key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let cert = params.self_signed(&key).expect("a CA certificate");
        Authority { key, cert }
    }

    /// A certificate for `localhost` and 127.0.0.1.
    pub fn issue(&self) -> Pair {
        let key = KeyPair::generate().expect("a key");
        let mut params = CertificateParams::new(vec!["localhost".to_owned()]).expect("params");
        params
            .subject_alt_names
            .push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
        let cert = params
            .signed_by(&key, &self.cert, &self.key)
            .expect("a signed certificate");
        Pair {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            der: cert.der().clone(),
        }
    }

    /// The CA certificate as PEM.
    pub fn pem(&self) -> String {
        self.cert.pem()
    }

    pub fn der(&self) -> CertificateDer<'static> {
        self.cert.der().clone()
    }
}

/// The `execution.admission.hooks` the served `/tasks/admit` tests run: gpu-lab placed on the
/// GPU pool, finance frozen for ten minutes, umbrella refused.
pub const SERVED_HOOKS: &str = "execution:
  admission:
    hooks:
      - type: placement
        name: gpu-placement
        groups:
          - match: {tenants: [gpu-lab]}
            set: {node_selector: {pool: gpu}}
      - type: freeze
        name: finance-freeze
        tenants: [finance]
        after: 0s
        for: 10m
        reason: quarter-end close
      - type: deny
        name: suspended-tenants
        match: {tenants: [umbrella]}
        reason: tenant umbrella is suspended for unpaid invoices
";

impl Pair {
    /// Writes `tls.crt` and `tls.key` into `dir`.
    pub fn write_to(&self, dir: &Path) -> TlsFiles {
        std::fs::write(dir.join("tls.crt"), &self.cert_pem).expect("write the certificate");
        std::fs::write(dir.join("tls.key"), &self.key_pem).expect("write the key");
        TlsFiles {
            cert_file: dir.join("tls.crt"),
            key_file: dir.join("tls.key"),
        }
    }

    /// Lays out `dir` as the kubelet mounts a Secret holding this pair: `tls.crt ->
    /// ..data/tls.crt`, `..data -> <version>`, the files in the versioned directory. Mounting
    /// a second pair with another version swaps both files in one rename, so that a reader never
    /// sees one file of each pair.
    pub fn mount_as_secret(&self, dir: &Path, version: &str) -> TlsFiles {
        let versioned = dir.join(version);
        std::fs::create_dir(&versioned).expect("a versioned directory");
        self.write_to(&versioned);
        let staging = dir.join("..data_tmp");
        std::os::unix::fs::symlink(version, &staging).expect("a symlink");
        // The atomic swap the kubelet makes.
        std::fs::rename(&staging, dir.join("..data")).expect("swap ..data");
        for name in ["tls.crt", "tls.key"] {
            let link = dir.join(name);
            if std::fs::symlink_metadata(&link).is_err() {
                std::os::unix::fs::symlink(Path::new("..data").join(name), &link)
                    .expect("a symlink");
            }
        }
        TlsFiles {
            cert_file: dir.join("tls.crt"),
            key_file: dir.join("tls.key"),
        }
    }
}

/// Settings for a server on 127.0.0.1 port 0, with a probe listener, for the given files.
pub fn settings(tls: TlsFiles) -> Settings {
    Settings {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        probe_listen: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
        ..Settings::new(tls)
    }
}

/// A running server and what the test needs to talk to it.
pub struct Running {
    pub server: Server,
    pub client: Client,
    pub dir: tempfile::TempDir,
    pub authority: Authority,
}

/// Starts a server through the front door with the built-in services, `extra` applied to the
/// builder (hooks, services, the enabled paths), its metrics in `recorder` when given (so that
/// the test can read them), observed by nobody otherwise.
pub async fn start_with(
    configure: impl FnOnce(&mut Settings, &Path),
    extra: impl FnOnce(ServerBuilder) -> ServerBuilder,
    recorder: Option<&Arc<PrometheusRecorder>>,
) -> Running {
    let events: Arc<dyn ServerEvents> = match recorder {
        Some(recorder) => Arc::new(UnderRecorder::register(Arc::clone(recorder))),
        None => Arc::new(Ignore),
    };
    start_observed(configure, extra, events).await
}

/// Starts a server through the front door with the built-in services, `extra` applied to the
/// builder, observed by `events`.
pub async fn start_observed(
    configure: impl FnOnce(&mut Settings, &Path),
    extra: impl FnOnce(ServerBuilder) -> ServerBuilder,
    events: Arc<dyn ServerEvents>,
) -> Running {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let authority = Authority::new();
    let files = authority.issue().write_to(dir.path());
    let mut settings = settings(files);
    configure(&mut settings, dir.path());
    let server = extra(Server::builder(settings).events(events))
        .start()
        .await
        .expect("the server starts");
    let client = Client::new(server.local_addr(), &authority.der());
    Running {
        server,
        client,
        dir,
        authority,
    }
}

/// The server's own metrics, kept in a test's recorder rather than the process-wide one: the
/// handles of each service are made when the server routes, so under the recorder from then
/// on too.
struct UnderRecorder {
    recorder: Arc<PrometheusRecorder>,
    metrics: ServerMetrics,
}

impl UnderRecorder {
    fn register(recorder: Arc<PrometheusRecorder>) -> UnderRecorder {
        let metrics = metrics::with_local_recorder(recorder.as_ref(), ServerMetrics::register);
        UnderRecorder { recorder, metrics }
    }
}

impl ClusterEvents for UnderRecorder {
    fn cache_synced(&self, resource: &str) {
        metrics::with_local_recorder(self.recorder.as_ref(), || {
            self.metrics.cache_synced(resource)
        });
    }

    fn cache_updated(&self, resource: &str) {
        metrics::with_local_recorder(self.recorder.as_ref(), || {
            self.metrics.cache_updated(resource)
        });
    }

    fn watch_failed(&self, resource: &str) {
        metrics::with_local_recorder(self.recorder.as_ref(), || {
            self.metrics.watch_failed(resource)
        });
    }
}

impl ServerEvents for UnderRecorder {
    fn service(&self, path: &str) -> Arc<dyn ServiceEvents> {
        metrics::with_local_recorder(self.recorder.as_ref(), || self.metrics.service(path))
    }

    fn request_not_found(&self) {
        self.metrics.request_not_found();
    }

    fn connection_opened(&self) {
        self.metrics.connection_opened();
    }

    fn connection_closed(&self) {
        self.metrics.connection_closed();
    }

    fn connection_waited(&self) {
        self.metrics.connection_waited();
    }

    fn reloaded(&self, file: WatchedFile, ok: bool) {
        self.metrics.reloaded(file, ok);
    }
}

/// Starts a server with the built-in services and default settings.
pub async fn start() -> Running {
    start_with(|_, _| {}, |registry| registry, None).await
}

/// A real HTTPS client: a new TLS connection per request, trusting one CA.
#[derive(Clone)]
pub struct Client {
    address: SocketAddr,
    connector: TlsConnector,
    // The same, offering only HTTP/2 (ALPN `h2`).
    http2: TlsConnector,
}

/// An answer as the client saw it.
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub headers: http::HeaderMap,
    pub body: Bytes,
    /// The certificate the server presented.
    pub certificate: CertificateDer<'static>,
}

impl Answer {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|error| panic!("not JSON ({error}): {:?}", self.body))
    }

    /// Asserts that the answer is a JSON error with `status` whose message contains `words`.
    pub fn assert_error(&self, status: StatusCode, words: &str) {
        assert_eq!(self.status, status, "{:?}", self.body);
        assert_eq!(self.content_type(), "application/json");
        let json = self.json();
        let message = json["error"].as_str().unwrap_or_default();
        assert!(message.contains(words), "{message:?} should say {words:?}");
    }

    pub fn content_type(&self) -> &str {
        self.headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .unwrap_or("")
    }
}

impl Client {
    pub fn new(address: SocketAddr, ca: &CertificateDer<'static>) -> Client {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(ca.clone()).expect("the CA");
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
        // Every request a full handshake, so that the certificate seen is the one served now
        // (a resumed session shows the certificate of the session it resumes).
        config.resumption = rustls::client::Resumption::disabled();
        let mut http2 = config.clone();
        http2.alpn_protocols = vec![b"h2".to_vec()];
        Client {
            address,
            connector: TlsConnector::from(Arc::new(config)),
            http2: TlsConnector::from(Arc::new(http2)),
        }
    }

    /// A TLS handshake with the server that may fail: the client's own address (as the
    /// server sees it) and the outcome.
    pub async fn try_connect(
        &self,
    ) -> (
        SocketAddr,
        std::io::Result<tokio_rustls::client::TlsStream<TcpStream>>,
    ) {
        let tcp = TcpStream::connect(self.address).await.expect("connect");
        let local = tcp.local_addr().expect("a local address");
        let name = ServerName::try_from("localhost").expect("a name");
        (local, self.connector.connect(name, tcp).await)
    }

    /// A new TLS connection to the server.
    pub async fn connect(&self) -> tokio_rustls::client::TlsStream<TcpStream> {
        let tcp = TcpStream::connect(self.address).await.expect("connect");
        self.connector
            .connect(ServerName::try_from("localhost").expect("a name"), tcp)
            .await
            .expect("a TLS handshake")
    }

    /// Sends `request` over a new connection and reads the whole answer.
    pub async fn send<B>(&self, request: Request<B>) -> Answer
    where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: std::error::Error + Send + Sync + 'static,
    {
        let tls = self.connect().await;
        let certificate = tls.get_ref().1.peer_certificates().expect("a certificate")[0].clone();
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .expect("an HTTP/1.1 handshake");
        tokio::spawn(connection);
        let response: Response<hyper::body::Incoming> =
            sender.send_request(request).await.expect("an answer");
        let (parts, body) = response.into_parts();
        let body = body.collect().await.expect("the whole body").to_bytes();
        Answer {
            status: parts.status,
            headers: parts.headers,
            body,
            certificate,
        }
    }

    /// Sends `request` over a new HTTP/2 connection and reads the whole answer; the error when
    /// the stream carrying it fails.
    pub async fn send_http2<B>(&self, request: Request<B>) -> Result<Answer, hyper::Error>
    where
        B: Body<Data = Bytes> + Send + Unpin + 'static,
        B::Error: std::error::Error + Send + Sync + 'static,
    {
        let tcp = TcpStream::connect(self.address).await.expect("connect");
        let name = ServerName::try_from("localhost").expect("a name");
        let tls = self
            .http2
            .connect(name, tcp)
            .await
            .expect("a TLS handshake");
        let certificate = tls.get_ref().1.peer_certificates().expect("a certificate")[0].clone();
        let (mut sender, connection) = hyper::client::conn::http2::handshake(
            hyper_util::rt::TokioExecutor::new(),
            TokioIo::new(tls),
        )
        .await
        .expect("an HTTP/2 handshake");
        tokio::spawn(connection);
        let response = sender.send_request(request).await?;
        let (parts, body) = response.into_parts();
        let body = body.collect().await?.to_bytes();
        Ok(Answer {
            status: parts.status,
            headers: parts.headers,
            body,
            certificate,
        })
    }

    /// POSTs `body` as `application/json` to `path`.
    pub async fn post(&self, path: &str, body: impl Into<Bytes>) -> Answer {
        self.send(
            Request::post(path)
                .header(http::header::HOST, "localhost")
                .header(http::header::CONTENT_TYPE, "application/json")
                .body(Full::new(body.into()))
                .expect("a request"),
        )
        .await
    }

    /// POSTs `value` as JSON to `path`.
    pub async fn post_json(&self, path: &str, value: &Value) -> Answer {
        self.post(path, serde_json::to_vec(value).expect("JSON"))
            .await
    }
}

/// Repeats `check` until it returns `Some`, up to 20 s: for changes a file watch delivers.
pub async fn eventually<T, F: std::future::Future<Output = Option<T>>>(
    what: &str,
    mut check: impl FnMut() -> F,
) -> T {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "gave up waiting for {what}"
        );
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A plain-HTTP GET of `path` on `address` (the probe listener): its status.
pub async fn probe(address: SocketAddr, path: &str) -> Option<StatusCode> {
    get(address, path).await.map(|(status, _)| status)
}

/// A plain-HTTP GET of `path` on `address` (a probe listener, a metrics exporter): its status
/// and body.
pub async fn get(address: SocketAddr, path: &str) -> Option<(StatusCode, String)> {
    let tcp = TcpStream::connect(address).await.ok()?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
        .await
        .ok()?;
    tokio::spawn(connection);
    let request = Request::get(path)
        .header(http::header::HOST, "localhost")
        .body(http_body_util::Empty::<Bytes>::new())
        .ok()?;
    let response = sender.send_request(request).await.ok()?;
    let status = response.status();
    let body = response.into_body().collect().await.ok()?.to_bytes();
    Some((status, String::from_utf8_lossy(&body).into_owned()))
}

/// The value of `series` in a Prometheus scrape.
pub fn sample(scrape: &str, series: &str) -> Option<f64> {
    scrape.lines().find_map(|line| {
        let value = line.strip_prefix(series)?.strip_prefix(' ')?;
        value.parse().ok()
    })
}

/// An observer of the server that records what it is told, for a test that reads events
/// rather than metrics.
#[derive(Debug, Default)]
pub struct RecordingEvents {
    /// Every answered request: its service's path and outcome, in the order answered.
    answered: Arc<Mutex<Vec<(String, RequestOutcome)>>>,
    started: Arc<AtomicUsize>,
    abandoned: Arc<AtomicUsize>,
    not_found: AtomicUsize,
    opened: AtomicUsize,
    closed: AtomicUsize,
    reloads: Mutex<Vec<(WatchedFile, bool)>>,
}

/// Counts for [`RecordingEvents`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counted {
    pub started: usize,
    pub abandoned: usize,
    pub not_found: usize,
    pub opened: usize,
    pub closed: usize,
}

impl RecordingEvents {
    /// The answered requests so far: `(service path, outcome)`.
    pub fn answered(&self) -> Vec<(String, RequestOutcome)> {
        self.answered.lock().expect("not poisoned").clone()
    }

    /// The reloads so far: which file, and whether it was taken in.
    pub fn reloads(&self) -> Vec<(WatchedFile, bool)> {
        self.reloads.lock().expect("not poisoned").clone()
    }

    pub fn counted(&self) -> Counted {
        Counted {
            started: self.started.load(Ordering::SeqCst),
            abandoned: self.abandoned.load(Ordering::SeqCst),
            not_found: self.not_found.load(Ordering::SeqCst),
            opened: self.opened.load(Ordering::SeqCst),
            closed: self.closed.load(Ordering::SeqCst),
        }
    }
}

impl ClusterEvents for RecordingEvents {}

impl ServerEvents for RecordingEvents {
    fn service(&self, path: &str) -> Arc<dyn ServiceEvents> {
        Arc::new(RecordingService {
            path: path.to_owned(),
            answered: Arc::clone(&self.answered),
            started: Arc::clone(&self.started),
            abandoned: Arc::clone(&self.abandoned),
        })
    }

    fn request_not_found(&self) {
        self.not_found.fetch_add(1, Ordering::SeqCst);
    }

    fn connection_opened(&self) {
        self.opened.fetch_add(1, Ordering::SeqCst);
    }

    fn connection_closed(&self) {
        self.closed.fetch_add(1, Ordering::SeqCst);
    }

    fn reloaded(&self, file: WatchedFile, ok: bool) {
        self.reloads.lock().expect("not poisoned").push((file, ok));
    }
}

/// One service's part of [`RecordingEvents`].
struct RecordingService {
    path: String,
    answered: Arc<Mutex<Vec<(String, RequestOutcome)>>>,
    started: Arc<AtomicUsize>,
    abandoned: Arc<AtomicUsize>,
}

impl ServiceEvents for RecordingService {
    fn request_started(&self) {
        self.started.fetch_add(1, Ordering::SeqCst);
    }

    fn request_answered(&self, outcome: RequestOutcome, _elapsed: Duration) {
        self.answered
            .lock()
            .expect("not poisoned")
            .push((self.path.clone(), outcome));
    }

    fn request_abandoned(&self, _elapsed: Duration) {
        self.abandoned.fetch_add(1, Ordering::SeqCst);
    }
}

/// A Prometheus recorder of the test's own, with no exporter.
pub fn recorder() -> Arc<PrometheusRecorder> {
    Arc::new(metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder())
}

/// The directory a test keeps its files in.
pub fn path_in(dir: &tempfile::TempDir, name: &str) -> PathBuf {
    dir.path().join(name)
}

/// The `serve` binary running, killed when dropped: the HTTPS address it printed first, and
/// what it writes to standard error, collected as it comes.
pub struct Serving {
    child: Child,
    /// The HTTPS address it printed, such as `127.0.0.1:41234`.
    pub address: String,
    stderr: Arc<Mutex<String>>,
}

impl Serving {
    /// Starts `serve --config <config>` with no environment but `PATH` (so that no
    /// `RUST_LOG` or `DEXAFLOW_` variable of the test's own reaches it) and waits for the
    /// address it prints once it serves.
    pub fn start(config: &Path) -> Serving {
        Serving::start_with_env(config, &[])
    }

    /// [`Serving::start`] with the variables `env` set.
    pub fn start_with_env(config: &Path, env: &[(&str, &str)]) -> Serving {
        let mut command = Command::new(env!("CARGO_BIN_EXE_dexaflow-admission"));
        command.env_clear();
        if let Some(path) = std::env::var_os("PATH") {
            command.env("PATH", path);
        }
        let mut child = command
            .envs(env.iter().copied())
            .arg("serve")
            .arg("--config")
            .arg(config)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start serve");
        let stderr = Arc::new(Mutex::new(String::new()));
        let lines = BufReader::new(child.stderr.take().expect("serve's stderr"));
        let collected = Arc::clone(&stderr);
        std::thread::spawn(move || {
            for line in lines.lines().map_while(Result::ok) {
                let mut collected = collected.lock().expect("the collector never panics");
                collected.push_str(&line);
                collected.push('\n');
            }
        });
        let mut first = String::new();
        BufReader::new(child.stdout.take().expect("serve's stdout"))
            .read_line(&mut first)
            .expect("read serve's stdout");
        let Some(address) = first.trim().strip_prefix("serving https://") else {
            let _ = child.kill();
            let _ = child.wait();
            let stderr = stderr.lock().expect("the collector never panics").clone();
            panic!("serve printed {first:?}, not its address; stderr: {stderr}");
        };
        Serving {
            address: address.to_owned(),
            child,
            stderr,
        }
    }

    /// Its process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Sends it `signal`.
    pub fn signal(&self, signal: rustix::process::Signal) {
        let pid = rustix::process::Pid::from_raw(i32::try_from(self.child.id()).expect("a pid"))
            .expect("a pid above 0");
        rustix::process::kill_process(pid, signal).expect("serve runs");
    }

    /// Waits up to 20 s for it to exit, and returns how it did.
    pub fn wait_for_exit(&mut self) -> std::process::ExitStatus {
        poll_serve(|| {
            self.child
                .try_wait()
                .expect("serve's status")
                .ok_or_else(|| format!("gave up waiting for serve to exit: {}", self.stderr()))
        })
    }

    /// Its HTTPS address.
    pub fn socket_addr(&self) -> SocketAddr {
        self.address.parse().expect("an address")
    }

    /// What it wrote to standard error so far.
    pub fn stderr(&self) -> String {
        self.stderr
            .lock()
            .expect("the collector never panics")
            .clone()
    }

    /// Waits up to 20 s for a line of standard error containing `words`, and returns it.
    pub fn wait_for_stderr(&self, words: &str) -> String {
        poll_serve(|| {
            let stderr = self.stderr();
            match stderr.lines().find(|line| line.contains(words)) {
                Some(line) => Ok(line.to_owned()),
                None => Err(format!(
                    "gave up waiting for {words:?} in serve's stderr: {stderr}"
                )),
            }
        })
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How long a wait on a `serve` process gives it before the test fails.
const SERVE_PATIENCE: Duration = Duration::from_secs(20);

/// [`processes::poll_until`] for a wait on a `serve` process: up to [`SERVE_PATIENCE`] from now,
/// 20 ms apart.
fn poll_serve<T>(check: impl FnMut() -> Result<T, String>) -> T {
    processes::poll_until(
        std::time::Instant::now() + SERVE_PATIENCE,
        Duration::from_millis(20),
        check,
    )
}
