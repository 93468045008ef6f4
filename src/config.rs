//! The config file: one YAML file in Dexaflow's key layout, with `DEXAFLOW_` environment
//! overrides, checked at boot so that a bad config fails with every bad key named.
//!
//! This is the only module that knows key names. It turns the file into each module's plain
//! settings ([`crate::dispatch::Settings`], [`crate::supervise::Settings`]) and the hook
//! declarations ([`crate::hooks::HookSpec`]); no other module reads YAML or the environment.
//!
//! # Environment overrides
//! Every leaf key has a variable: `DEXAFLOW_` and the key upper-cased with `.` turned into `_`,
//! so `DEXAFLOW_SCHEDULER_DISPATCH_BUFFER_SIZE` overrides `scheduler.dispatch.buffer_size`. A
//! variable wins over the file. Lists are written comma-separated
//! (`DEXAFLOW_EXECUTION_ALLOWLIST_IMAGES=ghcr.io/acme/,python`). The mapping is made from the
//! known keys, so underscores inside key names are never ambiguous, and any other `DEXAFLOW_`
//! variable (such as `DEXAFLOW_AGENT_TOKEN`) is ignored. `execution.admission.hooks` has no
//! variable: a list of hooks belongs in the file. The environment is passed in, never read here,
//! so tests need not touch the process's own.
//!
//! # Errors
//! Every problem is collected, not just the first, and each message names the full dotted key
//! (and the variable, when the value came from one):
//!
//! ```text
//! execution.admission.timeout: expected a duration such as "500ms", got "fast"
//! scheduler.dispatch.bufer_size: unknown key
//! scheduler.dispatch.buffer_size (from DEXAFLOW_SCHEDULER_DISPATCH_BUFFER_SIZE): expected a non-negative integer, got "x"
//! ```
//!
//! # Example
//! ```
//! use dexaflow_admission::config::Config;
//!
//! let env = [("DEXAFLOW_SCHEDULER_DISPATCH_BUFFER_SIZE", "512")];
//! let config = Config::from_yaml_str("scheduler: {dispatch: {workers: 16}}", env)?;
//! assert_eq!(config.dispatch.buffer_size, 512);
//! assert_eq!(config.dispatch.workers, 16);
//! # Ok::<(), dexaflow_admission::config::ConfigErrors>(())
//! ```

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::net::SocketAddr;
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_yaml_ng::{Mapping, Value};
use thiserror::Error;

use crate::admission::{self, ChangeRules, parse_milli};
use crate::dispatch::settings::{
    AllowedFields, Allowlist, Enforce, ExecutorSettings, ResourceDefaults, ResourceUnit,
    SourceMode, TokenSettings,
};
use crate::hooks::{HookSpec, SpecError};
use crate::{dispatch, supervise};

// The `server` section, read only by `serve`; every other command ignores it.
#[path = "config_server.rs"]
mod server;
pub use server::{SERVER, load_with_server};

/// The text of `examples/dexaflow.yaml`, the config `dispatch` runs with when given none.
pub const EMBEDDED_DEFAULT: &str = include_str!("../examples/dexaflow.yaml");

/// The prefix of every environment override.
const ENV_PREFIX: &str = "DEXAFLOW_";

const LOOP_INTERVAL_MS: &str = "scheduler.loop_interval_ms";
const BUFFER_SIZE: &str = "scheduler.dispatch.buffer_size";
const WORKERS: &str = "scheduler.dispatch.workers";
const RETRY_WINDOW: &str = "scheduler.dispatch.retry_window";
const DRAIN_TIMEOUT: &str = "scheduler.dispatch.drain_timeout";
const EXECUTOR_TYPE: &str = "executor.type";
const TASK_NAMESPACE: &str = "executor.task_namespace";
const TASK_SERVICE_ACCOUNT: &str = "executor.task_service_account";
const DEFAULT_CPU: &str = "executor.defaults.resources_cpu";
const DEFAULT_MEMORY: &str = "executor.defaults.resources_memory";
const RUN_AS_NON_ROOT: &str = "executor.defaults.run_tasks_as_non_root";
const UNIT: &str = "executor.unit";
const UNIT_CPU: &str = "executor.unit.cpu";
const UNIT_MEMORY: &str = "executor.unit.memory";
const UNIT_ENFORCE: &str = "executor.unit.enforce";
const UNIT_MAX_SIZE: &str = "executor.unit.max_size";
const LITE_LOG_DIR: &str = "executor.lite.log_dir";
const DRY_RUN_DIR: &str = "executor.kubernetes.dry_run_dir";
const WARM_POOLS: &str = "execution.warm_pools_enabled";
const SOURCE_MODE_ENABLED: &str = "execution.source_mode.enabled";
const SOURCE_MODE_IMAGE: &str = "execution.source_mode.image";
const ADMISSION_TIMEOUT: &str = "execution.admission.timeout";
const CHAIN_TIMEOUT: &str = "execution.admission.chain_timeout";
const FAIL_OPEN: &str = "execution.admission.fail_open";
const BREAKER_FAILURES: &str = "execution.admission.breaker.failures";
const BREAKER_BACKOFF: &str = "execution.admission.breaker.backoff";
const BREAKER_MAX_BACKOFF: &str = "execution.admission.breaker.max_backoff";
const HOOKS: &str = "execution.admission.hooks";
const ALLOWED_FIELDS: &str = "execution_allowlist.fields";
const ALLOWED_SERVICE_ACCOUNTS: &str = "execution_allowlist.service_accounts";
const ALLOWED_PRIORITY_CLASSES: &str = "execution_allowlist.priority_classes";
const ALLOWED_IMAGES: &str = "execution_allowlist.images";
const TOKEN_SECRET: &str = "auth.agent_token_secret";
const TOKEN_TTL: &str = "auth.agent_token_ttl";
/// The key of the Prometheus exporter's address, for `main` to name in an error when the
/// address cannot be bound.
pub const METRICS_LISTEN: &str = "metrics.listen";

/// Every leaf key, in the order the effective config is rendered.
const LEAVES: &[&str] = &[
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
const NO_ENV: &[&str] = &[HOOKS];

/// The execution fields `execution_allowlist.fields` may name.
const EXECUTION_FIELDS: &[&str] = &[
    "node_selector",
    "tolerations",
    "service_account",
    "priority_class_name",
    "labels",
    "annotations",
];

/// The fewest bytes `auth.agent_token_secret` may have: an HS256 key should be as long as the
/// hash (RFC 7518 §3.2).
const MIN_SECRET_BYTES: usize = 32;

/// The effective config: each module's settings, built from the file, the environment and the
/// defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// The dispatcher's settings (`scheduler.*`, `executor.*`, `execution.*` but admission,
    /// `execution_allowlist.*`, `auth.*`).
    pub dispatch: dispatch::Settings,
    /// How every hook call is supervised (`execution.admission.*`).
    pub supervise: supervise::Settings,
    /// The built-in hooks, in chain order (`execution.admission.hooks`); build them with
    /// [`crate::hooks::build`].
    pub hooks: Vec<HookSpec>,
    /// `metrics.listen`: where the Prometheus exporter listens.
    pub metrics_listen: SocketAddr,
    /// Every leaf as loaded, for [`Config::to_yaml`]; the secret is never kept here.
    effective: BTreeMap<&'static str, Value>,
    /// Whether `auth.agent_token_secret` was set, rather than generated.
    secret_is_set: bool,
}

/// One problem with the config.
///
/// Its text names the key; for [`ConfigError::Read`], [`ConfigError::Syntax`],
/// [`ConfigError::Hook`] and [`ConfigError::HookRule`] the cause is its
/// [`source`](std::error::Error::source), which [`ConfigErrors`] prints after it.
#[derive(Debug, Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("reading {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why not.
        #[source]
        source: std::io::Error,
    },
    /// The text is not YAML.
    #[error("{origin} is not valid YAML")]
    Syntax {
        /// The file, or what else the text was.
        origin: String,
        /// Where and why parsing stopped.
        #[source]
        source: serde_yaml_ng::Error,
    },
    /// A key this config does not have, often a typo.
    #[error("{key}: unknown key")]
    UnknownKey {
        /// The full dotted key.
        key: Key,
    },
    /// A value of the wrong type or outside what the key allows.
    #[error("{key}: expected {expected}, got {got}")]
    Invalid {
        /// The key, and the variable the value came from.
        key: Key,
        /// What the key takes.
        expected: String,
        /// What it got, quoted when it is text; a secret is never shown.
        got: String,
    },
    /// A key another key's value makes necessary.
    #[error("{key} is required when {when}")]
    Required {
        /// The missing key.
        key: Key,
        /// The setting that needs it.
        when: String,
    },
    /// A section whose keys must be set together.
    #[error("{key} needs {what}")]
    Incomplete {
        /// The section.
        key: Key,
        /// What it needs.
        what: String,
    },
    /// Two hooks with one name.
    #[error("{key}: duplicate hook name {name:?}, already used by {first}")]
    DuplicateHook {
        /// The later hook's `name`.
        key: Key,
        /// The name.
        name: String,
        /// The earlier hook's `name`.
        first: Key,
    },
    /// A hook declaration that does not deserialize (unknown field, unknown `type`, bad window).
    #[error("{key}")]
    Hook {
        /// The declaration, `execution.admission.hooks[i]`.
        key: Key,
        /// What is wrong with it.
        #[source]
        source: serde_yaml_ng::Error,
    },
    /// A hook declaration that deserializes but would misbehave on every attempt.
    #[error("{key}")]
    HookRule {
        /// The declaration, `execution.admission.hooks[i]`.
        key: Key,
        /// What is wrong with it, naming the field inside the declaration.
        #[source]
        source: SpecError,
    },
}

/// A config key as an error names it: the full dotted path, and the environment variable when
/// the value came from one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Key {
    /// The dotted path, such as `scheduler.dispatch.buffer_size` or
    /// `execution.admission.hooks[1].name`; empty for the whole file.
    pub path: String,
    /// The variable, such as `DEXAFLOW_SCHEDULER_DISPATCH_BUFFER_SIZE`.
    pub env: Option<String>,
}

impl Key {
    fn file(path: impl Into<String>) -> Key {
        Key {
            path: path.into(),
            env: None,
        }
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str("the config")?;
        } else {
            f.write_str(&self.path)?;
        }
        if let Some(env) = &self.env {
            write!(f, " (from {env})")?;
        }
        Ok(())
    }
}

/// Every problem found in a config; never empty.
///
/// Displayed one problem a line, each followed by its causes joined with `: `.
#[derive(Debug)]
pub struct ConfigErrors {
    errors: Vec<ConfigError>,
}

impl ConfigErrors {
    /// The problems, in the order they were found.
    pub fn errors(&self) -> &[ConfigError] {
        &self.errors
    }

    /// How many problems there are.
    pub fn len(&self) -> usize {
        self.errors.len()
    }

    /// Always `false`: a `ConfigErrors` holds at least one problem.
    pub fn is_empty(&self) -> bool {
        self.errors.is_empty()
    }
}

impl From<ConfigError> for ConfigErrors {
    fn from(error: ConfigError) -> ConfigErrors {
        ConfigErrors {
            errors: vec![error],
        }
    }
}

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, error) in self.errors.iter().enumerate() {
            if index > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{error}")?;
            let mut cause = std::error::Error::source(error);
            while let Some(inner) = cause {
                write!(f, ": {inner}")?;
                cause = inner.source();
            }
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

impl Config {
    /// Parses a config from YAML text, with `env` (the process environment in `main`, a list
    /// of pairs in tests) applied over it.
    ///
    /// An empty text gives the defaults. When `auth.agent_token_secret` is not set, a secret of
    /// 32 random bytes is generated for this process from the operating system's generator, so
    /// tokens do not outlive it (where there is no such generator, the key is required): set
    /// the key when tokens must survive a restart or be checked by another process.
    ///
    /// # Errors
    /// [`ConfigErrors`] with every problem found.
    pub fn from_yaml_str<K, V>(
        text: &str,
        env: impl IntoIterator<Item = (K, V)>,
    ) -> Result<Config, ConfigErrors>
    where
        K: Into<String>,
        V: Into<String>,
    {
        Config::parse("the config", text, env)
    }

    /// Reads and parses the config file at `path`; see [`Config::from_yaml_str`].
    ///
    /// # Errors
    /// [`ConfigErrors`] with [`ConfigError::Read`] when the file cannot be read, else every
    /// problem found.
    pub fn load<K, V>(
        path: &Path,
        env: impl IntoIterator<Item = (K, V)>,
    ) -> Result<Config, ConfigErrors>
    where
        K: Into<String>,
        V: Into<String>,
    {
        Config::parse(&path.display().to_string(), &read(path)?, env)
    }

    /// Parses [`EMBEDDED_DEFAULT`], the demo config `dispatch` runs with when given none, with
    /// `env` applied over it.
    ///
    /// # Errors
    /// [`ConfigErrors`] when an override is bad; the embedded text itself always parses (a test
    /// holds it to that).
    pub fn embedded_default<K, V>(
        env: impl IntoIterator<Item = (K, V)>,
    ) -> Result<Config, ConfigErrors>
    where
        K: Into<String>,
        V: Into<String>,
    {
        Config::parse("the embedded default config", EMBEDDED_DEFAULT, env)
    }

    /// The config as loaded, defaults and overrides applied, as YAML in the file's key layout,
    /// for `check-config`.
    ///
    /// `auth.agent_token_secret` is never shown: a comment says whether it was set.
    pub fn to_yaml(&self) -> String {
        let mut root = Mapping::new();
        for key in LEAVES {
            if let Some(value) = self.effective.get(key) {
                insert_nested(&mut root, key, value.clone());
            }
        }
        let body = serde_yaml_ng::to_string(&Value::Mapping(root))
            .expect("a mapping of strings, numbers, booleans and lists always serializes");
        let secret = if self.secret_is_set {
            "is set (not shown)"
        } else {
            "is not set: a random secret is generated for this process"
        };
        format!("# {TOKEN_SECRET} {secret}\n{body}")
    }

    fn parse<K, V>(
        origin: &str,
        text: &str,
        env: impl IntoIterator<Item = (K, V)>,
    ) -> Result<Config, ConfigErrors>
    where
        K: Into<String>,
        V: Into<String>,
    {
        let (root, env) = prepare(origin, text, env)?;
        Config::from_root(&root, &env)
    }

    /// The config in `root`, the parsed file, with the `DEXAFLOW_` variables of `env` applied.
    fn from_root(root: &Value, env: &HashMap<String, String>) -> Result<Config, ConfigErrors> {
        let mut reader = Reader::default();
        reader.walk(root, "", LEAVES);
        reader.override_from(LEAVES.iter().filter(|key| !NO_ENV.contains(key)), env);
        reader.build()
    }
}

/// The text of the config file at `path`.
fn read(path: &Path) -> Result<String, ConfigErrors> {
    std::fs::read_to_string(path).map_err(|source| {
        ConfigErrors::from(ConfigError::Read {
            path: path.to_owned(),
            source,
        })
    })
}

/// The file's text parsed, and the `DEXAFLOW_` variables of `env`.
fn prepare<K, V>(
    origin: &str,
    text: &str,
    env: impl IntoIterator<Item = (K, V)>,
) -> Result<(Value, HashMap<String, String>), ConfigErrors>
where
    K: Into<String>,
    V: Into<String>,
{
    let root: Value = serde_yaml_ng::from_str(text).map_err(|source| {
        ConfigErrors::from(ConfigError::Syntax {
            origin: origin.to_owned(),
            source,
        })
    })?;
    let env = env
        .into_iter()
        .map(|(name, value)| (name.into(), value.into()))
        .filter(|(name, _)| name.starts_with(ENV_PREFIX))
        .collect();
    Ok((root, env))
}

/// The environment variable that overrides `key`.
fn env_name(key: &str) -> String {
    format!("{ENV_PREFIX}{}", key.replace('.', "_").to_ascii_uppercase())
}

fn insert_nested(root: &mut Mapping, key: &str, value: Value) {
    match key.split_once('.') {
        None => {
            root.insert(Value::String(key.to_owned()), value);
        }
        Some((section, rest)) => {
            let entry = root
                .entry(Value::String(section.to_owned()))
                .or_insert_with(|| Value::Mapping(Mapping::new()));
            if let Value::Mapping(inner) = entry {
                insert_nested(inner, rest, value);
            }
        }
    }
}

/// A leaf's value and where it came from.
#[derive(Debug, Clone)]
struct Raw {
    value: Value,
    /// The variable, when the value came from the environment (always a string then).
    env: Option<String>,
}

/// Why a leaf's value is bad: turned into [`ConfigError::Invalid`] with the key.
struct Problem {
    /// Appended to the key, such as `[2]` for a list item.
    at: String,
    expected: String,
    /// What to show instead of the value itself.
    got: Option<String>,
}

fn expected(what: impl Into<String>) -> Problem {
    Problem {
        at: String::new(),
        expected: what.into(),
        got: None,
    }
}

/// How a value is shown after `got`: text quoted, other scalars as written, collections by kind.
fn describe(value: &Value) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(flag) => flag.to_string(),
        Value::Number(number) => number.to_string(),
        Value::String(text) => format!("{text:?}"),
        Value::Sequence(_) => "a list".to_owned(),
        Value::Mapping(_) => "a mapping".to_owned(),
        Value::Tagged(tagged) => format!("a value tagged {}", tagged.tag),
    }
}

/// Reads leaves one at a time, collecting every problem and the effective value of each.
#[derive(Default)]
struct Reader {
    found: BTreeMap<&'static str, Raw>,
    errors: Vec<ConfigError>,
    /// Leaves whose value was bad; rules across keys skip them, so that one typo is reported once.
    bad: BTreeSet<&'static str>,
    effective: BTreeMap<&'static str, Value>,
}

impl Reader {
    /// Finds every leaf of `leaves` under `value`, the section at `path`, and reports unknown
    /// keys. The root's `server` section is left to [`load_with_server`].
    fn walk(&mut self, value: &Value, path: &str, leaves: &[&'static str]) {
        let mapping = match value {
            Value::Mapping(mapping) => mapping,
            Value::Null => return,
            other => {
                self.errors.push(ConfigError::Invalid {
                    key: Key::file(path),
                    expected: "a mapping".to_owned(),
                    got: describe(other),
                });
                return;
            }
        };
        for (name, child) in mapping {
            let Some(name) = name.as_str() else {
                self.errors.push(ConfigError::Invalid {
                    key: Key::file(path),
                    expected: "text keys".to_owned(),
                    got: format!("the key {}", describe(name)),
                });
                continue;
            };
            let child_path = if path.is_empty() {
                name.to_owned()
            } else {
                format!("{path}.{name}")
            };
            if name.contains('.') {
                // A dotted key would shadow the nested one silently; the file nests.
                self.errors.push(ConfigError::UnknownKey {
                    key: Key::file(child_path),
                });
            } else if path.is_empty() && name == SERVER {
                // Read by `serve` alone.
            } else if let Some(leaf) = leaves.iter().find(|leaf| **leaf == child_path) {
                self.found.insert(
                    leaf,
                    Raw {
                        value: child.clone(),
                        env: None,
                    },
                );
            } else if is_section(&child_path, leaves) {
                self.walk(child, &child_path, leaves);
            } else {
                self.errors.push(ConfigError::UnknownKey {
                    key: Key::file(child_path),
                });
            }
        }
    }

    /// Takes the value of each of `keys` from its `DEXAFLOW_` variable in `env`, when set.
    fn override_from<'k>(
        &mut self,
        keys: impl Iterator<Item = &'k &'static str>,
        env: &HashMap<String, String>,
    ) {
        for key in keys {
            let name = env_name(key);
            if let Some(value) = env.get(&name) {
                self.found.insert(
                    key,
                    Raw {
                        value: Value::String(value.clone()),
                        env: Some(name),
                    },
                );
            }
        }
    }

    /// Reads `key` with `parse`, giving `default` when it is unset (absent or null).
    ///
    /// `show` gives the effective value for [`Config::to_yaml`]. A bad value is reported and
    /// replaced by `default`, so that reading goes on and finds the other problems.
    fn get<T>(
        &mut self,
        key: &'static str,
        default: T,
        parse: impl FnOnce(&Raw) -> Result<T, Problem>,
        show: impl FnOnce(&T) -> Value,
    ) -> T {
        let value = match self.found.get(key) {
            Some(raw) if !raw.value.is_null() => match parse(raw) {
                Ok(value) => value,
                Err(problem) => {
                    self.errors.push(ConfigError::Invalid {
                        key: Key {
                            path: format!("{key}{}", problem.at),
                            env: raw.env.clone(),
                        },
                        expected: problem.expected,
                        got: problem.got.unwrap_or_else(|| describe(&raw.value)),
                    });
                    self.bad.insert(key);
                    return default;
                }
            },
            _ => default,
        };
        self.effective.insert(key, show(&value));
        value
    }

    /// Reports that `key`'s value breaks a rule across keys.
    fn reject(&mut self, key: &'static str, expected: String, got: String) {
        let env = self.found.get(key).and_then(|raw| raw.env.clone());
        self.errors.push(ConfigError::Invalid {
            key: Key {
                path: key.to_owned(),
                env,
            },
            expected,
            got,
        });
        self.bad.insert(key);
    }

    fn is_bad(&self, key: &str) -> bool {
        self.bad.contains(key)
    }

    fn integer(&mut self, key: &'static str, default: u64, range: RangeInclusive<u64>) -> u64 {
        let what = match (*range.start(), *range.end()) {
            (0, u64::MAX) => "a non-negative integer".to_owned(),
            (1, u64::MAX) => "a positive integer".to_owned(),
            (low, high) => format!("an integer from {low} to {high}"),
        };
        self.get(
            key,
            default,
            |raw| {
                let number = match (&raw.value, &raw.env) {
                    (Value::Number(number), _) => number.as_u64(),
                    (Value::String(text), Some(_)) => text.trim().parse().ok(),
                    _ => None,
                };
                number
                    .filter(|number| range.contains(number))
                    .ok_or_else(|| expected(what))
            },
            |number| Value::from(*number),
        )
    }

    fn flag(&mut self, key: &'static str, default: bool) -> bool {
        self.get(
            key,
            default,
            |raw| match (&raw.value, &raw.env) {
                (Value::Bool(flag), _) => Ok(*flag),
                (Value::String(text), Some(_)) if text == "true" => Ok(true),
                (Value::String(text), Some(_)) if text == "false" => Ok(false),
                _ => Err(expected("true or false")),
            },
            |flag| Value::Bool(*flag),
        )
    }

    /// A duration of at least `min` (`Duration::ZERO` for any, one nanosecond for positive).
    fn duration(&mut self, key: &'static str, default: Duration, min: Duration) -> Duration {
        let example = humantime::format_duration(default).to_string();
        self.get(
            key,
            default,
            |raw| {
                let duration = raw
                    .value
                    .as_str()
                    .and_then(|text| humantime::parse_duration(text.trim()).ok())
                    .ok_or_else(|| expected(format!("a duration such as {example:?}")))?;
                if duration < min {
                    return Err(expected(format!("a duration above 0s such as {example:?}")));
                }
                Ok(duration)
            },
            |duration| Value::String(humantime::format_duration(*duration).to_string()),
        )
    }

    /// Text; `check` says what is wrong with it, if anything.
    fn text(
        &mut self,
        key: &'static str,
        default: &str,
        check: impl FnOnce(&str) -> Option<String>,
    ) -> String {
        self.get(
            key,
            default.to_owned(),
            |raw| {
                let text = raw.value.as_str().ok_or_else(|| expected("text"))?;
                match check(text) {
                    Some(what) => Err(expected(what)),
                    None => Ok(text.to_owned()),
                }
            },
            |text| Value::String(text.clone()),
        )
    }

    /// A Kubernetes quantity, such as `500m` or `2Gi`; empty means unset.
    fn quantity(&mut self, key: &'static str, positive: bool) -> Option<(String, u128)> {
        let what = if positive {
            "a quantity above zero such as \"1\" or \"2Gi\""
        } else {
            "a quantity such as \"500m\" or \"512Mi\""
        };
        self.get(
            key,
            None,
            |raw| {
                let text = match &raw.value {
                    Value::String(text) => text.trim().to_owned(),
                    Value::Number(number) => number.to_string(),
                    _ => return Err(expected(what)),
                };
                if text.is_empty() {
                    return Ok(None);
                }
                match parse_milli(&text) {
                    Ok(milli) if milli > 0 || !positive => Ok(Some((text, milli))),
                    _ => Err(expected(what)),
                }
            },
            |quantity| {
                Value::String(
                    quantity
                        .as_ref()
                        .map(|(text, _)| text.clone())
                        .unwrap_or_default(),
                )
            },
        )
    }

    /// A list of non-empty strings, comma-separated in the environment; `None` when unset.
    fn list(&mut self, key: &'static str) -> Option<Vec<String>> {
        self.get(
            key,
            None,
            |raw| parse_list(raw).map(Some),
            |list| match list {
                Some(items) => Value::Sequence(items.iter().cloned().map(Value::String).collect()),
                None => Value::Null,
            },
        )
    }

    /// Builds the config from the leaves found, or every problem.
    fn build(mut self) -> Result<Config, ConfigErrors> {
        let loop_interval_ms = self.integer(LOOP_INTERVAL_MS, 1000, 1..=u64::MAX);
        let buffer_size = self.integer(BUFFER_SIZE, 0, 0..=u64::MAX);
        let workers = self.integer(WORKERS, 0, 0..=u64::MAX);
        let retry_window = self.duration(
            RETRY_WINDOW,
            Duration::from_secs(15 * 60),
            Duration::from_nanos(1),
        );
        let drain_timeout = self.duration(DRAIN_TIMEOUT, Duration::from_secs(15), Duration::ZERO);

        let executor_kind = self.executor_kind();
        let namespace = self.text(TASK_NAMESPACE, "dexaflow", |text| {
            dns_label_problem(text)
                .then(|| "a namespace name such as \"dexaflow\" (a DNS label)".to_owned())
        });
        let task_service_account = self.text(TASK_SERVICE_ACCOUNT, "", |text| {
            (!text.is_empty() && admission::subdomain_problem(text).is_some())
                .then(|| "a service account name (a DNS subdomain) or \"\"".to_owned())
        });
        let default_cpu = self.quantity(DEFAULT_CPU, false);
        let default_memory = self.quantity(DEFAULT_MEMORY, false);
        let run_as_non_root = self.flag(RUN_AS_NON_ROOT, true);
        let unit = self.unit();
        let log_dir = self.text(LITE_LOG_DIR, "dexaflow-logs", |text| {
            text.is_empty().then(|| "a directory path".to_owned())
        });
        let dry_run_dir = self.get(
            DRY_RUN_DIR,
            None,
            |raw| match raw.value.as_str() {
                Some(text) if !text.is_empty() => Ok(Some(PathBuf::from(text))),
                _ => Err(expected("a directory path")),
            },
            |dir| {
                dir.as_ref()
                    .map_or(Value::Null, |dir| Value::String(dir.display().to_string()))
            },
        );
        let executor = match executor_kind {
            ExecutorKind::Lite => ExecutorSettings::Lite {
                log_dir: PathBuf::from(log_dir),
            },
            ExecutorKind::Kubernetes => ExecutorSettings::Kubernetes {
                namespace,
                dry_run_dir,
                run_as_non_root,
            },
            ExecutorKind::Null => ExecutorSettings::Null,
        };

        let warm_pools = self.flag(WARM_POOLS, false);
        let source_mode = self.source_mode();
        let supervise = self.supervise();
        let allowlist = self.allowlist();
        let token = self.token();
        let metrics_listen = self.get(
            METRICS_LISTEN,
            SocketAddr::from(([127, 0, 0, 1], 9464)),
            |raw| {
                raw.value
                    .as_str()
                    .and_then(|text| text.trim().parse().ok())
                    .ok_or_else(|| expected("an address such as \"127.0.0.1:9464\""))
            },
            |address| Value::String(address.to_string()),
        );

        let (secret, ttl) = token;
        let secret_is_set = secret.is_some();
        let secret = match secret {
            Some(secret) => secret,
            // Never a predictable key: without the generator, the install must set one.
            None => random_secret().unwrap_or_else(|error| {
                self.errors.push(ConfigError::Required {
                    key: Key::file(TOKEN_SECRET),
                    when: format!("no random secret can be generated ({error})"),
                });
                Vec::new()
            }),
        };
        let token = TokenSettings { secret, ttl };
        let dispatch = dispatch::Settings {
            buffer_size: to_usize(buffer_size),
            workers: to_usize(workers).max(1),
            loop_interval: Duration::from_millis(loop_interval_ms),
            retry_window,
            drain_timeout,
            task_service_account,
            defaults: ResourceDefaults {
                cpu: default_cpu.map(|(text, _)| text),
                memory: default_memory.map(|(text, _)| text),
            },
            unit,
            allowlist,
            source_mode,
            warm_pools,
            token,
            executor,
        };
        // Hooks' changes are checked at boot against the same rules the chain applies.
        let hooks = self.hooks(&dispatch.change_rules());
        if !self.errors.is_empty() {
            return Err(ConfigErrors {
                errors: self.errors,
            });
        }
        Ok(Config {
            dispatch,
            supervise,
            hooks,
            metrics_listen,
            effective: self.effective,
            secret_is_set,
        })
    }

    fn executor_kind(&mut self) -> ExecutorKind {
        // A bare `null` is YAML's empty value, not the null executor: say so rather than
        // quietly running Lite.
        if self
            .found
            .get(EXECUTOR_TYPE)
            .is_some_and(|raw| raw.value.is_null())
        {
            self.errors.push(ConfigError::Invalid {
                key: Key::file(EXECUTOR_TYPE),
                expected:
                    "lite, kubernetes or \"null\" (quoted: a bare null is YAML's empty value)"
                        .to_owned(),
                got: "null".to_owned(),
            });
            self.bad.insert(EXECUTOR_TYPE);
        }
        self.get(
            EXECUTOR_TYPE,
            ExecutorKind::Lite,
            |raw| match raw.value.as_str().map(str::trim) {
                Some("lite" | "subprocess") => Ok(ExecutorKind::Lite),
                Some("kubernetes") => Ok(ExecutorKind::Kubernetes),
                Some("null") => Ok(ExecutorKind::Null),
                _ => Err(expected(
                    "one of lite (or its alias subprocess), kubernetes, null",
                )),
            },
            |kind| Value::String(kind.as_str().to_owned()),
        )
    }

    fn unit(&mut self) -> Option<ResourceUnit> {
        let cpu = self.quantity(UNIT_CPU, true);
        let memory = self.quantity(UNIT_MEMORY, true);
        let enforce = self.get(
            UNIT_ENFORCE,
            Enforce::Refuse,
            |raw| match raw.value.as_str().map(str::trim) {
                Some("refuse") => Ok(Enforce::Refuse),
                Some("warn") => Ok(Enforce::Warn),
                _ => Err(expected("refuse or warn")),
            },
            |enforce| {
                Value::String(match enforce {
                    Enforce::Refuse => "refuse".to_owned(),
                    Enforce::Warn => "warn".to_owned(),
                })
            },
        );
        let max_size = self.integer(UNIT_MAX_SIZE, 64, 1..=1024);
        match (cpu, memory) {
            (Some((cpu, cpu_milli)), Some((memory, memory_milli))) => Some(ResourceUnit {
                cpu,
                memory,
                cpu_milli,
                memory_milli,
                enforce,
                max_size: u32::try_from(max_size).unwrap_or(1024),
            }),
            (None, None) => None,
            _ => {
                if !self.is_bad(UNIT_CPU) && !self.is_bad(UNIT_MEMORY) {
                    self.errors.push(ConfigError::Incomplete {
                        key: Key::file(UNIT),
                        what: "both cpu and memory, or neither".to_owned(),
                    });
                }
                None
            }
        }
    }

    fn source_mode(&mut self) -> SourceMode {
        let enabled = self.flag(SOURCE_MODE_ENABLED, false);
        let image = self.text(SOURCE_MODE_IMAGE, "", |text| {
            (!text.is_empty() && !is_pinned_by_digest(text)).then(|| {
                "an image pinned by digest such as \"ghcr.io/acme/runtime@sha256:<64 hex digits>\""
                    .to_owned()
            })
        });
        if enabled && image.is_empty() && !self.is_bad(SOURCE_MODE_IMAGE) {
            let env = self
                .found
                .get(SOURCE_MODE_ENABLED)
                .and_then(|raw| raw.env.clone());
            self.errors.push(ConfigError::Required {
                key: Key::file(SOURCE_MODE_IMAGE),
                when: format!(
                    "{} is true (an image pinned by digest)",
                    Key {
                        path: SOURCE_MODE_ENABLED.to_owned(),
                        env
                    }
                ),
            });
        }
        SourceMode {
            enabled,
            image,
            ..SourceMode::default()
        }
    }

    fn supervise(&mut self) -> supervise::Settings {
        let defaults = supervise::Settings::default();
        let positive = Duration::from_nanos(1);
        let timeout = self.duration(ADMISSION_TIMEOUT, defaults.timeout, positive);
        let chain_timeout = self.duration(CHAIN_TIMEOUT, defaults.chain_timeout, positive);
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
        let fail_open = self.flag(FAIL_OPEN, defaults.fail_open);
        let failures = self.integer(
            BREAKER_FAILURES,
            u64::from(defaults.breaker.failures),
            1..=u64::from(u32::MAX),
        );
        let backoff = self.duration(BREAKER_BACKOFF, defaults.breaker.backoff, positive);
        let max_backoff =
            self.duration(BREAKER_MAX_BACKOFF, defaults.breaker.max_backoff, positive);
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
        supervise::Settings {
            timeout,
            chain_timeout,
            fail_open,
            breaker: supervise::BreakerSettings {
                failures: u32::try_from(failures).unwrap_or(u32::MAX),
                backoff,
                max_backoff,
                ..defaults.breaker
            },
        }
    }

    fn allowlist(&mut self) -> Allowlist {
        let fields = self.get(
            ALLOWED_FIELDS,
            AllowedFields::All,
            parse_allowed_fields,
            |fields| match fields {
                AllowedFields::All => Value::String("all".to_owned()),
                AllowedFields::None => Value::String("none".to_owned()),
                AllowedFields::Only(names) => {
                    Value::Sequence(names.iter().cloned().map(Value::String).collect())
                }
            },
        );
        let as_set = |list: Option<Vec<String>>| list.map(|items| items.into_iter().collect());
        Allowlist {
            fields,
            service_accounts: as_set(self.list(ALLOWED_SERVICE_ACCOUNTS)),
            priority_classes: as_set(self.list(ALLOWED_PRIORITY_CLASSES)),
            images: self.list(ALLOWED_IMAGES),
        }
    }

    /// The token TTL and the secret, `None` when none is set: a secret is generated only once
    /// the config is known to be good.
    fn token(&mut self) -> (Option<Vec<u8>>, Duration) {
        let ttl = self.duration(
            TOKEN_TTL,
            Duration::from_secs(10 * 60),
            Duration::from_nanos(1),
        );
        let secret = self.get(
            TOKEN_SECRET,
            None,
            |raw| {
                // The value is never quoted back: it may be most of a real secret.
                let text = raw.value.as_str().ok_or_else(|| Problem {
                    at: String::new(),
                    expected: "text".to_owned(),
                    got: Some("a value that is not text".to_owned()),
                })?;
                if text.len() < MIN_SECRET_BYTES {
                    return Err(Problem {
                        at: String::new(),
                        expected: format!("a secret of at least {MIN_SECRET_BYTES} bytes"),
                        got: Some(format!("{} bytes", text.len())),
                    });
                }
                Ok(Some(text.as_bytes().to_vec()))
            },
            |_| Value::Null,
        );
        // Never rendered: `Config::to_yaml` says only whether it was set.
        self.effective.remove(TOKEN_SECRET);
        (secret, ttl)
    }

    fn hooks(&mut self, rules: &ChangeRules) -> Vec<HookSpec> {
        let items = match self.found.get(HOOKS).map(|raw| raw.value.clone()) {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Sequence(items)) => items,
            Some(other) => {
                self.errors.push(ConfigError::Invalid {
                    key: Key::file(HOOKS),
                    expected: "a list of hooks".to_owned(),
                    got: describe(&other),
                });
                return Vec::new();
            }
        };
        let mut specs = Vec::new();
        let mut names: HashMap<String, usize> = HashMap::new();
        for (index, item) in items.into_iter().enumerate() {
            let key = || Key::file(format!("{HOOKS}[{index}]"));
            let name_key = || Key::file(format!("{HOOKS}[{index}].name"));
            let spec: HookSpec = match serde_yaml_ng::from_value(item) {
                Ok(spec) => spec,
                Err(source) => {
                    self.errors.push(ConfigError::Hook { key: key(), source });
                    continue;
                }
            };
            let name = spec.name().to_owned();
            if name.trim().is_empty() {
                self.errors.push(ConfigError::Invalid {
                    key: name_key(),
                    expected: "a non-empty name".to_owned(),
                    got: format!("{name:?}"),
                });
            } else if let Some(first) = names.get(&name) {
                self.errors.push(ConfigError::DuplicateHook {
                    key: name_key(),
                    name: name.clone(),
                    first: Key::file(format!("{HOOKS}[{first}].name")),
                });
            } else {
                names.insert(name, index);
            }
            if let Err(problems) = spec.check(rules) {
                self.errors.extend(
                    problems
                        .into_iter()
                        .map(|source| ConfigError::HookRule { key: key(), source }),
                );
            }
            specs.push(spec);
        }
        let shown = serde_yaml_ng::to_value(&specs).unwrap_or(Value::Null);
        self.effective.insert(HOOKS, shown);
        specs
    }
}

/// Which executor `executor.type` names.
#[derive(Debug, Clone, Copy)]
enum ExecutorKind {
    Lite,
    Kubernetes,
    Null,
}

impl ExecutorKind {
    fn as_str(self) -> &'static str {
        match self {
            ExecutorKind::Lite => "lite",
            ExecutorKind::Kubernetes => "kubernetes",
            ExecutorKind::Null => "null",
        }
    }
}

fn is_section(path: &str, leaves: &[&str]) -> bool {
    leaves.iter().any(|leaf| {
        leaf.strip_prefix(path)
            .is_some_and(|rest| rest.starts_with('.'))
    })
}

fn parse_list(raw: &Raw) -> Result<Vec<String>, Problem> {
    match (&raw.value, &raw.env) {
        (Value::String(text), Some(_)) => Ok(text
            .split(',')
            .map(str::trim)
            .filter(|item| !item.is_empty())
            .map(str::to_owned)
            .collect()),
        (Value::Sequence(items), _) => items
            .iter()
            .enumerate()
            .map(|(index, item)| match item.as_str() {
                Some(text) if !text.trim().is_empty() => Ok(text.trim().to_owned()),
                _ => Err(Problem {
                    at: format!("[{index}]"),
                    expected: "non-empty text".to_owned(),
                    got: Some(describe(item)),
                }),
            })
            .collect(),
        _ => Err(expected("a list")),
    }
}

fn parse_allowed_fields(raw: &Raw) -> Result<AllowedFields, Problem> {
    let one_of = || {
        format!(
            "all, none or a list drawn from {}",
            EXECUTION_FIELDS.join(", ")
        )
    };
    match raw.value.as_str().map(str::trim) {
        Some("all") => return Ok(AllowedFields::All),
        Some("none") => return Ok(AllowedFields::None),
        Some(_) if raw.env.is_none() => return Err(expected(one_of())),
        _ => {}
    }
    let names = parse_list(raw).map_err(|problem| Problem {
        expected: one_of(),
        ..problem
    })?;
    let mut only = BTreeSet::new();
    for (index, name) in names.into_iter().enumerate() {
        if !EXECUTION_FIELDS.contains(&name.as_str()) {
            let at = if raw.env.is_some() {
                String::new()
            } else {
                format!("[{index}]")
            };
            return Err(Problem {
                at,
                expected: format!("one of {}", EXECUTION_FIELDS.join(", ")),
                got: Some(format!("{name:?}")),
            });
        }
        only.insert(name);
    }
    Ok(AllowedFields::Only(only))
}

/// Whether `image` matches `^[^@]+@sha256:[a-f0-9]{64}$`.
fn is_pinned_by_digest(image: &str) -> bool {
    let Some((name, digest)) = image.split_once('@') else {
        return false;
    };
    let Some(hex) = digest.strip_prefix("sha256:") else {
        return false;
    };
    !name.is_empty()
        && hex.len() == 64
        && hex
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Whether `name` is not a DNS label (RFC 1123), as Kubernetes requires of a namespace.
fn dns_label_problem(name: &str) -> bool {
    let bytes = name.as_bytes();
    let (Some(first), Some(last)) = (bytes.first(), bytes.last()) else {
        return true;
    };
    name.len() > 63
        || !first.is_ascii_alphanumeric()
        || !last.is_ascii_alphanumeric()
        || !bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
}

fn to_usize(number: u64) -> usize {
    usize::try_from(number).unwrap_or(usize::MAX)
}

/// 32 random bytes from the operating system's cryptographic generator, for an agent token
/// secret that lives as long as the process.
fn random_secret() -> Result<Vec<u8>, getrandom::Error> {
    let mut secret = vec![0; MIN_SECRET_BYTES];
    getrandom::fill(&mut secret)?;
    Ok(secret)
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
