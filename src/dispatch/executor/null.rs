//! The `null` executor: accepts every attempt at once and runs nothing, for load tests.

use std::future;

use super::{Admitted, ExecuteFuture, Executor, Launched};

/// Accepts every attempt at once without running it.
///
/// It measures the dispatch path without an executor's cost: `execute` does no I/O and
/// allocates only the boxed future the [`Executor`] trait returns.
#[derive(Debug, Clone, Copy, Default)]
pub struct Null;

impl Executor for Null {
    fn name(&self) -> &'static str {
        "null"
    }

    /// Returns a launched attempt with no steps to follow, ready on the first poll.
    fn execute<'a>(&'a self, _attempt: &'a Admitted) -> ExecuteFuture<'a> {
        Box::pin(future::ready(Ok(Launched::unfollowed())))
    }
}
