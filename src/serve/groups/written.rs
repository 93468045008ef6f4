//! The patches a resource group sends most often, written and encoded once, when the group is
//! read.
//!
//! Most pods a group takes carry none of the fields it puts (or carry one of another type), so
//! each of its operations puts a whole field, and the patch depends only on which fields are
//! added and which replaced, not on the pod. Each such operation is made ahead, in base64 as the
//! answer carries it, and `/pods/mutate` joins the ones a pod needs; a pod whose patch changes a
//! key inside a field (a node selector it already has, tolerations it already lists) has its
//! patch written for it.
//!
//! Base64 writes each 3 bytes as 4 characters on their own, so the encodings of pieces whose
//! lengths are multiples of 3 join into the encoding of the whole. Each operation's text is
//! padded with spaces to such a length, which JSON reads as the space between two tokens.

use serde_json::Map;
use serde_json::value::RawValue;

use super::patch::{PatchedSpec, SPEC_FIELDS, closed, write_operation};
use super::{Declared, Group};
use crate::serve::review::base64_string;

/// The longest patch of a pod without a spec (all of a group's fields, as JSON) for which a
/// group writes its operations ahead: a group with a large affinity writes each patch for its
/// pod instead, so that a group holds a few short texts.
const WRITTEN_AHEAD_BYTES: usize = 4096;

/// How a patch treats one of the fields a group puts: a digit, in base 3, of the index that
/// [`Group::patch_of`] counts. A field left as it is counts 0.
const ADDED: usize = 1;
const REPLACED: usize = 2;

/// A group's operations that put a whole field, written ahead, and its patch of a pod without a
/// spec.
#[derive(Debug, Clone)]
pub(super) struct WrittenPatches {
    /// The spec fields the group puts whole in a spec that lacks them, in the order its patch
    /// puts them; none when its patches are too long to write ahead ([`WRITTEN_AHEAD_BYTES`]),
    /// so that every patch is written for its pod.
    wholes: Vec<WholeField>,
    /// The end of every patch (`]`), in base64.
    end: String,
    /// The patch of a pod without a spec: one operation adding all of it.
    whole_spec: Option<Box<RawValue>>,
}

/// One field a group puts whole, and the operations that put it.
#[derive(Debug, Clone)]
struct WholeField {
    field: &'static str,
    /// The value's JSON text.
    value: Box<RawValue>,
    /// In base64, padded: the operation adding the field (`[0]`) and the one replacing it
    /// (`[1]`), each as a patch's first operation (`[0]`, after its `[`) and as a later one
    /// (`[1]`, after a `,`).
    encoded: [[String; 2]; 2],
}

impl WrittenPatches {
    /// The operations of `group`, written by the same writer as any other patch.
    pub(super) fn of(group: &Declared) -> WrittenPatches {
        // Against an empty spec the group puts each of its fields whole, in its patch's order.
        let mut wholes = Vec::new();
        group.patch_spec(&Map::new(), &mut |path, value| {
            if let Some(field) = SPEC_FIELDS.iter().find(|field| path == ["spec", **field]) {
                let value = serde_json::value::to_raw_value(&value).expect("a JSON value");
                let encoded = [false, true].map(|replace| {
                    let mut first = Vec::new();
                    write_operation(&mut first, replace, &["spec", field], &value);
                    let later = [b",", &first[1..]].concat();
                    [padded_base64(first), padded_base64(later)]
                });
                wholes.push(WholeField {
                    field,
                    value,
                    encoded,
                });
            }
        });
        let whole_spec = group.patch_text(PatchedSpec::Missing);
        if whole_spec
            .as_ref()
            .is_some_and(|text| text.len() > WRITTEN_AHEAD_BYTES)
        {
            wholes.clear();
        }
        WrittenPatches {
            wholes,
            end: padded_base64(b"]".to_vec()),
            whole_spec: whole_spec.map(|text| base64_string(&text)),
        }
    }

    /// The position in `wholes` of the field an operation at `path` puts whole; `None` for
    /// an operation on a key inside a field.
    fn position(&self, path: &[&str]) -> Option<usize> {
        match path {
            ["spec", field] => self.wholes.iter().position(|whole| whole.field == *field),
            _ => None,
        }
    }

    /// The operations of the treatment `index` (the `i`th field's treatment its `i`th digit in
    /// base 3), each as `each` takes it: whether it replaces, and the field.
    fn each(&self, index: usize, mut each: impl FnMut(bool, &WholeField)) {
        for (position, whole) in self.wholes.iter().enumerate() {
            match index / 3_usize.pow(digits(position)) % 3 {
                ADDED => each(false, whole),
                REPLACED => each(true, whole),
                _ => {}
            }
        }
    }

    /// Writes the operations of the treatment `index` at the end of `text`, as JSON.
    fn write(&self, index: usize, text: &mut Vec<u8>) {
        self.each(index, |replace, whole| {
            write_operation(text, replace, &["spec", whole.field], &whole.value);
        });
    }

    /// The patch of the treatment `index`, in base64 as a JSON string, joined from the
    /// operations written ahead; `None` when it changes nothing.
    fn encoded(&self, index: usize) -> Option<Box<RawValue>> {
        let mut quoted = String::with_capacity(512);
        quoted.push('"');
        self.each(index, |replace, whole| {
            let later = quoted.len() > 1;
            quoted.push_str(&whole.encoded[usize::from(replace)][usize::from(later)]);
        });
        if quoted.len() == 1 {
            return None;
        }
        quoted.push_str(&self.end);
        quoted.push('"');
        Some(RawValue::from_string(quoted).expect("base64 in quotes is a JSON string"))
    }
}

/// `text` padded with spaces to a multiple of 3 bytes, in base64: pieces so made join into the
/// encoding of their joined texts.
fn padded_base64(mut text: Vec<u8>) -> String {
    text.resize(text.len().div_ceil(3) * 3, b' ');
    base64::Engine::encode(&base64::engine::general_purpose::STANDARD, text)
}

/// A count of base-3 digits as `pow` takes it: at most the four spec fields a group puts.
fn digits(count: usize) -> u32 {
    u32::try_from(count).expect("a group puts at most four fields")
}

/// A group's patch of one pod.
#[derive(Debug)]
enum Patch<'g> {
    /// Joined from the operations written ahead, in base64 (`None` when nothing changes).
    Joined(Option<Box<RawValue>>),
    /// Written when the group was read: a pod without a spec.
    WholeSpec(&'g Option<Box<RawValue>>),
    /// Written for this pod, as JSON text.
    Text(Option<Vec<u8>>),
}

impl Group {
    /// The group's patch of a pod whose spec is `spec`, in base64 as a JSON string for the
    /// answer; `None` when nothing changes.
    pub(in crate::serve) fn encoded_patch(&self, spec: PatchedSpec<'_>) -> Option<Box<RawValue>> {
        match self.patch_of(spec) {
            Patch::Joined(encoded) => encoded,
            Patch::WholeSpec(written) => written.clone(),
            Patch::Text(text) => text.map(|text| base64_string(&text)),
        }
    }

    /// The patch of `spec`, in one walk: joined from the operations written ahead while each
    /// puts a whole field; at the first that changes a key inside one, the operations met so
    /// far are written out as JSON and the rest follow them.
    fn patch_of(&self, spec: PatchedSpec<'_>) -> Patch<'_> {
        let written = &self.written;
        if spec == PatchedSpec::Missing {
            return Patch::WholeSpec(&written.whole_spec);
        }
        let mut treatment = Some(0);
        let mut text = Vec::new();
        self.declared.operations(spec, &mut |replace, path, value| {
            if let Some(index) = treatment {
                if let Some(position) = written.position(path) {
                    let digit = if replace { REPLACED } else { ADDED };
                    treatment = Some(index + digit * 3_usize.pow(digits(position)));
                    return;
                }
                written.write(index, &mut text);
                treatment = None;
            }
            write_operation(&mut text, replace, path, &value);
        });
        match treatment {
            Some(index) => Patch::Joined(written.encoded(index)),
            None => Patch::Text(closed(text)),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use serde_json::{Value, json};

    use super::super::parse;
    use super::*;

    /// A group that puts every field, the first with two labels and two tolerations.
    const EVERY_FIELD: &str = r#"
resourceGroups:
  - resourceGroup: gpu
    schedulerName: volcano
    labels: {accelerator: nvidia, pool: gpu}
    tolerations:
      - {key: gpu, operator: Exists, effect: NoSchedule}
      - {key: spot, operator: Equal, value: "true"}
    affinity: '{"nodeAffinity": {}}'
  - resourceGroup: edge
    labels: {zone: edge}
"#;

    fn groups() -> Vec<Group> {
        parse(Path::new("groups.yaml"), EVERY_FIELD).expect("a valid file")
    }

    /// Pods of every shape a patch reads: each field absent, null, of another type, as the
    /// group sets it, or holding other keys; and no spec, or a spec that is no object.
    fn pods() -> Vec<Value> {
        let field_values = |field: &str| -> Vec<Option<Value>> {
            let mut values = vec![None, Some(Value::Null), Some(json!(7))];
            let of_its_type = match field {
                "nodeSelector" => vec![
                    json!({}),
                    json!({"zone": "edge"}),
                    json!({"accelerator": "nvidia", "pool": "gpu"}),
                    json!({"accelerator": "amd"}),
                ],
                "tolerations" => vec![
                    json!([]),
                    json!([{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]),
                    json!([
                        {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"},
                        {"key": "spot", "value": "true"},
                    ]),
                ],
                "affinity" => vec![json!({"podAffinity": {}})],
                _ => vec![json!("volcano"), json!("default-scheduler")],
            };
            values.extend(of_its_type.into_iter().map(Some));
            values
        };
        let mut specs = vec![Map::new()];
        for field in SPEC_FIELDS {
            specs = specs
                .into_iter()
                .flat_map(|spec| {
                    field_values(field).into_iter().map(move |value| {
                        let mut spec = spec.clone();
                        if let Some(value) = value {
                            spec.insert(field.to_owned(), value);
                        }
                        spec
                    })
                })
                .collect();
        }
        let mut pods: Vec<Value> = specs
            .into_iter()
            .map(|spec| json!({"spec": spec}))
            .collect();
        pods.extend([json!({"metadata": {}}), json!({"spec": null}), json!([1])]);
        pods
    }

    fn decoded(encoded: Option<Box<RawValue>>) -> Value {
        encoded.map_or(json!([]), |encoded| {
            let base64: String = serde_json::from_str(encoded.get()).expect("a JSON string");
            let text = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, base64)
                .expect("base64");
            serde_json::from_slice(&text).expect("a JSON Patch")
        })
    }

    #[test]
    fn every_pod_gets_the_patch_the_group_makes_of_it_whether_written_ahead_or_now() {
        for group in groups() {
            for pod in pods() {
                let made = serde_json::to_value(group.patch(&pod)).expect("a patch serializes");

                let sent = decoded(group.encoded_patch(PatchedSpec::of(&pod)));

                assert_eq!(sent, made, "{} {pod}", group.name());
            }
        }
    }

    #[test]
    fn a_pod_lacking_the_groups_fields_gets_a_patch_written_ahead() {
        let group = groups().remove(0);
        for pod in [
            json!({"spec": {"containers": []}}),
            json!({"spec": {"nodeSelector": null, "tolerations": "no", "schedulerName": 7}}),
            json!({"metadata": {}}),
        ] {
            let patch = group.patch_of(PatchedSpec::of(&pod));

            assert!(
                matches!(patch, Patch::Joined(Some(_)) | Patch::WholeSpec(Some(_))),
                "{pod}"
            );
        }
    }

    #[test]
    fn a_pod_whose_patch_changes_a_key_inside_a_field_gets_none_written_ahead() {
        let group = groups().remove(0);
        for pod in [
            json!({"spec": {"nodeSelector": {"zone": "a"}}}),
            json!({"spec": {"tolerations": [{"key": "other", "operator": "Exists"}]}}),
        ] {
            let patch = group.patch_of(PatchedSpec::of(&pod));

            assert!(matches!(patch, Patch::Text(Some(_))), "{pod}");
        }
    }

    #[test]
    fn a_group_whose_patches_are_long_writes_each_for_its_pod() {
        let zones: Vec<String> = (0..WRITTEN_AHEAD_BYTES / 8)
            .map(|i| format!("z{i:06}"))
            .collect();
        let affinity = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": "zone", "operator": "In", "values": zones},
            ]}],
        }}});
        let file = format!(
            "resourceGroups:\n  - resourceGroup: wide\n    labels: {{zone: edge}}\n    affinity: '{affinity}'\n"
        );
        let group = parse(Path::new("groups.yaml"), &file)
            .expect("a valid file")
            .remove(0);
        let pod = json!({"spec": {"containers": []}});

        let patch = group.patch_of(PatchedSpec::of(&pod));

        assert!(group.written.wholes.is_empty());
        assert!(matches!(patch, Patch::Text(Some(_))));
        let made = serde_json::to_value(group.patch(&pod)).expect("a patch serializes");
        assert_eq!(decoded(group.encoded_patch(PatchedSpec::of(&pod))), made);
    }

    #[test]
    fn a_group_writes_ahead_the_operations_of_each_field_it_puts() {
        let [every_field, labels_only] = <[Group; 2]>::try_from(groups()).expect("two groups");
        let fields = |group: &Group| -> Vec<&str> {
            group
                .written
                .wholes
                .iter()
                .map(|whole| whole.field)
                .collect()
        };

        assert_eq!(
            fields(&every_field),
            ["nodeSelector", "tolerations", "affinity", "schedulerName"]
        );
        assert_eq!(fields(&labels_only), ["nodeSelector"]);
        assert!(labels_only.written.encoded(0).is_none(), "nothing changes");
    }

    #[test]
    fn each_operation_written_ahead_is_a_whole_number_of_base64_groups() {
        for group in groups() {
            for whole in &group.written.wholes {
                for encoded in whole.encoded.iter().flatten() {
                    assert_eq!(encoded.len() % 4, 0, "{encoded}");
                    assert!(!encoded.contains('='), "{encoded}");
                }
            }
        }
    }
}
