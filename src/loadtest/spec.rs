//! The `--hook SPEC` grammar and the synthetic hooks it builds.
//!
//! | SPEC | the hook |
//! |---|---|
//! | `noop` | admits at once |
//! | `sleep:DUR` | admits after `DUR`, such as `sleep:1ms`, timed by [`super::timer`] |
//! | `jitter:MIN..MAX` | admits after a uniformly drawn time from `MIN` to `MAX` |
//! | `spin:DUR` | burns `DUR` of the wall clock on the CPU, then admits: a CPU-bound hook |
//! | `error:P` | returns an error with probability `P`, else admits |
//! | `panic:P` | panics with probability `P`, else admits |
//! | `timeout:P` | never answers with probability `P` (the supervision timeout ends the call), else admits |
//! | `hold:P` | holds with probability `P`, else admits |
//! | `refuse:P` | refuses with probability `P`, else admits |
//! | `change:P` | admits with a node selector and a label that pass the change rules with probability `P`, else admits |
//! | `webhook:URL` | the real [`crate::hooks::Webhook`] at `URL`, with the run's [`WebhookFiles`] |
//!
//! `P` is a probability from 0 to 1; `DUR` is a duration such as `500us`, `1ms` or `2s`. The
//! draws come from a [`fastrand::Rng`] per hook, seeded from the run's seed and the hook's
//! position, so that a run is reproducible.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Mutex;
use std::time::Duration;

use thiserror::Error;

use super::timer::TimerThread;
use crate::admission::{self, Changes, Decision, Hook, HookError, HookFuture, Request};
use crate::sync::lock;

/// The node-selector key and the label key a `change:P` hook sets; a launched attempt that
/// carries the label was admitted with changes.
pub(crate) const CHANGED_KEY: &str = "loadtest.example.com/changed";

/// One hook of a load test, as `--hook SPEC` describes it: synthetic, or a webhook.
#[derive(Debug, Clone, PartialEq)]
pub enum HookFlag {
    /// `noop`: admits at once.
    Noop,
    /// `sleep:DUR`: admits after this long.
    Sleep(Duration),
    /// `jitter:MIN..MAX`: admits after a uniformly drawn time in the range.
    Jitter {
        /// The shortest wait.
        min: Duration,
        /// The longest wait.
        max: Duration,
    },
    /// `spin:DUR`: keeps the CPU busy for this long of the wall clock, then admits, as a
    /// CPU-bound hook (policy evaluation, an operator's own Rust) would: what parallelism can
    /// speed up, where `sleep` can only be overlapped.
    Spin(Duration),
    /// `error:P`: an error with this probability.
    Error(f64),
    /// `panic:P`: a panic with this probability.
    Panic(f64),
    /// `timeout:P`: no answer at all with this probability, so the call times out.
    Timeout(f64),
    /// `hold:P`: a hold with this probability.
    Hold(f64),
    /// `refuse:P`: a refusal with this probability.
    Refuse(f64),
    /// `change:P`: an admit with changes with this probability.
    Change(f64),
    /// `webhook:URL`: the webhook hook at this URL.
    Webhook(String),
}

/// The files of every `webhook:URL` hook of a run: `--webhook-ca-bundle` and
/// `--webhook-bearer-token-file`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WebhookFiles {
    /// The PEM bundle the webhooks' certificates must chain to; the system's roots when `None`.
    pub ca_bundle: Option<PathBuf>,
    /// The file the webhooks' bearer token is read from; none is sent when `None`.
    pub bearer_token_file: Option<PathBuf>,
}

/// Why a `--hook` value is not a SPEC. Each message names the flag and the value.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum HookFlagError {
    /// The part before `:` is no kind of hook.
    #[error(
        "--hook {spec:?}: unknown hook {kind:?}; expected noop, sleep:DUR, jitter:MIN..MAX, \
         spin:DUR, error:P, panic:P, timeout:P, hold:P, refuse:P, change:P or webhook:URL"
    )]
    UnknownKind {
        /// The whole value.
        spec: String,
        /// The part before `:`.
        kind: String,
    },
    /// A kind that takes a value was given none, or `noop` was given one.
    #[error("--hook {spec:?}: {expected}")]
    Shape {
        /// The whole value.
        spec: String,
        /// What this kind of hook takes.
        expected: &'static str,
    },
    /// A duration that does not parse.
    #[error("--hook {spec:?}: expected a duration such as \"1ms\", got {}", reason.explained(format!("{value:?}")))]
    Duration {
        /// The whole value.
        spec: String,
        /// The part that is no duration.
        value: String,
        /// Why it is none.
        reason: admission::DurationError,
    },
    /// A jitter range whose minimum is above its maximum.
    #[error("--hook {spec:?}: the minimum is above the maximum")]
    Range {
        /// The whole value.
        spec: String,
    },
    /// A probability that is no number from 0 to 1.
    #[error("--hook {spec:?}: expected a probability from 0 to 1, got {value:?}")]
    Probability {
        /// The whole value.
        spec: String,
        /// The part that is no probability.
        value: String,
    },
}

impl FromStr for HookFlag {
    type Err = HookFlagError;

    fn from_str(spec: &str) -> Result<HookFlag, HookFlagError> {
        let (kind, value) = match spec.split_once(':') {
            Some((kind, value)) => (kind, Some(value)),
            None => (spec, None),
        };
        let shape = |expected| HookFlagError::Shape {
            spec: spec.to_owned(),
            expected,
        };
        let probability = |value: Option<&str>| {
            let value = value
                .ok_or_else(|| shape("expected a probability after \":\", such as \"0.1\""))?;
            parse_probability(spec, value)
        };
        match kind {
            "noop" => match value {
                None => Ok(HookFlag::Noop),
                Some(_) => Err(shape("noop takes no value")),
            },
            "sleep" => {
                let value = value.ok_or_else(|| {
                    shape("expected a duration after \":\", such as \"sleep:1ms\"")
                })?;
                Ok(HookFlag::Sleep(parse_duration(spec, value)?))
            }
            "jitter" => {
                let value = value.ok_or_else(|| {
                    shape("expected MIN..MAX after \":\", such as \"jitter:1ms..5ms\"")
                })?;
                let (min, max) = value.split_once("..").ok_or_else(|| {
                    shape("expected MIN..MAX after \":\", such as \"jitter:1ms..5ms\"")
                })?;
                let (min, max) = (parse_duration(spec, min)?, parse_duration(spec, max)?);
                if min > max {
                    return Err(HookFlagError::Range {
                        spec: spec.to_owned(),
                    });
                }
                Ok(HookFlag::Jitter { min, max })
            }
            "spin" => {
                let value = value.ok_or_else(|| {
                    shape("expected a duration after \":\", such as \"spin:20us\"")
                })?;
                Ok(HookFlag::Spin(parse_duration(spec, value)?))
            }
            "error" => Ok(HookFlag::Error(probability(value)?)),
            "panic" => Ok(HookFlag::Panic(probability(value)?)),
            "timeout" => Ok(HookFlag::Timeout(probability(value)?)),
            "hold" => Ok(HookFlag::Hold(probability(value)?)),
            "refuse" => Ok(HookFlag::Refuse(probability(value)?)),
            "change" => Ok(HookFlag::Change(probability(value)?)),
            "webhook" => match value {
                Some(url) if !url.is_empty() => Ok(HookFlag::Webhook(url.to_owned())),
                _ => Err(shape(
                    "expected a URL after \":\", such as \"webhook:https://127.0.0.1:8443/admit\"",
                )),
            },
            _ => Err(HookFlagError::UnknownKind {
                spec: spec.to_owned(),
                kind: kind.to_owned(),
            }),
        }
    }
}

fn parse_duration(spec: &str, value: &str) -> Result<Duration, HookFlagError> {
    admission::parse_duration(value).map_err(|reason| HookFlagError::Duration {
        spec: spec.to_owned(),
        value: value.to_owned(),
        reason,
    })
}

fn parse_probability(spec: &str, value: &str) -> Result<f64, HookFlagError> {
    match value.trim().parse::<f64>() {
        Ok(p) if (0.0..=1.0).contains(&p) => Ok(p),
        _ => Err(HookFlagError::Probability {
            spec: spec.to_owned(),
            value: value.to_owned(),
        }),
    }
}

impl HookFlag {
    /// The kind's name, as the SPEC starts: `noop`, `sleep`, `jitter`, `error`, ...
    pub fn kind(&self) -> &'static str {
        match self {
            HookFlag::Noop => "noop",
            HookFlag::Sleep(_) => "sleep",
            HookFlag::Jitter { .. } => "jitter",
            HookFlag::Spin(_) => "spin",
            HookFlag::Error(_) => "error",
            HookFlag::Panic(_) => "panic",
            HookFlag::Timeout(_) => "timeout",
            HookFlag::Hold(_) => "hold",
            HookFlag::Refuse(_) => "refuse",
            HookFlag::Change(_) => "change",
            HookFlag::Webhook(_) => "webhook",
        }
    }

    /// The name of the hook this SPEC makes at `position` of the chain: `<kind>#<position>`
    /// (`error#0`), so that reasons and breaker reports say which hook of the chain it was.
    pub(crate) fn hook_name(&self, position: usize) -> String {
        format!("{}#{position}", self.kind())
    }
}

impl fmt::Display for HookFlag {
    /// The SPEC that parses back to this value.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = self.kind();
        match self {
            HookFlag::Noop => f.write_str(kind),
            HookFlag::Sleep(duration) | HookFlag::Spin(duration) => {
                write!(f, "{kind}:{}", humantime::format_duration(*duration))
            }
            HookFlag::Jitter { min, max } => write!(
                f,
                "{kind}:{}..{}",
                humantime::format_duration(*min),
                humantime::format_duration(*max)
            ),
            HookFlag::Error(p)
            | HookFlag::Panic(p)
            | HookFlag::Timeout(p)
            | HookFlag::Hold(p)
            | HookFlag::Refuse(p)
            | HookFlag::Change(p) => write!(f, "{kind}:{p}"),
            HookFlag::Webhook(url) => write!(f, "{kind}:{url}"),
        }
    }
}

/// Parses every `--hook` value, in chain order.
///
/// # Errors
/// The first value that is no SPEC.
pub fn parse_all<S: AsRef<str>>(specs: &[S]) -> Result<Vec<HookFlag>, HookFlagError> {
    specs.iter().map(|spec| spec.as_ref().parse()).collect()
}

/// The hook a [`HookFlag`] describes, answering from its own seeded random generator, named
/// as [`HookFlag::hook_name`] says.
#[derive(Debug)]
pub(crate) struct Synthetic {
    name: String,
    spec: HookFlag,
    rng: Mutex<fastrand::Rng>,
    // Where `sleep` and `jitter` wait; tokio's timer when `None`.
    timer: Option<TimerThread>,
}

impl Synthetic {
    /// The hook at `position` in the chain, drawing from a generator seeded from `seed` and the
    /// position.
    pub(crate) fn new(spec: HookFlag, position: usize, seed: u64) -> Synthetic {
        // Spread the positions apart so that two hooks of one run never draw the same sequence.
        let seed = seed
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            .wrapping_add(position as u64);
        Synthetic {
            name: spec.hook_name(position),
            spec,
            rng: Mutex::new(fastrand::Rng::with_seed(seed)),
            timer: None,
        }
    }

    /// The same hook waiting on `timer` instead of tokio's timer (see [`super::timer`]).
    #[must_use]
    pub(crate) fn waiting_on(self, timer: TimerThread) -> Synthetic {
        Synthetic {
            timer: Some(timer),
            ..self
        }
    }

    /// Admits after `duration`, on the hook's timer.
    fn admit_after(&self, duration: Duration) -> HookFuture<'_> {
        match &self.timer {
            Some(timer) => {
                let sleep = timer.sleep(duration);
                Box::pin(async move {
                    sleep.await;
                    Ok(Decision::Admit)
                })
            }
            None => Box::pin(async move {
                tokio::time::sleep(duration).await;
                Ok(Decision::Admit)
            }),
        }
    }

    /// Whether this call misbehaves, drawn with probability `p`.
    fn draws(&self, p: f64) -> bool {
        // A panic while drawing would leave a generator that still works; keep using it.
        let mut rng = lock(&self.rng);
        rng.f64() < p
    }

    fn uniform(&self, min: Duration, max: Duration) -> Duration {
        let mut rng = lock(&self.rng);
        min + (max - min).mul_f64(rng.f64())
    }
}

/// The changes of a `change:P` hook: a node selector and a label, both outside the reserved
/// prefixes, so they pass the change rules.
fn synthetic_changes() -> Changes {
    let mut changes = Changes::default();
    changes
        .node_selector
        .insert(CHANGED_KEY.to_owned(), "true".to_owned());
    changes
        .labels
        .insert(CHANGED_KEY.to_owned(), "true".to_owned());
    changes
}

/// Keeps this thread's CPU busy until `duration` of the wall clock has passed.
///
/// It reads std's clock, not tokio's: the spin stands for work done, which takes real time
/// whatever tokio's clock says, and a paused tokio clock would never let the loop end.
fn spin(duration: Duration) {
    let started = std::time::Instant::now();
    while started.elapsed() < duration {
        std::hint::spin_loop();
    }
}

/// Panics with `synthetic panic` while the hook's future is polled.
///
/// `resume_unwind` unwinds like a panic without calling the panic hook, so that a run with many
/// panics does not print a message for each on stderr.
fn unwind() -> Result<Decision, HookError> {
    std::panic::resume_unwind(Box::new("synthetic panic"))
}

impl Hook for Synthetic {
    fn name(&self) -> &str {
        &self.name
    }

    fn is_remote(&self) -> bool {
        false
    }

    fn admit<'a>(&'a self, _request: &'a Request) -> HookFuture<'a> {
        let admit = || -> HookFuture<'a> { Box::pin(std::future::ready(Ok(Decision::Admit))) };
        match self.spec {
            HookFlag::Noop => admit(),
            HookFlag::Sleep(duration) => self.admit_after(duration),
            HookFlag::Jitter { min, max } => self.admit_after(self.uniform(min, max)),
            HookFlag::Spin(duration) => Box::pin(async move {
                spin(duration);
                Ok(Decision::Admit)
            }),
            HookFlag::Error(p) if self.draws(p) => Box::pin(std::future::ready(Err(
                HookError::Failed("synthetic error".to_owned()),
            ))),
            HookFlag::Panic(p) if self.draws(p) => Box::pin(async { unwind() }),
            HookFlag::Timeout(p) if self.draws(p) => Box::pin(std::future::pending()),
            HookFlag::Hold(p) if self.draws(p) => Box::pin(std::future::ready(Ok(Decision::Hold(
                "synthetic hold".to_owned(),
            )))),
            HookFlag::Refuse(p) if self.draws(p) => Box::pin(std::future::ready(Ok(
                Decision::Refuse("synthetic refusal".to_owned()),
            ))),
            HookFlag::Change(p) if self.draws(p) => Box::pin(std::future::ready(Ok(
                Decision::AdmitWith(Box::new(synthetic_changes())),
            ))),
            _ => admit(),
        }
    }
}
