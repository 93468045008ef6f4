//! The config file: one YAML file in Dexaflow's key layout, with `DEXAFLOW_` environment
//! overrides, checked at boot so that a bad config fails with every bad key named.
//!
//! This is the only module that knows key names. It turns the file into each module's plain
//! settings ([`crate::dispatch::Settings`], [`crate::supervise::Settings`]) and the hook
//! declarations ([`crate::hooks::HookSpec`]); no other module reads YAML or the environment.
//!
//! Each job has its file: `keys.rs` the key table (every key, the leaves, their variables),
//! `document.rs` the YAML text parsed (an integer too large for 64 bits kept as its digits),
//! `reader.rs` the raw values and the typed reading primitives, one file per section
//! (`scheduler.rs`, `executor.rs`, `execution.rs`, `allowlist.rs`, `auth.rs`, `metrics.rs`),
//! `validate.rs` the rules across keys and `output.rs` the effective config as YAML.
//!
//! # Environment overrides
//! Every leaf key has a variable: `DEXAFLOW_` and the key upper-cased with `.` turned into `_`,
//! so `DEXAFLOW_SCHEDULER_DISPATCH_BUFFER_SIZE` overrides `scheduler.dispatch.buffer_size`. A
//! variable wins over the file. Lists are written comma-separated
//! (`DEXAFLOW_EXECUTION_ALLOWLIST_IMAGES=ghcr.io/acme/,python`). The mapping is made from the
//! known keys, so underscores inside key names are never ambiguous. Any other `DEXAFLOW_`
//! variable is an error naming it and the nearest known one (a typo must not go unnoticed),
//! except the documented variables that are no key ([`non_config_variables`], such as
//! `DEXAFLOW_AGENT_TOKEN`), which are ignored. `execution.admission.hooks` has no variable: a
//! list of hooks belongs in the file. The environment is passed in as the operating system gives
//! it (`std::env::vars_os()`), never read here, so tests need not touch the process's own: a
//! variable outside `DEXAFLOW_` is never looked at, and a `DEXAFLOW_` one that is not UTF-8 is
//! an error naming it. No error shows a variable's value.
//!
//! # Paths
//! A relative path written in a config file (`executor.lite.log_dir`,
//! `executor.kubernetes.dry_run_dir`, the webhook's files, a webhook hook's files, the `server`
//! section's files) is resolved against the directory of that file, as Prometheus resolves its
//! own, so that a config means the same from any working directory. A path from a `DEXAFLOW_`
//! variable, a default, and a path in a text that is no file ([`Config::from_yaml_str`], the
//! embedded default) stay relative to the working directory. The effective config shows the
//! resolved paths.
//!
//! # Sections
//! Every command reads every section, `server` included, so that a misspelt or mistyped key
//! fails everywhere; only `serve` needs the certificate ([`Config::load_with_server`]). Files
//! are read only by the command that uses them: `serve` checks its files
//! ([`check_server_files`]), `dispatch` its executor's directories
//! ([`Config::check_executor`]); `check-config` reads none, since a config may be checked on
//! another machine than the one it runs on.
//!
//! # Errors
//! Every problem is collected, not just the first, and each message names the full dotted key
//! (and the variable, when the value came from one):
//!
//! ```text
//! execution.admission.timeout: expected a duration such as "500ms", got "fast"
//! scheduler.dispatch.bufer_size: unknown key
//! scheduler.dispatch.buffer_size (from DEXAFLOW_SCHEDULER_DISPATCH_BUFFER_SIZE): expected an integer from 0 to 65536, got "x"
//! DEXAFLOW_SCHEDULER_DISPATCH_BUFERSIZE: unknown variable; did you mean DEXAFLOW_SCHEDULER_DISPATCH_BUFFER_SIZE?
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

mod allowlist;
mod auth;
mod document;
mod execution;
mod executor;
mod keys;
mod metrics;
mod output;
mod policy;
mod reader;
mod scheduler;
mod server;
mod validate;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde_yaml_ng::Value;
use thiserror::Error;

use crate::admission::error_lines;
use crate::hooks::{HookSpec, PolicyError, PolicySpec, SpecError};
use crate::{dispatch, supervise};

pub(crate) use execution::BREAKER_FAILURE_COUNTS;
pub use keys::{METRICS_LISTEN, non_config_variables};
pub use metrics::BATCH_LISTEN;
pub(crate) use scheduler::{BUFFER_SIZES, WORKER_COUNTS, WORKER_THREAD_COUNTS};
pub use server::check_server_files;
pub(crate) use validate::{
    Mismatch, chain_holds_a_call, duration_at_least, integer_in, integers,
    max_backoff_covers_backoff, too_large,
};

/// The YAML parser that keeps an integer too large for 64 bits, and how a value is shown, for
/// the workload reader to report values as the config reader does.
pub(crate) use document::{big_integer_digits, describe, parse_yaml};
use reader::Reader;

/// The text of `examples/dexaflow.yaml`, the config `dispatch` runs with when given none.
pub const EMBEDDED_DEFAULT: &str = include_str!("../../examples/dexaflow.yaml");

/// The effective config: each module's settings, built from the file, the environment and the
/// defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// The dispatcher's settings (`scheduler.*`, `executor.*`, `execution.*` but admission,
    /// `execution_allowlist.*`, `auth.*`).
    pub dispatch: dispatch::Settings,
    /// How every hook call is supervised (`execution.admission.*`).
    pub supervise: supervise::Settings,
    /// The hooks, in chain order (`execution.admission.hooks`, then the webhook of
    /// `execution.admission.webhook.url`); build them with [`crate::hooks::build`].
    pub hooks: Vec<HookSpec>,
    /// `executor.policy`, when set: the chain's last hook; [`crate::hooks::chain`] puts it
    /// there.
    pub policy: Option<PolicySpec>,
    /// `metrics.listen`: where the Prometheus exporter listens.
    pub metrics_listen: SocketAddr,
    /// Every leaf as loaded, for [`Config::to_yaml`]; the secret is never kept here.
    effective: BTreeMap<&'static str, Value>,
    /// Whether `auth.agent_token_secret` was set, rather than generated.
    secret_is_set: bool,
    /// Whether `metrics.listen` was set, rather than defaulted.
    metrics_listen_is_set: bool,
}

/// One problem with the config.
///
/// Its text names the key; for [`ConfigError::Read`], [`ConfigError::Syntax`],
/// [`ConfigError::Hook`], [`ConfigError::HookRule`], [`ConfigError::Policy`],
/// [`ConfigError::Directory`] and [`ConfigError::ServerFile`] the cause is its
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
    /// A `DEXAFLOW_` variable that names no key and is none of [`non_config_variables`], often
    /// a typo; its value is never shown.
    #[error(
        "{variable}: unknown variable{}",
        nearest.as_ref().map(|nearest| format!("; did you mean {nearest}?")).unwrap_or_default()
    )]
    UnknownVariable {
        /// The variable (any bytes that are not UTF-8 replaced by U+FFFD, control and format
        /// characters escaped as `\u{1b}`).
        variable: String,
        /// The known variable it is nearest to, when it is near enough to be a typo of it.
        nearest: Option<String>,
    },
    /// The variable a key that is read from the file only would have.
    #[error("{variable}: unknown variable; {key} is read from the file only")]
    FileOnly {
        /// The variable.
        variable: String,
        /// The key.
        key: &'static str,
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
    /// An executor policy that does not decode, or would misbehave on every attempt:
    /// `executor.policy: <key path>: <why>`.
    #[error("{key}")]
    Policy {
        /// `executor.policy`.
        key: Key,
        /// What is wrong with it, naming the key path inside the policy.
        #[source]
        source: PolicyError,
    },
    /// A directory an executor setting names that the executor cannot use, found when
    /// `dispatch` starts ([`Config::check_executor`]): no retry would heal it.
    #[error("{key}: {}", path.display())]
    Directory {
        /// The key, such as `executor.kubernetes.dry_run_dir`.
        key: Key,
        /// The directory.
        path: PathBuf,
        /// Why it cannot be used.
        #[source]
        source: std::io::Error,
    },
    /// A file the `server` section names that `serve` cannot use: `server.tls.cert_file:
    /// reading /x/cert.pem: <why>`.
    #[error("{key}")]
    ServerFile {
        /// The key naming the file.
        key: Key,
        /// What is wrong with it, naming the file.
        #[source]
        source: crate::serve::ServeError,
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
        f.write_str(&error_lines(&self.errors))
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
        K: Into<OsString>,
        V: Into<OsString>,
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
        K: Into<OsString>,
        V: Into<OsString>,
    {
        let (config, _) = Reader::read(
            &path.display().to_string(),
            &read_file(path)?,
            env,
            base_dir(path),
        )?
        .build(Server::Optional)?;
        Ok(config)
    }

    /// Reads the config file at `path` once, for `serve`: the config as [`Config::load`] reads
    /// it (for `metrics.listen`), and its `server` section as the server's settings, which
    /// `serve` needs whole: the certificate and its key are required. The files are not read
    /// here: [`check_server_files`] reads them all.
    ///
    /// # Errors
    /// [`ConfigErrors`] with every problem of both, each naming its key.
    pub fn load_with_server<K, V>(
        path: &Path,
        env: impl IntoIterator<Item = (K, V)>,
    ) -> Result<(Config, crate::serve::Settings), ConfigErrors>
    where
        K: Into<OsString>,
        V: Into<OsString>,
    {
        let origin = path.display().to_string();
        let (config, server) = Reader::read(&origin, &read_file(path)?, env, base_dir(path))?
            .build(Server::Required)?;
        let server = server.expect("a server section with a problem fails the build");
        Ok((config, server))
    }

    /// How errors name the embedded default config, which has no path.
    pub const EMBEDDED_DEFAULT_ORIGIN: &'static str = "the embedded default config";

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
        K: Into<OsString>,
        V: Into<OsString>,
    {
        Config::parse(Config::EMBEDDED_DEFAULT_ORIGIN, EMBEDDED_DEFAULT, env)
    }

    fn parse<K, V>(
        origin: &str,
        text: &str,
        env: impl IntoIterator<Item = (K, V)>,
    ) -> Result<Config, ConfigErrors>
    where
        K: Into<OsString>,
        V: Into<OsString>,
    {
        let (config, _) = Reader::read(origin, text, env, None)?.build(Server::Optional)?;
        Ok(config)
    }
}

/// Whether the command needs the `server` section whole. Every command checks the section's
/// keys and values, so that a misspelt key fails everywhere; only `serve` needs its
/// certificate, and reads the files it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Server {
    Required,
    Optional,
}

/// The directory relative paths in the config file at `path` are resolved against: the file's
/// own, as Prometheus resolves them, so that a config means the same from any working
/// directory. Made absolute (without resolving links), so that the paths the effective config
/// shows mean the same in a copy of it saved elsewhere.
fn base_dir(path: &Path) -> Option<PathBuf> {
    let path = std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
    Some(path.parent().map(Path::to_path_buf).unwrap_or_default())
}

/// The text of the config file at `path`.
fn read_file(path: &Path) -> Result<String, ConfigErrors> {
    std::fs::read_to_string(path).map_err(|source| {
        ConfigErrors::from(ConfigError::Read {
            path: path.to_owned(),
            source,
        })
    })
}

impl Reader {
    /// Finds every leaf in `text` (named `origin` in a syntax error) and in `env`, collecting
    /// every problem found so far. A relative path in the text is resolved against `base`, the
    /// config file's directory, when there is one; one from `env` stays relative to the
    /// working directory.
    fn read<K, V>(
        origin: &str,
        text: &str,
        env: impl IntoIterator<Item = (K, V)>,
        base: Option<PathBuf>,
    ) -> Result<Reader, ConfigErrors>
    where
        K: Into<OsString>,
        V: Into<OsString>,
    {
        let root = document::parse_yaml(text).map_err(|source| ConfigError::Syntax {
            origin: origin.to_owned(),
            source,
        })?;
        let mut reader = Reader {
            base,
            ..Reader::default()
        };
        reader.walk(&root, "");
        reader.read_env(env);
        Ok(reader)
    }

    /// Builds the config from the leaves found, and the server's settings when the `server`
    /// section has its certificate (always, when `server` is [`Server::Required`]), or every
    /// problem.
    fn build(
        mut self,
        server: Server,
    ) -> Result<(Config, Option<crate::serve::Settings>), ConfigErrors> {
        let scheduler = self.scheduler();
        let executor = self.executor();
        let warm_pools = self.warm_pools();
        let source_mode = self.source_mode();
        let mut supervise = self.supervise();
        let allowlist = self.allowlist();
        let policy = self.policy();
        let (secret, ttl) = self.token();
        let (metrics_listen, metrics_listen_is_set) = self.metrics_listen();
        let serving = server == Server::Required;
        let server = self.server(server);
        if let Some(settings) = server.as_ref().filter(|_| serving) {
            self.distinct_listeners(settings, metrics_listen, metrics_listen_is_set);
        }
        let (token, secret_is_set) = self.token_settings(secret, ttl);
        let dispatch = dispatch::Settings {
            buffer_size: scheduler.buffer_size,
            workers: scheduler.workers,
            worker_threads: scheduler.worker_threads,
            loop_interval: scheduler.loop_interval,
            retry_window: scheduler.retry_window,
            drain_timeout: scheduler.drain_timeout,
            task_service_account: executor.task_service_account,
            defaults: executor.defaults,
            unit: executor.unit,
            allowlist,
            policy: policy::settings(policy.as_ref()),
            source_mode,
            warm_pools,
            token,
            executor: executor.executor,
        };
        // Hooks' changes, and the policy's forced values, are checked at boot against the same
        // rules the chain applies.
        let rules = dispatch.change_rules();
        let hooks = self.hooks(&rules, &mut supervise);
        self.check_policy(policy.as_ref(), &rules);
        if !self.errors.is_empty() {
            return Err(ConfigErrors {
                errors: self.errors,
            });
        }
        let config = Config {
            dispatch,
            supervise,
            hooks,
            policy,
            metrics_listen,
            effective: self.effective,
            secret_is_set,
            metrics_listen_is_set,
        };
        Ok((config, server))
    }
}
