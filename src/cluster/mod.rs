//! The cluster reads Volcano's admission services need, through the Kubernetes client (kube-rs):
//! a watched cache of an object kind ([`Cache`], for Volcano's queues) and a read of one
//! namespace's annotation within a deadline ([`Namespaces`]).
//!
//! The client is found the standard way ([`connect`]): the kubeconfig file the settings name
//! when they name one, else the files of `KUBECONFIG` (merged as kubectl merges them, skipping
//! empty entries and files that do not exist), else the pod's service account (in cluster). A token and a CA from the kubeconfig are used as kubectl would use them: a
//! `tokenFile` is read with surrounding whitespace trimmed, and read again whenever it changes.
//!
//! No review waits on the cluster without a deadline, and none is answered from a cache that
//! never synced: [`Cache::is_synced`] says whether it did. No request of the client waits for
//! its response without a bound either ([`REQUEST_TIMEOUT`]), so that a list or watch the API
//! server never answers fails and is tried again rather than stalling its cache.

mod cache;
mod namespaces;
mod queues;
mod short_watch;
mod token;

pub use cache::{Cache, Grouped, QUEUES, Resource, Watching};
pub use namespaces::{NamespaceError, Namespaces};

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use kube::client::ClientBuilder;
use kube::config::{KubeConfigOptions, Kubeconfig, KubeconfigError};
use tower::timeout::TimeoutLayer;

use short_watch::ShortWatchLayer;
use token::{TokenFileLayer, take_token_file};

/// Why no client could be made for the cluster.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// A kubeconfig file could not be read or parsed.
    #[error("{origin}: kubeconfig {}", path.display())]
    Kubeconfig {
        /// The setting that named the file, or `KUBECONFIG`.
        origin: &'static str,
        /// The file.
        path: PathBuf,
        /// Why not.
        #[source]
        source: KubeconfigError,
    },
    /// The kubeconfig was read but names no usable cluster, user or context.
    #[error("{origin}: kubeconfig {}: not usable", path.display())]
    Unusable {
        /// The setting that named the file, or `KUBECONFIG`.
        origin: &'static str,
        /// The file, or the list of files `KUBECONFIG` names.
        path: PathBuf,
        /// Why not.
        #[source]
        source: KubeconfigError,
    },
    /// None of the files `KUBECONFIG` lists exists (empty entries are skipped, as kubectl
    /// skips them).
    #[error("KUBECONFIG: none of the files it lists exists: {}", list.display())]
    NoneListed {
        /// The list, as `KUBECONFIG` gives it.
        list: PathBuf,
    },
    /// No kubeconfig was given and the process does not run in a pod (no service account).
    #[error("no kubeconfig (set server.kubeconfig or KUBECONFIG) and not running in a cluster")]
    InCluster(#[source] kube::config::InClusterError),
    /// The kubeconfig's `tokenFile` cannot be read, or holds no token that can be sent: at
    /// start, or when a request is made. The token is never shown.
    #[error("{origin}: tokenFile {}", path.display())]
    TokenFile {
        /// The setting that named the kubeconfig, or `KUBECONFIG`.
        origin: &'static str,
        /// The token file.
        path: PathBuf,
        /// What is wrong with it.
        #[source]
        problem: crate::token_file::TokenProblem,
    },
    /// The client could not be built from the configuration (its TLS settings, say).
    #[error("building the Kubernetes client")]
    Client(#[source] kube::Error),
}

/// How long a request to the API server waits for its response to begin (its status and
/// headers) before it fails: a list or a watch the API server accepts and never answers then
/// fails, is logged and counted, and is tried again after the backoff, where it would stall the
/// cache silently. A watch's body streams for minutes after its headers and is not bounded.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The variable listing kubeconfig files when no setting names one, as kubectl reads it.
const KUBECONFIG: &str = "KUBECONFIG";

/// Makes the Kubernetes client: from `kubeconfig` when given (with the name of the setting that
/// gave it, for errors), else from the files listed in
/// `kubeconfig_env` (the value of `KUBECONFIG`, paths joined as the platform joins `PATH`;
/// empty entries and files that do not exist are skipped, as kubectl skips them), else from the
/// pod's service account. A kubeconfig's `tokenFile` is read now and again whenever it changes,
/// its token trimmed of surrounding whitespace as kubectl trims it. Each request the client
/// makes fails when its response has not begun
/// within `request_timeout` ([`REQUEST_TIMEOUT`] for the server); its body, such as a watch's
/// stream of events, is not bounded. A watch whose body ends within a second of its response
/// without an event fails (client-go's "very short watch"), so that a cache sees the failure
/// and backs off rather than watching again at once.
///
/// # Errors
/// [`ClusterError`], naming the file or the source that could not be used;
/// [`ClusterError::NoneListed`] when `KUBECONFIG` lists no file that exists;
/// [`ClusterError::TokenFile`] when the kubeconfig's `tokenFile` holds no token that can be
/// sent.
pub async fn connect(
    kubeconfig: Option<(&Path, &'static str)>,
    kubeconfig_env: Option<OsString>,
    request_timeout: Duration,
) -> Result<kube::Client, ClusterError> {
    let options = KubeConfigOptions::default();
    let (mut config, origin) = match (kubeconfig, kubeconfig_env.filter(|value| !value.is_empty()))
    {
        (Some((path, origin)), _) => {
            let file = read(path, origin)?;
            let config = kube::Config::from_custom_kubeconfig(file, &options)
                .await
                .map_err(|source| ClusterError::Unusable {
                    origin,
                    path: path.to_owned(),
                    source,
                })?;
            (config, Some(origin))
        }
        (None, Some(list)) => {
            let merged = read_listed(&list)?;
            let config = kube::Config::from_custom_kubeconfig(merged, &options)
                .await
                .map_err(|source| ClusterError::Unusable {
                    origin: KUBECONFIG,
                    path: PathBuf::from(&list),
                    source,
                })?;
            (config, Some(KUBECONFIG))
        }
        (None, None) => (
            kube::Config::incluster().map_err(ClusterError::InCluster)?,
            None,
        ),
    };
    // A kubeconfig's token file is read here, trimmed, as kubectl reads it; kube-rs would send
    // a trailing newline. The pod's own service account token is kube-rs's to read.
    let token_file = match origin {
        Some(origin) => take_token_file(&mut config.auth_info)
            .map(|path| TokenFileLayer::read(path, origin))
            .transpose()?,
        None => None,
    };
    // The timeout wraps the future of the response's head only: the body streams on unbounded.
    // A watch that ends at once without an event fails, for the cache to back off after.
    let client = ClientBuilder::try_from(config)
        .map_err(ClusterError::Client)?
        .with_layer(&TimeoutLayer::new(request_timeout))
        .with_layer(&ShortWatchLayer)
        .with_layer(&tower::util::option_layer(token_file))
        .build();
    Ok(client)
}

/// The files `list` (the value of `KUBECONFIG`) names, merged as kubectl merges them (the first
/// to set a name wins), skipping empty entries and files that do not exist, as kubectl does.
fn read_listed(list: &OsString) -> Result<Kubeconfig, ClusterError> {
    let mut merged: Option<Kubeconfig> = None;
    let listed = std::env::split_paths(list).filter(|path| !path.as_os_str().is_empty());
    for path in listed {
        // A file whose existence cannot be told is read, so that the error says why.
        if matches!(path.try_exists(), Ok(false)) {
            continue;
        }
        let file = read(&path, KUBECONFIG)?;
        merged = Some(match merged {
            None => file,
            Some(first) => first
                .merge(file)
                .map_err(|source| ClusterError::Kubeconfig {
                    origin: KUBECONFIG,
                    path: path.clone(),
                    source,
                })?,
        });
    }
    merged.ok_or_else(|| ClusterError::NoneListed {
        list: PathBuf::from(list),
    })
}

fn read(path: &Path, origin: &'static str) -> Result<Kubeconfig, ClusterError> {
    Kubeconfig::read_from(path).map_err(|source| ClusterError::Kubeconfig {
        origin,
        path: path.to_owned(),
        source,
    })
}
