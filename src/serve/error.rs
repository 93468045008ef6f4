//! Why the server could not start, or why a watched file could not be taken in.

use std::net::SocketAddr;
use std::path::PathBuf;

use thiserror::Error;

use super::SettingNames;

/// A problem found while starting the server or reloading one of its files.
///
/// At start every variant stops the start; on a reload ([`ServeError::Read`],
/// [`ServeError::Pem`], [`ServeError::Key`], [`ServeError::Groups`], [`ServeError::Empty`]) the
/// previous value stays in use and the error is logged and counted.
#[derive(Debug, Error)]
pub enum ServeError {
    /// Two services registered with one path.
    #[error("duplicate service path {path}")]
    DuplicatePath {
        /// The path both services claim.
        path: String,
    },
    /// `--enabled-admission` or `server.enabled_admission` names a path no service has.
    #[error("{setting}: enabled admission {path:?} is not a service (the services are {known})")]
    UnknownPath {
        /// What the setting is called where it was written.
        setting: &'static str,
        /// The path as given.
        path: String,
        /// Every registered path, comma-separated.
        known: String,
    },
    /// `--enabled-admission` or `server.enabled_admission` lists no path.
    #[error(
        "{setting}: enabled admission lists no service (leave it unset to serve every service)"
    )]
    NothingEnabled {
        /// What the setting is called where it was written.
        setting: &'static str,
    },
    /// A file could not be read.
    #[error("reading {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why not.
        #[source]
        source: std::io::Error,
    },
    /// A watched file found empty on a reload, after it had settled: what a writer leaves
    /// between truncating the file and writing it, never taken.
    #[error("{} is empty", path.display())]
    Empty {
        /// The file.
        path: PathBuf,
    },
    /// A PEM file without the item it should hold, or one that does not parse.
    #[error("{}: expected {what}", path.display())]
    Pem {
        /// The file.
        path: PathBuf,
        /// What it should hold: a certificate chain, a private key, CA certificates.
        what: &'static str,
        /// What reading it found.
        #[source]
        source: rustls_pki_types::pem::Error,
    },
    /// A PEM file holding the other half of the pair (a key where the certificate should be,
    /// or the other way round): the two files are swapped or one is named twice.
    #[error("{}: expected {what}, found {found} (are cert_file and key_file swapped?)", path.display())]
    OtherHalf {
        /// The file.
        path: PathBuf,
        /// What it should hold.
        what: &'static str,
        /// What it holds instead.
        found: &'static str,
    },
    /// A private key the TLS library cannot use, or one that does not match its certificate.
    #[error("{}: the private key cannot serve {}", key.display(), cert.display())]
    Key {
        /// The key file.
        key: PathBuf,
        /// The certificate file.
        cert: PathBuf,
        /// Why not.
        #[source]
        source: rustls::Error,
    },
    /// A CA bundle with certificates that cannot serve as trust anchors.
    #[error("{}: {unusable} of the CA certificates cannot be used", path.display())]
    UnusableCa {
        /// The file.
        path: PathBuf,
        /// How many cannot.
        unusable: usize,
    },
    /// A CA bundle client certificates cannot be checked against.
    #[error("{}: not a usable client CA bundle", path.display())]
    ClientCa {
        /// The file.
        path: PathBuf,
        /// Why not.
        #[source]
        source: rustls::server::VerifierBuilderError,
    },
    /// The resource groups file is not a valid `AdmissionConfiguration`; the YAML error names
    /// the line.
    #[error("{}", path.display())]
    Groups {
        /// The file.
        path: PathBuf,
        /// Where and why parsing stopped.
        #[source]
        source: serde_yaml_ng::Error,
    },
    /// A service for authenticated callers only would be served to anyone: no bearer token,
    /// no client CA, and a listen address other than loopback.
    #[error(
        "{path} would answer any caller on {listen}: set {} or {}, or make {} a loopback address",
        .names.bearer_token_file,
        .names.client_ca_file,
        .names.listen
    )]
    Unauthenticated {
        /// The service's path.
        path: String,
        /// The listen address.
        listen: SocketAddr,
        /// What the settings to change are called where they were written (boxed: most
        /// errors need none of them).
        names: Box<SettingNames>,
    },
    /// The bearer token file holds no token.
    #[error("{}: no token in the file", path.display())]
    EmptyToken {
        /// The file.
        path: PathBuf,
    },
    /// The bearer token file holds a token no `Authorization` header can carry (a line break
    /// or another control character inside it).
    #[error("{}: the token holds a character an HTTP header cannot carry, so no client could present it", path.display())]
    TokenNotAHeader {
        /// The file.
        path: PathBuf,
    },
    /// A file system watch could not be set up.
    #[error("watching {}", path.display())]
    Watch {
        /// The directory.
        path: PathBuf,
        /// Why not.
        #[source]
        source: notify::Error,
    },
    /// A listener could not bind its address.
    #[error("{setting}: cannot listen on {address}")]
    Listen {
        /// What the address's setting is called where it was written.
        setting: &'static str,
        /// The address.
        address: SocketAddr,
        /// What binding returned.
        #[source]
        source: std::io::Error,
    },
    /// The thread the `/tasks/admit` chain's breakers run on could not be started.
    #[error("starting the breakers of the /tasks/admit chain")]
    Breakers(#[source] std::io::Error),
    /// A thread that serves connections could not be started.
    #[error("starting the threads that serve connections")]
    ConnectionThreads(#[source] std::io::Error),
    /// An enabled service reads the cluster, and no client for it could be made.
    #[error("connecting to the cluster (for Volcano's services that read queues or namespaces)")]
    Cluster(#[source] crate::cluster::ClusterError),
    /// The TLS configuration could not be built (no protocol version the provider supports).
    #[error("building the TLS configuration")]
    Tls(#[source] rustls::Error),
}
