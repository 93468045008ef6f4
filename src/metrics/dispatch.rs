//! The names of the hook and dispatch metrics and their handles: [`Metrics`], the observer
//! supervision and the dispatcher report to.

use std::sync::Mutex;
use std::time::Duration;

use metrics::{
    Counter, Gauge, Histogram, Unit, counter, describe_counter, describe_gauge, describe_histogram,
    gauge, histogram,
};

use crate::events::Outcome;
use crate::events::{BreakerEvents, BreakerState, BufferEvents, HookEvents};
use crate::sync::lock;

/// `dexaflow_admission_outcomes_total{outcome}`: hook calls by outcome.
pub const OUTCOMES_TOTAL: &str = "dexaflow_admission_outcomes_total";
/// `dexaflow_admission_duration_seconds{outcome}`: the latency of one hook call.
pub const DURATION_SECONDS: &str = "dexaflow_admission_duration_seconds";
/// `dexaflow_admission_chain_duration_seconds`: the latency of a whole chain for one attempt.
pub const CHAIN_DURATION_SECONDS: &str = "dexaflow_admission_chain_duration_seconds";
/// `dexaflow_admission_breaker_state{hook}`: 0 closed, 1 half-open, 2 open.
pub const BREAKER_STATE: &str = "dexaflow_admission_breaker_state";
/// `dexaflow_dispatch_queue_depth`: attempts waiting in the dispatch buffer.
pub const QUEUE_DEPTH: &str = "dexaflow_dispatch_queue_depth";
/// `dexaflow_dispatch_buffer_capacity`: how many attempts the dispatch buffer holds at most.
pub const BUFFER_CAPACITY: &str = "dexaflow_dispatch_buffer_capacity";
/// `dexaflow_dispatch_at_capacity_total`: attempts deferred because the buffer was full.
pub const AT_CAPACITY_TOTAL: &str = "dexaflow_dispatch_at_capacity_total";
/// `dexaflow_dispatch_workers_busy`: admission workers running an attempt.
pub const WORKERS_BUSY: &str = "dexaflow_dispatch_workers_busy";

/// The label of the outcome metrics; its values are [`Outcome::as_str`].
pub const OUTCOME_LABEL: &str = "outcome";
/// The label of the breaker gauge; its values are hook names.
pub const HOOK_LABEL: &str = "hook";

/// The upper bounds, in seconds, of both latency histograms: 50µs to 5s.
///
/// A hook's timeout defaults to 500ms and the chain budget to 2s, so the top buckets catch
/// calls that ran into either.
pub const LATENCY_BUCKETS: [f64; 16] = [
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0,
];

/// The cached metric handles, one per metric and label value, reported to as an
/// [`crate::events::Observer`].
///
/// Build it once with [`super::install`] (or [`Metrics::register`] under a recorder of your own) and
/// pass it to supervision and the dispatcher as an `Arc<dyn Observer>`.
pub struct Metrics {
    /// `outcomes[outcome as usize]`, built for every [`Outcome::ALL`] so that every outcome is
    /// exported from the start, at zero, and a dashboard's query never finds no series.
    outcomes: [Counter; Outcome::ALL.len()],
    /// Hook-call latency, indexed like `outcomes`.
    durations: [Histogram; Outcome::ALL.len()],
    chain_duration: Histogram,
    /// One gauge per chain position, with the hook name it was built for. Breakers change state
    /// rarely, so a lock here costs nothing the hot path pays.
    breakers: Mutex<Vec<Option<(String, Gauge)>>>,
    /// The dispatch buffer's metrics; `None` in a process without a dispatcher (`serve`),
    /// where they would only ever read 0.
    dispatch: Option<DispatchGauges>,
}

/// The dispatch buffer's metric handles.
struct DispatchGauges {
    queue_depth: Gauge,
    buffer_capacity: Gauge,
    at_capacity: Counter,
    workers_busy: Gauge,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hooks = self.breakers.lock().map_or(0, |breakers| breakers.len());
        f.debug_struct("Metrics").field("hooks", &hooks).finish()
    }
}

impl Metrics {
    /// Describes every metric (help text and unit) and builds its handles with the recorder in
    /// effect: the global one after [`super::install`], or the one `metrics::with_local_recorder` sets.
    ///
    /// Every outcome's counter and histogram and every gauge exist from here on, at zero.
    pub fn register() -> Metrics {
        Metrics {
            dispatch: Some(DispatchGauges {
                queue_depth: gauge!(QUEUE_DEPTH),
                buffer_capacity: gauge!(BUFFER_CAPACITY),
                at_capacity: counter!(AT_CAPACITY_TOTAL),
                workers_busy: gauge!(WORKERS_BUSY),
            }),
            ..Metrics::register_hooks()
        }
    }

    /// Like [`Metrics::register`] without the `dexaflow_dispatch_*` metrics: for a process that
    /// runs hooks but no dispatcher (`serve`), where they would only ever read 0. Buffer events
    /// reported to it are dropped.
    pub(crate) fn register_hooks() -> Metrics {
        describe();
        Metrics {
            outcomes: Outcome::ALL
                .map(|outcome| counter!(OUTCOMES_TOTAL, OUTCOME_LABEL => outcome.as_str())),
            durations: Outcome::ALL
                .map(|outcome| histogram!(DURATION_SECONDS, OUTCOME_LABEL => outcome.as_str())),
            chain_duration: histogram!(CHAIN_DURATION_SECONDS),
            breakers: Mutex::new(Vec::new()),
            dispatch: None,
        }
    }

    fn count(&self, outcome: Outcome, elapsed: Duration) {
        // `Outcome` is fieldless and `ALL` lists it in declaration order, so the discriminant
        // is the index (a unit test holds the two together).
        let index = outcome as usize;
        self.outcomes[index].increment(1);
        self.durations[index].record(elapsed);
    }
}

impl HookEvents for Metrics {
    /// Builds the breaker gauge of each hook, in chain order, at 0 (closed), so that the
    /// dashboard shows every hook before its breaker first changes. A breaker of a position not
    /// named here gets its gauge when it first changes.
    fn chain_started(&self, hooks: &[&str]) {
        // A panic while holding the lock leaves only a half-written gauge cache behind.
        let mut breakers = lock(&self.breakers);
        breakers.clear();
        for hook in hooks {
            let gauge = breaker_gauge(hook);
            gauge.set(f64::from(BreakerState::Closed as u8));
            breakers.push(Some(((*hook).to_owned(), gauge)));
        }
    }

    /// Counts by outcome only: a hook's name would multiply the series by the chain's length
    /// for no panel that shows it (the breaker gauge is the one per-hook metric).
    fn hook_call(&self, _hook: &str, outcome: Outcome, elapsed: Duration) {
        self.count(outcome, elapsed);
    }

    fn chain_finished(&self, elapsed: Duration) {
        self.chain_duration.record(elapsed);
    }

    fn chain_cancelled(&self, elapsed: Duration) {
        self.count(Outcome::Cancelled, elapsed);
    }
}

impl BreakerEvents for Metrics {
    fn breaker_changed(&self, position: usize, hook: &str, state: BreakerState) {
        let mut breakers = lock(&self.breakers);
        if breakers.len() <= position {
            breakers.resize_with(position + 1, || None);
        }
        let slot = &mut breakers[position];
        if !matches!(slot, Some((name, _)) if name == hook) {
            *slot = Some((hook.to_owned(), breaker_gauge(hook)));
        }
        if let Some((_, gauge)) = slot {
            gauge.set(f64::from(state as u8));
        }
    }
}

impl BufferEvents for Metrics {
    fn buffer_capacity(&self, capacity: usize) {
        if let Some(dispatch) = &self.dispatch {
            dispatch.buffer_capacity.set(capacity as f64);
        }
    }

    fn buffer_depth(&self, depth: usize) {
        if let Some(dispatch) = &self.dispatch {
            dispatch.queue_depth.set(depth as f64);
        }
    }

    fn deferred_at_capacity(&self) {
        if let Some(dispatch) = &self.dispatch {
            dispatch.at_capacity.increment(1);
        }
    }

    fn worker_busy(&self, busy: bool) {
        let Some(dispatch) = &self.dispatch else {
            return;
        };
        if busy {
            dispatch.workers_busy.increment(1.0);
        } else {
            dispatch.workers_busy.decrement(1.0);
        }
    }
}

fn breaker_gauge(hook: &str) -> Gauge {
    gauge!(BREAKER_STATE, HOOK_LABEL => hook.to_owned())
}

fn describe() {
    describe_counter!(
        OUTCOMES_TOTAL,
        Unit::Count,
        "Admission hook calls by outcome; a fail-open call counts under its cause and as fail_open"
    );
    describe_histogram!(
        DURATION_SECONDS,
        Unit::Seconds,
        "Latency of one supervised admission hook call, by outcome"
    );
    describe_histogram!(
        CHAIN_DURATION_SECONDS,
        Unit::Seconds,
        "Latency of the whole admission chain for one attempt"
    );
    describe_gauge!(
        BREAKER_STATE,
        Unit::Count,
        "State of each admission hook's breaker: 0 closed, 1 half-open, 2 open"
    );
    describe_gauge!(
        QUEUE_DEPTH,
        Unit::Count,
        "Attempts waiting in the bounded dispatch buffer"
    );
    describe_gauge!(
        BUFFER_CAPACITY,
        Unit::Count,
        "Attempts the bounded dispatch buffer holds at most; 0 for synchronous dispatch"
    );
    describe_counter!(
        AT_CAPACITY_TOTAL,
        Unit::Count,
        "Attempts deferred to a later tick because the dispatch buffer was full"
    );
    describe_gauge!(
        WORKERS_BUSY,
        Unit::Count,
        "Admission workers running an attempt"
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::testing::{recorder, sample};

    #[test]
    fn outcome_discriminants_index_all_outcomes() {
        for (index, outcome) in Outcome::ALL.into_iter().enumerate() {
            assert_eq!(outcome as usize, index, "{outcome:?}");
        }
    }

    #[test]
    fn every_outcome_is_exported_at_zero_from_the_start() {
        let recorder = recorder();
        let _metrics = metrics::with_local_recorder(&recorder, Metrics::register);
        let scrape = recorder.handle().render();
        for outcome in Outcome::ALL {
            let series = format!("{OUTCOMES_TOTAL}{{outcome=\"{}\"}}", outcome.as_str());
            assert_eq!(sample(&scrape, &series), Some(0.0), "{series} in\n{scrape}");
        }
        for gauge in [
            QUEUE_DEPTH,
            BUFFER_CAPACITY,
            WORKERS_BUSY,
            AT_CAPACITY_TOTAL,
        ] {
            assert_eq!(sample(&scrape, gauge), Some(0.0), "{gauge} in\n{scrape}");
        }
    }

    #[test]
    fn a_hook_call_counts_its_outcome_and_records_its_latency_in_the_buckets() {
        let recorder = recorder();
        let metrics = metrics::with_local_recorder(&recorder, Metrics::register);
        metrics.hook_call("freeze", Outcome::Hold, Duration::from_micros(70));
        metrics.hook_call("freeze", Outcome::Hold, Duration::from_millis(3));
        metrics.chain_finished(Duration::from_millis(4));
        let scrape = recorder.handle().render();
        assert_eq!(
            sample(
                &scrape,
                r#"dexaflow_admission_outcomes_total{outcome="hold"}"#
            ),
            Some(2.0)
        );
        assert_eq!(
            sample(
                &scrape,
                r#"dexaflow_admission_duration_seconds_bucket{outcome="hold",le="0.0001"}"#
            ),
            Some(1.0),
            "{scrape}"
        );
        assert_eq!(
            sample(
                &scrape,
                r#"dexaflow_admission_duration_seconds_bucket{outcome="hold",le="0.005"}"#
            ),
            Some(2.0)
        );
        assert_eq!(
            sample(&scrape, "dexaflow_admission_chain_duration_seconds_count"),
            Some(1.0)
        );
        assert_eq!(
            sample(
                &scrape,
                r#"dexaflow_admission_outcomes_total{outcome="admit"}"#
            ),
            Some(0.0)
        );
    }

    #[test]
    fn every_metric_has_help_text() {
        let recorder = recorder();
        let metrics = metrics::with_local_recorder(&recorder, || {
            let metrics = Metrics::register();
            metrics.chain_started(&["freeze"]);
            metrics
        });
        metrics.hook_call("freeze", Outcome::Admit, Duration::from_micros(1));
        metrics.chain_finished(Duration::from_micros(1));
        let scrape = recorder.handle().render();
        for name in [
            OUTCOMES_TOTAL,
            DURATION_SECONDS,
            CHAIN_DURATION_SECONDS,
            BREAKER_STATE,
            QUEUE_DEPTH,
            BUFFER_CAPACITY,
            AT_CAPACITY_TOTAL,
            WORKERS_BUSY,
        ] {
            assert!(
                scrape.contains(&format!("# HELP {name} ")),
                "{name} has no help in\n{scrape}"
            );
        }
    }

    #[test]
    fn breaker_gauge_starts_closed_per_hook_and_follows_changes() {
        let recorder = recorder();
        metrics::with_local_recorder(&recorder, || {
            let metrics = Metrics::register();
            metrics.chain_started(&["freeze", "deny"]);
            let scrape = recorder.handle().render();
            assert_eq!(
                sample(&scrape, r#"dexaflow_admission_breaker_state{hook="deny"}"#),
                Some(0.0)
            );
            metrics.breaker_changed(1, "deny", BreakerState::Open);
            metrics.breaker_changed(0, "freeze", BreakerState::HalfOpen);
            metrics.breaker_changed(2, "late", BreakerState::Open);
            let scrape = recorder.handle().render();
            assert_eq!(
                sample(&scrape, r#"dexaflow_admission_breaker_state{hook="deny"}"#),
                Some(2.0)
            );
            assert_eq!(
                sample(
                    &scrape,
                    r#"dexaflow_admission_breaker_state{hook="freeze"}"#
                ),
                Some(1.0)
            );
            assert_eq!(
                sample(&scrape, r#"dexaflow_admission_breaker_state{hook="late"}"#),
                Some(2.0)
            );
        });
    }

    #[test]
    fn buffer_gauges_follow_the_dispatcher() {
        let recorder = recorder();
        let metrics = metrics::with_local_recorder(&recorder, Metrics::register);
        metrics.buffer_capacity(8);
        metrics.buffer_depth(5);
        metrics.deferred_at_capacity();
        metrics.worker_busy(true);
        metrics.worker_busy(true);
        metrics.worker_busy(false);
        let scrape = recorder.handle().render();
        assert_eq!(sample(&scrape, BUFFER_CAPACITY), Some(8.0));
        assert_eq!(sample(&scrape, QUEUE_DEPTH), Some(5.0));
        assert_eq!(sample(&scrape, AT_CAPACITY_TOTAL), Some(1.0));
        assert_eq!(sample(&scrape, WORKERS_BUSY), Some(1.0));
    }
}
