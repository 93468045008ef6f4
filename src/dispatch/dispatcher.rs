//! The dispatcher actor: offers ready attempts on each tick, synchronously or through the
//! bounded buffer its admission workers drain, and drains them on shutdown.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use actix::{
    Actor, ActorFutureExt, AsyncContext, Context, Handler, Message, ResponseActFuture,
    ResponseFuture, WrapFuture,
};
use tokio::sync::mpsc;

use super::buffer::{self, Buffer};
use super::pipeline::Pipeline;
use super::shutdown::{self, Shutdown, Trigger};
use super::task::Task;

/// When the dispatcher ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ticking {
    /// Every `scheduler.loop_interval_ms`.
    Every(Duration),
    /// Only when sent [`Tick`]; for tests and the load-test harness.
    Manual,
}

/// The dispatcher: owns the tick, the buffer and the workers.
pub struct Dispatcher {
    pipeline: Arc<Pipeline>,
    ticking: Ticking,
    buffer: Option<Buffer>,
    tick_running: bool,
    stopping: Arc<AtomicBool>,
    trigger: Trigger,
    shutdown: Shutdown,
    // Cloned into every worker and every running tick; drain waits for all clones to drop.
    done_tx: Option<mpsc::Sender<()>>,
    done_rx: Option<mpsc::Receiver<()>>,
}

impl std::fmt::Debug for Dispatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dispatcher")
            .field("ticking", &self.ticking)
            .field("buffered", &self.buffer.as_ref().map(Buffer::len))
            .field("stopping", &self.stopping.load(Ordering::Relaxed))
            .finish()
    }
}

/// Adds tasks to the store as scheduled. Sent by whoever feeds the dispatcher; answered with how
/// many were new, or an error once shutdown began.
#[derive(Debug, Message)]
#[rtype(result = "Result<usize, ShuttingDown>")]
pub struct Offer(pub Vec<Task>);

/// The dispatcher no longer takes offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the dispatcher is shutting down and takes no more offers")]
pub struct ShuttingDown;

/// Runs one tick now. Answered once the tick's synchronous dispatches are done (buffered: once
/// its attempts are in the buffer).
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "TickReport")]
pub struct Tick;

/// What a tick did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TickReport {
    /// Attempts dispatched on the tick or put in the buffer.
    pub offered: usize,
    /// Attempts deferred because the buffer was full (at most one per tick: the rest of the
    /// tick then dispatches nothing).
    pub deferred: usize,
    /// Whether the tick was skipped because the previous one was still running.
    pub skipped: bool,
}

/// Stops the dispatcher: no more offers or ticks; attempts in flight get `drain_timeout` to
/// finish, then are cancelled; attempts still in the buffer are handed back as deferred.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "DrainReport")]
pub struct Drain;

/// Stops the admission workers' threads and waits for them, once the executor has stopped:
/// what the executor and the followers of launched attempts spawned while the workers ran on
/// those threads (an attempt's process, its steps) runs there until then. Answered at once
/// when the workers share the dispatcher's thread.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "()")]
pub struct JoinThreads;

/// What draining did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DrainReport {
    /// Buffered attempts handed back, still scheduled.
    pub handed_back: usize,
    /// Whether attempts in flight outlived the drain timeout and were cancelled.
    pub cancelled_in_flight: bool,
}

impl Dispatcher {
    /// A dispatcher running `pipeline` under its settings (the buffer, the workers, the drain
    /// timeout), ticking as `ticking` says.
    pub fn new(pipeline: Arc<Pipeline>, ticking: Ticking) -> Dispatcher {
        let (trigger, shutdown) = shutdown::signal();
        let (done_tx, done_rx) = mpsc::channel(1);
        Dispatcher {
            pipeline,
            ticking,
            buffer: None,
            tick_running: false,
            stopping: Arc::new(AtomicBool::new(false)),
            trigger,
            shutdown,
            done_tx: Some(done_tx),
            done_rx: Some(done_rx),
        }
    }

    fn start_workers(&mut self) {
        let settings = self.pipeline.settings();
        if settings.buffer_size == 0 {
            return;
        }
        let done = self
            .done_tx
            .as_ref()
            .expect("workers start before any drain");
        self.buffer = Some(Buffer::start(
            &self.pipeline,
            &self.shutdown,
            settings.buffer_size,
            (settings.workers, settings.worker_threads),
            done,
        ));
    }

    fn tick(&mut self) -> ResponseActFuture<Self, TickReport> {
        if self.tick_running || self.stopping.load(Ordering::Acquire) {
            return Box::pin(actix::fut::ready(TickReport {
                skipped: true,
                ..TickReport::default()
            }));
        }
        if let Some(buffer) = &self.buffer {
            let ready = self.pipeline.take_ready(buffer.room());
            let offered = buffer.offer(&self.pipeline, ready);
            return Box::pin(actix::fut::ready(TickReport {
                offered: offered.buffered,
                deferred: offered.deferred,
                skipped: false,
            }));
        }
        let ready = self.pipeline.take_ready(usize::MAX);
        self.tick_running = true;
        let pipeline = Arc::clone(&self.pipeline);
        let shutdown = self.shutdown.clone();
        let stopping = Arc::clone(&self.stopping);
        let done = self.done_tx.clone();
        let run = async move {
            let _done = done;
            let mut report = TickReport::default();
            let mut ready = ready.into_iter();
            for (key, task) in ready.by_ref() {
                if stopping.load(Ordering::Acquire) {
                    pipeline.hand_back(&key);
                    break;
                }
                report.offered += 1;
                pipeline.dispatch(&key, &task, &shutdown).await;
            }
            for (key, _) in ready {
                pipeline.hand_back(&key);
            }
            report
        };
        Box::pin(run.into_actor(self).map(|report, dispatcher, _| {
            dispatcher.tick_running = false;
            report
        }))
    }
}

impl Actor for Dispatcher {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        self.start_workers();
        if let Ticking::Every(interval) = self.ticking {
            ctx.run_interval(interval, |dispatcher, ctx| {
                let tick = dispatcher.tick().map(|_, _, _| ());
                ctx.spawn(tick);
            });
        }
    }
}

impl Handler<Offer> for Dispatcher {
    type Result = Result<usize, ShuttingDown>;

    fn handle(&mut self, Offer(tasks): Offer, _: &mut Context<Self>) -> Self::Result {
        if self.stopping.load(Ordering::Acquire) {
            return Err(ShuttingDown);
        }
        Ok(self.pipeline.schedule(tasks))
    }
}

impl Handler<Tick> for Dispatcher {
    type Result = ResponseActFuture<Self, TickReport>;

    fn handle(&mut self, _: Tick, _: &mut Context<Self>) -> Self::Result {
        self.tick()
    }
}

impl Handler<JoinThreads> for Dispatcher {
    type Result = ResponseFuture<()>;

    fn handle(&mut self, _: JoinThreads, _: &mut Context<Self>) -> Self::Result {
        let threads = self
            .buffer
            .as_mut()
            .map(Buffer::take_threads)
            .unwrap_or_default();
        Box::pin(buffer::join(threads))
    }
}

impl Handler<Drain> for Dispatcher {
    type Result = ResponseActFuture<Self, DrainReport>;

    fn handle(&mut self, _: Drain, _: &mut Context<Self>) -> Self::Result {
        self.stopping.store(true, Ordering::Release);
        let mut report = DrainReport::default();
        if let Some(buffer) = &self.buffer {
            report.handed_back = buffer.drain(&self.pipeline);
        }
        // Only the workers and a running tick hold `done` now: it closes when all have finished.
        self.done_tx = None;
        let Some(mut done) = self.done_rx.take() else {
            return Box::pin(actix::fut::ready(report));
        };
        let drain_timeout = self.pipeline.settings().drain_timeout;
        let wait = async move {
            let finished = tokio::time::timeout(drain_timeout, done.recv())
                .await
                .is_ok();
            (finished, done)
        };
        Box::pin(
            wait.into_actor(self)
                .then(move |(finished, mut done), dispatcher, _| {
                    if !finished {
                        // Every dispatch in flight sees the signal, hands its attempt back and reports
                        // it cancelled; the workers then stop on their own.
                        report.cancelled_in_flight = true;
                        dispatcher.trigger.fire();
                    }
                    async move {
                        if !finished {
                            done.recv().await;
                        }
                        report
                    }
                    .into_actor(dispatcher)
                }),
        )
    }
}
