//! Why a task instance failed or what it waits for, as a typed value: what reports count by,
//! and what its reason text (Dexaflow's `error_message`) is rendered from.

use std::fmt;
use std::ops::Deref;

use super::executor::Ending;
use super::refusals::Refusal;
use crate::admission::{ChangeError, HookError};

/// Why a task instance failed, or what it waits for while scheduled.
///
/// Its `Display` is the reason text the task instance shows, in Dexaflow's words
/// (`dispatch refused: <cause>`, `dispatch_failed after 6 attempts: <cause>`, ...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
    /// A built-in check refused the attempt before any hook ran (ADR 0100 §4). Permanent.
    Refused(Refusal),
    /// The pod's annotations with every hook's changes are over Kubernetes's limit. Permanent.
    ChangesRefused(ChangeError),
    /// A hook refused the attempt, or its changes broke a rule (ADR 0100 §3). Permanent.
    RefusedByHook {
        /// The hook that refused.
        hook: String,
        /// The cleaned reason.
        reason: String,
    },
    /// A hook held the attempt: it waits, and is offered again.
    Held {
        /// The hook that held.
        hook: String,
        /// The cleaned reason.
        reason: String,
    },
    /// A hook gave no decision: it failed, timed out, panicked or was skipped by its breaker, or
    /// the hooks before it spent the chain budget ([`HookError::BudgetSpent`]). The attempt
    /// waits, and is offered again.
    Unavailable {
        /// The hook.
        hook: String,
        /// Why it gave no decision.
        error: HookError,
    },
    /// The retry window ran out while the attempt waited, the last time for `waited` (a
    /// [`Reason::Held`] or [`Reason::Unavailable`]): the task failed as `dispatch_failed`.
    RetryWindowSpent(Box<Reason>),
    /// No agent token could be minted for the attempt; a dispatch attempt is spent.
    Token {
        /// The task instance id the token was for.
        task_instance_id: String,
        /// The minter's error.
        error: String,
    },
    /// The executor could not launch the attempt; a dispatch attempt is spent.
    Executor {
        /// The executor's error, with its causes.
        cause: String,
    },
    /// Every dispatch attempt is spent (Dexaflow's `dispatchMaxAttempts`): the task failed
    /// after `attempts`, the last for `last` (a [`Reason::Token`] or [`Reason::Executor`]).
    DispatchFailed {
        /// The dispatch attempts spent.
        attempts: u32,
        /// Why the last one failed.
        last: Box<Reason>,
    },
    /// The launched attempt failed as its executor reports.
    Ended(Ending),
}

impl Reason {
    /// Whether the attempt was refused, by a built-in check or a hook: the task failed at once,
    /// without retries.
    pub(crate) fn is_refusal(&self) -> bool {
        matches!(
            self,
            Reason::Refused(_) | Reason::ChangesRefused(_) | Reason::RefusedByHook { .. }
        )
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::Refused(refusal) => write!(f, "dispatch refused: {refusal}"),
            Reason::ChangesRefused(error) => write!(f, "dispatch refused: admission: {error}"),
            Reason::RefusedByHook { reason, .. } => {
                write!(f, "dispatch refused: admission: {reason}")
            }
            Reason::Held { reason, .. } => write!(f, "admission hold: {reason}"),
            Reason::Unavailable { hook, error } => f.write_str(&error.unavailable_reason(hook)),
            Reason::RetryWindowSpent(waited) => write!(f, "dispatch_failed: {waited}"),
            Reason::Token {
                task_instance_id,
                error,
            } => write!(f, "issuing agent token for {task_instance_id}: {error}"),
            Reason::Executor { cause } => f.write_str(cause),
            Reason::DispatchFailed { attempts, last } => {
                write!(f, "dispatch_failed after {attempts} attempts: {last}")
            }
            Reason::Ended(ending) => write!(f, "{ending}"),
        }
    }
}

/// A [`Reason`] as a task instance keeps it: the typed value, with its text rendered once when
/// it is recorded, so that every reader of the text (reports, logs, tests) gets the same string
/// without rendering it again. Reads as that text (`Deref<Target = str>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailureReason {
    reason: Reason,
    text: String,
}

impl FailureReason {
    /// Records `reason`, rendering its text.
    pub fn new(reason: Reason) -> FailureReason {
        let text = reason.to_string();
        FailureReason { reason, text }
    }

    /// The typed reason: what to count or match by.
    pub fn reason(&self) -> &Reason {
        &self.reason
    }

    /// The typed reason, without its text.
    pub fn into_reason(self) -> Reason {
        self.reason
    }

    /// The reason text.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl From<Reason> for FailureReason {
    fn from(reason: Reason) -> FailureReason {
        FailureReason::new(reason)
    }
}

impl Deref for FailureReason {
    type Target = str;

    fn deref(&self) -> &str {
        &self.text
    }
}

impl AsRef<str> for FailureReason {
    fn as_ref(&self) -> &str {
        &self.text
    }
}

impl fmt::Display for FailureReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}
