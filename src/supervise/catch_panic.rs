//! Panic recovery around one hook call: a panicking hook becomes [`HookError::Panicked`] and
//! never unwinds into a worker, the dispatcher or a breaker.

use std::any::Any;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::admission::{Decision, HookError, HookFuture};

/// Calls `start` to build the hook's future and drives it, turning a panic in either step into
/// [`HookError::Panicked`] with the panic message.
///
/// A hook may panic while building its future (in `admit` itself) or while it is polled; both
/// are caught.
pub(crate) fn catch_panic<'a>(start: impl FnOnce() -> HookFuture<'a>) -> CatchPanic<'a> {
    match catch_unwind(AssertUnwindSafe(start)) {
        Ok(inner) => CatchPanic {
            inner: Some(inner),
            early: None,
        },
        Err(payload) => CatchPanic {
            inner: None,
            early: Some(panic_message(payload.as_ref())),
        },
    }
}

/// The future [`catch_panic`] returns.
pub(crate) struct CatchPanic<'a> {
    inner: Option<HookFuture<'a>>,
    early: Option<String>,
}

impl std::fmt::Debug for CatchPanic<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CatchPanic")
            .field("panicked_early", &self.early)
            .finish()
    }
}

impl Future for CatchPanic<'_> {
    type Output = Result<Decision, HookError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if let Some(message) = self.early.take() {
            return Poll::Ready(Err(HookError::Panicked(message)));
        }
        let Some(inner) = self.inner.as_mut() else {
            return Poll::Ready(Err(HookError::Panicked(
                "polled after completion".to_owned(),
            )));
        };
        match catch_unwind(AssertUnwindSafe(|| inner.as_mut().poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(result)) => {
                self.inner = None;
                Poll::Ready(result)
            }
            Err(payload) => {
                // The hook's future is in an unknown state after a panic: drop it, never poll it again.
                self.inner = None;
                Poll::Ready(Err(HookError::Panicked(panic_message(payload.as_ref()))))
            }
        }
    }
}

/// The text of a panic payload: the `&str` or `String` a `panic!` carries, or a placeholder.
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic without a message".to_owned()
    }
}
