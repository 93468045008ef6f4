//! The shape every built-in hook has: a rule that decides from the request alone, at once,
//! with no I/O. Such a rule is a [`Hook`] by implementing [`LocalRule`].

use crate::admission::{Decision, Hook, HookFuture, Request};

/// A hook that decides from the request alone, at once and in this process (never remote).
/// Implementing it makes the type a [`Hook`]; [`LocalRule::decide`] is the decision without
/// the future around it, for tests and benchmarks.
pub trait LocalRule: Send + Sync {
    /// The hook's name, as [`Hook::name`] gives it.
    fn rule_name(&self) -> &str;

    /// The decision for `request`.
    fn decide(&self, request: &Request) -> Decision;
}

impl<R: LocalRule> Hook for R {
    fn name(&self) -> &str {
        self.rule_name()
    }

    fn is_remote(&self) -> bool {
        false
    }

    fn admit<'a>(&'a self, request: &'a Request) -> HookFuture<'a> {
        let decision = self.decide(request);
        Box::pin(async move { Ok(decision) })
    }
}
