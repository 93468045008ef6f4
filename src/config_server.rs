//! The `server` section: the settings of `serve` ([`crate::serve::Settings`]), read from the
//! same file as the rest of the config, which the other commands ignore.
//!
//! | key | default |
//! |---|---|
//! | `server.listen` | `127.0.0.1:8443` |
//! | `server.probe_listen` | none: no probe listener |
//! | `server.tls.cert_file`, `server.tls.key_file` | required |
//! | `server.tls.client_ca_file` | none: no client certificate asked |
//! | `server.auth.bearer_token_file` | none |
//! | `server.max_body_bytes` | 3145728 (3 MiB) |
//! | `server.enabled_admission` | every service |
//! | `server.resource_groups_file` | none: pods are not changed |
//! | `server.scheduler_names` | `[volcano]` |
//! | `server.trusted_users` | none |
//! | `server.http2` | `false` |
//! | `server.shutdown_grace` | `15s` |
//!
//! Each has a `DEXAFLOW_` variable like every other key (`DEXAFLOW_SERVER_LISTEN`); lists are
//! comma-separated there, and `server.enabled_admission` may be written so in the file too.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_yaml_ng::Value;

use super::{
    Config, ConfigError, ConfigErrors, Key, Problem, Raw, Reader, describe, expected, prepare, read,
};
use crate::serve::{self, TlsFiles};

/// The section `serve` reads, and every other command skips.
pub const SERVER: &str = "server";

const LISTEN: &str = "server.listen";
const PROBE_LISTEN: &str = "server.probe_listen";
const CERT_FILE: &str = "server.tls.cert_file";
const KEY_FILE: &str = "server.tls.key_file";
const CLIENT_CA_FILE: &str = "server.tls.client_ca_file";
const BEARER_TOKEN_FILE: &str = "server.auth.bearer_token_file";
const MAX_BODY_BYTES: &str = "server.max_body_bytes";
const ENABLED_ADMISSION: &str = "server.enabled_admission";
const RESOURCE_GROUPS_FILE: &str = "server.resource_groups_file";
const SCHEDULER_NAMES: &str = "server.scheduler_names";
const TRUSTED_USERS: &str = "server.trusted_users";
const HTTP2: &str = "server.http2";
const SHUTDOWN_GRACE: &str = "server.shutdown_grace";

/// Every leaf of the section.
const SERVER_LEAVES: &[&str] = &[
    LISTEN,
    PROBE_LISTEN,
    CERT_FILE,
    KEY_FILE,
    CLIENT_CA_FILE,
    BEARER_TOKEN_FILE,
    MAX_BODY_BYTES,
    ENABLED_ADMISSION,
    RESOURCE_GROUPS_FILE,
    SCHEDULER_NAMES,
    TRUSTED_USERS,
    HTTP2,
    SHUTDOWN_GRACE,
];

/// Reads the config file at `path` once, for `serve`: the whole config as
/// [`Config::load`] reads it (for `metrics.listen`), and the `server` section.
///
/// # Errors
/// [`ConfigErrors`] with every problem of both, each naming its key.
pub fn load_with_server(
    path: &Path,
    env: impl IntoIterator<Item = (String, String)>,
) -> Result<(Config, serve::Settings), ConfigErrors> {
    let (root, env) = prepare(&path.display().to_string(), &read(path)?, env)?;
    let config = Config::from_root(&root, &env);
    let server = server_settings(&root, &env);
    match (config, server) {
        (Ok(config), Ok(server)) => Ok((config, server)),
        (config, server) => {
            let mut errors = Vec::new();
            errors.extend(config.err().map(|errors| errors.errors).unwrap_or_default());
            errors.extend(server.err().unwrap_or_default());
            Err(ConfigErrors { errors })
        }
    }
}

/// The `server` section of `root`, with the variables of `env` over it.
fn server_settings(
    root: &Value,
    env: &HashMap<String, String>,
) -> Result<serve::Settings, Vec<ConfigError>> {
    let mut reader = Reader::default();
    if let Some(section) = root.get(SERVER) {
        reader.walk(section, SERVER, SERVER_LEAVES);
    }
    reader.override_from(SERVER_LEAVES.iter(), env);

    let listen = reader.address(LISTEN, Some(serve::Settings::DEFAULT_LISTEN));
    let probe_listen = reader.address(PROBE_LISTEN, None);
    let cert_file = reader.path(CERT_FILE);
    let key_file = reader.path(KEY_FILE);
    let client_ca_file = reader.path(CLIENT_CA_FILE);
    let bearer_token_file = reader.path(BEARER_TOKEN_FILE);
    let max_body_bytes = reader.integer(
        MAX_BODY_BYTES,
        serve::Settings::DEFAULT_MAX_BODY_BYTES as u64,
        1..=u64::from(u32::MAX),
    );
    let enabled_admission = reader.get(
        ENABLED_ADMISSION,
        None,
        parse_enabled,
        |paths| match paths {
            Some(paths) => Value::Sequence(paths.iter().cloned().map(Value::String).collect()),
            None => Value::Null,
        },
    );
    let resource_groups_file = reader.path(RESOURCE_GROUPS_FILE);
    let scheduler_names = reader
        .list(SCHEDULER_NAMES)
        .unwrap_or_else(|| vec![serve::Settings::DEFAULT_SCHEDULER_NAME.to_owned()]);
    let trusted_users = reader.list(TRUSTED_USERS).unwrap_or_default();
    let http2 = reader.flag(HTTP2, false);
    let shutdown_grace = reader.duration(
        SHUTDOWN_GRACE,
        serve::Settings::DEFAULT_SHUTDOWN_GRACE,
        Duration::ZERO,
    );
    for (key, file) in [(CERT_FILE, &cert_file), (KEY_FILE, &key_file)] {
        if file.is_none() && !reader.is_bad(key) {
            reader.errors.push(ConfigError::Required {
                key: Key::file(key),
                when: "serving (the PEM file of the serving certificate or its key)".to_owned(),
            });
        }
    }
    let (Some(cert_file), Some(key_file)) = (cert_file, key_file) else {
        return Err(reader.errors);
    };
    if !reader.errors.is_empty() {
        return Err(reader.errors);
    }
    Ok(serve::Settings {
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
    })
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
    Ok(Some(paths))
}

impl Reader {
    /// A socket address; `default` when unset.
    fn address(&mut self, key: &'static str, default: Option<SocketAddr>) -> Option<SocketAddr> {
        self.get(
            key,
            default,
            |raw| {
                raw.value
                    .as_str()
                    .and_then(|text| text.trim().parse().ok())
                    .map(Some)
                    .ok_or_else(|| expected("an address such as \"127.0.0.1:8443\""))
            },
            |address| address.map_or(Value::Null, |address| Value::String(address.to_string())),
        )
    }

    /// A file path; `None` when unset.
    fn path(&mut self, key: &'static str) -> Option<PathBuf> {
        self.get(
            key,
            None,
            |raw| match raw.value.as_str().map(str::trim) {
                Some(text) if !text.is_empty() => Ok(Some(PathBuf::from(text))),
                _ => Err(expected("a file path")),
            },
            |path| {
                path.as_ref().map_or(Value::Null, |path| {
                    Value::String(path.display().to_string())
                })
            },
        )
    }
}
