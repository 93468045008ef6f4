//! Kubernetes' name checks (apimachinery's `validation` package), in Kubernetes' wording, as
//! Volcano's job rule prints them.

/// The longest DNS label.
const MAX_LABEL: usize = 63;
/// The longest DNS subdomain.
const MAX_SUBDOMAIN: usize = 253;
/// The longest port name.
const MAX_PORT_NAME: usize = 15;

const QUALIFIED_NAME: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const LABEL: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const LABEL_1035: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";
const SUBDOMAIN: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

/// apimachinery's message for a value longer than `max`.
pub(super) fn too_long(max: usize) -> String {
    format!("must be no more than {max} characters")
}

/// Whether `text` is non-empty, made of `allowed` bytes, and starts and ends with an
/// alphanumeric byte of the allowed ones.
fn is_edged(text: &str, allowed: impl Fn(u8) -> bool) -> bool {
    let bytes = text.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(&first), Some(&last)) => {
            bytes.iter().all(|&b| allowed(b))
                && first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
        }
        _ => false,
    }
}

fn is_label_byte(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'
}

/// apimachinery's `IsQualifiedName`: every problem, empty when valid.
pub(crate) fn qualified_name(value: &str) -> Vec<String> {
    let parts: Vec<&str> = value.split('/').collect();
    let (prefix, name) = match parts.as_slice() {
        [name] => (None, *name),
        [prefix, name] => (Some(*prefix), *name),
        _ => {
            return vec![format!(
                "a qualified name {QUALIFIED_NAME} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            )];
        }
    };
    let mut problems = Vec::new();
    match prefix {
        Some("") => problems.push("prefix part must be non-empty".to_owned()),
        Some(prefix) => problems.extend(
            dns_subdomain(prefix)
                .into_iter()
                .map(|problem| format!("prefix part {problem}")),
        ),
        None => {}
    }
    if name.is_empty() {
        problems.push("name part must be non-empty".to_owned());
    } else if name.len() > MAX_LABEL {
        problems.push(format!("name part {}", too_long(MAX_LABEL)));
    }
    if !name.is_empty()
        && !is_edged(name, |b| {
            b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.'
        })
    {
        problems.push(format!("name part {QUALIFIED_NAME}"));
    }
    problems
}

/// apimachinery's `IsDNS1123Label`: every problem, empty when valid.
pub(crate) fn dns_label(value: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if value.len() > MAX_LABEL {
        problems.push(too_long(MAX_LABEL));
    }
    if !is_edged(value, is_label_byte) {
        problems.push(LABEL.to_owned());
    }
    problems
}

/// apimachinery's `IsDNS1035Label`: every problem, empty when valid.
pub(crate) fn dns_1035_label(value: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if value.len() > MAX_LABEL {
        problems.push(too_long(MAX_LABEL));
    }
    let starts_with_letter = value.bytes().next().is_some_and(|b| b.is_ascii_lowercase());
    if !starts_with_letter || !is_edged(value, is_label_byte) {
        problems.push(LABEL_1035.to_owned());
    }
    problems
}

/// apimachinery's `IsDNS1123Subdomain`: every problem, empty when valid.
pub(crate) fn dns_subdomain(value: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if value.len() > MAX_SUBDOMAIN {
        problems.push(too_long(MAX_SUBDOMAIN));
    }
    if !value.split('.').all(|part| is_edged(part, is_label_byte)) {
        problems.push(SUBDOMAIN.to_owned());
    }
    problems
}

/// apimachinery's `IsValidPortName`: every problem, empty when valid.
pub(crate) fn port_name(value: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if value.len() > MAX_PORT_NAME {
        problems.push(too_long(MAX_PORT_NAME));
    }
    if !value.bytes().all(is_label_byte) || value.is_empty() {
        problems.push(
            "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)".to_owned(),
        );
    }
    if !value.bytes().any(|b| b.is_ascii_lowercase()) {
        problems.push("must contain at least one letter (a-z)".to_owned());
    }
    if value.contains("--") {
        problems.push("must not contain consecutive hyphens".to_owned());
    }
    if value.starts_with('-') || value.ends_with('-') {
        problems.push("must not begin or end with a hyphen".to_owned());
    }
    problems
}

/// Several messages as Go prints a string slice with `%v`: `[a b]`.
pub(super) fn go_list(problems: &[String]) -> String {
    format!("[{}]", problems.join(" "))
}
