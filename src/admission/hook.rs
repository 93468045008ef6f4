//! The hook trait: the operator's code that decides on each attempt (ADR 0100 §1).

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use thiserror::Error;

use super::{Decision, Request};

/// The future a hook returns: boxed so that `dyn Hook` is object-safe, `Send` so that any worker
/// may drive it.
pub type HookFuture<'a> = Pin<Box<dyn Future<Output = Result<Decision, HookError>> + Send + 'a>>;

/// An admission hook: decides, for each attempt, whether it runs, runs changed, waits or is refused.
///
/// Hooks are registered as `Arc<dyn Hook>` in a [`super::Chain`], in the order they run. A hook
/// must be cheap to call concurrently: the dispatcher may call it from several workers at once.
///
/// ```
/// use dexaflow_admission::admission::{Decision, Hook, HookFuture, Request};
///
/// /// Refuses every attempt of one tenant.
/// struct DenyTenant(&'static str);
///
/// impl Hook for DenyTenant {
///     fn name(&self) -> &str {
///         "deny-tenant"
///     }
///     fn admit<'a>(&'a self, request: &'a Request) -> HookFuture<'a> {
///         Box::pin(async move {
///             Ok(if request.tenant == self.0 {
///                 Decision::Refuse(format!("tenant {} is suspended", self.0))
///             } else {
///                 Decision::Admit
///             })
///         })
///     }
/// }
/// ```
pub trait Hook: Send + Sync {
    /// The hook's name, as reasons, logs and the breaker gauge show it.
    fn name(&self) -> &str;

    /// Decides on one attempt.
    ///
    /// # Errors
    /// A [`HookError`] when the hook cannot decide; the attempt then waits (or is admitted
    /// unchanged under fail-open) and the hook's breaker counts a failure.
    ///
    /// # Cancel safety
    /// The dispatcher drops the future when the dispatch is cancelled (shutdown, an ended tick);
    /// a hook must not rely on running to completion.
    fn admit<'a>(&'a self, request: &'a Request) -> HookFuture<'a>;

    /// Decides on one attempt that the caller gives `limit` to answer.
    ///
    /// The supervisor calls this, with `limit` the call's own deadline: the hook's timeout or
    /// what is left of the chain budget, whichever is shorter. It drops the call at that limit
    /// whatever the hook does, so the default ignores `limit` and calls [`Hook::admit`]. A hook
    /// that asks a remote server overrides it to tell the server the deadline, as the webhook
    /// does with `?timeout=`, so that the server can give up before the caller does.
    ///
    /// # Errors
    /// As [`Hook::admit`].
    ///
    /// # Cancel safety
    /// As [`Hook::admit`].
    fn admit_within<'a>(&'a self, request: &'a Request, limit: Duration) -> HookFuture<'a> {
        let _ = limit;
        self.admit(request)
    }

    /// Whether this is a built-in hook, which may set `runtime_class_name` and fill limits.
    ///
    /// Only hooks this crate ships return `true`; an operator hook that claims it is still an
    /// operator hook in every other respect.
    fn is_builtin(&self) -> bool {
        false
    }

    /// Whether the hook's answers come from outside this process, from whoever controls an
    /// endpoint (the webhook): such a hook may change the service account only when
    /// `execution_allowlist.service_accounts` is set (ADR 0100 §8; see
    /// [`super::ChangeRules::check_remote`]).
    ///
    /// It only ever narrows what a hook may change, so a hook that answers `true` gains nothing.
    fn is_remote(&self) -> bool {
        false
    }
}

/// Why a hook call gave no decision. Every variant means the hook is broken, not that it decided.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum HookError {
    /// The hook returned an error; the text is the hook's own.
    #[error("{0}")]
    Failed(String),
    /// The call did not finish within its deadline.
    #[error("timed out after {0:?}")]
    Elapsed(Duration),
    /// The hook panicked; the text is the panic message.
    #[error("panicked: {0}")]
    Panicked(String),
    /// The hook's breaker is open, so the hook was not called.
    #[error("skipped while its breaker is open")]
    Skipped,
}
