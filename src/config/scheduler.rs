//! The `scheduler.*` section: the tick and dispatch (buffer, workers, their
//! threads, retry window, drain).

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
        let buffer_size = self.integer(
            BUFFER_SIZE,
            as_u64(DEFAULT_BUFFER_SIZE),
            0..=as_u64(MAX_BUFFER_SIZE),
        );
        let workers = self.integer(WORKERS, as_u64(DEFAULT_WORKERS), 0..=as_u64(MAX_WORKERS));
        let worker_threads = self.integer(
            WORKER_THREADS,
            as_u64(DEFAULT_WORKER_THREADS),
            0..=as_u64(MAX_WORKER_THREADS),
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
