//! What `/pods/mutate` reads of a pod: the keys a resource group matches on, and the pod as
//! [`Group::patch`](super::groups::Group::patch) needs it, `spec` holding only the fields a
//! group writes ([`SPEC_FIELDS`]). Every other field is skipped as the text is read: no
//! container, volume or status is ever built, and a pod no group takes is not built at all.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::groups::SPEC_FIELDS;
use crate::admission::Key;

/// A pod's object as `/pods/mutate` reads it.
#[derive(Debug, Deserialize)]
pub(super) struct PodView<'a> {
    #[serde(default)]
    metadata: Option<Metadata>,
    /// The spec's text, `null` included: `None` only when the pod has no `spec` key.
    #[serde(default, borrow, deserialize_with = "present")]
    spec: Option<&'a RawValue>,
}

/// The metadata a group matches on.
#[derive(Debug, Default, Deserialize)]
struct Metadata {
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    labels: Option<BTreeMap<String, String>>,
    #[serde(default)]
    annotations: Option<BTreeMap<String, String>>,
}

/// A value that is there, `null` included (serde reads a `null` option as absent).
fn present<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(deserializer).map(Some)
}

/// No labels or annotations.
static EMPTY: BTreeMap<String, String> = BTreeMap::new();

impl PodView<'_> {
    /// The pod's own namespace, when it names one that is not empty.
    pub(super) fn namespace(&self) -> Option<&str> {
        self.metadata
            .as_ref()
            .and_then(|metadata| metadata.namespace.as_deref())
            .filter(|namespace| !namespace.is_empty())
    }

    /// The pod's labels.
    pub(super) fn labels(&self) -> &BTreeMap<String, String> {
        self.metadata
            .as_ref()
            .and_then(|metadata| metadata.labels.as_ref())
            .unwrap_or(&EMPTY)
    }

    /// The pod's annotations.
    pub(super) fn annotations(&self) -> &BTreeMap<String, String> {
        self.metadata
            .as_ref()
            .and_then(|metadata| metadata.annotations.as_ref())
            .unwrap_or(&EMPTY)
    }

    /// The pod as a group's patch reads it: `{"spec": {...}}` with only [`SPEC_FIELDS`] when the
    /// spec is an object, the spec as it is when it is not, `{}` without one.
    ///
    /// # Errors
    /// The decoder's, for a field a group writes that is not JSON (it always is in text that
    /// decoded as a pod).
    pub(super) fn for_patch(&self) -> Result<Value, serde_json::Error> {
        let mut pod = Map::new();
        if let Some(spec) = self.spec {
            let text = spec.get();
            let spec = if text.trim_start().starts_with('{') {
                Value::Object(serde_json::from_str::<SpecFields>(text)?.0)
            } else {
                serde_json::from_str(text)?
            };
            pod.insert("spec".to_owned(), spec);
        }
        Ok(Value::Object(pod))
    }
}

/// A spec's [`SPEC_FIELDS`], the rest skipped unread.
struct SpecFields(Map<String, Value>);

impl<'de> Deserialize<'de> for SpecFields {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<SpecFields, D::Error> {
        deserializer.deserialize_map(SpecFieldsVisitor)
    }
}

/// The visitor of [`SpecFields`].
struct SpecFieldsVisitor;

impl<'de> Visitor<'de> for SpecFieldsVisitor {
    type Value = SpecFields;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("a pod spec")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<SpecFields, A::Error> {
        let mut fields = Map::new();
        while let Some(key) = map.next_key::<Key<'de>>()? {
            if SPEC_FIELDS.contains(&key.as_str()) {
                fields.insert(key.as_str().to_owned(), map.next_value()?);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(SpecFields(fields))
    }
}
