//! The YAML reader: a leaf's raw value and where it came from, and the typed reading primitives
//! (integer, flag, duration, text, quantity, list) that report a bad value against its key and
//! go on reading.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::net::SocketAddr;
use std::num::IntErrorKind;
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_yaml_ng::Value;

use super::document::{big_integer_digits, describe, kind};
use super::keys::{
    ENV_PREFIX, LEAVES, file_only_key, is_secret, is_section, may_hold_secret, nearest_variable,
    non_config_variables, variables,
};
use super::validate::{self, Mismatch};
use super::{ConfigError, Key};
use crate::admission::{self, escape_controls, parse_milli};

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

/// The problem a rule of [`super::validate`] found, for the key being read.
fn mismatch(mismatch: Mismatch) -> Problem {
    Problem {
        at: String::new(),
        expected: mismatch.expected,
        got: Some(mismatch.got),
    }
}

pub(super) fn expected(what: impl Into<String>) -> Problem {
    Problem {
        at: String::new(),
        expected: what.into(),
        got: None,
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
    /// The config file's directory, which a relative path in the file is resolved against;
    /// `None` for a text that is no file (the embedded default), read from the working
    /// directory.
    pub(super) base: Option<PathBuf>,
}

impl Reader {
    /// Finds every leaf under `value`, the section at `path`, and reports unknown keys.
    pub(super) fn walk(&mut self, value: &Value, path: &str) {
        let mapping = match value {
            Value::Mapping(mapping) => mapping,
            Value::Null => return,
            other => {
                let got = if may_hold_secret(path) {
                    kind(other).to_owned()
                } else {
                    describe(other)
                };
                self.errors.push(ConfigError::Invalid {
                    key: Key::file(path),
                    expected: "a mapping".to_owned(),
                    got,
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

    /// Takes each key's variable from `env`, over the file, and reports every other `DEXAFLOW_`
    /// variable that is not documented ([`non_config_variables`]).
    ///
    /// Variables outside `DEXAFLOW_` are never looked at, so bytes that are not UTF-8 there do
    /// not matter; a value is never shown, since a variable may carry a secret.
    pub(super) fn read_env<K, V>(&mut self, env: impl IntoIterator<Item = (K, V)>)
    where
        K: Into<OsString>,
        V: Into<OsString>,
    {
        let variables: BTreeMap<String, &'static str> = variables().collect();
        // Sorted, so that errors come in the same order whatever order the process had.
        let mut ours = BTreeMap::new();
        for (name, value) in env {
            let name = name.into();
            let shown = name.to_string_lossy().into_owned();
            if shown.starts_with(ENV_PREFIX) {
                ours.insert(shown, (name.into_string().is_ok(), value.into()));
            }
        }
        for (name, (name_is_utf8, value)) in ours {
            let key = variables.get(&name).filter(|_| name_is_utf8);
            if let Some(&key) = key {
                match value.into_string() {
                    Ok(text) => {
                        self.found.insert(
                            key,
                            Raw {
                                value: Value::String(text),
                                env: Some(name),
                            },
                        );
                    }
                    Err(_) => {
                        self.errors.push(ConfigError::Invalid {
                            key: Key {
                                path: key.to_owned(),
                                env: Some(name),
                            },
                            expected: "UTF-8 text".to_owned(),
                            got: "bytes that are not UTF-8 (not shown)".to_owned(),
                        });
                        self.bad.insert(key);
                    }
                }
            } else if name_is_utf8 && non_config_variables().any(|known| known == name) {
                // Documented and not read here: its value, UTF-8 or not, is not ours to judge.
            } else if let Some(key) = file_only_key(&name) {
                self.errors.push(ConfigError::FileOnly {
                    variable: name,
                    key,
                });
            } else {
                // The name is the environment's, any bytes at all: escaped, so that no
                // escape sequence reaches the terminal.
                self.errors.push(ConfigError::UnknownVariable {
                    nearest: nearest_variable(&name),
                    variable: escape_controls(&name).into_owned(),
                });
            }
        }
    }

    /// `key` as an error names it: with its variable when its value came from one.
    pub(super) fn named(&self, key: &str) -> Key {
        Key {
            path: key.to_owned(),
            env: self.found.get(key).and_then(|raw| raw.env.clone()),
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
                    let got = problem.got.unwrap_or_else(|| {
                        if is_secret(key) {
                            kind(&raw.value).to_owned()
                        } else {
                            describe(&raw.value)
                        }
                    });
                    self.errors.push(ConfigError::Invalid {
                        key: Key {
                            path: format!("{key}{}", problem.at),
                            env: raw.env.clone(),
                        },
                        expected: problem.expected,
                        got,
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
        self.errors.push(ConfigError::Invalid {
            key: self.named(key),
            expected,
            got,
        });
        self.bad.insert(key);
    }

    pub(super) fn is_bad(&self, key: &str) -> bool {
        self.bad.contains(key)
    }

    /// An integer in `range`; one above it, or too large for 64 bits, is said to be too large.
    pub(super) fn integer(
        &mut self,
        key: &'static str,
        default: u64,
        range: RangeInclusive<u64>,
    ) -> u64 {
        self.get(
            key,
            default,
            |raw| parse_integer(raw, &range),
            |number| Value::from(*number),
        )
    }

    /// An integer in `range` whose absence means "as the machine says": `None` when unset.
    pub(super) fn optional_integer(
        &mut self,
        key: &'static str,
        range: RangeInclusive<u64>,
    ) -> Option<u64> {
        self.get(
            key,
            None,
            |raw| parse_integer(raw, &range).map(Some),
            |number| number.map_or(Value::Null, Value::from),
        )
    }

    pub(super) fn flag(&mut self, key: &'static str, default: bool) -> bool {
        self.get(key, default, parse_flag, |flag| Value::Bool(*flag))
    }

    /// A flag whose absence means "as another setting": `None` when unset.
    pub(super) fn optional_flag(&mut self, key: &'static str) -> Option<bool> {
        self.get(
            key,
            None,
            |raw| parse_flag(raw).map(Some),
            |flag| flag.map_or(Value::Null, Value::Bool),
        )
    }

    /// A duration of at least `min` (`Duration::ZERO` for any, one nanosecond for positive).
    pub(super) fn duration(
        &mut self,
        key: &'static str,
        default: Duration,
        min: Duration,
    ) -> Duration {
        self.get(
            key,
            default,
            |raw| parse_duration(raw, default, min),
            |duration| show_duration(*duration),
        )
    }

    /// A duration whose absence means "as another setting", `example` (shown in an error);
    /// `None` when unset.
    pub(super) fn optional_duration(
        &mut self,
        key: &'static str,
        example: Duration,
        min: Duration,
    ) -> Option<Duration> {
        self.get(
            key,
            None,
            |raw| parse_duration(raw, example, min).map(Some),
            |duration| duration.map_or(Value::Null, show_duration),
        )
    }

    /// A path, `what` as an error says it ("a file path"); `None` when unset.
    pub(super) fn path(&mut self, key: &'static str, what: &str) -> Option<PathBuf> {
        self.path_or(key, what, None)
    }

    /// A path, `what` as an error says it ("a directory path"); `default` when unset.
    ///
    /// A relative path from the file is resolved against the file's directory
    /// ([`Reader::resolve`]); one from the environment, or the default, is left as it is, relative
    /// to the working directory. The effective config shows each path absolute, so that a copy
    /// of it saved elsewhere means the same.
    pub(super) fn path_or(
        &mut self,
        key: &'static str,
        what: &str,
        default: Option<PathBuf>,
    ) -> Option<PathBuf> {
        let base = self.base.clone();
        self.get(
            key,
            default,
            |raw| match raw.value.as_str() {
                Some(text) if !text.trim().is_empty() => {
                    let path = PathBuf::from(text);
                    Ok(Some(match raw.env {
                        Some(_) => path,
                        None => resolve(base.as_deref(), path),
                    }))
                }
                _ => Err(expected(what)),
            },
            |path| {
                path.as_ref().map_or(Value::Null, |path| {
                    let shown = std::path::absolute(path).unwrap_or_else(|_| path.clone());
                    Value::String(shown.display().to_string())
                })
            },
        )
    }

    /// `path`, written in the file, resolved against the file's directory when it is relative.
    pub(super) fn resolve(&self, path: PathBuf) -> PathBuf {
        resolve(self.base.as_deref(), path)
    }

    /// A socket address (`host:port`); `default` when unset.
    pub(super) fn address(
        &mut self,
        key: &'static str,
        default: Option<SocketAddr>,
    ) -> Option<SocketAddr> {
        self.get(
            key,
            default,
            |raw| {
                raw.value
                    .as_str()
                    .and_then(|text| text.trim().parse().ok())
                    .map(Some)
                    .ok_or_else(|| {
                        // The key's own default is the example, where it has one.
                        let example =
                            default.map_or("127.0.0.1:8080".to_owned(), |a| a.to_string());
                        expected(format!("an address such as \"{example}\""))
                    })
            },
            |address| address.map_or(Value::Null, |address| Value::String(address.to_string())),
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
            |list| list.as_deref().map_or(Value::Null, show_list),
        )
    }

    /// [`Reader::list`] for a key whose absence means `default`: the effective config shows
    /// the list in use, never `null`.
    pub(super) fn list_or(&mut self, key: &'static str, default: Vec<String>) -> Vec<String> {
        self.get(key, default, parse_list, |items| show_list(items))
    }
}

/// A list of text as the effective config shows it.
fn show_list(items: &[String]) -> Value {
    Value::Sequence(items.iter().cloned().map(Value::String).collect())
}

/// `path` resolved against `base` when it is relative and there is a base.
fn resolve(base: Option<&Path>, path: PathBuf) -> PathBuf {
    match base {
        Some(base) if path.is_relative() => base.join(path),
        _ => path,
    }
}

/// `raw` as an integer in `range`; one above it, or too large for 64 bits, is said to be too
/// large.
fn parse_integer(raw: &Raw, range: &RangeInclusive<u64>) -> Result<u64, Problem> {
    let too_large = || mismatch(validate::too_large(&describe(&raw.value), range));
    let number = match (&raw.value, &raw.env) {
        (Value::Number(number), _) => number.as_u64(),
        (Value::String(text), Some(_)) => match text.trim().parse::<u64>() {
            Ok(number) => Some(number),
            Err(error) if *error.kind() == IntErrorKind::PosOverflow => {
                return Err(too_large());
            }
            Err(_) => None,
        },
        (value, _) => match big_integer_digits(value) {
            Some(digits) if !digits.starts_with('-') => return Err(too_large()),
            _ => None,
        },
    };
    match number {
        Some(number) => {
            validate::integer_in(number, &describe(&raw.value), range).map_err(mismatch)
        }
        None => Err(expected(validate::integers(range))),
    }
}

fn parse_flag(raw: &Raw) -> Result<bool, Problem> {
    match (&raw.value, &raw.env) {
        (Value::Bool(flag), _) => Ok(*flag),
        (Value::String(text), Some(_)) if text == "true" => Ok(true),
        (Value::String(text), Some(_)) if text == "false" => Ok(false),
        _ => Err(expected("true or false")),
    }
}

/// A duration of at least `min`; an error shows `example`.
fn parse_duration(raw: &Raw, example: Duration, min: Duration) -> Result<Duration, Problem> {
    let parsed = raw.value.as_str().map(admission::parse_duration);
    let Some(Ok(duration)) = parsed else {
        let mut problem = expected(format!(
            "a duration such as {:?}",
            humantime::format_duration(example).to_string()
        ));
        if let Some(Err(reason)) = parsed {
            problem.got = Some(reason.explained(describe(&raw.value)));
        }
        return Err(problem);
    };
    validate::duration_at_least(duration, min, example, &describe(&raw.value)).map_err(mismatch)
}

fn show_duration(duration: Duration) -> Value {
    Value::String(humantime::format_duration(duration).to_string())
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

/// A count read within a maximum that is itself a `usize`.
pub(super) fn to_usize(number: u64) -> usize {
    usize::try_from(number).expect("read within a maximum that is a usize")
}

/// A maximum that is a `usize`, as the integer reader takes it.
pub(super) fn as_u64(number: usize) -> u64 {
    u64::try_from(number).expect("the maxima fit in 64 bits")
}
