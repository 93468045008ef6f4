//! The webhook server (`serve`): Volcano's webhook manager done again, on hyper and rustls.
//!
//! One HTTPS server answers Kubernetes `admission.k8s.io/v1` AdmissionReviews for pods,
//! Dexaflow's own DAG check and `dexaflow.io/admission/v1` task attempts ([`admit`]), with certificates and resource groups re-read while it runs, and
//! runs as replicas that share nothing but their files.
//!
//! | Volcano's part | here |
//! |---|---|
//! | `router.AdmissionService`, the `init()` registry | [`Service`], given to [`ServerBuilder::service`] (a duplicate path is an error) |
//! | `--enabled-admission` | [`Settings::enabled_admission`] or [`ServerBuilder::enabled`] (an unknown or empty list fails the start), [`parse_enabled`] |
//! | `router.Serve` | the one serve function in `answer.rs` (method, media type, body cap, strict decoding, `?timeout=`, panics) |
//! | `pods/mutate` | [`pods::Mutation`] with [`ResourceGroups`] |
//! | `pods/validate` | [`pods::Validation`] |
//! | `jobflows/validate`'s DAG check | [`dags::DagValidation`] |
//! | `config.WatchAdmissionConf` | [`ResourceGroups::watch`]: a bad file keeps the last good one |
//! | TLS read once at start | certificates re-read on change (a Secret's `..data` swap included) |
//!
//! [`Server::builder`] is the front door: it takes the settings, the hooks `/tasks/admit`
//! runs, a library user's own services (each a [`Handler`] registered as a value) and the
//! observers, and starts everything.
//!
//! This module uses `admission`, `supervise`, `hooks` and `events`, never `dispatch`, `config`
//! or `metrics`: settings arrive as values, and the server is observed through
//! [`crate::events::ServerEvents`] ([`crate::events::Ignore`] when nobody watches).

pub mod admit;
mod answer;
mod auth;
mod builder;
pub mod dags;
mod error;
mod groups;
mod pod_view;
pub mod pods;
mod registry;
mod reload;
pub mod review;
mod server;
pub mod services;
mod settings;
mod threads;
mod tls;
pub mod volcano;
mod watch;

pub use answer::{DEFAULT_TIMEOUT, MAX_TIMEOUT};
pub use builder::ServerBuilder;
pub use error::ServeError;
pub use groups::{DEFAULT_ANNOTATION, Group, PodKeys, ResourceGroups, parse as parse_groups};
pub use registry::{Answer, Handler, Kind, Ruling, Service, Unavailable, parse_enabled};
pub use server::Server;

use registry::Registry;
pub use settings::{SettingNames, Settings, SettingsFile, TlsFiles};

use std::sync::Arc;

use crate::cluster::{self, Cache, Namespaces, Watching};
use crate::events::{ClusterEvents, ServerEvents};
use crate::volcano::{self as rules, Queue};
use server::ReadyCondition;
use services::ClusterRead;
use volcano::{Allowed, Pure, ReadingQueues};

/// The built-in services, with what they need kept alive and the conditions of readiness they
/// bring.
pub(crate) struct Builtin {
    pub(crate) registry: Registry,
    pub(crate) conditions: Vec<ReadyCondition>,
    pub(crate) watching: Vec<Watching>,
}

/// The built-in services, one for each row of [`services::BUILTIN_SERVICES`]: `/pods/mutate`
/// (with the resource groups of `settings.resource_groups_file`, watched, its reloads told to
/// `events`, or none), `/pods/validate`, `/dags/validate`, and Volcano's.
/// A service that reads the cluster connects to it only when it is enabled, and the server is
/// ready only once its cache has synced; with none of them enabled no cluster is needed.
/// Call it inside a tokio runtime.
///
/// # Errors
/// [`ServeError::Read`] or [`ServeError::Groups`] (naming the line) when the groups file cannot
/// be used, [`ServeError::Watch`] when it cannot be watched, [`ServeError::Cluster`] when an
/// enabled service needs the cluster and no client can be made (a bad kubeconfig, say).
pub(crate) async fn builtin(
    settings: &Settings,
    events: &Arc<dyn ServerEvents>,
) -> Result<Builtin, ServeError> {
    let groups = match &settings.resource_groups_file {
        Some(path) => ResourceGroups::watch(path, settings.poll_interval, Arc::clone(events))?,
        None => ResourceGroups::fixed(Vec::new()),
    };
    // A service that reads the cluster is served only when listed.
    let enabled_reading = |read: ClusterRead| {
        services::BUILTIN_SERVICES.iter().any(|row| {
            row.reads == read
                && settings
                    .enabled_admission
                    .as_ref()
                    .is_some_and(|paths| paths.iter().any(|enabled| enabled == row.path))
        })
    };
    let mut conditions = Vec::new();
    let mut watching = Vec::new();
    let reads_queues = enabled_reading(ClusterRead::Queues);
    let reads_namespaces = enabled_reading(ClusterRead::Namespaces);
    let client = if reads_queues || reads_namespaces {
        let client = cluster::connect(
            settings
                .kubeconfig
                .as_deref()
                .map(|path| (path, settings.names.kubeconfig)),
            std::env::var_os("KUBECONFIG"),
            cluster::REQUEST_TIMEOUT,
        )
        .await
        .map_err(ServeError::Cluster)?;
        Some(client)
    } else {
        None
    };
    let queues = match client.clone().filter(|_| reads_queues) {
        Some(client) => {
            let cluster_events: Arc<dyn ClusterEvents> = Arc::clone(events) as _;
            let (queues, watch) = Cache::<Queue>::watch(client, cluster::QUEUES, cluster_events);
            let synced = Arc::clone(&queues);
            conditions.push(ReadyCondition {
                name: "the queue cache to sync with the API server".to_owned(),
                holds: Arc::new(move || synced.is_synced()),
            });
            watching.push(watch);
            queues
        }
        None => Cache::unwatched(cluster::QUEUES),
    };
    let namespaces = client.filter(|_| reads_namespaces).map(Namespaces::new);
    let scheduler_names = settings.scheduler_names.clone();
    let queue_settings = settings.volcano.clone();
    let feature_gates = settings.feature_gates;
    let registry = Registry::new()
        .register(Service::builtin(
            services::PODS_MUTATE,
            pods::Mutation::new(groups),
        ))?
        .register(Service::builtin(
            services::PODS_VALIDATE,
            pods::Validation::new(
                settings.scheduler_names.iter().cloned(),
                settings.trusted_users.iter().cloned(),
            ),
        ))?
        .register(Service::builtin(
            services::DAGS_VALIDATE,
            dags::DagValidation,
        ))?
        .register(Service::builtin(
            services::JOBS_VALIDATE,
            ReadingQueues::new(
                services::JOBS_VALIDATE,
                Arc::clone(&queues),
                move |review, view| {
                    rules::validate_job(review, view, &feature_gates).map(|()| Allowed::AsItIs)
                },
            ),
        ))?
        .register(Service::builtin(
            services::JOBS_MUTATE,
            Pure::new(services::JOBS_MUTATE, move |review| {
                rules::mutate_job(review, &scheduler_names).map(Allowed::Patched)
            }),
        ))?
        .register(Service::builtin(
            services::QUEUES_VALIDATE,
            ReadingQueues::new(
                services::QUEUES_VALIDATE,
                Arc::clone(&queues),
                move |review, view| {
                    rules::validate_queue(review, view, &queue_settings).map(|()| Allowed::AsItIs)
                },
            ),
        ))?
        .register(Service::builtin(
            services::QUEUES_MUTATE,
            Pure::new(services::QUEUES_MUTATE, |review| {
                rules::mutate_queue(review).map(Allowed::Patched)
            }),
        ))?
        .register(Service::builtin(
            services::PODGROUPS_VALIDATE,
            ReadingQueues::new(services::PODGROUPS_VALIDATE, queues, |review, view| {
                rules::validate_podgroup(review, view).map(|()| Allowed::AsItIs)
            }),
        ))?
        .register(Service::builtin(
            services::PODGROUPS_MUTATE,
            volcano::PodGroupMutation::new(services::PODGROUPS_MUTATE, namespaces),
        ))?
        .register(Service::builtin(
            services::CRONJOBS_VALIDATE,
            Pure::new(services::CRONJOBS_VALIDATE, move |review| {
                rules::validate_cronjob(review, &feature_gates).map(|()| Allowed::AsItIs)
            }),
        ))?
        .register(Service::builtin(
            services::JOBFLOWS_VALIDATE,
            Pure::new(services::JOBFLOWS_VALIDATE, |review| {
                rules::validate_jobflow(review).map(|()| Allowed::AsItIs)
            }),
        ))?
        .register(Service::builtin(
            services::HYPERNODES_VALIDATE,
            Pure::new(services::HYPERNODES_VALIDATE, |review| {
                rules::validate_hypernode(review).map(|()| Allowed::AsItIs)
            }),
        ))?;
    Ok(Builtin {
        registry,
        conditions,
        watching,
    })
}
