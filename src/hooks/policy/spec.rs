//! The executor policy as config declares it: decoded strictly, then checked for what serde
//! cannot see, each problem named by its key path inside `executor.policy`.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use thiserror::Error;

use crate::admission::{
    ChangeError, ChangeRules, Changes, Privilege, QuantityError, Request, Toleration, parse_milli,
};

/// `executor.policy`: what the operator forces onto and allows on every attempt (ADR 0063).
///
/// Every rule is optional: an unset rule does nothing, and a list that is set but empty allows
/// nothing. Unknown keys are refused.
///
/// ```
/// use dexaflow_admission::hooks::PolicySpec;
///
/// let yaml: serde_yaml_ng::Value = serde_yaml_ng::from_str(
///     "images: {allowed: [ghcr.io/acme/]}\nresources: {max: {memory: 16Gi}}\n",
/// )
/// .unwrap();
/// let spec = PolicySpec::decode(yaml).unwrap();
/// assert_eq!(spec.images.allowed, Some(vec!["ghcr.io/acme/".to_owned()]));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicySpec {
    /// Forced onto every attempt's pod; only a privileged hook, as the crate registers the policy, may set it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_class_name: Option<String>,
    /// The service account rules.
    #[serde(default)]
    pub service_account: ServiceAccountRules,
    /// The placement rules.
    #[serde(default)]
    pub placement: PlacementRules,
    /// The label and annotation rules.
    #[serde(default)]
    pub metadata: MetadataRules,
    /// The resource rules.
    #[serde(default)]
    pub resources: ResourceRules,
    /// The image rules.
    #[serde(default)]
    pub images: ImageRules,
}

/// `executor.policy.service_account`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServiceAccountRules {
    /// Forced onto every attempt, whatever the task or an earlier hook chose; must be in
    /// `allowed` when that is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub force: Option<String>,
    /// The service accounts an attempt may run as, after the default and any force.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed: Option<Vec<String>>,
}

/// `executor.policy.placement`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlacementRules {
    /// Forced into every attempt's node selector; its keys win over the task's and every
    /// earlier hook's.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    /// Appended to every attempt's tolerations.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
    /// Whether a DAG may set its own node selector, tolerations and priority class; checked
    /// on the DAG's fields before any hook runs. True when unset.
    #[serde(default = "allowed")]
    pub allow_dag_placement: bool,
    /// The priority classes an attempt may have, whoever set it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_priority_classes: Option<Vec<String>>,
}

/// `executor.policy.metadata`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetadataRules {
    /// Every label key must start with one of these.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_label_prefixes: Option<Vec<String>>,
    /// Every annotation key must start with one of these.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_annotation_prefixes: Option<Vec<String>>,
}

/// `executor.policy.resources`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResourceRules {
    /// The most an attempt may request or limit, per resource; an empty limit is filled with it.
    #[serde(default)]
    pub max: ResourceMax,
}

/// `executor.policy.resources.max`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResourceMax {
    /// The most CPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<Quantity>,
    /// The most memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<Quantity>,
    /// The most ephemeral storage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ephemeral_storage: Option<Quantity>,
}

/// `executor.policy.images`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImageRules {
    /// The images an attempt may run: an entry ending in `/` is a prefix, any other must equal
    /// the image's repository (without tag or digest), as in `execution_allowlist.images`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed: Option<Vec<String>>,
}

/// A Kubernetes quantity, as written (`4`, `16Gi`) and in thousandths of its unit.
///
/// Decodes from text or a YAML number, so that `cpu: 4` reads as `cpu: "4"`, and only above
/// zero.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quantity {
    /// The quantity as the config writes it, for messages and the pod.
    pub text: String,
    /// The quantity in thousandths (see [`crate::admission::parse_milli`]).
    pub milli: u128,
}

/// Why an `executor.policy` cannot become a policy. The text starts with the key path inside
/// `executor.policy`; the config error around it names `executor.policy`.
#[derive(Debug, Error)]
pub enum PolicyError {
    /// A key, value or type serde refused: an unknown key, a bad quantity or toleration.
    #[error("{path}")]
    Decode {
        /// The key path, such as `placement.tolerations[0].operator`.
        path: String,
        /// What serde refused.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// An empty entry in a list of names or prefixes, which would allow every key (a prefix) or
    /// nothing anyone meant.
    #[error("{path}: an empty entry is not allowed: write a value, or leave the rule unset")]
    EmptyEntry {
        /// The entry, such as `metadata.allowed_label_prefixes[1]`.
        path: String,
    },
    /// `service_account.force` outside `service_account.allowed`.
    #[error("service_account.force: {name:?} is not in service_account.allowed")]
    ForceNotAllowed {
        /// The forced service account.
        name: String,
    },
    /// A forced value the change rules would refuse on every attempt (not a name Kubernetes
    /// accepts, or outside `execution_allowlist.service_accounts`).
    #[error("{path}")]
    InvalidForce {
        /// `runtime_class_name`, `service_account.force`, `placement.node_selector` or
        /// `placement.tolerations`.
        path: &'static str,
        /// The rule it breaks.
        #[source]
        source: ChangeError,
    },
}

fn allowed() -> bool {
    true
}

impl Default for PlacementRules {
    fn default() -> PlacementRules {
        PlacementRules {
            node_selector: BTreeMap::new(),
            tolerations: Vec::new(),
            allow_dag_placement: true,
            allowed_priority_classes: None,
        }
    }
}

impl PolicySpec {
    /// Decodes a policy strictly from a config value (YAML, JSON or any serde format).
    ///
    /// # Errors
    /// [`PolicyError::Decode`] naming the key path of the first key or value refused.
    pub fn decode<'de, D>(deserializer: D) -> Result<PolicySpec, PolicyError>
    where
        D: Deserializer<'de>,
        D::Error: Send + Sync + 'static,
    {
        serde_path_to_error::deserialize(deserializer).map_err(|error| {
            let path = error.path().to_string();
            PolicyError::Decode {
                // The root has the path `.`; a message about it names its key itself.
                path: if path == "." { String::new() } else { path },
                source: Box::new(error.into_inner()),
            }
        })
    }

    /// Checks what decoding cannot, against the install's `rules` for changes, so that a policy
    /// that would misbehave on every attempt fails at boot.
    ///
    /// # Errors
    /// Every [`PolicyError`] found.
    pub fn check(&self, rules: &ChangeRules) -> Result<(), Vec<PolicyError>> {
        let mut errors = Vec::new();
        let lists = [
            ("service_account.allowed", &self.service_account.allowed),
            (
                "placement.allowed_priority_classes",
                &self.placement.allowed_priority_classes,
            ),
            (
                "metadata.allowed_label_prefixes",
                &self.metadata.allowed_label_prefixes,
            ),
            (
                "metadata.allowed_annotation_prefixes",
                &self.metadata.allowed_annotation_prefixes,
            ),
            ("images.allowed", &self.images.allowed),
        ];
        for (key, list) in lists {
            for (index, entry) in list.iter().flatten().enumerate() {
                if entry.trim().is_empty() {
                    errors.push(PolicyError::EmptyEntry {
                        path: format!("{key}[{index}]"),
                    });
                }
            }
        }
        if let (Some(name), Some(allowed)) =
            (&self.service_account.force, &self.service_account.allowed)
        {
            if !allowed.contains(name) {
                errors.push(PolicyError::ForceNotAllowed { name: name.clone() });
            }
        }
        // Each forced field on its own, so that every bad one is reported.
        let forced = self.forced();
        let request = Request::new("", "", "");
        let parts = [
            (
                "runtime_class_name",
                Changes {
                    runtime_class_name: forced.runtime_class_name.clone(),
                    ..Changes::default()
                },
            ),
            (
                "service_account.force",
                Changes {
                    service_account: forced.service_account.clone(),
                    ..Changes::default()
                },
            ),
            (
                "placement.node_selector",
                Changes {
                    node_selector: forced.node_selector.clone(),
                    ..Changes::default()
                },
            ),
            (
                "placement.tolerations",
                Changes {
                    tolerations: forced.tolerations,
                    ..Changes::default()
                },
            ),
        ];
        for (path, changes) in parts {
            if let Err(source) = rules.check(&changes, Privilege::Privileged, &request) {
                errors.push(PolicyError::InvalidForce { path, source });
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors)
        }
    }

    /// The fields the policy forces onto every attempt it admits, as a hook's changes.
    pub fn forced(&self) -> Changes {
        Changes {
            node_selector: self.placement.node_selector.clone(),
            tolerations: self.placement.tolerations.clone(),
            service_account: self.service_account.force.clone(),
            runtime_class_name: self.runtime_class_name.clone(),
            ..Changes::default()
        }
    }

    /// Whether the policy forces a field onto every attempt it admits, which then takes a
    /// dedicated pod.
    pub fn forces_fields(&self) -> bool {
        !self.forced().is_empty()
    }
}

impl ResourceMax {
    /// The maximum of one resource, named as a request names it (`cpu`, `memory`,
    /// `ephemeral_storage`).
    pub fn of(&self, resource: &str) -> Option<&Quantity> {
        match resource {
            "cpu" => self.cpu.as_ref(),
            "memory" => self.memory.as_ref(),
            "ephemeral_storage" => self.ephemeral_storage.as_ref(),
            _ => None,
        }
    }
}

impl Quantity {
    /// The quantity `text` stands for.
    ///
    /// # Errors
    /// A [`QuantityError`] when `text` is not a Kubernetes quantity.
    pub fn parse(text: &str) -> Result<Quantity, QuantityError> {
        let text = text.trim();
        Ok(Quantity {
            milli: parse_milli(text)?,
            text: text.to_owned(),
        })
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl Serialize for Quantity {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for Quantity {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Quantity, D::Error> {
        deserializer.deserialize_any(QuantityVisitor)
    }
}

struct QuantityVisitor;

impl Visitor<'_> for QuantityVisitor {
    type Value = Quantity;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a quantity above zero such as \"4\", \"500m\" or \"16Gi\"")
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Quantity, E> {
        let quantity = Quantity::parse(text).map_err(E::custom)?;
        if quantity.milli == 0 {
            // A maximum of nothing would refuse every attempt that declares the resource.
            return Err(E::custom(format!("{:?} must be above zero", quantity.text)));
        }
        Ok(quantity)
    }

    fn visit_u64<E: de::Error>(self, number: u64) -> Result<Quantity, E> {
        self.visit_str(&number.to_string())
    }

    fn visit_i64<E: de::Error>(self, number: i64) -> Result<Quantity, E> {
        self.visit_str(&number.to_string())
    }

    fn visit_f64<E: de::Error>(self, number: f64) -> Result<Quantity, E> {
        self.visit_str(&number.to_string())
    }
}
