//! Resource groups: Volcano's `AdmissionConfiguration` file, read at start, re-read when it
//! changes, and applied to pods by `/pods/mutate`.
//!
//! A Volcano user's file works unchanged:
//!
//! ```yaml
//! resourceGroups:
//!   - resourceGroup: gpu
//!     object: {key: namespace, value: [ml-training]}
//!     schedulerName: volcano
//!     labels: {accelerator: nvidia}
//!     tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
//!     affinity: '{"nodeAffinity": {...}}'
//! ```
//!
//! `object.key` is `namespace`, `annotation` or `label` (this server's addition); each
//! `annotation` or `label` value is a `key: value` pair, and the group takes a pod that carries
//! any of them. Without an `object`, a group takes the pods annotated
//! `volcano.sh/resource-group: <resourceGroup>`, as Volcano does. The first group that takes a
//! pod wins.
//!
//! Unlike Volcano, the file is strict: an unknown field, an unknown `object.key`, an `affinity`
//! that is no Kubernetes affinity or a label or toleration Kubernetes would refuse is an error
//! naming its line, at start (the start fails) and on a reload (the previous groups stay).

use std::collections::BTreeMap;
use std::ops::Deref;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Affinity, Toleration};
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use super::ServeError;
use super::reload::{Contents, Files, Reloading};
use crate::admission::{
    self, TaintEffect, TolerationOperator, check_tolerations, label_value_problem,
    qualified_name_problem,
};
use crate::events::{ServerEvents, WatchedFile};

mod patch;
mod written;

pub(super) use patch::{PatchedSpec, SPEC_FIELDS};
use written::WrittenPatches;

/// The annotation a group without an `object` matches on: Volcano's default.
pub const DEFAULT_ANNOTATION: &str = "volcano.sh/resource-group";

/// The whole file.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct File {
    #[serde(default)]
    resource_groups: Vec<Group>,
}

/// One resource group: which pods it takes and what it puts on them.
#[derive(Debug, Clone, Deserialize)]
#[serde(from = "Declared")]
pub struct Group {
    declared: Declared,
    /// The patches of the pods that lack the group's fields, made when the group is read.
    written: WrittenPatches,
}

/// A group as its file declares it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Declared {
    /// The group's name, matched by the default annotation.
    resource_group: String,
    #[serde(default)]
    object: Option<Object>,
    /// Set as the pod's `schedulerName` when not empty.
    #[serde(default)]
    scheduler_name: String,
    /// Appended to the pod's tolerations, skipping those it already has (compared as
    /// Kubernetes compares them: an omitted operator is `Equal`, null is absent).
    #[serde(default, deserialize_with = "tolerations")]
    tolerations: Vec<GroupToleration>,
    /// Merged into the pod's node selector; the group's values win.
    #[serde(default, deserialize_with = "labels")]
    labels: BTreeMap<String, String>,
    /// Set when the pod has no affinity; a JSON document in a string, as Volcano has it.
    #[serde(default, deserialize_with = "affinity")]
    affinity: Option<Value>,
}

impl From<Declared> for Group {
    fn from(declared: Declared) -> Group {
        Group {
            written: WrittenPatches::of(&declared),
            declared,
        }
    }
}

/// Groups declared alike are equal: the patches written ahead follow from the declaration.
impl PartialEq for Group {
    fn eq(&self, other: &Group) -> bool {
        self.declared == other.declared
    }
}

/// Which pods a group takes.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
struct Object {
    key: ObjectKey,
    #[serde(default)]
    value: Vec<String>,
}

/// What `object.value` is compared with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum ObjectKey {
    Namespace,
    Annotation,
    Label,
}

/// A toleration a group adds: as read, to compare, and as JSON, made once for every patch.
#[derive(Debug, Clone, PartialEq)]
struct GroupToleration {
    typed: Toleration,
    json: Value,
}

/// What a group is compared with: a pod's namespace (its own, else the request's), labels and
/// annotations.
#[derive(Debug, Clone, Copy)]
pub struct PodKeys<'a> {
    /// The namespace the pod is created in.
    pub namespace: &'a str,
    /// The pod's labels.
    pub labels: &'a BTreeMap<String, String>,
    /// The pod's annotations.
    pub annotations: &'a BTreeMap<String, String>,
}

impl Group {
    /// Whether this group takes the pod.
    pub fn takes(&self, pod: PodKeys<'_>) -> bool {
        let Some(object) = &self.declared.object else {
            return pod.annotations.get(DEFAULT_ANNOTATION) == Some(&self.declared.resource_group);
        };
        let pairs = |map: &BTreeMap<String, String>| {
            object.value.iter().any(|pair| {
                split_pair(pair)
                    .is_some_and(|(key, value)| map.get(key).map(String::as_str) == Some(value))
            })
        };
        match object.key {
            ObjectKey::Namespace => object
                .value
                .iter()
                .any(|namespace| namespace == pod.namespace),
            ObjectKey::Annotation => pairs(pod.annotations),
            ObjectKey::Label => pairs(pod.labels),
        }
    }

    /// The group's name.
    pub fn name(&self) -> &str {
        &self.declared.resource_group
    }

    /// Puts the group's fields on `pod`, a pod object as JSON: the node selector merged, the
    /// tolerations appended, the affinity set when the pod has none, the scheduler name set.
    /// The same change as [`Group::patch`] describes.
    pub fn apply(&self, pod: &mut Value) {
        let patch = self.patch(pod);
        // Each operation names a place `patch` found in this very pod, or a new key or the end
        // of an array there, so it applies; json_patch leaves the pod as it was if one did not.
        let _ = json_patch::patch(pod, &patch);
    }
}

/// `key: value` as Volcano writes an annotation match, the spaces around either trimmed.
fn split_pair(pair: &str) -> Option<(&str, &str)> {
    let (key, value) = pair.split_once(':')?;
    Some((key.trim(), value.trim()))
}

/// The resource groups in force, swapped whole on a reload: readers take a snapshot without
/// waiting, and a reload never waits for readers.
#[derive(Debug, Clone)]
pub struct ResourceGroups {
    current: Reloading<Vec<Group>>,
}

impl ResourceGroups {
    /// Groups that never change: for tests, and for a server without a groups file (none).
    pub fn fixed(groups: Vec<Group>) -> ResourceGroups {
        ResourceGroups {
            current: Reloading::fixed(groups),
        }
    }

    /// Reads `path` and watches it, re-reading it when it changes (or every `poll`).
    ///
    /// A change is taken once the write has settled (an empty file never is); one that parses
    /// replaces the groups and counts `ok`, one that does not keeps the previous groups, logs
    /// why and counts `error`. Call it inside a tokio runtime.
    ///
    /// # Errors
    /// [`ServeError::Read`] or [`ServeError::Groups`] (naming the line) when the file cannot be
    /// read or parsed now; [`ServeError::Watch`] when its directory cannot be watched.
    pub fn watch(
        path: &Path,
        poll: Duration,
        events: Arc<dyn ServerEvents>,
    ) -> Result<ResourceGroups, ServeError> {
        let file = path.to_owned();
        let files = Files {
            name: "resource groups",
            reported_as: WatchedFile::ResourceGroups,
            paths: [path.to_owned()],
            parse: Box::new(move |[bytes]: &Contents<1>| parse_bytes(&file, bytes)),
        };
        Ok(ResourceGroups {
            current: Reloading::watch(files, poll, events)?,
        })
    }

    /// The groups now in force, for a moment: a request's worth.
    pub fn snapshot(&self) -> impl Deref<Target = Arc<Vec<Group>>> + use<> {
        self.current.load()
    }
}

/// Parses the text of an `AdmissionConfiguration` file.
///
/// # Errors
/// [`ServeError::Groups`], whose source names the line.
pub fn parse(path: &Path, text: &str) -> Result<Vec<Group>, ServeError> {
    parse_bytes(path, text.as_bytes())
}

/// Parses the bytes of an `AdmissionConfiguration` file, as read: text that is not UTF-8 is
/// refused as YAML.
///
/// # Errors
/// [`ServeError::Groups`], whose source names the line.
pub(super) fn parse_bytes(path: &Path, bytes: &[u8]) -> Result<Vec<Group>, ServeError> {
    let file: Option<File> =
        serde_yaml_ng::from_slice(bytes).map_err(|source| ServeError::Groups {
            path: path.to_owned(),
            source,
        })?;
    Ok(file.unwrap_or_default().resource_groups)
}

fn tolerations<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<GroupToleration>, D::Error> {
    let tolerations = Vec::<Toleration>::deserialize(deserializer)?;
    let checked = tolerations
        .iter()
        .map(checked_toleration)
        .collect::<Result<Vec<_>, _>>()
        .map_err(serde::de::Error::custom)?;
    check_tolerations(&checked)
        .map_err(|error| serde::de::Error::custom(format!("tolerations: {error}")))?;
    tolerations
        .into_iter()
        .map(|typed| {
            let json = serde_json::to_value(&typed)
                .map_err(|error| serde::de::Error::custom(format!("tolerations: {error}")))?;
            Ok(GroupToleration { typed, json })
        })
        .collect()
}

/// `toleration` as the rules Kubernetes applies to every toleration read it: an omitted or
/// empty operator is `Equal`, an omitted or empty effect matches every effect.
///
/// # Errors
/// An operator or effect Kubernetes does not know, named.
fn checked_toleration(toleration: &Toleration) -> Result<admission::Toleration, String> {
    let operator = match toleration.operator.as_deref().unwrap_or_default() {
        "" | "Equal" => TolerationOperator::Equal,
        "Exists" => TolerationOperator::Exists,
        other => {
            return Err(format!(
                "tolerations: operator {other:?} is not Equal or Exists"
            ));
        }
    };
    let effect = match toleration.effect.as_deref().unwrap_or_default() {
        "" => None,
        "NoSchedule" => Some(TaintEffect::NoSchedule),
        "PreferNoSchedule" => Some(TaintEffect::PreferNoSchedule),
        "NoExecute" => Some(TaintEffect::NoExecute),
        other => {
            return Err(format!(
                "tolerations: effect {other:?} is not NoSchedule, PreferNoSchedule or NoExecute"
            ));
        }
    };
    Ok(admission::Toleration {
        key: toleration.key.clone().unwrap_or_default(),
        operator,
        value: toleration.value.clone().unwrap_or_default(),
        effect,
        toleration_seconds: toleration.toleration_seconds,
    })
}

fn labels<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<BTreeMap<String, String>, D::Error> {
    let labels = BTreeMap::<String, String>::deserialize(deserializer)?;
    for (key, value) in &labels {
        if let Some(problem) = qualified_name_problem(key) {
            return Err(serde::de::Error::custom(format!(
                "labels: key {key:?}: {problem}"
            )));
        }
        if let Some(problem) = label_value_problem(value) {
            return Err(serde::de::Error::custom(format!(
                "labels: value {value:?} of {key:?}: {problem}"
            )));
        }
    }
    Ok(labels)
}

fn affinity<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Value>, D::Error> {
    let text = Option::<String>::deserialize(deserializer)?;
    let Some(text) = text.filter(|text| !text.trim().is_empty()) else {
        return Ok(None);
    };
    let value: Value = serde_json::from_str(&text).map_err(|error| {
        serde::de::Error::custom(format!("affinity: not a JSON document: {error}"))
    })?;
    if !value.is_object() {
        return Err(serde::de::Error::custom("affinity: not a JSON object"));
    }
    Affinity::deserialize(&value).map_err(|error| {
        serde::de::Error::custom(format!("affinity: not a Kubernetes affinity: {error}"))
    })?;
    Ok(Some(value))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group_with(toleration: &str) -> Result<Vec<Group>, ServeError> {
        let text =
            format!("resourceGroups:\n  - resourceGroup: t\n    tolerations: [{toleration}]\n");
        parse(Path::new("groups.yaml"), &text)
    }

    #[test]
    fn a_toleration_with_an_empty_operator_is_read_as_equal() {
        let groups = group_with(r#"{key: a, operator: "", value: x}"#).expect("valid");

        assert_eq!(groups.len(), 1);
    }

    #[test]
    fn a_toleration_kubernetes_would_refuse_is_refused_saying_why() {
        for (toleration, why) in [
            (
                "{operator: Equal, value: x}",
                "an empty key needs operator Exists",
            ),
            (
                "{key: 'bad key!', operator: Exists}",
                "the key is not a qualified name",
            ),
            (
                "{key: a, operator: Exists, effect: NoSchedule, tolerationSeconds: 5}",
                "needs effect NoExecute",
            ),
            (
                "{key: a, value: 'bad value!'}",
                "the value is not a valid label value",
            ),
            (
                "{key: a, operator: Exists, value: x}",
                "operator Exists takes no value",
            ),
            (
                "{key: a, operator: In}",
                r#"operator "In" is not Equal or Exists"#,
            ),
            (
                "{key: a, effect: Sometimes}",
                r#"effect "Sometimes" is not NoSchedule"#,
            ),
        ] {
            let error = group_with(toleration).expect_err(toleration);

            let message = said(&error);
            assert!(message.contains(why), "{toleration}: {message}");
            assert!(message.contains("line 2"), "{toleration}: {message}");
        }
    }

    /// The error and its sources, as a user reads them.
    fn said(error: &ServeError) -> String {
        let mut message = error.to_string();
        let mut source = std::error::Error::source(error);
        while let Some(cause) = source {
            message.push_str(&format!(": {cause}"));
            source = cause.source();
        }
        message
    }
}
