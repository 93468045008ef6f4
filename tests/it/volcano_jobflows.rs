//! Volcano's `/jobflows/validate` rule, with the cases of Volcano's `validate_jobflow_test.go`
//! and `util_test.go` and the specs of its e2e `jobflow_validation_test.go` ported one test each.

use crate::volcano_jobs_validate::denied;
use dexaflow_admission::volcano::{JobFlow, Operation, Refusal, Review, decode, validate_jobflow};
use serde_json::{Value, json};

/// Validates a job flow whose flows are `(name, targets)` in order.
fn validate(flows: &[(&str, &[&str])]) -> Result<(), Refusal> {
    let flows: Vec<Value> = flows
        .iter()
        .map(|(name, targets)| {
            if targets.is_empty() {
                json!({"name": name})
            } else {
                json!({"name": name, "dependsOn": {"targets": targets}})
            }
        })
        .collect();
    let value = json!({"metadata": {"name": "valid-jobflow", "namespace": "test"},
        "spec": {"flows": flows, "jobRetainPolicy": "retain"}});
    let flow: JobFlow = decode("object", &value)
        .expect("a job flow")
        .expect("not null");
    let review = Review {
        operation: Operation::Create,
        name: "valid-jobflow",
        namespace: "test",
        object: Some(&flow),
        old_object: None,
    };
    validate_jobflow(&review)
}

const NOT_DAG: &str = "jobflow Flow is not DAG";

/// Volcano: TestValidateJobFlowCreate, "validate valid-jobflow"; and the e2e spec "JobFlow
/// Validating E2E Test", "Should allow jobflow creation with valid DAG structure" (the same flows)
#[test]
fn a_diamond_of_defined_flows_is_allowed() {
    let flows: &[(&str, &[&str])] = &[
        ("a", &[]),
        ("b", &["a"]),
        ("c", &["a", "b"]),
        ("d", &["b"]),
        ("e", &["c", "d"]),
    ];
    assert_eq!(validate(flows), Ok(()));
}

/// Volcano: TestValidateJobFlowCreate, "validate valid-jobflow with duplicate flow name"
#[test]
fn a_repeated_flow_name_is_allowed_as_one_flow() {
    let flows: &[(&str, &[&str])] = &[
        ("a", &[]),
        ("a", &[]),
        ("b", &["a"]),
        ("c", &["a", "b"]),
        ("d", &["b"]),
        ("e", &["c", "d"]),
    ];
    assert_eq!(validate(flows), Ok(()));
}

/// Volcano: TestValidateJobFlowCreate, "validate valid-jobflow with miss flow name a"
#[test]
fn a_target_that_names_no_flow_is_refused_naming_it() {
    let flows: &[(&str, &[&str])] = &[
        ("b", &["a"]),
        ("c", &["a", "b"]),
        ("d", &["b"]),
        ("e", &["c", "d"]),
    ];
    assert_eq!(
        denied(validate(flows)),
        "jobflow Flow is not DAG: vertex is not defined: a"
    );
}

/// Volcano: TestValidateJobFlowCreate, "validate valid-jobflow with flows not dag"
#[test]
fn two_flows_waiting_for_each_other_are_refused() {
    let flows: &[(&str, &[&str])] = &[
        ("a", &["b"]),
        ("b", &["a"]),
        ("c", &["a", "b"]),
        ("d", &["b"]),
        ("e", &["c", "d"]),
    ];
    assert_eq!(denied(validate(flows)), NOT_DAG);
}

/// Volcano: TestValidateJobFlowCreate, "validate valid-jobflow with lows with muti c"
#[test]
fn a_repeated_flow_name_keeps_the_last_definitions_targets() {
    let flows: &[(&str, &[&str])] = &[("a", &[]), ("b", &["a"]), ("c", &["a"]), ("c", &["b"])];
    assert_eq!(validate(flows), Ok(()));
}

/// Volcano: TestIsDAG, case #0
#[test]
fn a_loop_with_an_undefined_target_is_refused_for_the_undefined_target() {
    let flows: &[(&str, &[&str])] = &[("1", &["2"]), ("2", &["1", "3"])];
    assert_eq!(
        denied(validate(flows)),
        "jobflow Flow is not DAG: vertex is not defined: 3"
    );
}

/// Volcano: TestIsDAG, case #1
#[test]
fn a_three_flow_loop_is_refused() {
    let flows: &[(&str, &[&str])] = &[("1", &["2"]), ("2", &["3"]), ("3", &["1"])];
    assert_eq!(denied(validate(flows)), NOT_DAG);
}

/// Volcano: TestIsDAG, case #2
#[test]
fn a_two_flow_loop_beside_a_leaf_is_refused() {
    let flows: &[(&str, &[&str])] = &[("1", &["2"]), ("2", &["1", "3"]), ("3", &[])];
    assert_eq!(denied(validate(flows)), NOT_DAG);
}

/// Volcano: TestIsDAG, case #3
#[test]
fn a_chain_with_a_shortcut_is_allowed() {
    let flows: &[(&str, &[&str])] = &[("1", &["2", "3"]), ("2", &["3"]), ("3", &["4"]), ("4", &[])];
    assert_eq!(validate(flows), Ok(()));
}

/// Volcano: TestIsDAG, case #4
#[test]
fn a_tree_is_allowed() {
    let flows: &[(&str, &[&str])] = &[
        ("1", &["2", "3"]),
        ("2", &["4", "5"]),
        ("3", &[]),
        ("4", &[]),
        ("5", &[]),
    ];
    assert_eq!(validate(flows), Ok(()));
}

/// Volcano: TestIsDAG, case #5
#[test]
fn a_chain_with_many_shortcuts_is_allowed() {
    let flows: &[(&str, &[&str])] = &[
        ("1", &["2", "3", "4"]),
        ("2", &["3"]),
        ("3", &["4"]),
        ("4", &["5"]),
        ("5", &[]),
    ];
    assert_eq!(validate(flows), Ok(()));
}

/// Volcano: TestIsDAG, case #6
#[test]
fn converging_paths_are_allowed() {
    let flows: &[(&str, &[&str])] = &[
        ("1", &["2", "3", "4"]),
        ("2", &["3", "5"]),
        ("3", &["5"]),
        ("4", &["3", "5"]),
        ("5", &[]),
    ];
    assert_eq!(validate(flows), Ok(()));
}

/// Volcano: TestIsDAG, case #7
#[test]
fn a_flow_waiting_for_itself_is_refused() {
    let flows: &[(&str, &[&str])] = &[
        ("1", &["2", "3", "4"]),
        ("2", &["3", "5"]),
        ("3", &["5"]),
        ("4", &["3", "5"]),
        ("5", &["5", "3"]),
    ];
    assert_eq!(denied(validate(flows)), NOT_DAG);
}

/// Not in Volcano's tests: a DELETE is not a job-flow operation.
#[test]
fn the_job_flow_validator_answers_a_delete_as_an_unknown_operation() {
    let review: Review<'_, JobFlow> = Review {
        operation: Operation::Delete,
        name: "f",
        namespace: "test",
        object: None,
        old_object: None,
    };
    let refusal = validate_jobflow(&review).expect_err("refused");
    assert!(
        matches!(refusal, Refusal::UnknownOperation { ref operation, .. } if operation == "DELETE")
    );
}

// Volcano's e2e specs of `test/e2e/admission/jobflow_validation_test.go` ("JobFlow Validating
// E2E Test", every spec), each the one request its webhook receives.

/// Volcano e2e: "Should allow jobflow creation with duplicate flow names"
#[test]
fn e2e_a_repeated_flow_name_is_allowed() {
    let flows: &[(&str, &[&str])] = &[("a", &[]), ("a", &[]), ("b", &["a"])];
    assert_eq!(validate(flows), Ok(()));
}

/// Volcano e2e: "Should reject jobflow creation with missing flow definition"
#[test]
fn e2e_a_dependency_on_an_undefined_flow_is_refused_as_no_dag() {
    let flows: &[(&str, &[&str])] = &[("b", &["a"]), ("c", &["a", "b"])];
    let message = denied(validate(flows));
    assert!(message.contains(NOT_DAG), "{message}");
    assert!(message.contains("vertex is not defined"), "{message}");
}

/// Volcano e2e: "Should allow jobflow creation with multiple flows having same dependency target"
#[test]
fn e2e_flows_sharing_a_target_and_a_repeated_name_are_allowed() {
    let flows: &[(&str, &[&str])] = &[("a", &[]), ("b", &["a"]), ("c", &["a"]), ("c", &["b"])];
    assert_eq!(validate(flows), Ok(()));
}

/// Volcano e2e: "Should allow jobflow update with valid DAG structure": the update adds a flow
/// `c` after `b`.
#[test]
fn e2e_an_update_that_keeps_a_dag_is_allowed() {
    let value = json!({"metadata": {"name": "updated-jobflow", "namespace": "test"},
        "spec": {"flows": [{"name": "a"}, {"name": "b", "dependsOn": {"targets": ["a"]}},
            {"name": "c", "dependsOn": {"targets": ["b"]}}]}});
    let flow: JobFlow = decode("object", &value)
        .expect("a job flow")
        .expect("not null");
    let review = Review {
        operation: Operation::Update,
        name: "updated-jobflow",
        namespace: "test",
        object: Some(&flow),
        old_object: None,
    };
    assert_eq!(validate_jobflow(&review), Ok(()));
}

/// Volcano e2e: "Should allow jobflow creation with simple linear dependency chain"
#[test]
fn e2e_a_linear_chain_is_allowed() {
    let flows: &[(&str, &[&str])] = &[("start", &[]), ("middle", &["start"]), ("end", &["middle"])];
    assert_eq!(validate(flows), Ok(()));
}

/// Volcano e2e: "Should allow jobflow creation with complex valid DAG structure"
#[test]
fn e2e_two_roots_joining_into_one_chain_are_allowed() {
    let flows: &[(&str, &[&str])] = &[
        ("root1", &[]),
        ("root2", &[]),
        ("level1-a", &["root1"]),
        ("level1-b", &["root2"]),
        ("level2", &["level1-a", "level1-b"]),
        ("final", &["level2"]),
    ];
    assert_eq!(validate(flows), Ok(()));
}

/// Volcano e2e: "Should allow jobflow creation with empty flows list"
#[test]
fn e2e_no_flows_at_all_is_allowed() {
    assert_eq!(validate(&[]), Ok(()));
}

/// Volcano e2e: "Should allow jobflow creation with single flow (no dependencies)"
#[test]
fn e2e_a_single_flow_is_allowed() {
    assert_eq!(validate(&[("single-flow", &[])]), Ok(()));
}

/// Volcano e2e: "Should reject jobflow creation with self-dependency"
#[test]
fn e2e_a_flow_waiting_for_itself_is_refused_as_no_dag() {
    let message = denied(validate(&[("self-dependent", &["self-dependent"])]));
    assert!(message.contains(NOT_DAG), "{message}");
}

/// Go: AdmitJobFlows trims the message of validateJobFlowDAG, so an undefined target named
/// with a trailing blank is named without it, and an empty one leaves no blank after the colon.
#[test]
fn an_undefined_target_ending_in_blanks_is_named_without_them() {
    let flows: &[(&str, &[&str])] = &[("a", &["b \t\u{a0}"])];
    assert_eq!(
        denied(validate(flows)),
        "jobflow Flow is not DAG: vertex is not defined: b"
    );
    let flows: &[(&str, &[&str])] = &[("a", &[""])];
    assert_eq!(
        denied(validate(flows)),
        "jobflow Flow is not DAG: vertex is not defined:"
    );
}
