//! Which attempts a hook acts on: the one matching rule every built-in hook shares.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::admission::{
    ChangeError, Field, Request, image_allowed, label_value_problem, qualified_name_problem,
};

/// Selects attempts by tenant, DAG, task, operator, image, labels and annotations.
///
/// An attempt matches when it passes every criterion that is set: a list matches when it holds
/// the attempt's value (any entry will do), a map when the attempt's labels or annotations hold
/// every pair of it. A criterion left empty matches every attempt, so an empty matcher matches
/// all of them.
///
/// ```
/// use dexaflow_admission::admission::Request;
/// use dexaflow_admission::hooks::Matcher;
///
/// let matcher = Matcher { tenants: vec!["acme".into()], ..Matcher::default() };
/// assert!(matcher.matches(&Request::new("acme", "etl", "load")));
/// assert!(!matcher.matches(&Request::new("globex", "etl", "load")));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Matcher {
    /// Tenants, compared with [`Request::tenant`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tenants: Vec<String>,
    /// DAG ids, compared with [`Request::dag_id`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dag_ids: Vec<String>,
    /// Task ids, compared with [`Request::task_id`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub task_ids: Vec<String>,
    /// Operator types, compared with [`Request::operator`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub operators: Vec<String>,
    /// Images, compared with [`Request::image`]: an entry ending in `/` is a prefix of the
    /// image, any other must equal the image's repository (the image without tag or digest),
    /// the rule `execution_allowlist.images` follows.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<String>,
    /// Labels the attempt's execution labels must all hold.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Annotations the attempt's execution annotations must all hold.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

impl Matcher {
    /// Whether `request` passes every criterion that is set.
    pub fn matches(&self, request: &Request) -> bool {
        is_listed(&self.tenants, &request.tenant)
            && is_listed(&self.dag_ids, &request.dag_id)
            && is_listed(&self.task_ids, &request.task_id)
            && is_listed(&self.operators, &request.operator)
            && (self.images.is_empty() || image_allowed(&request.image, &self.images))
            && is_contained(&self.labels, &request.execution.labels)
            && is_contained(&self.annotations, &request.execution.annotations)
    }

    /// Whether no criterion is set, so that every attempt matches.
    pub fn is_empty(&self) -> bool {
        *self == Matcher::default()
    }

    /// Every label key, label value and annotation key Kubernetes would reject: an attempt can
    /// never carry one, so a criterion naming it would silently never match.
    pub fn problems(&self) -> Vec<ChangeError> {
        let invalid_key = |field, key: &String| {
            qualified_name_problem(key).map(|problem| ChangeError::InvalidKey {
                field,
                key: key.clone(),
                problem,
            })
        };
        let labels = self.labels.iter().flat_map(|(key, value)| {
            let invalid_value =
                label_value_problem(value).map(|problem| ChangeError::InvalidValue {
                    field: Field::Label,
                    key: key.clone(),
                    value: value.clone(),
                    problem,
                });
            invalid_key(Field::Label, key)
                .into_iter()
                .chain(invalid_value)
        });
        let annotations = self
            .annotations
            .keys()
            .filter_map(|key| invalid_key(Field::Annotation, key));
        labels.chain(annotations).collect()
    }
}

fn is_listed(entries: &[String], value: &str) -> bool {
    entries.is_empty() || entries.iter().any(|entry| entry == value)
}

fn is_contained(wanted: &BTreeMap<String, String>, present: &BTreeMap<String, String>) -> bool {
    wanted
        .iter()
        .all(|(key, value)| present.get(key) == Some(value))
}
