//! The `execution.*` section: warm pools, source mode, how hook calls are supervised
//! (`execution.admission.*`), the hooks (`execution.admission.hooks`) and the webhook
//! (`execution.admission.webhook.*`, ADR 0100 §8).

use std::collections::{BTreeMap, HashMap};
use std::ops::RangeInclusive;
use std::time::Duration;

use serde_yaml_ng::{Mapping, Value};

use super::document::describe;
use super::keys::{
    ADMISSION_TIMEOUT, BREAKER_BACKOFF, BREAKER_FAILURES, BREAKER_MAX_BACKOFF, CHAIN_TIMEOUT,
    FAIL_OPEN, HOOKS, LEAVES, POLICY, SOURCE_MODE_ENABLED, SOURCE_MODE_IMAGE, WARM_POOLS, WEBHOOK,
    WEBHOOK_BEARER_TOKEN_FILE, WEBHOOK_CA_BUNDLE, WEBHOOK_CLIENT_CERT, WEBHOOK_CLIENT_KEY,
    WEBHOOK_FAIL_OPEN, WEBHOOK_TIMEOUT, WEBHOOK_URL,
};
use super::reader::Reader;
use super::{ConfigError, Key};
use crate::admission::{ChangeRules, Changes, label_value_problem};
use crate::dispatch::settings::{DEFAULT_WARM_POOLS, SourceMode};
use crate::hooks::{
    FreezeSpec, HookSpec, Matcher, POLICY_HOOK, ResourceGroup, SpecError, WebhookSpec,
};
use crate::supervise;

/// The values `execution.admission.breaker.failures` (and `loadtest --breaker-failures`) may
/// take.
pub(crate) const BREAKER_FAILURE_COUNTS: RangeInclusive<u64> = 1..=u32::MAX as u64;

/// The name of the webhook `execution.admission.webhook.url` declares, last in the chain.
const WEBHOOK_NAME: &str = "webhook";

impl Reader {
    pub(super) fn warm_pools(&mut self) -> bool {
        self.flag(WARM_POOLS, DEFAULT_WARM_POOLS)
    }

    pub(super) fn source_mode(&mut self) -> SourceMode {
        let defaults = SourceMode::default();
        let enabled = self.flag(SOURCE_MODE_ENABLED, defaults.enabled);
        let image = self.text(SOURCE_MODE_IMAGE, &defaults.image, |text| {
            (!text.is_empty() && !is_pinned_by_digest(text)).then(|| {
                "an image pinned by digest such as \"ghcr.io/acme/runtime@sha256:<64 hex digits>\""
                    .to_owned()
            })
        });
        self.check_source_mode_image(enabled, &image);
        SourceMode {
            enabled,
            image,
            ..defaults
        }
    }

    pub(super) fn supervise(&mut self) -> supervise::Settings {
        let defaults = supervise::Settings::default();
        let positive = Duration::from_nanos(1);
        let timeout = self.duration(ADMISSION_TIMEOUT, defaults.timeout, positive);
        let chain_timeout = self.duration(CHAIN_TIMEOUT, defaults.chain_timeout, positive);
        self.check_chain_timeout(timeout, chain_timeout);
        let fail_open = self.flag(FAIL_OPEN, defaults.fail_open);
        let failures = self.integer(
            BREAKER_FAILURES,
            u64::from(defaults.breaker.failures),
            BREAKER_FAILURE_COUNTS,
        );
        let backoff = self.duration(BREAKER_BACKOFF, defaults.breaker.backoff, positive);
        let max_backoff =
            self.duration(BREAKER_MAX_BACKOFF, defaults.breaker.max_backoff, positive);
        self.check_max_backoff(backoff, max_backoff);
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
            // Filled from the hooks' own declarations once they are read.
            hooks: BTreeMap::new(),
        }
    }

    /// The hooks in chain order, checked: those `execution.admission.hooks` lists, then the
    /// webhook `execution.admission.webhook.url` declares. A webhook's own timeout and fail-open
    /// go into `settings`.
    pub(super) fn hooks(
        &mut self,
        rules: &ChangeRules,
        settings: &mut supervise::Settings,
    ) -> Vec<HookSpec> {
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
            let parsed = serde_yaml_ng::from_value(item.clone()).or_else(|source| {
                // Serde stops at a declaration's first error: a placement group that does not
                // parse must not hide what is wrong with the others, so each group is read
                // alone, and the declaration is read again without the bad ones.
                match self.without_bad_groups(&item, index) {
                    Some(rest) => serde_yaml_ng::from_value(rest),
                    None => Err(source),
                }
            });
            let mut spec: HookSpec = match parsed {
                Ok(spec) => spec,
                Err(source) => {
                    // Serde stops at a freeze window's first problem: each is reported.
                    let problems = freeze_window_problems(&item);
                    if problems.is_empty() {
                        self.errors.push(ConfigError::Hook { key: key(), source });
                    } else {
                        self.errors
                            .extend(problems.into_iter().map(|problem| ConfigError::Hook {
                                key: key(),
                                source: serde::de::Error::custom(problem),
                            }));
                    }
                    continue;
                }
            };
            if let HookSpec::Webhook(webhook) = &mut spec {
                // Its files are the file's paths, as every path-valued key's are.
                for file in [
                    &mut webhook.ca_bundle,
                    &mut webhook.bearer_token_file,
                    &mut webhook.client_cert,
                    &mut webhook.client_key,
                ] {
                    *file = file.take().map(|path| self.resolve(path));
                }
            }
            let name = spec.name().to_owned();
            if name.trim().is_empty() {
                self.errors.push(ConfigError::Invalid {
                    key: name_key(),
                    expected: "a non-empty name".to_owned(),
                    got: format!("{name:?}"),
                });
            } else if name == POLICY_HOOK {
                self.errors.push(ConfigError::Invalid {
                    key: name_key(),
                    expected: format!("a name other than {POLICY_HOOK:?}, which is {POLICY}'s"),
                    got: format!("{name:?}"),
                });
            } else if let Some(problem) = label_value_problem(&name) {
                // Reasons and log lines embed the name; a label value is clean in both.
                self.errors.push(ConfigError::Invalid {
                    key: name_key(),
                    expected: format!(
                        "a name Kubernetes accepts as a label value, which {problem}"
                    ),
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
            if let HookSpec::Webhook(webhook) = &spec {
                let timeout_key = Key::file(format!("{HOOKS}[{index}].timeout"));
                self.own_settings(webhook, timeout_key, settings);
            }
            specs.push(spec);
        }
        let shown = serde_yaml_ng::to_value(&specs).unwrap_or(Value::Null);
        self.effective.insert(HOOKS, shown);
        if let Some(webhook) = self.webhook() {
            if let Some(first) = names.get(WEBHOOK_NAME) {
                self.errors.push(ConfigError::DuplicateHook {
                    key: self.named(WEBHOOK_URL),
                    name: WEBHOOK_NAME.to_owned(),
                    first: Key::file(format!("{HOOKS}[{first}].name")),
                });
            }
            if let Err(problems) = webhook.check() {
                self.errors
                    .extend(problems.into_iter().map(|source| ConfigError::HookRule {
                        key: Key::file(WEBHOOK),
                        source,
                    }));
            }
            let timeout_key = self.named(WEBHOOK_TIMEOUT);
            self.own_settings(&webhook, timeout_key, settings);
            specs.push(HookSpec::Webhook(webhook));
        }
        specs
    }

    /// The webhook `execution.admission.webhook.*` declares, named `webhook`: `None` without a
    /// URL, and an error for each of its other keys set without one.
    fn webhook(&mut self) -> Option<WebhookSpec> {
        let url = self.text(WEBHOOK_URL, "", |_| None);
        let ca_bundle = self.path(WEBHOOK_CA_BUNDLE, "a file path");
        let bearer_token_file = self.path(WEBHOOK_BEARER_TOKEN_FILE, "a file path");
        let client_cert = self.path(WEBHOOK_CLIENT_CERT, "a file path");
        let client_key = self.path(WEBHOOK_CLIENT_KEY, "a file path");
        let example = supervise::Settings::default().timeout;
        let timeout = self.optional_duration(WEBHOOK_TIMEOUT, example, Duration::from_nanos(1));
        let fail_open = self.optional_flag(WEBHOOK_FAIL_OPEN);
        if url.trim().is_empty() {
            if self.is_bad(WEBHOOK_URL) {
                return None;
            }
            // Any other key of the section, as the key table lists them.
            if let Some(other) = LEAVES
                .iter()
                .filter(|key| {
                    key.strip_prefix(WEBHOOK)
                        .is_some_and(|field| field.starts_with('.'))
                        && **key != WEBHOOK_URL
                })
                .find(|key| self.found.get(*key).is_some_and(|raw| !raw.value.is_null()))
            {
                self.errors.push(ConfigError::Required {
                    key: self.named(WEBHOOK_URL),
                    when: format!("{} is set", self.named(other)),
                });
            }
            return None;
        }
        Some(WebhookSpec {
            name: WEBHOOK_NAME.to_owned(),
            url,
            ca_bundle,
            bearer_token_file,
            client_cert,
            client_key,
            timeout,
            fail_open,
        })
    }

    /// Records a webhook's own `timeout` and `fail_open` in `settings`. A timeout longer than
    /// the chain budget, which would cut every slow call short of it, is an error naming
    /// `timeout_key`.
    fn own_settings(
        &mut self,
        webhook: &WebhookSpec,
        timeout_key: Key,
        settings: &mut supervise::Settings,
    ) {
        if let Some(timeout) = webhook.timeout {
            if timeout > settings.chain_timeout && !self.is_bad(CHAIN_TIMEOUT) {
                self.errors.push(ConfigError::Invalid {
                    key: timeout_key,
                    expected: format!(
                        "a duration of at most {CHAIN_TIMEOUT} ({})",
                        humantime::format_duration(settings.chain_timeout)
                    ),
                    got: format!("{:?}", humantime::format_duration(timeout).to_string()),
                });
            }
        }
        if webhook.timeout.is_some() || webhook.fail_open.is_some() {
            settings.hooks.insert(
                webhook.name.clone(),
                supervise::HookSettings {
                    timeout: webhook.timeout,
                    fail_open: webhook.fail_open,
                },
            );
        }
    }

    /// Reports every group of the placement hook `item` (at `index`) that does not parse, its
    /// `match` and `set` each on their own, and gives the declaration with each bad part emptied
    /// (an empty group, `match` or `set` is valid and changes nothing), or `None` when no group
    /// is bad.
    fn without_bad_groups(&mut self, item: &Value, index: usize) -> Option<Value> {
        let Value::Mapping(spec) = item else {
            return None;
        };
        if spec.get("type").and_then(Value::as_str) != Some("placement") {
            return None;
        }
        let Some(Value::Sequence(groups)) = spec.get("groups") else {
            return None;
        };
        let mut groups = groups.clone();
        let mut found = false;
        for (number, group) in groups.iter_mut().enumerate() {
            if serde_yaml_ng::from_value::<ResourceGroup>(group.clone()).is_ok() {
                continue;
            }
            found = true;
            let at = |part: &str| Key::file(format!("{HOOKS}[{index}].groups[{number}]{part}"));
            if let Value::Mapping(fields) = group {
                if let Some(matcher) = fields.get_mut("match") {
                    if let Err(source) = serde_yaml_ng::from_value::<Matcher>(matcher.clone()) {
                        self.errors.push(ConfigError::Hook {
                            key: at(".match"),
                            source,
                        });
                        *matcher = Value::Mapping(Mapping::new());
                    }
                }
                if let Some(set) = fields.get_mut("set") {
                    if let Err(source) = serde_yaml_ng::from_value::<Changes>(set.clone()) {
                        self.errors.push(ConfigError::Hook {
                            key: at(".set"),
                            source,
                        });
                        *set = Value::Mapping(Mapping::new());
                    }
                }
            }
            // What is left wrong is the group's own (a field it does not have, not a mapping).
            if let Err(source) = serde_yaml_ng::from_value::<ResourceGroup>(group.clone()) {
                self.errors.push(ConfigError::Hook {
                    key: at(""),
                    source,
                });
                *group = Value::Mapping(Mapping::new());
            }
        }
        let mut spec = spec.clone();
        spec.insert(Value::from("groups"), Value::Sequence(groups));
        found.then_some(Value::Mapping(spec))
    }
}

/// Every problem with the window of `item` when it declares a freeze whose fields are all of
/// the right shape; empty otherwise (its problem is then the one serde reported).
fn freeze_window_problems(item: &Value) -> Vec<SpecError> {
    let Value::Mapping(declaration) = item else {
        return Vec::new();
    };
    if declaration.get("type").and_then(Value::as_str) != Some("freeze") {
        return Vec::new();
    }
    let mut fields = declaration.clone();
    fields.shift_remove("type");
    FreezeSpec::window_problems(Value::Mapping(fields)).unwrap_or_default()
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
