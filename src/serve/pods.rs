//! `/pods/mutate` and `/pods/validate`: Volcano's pod services, for pods being created.
//!
//! Both answer `CREATE` of a `v1` Pod; any other operation is allowed unchanged (the webhook
//! configurations send only `CREATE`), and a review of another kind is refused as a bad request.

use std::collections::{BTreeMap, HashSet};

use k8s_openapi::api::core::v1::Pod;
use serde::Deserialize;
use serde_json::Value;

use super::groups::{PodKeys, ResourceGroups};
use super::review::{ReviewAnswer, ReviewRequest, Reviewer};
use crate::admission::is_reserved_key;

/// The path of [`Mutation`].
pub const MUTATE_PATH: &str = "/pods/mutate";
/// The path of [`Validation`].
pub const VALIDATE_PATH: &str = "/pods/validate";

/// The pod in a `CREATE` review, or the answer that ends the review early.
enum Created {
    Pod { object: Value, pod: Box<Pod> },
    Answered(ReviewAnswer),
}

fn created(request: &ReviewRequest) -> Created {
    if request.operation != "CREATE" {
        return Created::Answered(ReviewAnswer::allow(request));
    }
    let kind = &request.kind;
    if !(kind.group.is_empty() && kind.version == "v1" && kind.kind == "Pod") {
        return Created::Answered(ReviewAnswer::bad_request(
            request,
            format!(
                "expected a v1 Pod, got {}/{} {}",
                kind.group, kind.version, kind.kind
            ),
        ));
    }
    let Some(object) = request.object.clone() else {
        return Created::Answered(ReviewAnswer::bad_request(
            request,
            "the review has no object".to_owned(),
        ));
    };
    match Pod::deserialize(&object) {
        Ok(pod) => Created::Pod {
            object,
            pod: Box::new(pod),
        },
        Err(error) => Created::Answered(ReviewAnswer::bad_request(
            request,
            format!("the object is not a pod: {error}"),
        )),
    }
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
    fn review(&self, request: &ReviewRequest) -> ReviewAnswer {
        let (original, pod) = match created(request) {
            Created::Pod { object, pod } => (object, pod),
            Created::Answered(answer) => return answer,
        };
        let empty = BTreeMap::new();
        let metadata = &pod.metadata;
        // A pod made from `generateName` arrives without its namespace: the request has it.
        let namespace = metadata
            .namespace
            .as_deref()
            .filter(|namespace| !namespace.is_empty())
            .unwrap_or(&request.namespace);
        let keys = PodKeys {
            namespace,
            labels: metadata.labels.as_ref().unwrap_or(&empty),
            annotations: metadata.annotations.as_ref().unwrap_or(&empty),
        };
        let groups = self.groups.snapshot();
        let Some(group) = groups.iter().find(|group| group.takes(keys)) else {
            return ReviewAnswer::allow(request);
        };
        let mut mutated = original.clone();
        group.apply(&mut mutated);
        ReviewAnswer::patch(request, &json_patch::diff(&original, &mutated))
    }
}

/// `/pods/validate`: refuses a pod of one of the checked schedulers that carries a
/// `dexaflow.io/` or `leoflow.io/` label or annotation, unless a trusted user creates it.
///
/// Network policies and cost tools trust those keys to say which tenant and task a pod runs,
/// so only the dispatcher (a trusted user) may set them.
#[derive(Debug, Clone)]
pub struct Validation {
    scheduler_names: HashSet<String>,
    trusted_users: HashSet<String>,
}

impl Validation {
    /// The service checking pods of `scheduler_names`, letting `trusted_users` set the keys.
    pub fn new(
        scheduler_names: impl IntoIterator<Item = String>,
        trusted_users: impl IntoIterator<Item = String>,
    ) -> Validation {
        Validation {
            scheduler_names: scheduler_names.into_iter().collect(),
            trusted_users: trusted_users.into_iter().collect(),
        }
    }
}

impl Reviewer for Validation {
    fn review(&self, request: &ReviewRequest) -> ReviewAnswer {
        let pod = match created(request) {
            Created::Pod { pod, .. } => pod,
            Created::Answered(answer) => return answer,
        };
        // The API server defaults an unset scheduler name before webhooks see the pod.
        let scheduler = pod
            .spec
            .as_ref()
            .and_then(|spec| spec.scheduler_name.as_deref())
            .unwrap_or("default-scheduler");
        if !self.scheduler_names.contains(scheduler)
            || self.trusted_users.contains(&request.user_info.username)
        {
            return ReviewAnswer::allow(request);
        }
        let metadata = &pod.metadata;
        let reserved = |map: &Option<BTreeMap<String, String>>, what: &str| {
            map.iter()
                .flat_map(BTreeMap::keys)
                .find(|key| is_reserved_key(key))
                .map(|key| format!("{what} {key:?}"))
        };
        let found = reserved(&metadata.labels, "label")
            .or_else(|| reserved(&metadata.annotations, "annotation"));
        match found {
            Some(what) => ReviewAnswer::forbid(
                request,
                format!(
                    "the pod carries the {what}: dexaflow.io/ and leoflow.io/ keys are set only by the dispatcher, and user {:?} is not trusted to set them",
                    request.user_info.username
                ),
            ),
            None => ReviewAnswer::allow(request),
        }
    }
}
