//! Rules across keys: each reports against one key, and is skipped when a key it reads was
//! already bad, so that one typo is reported once.

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

    /// The chain's budget holds at least one whole hook call.
    pub(super) fn check_chain_timeout(&mut self, timeout: Duration, chain_timeout: Duration) {
        if chain_timeout < timeout && !self.is_bad(ADMISSION_TIMEOUT) && !self.is_bad(CHAIN_TIMEOUT)
        {
            self.reject(
                CHAIN_TIMEOUT,
                format!(
                    "a duration of at least {ADMISSION_TIMEOUT} ({})",
                    humantime::format_duration(timeout)
                ),
                format!(
                    "{:?}",
                    humantime::format_duration(chain_timeout).to_string()
                ),
            );
        }
    }

    /// A breaker's longest backoff is at least its first.
    pub(super) fn check_max_backoff(&mut self, backoff: Duration, max_backoff: Duration) {
        if max_backoff < backoff
            && !self.is_bad(BREAKER_BACKOFF)
            && !self.is_bad(BREAKER_MAX_BACKOFF)
        {
            self.reject(
                BREAKER_MAX_BACKOFF,
                format!(
                    "a duration of at least {BREAKER_BACKOFF} ({})",
                    humantime::format_duration(backoff)
                ),
                format!("{:?}", humantime::format_duration(max_backoff).to_string()),
            );
        }
    }
}
