//! Volcano's `/hypernodes/validate` rule, with the cases of Volcano's
//! `admit_hypernode_test.go` ported one test each, and the specs of its e2e
//! `hypernode_validation_test.go` that reach the webhook. Not ported, since the API server
//! refuses them by the CRD's schema before any webhook is called: an empty `exactMatch.name`,
//! an empty `regexMatch.pattern` ("should be at least 1 chars long") and a name that is no DNS
//! name ("should match").

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

/// The verdict on `operation` of a hypernode with `members`.
fn judge(operation: Operation, members: Value) -> Result<(), Refusal> {
    let value =
        json!({"metadata": {"name": "e2e-hypernode"}, "spec": {"tier": 1, "members": members}});
    let node: HyperNode = decode("object", &value)
        .expect("a hypernode")
        .expect("not null");
    validate_hypernode(&Review {
        operation,
        name: "e2e-hypernode",
        namespace: "",
        object: Some(&node),
        old_object: None,
    })
}

/// Volcano e2e: "Should allow HyperNode creation with valid exactMatch selector"
#[test]
fn e2e_a_member_by_exact_name_is_allowed() {
    let members = json!([{"type": "Node", "selector": {"exactMatch": {"name": "node-1"}}}]);
    assert_eq!(judge(Operation::Create, members), Ok(()));
}

/// Volcano e2e: "Should allow HyperNode creation with valid regexMatch selector"
#[test]
fn e2e_a_member_by_a_valid_pattern_is_allowed() {
    let members = json!([{"type": "Node", "selector": {"regexMatch": {"pattern": "node-[0-9]+"}}}]);
    assert_eq!(judge(Operation::Create, members), Ok(()));
}

/// Volcano e2e: "Should allow HyperNode creation with valid labelMatch selector"
#[test]
fn e2e_a_member_by_labels_is_allowed() {
    let members = json!([{"type": "Node",
        "selector": {"labelMatch": {"matchLabels": {"topology-rack": "rack1"}}}}]);
    assert_eq!(judge(Operation::Create, members), Ok(()));
}

/// Volcano e2e: "Should reject HyperNode creation with invalid regex pattern"
#[test]
fn e2e_a_pattern_that_does_not_compile_is_refused_naming_the_field() {
    let members = json!([{"type": "Node", "selector": {"regexMatch": {"pattern": "a(b"}}}]);
    let Err(Refusal::Denied(message)) = judge(Operation::Create, members) else {
        panic!("expected a denial");
    };
    assert!(
        message.contains("member regexMatch pattern is invalid"),
        "{message}"
    );
    assert!(message.contains("regexMatch.pattern"), "{message}");
}

/// Volcano e2e: "Should reject HyperNode creation with no members"
#[test]
fn e2e_a_hypernode_without_members_is_refused() {
    let Err(Refusal::Denied(message)) = judge(Operation::Create, json!([])) else {
        panic!("expected a denial");
    };
    assert!(
        message.contains("member must have at least one member"),
        "{message}"
    );
    assert!(message.contains("members"), "{message}");
}

/// Volcano e2e: "Should allow HyperNode update with valid changes": the members become a pattern.
#[test]
fn e2e_an_update_to_a_valid_pattern_is_allowed() {
    let members = json!([{"type": "Node", "selector": {"regexMatch": {"pattern": "node-[1-5]"}}}]);
    assert_eq!(judge(Operation::Update, members), Ok(()));
}

/// Volcano e2e: "Should reject HyperNode update with invalid changes": the members emptied.
#[test]
fn e2e_an_update_that_empties_the_members_is_refused() {
    let Err(Refusal::Denied(message)) = judge(Operation::Update, json!([])) else {
        panic!("expected a denial");
    };
    assert!(
        message.contains("member must have at least one member"),
        "{message}"
    );
}

fn pattern_member(pattern: &str) -> Value {
    json!([{"type": "Node", "selector": {"regexMatch": {"pattern": pattern}}}])
}

/// Beyond Volcano's tests: Go's engine compiles `\w{1000}`; a pattern is judged by its syntax,
/// not by what compiling it would cost here.
#[test]
fn a_member_pattern_that_would_compile_large_is_still_a_pattern() {
    assert_eq!(validate(pattern_member(r"\w{1000}")), Ok(()));
    assert_eq!(validate(pattern_member(r"(?:\pL{100}){10}")), Ok(()));
}

/// Beyond Volcano's tests: Go takes groups nested up to 1000 deep.
#[test]
fn a_member_pattern_nested_300_deep_is_a_pattern_and_one_past_go_s_limit_is_not() {
    let nested = |depth: usize| format!("{}a{}", "(".repeat(depth), ")".repeat(depth));
    assert_eq!(validate(pattern_member(&nested(300))), Ok(()));
    let Err(Refusal::Denied(message)) = validate(pattern_member(&nested(1001))) else {
        panic!("expected a denial");
    };
    assert!(
        message.contains("member regexMatch pattern is invalid: "),
        "{message}"
    );
}

/// The reason a member pattern is refused for, after the quoted value.
fn pattern_reason(pattern: &str) -> String {
    let Err(Refusal::Denied(message)) = validate(pattern_member(pattern)) else {
        panic!("expected a denial of {pattern:?}");
    };
    let (_, reason) = message
        .split_once("member regexMatch pattern is invalid: ")
        .unwrap_or_else(|| panic!("{message}"));
    reason.to_owned()
}

/// Beyond Volcano's tests: Go's `regexp` refuses a count above 1000 (`parse.repeat`).
#[test]
fn a_member_pattern_counting_past_a_thousand_is_refused_as_go_refuses_it() {
    assert_eq!(validate(pattern_member("a{1000}")), Ok(()));
    assert_eq!(
        pattern_reason("a{1001}"),
        "error parsing regexp: invalid repeat count: `{1001}`"
    );
    assert_eq!(
        pattern_reason("a{2,1001}"),
        "error parsing regexp: invalid repeat count: `{2,1001}`"
    );
}

/// Beyond Volcano's tests: Go's `regexp` refuses an operator stacked on another, where a group
/// between them is a pattern.
#[test]
fn a_member_pattern_with_stacked_operators_is_refused_as_go_refuses_it() {
    assert_eq!(
        pattern_reason("a**"),
        "error parsing regexp: invalid nested repetition operator: `**`"
    );
    assert_eq!(
        pattern_reason("a{2}{3}"),
        "error parsing regexp: invalid nested repetition operator: `{2}{3}`"
    );
    assert_eq!(validate(pattern_member("(?:a*)*")), Ok(()));
    assert_eq!(validate(pattern_member("a*?")), Ok(()));
}

/// Beyond Volcano's tests: Go's `repeatIsValid` refuses counts nested past a product of 1000,
/// naming the outer count; one that repeats nothing is not weighed.
#[test]
fn a_member_pattern_whose_nested_counts_multiply_past_a_thousand_is_refused() {
    assert_eq!(validate(pattern_member("(a{10}){100}")), Ok(()));
    assert_eq!(
        pattern_reason("(a{500}){3}"),
        "error parsing regexp: invalid repeat count: `{3}`"
    );
    assert_eq!(validate(pattern_member("((a{500}){0}){3}")), Ok(()));
}

/// Beyond Volcano's tests: of two broken repetitions, the one whose operator ends first is
/// named, as Go parses left to right.
#[test]
fn a_member_pattern_broken_twice_is_refused_for_the_repetition_go_reads_first() {
    assert_eq!(
        pattern_reason("((a{500})(b{30}){40}){3}"),
        "error parsing regexp: invalid repeat count: `{40}`"
    );
    assert_eq!(
        pattern_reason("a{1001}*"),
        "error parsing regexp: invalid repeat count: `{1001}`"
    );
}

/// Beyond Volcano's tests: Go reads the text between `\Q` and `\E` (or the pattern's end) as
/// letters, whatever they are.
#[test]
fn a_member_pattern_quoting_text_with_q_and_e_is_a_pattern_as_in_go() {
    assert_eq!(validate(pattern_member(r"node-\Q(1)[a\E-x")), Ok(()));
    assert_eq!(validate(pattern_member(r"\Qrack{,5}")), Ok(()));
}

/// Beyond Volcano's tests: Go reads a `{` that opens no count (`{,5}`, `{01}`, none closed) as a
/// letter; a count it does open is held to Go's limits as before.
#[test]
fn a_member_pattern_with_a_brace_that_opens_no_count_reads_it_as_a_letter_as_go_does() {
    for pattern in ["a{,5}", "a{", "a{01}", "a{1001", "x{2}{,3}", r"\b{start}"] {
        assert_eq!(validate(pattern_member(pattern)), Ok(()), "{pattern}");
    }
    assert_eq!(
        pattern_reason("a{1,0}"),
        "error parsing regexp: invalid repeat count: `{1,0}`"
    );
}

/// Beyond Volcano's tests: inside a class Go reads `[` (unless it opens a POSIX class), `&&`
/// and `~~` as letters; `--` is a range ending at `-`, refused when it runs backwards.
#[test]
fn a_member_pattern_reads_brackets_and_set_operators_in_a_class_as_letters_as_go_does() {
    for pattern in [
        "[[a]",
        "node-[[:digit:][]+",
        "[a&&b]",
        "[a~~b]",
        "[!--]",
        "[a-]",
    ] {
        assert_eq!(validate(pattern_member(pattern)), Ok(()), "{pattern}");
    }
    assert_eq!(
        pattern_reason("[a--b]"),
        "error parsing regexp: invalid character class range: `a--`"
    );
    assert_eq!(
        pattern_reason("[[:rack:]]"),
        "error parsing regexp: invalid character class range: `[:rack:]`"
    );
}

/// Beyond Volcano's tests: Go takes any name of letters, digits and `_` for a group, the same
/// name twice included, and refuses any other name.
#[test]
fn a_member_pattern_names_its_groups_as_go_allows() {
    for pattern in ["(?P<1st>a)", "(?P<rack>a)(?P<rack>b)", "(?<node>a)"] {
        assert_eq!(validate(pattern_member(pattern)), Ok(()), "{pattern}");
    }
    assert_eq!(
        pattern_reason("(?P<a.b>x)"),
        "error parsing regexp: invalid named capture: `(?P<a.b>`"
    );
}

/// Beyond Volcano's tests: Go knows the flags `i`, `m`, `s` and `U` only, takes an empty set,
/// and refuses a negation that clears nothing.
#[test]
fn a_member_pattern_sets_only_the_flags_go_knows() {
    for pattern in ["(?)a", "(?i-s:a)", "(?U)a+", "(?ii)a"] {
        assert_eq!(validate(pattern_member(pattern)), Ok(()), "{pattern}");
    }
    assert_eq!(
        pattern_reason("(?x)a"),
        "error parsing regexp: invalid or unsupported Perl syntax: `(?x`"
    );
    assert_eq!(
        pattern_reason("(?i-)a"),
        "error parsing regexp: invalid or unsupported Perl syntax: `(?i-)`"
    );
}

/// Beyond Volcano's tests: Go reads `\101` as an octal letter, `\<` as `<` and `\x{D800}` as a
/// code point, and refuses the escapes it does not know (`\u`, a lone `\1`).
#[test]
fn a_member_pattern_escapes_letters_as_go_does() {
    for pattern in [
        r"\101",
        r"\0",
        r"[\<-\>]",
        r"\<node",
        r"\x{D800}",
        r"[\x{D800}-\x{E000}]",
    ] {
        assert_eq!(validate(pattern_member(pattern)), Ok(()), "{pattern}");
    }
    assert_eq!(
        pattern_reason(r"\u0041"),
        r"error parsing regexp: invalid escape sequence: `\u`"
    );
    assert_eq!(
        pattern_reason(r"a\1"),
        r"error parsing regexp: invalid escape sequence: `\1`"
    );
}

/// Beyond Volcano's tests: a group or a class never closed, a `)` never opened and an operator
/// with nothing to repeat are refused in Go's words, naming what Go names.
#[test]
fn a_member_pattern_broken_in_its_structure_is_refused_in_go_s_words() {
    assert_eq!(
        pattern_reason("node-(1"),
        "error parsing regexp: missing closing ): `node-(1`"
    );
    assert_eq!(
        pattern_reason("node-1)"),
        "error parsing regexp: unexpected ): `node-1)`"
    );
    assert_eq!(
        pattern_reason("node-[1"),
        "error parsing regexp: missing closing ]: `[1`"
    );
    assert_eq!(
        pattern_reason("node|{2,3}"),
        "error parsing regexp: missing argument to repetition operator: `{2,3}`"
    );
    assert_eq!(validate(pattern_member("^*node")), Ok(()));
}

/// Beyond Volcano's tests: a Unicode class is looked up by its name, in a class or outside one;
/// one Go cannot find is refused, and a name never closed in Go's words.
#[test]
fn a_member_pattern_naming_an_unknown_unicode_class_is_refused() {
    for pattern in [r"\p{Greek}+", r"[\pL\d-]+", r"[^\P{Han}]"] {
        assert_eq!(validate(pattern_member(pattern)), Ok(()), "{pattern}");
    }
    for pattern in [r"\p{Rack}", r"[\p{Rack}]"] {
        assert!(
            pattern_reason(pattern).contains("Unicode property not found"),
            "{pattern}"
        );
    }
    assert_eq!(
        pattern_reason(r"node-\p{Greek"),
        r"error parsing regexp: invalid character class range: `\p{Greek`"
    );
}

/// The value a refusal quotes, as Go's `%q` writes it: unprintable characters in Go's escapes,
/// combining marks kept.
fn quoted_pattern(pattern: &str) -> String {
    let Err(Refusal::Denied(message)) = validate(pattern_member(pattern)) else {
        panic!("expected a denial of {pattern:?}");
    };
    let value = message
        .strip_prefix("[].spec.members.selector.regexMatch.pattern: Invalid value: ")
        .and_then(|rest| rest.split(": member regexMatch").next())
        .unwrap_or_else(|| panic!("{message}"));
    value.to_owned()
}

#[test]
fn a_refused_pattern_is_quoted_as_go_quotes_it() {
    assert_eq!(quoted_pattern("(\u{1}"), r#""(\x01""#);
    assert_eq!(quoted_pattern("(\u{ad}"), r#""(\u00ad""#);
    assert_eq!(quoted_pattern("(\u{e0001}"), r#""(\U000e0001""#);
    assert_eq!(quoted_pattern("(\t\"\\"), r#""(\t\"\\""#);
    assert_eq!(quoted_pattern("(e\u{301}"), "\"(e\u{301}\"");
}
