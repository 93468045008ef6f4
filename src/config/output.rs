//! The effective config as YAML, for `check-config`.

use serde_yaml_ng::{Mapping, Value};

use super::keys::{LEAVES, METRICS_LISTEN, TOKEN_SECRET};
use super::{BATCH_LISTEN, Config};
use crate::metrics::DEFAULT_LISTEN;

impl Config {
    /// The config as loaded, defaults and overrides applied, as YAML in the file's key layout,
    /// for `check-config`.
    ///
    /// `auth.agent_token_secret` is never shown: a comment says whether it was set. An unset
    /// `metrics.listen` is shown as `null`, with a comment saying where each command that reads
    /// it listens then, since `serve` and `dispatch` do not listen on the same address.
    pub fn to_yaml(&self) -> String {
        let mut root = Mapping::new();
        for key in LEAVES {
            if let Some(value) = self.effective.get(key) {
                let value = if *key == METRICS_LISTEN && !self.metrics_listen_is_set {
                    Value::Null
                } else {
                    value.clone()
                };
                insert_nested(&mut root, key, value);
            }
        }
        let body = serde_yaml_ng::to_string(&Value::Mapping(root))
            .expect("a mapping of strings, numbers, booleans and lists always serializes");
        let secret = if self.secret_is_set {
            "is set (not shown)"
        } else {
            "is not set: a random secret is generated for this process"
        };
        let listen = if self.metrics_listen_is_set {
            String::new()
        } else {
            format!(
                "# {METRICS_LISTEN} is not set: serve listens on {DEFAULT_LISTEN}, dispatch on a free port of {}\n",
                BATCH_LISTEN.ip()
            )
        };
        format!("# {TOKEN_SECRET} {secret}\n{listen}{body}")
    }
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
