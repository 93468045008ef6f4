//! The `deny` hook: refuses the attempts a matcher selects, such as a suspended tenant's.

use serde::{Deserialize, Serialize};

use super::LocalRule;
use crate::admission::{Decision, Request};

use super::{Matcher, SpecError};

/// The config of a `deny` hook.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DenySpec {
    /// The hook's name, unique in the chain.
    pub name: String,
    /// Which attempts are refused; at least one criterion, so that a forgotten `match` does not
    /// refuse every attempt of the install.
    #[serde(rename = "match")]
    pub matcher: Matcher,
    /// The reason a refused task shows; `None` for `denied by hook "<name>"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl DenySpec {
    /// Checks what serde cannot: that the matcher selects something less than everything.
    ///
    /// # Errors
    /// [`SpecError::EmptyMatch`] when no criterion is set.
    pub fn check(&self) -> Result<(), Vec<SpecError>> {
        if self.matcher.is_empty() {
            Err(vec![SpecError::EmptyMatch])
        } else {
            Ok(())
        }
    }
}

/// A hook that refuses every attempt its matcher selects, with a fixed reason.
///
/// A refusal is permanent: the task fails at once, without retries, and shows
/// `dispatch refused: admission: <reason>`. Attempts the matcher does not select are admitted
/// unchanged.
#[derive(Debug, Clone)]
pub struct Deny {
    name: String,
    matcher: Matcher,
    reason: String,
}

impl Deny {
    /// The hook the spec describes, once [`DenySpec::check`] passes: what a program that builds
    /// the hook itself calls, so that it is held to what the config path checks.
    ///
    /// # Errors
    /// What [`DenySpec::check`] finds.
    pub fn checked(spec: &DenySpec) -> Result<Deny, Vec<SpecError>> {
        spec.check().map(|()| Deny::new(spec))
    }

    /// The hook the spec describes, unchecked (the config path checked it at load).
    pub fn new(spec: &DenySpec) -> Deny {
        Deny {
            name: spec.name.clone(),
            matcher: spec.matcher.clone(),
            reason: spec
                .reason
                .clone()
                .unwrap_or_else(|| format!("denied by hook {:?}", spec.name)),
        }
    }
}

impl LocalRule for Deny {
    fn rule_name(&self) -> &str {
        &self.name
    }

    fn decide(&self, request: &Request) -> Decision {
        if self.matcher.matches(request) {
            Decision::Refuse(self.reason.clone())
        } else {
            Decision::Admit
        }
    }
}
