//! Volcano's `/hypernodes/validate` rule, with the cases of Volcano's
//! `admit_hypernode_test.go` ported one test each.

use dexaflow_admission::volcano::{
    HyperNode, Operation, Refusal, Review, decode, validate_hypernode,
};
use serde_json::{Value, json};

fn validate(members: Value) -> Result<(), Refusal> {
    let value =
        json!({"metadata": {"name": "hypernode-1"}, "spec": {"tier": 1, "members": members}});
    let node: HyperNode = decode("object", &value)
        .expect("a hypernode")
        .expect("not null");
    let review = Review {
        operation: Operation::Create,
        name: "hypernode-1",
        namespace: "",
        object: Some(&node),
        old_object: None,
    };
    validate_hypernode(&review)
}

/// Volcano: TestValidateHyperNode, "validate valid hypernode"
#[test]
fn a_member_chosen_by_name_is_allowed() {
    let members = json!([{"type": "Node", "selector": {"exactMatch": {"name": "node-1"}}}]);
    assert_eq!(validate(members), Ok(()));
}

/// Volcano: TestValidateHyperNode, "validate invalid hypernode with invalid regexMatch"
#[test]
fn a_member_pattern_that_does_not_compile_is_refused_naming_the_field_and_pattern() {
    let members = json!([{"type": "Node", "selector": {"regexMatch": {"pattern": "a(b"}}}]);
    let Err(Refusal::Denied(message)) = validate(members) else {
        panic!("expected a denial");
    };
    assert!(
        message.starts_with(
            r#"[].spec.members.selector.regexMatch.pattern: Invalid value: "a(b": member regexMatch pattern is invalid: "#
        ),
        "{message}"
    );
}

/// Volcano: TestValidateHyperNode, "validate valid hypernode with labelMatch"
#[test]
fn a_member_chosen_by_labels_is_allowed() {
    let members = json!([{"type": "Node",
        "selector": {"labelMatch": {"matchLabels": {"topology-rack": "rack1"}}}}]);
    assert_eq!(validate(members), Ok(()));
}

/// Not in Volcano's tests: a hypernode needs a member.
#[test]
fn a_hypernode_without_members_is_refused() {
    assert_eq!(
        validate(json!([])),
        Err(Refusal::Denied(
            "[].spec.members: Invalid value: null: member must have at least one member".to_owned()
        ))
    );
}
