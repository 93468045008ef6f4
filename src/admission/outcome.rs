//! The outcome of one hook call, as the outcome counter and the breaker count it.

/// What one hook call came to.
///
/// The metric `dexaflow_admission_outcomes_total` is labelled by these names and nothing else.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Outcome {
    /// The hook admitted the attempt unchanged.
    Admit,
    /// The hook admitted it with changes that passed the rules.
    AdmitWith,
    /// The hook held it.
    Hold,
    /// The hook refused it.
    Refuse,
    /// The hook's changes broke a rule, which refuses the attempt.
    InvalidChange,
    /// The hook returned an error.
    Error,
    /// The call ran past its deadline.
    Timeout,
    /// The hook panicked.
    Panic,
    /// The breaker skipped the hook.
    Skipped,
    /// The chain budget ran out before the hook answered, spent by the hooks before it or ended
    /// by the caller's deadline: the call was cut, or not made. Not the hook's failure.
    BudgetSpent,
    /// A broken, skipped or budget-cut hook was passed over because `fail_open` is set.
    FailOpen,
    /// The dispatch was cancelled while the call ran.
    Cancelled,
}

impl Outcome {
    /// Every outcome, in declaration order.
    pub const ALL: [Outcome; 12] = [
        Outcome::Admit,
        Outcome::AdmitWith,
        Outcome::Hold,
        Outcome::Refuse,
        Outcome::InvalidChange,
        Outcome::Error,
        Outcome::Timeout,
        Outcome::Panic,
        Outcome::Skipped,
        Outcome::BudgetSpent,
        Outcome::FailOpen,
        Outcome::Cancelled,
    ];

    /// The outcome's label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Admit => "admit",
            Outcome::AdmitWith => "admit_with",
            Outcome::Hold => "hold",
            Outcome::Refuse => "refuse",
            Outcome::InvalidChange => "invalid_change",
            Outcome::Error => "error",
            Outcome::Timeout => "timeout",
            Outcome::Panic => "panic",
            Outcome::Skipped => "skipped",
            Outcome::BudgetSpent => "budget_spent",
            Outcome::FailOpen => "fail_open",
            Outcome::Cancelled => "cancelled",
        }
    }
}
