//! The key table: every key's dotted name, the list of leaves, and each leaf's environment
//! variable.

/// The prefix of every environment override.
pub(super) const ENV_PREFIX: &str = "DEXAFLOW_";

pub(super) const LOOP_INTERVAL_MS: &str = "scheduler.loop_interval_ms";
pub(super) const BUFFER_SIZE: &str = "scheduler.dispatch.buffer_size";
pub(super) const WORKERS: &str = "scheduler.dispatch.workers";
pub(super) const RETRY_WINDOW: &str = "scheduler.dispatch.retry_window";
pub(super) const DRAIN_TIMEOUT: &str = "scheduler.dispatch.drain_timeout";
pub(super) const EXECUTOR_TYPE: &str = "executor.type";
pub(super) const TASK_NAMESPACE: &str = "executor.task_namespace";
pub(super) const TASK_SERVICE_ACCOUNT: &str = "executor.task_service_account";
pub(super) const DEFAULT_CPU: &str = "executor.defaults.resources_cpu";
pub(super) const DEFAULT_MEMORY: &str = "executor.defaults.resources_memory";
pub(super) const RUN_AS_NON_ROOT: &str = "executor.defaults.run_tasks_as_non_root";
pub(super) const UNIT: &str = "executor.unit";
pub(super) const UNIT_CPU: &str = "executor.unit.cpu";
pub(super) const UNIT_MEMORY: &str = "executor.unit.memory";
pub(super) const UNIT_ENFORCE: &str = "executor.unit.enforce";
pub(super) const UNIT_MAX_SIZE: &str = "executor.unit.max_size";
pub(super) const LITE_LOG_DIR: &str = "executor.lite.log_dir";
pub(super) const DRY_RUN_DIR: &str = "executor.kubernetes.dry_run_dir";
pub(super) const WARM_POOLS: &str = "execution.warm_pools_enabled";
pub(super) const SOURCE_MODE_ENABLED: &str = "execution.source_mode.enabled";
pub(super) const SOURCE_MODE_IMAGE: &str = "execution.source_mode.image";
pub(super) const ADMISSION_TIMEOUT: &str = "execution.admission.timeout";
pub(super) const CHAIN_TIMEOUT: &str = "execution.admission.chain_timeout";
pub(super) const FAIL_OPEN: &str = "execution.admission.fail_open";
pub(super) const BREAKER_FAILURES: &str = "execution.admission.breaker.failures";
pub(super) const BREAKER_BACKOFF: &str = "execution.admission.breaker.backoff";
pub(super) const BREAKER_MAX_BACKOFF: &str = "execution.admission.breaker.max_backoff";
pub(super) const HOOKS: &str = "execution.admission.hooks";
pub(super) const ALLOWED_FIELDS: &str = "execution_allowlist.fields";
pub(super) const ALLOWED_SERVICE_ACCOUNTS: &str = "execution_allowlist.service_accounts";
pub(super) const ALLOWED_PRIORITY_CLASSES: &str = "execution_allowlist.priority_classes";
pub(super) const ALLOWED_IMAGES: &str = "execution_allowlist.images";
pub(super) const TOKEN_SECRET: &str = "auth.agent_token_secret";
pub(super) const TOKEN_TTL: &str = "auth.agent_token_ttl";
/// The key of the Prometheus exporter's address, for `main` to name in an error when the
/// address cannot be bound.
pub const METRICS_LISTEN: &str = "metrics.listen";

/// Every leaf key, in the order the effective config is rendered.
pub(super) const LEAVES: &[&str] = &[
    LOOP_INTERVAL_MS,
    BUFFER_SIZE,
    WORKERS,
    RETRY_WINDOW,
    DRAIN_TIMEOUT,
    EXECUTOR_TYPE,
    TASK_NAMESPACE,
    TASK_SERVICE_ACCOUNT,
    DEFAULT_CPU,
    DEFAULT_MEMORY,
    RUN_AS_NON_ROOT,
    UNIT_CPU,
    UNIT_MEMORY,
    UNIT_ENFORCE,
    UNIT_MAX_SIZE,
    LITE_LOG_DIR,
    DRY_RUN_DIR,
    WARM_POOLS,
    SOURCE_MODE_ENABLED,
    SOURCE_MODE_IMAGE,
    ADMISSION_TIMEOUT,
    CHAIN_TIMEOUT,
    FAIL_OPEN,
    BREAKER_FAILURES,
    BREAKER_BACKOFF,
    BREAKER_MAX_BACKOFF,
    HOOKS,
    ALLOWED_FIELDS,
    ALLOWED_SERVICE_ACCOUNTS,
    ALLOWED_PRIORITY_CLASSES,
    ALLOWED_IMAGES,
    TOKEN_SECRET,
    TOKEN_TTL,
    METRICS_LISTEN,
];

/// Leaves with no environment override.
pub(super) const NO_ENV: &[&str] = &[HOOKS];

/// The environment variable that overrides `key`.
pub(super) fn env_name(key: &str) -> String {
    format!("{ENV_PREFIX}{}", key.replace('.', "_").to_ascii_uppercase())
}

/// Whether `path` is a section: a key with leaves under it.
pub(super) fn is_section(path: &str) -> bool {
    LEAVES.iter().any(|leaf| {
        leaf.strip_prefix(path)
            .is_some_and(|rest| rest.starts_with('.'))
    })
}

#[cfg(test)]
mod tests {
    use super::{LEAVES, env_name};

    #[test]
    fn every_leaf_has_its_own_environment_variable() {
        let mut names: Vec<String> = LEAVES.iter().map(|key| env_name(key)).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), LEAVES.len());
    }
}
