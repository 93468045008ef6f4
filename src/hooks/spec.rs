//! A hook as config declares it, and turning the declarations into hooks.

use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::admission::{
    Chain, ChangeError, ChangeRules, DurationError, Hook, deserialize_strictly,
};

use super::{
    Clock, Deny, DenySpec, Freeze, FreezeSpec, Placement, PlacementSpec, Policy, PolicySpec,
    SystemClock, Webhook, WebhookSpec,
};

/// One hook as `execution.admission.hooks` declares it, tagged by `type`.
///
/// ```
/// use dexaflow_admission::hooks::HookSpec;
///
/// let spec: HookSpec = serde_yaml_ng::from_str(
///     "type: deny\nname: suspended\nmatch: {tenants: [umbrella]}\nreason: unpaid invoices\n",
/// )
/// .unwrap();
/// assert_eq!(spec.name(), "suspended");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
// Each variant is read from what serde buffered to find its `type`, where a struct would also
// be taken from a list of its fields (`match: [[gpu-lab]]` as `match: {tenants: [gpu-lab]}`).
pub enum HookSpec {
    /// Resource groups that set placement fields ([`Placement`]).
    #[serde(deserialize_with = "deserialize_strictly")]
    Placement(PlacementSpec),
    /// A hold during a time window ([`Freeze`]).
    #[serde(deserialize_with = "deserialize_strictly")]
    Freeze(FreezeSpec),
    /// A refusal on a match ([`Deny`]).
    #[serde(deserialize_with = "deserialize_strictly")]
    Deny(DenySpec),
    /// An HTTPS endpoint that decides ([`Webhook`], ADR 0100 §8).
    #[serde(deserialize_with = "deserialize_strictly")]
    Webhook(WebhookSpec),
}

/// Why a hook declaration cannot become a hook. The text names the field inside the
/// declaration; the config error around it names the declaration.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SpecError {
    /// A duration that does not parse.
    #[error("{field}: expected a duration such as \"5s\", got {}", reason.explained(format!("{value:?}")))]
    InvalidDuration {
        /// `after`, `for` or `timeout`.
        field: &'static str,
        /// The text.
        value: String,
        /// Why it is no duration.
        reason: DurationError,
    },
    /// A timestamp that does not parse.
    #[error(
        "{field}: expected an RFC 3339 UTC timestamp such as \"2026-12-31T18:00:00Z\", got {value:?}"
    )]
    InvalidTimestamp {
        /// `from` or `until`.
        field: &'static str,
        /// The text.
        value: String,
    },
    /// A freeze that sets both a relative and an absolute window.
    #[error("a freeze takes either after and for, or from and until, not both")]
    MixedWindow,
    /// A freeze without an end.
    #[error("a freeze needs for (after boot) or until (a timestamp)")]
    NoWindowEnd,
    /// A relative freeze of no length.
    #[error("for: must be above 0s")]
    ZeroLength,
    /// An absolute freeze that ends before it starts.
    #[error("until: must be after from")]
    EmptyWindow,
    /// A deny hook whose matcher selects every attempt.
    #[error("match: a deny hook needs at least one criterion")]
    EmptyMatch,
    /// A placement hook without groups.
    #[error("groups: a placement hook needs at least one group")]
    NoGroups,
    /// A placement group whose changes the chain would refuse on every attempt.
    #[error("groups[{group}].set: {problem}")]
    InvalidChange {
        /// The group's position.
        group: usize,
        /// The rule it breaks.
        problem: ChangeError,
    },
    /// A webhook URL that is not an absolute `http` or `https` URL with a host.
    #[error(
        "url: expected an absolute URL such as \"https://admission.example.com/admit\", got {url:?}"
    )]
    InvalidUrl {
        /// The URL.
        url: String,
    },
    /// A webhook URL with a user or password in it, which would be sent to no one and shown
    /// everywhere the URL is: it is never shown.
    #[error("url: must not carry a user or password (use bearer_token_file)")]
    UrlCredentials,
    /// A webhook URL with a `timeout` query parameter, which every call sets to its own
    /// deadline: a second one would tell the server another deadline (a Go server reads the
    /// first).
    #[error(
        "url: must not carry a timeout parameter: each call adds ?timeout= with its own deadline, got {url:?}"
    )]
    UrlTimeout {
        /// The URL as configured.
        url: String,
    },
    /// A plain `http` webhook URL to a host that is not loopback: the request carries tenant and
    /// DAG names and the task's execution fields (ADR 0100, consequences).
    #[error(
        "url: must be https unless its host is loopback (127.0.0.0/8, ::1 or localhost), got {url:?}"
    )]
    InsecureUrl {
        /// The URL.
        url: String,
    },
    /// A webhook timeout of zero.
    #[error("timeout: must be above 0s")]
    ZeroTimeout,
    /// A file a webhook reads that cannot be read or does not hold what it must.
    // The cause is kept as text: specs and their errors are compared and cloned, which an
    // `io::Error` cannot be.
    #[error("{field}: {}: {problem}", path.display())]
    File {
        /// `ca_bundle`, `bearer_token_file`, `client_cert` or `client_key`.
        field: &'static str,
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        problem: String,
    },
    /// `client_cert` without `client_key`, or the other way round.
    #[error("client_cert and client_key: set both for mutual TLS, or neither")]
    ClientAuthHalf,
    /// A client key that does not fit its certificate, or that rustls cannot use.
    #[error("client_key: cannot be used with client_cert: {problem}")]
    ClientAuth {
        /// What rustls said.
        problem: String,
    },
    /// An https webhook without a `ca_bundle` on a system that has no root certificates.
    #[error("ca_bundle: required, since no system root certificates were found")]
    NoRoots,
    /// A matcher criterion naming a label or annotation Kubernetes would reject, which no
    /// attempt can carry ([`super::Matcher::problems`]).
    #[error("{}match: {problem}", group.map(|group| format!("groups[{group}].")).unwrap_or_default())]
    InvalidMatch {
        /// The placement group's position; `None` for a deny hook's own `match`.
        group: Option<usize>,
        /// What is wrong with the criterion.
        problem: ChangeError,
    },
}

impl HookSpec {
    /// The hook's name, as reasons and logs show it.
    pub fn name(&self) -> &str {
        match self {
            HookSpec::Placement(spec) => &spec.name,
            HookSpec::Freeze(spec) => &spec.name,
            HookSpec::Deny(spec) => &spec.name,
            HookSpec::Webhook(spec) => &spec.name,
        }
    }

    /// Checks what deserializing cannot, against the install's `rules` for changes, so that a
    /// hook that would misbehave on every attempt fails at boot.
    ///
    /// # Errors
    /// Every [`SpecError`] found, not only the first: every bad change of every group, and every
    /// matcher criterion Kubernetes would reject.
    pub fn check(&self, rules: &ChangeRules) -> Result<(), Vec<SpecError>> {
        match self {
            HookSpec::Placement(spec) => spec.check(rules),
            // A freeze's window was checked while it was deserialized.
            HookSpec::Freeze(_) => Ok(()),
            HookSpec::Deny(spec) => {
                let mut problems = spec.check().err().unwrap_or_default();
                problems.extend(spec.matcher.problems().into_iter().map(|problem| {
                    SpecError::InvalidMatch {
                        group: None,
                        problem,
                    }
                }));
                if problems.is_empty() {
                    Ok(())
                } else {
                    Err(problems)
                }
            }
            HookSpec::Webhook(spec) => spec.check(),
        }
    }

    /// The hook this declaration describes, reading wall-clock time from `clock`.
    pub fn build(&self, clock: Arc<dyn Clock>) -> Arc<dyn Hook> {
        match self {
            HookSpec::Placement(spec) => Arc::new(Placement::new(spec)),
            HookSpec::Freeze(spec) => Arc::new(Freeze::new(spec, clock)),
            HookSpec::Deny(spec) => Arc::new(Deny::new(spec)),
            HookSpec::Webhook(spec) => Arc::new(Webhook::from_spec(spec)),
        }
    }
}

/// The hooks `specs` declare, in the same order, on the system clock.
///
/// Relative freeze windows start counting when this is called, so call it once at boot. The
/// specs are expected to have passed [`HookSpec::check`], as `Config` does; a webhook whose files
/// can no longer be loaded is built all the same and fails every call naming the problem
/// ([`Webhook::from_spec`]).
pub fn build(specs: &[HookSpec]) -> Vec<Arc<dyn Hook>> {
    build_with_clock(specs, Arc::new(SystemClock))
}

/// [`build`] with an injected wall clock, for tests of absolute freeze windows.
pub fn build_with_clock(specs: &[HookSpec], clock: Arc<dyn Clock>) -> Vec<Arc<dyn Hook>> {
    specs
        .iter()
        .map(|spec| spec.build(Arc::clone(&clock)))
        .collect()
}

/// The chain of an install: the hooks `specs` declare, in order, then the executor policy when
/// `policy` is set, as the last hook, which nothing registered later can follow (ADR 0100 §7).
///
/// The hooks' changes must pass `rules`; the policy bounds the limits it fills by the rules'
/// unit. Like [`build`], call it once at boot.
pub fn chain(specs: &[HookSpec], policy: Option<&PolicySpec>, rules: ChangeRules) -> Chain {
    let unit = rules.unit;
    let chain = build(specs)
        .into_iter()
        .fold(Chain::new(rules), Chain::with_hook);
    match policy {
        Some(spec) => chain.with_privileged_last(Arc::new(Policy::new(spec, unit))),
        None => chain,
    }
}
