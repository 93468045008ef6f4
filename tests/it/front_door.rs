//! The front door (`dexaflow_admission::Install`) as a library user drives it: public API only.

use crate::common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::{FakeHook, load_task, manual_install, offer_load};
use dexaflow_admission::admission::{Changes, Decision, Request, Verdict};
use dexaflow_admission::dispatch::task::State;
use dexaflow_admission::dispatch::{Disposition, Reason};
use dexaflow_admission::events::BreakerState;
use dexaflow_admission::hooks::{Deny, DenySpec, Matcher, SpecError};
use dexaflow_admission::install::{InstallError, OfferError};
use dexaflow_admission::supervise::ChainBuilder;
use dexaflow_admission::{Install, admission::HookError};

fn vip_class() -> Changes {
    Changes {
        priority_class: Some("vip".to_owned()),
        ..Changes::default()
    }
}

fn only_batch(settings: &mut dexaflow_admission::dispatch::Settings) {
    settings.allowlist.priority_classes = Some(BTreeSet::from(["batch".to_owned()]));
}

#[actix::test]
async fn a_hook_set_priority_class_outside_the_allowlist_is_refused_however_the_dispatcher_is_assembled()
 {
    tokio::time::pause();
    let hook = FakeHook::changing("scripted", vip_class()).shared();
    let install = manual_install().configure(only_batch).hook(hook.clone());
    let settings = install.settings().clone();
    let handle = install.start().expect("inside an actix system");
    let task = offer_load(&handle);
    handle.wait_settled().await;
    let row = handle.instance(&task.key).expect("offered");
    assert_eq!(row.state, State::Failed);
    assert!(!row.token_minted, "no token for a refused attempt");
    assert_eq!(row.executions, 0, "no executor call");
    assert!(
        matches!(row.failure_reason.map(|r| r.into_reason()), Some(Reason::RefusedByHook { hook, .. }) if hook == "scripted")
    );

    let chain = ChainBuilder::new(settings.change_rules(), Default::default())
        .hook(hook)
        .start()
        .expect("one hook");
    let verdict = chain.admit(Request::new("acme", "etl", "load")).await;
    assert!(matches!(verdict, Verdict::Refuse { hook, .. } if hook == "scripted"));
}

/// Writes `yaml` as a config file in a directory of its own; the directory lives as long as
/// the returned guard.
fn config_file(yaml: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("dexaflow.yaml");
    std::fs::write(&path, yaml).expect("the config file is written");
    (dir, path)
}

#[actix::test]
async fn an_install_from_a_config_file_refuses_a_priority_class_outside_its_allowlist() {
    tokio::time::pause();
    let (_dir, path) = config_file(
        "executor: {type: \"null\"}\nexecution_allowlist: {priority_classes: [batch]}\n",
    );
    let hook = FakeHook::changing("scripted", vip_class()).shared();
    let handle = Install::from_file(&path)
        .expect("a valid config file")
        .manual_ticks()
        .hook(hook.clone())
        .start()
        .expect("inside actix");
    let task = offer_load(&handle);
    handle.wait_settled().await;
    let row = handle.instance(&task.key).expect("offered");
    assert_eq!(row.state, State::Failed);
    assert_eq!(hook.calls(), 1);
    assert!(!row.token_minted, "no token for a refused attempt");
    assert_eq!(row.executions, 0, "no executor call");
    assert!(
        matches!(row.failure_reason.map(|r| r.into_reason()), Some(Reason::RefusedByHook { hook, .. }) if hook == "scripted")
    );
}

#[test]
fn an_install_from_a_config_file_with_an_unknown_key_is_an_error_naming_the_key() {
    let (_dir, path) =
        config_file("executor: {type: \"null\"}\nschedular: {loop_interval_ms: 5}\n");
    let error = Install::from_file(&path).expect_err("an unknown key");
    assert!(matches!(error, InstallError::Config(_)));
    let chain = dexaflow_admission::admission::error_chain(&error);
    assert!(chain.contains("schedular"), "{chain}");
}

#[actix::test]
async fn a_retry_offer_carries_its_try_number_to_the_hooks() {
    tokio::time::pause();
    let hook = FakeHook::admitting("scripted").shared();
    let handle = manual_install()
        .hook(hook.clone())
        .start()
        .expect("inside actix");
    let task = load_task();
    handle.offer_try(task.clone(), 3).expect("a new task");
    handle.wait_settled().await;
    let tries: Vec<u32> = hook.seen().iter().map(|seen| seen.try_number).collect();
    assert_eq!(tries, vec![3]);
    assert_eq!(
        handle.instance(&task.key).map(|row| row.try_number),
        Some(3)
    );
}

#[actix::test]
async fn a_duplicate_offer_is_reported_and_changes_nothing() {
    tokio::time::pause();
    let hook = FakeHook::admitting("scripted").shared();
    let handle = manual_install()
        .hook(hook.clone())
        .start()
        .expect("inside actix");
    let task = offer_load(&handle);
    assert_eq!(
        handle.offer_try(task.clone(), 2),
        Err(OfferError::Duplicate(task.key.clone()))
    );
    handle.wait_settled().await;
    assert_eq!(hook.calls(), 1, "admitted once");
    assert_eq!(
        handle.instance(&task.key).map(|row| row.try_number),
        Some(1)
    );
}

#[actix::test]
async fn an_offer_after_stop_is_refused_and_stores_nothing() {
    tokio::time::pause();
    let hook = FakeHook::admitting("scripted").shared();
    let mut handle = manual_install()
        .hook(hook.clone())
        .start()
        .expect("inside actix");
    handle.stop().await;
    let task = load_task();
    assert_eq!(
        handle.offer(task.clone()),
        Err(OfferError::ShuttingDown(task.key.clone()))
    );
    assert!(handle.instance(&task.key).is_none(), "nothing stored");
    assert_eq!(hook.calls(), 0, "no hook call");
}

#[actix::test]
async fn after_stop_the_settled_stream_gives_what_settled_then_ends() {
    tokio::time::pause();
    let mut handle = manual_install()
        .hook(FakeHook::admitting("scripted").shared())
        .start()
        .expect("inside actix");
    let task = offer_load(&handle);
    handle.wait_settled().await;
    handle.stop().await;
    let first = handle.next_settled().await.expect("the settled attempt");
    assert_eq!(
        (first.key, first.disposition),
        (task.key, Disposition::Executed)
    );
    // On the paused clock a stream that never ended would run the timeout out at once.
    let after = tokio::time::timeout(Duration::from_secs(60), handle.next_settled()).await;
    assert!(matches!(after, Ok(None)), "{after:?}");
}

#[actix::test]
async fn each_settled_attempt_names_the_hook_that_refused_it() {
    tokio::time::pause();
    let mut handle = manual_install()
        .hook(FakeHook::refusing("scripted", "over budget").shared())
        .start()
        .expect("inside actix");
    let task = offer_load(&handle);
    handle.tick().await;
    let settled = handle.next_settled().await.expect("one settlement");
    assert_eq!(settled.key, task.key);
    assert_eq!(settled.disposition, Disposition::Refused);
    assert_eq!(settled.deciding_hook(), Some("scripted"));
    assert!(
        handle.try_next_settled().is_none(),
        "one offer, one settlement"
    );
}

#[test]
fn the_blocking_entry_point_runs_without_naming_the_runtime() {
    let install =
        Install::from_yaml("executor: {type: \"null\"}\nscheduler: {loop_interval_ms: 5}")
            .expect("a valid config");
    let states = install
        .run_blocking(|handle| async move {
            handle.offer(load_task()).expect("a new task");
            handle.wait_settled().await;
            let report = handle.drain().await;
            report
                .instances
                .into_iter()
                .map(|row| row.state)
                .collect::<Vec<_>>()
        })
        .expect("the system starts");
    assert_eq!(states, vec![State::Queued]);
}

#[test]
fn starting_outside_an_actix_system_is_an_error_that_says_so() {
    let error = manual_install().start().expect_err("no actix system here");
    assert!(matches!(error, InstallError::NoSystem));
    assert!(error.to_string().contains("actix system"));
}

#[actix::test]
async fn the_blocking_entry_point_inside_a_runtime_is_an_error_not_a_panic() {
    let mut bodies_run = 0;
    let error = manual_install()
        .run_blocking(|_handle| {
            bodies_run += 1;
            async {}
        })
        .expect_err("this thread runs a runtime");
    assert!(matches!(error, InstallError::InsideRuntime));
    assert!(error.to_string().contains("Install::start"));
    assert_eq!(bodies_run, 0, "the body never ran");
}

#[actix::test]
async fn a_panic_stays_the_cause_after_the_breaker_opens() {
    tokio::time::pause();
    let handle = manual_install()
        .supervise(|settings| {
            settings.breaker.failures = 1;
            settings.breaker.backoff = Duration::from_secs(600);
            settings.breaker.max_backoff = Duration::from_secs(600);
            settings.breaker.jitter = 0.0;
        })
        .hook(FakeHook::panicking("panics", "budget table missing").shared())
        .start()
        .expect("inside actix");
    let task = offer_load(&handle);
    for _ in 0..100 {
        handle.tick().await;
        if handle.breakers() == vec![("panics".to_owned(), BreakerState::Open)] {
            break;
        }
    }
    assert_eq!(handle.breakers()[0].1, BreakerState::Open);
    handle.tick().await;
    let row = handle.instance(&task.key).expect("offered");
    assert_eq!(row.state, State::Scheduled, "still waiting");
    let Some(Reason::Unavailable { hook, error }) = row.failure_reason.map(|r| r.into_reason())
    else {
        panic!("waiting on an unavailable hook");
    };
    assert_eq!(hook, "panics");
    assert!(matches!(error, HookError::Panicked(_)), "got {error:?}");
}

#[test]
fn a_deny_hook_built_by_hand_is_checked_as_the_config_checks_it() {
    let everything = DenySpec {
        name: "deny-all".to_owned(),
        matcher: Matcher::default(),
        reason: None,
    };
    assert_eq!(
        Deny::checked(&everything).map(|_| ()),
        Err(vec![SpecError::EmptyMatch])
    );
    let sandbox = DenySpec {
        matcher: Matcher {
            tenants: vec!["sandbox".to_owned()],
            ..Matcher::default()
        },
        ..everything
    };
    assert!(Deny::checked(&sandbox).is_ok());
}

/// Starts `install` with one more hook, named `name`, and returns the error it gives, checking
/// that nothing ran.
fn refused_hook_name(install: Install, name: &str) -> InstallError {
    let mut bodies_run = 0;
    let error = install
        .hook(FakeHook::answering(name, Ok(Decision::Admit)).shared())
        .run_blocking(|_handle| {
            bodies_run += 1;
            async {}
        })
        .expect_err("the install is refused");
    assert_eq!(bodies_run, 0, "nothing started for {name:?}");
    error
}

#[test]
fn a_hook_with_an_empty_name_is_refused_at_start() {
    for name in ["", "  "] {
        let error = refused_hook_name(manual_install(), name);

        assert!(
            matches!(&error, InstallError::EmptyHookName(found) if found == name),
            "{error}"
        );
        assert!(error.to_string().contains("empty name"), "{error}");
    }
}

#[test]
fn a_hook_name_with_a_control_character_is_refused_naming_it_escaped() {
    let error = refused_hook_name(manual_install(), "gate\n\u{1b}[2K");

    assert!(
        matches!(&error, InstallError::HookNameControl(name) if name == "gate\n\u{1b}[2K"),
        "{error}"
    );
    let text = error.to_string();
    assert!(text.contains(r#""gate\n\u{1b}[2K""#), "{text}");
    assert!(!text.contains('\n') && !text.contains('\u{1b}'), "{text:?}");
}

#[test]
fn a_hook_named_as_the_executor_policy_is_refused() {
    let error = refused_hook_name(manual_install(), "executor-policy");

    assert!(
        matches!(&error, InstallError::ReservedHookName(name) if name == "executor-policy"),
        "{error}"
    );
    assert!(error.to_string().contains("\"executor-policy\""), "{error}");
}

#[test]
fn a_hook_named_as_a_hook_added_before_it_is_refused() {
    let first = FakeHook::answering("gate", Ok(Decision::Admit)).shared();

    let error = refused_hook_name(manual_install().hook(first), "gate");

    assert!(
        matches!(&error, InstallError::DuplicateHookName(name) if name == "gate"),
        "{error}"
    );
    assert!(error.to_string().contains("\"gate\""), "{error}");
}

#[test]
fn a_hook_named_as_a_hook_of_the_config_is_refused() {
    let install = Install::from_yaml(
        "executor: {type: \"null\"}\nexecution:\n  admission:\n    hooks:\n      \
         - {type: deny, name: nobody, match: {tenants: [nobody]}, reason: no}\n",
    )
    .expect("a valid config");

    let error = refused_hook_name(install, "nobody");

    assert!(
        matches!(&error, InstallError::DuplicateHookName(name) if name == "nobody"),
        "{error}"
    );
}

#[test]
fn hooks_with_distinct_clean_names_start() {
    let states = manual_install()
        .hook(FakeHook::answering("gate", Ok(Decision::Admit)).shared())
        .hook(FakeHook::answering("gate-2", Ok(Decision::Admit)).shared())
        .run_blocking(|handle| async move { handle.breakers() })
        .expect("the system starts");

    let names: Vec<&str> = states.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names, ["gate", "gate-2"]);
}
