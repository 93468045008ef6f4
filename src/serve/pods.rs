//! `/pods/mutate` and `/pods/validate`: Volcano's pod services.
//!
//! `/pods/mutate` answers `CREATE` of a `v1` Pod and allows any other operation unchanged.
//! `/pods/validate` answers `CREATE` and `UPDATE`: the reserved-key rule holds for every pod,
//! whatever its scheduler, on both; Volcano's own rule (the disruption budget annotations)
//! only for pods of the configured schedulers, on `CREATE`, as Volcano has it. A review of
//! another kind is refused as a bad request.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet};

use k8s_openapi::api::core::v1::Pod;
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

use super::groups::{PodKeys, ResourceGroups};
use super::pod_view::PodView;
use super::review::{Object, ReviewAnswer, ReviewRequest, Reviewer};
use crate::admission::{Strict, is_reserved_key};
use crate::volcano;

/// The path of [`Mutation`].
pub const MUTATE_PATH: &str = "/pods/mutate";
/// The path of [`Validation`].
pub const VALIDATE_PATH: &str = "/pods/validate";

/// Why a review is refused: the 400 of a review this service cannot read, or the 403 of a pod
/// it does not admit; each with its message.
enum Refusal {
    BadRequest(String),
    Forbidden(String),
}

impl Refusal {
    fn answer<O>(self, request: &ReviewRequest<O>) -> ReviewAnswer {
        match self {
            Refusal::BadRequest(message) => ReviewAnswer::bad_request(request, message),
            Refusal::Forbidden(message) => ReviewAnswer::forbid(request, message),
        }
    }
}

/// Refuses a review whose object is not a `v1` Pod.
fn check_kind<O>(request: &ReviewRequest<O>) -> Result<(), Refusal> {
    let kind = &request.kind;
    if kind.group.is_empty() && kind.version == "v1" && kind.kind == "Pod" {
        return Ok(());
    }
    Err(Refusal::BadRequest(format!(
        "expected a v1 Pod, got {}/{} {}",
        kind.group, kind.version, kind.kind
    )))
}

/// `T` (a pod, or what `/pods/mutate` reads of one) from `from`, the object's text; `field`
/// names it in the refusal.
fn decode<'de, T: Deserialize<'de>>(
    from: impl Deserializer<'de>,
    field: &str,
) -> Result<T, Refusal> {
    T::deserialize(Strict(from))
        .map_err(|error| Refusal::BadRequest(format!("{field} is not a pod: {error}")))
}

/// The review's object, refused when it has none.
fn object(request: &ReviewRequest) -> Result<&RawValue, Refusal> {
    request.object.as_deref().ok_or_else(no_object)
}

fn no_object() -> Refusal {
    Refusal::BadRequest("the review has no object".to_owned())
}

/// `/pods/mutate`: applies the first resource group that takes the pod, answered as a JSON
/// Patch (none when nothing changes).
#[derive(Debug, Clone)]
pub struct Mutation {
    groups: ResourceGroups,
}

impl Mutation {
    /// The service applying `groups`.
    pub fn new(groups: ResourceGroups) -> Mutation {
        Mutation { groups }
    }
}

impl Reviewer for Mutation {
    type Object = Object<PodView>;

    fn review(&self, request: &ReviewRequest<Object<PodView>>) -> ReviewAnswer {
        if request.operation != "CREATE" {
            return ReviewAnswer::allow(request);
        }
        let pod = match check_kind(request).and_then(|()| pod_view(request)) {
            Ok(pod) => pod,
            Err(refusal) => return refusal.answer(request),
        };
        // A pod made from `generateName` arrives without its namespace: the request has it.
        let keys = PodKeys {
            namespace: pod.namespace().unwrap_or(&request.namespace),
            labels: pod.labels(),
            annotations: pod.annotations(),
        };
        let groups = self.groups.snapshot();
        let Some(group) = groups.iter().find(|group| group.takes(keys)) else {
            return ReviewAnswer::allow(request);
        };
        match group.encoded_patch(pod.patched_spec()) {
            Some(patch) => ReviewAnswer::encoded_patch(request, patch),
            None => ReviewAnswer::allow(request),
        }
    }
}

/// What `/pods/mutate` reads of the review's object: decoded with the review, or, when it did
/// not decode so, decoded again from its text to say why.
fn pod_view(request: &ReviewRequest<Object<PodView>>) -> Result<Cow<'_, PodView>, Refusal> {
    let object = request.object.as_ref().ok_or_else(no_object)?;
    object
        .or_decode(|text| decode(text, "the object").map(Some))?
        .ok_or_else(no_object)
}

/// `/pods/validate`: refuses a pod that carries a `dexaflow.io/` or `leoflow.io/` label or
/// annotation, unless a trusted user creates it, whatever its scheduler; on `UPDATE`, one such
/// key added or changed (one the pod already had, unchanged, passes). For pods of the checked
/// schedulers it also applies Volcano's rule on `CREATE`: the disruption budget annotations are
/// a positive integer or a percentage from 1% to 99%, and not both at once.
///
/// Network policies and cost tools trust those keys to say which tenant and task a pod runs,
/// so only the dispatcher (a trusted user) may set them.
#[derive(Debug, Clone)]
pub struct Validation {
    scheduler_names: Vec<String>,
    trusted_users: HashSet<String>,
}

impl Validation {
    /// The service applying Volcano's rule to pods of `scheduler_names` and letting
    /// `trusted_users` set the reserved keys.
    pub fn new(
        scheduler_names: impl IntoIterator<Item = String>,
        trusted_users: impl IntoIterator<Item = String>,
    ) -> Validation {
        Validation {
            scheduler_names: scheduler_names.into_iter().collect(),
            trusted_users: trusted_users.into_iter().collect(),
        }
    }

    fn validate(&self, request: &ReviewRequest) -> Result<(), Refusal> {
        let update = match request.operation.as_str() {
            "CREATE" => false,
            "UPDATE" => true,
            _ => return Ok(()),
        };
        check_kind(request)?;
        let pod = decode(object(request)?, "the object")?;
        // The API server sends the old object with every UPDATE; without one, every reserved
        // key counts as added.
        let old = match request.old_object.as_deref().filter(|_| update) {
            Some(old) => Some(decode(old, "the old object")?),
            None => None,
        };
        let user = &request.user_info.username;
        if !self.trusted_users.contains(user) {
            if let Some(what) = forged_key(&pod, old.as_ref()) {
                return Err(Refusal::Forbidden(format!(
                    "{what}: dexaflow.io/ and leoflow.io/ keys are set only by the dispatcher, and user {user:?} is not trusted to set them"
                )));
            }
        }
        if update {
            return Ok(());
        }
        let review = volcano::Review {
            operation: volcano::Operation::Create,
            name: &request.name,
            namespace: &request.namespace,
            object: Some(&pod),
            old_object: None,
        };
        volcano::validate_pod(&review, &self.scheduler_names)
            .map_err(|refusal| Refusal::Forbidden(refusal.to_string()))
    }
}

impl Reviewer for Validation {
    type Object = Box<RawValue>;

    fn review(&self, request: &ReviewRequest) -> ReviewAnswer {
        match self.validate(request) {
            Ok(()) => ReviewAnswer::allow(request),
            Err(refusal) => refusal.answer(request),
        }
    }
}

/// The first reserved label or annotation `pod` sets that `old` (the pod before an UPDATE)
/// did not have with the same value, said for the refusal; `None` when there is none.
fn forged_key(pod: &Pod, old: Option<&Pod>) -> Option<String> {
    let empty = BTreeMap::new();
    let (labels, annotations) = (&pod.metadata.labels, &pod.metadata.annotations);
    let old_labels = old.map(|old| old.metadata.labels.as_ref().unwrap_or(&empty));
    let old_annotations = old.map(|old| old.metadata.annotations.as_ref().unwrap_or(&empty));
    forged_in("label", labels.as_ref().unwrap_or(&empty), old_labels).or_else(|| {
        forged_in(
            "annotation",
            annotations.as_ref().unwrap_or(&empty),
            old_annotations,
        )
    })
}

/// [`forged_key`] for one map: `what` names it (`label`, `annotation`), `old` is the map
/// before an UPDATE.
fn forged_in(
    what: &str,
    map: &BTreeMap<String, String>,
    old: Option<&BTreeMap<String, String>>,
) -> Option<String> {
    map.iter()
        .filter(|(key, _)| is_reserved_key(key))
        .find_map(|(key, value)| match old.map(|old| old.get(key)) {
            None => Some(format!("the pod carries the {what} {key:?}")),
            Some(None) => Some(format!("the update adds the {what} {key:?}")),
            Some(Some(was)) if was != value => {
                Some(format!("the update changes the {what} {key:?}"))
            }
            Some(Some(_)) => None,
        })
}
