//! The name rules Kubernetes applies to keys and values, so that a hook's change is refused at
//! admission, naming the hook, instead of failing later as a pod error.

/// The longest DNS subdomain (a key prefix, a service account or priority class name).
const MAX_SUBDOMAIN: usize = 253;
/// The longest DNS label (a pod name, a namespace), name part of a qualified name, and label
/// value.
pub const MAX_NAME: usize = 63;

/// Why a qualified name (a label, annotation or node-selector key) is invalid, or `None`.
///
/// A qualified name is an optional DNS-subdomain prefix and `/`, then a name of at most 63
/// characters: alphanumerics, `-`, `_` and `.`, starting and ending with an alphanumeric.
pub fn qualified_name_problem(key: &str) -> Option<String> {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if let Some(prefix) = prefix {
        if let Some(problem) = subdomain_problem(prefix) {
            return Some(format!("prefix {problem}"));
        }
    }
    if name.is_empty() {
        return Some("name part must not be empty".to_owned());
    }
    if name.len() > MAX_NAME {
        return Some(format!("name part must be at most {MAX_NAME} characters"));
    }
    if !is_alphanumeric_edged(name, |b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)) {
        return Some(
            "name part must be alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric"
                .to_owned(),
        );
    }
    None
}

/// Why a label value (also a node-selector value) is invalid, or `None`; empty is valid.
pub fn label_value_problem(value: &str) -> Option<String> {
    if value.is_empty() {
        return None;
    }
    if value.len() > MAX_NAME {
        return Some(format!("must be at most {MAX_NAME} characters"));
    }
    if !is_alphanumeric_edged(value, |b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)) {
        return Some(
            "must be alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric"
                .to_owned(),
        );
    }
    None
}

/// Why `name` is not a DNS label (RFC 1123), or `None`.
///
/// Namespaces and pod names are DNS labels: one part of a DNS subdomain, at most 63 characters.
pub(crate) fn dns_label_problem(name: &str) -> Option<String> {
    if name.contains('.') {
        return Some("must not contain '.'".to_owned());
    }
    if name.len() > MAX_NAME {
        return Some(format!("must be at most {MAX_NAME} characters"));
    }
    subdomain_problem(name)
}

/// Why `name` is not a DNS subdomain (RFC 1123), or `None`.
///
/// Service accounts, priority classes, runtime classes and key prefixes are DNS subdomains.
pub(crate) fn subdomain_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("must not be empty".to_owned());
    }
    if name.len() > MAX_SUBDOMAIN {
        return Some(format!("must be at most {MAX_SUBDOMAIN} characters"));
    }
    let valid = name.split('.').all(|part| {
        !part.is_empty()
            && is_alphanumeric_edged(part, |b| {
                b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'
            })
            && part.bytes().all(|b| !b.is_ascii_uppercase())
    });
    if !valid {
        return Some(
            "must be lower-case alphanumerics, '-' or '.', each part starting and ending with an alphanumeric"
                .to_owned(),
        );
    }
    None
}

/// Why `name` is not an environment variable name Kubernetes accepts in a container, or `None`.
///
/// Since Kubernetes 1.34 (the relaxed rule, on by default since 1.32) a name is any non-empty
/// run of printable ASCII characters other than `=`.
pub(crate) fn env_name_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("must not be empty".to_owned());
    }
    if !name
        .bytes()
        .all(|b| (b' '..=b'~').contains(&b) && b != b'=')
    {
        return Some("must be printable ASCII characters other than '='".to_owned());
    }
    None
}

/// Whether the key's prefix is `leoflow.io` or `dexaflow.io`, or a subdomain of either.
///
/// These prefixes are reserved for the orchestrator's own labels and annotations (ADR 0100 §3),
/// the way Kubernetes reserves `kubernetes.io` and its subdomains. `example.com/leoflow.io` and
/// `leoflow.iox/...` are ordinary keys.
pub fn is_reserved_key(key: &str) -> bool {
    const RESERVED: [&str; 2] = ["leoflow.io", "dexaflow.io"];
    let Some((prefix, _)) = key.split_once('/') else {
        return false;
    };
    let prefix = prefix.to_ascii_lowercase();
    RESERVED.iter().any(|reserved| {
        prefix == *reserved
            || prefix
                .strip_suffix(reserved)
                .is_some_and(|head| head.ends_with('.'))
    })
}

fn is_alphanumeric_edged(text: &str, allowed: impl Fn(u8) -> bool) -> bool {
    let bytes = text.as_bytes();
    let (Some(first), Some(last)) = (bytes.first(), bytes.last()) else {
        return false;
    };
    first.is_ascii_alphanumeric()
        && last.is_ascii_alphanumeric()
        && bytes.iter().all(|&b| allowed(b))
}
