//! Running a set of tasks to the end: what the `dispatch` command does.

use std::future::Future;
use std::sync::Arc;

use actix::Actor;
use tokio::time::Instant;

use super::executor::Executor;
use super::task::Task;
use super::token::Minter;
use super::{
    Dispatcher, Drain, DrainReport, Offer, Parts, Pipeline, Settings, ShuttingDown, TaskInstance,
    TaskStore, Ticking,
};
use crate::admission::Chain;
use crate::events::Observer;
use crate::supervise::{self, ChainBuilder};

/// What [`run`] needs besides the tasks.
pub struct Install {
    /// The dispatch settings.
    pub settings: Arc<Settings>,
    /// How hook calls are supervised.
    pub supervise: supervise::Settings,
    /// The hooks, in order, with the change rules.
    pub chain: Chain,
    /// Mints agent tokens.
    pub minter: Arc<dyn Minter>,
    /// Runs admitted attempts.
    pub executor: Arc<dyn Executor>,
    /// Told of every hook call and breaker change.
    pub observer: Arc<dyn Observer>,
}

impl std::fmt::Debug for Install {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Install")
            .field("chain", &self.chain)
            .finish()
    }
}

/// How a run ended.
#[derive(Debug, Clone)]
pub struct Report {
    /// Every task instance, in key order.
    pub instances: Vec<TaskInstance>,
    /// What draining the dispatcher did.
    pub drain: DrainReport,
    /// Whether shutdown stopped the run before every task settled.
    pub interrupted: bool,
}

/// Offers `tasks` to a new dispatcher and ticks until every task instance is settled
/// ([`TaskInstance::is_settled`]) or `shutdown` resolves, then shuts down: drains the
/// dispatcher, then stops the executor (attempts not yet started are handed back, running ones
/// are ended), and returns once every step they sent is written.
///
/// `progress` is called after each check with the number of task instances not yet settled.
///
/// # Errors
/// [`ShuttingDown`] if the dispatcher refused the offer, which a fresh one does not.
///
/// # Panics
/// Outside a running actix system.
pub async fn run(
    install: Install,
    tasks: Vec<Task>,
    shutdown: impl Future<Output = ()>,
    mut progress: impl FnMut(usize),
) -> Result<Report, ShuttingDown> {
    let store = TaskStore::new();
    let chain = ChainBuilder::from_chain(install.chain, install.supervise)
        .observer(install.observer.clone())
        .start();
    let pipeline = Arc::new(Pipeline::new(Parts {
        settings: Arc::clone(&install.settings),
        store: store.clone(),
        chain,
        minter: install.minter,
        executor: install.executor,
        observer: install.observer,
        events: None,
    }));
    let followers = pipeline.followers().clone();
    let interval = install.settings.loop_interval;
    let dispatcher = Dispatcher::new(
        Arc::clone(&pipeline),
        install.settings,
        Ticking::Every(interval),
    )
    .start();
    let offered = dispatcher.send(Offer(tasks)).await;
    offered.map_err(|_| ShuttingDown)??;

    let mut checks = tokio::time::interval_at(Instant::now() + interval, interval);
    tokio::pin!(shutdown);
    let interrupted = loop {
        tokio::select! {
            () = &mut shutdown => break true,
            _ = checks.tick() => {
                let unsettled = store.count_unsettled();
                progress(unsettled);
                if unsettled == 0 {
                    break false;
                }
            }
        }
    };
    let drain = dispatcher.send(Drain).await.unwrap_or_default();
    // Only once no dispatch is in flight can nothing more be launched.
    pipeline.executor().shutdown().await;
    followers.idle().await;
    Ok(Report {
        instances: store.snapshot(),
        drain,
        interrupted,
    })
}
