//! The deadline of one hook call.

use std::future::Future;
use std::time::Duration;

use crate::admission::{Decision, HookError};

/// Bounds `call` by `limit`: past it, the call is dropped and the result is
/// [`HookError::Elapsed`].
///
/// tokio polls the call before the timer, so a call that finishes on the same poll as the
/// deadline wins the tie.
///
/// # Cancel safety
/// Dropping the returned future drops the call; nothing is reported.
pub async fn timeout<F>(limit: Duration, call: F) -> Result<Decision, HookError>
where
    F: Future<Output = Result<Decision, HookError>>,
{
    tokio::time::timeout(limit, call)
        .await
        .unwrap_or(Err(HookError::Elapsed(limit)))
}
