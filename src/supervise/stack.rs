//! The one place that fixes the order of supervision around a hook call:
//! breaker gate, then timeout, then panic recovery, then the hook.

use std::sync::Arc;
use std::time::Duration;

use super::{Gate, catch_panic, timeout};
use crate::admission::{Decision, Hook, HookError, Request};

/// A hook with its breaker gate.
#[derive(Clone)]
pub struct Supervised {
    hook: Arc<dyn Hook>,
    gate: Gate,
}

impl std::fmt::Debug for Supervised {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Supervised")
            .field("hook", &self.hook.name())
            .field("gate", &self.gate)
            .finish()
    }
}

impl Supervised {
    /// Puts `hook` behind `gate`.
    pub fn new(hook: Arc<dyn Hook>, gate: Gate) -> Supervised {
        Supervised { hook, gate }
    }

    /// The hook's breaker gate.
    pub fn gate(&self) -> &Gate {
        &self.gate
    }

    /// Calls the hook once under supervision, within `limit`.
    ///
    /// # Errors
    /// [`HookError::Skipped`] when the breaker is open (the hook is not called and no time is
    /// spent), [`HookError::Elapsed`] past `limit`, [`HookError::Panicked`] when the hook panics,
    /// or the hook's own [`HookError::Failed`]. The breaker counts the last three.
    ///
    /// # Cancel safety
    /// Dropping the future drops the hook call and counts nothing toward the breaker.
    pub async fn call(&self, request: &Request, limit: Duration) -> Result<Decision, HookError> {
        let pass = self.gate.enter()?;
        let result = timeout(
            limit,
            catch_panic(|| self.hook.admit_within(request, limit)),
        )
        .await;
        pass.finish(result.is_err());
        result
    }
}
