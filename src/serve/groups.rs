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
//! that is no Kubernetes affinity or a label Kubernetes would refuse is an error naming its line,
//! at start (the start fails) and on a reload (the previous groups stay).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, PatchOperation, ReplaceOperation};
use k8s_openapi::api::core::v1::{Affinity, Toleration};
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

use super::ServeError;
use super::reload::{Contents, Files, Reloading};
use crate::admission::{label_value_problem, qualified_name_problem};
use crate::events::{ServerEvents, WatchedFile};

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
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Group {
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
        let Some(object) = &self.object else {
            return pod.annotations.get(DEFAULT_ANNOTATION) == Some(&self.resource_group);
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
        &self.resource_group
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

    /// The JSON Patch that puts the group's fields on `pod` (see [`Group::apply`]), with one
    /// operation for each field that changes and none for a field the pod already has as the
    /// group sets it; empty when nothing changes or `pod` is no object. Made from the pod as it
    /// is, without copying or comparing it whole.
    pub fn patch(&self, pod: &Value) -> json_patch::Patch {
        let mut operations = Vec::new();
        let Some(object) = pod.as_object() else {
            return json_patch::Patch(operations);
        };
        let spec = match object.get("spec") {
            Some(Value::Object(spec)) => spec,
            // A spec that is there but no object is left alone, as nothing can be put in it.
            Some(_) => return json_patch::Patch(operations),
            None => {
                // Against an empty spec every change is a whole field.
                let mut spec = Map::new();
                self.patch_spec(&Map::new(), &mut |path, value| {
                    spec.insert(path.join("/"), value);
                });
                operations.push(PatchOperation::Add(AddOperation {
                    path: PointerBuf::from_tokens(["spec"]),
                    value: Value::Object(spec),
                }));
                return json_patch::Patch(operations);
            }
        };
        self.patch_spec(spec, &mut |path, value| {
            let existed = match path {
                [field] => spec.get(*field).is_some(),
                [field, key] => spec.get(*field).and_then(|map| map.get(*key)).is_some(),
                _ => false,
            };
            let path = PointerBuf::from_tokens(std::iter::once("spec").chain(path.iter().copied()));
            operations.push(if existed {
                PatchOperation::Replace(ReplaceOperation { path, value })
            } else {
                PatchOperation::Add(AddOperation { path, value })
            });
        });
        json_patch::Patch(operations)
    }

    /// Calls `put` with each place under `spec` (a field, or a field's key) the group changes
    /// and its value there: a whole field where `spec` lacks it or has it of another type, else
    /// a node selector key or an appended toleration (its index as the key) at a time. Of
    /// `spec` it reads [`SPEC_FIELDS`] only.
    fn patch_spec(&self, spec: &Map<String, Value>, put: &mut dyn FnMut(&[&str], Value)) {
        let label = |value: &String| Value::String(value.clone());
        if !self.labels.is_empty() {
            match spec.get("nodeSelector") {
                Some(Value::Object(selector)) => {
                    for (key, value) in &self.labels {
                        if selector.get(key).and_then(Value::as_str) != Some(value.as_str()) {
                            put(&["nodeSelector", key], label(value));
                        }
                    }
                }
                _ => put(
                    &["nodeSelector"],
                    Value::Object(
                        self.labels
                            .iter()
                            .map(|(key, value)| (key.clone(), label(value)))
                            .collect(),
                    ),
                ),
            }
        }
        if !self.tolerations.is_empty() {
            let (present, whole): (Vec<Toleration>, Option<Vec<Value>>) =
                match spec.get("tolerations") {
                    Some(Value::Array(present)) => (
                        present
                            .iter()
                            .filter_map(|present| Toleration::deserialize(present).ok())
                            .collect(),
                        None,
                    ),
                    _ => (Vec::new(), Some(Vec::new())),
                };
            let mut had: Vec<&Toleration> = present.iter().collect();
            let mut next = spec
                .get("tolerations")
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            let mut whole = whole;
            for toleration in &self.tolerations {
                if had
                    .iter()
                    .any(|had| is_same_toleration(had, &toleration.typed))
                {
                    continue;
                }
                had.push(&toleration.typed);
                let value = toleration.json.clone();
                match &mut whole {
                    Some(whole) => whole.push(value),
                    None => {
                        put(&["tolerations", &next.to_string()], value);
                        next += 1;
                    }
                }
            }
            if let Some(whole) = whole {
                put(&["tolerations"], Value::Array(whole));
            }
        }
        if let Some(affinity) = &self.affinity {
            if spec.get("affinity").is_none_or(Value::is_null) {
                put(&["affinity"], affinity.clone());
            }
        }
        if !self.scheduler_name.is_empty()
            && spec.get("schedulerName").and_then(Value::as_str) != Some(&self.scheduler_name)
        {
            put(&["schedulerName"], label(&self.scheduler_name));
        }
    }
}

/// The fields of a pod's `spec` that [`Group::patch`] reads and writes, and all it reads of the
/// spec: `/pods/mutate` builds only these.
pub(super) const SPEC_FIELDS: [&str; 4] =
    ["nodeSelector", "tolerations", "affinity", "schedulerName"];

/// Whether two tolerations are the same as Kubernetes reads them: an omitted or empty
/// `operator` is `Equal`, and a null or absent field is the same as an empty one.
fn is_same_toleration(left: &Toleration, right: &Toleration) -> bool {
    let normal = |toleration: &Toleration| {
        let text = |field: &Option<String>| field.clone().unwrap_or_default();
        let operator = Some(text(&toleration.operator))
            .filter(|operator| !operator.is_empty())
            .unwrap_or_else(|| "Equal".to_owned());
        (
            text(&toleration.key),
            operator,
            text(&toleration.value),
            text(&toleration.effect),
            toleration.toleration_seconds,
        )
    };
    normal(left) == normal(right)
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

    /// The groups now in force.
    pub fn snapshot(&self) -> Arc<Vec<Group>> {
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
    for toleration in &tolerations {
        let operator = toleration.operator.as_deref().unwrap_or("Equal");
        if !matches!(operator, "Equal" | "Exists") {
            return Err(serde::de::Error::custom(format!(
                "tolerations: operator {operator:?} is not Equal or Exists"
            )));
        }
        if let Some(effect) = toleration.effect.as_deref() {
            if !matches!(effect, "" | "NoSchedule" | "PreferNoSchedule" | "NoExecute") {
                return Err(serde::de::Error::custom(format!(
                    "tolerations: effect {effect:?} is not NoSchedule, PreferNoSchedule or NoExecute"
                )));
            }
        }
        if operator == "Exists"
            && toleration
                .value
                .as_deref()
                .is_some_and(|value| !value.is_empty())
        {
            return Err(serde::de::Error::custom(
                "tolerations: an Exists toleration has no value",
            ));
        }
    }
    tolerations
        .into_iter()
        .map(|typed| {
            let json = serde_json::to_value(&typed)
                .map_err(|error| serde::de::Error::custom(format!("tolerations: {error}")))?;
            Ok(GroupToleration { typed, json })
        })
        .collect()
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
    use serde_json::json;

    use super::*;

    /// The group every test applies: each field set, and one toleration twice.
    fn group() -> Group {
        let text = r#"
resourceGroups:
  - resourceGroup: gpu
    object: {key: namespace, value: [ml]}
    schedulerName: volcano
    labels: {accelerator: nvidia, pool: gpu}
    tolerations:
      - {key: gpu, operator: Exists, effect: NoSchedule}
      - {key: gpu, operator: Exists, effect: NoSchedule}
    affinity: '{"nodeAffinity": {}}'
"#;
        let mut groups = parse(Path::new("groups.yaml"), text).expect("a valid file");
        groups.remove(0)
    }

    fn operations(patch: &json_patch::Patch) -> Value {
        serde_json::to_value(patch).expect("a patch serializes")
    }

    #[test]
    fn patch_of_a_pod_already_carrying_the_group_is_empty() {
        let pod = json!({"spec": {
            "containers": [{"name": "c"}],
            "nodeSelector": {"accelerator": "nvidia", "pool": "gpu", "zone": "a"},
            "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule", "value": null}],
            "affinity": {"podAffinity": {}},
            "schedulerName": "volcano",
        }});
        let mut applied = pod.clone();

        group().apply(&mut applied);

        assert_eq!(operations(&group().patch(&pod)), json!([]));
        assert_eq!(applied, pod);
    }

    #[test]
    fn patch_changes_single_keys_and_appends_a_missing_toleration_once() {
        let pod = json!({"spec": {
            "containers": [{"name": "c"}],
            "nodeSelector": {"accelerator": "amd", "zone": "a"},
            "tolerations": [{"key": "spot", "operator": "Exists"}],
            "schedulerName": "default-scheduler",
        }});

        let patch = group().patch(&pod);

        assert_eq!(
            operations(&patch),
            json!([
                {"op": "replace", "path": "/spec/nodeSelector/accelerator", "value": "nvidia"},
                {"op": "add", "path": "/spec/nodeSelector/pool", "value": "gpu"},
                {"op": "add", "path": "/spec/tolerations/1",
                 "value": {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}},
                {"op": "add", "path": "/spec/affinity", "value": {"nodeAffinity": {}}},
                {"op": "replace", "path": "/spec/schedulerName", "value": "volcano"},
            ])
        );
        let mut applied = pod.clone();
        json_patch::patch(&mut applied, &patch).expect("applies");
        assert_eq!(applied["spec"]["containers"], pod["spec"]["containers"]);
        assert_eq!(applied["spec"]["nodeSelector"]["zone"], "a");
        assert_eq!(
            applied["spec"]["tolerations"].as_array().map(Vec::len),
            Some(2)
        );
    }

    #[test]
    fn patch_replaces_fields_of_another_type_whole() {
        let pod = json!({"spec": {"nodeSelector": null, "tolerations": "none", "affinity": null}});

        let patch = group().patch(&pod);

        let toleration = json!({"key": "gpu", "operator": "Exists", "effect": "NoSchedule"});
        assert_eq!(
            operations(&patch),
            json!([
                {"op": "replace", "path": "/spec/nodeSelector",
                 "value": {"accelerator": "nvidia", "pool": "gpu"}},
                {"op": "replace", "path": "/spec/tolerations", "value": [toleration]},
                {"op": "replace", "path": "/spec/affinity", "value": {"nodeAffinity": {}}},
                {"op": "add", "path": "/spec/schedulerName", "value": "volcano"},
            ])
        );
    }

    #[test]
    fn patch_of_a_pod_without_a_spec_adds_a_whole_one() {
        let pod = json!({"metadata": {"name": "p"}});

        let patch = group().patch(&pod);

        assert_eq!(
            operations(&patch),
            json!([{"op": "add", "path": "/spec", "value": {
                "nodeSelector": {"accelerator": "nvidia", "pool": "gpu"},
                "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
                "affinity": {"nodeAffinity": {}},
                "schedulerName": "volcano",
            }}])
        );
    }

    #[test]
    fn a_spec_or_pod_that_is_no_object_gets_no_patch() {
        for pod in [json!({"spec": "none"}), json!([1]), json!(null)] {
            let mut applied = pod.clone();

            group().apply(&mut applied);

            assert_eq!(operations(&group().patch(&pod)), json!([]), "{pod}");
            assert_eq!(applied, pod);
        }
    }

    /// A group's patch of what `/pods/mutate` reads of `pod`.
    fn patch_of_view(pod: &Value) -> Value {
        let text = serde_json::value::to_raw_value(pod).expect("a pod serializes");
        let view: super::super::pod_view::PodView =
            serde_json::from_str(text.get()).expect("a pod decodes");
        operations(&group().patch(&view.for_patch()))
    }

    #[test]
    fn patch_of_what_pods_mutate_reads_is_the_patch_of_the_whole_pod() {
        for pod in [
            json!({"metadata": {"name": "p"}}),
            json!({"spec": null}),
            json!({"spec": "not an object"}),
            json!({"spec": {"containers": [{"name": "c", "ports": [{"containerPort": 80}]}]}}),
            json!({"spec": {
                "containers": [{"name": "c"}],
                "nodeSelector": {"accelerator": "amd", "zone": "a"},
                "tolerations": [{"key": "spot", "operator": "Exists"}],
                "affinity": null,
                "schedulerName": "default-scheduler",
                "volumes": [{"name": "v", "emptyDir": {}}],
            }}),
            json!({"spec": {"nodeSelector": "not a map", "tolerations": {"not": "a list"}}}),
        ] {
            let whole = operations(&group().patch(&pod));

            assert_eq!(patch_of_view(&pod), whole, "{pod}");
        }
    }

    #[test]
    fn a_spec_key_written_with_escapes_is_read_as_the_plain_key() {
        let text = r#"{"spec": {"node\u0053elector": {"accelerator": "nvidia", "pool": "gpu"}}}"#;
        let view: super::super::pod_view::PodView = serde_json::from_str(text).expect("decodes");

        let pod = view.for_patch();

        assert_eq!(
            pod,
            json!({"spec": {"nodeSelector": {"accelerator": "nvidia", "pool": "gpu"}}})
        );
    }
}
