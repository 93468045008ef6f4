//! Volcano's admission services, served: each decodes the review's object as Volcano's type,
//! reads the cluster through the view its rule takes, applies the pure rule of
//! [`crate::volcano`] and answers as Volcano does: a denial (403) with Volcano's message, or a
//! JSON Patch. Where Volcano answers wrongly, these answer as the API server expects: an object
//! that does not decode, or an operation the service is not registered for, is a 400 naming it
//! rather than a verdict, and nothing to change is no patch rather than the literal `null`.
//!
//! A service that reads the queue cache answers 503 until the cache has synced once, so that
//! no review is answered from a cache that never held the cluster's queues; the API server
//! then applies the webhook's `failurePolicy`.

use std::borrow::Cow;
use std::sync::Arc;

use json_patch::{Patch, PatchOperation};
use serde::de::DeserializeOwned;
use tokio::time::Instant;

use super::registry::Unavailable;
use super::review::{Object, ReviewAnswer, ReviewRequest, Reviewer, WaitingReviewer};
use super::services::{Admits, BuiltinService};
use crate::cluster::{Cache, Namespaces};
use crate::volcano::{self, Operation, PodGroup, Queue, QueueView, Refusal};

/// The path of Volcano's queue validation.
pub const QUEUES_VALIDATE_PATH: &str = "/queues/validate";
/// The path of Volcano's queue defaults.
pub const QUEUES_MUTATE_PATH: &str = "/queues/mutate";
/// The path of Volcano's job validation.
pub const JOBS_VALIDATE_PATH: &str = "/jobs/validate";
/// The path of Volcano's job defaults.
pub const JOBS_MUTATE_PATH: &str = "/jobs/mutate";
/// The path of Volcano's pod group validation.
pub const PODGROUPS_VALIDATE_PATH: &str = "/podgroups/validate";
/// The path of Volcano's pod group defaults.
pub const PODGROUPS_MUTATE_PATH: &str = "/podgroups/mutate";
/// The path of Volcano's job flow validation.
pub const JOBFLOWS_VALIDATE_PATH: &str = "/jobflows/validate";
/// The path of Volcano's hypernode validation.
pub const HYPERNODES_VALIDATE_PATH: &str = "/hypernodes/validate";
/// The path of Volcano's cron job validation.
pub const CRONJOBS_VALIDATE_PATH: &str = "/cronjobs/validate";

/// What a rule allowed: as it is, or with a patch.
pub(crate) enum Allowed {
    AsItIs,
    Patched(Vec<PatchOperation>),
}

type PureRule<T> = dyn Fn(&volcano::Review<'_, T>) -> Result<Allowed, Refusal> + Send + Sync;
type QueueRule<T> =
    dyn Fn(&volcano::Review<'_, T>, &dyn QueueView) -> Result<Allowed, Refusal> + Send + Sync;

/// The request's `field` (its object or old object) as `T`; absent or `null` is `None`.
fn decoded<'a, T: DeserializeOwned + Clone>(
    field: &'static str,
    object: &'a Option<Object<T>>,
) -> Result<Option<Cow<'a, T>>, Refusal> {
    match object {
        None => Ok(None),
        Some(object) => object.or_decode(|text| volcano::decode(field, text)),
    }
}

/// Refuses a request about another resource than the one the service is for, as Volcano's
/// decoders do (in their words: Go prints the resource as `{group version resource}`): a
/// webhook configuration pointing one resource's rules at another's path would otherwise have
/// the object judged by the wrong rules.
fn check_resource<O>(request: &ReviewRequest<O>, admits: Option<Admits>) -> Result<(), String> {
    let Some(admits) = admits else {
        return Ok(());
    };
    let got = &request.resource;
    if got.group == admits.group && got.version == admits.version && got.resource == admits.resource
    {
        return Ok(());
    }
    Err(format!(
        "expect resource to be {{{} {} {}}}, got {{{} {} {}}}",
        admits.group, admits.version, admits.resource, got.group, got.version, got.resource
    ))
}

/// Decodes `request`'s object and old object as `T`, once the request is about `admits`'s
/// resource, and answers with what `rule` makes of them.
fn review_with<T: DeserializeOwned + Clone>(
    request: &ReviewRequest<Object<T>>,
    admits: Option<Admits>,
    rule: impl FnOnce(&volcano::Review<'_, T>) -> Result<Allowed, Refusal>,
) -> ReviewAnswer {
    if let Err(message) = check_resource(request, admits) {
        return ReviewAnswer::bad_request(request, message);
    }
    let decoded = decoded::<T>("object", &request.object)
        .and_then(|object| Ok((object, decoded::<T>("oldObject", &request.old_object)?)));
    let (object, old_object) = match decoded {
        Ok(decoded) => decoded,
        Err(refusal) => return ReviewAnswer::bad_request(request, refusal.to_string()),
    };
    let review = volcano::Review {
        operation: Operation::parse(&request.operation),
        name: &request.name,
        namespace: &request.namespace,
        object: object.as_deref(),
        old_object: old_object.as_deref(),
    };
    match rule(&review) {
        Ok(Allowed::AsItIs) => ReviewAnswer::allow(request),
        Ok(Allowed::Patched(operations)) => ReviewAnswer::patch(request, &Patch(operations)),
        Err(Refusal::Denied(message)) => ReviewAnswer::forbid(request, message),
        Err(misrouted) => ReviewAnswer::bad_request(request, misrouted.to_string()),
    }
}

/// A service whose rule reads nothing of the cluster.
pub(crate) struct Pure<T> {
    admits: Option<Admits>,
    rule: Box<PureRule<T>>,
}

impl<T> Pure<T> {
    /// The service of `row` (the resource it admits), answering with `rule`.
    pub(crate) fn new(
        row: BuiltinService,
        rule: impl Fn(&volcano::Review<'_, T>) -> Result<Allowed, Refusal> + Send + Sync + 'static,
    ) -> Pure<T> {
        Pure {
            admits: row.admits,
            rule: Box::new(rule),
        }
    }
}

impl<T: DeserializeOwned + Clone + Send + Sync + 'static> Reviewer for Pure<T> {
    type Object = Object<T>;

    fn review(&self, request: &ReviewRequest<Object<T>>) -> ReviewAnswer {
        review_with(request, self.admits, |review| (self.rule)(review))
    }
}

/// A service whose rule reads the queue cache: 503 until the cache has synced.
pub(crate) struct ReadingQueues<T> {
    admits: Option<Admits>,
    queues: Arc<Cache<Queue>>,
    rule: Box<QueueRule<T>>,
}

impl<T> ReadingQueues<T> {
    /// The service of `row` (the resource it admits), answering with `rule` over `queues`.
    pub(crate) fn new(
        row: BuiltinService,
        queues: Arc<Cache<Queue>>,
        rule: impl Fn(&volcano::Review<'_, T>, &dyn QueueView) -> Result<Allowed, Refusal>
        + Send
        + Sync
        + 'static,
    ) -> ReadingQueues<T> {
        ReadingQueues {
            admits: row.admits,
            queues,
            rule: Box::new(rule),
        }
    }
}

impl<T: DeserializeOwned + Clone + Send + Sync + 'static> WaitingReviewer for ReadingQueues<T> {
    type Object = Object<T>;

    async fn review_by(
        &self,
        request: &ReviewRequest<Object<T>>,
        _deadline: Instant,
    ) -> Result<ReviewAnswer, Unavailable> {
        synced(&self.queues)?;
        let view: &dyn QueueView = self.queues.as_ref();
        Ok(review_with(request, self.admits, |review| {
            (self.rule)(review, view)
        }))
    }
}

/// `/podgroups/mutate`: a pod group in the `default` queue takes its namespace's queue, read
/// from the API server within the review's deadline.
pub(crate) struct PodGroupMutation {
    admits: Option<Admits>,
    /// `None` when the service is registered but not served: no client was made.
    namespaces: Option<Namespaces>,
}

impl PodGroupMutation {
    /// The service of `row` (the resource it admits), reading `namespaces`.
    pub(crate) fn new(row: BuiltinService, namespaces: Option<Namespaces>) -> PodGroupMutation {
        PodGroupMutation {
            admits: row.admits,
            namespaces,
        }
    }
}

impl WaitingReviewer for PodGroupMutation {
    type Object = Object<PodGroup>;

    async fn review_by(
        &self,
        request: &ReviewRequest<Object<PodGroup>>,
        deadline: Instant,
    ) -> Result<ReviewAnswer, Unavailable> {
        // Before the namespace is read for it.
        if let Err(message) = check_resource(request, self.admits) {
            return Ok(ReviewAnswer::bad_request(request, message));
        }
        let group = decoded::<PodGroup>("object", &request.object)
            .ok()
            .flatten();
        let reads = group.as_deref().is_some_and(|group| {
            volcano::podgroup_reads_namespace(&Operation::parse(&request.operation), group)
        });
        let namespace_queue = if reads {
            let Some(namespaces) = &self.namespaces else {
                return Err(Unavailable(
                    "no Kubernetes client: the service is not enabled".into(),
                ));
            };
            // The object's namespace, as Volcano reads it; the API server sets it to the
            // request's before any webhook sees the object.
            let namespace = group
                .as_deref()
                .and_then(|group| group.metadata.namespace.as_deref())
                .filter(|namespace| !namespace.is_empty())
                .unwrap_or(&request.namespace);
            let read = namespaces
                .annotation(namespace, volcano::QUEUE_NAME_ANNOTATION, deadline)
                .await;
            match read {
                Ok(queue) => Ok(queue),
                // Volcano lets the pod group through unchanged, in the `default` queue the
                // namespace may not allow; a denial that says why is what its users asked for.
                Err(error) => {
                    let message = format!(
                        "the pod group's queue comes from its namespace's {} annotation: {}",
                        volcano::QUEUE_NAME_ANNOTATION,
                        crate::admission::error_chain(&error)
                    );
                    return Ok(ReviewAnswer::forbid(request, message));
                }
            }
        } else {
            Ok(None)
        };
        Ok(review_with(request, self.admits, |review| {
            volcano::mutate_podgroup(review, namespace_queue).map(Allowed::Patched)
        }))
    }
}

/// `Ok` once `cache` has synced; before, the review is unavailable.
fn synced<T>(cache: &Cache<T>) -> Result<(), Unavailable> {
    if cache.is_synced() {
        Ok(())
    } else {
        Err(Unavailable(format!(
            "the {} cache has not synced with the API server yet",
            cache.resource().plural
        )))
    }
}
