//! Properties of the contract that must hold for every input, not only the examples: the reason
//! cleaner's output, the chain as a fold of `apply_changes`, and that no change the chain accepts
//! leaves a reserved or Kubernetes-invalid key or value on the request.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;

use common::{FakeHook, sample_request};
use dexaflow_admission::admission::{
    Chain, ChangeRules, Changes, MAX_REASON_BYTES, Privilege, Request, TaintEffect, Toleration,
    TolerationOperator, Verdict, apply_changes, clean_reason, is_control_or_format,
    is_reserved_key, label_value_problem, qualified_name_problem,
};
use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::FileFailurePersistence;

/// Cases per property. proptest's macro lets `PROPTEST_CASES` override it (to search deeper by
/// hand); `.ci/run` unsets that variable, so CI always runs this many. Seeds stay random, so
/// each run tries new cases.
const CASES: u32 = 256;

/// Each property's config: [`CASES`] cases, and every failing seed kept in the committed
/// regressions file, which proptest replays first on every later run. (Its default place is
/// found from a `lib.rs` beside the test, which an integration test has not.)
fn config() -> ProptestConfig {
    ProptestConfig {
        cases: CASES,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "proptest-regressions/admission_properties.txt",
        ))),
        ..ProptestConfig::default()
    }
}

fn block_on<F: Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a current-thread runtime builds")
        .block_on(future)
}

fn rules() -> ChangeRules {
    ChangeRules {
        service_accounts: Some(BTreeSet::from([
            "etl-runner".to_owned(),
            "batch".to_owned(),
        ])),
        priority_classes: Some(BTreeSet::from([
            "batch-low".to_owned(),
            "batch-high".to_owned(),
        ])),
        default_service_account: "dexaflow-task".to_owned(),
        unit: None,
    }
}

/// Runs `changes` through a chain of operator hooks, the i-th admitting with `changes[i]`.
fn run_chain(changes: &[Changes]) -> (Verdict, Vec<Vec<Request>>) {
    let hooks: Vec<_> = changes
        .iter()
        .enumerate()
        .map(|(i, changes)| FakeHook::changing(&format!("hook-{i}"), changes.clone()).shared())
        .collect();
    let chain = hooks.iter().fold(Chain::new(rules()), |chain, hook| {
        chain.with_hook(hook.clone())
    });
    let verdict = block_on(chain.admit(sample_request()));
    (verdict, hooks.iter().map(|hook| hook.seen()).collect())
}

// Strategies for valid values.

fn valid_name() -> impl Strategy<Value = String> {
    "[a-z0-9]([a-z0-9._-]{0,10}[a-z0-9])?"
}

fn valid_key() -> impl Strategy<Value = String> {
    let prefix = prop_oneof![
        Just(String::new()),
        "[a-z][a-z0-9]{0,6}(\\.[a-z][a-z0-9]{0,6}){0,2}/",
    ];
    (prefix, valid_name())
        .prop_map(|(prefix, name)| format!("{prefix}{name}"))
        .prop_filter("not under a reserved prefix", |key| !is_reserved_key(key))
}

fn valid_value() -> impl Strategy<Value = String> {
    prop_oneof![Just(String::new()), valid_name()]
}

fn valid_toleration() -> impl Strategy<Value = Toleration> {
    let effect = prop_oneof![
        Just(None),
        Just(Some(TaintEffect::NoSchedule)),
        Just(Some(TaintEffect::PreferNoSchedule)),
        Just(Some(TaintEffect::NoExecute)),
    ];
    (
        valid_key(),
        valid_value(),
        any::<bool>(),
        effect,
        0i64..3_600,
    )
        .prop_map(|(key, value, exists, effect, seconds)| Toleration {
            key,
            operator: if exists {
                TolerationOperator::Exists
            } else {
                TolerationOperator::Equal
            },
            value: if exists { String::new() } else { value },
            effect,
            toleration_seconds: (effect == Some(TaintEffect::NoExecute)).then_some(seconds),
        })
}

fn valid_changes() -> impl Strategy<Value = Changes> {
    (
        prop::collection::btree_map(valid_key(), valid_value(), 0..3),
        prop::collection::vec(valid_toleration(), 0..2),
        prop::option::of(select(vec!["batch-low", "batch-high"])),
        prop::option::of(select(vec!["etl-runner", "batch", "dexaflow-task"])),
        prop::collection::btree_map(valid_key(), valid_value(), 0..3),
        prop::collection::btree_map(valid_key(), "\\PC{0,16}", 0..3),
    )
        .prop_map(
            |(node_selector, tolerations, priority_class, service_account, labels, annotations)| {
                Changes {
                    node_selector,
                    tolerations,
                    priority_class: priority_class.map(str::to_owned),
                    service_account: service_account.map(str::to_owned),
                    labels,
                    annotations,
                    runtime_class_name: None,
                    fill_limits: None,
                }
            },
        )
}

// Strategies for hostile values: mostly valid, with reserved, malformed and oversized ones mixed in.

fn hostile_key() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => valid_key(),
        1 => "(leoflow|dexaflow)\\.io/[a-z]{1,5}",
        1 => "[a-z]{1,5}(\\.[a-z]{1,3})?\\.(leoflow|dexaflow)\\.io/[a-z]{1,5}",
        1 => "(LEOFLOW|Dexaflow)\\.(IO|io)/[a-z]{1,3}",
        1 => "[a-zA-Z0-9/._ -]{0,12}",
        1 => "[a-z]{60,70}",
        1 => any::<String>(),
    ]
}

fn hostile_value() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => valid_value(),
        1 => "[a-zA-Z0-9/._ -]{0,12}",
        1 => "[a-z]{60,70}",
        1 => any::<String>(),
    ]
}

fn hostile_changes() -> impl Strategy<Value = Changes> {
    // Valid changes dominate so that chains of several hooks still often get through; see
    // `hostile_strategy_reaches_both_admitted_and_refused_chains`.
    prop_oneof![2 => valid_changes(), 1 => malformed_changes()]
}

fn malformed_changes() -> impl Strategy<Value = Changes> {
    let toleration = (
        hostile_key(),
        hostile_value(),
        any::<bool>(),
        prop::option::of(select(vec![
            TaintEffect::NoSchedule,
            TaintEffect::PreferNoSchedule,
            TaintEffect::NoExecute,
        ])),
        prop::option::of(any::<i64>()),
    )
        .prop_map(
            |(key, value, exists, effect, toleration_seconds)| Toleration {
                key,
                operator: if exists {
                    TolerationOperator::Exists
                } else {
                    TolerationOperator::Equal
                },
                value,
                effect,
                toleration_seconds,
            },
        );
    let name = prop::option::of(prop_oneof![
        select(vec![
            "etl-runner",
            "batch",
            "batch-low",
            "dexaflow-task",
            "cluster-admin"
        ])
        .prop_map(str::to_owned),
        hostile_value(),
    ]);
    (
        prop::collection::btree_map(hostile_key(), hostile_value(), 0..3),
        prop::collection::vec(toleration, 0..2),
        name.clone(),
        name,
        prop::collection::btree_map(hostile_key(), hostile_value(), 0..3),
        prop::collection::btree_map(hostile_key(), any::<String>(), 0..3),
    )
        .prop_map(
            |(node_selector, tolerations, priority_class, service_account, labels, annotations)| {
                Changes {
                    node_selector,
                    tolerations,
                    priority_class,
                    service_account,
                    labels,
                    annotations,
                    runtime_class_name: None,
                    fill_limits: None,
                }
            },
        )
}

fn reason_text() -> impl Strategy<Value = String> {
    // Runs of one character rather than single characters: as varied at the edges that matter
    // (control, format and multi-byte characters around the 512-byte limit), far cheaper to draw.
    let ch = prop_oneof![
        3 => prop::char::range('a', 'z'),
        2 => any::<char>(),
        1 => select(vec!['\u{7}', '\n', '\u{1b}', '\u{7f}', '\u{85}', '\u{200b}', '\u{202e}', '\u{feff}']),
        1 => select(vec!['é', '€', '予', '🙂']),
    ];
    let run = (ch, prop_oneof![3 => Just(1usize), 1 => 1usize..64])
        .prop_map(|(ch, count)| ch.to_string().repeat(count));
    prop::collection::vec(run, 0..64).prop_map(|runs| runs.concat())
}

/// An annotation key as Kubernetes lower-cases it before it validates it: apimachinery's
/// `ValidateAnnotations` checks `IsQualifiedName(strings.ToLower(key))`, the whole key, and Go
/// maps each character to its simple lower case (a dotted capital I to `i`, where Rust's full
/// mapping gives `i` and a combining dot; a Kelvin sign to `k`). Label keys are not lower-cased.
fn lower_case_as_kubernetes(key: &str) -> String {
    key.chars()
        .map(|ch| ch.to_lowercase().next().unwrap_or(ch))
        .collect()
}

/// Checks what Kubernetes would check of the request's metadata, and our reserved prefixes:
/// label and node-selector keys and values as they are, annotation keys once lower-cased
/// ([`lower_case_as_kubernetes`]); no label key, nor annotation key once lower-cased, reserved.
fn assert_metadata_valid(request: &Request) -> Result<(), TestCaseError> {
    let execution = &request.execution;
    for key in execution.labels.keys() {
        prop_assert!(!is_reserved_key(key), "reserved label key {key:?}");
    }
    for key in execution.annotations.keys() {
        let lowered = lower_case_as_kubernetes(key);
        prop_assert!(
            !is_reserved_key(&lowered),
            "reserved annotation key {key:?}"
        );
        prop_assert_eq!(
            qualified_name_problem(&lowered),
            None,
            "annotation key {:?}",
            key
        );
    }
    for (key, value) in execution.labels.iter().chain(&execution.node_selector) {
        prop_assert_eq!(qualified_name_problem(key), None, "key {:?}", key);
        prop_assert_eq!(label_value_problem(value), None, "value {:?}", value);
    }
    Ok(())
}

fn fold(changes: &[Changes]) -> Request {
    let mut request = sample_request();
    for change in changes {
        apply_changes(&mut request, change);
    }
    request
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn cleaned_reason_is_short_free_of_control_and_format_and_taken_from_the_input(
        text in reason_text(),
    ) {
        let cleaned = clean_reason(&text);

        prop_assert!(cleaned.len() <= MAX_REASON_BYTES);
        prop_assert!(!cleaned.chars().any(is_control_or_format));
        let mut input = text.chars();
        prop_assert!(
            cleaned.chars().all(|kept| input.any(|ch| ch == kept)),
            "not a subsequence of the input"
        );
        // Nothing is dropped but control and format characters and the tail past the limit.
        let kept: Vec<char> = text.chars().filter(|&ch| !is_control_or_format(ch)).collect();
        let cleaned_chars: Vec<char> = cleaned.chars().collect();
        prop_assert_eq!(&kept[..cleaned_chars.len()], &cleaned_chars[..]);
        if let Some(next) = kept.get(cleaned_chars.len()) {
            prop_assert!(cleaned.len() + next.len_utf8() > MAX_REASON_BYTES, "cut too early");
        }
        prop_assert_eq!(clean_reason(&cleaned), cleaned.clone(), "cleaning twice changes nothing");
    }

    #[test]
    fn chain_of_admitting_hooks_equals_folding_apply_changes(
        changes in prop::collection::vec(valid_changes(), 0..5),
    ) {
        let (verdict, seen) = run_chain(&changes);

        let Verdict::Admit { request, changes: merged, .. } = verdict else {
            return Err(TestCaseError::fail(format!("valid changes were not admitted: {verdict:?}")));
        };
        prop_assert_eq!(&request, &fold(&changes));
        for (i, seen) in seen.iter().enumerate() {
            prop_assert_eq!(seen, &vec![fold(&changes[..i])], "hook {} saw the earlier changes", i);
        }
        let mut from_merged = sample_request();
        apply_changes(&mut from_merged, &merged);
        prop_assert_eq!(from_merged, request, "the merged changes say what happened");
    }

    #[test]
    fn no_accepted_change_leaves_a_reserved_or_invalid_key_or_value(
        changes in prop::collection::vec(hostile_changes(), 1..5),
    ) {
        let (verdict, seen) = run_chain(&changes);

        // Every request a hook was shown carries only the changes accepted before it.
        for request in seen.iter().flatten() {
            assert_metadata_valid(request)?;
        }
        if let Verdict::Admit { request, .. } = &verdict {
            assert_metadata_valid(request)?;
        }
        // The chain accepts exactly what the rules accept, stopping at the first refusal.
        let rules = rules();
        let mut state = sample_request();
        let mut refused_by = None;
        for (i, change) in changes.iter().enumerate() {
            if rules.check(change, Privilege::Unprivileged, &state).is_err() {
                refused_by = Some(i);
                break;
            }
            apply_changes(&mut state, change);
        }
        match (refused_by, verdict) {
            (None, Verdict::Admit { request, .. }) => prop_assert_eq!(request, state),
            (Some(i), Verdict::Refuse { hook, .. }) => {
                prop_assert_eq!(hook, format!("hook-{i}"));
                prop_assert!(seen[i + 1..].iter().all(Vec::is_empty), "later hooks were called");
            }
            (refused_by, verdict) => {
                return Err(TestCaseError::fail(format!("rules say {refused_by:?}, chain says {verdict:?}")));
            }
        }
    }
}

/// One hook's changes: annotations only.
fn annotating(annotations: &[(&str, &str)]) -> Changes {
    Changes {
        annotations: annotations
            .iter()
            .map(|&(key, value)| (key.to_owned(), value.to_owned()))
            .collect(),
        ..Changes::default()
    }
}

#[test]
fn an_annotation_key_valid_once_lower_cased_is_accepted_and_passes_the_oracle() {
    // The case the property once failed on (proptest-regressions/admission_properties.txt):
    // Kubernetes validates "A/A" as "a/a", so the chain accepts it, and so must the oracle.
    let (verdict, _) = run_chain(&[annotating(&[("A/A", "")])]);

    let Verdict::Admit { request, .. } = verdict else {
        panic!("an upper-case annotation key prefix was refused: {verdict:?}");
    };
    assert_eq!(
        request.execution.annotations.get("A/A"),
        Some(&String::new())
    );
    assert_metadata_valid(&request).expect("the oracle accepts what Kubernetes accepts");
}

#[test]
fn the_oracle_refuses_annotation_keys_kubernetes_refuses_or_folds_into_a_reserved_prefix() {
    // Guards the lower-casing above against making the oracle accept everything.
    for key in [
        "A B/x",
        "Example.com/",
        "DEXAFLOW.IO/pool",
        "dexaflow.\u{130}o/pool",
    ] {
        let mut request = sample_request();
        request
            .execution
            .annotations
            .insert(key.to_owned(), String::new());
        assert!(assert_metadata_valid(&request).is_err(), "{key:?}");
    }
}

#[test]
fn hostile_strategy_reaches_both_admitted_and_refused_chains() {
    // Guards the property above against a generator so hostile that it only ever sees refusals.
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;

    let mut runner = TestRunner::deterministic();
    let strategy = prop::collection::vec(hostile_changes(), 1..5);
    let mut outcomes = BTreeMap::new();
    for _ in 0..CASES {
        let changes = strategy
            .new_tree(&mut runner)
            .expect("the strategy generates")
            .current();
        let (verdict, _) = run_chain(&changes);
        let kind = match verdict {
            Verdict::Admit { changes, .. } if !changes.is_empty() => "admitted with changes",
            Verdict::Admit { .. } => "admitted unchanged",
            _ => "refused",
        };
        *outcomes.entry(kind).or_insert(0) += 1;
    }

    assert!(
        outcomes.get("admitted with changes").copied().unwrap_or(0) >= CASES / 20,
        "{outcomes:?}"
    );
    assert!(
        outcomes.get("refused").copied().unwrap_or(0) >= CASES / 4,
        "{outcomes:?}"
    );
}
