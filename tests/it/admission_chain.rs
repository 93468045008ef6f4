//! The hook chain (ADR 0100 §5, §6): order, what each hook sees, who decides, and how each call
//! is counted.

use crate::common;

use std::time::Duration;

use common::{FakeHook, call_log, label, logged, node_selector, sample_request};
use dexaflow_admission::admission::{
    Chain, ChangeRules, Changes, Decision, HookError, Outcome, Privilege, Recorded, Request,
    Verdict, apply_changes,
};

fn chain() -> Chain {
    Chain::new(ChangeRules::default())
}

/// Drives the chain by hand, as the supervised dispatcher does, keeping what each call recorded.
async fn drive(chain: &Chain, request: Request) -> (Vec<Recorded>, Verdict) {
    let mut run = chain.start(request);
    let mut recorded = Vec::new();
    while let Some(hook) = run.next_hook() {
        let result = hook.admit(run.request()).await;
        recorded.push(run.record(result));
    }
    (recorded, run.finish())
}

#[tokio::test]
async fn hooks_are_called_in_registration_order() {
    let log = call_log();
    let first = FakeHook::admitting("first").logging_to(&log).shared();
    let second = FakeHook::admitting("second").logging_to(&log).shared();
    let third = FakeHook::admitting("third").logging_to(&log).shared();
    let chain = chain()
        .with_hook(second.clone())
        .with_hook(first.clone())
        .with_hook(third.clone());

    chain.admit(sample_request()).await;

    assert_eq!(logged(&log), ["second", "first", "third"]);
    assert_eq!(
        chain
            .hooks()
            .iter()
            .map(|hook| hook.name())
            .collect::<Vec<_>>(),
        ["second", "first", "third"]
    );
    assert_eq!((first.calls(), second.calls(), third.calls()), (1, 1, 1));
}

#[tokio::test]
async fn each_hook_sees_the_request_with_the_earlier_changes_applied() {
    let original = sample_request();
    let first = FakeHook::changing("first", node_selector("pool", "a")).shared();
    let second = FakeHook::changing("second", node_selector("pool", "b")).shared();
    let third = FakeHook::admitting("third").shared();
    let chain = chain()
        .with_hook(first.clone())
        .with_hook(second.clone())
        .with_hook(third.clone());

    chain.admit(original.clone()).await;

    assert_eq!(first.seen(), std::slice::from_ref(&original));
    let mut after_first = original.clone();
    after_first
        .execution
        .node_selector
        .insert("pool".into(), "a".into());
    assert_eq!(second.seen(), [after_first]);
    let mut after_second = original;
    after_second
        .execution
        .node_selector
        .insert("pool".into(), "b".into());
    assert_eq!(third.seen(), [after_second]);
}

#[tokio::test]
async fn every_hook_admitting_unchanged_admits_the_request_as_offered() {
    let original = sample_request();
    let chain = chain()
        .with_hook(FakeHook::admitting("a").shared())
        .with_hook(FakeHook::admitting("b").shared());

    let verdict = chain.admit(original.clone()).await;

    assert_eq!(
        verdict,
        Verdict::Admit {
            request: original,
            changes: Changes::default(),
            changed_by: Vec::new(),
        }
    );
}

#[tokio::test]
async fn admit_names_the_hooks_whose_changes_it_carries_in_chain_order() {
    let chain = chain()
        .with_hook(FakeHook::changing("first", node_selector("pool", "a")).shared())
        .with_hook(FakeHook::admitting("quiet").shared())
        .with_hook(FakeHook::changing("empty", Changes::default()).shared())
        .with_hook(FakeHook::changing("second", node_selector("pool", "b")).shared());

    let verdict = chain.admit(sample_request()).await;

    let Verdict::Admit { changed_by, .. } = verdict else {
        panic!("expected an admit, got {verdict:?}")
    };
    assert_eq!(
        changed_by,
        ["first", "second"],
        "not the hooks that changed nothing"
    );
}

#[tokio::test]
async fn admit_carries_the_request_and_every_hooks_changes_merged_in_order() {
    let original = sample_request();
    let mut first_changes = node_selector("pool", "a");
    first_changes.labels.insert("tier".into(), "gold".into());
    let mut second_changes = node_selector("pool", "b");
    second_changes.priority_class = Some("high".into());
    let chain = chain()
        .with_hook(FakeHook::changing("first", first_changes.clone()).shared())
        .with_hook(FakeHook::admitting("quiet").shared())
        .with_hook(FakeHook::changing("second", second_changes.clone()).shared());

    let verdict = chain.admit(original.clone()).await;

    let Verdict::Admit {
        request, changes, ..
    } = verdict
    else {
        panic!("expected an admit, got {verdict:?}")
    };
    let mut merged = first_changes.clone();
    merged.merge(second_changes.clone());
    assert_eq!(changes, merged);
    assert_eq!(
        changes.node_selector["pool"], "b",
        "the later hook's key wins"
    );
    let mut expected = original;
    apply_changes(&mut expected, &first_changes);
    apply_changes(&mut expected, &second_changes);
    assert_eq!(request, expected);
    assert_eq!(request.execution.labels["tier"], "gold");
    assert_eq!(request.execution.priority_class, "high");
}

#[tokio::test]
async fn first_refusal_stops_the_chain_and_later_hooks_are_never_called() {
    let first = FakeHook::changing("first", label("tier", "gold")).shared();
    let refuser = FakeHook::refusing("budget", "tenant acme is over budget").shared();
    let second_refuser = FakeHook::refusing("freeze", "frozen").shared();
    let later = FakeHook::admitting("later").shared();
    let chain = chain()
        .with_hook(first.clone())
        .with_hook(refuser.clone())
        .with_hook(second_refuser.clone())
        .with_hook(later.clone());

    let verdict = chain.admit(sample_request()).await;

    assert_eq!(
        verdict,
        Verdict::Refuse {
            hook: "budget".into(),
            reason: "tenant acme is over budget".into()
        }
    );
    assert_eq!((first.calls(), refuser.calls()), (1, 1));
    assert_eq!((second_refuser.calls(), later.calls()), (0, 0));
}

#[tokio::test]
async fn hold_stops_the_chain_naming_the_holding_hook() {
    let holder = FakeHook::holding("freeze", "frozen until 18:00").shared();
    let later = FakeHook::refusing("later", "never asked").shared();
    let chain = chain()
        .with_hook(FakeHook::admitting("first").shared())
        .with_hook(holder.clone())
        .with_hook(later.clone());

    let verdict = chain.admit(sample_request()).await;

    assert_eq!(
        verdict,
        Verdict::Hold {
            hook: "freeze".into(),
            reason: "frozen until 18:00".into()
        }
    );
    assert_eq!(holder.calls(), 1);
    assert_eq!(later.calls(), 0);
}

#[tokio::test]
async fn hook_error_makes_the_attempt_unavailable_naming_the_hook() {
    let error = HookError::Failed("budget service: connection refused".into());
    let later = FakeHook::admitting("later").shared();
    let chain = chain()
        .with_hook(FakeHook::changing("first", label("tier", "gold")).shared())
        .with_hook(FakeHook::failing("budget", error.clone()).shared())
        .with_hook(later.clone());

    let verdict = chain.admit(sample_request()).await;

    assert_eq!(
        verdict,
        Verdict::Unavailable {
            hook: "budget".into(),
            error
        }
    );
    assert_eq!(
        verdict.unavailable_cause().as_deref(),
        Some("budget service: connection refused")
    );
    assert_eq!(later.calls(), 0);
}

#[tokio::test]
async fn budget_cut_makes_the_attempt_unavailable_naming_the_hook_and_the_spent_budget() {
    let chain = chain()
        .with_hook(FakeHook::admitting("first").shared())
        .with_hook(
            FakeHook::failing("second", HookError::BudgetSpent(Duration::from_millis(200)))
                .shared(),
        );

    let verdict = chain.admit(sample_request()).await;

    assert_eq!(
        verdict,
        Verdict::Unavailable {
            hook: "second".into(),
            error: HookError::BudgetSpent(Duration::from_millis(200))
        }
    );
    assert_eq!(
        verdict.unavailable_cause().as_deref(),
        Some("cut after 200ms: the chain budget was spent")
    );
}

#[test]
fn hook_left_without_budget_is_reported_as_not_called() {
    let verdict = Verdict::Unavailable {
        hook: "third".into(),
        error: HookError::BudgetSpent(Duration::ZERO),
    };

    assert_eq!(
        verdict.unavailable_cause().as_deref(),
        Some("not called: the chain budget was spent")
    );
}

#[test]
fn every_hook_registered_through_with_hook_is_unprivileged() {
    let chain = chain()
        .with_hook(FakeHook::admitting("a").shared())
        .with_hook(FakeHook::admitting("b").shared());

    assert_eq!(
        [0, 1, 2].map(|position| chain.privilege(position)),
        [
            Some(Privilege::Unprivileged),
            Some(Privilege::Unprivileged),
            None
        ]
    );
}

#[test]
fn unavailable_cause_is_none_for_every_other_verdict() {
    let verdicts = [
        Verdict::Admit {
            request: sample_request(),
            changes: Changes::default(),
            changed_by: Vec::new(),
        },
        Verdict::Refuse {
            hook: "a".into(),
            reason: "no".into(),
        },
        Verdict::Hold {
            hook: "a".into(),
            reason: "wait".into(),
        },
    ];

    for verdict in verdicts {
        assert_eq!(verdict.unavailable_cause(), None, "{verdict:?}");
    }
}

#[tokio::test]
async fn fail_open_passes_over_a_broken_hook_and_later_hooks_are_still_called() {
    let original = sample_request();
    let broken = FakeHook::failing("broken", HookError::Failed("down".into())).shared();
    let after = FakeHook::changing("after", node_selector("pool", "b")).shared();
    let chain = chain()
        .with_fail_open(true)
        .with_hook(FakeHook::changing("before", label("tier", "gold")).shared())
        .with_hook(broken.clone())
        .with_hook(after.clone());

    let (recorded, verdict) = drive(&chain, original.clone()).await;

    assert_eq!(
        recorded,
        [
            Recorded {
                outcome: Outcome::AdmitWith,
                failed_open: false
            },
            Recorded {
                outcome: Outcome::Error,
                failed_open: true
            },
            Recorded {
                outcome: Outcome::AdmitWith,
                failed_open: false
            },
        ]
    );
    assert_eq!(
        after.seen(),
        broken.seen(),
        "the broken hook changed nothing"
    );
    let mut expected = original;
    expected
        .execution
        .labels
        .insert("tier".into(), "gold".into());
    expected
        .execution
        .node_selector
        .insert("pool".into(), "b".into());
    let Verdict::Admit { request, .. } = verdict else {
        panic!("expected an admit, got {verdict:?}")
    };
    assert_eq!(request, expected);
}

#[tokio::test]
async fn fail_open_passes_over_every_kind_of_broken_hook() {
    let breakages = [
        HookError::Failed("down".into()),
        HookError::Elapsed(Duration::from_millis(500)),
        HookError::Panicked("index out of bounds".into()),
        HookError::Skipped,
        HookError::BudgetSpent(Duration::from_millis(200)),
    ];
    for error in breakages {
        let original = sample_request();
        let after = FakeHook::admitting("after").shared();
        let chain = chain()
            .with_fail_open(true)
            .with_hook(FakeHook::failing("broken", error.clone()).shared())
            .with_hook(after.clone());

        let verdict = chain.admit(original.clone()).await;

        assert_eq!(
            verdict,
            Verdict::Admit {
                request: original.clone(),
                changes: Changes::default(),
                changed_by: Vec::new(),
            },
            "{error:?}"
        );
        assert_eq!(
            after.seen(),
            [original],
            "{error:?}: the later hook saw the request unchanged"
        );
    }
}

#[tokio::test]
async fn hold_is_never_failed_open() {
    let later = FakeHook::admitting("later").shared();
    let chain = chain()
        .with_fail_open(true)
        .with_hook(FakeHook::holding("freeze", "frozen").shared())
        .with_hook(later.clone());

    let (recorded, verdict) = drive(&chain, sample_request()).await;

    assert_eq!(
        recorded,
        [Recorded {
            outcome: Outcome::Hold,
            failed_open: false
        }]
    );
    assert_eq!(
        verdict,
        Verdict::Hold {
            hook: "freeze".into(),
            reason: "frozen".into()
        }
    );
    assert_eq!(later.calls(), 0);
}

#[tokio::test]
async fn refusal_and_invalid_change_are_never_failed_open() {
    for (answer, outcome) in [
        (Decision::Refuse("no".into()), Outcome::Refuse),
        (
            Decision::AdmitWith(Box::new(label("dexaflow.io/pool", "a"))),
            Outcome::InvalidChange,
        ),
    ] {
        let later = FakeHook::admitting("later").shared();
        let chain = chain()
            .with_fail_open(true)
            .with_hook(FakeHook::answering("strict", Ok(answer.clone())).shared())
            .with_hook(later.clone());

        let (recorded, verdict) = drive(&chain, sample_request()).await;

        assert_eq!(
            recorded,
            [Recorded {
                outcome,
                failed_open: false
            }],
            "{answer:?}"
        );
        assert!(
            matches!(verdict, Verdict::Refuse { .. }),
            "{answer:?}: {verdict:?}"
        );
        assert_eq!(later.calls(), 0, "{answer:?}");
    }
}

#[tokio::test]
async fn chain_without_hooks_is_empty_and_admits_unchanged() {
    let empty = chain();
    let original = sample_request();

    assert!(empty.is_empty());
    assert!(empty.start(original.clone()).next_hook().is_none());
    assert_eq!(
        empty.admit(original.clone()).await,
        Verdict::Admit {
            request: original,
            changes: Changes::default(),
            changed_by: Vec::new(),
        }
    );
    assert!(
        !chain()
            .with_hook(FakeHook::admitting("a").shared())
            .is_empty()
    );
}

#[tokio::test]
async fn invalid_change_refuses_naming_the_hook_and_is_not_applied() {
    let original = sample_request();
    let later = FakeHook::admitting("later").shared();
    let chain = chain()
        .with_hook(FakeHook::changing("placement", label("dexaflow.io/pool", "gpu")).shared())
        .with_hook(later.clone());
    let mut run = chain.start(original.clone());

    let placement = run.next_hook().expect("the chain has a first hook");
    let result = placement.admit(run.request()).await;
    let recorded = run.record(result);

    assert_eq!(
        recorded,
        Recorded {
            outcome: Outcome::InvalidChange,
            failed_open: false
        }
    );
    assert_eq!(
        run.request(),
        &original,
        "the refused change was not applied"
    );
    assert!(run.next_hook().is_none());
    let expected = Verdict::Refuse {
        hook: "placement".into(),
        reason: r#"hook "placement": label key "dexaflow.io/pool" is reserved"#.into(),
    };
    assert_eq!(run.finish(), expected);
    assert_eq!(chain.admit(original).await, expected);
    assert_eq!(later.calls(), 0);
}

#[test]
fn each_result_is_recorded_with_its_outcome() {
    let cases = [
        (Ok(Decision::Admit), Outcome::Admit, "admit"),
        (
            Ok(Decision::AdmitWith(Box::new(label("tier", "gold")))),
            Outcome::AdmitWith,
            "admit_with",
        ),
        (Ok(Decision::Hold("wait".into())), Outcome::Hold, "hold"),
        (Ok(Decision::Refuse("no".into())), Outcome::Refuse, "refuse"),
        (
            Ok(Decision::AdmitWith(Box::new(label("leoflow.io/x", "a")))),
            Outcome::InvalidChange,
            "invalid_change",
        ),
        (
            Err(HookError::Failed("down".into())),
            Outcome::Error,
            "error",
        ),
        (
            Err(HookError::Elapsed(Duration::from_millis(500))),
            Outcome::Timeout,
            "timeout",
        ),
        (
            Err(HookError::Panicked("boom".into())),
            Outcome::Panic,
            "panic",
        ),
        (Err(HookError::Skipped), Outcome::Skipped, "skipped"),
        (
            Err(HookError::BudgetSpent(Duration::from_millis(200))),
            Outcome::BudgetSpent,
            "budget_spent",
        ),
    ];
    for (result, outcome, label) in cases {
        let chain = chain().with_hook(FakeHook::admitting("hook").shared());
        let mut run = chain.start(sample_request());

        let recorded = run.record(result.clone());

        assert_eq!(
            recorded,
            Recorded {
                outcome,
                failed_open: false
            },
            "{result:?}"
        );
        assert_eq!(recorded.outcome.as_str(), label);
    }
}

#[test]
fn position_advances_with_each_recorded_call() {
    let chain = chain()
        .with_hook(FakeHook::admitting("a").shared())
        .with_hook(FakeHook::admitting("b").shared());
    let mut run = chain.start(sample_request());

    assert_eq!(run.position(), 0);
    run.record(Ok(Decision::Admit));
    assert_eq!(run.position(), 1);
    assert_eq!(run.next_hook().map(|hook| hook.name()), Some("b"));
    run.record(Ok(Decision::Admit));
    assert_eq!(run.position(), 2);
    assert!(run.next_hook().is_none());
}

#[test]
#[should_panic(expected = "record follows next_hook")]
fn recording_after_the_chain_decided_panics() {
    let chain = chain()
        .with_hook(FakeHook::admitting("a").shared())
        .with_hook(FakeHook::admitting("b").shared());
    let mut run = chain.start(sample_request());
    run.record(Ok(Decision::Refuse("no".into())));

    run.record(Ok(Decision::Admit));
}
