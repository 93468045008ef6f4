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

use std::sync::Arc;

use json_patch::{Patch, PatchOperation};
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::time::Instant;

use super::registry::{Answer, Handler, Unavailable};
use super::review::{Review, ReviewAnswer, ReviewRequest, Reviewer};
use crate::cluster::Cache;
use crate::volcano::{self, Operation, Queue, QueueSettings, Refusal};

/// The path of Volcano's queue validation.
pub const QUEUES_VALIDATE_PATH: &str = "/queues/validate";
/// The path of Volcano's queue defaults.
pub const QUEUES_MUTATE_PATH: &str = "/queues/mutate";

/// What a rule allowed: as it is, or with a patch.
enum Allowed {
    AsItIs,
    Patched(Vec<PatchOperation>),
}

/// Decodes `request`'s object and old object as `T` and answers with what `rule` makes of them.
fn review_with<T: DeserializeOwned>(
    request: &ReviewRequest,
    rule: impl FnOnce(&volcano::Review<'_, T>) -> Result<Allowed, Refusal>,
) -> ReviewAnswer {
    let decode = |field, value: &Option<Value>| {
        volcano::decode::<T>(field, value.as_ref().unwrap_or(&Value::Null))
    };
    let decoded = decode("object", &request.object)
        .and_then(|object| Ok((object, decode("oldObject", &request.old_object)?)));
    let (object, old_object) = match decoded {
        Ok(decoded) => decoded,
        Err(refusal) => return ReviewAnswer::bad_request(request, refusal.to_string()),
    };
    let review = volcano::Review {
        operation: Operation::parse(&request.operation),
        name: &request.name,
        namespace: &request.namespace,
        object: object.as_ref(),
        old_object: old_object.as_ref(),
    };
    match rule(&review) {
        Ok(Allowed::AsItIs) => ReviewAnswer::allow(request),
        Ok(Allowed::Patched(operations)) => ReviewAnswer::patch(request, &Patch(operations)),
        Err(Refusal::Denied(message)) => ReviewAnswer::forbid(request, message),
        Err(misrouted) => ReviewAnswer::bad_request(request, misrouted.to_string()),
    }
}

/// `/queues/mutate`: a new queue's defaults (reclaimable, weight, the hierarchy's root).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct QueueMutation;

impl Reviewer for QueueMutation {
    fn review(&self, request: &ReviewRequest) -> ReviewAnswer {
        review_with(request, |review| {
            volcano::mutate_queue(review).map(Allowed::Patched)
        })
    }
}

/// `/queues/validate`: a queue's fields, its place in the hierarchy, and what may be deleted,
/// read against the queue cache.
pub(crate) struct QueueValidation {
    queues: Arc<Cache<Queue>>,
    settings: QueueSettings,
}

impl QueueValidation {
    pub(crate) fn new(queues: Arc<Cache<Queue>>, settings: QueueSettings) -> QueueValidation {
        QueueValidation { queues, settings }
    }
}

impl Handler for QueueValidation {
    type Request = Review;
    type Response = ReviewAnswer;

    fn uid(review: &Review) -> &str {
        &review.request.uid
    }

    async fn handle(
        &self,
        review: Review,
        _deadline: Instant,
    ) -> Result<Answer<ReviewAnswer>, Unavailable> {
        synced(&self.queues)?;
        let answer = review_with(&review.request, |review| {
            volcano::validate_queue(review, self.queues.as_ref(), &self.settings)
                .map(|()| Allowed::AsItIs)
        });
        Ok(answer.ruled())
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
