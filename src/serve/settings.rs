//! The server's settings: plain values, read from the `server` section of the config file.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::ServeError;
use super::auth::BearerToken;
use super::{groups, reload, tls};
use crate::volcano::{FeatureGates, QueueSettings};

/// Everything `serve` needs to start, as plain values; the config reader fills it from the
/// `server` section, and tests build it directly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Where the HTTPS listener binds.
    pub listen: SocketAddr,
    /// Where the plain-HTTP `/healthz` and `/readyz` listener binds; `None` starts none.
    pub probe_listen: Option<SocketAddr>,
    /// The serving certificate chain and its key.
    pub tls: TlsFiles,
    /// The CA bundle client certificates must chain to; `None` asks for no client certificate.
    pub client_ca_file: Option<PathBuf>,
    /// The file holding the bearer token callers of `/tasks/admit` present. Read by the
    /// `/tasks/admit` service; the pod and DAG services, called by the API server, ignore it.
    pub bearer_token_file: Option<PathBuf>,
    /// The largest request body read; a larger one is answered 413 without being read whole.
    pub max_body_bytes: usize,
    /// The paths to serve; `None` serves every registered service that needs no cluster (the
    /// services that read queues or namespaces are served only when listed).
    pub enabled_admission: Option<Vec<String>>,
    /// Volcano's `AdmissionConfiguration` file with the resource groups `/pods/mutate`
    /// applies; `None` leaves every pod unchanged.
    pub resource_groups_file: Option<PathBuf>,
    /// The scheduler names whose pods `/pods/validate` checks (Volcano's rule).
    pub scheduler_names: Vec<String>,
    /// The users (`userInfo.username`) allowed to create pods with `dexaflow.io/` or
    /// `leoflow.io/` labels and annotations.
    pub trusted_users: Vec<String>,
    /// Whether HTTP/2 is offered; off by default since CVE-2023-44487 (rapid reset).
    pub http2: bool,
    /// How long requests in flight may take to finish once shutdown begins.
    pub shutdown_grace: Duration,
    /// How often watched files are re-read even when no change was reported: the fallback for
    /// file systems and mounts whose changes the watch does not see.
    pub poll_interval: Duration,
    /// The most connections served at once; past it a new connection waits, unanswered, until
    /// one closes. 0 is taken as 1.
    pub max_connections: usize,
    /// How long a connection may wait for a request's head: idle between requests, or a head
    /// arriving slowly. Past it the server closes the connection.
    pub idle_timeout: Duration,
    /// The threads connections are served on, each connection on one of them from its
    /// handshake to its close (the one serving the fewest when it was accepted), and the
    /// threads of the runtime the `serve` command builds for the rest (the accept loop, probes,
    /// reloads, the cluster's watches, HTTP/2's streams); `None` takes one per core (as the
    /// process may use them). A program that runs the server on a runtime of its own sizes
    /// that runtime itself; the connection threads follow this setting.
    pub worker_threads: Option<usize>,
    /// The kubeconfig file of the cluster Volcano's services read (queues, namespaces); `None`
    /// takes `KUBECONFIG` (as kubectl reads it: empty entries and missing files skipped),
    /// else the pod's service account. Read only when an enabled service reads the cluster.
    pub kubeconfig: Option<PathBuf>,
    /// Volcano's queue flags, with Volcano's defaults.
    pub volcano: QueueSettings,
    /// The Kubernetes feature gates that change a verdict of `/jobs/validate`, as Volcano's
    /// `--feature-gates` sets them.
    pub feature_gates: FeatureGates,
    /// What an error calls these settings, so that it names what its reader wrote.
    pub names: SettingNames,
}

/// What the server's errors call the settings they ask to change: [`Settings`]' field names by
/// default, the config file's keys (`server.listen`) when the config reader filled them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SettingNames {
    /// [`Settings::listen`].
    pub listen: &'static str,
    /// [`Settings::probe_listen`].
    pub probe_listen: &'static str,
    /// [`Settings::kubeconfig`].
    pub kubeconfig: &'static str,
    /// [`Settings::client_ca_file`].
    pub client_ca_file: &'static str,
    /// [`Settings::bearer_token_file`].
    pub bearer_token_file: &'static str,
    /// [`Settings::enabled_admission`].
    pub enabled_admission: &'static str,
}

impl Default for SettingNames {
    fn default() -> SettingNames {
        SettingNames {
            listen: "listen",
            probe_listen: "probe_listen",
            kubeconfig: "kubeconfig",
            client_ca_file: "client_ca_file",
            bearer_token_file: "bearer_token_file",
            enabled_admission: "enabled_admission",
        }
    }
}

/// A file [`Settings`] names, as [`Settings::check_files`] reports it: whoever read the
/// settings names its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SettingsFile {
    /// [`TlsFiles::cert_file`].
    Cert,
    /// [`TlsFiles::key_file`].
    Key,
    /// [`Settings::client_ca_file`].
    ClientCa,
    /// [`Settings::bearer_token_file`].
    BearerToken,
    /// [`Settings::resource_groups_file`].
    ResourceGroups,
}

/// The serving certificate's files, both PEM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The certificate chain, the server's own certificate first.
    pub cert_file: PathBuf,
    /// The private key (PKCS#8, PKCS#1 or SEC1).
    pub key_file: PathBuf,
}

impl Settings {
    /// The default listen address: loopback only, so that nothing is exposed by accident.
    pub const DEFAULT_LISTEN: SocketAddr = SocketAddr::V4(std::net::SocketAddrV4::new(
        std::net::Ipv4Addr::LOCALHOST,
        8443,
    ));
    /// The default body cap, 3 MiB: Volcano's, above etcd's 1.5 MiB object limit and the
    /// review around it.
    pub const DEFAULT_MAX_BODY_BYTES: usize = 3 * 1024 * 1024;
    /// The default scheduler name: the one `/pods/validate` checks and `/jobs/mutate` sets.
    pub const DEFAULT_SCHEDULER_NAME: &'static str = crate::volcano::DEFAULT_SCHEDULER;
    /// The default shutdown grace: longer than the 5 s webhook timeout the manifests set, well
    /// inside Kubernetes' default 30 s termination grace period.
    pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(15);
    /// The default poll interval for watched files (controller-runtime's certificate watcher
    /// polls every 10 s).
    pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(10);
    /// The default connection cap: far above what the API servers and dispatchers calling a
    /// webhook open, and under the common soft limit of 1024 file descriptors with room for
    /// the watched files, the probes and the metrics listener.
    pub const DEFAULT_MAX_CONNECTIONS: usize = 512;
    /// The default idle timeout: hyper's and Go's 30 s header read timeout.
    pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(30);

    /// How many threads [`Settings::worker_threads`] asks for: one per core when unset.
    pub fn threads(&self) -> usize {
        self.worker_threads.unwrap_or_else(|| {
            std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
        })
    }

    /// Reads every file the settings name, as the server does when it starts, and returns
    /// every problem, each with the file it belongs to: so that a start that would fail on
    /// one file reports them all at once.
    ///
    /// The certificate and its key are each read, then parsed and matched as a pair; a pair
    /// neither of which parses is reported against the certificate.
    pub fn check_files(&self) -> Vec<(SettingsFile, ServeError)> {
        let mut problems = Vec::new();
        let mut read = |file, path| {
            reload::read_file(path)
                .map_err(|error| problems.push((file, error)))
                .ok()
        };
        let cert = read(SettingsFile::Cert, &self.tls.cert_file);
        let key = read(SettingsFile::Key, &self.tls.key_file);
        if let (Some(cert), Some(key)) = (cert, key) {
            // Each file on its own, so that a bad certificate hides nothing wrong with the key.
            let chain = tls::chain(&self.tls, &cert).map_err(|error| (SettingsFile::Cert, error));
            let key = tls::private_key(&self.tls, &key).map_err(|error| (SettingsFile::Key, error));
            match (chain, key) {
                (Ok(chain), Ok(key)) => {
                    if let Err(error) = tls::pair(&self.tls, chain, key, &tls::provider()) {
                        problems.push((SettingsFile::Key, error));
                    }
                }
                (chain, key) => problems.extend(chain.err().into_iter().chain(key.err())),
            }
        }
        if let Some(path) = &self.client_ca_file {
            if let Err(error) = tls::client_verifier(path, tls::provider()) {
                problems.push((SettingsFile::ClientCa, error));
            }
        }
        if let Some(path) = &self.bearer_token_file {
            if let Err(error) = BearerToken::load(path) {
                problems.push((SettingsFile::BearerToken, error));
            }
        }
        if let Some(path) = &self.resource_groups_file {
            if let Err(error) =
                reload::read_file(path).and_then(|bytes| groups::parse_bytes(path, &bytes))
            {
                problems.push((SettingsFile::ResourceGroups, error));
            }
        }
        problems
    }

    /// Settings with every default and the given certificate files.
    pub fn new(tls: TlsFiles) -> Settings {
        Settings {
            listen: Settings::DEFAULT_LISTEN,
            probe_listen: None,
            tls,
            client_ca_file: None,
            bearer_token_file: None,
            max_body_bytes: Settings::DEFAULT_MAX_BODY_BYTES,
            enabled_admission: None,
            resource_groups_file: None,
            scheduler_names: vec![Settings::DEFAULT_SCHEDULER_NAME.to_owned()],
            trusted_users: Vec::new(),
            http2: false,
            shutdown_grace: Settings::DEFAULT_SHUTDOWN_GRACE,
            poll_interval: Settings::DEFAULT_POLL_INTERVAL,
            max_connections: Settings::DEFAULT_MAX_CONNECTIONS,
            idle_timeout: Settings::DEFAULT_IDLE_TIMEOUT,
            worker_threads: None,
            kubeconfig: None,
            volcano: QueueSettings::default(),
            feature_gates: FeatureGates::default(),
            names: SettingNames::default(),
        }
    }
}
