//! Kubernetes' name rules (apimachinery's `validation` package at v0.36, the version Volcano
//! builds with), in Kubernetes' words, for the Volcano rules that quote them: qualified names,
//! DNS labels and subdomains, port names.

/// The longest name part of a qualified name, in bytes.
const MAX_NAME_PART: usize = 63;
/// The longest DNS subdomain (a qualified name's prefix), in bytes.
const MAX_SUBDOMAIN: usize = 253;

/// What a name part must look like, and the pattern Kubernetes quotes for it.
const NAME_PART_RULE: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must \
     start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', \
     regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

/// What a prefix must look like, and the pattern Kubernetes quotes for it.
const SUBDOMAIN_RULE: &str = "a lowercase RFC 1123 subdomain must consist of lower case \
     alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character \
     (e.g. 'example.com', regex used for validation is \
     '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

/// Every reason `value` is not a qualified name (an optional DNS-subdomain prefix and `/`, then
/// a name part), in Kubernetes' wording and order; empty when it is one.
pub(crate) fn qualified_name_errors(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    let mut parts = value.split('/');
    let first = parts.next().unwrap_or_default();
    let name = match (parts.next(), parts.next()) {
        (None, _) => first,
        (Some(name), None) => {
            if first.is_empty() {
                errors.push("prefix part must be non-empty".to_owned());
            } else {
                if first.len() > MAX_SUBDOMAIN {
                    errors.push(format!(
                        "prefix part must be no more than {MAX_SUBDOMAIN} bytes"
                    ));
                }
                if !is_subdomain(first) {
                    errors.push(format!("prefix part {SUBDOMAIN_RULE}"));
                }
            }
            name
        }
        (Some(_), Some(_)) => {
            return vec![format!(
                "a valid label key {NAME_PART_RULE} with an optional DNS subdomain prefix and '/' \
                 (e.g. 'example.com/MyName')"
            )];
        }
    };
    if name.is_empty() {
        errors.push("name part must be non-empty".to_owned());
    } else if name.len() > MAX_NAME_PART {
        errors.push(format!(
            "name part must be no more than {MAX_NAME_PART} bytes"
        ));
    }
    if !is_edged(name, |b| b.is_ascii_alphanumeric(), |b| b"-_.".contains(&b)) {
        errors.push(format!("name part {NAME_PART_RULE}"));
    }
    errors
}

/// Whether `value` matches the DNS-subdomain pattern: dot-separated labels of lower-case
/// alphanumerics and `-`, each starting and ending with an alphanumeric.
fn is_subdomain(value: &str) -> bool {
    value.split('.').all(is_label)
}

/// Whether `text` is non-empty, starts and ends with an `edge` byte, and has only `edge` and
/// `inner` bytes between.
fn is_edged(text: &str, edge: impl Fn(u8) -> bool, inner: impl Fn(u8) -> bool) -> bool {
    let bytes = text.as_bytes();
    let (Some(&first), Some(&last)) = (bytes.first(), bytes.last()) else {
        return false;
    };
    edge(first) && edge(last) && bytes.iter().all(|&b| edge(b) || inner(b))
}

/// The longest DNS label.
const MAX_LABEL: usize = 63;
/// The longest port name.
const MAX_PORT_NAME: usize = 15;

const LABEL: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const LABEL_1035: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";

/// apimachinery's message for a value longer than `max`.
pub(crate) fn too_long(max: usize) -> String {
    format!("must be no more than {max} characters")
}

fn is_label_byte(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'
}

/// Whether `text` matches the DNS-label pattern: lower-case alphanumerics and `-`, starting and
/// ending with an alphanumeric.
fn is_label(text: &str) -> bool {
    is_edged(
        text,
        |b| b.is_ascii_lowercase() || b.is_ascii_digit(),
        |b| b == b'-',
    )
}

/// apimachinery's `IsDNS1123Label`: every problem, empty when valid.
pub(crate) fn dns_label(value: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if value.len() > MAX_LABEL {
        problems.push(too_long(MAX_LABEL));
    }
    if !is_label(value) {
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
    if !starts_with_letter || !is_label(value) {
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
    if !is_subdomain(value) {
        problems.push(SUBDOMAIN_RULE.to_owned());
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
pub(crate) fn go_list(problems: &[String]) -> String {
    format!("[{}]", problems.join(" "))
}

#[cfg(test)]
mod tests {
    use super::{NAME_PART_RULE, SUBDOMAIN_RULE, qualified_name_errors};

    #[test]
    fn names_with_and_without_a_prefix_are_qualified() {
        for name in ["a", "My.Name_1", "123-abc", "example.com/MyName"] {
            assert!(qualified_name_errors(name).is_empty(), "{name}");
        }
    }

    #[test]
    fn a_name_part_with_a_bad_edge_is_refused_with_the_pattern() {
        assert_eq!(
            qualified_name_errors("-a"),
            vec![format!("name part {NAME_PART_RULE}")]
        );
        assert!(NAME_PART_RULE.contains("(e.g. 'MyName',  or 'my.name',  or '123-abc', regex"));
    }

    #[test]
    fn an_empty_name_is_refused_as_empty_and_as_not_matching() {
        assert_eq!(
            qualified_name_errors(""),
            vec![
                "name part must be non-empty".to_owned(),
                format!("name part {NAME_PART_RULE}")
            ]
        );
    }

    #[test]
    fn a_long_name_part_is_refused_in_bytes() {
        assert_eq!(
            qualified_name_errors(&"a".repeat(64)),
            vec!["name part must be no more than 63 bytes".to_owned()]
        );
    }

    #[test]
    fn a_prefix_must_be_a_lower_case_subdomain() {
        assert_eq!(
            qualified_name_errors("Example.com/a"),
            vec![format!("prefix part {SUBDOMAIN_RULE}")]
        );
        assert_eq!(
            qualified_name_errors("/a"),
            vec!["prefix part must be non-empty".to_owned()]
        );
    }

    #[test]
    fn two_slashes_are_one_error_about_the_whole_shape() {
        let errors = qualified_name_errors("a/b/c");
        assert_eq!(errors.len(), 1);
        assert!(errors[0].starts_with("a valid label key must consist of"));
        assert!(errors[0].ends_with(
            "with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ));
    }
}
