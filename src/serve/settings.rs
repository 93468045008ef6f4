//! The server's settings: plain values, read from the `server` section of the config file.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

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
    /// The paths to serve; `None` serves every registered service.
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
    /// The default scheduler names `/pods/validate` checks.
    pub const DEFAULT_SCHEDULER_NAME: &'static str = "volcano";
    /// The default shutdown grace: longer than the 5 s webhook timeout the manifests set, well
    /// inside Kubernetes' default 30 s termination grace period.
    pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(15);
    /// The default poll interval for watched files (controller-runtime's certificate watcher
    /// polls every 10 s).
    pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(10);

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
        }
    }
}
