//! `scheduler.dispatch.worker_threads`: its default, its reading and its bounds.

use dexaflow_admission::config::Config;
use dexaflow_admission::dispatch::settings::{DEFAULT_WORKER_THREADS, MAX_WORKER_THREADS};

use crate::common::NO_ENV;

#[test]
fn worker_threads_default_to_two_when_unset() {
    let config = Config::from_yaml_str("scheduler: {dispatch: {buffer_size: 8}}", NO_ENV)
        .expect("valid config");

    assert_eq!(DEFAULT_WORKER_THREADS, 2);
    assert_eq!(config.dispatch.worker_threads, DEFAULT_WORKER_THREADS);
}

#[test]
fn worker_threads_zero_keeps_the_workers_on_the_dispatchers_thread() {
    let config = Config::from_yaml_str(
        "scheduler: {dispatch: {buffer_size: 8, worker_threads: 0}}",
        NO_ENV,
    )
    .expect("valid config");

    assert_eq!(config.dispatch.worker_threads, 0);
}

#[test]
fn worker_threads_are_read_from_the_environment() {
    let config = Config::from_yaml_str(
        "scheduler: {dispatch: {buffer_size: 8}}",
        [("DEXAFLOW_SCHEDULER_DISPATCH_WORKER_THREADS", "4")],
    )
    .expect("valid config");

    assert_eq!(config.dispatch.worker_threads, 4);
}

#[test]
fn worker_threads_above_their_maximum_are_refused_naming_the_key() {
    let errors = Config::from_yaml_str(
        &format!(
            "scheduler: {{dispatch: {{worker_threads: {}}}}}",
            MAX_WORKER_THREADS + 1
        ),
        NO_ENV,
    )
    .expect_err("too many threads");

    assert_eq!(
        errors.to_string(),
        format!(
            "scheduler.dispatch.worker_threads: expected an integer from 0 to {MAX_WORKER_THREADS}, got {} (too large)",
            MAX_WORKER_THREADS + 1
        )
    );
}
