//! The `freeze` hook: holds attempts during a time window, such as a quarter-end change freeze.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use super::LocalRule;
use crate::admission::{self, Decision, Request};

use super::{Matcher, SpecError};

/// The config of a `freeze` hook.
///
/// In YAML the window is either relative to boot, `after` (default `0s`) and `for`, or absolute,
/// `from` (default: boot) and `until`, as RFC 3339 UTC timestamps such as
/// `2026-12-31T18:00:00Z`. Durations are written as `500ms`, `3s`, `2h 30m`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "FreezeFields", into = "FreezeFields")]
pub struct FreezeSpec {
    /// The hook's name, unique in the chain.
    pub name: String,
    /// The tenants the freeze holds; empty holds every tenant.
    pub tenants: Vec<String>,
    /// When the freeze holds.
    pub window: Window,
    /// The reason a held attempt shows; `None` for `change freeze for tenant <tenant>`.
    pub reason: Option<String>,
}

/// When a freeze holds attempts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Window {
    /// From `after` past the moment the hook is built (boot) until `length` later, measured on
    /// the tokio clock, so that tests can pause and advance it.
    Relative {
        /// How long after boot the freeze starts.
        after: Duration,
        /// How long it lasts; above zero.
        length: Duration,
    },
    /// Between two wall-clock times, read from the hook's [`Clock`].
    Absolute {
        /// When it starts; `None` holds from boot.
        from: Option<SystemTime>,
        /// When it lifts; after `from`.
        until: SystemTime,
    },
}

/// The YAML shape of a [`FreezeSpec`], before the window is worked out.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct FreezeFields {
    name: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    tenants: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    after: Option<String>,
    #[serde(rename = "for", default, skip_serializing_if = "Option::is_none")]
    length: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    from: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    until: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
}

impl TryFrom<FreezeFields> for FreezeSpec {
    type Error = SpecError;

    /// Serde carries one error: the first of [`FreezeFields::window`]'s.
    fn try_from(fields: FreezeFields) -> Result<FreezeSpec, SpecError> {
        let window = fields
            .window()
            .map_err(|mut problems| problems.swap_remove(0))?;
        Ok(FreezeSpec {
            name: fields.name,
            tenants: fields.tenants,
            window,
            reason: fields.reason,
        })
    }
}

impl FreezeSpec {
    /// Every problem with the window of a freeze declaration `fields` (its keys without
    /// `type`), in the order its fields are written (`after`, `for`, `from`, `until`), then
    /// what they say together; empty when the window is good.
    ///
    /// Deserializing stops at the window's first problem; config calls this for a declaration
    /// that did not deserialize, so that a bad `from` and a bad `until` are both reported.
    ///
    /// # Errors
    /// The deserializer's error when `fields` are not a freeze's (a field it does not have, or
    /// of the wrong type): that is the declaration's problem, not its window's.
    pub fn window_problems<'de, D: serde::Deserializer<'de>>(
        fields: D,
    ) -> Result<Vec<SpecError>, D::Error> {
        let fields = FreezeFields::deserialize(fields)?;
        Ok(fields.window().err().unwrap_or_default())
    }
}

impl FreezeFields {
    /// The window these fields describe, or every problem with it (never empty).
    fn window(&self) -> Result<Window, Vec<SpecError>> {
        let relative = self.after.is_some() || self.length.is_some();
        let absolute = self.from.is_some() || self.until.is_some();
        let mut problems = Vec::new();
        let window = match (relative, absolute) {
            (true, true) => return Err(vec![SpecError::MixedWindow]),
            (false, false) => return Err(vec![SpecError::NoWindowEnd]),
            (true, false) => {
                let after = match &self.after {
                    Some(after) => keep(parse_duration("after", after), &mut problems),
                    None => Some(Duration::ZERO),
                };
                let length = keep(
                    self.length
                        .as_ref()
                        .ok_or(SpecError::NoWindowEnd)
                        .and_then(|length| parse_duration("for", length)),
                    &mut problems,
                );
                match (after, length) {
                    (Some(_), Some(length)) if length.is_zero() => {
                        return Err(vec![SpecError::ZeroLength]);
                    }
                    (Some(after), Some(length)) => Window::Relative { after, length },
                    _ => return Err(problems),
                }
            }
            (false, true) => {
                let from = match &self.from {
                    Some(from) => keep(parse_timestamp("from", from), &mut problems).map(Some),
                    None => Some(None),
                };
                let until = keep(
                    self.until
                        .as_ref()
                        .ok_or(SpecError::NoWindowEnd)
                        .and_then(|until| parse_timestamp("until", until)),
                    &mut problems,
                );
                match (from, until) {
                    (Some(Some(from)), Some(until)) if from >= until => {
                        return Err(vec![SpecError::EmptyWindow]);
                    }
                    (Some(from), Some(until)) => Window::Absolute { from, until },
                    _ => return Err(problems),
                }
            }
        };
        Ok(window)
    }
}

impl From<FreezeSpec> for FreezeFields {
    fn from(spec: FreezeSpec) -> FreezeFields {
        let (after, length, from, until) = match spec.window {
            Window::Relative { after, length } => (
                Some(format_duration(after)),
                Some(format_duration(length)),
                None,
                None,
            ),
            Window::Absolute { from, until } => (
                None,
                None,
                from.map(|from| humantime::format_rfc3339(from).to_string()),
                Some(humantime::format_rfc3339(until).to_string()),
            ),
        };
        FreezeFields {
            name: spec.name,
            tenants: spec.tenants,
            after,
            length,
            from,
            until,
            reason: spec.reason,
        }
    }
}

/// The value of `result`, or `None` with its problem added to `problems`.
fn keep<T>(result: Result<T, SpecError>, problems: &mut Vec<SpecError>) -> Option<T> {
    result.map_err(|problem| problems.push(problem)).ok()
}

pub(super) fn parse_duration(field: &'static str, text: &str) -> Result<Duration, SpecError> {
    admission::parse_duration(text).map_err(|reason| SpecError::InvalidDuration {
        field,
        value: text.to_owned(),
        reason,
    })
}

pub(super) fn format_duration(duration: Duration) -> String {
    humantime::format_duration(duration).to_string()
}

fn parse_timestamp(field: &'static str, text: &str) -> Result<SystemTime, SpecError> {
    humantime::parse_rfc3339(text).map_err(|_| SpecError::InvalidTimestamp {
        field,
        value: text.to_owned(),
    })
}

/// The wall clock an absolute freeze window is read from; tests inject their own.
pub trait Clock: Send + Sync + fmt::Debug {
    /// The current wall-clock time.
    fn now(&self) -> SystemTime;
}

/// The system's wall clock, [`SystemTime::now`].
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
}

/// A hook that holds the attempts of some tenants while its window is open.
///
/// Inside the window an attempt of a listed tenant (any tenant, when none is listed) gets
/// [`Decision::Hold`], so the dispatcher offers it again later and fails it only once the retry
/// window (ADR 0093) is spent; outside it, and for other tenants, [`Decision::Admit`].
#[derive(Debug, Clone)]
pub struct Freeze {
    name: String,
    matcher: Matcher,
    window: Armed,
    reason: Option<String>,
    clock: Arc<dyn Clock>,
}

/// A window fixed to the clock it is measured on.
#[derive(Debug, Clone, Copy)]
enum Armed {
    Relative {
        start: Instant,
        end: Instant,
    },
    Absolute {
        from: Option<SystemTime>,
        until: SystemTime,
    },
}

impl Freeze {
    /// The hook the spec describes; a relative window starts counting now, on the tokio clock.
    ///
    /// `clock` is read only by an absolute window.
    pub fn new(spec: &FreezeSpec, clock: Arc<dyn Clock>) -> Freeze {
        let window = match spec.window {
            Window::Relative { after, length } => {
                let start = Instant::now() + after;
                Armed::Relative {
                    start,
                    end: start + length,
                }
            }
            Window::Absolute { from, until } => Armed::Absolute { from, until },
        };
        Freeze {
            name: spec.name.clone(),
            matcher: Matcher {
                tenants: spec.tenants.clone(),
                ..Matcher::default()
            },
            window,
            reason: spec.reason.clone(),
            clock,
        }
    }

    /// Whether the window is open now.
    pub(crate) fn is_frozen(&self) -> bool {
        match self.window {
            Armed::Relative { start, end } => {
                let now = Instant::now();
                start <= now && now < end
            }
            Armed::Absolute { from, until } => {
                let now = self.clock.now();
                from.is_none_or(|from| from <= now) && now < until
            }
        }
    }
}

impl LocalRule for Freeze {
    fn rule_name(&self) -> &str {
        &self.name
    }

    fn decide(&self, request: &Request) -> Decision {
        if !self.matcher.matches(request) || !self.is_frozen() {
            return Decision::Admit;
        }
        Decision::Hold(match &self.reason {
            Some(reason) => reason.clone(),
            None => format!("change freeze for tenant {}", request.tenant),
        })
    }
}
