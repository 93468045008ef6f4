//! What can go wrong with a load test.

use std::path::PathBuf;

use thiserror::Error;

use super::HookFlagError;

/// Why a load test could not run, or ran and found attempts unaccounted for.
#[derive(Debug, Error)]
pub enum LoadTestError {
    /// A flag's value makes no sense (a negative rate, no tenants, ...).
    #[error("{flag}: {problem}")]
    Option {
        /// The flag, such as `--rate`.
        flag: &'static str,
        /// What is wrong with its value.
        problem: String,
    },
    /// A `--hook` value is no SPEC.
    #[error(transparent)]
    Spec(#[from] HookFlagError),
    /// The load test's thread could not be started.
    #[error("starting the load-test thread")]
    Thread(#[source] std::io::Error),
    /// The load test's thread ended without a report (it panicked).
    #[error("the load-test thread ended without a report")]
    Aborted,
    /// The dispatcher could not be started (outside a running actix system).
    #[error("starting the dispatcher")]
    Install(#[source] crate::install::InstallError),
    /// Conservation failed: some attempts were not accounted for exactly once.
    #[error(
        "conservation check failed: {lost} attempts lost, {executed_twice} executed twice, \
         {settled_twice} settled twice"
    )]
    Conservation {
        /// Attempts neither executed once, refused, failed with a reason nor handed back.
        lost: u64,
        /// Attempts an executor launched more than once.
        executed_twice: u64,
        /// Attempts with more than one final disposition.
        settled_twice: u64,
    },
    /// Writing the `--report` directory failed.
    #[error("--report: writing {path:?}")]
    Report {
        /// The file that could not be written.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}
