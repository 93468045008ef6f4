//! `/tasks/admit`: the `dexaflow.io/admission/v1` protocol served, so that an install without
//! its own binary (Dexaflow's Go webhook client, or this crate's) asks a chain run here.
//!
//! The chain is made by [`ChainBuilder`], as the dispatcher's is: the config's `placement`,
//! `freeze` and `deny` hooks (every one but a `webhook`) and any Rust hooks a library user adds
//! through [`super::ServerBuilder`], with the server config's own change rules, each call
//! supervised (timeout, panic recovery, a breaker per hook). The executor policy is never part of it: it stays the last hook of the
//! dispatcher's own chain (ADR 0100 §7), and what this service answers is an operator hook's
//! change, which the caller checks again as it checks any webhook's.
//!
//! | the chain's verdict | answer |
//! |---|---|
//! | every hook admitted, nothing changed | 200 `admit` |
//! | every hook admitted, with changes | 200 `admit_with` and the merged changes |
//! | a hook held | 200 `hold` and its reason |
//! | a hook refused, or its changes broke a rule | 200 `refuse` and the reason |
//! | a hook broken (error, timeout, panic), skipped by its breaker, or the chain budget spent | 503 and a JSON error naming the hook |
//!
//! The chain budget is `min(chain_timeout, the time left before the request's deadline)`, less a
//! small margin to send the answer in: a hook the caller's deadline cuts is answered 503 as the
//! budget spent, naming it, and its breaker does not count it.
//!
//! A 503 is what the caller's breaker counts and its fail-open applies to: the chain here being
//! down is the webhook being down. A hold is the chain working and stays a 200.
//!
//! # Actors and the HTTP runtime
//! The breakers are actix actors; the server runs on a multi-threaded tokio runtime. The
//! breakers get a thread of their own with an actix system on it, started with the service and
//! stopped when it is dropped. A request never waits on that thread: the gates read each
//! breaker's state from atomics and report with a message that is only queued, and each hook
//! call runs on the runtime thread that serves the request.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

use super::ServeError;
use super::registry::{Answer, Handler, Kind, Ruling, Service, Unavailable};
use crate::admission::{API_VERSION, AnswerEnvelope, Decision, Hook, RequestEnvelope, Verdict};
use crate::hooks::HookSpec;
use crate::supervise::{ChainBuilder, SupervisedChain};

/// The path of the `/tasks/admit` service.
pub const PATH: &str = "/tasks/admit";

/// The `/tasks/admit` service: a supervised chain and the thread its breakers run on.
pub(crate) struct TaskAdmission {
    /// `None` when the chain has no hook: every attempt is admitted unchanged.
    chain: Option<SupervisedChain>,
    /// Dropped with the service, which ends the breakers' thread.
    _stop: Option<oneshot::Sender<()>>,
}

impl std::fmt::Debug for TaskAdmission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskAdmission")
            .field("chain", &self.chain)
            .finish()
    }
}

impl TaskAdmission {
    /// Starts the chain `builder` makes, its breakers on a thread of their own.
    ///
    /// # Errors
    /// [`ServeError::Breakers`] when the thread cannot be started, or ends before the chain is
    /// made.
    pub(crate) async fn start(builder: ChainBuilder) -> Result<TaskAdmission, ServeError> {
        if builder.is_empty() {
            return Ok(TaskAdmission {
                chain: None,
                _stop: None,
            });
        }
        let (started, chain) = oneshot::channel();
        let (stop, stopped) = oneshot::channel::<()>();
        std::thread::Builder::new()
            .name("admission-breakers".to_owned())
            .spawn(move || {
                actix::System::new().block_on(async move {
                    let _ = started.send(builder.start());
                    // Until the service is dropped: the breakers' timers run here.
                    let _ = stopped.await;
                });
            })
            .map_err(ServeError::Breakers)?;
        let chain = chain.await.map_err(|_| {
            ServeError::Breakers(std::io::Error::other(
                "the breakers' thread ended before the chain was made",
            ))
        })?;
        Ok(TaskAdmission {
            chain,
            _stop: Some(stop),
        })
    }

    /// The service: [`PATH`], mutating (an answer may carry changes), for authenticated callers
    /// only ([`Service::authenticated`]).
    pub(crate) fn into_service(self) -> Service {
        Service::new(PATH, Kind::Mutating, self).authenticated()
    }
}

/// The hooks of `specs` the server runs: every one but a `webhook`, which is how a dispatcher
/// reaches a server like this one, so that a config file shared by `dispatch` and `serve`
/// cannot make the server call itself. Each one left out is logged.
///
/// Relative freeze windows start counting when this is called, as with
/// [`crate::hooks::build`]: call it once at boot.
pub(crate) fn served_hooks(specs: &[HookSpec]) -> Vec<Arc<dyn Hook>> {
    let served: Vec<HookSpec> = specs
        .iter()
        .filter(|spec| {
            let served = !matches!(spec, HookSpec::Webhook(_));
            if !served {
                tracing::warn!(
                    hook = spec.name(),
                    "a webhook hook is not run by the server: it is how a dispatcher calls one"
                );
            }
            served
        })
        .cloned()
        .collect();
    crate::hooks::build(&served)
}

impl Handler for TaskAdmission {
    type Request = RequestEnvelope;
    type Response = AnswerEnvelope;

    fn uid(envelope: &RequestEnvelope) -> &str {
        &envelope.uid
    }

    fn check(envelope: &RequestEnvelope) -> Result<(), String> {
        let got = &envelope.request.api_version;
        if got == API_VERSION {
            Ok(())
        } else {
            Err(format!(
                "api_version: expected {API_VERSION:?}, got {got:?}"
            ))
        }
    }

    async fn handle(
        &self,
        envelope: RequestEnvelope,
        deadline: Instant,
    ) -> Result<Answer<AnswerEnvelope>, Unavailable> {
        let RequestEnvelope { uid, request } = envelope;
        let Some(chain) = &self.chain else {
            return Ok(answer(uid, Decision::Admit));
        };
        let verdict = chain.admit_within(request, chain_budget(deadline)).await;
        let decision = match verdict {
            Verdict::Admit { changes, .. } if changes.is_empty() => Decision::Admit,
            Verdict::Admit { changes, .. } => Decision::AdmitWith(Box::new(changes)),
            Verdict::Hold { hook, reason } => Decision::Hold(or_named(reason, "held", &hook)),
            Verdict::Refuse { hook, reason } => {
                Decision::Refuse(or_named(reason, "refused", &hook))
            }
            Verdict::Unavailable { hook, error } => {
                return Err(Unavailable(error.unavailable_reason(&hook)));
            }
        };
        Ok(answer(uid, decision))
    }
}

/// The most the chain leaves unused before the serve function's deadline: time to make and
/// send the answer once the caller's deadline cuts a hook, so that the answer naming the hook
/// arrives before the serve function gives up on it.
const ANSWER_MARGIN: Duration = Duration::from_millis(50);

/// The chain's share of the time left before `deadline`: all of it but a tenth, and that tenth
/// no more than [`ANSWER_MARGIN`].
fn chain_budget(deadline: Instant) -> Duration {
    let left = deadline.saturating_duration_since(Instant::now());
    left - (left / 10).min(ANSWER_MARGIN)
}

/// The answer carrying `decision`, and how the metrics count it.
fn answer(uid: String, decision: Decision) -> Answer<AnswerEnvelope> {
    let ruling = match &decision {
        Decision::Admit => Ruling::Allowed,
        Decision::AdmitWith(_) => Ruling::Patched,
        Decision::Hold(_) => Ruling::Held,
        Decision::Refuse(_) => Ruling::Denied,
    };
    Answer {
        body: AnswerEnvelope::new(uid, decision),
        ruling,
    }
}

/// `reason`, or when cleaning left it blank, one naming the hook: the wire requires a reason
/// that is not blank for a hold or a refusal.
fn or_named(reason: String, what: &str, hook: &str) -> String {
    if reason.trim().is_empty() {
        format!("{what} by hook {hook:?}")
    } else {
        reason
    }
}
