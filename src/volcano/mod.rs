//! Volcano's admission rules, as its `vc-webhook-manager` applies them, as pure functions.
//!
//! Each service of Volcano's webhook manager is a function here that takes a [`Review`] of a
//! typed object (decoded as Volcano's API server sends it), a read-only view of the cluster
//! where the rule reads one ([`QueueView`]) and its settings, and answers with Volcano's verdict:
//! a validator `Ok(())` or a [`Refusal`] carrying Volcano's wording, a mutator the JSON Patch
//! operations in Volcano's order (an empty list when nothing changes). Nothing here does I/O:
//! the server decodes the AdmissionReview, reads the cluster through the view and writes the
//! answer.
//!
//! | service | here |
//! |---|---|
//! | `/queues/validate` | [`validate_queue`] with [`QueueSettings`] |
//! | `/queues/mutate` | [`mutate_queue`] |
//! | `/podgroups/validate` | [`validate_podgroup`] |
//! | `/podgroups/mutate` | [`mutate_podgroup`], with the namespace's annotation read when [`podgroup_reads_namespace`] |
//! | `/pods/validate` | [`validate_pod`] with the configured scheduler names |
//! | `/jobflows/validate` | [`validate_jobflow`] |
//! | `/hypernodes/validate` | [`validate_hypernode`] |
//! | `/cronjobs/validate` | [`validate_cronjob`] |
//! | `/jobs/mutate` | [`mutate_job`] with the configured scheduler names |
//! | `/jobs/validate` | [`validate_job`] with the [`FeatureGates`] |

mod cron;
mod cronjob;
mod cronjobs;
mod gates;
mod go_pattern;
mod hypernodes;
mod job;
mod jobflow;
mod jobflows;
mod jobs;
mod names;
mod patch;
mod pod_template;
mod podgroup;
mod podgroups;
mod pods;
mod queue;
mod queues;
mod resource;
mod review;
mod view;

pub use cronjob::{CronJob, CronJobSpec, JobTemplateSpec};
pub use cronjobs::validate_cronjob;
pub use gates::{FeatureGates, UnknownGate};
pub use hypernodes::{
    HyperNode, HyperNodeMember, HyperNodeSpec, MemberSelector, RegexMatch, validate_hypernode,
};
pub use job::{
    DependsOn, Job, JobSpec, LifecyclePolicy, NetworkTopologySpec, PartitionPolicySpec, TaskSpec,
    VolumeSpec,
};
pub use jobflow::{Flow, FlowDependsOn, JobFlow, JobFlowSpec};
pub use jobflows::validate_jobflow;
pub use jobs::{mutate_job, validate_job};
pub(crate) use names::dns_label;
pub use pod_template::{
    PodTemplate, TemplateContainer, TemplateMount, TemplatePodSpec, TemplatePort,
    TemplateResources, TemplateVolume,
};
pub use podgroup::{PodGroup, PodGroupSpec, SubGroupPolicySpec};
pub use podgroups::{
    QUEUE_NAME_ANNOTATION, mutate_podgroup, podgroup_reads_namespace, validate_podgroup,
};
pub use pods::validate_pod;
pub use queue::{Guarantee, Queue, QueueSpec, QueueStatus, ResourceList};
pub use queues::{QueueSettings, mutate_queue, validate_queue};
pub use review::{Operation, Refusal, Review, decode};
pub use view::{QueueView, ViewError};

/// Volcano's scheduler: the scheduler name a job gets when it names none and no other is
/// configured.
pub const DEFAULT_SCHEDULER: &str = "volcano";
