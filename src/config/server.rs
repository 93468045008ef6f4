//! The `server` section: the settings of `serve` ([`crate::serve::Settings`]), read from the
//! same file as the rest of the config. Every command checks its keys and values; only `serve`
//! requires the certificate and its key, and reads the files the section names.
//!
//! | key | default |
//! |---|---|
//! | `server.listen` | `127.0.0.1:8443` |
//! | `server.probe_listen` | none: no probe listener |
//! | `server.tls.cert_file`, `server.tls.key_file` | required |
//! | `server.tls.client_ca_file` | none: no client certificate asked |
//! | `server.auth.bearer_token_file` | none |
//! | `server.max_body_bytes` | 3145728 (3 MiB) |
//! | `server.enabled_admission` | every service that reads no cluster |
//! | `server.resource_groups_file` | none: pods are not changed |
//! | `server.scheduler_names` | `[volcano]` |
//! | `server.trusted_users` | none |
//! | `server.http2` | `false` |
//! | `server.shutdown_grace` | `15s` |
//! | `server.max_connections` | 512 (1 to 1000000) |
//! | `server.idle_timeout` | `30s` (10ms to 1h) |
//! | `server.worker_threads` | none: one per core (1 to 256) |
//!
//! Each has a `DEXAFLOW_` variable like every other key (`DEXAFLOW_SERVER_LISTEN`); lists are
//! comma-separated there, and `server.enabled_admission` may be written so in the file too.

use std::net::SocketAddr;
use std::time::Duration;

use serde_yaml_ng::Value;

use super::document::describe;
use super::keys::{
    METRICS_LISTEN, SERVER_BEARER_TOKEN_FILE, SERVER_CERT_FILE, SERVER_CLIENT_CA_FILE,
    SERVER_ENABLED_ADMISSION, SERVER_HTTP2, SERVER_IDLE_TIMEOUT, SERVER_KEY_FILE,
    SERVER_KUBECONFIG, SERVER_LISTEN, SERVER_MAX_BODY_BYTES, SERVER_MAX_CONNECTIONS,
    SERVER_PROBE_LISTEN, SERVER_RESOURCE_GROUPS_FILE, SERVER_SCHEDULER_NAMES,
    SERVER_SHUTDOWN_GRACE, SERVER_TRUSTED_USERS, SERVER_VOLCANO_ALLOCATED_PODS_CHECK,
    SERVER_VOLCANO_FEATURE_GATES, SERVER_VOLCANO_MAX_QUEUE_DEPTH,
    SERVER_VOLCANO_ROOT_QUEUE_PROTECTION, SERVER_WORKER_THREADS,
};
use super::reader::{Problem, Raw, Reader, expected};
use super::{ConfigError, ConfigErrors, Key, Server};
use crate::serve::{self, SettingNames, SettingsFile, TlsFiles};
use crate::volcano::{FeatureGates, QueueSettings};

/// The most `server.max_connections` takes: past it the cap no longer bounds anything a
/// machine can hold.
const MAX_CONNECTIONS: u64 = 1_000_000;
/// The most `server.volcano.max_queue_depth` takes: a hierarchy deeper than this is a mistake,
/// and every check walks it.
const MAX_QUEUE_DEPTH: u64 = 100;
/// The least `server.idle_timeout` takes: less would close connections between a request and
/// the next one the same caller sends at once.
const MIN_IDLE_TIMEOUT: Duration = Duration::from_millis(10);
/// The most `server.worker_threads` takes: more threads than any machine has cores only
/// switch between each other.
const MAX_WORKER_THREADS: u64 = 256;
/// The most `server.idle_timeout` takes: a slow client may hold a connection this long.
const MAX_IDLE_TIMEOUT: Duration = Duration::from_secs(3600);

impl Reader {
    /// Refuses two of `serve`'s listeners (the server, its probes, the metrics exporter at
    /// `metrics`, set or its default) on one address: the second to bind would fail as if
    /// another process held the port. The later key is blamed, naming the one it collides with;
    /// a `metrics.listen` left to its default counts as the earliest.
    pub(super) fn distinct_listeners(
        &mut self,
        settings: &serve::Settings,
        metrics: SocketAddr,
        metrics_is_set: bool,
    ) {
        let mut listeners = vec![(SERVER_LISTEN, settings.listen)];
        listeners.extend(
            settings
                .probe_listen
                .map(|probe| (SERVER_PROBE_LISTEN, probe)),
        );
        if metrics_is_set {
            listeners.push((METRICS_LISTEN, metrics));
        } else {
            listeners.insert(0, (METRICS_LISTEN, metrics));
        }
        for (later, &(key, address)) in listeners.iter().enumerate() {
            let taken = listeners[..later]
                .iter()
                .find(|(_, taken)| collide(*taken, address));
            if let Some(&(other, taken)) = taken
                && !self.is_bad(key)
            {
                let whose = if other == METRICS_LISTEN && !metrics_is_set {
                    format!("{other}, by default, listens on {taken}")
                } else {
                    format!("{other} listens on {taken}")
                };
                self.reject(
                    key,
                    format!("an address no other listener takes ({whose})"),
                    address.to_string(),
                );
            }
        }
    }

    /// The `server` section as [`crate::serve::Settings`], or `None` when it has a problem
    /// (reported with the others) or has no certificate. Every command reads it, so that a bad
    /// key fails everywhere; a missing certificate or key is a problem only when `server` is
    /// [`Server::Required`], for `serve`.
    pub(super) fn server(&mut self, server: Server) -> Option<serve::Settings> {
        let listen = self.address(SERVER_LISTEN, Some(serve::Settings::DEFAULT_LISTEN));
        let probe_listen = self.address(SERVER_PROBE_LISTEN, None);
        let cert_file = self.path(SERVER_CERT_FILE, "a file path");
        let key_file = self.path(SERVER_KEY_FILE, "a file path");
        let client_ca_file = self.path(SERVER_CLIENT_CA_FILE, "a file path");
        let bearer_token_file = self.path(SERVER_BEARER_TOKEN_FILE, "a file path");
        let max_body_bytes = self.integer(
            SERVER_MAX_BODY_BYTES,
            serve::Settings::DEFAULT_MAX_BODY_BYTES as u64,
            1..=u64::from(u32::MAX),
        );
        let enabled_admission =
            self.get(
                SERVER_ENABLED_ADMISSION,
                None,
                parse_enabled,
                |paths| match paths {
                    Some(paths) => {
                        Value::Sequence(paths.iter().cloned().map(Value::String).collect())
                    }
                    None => Value::Null,
                },
            );
        let resource_groups_file = self.path(SERVER_RESOURCE_GROUPS_FILE, "a file path");
        let scheduler_names = self.list_or(
            SERVER_SCHEDULER_NAMES,
            vec![serve::Settings::DEFAULT_SCHEDULER_NAME.to_owned()],
        );
        let trusted_users = self.list_or(SERVER_TRUSTED_USERS, Vec::new());
        let http2 = self.flag(SERVER_HTTP2, false);
        let shutdown_grace = self.duration(
            SERVER_SHUTDOWN_GRACE,
            serve::Settings::DEFAULT_SHUTDOWN_GRACE,
            Duration::ZERO,
        );
        let max_connections = self.integer(
            SERVER_MAX_CONNECTIONS,
            serve::Settings::DEFAULT_MAX_CONNECTIONS as u64,
            1..=MAX_CONNECTIONS,
        );
        let idle_timeout = self.duration(
            SERVER_IDLE_TIMEOUT,
            serve::Settings::DEFAULT_IDLE_TIMEOUT,
            MIN_IDLE_TIMEOUT,
        );
        if idle_timeout > MAX_IDLE_TIMEOUT && !self.is_bad(SERVER_IDLE_TIMEOUT) {
            self.reject(
                SERVER_IDLE_TIMEOUT,
                format!(
                    "a duration of at most {}",
                    humantime::format_duration(MAX_IDLE_TIMEOUT)
                ),
                humantime::format_duration(idle_timeout).to_string(),
            );
        }
        let worker_threads = self
            .optional_integer(SERVER_WORKER_THREADS, 1..=MAX_WORKER_THREADS)
            .map(|threads| usize::try_from(threads).unwrap_or(usize::MAX));
        let kubeconfig = self.path(SERVER_KUBECONFIG, "a file path");
        let defaults = QueueSettings::default();
        let volcano = QueueSettings {
            max_queue_depth: self
                .integer(
                    SERVER_VOLCANO_MAX_QUEUE_DEPTH,
                    defaults.max_queue_depth as u64,
                    1..=MAX_QUEUE_DEPTH,
                )
                .try_into()
                .unwrap_or(defaults.max_queue_depth),
            enable_queue_allocated_pods_check: self.flag(
                SERVER_VOLCANO_ALLOCATED_PODS_CHECK,
                defaults.enable_queue_allocated_pods_check,
            ),
            enable_root_queue_protection: self.flag(
                SERVER_VOLCANO_ROOT_QUEUE_PROTECTION,
                defaults.enable_root_queue_protection,
            ),
        };
        let feature_gates = self.get(
            SERVER_VOLCANO_FEATURE_GATES,
            FeatureGates::default(),
            parse_feature_gates,
            |gates| {
                let mut shown = serde_yaml_ng::Mapping::new();
                shown.insert(
                    Value::String("PodLevelResources".to_owned()),
                    Value::Bool(gates.pod_level_resources),
                );
                Value::Mapping(shown)
            },
        );
        for (key, file) in [(SERVER_CERT_FILE, &cert_file), (SERVER_KEY_FILE, &key_file)] {
            if server == Server::Required && file.is_none() && !self.is_bad(key) {
                self.errors.push(ConfigError::Required {
                    key: Key::file(key),
                    when: "serving (the PEM file of the serving certificate or its key)".to_owned(),
                });
            }
        }
        let (Some(cert_file), Some(key_file)) = (cert_file, key_file) else {
            return None;
        };
        Some(serve::Settings {
            listen: listen.unwrap_or(serve::Settings::DEFAULT_LISTEN),
            probe_listen,
            tls: TlsFiles {
                cert_file,
                key_file,
            },
            client_ca_file,
            bearer_token_file,
            max_body_bytes: usize::try_from(max_body_bytes).unwrap_or(usize::MAX),
            enabled_admission,
            resource_groups_file,
            scheduler_names,
            trusted_users,
            http2,
            shutdown_grace,
            poll_interval: serve::Settings::DEFAULT_POLL_INTERVAL,
            names: SettingNames {
                listen: SERVER_LISTEN,
                probe_listen: SERVER_PROBE_LISTEN,
                kubeconfig: SERVER_KUBECONFIG,
                client_ca_file: SERVER_CLIENT_CA_FILE,
                bearer_token_file: SERVER_BEARER_TOKEN_FILE,
                enabled_admission: SERVER_ENABLED_ADMISSION,
            },
            max_connections: usize::try_from(max_connections).unwrap_or(usize::MAX),
            idle_timeout,
            worker_threads,
            kubeconfig,
            volcano,
            feature_gates,
        })
    }
}

/// Reads every file `settings` names, as `serve` does when it starts, and reports each one that
/// cannot be used against its key (`server.tls.cert_file: reading /x/cert.pem: <why>`), all at
/// once: a start that stopped at the first would take one run per bad file.
///
/// Only `serve` calls it: another command, or `check-config` on another machine than the
/// server's, has no need of the files.
///
/// # Errors
/// [`ConfigErrors`] with a [`ConfigError::ServerFile`] for each file that cannot be used.
pub fn check_server_files(settings: &serve::Settings) -> Result<(), ConfigErrors> {
    let errors: Vec<ConfigError> = settings
        .check_files()
        .into_iter()
        .map(|(file, source)| {
            let key = match file {
                SettingsFile::Cert => SERVER_CERT_FILE,
                SettingsFile::Key => SERVER_KEY_FILE,
                SettingsFile::ClientCa => SERVER_CLIENT_CA_FILE,
                SettingsFile::BearerToken => SERVER_BEARER_TOKEN_FILE,
                SettingsFile::ResourceGroups => SERVER_RESOURCE_GROUPS_FILE,
            };
            ConfigError::ServerFile {
                key: Key::file(key),
                source,
            }
        })
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(ConfigErrors { errors })
    }
}

/// A list of paths, or one text of comma-separated paths; an empty list is an error here, so
/// that it names the key.
fn parse_enabled(raw: &Raw) -> Result<Option<Vec<String>>, Problem> {
    let paths = match &raw.value {
        Value::String(text) => serve::parse_enabled(text),
        Value::Sequence(items) => {
            let mut paths = Vec::new();
            for (index, item) in items.iter().enumerate() {
                let Some(text) = item.as_str().map(str::trim).filter(|text| !text.is_empty())
                else {
                    return Err(Problem {
                        at: format!("[{index}]"),
                        expected: "a path such as \"/pods/mutate\"".to_owned(),
                        got: Some(describe(item)),
                    });
                };
                paths.push(text.to_owned());
            }
            paths
        }
        _ => return Err(expected("a list of paths such as [/pods/mutate]")),
    };
    if paths.is_empty() {
        return Err(expected(
            "at least one path (leave the key unset to serve every service)",
        ));
    }
    // A library's own services are enabled through its builder, never through a file.
    let builtin = serve::services::builtin_paths();
    if let Some((index, unknown)) = paths
        .iter()
        .enumerate()
        .find(|(_, path)| !builtin.clone().any(|known| known == path.as_str()))
    {
        return Err(Problem {
            at: match raw.value {
                Value::Sequence(_) => format!("[{index}]"),
                _ => String::new(),
            },
            expected: format!(
                "the path of a service ({})",
                builtin.collect::<Vec<_>>().join(", ")
            ),
            got: Some(format!("{unknown:?}")),
        });
    }
    Ok(Some(paths))
}

/// Volcano's feature gates: a map of gate to true or false in the file, `Gate=true,Other=false`
/// (as Volcano's `--feature-gates` takes them) in the environment, over the defaults.
fn parse_feature_gates(raw: &Raw) -> Result<FeatureGates, Problem> {
    let mut gates = FeatureGates::default();
    let entries: Vec<(String, Value)> = match (&raw.value, &raw.env) {
        (Value::Mapping(entries), _) => entries
            .iter()
            .map(|(name, enabled)| {
                let name = name.as_str().ok_or_else(|| Problem {
                    at: String::new(),
                    expected: "gate names as text".to_owned(),
                    got: Some(describe(name)),
                })?;
                Ok((name.to_owned(), enabled.clone()))
            })
            .collect::<Result<_, Problem>>()?,
        (Value::String(text), Some(_)) => text
            .split(',')
            .map(str::trim)
            .filter(|entry| !entry.is_empty())
            .map(|entry| {
                let (name, enabled) = entry.split_once('=').ok_or_else(|| Problem {
                    at: String::new(),
                    expected: "Gate=true or Gate=false, comma-separated".to_owned(),
                    got: Some(format!("{entry:?}")),
                })?;
                let enabled = match enabled.trim() {
                    "true" => Value::Bool(true),
                    "false" => Value::Bool(false),
                    other => Value::String(other.to_owned()),
                };
                Ok((name.trim().to_owned(), enabled))
            })
            .collect::<Result<_, Problem>>()?,
        _ => return Err(expected("a map of feature gate to true or false")),
    };
    for (name, enabled) in entries {
        let Value::Bool(enabled) = enabled else {
            return Err(Problem {
                at: format!(".{name}"),
                expected: "true or false".to_owned(),
                got: Some(describe(&enabled)),
            });
        };
        gates.set(&name, enabled).map_err(|unknown| Problem {
            at: format!(".{name}"),
            expected: format!(
                "a feature gate that changes an admission verdict ({})",
                FeatureGates::KNOWN.join(", ")
            ),
            got: Some(unknown.name),
        })?;
    }
    Ok(gates)
}

/// Whether listening on `a` and on `b` at once fails: one port (not 0, which the system picks
/// afresh for each), on one address or with either unspecified (`0.0.0.0`, `::`).
fn collide(a: SocketAddr, b: SocketAddr) -> bool {
    a.port() != 0
        && a.port() == b.port()
        && (a.ip() == b.ip() || a.ip().is_unspecified() || b.ip().is_unspecified())
}
