//! Apimachinery's semantic equality (`equality.Semantic.DeepEqual`), which Volcano's job
//! UPDATE rule compares two specs with, over a spec written out as JSON.
//!
//! Go compares the typed objects the JSON decodes to, so what JSON spells apart can be equal:
//! a struct field left out holds its zero value (`""`, `0`, `false`, an empty list or map, an
//! empty struct), a nil list or map equals an empty one, and quantities compare by value
//! (`1Gi` equals `1024Mi`). A pointer field left out is nil, not its zero, and a map entry is
//! there even when its value is empty, so `{"svc": []}` is not an empty map. [`canonical`]
//! rewrites a spec so that two specs Go finds equal are equal JSON.
//!
//! Which object is a map or a struct, and which field a pointer or a quantity, is Go's type
//! detail the JSON does not carry: the tables below name the fields of a job and its pod
//! templates by name. Where one name has two types (`readOnly` is a pointer only in a CSI
//! volume, `resources` only at pod level), the more common one is taken.

use serde_json::{Map, Value};

use super::super::resource::signed_nano;

/// Fields that are Go maps: their entries are kept, an empty value included.
const MAPS: [&str; 10] = [
    "labels",
    "annotations",
    "nodeSelector",
    "plugins",
    "requests",
    "limits",
    "overhead",
    "matchLabels",
    "volumeAttributes",
    "options",
];
/// The maps whose values are quantities.
const QUANTITY_MAPS: [&str; 3] = ["requests", "limits", "overhead"];
/// Fields that are quantities (`emptyDir.sizeLimit`, `resourceFieldRef.divisor`).
const QUANTITIES: [&str; 2] = ["sizeLimit", "divisor"];
/// Struct fields held by value, not by pointer: left out, they are an empty struct.
const VALUE_STRUCTS: [&str; 6] = [
    "template",
    "metadata",
    "spec",
    "resources",
    "podAffinityTerm",
    "preference",
];
/// Pointer fields of a plain type (and quantity pointers): left out, they are nil, not zero,
/// so a zero is kept.
const POINTERS: [&str; 42] = [
    // Volcano's job, task, policy and topology.
    "minSuccess",
    "ttlSecondsAfterFinished",
    "minAvailable",
    "exitCode",
    "timeout",
    "highestTierAllowed",
    "runningEstimate",
    // The pod spec.
    "terminationGracePeriodSeconds",
    "activeDeadlineSeconds",
    "automountServiceAccountToken",
    "shareProcessNamespace",
    "priority",
    "runtimeClassName",
    "enableServiceLinks",
    "preemptionPolicy",
    "setHostnameAsFQDN",
    "hostUsers",
    // Security contexts.
    "privileged",
    "readOnlyRootFilesystem",
    "allowPrivilegeEscalation",
    "runAsNonRoot",
    "runAsUser",
    "runAsGroup",
    "procMount",
    "fsGroup",
    "fsGroupChangePolicy",
    "supplementalGroupsPolicy",
    "seLinuxChangePolicy",
    // Volumes, mounts and claims.
    "sizeLimit",
    "defaultMode",
    "mode",
    "optional",
    "expirationSeconds",
    "mountPropagation",
    "recursiveReadOnly",
    "storageClassName",
    "volumeMode",
    "volumeAttributesClassName",
    // Scheduling.
    "minDomains",
    "nodeAffinityPolicy",
    "nodeTaintsPolicy",
    "tolerationSeconds",
];

/// `spec` (a Go struct written out as JSON) rewritten so that two specs apimachinery's
/// semantic equality finds equal are equal: struct fields holding their zero value removed
/// (pointers kept), map entries kept with empty values made `null`, quantities replaced by
/// their value.
pub(super) fn canonical(mut spec: Value) -> Value {
    if let Value::Object(fields) = &mut spec {
        canonical_struct(fields);
    }
    spec
}

fn canonical_struct(fields: &mut Map<String, Value>) {
    for (key, field) in fields.iter_mut() {
        let key = key.as_str();
        match field {
            Value::Object(inner) if MAPS.contains(&key) => {
                canonical_map(inner, QUANTITY_MAPS.contains(&key));
            }
            Value::Object(inner) => canonical_struct(inner),
            Value::Array(items) => canonical_list(items),
            Value::String(text) if QUANTITIES.contains(&key) => {
                if let Some(value) = quantity(text) {
                    *field = value;
                }
            }
            _ => {}
        }
    }
    fields.retain(|key, field| POINTERS.contains(&key.as_str()) || !is_zero(key, field));
}

/// A map's entries, each kept: an empty value is its type's zero, the same as `null`.
fn canonical_map(entries: &mut Map<String, Value>, quantities: bool) {
    for entry in entries.values_mut() {
        match entry {
            Value::String(text) if quantities => {
                if let Some(value) = quantity(text) {
                    *entry = value;
                }
            }
            Value::Object(inner) => canonical_struct(inner),
            Value::Array(items) => canonical_list(items),
            _ => {}
        }
        if is_empty(entry) {
            *entry = Value::Null;
        }
    }
}

/// A list's structs (lists of plain values are compared as they are).
fn canonical_list(items: &mut [Value]) {
    for item in items {
        if let Value::Object(inner) = item {
            canonical_struct(inner);
        }
    }
}

/// A quantity's value, exact as Kubernetes keeps it; `None` when the text is not a quantity
/// (compared as written).
fn quantity(text: &str) -> Option<Value> {
    signed_nano(text).map(|nano| Value::from(format!("{nano}n")))
}

/// Whether a struct field holds its zero value: an empty struct only for the structs held by
/// value, and a quantity of zero.
fn is_zero(key: &str, field: &Value) -> bool {
    match field {
        Value::Object(inner) => {
            inner.is_empty() && (MAPS.contains(&key) || VALUE_STRUCTS.contains(&key))
        }
        Value::String(text) if QUANTITIES.contains(&key) => text == "0n",
        other => is_empty(other),
    }
}

/// Whether a value is empty: `null`, `""`, `0`, `false`, an empty list or object.
fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(flag) => !flag,
        Value::Number(number) => number.as_f64() == Some(0.0),
        Value::String(text) => text.is_empty(),
        Value::Array(items) => items.is_empty(),
        Value::Object(fields) => fields.is_empty(),
    }
}
