//! What a rule is asked (the operation, the object and its old version) and how it refuses.

use std::fmt;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};

use crate::admission::{Strict, error_path};

/// The operation of an admission request, as Kubernetes names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Operation {
    /// `CREATE`.
    Create,
    /// `UPDATE`.
    Update,
    /// `DELETE`.
    Delete,
    /// `CONNECT`, or any other text: no Volcano service is registered for it.
    Other(String),
}

impl Operation {
    /// The operation an AdmissionRequest's `operation` field names.
    pub fn parse(text: &str) -> Operation {
        match text {
            "CREATE" => Operation::Create,
            "UPDATE" => Operation::Update,
            "DELETE" => Operation::Delete,
            other => Operation::Other(other.to_owned()),
        }
    }

    /// The operation as Kubernetes writes it.
    pub fn as_str(&self) -> &str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
            Operation::Other(text) => text,
        }
    }
}

/// One admission request to a rule: the operation, the name and namespace of the object, and
/// the decoded object and old object when the request has them.
///
/// A real DELETE arrives with no object; Volcano's rules then use `name`.
#[derive(Debug, Clone)]
pub struct Review<'a, T> {
    /// The request's operation.
    pub operation: Operation,
    /// The request's `name` (the object's name; the only one a DELETE has).
    pub name: &'a str,
    /// The request's `namespace`, empty for cluster-scoped objects.
    pub namespace: &'a str,
    /// The request's `object`, decoded; `None` when absent or `null`.
    pub object: Option<&'a T>,
    /// The request's `oldObject`, decoded; `None` when absent or `null`.
    pub old_object: Option<&'a T>,
}

/// Why a rule does not allow a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The rule refuses the object: the message is Volcano's.
    Denied(String),
    /// The service is not registered for the operation: Volcano answers such a request with a
    /// denial, a server should answer it as a misrouted request.
    UnknownOperation {
        /// The operation the request named.
        operation: String,
        /// The operations the service expects, as Volcano lists them.
        expected: &'static str,
    },
    /// The request lacks the object (or old object) the operation needs, or it does not decode.
    Undecodable {
        /// `object` or `oldObject`.
        field: &'static str,
        /// The place within it that could not be read, such as `spec.tasks[0].replicas`;
        /// empty for the field as a whole.
        at: String,
        /// Why it could not be read.
        reason: String,
    },
}

impl Refusal {
    /// A denial with Volcano's message.
    pub(crate) fn denied(message: impl Into<String>) -> Refusal {
        Refusal::Denied(message.into())
    }

    /// The service is not registered for `operation`; `expected` lists the ones it is, in the
    /// service's own Volcano wording.
    pub(crate) fn unknown_operation(operation: &Operation, expected: &'static str) -> Refusal {
        Refusal::UnknownOperation {
            operation: operation.as_str().to_owned(),
            expected,
        }
    }

    /// The `field` the operation needs is absent.
    pub(crate) fn missing(field: &'static str) -> Refusal {
        Refusal::Undecodable {
            field,
            at: String::new(),
            reason: "required for this operation, got none".to_owned(),
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::Denied(message) => f.write_str(message),
            Refusal::UnknownOperation {
                operation,
                expected,
            } => write!(
                f,
                "invalid operation `{operation}`, expect operation to be {expected}"
            ),
            Refusal::Undecodable { field, at, reason } if at.is_empty() => {
                write!(f, "request.{field}: {reason}")
            }
            Refusal::Undecodable { field, at, reason } => {
                write!(f, "request.{field}.{at}: {reason}")
            }
        }
    }
}

impl std::error::Error for Refusal {}

/// Decodes a request's `object` or `oldObject` (`field` names which, for the error) from any
/// JSON deserializer that can be read twice (a `&serde_json::Value`, or the `&RawValue` text the
/// server keeps), as Go's `encoding/json` reads it into Volcano's types: `null` is `None`, and
/// so is a member whose value is `null` (Go leaves the field at its zero value, so `tasks: null`
/// is no task, not an error); unknown fields are ignored and missing ones take their defaults;
/// an array is never read as an object.
///
/// # Errors
/// [`Refusal::Undecodable`] naming the field and serde's reason when the value is not the type.
pub fn decode<'de, T: DeserializeOwned, D: Deserializer<'de> + Copy>(
    field: &'static str,
    value: D,
) -> Result<Option<T>, Refusal> {
    let reason = match Option::<T>::deserialize(Strict(value)) {
        Ok(object) => return Ok(object),
        Err(error) => error.to_string(),
    };
    // Only an object that did not decode is read again, without its `null` members.
    let Ok(mut tree) = serde_json::Value::deserialize(value) else {
        return Err(undecodable::<T, D>(field, value, &reason));
    };
    if !drop_null_members(&mut tree) {
        return Err(undecodable::<T, D>(field, value, &reason));
    }
    Option::<T>::deserialize(Strict(&tree))
        .map_err(|error| undecodable::<T, _>(field, &tree, &error.to_string()))
}

/// The refusal of `field`, whose `value` did not decode as a `T` for `reason`, naming the place
/// within it.
fn undecodable<'de, T: Deserialize<'de>, D: Deserializer<'de>>(
    field: &'static str,
    value: D,
    reason: &str,
) -> Refusal {
    Refusal::Undecodable {
        field,
        at: error_path::<Option<T>, D>(value, reason).unwrap_or_default(),
        reason: reason.to_owned(),
    }
}

/// Removes every object member whose value is `null` from `tree`, at any depth, and says
/// whether there was one.
fn drop_null_members(tree: &mut serde_json::Value) -> bool {
    match tree {
        serde_json::Value::Object(members) => {
            let before = members.len();
            members.retain(|_, member| !member.is_null());
            let mut dropped = members.len() != before;
            for member in members.values_mut() {
                dropped |= drop_null_members(member);
            }
            dropped
        }
        serde_json::Value::Array(items) => items
            .iter_mut()
            .fold(false, |dropped, item| drop_null_members(item) | dropped),
        _ => false,
    }
}

/// One of apimachinery's field errors of type "Invalid value", written as Kubernetes writes it:
/// `requestBody.spec.state: Invalid value: "wrong": queue state must be in [Open Closed]`.
///
/// `value` is the bad value already quoted the way apimachinery prints its type (strings in
/// double quotes, numbers bare).
pub(crate) fn invalid(path: &str, value: &str, detail: &str) -> String {
    format!("{path}: Invalid value: {value}: {detail}")
}

/// A string as apimachinery quotes a bad string value: Go's `%q`, which keeps what Go counts
/// printable and writes the rest as `\x01`, `\u00ad` or `\U000e0001`.
pub(crate) fn quoted(text: &str) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for ch in text.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\x07' => out.push_str("\\a"),
            '\x08' => out.push_str("\\b"),
            '\x0c' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\x0b' => out.push_str("\\v"),
            ' '..='~' => out.push(ch),
            ch if is_printable(ch) => out.push(ch),
            ch => {
                let code = u32::from(ch);
                let _ = match code {
                    0..0x80 => write!(out, "\\x{code:02x}"),
                    0x80..0x10000 => write!(out, "\\u{code:04x}"),
                    _ => write!(out, "\\U{code:08x}"),
                };
            }
        }
    }
    out.push('"');
    out
}

/// Whether Go's `strconv.IsPrint` keeps `ch` as it is: Rust's `Debug` escapes the same
/// characters (control, format, separators but the space, unassigned), but for a combining
/// mark, which only `Debug`'s first character escapes, hence the letter before it.
fn is_printable(ch: char) -> bool {
    let mut pair = String::from("x");
    pair.push(ch);
    !pair.escape_debug().skip(1).any(|escaped| escaped == '\\')
}

/// Several field errors joined as apimachinery's aggregate prints them: one alone as itself,
/// more as `[a, b]`, repeats dropped.
pub(crate) fn aggregate(mut errors: Vec<String>) -> Option<String> {
    let mut seen = std::collections::HashSet::new();
    errors.retain(|error| seen.insert(error.clone()));
    match errors.len() {
        0 => None,
        1 => errors.pop(),
        _ => Some(format!("[{}]", errors.join(", "))),
    }
}
