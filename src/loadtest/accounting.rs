//! The accounting of a run: what was offered and when it was due, what settled and when, and
//! at the end, every offered attempt checked against the task store (conservation).

use std::time::Duration;

use super::counter::Counter;
use super::plan::{Plan, attempt_index};
use super::report::{AttemptOutcome, Latencies, Report, Throughput};
use super::spec::CHANGED_KEY;
use crate::dispatch::task::State;
use crate::dispatch::{Disposition, Reason, TaskInstance};
use crate::install::Handle;
/// Marks an attempt with no final disposition yet.
const UNSETTLED: u64 = u64::MAX;

/// What the harness knows of one attempt.
#[derive(Debug, Clone, Copy)]
struct Attempt {
    /// Microseconds from the start of the run to the intended start.
    intended: u64,
    /// Microseconds from the start of the run to the offer: the intended start, or later when
    /// the driver was late.
    offered: u64,
    /// Microseconds from the start of the run to the final disposition, or [`UNSETTLED`].
    settled: u64,
    /// The final disposition (executed, refused or failed).
    disposition: Option<Disposition>,
}

/// Every attempt offered so far, with its intended start and its final disposition.
#[derive(Debug, Default)]
pub(super) struct Ledger {
    attempts: Vec<Attempt>,
    // Attempts settled once.
    settled: u64,
    settled_twice: u64,
}

impl Ledger {
    /// How many attempts were offered.
    pub(super) fn offered(&self) -> u64 {
        self.attempts.len() as u64
    }

    /// How many attempts reached a final disposition.
    pub(super) fn settled(&self) -> u64 {
        self.settled
    }

    /// Records the next attempt as due `intended` and offered `offered` microseconds after the
    /// start.
    pub(super) fn offer(&mut self, intended: u64, offered: u64) {
        self.attempts.push(Attempt {
            intended,
            offered,
            settled: UNSETTLED,
            disposition: None,
        });
    }

    /// Records the final disposition of attempt `index`, seen `at` microseconds after the
    /// start; a second one counts as settled twice.
    pub(super) fn settle(&mut self, index: usize, disposition: Disposition, at: u64) {
        if let Some(attempt) = self.attempts.get_mut(index) {
            if attempt.disposition.is_some() {
                self.settled_twice += 1;
            } else {
                attempt.disposition = Some(disposition);
                attempt.settled = at;
                self.settled += 1;
            }
        }
    }

    /// Accounts for every offered attempt against the store and builds the report, with the
    /// `cpu` time and the driver's `wakes` of the run.
    pub(super) fn report(
        &self,
        plan: Plan,
        handle: &Handle,
        counter: &Counter,
        cpu: Option<Duration>,
        wakes: u64,
    ) -> Report {
        let mut outcomes: Vec<(AttemptOutcome, Latencies)> = AttemptOutcome::ALL
            .iter()
            .map(|outcome| (*outcome, Latencies::new()))
            .collect();
        let mut seen = vec![false; self.attempts.len()];
        let (mut lost, mut executed_twice, mut handed_back) = (0, 0, 0);
        handle.for_each_instance(|row| {
            let Some(index) = attempt_index(&row.task.key.task_id) else {
                return;
            };
            let Some(attempt) = self.attempts.get(index) else {
                return;
            };
            seen[index] = true;
            match account(row) {
                Account::ExecutedTwice => executed_twice += 1,
                Account::HandedBack if attempt.disposition.is_none() => handed_back += 1,
                Account::Settled(outcome) if agrees(outcome, attempt.disposition) => {
                    let latency = attempt.settled.saturating_sub(attempt.intended);
                    outcomes[outcome.index()]
                        .1
                        .record(Duration::from_micros(latency));
                }
                _ => lost += 1,
            }
        });
        lost += seen.iter().filter(|seen| !**seen).count() as u64;
        let mut offer_lateness = Latencies::new();
        for attempt in &self.attempts {
            offer_lateness.record(Duration::from_micros(
                attempt.offered.saturating_sub(attempt.intended),
            ));
        }
        let last = self
            .attempts
            .iter()
            .filter(|attempt| attempt.settled != UNSETTLED)
            .map(|attempt| attempt.settled)
            .max()
            .unwrap_or(0);
        let elapsed = Duration::from_micros(last);
        let throughput = Throughput::of(
            elapsed,
            self.attempts
                .iter()
                .filter(|attempt| attempt.settled != UNSETTLED)
                .map(|attempt| Duration::from_micros(attempt.settled)),
            self.attempts
                .iter()
                .map(|attempt| Duration::from_micros(attempt.intended)),
        );
        Report {
            plan,
            offered: self.offered(),
            settled: self.settled,
            lost,
            executed_twice,
            settled_twice: self.settled_twice,
            handed_back,
            elapsed,
            cpu,
            deferred_at_capacity: counter.deferred_at_capacity(),
            outcomes,
            hook_calls: counter.hook_calls(),
            breaker: counter.breaker_transitions(),
            throughput,
            offer_lateness,
            harness_wakes: wakes,
            interrupted: false,
            cut_at: None,
        }
    }
}

/// Where a task instance stands at the end of a run.
enum Account {
    /// Final, with this outcome.
    Settled(AttemptOutcome),
    /// Still scheduled and not in flight: handed back, offered again by a later tick.
    HandedBack,
    /// Launched more than once.
    ExecutedTwice,
    /// Anything else.
    Lost,
}

fn account(row: &TaskInstance) -> Account {
    if row.executions > 1 {
        return Account::ExecutedTwice;
    }
    let reason = row.failure_reason.as_ref().map(|reason| reason.reason());
    match (row.state, row.executions, reason) {
        (State::Queued | State::Running | State::Success, 1, _) => {
            let changed = row
                .execution
                .as_ref()
                .is_some_and(|execution| execution.labels.contains_key(CHANGED_KEY));
            Account::Settled(if changed {
                AttemptOutcome::AdmitWith
            } else {
                AttemptOutcome::Executed
            })
        }
        (State::Failed, 0, Some(reason)) => Account::Settled(match reason {
            Reason::RefusedByHook { .. } => AttemptOutcome::Refused,
            Reason::RetryWindowSpent(waited) => match **waited {
                Reason::Held { .. } => AttemptOutcome::Held,
                Reason::Unavailable { .. } => AttemptOutcome::Unavailable,
                _ => AttemptOutcome::Failed,
            },
            _ => AttemptOutcome::Failed,
        }),
        (State::Scheduled, 0, _) if !row.in_flight => Account::HandedBack,
        _ => Account::Lost,
    }
}

/// Whether the store's outcome agrees with the final disposition the pipeline reported.
fn agrees(outcome: AttemptOutcome, disposition: Option<Disposition>) -> bool {
    match outcome {
        AttemptOutcome::Executed | AttemptOutcome::AdmitWith => {
            disposition == Some(Disposition::Executed)
        }
        AttemptOutcome::Refused => disposition == Some(Disposition::Refused),
        AttemptOutcome::Held | AttemptOutcome::Unavailable => {
            disposition == Some(Disposition::Failed)
        }
        // A built-in refusal is refused by the pipeline, but is no hook's outcome.
        AttemptOutcome::Failed => matches!(
            disposition,
            Some(Disposition::Failed | Disposition::Refused)
        ),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::admission::{ChangeError, HookError};
    use crate::dispatch::FailureReason;
    use crate::loadtest::plan::attempt;

    fn row(state: State, executions: u32, reason: Option<Reason>) -> TaskInstance {
        TaskInstance {
            state,
            failure_reason: reason.map(FailureReason::new),
            attempt_epoch: 1,
            token_minted: executions > 0,
            executions,
            ..TaskInstance::new(Arc::new(attempt(0, "tenant-0")))
        }
    }

    fn outcome(row: &TaskInstance) -> Option<AttemptOutcome> {
        match account(row) {
            Account::Settled(outcome) => Some(outcome),
            _ => None,
        }
    }

    #[test]
    fn a_queued_row_executed_once_counts_as_executed() {
        assert_eq!(
            outcome(&row(State::Queued, 1, None)),
            Some(AttemptOutcome::Executed)
        );
    }

    #[test]
    fn a_row_executed_twice_is_caught() {
        assert!(matches!(
            account(&row(State::Queued, 2, None)),
            Account::ExecutedTwice
        ));
    }

    fn window_spent(waited: Reason) -> Reason {
        Reason::RetryWindowSpent(Box::new(waited))
    }

    #[test]
    fn failure_reasons_tell_refused_held_and_unavailable_apart() {
        let cases = [
            (
                Reason::RefusedByHook {
                    hook: "refuse#0".into(),
                    reason: "no".into(),
                },
                AttemptOutcome::Refused,
            ),
            (
                window_spent(Reason::Held {
                    hook: "hold#0".into(),
                    reason: "later".into(),
                }),
                AttemptOutcome::Held,
            ),
            (
                window_spent(Reason::Unavailable {
                    hook: "error#0".into(),
                    error: HookError::Failed("down".into()),
                }),
                AttemptOutcome::Unavailable,
            ),
            (
                Reason::DispatchFailed {
                    attempts: 6,
                    last: Box::new(Reason::Executor {
                        cause: "boom".into(),
                    }),
                },
                AttemptOutcome::Failed,
            ),
        ];
        for (reason, expected) in cases {
            assert_eq!(
                outcome(&row(State::Failed, 0, Some(reason))),
                Some(expected)
            );
        }
    }

    #[test]
    fn a_built_in_refusal_that_reads_like_a_hook_refusal_is_no_hook_refusal() {
        // The annotations check after the chain is the pipeline's own, though its text starts
        // `dispatch refused: admission: ` as a hook's refusal does.
        let built_in = Reason::ChangesRefused(ChangeError::AnnotationsTooLarge { bytes: 300_000 });
        assert!(
            built_in
                .to_string()
                .starts_with("dispatch refused: admission: ")
        );

        let counted = outcome(&row(State::Failed, 0, Some(built_in)));

        assert_eq!(counted, Some(AttemptOutcome::Failed));
        assert_ne!(counted, Some(AttemptOutcome::Refused));
    }

    #[test]
    fn a_hook_refusal_whose_reason_reads_like_a_hold_is_a_refusal() {
        let refused = Reason::RefusedByHook {
            hook: "refuse#0".into(),
            reason: "dispatch_failed: admission hold: later".into(),
        };

        assert_eq!(
            outcome(&row(State::Failed, 0, Some(refused))),
            Some(AttemptOutcome::Refused)
        );
    }

    #[test]
    fn a_failed_row_without_a_reason_is_lost() {
        assert!(matches!(
            account(&row(State::Failed, 0, None)),
            Account::Lost
        ));
    }

    #[test]
    fn a_scheduled_row_in_flight_at_the_end_is_lost() {
        let mut stranded = row(State::Scheduled, 0, None);
        stranded.in_flight = true;
        assert!(matches!(account(&stranded), Account::Lost));
        assert!(matches!(
            account(&row(State::Scheduled, 0, None)),
            Account::HandedBack
        ));
    }

    #[test]
    fn a_settled_outcome_must_agree_with_the_reported_disposition() {
        assert!(agrees(
            AttemptOutcome::AdmitWith,
            Some(Disposition::Executed)
        ));
        assert!(!agrees(AttemptOutcome::Refused, Some(Disposition::Failed)));
        assert!(agrees(AttemptOutcome::Failed, Some(Disposition::Refused)));
        assert!(!agrees(AttemptOutcome::Executed, None));
    }
}
