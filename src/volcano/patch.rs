//! The JSON Patch operations Volcano's mutators write, and the one repair their patches need.

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, PatchOperation, ReplaceOperation};
use serde_json::{Map, Value};

/// An `add` of `value` at the path made of `tokens` (each escaped as JSON Pointer requires).
pub(super) fn add(tokens: &[&str], value: Value) -> PatchOperation {
    PatchOperation::Add(AddOperation {
        path: PointerBuf::from_tokens(tokens.iter().copied()),
        value,
    })
}

/// A `replace` of the value at the path made of `tokens` with `value`.
pub(super) fn replace(tokens: &[&str], value: Value) -> PatchOperation {
    PatchOperation::Replace(ReplaceOperation {
        path: PointerBuf::from_tokens(tokens.iter().copied()),
        value,
    })
}

/// `patch` made for an object whose `spec` may not be there: its operations on the spec's
/// fields become one `add` of the whole spec, where the first of them was, and the others stay
/// as they are.
///
/// Volcano adds each default at `/spec/<field>`, which cannot be applied to an object without a
/// `spec` (nor one whose `spec` is `null`): JSON Patch adds a member only to an object that is
/// there, and the API server fails such a request with an internal error. The CRDs do not
/// require `spec`, so the mutator is called with such objects. Call this only when the spec as
/// decoded is empty: an `add` of the whole spec replaces one that is there, so every field it
/// had, other than those the patch sets, must be empty too.
pub(super) fn onto_empty_spec(patch: Vec<PatchOperation>) -> Vec<PatchOperation> {
    let mut spec = Map::new();
    let mut at = None;
    let mut kept = Vec::with_capacity(patch.len());
    for operation in patch {
        let (path, value) = match &operation {
            PatchOperation::Add(AddOperation { path, value })
            | PatchOperation::Replace(ReplaceOperation { path, value }) => (path, value),
            _ => {
                kept.push(operation);
                continue;
            }
        };
        let mut tokens = path.tokens();
        match (tokens.next(), tokens.next(), tokens.next()) {
            (Some(first), Some(field), None) if first.decoded() == "spec" => {
                spec.insert(field.decoded().into_owned(), value.clone());
                at.get_or_insert(kept.len());
            }
            _ => kept.push(operation),
        }
    }
    if let Some(at) = at {
        kept.insert(at, add(&["spec"], Value::Object(spec)));
    }
    kept
}
