//! The YAML document: text parsed into a value, an integer too large for 64 bits kept as its
//! digits so that it is reported against its key like any other bad value; and how a value is
//! shown in an error (in full, or only its kind when it may be a secret).

use std::fmt;

use serde::de::{
    self, Deserialize, Deserializer, EnumAccess, MapAccess, SeqAccess, VariantAccess, Visitor,
};
use serde_yaml_ng::value::{Tag, TaggedValue};
use serde_yaml_ng::{Mapping, Value};

/// The tag under which [`parse_yaml`] keeps an integer too large for 64 bits, as its digits.
const BIG_INTEGER_TAG: &str = "!dexaflow/big-integer";

/// Parses YAML text into a value, keeping an integer too large for 64 bits as its digits
/// (tagged [`BIG_INTEGER_TAG`]).
///
/// `serde_yaml_ng`'s own value cannot hold such an integer and fails the whole file with a
/// message that quotes it, which would print a secret written as a long number or in hex;
/// kept, it is reported against its key like any other bad value.
///
/// # Errors
/// When the text is not YAML.
pub(crate) fn parse_yaml(text: &str) -> Result<Value, serde_yaml_ng::Error> {
    serde_yaml_ng::from_str::<Document>(text).map(|document| document.0)
}

/// A YAML value read by [`DocumentVisitor`].
struct Document(Value);

impl<'de> Deserialize<'de> for Document {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Document, D::Error> {
        deserializer.deserialize_any(DocumentVisitor).map(Document)
    }
}

/// Builds a [`Value`] as `serde_yaml_ng` does, but for integers beyond 64 bits.
struct DocumentVisitor;

impl<'de> Visitor<'de> for DocumentVisitor {
    type Value = Value;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("any YAML value")
    }

    fn visit_bool<E: de::Error>(self, flag: bool) -> Result<Value, E> {
        Ok(Value::Bool(flag))
    }

    fn visit_i64<E: de::Error>(self, number: i64) -> Result<Value, E> {
        Ok(Value::Number(number.into()))
    }

    fn visit_u64<E: de::Error>(self, number: u64) -> Result<Value, E> {
        Ok(Value::Number(number.into()))
    }

    fn visit_i128<E: de::Error>(self, number: i128) -> Result<Value, E> {
        Ok(big_integer(number.to_string()))
    }

    fn visit_u128<E: de::Error>(self, number: u128) -> Result<Value, E> {
        Ok(big_integer(number.to_string()))
    }

    fn visit_f64<E: de::Error>(self, number: f64) -> Result<Value, E> {
        Ok(Value::Number(number.into()))
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Value, E> {
        Ok(Value::String(text.to_owned()))
    }

    fn visit_string<E: de::Error>(self, text: String) -> Result<Value, E> {
        Ok(Value::String(text))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        Document::deserialize(deserializer).map(|document| document.0)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<Value, A::Error> {
        let mut sequence = Vec::new();
        while let Some(Document(item)) = items.next_element()? {
            sequence.push(item);
        }
        Ok(Value::Sequence(sequence))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut entries: A) -> Result<Value, A::Error> {
        let mut mapping = Mapping::new();
        while let Some(Document(key)) = entries.next_key()? {
            if mapping.contains_key(&key) {
                // As serde_yaml_ng says it; a key is never a secret.
                return Err(de::Error::custom(format_args!(
                    "duplicate entry with key {}",
                    describe(&key)
                )));
            }
            let Document(value) = entries.next_value()?;
            mapping.insert(key, value);
        }
        Ok(Value::Mapping(mapping))
    }

    fn visit_enum<A: EnumAccess<'de>>(self, tagged: A) -> Result<Value, A::Error> {
        let (tag, contents): (String, _) = tagged.variant()?;
        let Document(value) = contents.newtype_variant()?;
        Ok(Value::Tagged(Box::new(TaggedValue {
            tag: Tag::new(tag),
            value,
        })))
    }
}

/// The key under which a big integer's digits are kept.
const DIGITS: &str = "digits";

/// An integer too large for 64 bits: its digits in a mapping, not a string, because
/// `Value::as_str` looks through tags and would take the number for text.
fn big_integer(digits: String) -> Value {
    let mut mapping = Mapping::new();
    mapping.insert(Value::from(DIGITS), Value::String(digits));
    Value::Tagged(Box::new(TaggedValue {
        tag: Tag::new(BIG_INTEGER_TAG),
        value: Value::Mapping(mapping),
    }))
}

/// The digits of an integer too large for 64 bits, as [`parse_yaml`] keeps it.
pub(crate) fn big_integer_digits(value: &Value) -> Option<&str> {
    match value {
        Value::Tagged(tagged) if tagged.tag == Tag::new(BIG_INTEGER_TAG) => {
            tagged.value.get(DIGITS).and_then(Value::as_str)
        }
        _ => None,
    }
}

/// How a value is shown after `got`: text quoted, other scalars as written, collections by kind.
pub(crate) fn describe(value: &Value) -> String {
    if let Some(digits) = big_integer_digits(value) {
        return digits.to_owned();
    }
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(flag) => flag.to_string(),
        Value::Number(number) => number.to_string(),
        Value::String(text) => format!("{text:?}"),
        Value::Sequence(_) => "a list".to_owned(),
        Value::Mapping(_) => "a mapping".to_owned(),
        Value::Tagged(tagged) => format!("a value tagged {}", tagged.tag),
    }
}

/// What a value is, without any of it: how a value that may be a secret is shown.
pub(super) fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "text",
        Value::Sequence(_) => "a list",
        Value::Mapping(_) => "a mapping",
        _ if big_integer_digits(value).is_some() => "a number",
        Value::Tagged(_) => "a tagged value",
    }
}
