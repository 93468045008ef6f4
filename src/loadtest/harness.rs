//! A run from start to report: builds the dispatcher a [`Plan`] stands for, lets the driver
//! offer attempts open loop and follow each to its final disposition, drains the dispatcher and
//! has the ledger account for every attempt once.

use std::sync::Arc;
use std::time::Duration;

use super::LoadTestError;
use super::counter::Counter;
use super::cpu::process_cpu_time;
use super::driver::Driver;
use super::plan::Plan;
use super::report::Report;
use super::timer::TimerThread;
use crate::dispatch::Shutdown;
use crate::events::{Fanout, Observer};

/// A [`Plan`] and how to run it.
#[derive(Clone, Default)]
pub struct Options {
    /// What to run.
    pub plan: Plan,
    /// Whether to draw a progress bar on stderr (when stderr is a terminal).
    pub show_progress: bool,
    /// Told of every hook call, breaker change and buffer event besides the harness's own
    /// counts: the metrics exporter, say.
    pub observer: Option<Arc<dyn Observer>>,
    /// When fired (Ctrl-C, say), the run offers nothing more, drains the dispatcher and
    /// reports what it measured so far, marked [`Report::interrupted`].
    pub stop: Option<Shutdown>,
    /// The most attempts the run offers, whatever its plan: reaching it first ends the run as
    /// a stop does, the report marked [`Report::cut_at`]. `main` sets it from the memory
    /// available ([`super::memory::attempts_limit`]); `None` for no limit.
    pub attempts_limit: Option<u64>,
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("plan", &self.plan)
            .field("show_progress", &self.show_progress)
            .field("observer", &self.observer.is_some())
            .field("stop", &self.stop.as_ref().map(Shutdown::is_fired))
            .field("attempts_limit", &self.attempts_limit)
            .finish()
    }
}

/// Runs `options` in a new actix system on a thread of its own and returns the report as soon
/// as it is ready.
///
/// The thread then tears the system down, which frees the task store: seconds for a million
/// task instances. The caller does not wait for that, so a process that exits after printing
/// the report does not either; a caller that runs again at once shares the CPU with it.
///
/// # Errors
/// A [`LoadTestError`] when the plan is invalid, the thread could not start or stopped without
/// a report, or the dispatcher stopped. A run that lost attempts still returns its report: check
/// [`Report::check_conservation`].
pub fn run_blocking(options: Options) -> Result<Report, LoadTestError> {
    options.plan.validate()?;
    let (report_tx, report_rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("loadtest".to_owned())
        .spawn(move || {
            let system = actix::System::new();
            let report = system.block_on(run(options));
            // The caller may have gone; the system is torn down either way.
            let _ = report_tx.send(report);
            drop(system);
        })
        .map_err(LoadTestError::Thread)?;
    report_rx.recv().map_err(|_| LoadTestError::Aborted)?
}

/// Runs `options` on the current actix system: a dispatcher assembled by the front door
/// ([`Install`](crate::install::Install)) as any other, ticked by the harness, with the plan's hooks under supervision
/// (breaker actors included), a task store sized for the run and the `null` executor.
///
/// The retry window is zero, so that a held or unavailable attempt fails at its first offer
/// instead of being offered again for 15 minutes; the report counts those as `held` and
/// `unavailable`.
///
/// # Errors
/// As [`run_blocking`], and [`LoadTestError::Install`] outside a running actix system.
pub async fn run(options: Options) -> Result<Report, LoadTestError> {
    let plan = options.plan;
    plan.validate()?;
    let counter = Arc::new(Counter::new());
    let observer: Arc<dyn Observer> = match options.observer {
        Some(extra) => Arc::new(Fanout(vec![counter.clone(), extra])),
        None => counter.clone(),
    };
    let timer = plan.hook_timer_thread();
    let install = plan.install(timer.as_ref()).observer(observer);
    // Never sized past the attempts the run may offer.
    let most = options.attempts_limit.map_or(usize::MAX, |limit| {
        usize::try_from(limit).unwrap_or(usize::MAX)
    });
    let install = match plan.store_rows() {
        Some(rows) => install.expected_tasks(rows.min(most)),
        None => install,
    };
    let handle = install.start().map_err(LoadTestError::Install)?;

    let cpu_before = dispatch_cpu_time(timer.as_ref());
    let mut driver = Driver::new(&plan, handle, options.show_progress, options.attempts_limit);
    let interrupted = driver.drive(options.stop).await;
    driver.drain().await;
    let cpu = cpu_before
        .zip(dispatch_cpu_time(timer.as_ref()))
        .map(|(before, after)| after.saturating_sub(before));
    driver.finish_progress();
    let report = driver
        .ledger()
        .report(plan, driver.handle(), &counter, cpu, driver.wakes());
    Ok(Report {
        interrupted,
        cut_at: driver.cut_at(),
        ..report
    })
}

/// The CPU time of the process but for the hooks' `timer` thread, which stands for the hooks'
/// own machines (see [`super::timer`]).
fn dispatch_cpu_time(timer: Option<&TimerThread>) -> Option<Duration> {
    let process = process_cpu_time()?;
    match timer {
        Some(timer) => Some(process.saturating_sub(timer.cpu_time()?)),
        None => Some(process),
    }
}
