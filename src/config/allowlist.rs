//! The `execution_allowlist.*` section: what a DAG's own execution fields may be.

use std::collections::BTreeSet;

use serde_yaml_ng::Value;

use super::keys::{
    ALLOWED_FIELDS, ALLOWED_IMAGES, ALLOWED_PRIORITY_CLASSES, ALLOWED_SERVICE_ACCOUNTS,
};
use super::reader::{Problem, Raw, Reader, expected, parse_list};
use crate::dispatch::settings::{AllowedFields, Allowlist};

/// The execution fields `execution_allowlist.fields` may name.
const EXECUTION_FIELDS: &[&str] = &[
    "node_selector",
    "tolerations",
    "service_account",
    "priority_class_name",
    "labels",
    "annotations",
];

impl Reader {
    pub(super) fn allowlist(&mut self) -> Allowlist {
        let fields = self.get(
            ALLOWED_FIELDS,
            AllowedFields::All,
            parse_allowed_fields,
            |fields| match fields {
                AllowedFields::All => Value::String("all".to_owned()),
                AllowedFields::None => Value::String("none".to_owned()),
                AllowedFields::Only(names) => {
                    Value::Sequence(names.iter().cloned().map(Value::String).collect())
                }
            },
        );
        let as_set = |list: Option<Vec<String>>| list.map(|items| items.into_iter().collect());
        Allowlist {
            fields,
            service_accounts: as_set(self.list(ALLOWED_SERVICE_ACCOUNTS)),
            priority_classes: as_set(self.list(ALLOWED_PRIORITY_CLASSES)),
            images: self.list(ALLOWED_IMAGES),
        }
    }
}

fn parse_allowed_fields(raw: &Raw) -> Result<AllowedFields, Problem> {
    let one_of = || {
        format!(
            "all, none or a list drawn from {}",
            EXECUTION_FIELDS.join(", ")
        )
    };
    match raw.value.as_str().map(str::trim) {
        Some("all") => return Ok(AllowedFields::All),
        Some("none") => return Ok(AllowedFields::None),
        Some(_) if raw.env.is_none() => return Err(expected(one_of())),
        _ => {}
    }
    let names = parse_list(raw).map_err(|problem| Problem {
        expected: one_of(),
        ..problem
    })?;
    let mut only = BTreeSet::new();
    for (index, name) in names.into_iter().enumerate() {
        if !EXECUTION_FIELDS.contains(&name.as_str()) {
            let at = if raw.env.is_some() {
                String::new()
            } else {
                format!("[{index}]")
            };
            return Err(Problem {
                at,
                expected: format!("one of {}", EXECUTION_FIELDS.join(", ")),
                got: Some(format!("{name:?}")),
            });
        }
        only.insert(name);
    }
    Ok(AllowedFields::Only(only))
}
