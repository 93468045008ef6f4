//! What `/pods/mutate` reads of a pod: the keys a resource group matches on, and its spec as a
//! group's patch reads it ([`PatchedSpec`]), holding only the fields a group writes
//! ([`SPEC_FIELDS`]). It is decoded with the review, in the same pass: every other
//! field is skipped as the text is read, and no container, volume or status is ever built.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

use super::groups::{PatchedSpec, SPEC_FIELDS};
use crate::admission::Key;

/// A pod's object as `/pods/mutate` reads it.
#[derive(Debug, Clone, Deserialize)]
pub struct PodView {
    #[serde(default)]
    metadata: Option<Metadata>,
    /// `None` only when the pod has no `spec` key (a `null` one is [`Spec::NotAnObject`]).
    #[serde(default, deserialize_with = "present")]
    spec: Option<Spec>,
}

/// The metadata a group matches on.
#[derive(Debug, Clone, Default, Deserialize)]
struct Metadata {
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    labels: Option<BTreeMap<String, String>>,
    #[serde(default)]
    annotations: Option<BTreeMap<String, String>>,
}

/// A spec as a group's patch reads it.
#[derive(Debug, Clone)]
enum Spec {
    /// An object: its [`SPEC_FIELDS`] only.
    Fields(Map<String, Value>),
    /// Anything else, `null` included, which a group leaves alone.
    NotAnObject,
}

/// A value that is there, `null` included (serde reads a `null` option as absent).
fn present<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Spec>, D::Error> {
    Spec::deserialize(deserializer).map(Some)
}

/// No labels or annotations.
static EMPTY: BTreeMap<String, String> = BTreeMap::new();

impl PodView {
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

    /// The pod's spec as a group's patch reads it, lent: no map is copied for the patch.
    pub(super) fn patched_spec(&self) -> PatchedSpec<'_> {
        match &self.spec {
            None => PatchedSpec::Missing,
            Some(Spec::NotAnObject) => PatchedSpec::Unpatchable,
            Some(Spec::Fields(fields)) => PatchedSpec::Fields(fields),
        }
    }
}

impl<'de> Deserialize<'de> for Spec {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Spec, D::Error> {
        deserializer.deserialize_any(SpecVisitor)
    }
}

/// The visitor of [`Spec`]: an object's [`SPEC_FIELDS`], the rest skipped unread.
struct SpecVisitor;

impl<'de> Visitor<'de> for SpecVisitor {
    type Value = Spec;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("a pod spec")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Spec, A::Error> {
        let mut fields = Map::new();
        while let Some(key) = map.next_key::<Key<'de>>()? {
            if SPEC_FIELDS.contains(&key.as_str()) {
                fields.insert(key.as_str().to_owned(), map.next_value()?);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(Spec::Fields(fields))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Spec, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Spec::NotAnObject)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Spec, E> {
        Ok(Spec::NotAnObject)
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Spec, E> {
        Ok(Spec::NotAnObject)
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Spec, E> {
        Ok(Spec::NotAnObject)
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Spec, E> {
        Ok(Spec::NotAnObject)
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Spec, E> {
        Ok(Spec::NotAnObject)
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<Spec, E> {
        Ok(Spec::NotAnObject)
    }
}
