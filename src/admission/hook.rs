//! The hook trait: the operator's code that decides on each attempt (ADR 0100 §1).

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use thiserror::Error;

use super::{Decision, Request, display_duration};

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
///     // Decides here, from the request alone: no endpoint answers for it.
///     fn is_remote(&self) -> bool {
///         false
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
///
/// Every hook states whether its answers come from outside the process ([`Hook::is_remote`]):
/// the method has no default, so a hook that leaves it out does not compile, and an HTTP
/// client written as a hook cannot slip past the service-account rule of ADR 0100 §8 by
/// omission.
///
/// ```compile_fail,E0046
/// use dexaflow_admission::admission::{Decision, Hook, HookFuture, Request};
///
/// struct Forwards;
/// impl Hook for Forwards {
///     fn name(&self) -> &str {
///         "forwards"
///     }
///     fn admit<'a>(&'a self, _: &'a Request) -> HookFuture<'a> {
///         Box::pin(async { Ok(Decision::Admit) })
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

    /// Whether the hook's answers come from outside this process, from whoever controls an
    /// endpoint: `true` for a hook that asks a server (the webhook, or your own HTTP, gRPC or
    /// queue client), `false` for one that decides in this process.
    ///
    /// A remote hook may change the service account only when
    /// `execution_allowlist.service_accounts` is set (ADR 0100 §8; see
    /// `super::ChangeRules::check_remote`), so that whoever controls the endpoint cannot move
    /// a task onto any service account of the namespace. The method has no default so that no
    /// hook is taken for local by omission: every implementation states which it is. Answering
    /// `true` only narrows what the hook may change; when in doubt, answer `true`.
    fn is_remote(&self) -> bool;
}

/// What a registered hook may change beyond what every hook may (ADR 0100 §7).
///
/// A hook does not say what it may do: the chain records it when the hook is registered.
/// [`super::Chain::with_hook`], the only registration open outside this crate, registers every
/// hook [`Privilege::Unprivileged`]; only this crate can register a hook privileged, and does so
/// for its own executor policy (ADR 0063), which it registers last. The hooks a config declares
/// (`placement`, `freeze`, `deny`) are the crate's too, but they are unprivileged: a hook the
/// crate ships is not thereby privileged.
///
/// No trait method or registration path outside the crate grants it:
///
/// ```compile_fail
/// use std::sync::Arc;
/// use dexaflow_admission::admission::{Chain, ChangeRules, Decision, Hook, HookFuture, Request};
///
/// struct Claims;
/// impl Hook for Claims {
///     fn name(&self) -> &str { "claims" }
///     fn is_remote(&self) -> bool { false }
///     fn admit<'a>(&'a self, _: &'a Request) -> HookFuture<'a> {
///         Box::pin(async { Ok(Decision::Admit) })
///     }
/// }
/// // Private to the crate: an operator's hook cannot be registered privileged.
/// let chain = Chain::new(ChangeRules::default()).with_privileged_last(Arc::new(Claims));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Privilege {
    /// Every operator hook, and the hooks the crate ships for a config to declare: may change
    /// what ADR 0100 §3 lists, nothing more.
    Unprivileged,
    /// A hook the crate registered as privileged: may also set `runtime_class_name` and fill
    /// empty resource limits within the resource unit.
    Privileged,
}

/// Why a hook call gave no decision. Every variant but [`HookError::BudgetSpent`] means the hook
/// is broken, not that it decided.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum HookError {
    /// The hook returned an error; the text is the hook's own.
    #[error("{0}")]
    Failed(String),
    /// The call did not finish within its deadline.
    #[error("timed out after {}", display_duration(*.0))]
    Elapsed(Duration),
    /// The hook panicked; the text is the panic message.
    #[error("panicked: {0}")]
    Panicked(String),
    /// The hook's breaker is open, so the hook was not called.
    #[error("skipped while its breaker is open")]
    Skipped,
    /// The chain budget ran out before this hook's own timeout, spent by the hooks before it or
    /// ended by the caller's deadline: the call was cut when it ran out, after the time it
    /// carries; or, with no budget left (zero), the hook was not called. Not the hook's
    /// failure: its breaker does not count it.
    #[error("{}: the chain budget was spent", budget_cut(*.0))]
    BudgetSpent(Duration),
}

impl HookError {
    /// The error as a task instance shows it after `admission hook unavailable: <hook>: `: its
    /// text, cleaned and cut like a reason ([`super::clean_reason`]).
    pub fn cleaned(&self) -> String {
        super::clean_reason(&self.to_string())
    }

    /// The reason of an attempt that `hook` gave no decision for, in ADR 0100's words:
    /// `admission hook unavailable: <hook>: <cause>`, the cause [`HookError::cleaned`]. The
    /// dispatcher records it and the webhook server answers it, so both say it alike.
    pub(crate) fn unavailable_reason(&self, hook: &str) -> String {
        format!("admission hook unavailable: {hook}: {}", self.cleaned())
    }
}

/// How a budget cut of a call given `allowed` begins its message.
fn budget_cut(allowed: Duration) -> String {
    if allowed.is_zero() {
        "not called".to_owned()
    } else {
        format!("cut after {}", display_duration(allowed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_unavailable_reason_names_the_hook_and_its_cleaned_cause() {
        let error = HookError::Failed("quota service down".into());
        assert_eq!(
            error.unavailable_reason("quota"),
            "admission hook unavailable: quota: quota service down"
        );
    }
}
