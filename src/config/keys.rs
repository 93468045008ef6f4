//! The key table: every key's dotted name, the list of leaves, and each leaf's environment
//! variable.

use crate::dispatch::executor::TASK_VARIABLES;

/// The prefix of every environment override.
pub(super) const ENV_PREFIX: &str = "DEXAFLOW_";

pub(super) const LOOP_INTERVAL_MS: &str = "scheduler.loop_interval_ms";
pub(super) const BUFFER_SIZE: &str = "scheduler.dispatch.buffer_size";
pub(super) const WORKERS: &str = "scheduler.dispatch.workers";
pub(super) const WORKER_THREADS: &str = "scheduler.dispatch.worker_threads";
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
pub(super) const LITE_KILL_GRACE: &str = "executor.lite.kill_grace";
pub(super) const LITE_MAX_PARALLEL: &str = "executor.lite.max_parallel";
pub(super) const DRY_RUN_DIR: &str = "executor.kubernetes.dry_run_dir";
pub(super) const POLICY: &str = "executor.policy";
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
pub(super) const WEBHOOK: &str = "execution.admission.webhook";
pub(super) const WEBHOOK_URL: &str = "execution.admission.webhook.url";
pub(super) const WEBHOOK_CA_BUNDLE: &str = "execution.admission.webhook.ca_bundle";
pub(super) const WEBHOOK_BEARER_TOKEN_FILE: &str = "execution.admission.webhook.bearer_token_file";
pub(super) const WEBHOOK_CLIENT_CERT: &str = "execution.admission.webhook.client_cert";
pub(super) const WEBHOOK_CLIENT_KEY: &str = "execution.admission.webhook.client_key";
pub(super) const WEBHOOK_TIMEOUT: &str = "execution.admission.webhook.timeout";
pub(super) const WEBHOOK_FAIL_OPEN: &str = "execution.admission.webhook.fail_open";
pub(super) const ALLOWED_FIELDS: &str = "execution_allowlist.fields";
pub(super) const ALLOWED_SERVICE_ACCOUNTS: &str = "execution_allowlist.service_accounts";
pub(super) const ALLOWED_PRIORITY_CLASSES: &str = "execution_allowlist.priority_classes";
pub(super) const ALLOWED_IMAGES: &str = "execution_allowlist.images";
pub(super) const TOKEN_SECRET: &str = "auth.agent_token_secret";
pub(super) const TOKEN_TTL: &str = "auth.agent_token_ttl";
pub(crate) const SERVER_LISTEN: &str = "server.listen";
pub(super) const SERVER_PROBE_LISTEN: &str = "server.probe_listen";
pub(super) const SERVER_CERT_FILE: &str = "server.tls.cert_file";
pub(super) const SERVER_KEY_FILE: &str = "server.tls.key_file";
pub(crate) const SERVER_CLIENT_CA_FILE: &str = "server.tls.client_ca_file";
pub(crate) const SERVER_BEARER_TOKEN_FILE: &str = "server.auth.bearer_token_file";
pub(super) const SERVER_MAX_BODY_BYTES: &str = "server.max_body_bytes";
pub(super) const SERVER_ENABLED_ADMISSION: &str = "server.enabled_admission";
pub(super) const SERVER_RESOURCE_GROUPS_FILE: &str = "server.resource_groups_file";
pub(super) const SERVER_SCHEDULER_NAMES: &str = "server.scheduler_names";
pub(super) const SERVER_TRUSTED_USERS: &str = "server.trusted_users";
pub(super) const SERVER_HTTP2: &str = "server.http2";
pub(super) const SERVER_SHUTDOWN_GRACE: &str = "server.shutdown_grace";
pub(super) const SERVER_MAX_CONNECTIONS: &str = "server.max_connections";
pub(super) const SERVER_WORKER_THREADS: &str = "server.worker_threads";
pub(super) const SERVER_IDLE_TIMEOUT: &str = "server.idle_timeout";
pub(super) const SERVER_KUBECONFIG: &str = "server.kubeconfig";
pub(super) const SERVER_VOLCANO_MAX_QUEUE_DEPTH: &str = "server.volcano.max_queue_depth";
pub(super) const SERVER_VOLCANO_ALLOCATED_PODS_CHECK: &str =
    "server.volcano.enable_queue_allocated_pods_check";
pub(super) const SERVER_VOLCANO_ROOT_QUEUE_PROTECTION: &str =
    "server.volcano.enable_root_queue_protection";
pub(super) const SERVER_VOLCANO_FEATURE_GATES: &str = "server.volcano.feature_gates";
/// The key of the Prometheus exporter's address, for `main` to name in an error when the
/// address cannot be bound.
pub const METRICS_LISTEN: &str = "metrics.listen";

/// Every leaf key, in the order the effective config is rendered.
pub(super) const LEAVES: &[&str] = &[
    LOOP_INTERVAL_MS,
    BUFFER_SIZE,
    WORKERS,
    WORKER_THREADS,
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
    LITE_KILL_GRACE,
    LITE_MAX_PARALLEL,
    DRY_RUN_DIR,
    POLICY,
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
    WEBHOOK_URL,
    WEBHOOK_CA_BUNDLE,
    WEBHOOK_BEARER_TOKEN_FILE,
    WEBHOOK_CLIENT_CERT,
    WEBHOOK_CLIENT_KEY,
    WEBHOOK_TIMEOUT,
    WEBHOOK_FAIL_OPEN,
    ALLOWED_FIELDS,
    ALLOWED_SERVICE_ACCOUNTS,
    ALLOWED_PRIORITY_CLASSES,
    ALLOWED_IMAGES,
    TOKEN_SECRET,
    TOKEN_TTL,
    METRICS_LISTEN,
    SERVER_LISTEN,
    SERVER_PROBE_LISTEN,
    SERVER_CERT_FILE,
    SERVER_KEY_FILE,
    SERVER_CLIENT_CA_FILE,
    SERVER_BEARER_TOKEN_FILE,
    SERVER_MAX_BODY_BYTES,
    SERVER_ENABLED_ADMISSION,
    SERVER_RESOURCE_GROUPS_FILE,
    SERVER_SCHEDULER_NAMES,
    SERVER_TRUSTED_USERS,
    SERVER_HTTP2,
    SERVER_SHUTDOWN_GRACE,
    SERVER_MAX_CONNECTIONS,
    SERVER_IDLE_TIMEOUT,
    SERVER_WORKER_THREADS,
    SERVER_KUBECONFIG,
    SERVER_VOLCANO_MAX_QUEUE_DEPTH,
    SERVER_VOLCANO_ALLOCATED_PODS_CHECK,
    SERVER_VOLCANO_ROOT_QUEUE_PROTECTION,
    SERVER_VOLCANO_FEATURE_GATES,
];

/// Dexaflow's variable naming its config file. `dexaflow-admission` takes `--config` instead and
/// never reads it, but accepts it in its environment, where a Dexaflow install sets it.
pub(crate) const CONFIG_VARIABLE: &str = "DEXAFLOW_CONFIG";

/// The documented `DEXAFLOW_` variables that are no config key: `CONFIG_VARIABLE` and every
/// variable an executor sets for its tasks ([`TASK_VARIABLES`]). Any other `DEXAFLOW_` variable
/// that names no key is an error.
pub fn non_config_variables() -> impl Iterator<Item = &'static str> {
    std::iter::once(CONFIG_VARIABLE).chain(TASK_VARIABLES.iter().copied())
}

/// Leaves with no environment override: a list of hooks and the executor policy belong in the
/// file (Dexaflow reads `executor.policy` from the file only, too).
pub(super) const NO_ENV: &[&str] = &[HOOKS, POLICY];

/// Leaves whose value is never shown, in an error or in the effective config.
const SECRETS: &[&str] = &[TOKEN_SECRET];

/// Whether `key` is a secret leaf.
pub(super) fn is_secret(key: &str) -> bool {
    SECRETS.contains(&key)
}

/// Whether the value at `path` (a leaf, a section or the whole file, `""`) may hold a secret.
pub(super) fn may_hold_secret(path: &str) -> bool {
    SECRETS.iter().any(|secret| {
        path.is_empty()
            || secret
                .strip_prefix(path)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
    })
}

/// Every leaf with a variable, by its variable.
pub(super) fn variables() -> impl Iterator<Item = (String, &'static str)> {
    LEAVES
        .iter()
        .filter(|key| !NO_ENV.contains(key))
        .map(|key| (env_name(key), *key))
}

/// The leaf that has no variable and whose variable `name` would be.
pub(super) fn file_only_key(name: &str) -> Option<&'static str> {
    NO_ENV.iter().copied().find(|key| env_name(key) == name)
}

/// The known variable nearest to `name`, a variable that is not known, when it is near enough
/// to be a typo: at most a third of the candidate's characters after `DEXAFLOW_` differ.
pub(super) fn nearest_variable(name: &str) -> Option<String> {
    variables()
        .map(|(variable, _)| variable)
        .chain(non_config_variables().map(str::to_owned))
        .map(|candidate| (strsim::levenshtein(name, &candidate), candidate))
        .filter(|(distance, candidate)| *distance <= (candidate.len() - ENV_PREFIX.len()) / 3)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, candidate)| candidate)
}

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
    use super::{LEAVES, TOKEN_SECRET, env_name, may_hold_secret};

    #[test]
    fn every_leaf_has_its_own_environment_variable() {
        let mut names: Vec<String> = LEAVES.iter().map(|key| env_name(key)).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), LEAVES.len());
    }

    #[test]
    fn the_secret_its_sections_and_the_whole_file_may_hold_a_secret_and_nothing_else() {
        for path in ["", "auth", TOKEN_SECRET] {
            assert!(may_hold_secret(path), "{path}");
        }
        for path in [
            "au",
            "auth.agent_token_ttl",
            "scheduler",
            "auth.agent_token_secret.x",
        ] {
            assert!(!may_hold_secret(path), "{path}");
        }
    }
}
