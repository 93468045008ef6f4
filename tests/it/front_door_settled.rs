//! The front door's settings and settled attempts, as a library user meets them: public API
//! only.

use crate::common;

use common::{FakeHook, load_task, manual_install, offer_load};
use dexaflow_admission::Install;
use dexaflow_admission::config::Config;
use dexaflow_admission::dispatch::task::State;
use dexaflow_admission::dispatch::{Disposition, Reason, Settings};
use dexaflow_admission::install::Settlement;

fn no_env() -> [(&'static str, &'static str); 0] {
    []
}

#[test]
fn default_settings_are_the_settings_of_an_empty_config() {
    let defaults = Settings::default();
    let mut read = Config::from_yaml_str("", no_env())
        .expect("an empty config is valid")
        .dispatch;
    // Both generate a secret of their own; everything else must be the same.
    assert_eq!(read.token.secret.len(), defaults.token.secret.len());
    read.token.secret.clone_from(&defaults.token.secret);
    assert_eq!(defaults, read);
}

#[test]
fn default_settings_sign_with_a_random_secret_of_their_own() {
    let first = Settings::default().token.secret;
    let second = Settings::default().token.secret;
    assert_eq!(first.len(), 32);
    assert_ne!(first, second, "never a fixed, predictable key");
}

#[test]
fn an_install_of_default_settings_runs_an_attempt() {
    let settings = Settings {
        executor: dexaflow_admission::dispatch::settings::ExecutorSettings::Null,
        loop_interval: std::time::Duration::from_millis(5),
        ..Settings::default()
    };
    let row = Install::new(settings)
        .run_blocking(|handle| async move {
            let task = offer_load(&handle);
            handle.wait_settled().await;
            handle.instance(&task.key)
        })
        .expect("the system starts")
        .expect("offered");
    assert_eq!(row.state, State::Queued);
    assert!(row.token_minted, "signed with the generated secret");
}

/// An install ticked by hand that streams its settled attempts, with `hook` in its chain.
fn install(hook: std::sync::Arc<FakeHook>) -> Install {
    manual_install().hook(hook)
}

#[actix::test]
async fn a_settlement_keeps_the_reason_it_settled_with_after_the_task_moves_on() {
    tokio::time::pause();
    let hook = FakeHook::scripted(
        "budget",
        [
            Ok(dexaflow_admission::admission::Decision::Hold(
                "over budget this hour".to_owned(),
            )),
            Ok(dexaflow_admission::admission::Decision::Refuse(
                "budget closed".to_owned(),
            )),
        ],
    )
    .shared();
    let mut handle = install(hook.clone()).start().expect("inside actix");
    let task = offer_load(&handle);
    handle.tick().await;
    handle.tick().await;
    assert_eq!(hook.calls(), 2, "held, then refused");

    // Both read only now, after the task instance has failed for the second reason.
    let held = handle.next_settled().await.expect("the first offer");
    let refused = handle.next_settled().await.expect("the second offer");
    assert_eq!(held.disposition, Disposition::Waiting);
    assert!(
        matches!(&held.reason, Some(Reason::Held { hook, reason }) if hook == "budget" && reason == "over budget this hour"),
        "the hold it waited for, not the later refusal: {:?}",
        held.reason
    );
    assert_eq!(refused.disposition, Disposition::Refused);
    assert!(matches!(
        &refused.reason,
        Some(Reason::RefusedByHook { reason, .. }) if reason == "budget closed"
    ));
    assert_eq!(
        handle.instance(&task.key).map(|row| row.state),
        Some(State::Failed)
    );
}

/// Starts `install`, offers one attempt as try `try_number`, ticks once and returns how that
/// offer settled.
async fn settle_once(install: Install, try_number: u32) -> Settlement {
    tokio::time::pause();
    let mut handle = install.start().expect("inside actix");
    handle
        .offer_try(load_task(), try_number)
        .expect("a new task");
    handle.tick().await;
    handle.next_settled().await.expect("one offer")
}

#[actix::test]
async fn a_held_attempt_names_the_hook_that_held_it_and_its_try() {
    let held = settle_once(
        install(FakeHook::holding("budget", "over budget").shared()),
        2,
    )
    .await;
    assert_eq!(held.disposition, Disposition::Waiting);
    assert_eq!(held.deciding_hook(), Some("budget"));
    assert_eq!(held.try_number, Some(2));
}

#[actix::test]
async fn an_executed_attempt_names_the_hook_that_changed_it() {
    let mut pool = dexaflow_admission::admission::Changes::default();
    pool.node_selector
        .insert("pool".to_owned(), "acme".to_owned());
    let install = install(FakeHook::changing("budget", pool).shared())
        .hook(FakeHook::admitting("audit").shared());
    let executed = settle_once(install, 1).await;
    assert_eq!(executed.disposition, Disposition::Executed);
    assert_eq!(
        executed.deciding_hook(),
        Some("budget"),
        "not the later hook that only admitted"
    );
    assert_eq!(executed.changed_by, ["budget"]);
    assert_eq!(executed.reason, None);
}

#[actix::test]
async fn an_attempt_nothing_stopped_names_no_hook_and_no_reason() {
    let executed = settle_once(install(FakeHook::admitting("budget").shared()), 1).await;
    assert_eq!(executed.disposition, Disposition::Executed);
    assert_eq!(executed.deciding_hook(), None);
    assert_eq!(executed.reason, None);
}

#[actix::test]
async fn without_stream_settled_no_settlement_is_kept() {
    tokio::time::pause();
    let hook = FakeHook::refusing("budget", "over budget").shared();
    let mut handle = Install::from_yaml("executor: {type: \"null\"}")
        .expect("a valid config")
        .manual_ticks()
        .hook(hook.clone())
        .start()
        .expect("inside actix");
    let task = offer_load(&handle);
    handle.tick().await;
    assert_eq!(hook.calls(), 1, "the attempt was dispatched");
    assert_eq!(
        handle.instance(&task.key).map(|row| row.state),
        Some(State::Failed)
    );
    assert!(handle.try_next_settled().is_none());
    assert!(handle.next_settled().await.is_none(), "nothing to wait for");
}
