//! The patch a resource group makes of a pod: as a JSON Patch to apply, and as the JSON text
//! `/pods/mutate` sends, both from one walk of the pod's spec.

use std::collections::BTreeMap;

use json_patch::jsonptr::{PointerBuf, Token};
use json_patch::{AddOperation, PatchOperation, ReplaceOperation};
use k8s_openapi::api::core::v1::Toleration;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::{Map, Value};

use super::{Declared, Group};

/// A pod's spec as a group's patch reads it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(in crate::serve) enum PatchedSpec<'p> {
    /// The pod has no spec: the patch adds a whole one.
    Missing,
    /// The pod, or its spec, is no object (`null` included): nothing can be put in it, and the
    /// group leaves it alone.
    Unpatchable,
    /// The spec's fields; the patch reads [`SPEC_FIELDS`] only.
    Fields(&'p Map<String, Value>),
}

impl<'p> PatchedSpec<'p> {
    /// The spec of `pod`, a whole pod's JSON.
    pub(in crate::serve) fn of(pod: &'p Value) -> PatchedSpec<'p> {
        match pod.as_object().map(|pod| pod.get("spec")) {
            Some(None) => PatchedSpec::Missing,
            Some(Some(Value::Object(spec))) => PatchedSpec::Fields(spec),
            None | Some(Some(_)) => PatchedSpec::Unpatchable,
        }
    }
}

impl Group {
    /// The JSON Patch that puts the group's fields on `pod` (see [`Group::apply`]), with one
    /// operation for each field that changes and none for a field the pod already has as the
    /// group sets it; empty when nothing changes or `pod` is no object. Made from the pod as it
    /// is, without copying or comparing it whole.
    pub fn patch(&self, pod: &Value) -> json_patch::Patch {
        let mut operations = Vec::new();
        self.declared
            .operations(PatchedSpec::of(pod), &mut |replace, path, value| {
                let path = PointerBuf::from_tokens(path.iter().copied());
                let value = value.into_value();
                operations.push(if replace {
                    PatchOperation::Replace(ReplaceOperation { path, value })
                } else {
                    PatchOperation::Add(AddOperation { path, value })
                });
            });
        json_patch::Patch(operations)
    }
}

impl Declared {
    /// [`Group::patch`] of a pod whose spec is `spec`, as the JSON text of the patch, written
    /// straight from the group's own values (no JSON value is built for it); `None` when
    /// nothing changes.
    pub(super) fn patch_text(&self, spec: PatchedSpec<'_>) -> Option<Vec<u8>> {
        // Room for a few operations, so that writing them seldom grows the buffer.
        let mut text = Vec::with_capacity(512);
        self.operations(spec, &mut |replace, path, value| {
            write_operation(&mut text, replace, path, &value);
        });
        closed(text)
    }

    /// Calls `operation` with each operation of the group's patch of a pod whose spec is
    /// `spec`, in order: whether it replaces (else adds), its path from the pod's root, and its
    /// value.
    pub(super) fn operations(
        &self,
        spec: PatchedSpec<'_>,
        operation: &mut dyn FnMut(bool, &[&str], Put<'_>),
    ) {
        let spec = match spec {
            PatchedSpec::Fields(spec) => spec,
            PatchedSpec::Unpatchable => return,
            PatchedSpec::Missing => {
                // Against an empty spec every change is a whole field.
                let mut spec = Map::new();
                self.patch_spec(&Map::new(), &mut |path, value| {
                    spec.insert(path[1..].join("/"), value.into_value());
                });
                operation(false, &["spec"], Put::Owned(Value::Object(spec)));
                return;
            }
        };
        self.patch_spec(spec, &mut |path, value| {
            let existed = match path {
                [_, field] => spec.get(*field).is_some(),
                [_, field, key] => spec.get(*field).and_then(|map| map.get(*key)).is_some(),
                _ => false,
            };
            operation(existed, path, value);
        });
    }

    /// Calls `put` with each place under `spec` (a field, or a field's key) the group changes,
    /// as its path from the pod's root (`spec` first), and its value there: a whole field where
    /// `spec` lacks it or has it of another type, else a node selector key or an appended
    /// toleration (its index as the key) at a time. Of `spec` it reads [`SPEC_FIELDS`] only.
    pub(super) fn patch_spec(
        &self,
        spec: &Map<String, Value>,
        put: &mut dyn FnMut(&[&str], Put<'_>),
    ) {
        if !self.labels.is_empty() {
            match spec.get("nodeSelector") {
                Some(Value::Object(selector)) => {
                    for (key, value) in &self.labels {
                        if selector.get(key).and_then(Value::as_str) != Some(value.as_str()) {
                            put(&["spec", "nodeSelector", key], Put::Text(value));
                        }
                    }
                }
                _ => put(&["spec", "nodeSelector"], Put::Labels(&self.labels)),
            }
        }
        if !self.tolerations.is_empty() {
            let (mut had, whole): (Vec<TolerationView<'_>>, Option<Vec<&Value>>) =
                match spec.get("tolerations") {
                    Some(Value::Array(present)) => (
                        present.iter().filter_map(TolerationView::read).collect(),
                        None,
                    ),
                    _ => (Vec::new(), Some(Vec::new())),
                };
            let mut next = spec
                .get("tolerations")
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            let mut whole = whole;
            for toleration in &self.tolerations {
                let view = TolerationView::of(&toleration.typed);
                if had.iter().any(|had| had.is_same_as(&view)) {
                    continue;
                }
                had.push(view);
                match &mut whole {
                    Some(whole) => whole.push(&toleration.json),
                    None => {
                        put(
                            &["spec", "tolerations", &next.to_string()],
                            Put::Json(&toleration.json),
                        );
                        next += 1;
                    }
                }
            }
            if let Some(whole) = whole {
                put(&["spec", "tolerations"], Put::Array(whole));
            }
        }
        if let Some(affinity) = &self.affinity {
            if spec.get("affinity").is_none_or(Value::is_null) {
                put(&["spec", "affinity"], Put::Json(affinity));
            }
        }
        if !self.scheduler_name.is_empty()
            && spec.get("schedulerName").and_then(Value::as_str) != Some(&self.scheduler_name)
        {
            put(&["spec", "schedulerName"], Put::Text(&self.scheduler_name));
        }
    }
}

/// Writes one operation of a patch at the end of `text`, the patch's operations so far (empty
/// before the first): whether it replaces (else adds), its path from the pod's root, and its
/// value.
pub(super) fn write_operation(
    text: &mut Vec<u8>,
    replace: bool,
    path: &[&str],
    value: &impl Serialize,
) {
    text.push(if text.is_empty() { b'[' } else { b',' });
    text.extend_from_slice(if replace {
        br#"{"op":"replace","path":"#
    } else {
        br#"{"op":"add","path":"#
    });
    serde_json::to_writer(&mut *text, &pointer(path)).expect("a string serializes");
    text.extend_from_slice(br#","value":"#);
    serde_json::to_writer(&mut *text, value).expect("a JSON value serializes");
    text.push(b'}');
}

/// The patch whose operations [`write_operation`] wrote in `text`, closed; `None` when it has
/// none.
pub(super) fn closed(mut text: Vec<u8>) -> Option<Vec<u8>> {
    (!text.is_empty()).then(|| {
        text.push(b']');
        text
    })
}

/// The JSON Pointer of `path`, each token escaped by jsonptr (which copies only a token that
/// needs it): `PointerBuf::from_tokens` builds and checks the same text, at several times the
/// cost, for a pointer that is only written out.
fn pointer(path: &[&str]) -> String {
    let mut pointer = String::with_capacity(path.iter().map(|token| token.len() + 1).sum());
    for token in path {
        pointer.push('/');
        pointer.push_str(Token::new(*token).encoded());
    }
    pointer
}

/// The value of one operation of a group's patch, borrowed from the group where it can be.
pub(super) enum Put<'g> {
    /// A string.
    Text(&'g str),
    /// The group's labels, as a node selector.
    Labels(&'g BTreeMap<String, String>),
    /// One of the group's values as it is.
    Json(&'g Value),
    /// A list of the group's values.
    Array(Vec<&'g Value>),
    /// A value made for this patch.
    Owned(Value),
}

impl Put<'_> {
    /// The value as JSON of its own.
    pub(super) fn into_value(self) -> Value {
        match self {
            Put::Text(text) => Value::String(text.to_owned()),
            Put::Labels(labels) => Value::Object(
                labels
                    .iter()
                    .map(|(key, value)| (key.clone(), Value::String(value.clone())))
                    .collect(),
            ),
            Put::Json(value) => value.clone(),
            Put::Array(values) => Value::Array(values.into_iter().cloned().collect()),
            Put::Owned(value) => value,
        }
    }
}

impl Serialize for Put<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Put::Text(text) => serializer.serialize_str(text),
            Put::Labels(labels) => labels.serialize(serializer),
            Put::Json(value) => value.serialize(serializer),
            Put::Array(values) => values.serialize(serializer),
            Put::Owned(value) => value.serialize(serializer),
        }
    }
}

/// The fields of a pod's `spec` that [`Group::patch`] reads and writes, and all it reads of the
/// spec: `/pods/mutate` builds only these.
pub(in crate::serve) const SPEC_FIELDS: [&str; 4] =
    ["nodeSelector", "tolerations", "affinity", "schedulerName"];

/// A toleration as a patch compares it, borrowed: from a group's, or from one a pod lists,
/// read as Kubernetes' `Toleration` reads it (the same fields and types, any other field
/// ignored), so that a toleration `Toleration` would not read is not one the pod has.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct TolerationView<'a> {
    #[serde(default, borrow)]
    key: Option<&'a str>,
    #[serde(default, borrow)]
    operator: Option<&'a str>,
    #[serde(default, borrow)]
    value: Option<&'a str>,
    #[serde(default, borrow)]
    effect: Option<&'a str>,
    #[serde(default)]
    toleration_seconds: Option<i64>,
}

impl<'a> TolerationView<'a> {
    /// A toleration a pod lists, when Kubernetes' `Toleration` would read it: an object only
    /// (serde would also read a struct from an array of its fields).
    fn read(listed: &'a Value) -> Option<TolerationView<'a>> {
        listed
            .is_object()
            .then(|| TolerationView::deserialize(listed).ok())
            .flatten()
    }

    fn of(toleration: &'a Toleration) -> TolerationView<'a> {
        TolerationView {
            key: toleration.key.as_deref(),
            operator: toleration.operator.as_deref(),
            value: toleration.value.as_deref(),
            effect: toleration.effect.as_deref(),
            toleration_seconds: toleration.toleration_seconds,
        }
    }

    /// Whether the two are the same as Kubernetes reads them: an omitted or empty `operator`
    /// is `Equal`, and a null or absent field is the same as an empty one.
    fn is_same_as(&self, other: &TolerationView<'_>) -> bool {
        fn text(field: Option<&str>) -> &str {
            field.unwrap_or_default()
        }
        fn operator<'t>(toleration: &TolerationView<'t>) -> &'t str {
            match text(toleration.operator) {
                "" => "Equal",
                operator => operator,
            }
        }
        text(self.key) == text(other.key)
            && operator(self) == operator(other)
            && text(self.value) == text(other.value)
            && text(self.effect) == text(other.effect)
            && self.toleration_seconds == other.toleration_seconds
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use std::path::Path;

    use super::super::parse;
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

    /// The patch text's operations, `[]` for none.
    fn written(text: Option<Vec<u8>>) -> Value {
        text.map_or(json!([]), |text| {
            serde_json::from_slice(&text).expect("the text is JSON")
        })
    }

    /// A group's patch of what `/pods/mutate` reads of `pod`, as it writes it.
    fn patch_of_view(pod: &Value) -> Value {
        let text = serde_json::value::to_raw_value(pod).expect("a pod serializes");
        let view: crate::serve::pod_view::PodView =
            serde_json::from_str(text.get()).expect("a pod decodes");
        written(group().declared.patch_text(view.patched_spec()))
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
    fn a_listed_toleration_is_read_as_kubernetes_toleration_reads_it() {
        for listed in [
            json!({"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}),
            json!({"key": "gpu", "value": null, "tolerationSeconds": 300, "extra": [1]}),
            json!({}),
            json!({"key": 5}),
            json!({"operator": ["Exists"]}),
            json!({"tolerationSeconds": "300"}),
            json!({"tolerationSeconds": 1.5}),
            json!({"tolerationSeconds": -1}),
            json!("gpu"),
            json!(["gpu", "Exists", null, "NoSchedule", null]),
            json!(null),
        ] {
            let view = TolerationView::read(&listed);
            let typed = Toleration::deserialize(&listed);

            assert_eq!(view.is_some(), typed.is_ok(), "{listed}");
            if let (Some(view), Ok(typed)) = (view, typed) {
                assert!(view.is_same_as(&TolerationView::of(&typed)), "{listed}");
            }
        }
    }

    #[test]
    fn tolerations_differing_only_in_an_omitted_operator_or_null_field_are_the_same() {
        fn read(value: &Value) -> TolerationView<'_> {
            TolerationView::read(value).expect("a toleration")
        }
        let equal = json!({"key": "gpu", "operator": "Equal", "value": "", "effect": "NoSchedule"});
        let omitted = json!({"key": "gpu", "operator": "", "value": null, "effect": "NoSchedule"});
        let exists = json!({"key": "gpu", "operator": "Exists", "effect": "NoSchedule"});

        assert!(read(&equal).is_same_as(&read(&omitted)));
        assert!(!read(&equal).is_same_as(&read(&exists)));
    }

    #[test]
    fn a_pointer_escapes_tilde_and_slash_in_each_token() {
        let path = ["spec", "nodeSelector", "kubernetes.io/os~arch"];

        let written = pointer(&path);

        assert_eq!(written, "/spec/nodeSelector/kubernetes.io~1os~0arch");
        assert_eq!(
            PointerBuf::from_tokens(path).as_str(),
            written,
            "jsonptr's own escaping"
        );
    }

    #[test]
    fn patch_text_is_the_patch_written_out() {
        for pod in [
            json!({"metadata": {"name": "p"}}),
            json!({"spec": null}),
            json!([1]),
            json!({"spec": {"containers": [{"name": "c"}]}}),
            json!({"spec": {
                "nodeSelector": {"accelerator": "amd", "kubernetes.io/os": "linux"},
                "tolerations": [{"key": "spot", "operator": "Exists"}],
                "affinity": null,
                "schedulerName": "default-scheduler",
            }}),
            json!({"spec": {"nodeSelector": "not a map", "tolerations": {"not": "a list"}}}),
            json!({"spec": {
                "nodeSelector": {"accelerator": "nvidia", "pool": "gpu"},
                "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
                "affinity": {},
                "schedulerName": "volcano",
            }}),
        ] {
            let patch = operations(&group().patch(&pod));

            let text = group().declared.patch_text(PatchedSpec::of(&pod));

            assert_eq!(written(text), patch, "{pod}");
        }
    }

    #[test]
    fn a_spec_key_written_with_escapes_is_read_as_the_plain_key() {
        let text = r#"{"spec": {"node\u0053elector": {"accelerator": "nvidia", "pool": "gpu"}}}"#;
        let view: crate::serve::pod_view::PodView = serde_json::from_str(text).expect("decodes");

        let spec = view.patched_spec();

        let expected = json!({"nodeSelector": {"accelerator": "nvidia", "pool": "gpu"}});
        assert_eq!(
            spec,
            PatchedSpec::Fields(expected.as_object().expect("a map"))
        );
    }
}
