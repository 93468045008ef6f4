//! The `scheduler.*` section: the tick and dispatch (buffer, workers, their
//! threads, retry window, drain).

use std::ops::RangeInclusive;
use std::time::Duration;

use super::keys::{
    BUFFER_SIZE, DRAIN_TIMEOUT, LOOP_INTERVAL_MS, RETRY_WINDOW, WORKER_THREADS, WORKERS,
};
use super::reader::{Reader, as_u64, to_usize};
use crate::dispatch::settings::{
    DEFAULT_BUFFER_SIZE, DEFAULT_DRAIN_TIMEOUT, DEFAULT_LOOP_INTERVAL_MS, DEFAULT_RETRY_WINDOW,
    DEFAULT_WORKER_THREADS, DEFAULT_WORKERS, MAX_BUFFER_SIZE, MAX_WORKER_THREADS, MAX_WORKERS,
    effective_workers,
};

/// The values `scheduler.dispatch.buffer_size` (and `loadtest --buffer-size`) may take.
pub(crate) const BUFFER_SIZES: RangeInclusive<u64> = 0..=MAX_BUFFER_SIZE as u64;

/// The values `scheduler.dispatch.workers` (and `loadtest --workers`) may take.
pub(crate) const WORKER_COUNTS: RangeInclusive<u64> = 0..=MAX_WORKERS as u64;

/// The values `scheduler.dispatch.worker_threads` (and `loadtest --worker-threads`) may take.
pub(crate) const WORKER_THREAD_COUNTS: RangeInclusive<u64> = 0..=MAX_WORKER_THREADS as u64;

/// `scheduler.*` as read, for [`crate::dispatch::Settings`].
pub(super) struct Scheduler {
    pub(super) loop_interval: Duration,
    pub(super) buffer_size: usize,
    /// Floored to 1.
    pub(super) workers: usize,
    pub(super) worker_threads: usize,
    pub(super) retry_window: Duration,
    pub(super) drain_timeout: Duration,
}

impl Reader {
    pub(super) fn scheduler(&mut self) -> Scheduler {
        let loop_interval_ms =
            self.integer(LOOP_INTERVAL_MS, DEFAULT_LOOP_INTERVAL_MS, 1..=u64::MAX);
        let buffer_size = self.integer(BUFFER_SIZE, as_u64(DEFAULT_BUFFER_SIZE), BUFFER_SIZES);
        let workers = self.integer(WORKERS, as_u64(DEFAULT_WORKERS), WORKER_COUNTS);
        let worker_threads = self.integer(
            WORKER_THREADS,
            as_u64(DEFAULT_WORKER_THREADS),
            WORKER_THREAD_COUNTS,
        );
        let retry_window =
            self.duration(RETRY_WINDOW, DEFAULT_RETRY_WINDOW, Duration::from_nanos(1));
        let drain_timeout = self.duration(DRAIN_TIMEOUT, DEFAULT_DRAIN_TIMEOUT, Duration::ZERO);
        Scheduler {
            loop_interval: Duration::from_millis(loop_interval_ms),
            buffer_size: to_usize(buffer_size),
            workers: effective_workers(to_usize(workers)),
            worker_threads: to_usize(worker_threads),
            retry_window,
            drain_timeout,
        }
    }
}
