//! The reason cleaner: what a hook says is shown to users, so it is made safe to show (ADR 0100 §5).

use std::borrow::Cow;
use std::time::Duration;

use unicode_general_category::{GeneralCategory, get_general_category};

/// The most bytes a cleaned reason keeps.
pub const MAX_REASON_BYTES: usize = 512;

/// Cleans a hook's reason or error text before a task instance shows it.
///
/// Unicode control (Cc) and format (Cf) characters are removed first, so that a reason cannot
/// rewrite a terminal or hide text with bidi overrides; the rest is then cut to at most
/// [`MAX_REASON_BYTES`] bytes on a character boundary.
///
/// ```
/// use dexaflow_admission::admission::clean_reason;
/// assert_eq!(clean_reason("frozen\u{7}\u{202e} until 18:00\n"), "frozen until 18:00");
/// ```
pub fn clean_reason(text: &str) -> String {
    let mut cleaned = String::with_capacity(text.len().min(MAX_REASON_BYTES));
    for ch in text.chars().filter(|&ch| !is_control_or_format(ch)) {
        if cleaned.len() + ch.len_utf8() > MAX_REASON_BYTES {
            break;
        }
        cleaned.push(ch);
    }
    cleaned
}

/// Text as it may be printed on a line of a table or a log: each Unicode control (Cc) or format
/// (Cf) character is written as its escape (`\u{1b}`), so that an id or a reason cannot end the
/// line, move the cursor, colour the terminal or reorder what follows. Text with none is
/// borrowed as it is.
///
/// Unlike [`clean_reason`], nothing is dropped: what was there stays visible.
pub fn escape_controls(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_control_or_format) {
        return Cow::Borrowed(text);
    }
    let mut escaped = String::with_capacity(text.len() + 8);
    for ch in text.chars() {
        if is_control_or_format(ch) {
            escaped.extend(ch.escape_unicode());
        } else {
            escaped.push(ch);
        }
    }
    Cow::Owned(escaped)
}

/// Whether `ch` is in the Unicode general category Cc or Cf.
pub fn is_control_or_format(ch: char) -> bool {
    // ASCII has controls but no format characters; answering it here skips the table lookup
    // for nearly every reason a hook writes.
    if ch.is_ascii() {
        return ch.is_ascii_control();
    }
    matches!(
        get_general_category(ch),
        GeneralCategory::Control | GeneralCategory::Format
    )
}

/// An error and its sources joined with `: `, each part once, as a reason or a cause shows it.
///
/// Each layer should put its own context in its message and its cause in `source()`; some
/// libraries' errors (kube's, for one) also print their cause in their message, so a cause
/// whose text already ends what is written is left out rather than said twice.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.ends_with(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// Errors one a line, each with its causes as [`error_chain`] joins them: how a list of every
/// problem in a file (a config, a workload) is shown.
pub(crate) fn error_lines<E: std::error::Error>(errors: &[E]) -> String {
    errors
        .iter()
        .map(|error| error_chain(error))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A duration as a person reads it in a reason or a log line: rounded to the millisecond from a
/// millisecond up, to the microsecond below. A deadline measured on a clock ends some
/// nanoseconds off (`1.999999699s`), which tells a reader nothing.
pub(crate) fn display_duration(duration: Duration) -> String {
    let unit: u128 = if duration >= Duration::from_millis(1) {
        1_000_000
    } else if duration >= Duration::from_micros(1) {
        1_000
    } else {
        1
    };
    let nanos = (duration.as_nanos() + unit / 2) / unit * unit;
    let rounded = Duration::new(
        u64::try_from(nanos / 1_000_000_000).unwrap_or(u64::MAX),
        u32::try_from(nanos % 1_000_000_000).unwrap_or(0),
    );
    format!("{rounded:?}")
}

#[cfg(test)]
mod tests {
    #[derive(Debug)]
    struct Layer {
        text: &'static str,
        cause: Option<Box<Layer>>,
    }

    impl std::fmt::Display for Layer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.text)
        }
    }

    impl std::error::Error for Layer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.cause.as_deref().map(|cause| cause as _)
        }
    }

    fn layers(texts: &[&'static str]) -> Layer {
        texts
            .iter()
            .rev()
            .fold(None, |cause, text| {
                Some(Layer {
                    text,
                    cause: cause.map(Box::new),
                })
            })
            .expect("at least one layer")
    }

    #[test]
    fn an_error_chain_joins_each_layer_once() {
        let chain = layers(&["reading config.yaml", "permission denied"]);

        assert_eq!(
            super::error_chain(&chain),
            "reading config.yaml: permission denied"
        );
    }

    #[test]
    fn a_cause_a_layer_already_printed_is_not_said_twice() {
        let chain = layers(&[
            "failed to read kubeconfig: No such file (os error 2)",
            "No such file (os error 2)",
        ]);

        assert_eq!(
            super::error_chain(&chain),
            "failed to read kubeconfig: No such file (os error 2)"
        );
    }

    use super::*;

    #[test]
    fn a_duration_is_shown_rounded_to_the_millisecond_or_microsecond() {
        use std::time::Duration;
        assert_eq!(display_duration(Duration::from_nanos(1_999_999_699)), "2s");
        assert_eq!(display_duration(Duration::from_nanos(479_999_800)), "480ms");
        assert_eq!(display_duration(Duration::from_millis(1_500)), "1.5s");
        assert_eq!(display_duration(Duration::from_nanos(250_400)), "250µs");
    }

    #[test]
    fn control_characters_are_escaped_and_plain_text_is_kept() {
        assert_eq!(escape_controls("load\n\u{1b}[31m"), "load\\u{a}\\u{1b}[31m");
        assert_eq!(escape_controls("load"), "load");
    }
}
