//! What a load test found, as a table for people and a JSON object for programs.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use hdrhistogram::Histogram;
use serde_json::{Value, json};

use super::{LoadTestError, Plan, chart};
use crate::admission::Outcome;

/// The longest latency a histogram tells apart: one hour, in microseconds. Longer ones are
/// recorded as one hour.
const HIGHEST_MICROS: u64 = 3_600_000_000;

/// The latencies of one outcome, recorded in microseconds with three significant digits.
#[derive(Debug, Clone)]
pub struct Latencies {
    histogram: Histogram<u64>,
}

impl Default for Latencies {
    fn default() -> Latencies {
        Latencies::new()
    }
}

impl Latencies {
    /// No latencies yet.
    pub fn new() -> Latencies {
        Latencies {
            histogram: Histogram::new_with_bounds(1, HIGHEST_MICROS, 3)
                .expect("1 µs to 1 h with 3 significant digits are valid bounds"),
        }
    }

    /// Records one latency (rounded down to the microsecond, at most one hour).
    pub fn record(&mut self, latency: Duration) {
        let micros = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        self.histogram.saturating_record(micros);
    }

    /// Adds every latency `other` recorded.
    pub fn merge(&mut self, other: &Latencies) {
        self.histogram
            .add(&other.histogram)
            .expect("every histogram of latencies has the same bounds");
    }

    /// How many latencies were recorded.
    pub fn count(&self) -> u64 {
        self.histogram.len()
    }

    /// The latency at `quantile` (0.0 to 1.0); zero when none was recorded.
    pub fn quantile(&self, quantile: f64) -> Duration {
        Duration::from_micros(self.histogram.value_at_quantile(quantile))
    }

    /// The longest latency recorded; zero when none was.
    pub fn max(&self) -> Duration {
        Duration::from_micros(self.histogram.max())
    }
}

/// What became of one attempt, as the harness counts it.
///
/// Latency runs from the attempt's intended start to its final disposition. The harness sets
/// the retry window to zero, so a held or unavailable attempt fails at its first offer and is
/// counted here rather than offered again for 15 minutes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AttemptOutcome {
    /// Launched unchanged: every hook admitted it, or a broken hook was passed over under
    /// `--fail-open` (the hook-call counts show how many `fail_open` passes there were).
    Executed,
    /// Launched with a `change:P` hook's changes.
    AdmitWith,
    /// Refused by a hook: failed at once, without retries.
    Refused,
    /// Held by a hook; failed as `dispatch_failed: admission hold: ...`.
    Held,
    /// A hook errored, timed out, panicked or was skipped by its open breaker; failed as
    /// `dispatch_failed: admission hook unavailable: ...`.
    Unavailable,
    /// Failed for any other reason, a built-in refusal included (none is expected with the
    /// `null` executor and the harness's tasks).
    Failed,
}

impl AttemptOutcome {
    /// Every outcome, in report order.
    pub const ALL: [AttemptOutcome; 6] = [
        AttemptOutcome::Executed,
        AttemptOutcome::AdmitWith,
        AttemptOutcome::Refused,
        AttemptOutcome::Held,
        AttemptOutcome::Unavailable,
        AttemptOutcome::Failed,
    ];

    /// The outcome's name in the table and the JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            AttemptOutcome::Executed => "executed",
            AttemptOutcome::AdmitWith => "admit_with",
            AttemptOutcome::Refused => "refused",
            AttemptOutcome::Held => "held",
            AttemptOutcome::Unavailable => "unavailable",
            AttemptOutcome::Failed => "failed",
        }
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

/// How often breakers moved to each state during the run (all hooks together).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BreakerTransitions {
    /// Openings: after the consecutive failures, and after each failed probe.
    pub open: u64,
    /// Backoffs that ended, letting one call probe.
    pub half_open: u64,
    /// Probes that succeeded.
    pub closed: u64,
}

/// Attempts per time slice of the run, for the throughput chart.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Throughput {
    /// The width of one slice.
    pub bin: Duration,
    /// From the first offer to the last final disposition; the last slice may be shorter.
    pub elapsed: Duration,
    /// Attempts that reached their final disposition in each slice, from the start of the run.
    pub settled: Vec<u64>,
    /// Attempts whose intended start fell in each slice: what the run asked for.
    pub due: Vec<u64>,
}

impl Throughput {
    /// Slices a run of `elapsed` into about 100 slices of a round width and counts the settle
    /// times and the intended starts (both since the start of the run) into them.
    pub fn of(
        elapsed: Duration,
        settle_times: impl Iterator<Item = Duration>,
        intended_starts: impl Iterator<Item = Duration>,
    ) -> Throughput {
        let bin = round_bin(elapsed / 100);
        let bins = usize::try_from(elapsed.as_nanos() / bin.as_nanos())
            .unwrap_or(usize::MAX)
            .saturating_add(1)
            .min(10_000);
        let count = |times: &mut dyn Iterator<Item = Duration>| {
            let mut counts = vec![0; bins];
            for at in times {
                let index = usize::try_from(at.as_nanos() / bin.as_nanos()).unwrap_or(usize::MAX);
                counts[index.min(bins - 1)] += 1;
            }
            counts
        };
        Throughput {
            bin,
            elapsed,
            settled: count(&mut { settle_times }),
            due: count(&mut { intended_starts }),
        }
    }

    /// The width of slice `index`: the bin, or less for the last one.
    fn width(&self, index: usize) -> f64 {
        let start = self.bin.as_secs_f64() * index as f64;
        let width = (self.elapsed.as_secs_f64() - start).min(self.bin.as_secs_f64());
        // A run shorter than a microsecond still divides by something.
        width.max(1e-6)
    }

    /// Attempts settled per second in each slice.
    pub(crate) fn settled_per_second(&self) -> Vec<f64> {
        self.per_second(&self.settled)
    }

    /// Attempts due per second in each slice.
    pub(crate) fn due_per_second(&self) -> Vec<f64> {
        self.per_second(&self.due)
    }

    fn per_second(&self, counts: &[u64]) -> Vec<f64> {
        counts
            .iter()
            .enumerate()
            .map(|(index, count)| *count as f64 / self.width(index))
            .collect()
    }
}

/// The smallest of 1, 2 and 5 times a power of ten milliseconds that is at least `at_least`
/// (1 ms at the least).
fn round_bin(at_least: Duration) -> Duration {
    let mut decade = Duration::from_millis(1);
    loop {
        for step in [1, 2, 5] {
            let bin = decade * step;
            if bin >= at_least {
                return bin;
            }
        }
        decade *= 10;
    }
}

/// Everything a load test found.
#[derive(Debug, Clone)]
pub struct Report {
    /// What was run.
    pub plan: Plan,
    /// Attempts offered to the dispatcher.
    pub offered: u64,
    /// Attempts that reached a final disposition (executed, refused or failed).
    pub settled: u64,
    /// Attempts not accounted for: neither executed once, refused, failed with a reason, nor
    /// handed back as scheduled.
    pub lost: u64,
    /// Attempts an executor launched more than once.
    pub executed_twice: u64,
    /// Attempts with more than one final disposition.
    pub settled_twice: u64,
    /// Attempts still scheduled at the end (offered but not settled when the run ended).
    pub handed_back: u64,
    /// From the first offer to the last final disposition.
    pub elapsed: Duration,
    /// User plus system CPU time of the process during the run, where the OS says, leaving out
    /// the thread the `sleep` and `jitter` hooks wait on (it stands for the hooks' machines).
    pub cpu: Option<Duration>,
    /// Attempts that found the buffer full and were deferred to a later tick.
    pub deferred_at_capacity: u64,
    /// Attempts by outcome with their latency, in [`AttemptOutcome::ALL`] order.
    pub outcomes: Vec<(AttemptOutcome, Latencies)>,
    /// Hook calls by outcome with the call's latency, for the outcomes that happened.
    pub hook_calls: Vec<(Outcome, Latencies)>,
    /// Breaker transitions.
    pub breaker: BreakerTransitions,
    /// Attempts settled over time.
    pub throughput: Throughput,
    /// How long after its intended start the harness offered each attempt: the harness's own
    /// share of each latency (its timer wakes on whole milliseconds), not the dispatch path's.
    /// Zero with `--rate 0`, where an attempt is due when it is offered.
    pub offer_lateness: Latencies,
    /// How many times the harness's driver woke during the run (to offer, to tick, or to read a
    /// batch of settled attempts): far fewer than the attempts, since it reads in batches.
    pub harness_wakes: u64,
    /// The run was stopped before its plan was done ([`Options::stop`](super::Options::stop)
    /// fired): every figure covers only the attempts offered before that, and those still
    /// waiting then were handed back.
    pub interrupted: bool,
    /// The attempts limit ([`Options::attempts_limit`](super::Options::attempts_limit)) the run
    /// stopped at before its plan was done, when it did: as with an interrupted run, every
    /// figure covers only the attempts offered.
    pub cut_at: Option<u64>,
}

impl Report {
    /// Why the run ended before its plan was done, as a command ends with it: a stop (the
    /// signal a command takes for one) or the attempts limit; `None` when it did not.
    pub fn ended_early(&self) -> Option<String> {
        if self.interrupted {
            return Some(format!(
                "interrupted: the report covers what was offered before the signal ({} offered)",
                self.offered
            ));
        }
        self.cut_at.map(|limit| {
            format!(
                "stopped at {limit} attempts: a run keeps each one until its report (about {} bytes), and more would pass half the memory free at its start; give --rate or fewer --attempts",
                super::memory::BYTES_PER_ATTEMPT
            )
        })
    }

    /// Attempts settled per second of the run.
    pub fn attempts_per_second(&self) -> f64 {
        let seconds = self.elapsed.as_secs_f64();
        if seconds > 0.0 {
            self.settled as f64 / seconds
        } else {
            0.0
        }
    }

    /// The attempts of one outcome.
    pub fn outcome(&self, outcome: AttemptOutcome) -> &Latencies {
        &self.outcomes[outcome.index()].1
    }

    /// How many attempts had `outcome`.
    pub fn count(&self, outcome: AttemptOutcome) -> u64 {
        self.outcome(outcome).count()
    }

    /// How many hook calls ended with `outcome`.
    pub fn calls(&self, outcome: Outcome) -> u64 {
        self.hook_calls
            .iter()
            .find(|(known, _)| *known == outcome)
            .map_or(0, |(_, latencies)| latencies.count())
    }

    /// Whether every offered attempt was accounted for exactly once.
    pub fn is_conserved(&self) -> bool {
        self.lost == 0 && self.executed_twice == 0 && self.settled_twice == 0
    }

    /// Checks conservation.
    ///
    /// # Errors
    /// [`LoadTestError::Conservation`] when an attempt was lost, executed twice or settled twice.
    pub fn check_conservation(&self) -> Result<(), LoadTestError> {
        if self.is_conserved() {
            Ok(())
        } else {
            Err(LoadTestError::Conservation {
                lost: self.lost,
                executed_twice: self.executed_twice,
                settled_twice: self.settled_twice,
            })
        }
    }

    /// The report as one JSON object; latencies in seconds.
    pub fn to_json(&self) -> Value {
        let latencies = |latencies: &Latencies| {
            let count = latencies.count();
            let at =
                |quantile: f64| (count > 0).then(|| latencies.quantile(quantile).as_secs_f64());
            json!({
                "count": count,
                "p50": at(0.5),
                "p90": at(0.9),
                "p99": at(0.99),
                "p999": at(0.999),
                "max": (count > 0).then(|| latencies.max().as_secs_f64()),
            })
        };
        let outcomes: serde_json::Map<String, Value> = self
            .outcomes
            .iter()
            .map(|(outcome, found)| (outcome.as_str().to_owned(), latencies(found)))
            .collect();
        let hook_calls: serde_json::Map<String, Value> = self
            .hook_calls
            .iter()
            .map(|(outcome, found)| (outcome.as_str().to_owned(), latencies(found)))
            .collect();
        json!({
            "attempts_per_second": self.attempts_per_second(),
            "offered": self.offered,
            "settled": self.settled,
            "lost": self.lost,
            "executed_twice": self.executed_twice,
            "settled_twice": self.settled_twice,
            "handed_back": self.handed_back,
            "elapsed_seconds": self.elapsed.as_secs_f64(),
            "cpu_seconds": self.cpu.map(|cpu| cpu.as_secs_f64()),
            "deferred_at_capacity": self.deferred_at_capacity,
            "outcomes": outcomes,
            "hook_calls": hook_calls,
            "offer_lateness": latencies(&self.offer_lateness),
            "harness_wakes": self.harness_wakes,
            "interrupted": self.interrupted,
            "cut_at": self.cut_at,
            "breaker_transitions": {
                "open": self.breaker.open,
                "half_open": self.breaker.half_open,
                "closed": self.breaker.closed,
            },
            "throughput": {
                "bin_seconds": self.throughput.bin.as_secs_f64(),
                "settled_per_second": self.throughput.settled_per_second(),
                "due_per_second": self.throughput.due_per_second(),
            },
            "plan": self.plan.to_json(),
        })
    }

    /// The report as a table for people.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let plan = &self.plan;
        let _ = writeln!(out, "loadtest: {}", plan.describe());
        if self.interrupted {
            let _ = writeln!(
                out,
                "interrupted           stopped early: the figures cover only what was offered before ({} offered)",
                self.offered
            );
        }
        if let Some(limit) = self.cut_at {
            let _ = writeln!(
                out,
                "cut short             stopped at the limit of {limit} attempts, the most the memory holds: the figures cover only those"
            );
        }
        // Whole attempts a second, but for a slow run, whose rate would show as 0.
        let rate = self.attempts_per_second();
        let decimals = if rate < 10.0 { 2 } else { 0 };
        let _ = writeln!(out, "attempts per second   {rate:.decimals$}");
        let cpu = self.cpu.map_or_else(
            || "unknown".to_owned(),
            |cpu| format!("{:.2} s", cpu.as_secs_f64()),
        );
        let _ = writeln!(
            out,
            "elapsed               {:.2} s (cpu {cpu})",
            self.elapsed.as_secs_f64()
        );
        let _ = writeln!(
            out,
            "attempts              {} offered, {} settled, {} handed back, {} lost, {} executed twice, {} settled twice",
            self.offered,
            self.settled,
            self.handed_back,
            self.lost,
            self.executed_twice,
            self.settled_twice
        );
        let _ = writeln!(out, "deferred at capacity  {}", self.deferred_at_capacity);
        let lateness = &self.offer_lateness;
        let _ = writeln!(
            out,
            "harness               offered late by p50 {}, p99 {}, max {}; woke {} times",
            human(lateness.quantile(0.5)),
            human(lateness.quantile(0.99)),
            human(lateness.max()),
            self.harness_wakes
        );
        let _ = writeln!(
            out,
            "breaker transitions   {} open, {} half-open, {} closed",
            self.breaker.open, self.breaker.half_open, self.breaker.closed
        );
        out.push('\n');
        let rows: Vec<(&str, &Latencies)> = self
            .outcomes
            .iter()
            .filter(|(_, found)| found.count() > 0)
            .map(|(outcome, found)| (outcome.as_str(), found))
            .collect();
        latency_table(&mut out, "OUTCOME", &rows, self.settled);
        if !self.hook_calls.is_empty() {
            out.push('\n');
            let calls: u64 = self.hook_calls.iter().map(|(_, found)| found.count()).sum();
            let rows: Vec<(&str, &Latencies)> = self
                .hook_calls
                .iter()
                .map(|(outcome, found)| (outcome.as_str(), found))
                .collect();
            latency_table(&mut out, "HOOK CALL", &rows, calls);
        }
        out
    }

    /// Writes `loadtest.json` (the JSON object), `latency.svg` (latency by percentile per
    /// outcome) and `throughput.svg` (attempts per second over the run) into `dir`, creating it
    /// if needed, and returns their paths.
    ///
    /// # Errors
    /// [`LoadTestError::Report`] naming the file that could not be written.
    pub fn write_to(&self, dir: &Path) -> Result<Vec<PathBuf>, LoadTestError> {
        let failed = |path: &Path| {
            let path = path.to_owned();
            move |source| LoadTestError::Report { path, source }
        };
        std::fs::create_dir_all(dir).map_err(failed(dir))?;
        let json =
            serde_json::to_string_pretty(&self.to_json()).expect("a JSON value always serializes");
        let files = [
            ("loadtest.json", json + "\n"),
            ("latency.svg", chart::latency(self)),
            ("throughput.svg", chart::throughput(self)),
        ];
        let mut written = Vec::new();
        for (name, contents) in files {
            let path = dir.join(name);
            std::fs::write(&path, contents).map_err(failed(&path))?;
            written.push(path);
        }
        Ok(written)
    }
}

/// Checks, before a run, that [`Report::write_to`] can write into `dir`: creates it if needed
/// and writes and removes a probe file there, so that a run is not spent to find a report
/// directory that cannot be written (read-only, a file in the way, no permission).
///
/// # Errors
/// [`LoadTestError::Report`] naming the directory or the probe file.
pub fn check_report_dir(dir: &Path) -> Result<(), LoadTestError> {
    let failed = |path: &Path| {
        let path = path.to_owned();
        move |source| LoadTestError::Report { path, source }
    };
    std::fs::create_dir_all(dir).map_err(failed(dir))?;
    let probe = dir.join(".loadtest-write-check");
    std::fs::write(&probe, b"").map_err(failed(&probe))?;
    std::fs::remove_file(&probe).map_err(failed(&probe))
}

fn latency_table(out: &mut String, title: &str, rows: &[(&str, &Latencies)], total: u64) {
    let _ = writeln!(
        out,
        "{title:<14} {:>9} {:>7} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "COUNT", "SHARE", "P50", "P90", "P99", "P99.9", "MAX"
    );
    for (name, found) in rows {
        let share = if total > 0 {
            found.count() as f64 * 100.0 / total as f64
        } else {
            0.0
        };
        let _ = writeln!(
            out,
            "{name:<14} {:>9} {:>6.2}% {:>9} {:>9} {:>9} {:>9} {:>9}",
            found.count(),
            share,
            human(found.quantile(0.5)),
            human(found.quantile(0.9)),
            human(found.quantile(0.99)),
            human(found.quantile(0.999)),
            human(found.max()),
        );
    }
}

/// A latency as people read it, to three significant digits: `850µs`, `12.3ms`, `1.50s`.
pub(crate) fn human(latency: Duration) -> String {
    let micros = latency.as_micros();
    let three = |value: f64, unit: &str| {
        if value < 10.0 {
            format!("{value:.2}{unit}")
        } else if value < 100.0 {
            format!("{value:.1}{unit}")
        } else {
            format!("{value:.0}{unit}")
        }
    };
    if micros < 1_000 {
        format!("{micros}µs")
    } else if micros < 1_000_000 {
        three(micros as f64 / 1_000.0, "ms")
    } else {
        three(latency.as_secs_f64(), "s")
    }
}
