//! The webhook wire format, `dexaflow.io/admission/v1` (ADR 0100 §8): what a webhook is sent and
//! what it answers, as plain types. Sending them is the webhook client's business; nothing here
//! does I/O.
//!
//! - [`RequestEnvelope`]: `api_version`, `uid` and every field of [`Request`] beside them, at the
//!   top level, snake_case.
//! - [`AnswerEnvelope`]: `api_version`, `uid`, `decision`, `reason` and `changes`;
//!   [`AnswerEnvelope::into_decision`] applies the answer's rules and gives the [`Decision`].
//! - [`request_schema`] and [`answer_schema`]: their JSON Schemas (draft 2020-12), committed in
//!   the repository under `schemas/` so that a webhook can be written in any language.
//!
//! Both envelopes decode strictly: an unknown field at any level, a missing field, a repeated
//! field, a key repeated inside a map (`labels`, `annotations`, `node_selector`) or a value of
//! the wrong type is an error. serde's `flatten` would not be strict (it
//! ignores `deny_unknown_fields`), so the request envelope's decoder takes `uid` itself and hands
//! every other field to [`Request`]'s own strict decoder: [`Request`] stays the one list of the
//! request's fields. The answer envelope is one flat struct.
//!
//! ```
//! use dexaflow_admission::admission::{AnswerEnvelope, Decision, RequestEnvelope, Request};
//!
//! // What a webhook server does with one call.
//! let sent = RequestEnvelope::new("8d0f3a1e-5b7c-4d2a-9e61-0c4b7f2a9d13", Request::new("acme", "etl", "load"));
//! let body = serde_json::to_string(&sent).unwrap();
//! let received: RequestEnvelope = serde_json::from_str(&body).unwrap();
//! let answer = AnswerEnvelope::new(&received.uid, Decision::Refuse("over budget".into()));
//!
//! // What the client makes of the answer.
//! let decoded: AnswerEnvelope = serde_json::from_str(&serde_json::to_string(&answer).unwrap()).unwrap();
//! assert_eq!(decoded.into_decision(&sent.uid), Ok(Decision::Refuse("over budget".into())));
//! ```

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::collections::btree_map::Entry;
use std::fmt;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::de::{self, DeserializeSeed, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use thiserror::Error;

use super::{API_VERSION, Changes, Decision, Request, clean_reason};

/// Whether a `Content-Type` value is `application/json`, in any case, with any parameters
/// (`charset=utf-8`) and spaces around the media type: the one check of a webhook's answer and
/// of a request to the server.
pub(crate) fn is_json_content_type(value: &str) -> bool {
    value
        .split(';')
        .next()
        .is_some_and(|media_type| media_type.trim().eq_ignore_ascii_case("application/json"))
}

/// One call to a webhook: the attempt, with the call's `uid` beside its fields.
///
/// On the wire it is one JSON object: `uid` and every field of [`Request`] (`api_version`,
/// `tenant`, `dag_id`, ...) at the top level. Decoding is strict: an unknown field, at the top
/// level or inside, is an error, and so is a missing `uid`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestEnvelope {
    /// A fresh random UUID for each call; the answer must echo it.
    pub uid: String,
    /// The attempt. Its `api_version` is the envelope's.
    pub request: Request,
}

impl RequestEnvelope {
    /// The envelope of one call with `uid` about `request`.
    pub fn new(uid: impl Into<String>, request: Request) -> RequestEnvelope {
        RequestEnvelope {
            uid: uid.into(),
            request,
        }
    }

    /// The wire form of the envelope of `uid` and `request`, borrowing both: what a client
    /// encodes to send a request it does not own. It encodes exactly as [`RequestEnvelope`] does.
    pub fn wire<'a>(uid: &'a str, request: &'a Request) -> impl Serialize + 'a {
        Flat { uid, request }
    }
}

/// The encoding of a request envelope. `flatten` is fine for encoding; only its decoding is not
/// strict.
#[derive(Serialize)]
struct Flat<'a> {
    uid: &'a str,
    #[serde(flatten)]
    request: &'a Request,
}

impl Serialize for RequestEnvelope {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        RequestEnvelope::wire(&self.uid, &self.request).serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for RequestEnvelope {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<RequestEnvelope, D::Error> {
        deserializer.deserialize_map(EnvelopeVisitor)
    }
}

/// Decodes a [`RequestEnvelope`]: `uid` here, every other entry by [`Request`]'s decoder.
struct EnvelopeVisitor;

impl<'de> Visitor<'de> for EnvelopeVisitor {
    type Value = RequestEnvelope;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "a {API_VERSION} request object")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<RequestEnvelope, A::Error> {
        let mut uid = None;
        let request = Request::deserialize(de::value::MapAccessDeserializer::new(WithoutUid {
            map,
            uid: &mut uid,
        }))?;
        let uid = uid.ok_or_else(|| de::Error::missing_field("uid"))?;
        Ok(RequestEnvelope { uid, request })
    }
}

/// The entries of a request envelope but `uid`, which it keeps aside.
struct WithoutUid<'u, A> {
    map: A,
    uid: &'u mut Option<String>,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for WithoutUid<'_, A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        while let Some(key) = self.map.next_key::<Key<'de>>()? {
            match key {
                Key::Borrowed("uid") => {}
                Key::Owned(key) if key == "uid" => {}
                Key::Borrowed(key) => {
                    return seed
                        .deserialize(de::value::BorrowedStrDeserializer::new(key))
                        .map(Some)
                        .map_err(|error| refused_key(key, error));
                }
                Key::Owned(key) => {
                    return seed
                        .deserialize(de::value::StrDeserializer::new(&key))
                        .map(Some)
                        .map_err(|error| refused_key(&key, error));
                }
            }
            if self.uid.is_some() {
                return Err(de::Error::duplicate_field("uid"));
            }
            *self.uid = Some(self.map.next_value()?);
        }
        Ok(None)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        self.map.next_value_seed(seed)
    }
}

/// The error for `key`, which [`Request`]'s decoder refused with `error`: for a key that is no
/// field of the request, serde's unknown-field error listing the envelope's fields, `uid`
/// among them (the request's own list leaves it out); else `error`.
fn refused_key<E: de::Error>(key: &str, error: E) -> E {
    let fields = request_fields();
    if fields.contains(&key) {
        return error;
    }
    let expected: Vec<String> = std::iter::once("uid")
        .chain(fields.iter().copied())
        .map(|field| format!("`{field}`"))
        .collect();
    E::custom(format_args!(
        "unknown field `{key}`, expected one of {}",
        expected.join(", ")
    ))
}

/// The names of [`Request`]'s fields, read from its derived decoder (which hands them to the
/// deserializer it is given), so that the list is written once, in the type.
fn request_fields() -> &'static [&'static str] {
    /// A deserializer that records the field names a struct's decoder asks it for, and
    /// decodes nothing.
    struct FieldNames<'a>(&'a mut &'static [&'static str]);

    impl<'de> Deserializer<'de> for FieldNames<'_> {
        type Error = de::value::Error;

        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
            Err(de::Error::custom("only a struct's field names are read"))
        }

        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Self::Error> {
            *self.0 = fields;
            Err(de::Error::custom("only a struct's field names are read"))
        }

        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
            option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
            ignored_any
        }
    }

    let mut fields: &'static [&'static str] = &[];
    // The decoder's error is the one `FieldNames` made: only the names were wanted.
    let _ = Request::deserialize(FieldNames(&mut fields));
    fields
}

/// A JSON object's key, borrowed from the text when it has no escapes, so that reading a key
/// allocates nothing: for decoders that look at a key and then drop or skip it.
pub(crate) enum Key<'de> {
    /// The key as it is in the text.
    Borrowed(&'de str),
    /// The key unescaped.
    Owned(String),
}

impl Key<'_> {
    /// The key's text.
    pub(crate) fn as_str(&self) -> &str {
        match self {
            Key::Borrowed(key) => key,
            Key::Owned(key) => key,
        }
    }
}

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Key<'de>, D::Error> {
        deserializer.deserialize_str(KeyVisitor)
    }
}

/// The visitor of [`Key`].
struct KeyVisitor;

impl<'de> Visitor<'de> for KeyVisitor {
    type Value = Key<'de>;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("a field name")
    }

    fn visit_borrowed_str<E: de::Error>(self, key: &'de str) -> Result<Key<'de>, E> {
        Ok(Key::Borrowed(key))
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<Key<'de>, E> {
        Ok(Key::Owned(key.to_owned()))
    }

    fn visit_string<E: de::Error>(self, key: String) -> Result<Key<'de>, E> {
        Ok(Key::Owned(key))
    }
}

/// Decodes a map of strings of the protocol (`labels`, `annotations`, `node_selector`),
/// refusing a key that appears twice, as a repeated field is refused: serde's own map decoding
/// would keep the last value, so that two readers of one body could disagree on it.
///
/// # Errors
/// `duplicate key "<key>"`, or the decoder's own error for anything that is no map of strings.
pub(super) fn unique_keys<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<BTreeMap<String, String>, D::Error> {
    deserializer.deserialize_map(UniqueKeys)
}

/// The visitor of [`unique_keys`].
struct UniqueKeys;

impl<'de> Visitor<'de> for UniqueKeys {
    type Value = BTreeMap<String, String>;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("a map of strings to strings")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut entries = BTreeMap::new();
        while let Some(key) = map.next_key::<String>()? {
            match entries.entry(key) {
                Entry::Occupied(entry) => {
                    return Err(de::Error::custom(format_args!(
                        "duplicate key {:?}",
                        entry.key()
                    )));
                }
                Entry::Vacant(entry) => {
                    entry.insert(map.next_value()?);
                }
            }
        }
        Ok(entries)
    }
}

impl JsonSchema for RequestEnvelope {
    fn schema_name() -> Cow<'static, str> {
        "RequestEnvelope".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let mut schema = Request::json_schema(generator);
        let uid = json_schema!({
            "description": "A fresh random UUID for each call; the answer must echo it.",
            "type": "string",
        });
        if let Some(properties) = schema
            .get_mut("properties")
            .and_then(|properties| properties.as_object_mut())
        {
            properties.insert("uid".to_owned(), uid.to_value());
        }
        if let Some(required) = schema
            .get_mut("required")
            .and_then(|required| required.as_array_mut())
        {
            required.push("uid".into());
        }
        schema.insert(
            "description".to_owned(),
            "One call to a dexaflow.io/admission/v1 webhook: one task attempt, before its agent \
             token is minted. Sent as the body of a POST."
                .into(),
        );
        pin_api_version(&mut schema);
        schema
    }
}

/// A webhook's answer to one call.
///
/// `reason` is required and not blank for `hold` and `refuse`, and absent (or null) otherwise;
/// `changes` is required for `admit_with`, and absent (or null) otherwise. Decoding checks the
/// shape; [`AnswerEnvelope::into_decision`] checks these rules, the `api_version` and the `uid`.
///
/// Decode it with [`super::strict_from_str`], as the webhook client does: serde's derived
/// decoder alone also takes a sequence of its fields in order
/// (`["dexaflow.io/admission/v1", "<uid>", "admit"]`), which is no answer of this protocol.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(transform = answer_rules)]
pub struct AnswerEnvelope {
    /// Always `dexaflow.io/admission/v1`.
    pub api_version: String,
    /// The `uid` of the request this answers.
    pub uid: String,
    /// What the webhook decided.
    pub decision: DecisionKind,
    /// Why, shown on the task instance: required for `hold` and `refuse`, absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// What to change: required for `admit_with`, absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changes: Option<Box<Changes>>,
}

/// The `decision` of an answer, as the wire spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DecisionKind {
    /// Run the attempt as it is.
    Admit,
    /// Run it with `changes`.
    AdmitWith,
    /// Do not run it yet; offer it again later (`reason` says why).
    Hold,
    /// Never run it; fail the task (`reason` says why).
    Refuse,
}

impl DecisionKind {
    /// The kind of `decision`.
    pub fn of(decision: &Decision) -> DecisionKind {
        match decision {
            Decision::Admit => DecisionKind::Admit,
            Decision::AdmitWith(_) => DecisionKind::AdmitWith,
            Decision::Hold(_) => DecisionKind::Hold,
            Decision::Refuse(_) => DecisionKind::Refuse,
        }
    }

    /// The name the wire gives it: `admit`, `admit_with`, `hold` or `refuse`.
    pub fn as_str(self) -> &'static str {
        match self {
            DecisionKind::Admit => "admit",
            DecisionKind::AdmitWith => "admit_with",
            DecisionKind::Hold => "hold",
            DecisionKind::Refuse => "refuse",
        }
    }

    fn takes_reason(self) -> bool {
        matches!(self, DecisionKind::Hold | DecisionKind::Refuse)
    }
}

impl fmt::Display for DecisionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a decoded answer is not a decision for the request it should answer.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AnswerError {
    /// The answer is of another version of the protocol.
    #[error("api_version is {got:?}, expected {API_VERSION:?}")]
    ApiVersion {
        /// The answer's `api_version`.
        got: String,
    },
    /// The answer echoes another call's `uid`.
    #[error("uid is not the request's {sent:?}: got {got:?}")]
    Uid {
        /// The request's `uid`.
        sent: String,
        /// The answer's `uid`.
        got: String,
    },
    /// A `hold` or `refuse` without a reason, or with a blank one.
    #[error("decision {decision} needs a reason that is not blank")]
    MissingReason {
        /// `hold` or `refuse`.
        decision: DecisionKind,
    },
    /// An `admit` or `admit_with` with a reason.
    #[error("decision {decision} takes no reason")]
    UnexpectedReason {
        /// `admit` or `admit_with`.
        decision: DecisionKind,
    },
    /// An `admit_with` without changes.
    #[error("decision admit_with needs changes")]
    MissingChanges,
    /// A decision other than `admit_with` with changes.
    #[error("decision {decision} takes no changes")]
    UnexpectedChanges {
        /// `admit`, `hold` or `refuse`.
        decision: DecisionKind,
    },
}

impl AnswerEnvelope {
    /// The answer to the call `uid` that carries `decision`: how a webhook server answers. It
    /// passes [`AnswerEnvelope::into_decision`] for `uid` unless a hold or refusal has a blank
    /// reason.
    pub fn new(uid: impl Into<String>, decision: Decision) -> AnswerEnvelope {
        let kind = DecisionKind::of(&decision);
        let (reason, changes) = match decision {
            Decision::Admit => (None, None),
            Decision::AdmitWith(changes) => (None, Some(changes)),
            Decision::Hold(reason) | Decision::Refuse(reason) => (Some(reason), None),
        };
        AnswerEnvelope {
            api_version: API_VERSION.to_owned(),
            uid: uid.into(),
            decision: kind,
            reason,
            changes,
        }
    }

    /// The decision this answers to the call `uid`, once its `api_version`, its `uid` and the
    /// rules of its `reason` and `changes` hold.
    ///
    /// # Errors
    /// The first [`AnswerError`] found, in that order.
    pub fn into_decision(self, uid: &str) -> Result<Decision, AnswerError> {
        if self.api_version != API_VERSION {
            return Err(AnswerError::ApiVersion {
                got: self.api_version,
            });
        }
        if self.uid != uid {
            return Err(AnswerError::Uid {
                sent: uid.to_owned(),
                got: self.uid,
            });
        }
        let decision = self.decision;
        let reason = match (decision.takes_reason(), self.reason) {
            // Blank as the task instance would show it.
            (true, Some(reason)) if !clean_reason(&reason).trim().is_empty() => reason,
            (true, _) => return Err(AnswerError::MissingReason { decision }),
            (false, Some(_)) => return Err(AnswerError::UnexpectedReason { decision }),
            (false, None) => String::new(),
        };
        match (decision, self.changes) {
            (DecisionKind::AdmitWith, Some(changes)) => Ok(Decision::AdmitWith(changes)),
            (DecisionKind::AdmitWith, None) => Err(AnswerError::MissingChanges),
            (_, Some(_)) => Err(AnswerError::UnexpectedChanges { decision }),
            (DecisionKind::Admit, None) => Ok(Decision::Admit),
            (DecisionKind::Hold, None) => Ok(Decision::Hold(reason)),
            (DecisionKind::Refuse, None) => Ok(Decision::Refuse(reason)),
        }
    }
}

/// The answer's rules that its fields' types cannot say, added to its schema: `reason` with
/// `hold` and `refuse` only, and not blank; `changes` with `admit_with` only.
fn answer_rules(schema: &mut Schema) {
    let rules = json_schema!({
        "allOf": [
            {
                "if": {"properties": {"decision": {"enum": ["hold", "refuse"]}}},
                "then": {
                    "required": ["reason"],
                    "properties": {"reason": {"type": "string", "pattern": "\\S"}},
                },
                "else": {"properties": {"reason": {"type": "null"}}},
            },
            {
                "if": {"properties": {"decision": {"const": "admit_with"}}},
                "then": {
                    "required": ["changes"],
                    "properties": {"changes": {"type": "object"}},
                },
                "else": {"properties": {"changes": {"type": "null"}}},
            },
        ],
    });
    if let Some(all_of) = rules.get("allOf") {
        schema.insert("allOf".to_owned(), all_of.clone());
    }
    schema.insert(
        "description".to_owned(),
        "A dexaflow.io/admission/v1 webhook's answer to one call, with HTTP status 200 and \
         Content-Type application/json."
            .into(),
    );
    pin_api_version(schema);
}

/// Pins a schema's `api_version` property to [`API_VERSION`].
fn pin_api_version(schema: &mut Schema) {
    if let Some(api_version) = schema
        .get_mut("properties")
        .and_then(|properties| properties.get_mut("api_version"))
        .and_then(|api_version| api_version.as_object_mut())
    {
        api_version.insert("const".to_owned(), API_VERSION.into());
    }
}

/// The JSON Schema (draft 2020-12) of [`RequestEnvelope`], as committed in
/// `schemas/request.schema.json`.
pub fn request_schema() -> Schema {
    schemars::schema_for!(RequestEnvelope)
}

/// The JSON Schema (draft 2020-12) of [`AnswerEnvelope`], its rules included, as committed in
/// `schemas/answer.schema.json`.
pub fn answer_schema() -> Schema {
    schemars::schema_for!(AnswerEnvelope)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_content_types_are_recognised_with_parameters_and_others_are_not() {
        assert!(is_json_content_type("application/json; charset=utf-8"));
        assert!(!is_json_content_type("application/json-patch+json"));
    }

    #[test]
    fn json_content_type_may_carry_parameters_any_case_and_spaces() {
        for value in [
            "application/json",
            "application/json; charset=utf-8",
            "application/json;charset=UTF-8",
            "Application/JSON",
            "  application/json  ",
            " application/json ; charset=utf-8",
        ] {
            assert!(is_json_content_type(value), "{value:?}");
        }
    }

    #[test]
    fn json_content_type_is_not_another_media_type_nor_empty() {
        for value in [
            "",
            ";",
            "text/json",
            "text/plain",
            "application/jsonx",
            "application/json-patch+json",
            "application/ json",
            "charset=utf-8; application/json",
        ] {
            assert!(!is_json_content_type(value), "{value:?}");
        }
    }
}
