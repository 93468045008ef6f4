//! The load-test harness: each synthetic hook's counts match its probability within sampling
//! error, nothing is lost, and the SPEC grammar, the JSON and the report directory are what the
//! issue asks for.
//!
//! Runs use the paused tokio clock, so sleeps and timeouts cost no real time and latencies are
//! virtual and exact.

use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use dexaflow_admission::admission::Outcome;
use dexaflow_admission::events::{BreakerEvents, BufferEvents, HookEvents};
use dexaflow_admission::loadtest::{
    self, Amount, AttemptOutcome, HookFlag, HookFlagError, HookTimer, Options, Plan, Report,
};
use dexaflow_admission::supervise::{self, BreakerSettings};

use crate::processes::BINARY;
const ATTEMPTS: u64 = 3_000;

/// A plan of `attempts` synchronous attempts through `hooks`, with a breaker that never opens
/// and short timeouts.
fn plan(attempts: u64, hooks: &[&str]) -> Plan {
    Plan {
        amount: Amount::Attempts(attempts),
        hooks: loadtest::parse_all(hooks).expect("valid specs"),
        supervise: supervise::Settings {
            timeout: Duration::from_millis(20),
            chain_timeout: Duration::from_millis(100),
            fail_open: false,
            breaker: BreakerSettings {
                failures: u32::MAX,
                jitter: 0.0,
                ..BreakerSettings::default()
            },
            hooks: Default::default(),
        },
        seed: 7,
        // The paused clock reaches tokio's timer, not the harness's timer thread.
        hook_timer: HookTimer::Tokio,
        ..Plan::default()
    }
}

async fn run(plan: Plan) -> Report {
    tokio::time::pause();
    let report = loadtest::run(Options {
        plan,
        ..Options::default()
    })
    .await
    .expect("the run completes");
    assert_eq!(report.lost, 0, "lost attempts");
    assert_eq!(report.executed_twice, 0, "attempts executed twice");
    assert_eq!(report.settled_twice, 0, "attempts settled twice");
    assert_eq!(report.handed_back, 0, "attempts left scheduled");
    assert_eq!(report.settled, report.offered);
    assert!(!report.interrupted, "nothing stops it");
    report
}

/// Runs `plan` with at most `limit` attempts offered, on the paused clock, and checks that
/// nothing offered was lost.
async fn run_limited(plan: Plan, limit: u64) -> Report {
    tokio::time::pause();
    let report = loadtest::run(Options {
        plan,
        attempts_limit: Some(limit),
        ..Options::default()
    })
    .await
    .expect("the run completes");
    assert!(report.is_conserved(), "attempts lost or executed twice");
    assert_eq!(report.settled, report.offered);
    assert!(!report.interrupted, "nothing stops it");
    report
}

#[actix::test]
async fn a_run_that_reaches_its_attempts_limit_stops_there_and_says_so() {
    let report = run_limited(plan(5_000, &["noop"]), 300).await;

    assert_eq!(report.offered, 300);
    assert_eq!(report.cut_at, Some(300));
    let said = report.ended_early().expect("it ended early");
    assert!(said.starts_with("stopped at 300 attempts: "), "{said}");
    assert!(
        report
            .table()
            .contains("stopped at the limit of 300 attempts")
    );
    assert_eq!(report.to_json()["cut_at"], 300);
}

#[actix::test]
async fn an_unpaced_run_for_a_duration_stops_at_its_attempts_limit() {
    let plan = Plan {
        amount: Amount::For(Duration::from_secs(3600)),
        ..plan(0, &["noop"])
    };

    let report = run_limited(plan, 500).await;

    assert_eq!(report.offered, 500);
    assert_eq!(report.cut_at, Some(500));
}

#[actix::test]
async fn a_run_whose_plan_ends_at_its_attempts_limit_is_not_cut_short() {
    let report = run_limited(plan(300, &["noop"]), 300).await;

    assert_eq!(report.offered, 300);
    assert_eq!(report.cut_at, None);
    assert_eq!(report.ended_early(), None);
    assert_eq!(report.to_json()["cut_at"], serde_json::Value::Null);
}

#[actix::test]
async fn a_run_slower_than_ten_attempts_a_second_shows_its_rate_in_hundredths() {
    let plan = Plan {
        rate: 0.5,
        ..plan(3, &["noop"])
    };

    let table = run(plan).await.table();

    // Three attempts due at 0 s, 2 s and 4 s, settled at once: 3 in 4 s.
    assert!(table.contains("attempts per second   0.75\n"), "{table}");
}

/// Asserts that `count` of `trials` is within 4.5 standard deviations of a binomial with `p`.
fn assert_binomial(count: u64, trials: u64, p: f64) {
    let mean = trials as f64 * p;
    let sd = (trials as f64 * p * (1.0 - p)).sqrt().max(1.0);
    assert!(
        (count as f64 - mean).abs() <= 4.5 * sd,
        "{count} of {trials} is not within 4.5 sd ({sd:.1}) of {mean:.0}"
    );
}

fn total(report: &Report) -> u64 {
    AttemptOutcome::ALL
        .iter()
        .map(|outcome| report.count(*outcome))
        .sum()
}

#[actix::test]
async fn noop_hook_executes_every_attempt_and_loses_none() {
    let report = run(plan(ATTEMPTS, &["noop"])).await;

    assert_eq!(report.offered, ATTEMPTS);
    assert_eq!(report.count(AttemptOutcome::Executed), ATTEMPTS);
    assert_eq!(report.calls(Outcome::Admit), ATTEMPTS);
}

/// Fires `trigger` at the `after`-th hook call it is told of.
struct StopAfter {
    after: u64,
    calls: std::sync::atomic::AtomicU64,
    trigger: dexaflow_admission::dispatch::Trigger,
}

impl HookEvents for StopAfter {
    fn hook_call(&self, _: &str, _: Outcome, _: Duration) {
        let calls = self
            .calls
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1;
        if calls == self.after {
            self.trigger.fire();
        }
    }
}

impl BreakerEvents for StopAfter {}
impl BufferEvents for StopAfter {}

#[actix::test]
async fn a_stopped_run_reports_what_it_offered_before_the_stop_and_loses_none() {
    tokio::time::pause();
    let (trigger, stop) = dexaflow_admission::dispatch::signal();
    let planned = 1_000_000;
    let report = loadtest::run(Options {
        plan: plan(planned, &["noop"]),
        observer: Some(Arc::new(StopAfter {
            after: 500,
            calls: Default::default(),
            trigger,
        })),
        stop: Some(stop),
        ..Options::default()
    })
    .await
    .expect("the run reports");
    assert!(report.interrupted);
    assert!(
        (500..planned).contains(&report.offered),
        "stopped after the 500th call, offered {}",
        report.offered
    );
    assert!(report.is_conserved(), "{}", report.table());
    assert_eq!(report.settled + report.handed_back, report.offered);
    assert_eq!(report.to_json()["interrupted"], true);
    assert!(report.table().contains("interrupted"), "{}", report.table());
}

#[actix::test]
async fn run_without_hooks_makes_no_hook_call() {
    let report = run(plan(500, &[])).await;

    assert_eq!(report.count(AttemptOutcome::Executed), 500);
    assert!(report.hook_calls.is_empty());
}

#[actix::test]
async fn sleep_hook_answers_after_its_duration() {
    let report = run(plan(200, &["sleep:3ms"])).await;

    assert_eq!(report.count(AttemptOutcome::Executed), 200);
    let calls = &report
        .hook_calls
        .iter()
        .find(|(outcome, _)| *outcome == Outcome::Admit)
        .expect("admits")
        .1;
    assert!(calls.quantile(0.0) >= Duration::from_millis(3));
}

#[test]
fn sleep_hook_on_the_timer_thread_never_answers_early_and_the_run_still_reports_cpu() {
    // The real clock: the timer thread does not follow a paused one.
    let report = loadtest::run_blocking(Options {
        plan: Plan {
            buffer_size: 16,
            workers: 8,
            hook_timer: HookTimer::Thread,
            ..plan(200, &["sleep:2ms"])
        },
        ..Options::default()
    })
    .expect("the run completes");

    assert!(report.is_conserved());
    assert_eq!(report.count(AttemptOutcome::Executed), 200);
    let calls = &report.hook_calls[0].1;
    assert!(
        calls.quantile(0.0) >= Duration::from_millis(2),
        "{:?}",
        calls.quantile(0.0)
    );
    if cfg!(target_os = "linux") {
        // The figure leaves the timer thread out; without its CPU time there would be none.
        assert!(report.cpu.is_some(), "no CPU figure");
    }
}

#[actix::test]
async fn spin_hook_burns_its_duration_of_the_wall_clock_without_waiting_on_tokio() {
    let started = std::time::Instant::now();
    let report = run(plan(20, &["spin:2ms"])).await;
    let wall = started.elapsed();

    assert_eq!(report.count(AttemptOutcome::Executed), 20);
    assert_eq!(report.calls(Outcome::Admit), 20);
    assert!(
        wall >= Duration::from_millis(40),
        "20 spins of 2 ms took {wall:?}"
    );
    // The paused clock jumps ahead whenever every task waits on a timer: it never did, so the
    // hook never slept, and tokio's clock did not shorten the spin either.
    assert_eq!(report.elapsed, Duration::ZERO);
}

#[actix::test]
async fn jitter_hook_answers_within_its_range() {
    let report = run(plan(500, &["jitter:2ms..6ms"])).await;

    assert_eq!(report.count(AttemptOutcome::Executed), 500);
    let calls = &report.hook_calls[0].1;
    assert!(calls.quantile(0.0) >= Duration::from_millis(2));
    // The timer rounds up to the next millisecond, the histogram keeps three digits.
    assert!(calls.max() <= Duration::from_millis(8), "{:?}", calls.max());
    assert!(calls.quantile(0.5) > calls.quantile(0.0));
}

#[actix::test]
async fn error_hook_makes_attempts_unavailable_at_its_probability() {
    let report = run(plan(ATTEMPTS, &["error:0.2"])).await;

    let unavailable = report.count(AttemptOutcome::Unavailable);
    assert_binomial(unavailable, ATTEMPTS, 0.2);
    assert_eq!(report.calls(Outcome::Error), unavailable);
    assert_eq!(
        report.count(AttemptOutcome::Executed),
        ATTEMPTS - unavailable
    );
}

#[actix::test]
async fn panic_hook_makes_attempts_unavailable_at_its_probability() {
    let report = run(plan(ATTEMPTS, &["panic:0.1"])).await;

    let unavailable = report.count(AttemptOutcome::Unavailable);
    assert_binomial(unavailable, ATTEMPTS, 0.1);
    assert_eq!(report.calls(Outcome::Panic), unavailable);
}

#[actix::test]
async fn timeout_hook_makes_attempts_unavailable_at_its_probability() {
    let report = run(plan(ATTEMPTS, &["timeout:0.05"])).await;

    let unavailable = report.count(AttemptOutcome::Unavailable);
    assert_binomial(unavailable, ATTEMPTS, 0.05);
    assert_eq!(report.calls(Outcome::Timeout), unavailable);
    let timeouts = &report
        .hook_calls
        .iter()
        .find(|(outcome, _)| *outcome == Outcome::Timeout)
        .expect("timeouts")
        .1;
    assert!(timeouts.quantile(0.0) >= Duration::from_millis(20));
}

#[actix::test]
async fn hold_hook_holds_attempts_at_its_probability() {
    let report = run(plan(ATTEMPTS, &["hold:0.3"])).await;

    let held = report.count(AttemptOutcome::Held);
    assert_binomial(held, ATTEMPTS, 0.3);
    assert_eq!(report.calls(Outcome::Hold), held);
    assert_eq!(report.count(AttemptOutcome::Unavailable), 0);
}

#[actix::test]
async fn refuse_hook_refuses_attempts_at_its_probability() {
    let report = run(plan(ATTEMPTS, &["refuse:0.4"])).await;

    let refused = report.count(AttemptOutcome::Refused);
    assert_binomial(refused, ATTEMPTS, 0.4);
    assert_eq!(report.calls(Outcome::Refuse), refused);
}

#[actix::test]
async fn change_hook_admits_with_changes_at_its_probability() {
    let report = run(plan(ATTEMPTS, &["change:0.25"])).await;

    let changed = report.count(AttemptOutcome::AdmitWith);
    assert_binomial(changed, ATTEMPTS, 0.25);
    assert_eq!(report.calls(Outcome::AdmitWith), changed);
    assert_eq!(report.calls(Outcome::InvalidChange), 0);
    assert_eq!(report.count(AttemptOutcome::Executed), ATTEMPTS - changed);
}

#[actix::test]
async fn chained_hooks_run_in_order_and_the_first_decision_stops_the_chain() {
    let report = run(plan(ATTEMPTS, &["refuse:0.5", "hold:0.5"])).await;

    let refused = report.count(AttemptOutcome::Refused);
    assert_binomial(refused, ATTEMPTS, 0.5);
    // Every attempt calls the first hook; only those it admitted call the second.
    let calls: u64 = report
        .hook_calls
        .iter()
        .map(|(_, calls)| calls.count())
        .sum();
    assert_eq!(calls, 2 * ATTEMPTS - refused);
    assert_binomial(report.count(AttemptOutcome::Held), ATTEMPTS - refused, 0.5);
    assert_eq!(total(&report), ATTEMPTS);
}

#[actix::test]
async fn fail_open_admits_the_attempts_of_a_broken_hook() {
    let mut plan = plan(ATTEMPTS, &["error:0.3"]);
    plan.supervise.fail_open = true;

    let report = run(plan).await;

    assert_eq!(report.count(AttemptOutcome::Executed), ATTEMPTS);
    assert_binomial(report.calls(Outcome::FailOpen), ATTEMPTS, 0.3);
    assert_eq!(
        report.calls(Outcome::FailOpen),
        report.calls(Outcome::Error)
    );
}

#[actix::test]
async fn open_breaker_skips_the_hook_and_its_transition_is_counted() {
    let mut plan = plan(1_000, &["timeout:1"]);
    plan.supervise.breaker.failures = 3;
    plan.supervise.breaker.backoff = Duration::from_secs(3600);
    plan.supervise.breaker.max_backoff = Duration::from_secs(3600);

    let report = run(plan).await;

    assert_eq!(report.count(AttemptOutcome::Unavailable), 1_000);
    assert_eq!(report.calls(Outcome::Timeout), 3);
    assert_eq!(report.calls(Outcome::Skipped), 997);
    assert_eq!(report.breaker.open, 1);
}

#[actix::test]
async fn buffered_dispatch_through_a_small_buffer_defers_and_loses_nothing() {
    let mut plan = plan(1_000, &["sleep:1ms"]);
    plan.buffer_size = 4;
    plan.workers = 2;

    let report = run(plan).await;

    assert_eq!(report.count(AttemptOutcome::Executed), 1_000);
    assert!(report.deferred_at_capacity > 0);
}

#[actix::test]
async fn buffered_dispatch_with_many_workers_loses_nothing() {
    let mut plan = plan(ATTEMPTS, &["jitter:1ms..3ms", "refuse:0.1"]);
    plan.buffer_size = 64;
    plan.workers = 16;
    plan.tenants = 5;

    let report = run(plan).await;

    assert_binomial(report.count(AttemptOutcome::Refused), ATTEMPTS, 0.1);
    assert_eq!(total(&report), ATTEMPTS);
}

#[actix::test]
async fn rate_offers_each_attempt_at_its_intended_start() {
    let mut plan = plan(100, &["noop"]);
    plan.rate = 1_000.0;

    let report = run(plan).await;

    // Attempt 99 is due 99 ms after the first, so the run cannot settle it sooner.
    assert_eq!(report.count(AttemptOutcome::Executed), 100);
    assert!(report.elapsed >= Duration::from_millis(99));
}

#[actix::test]
async fn an_attempt_that_is_due_is_offered_at_once_never_after_the_idle_limit() {
    // A tenth of a second at 20,000 per second; the plan's idle limit is 1.12 s.
    let mut plan = plan(2_000, &["noop"]);
    plan.rate = 20_000.0;

    let report = run(plan).await;

    // The driver sleeps on tokio's timer, which wakes on whole milliseconds: an attempt is
    // offered at most that long after it is due.
    let lateness = &report.offer_lateness;
    assert_eq!(lateness.count(), 2_000);
    assert!(
        lateness.max() <= Duration::from_millis(1),
        "an attempt was offered {:?} after it was due",
        lateness.max()
    );
    // The paused clock stands still while the synchronous path runs a noop hook, so an
    // attempt's latency is its lateness: none waited for the idle limit.
    let executed = report.outcome(AttemptOutcome::Executed);
    assert_eq!(executed.count(), 2_000);
    assert!(
        executed.max() <= Duration::from_millis(1),
        "{:?}",
        executed.max()
    );
}

#[actix::test]
async fn the_harness_reads_settled_attempts_in_batches_rather_than_waking_for_each() {
    let mut plan = plan(ATTEMPTS, &["sleep:1ms"]);
    plan.buffer_size = 64;
    plan.workers = 16;

    let report = run(plan).await;

    assert_eq!(report.settled, ATTEMPTS);
    assert!(report.harness_wakes > 0);
    assert!(
        report.harness_wakes * 4 <= report.settled,
        "{} wakes for {} settled attempts",
        report.harness_wakes,
        report.settled
    );
}

#[actix::test]
async fn duration_with_a_rate_offers_rate_times_duration_attempts() {
    let mut plan = plan(1, &["noop"]);
    plan.amount = Amount::For(Duration::from_secs(2));
    plan.rate = 150.0;

    let report = run(plan).await;

    assert_eq!(report.offered, 300);
}

#[test]
fn same_seed_draws_the_same_outcomes() {
    // Each run gets a system (and a paused clock) of its own.
    let first = actix::System::new().block_on(run(plan(1_000, &["error:0.3", "change:0.3"])));
    let second = actix::System::new().block_on(run(plan(1_000, &["error:0.3", "change:0.3"])));

    for outcome in AttemptOutcome::ALL {
        assert_eq!(first.count(outcome), second.count(outcome), "{outcome:?}");
    }
}

#[actix::test]
async fn json_report_has_the_fields_the_issue_names() {
    let report = run(plan(300, &["refuse:0.5"])).await;

    let json = report.to_json();
    for field in [
        "attempts_per_second",
        "offered",
        "settled",
        "lost",
        "executed_twice",
    ] {
        assert!(json.get(field).is_some(), "{field} missing");
    }
    let refused = &json["outcomes"]["refused"];
    assert_eq!(refused["count"], report.count(AttemptOutcome::Refused));
    for field in ["p50", "p90", "p99", "p999", "max"] {
        assert!(refused[field].is_f64(), "{field} is not seconds");
    }
    assert!(json["outcomes"]["held"]["p50"].is_null());
}

#[actix::test]
async fn report_directory_gets_the_json_and_two_svg_charts() {
    let report = run(plan(300, &["refuse:0.5"])).await;
    let dir = tempfile::tempdir().expect("temp dir");

    let written = report.write_to(dir.path()).expect("written");

    assert_eq!(written.len(), 3);
    let json = std::fs::read_to_string(dir.path().join("loadtest.json")).expect("json");
    let parsed: serde_json::Value = serde_json::from_str(&json).expect("valid JSON");
    assert_eq!(parsed["offered"], 300);
    for chart in ["latency.svg", "throughput.svg"] {
        let svg = std::fs::read_to_string(dir.path().join(chart)).expect("chart");
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("<polyline"));
    }
}

#[test]
fn every_spec_kind_parses_and_prints_back() {
    for spec in [
        "noop",
        "sleep:1ms",
        "jitter:1ms..5ms",
        "spin:20us",
        "error:0.1",
        "panic:0.5",
        "timeout:1",
        "hold:0",
        "refuse:0.25",
        "change:0.75",
    ] {
        let parsed: HookFlag = spec.parse().expect(spec);
        assert_eq!(parsed.to_string(), spec);
    }
}

#[test]
fn webhook_spec_names_the_url_and_round_trips() {
    let spec = "webhook:https://hooks.example.com/admit?team=etl";

    let parsed = spec.parse::<HookFlag>().expect("a webhook spec");

    assert_eq!(
        parsed,
        HookFlag::Webhook("https://hooks.example.com/admit?team=etl".to_owned())
    );
    assert_eq!(parsed.to_string(), spec);
    assert!(matches!(
        "webhook".parse::<HookFlag>(),
        Err(HookFlagError::Shape { .. })
    ));
}

#[test]
fn bad_specs_name_the_flag_and_the_spec() {
    for (spec, says) in [
        ("nope", "unknown hook \"nope\""),
        ("error:2", "expected a probability from 0 to 1, got \"2\""),
        ("error:-0.1", "expected a probability from 0 to 1"),
        ("refuse:often", "expected a probability from 0 to 1"),
        ("hold", "expected a probability after"),
        (
            "sleep:fast",
            "expected a duration such as \"1ms\", got \"fast\"",
        ),
        ("sleep", "expected a duration after"),
        ("spin", "expected a duration after"),
        (
            "spin:hot",
            "expected a duration such as \"1ms\", got \"hot\"",
        ),
        (
            "sleep:-1ms",
            "expected a duration such as \"1ms\", got \"-1ms\" (negative duration)",
        ),
        ("jitter:5ms..1ms", "the minimum is above the maximum"),
        ("jitter:5ms", "expected MIN..MAX"),
        ("noop:1", "noop takes no value"),
    ] {
        let error = spec.parse::<HookFlag>().expect_err(spec).to_string();
        assert!(
            error.starts_with(&format!("--hook {spec:?}: ")),
            "{spec}: {error}"
        );
        assert!(error.contains(says), "{spec}: {error}");
    }
}

#[test]
fn loadtest_command_prints_one_json_object_and_exits_zero() {
    let output = Command::new(BINARY)
        .args([
            "loadtest",
            "--attempts",
            "300",
            "--buffer-size",
            "16",
            "--workers",
            "4",
        ])
        .args(["--hook", "noop", "--hook", "refuse:0.5", "--output", "json"])
        // Any free port, so that the exporter never collides with another process.
        .args(["--metrics-listen", "127.0.0.1:0"])
        .output()
        .expect("runs");

    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).expect("one JSON object");
    assert_eq!(json["offered"], 300);
    assert_eq!(json["lost"], 0);
    assert_eq!(json["executed_twice"], 0);
}

#[test]
fn loadtest_command_with_a_bad_spec_fails_naming_the_flag() {
    let output = Command::new(BINARY)
        .args(["loadtest", "--attempts", "10", "--hook", "nope:1"])
        .output()
        .expect("runs");

    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--hook \"nope:1\": unknown hook \"nope\""),
        "{stderr}"
    );
}

#[test]
fn loadtest_command_with_a_negative_rate_fails_naming_the_flag() {
    let output = Command::new(BINARY)
        .args(["loadtest", "--attempts", "10", "--rate=-5"])
        .output()
        .expect("runs");

    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("--rate: "));
}

#[test]
fn loadtest_command_with_a_rate_too_small_or_too_large_to_mean_anything_fails_before_running() {
    for rate in ["1e308", "1e-300", "inf", "NaN"] {
        let output = Command::new(BINARY)
            .args(["loadtest", "--attempts", "10", "--rate", rate])
            .output()
            .expect("runs");

        assert_eq!(output.status.code(), Some(2), "{rate}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("--rate: must be 0 (as fast as they settle) or from 0.001 to 1000000"),
            "{rate}: {stderr}"
        );
        assert!(output.stdout.is_empty(), "{rate}: nothing ran");
    }
}

#[test]
fn a_negative_value_gets_the_same_error_after_a_space_as_after_an_equals_sign() {
    let stderr = |args: &[&str]| {
        let output = Command::new(BINARY)
            .arg("loadtest")
            .args(args)
            .output()
            .expect("runs");
        assert!(!output.status.success(), "{args:?} succeeded");
        String::from_utf8_lossy(&output.stderr).into_owned()
    };
    for (flag, value) in [
        ("--attempts", "-5"),
        ("--duration", "-5s"),
        ("--rate", "-5"),
        ("--buffer-size", "-5"),
        ("--workers", "-5"),
        ("--tenants", "-5"),
        ("--timeout", "-5ms"),
        ("--chain-timeout", "-5ms"),
        ("--breaker-failures", "-5"),
        ("--breaker-backoff", "-5ms"),
        ("--breaker-max-backoff", "-5ms"),
        ("--seed", "-5"),
    ] {
        let spaced = stderr(&[flag, value]);
        let joined = stderr(&[&format!("{flag}={value}")]);

        assert_eq!(spaced, joined, "{flag} {value}");
        assert!(spaced.contains(flag), "{flag}: {spaced}");
        assert!(!spaced.contains("unexpected argument"), "{flag}: {spaced}");
    }
}

#[test]
fn a_negative_duration_flag_is_refused_saying_it_is_negative() {
    let output = Command::new(BINARY)
        .args(["loadtest", "--duration", "-5s"])
        .output()
        .expect("runs");

    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(
            "'--duration <DURATION>': expected a duration such as \"500ms\", got \"-5s\" (negative duration)"
        ),
        "{stderr}"
    );
    assert!(output.stdout.is_empty(), "a report was printed");
}

#[test]
fn a_tenant_count_past_its_range_is_refused_before_anything_runs() {
    let output = Command::new(BINARY)
        .args([
            "loadtest",
            "--tenants",
            "18446744073709551615",
            "--attempts",
            "1",
        ])
        .output()
        .expect("runs");

    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(
            "--tenants: expected an integer from 1 to 100000, got 18446744073709551615 (too large)"
        ),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(output.stdout.is_empty(), "a report was printed");
}

#[test]
fn a_negative_count_is_refused_as_no_whole_number_before_anything_runs() {
    let output = Command::new(BINARY)
        .args(["loadtest", "--workers", "-5"])
        .output()
        .expect("runs");

    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("'--workers <W>': expected a whole number without a sign, got \"-5\""),
        "{stderr}"
    );
    assert!(output.stdout.is_empty(), "a report was printed");
}

/// What `loadtest` with `args` wrote on stderr, failing; nothing may have been printed.
fn refused(args: &[&str]) -> String {
    let output = Command::new(BINARY)
        .arg("loadtest")
        .args(args)
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(2), "{args:?}");
    assert!(output.stdout.is_empty(), "{args:?}: a report was printed");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// What check-config says of `key` in a config of `yaml`: the text after `key: `.
fn config_says(yaml: &str, key: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dexaflow.yaml");
    std::fs::write(&path, yaml).unwrap();
    let output = Command::new(BINARY)
        .args(["check-config", "--config"])
        .arg(&path)
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(2), "{yaml}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let prefix = format!("{key}: ");
    stderr
        .lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("{key} in {stderr}"))
        .to_owned()
}

#[test]
fn loadtest_flags_are_refused_by_the_rules_and_words_of_their_config_keys() {
    for (args, flag, yaml, key) in [
        (
            &["--buffer-size", "4294967295"][..],
            "--buffer-size",
            "scheduler: {dispatch: {buffer_size: 4294967295}}",
            "scheduler.dispatch.buffer_size",
        ),
        (
            &["--buffer-size", "70000", "--workers", "16"][..],
            "--buffer-size",
            "scheduler: {dispatch: {buffer_size: 70000}}",
            "scheduler.dispatch.buffer_size",
        ),
        (
            &["--buffer-size", "64", "--workers", "5000"][..],
            "--workers",
            "scheduler: {dispatch: {workers: 5000}}",
            "scheduler.dispatch.workers",
        ),
        (
            &["--worker-threads", "65"][..],
            "--worker-threads",
            "scheduler: {dispatch: {worker_threads: 65}}",
            "scheduler.dispatch.worker_threads",
        ),
        (
            &["--breaker-failures", "0"][..],
            "--breaker-failures",
            "execution: {admission: {breaker: {failures: 0}}}",
            "execution.admission.breaker.failures",
        ),
        (
            &["--timeout", "0s"][..],
            "--timeout",
            "execution: {admission: {timeout: 0s}}",
            "execution.admission.timeout",
        ),
        (
            &["--breaker-backoff", "0s"][..],
            "--breaker-backoff",
            "execution: {admission: {breaker: {backoff: 0s}}}",
            "execution.admission.breaker.backoff",
        ),
    ] {
        let stderr = refused(args);
        let expected = format!("dexaflow-admission: {flag}: {}\n", config_says(yaml, key));
        assert_eq!(stderr, expected, "{args:?}");
    }
}

#[test]
fn a_chain_timeout_shorter_than_the_timeout_is_refused_as_the_config_refuses_it() {
    let stderr = refused(&["--timeout", "3s", "--chain-timeout", "2s"]);

    let says = config_says(
        "execution: {admission: {timeout: 3s, chain_timeout: 2s}}",
        "execution.admission.chain_timeout",
    );
    assert_eq!(
        stderr,
        format!(
            "dexaflow-admission: --chain-timeout: {}\n",
            says.replace("execution.admission.timeout", "--timeout")
        )
    );
    assert_eq!(
        stderr,
        "dexaflow-admission: --chain-timeout: expected a duration of at least --timeout (3s), got \"2s\"\n"
    );
}

#[test]
fn a_webhook_file_with_no_webhook_hook_is_refused_naming_its_flag() {
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "s3cret\n").unwrap();
    let token = token.to_str().expect("a UTF-8 path");

    for flag in ["--webhook-bearer-token-file", "--webhook-ca-bundle"] {
        let stderr = refused(&["--hook", "noop", flag, token, "--attempts", "5"]);

        assert_eq!(
            stderr,
            format!("dexaflow-admission: {flag}: is for webhook:URL hooks, and no --hook is one\n")
        );
    }
}

#[test]
fn a_max_backoff_shorter_than_the_backoff_is_refused_as_the_config_refuses_it() {
    let stderr = refused(&["--breaker-backoff", "10s", "--breaker-max-backoff", "5s"]);

    let says = config_says(
        "execution: {admission: {breaker: {backoff: 10s, max_backoff: 5s}}}",
        "execution.admission.breaker.max_backoff",
    );
    assert_eq!(
        stderr,
        format!(
            "dexaflow-admission: --breaker-max-backoff: {}\n",
            says.replace("execution.admission.breaker.backoff", "--breaker-backoff")
        )
    );
}

#[test]
fn loadtest_without_flags_runs_the_dispatch_settings_of_the_config_defaults() {
    let output = Command::new(BINARY)
        .args(["loadtest", "--attempts", "20", "--output", "json"])
        .output()
        .expect("runs");

    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).expect("one JSON object");
    let defaults = dexaflow_admission::dispatch::Settings::default();
    assert_eq!(json["plan"]["buffer_size"], defaults.buffer_size);
    assert_eq!(json["plan"]["workers"], defaults.workers);
    assert_eq!(json["plan"]["worker_threads"], defaults.worker_threads);
    assert_eq!(json["plan"]["worker_threads"], 2);
    let supervise = supervise::Settings::default();
    assert_eq!(
        json["plan"]["timeout_seconds"],
        supervise.timeout.as_secs_f64()
    );
    assert_eq!(
        json["plan"]["chain_timeout_seconds"],
        supervise.chain_timeout.as_secs_f64()
    );
}

#[test]
fn a_report_directory_that_cannot_be_written_is_refused_before_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let in_the_way = dir.path().join("a-file");
    std::fs::write(&in_the_way, "not a directory").unwrap();

    let stderr = refused(&[
        "--attempts",
        "10",
        "--report",
        in_the_way.join("report").to_str().unwrap(),
    ]);

    assert!(stderr.contains("--report: "), "{stderr}");
    assert!(
        !stderr.contains("metrics: listening"),
        "the run never started: {stderr}"
    );
    assert!(!in_the_way.join("report").exists());
}

#[test]
fn a_writable_report_directory_is_left_with_the_report_and_no_probe() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("new/report");

    let output = Command::new(BINARY)
        .args([
            "loadtest",
            "--attempts",
            "10",
            "--output",
            "json",
            "--report",
        ])
        .arg(&report)
        .output()
        .expect("runs");

    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mut names: Vec<String> = std::fs::read_dir(&report)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["latency.svg", "loadtest.json", "throughput.svg"]);
}

#[test]
fn loadtest_exports_metrics_on_a_port_of_its_own_unless_told() {
    let output = Command::new(BINARY)
        .args(["loadtest", "--attempts", "10", "--output", "json"])
        .output()
        .expect("runs");

    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    let address: std::net::SocketAddr = stderr
        .lines()
        .next()
        .and_then(|line| line.strip_prefix("metrics: listening on http://"))
        .and_then(|rest| rest.strip_suffix("/metrics"))
        .unwrap_or_else(|| panic!("a metrics line first: {stderr}"))
        .parse()
        .expect("an address");
    assert!(address.ip().is_loopback(), "{address}");
    assert_ne!(address.port(), 9464);
    assert_ne!(address.port(), 0, "the bound port is printed");
}
