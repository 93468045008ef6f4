//! The reason cleaner: what a hook says is shown to users, so it is made safe to show (ADR 0100 §5).

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
/// Each layer puts its own context in its message and its cause in `source()`, so walking the
/// chain prints every part exactly once.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
