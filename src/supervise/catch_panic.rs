//! Panic recovery around one call, in place: a panicking hook becomes
//! [`crate::admission::HookError::Panicked`] and never unwinds into a worker, the dispatcher or a
//! breaker; a panicking service handler of the server is answered 500 and never ends its
//! connection.

use std::any::Any;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::task::{Context, Poll};

/// Calls `start` to build a future and drives it in place, on the caller's task; a panic in
/// either step ends the future with `Err` and the panic message, instead of unwinding into
/// whoever polls it.
///
/// A hook (or a service's handler) may panic while building its future (in `admit` itself,
/// before its first `.await`) or while it is polled; both are caught. No task is spawned.
pub(crate) fn catch_panic<F: Future + Unpin>(start: impl FnOnce() -> F) -> CatchPanic<F> {
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

/// The future [`catch_panic`] returns: the inner future's output, or `Err` with the message of
/// its panic.
pub(crate) struct CatchPanic<F> {
    inner: Option<F>,
    early: Option<String>,
}

impl<F> std::fmt::Debug for CatchPanic<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CatchPanic")
            .field("panicked_early", &self.early)
            .finish()
    }
}

impl<F: Future + Unpin> Future for CatchPanic<F> {
    type Output = Result<F::Output, String>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if let Some(message) = self.early.take() {
            return Poll::Ready(Err(message));
        }
        let Some(inner) = self.inner.as_mut() else {
            return Poll::Ready(Err("polled after completion".to_owned()));
        };
        match catch_unwind(AssertUnwindSafe(|| Pin::new(inner).poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(output)) => {
                self.inner = None;
                Poll::Ready(Ok(output))
            }
            Err(payload) => {
                // The future is in an unknown state after a panic: drop it, never poll it again.
                self.inner = None;
                Poll::Ready(Err(panic_message(payload.as_ref())))
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
