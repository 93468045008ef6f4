//! The hook chain: hooks in registration order, each seeing the earlier changes (ADR 0100 §6).
//!
//! The chain is a state machine without I/O. A driver asks a [`ChainRun`] for the next hook and
//! the request to show it, calls the hook however it likes (directly, as [`Chain::admit`] does, or
//! under supervision), and records the result. That keeps the rules of the chain in one place and
//! lets the supervised driver add timeouts, panic recovery and breakers around each call.

use std::sync::Arc;

use super::{
    ChangeRules, Changes, Decision, Hook, HookError, Outcome, Privilege, Request, apply_changes,
    clean_reason,
};

/// The registered hooks, in order, with the privilege each was registered with and the rules
/// their changes must pass.
#[derive(Clone)]
pub struct Chain {
    hooks: Vec<Arc<dyn Hook>>,
    // `privileges[i]` is what the registration of `hooks[i]` granted.
    privileges: Vec<Privilege>,
    rules: ChangeRules,
    fail_open: bool,
    /// Whether the last of `hooks` was registered with [`Chain::with_privileged_last`] and
    /// stays last.
    sealed: bool,
}

impl std::fmt::Debug for Chain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Chain")
            .field(
                "hooks",
                &self
                    .hooks
                    .iter()
                    .map(|hook| hook.name())
                    .collect::<Vec<_>>(),
            )
            .field("privileges", &self.privileges)
            .field("rules", &self.rules)
            .field("fail_open", &self.fail_open)
            .field("sealed", &self.sealed)
            .finish()
    }
}

/// What the chain decided for one attempt, naming the hook that decided.
// The admit variant is the common one and is moved once per attempt; boxing it would cost an
// allocation on the hot path to save stack space on the rare ones.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Every hook admitted the attempt (or was passed over under fail-open).
    Admit {
        /// The request with every hook's changes applied.
        request: Request,
        /// The changes of every hook, merged in order; empty when no hook changed anything.
        changes: Changes,
        /// The hooks whose changes were applied, in chain order; empty when none changed it.
        changed_by: Vec<String>,
    },
    /// A hook refused the attempt, or its changes broke a rule. Permanent.
    Refuse {
        /// The hook that refused.
        hook: String,
        /// The cleaned reason; for a broken rule, `hook "<name>": <rule>`.
        reason: String,
    },
    /// A hook held the attempt. Temporary.
    Hold {
        /// The hook that held.
        hook: String,
        /// The cleaned reason.
        reason: String,
    },
    /// A hook was broken (error, timeout, panic, or skipped by its breaker), or the chain budget
    /// ran out before it answered. Temporary.
    Unavailable {
        /// The broken hook, or the hook the chain budget cut.
        hook: String,
        /// Why it gave no decision.
        error: HookError,
    },
}

impl Verdict {
    /// The cleaned cause of an unavailable hook, as the task instance shows it after
    /// `admission hook unavailable: <hook>: `; `None` for other verdicts.
    pub fn unavailable_cause(&self) -> Option<String> {
        match self {
            Verdict::Unavailable { error, .. } => Some(error.cleaned()),
            _ => None,
        }
    }
}

/// What recording one call's result came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recorded {
    /// How the call is counted.
    pub outcome: Outcome,
    /// Whether a broken call was passed over because of fail-open.
    pub failed_open: bool,
}

impl Chain {
    /// An empty chain whose hooks' changes must pass `rules`.
    pub fn new(rules: ChangeRules) -> Chain {
        Chain {
            hooks: Vec::new(),
            privileges: Vec::new(),
            rules,
            fail_open: false,
            sealed: false,
        }
    }

    /// Registers `hook` after the hooks already registered, unprivileged (its changes may not
    /// set `runtime_class_name` or fill limits, see [`Privilege`]), and before the privileged
    /// last hook the crate itself may register (the executor policy), which nothing can follow.
    pub fn with_hook(mut self, hook: Arc<dyn Hook>) -> Chain {
        let at = self.hooks.len() - usize::from(self.sealed);
        self.hooks.insert(at, hook);
        self.privileges.insert(at, Privilege::Unprivileged);
        self
    }

    /// Registers one of the crate's own hooks, privileged, as the last hook of the chain,
    /// whatever is registered after it: the executor policy (ADR 0100 §7), whose rules apply
    /// to the result of every other hook and which may also set `runtime_class_name` and fill
    /// empty limits within the unit. A second call replaces the first, so there is one last
    /// hook.
    ///
    /// Only the crate can call this, so an operator's hook can never be privileged, nor keep
    /// the policy from being last.
    pub(crate) fn with_privileged_last(mut self, hook: Arc<dyn Hook>) -> Chain {
        if self.sealed {
            self.hooks.pop();
            self.privileges.pop();
        }
        self.hooks.push(hook);
        self.privileges.push(Privilege::Privileged);
        self.sealed = true;
        self
    }

    /// Sets fail-open: a broken or skipped hook is passed over (admits unchanged) instead of
    /// making the attempt wait. A hold is never failed open.
    pub fn with_fail_open(mut self, fail_open: bool) -> Chain {
        self.fail_open = fail_open;
        self
    }

    /// Whether no hook is registered: the dispatcher then builds no request at all.
    pub fn is_empty(&self) -> bool {
        self.hooks.is_empty()
    }

    /// The hooks in the order they run.
    pub fn hooks(&self) -> &[Arc<dyn Hook>] {
        &self.hooks
    }

    /// The privilege the hook at `position` was registered with; `None` past the last hook.
    pub fn privilege(&self, position: usize) -> Option<Privilege> {
        self.privileges.get(position).copied()
    }

    /// The rules every hook's changes must pass.
    pub fn rules(&self) -> &ChangeRules {
        &self.rules
    }

    /// Starts deciding on `request`.
    pub fn start(&self, request: Request) -> ChainRun<'_> {
        ChainRun {
            chain: self,
            request,
            changes: Changes::default(),
            changed_by: Vec::new(),
            next: 0,
            decided: None,
        }
    }

    /// Runs every hook in order, calling each directly, and returns the verdict.
    ///
    /// This driver adds no timeout or panic recovery; the dispatcher drives the chain under
    /// supervision instead.
    ///
    /// # Cancel safety
    /// Dropping the future drops the hook call in progress; nothing is recorded for it.
    pub async fn admit(&self, request: Request) -> Verdict {
        let mut run = self.start(request);
        while let Some(hook) = run.next_hook() {
            let result = hook.admit(run.request()).await;
            run.record(result);
        }
        run.finish()
    }
}

/// One attempt going through the chain.
#[derive(Debug)]
pub struct ChainRun<'c> {
    chain: &'c Chain,
    request: Request,
    changes: Changes,
    changed_by: Vec<String>,
    next: usize,
    // The deciding hook's verdict, boxed: a run is held across every hook call of a driver's
    // future, and this keeps the request out of it a second time.
    decided: Option<Box<Verdict>>,
}

impl<'c> ChainRun<'c> {
    /// The hook to call next, or `None` when the chain has decided.
    pub fn next_hook(&self) -> Option<&'c Arc<dyn Hook>> {
        if self.decided.is_some() {
            return None;
        }
        self.chain.hooks.get(self.next)
    }

    /// The position of the next hook in the chain, for a driver that keeps per-hook state.
    pub fn position(&self) -> usize {
        self.next
    }

    /// The request to show the next hook: the attempt with every earlier change applied.
    pub fn request(&self) -> &Request {
        &self.request
    }

    /// Records the next hook's result and says how it counts, failing open when the chain does.
    ///
    /// # Panics
    /// When called after the chain has decided; drivers call it once per [`Self::next_hook`].
    pub fn record(&mut self, result: Result<Decision, HookError>) -> Recorded {
        self.record_failing_open(result, self.chain.fail_open)
    }

    /// [`Self::record`] with the hook's own fail-open setting, for a driver that supervises each
    /// hook with its own settings (a webhook's `fail_open`).
    ///
    /// # Panics
    /// As [`Self::record`].
    pub(crate) fn record_failing_open(
        &mut self,
        result: Result<Decision, HookError>,
        fail_open: bool,
    ) -> Recorded {
        let hook = self.next_hook().expect("record follows next_hook");
        let privilege = self.chain.privileges[self.next];
        self.next += 1;
        let name = || hook.name().to_owned();
        let mut failed_open = false;
        let outcome = match result {
            Ok(Decision::Admit) => Outcome::Admit,
            Ok(Decision::AdmitWith(changes)) => {
                let rules = &self.chain.rules;
                let checked = rules
                    .check(&changes, privilege, &self.request)
                    .and_then(|()| {
                        if hook.is_remote() {
                            rules.check_remote(&changes, &self.request)
                        } else {
                            Ok(())
                        }
                    });
                match checked {
                    Ok(()) => {
                        apply_changes(&mut self.request, &changes);
                        if !changes.is_empty() {
                            self.changed_by.push(name());
                        }
                        self.changes.merge(*changes);
                        Outcome::AdmitWith
                    }
                    Err(error) => {
                        self.decided = Some(Box::new(Verdict::Refuse {
                            hook: name(),
                            reason: clean_reason(&format!("hook {:?}: {error}", hook.name())),
                        }));
                        Outcome::InvalidChange
                    }
                }
            }
            Ok(Decision::Hold(reason)) => {
                self.decided = Some(Box::new(Verdict::Hold {
                    hook: name(),
                    reason: clean_reason(&reason),
                }));
                Outcome::Hold
            }
            Ok(Decision::Refuse(reason)) => {
                self.decided = Some(Box::new(Verdict::Refuse {
                    hook: name(),
                    reason: clean_reason(&reason),
                }));
                Outcome::Refuse
            }
            Err(error) => {
                let outcome = match error {
                    HookError::Failed(_) => Outcome::Error,
                    HookError::Elapsed(_) => Outcome::Timeout,
                    HookError::Panicked(_) => Outcome::Panic,
                    HookError::Skipped => Outcome::Skipped,
                    HookError::BudgetSpent(_) => Outcome::BudgetSpent,
                };
                if fail_open {
                    failed_open = true;
                } else {
                    self.decided = Some(Box::new(Verdict::Unavailable {
                        hook: name(),
                        error,
                    }));
                }
                outcome
            }
        };
        Recorded {
            outcome,
            failed_open,
        }
    }

    /// The verdict: the deciding hook's, or an admit with the merged changes when every hook ran.
    pub fn finish(self) -> Verdict {
        match self.decided {
            Some(verdict) => *verdict,
            None => Verdict::Admit {
                request: self.request,
                changes: self.changes,
                changed_by: self.changed_by,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::{HookFuture, ResourceList};

    /// Answers every attempt with the same changes.
    struct Changing(Changes);

    impl Hook for Changing {
        fn name(&self) -> &str {
            "policy"
        }

        fn is_remote(&self) -> bool {
            false
        }

        fn admit<'a>(&'a self, _: &'a Request) -> HookFuture<'a> {
            let changes = self.0.clone();
            Box::pin(async move { Ok(Decision::AdmitWith(Box::new(changes))) })
        }
    }

    /// A runtime class and a CPU limit to fill: what only a privileged hook may change.
    fn privileged_changes() -> Changes {
        Changes {
            runtime_class_name: Some("gvisor".to_owned()),
            fill_limits: Some(ResourceList {
                cpu: Some("1".to_owned()),
                ..ResourceList::default()
            }),
            ..Changes::default()
        }
    }

    /// Records what the only hook of `chain` answers, as a driver would.
    fn record_the_answer(chain: &Chain) -> (Recorded, Verdict) {
        let mut run = chain.start(Request::new("acme", "etl", "load"));
        let recorded = run.record(Ok(Decision::AdmitWith(Box::new(privileged_changes()))));
        (recorded, run.finish())
    }

    #[test]
    fn hook_the_crate_registers_privileged_may_set_a_runtime_class_and_fill_limits() {
        let chain = Chain::new(ChangeRules::default())
            .with_privileged_last(Arc::new(Changing(privileged_changes())));

        let (recorded, verdict) = record_the_answer(&chain);

        assert_eq!(recorded.outcome, Outcome::AdmitWith);
        let Verdict::Admit {
            request, changes, ..
        } = verdict
        else {
            panic!("expected an admit, got {verdict:?}")
        };
        assert_eq!(request.execution.runtime_class_name, "gvisor");
        assert_eq!(request.resources.limits.cpu.as_deref(), Some("1"));
        assert_eq!(changes, privileged_changes());
    }

    #[test]
    fn same_hook_registered_through_with_hook_is_refused_what_privilege_allows() {
        let chain =
            Chain::new(ChangeRules::default()).with_hook(Arc::new(Changing(privileged_changes())));

        let (recorded, verdict) = record_the_answer(&chain);

        assert_eq!(recorded.outcome, Outcome::InvalidChange);
        assert_eq!(
            verdict,
            Verdict::Refuse {
                hook: "policy".to_owned(),
                reason: r#"hook "policy": runtime_class_name may only be set by a privileged hook"#
                    .to_owned(),
            }
        );
    }

    #[test]
    fn privilege_is_recorded_per_registration_in_chain_order() {
        let chain = Chain::new(ChangeRules::default())
            .with_hook(Arc::new(Changing(Changes::default())))
            .with_privileged_last(Arc::new(Changing(Changes::default())));

        assert_eq!(
            [0, 1, 2].map(|position| chain.privilege(position)),
            [
                Some(Privilege::Unprivileged),
                Some(Privilege::Privileged),
                None
            ]
        );
    }
}
