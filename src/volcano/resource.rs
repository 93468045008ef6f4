//! Quantities as Volcano's rules compare them: signed, and summed in Volcano's scheduler units
//! (millicores, bytes, thousandths of other resources, whole pods).

use std::borrow::Cow;
use std::collections::BTreeMap;

use crate::admission::{MAX_QUANTITY, cpu_quantity, is_capped, memory_quantity, parse_capped};

use super::names::qualified_name_errors;
use super::queue::ResourceList;
use super::review::{invalid, quoted};

/// A quantity in thousandths of its unit, rounded up, signed; `None` when the text is not a
/// quantity. What Volcano's scheduler sums and Kubernetes' integer check reads (`MilliValue`).
/// As Kubernetes keeps quantities, one past 2^63 - 1 units is that many.
pub(crate) fn signed_milli(text: &str) -> Option<i128> {
    signed(text, 3)
}

/// A quantity in billionths of its unit, signed: exact as Kubernetes keeps it (capped as
/// [`signed_milli`]), for comparing two quantities as `Quantity.Cmp` does. `None` when the
/// text is not a quantity.
pub(crate) fn signed_nano(text: &str) -> Option<i128> {
    signed(text, 9)
}

fn signed(text: &str, digits: u32) -> Option<i128> {
    let (negative, magnitude) = split_sign(text);
    let amount = i128::try_from(parse_capped(magnitude, digits).ok()?).ok()?;
    Some(if negative { -amount } else { amount })
}

fn split_sign(text: &str) -> (bool, &str) {
    match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    }
}

/// A quantity as a message shows it: as the object writes it, unless Kubernetes capped it,
/// then as the cap it compared (`9223372036854775807`), since the text is not what was
/// compared.
pub(crate) fn shown_quantity(text: &str) -> Cow<'_, str> {
    let (negative, magnitude) = split_sign(text);
    if is_capped(magnitude) {
        let sign = if negative { "-" } else { "" };
        Cow::Owned(format!("{sign}{MAX_QUANTITY}"))
    } else {
        Cow::Borrowed(text)
    }
}

/// Whether Kubernetes counts the resource in whole units (`pods`, object counts, extended
/// resources such as `nvidia.com/gpu`).
pub(crate) fn is_integer_resource(name: &str) -> bool {
    const COUNTED: [&str; 9] = [
        "pods",
        "services",
        "replicationcontrollers",
        "resourcequotas",
        "secrets",
        "configmaps",
        "persistentvolumeclaims",
        "services.nodeports",
        "services.loadbalancers",
    ];
    COUNTED.contains(&name) || is_extended_resource(name)
}

/// Kubernetes' extended resource: a prefixed name outside `kubernetes.io`, not a quota's
/// `requests.`, that is a qualified name with `requests.` before it (as its quota would be).
fn is_extended_resource(name: &str) -> bool {
    name.contains('/')
        && !name.contains("kubernetes.io/")
        && !name.starts_with("requests.")
        && qualified_name_errors(&format!("requests.{name}")).is_empty()
}

/// Whether Volcano's scheduler sums the resource as a scalar (beyond CPU and memory).
fn is_scalar_resource(name: &str) -> bool {
    is_extended_resource(name)
        || name.contains("kubernetes.io/")
        || name.starts_with("hugepages-")
        || name.starts_with("attachable-volumes-")
}

/// A resource list in Volcano's scheduler units, as its `api.Resource`.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Amounts {
    /// Millicores.
    pub(crate) milli_cpu: i128,
    /// Bytes, rounded up.
    pub(crate) memory: i128,
    /// Other resources: thousandths, except `pods` in whole pods.
    pub(crate) scalars: BTreeMap<String, i128>,
}

impl Amounts {
    /// The amounts of a list; quantities that do not parse count as zero (they are refused
    /// with their field before any sum is made).
    pub(crate) fn of(list: &ResourceList) -> Amounts {
        let mut amounts = Amounts::default();
        for (name, quantity) in list {
            let milli = signed_milli(&quantity.0).unwrap_or(0);
            match name.as_str() {
                "cpu" => amounts.milli_cpu += milli,
                "memory" => amounts.memory += ceil_div(milli, 1000),
                "pods" => {
                    *amounts.scalars.entry(name.clone()).or_default() += ceil_div(milli, 1000)
                }
                "ephemeral-storage" => *amounts.scalars.entry(name.clone()).or_default() += milli,
                _ if name.starts_with("count/") => {}
                _ if is_scalar_resource(name) => {
                    *amounts.scalars.entry(name.clone()).or_default() += milli
                }
                _ => {}
            }
        }
        amounts
    }

    /// Adds `other` to these amounts.
    pub(crate) fn add(&mut self, other: &Amounts) {
        self.milli_cpu += other.milli_cpu;
        self.memory += other.memory;
        for (name, value) in &other.scalars {
            *self.scalars.entry(name.clone()).or_default() += value;
        }
    }

    /// Whether any resource of `other` exceeds this limit, a resource missing here counting as
    /// zero (Volcano's `LessPartly` with a zero default).
    pub(crate) fn is_exceeded_by(&self, other: &Amounts) -> bool {
        self.milli_cpu < other.milli_cpu
            || self.memory < other.memory
            || other
                .scalars
                .iter()
                .any(|(name, value)| self.scalars.get(name).is_none_or(|own| own < value))
    }

    /// The amount of one resource, zero when absent.
    pub(crate) fn get(&self, name: &str) -> i128 {
        match name {
            "cpu" => self.milli_cpu,
            "memory" => self.memory,
            other => self.scalars.get(other).copied().unwrap_or(0),
        }
    }

    /// The resources this list sets to a positive amount: CPU, memory, then the others by name.
    pub(crate) fn names(&self) -> Vec<String> {
        let mut names = Vec::new();
        if self.milli_cpu > 0 {
            names.push("cpu".to_owned());
        }
        if self.memory > 0 {
            names.push("memory".to_owned());
        }
        names.extend(
            self.scalars
                .iter()
                .filter(|(_, value)| **value > 0)
                .map(|(name, _)| name.clone()),
        );
        names
    }
}

/// Volcano's text of a sum: `cpu 9000.00, memory 19327352832.00`, then the others by name.
impl std::fmt::Display for Amounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cpu {}.00, memory {}.00", self.milli_cpu, self.memory)?;
        for (name, value) in &self.scalars {
            write!(f, ", {name} {value}.00")?;
        }
        Ok(())
    }
}

/// One resource's amount as Volcano prints a capability: CPU and memory as quantities (`20`,
/// `1500m`, `40Gi`), others with two decimals.
pub(crate) fn format_amount(name: &str, value: i128) -> String {
    let magnitude = value.unsigned_abs();
    let sign = if value < 0 { "-" } else { "" };
    match name {
        "cpu" => format!("{sign}{}", cpu_quantity(magnitude)),
        "memory" => format!("{sign}{}", memory_quantity(magnitude * 1000)),
        _ => format!("{value}.00"),
    }
}

fn ceil_div(value: i128, divisor: i128) -> i128 {
    let quotient = value / divisor;
    if value % divisor > 0 {
        quotient + 1
    } else {
        quotient
    }
}

/// Kubernetes' `ValidateResourceQuantityValue` of the quantity `text` of resource `name` at
/// `path` (written out only for an error): a quantity, not negative, and whole for counted
/// resources; a negative fraction of a counted resource is both. Returns the quantity in
/// thousandths ([`signed_milli`]), for a caller that compares it next.
pub(crate) fn quantity_value_errors(
    name: &str,
    text: &str,
    path: &dyn std::fmt::Display,
    errors: &mut Vec<String>,
) -> Option<i128> {
    let Some(milli) = signed_milli(text) else {
        let detail = "must be a quantity such as \"500m\", \"2\" or \"1Gi\"";
        errors.push(invalid(&path.to_string(), &quoted(text), detail));
        return None;
    };
    if milli < 0 {
        errors.push(invalid(
            &path.to_string(),
            &quoted(text),
            "must be greater than or equal to 0",
        ));
    }
    if is_integer_resource(name) && milli % 1000 != 0 {
        errors.push(invalid(
            &path.to_string(),
            &quoted(text),
            "must be an integer",
        ));
    }
    Some(milli)
}
