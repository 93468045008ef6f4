//! What a hook may change (ADR 0100 §3, §4, §7): one test per rule, checked with
//! `ChangeRules::check` and `apply_changes` directly and, where the chain adds something (naming
//! the hook, leaving the request as it was), through the `Chain`.

use crate::common;

use std::collections::BTreeSet;

use common::{
    FakeHook, annotation, equal_toleration, label, node_selector, sample_request, toleration,
};
use dexaflow_admission::admission::{
    Chain, ChangeError, ChangeRules, Changes, Field, MAX_ANNOTATIONS_BYTES, Privilege,
    QuantityError, Request, ResourceList, TaintEffect, Toleration, TolerationOperator, Unit,
    Verdict, apply_changes, parse_milli,
};

const OPERATOR: Privilege = Privilege::Unprivileged;
const PRIVILEGED: Privilege = Privilege::Privileged;

fn rules() -> ChangeRules {
    ChangeRules {
        default_service_account: "dexaflow-task".into(),
        ..ChangeRules::default()
    }
}

fn set(names: &[&str]) -> Option<BTreeSet<String>> {
    Some(names.iter().map(|name| (*name).to_owned()).collect())
}

fn check(changes: &Changes) -> Result<(), ChangeError> {
    rules().check(changes, OPERATOR, &sample_request())
}

/// Runs `changes` from one operator hook named "hook" through a chain with `rules`, followed by
/// a hook that must not be reached when the change is refused.
async fn through_chain(rules: ChangeRules, changes: Changes) -> (Verdict, usize) {
    let later = FakeHook::admitting("later").shared();
    let chain = Chain::new(rules)
        .with_hook(FakeHook::changing("hook", changes).shared())
        .with_hook(later.clone());
    let verdict = chain.admit(sample_request()).await;
    (verdict, later.calls())
}

fn fill(cpu: Option<&str>, memory: Option<&str>) -> Changes {
    Changes {
        fill_limits: Some(ResourceList {
            cpu: cpu.map(str::to_owned),
            memory: memory.map(str::to_owned),
            ephemeral_storage: None,
        }),
        ..Changes::default()
    }
}

/// A request of `size` units that asks for 500m CPU and 256Mi memory and sets no limits.
fn sized_request(size: u32) -> Request {
    let mut request = sample_request();
    request.size = size;
    request.resources.requests.cpu = Some("500m".into());
    request.resources.requests.memory = Some("256Mi".into());
    request
}

/// One unit is one CPU and 1Gi of memory.
fn unit_rules() -> ChangeRules {
    ChangeRules {
        unit: Some(Unit {
            cpu_milli: 1_000,
            memory_milli: (1 << 30) * 1_000,
        }),
        ..rules()
    }
}

// Node selector and tolerations.

#[test]
fn node_selector_is_merged_with_the_hooks_keys_winning() {
    let mut request = sample_request();
    request
        .execution
        .node_selector
        .insert("pool".into(), "shared".into());
    let mut changes = node_selector("pool", "gpu");
    changes.node_selector.insert("zone".into(), "b".into());

    apply_changes(&mut request, &changes);

    assert_eq!(request.execution.node_selector["pool"], "gpu");
    assert_eq!(request.execution.node_selector["zone"], "b");
    assert_eq!(
        request.execution.node_selector["disk"], "ssd",
        "keys the hook did not set stay"
    );
    assert_eq!(request.execution.node_selector.len(), 3);
}

#[tokio::test]
async fn node_selector_with_an_invalid_value_is_refused() {
    let changes = node_selector("pool", "gpu pool");

    assert!(matches!(
        check(&changes),
        Err(ChangeError::InvalidValue { field: Field::NodeSelector, ref key, ref value, .. })
            if key == "pool" && value == "gpu pool"
    ));
    let (verdict, later_calls) = through_chain(rules(), changes).await;
    let Verdict::Refuse { hook, reason } = verdict else {
        panic!("expected a refusal, got {verdict:?}")
    };
    assert_eq!(hook, "hook");
    assert!(
        reason.starts_with(r#"hook "hook": node selector "pool" value "gpu pool" is invalid: "#),
        "{reason}"
    );
    assert_eq!(later_calls, 0);
}

#[test]
fn node_selector_with_an_invalid_key_is_refused() {
    assert!(matches!(
        check(&node_selector("pool name", "gpu")),
        Err(ChangeError::InvalidKey {
            field: Field::NodeSelector,
            ..
        })
    ));
}

#[test]
fn tolerations_are_appended_after_the_existing_ones() {
    let mut request = sample_request();
    let existing = equal_toleration("dedicated", "etl");
    request.execution.tolerations.push(existing.clone());
    let added = equal_toleration("pool", "gpu");

    apply_changes(&mut request, &toleration(added.clone()));
    apply_changes(&mut request, &toleration(existing.clone()));

    assert_eq!(
        request.execution.tolerations,
        [existing.clone(), added, existing]
    );
}

#[test]
fn valid_tolerations_pass() {
    let tolerations = [
        equal_toleration("pool", "gpu"),
        equal_toleration("example.com/pool", ""),
        Toleration {
            key: String::new(),
            operator: TolerationOperator::Exists,
            value: String::new(),
            effect: None,
            toleration_seconds: None,
        },
        Toleration {
            key: "node.kubernetes.io/unreachable".into(),
            operator: TolerationOperator::Exists,
            value: String::new(),
            effect: Some(TaintEffect::NoExecute),
            toleration_seconds: Some(300),
        },
    ];

    for added in tolerations {
        assert_eq!(check(&toleration(added.clone())), Ok(()), "{added:?}");
    }
}

#[test]
fn exists_toleration_with_a_value_is_refused() {
    let added = Toleration {
        operator: TolerationOperator::Exists,
        ..equal_toleration("pool", "gpu")
    };

    assert_eq!(
        check(&toleration(added)),
        Err(ChangeError::InvalidToleration {
            index: 0,
            key: "pool".into(),
            problem: "operator Exists takes no value"
        })
    );
}

#[test]
fn toleration_with_an_empty_key_needs_operator_exists() {
    let added = equal_toleration("", "");

    assert_eq!(
        check(&toleration(added)),
        Err(ChangeError::InvalidToleration {
            index: 0,
            key: String::new(),
            problem: "an empty key needs operator Exists"
        })
    );
}

#[test]
fn toleration_seconds_without_effect_no_execute_is_refused() {
    for effect in [
        None,
        Some(TaintEffect::NoSchedule),
        Some(TaintEffect::PreferNoSchedule),
    ] {
        let added = Toleration {
            effect,
            toleration_seconds: Some(60),
            ..equal_toleration("pool", "gpu")
        };

        assert_eq!(
            check(&toleration(added)),
            Err(ChangeError::InvalidToleration {
                index: 0,
                key: "pool".into(),
                problem: "toleration_seconds needs effect NoExecute"
            }),
            "{effect:?}"
        );
    }
}

#[test]
fn toleration_with_an_invalid_key_or_value_is_refused() {
    let bad_key = equal_toleration("pool/gpu/a", "gpu");
    let bad_value = equal_toleration("pool", "gpu pool");

    assert!(matches!(
        check(&toleration(bad_key)),
        Err(ChangeError::InvalidToleration {
            problem: "the key is not a qualified name",
            ..
        })
    ));
    assert!(matches!(
        check(&toleration(bad_value)),
        Err(ChangeError::InvalidToleration {
            problem: "the value is not a valid label value",
            ..
        })
    ));
}

#[test]
fn invalid_toleration_is_named_by_its_position_among_those_appended() {
    let changes = Changes {
        tolerations: vec![equal_toleration("pool", "gpu"), equal_toleration("", "x")],
        ..Changes::default()
    };

    assert!(matches!(
        check(&changes),
        Err(ChangeError::InvalidToleration { index: 1, .. })
    ));
}

// Labels and annotations.

#[test]
fn labels_and_annotations_are_merged_with_the_hooks_keys_winning() {
    let mut request = sample_request();
    request
        .execution
        .annotations
        .insert("note".into(), "old".into());
    let mut changes = label("team", "platform");
    changes.labels.insert("tier".into(), "gold".into());
    changes.annotations.insert("note".into(), "new".into());

    apply_changes(&mut request, &changes);

    assert_eq!(request.execution.labels["team"], "platform");
    assert_eq!(request.execution.labels["tier"], "gold");
    assert_eq!(request.execution.annotations["note"], "new");
    assert_eq!(
        (
            request.execution.labels.len(),
            request.execution.annotations.len()
        ),
        (2, 1)
    );
}

#[test]
fn label_keys_under_a_reserved_prefix_are_refused() {
    for key in [
        "leoflow.io/pool",
        "dexaflow.io/pool",
        "team.dexaflow.io/x",
        "a.b.leoflow.io/x",
    ] {
        assert_eq!(
            check(&label(key, "a")),
            Err(ChangeError::ReservedKey {
                field: Field::Label,
                key: key.into()
            }),
            "{key}"
        );
    }
}

#[test]
fn annotation_keys_under_a_reserved_prefix_are_refused() {
    for key in [
        "leoflow.io/pool",
        "dexaflow.io/pool",
        "team.dexaflow.io/x",
        "a.b.leoflow.io/x",
    ] {
        assert_eq!(
            check(&annotation(key, "anything at all")),
            Err(ChangeError::ReservedKey {
                field: Field::Annotation,
                key: key.into()
            }),
            "{key}"
        );
    }
}

#[test]
fn annotation_keys_are_lower_cased_before_they_are_checked_as_kubernetes_does() {
    assert_eq!(check(&annotation("Example.COM/Owner", "a")), Ok(()));
    assert_eq!(
        check(&annotation("Dexaflow.IO/pool", "a")),
        Err(ChangeError::ReservedKey {
            field: Field::Annotation,
            key: "Dexaflow.IO/pool".into()
        })
    );
    assert!(
        matches!(
            check(&label("Example.COM/Owner", "a")),
            Err(ChangeError::InvalidKey {
                field: Field::Label,
                ..
            })
        ),
        "label keys are not lower-cased"
    );
}

#[test]
fn an_annotation_key_kubernetes_would_fold_into_a_reserved_prefix_is_refused() {
    // Go's lower-casing turns a dotted capital I into "i" and a Kelvin sign into "k".
    for key in ["dexaflow.\u{130}o/pool", "\u{212a}ube.example.com/x"] {
        assert!(
            matches!(
                check(&annotation(key, "a")),
                Err(ChangeError::InvalidKey {
                    field: Field::Annotation,
                    ..
                })
            ),
            "{key:?}"
        );
    }
}

#[test]
fn keys_that_only_resemble_a_reserved_prefix_are_allowed() {
    for key in [
        "example.com/leoflow.io",
        "leoflow.iox/a",
        "notdexaflow.io/a",
        "dexaflow.io",
    ] {
        assert_eq!(check(&label(key, "a")), Ok(()), "label {key}");
        assert_eq!(check(&annotation(key, "a")), Ok(()), "annotation {key}");
    }
}

#[tokio::test]
async fn reserved_label_through_the_chain_refuses_and_leaves_the_request_as_it_was() {
    let original = sample_request();
    let chain = Chain::new(rules())
        .with_hook(FakeHook::changing("placement", label("team.dexaflow.io/x", "a")).shared());
    let mut run = chain.start(original.clone());
    let hook = run.next_hook().expect("one hook");

    let result = hook.admit(run.request()).await;
    run.record(result);

    assert_eq!(run.request(), &original);
    assert_eq!(
        run.finish(),
        Verdict::Refuse {
            hook: "placement".into(),
            reason: r#"hook "placement": label key "team.dexaflow.io/x" is reserved"#.into(),
        }
    );
}

#[test]
fn invalid_label_and_annotation_keys_are_refused() {
    let long_name = "a".repeat(64);
    let keys = [
        "",
        "has space",
        "-starts-with-dash",
        "ends-with-dot.",
        "a/b/c",
        "/no-prefix",
        "prefix/",
        "Example.com/upper-prefix",
        "exa_mple.com/underscore-prefix",
        long_name.as_str(),
    ];
    for key in keys {
        assert!(
            matches!(
                check(&label(key, "a")),
                Err(ChangeError::InvalidKey {
                    field: Field::Label,
                    ..
                })
            ),
            "label {key:?}"
        );
        if key == "Example.com/upper-prefix" {
            // Kubernetes lower-cases an annotation key before it validates it.
            continue;
        }
        assert!(
            matches!(
                check(&annotation(key, "a")),
                Err(ChangeError::InvalidKey {
                    field: Field::Annotation,
                    ..
                })
            ),
            "annotation {key:?}"
        );
    }
}

#[test]
fn label_key_name_part_of_63_characters_is_allowed() {
    let key = format!("example.com/{}", "a".repeat(63));

    assert_eq!(check(&label(&key, "a")), Ok(()));
}

#[test]
fn label_value_over_63_characters_is_refused() {
    let too_long = "v".repeat(64);

    assert!(matches!(
        check(&label("tier", &too_long)),
        Err(ChangeError::InvalidValue { field: Field::Label, ref value, .. }) if *value == too_long
    ));
    assert_eq!(check(&label("tier", &"v".repeat(63))), Ok(()));
}

#[test]
fn label_values_kubernetes_rejects_are_refused_and_empty_is_allowed() {
    for value in ["has space", "-dash", "dot.", "ünïcode", "a/b"] {
        assert!(
            matches!(
                check(&label("tier", value)),
                Err(ChangeError::InvalidValue {
                    field: Field::Label,
                    ..
                })
            ),
            "{value:?}"
        );
    }
    assert_eq!(check(&label("tier", "")), Ok(()));
}

#[test]
fn annotation_values_are_free_text() {
    assert_eq!(
        check(&annotation(
            "example.com/note",
            "any text: spaces, ünïcode, / and \"quotes\""
        )),
        Ok(())
    );
}

#[test]
fn annotations_over_256_kib_together_are_refused() {
    let mut request = sample_request();
    request
        .execution
        .annotations
        .insert("existing".into(), "e".repeat(1_000));
    let key = "example.com/big";
    let value = "x".repeat(MAX_ANNOTATIONS_BYTES - "existing".len() - 1_000 - key.len() + 1);

    let result = rules().check(&annotation(key, &value), OPERATOR, &request);

    assert_eq!(
        result,
        Err(ChangeError::AnnotationsTooLarge {
            bytes: MAX_ANNOTATIONS_BYTES + 1
        })
    );
    assert_eq!(MAX_ANNOTATIONS_BYTES, 256 * 1024);
}

#[test]
fn annotations_of_exactly_256_kib_together_are_accepted() {
    let mut request = sample_request();
    request
        .execution
        .annotations
        .insert("existing".into(), "e".repeat(1_000));
    let key = "example.com/big";
    let value = "x".repeat(MAX_ANNOTATIONS_BYTES - "existing".len() - 1_000 - key.len());

    assert_eq!(
        rules().check(&annotation(key, &value), OPERATOR, &request),
        Ok(())
    );
}

#[test]
fn annotation_the_hook_replaces_counts_only_its_new_value() {
    let mut request = sample_request();
    request.execution.annotations.insert(
        "note".into(),
        "n".repeat(MAX_ANNOTATIONS_BYTES - "note".len()),
    );
    let small = annotation("note", "short");
    let larger = annotation("note", &"n".repeat(MAX_ANNOTATIONS_BYTES));

    assert_eq!(rules().check(&small, OPERATOR, &request), Ok(()));
    assert!(matches!(
        rules().check(&larger, OPERATOR, &request),
        Err(ChangeError::AnnotationsTooLarge { .. })
    ));
}

// Service accounts and priority classes.

#[tokio::test]
async fn service_account_outside_the_allowlist_is_refused_naming_it() {
    let rules = ChangeRules {
        service_accounts: set(&["etl-runner"]),
        ..rules()
    };
    let changes = Changes {
        service_account: Some("cluster-admin".into()),
        ..Changes::default()
    };

    assert_eq!(
        rules.check(&changes, OPERATOR, &sample_request()),
        Err(ChangeError::ServiceAccountNotAllowed {
            name: "cluster-admin".into()
        })
    );
    let (verdict, later_calls) = through_chain(rules, changes).await;
    assert_eq!(
        verdict,
        Verdict::Refuse {
            hook: "hook".into(),
            reason: r#"hook "hook": service account "cluster-admin" is not in execution_allowlist.service_accounts"#.into(),
        }
    );
    assert_eq!(later_calls, 0);
}

#[tokio::test]
async fn service_account_in_the_allowlist_is_set() {
    let rules = ChangeRules {
        service_accounts: set(&["etl-runner"]),
        ..rules()
    };
    let changes = Changes {
        service_account: Some("etl-runner".into()),
        ..Changes::default()
    };

    let (verdict, _) = through_chain(rules, changes).await;

    let Verdict::Admit { request, .. } = verdict else {
        panic!("expected an admit, got {verdict:?}")
    };
    assert_eq!(request.execution.service_account, "etl-runner");
}

#[test]
fn default_task_service_account_is_exempt_from_the_allowlist() {
    let rules = ChangeRules {
        service_accounts: set(&["etl-runner"]),
        ..rules()
    };
    let changes = Changes {
        service_account: Some("dexaflow-task".into()),
        ..Changes::default()
    };

    assert_eq!(rules.check(&changes, OPERATOR, &sample_request()), Ok(()));
}

#[test]
fn any_service_account_is_allowed_when_the_allowlist_is_unset() {
    let changes = Changes {
        service_account: Some("anything-goes".into()),
        ..Changes::default()
    };

    assert_eq!(check(&changes), Ok(()));
}

#[test]
fn empty_service_account_allowlist_allows_only_the_default() {
    let rules = ChangeRules {
        service_accounts: set(&[]),
        ..rules()
    };
    let other = Changes {
        service_account: Some("etl-runner".into()),
        ..Changes::default()
    };
    let default = Changes {
        service_account: Some("dexaflow-task".into()),
        ..Changes::default()
    };

    assert!(matches!(
        rules.check(&other, OPERATOR, &sample_request()),
        Err(ChangeError::ServiceAccountNotAllowed { .. })
    ));
    assert_eq!(rules.check(&default, OPERATOR, &sample_request()), Ok(()));
}

#[test]
fn priority_class_outside_the_allowlist_is_refused_naming_it() {
    let rules = ChangeRules {
        priority_classes: set(&["batch-low", "batch-high"]),
        ..rules()
    };
    let outside = Changes {
        priority_class: Some("system-node-critical".into()),
        ..Changes::default()
    };
    let inside = Changes {
        priority_class: Some("batch-high".into()),
        ..Changes::default()
    };

    let refused = rules.check(&outside, OPERATOR, &sample_request());

    assert_eq!(
        refused,
        Err(ChangeError::PriorityClassNotAllowed {
            name: "system-node-critical".into()
        })
    );
    assert_eq!(
        refused.unwrap_err().to_string(),
        r#"priority class "system-node-critical" is not in execution_allowlist.priority_classes"#
    );
    assert_eq!(rules.check(&inside, OPERATOR, &sample_request()), Ok(()));
}

#[test]
fn any_priority_class_is_allowed_when_the_allowlist_is_unset() {
    let changes = Changes {
        priority_class: Some("system-node-critical".into()),
        ..Changes::default()
    };

    assert_eq!(check(&changes), Ok(()));
}

#[test]
fn invalid_service_account_and_priority_class_names_are_refused() {
    for name in [
        "",
        "Upper",
        "under_score",
        "-dash",
        "dot.",
        &"a".repeat(254),
    ] {
        let service_account = Changes {
            service_account: Some(name.to_owned()),
            ..Changes::default()
        };
        let priority_class = Changes {
            priority_class: Some(name.to_owned()),
            ..Changes::default()
        };

        assert!(
            matches!(
                check(&service_account),
                Err(ChangeError::InvalidName {
                    field: "service account",
                    ..
                })
            ),
            "service account {name:?}"
        );
        assert!(
            matches!(
                check(&priority_class),
                Err(ChangeError::InvalidName {
                    field: "priority class",
                    ..
                })
            ),
            "priority class {name:?}"
        );
    }
}

#[test]
fn invalid_service_account_name_is_refused_even_when_allowlisted() {
    let rules = ChangeRules {
        service_accounts: set(&["Bad_Name"]),
        ..rules()
    };
    let changes = Changes {
        service_account: Some("Bad_Name".into()),
        ..Changes::default()
    };

    assert!(matches!(
        rules.check(&changes, OPERATOR, &sample_request()),
        Err(ChangeError::InvalidName { .. })
    ));
}

// Fields only privileged hooks may set.

#[tokio::test]
async fn operator_hook_setting_runtime_class_name_is_refused() {
    let changes = Changes {
        runtime_class_name: Some("gvisor".into()),
        ..Changes::default()
    };

    assert_eq!(
        check(&changes),
        Err(ChangeError::NotPrivileged {
            field: "runtime_class_name"
        })
    );
    let (verdict, later_calls) = through_chain(rules(), changes).await;
    assert_eq!(
        verdict,
        Verdict::Refuse {
            hook: "hook".into(),
            reason: r#"hook "hook": runtime_class_name may only be set by a privileged hook"#
                .into(),
        }
    );
    assert_eq!(later_calls, 0);
}

#[test]
fn privileged_hook_may_set_runtime_class_name() {
    let changes = Changes {
        runtime_class_name: Some("gvisor".into()),
        ..Changes::default()
    };
    let mut request = sample_request();

    let checked = rules().check(&changes, PRIVILEGED, &request);
    apply_changes(&mut request, &changes);

    assert_eq!(checked, Ok(()));
    assert_eq!(request.execution.runtime_class_name, "gvisor");
}

#[test]
fn privileged_hook_setting_an_invalid_runtime_class_name_is_refused() {
    let changes = Changes {
        runtime_class_name: Some("G Visor".into()),
        ..Changes::default()
    };

    assert!(matches!(
        rules().check(&changes, PRIVILEGED, &sample_request()),
        Err(ChangeError::InvalidName {
            field: "runtime class",
            ..
        })
    ));
}

#[test]
fn operator_hook_filling_limits_is_refused() {
    assert_eq!(
        check(&fill(Some("1"), None)),
        Err(ChangeError::NotPrivileged {
            field: "fill_limits"
        })
    );
}

#[test]
fn privileged_hook_fills_only_the_limits_that_are_empty() {
    let mut original = sized_request(2);
    original.resources.limits.cpu = Some("1500m".into());
    let changes = fill(Some("2"), Some("1Gi"));
    let mut request = original.clone();

    let checked = unit_rules().check(&changes, PRIVILEGED, &request);
    apply_changes(&mut request, &changes);

    assert_eq!(checked, Ok(()));
    assert_eq!(
        request.resources.limits.cpu.as_deref(),
        Some("1500m"),
        "a set limit is kept"
    );
    assert_eq!(request.resources.limits.memory.as_deref(), Some("1Gi"));
    assert_eq!(request.resources.limits.ephemeral_storage, None);
    assert_eq!(
        request.resources.requests, original.resources.requests,
        "requests are never changed"
    );
}

#[test]
fn filled_limit_below_the_request_is_refused() {
    let refused = unit_rules().check(&fill(Some("250m"), None), PRIVILEGED, &sized_request(1));

    assert_eq!(
        refused,
        Err(ChangeError::InvalidFill {
            resource: "cpu",
            quantity: "250m".into(),
            problem: "below the request".into()
        })
    );
    assert_eq!(
        unit_rules().check(&fill(Some("500m"), None), PRIVILEGED, &sized_request(1)),
        Ok(()),
        "a limit equal to the request is fine"
    );
}

#[test]
fn filled_limit_above_size_times_unit_is_refused() {
    let request = sized_request(2);

    assert!(matches!(
        unit_rules().check(&fill(Some("2001m"), None), PRIVILEGED, &request),
        Err(ChangeError::InvalidFill { resource: "cpu", ref problem, .. })
            if problem == "above what the attempt's size allows"
    ));
    assert!(matches!(
        unit_rules().check(&fill(None, Some("2049Mi")), PRIVILEGED, &request),
        Err(ChangeError::InvalidFill {
            resource: "memory",
            ..
        })
    ));
    assert_eq!(
        unit_rules().check(&fill(Some("2"), Some("2Gi")), PRIVILEGED, &request),
        Ok(()),
        "exactly size × unit is allowed"
    );
}

#[test]
fn filled_limits_have_no_ceiling_without_a_unit() {
    assert_eq!(
        rules().check(
            &fill(Some("64"), Some("1Ti")),
            PRIVILEGED,
            &sized_request(1)
        ),
        Ok(())
    );
}

#[test]
fn filled_limit_that_is_no_quantity_is_refused() {
    assert!(matches!(
        unit_rules().check(&fill(None, Some("lots")), PRIVILEGED, &sized_request(1)),
        Err(ChangeError::InvalidFill { resource: "memory", ref quantity, .. }) if quantity == "lots"
    ));
}

// apply_changes.

#[test]
fn apply_changes_replaces_priority_class_and_service_account_only_when_set() {
    let mut request = sample_request();
    request.execution.priority_class = "batch-low".into();
    let before = request.clone();

    apply_changes(&mut request, &node_selector("pool", "gpu"));
    assert_eq!(request.execution.priority_class, "batch-low");
    assert_eq!(
        request.execution.service_account,
        before.execution.service_account
    );

    apply_changes(
        &mut request,
        &Changes {
            priority_class: Some("batch-high".into()),
            service_account: Some("etl-runner".into()),
            ..Changes::default()
        },
    );
    assert_eq!(request.execution.priority_class, "batch-high");
    assert_eq!(request.execution.service_account, "etl-runner");
}

#[test]
fn apply_changes_never_touches_what_a_hook_may_not_change() {
    let mut request = sized_request(2);
    request.execution.service_account_chosen = true;
    let before = request.clone();
    let changes = Changes {
        node_selector: node_selector("pool", "gpu").node_selector,
        tolerations: vec![equal_toleration("pool", "gpu")],
        priority_class: Some("batch-high".into()),
        service_account: Some("etl-runner".into()),
        labels: label("tier", "gold").labels,
        annotations: annotation("example.com/note", "n").annotations,
        runtime_class_name: None,
        fill_limits: None,
    };

    apply_changes(&mut request, &changes);

    // Everything outside the fields a hook may change is as it was.
    let mut expected = before.clone();
    let changed = &request.execution;
    expected.execution.node_selector = changed.node_selector.clone();
    expected.execution.tolerations = changed.tolerations.clone();
    expected.execution.priority_class = changed.priority_class.clone();
    expected.execution.service_account = changed.service_account.clone();
    expected.execution.labels = changed.labels.clone();
    expected.execution.annotations = changed.annotations.clone();
    assert_eq!(request, expected);
    assert_ne!(request, before);
}

#[test]
fn empty_changes_change_nothing() {
    let mut request = sample_request();
    let before = request.clone();

    apply_changes(&mut request, &Changes::default());

    assert!(Changes::default().is_empty());
    assert!(!label("a", "b").is_empty());
    assert_eq!(request, before);
}

#[test]
fn changes_setting_any_one_field_are_not_empty() {
    let set = |value: &str| Some(value.to_owned());
    let each_field = [
        Changes {
            node_selector: [("pool".into(), "gpu".into())].into(),
            ..Changes::default()
        },
        Changes {
            tolerations: vec![equal_toleration("pool", "gpu")],
            ..Changes::default()
        },
        Changes {
            priority_class: set(""),
            ..Changes::default()
        },
        Changes {
            service_account: set("runner"),
            ..Changes::default()
        },
        label("a", "b"),
        Changes {
            annotations: [("a".into(), "b".into())].into(),
            ..Changes::default()
        },
        Changes {
            runtime_class_name: set("gvisor"),
            ..Changes::default()
        },
        fill(None, None),
    ];

    for changes in each_field {
        assert!(!changes.is_empty(), "{changes:?}");
        assert_ne!(changes, Changes::default());
    }
}

#[test]
fn only_runtime_class_name_and_fill_limits_need_privilege() {
    assert!(
        Changes {
            runtime_class_name: Some("gvisor".into()),
            ..Changes::default()
        }
        .has_privileged_field()
    );
    assert!(fill(Some("1"), None).has_privileged_field());
    let everything_else = Changes {
        node_selector: node_selector("pool", "gpu").node_selector,
        tolerations: vec![equal_toleration("pool", "gpu")],
        priority_class: Some("batch-high".into()),
        service_account: Some("etl-runner".into()),
        labels: label("tier", "gold").labels,
        annotations: annotation("example.com/note", "n").annotations,
        ..Changes::default()
    };
    assert!(!everything_else.has_privileged_field());
}

#[test]
fn merged_fill_limits_keep_the_first_fill_of_each_resource() {
    let mut merged = fill(Some("1"), None);
    merged.merge(fill(Some("2"), Some("1Gi")));

    assert_eq!(merged, fill(Some("1"), Some("1Gi")));
}

// Quantities.

#[test]
fn quantities_parse_to_thousandths() {
    let cases = [
        ("500m", 500),
        ("2", 2_000),
        ("1.5", 1_500),
        ("0.1m", 1),
        ("+3", 3_000),
        ("1k", 1_000_000),
        ("1Ki", 1_024_000),
        ("512Mi", 512 * (1 << 20) * 1_000),
        ("1G", 1_000_000_000_000),
        ("1e3", 1_000_000),
        ("1E-3", 1),
    ];

    for (quantity, milli) in cases {
        assert_eq!(parse_milli(quantity), Ok(milli), "{quantity}");
    }
}

#[test]
fn text_that_is_no_quantity_is_an_error_naming_it() {
    for text in [
        "", "m", "-1", "1.2.3", "1x", "1 Gi", "1KiB", "Gi", "1e", "ten", " 1", "500m ", "\t2Gi",
    ] {
        assert_eq!(
            parse_milli(text),
            Err(QuantityError {
                quantity: text.into()
            }),
            "{text:?}"
        );
    }
    assert_eq!(
        parse_milli("lots").unwrap_err().to_string(),
        r#""lots" is not a Kubernetes quantity such as "500m", "2" or "512Mi""#
    );
}

#[test]
fn quantity_too_large_to_count_is_an_error_not_a_panic() {
    for text in [
        "1e2147483647",
        "1.5e2147483647",
        "99999999999999999999999999999999999999999",
        "1e40",
        "1e-2147483648",
        "0.00001e-2147483648",
    ] {
        assert!(parse_milli(text).is_err(), "{text}");
    }
}

/// Kubernetes: ParseQuantity reads any number of digits (past 18, as an arbitrary-precision
/// decimal) and rounds up: 39 fraction digits and more are a quantity
#[test]
fn a_quantity_with_many_fraction_digits_is_read_and_rounded_up() {
    let ones = format!("1.{}1", "0".repeat(38));
    assert_eq!(parse_milli(&ones), Ok(1_001));
    let long = format!("2.{}", "0".repeat(5000));
    assert_eq!(parse_milli(&long), Ok(2_000));
    let binary = format!("1.{}1Ki", "0".repeat(60));
    assert_eq!(parse_milli(&binary), Ok(1_024_001));
}

/// Kubernetes: ParseQuantity reads an exponent in 64 bits and keeps its low 32 bits
/// (`int32(parsed)`), so `e4294967296` is `e0`
#[test]
fn an_exponent_past_32_bits_keeps_its_low_32_bits() {
    assert_eq!(parse_milli("1e4294967296"), Ok(1_000));
}
