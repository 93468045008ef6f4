//! The built-in hooks declared in config: placement, freeze and deny, and the shared matcher.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use dexaflow_admission::admission::{
    Chain, ChangeRules, Changes, Decision, Hook, Privilege, Request, TaintEffect, Toleration,
    TolerationOperator, Verdict,
};
use dexaflow_admission::hooks::{
    Clock, Deny, Freeze, FreezeSpec, HookSpec, Matcher, Placement, PlacementSpec, SpecError,
    Window, build, build_with_clock,
};

fn spec(yaml: &str) -> HookSpec {
    serde_yaml_ng::from_str(yaml).expect("test spec parses")
}

fn placement(yaml: &str) -> Placement {
    match spec(yaml) {
        HookSpec::Placement(spec) => Placement::new(&spec),
        other => panic!("not a placement: {other:?}"),
    }
}

fn deny(yaml: &str) -> Deny {
    match spec(yaml) {
        HookSpec::Deny(spec) => Deny::new(&spec),
        other => panic!("not a deny: {other:?}"),
    }
}

fn freeze_spec(yaml: &str) -> FreezeSpec {
    match spec(yaml) {
        HookSpec::Freeze(spec) => spec,
        other => panic!("not a freeze: {other:?}"),
    }
}

async fn ask(hook: &dyn Hook, request: &Request) -> Decision {
    hook.admit(request)
        .await
        .expect("built-in hooks never fail")
}

fn changes_of(decision: Decision) -> Changes {
    match decision {
        Decision::AdmitWith(changes) => *changes,
        other => panic!("expected AdmitWith, got {other:?}"),
    }
}

/// A wall clock the test sets by hand.
#[derive(Debug)]
struct ManualClock(Mutex<SystemTime>);

impl ManualClock {
    fn at(rfc3339: &str) -> Arc<ManualClock> {
        Arc::new(ManualClock(Mutex::new(
            humantime::parse_rfc3339(rfc3339).expect("timestamp"),
        )))
    }

    fn set(&self, rfc3339: &str) {
        *self.0.lock().expect("clock lock") = humantime::parse_rfc3339(rfc3339).expect("timestamp");
    }
}

impl Clock for ManualClock {
    fn now(&self) -> SystemTime {
        *self.0.lock().expect("clock lock")
    }
}

const GPU_PLACEMENT: &str = "
type: placement
name: gpu-placement
groups:
  - match: {tenants: [gpu-lab]}
    set:
      node_selector: {pool: gpu}
      tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
      labels: {team: gpu-lab}
      priority_class: high-priority
";

// Placement

#[tokio::test]
async fn placement_sets_every_field_of_the_matching_group() {
    let hook = placement(GPU_PLACEMENT);

    let changes = changes_of(ask(&hook, &Request::new("gpu-lab", "train", "fit")).await);

    assert_eq!(changes.node_selector["pool"], "gpu");
    assert_eq!(
        changes.tolerations,
        vec![Toleration {
            key: "nvidia.com/gpu".into(),
            operator: TolerationOperator::Exists,
            value: String::new(),
            effect: Some(TaintEffect::NoSchedule),
            toleration_seconds: None,
        }]
    );
    assert_eq!(changes.labels["team"], "gpu-lab");
    assert_eq!(changes.priority_class.as_deref(), Some("high-priority"));
    assert_eq!(changes.service_account, None);
}

#[tokio::test]
async fn placement_for_one_tenant_does_not_change_another_tenants_request() {
    let hook = placement(GPU_PLACEMENT);

    assert_eq!(
        ask(&hook, &Request::new("acme", "train", "fit")).await,
        Decision::Admit
    );
}

#[tokio::test]
async fn first_matching_group_wins_and_later_groups_fields_are_absent() {
    let hook = placement(
        "
type: placement
name: pools
groups:
  - match: {tenants: [gpu-lab], dag_ids: [train]}
    set: {node_selector: {pool: a100}}
  - match: {tenants: [gpu-lab]}
    set: {node_selector: {pool: gpu}, priority_class: high-priority, labels: {tier: later}}
",
    );

    let first = changes_of(ask(&hook, &Request::new("gpu-lab", "train", "fit")).await);
    let second = changes_of(ask(&hook, &Request::new("gpu-lab", "report", "render")).await);

    assert_eq!(first.node_selector["pool"], "a100");
    assert_eq!(first.priority_class, None);
    assert!(first.labels.is_empty());
    assert_eq!(second.node_selector["pool"], "gpu");
    assert_eq!(second.priority_class.as_deref(), Some("high-priority"));
}

#[tokio::test]
async fn group_matching_labels_needs_every_pair_on_the_request() {
    let hook = placement(
        "
type: placement
name: by-label
groups:
  - match: {labels: {accelerator: gpu, team: ml}}
    set: {node_selector: {pool: gpu}}
",
    );
    let mut both = Request::new("acme", "train", "fit");
    both.execution
        .labels
        .insert("accelerator".into(), "gpu".into());
    both.execution.labels.insert("team".into(), "ml".into());
    let mut one = Request::new("acme", "train", "fit");
    one.execution
        .labels
        .insert("accelerator".into(), "gpu".into());

    assert!(matches!(ask(&hook, &both).await, Decision::AdmitWith(_)));
    assert_eq!(ask(&hook, &one).await, Decision::Admit);
}

#[tokio::test]
async fn group_that_sets_nothing_admits_unchanged_and_shields_later_groups() {
    let hook = placement(
        "
type: placement
name: all-but-acme
groups:
  - match: {tenants: [acme]}
  - set: {node_selector: {pool: shared}}
",
    );

    assert_eq!(
        ask(&hook, &Request::new("acme", "etl", "load")).await,
        Decision::Admit
    );
    let other = changes_of(ask(&hook, &Request::new("globex", "etl", "load")).await);
    assert_eq!(other.node_selector["pool"], "shared");
}

#[tokio::test]
async fn placement_changes_reach_the_request_through_the_chain() {
    let rules = ChangeRules {
        priority_classes: Some(BTreeSet::from(["high-priority".to_owned()])),
        ..ChangeRules::default()
    };
    let chain = Chain::new(rules).with_hook(Arc::new(placement(GPU_PLACEMENT)));

    let verdict = chain.admit(Request::new("gpu-lab", "train", "fit")).await;

    let Verdict::Admit { request, .. } = verdict else {
        panic!("admitted: {verdict:?}")
    };
    assert_eq!(request.execution.node_selector["pool"], "gpu");
    assert_eq!(request.execution.priority_class, "high-priority");
    assert_eq!(request.execution.tolerations.len(), 1);
}

#[test]
fn placement_check_names_the_group_whose_priority_class_is_not_allowed() {
    let HookSpec::Placement(spec) = spec(GPU_PLACEMENT) else {
        panic!("placement")
    };
    let rules = ChangeRules {
        priority_classes: Some(BTreeSet::from(["default-priority".to_owned()])),
        ..ChangeRules::default()
    };

    let errors = spec
        .check(&rules)
        .expect_err("priority class outside the allowlist");

    assert_eq!(errors.len(), 1);
    assert!(
        matches!(errors[0], SpecError::InvalidChange { group: 0, .. }),
        "{errors:?}"
    );
    assert!(
        errors[0]
            .to_string()
            .starts_with("groups[0].set: priority class"),
        "{}",
        errors[0]
    );
    assert_eq!(spec.check(&ChangeRules::default()), Ok(()));
}

#[test]
fn placement_check_refuses_a_reserved_label_key() {
    let HookSpec::Placement(spec) = spec(
        "
type: placement
name: sneaky
groups:
  - set: {labels: {team: ok}}
  - set: {labels: {dexaflow.io/tenant: other}}
",
    ) else {
        panic!("placement")
    };

    let errors = spec
        .check(&ChangeRules::default())
        .expect_err("reserved key");

    assert_eq!(errors.len(), 1, "only the second group is bad: {errors:?}");
    assert!(
        errors[0]
            .to_string()
            .starts_with("groups[1].set: label key \"dexaflow.io/tenant\"")
    );
}

#[test]
fn placement_without_groups_fails_its_check() {
    let spec = spec("{type: placement, name: empty, groups: []}");

    assert_eq!(
        spec.check(&ChangeRules::default()),
        Err(vec![SpecError::NoGroups])
    );
}

// Freeze

#[tokio::test(start_paused = true)]
async fn freeze_holds_inside_its_window_and_admits_after_it_lifts() {
    let hook = Freeze::new(
        &freeze_spec("{type: freeze, name: f, tenants: [finance], for: 5s, reason: closing}"),
        ManualClock::at("2026-01-01T00:00:00Z"),
    );
    let request = Request::new("finance", "ledger", "post");

    assert_eq!(ask(&hook, &request).await, Decision::Hold("closing".into()));
    tokio::time::advance(Duration::from_millis(4_999)).await;
    assert_eq!(ask(&hook, &request).await, Decision::Hold("closing".into()));
    tokio::time::advance(Duration::from_millis(1)).await;
    assert_eq!(ask(&hook, &request).await, Decision::Admit);
}

#[tokio::test(start_paused = true)]
async fn freeze_does_not_hold_a_tenant_it_does_not_list() {
    let hook = build(&[spec("{type: freeze, name: f, tenants: [finance], for: 5s}")]);

    let decision = ask(hook[0].as_ref(), &Request::new("acme", "etl", "load")).await;

    assert_eq!(decision, Decision::Admit);
    let held = ask(hook[0].as_ref(), &Request::new("finance", "ledger", "post")).await;
    assert!(matches!(held, Decision::Hold(_)));
}

#[tokio::test(start_paused = true)]
async fn freeze_with_after_admits_until_its_window_opens() {
    let hooks = build(&[spec("{type: freeze, name: f, after: 2s, for: 1s}")]);
    let request = Request::new("finance", "ledger", "post");

    assert_eq!(ask(hooks[0].as_ref(), &request).await, Decision::Admit);
    tokio::time::advance(Duration::from_secs(2)).await;
    assert!(matches!(
        ask(hooks[0].as_ref(), &request).await,
        Decision::Hold(_)
    ));
    tokio::time::advance(Duration::from_secs(1)).await;
    assert_eq!(ask(hooks[0].as_ref(), &request).await, Decision::Admit);
}

#[tokio::test(start_paused = true)]
async fn freeze_without_tenants_holds_every_tenant_with_a_reason_naming_it() {
    let hooks = build(&[spec("{type: freeze, name: f, for: 1m}")]);

    let acme = ask(hooks[0].as_ref(), &Request::new("acme", "etl", "load")).await;
    let globex = ask(hooks[0].as_ref(), &Request::new("globex", "etl", "load")).await;

    assert_eq!(acme, Decision::Hold("change freeze for tenant acme".into()));
    assert_eq!(
        globex,
        Decision::Hold("change freeze for tenant globex".into())
    );
}

#[tokio::test]
async fn absolute_freeze_holds_between_from_and_until_on_its_clock() {
    let clock = ManualClock::at("2026-03-31T17:59:59Z");
    let hooks = build_with_clock(
        &[spec(
            "{type: freeze, name: q1, tenants: [finance], from: '2026-03-31T18:00:00Z', until: '2026-04-01T06:00:00Z'}",
        )],
        clock.clone(),
    );
    let request = Request::new("finance", "ledger", "post");

    assert_eq!(ask(hooks[0].as_ref(), &request).await, Decision::Admit);
    clock.set("2026-03-31T18:00:00Z");
    assert!(matches!(
        ask(hooks[0].as_ref(), &request).await,
        Decision::Hold(_)
    ));
    clock.set("2026-04-01T05:59:59Z");
    assert!(matches!(
        ask(hooks[0].as_ref(), &request).await,
        Decision::Hold(_)
    ));
    clock.set("2026-04-01T06:00:00Z");
    assert_eq!(ask(hooks[0].as_ref(), &request).await, Decision::Admit);
}

#[test]
fn freeze_parses_a_relative_window_with_after_defaulting_to_zero() {
    let spec = freeze_spec("{type: freeze, name: f, for: 3s}");

    assert_eq!(
        spec.window,
        Window::Relative {
            after: Duration::ZERO,
            length: Duration::from_secs(3)
        }
    );
    assert!(spec.tenants.is_empty());
    assert_eq!(spec.reason, None);
}

#[test]
fn freeze_with_both_a_relative_and_an_absolute_window_does_not_parse() {
    let error = serde_yaml_ng::from_str::<HookSpec>(
        "{type: freeze, name: f, for: 3s, until: '2026-01-01T00:00:00Z'}",
    )
    .expect_err("mixed window");

    assert!(error.to_string().contains("not both"), "{error}");
}

#[test]
fn freeze_without_an_end_does_not_parse() {
    let error = serde_yaml_ng::from_str::<HookSpec>("{type: freeze, name: f, after: 3s}")
        .expect_err("no end");

    assert!(error.to_string().contains("needs for"), "{error}");
}

#[test]
fn freeze_with_a_bad_duration_names_the_field() {
    let error = serde_yaml_ng::from_str::<HookSpec>("{type: freeze, name: f, for: soon}")
        .expect_err("bad duration");

    assert!(
        error.to_string().contains("for: expected a duration"),
        "{error}"
    );
}

#[test]
fn freeze_that_ends_before_it_starts_does_not_parse() {
    let error = serde_yaml_ng::from_str::<HookSpec>(
        "{type: freeze, name: f, from: '2026-01-02T00:00:00Z', until: '2026-01-01T00:00:00Z'}",
    )
    .expect_err("empty window");

    assert!(
        error.to_string().contains("until: must be after from"),
        "{error}"
    );
}

#[test]
fn freeze_spec_round_trips_through_yaml() {
    let spec = spec(
        "{type: freeze, name: q1, tenants: [finance], from: '2026-03-31T18:00:00Z', until: '2026-04-01T06:00:00Z', reason: closing}",
    );

    let text = serde_yaml_ng::to_string(&spec).expect("serializes");

    assert_eq!(
        serde_yaml_ng::from_str::<HookSpec>(&text).expect("parses back"),
        spec
    );
    assert!(text.contains("until: 2026-04-01T06:00:00Z"), "{text}");
}

// Deny

#[tokio::test]
async fn deny_refuses_a_matching_tenant_with_its_reason() {
    let hook = deny("{type: deny, name: suspended, match: {tenants: [umbrella]}, reason: unpaid}");

    let decision = ask(&hook, &Request::new("umbrella", "etl", "load")).await;

    assert_eq!(decision, Decision::Refuse("unpaid".into()));
}

#[tokio::test]
async fn deny_admits_a_tenant_it_does_not_match() {
    let hook = deny("{type: deny, name: suspended, match: {tenants: [umbrella]}, reason: unpaid}");

    assert_eq!(
        ask(&hook, &Request::new("acme", "etl", "load")).await,
        Decision::Admit
    );
}

#[tokio::test]
async fn deny_without_a_reason_names_the_hook() {
    let hook = deny("{type: deny, name: suspended, match: {tenants: [umbrella]}}");

    let decision = ask(&hook, &Request::new("umbrella", "etl", "load")).await;

    assert_eq!(
        decision,
        Decision::Refuse("denied by hook \"suspended\"".into())
    );
}

#[tokio::test]
async fn deny_needs_every_criterion_it_sets() {
    let hook = deny(
        "{type: deny, name: no-bash, match: {tenants: [acme], operators: [BashOperator]}, reason: no}",
    );
    let mut bash = Request::new("acme", "etl", "load");
    bash.operator = "BashOperator".into();
    let mut python = Request::new("acme", "etl", "load");
    python.operator = "PythonOperator".into();
    let mut other_bash = Request::new("globex", "etl", "load");
    other_bash.operator = "BashOperator".into();

    assert!(matches!(ask(&hook, &bash).await, Decision::Refuse(_)));
    assert_eq!(ask(&hook, &python).await, Decision::Admit);
    assert_eq!(ask(&hook, &other_bash).await, Decision::Admit);
}

#[tokio::test]
async fn deny_on_a_task_id_refuses_only_that_task() {
    let hook = deny("{type: deny, name: no-drop, match: {task_ids: [drop_tables]}, reason: no}");

    assert!(matches!(
        ask(&hook, &Request::new("acme", "etl", "drop_tables")).await,
        Decision::Refuse(_)
    ));
    assert_eq!(
        ask(&hook, &Request::new("acme", "etl", "load")).await,
        Decision::Admit
    );
}

#[tokio::test]
async fn deny_on_an_image_prefix_refuses_only_images_under_it() {
    let hook = deny("{type: deny, name: untrusted, match: {images: [docker.io/]}, reason: no}");
    let mut under = Request::new("acme", "etl", "load");
    under.image = "docker.io/library/python:3.12".into();
    let mut beside = Request::new("acme", "etl", "load");
    beside.image = "docker.iox/python:3.12".into();

    assert!(matches!(ask(&hook, &under).await, Decision::Refuse(_)));
    assert_eq!(ask(&hook, &beside).await, Decision::Admit);
}

#[tokio::test]
async fn deny_on_an_exact_image_matches_its_repository_whatever_the_tag() {
    let hook = deny("{type: deny, name: old, match: {images: [ghcr.io/acme/etl]}, reason: no}");
    let mut tagged = Request::new("acme", "etl", "load");
    tagged.image = "ghcr.io/acme/etl:1.4".into();
    let mut longer = Request::new("acme", "etl", "load");
    longer.image = "ghcr.io/acme/etl-v2:1.4".into();

    assert!(matches!(ask(&hook, &tagged).await, Decision::Refuse(_)));
    assert_eq!(ask(&hook, &longer).await, Decision::Admit);
}

#[test]
fn deny_without_criteria_fails_its_check() {
    let spec = spec("{type: deny, name: all, match: {}, reason: everything}");

    assert_eq!(
        spec.check(&ChangeRules::default()),
        Err(vec![SpecError::EmptyMatch])
    );
}

#[test]
fn deny_with_criteria_passes_its_check() {
    let spec = spec("{type: deny, name: a, match: {dag_ids: [x]}}");

    assert_eq!(spec.check(&ChangeRules::default()), Ok(()));
}

// Matcher and specs

#[test]
fn empty_matcher_matches_every_request() {
    assert!(Matcher::default().matches(&Request::new("any", "dag", "task")));
}

#[test]
fn matcher_on_annotations_needs_the_value_too() {
    let matcher = Matcher {
        annotations: [("team".to_owned(), "ml".to_owned())].into(),
        ..Matcher::default()
    };
    let mut right = Request::new("acme", "etl", "load");
    right
        .execution
        .annotations
        .insert("team".into(), "ml".into());
    let mut wrong = Request::new("acme", "etl", "load");
    wrong
        .execution
        .annotations
        .insert("team".into(), "web".into());

    assert!(matcher.matches(&right));
    assert!(!matcher.matches(&wrong));
}

#[test]
fn hook_spec_refuses_an_unknown_field() {
    let error = serde_yaml_ng::from_str::<HookSpec>("{type: deny, name: a, match: {tenant: [x]}}")
        .expect_err("tenant is not a field");

    assert!(
        error.to_string().contains("unknown field `tenant`"),
        "{error}"
    );
}

#[test]
fn hook_spec_refuses_an_unknown_type() {
    let error =
        serde_yaml_ng::from_str::<HookSpec>("{type: quota, name: a}").expect_err("no quota");

    assert!(
        error.to_string().contains("unknown variant `quota`"),
        "{error}"
    );
}

#[test]
fn placement_check_refuses_a_change_only_privileged_hooks_may_make() {
    let spec = spec("{type: placement, name: p, groups: [{set: {runtime_class_name: gvisor}}]}");

    let errors = spec
        .check(&ChangeRules::default())
        .expect_err("privileged only");

    assert!(
        errors[0]
            .to_string()
            .contains("runtime_class_name may only be set by a privileged hook")
    );
}

#[test]
fn build_keeps_the_declared_order_and_names_and_no_hook_is_privileged() {
    let specs = [
        spec("{type: freeze, name: one, for: 1s}"),
        spec("{type: deny, name: two, match: {tenants: [x]}}"),
        spec(GPU_PLACEMENT),
    ];

    let hooks = build(&specs);

    let names: Vec<&str> = hooks.iter().map(|hook| hook.name()).collect();
    assert_eq!(names, ["one", "two", "gpu-placement"]);
    let chain = hooks
        .into_iter()
        .fold(Chain::new(ChangeRules::default()), Chain::with_hook);
    assert!((0..3).all(|position| chain.privilege(position) == Some(Privilege::Unprivileged)));
}

#[tokio::test(start_paused = true)]
async fn chain_of_built_hooks_holds_refuses_and_places_by_tenant() {
    let specs = [
        spec("{type: freeze, name: finance-freeze, tenants: [finance], for: 3s, reason: frozen}"),
        spec("{type: deny, name: suspended, match: {tenants: [umbrella]}, reason: unpaid}"),
        spec(GPU_PLACEMENT),
    ];
    let mut chain = Chain::new(ChangeRules::default());
    for hook in build(&specs) {
        chain = chain.with_hook(hook);
    }

    let finance = chain.admit(Request::new("finance", "ledger", "post")).await;
    let umbrella = chain.admit(Request::new("umbrella", "etl", "load")).await;
    let gpu = chain.admit(Request::new("gpu-lab", "train", "fit")).await;
    let acme = chain.admit(Request::new("acme", "etl", "load")).await;

    assert_eq!(
        finance,
        Verdict::Hold {
            hook: "finance-freeze".into(),
            reason: "frozen".into()
        }
    );
    assert_eq!(
        umbrella,
        Verdict::Refuse {
            hook: "suspended".into(),
            reason: "unpaid".into()
        }
    );
    let Verdict::Admit { changes, .. } = gpu else {
        panic!("gpu-lab admitted: {gpu:?}")
    };
    assert_eq!(changes.node_selector["pool"], "gpu");
    let Verdict::Admit { changes, .. } = acme else {
        panic!("acme admitted: {acme:?}")
    };
    assert!(changes.is_empty());
    tokio::time::advance(Duration::from_secs(3)).await;
    let thawed = chain.admit(Request::new("finance", "ledger", "post")).await;
    assert!(matches!(thawed, Verdict::Admit { .. }), "{thawed:?}");
}

#[test]
fn hook_spec_name_is_the_declared_name() {
    let spec = PlacementSpec {
        name: "p".into(),
        groups: Vec::new(),
    };

    assert_eq!(HookSpec::Placement(spec).name(), "p");
}
