//! The YAML reader: a leaf's raw value and where it came from, and the typed reading primitives
//! (integer, flag, duration, text, quantity, list) that report a bad value against its key and
//! go on reading.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::RangeInclusive;
use std::time::Duration;

use serde_yaml_ng::Value;

use super::keys::{LEAVES, NO_ENV, env_name, is_section};
use super::{ConfigError, Key};
use crate::admission::parse_milli;

/// A leaf's value and where it came from.
#[derive(Debug, Clone)]
pub(super) struct Raw {
    pub(super) value: Value,
    /// The variable, when the value came from the environment (always a string then).
    pub(super) env: Option<String>,
}

/// Why a leaf's value is bad: turned into [`ConfigError::Invalid`] with the key.
pub(super) struct Problem {
    /// Appended to the key, such as `[2]` for a list item.
    pub(super) at: String,
    pub(super) expected: String,
    /// What to show instead of the value itself.
    pub(super) got: Option<String>,
}

pub(super) fn expected(what: impl Into<String>) -> Problem {
    Problem {
        at: String::new(),
        expected: what.into(),
        got: None,
    }
}

/// How a value is shown after `got`: text quoted, other scalars as written, collections by kind.
pub(super) fn describe(value: &Value) -> String {
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
pub(super) struct Reader {
    pub(super) found: BTreeMap<&'static str, Raw>,
    pub(super) errors: Vec<ConfigError>,
    /// Leaves whose value was bad; rules across keys skip them, so that one typo is reported once.
    pub(super) bad: BTreeSet<&'static str>,
    pub(super) effective: BTreeMap<&'static str, Value>,
}

impl Reader {
    /// Finds every leaf under `value`, the section at `path`, and reports unknown keys.
    pub(super) fn walk(&mut self, value: &Value, path: &str) {
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
            } else if let Some(leaf) = LEAVES.iter().find(|leaf| **leaf == child_path) {
                self.found.insert(
                    leaf,
                    Raw {
                        value: child.clone(),
                        env: None,
                    },
                );
            } else if is_section(&child_path) {
                self.walk(child, &child_path);
            } else {
                self.errors.push(ConfigError::UnknownKey {
                    key: Key::file(child_path),
                });
            }
        }
    }

    /// Takes each leaf's variable from `env` (the `DEXAFLOW_` variables only), over the file.
    pub(super) fn read_env(&mut self, env: &HashMap<String, String>) {
        for key in LEAVES.iter().filter(|key| !NO_ENV.contains(key)) {
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
    pub(super) fn get<T>(
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
    pub(super) fn reject(&mut self, key: &'static str, expected: String, got: String) {
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

    pub(super) fn is_bad(&self, key: &str) -> bool {
        self.bad.contains(key)
    }

    pub(super) fn integer(
        &mut self,
        key: &'static str,
        default: u64,
        range: RangeInclusive<u64>,
    ) -> u64 {
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

    pub(super) fn flag(&mut self, key: &'static str, default: bool) -> bool {
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
    pub(super) fn duration(
        &mut self,
        key: &'static str,
        default: Duration,
        min: Duration,
    ) -> Duration {
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
    pub(super) fn text(
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
    pub(super) fn quantity(&mut self, key: &'static str, positive: bool) -> Option<(String, u128)> {
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
    pub(super) fn list(&mut self, key: &'static str) -> Option<Vec<String>> {
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
}

/// A list of non-empty text: a YAML list in the file, comma-separated in the environment.
pub(super) fn parse_list(raw: &Raw) -> Result<Vec<String>, Problem> {
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
