//! Locking that outlives a panic elsewhere.
//!
//! Each mutex in the crate guards plain data that is whole at every unlock (a task row, a
//! counter shard, a cached gauge, a random generator), so a thread that panicked while holding
//! one left nothing half-written that matters. Taking the data back from a poisoned lock keeps
//! one panicking hook from turning every later call into a second panic.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks `mutex`, taking the data back if a panic poisoned it.
pub(crate) fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
