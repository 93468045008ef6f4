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
pub mod pods;
mod registry;
mod reload;
pub mod review;
mod server;
mod settings;
mod tls;
mod watch;

pub use answer::{DEFAULT_TIMEOUT, MAX_TIMEOUT};
pub use builder::ServerBuilder;
pub use error::ServeError;
pub use groups::{DEFAULT_ANNOTATION, Group, PodKeys, ResourceGroups, parse as parse_groups};
pub use registry::{Answer, Handler, Kind, Ruling, Service, Unavailable, parse_enabled};
pub use server::Server;

use registry::Registry;
pub use settings::{SettingNames, Settings, SettingsFile, TlsFiles, VolcanoSettings};

use std::sync::Arc;

use crate::events::ServerEvents;

/// The built-in services: `/pods/mutate` (with the resource groups of
/// `settings.resource_groups_file`, watched, its reloads told to `events`, or none),
/// `/pods/validate` and `/dags/validate`.
/// Call it inside a tokio runtime.
///
/// # Errors
/// [`ServeError::Read`] or [`ServeError::Groups`] (naming the line) when the groups file cannot
/// be used, [`ServeError::Watch`] when it cannot be watched.
pub(crate) fn builtin(
    settings: &Settings,
    events: &Arc<dyn ServerEvents>,
) -> Result<Registry, ServeError> {
    let groups = match &settings.resource_groups_file {
        Some(path) => ResourceGroups::watch(path, settings.poll_interval, Arc::clone(events))?,
        None => ResourceGroups::fixed(Vec::new()),
    };
    Registry::new()
        .register(Service::new(
            pods::MUTATE_PATH,
            Kind::Mutating,
            pods::Mutation::new(groups),
        ))?
        .register(Service::new(
            pods::VALIDATE_PATH,
            Kind::Validating,
            pods::Validation::new(
                settings.scheduler_names.iter().cloned(),
                settings.trusted_users.iter().cloned(),
            ),
        ))?
        .register(Service::new(
            dags::PATH,
            Kind::Validating,
            dags::DagValidation,
        ))
}
