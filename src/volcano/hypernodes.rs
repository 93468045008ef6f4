//! `/hypernodes/validate`: a hypernode (`topology.volcano.sh/v1alpha1`) has members, and each
//! member's pattern compiles.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::go_pattern::parse_pattern;
use super::review::{Operation, Refusal, Review, aggregate, invalid, quoted};

/// A hypernode: a tier of the network topology and the nodes or hypernodes in it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HyperNode {
    /// `topology.volcano.sh/v1alpha1`, when sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// `HyperNode`, when sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The hypernode's name.
    pub metadata: ObjectMeta,
    /// Its tier and members.
    pub spec: HyperNodeSpec,
}

/// A hypernode's spec.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HyperNodeSpec {
    /// The members: nodes or hypernodes, each chosen by a selector.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<HyperNodeMember>,
    /// Every other field (`tier`, `tierName`), as sent.
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

/// One member of a hypernode.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HyperNodeMember {
    /// `Node` or `HyperNode`.
    #[serde(rename = "type", skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// How the member is chosen.
    pub selector: MemberSelector,
}

/// How a member is chosen: by exact name, by a pattern, or by labels.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct MemberSelector {
    /// `{name}`: one member by name, kept as sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exact_match: Option<Value>,
    /// Members whose names match a pattern.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub regex_match: Option<RegexMatch>,
    /// Members by labels, a label selector kept as sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label_match: Option<Value>,
}

/// A member pattern.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RegexMatch {
    /// The pattern member names match.
    pub pattern: String,
}

/// Volcano's `/hypernodes/validate` for one request (CREATE or UPDATE; Volcano allows any
/// other operation unchecked, and so does this).
///
/// The hypernode needs at least one member, and every member pattern must compile; every
/// problem is reported at once, as apimachinery's aggregate.
///
/// # Errors
/// [`Refusal::Denied`] with Volcano's field errors; [`Refusal::Undecodable`] when CREATE or
/// UPDATE has no object.
pub fn validate_hypernode(review: &Review<'_, HyperNode>) -> Result<(), Refusal> {
    if !matches!(review.operation, Operation::Create | Operation::Update) {
        return Ok(());
    }
    let node = review.object.ok_or_else(|| Refusal::missing("object"))?;
    // Volcano's field paths start from an unnamed root, which apimachinery prints as `[]`.
    let members = "[].spec.members";
    let mut errors = Vec::new();
    if node.spec.members.is_empty() {
        errors.push(invalid(
            members,
            "null",
            "member must have at least one member",
        ));
    }
    for member in &node.spec.members {
        let Some(pattern) = member.selector.regex_match.as_ref().map(|m| &m.pattern) else {
            continue;
        };
        if pattern.is_empty() {
            continue;
        }
        if let Err(error) = parse_pattern(pattern) {
            errors.push(invalid(
                &format!("{members}.selector.regexMatch.pattern"),
                &quoted(pattern),
                &format!(
                    "member regexMatch pattern is invalid: {}",
                    error.replace('\n', " ")
                ),
            ));
        }
    }
    match aggregate(errors) {
        Some(message) => Err(Refusal::Denied(message)),
        None => Ok(()),
    }
}
