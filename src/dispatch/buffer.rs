//! The bounded dispatch buffer of `buffer_size > 0` and the admission workers that drain it.
//!
//! The dispatcher offers ready attempts to the buffer on each tick; the attempt that finds it
//! full is deferred to the next tick, as Dexaflow's `ErrAtCapacity` is. Each worker runs the
//! same [`Pipeline::dispatch`] the synchronous tick runs. On shutdown, attempts still buffered
//! are handed back as deferred.
//!
//! With `worker_threads` above 0 the workers are spread round robin over that many actix
//! arbiters (threads of their own, each with its own runtime), so that a CPU-bound hook uses
//! more than the dispatcher's core; with 0 they all run on the dispatcher's arbiter.

use std::sync::Arc;

use actix::{Actor, Addr, Arbiter};
use crossbeam_channel::{Receiver, Sender, TrySendError};
use tokio::sync::mpsc;

use super::pipeline::{Pipeline, Turn};
use super::shutdown::Shutdown;
use super::task::{Task, TaskKey};
use super::worker::{AdmissionWorker, JobRunner, Stop, Wake};
use crate::events::Observer;

/// What a tick's offer to the buffer did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Offered {
    /// Attempts put in the buffer.
    pub(super) buffered: usize,
    /// Attempts deferred because the buffer was full: at most one, the one that found it full.
    pub(super) deferred: usize,
}

/// One attempt in the buffer.
#[derive(Debug)]
pub(crate) struct Job {
    key: TaskKey,
    task: Arc<Task>,
}

/// The buffer and the workers that drain it.
pub(super) struct Buffer {
    capacity: usize,
    // Told of the buffer's depth and of the attempts that found it full.
    observer: Arc<dyn Observer>,
    sender: Sender<Job>,
    receiver: Receiver<Job>,
    workers: Vec<Addr<AdmissionWorker<BufferedDispatch>>>,
    // The threads the workers run on; empty when they share the dispatcher's.
    threads: Vec<Arbiter>,
}

impl Drop for Buffer {
    fn drop(&mut self) {
        // A dispatcher dropped without a drain must not leave its threads behind.
        for thread in &self.threads {
            thread.stop();
        }
    }
}

impl Buffer {
    /// A buffer of `capacity` attempts drained by `workers` admission workers (at least one),
    /// spread round robin over `threads` new arbiters, or started on the current arbiter when
    /// `threads` is 0; each worker holds a clone of `done` until it stops.
    ///
    /// # Panics
    /// When the operating system cannot start a thread.
    pub(super) fn start(
        pipeline: &Arc<Pipeline>,
        shutdown: &Shutdown,
        capacity: usize,
        (workers, threads): (usize, usize),
        done: &mpsc::Sender<()>,
    ) -> Buffer {
        let (sender, receiver) = crossbeam_channel::bounded(capacity);
        let observer = pipeline.observer();
        observer.buffer_capacity(capacity);
        let run = Arc::new(BufferedDispatch {
            pipeline: Arc::clone(pipeline),
            observer: Arc::clone(&observer),
            shutdown: shutdown.clone(),
            depth: receiver.clone(),
        });
        let threads: Vec<Arbiter> = (0..threads).map(|_| Arbiter::new()).collect();
        let workers = (0..workers.max(1))
            .map(|index| {
                let worker = AdmissionWorker::new(receiver.clone(), Arc::clone(&run), done.clone());
                match threads.get(index % threads.len().max(1)) {
                    None => worker.start(),
                    Some(thread) => {
                        AdmissionWorker::start_in_arbiter(&thread.handle(), move |_| worker)
                    }
                }
            })
            .collect();
        Buffer {
            capacity,
            observer,
            sender,
            receiver,
            workers,
            threads,
        }
    }

    /// How many attempts the buffer holds now.
    pub(super) fn len(&self) -> usize {
        self.sender.len()
    }

    /// How many attempts a tick takes: one more than fits, so that a full buffer still defers
    /// one attempt and says so.
    pub(super) fn room(&self) -> usize {
        self.capacity.saturating_sub(self.len()) + 1
    }

    /// Puts ready attempts in the buffer until it is full; the attempt that finds it full and
    /// every one after it are handed back for a later tick, as Dexaflow's fairness rule says.
    pub(super) fn offer(&self, pipeline: &Pipeline, ready: Vec<(TaskKey, Arc<Task>)>) -> Offered {
        let mut offered = Offered::default();
        let mut ready = ready.into_iter();
        for (key, task) in ready.by_ref() {
            match self.sender.try_send(Job { key, task }) {
                Ok(()) => offered.buffered += 1,
                Err(TrySendError::Full(job) | TrySendError::Disconnected(job)) => {
                    tracing::debug!(task = %job.key, "dispatch deferred; buffer at capacity, re-offering next tick");
                    self.observer.deferred_at_capacity();
                    pipeline.defer(&job.key, Turn::First);
                    offered.deferred += 1;
                    break;
                }
            }
        }
        for (key, _) in ready {
            pipeline.hand_back(&key);
        }
        self.observer.buffer_depth(self.len());
        if offered.buffered > 0 {
            for worker in &self.workers {
                worker.do_send(Wake);
            }
        }
        offered
    }

    /// Tells every worker to stop after the attempt in hand, and hands back every attempt still
    /// buffered as deferred; returns how many.
    pub(super) fn drain(&self, pipeline: &Pipeline) -> usize {
        for worker in &self.workers {
            worker.do_send(Stop);
        }
        let mut handed_back = 0;
        while let Ok(job) = self.receiver.try_recv() {
            pipeline.defer(&job.key, Turn::InOrder);
            handed_back += 1;
        }
        self.observer.buffer_depth(self.receiver.len());
        handed_back
    }

    /// The workers' threads, for [`join`] once every worker has stopped.
    pub(super) fn take_threads(&mut self) -> Vec<Arbiter> {
        std::mem::take(&mut self.threads)
    }
}

/// Stops the workers' `threads` and waits for each to end, off the caller's thread.
pub(super) async fn join(threads: Vec<Arbiter>) {
    if threads.is_empty() {
        return;
    }
    let joined = tokio::task::spawn_blocking(move || {
        for thread in threads {
            thread.stop();
            if thread.join().is_err() {
                tracing::error!("an admission worker thread panicked");
            }
        }
    })
    .await;
    if joined.is_err() {
        tracing::error!("joining the admission worker threads failed");
    }
}

/// What an admission worker does with a job: the pipeline's dispatch, as on a synchronous tick.
pub(super) struct BufferedDispatch {
    pipeline: Arc<Pipeline>,
    observer: Arc<dyn Observer>,
    shutdown: Shutdown,
    // The buffer's receiving end, read only for its depth.
    depth: Receiver<Job>,
}

impl JobRunner for BufferedDispatch {
    type Job = Job;

    async fn run(&self, job: Job) {
        self.observer.buffer_depth(self.depth.len());
        if self.shutdown.is_fired() {
            self.pipeline.defer(&job.key, Turn::InOrder);
            return;
        }
        self.observer.worker_busy(true);
        self.pipeline
            .dispatch(&job.key, &job.task, &self.shutdown)
            .await;
        self.observer.worker_busy(false);
    }
}
