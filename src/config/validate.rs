//! Rules across keys: each reports against one key, and is skipped when a key it reads was
//! already bad, so that one typo is reported once.

use std::fmt;
use std::ops::RangeInclusive;
use std::time::Duration;

use super::keys::{
    ADMISSION_TIMEOUT, BREAKER_BACKOFF, BREAKER_MAX_BACKOFF, CHAIN_TIMEOUT, DRY_RUN_DIR,
    EXECUTOR_TYPE, SOURCE_MODE_ENABLED, SOURCE_MODE_IMAGE, UNIT, UNIT_CPU, UNIT_MEMORY,
};
use super::reader::Reader;
use super::{ConfigError, Key};

impl Reader {
    /// `executor.unit` sets both cpu and memory, or neither: called when only one is set.
    pub(super) fn check_unit_is_complete(&mut self) {
        if !self.is_bad(UNIT_CPU) && !self.is_bad(UNIT_MEMORY) {
            self.errors.push(ConfigError::Incomplete {
                key: Key::file(UNIT),
                what: "both cpu and memory, or neither".to_owned(),
            });
        }
    }

    /// Source mode needs its runtime image.
    pub(super) fn check_source_mode_image(&mut self, enabled: bool, image: &str) {
        if enabled && image.is_empty() && !self.is_bad(SOURCE_MODE_IMAGE) {
            self.errors.push(ConfigError::Required {
                key: Key::file(SOURCE_MODE_IMAGE),
                when: format!(
                    "{} is true (an image pinned by digest)",
                    self.named(SOURCE_MODE_ENABLED)
                ),
            });
        }
    }

    /// The kubernetes executor needs its dry-run directory: this crate has no Kubernetes
    /// client, so without one every attempt would fail after its retries instead of at boot.
    pub(super) fn check_kubernetes_has_a_dry_run_dir(&mut self, has_dry_run_dir: bool) {
        if !has_dry_run_dir && !self.is_bad(DRY_RUN_DIR) {
            self.errors.push(ConfigError::Required {
                key: Key::file(DRY_RUN_DIR),
                when: format!(
                    "{} is kubernetes (this build has no Kubernetes client: it writes each pod's manifest there)",
                    self.named(EXECUTOR_TYPE)
                ),
            });
        }
    }

    /// The chain's budget holds at least one whole hook call ([`chain_holds_a_call`]).
    pub(super) fn check_chain_timeout(&mut self, timeout: Duration, chain_timeout: Duration) {
        if self.is_bad(ADMISSION_TIMEOUT) || self.is_bad(CHAIN_TIMEOUT) {
            return;
        }
        if let Err(mismatch) = chain_holds_a_call(timeout, chain_timeout, ADMISSION_TIMEOUT) {
            self.reject(CHAIN_TIMEOUT, mismatch.expected, mismatch.got);
        }
    }

    /// A breaker's longest backoff is at least its first ([`max_backoff_covers_backoff`]).
    pub(super) fn check_max_backoff(&mut self, backoff: Duration, max_backoff: Duration) {
        if self.is_bad(BREAKER_BACKOFF) || self.is_bad(BREAKER_MAX_BACKOFF) {
            return;
        }
        if let Err(mismatch) = max_backoff_covers_backoff(backoff, max_backoff, BREAKER_BACKOFF) {
            self.reject(BREAKER_MAX_BACKOFF, mismatch.expected, mismatch.got);
        }
    }
}

/// What a value should have been and what it was, as an error shows them after the key or
/// flag: the rules below say it in these words whether a config key or a command-line flag
/// (`loadtest --buffer-size`) gave the value, so that one rule has one wording.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Mismatch {
    /// What the key or flag takes, such as `an integer from 0 to 65536`.
    pub(crate) expected: String,
    /// The value, as shown: quoted when it is text.
    pub(crate) got: String,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "expected {}, got {}", self.expected, self.got)
    }
}

/// How an integer key that takes `range` asks for its value.
pub(crate) fn integers(range: &RangeInclusive<u64>) -> String {
    match (*range.start(), *range.end()) {
        (0, u64::MAX) => "a non-negative integer".to_owned(),
        (1, u64::MAX) => "a positive integer".to_owned(),
        (low, high) => format!("an integer from {low} to {high}"),
    }
}

/// A value above `range`, `shown` as an error shows it, or too large for 64 bits.
pub(crate) fn too_large(shown: &str, range: &RangeInclusive<u64>) -> Mismatch {
    Mismatch {
        expected: format!("an integer from {} to {}", range.start(), range.end()),
        got: format!("{shown} (too large)"),
    }
}

/// The rule of every integer key: `number` (`shown` as an error shows it) lies in `range`.
pub(crate) fn integer_in(
    number: u64,
    shown: &str,
    range: &RangeInclusive<u64>,
) -> Result<u64, Mismatch> {
    if range.contains(&number) {
        Ok(number)
    } else if number > *range.end() {
        Err(too_large(shown, range))
    } else {
        Err(Mismatch {
            expected: integers(range),
            got: shown.to_owned(),
        })
    }
}

/// The rule of every duration key that must be positive: `duration` is at least `min` (one
/// nanosecond, or zero for a key that takes any); `example` is the key's default, shown as an
/// example, and `shown` the value as an error shows it.
pub(crate) fn duration_at_least(
    duration: Duration,
    min: Duration,
    example: Duration,
    shown: &str,
) -> Result<Duration, Mismatch> {
    if duration < min {
        let least = if min <= Duration::from_nanos(1) {
            "above 0s".to_owned()
        } else {
            format!("of at least {}", humantime::format_duration(min))
        };
        return Err(Mismatch {
            expected: format!(
                "a duration {least} such as {:?}",
                humantime::format_duration(example).to_string()
            ),
            got: shown.to_owned(),
        });
    }
    Ok(duration)
}

/// The chain's budget holds at least one whole hook call: `chain_timeout` is at least
/// `timeout`, which is named `timeout_name` (a key or a flag) in the error.
pub(crate) fn chain_holds_a_call(
    timeout: Duration,
    chain_timeout: Duration,
    timeout_name: &str,
) -> Result<(), Mismatch> {
    at_least(chain_timeout, timeout, timeout_name)
}

/// A breaker's longest backoff is at least its first: `max_backoff` is at least `backoff`,
/// which is named `backoff_name` (a key or a flag) in the error.
pub(crate) fn max_backoff_covers_backoff(
    backoff: Duration,
    max_backoff: Duration,
    backoff_name: &str,
) -> Result<(), Mismatch> {
    at_least(max_backoff, backoff, backoff_name)
}

/// `value` is at least `floor`, the value of `floor_name`.
fn at_least(value: Duration, floor: Duration, floor_name: &str) -> Result<(), Mismatch> {
    if value >= floor {
        return Ok(());
    }
    Err(Mismatch {
        expected: format!(
            "a duration of at least {floor_name} ({})",
            humantime::format_duration(floor)
        ),
        got: format!("{:?}", humantime::format_duration(value).to_string()),
    })
}
