//! Decoding that never reads a JSON array as an object.
//!
//! serde's derived structs take a sequence as well as a map, their fields in declaration order,
//! and `serde_json` hands them either: `"execution": ["sa", false, ...]` would decode as an
//! execution, and `"dag": ["etl", [...]]` as a DAG. Go's `encoding/json`, which every caller
//! and every Volcano type is written against, refuses an array where an object is expected.
//! [`Strict`] wraps any deserializer, at every depth, so that a struct is read from a map only:
//! an array there is serde's "invalid type: sequence, expected struct ..." error.
//!
//! ```
//! use serde::Deserialize;
//! use dexaflow_admission::admission::strict_from_str;
//!
//! #[derive(Debug, Deserialize)]
//! struct Point {
//!     x: i32,
//!     y: i32,
//! }
//!
//! assert_eq!(strict_from_str::<Point>(r#"{"x": 1, "y": 2}"#).unwrap().y, 2);
//! let error = strict_from_str::<Point>("[1, 2]").unwrap_err();
//! assert!(error.to_string().starts_with("invalid type: sequence, expected struct Point"));
//! ```

use serde::Deserialize;
use serde::de::{
    self, DeserializeOwned, DeserializeSeed, Deserializer, EnumAccess, MapAccess, SeqAccess,
    VariantAccess, Visitor,
};

/// `text` decoded as a `T` as `serde_json::from_str` decodes it (trailing data is an error),
/// except that no struct, at any depth, is read from an array.
///
/// # Errors
/// serde's error, with its line and column.
pub fn strict_from_str<T: DeserializeOwned>(text: &str) -> Result<T, serde_json::Error> {
    strict_whole(serde_json::Deserializer::from_str(text))
}

/// [`strict_from_str`] for bytes that may not be UTF-8 (an error then, with its place).
///
/// # Errors
/// serde's error, with its line and column.
pub fn strict_from_slice<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, serde_json::Error> {
    strict_whole(serde_json::Deserializer::from_slice(bytes))
}

/// The one value `deserializer` reads, nothing after it.
fn strict_whole<'de, R: serde_json::de::Read<'de>, T: DeserializeOwned>(
    mut deserializer: serde_json::Deserializer<R>,
) -> Result<T, serde_json::Error> {
    let value = T::deserialize(Strict(&mut deserializer))?;
    deserializer.end()?;
    Ok(value)
}

/// Where in its value decoding `deserializer` as a `T` fails with `error` (serde's message):
/// the path of the field, such as `spec.tasks[0].replicas`, found by decoding it again while
/// tracking the path, so that only a value that did not decode pays for it. `None` when the
/// failure is the value's own (no field) or the second decode does not meet the same error
/// (trailing data, which comes after every field).
pub(crate) fn error_path<'de, T: Deserialize<'de>, D: Deserializer<'de>>(
    deserializer: D,
    error: &str,
) -> Option<String> {
    match serde_path_to_error::deserialize::<_, T>(Strict(deserializer)) {
        Err(found)
            if found.path().iter().next().is_some() && found.inner().to_string() == error =>
        {
            Some(found.path().to_string())
        }
        _ => None,
    }
}

/// `T` from `deserializer`, held to [`Strict`]'s rule: for what serde reads from content it has
/// buffered itself (the variants of an internally tagged enum), which no outer [`Strict`]
/// reaches. Name it in `#[serde(deserialize_with = ...)]`.
///
/// # Errors
/// The deserializer's error.
pub(crate) fn deserialize_strictly<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    deserializer: D,
) -> Result<T, D::Error> {
    T::deserialize(Strict(deserializer))
}

/// A deserializer that reads every struct from a map only, and hands the same rule down to
/// everything it reads inside one; anything else is passed to the deserializer it wraps.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Strict<D>(pub(crate) D);

/// Passes each `deserialize_*` to the wrapped deserializer, its arguments as they are and the
/// visitor wrapped.
macro_rules! forward {
    ($($method:ident($($argument:ident: $type:ty),*)),* $(,)?) => {
        $(
            fn $method<V: Visitor<'de>>(
                self,
                $($argument: $type,)*
                visitor: V,
            ) -> Result<V::Value, D::Error> {
                self.0.$method($($argument,)* Strictly(visitor))
            }
        )*
    };
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Strict<D> {
    type Error = D::Error;

    forward!(
        deserialize_any(),
        deserialize_bool(),
        deserialize_i8(),
        deserialize_i16(),
        deserialize_i32(),
        deserialize_i64(),
        deserialize_i128(),
        deserialize_u8(),
        deserialize_u16(),
        deserialize_u32(),
        deserialize_u64(),
        deserialize_u128(),
        deserialize_f32(),
        deserialize_f64(),
        deserialize_char(),
        deserialize_str(),
        deserialize_string(),
        deserialize_bytes(),
        deserialize_byte_buf(),
        deserialize_option(),
        deserialize_unit(),
        deserialize_seq(),
        deserialize_map(),
        deserialize_identifier(),
        deserialize_ignored_any(),
        deserialize_unit_struct(name: &'static str),
        deserialize_newtype_struct(name: &'static str),
        deserialize_tuple(len: usize),
        deserialize_tuple_struct(name: &'static str, len: usize),
        deserialize_enum(name: &'static str, variants: &'static [&'static str]),
    );

    // The one departure: a struct is asked for as a map, which refuses a sequence.
    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_map(Strictly(visitor))
    }

    fn is_human_readable(&self) -> bool {
        self.0.is_human_readable()
    }
}

/// A visitor whose nested deserializers and accesses are wrapped in [`Strict`].
struct Strictly<V>(V);

/// Passes each `visit_*` of a plain value to the wrapped visitor as it is.
macro_rules! visit_plain {
    ($($method:ident($type:ty)),* $(,)?) => {
        $(
            fn $method<E: de::Error>(self, value: $type) -> Result<V::Value, E> {
                self.0.$method(value)
            }
        )*
    };
}

impl<'de, V: Visitor<'de>> Visitor<'de> for Strictly<V> {
    type Value = V::Value;

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.expecting(formatter)
    }

    visit_plain!(
        visit_bool(bool),
        visit_i8(i8),
        visit_i16(i16),
        visit_i32(i32),
        visit_i64(i64),
        visit_i128(i128),
        visit_u8(u8),
        visit_u16(u16),
        visit_u32(u32),
        visit_u64(u64),
        visit_u128(u128),
        visit_f32(f32),
        visit_f64(f64),
        visit_char(char),
        visit_str(&str),
        visit_borrowed_str(&'de str),
        visit_string(String),
        visit_bytes(&[u8]),
        visit_borrowed_bytes(&'de [u8]),
        visit_byte_buf(Vec<u8>),
    );

    fn visit_none<E: de::Error>(self) -> Result<V::Value, E> {
        self.0.visit_none()
    }

    fn visit_unit<E: de::Error>(self) -> Result<V::Value, E> {
        self.0.visit_unit()
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<V::Value, D::Error> {
        self.0.visit_some(Strict(deserializer))
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<V::Value, D::Error> {
        self.0.visit_newtype_struct(Strict(deserializer))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<V::Value, A::Error> {
        self.0.visit_seq(Strict(seq))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.0.visit_map(Strict(map))
    }

    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<V::Value, A::Error> {
        self.0.visit_enum(Strict(data))
    }
}

/// A seed that deserializes from a [`Strict`] deserializer.
struct StrictSeed<S>(S);

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for StrictSeed<S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<S::Value, D::Error> {
        self.0.deserialize(Strict(deserializer))
    }
}

impl<'de, A: SeqAccess<'de>> SeqAccess<'de> for Strict<A> {
    type Error = A::Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, A::Error> {
        self.0.next_element_seed(StrictSeed(seed))
    }

    fn size_hint(&self) -> Option<usize> {
        self.0.size_hint()
    }
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for Strict<A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        self.0.next_key_seed(StrictSeed(seed))
    }

    fn next_value_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<T::Value, A::Error> {
        self.0.next_value_seed(StrictSeed(seed))
    }

    fn size_hint(&self) -> Option<usize> {
        self.0.size_hint()
    }
}

impl<'de, A: EnumAccess<'de>> EnumAccess<'de> for Strict<A> {
    type Error = A::Error;
    type Variant = Strict<A::Variant>;

    fn variant_seed<T: DeserializeSeed<'de>>(
        self,
        seed: T,
    ) -> Result<(T::Value, Strict<A::Variant>), A::Error> {
        self.0
            .variant_seed(StrictSeed(seed))
            .map(|(value, variant)| (value, Strict(variant)))
    }
}

impl<'de, A: VariantAccess<'de>> VariantAccess<'de> for Strict<A> {
    type Error = A::Error;

    fn unit_variant(self) -> Result<(), A::Error> {
        self.0.unit_variant()
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, A::Error> {
        self.0.newtype_variant_seed(StrictSeed(seed))
    }

    fn tuple_variant<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value, A::Error> {
        self.0.tuple_variant(len, Strictly(visitor))
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, A::Error> {
        self.0.struct_variant(fields, Strictly(visitor))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde::Deserialize;
    use serde_json::value::RawValue;

    use super::*;

    #[derive(Debug, PartialEq, Deserialize)]
    struct Inner {
        name: String,
    }

    #[derive(Debug, PartialEq, Deserialize)]
    struct Outer {
        inner: Option<Inner>,
        #[serde(default)]
        list: Vec<Inner>,
        #[serde(default)]
        map: BTreeMap<String, Inner>,
    }

    #[test]
    fn a_struct_nested_in_an_option_a_list_or_a_map_is_refused_from_an_array() {
        for text in [
            r#"{"inner": ["a"]}"#,
            r#"{"inner": null, "list": [["a"]]}"#,
            r#"{"inner": null, "map": {"k": ["a"]}}"#,
        ] {
            let error = strict_from_str::<Outer>(text).expect_err(text);
            assert!(
                error
                    .to_string()
                    .starts_with("invalid type: sequence, expected struct Inner"),
                "{text}: {error}"
            );
            // What serde_json alone reads: the array as the struct.
            assert!(serde_json::from_str::<Outer>(text).is_ok(), "{text}");
        }
    }

    #[test]
    fn a_struct_beside_a_flattened_map_is_refused_from_an_array() {
        #[derive(Debug, Deserialize)]
        struct Keeping {
            inner: Option<Inner>,
            #[serde(flatten)]
            rest: BTreeMap<String, serde_json::Value>,
        }
        let text = r#"{"inner": ["a"], "other": 1}"#;
        let error = strict_from_str::<Keeping>(text).expect_err(text);
        assert!(
            error
                .to_string()
                .starts_with("invalid type: sequence, expected struct Inner"),
            "{error}"
        );
        let kept = serde_json::from_str::<Keeping>(text).expect("serde_json alone reads it");
        assert_eq!(kept.inner.map(|inner| inner.name).as_deref(), Some("a"));
        assert_eq!(kept.rest.len(), 1);
    }

    #[test]
    fn objects_lists_and_maps_decode_as_serde_json_decodes_them() {
        let text =
            r#"{"inner": {"name": "a"}, "list": [{"name": "b"}], "map": {"k": {"name": "c"}}}"#;
        assert_eq!(
            strict_from_str::<Outer>(text).expect("objects"),
            serde_json::from_str::<Outer>(text).expect("objects")
        );
    }

    #[test]
    fn trailing_data_after_the_value_is_an_error() {
        let error = strict_from_str::<Inner>(r#"{"name": "a"} {}"#).expect_err("trailing");
        assert!(
            error.to_string().starts_with("trailing characters"),
            "{error}"
        );
    }

    #[test]
    fn raw_json_text_is_kept_as_it_was_sent() {
        #[derive(Deserialize)]
        struct Keeps {
            object: Box<RawValue>,
        }
        let kept = strict_from_str::<Keeps>(r#"{"object": [1, {"a": 2}]}"#).expect("raw text");
        assert_eq!(kept.object.get(), r#"[1, {"a": 2}]"#);
    }

    #[test]
    fn a_json_value_is_held_to_the_same_rule() {
        let object = serde_json::json!({"name": "a"});
        assert_eq!(
            Inner::deserialize(Strict(&object)).expect("an object").name,
            "a"
        );
        let array = serde_json::json!(["a"]);
        assert!(
            Inner::deserialize(&array).is_ok(),
            "serde_json alone reads it"
        );
        assert!(Inner::deserialize(Strict(&array)).is_err());
    }
}
