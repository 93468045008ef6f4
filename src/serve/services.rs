//! The one table of the built-in services: each one's path, kind, what the API server sends it
//! and what it reads of the cluster. The server registers every built-in service from its row
//! here, and the tests check the router, `--enabled-admission` and the webhook configurations
//! in `deploy/` against the same rows, so that the three cannot drift apart.

use super::Kind;
use super::{dags, pods, volcano};

/// The resource and operations a webhook configuration registers a service for, as
/// `rules[]` of a `ValidatingWebhookConfiguration` or `MutatingWebhookConfiguration` writes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Admits {
    /// The API group (`""` for the core group).
    pub group: &'static str,
    /// The API version.
    pub version: &'static str,
    /// The resource, plural.
    pub resource: &'static str,
    /// The operations (`CREATE`, `UPDATE`, `DELETE`).
    pub operations: &'static [&'static str],
}

/// What a service reads of the cluster, and so whether `serve` needs a Kubernetes client for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClusterRead {
    /// Nothing: the service runs without a cluster.
    Nothing,
    /// The queue cache, watched from the API server; the server is ready once it has synced.
    Queues,
    /// A namespace, read per request within the request's deadline.
    Namespaces,
}

/// One built-in service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuiltinService {
    /// The path it answers.
    pub path: &'static str,
    /// Whether it validates or mutates.
    pub kind: Kind,
    /// What the API server sends it; `None` for the services Dexaflow itself calls.
    pub admits: Option<Admits>,
    /// What it reads of the cluster. A service that reads something is served only when
    /// listed in the enabled paths.
    pub reads: ClusterRead,
}

impl BuiltinService {
    /// Whether it needs a Kubernetes client.
    pub fn reads_the_cluster(&self) -> bool {
        self.reads != ClusterRead::Nothing
    }
}

const CREATE: &[&str] = &["CREATE"];
const CREATE_UPDATE: &[&str] = &["CREATE", "UPDATE"];
const CREATE_UPDATE_DELETE: &[&str] = &["CREATE", "UPDATE", "DELETE"];

const fn webhook(
    path: &'static str,
    kind: Kind,
    group: &'static str,
    version: &'static str,
    resource: &'static str,
    operations: &'static [&'static str],
    reads: ClusterRead,
) -> BuiltinService {
    BuiltinService {
        path,
        kind,
        admits: Some(Admits {
            group,
            version,
            resource,
            operations,
        }),
        reads,
    }
}

/// `/pods/mutate`: the resource groups.
pub const PODS_MUTATE: BuiltinService = webhook(
    pods::MUTATE_PATH,
    Kind::Mutating,
    "",
    "v1",
    "pods",
    CREATE,
    ClusterRead::Nothing,
);
/// `/pods/validate`: the reserved keys and Volcano's disruption-budget annotations (UPDATE too,
/// so that a reserved key added later is refused).
pub const PODS_VALIDATE: BuiltinService = webhook(
    pods::VALIDATE_PATH,
    Kind::Validating,
    "",
    "v1",
    "pods",
    CREATE_UPDATE,
    ClusterRead::Nothing,
);
/// `/dags/validate`: Dexaflow's DAG check, called by Dexaflow.
pub const DAGS_VALIDATE: BuiltinService = BuiltinService {
    path: dags::PATH,
    kind: Kind::Validating,
    admits: None,
    reads: ClusterRead::Nothing,
};
/// `/jobs/validate`: Volcano's job validation, and the names of what a job makes.
pub const JOBS_VALIDATE: BuiltinService = webhook(
    volcano::JOBS_VALIDATE_PATH,
    Kind::Validating,
    "batch.volcano.sh",
    "v1alpha1",
    "jobs",
    CREATE_UPDATE,
    ClusterRead::Queues,
);
/// `/jobs/mutate`: Volcano's job defaults.
pub const JOBS_MUTATE: BuiltinService = webhook(
    volcano::JOBS_MUTATE_PATH,
    Kind::Mutating,
    "batch.volcano.sh",
    "v1alpha1",
    "jobs",
    CREATE,
    ClusterRead::Nothing,
);
/// `/queues/validate`: Volcano's queue validation.
pub const QUEUES_VALIDATE: BuiltinService = webhook(
    volcano::QUEUES_VALIDATE_PATH,
    Kind::Validating,
    "scheduling.volcano.sh",
    "v1beta1",
    "queues",
    CREATE_UPDATE_DELETE,
    ClusterRead::Queues,
);
/// `/queues/mutate`: Volcano's queue defaults.
pub const QUEUES_MUTATE: BuiltinService = webhook(
    volcano::QUEUES_MUTATE_PATH,
    Kind::Mutating,
    "scheduling.volcano.sh",
    "v1beta1",
    "queues",
    CREATE,
    ClusterRead::Nothing,
);
/// `/podgroups/validate`: Volcano's pod group validation.
pub const PODGROUPS_VALIDATE: BuiltinService = webhook(
    volcano::PODGROUPS_VALIDATE_PATH,
    Kind::Validating,
    "scheduling.volcano.sh",
    "v1beta1",
    "podgroups",
    CREATE,
    ClusterRead::Queues,
);
/// `/podgroups/mutate`: Volcano's pod group defaults (the queue of the namespace).
pub const PODGROUPS_MUTATE: BuiltinService = webhook(
    volcano::PODGROUPS_MUTATE_PATH,
    Kind::Mutating,
    "scheduling.volcano.sh",
    "v1beta1",
    "podgroups",
    CREATE,
    ClusterRead::Namespaces,
);
/// `/cronjobs/validate`: Volcano's cron job validation.
pub const CRONJOBS_VALIDATE: BuiltinService = webhook(
    volcano::CRONJOBS_VALIDATE_PATH,
    Kind::Validating,
    "batch.volcano.sh",
    "v1alpha1",
    "cronjobs",
    CREATE_UPDATE,
    ClusterRead::Nothing,
);
/// `/jobflows/validate`: Volcano's job flow validation.
pub const JOBFLOWS_VALIDATE: BuiltinService = webhook(
    volcano::JOBFLOWS_VALIDATE_PATH,
    Kind::Validating,
    "flow.volcano.sh",
    "v1alpha1",
    "jobflows",
    CREATE_UPDATE,
    ClusterRead::Nothing,
);
/// `/hypernodes/validate`: Volcano's hypernode validation.
pub const HYPERNODES_VALIDATE: BuiltinService = webhook(
    volcano::HYPERNODES_VALIDATE_PATH,
    Kind::Validating,
    "topology.volcano.sh",
    "v1alpha1",
    "hypernodes",
    CREATE_UPDATE,
    ClusterRead::Nothing,
);

/// The path of every service the server has without a library user's own: the built-in
/// services' and `/tasks/admit`'s.
pub fn builtin_paths<'a>() -> impl Iterator<Item = &'a str> + Clone {
    BUILTIN_SERVICES
        .iter()
        .map(|row| -> &'a str { row.path })
        .chain([super::admit::PATH])
}

/// Every built-in service, in the order the server registers them. `/tasks/admit`
/// ([`super::admit::PATH`]) is not among them: it is built from the hooks given to the server.
pub const BUILTIN_SERVICES: [BuiltinService; 12] = [
    PODS_MUTATE,
    PODS_VALIDATE,
    DAGS_VALIDATE,
    JOBS_VALIDATE,
    JOBS_MUTATE,
    QUEUES_VALIDATE,
    QUEUES_MUTATE,
    PODGROUPS_VALIDATE,
    PODGROUPS_MUTATE,
    CRONJOBS_VALIDATE,
    JOBFLOWS_VALIDATE,
    HYPERNODES_VALIDATE,
];
