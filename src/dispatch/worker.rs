//! The admission worker: an actor that drains the bounded dispatch buffer, one attempt at a time.
//!
//! The buffer is a crossbeam channel the dispatcher fills with `try_send`. A worker never blocks
//! its arbiter on it: a [`Wake`] makes an idle worker drain with `try_recv` until the buffer is
//! empty, running each attempt to completion before taking the next. The worker knows nothing
//! of what an attempt is: it runs the [`JobRunner`] it was given, the same pipeline function the
//! synchronous tick runs. A drain is one future however many attempts it runs, so an attempt
//! costs the worker no allocation of its own.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use actix::{
    Actor, ActorContext, ActorFutureExt, AsyncContext, Context, Handler, Message, SpawnHandle,
    WrapFuture,
};
use crossbeam_channel::Receiver;
use tokio::sync::mpsc;

/// What a worker does with each attempt it takes from the buffer.
pub(crate) trait JobRunner: Send + Sync + 'static {
    /// An attempt as the buffer holds it.
    type Job: Send + Unpin + 'static;

    /// Runs `job` to completion.
    fn run(&self, job: Self::Job) -> impl Future<Output = ()> + Send;
}

/// An admission worker draining a buffer of `R::Job` with `R`.
pub(crate) struct AdmissionWorker<R: JobRunner> {
    buffer: Receiver<R::Job>,
    run: Arc<R>,
    stopping: Arc<AtomicBool>,
    draining: Option<SpawnHandle>,
    // Held until the worker stops: whoever waits for every worker to stop waits for these to drop.
    _done: mpsc::Sender<()>,
}

impl<R: JobRunner> std::fmt::Debug for AdmissionWorker<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdmissionWorker")
            .field("buffered", &self.buffer.len())
            .field("busy", &self.draining.is_some())
            .finish()
    }
}

/// Sent by the dispatcher after it put attempts in the buffer. May be sent to a busy worker,
/// which ignores it (it takes the next attempt itself); losing one is harmless while another
/// follows on the next tick.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "()")]
pub(crate) struct Wake;

/// Sent by the dispatcher on shutdown: finish the attempt in hand, take no other, then stop.
/// Always delivered. Cancelling the attempt in hand is the dispatch's own business (its shutdown
/// signal), so that it can hand the attempt back and say so.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "()")]
pub(crate) struct Stop;

impl<R: JobRunner> AdmissionWorker<R> {
    /// A worker that drains `buffer` by calling `run` on each attempt, holding `done` until it
    /// stops.
    pub(crate) fn new(
        buffer: Receiver<R::Job>,
        run: Arc<R>,
        done: mpsc::Sender<()>,
    ) -> AdmissionWorker<R> {
        AdmissionWorker {
            buffer,
            run,
            stopping: Arc::new(AtomicBool::new(false)),
            draining: None,
            _done: done,
        }
    }
}

impl<R: JobRunner> Actor for AdmissionWorker<R> {
    type Context = Context<Self>;
}

impl<R: JobRunner> Handler<Wake> for AdmissionWorker<R> {
    type Result = ();

    fn handle(&mut self, _: Wake, ctx: &mut Context<Self>) {
        if self.draining.is_some() || self.stopping.load(Ordering::Acquire) {
            return;
        }
        let buffer = self.buffer.clone();
        let run = Arc::clone(&self.run);
        let stopping = Arc::clone(&self.stopping);
        let drain = async move {
            while !stopping.load(Ordering::Acquire) {
                let Ok(attempt) = buffer.try_recv() else {
                    break;
                };
                run.run(attempt).await;
            }
        };
        let handle = ctx.spawn(drain.into_actor(self).map(|(), worker, ctx| {
            worker.draining = None;
            if worker.stopping.load(Ordering::Acquire) {
                ctx.stop();
            }
        }));
        self.draining = Some(handle);
    }
}

impl<R: JobRunner> Handler<Stop> for AdmissionWorker<R> {
    type Result = ();

    fn handle(&mut self, _: Stop, ctx: &mut Context<Self>) {
        self.stopping.store(true, Ordering::Release);
        if self.draining.is_none() {
            ctx.stop();
        }
    }
}
