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
use kube::config::{AuthInfo, KubeConfigOptions, Kubeconfig, KubeconfigError};
use tower::timeout::TimeoutLayer;

use short_watch::ShortWatchLayer;
use token::{TokenFileLayer, credential_before_token_file, take_token_file};

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
    /// The kubeconfig's exec credential plugin has not answered within the bound (the
    /// client's request timeout): the start fails rather than waiting on it for ever.
    #[error("{origin}: the exec credential plugin {command:?} has not answered within {after:?}")]
    ExecTimedOut {
        /// The setting that named the kubeconfig, or `KUBECONFIG`.
        origin: &'static str,
        /// The plugin's command, as the kubeconfig gives it.
        command: String,
        /// How long it was waited for.
        after: Duration,
    },
    /// The thread that runs the kubeconfig's exec credential plugin could not be started.
    #[error("starting a thread to run the exec credential plugin")]
    ExecThread(#[source] std::io::Error),
    /// Building the client, which runs the kubeconfig's exec credential plugin, panicked.
    #[error("{origin}: building the client with the exec credential plugin {command:?} panicked")]
    ExecPanicked {
        /// The setting that named the kubeconfig, or `KUBECONFIG`.
        origin: &'static str,
        /// The plugin's command, as the kubeconfig gives it.
        command: String,
    },
    /// The kubeconfig's cluster names a proxy the client cannot use (kubectl's `socks5://`).
    #[error("{origin}: proxy-url {proxy}: only an http:// or https:// proxy is supported")]
    Proxy {
        /// The setting that named the kubeconfig, or `KUBECONFIG`.
        origin: &'static str,
        /// The proxy's scheme, host and port; never its credentials.
        proxy: String,
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
    let exec = origin.zip(exec_command(&config.auth_info));
    let build = move || ClientBuilder::try_from(config);
    let builder = match exec {
        Some((origin, command)) => running_exec(build, origin, command, request_timeout).await?,
        None => build(),
    }
    .map_err(|error| client_error(error, origin))?;
    // The timeout wraps the future of the response's head only: the body streams on unbounded.
    // A watch that ends at once without an event fails, for the cache to back off after.
    let client = builder
        .with_layer(&TimeoutLayer::new(request_timeout))
        .with_layer(&ShortWatchLayer)
        .with_layer(&tower::util::option_layer(token_file))
        .build();
    Ok(client)
}

/// `error`, from building the client, as [`ClusterError`]: a proxy kube-rs cannot use named
/// by its scheme, host and port (kube-rs's own message shows the whole URL, credentials
/// included, and a cargo feature no user can turn on).
fn client_error(error: kube::Error, origin: Option<&'static str>) -> ClusterError {
    match &error {
        kube::Error::ProxyProtocolUnsupported { proxy_url }
        | kube::Error::ProxyProtocolDisabled { proxy_url, .. } => {
            let port = proxy_url
                .port_u16()
                .map(|port| format!(":{port}"))
                .unwrap_or_default();
            ClusterError::Proxy {
                origin: origin.unwrap_or("the in-cluster configuration"),
                proxy: format!(
                    "{}://{}{port}",
                    proxy_url.scheme_str().unwrap_or_default(),
                    proxy_url.host().unwrap_or_default()
                ),
            }
        }
        _ => ClusterError::Client(error),
    }
}

/// The command of the exec credential plugin kube-rs runs for `auth` when it builds the
/// client; `None` when `auth` names no plugin or another credential comes first.
fn exec_command(auth: &AuthInfo) -> Option<String> {
    if credential_before_token_file(auth) || auth.token_file.is_some() {
        return None;
    }
    let exec = auth.exec.as_ref()?;
    Some(exec.command.clone().unwrap_or_default())
}

/// What `build` gives (the client builder, made from a config whose exec credential plugin
/// `command` kube-rs runs meanwhile: a blocking wait on the child, up to three runs), run on a
/// thread of its own, or an error once `bound` has passed. The line logged first names the
/// plugin, so that a start waiting on it says on what.
///
/// A plugin that never answers keeps its thread blocked on it; the start then fails, and the
/// process exits without waiting for that thread (the plugin, a process of its own, is not
/// stopped).
async fn running_exec<T: Send + 'static>(
    build: impl FnOnce() -> T + Send + 'static,
    origin: &'static str,
    command: String,
    bound: Duration,
) -> Result<T, ClusterError> {
    tracing::info!(
        origin,
        command,
        within = ?bound,
        "running the kubeconfig's exec credential plugin"
    );
    let (sender, receiver) = tokio::sync::oneshot::channel();
    // Not tokio's blocking pool: a runtime shutting down waits for its blocking tasks, so a
    // plugin that never answers would keep the process from exiting.
    std::thread::Builder::new()
        .name("kube-exec-plugin".to_owned())
        .spawn(move || {
            // The receiver is gone only when the wait gave up.
            let _ = sender.send(build());
        })
        .map_err(ClusterError::ExecThread)?;
    match tokio::time::timeout(bound, receiver).await {
        Ok(Ok(built)) => Ok(built),
        // The sender is dropped without a send only when `build` panicked.
        Ok(Err(_)) => Err(ClusterError::ExecPanicked { origin, command }),
        Err(_) => Err(ClusterError::ExecTimedOut {
            origin,
            command,
            after: bound,
        }),
    }
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
