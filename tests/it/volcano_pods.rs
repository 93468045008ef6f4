//! Volcano's `/pods/validate` rule, with the case of Volcano's `admit_pod_test.go` and every spec
//! of its e2e `pod_validation_test.go` ported, and the annotation checks they leave untested.

use crate::volcano_jobs_validate::denied;
use dexaflow_admission::volcano::{Operation, Refusal, Review, decode, validate_pod};
use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

fn validate(scheduler: &str, annotations: serde_json::Value) -> Result<(), Refusal> {
    let value = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "normal-pod-1", "namespace": "test", "annotations": annotations},
        "spec": {"schedulerName": scheduler, "containers": [{"name": "c", "image": "i"}]}});
    let pod: Pod = decode("object", &value).expect("a pod").expect("not null");
    let review = Review {
        operation: Operation::Create,
        name: "normal-pod-1",
        namespace: "test",
        object: Some(&pod),
        old_object: None,
    };
    validate_pod(&review, &["volcano".to_owned()])
}

/// Volcano: TestValidatePod, "validate default normal pod"
#[test]
fn a_pod_of_another_scheduler_is_not_checked() {
    let annotations = json!({"volcano.sh/jdb-min-available": "0"});
    assert_eq!(validate("default-scheduler", annotations), Ok(()));
}

/// Not in Volcano's tests: a positive count and a percentage below 100 are budgets.
#[test]
fn a_positive_count_or_a_percentage_below_a_hundred_is_allowed() {
    assert_eq!(
        validate("volcano", json!({"volcano.sh/jdb-min-available": "2"})),
        Ok(())
    );
    assert_eq!(
        validate("volcano", json!({"volcano.sh/jdb-max-unavailable": "25%"})),
        Ok(())
    );
}

/// Not in Volcano's tests: zero pods is no budget.
#[test]
fn a_zero_budget_is_refused_naming_the_annotation_and_value() {
    assert_eq!(
        denied(validate(
            "volcano",
            json!({"volcano.sh/jdb-min-available": "0"})
        )),
        r#"invalid value <"0"> for volcano.sh/jdb-min-available, it must be a positive integer"#
    );
}

/// Not in Volcano's tests: `intstr.Parse` reads an integer as an int32 only, so that a larger
/// one is text, which is then no percentage from 1 to 99.
#[test]
fn a_count_past_int32_is_refused_as_a_percentage_out_of_range() {
    assert_eq!(
        validate(
            "volcano",
            json!({"volcano.sh/jdb-min-available": "2147483647"})
        ),
        Ok(())
    );
    assert_eq!(
        denied(validate(
            "volcano",
            json!({"volcano.sh/jdb-min-available": "2147483648"})
        )),
        r#"invalid value <"2147483648"> for volcano.sh/jdb-min-available, it must be a valid percentage which between 1% ~ 99%"#
    );
}

/// Not in Volcano's tests: a percentage must leave at least one pod either way.
#[test]
fn a_hundred_percent_is_refused_naming_the_range() {
    assert_eq!(
        denied(validate(
            "volcano",
            json!({"volcano.sh/jdb-max-unavailable": "100%"})
        )),
        r#"invalid value <"100%"> for volcano.sh/jdb-max-unavailable, it must be a valid percentage which between 1% ~ 99%"#
    );
}

/// Not in Volcano's tests: text that is neither is refused with the number parser's reason.
#[test]
fn a_budget_that_is_not_a_number_is_refused_naming_the_annotation() {
    assert_eq!(
        denied(validate(
            "volcano",
            json!({"volcano.sh/jdb-max-unavailable": "half"})
        )),
        r#"invalid value strconv.Atoi: parsing "half": invalid syntax for volcano.sh/jdb-max-unavailable"#
    );
}

/// Volcano: validateIntPercentageStr quotes strconv.Atoi's error, whose reason for digits past
/// 64 bits is that the value is out of range, not its syntax
#[test]
fn a_budget_past_64_bits_is_refused_as_out_of_range() {
    assert_eq!(
        denied(validate(
            "volcano",
            json!({"volcano.sh/jdb-min-available": "99999999999999999999"})
        )),
        r#"invalid value strconv.Atoi: parsing "99999999999999999999": value out of range for volcano.sh/jdb-min-available"#
    );
}

/// Volcano: validateIntPercentageStr quotes the text as Go's `%q` does, a character that does
/// not print as `\u` and four hex digits
#[test]
fn a_budget_with_an_invisible_character_is_quoted_as_go_quotes_it() {
    assert_eq!(
        denied(validate(
            "volcano",
            json!({"volcano.sh/jdb-min-available": "0\u{200b}"})
        )),
        r#"invalid value strconv.Atoi: parsing "0\u200b": invalid syntax for volcano.sh/jdb-min-available"#
    );
}

/// Not in Volcano's tests: the two budgets exclude each other.
#[test]
fn both_budget_annotations_at_once_are_refused() {
    let annotations = json!({"volcano.sh/jdb-min-available": "1",
                             "volcano.sh/jdb-max-unavailable": "1"});
    assert_eq!(
        denied(validate("volcano", annotations)),
        "not allow configure multiple annotations <[volcano.sh/jdb-min-available volcano.sh/jdb-max-unavailable]> at same time"
    );
}

// Volcano's e2e specs of `test/e2e/admission/pod_validation_test.go`, each the one pod CREATE
// its webhook receives ("Pod Validating E2E Test", every spec).

/// The denial of a volcano pod annotated `annotations`; Volcano's e2e specs check that it
/// contains their text.
fn denial_of(annotations: serde_json::Value) -> String {
    denied(validate("volcano", annotations))
}

/// Volcano e2e: "Should allow pod creation with valid annotations"
#[test]
fn e2e_a_minimum_of_two_is_allowed() {
    assert_eq!(
        validate("volcano", json!({"volcano.sh/jdb-min-available": "2"})),
        Ok(())
    );
}

/// Volcano e2e: "Should allow pod creation with valid percentage annotation"
#[test]
fn e2e_fifty_percent_unavailable_is_allowed() {
    assert_eq!(
        validate("volcano", json!({"volcano.sh/jdb-max-unavailable": "50%"})),
        Ok(())
    );
}

/// Volcano e2e: "Should reject pod creation with invalid negative annotation value"
#[test]
fn e2e_a_negative_minimum_is_refused_as_not_positive() {
    assert!(
        denial_of(json!({"volcano.sh/jdb-min-available": "-1"}))
            .contains("must be a positive integer")
    );
}

/// Volcano e2e: "Should reject pod creation with invalid zero annotation value"
#[test]
fn e2e_a_zero_minimum_is_refused_as_not_positive() {
    assert!(
        denial_of(json!({"volcano.sh/jdb-min-available": "0"}))
            .contains("must be a positive integer")
    );
}

/// Volcano e2e: "Should reject pod creation with invalid percentage annotation (0%)"
#[test]
fn e2e_zero_percent_is_refused_as_out_of_range() {
    assert!(
        denial_of(json!({"volcano.sh/jdb-max-unavailable": "0%"}))
            .contains("percentage which between 1% ~ 99%")
    );
}

/// Volcano e2e: "Should reject pod creation with invalid percentage annotation (100%)"
#[test]
fn e2e_a_hundred_percent_is_refused_as_out_of_range() {
    assert!(
        denial_of(json!({"volcano.sh/jdb-max-unavailable": "100%"}))
            .contains("percentage which between 1% ~ 99%")
    );
}

/// Volcano e2e: "Should reject pod creation with invalid string annotation"
#[test]
fn e2e_a_word_is_refused_as_no_budget() {
    assert_eq!(
        denial_of(json!({"volcano.sh/jdb-min-available": "invalid"})),
        r#"invalid value strconv.Atoi: parsing "invalid": invalid syntax for volcano.sh/jdb-min-available"#
    );
}

/// Volcano e2e: "Should reject pod creation with multiple conflicting annotations"
#[test]
fn e2e_both_annotations_at_once_are_refused() {
    assert!(
        denial_of(
            json!({"volcano.sh/jdb-min-available": "2", "volcano.sh/jdb-max-unavailable": "50%"})
        )
        .contains("not allow configure multiple annotations")
    );
}

/// Volcano e2e: "Should allow pod creation without annotations when using volcano scheduler"
#[test]
fn e2e_a_volcano_pod_without_budget_annotations_is_allowed() {
    assert_eq!(validate("volcano", json!({})), Ok(()));
}

/// Volcano e2e: "Should allow pod creation with non-volcano scheduler (bypass validation)"
#[test]
fn e2e_a_bad_budget_on_a_pod_of_another_scheduler_is_not_checked() {
    assert_eq!(
        validate(
            "default-scheduler",
            json!({"volcano.sh/jdb-min-available": "-1"})
        ),
        Ok(())
    );
}
