//! The supervisor's settings, as plain values: `config.rs` builds them from the YAML file.

use std::collections::BTreeMap;
use std::time::Duration;

/// How every hook call is supervised.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// `execution.admission.timeout`: the most one hook call may take (default 500ms).
    pub timeout: Duration,
    /// `execution.admission.chain_timeout`: the most the whole chain may take for one attempt
    /// (default 2s); each call gets `min(timeout, budget left)`.
    pub chain_timeout: Duration,
    /// `execution.admission.fail_open`: a broken, skipped or budget-cut hook admits unchanged
    /// (default false); logged when a supervised chain starts with it.
    pub fail_open: bool,
    /// `execution.admission.breaker.*`.
    pub breaker: BreakerSettings,
    /// What a hook sets for itself, by hook name (a webhook's `timeout` and `fail_open`); every
    /// setting it leaves unset is the one above.
    pub hooks: BTreeMap<String, HookSettings>,
}

/// One hook's own supervision settings; `None` takes the admission setting.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HookSettings {
    /// The most one call of this hook may take, instead of `timeout`.
    pub timeout: Option<Duration>,
    /// Whether this hook fails open, instead of `fail_open`.
    pub fail_open: Option<bool>,
}

impl Settings {
    /// The timeout of the hook named `hook`: its own, or the admission setting.
    pub fn timeout_of(&self, hook: &str) -> Duration {
        self.hooks
            .get(hook)
            .and_then(|own| own.timeout)
            .unwrap_or(self.timeout)
    }

    /// Whether the hook named `hook` fails open: its own setting, or the admission setting.
    pub fn fail_open_of(&self, hook: &str) -> bool {
        self.hooks
            .get(hook)
            .and_then(|own| own.fail_open)
            .unwrap_or(self.fail_open)
    }
}

/// When a hook's breaker opens and how long it stays open.
#[derive(Debug, Clone, PartialEq)]
pub struct BreakerSettings {
    /// `execution.admission.breaker.failures`: consecutive failures that open it (default 5),
    /// counted in the order calls start: a failure counts only if its call started after the hook
    /// last answered, so concurrent calls cannot fake a run. Above 2^31 it acts as 2^31.
    pub failures: u32,
    /// `execution.admission.breaker.backoff`: the first open period (default 1s), doubled after
    /// each failed probe.
    pub backoff: Duration,
    /// `execution.admission.breaker.max_backoff`: the longest open period, jitter included
    /// (default 60s).
    pub max_backoff: Duration,
    /// The fraction of the backoff added or removed at random (0.0 to 1.0; tests use 0).
    pub jitter: f64,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            timeout: Duration::from_millis(500),
            chain_timeout: Duration::from_secs(2),
            fail_open: false,
            breaker: BreakerSettings::default(),
            hooks: BTreeMap::new(),
        }
    }
}

impl Default for BreakerSettings {
    fn default() -> BreakerSettings {
        BreakerSettings {
            failures: 5,
            backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(60),
            jitter: 0.1,
        }
    }
}
