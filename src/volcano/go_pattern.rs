//! Whether a pattern is one Go's `regexp.Compile` takes, as Volcano's hypernode rule compiles a
//! member's pattern to check it, and Go's words when it is not.
//!
//! `regex-syntax` parses the pattern once it is spelled as that crate reads Go's meaning: the
//! two syntaxes share their grammar but not every letter of it. Go reads `\Q...\E` as quoted
//! letters, a `{` that opens no count (`a{,5}`) as a letter, `[`, `&&`, `~~` and `--` inside a
//! class as letters, `\101` as an octal letter, any name of letters, digits and `_` for a group
//! (the same name twice included); it knows no `\u` escape and no flags but `i`, `m`, `s` and
//! `U`. [`spelled_for_regex_syntax`] reads the pattern as Go's parser does and writes each of
//! those as `regex-syntax` spells it, refusing in Go's words what Go refuses. On top of the
//! parse come Go's own limits on repetition, which that crate does not have: no count above
//! 1000, no operator stacked on another (`a**`), and no nest of counted repetitions whose
//! product passes 1000.

use regex_syntax::ast::{self, Ast, RepetitionKind, RepetitionRange, Visitor};

/// The deepest nesting of groups Go's `regexp` takes in a pattern.
const MAX_NESTING: u32 = 1000;

/// The largest count Go's `regexp` takes in `{m,n}`, and the largest product of the counts of
/// repetitions nested in one another.
const MAX_REPEAT: u32 = 1000;

/// The POSIX classes Go knows between `[:` and `:]` inside a class, each also negated (`^`).
const POSIX_CLASSES: [&str; 14] = [
    "alnum", "alpha", "ascii", "blank", "cntrl", "digit", "graph", "lower", "print", "punct",
    "space", "upper", "word", "xdigit",
];

/// The Perl class escapes (`\d`, `\s`, `\w` and their negations), which both syntaxes read
/// alike, in a class or outside one.
const PERL_CLASSES: &str = "dDsSwW";

/// Why `pattern` is no regular expression to Go, when it is not. The pattern is parsed only,
/// never compiled, so that no pattern costs more than a pass over its text (a compiled
/// `\w{1000}` takes tens of milliseconds and is refused for its size, which Go's engine does
/// not limit).
pub(super) fn parse_pattern(pattern: &str) -> Result<(), String> {
    let spelled = spelled_for_regex_syntax(pattern)?;
    let in_go_words = |error: &ast::Error| match error.kind() {
        ast::ErrorKind::GroupUnclosed => go_error("missing closing )", pattern),
        ast::ErrorKind::GroupUnopened => go_error("unexpected )", pattern),
        ast::ErrorKind::RepetitionMissing => {
            let operator = &spelled[error.span().start.offset..];
            let len = count_len(operator).unwrap_or(1);
            go_error("missing argument to repetition operator", &operator[..len])
        }
        ast::ErrorKind::RepetitionCountInvalid => go_error(
            "invalid repeat count",
            &spelled[error.span().start.offset..error.span().end.offset],
        ),
        _ => error.to_string(),
    };
    let tree = ast::parse::ParserBuilder::new()
        .nest_limit(MAX_NESTING)
        .build()
        .parse(&spelled)
        .map_err(|error| in_go_words(&error))?;
    ast::visit(
        &tree,
        RepeatLimits {
            pattern: &spelled,
            heaviest_inside: Vec::new(),
        },
    )?;
    // What is left to check is what the names in the tree stand for (Unicode classes).
    regex_syntax::hir::translate::Translator::new()
        .translate(&spelled, &tree)
        .map(drop)
        .map_err(|error| error.to_string())
}

/// A parse error as Go's `regexp/syntax.Error` prints it: what is wrong, then the text at fault.
fn go_error(what: &str, text: &str) -> String {
    format!("error parsing regexp: {what}: `{text}`")
}

/// `pattern` read as Go's parser reads it and written as `regex-syntax` reads the same
/// expression, or Go's reason to refuse it. Group names and flags are dropped once Go has
/// checked them: neither changes whether a pattern is one.
fn spelled_for_regex_syntax(pattern: &str) -> Result<String, String> {
    let mut spelled = String::with_capacity(pattern.len() + 8);
    let mut rest = pattern;
    while let Some(next) = rest.chars().next() {
        rest = match next {
            '\\' => escape_outside_class(rest, &mut spelled)?,
            '[' => class(rest, &mut spelled)?,
            '(' if rest[1..].starts_with('?') => group_head(rest, &mut spelled)?,
            '{' => match count_len(rest) {
                Some(len) => {
                    spelled.push_str(&rest[..len]);
                    &rest[len..]
                }
                None => {
                    spelled.push_str(r"\{");
                    &rest[1..]
                }
            },
            '}' | ']' => {
                push_letter(u32::from(next), &mut spelled);
                &rest[1..]
            }
            _ => {
                spelled.push(next);
                &rest[next.len_utf8()..]
            }
        };
    }
    Ok(spelled)
}

/// Writes the letter Go read as code point `code`, escaped where `regex-syntax` would read it
/// as syntax. Go takes a surrogate (`\x{D800}`), which no Rust `char` holds; U+D7FF stands in
/// for each, which keeps every range in order.
fn push_letter(code: u32, spelled: &mut String) {
    let letter = char::from_u32(code).unwrap_or('\u{D7FF}');
    regex_syntax::escape_into(letter.encode_utf8(&mut [0; 4]), spelled);
}

/// An escape outside a class, at the start of `text`: Go's assertions and classes are passed
/// on, `\Q...\E` becomes its letters, anything else is one letter (or Go's refusal).
fn escape_outside_class<'p>(text: &'p str, spelled: &mut String) -> Result<&'p str, String> {
    if let Some(len) = class_escape_len(text)? {
        spelled.push_str(&text[..len]);
        return Ok(&text[len..]);
    }
    let after = &text[1..];
    match after.chars().next() {
        Some('A' | 'b' | 'B' | 'z') => {
            spelled.push_str(&text[..2]);
            Ok(&text[2..])
        }
        Some('C') => Err(go_error("invalid escape sequence", r"\C")),
        Some('Q') => {
            let (quoted, rest) = after[1..].split_once(r"\E").unwrap_or((&after[1..], ""));
            quoted
                .chars()
                .for_each(|letter| push_letter(u32::from(letter), spelled));
            Ok(rest)
        }
        _ => {
            let (code, rest) = escaped_letter(text)?;
            push_letter(code, spelled);
            Ok(rest)
        }
    }
}

/// The length of the class escape at the start of `text` that both syntaxes read alike and
/// that is passed on as written, or `None` when `text` opens none: a Perl class (`\d`), or a
/// Unicode class (`\pL`, `\p{Name}`) whose name is left for `regex-syntax` to look up. Go
/// refuses a `{` never closed.
fn class_escape_len(text: &str) -> Result<Option<usize>, String> {
    let Some(after) = text.strip_prefix('\\') else {
        return Ok(None);
    };
    let mut chars = after.chars();
    match chars.next() {
        Some(kind) if PERL_CLASSES.contains(kind) => Ok(Some(2)),
        Some('p' | 'P') => match chars.next() {
            None => Ok(Some(2)),
            Some('{') => text
                .find('}')
                .map(|end| Some(end + 1))
                .ok_or_else(|| go_error("invalid character class range", text)),
            Some(name) => Ok(Some(2 + name.len_utf8())),
        },
        _ => Ok(None),
    }
}

/// The letter an escape at the start of `text` stands for, as Go's `parseEscape` reads it, and
/// the text after it: punctuation is itself; `\0` and `\1`..`\7` before another octal digit
/// open up to three octal digits; `\xHH`, `\x{H...}` (up to U+10FFFF); the C escapes `\a \f \n
/// \r \t \v`. Go refuses any other.
fn escaped_letter(text: &str) -> Result<(u32, &str), String> {
    let mut chars = text[1..].chars();
    let Some(kind) = chars.next() else {
        return Err(go_error("trailing backslash at end of expression", ""));
    };
    let after = chars.as_str();
    let refused =
        |rest: &str| go_error("invalid escape sequence", &text[..text.len() - rest.len()]);
    let octal_digits = |text: &str| {
        text.bytes()
            .take_while(|digit| (b'0'..=b'7').contains(digit))
            .count()
    };
    match kind {
        _ if kind.is_ascii() && !kind.is_ascii_alphanumeric() => Ok((u32::from(kind), after)),
        '0'..='7' if kind == '0' || octal_digits(after) > 0 => {
            let len = 1 + octal_digits(after).min(2);
            let code = text[1..1 + len]
                .bytes()
                .fold(0, |code, digit| code * 8 + u32::from(digit - b'0'));
            Ok((code, &text[1 + len..]))
        }
        'x' => hex_letter(after).map_err(refused),
        'a' => Ok((0x07, after)),
        'f' => Ok((0x0c, after)),
        'n' => Ok((u32::from('\n'), after)),
        'r' => Ok((u32::from('\r'), after)),
        't' => Ok((u32::from('\t'), after)),
        'v' => Ok((0x0b, after)),
        _ => Err(refused(after)),
    }
}

/// The code point after `\x`, at the start of `after`: two hex digits, or at least one in
/// braces up to U+10FFFF, and the text after it; when there is none, the text after what Go
/// read before refusing.
fn hex_letter(after: &str) -> Result<(u32, &str), &str> {
    let mut chars = after.chars();
    match chars.next() {
        None => Err(after),
        Some('{') => {
            let mut code = 0;
            let mut digits = 0;
            loop {
                let next = chars.next();
                if next == Some('}') && digits > 0 {
                    return Ok((code, chars.as_str()));
                }
                match next.and_then(|digit| digit.to_digit(16)) {
                    Some(digit) if code * 16 + digit <= 0x10FFFF => code = code * 16 + digit,
                    _ => return Err(chars.as_str()),
                }
                digits += 1;
            }
        }
        Some(high) => match (
            high.to_digit(16),
            chars.next().and_then(|low| low.to_digit(16)),
        ) {
            (Some(high), Some(low)) => Ok((high * 16 + low, chars.as_str())),
            _ => Err(chars.as_str()),
        },
    }
}

/// The class at the start of `text` (its `[`), read item by item as Go's `parseClass` does and
/// written back with every letter escaped, so that `regex-syntax` reads no nested class or set
/// operation into it; the text after its `]`. A `]` first in the class is a letter; `a-z` is a
/// range unless `-` is last; `[:name:]` is a POSIX class Go must know.
fn class<'p>(text: &'p str, spelled: &mut String) -> Result<&'p str, String> {
    spelled.push('[');
    let mut rest = &text[1..];
    if let Some(after) = rest.strip_prefix('^') {
        spelled.push('^');
        rest = after;
    }
    let mut first = true;
    loop {
        if !first && let Some(after) = rest.strip_prefix(']') {
            spelled.push(']');
            return Ok(after);
        }
        first = false;
        if let Some(end) = rest.strip_prefix("[:").and_then(|name| name.find(":]")) {
            let named = &rest[..end + 4];
            let name = &named[2..named.len() - 2];
            if !POSIX_CLASSES.contains(&name.strip_prefix('^').unwrap_or(name)) {
                return Err(go_error("invalid character class range", named));
            }
            spelled.push_str(named);
            rest = &rest[named.len()..];
            continue;
        }
        if let Some(len) = class_escape_len(rest)? {
            spelled.push_str(&rest[..len]);
            rest = &rest[len..];
            continue;
        }
        let item = rest;
        let (low, after_low) = class_letter(item, text)?;
        push_letter(low, spelled);
        rest = after_low;
        let range_end = after_low
            .strip_prefix('-')
            .filter(|high| !high.is_empty() && !high.starts_with(']'));
        if let Some(high_text) = range_end {
            let (high, after_high) = class_letter(high_text, text)?;
            if high < low {
                let range = &item[..item.len() - after_high.len()];
                return Err(go_error("invalid character class range", range));
            }
            spelled.push('-');
            push_letter(high, spelled);
            rest = after_high;
        }
    }
}

/// One letter of a class at the start of `text`, escaped or not, and the text after it; Go
/// names the whole class, from its `[` to the pattern's end, when it is never closed.
fn class_letter<'p>(text: &'p str, class: &str) -> Result<(u32, &'p str), String> {
    match text.chars().next() {
        None => Err(go_error("missing closing ]", class)),
        Some('\\') => escaped_letter(text),
        Some(letter) => Ok((u32::from(letter), &text[letter.len_utf8()..])),
    }
}

/// The length of the count `{m}`, `{m,}` or `{m,n}` at the start of `text`, as Go's parser reads
/// one (each number at least one digit, no leading zero), or `None` when that `{` opens no
/// count and Go reads it as a letter.
fn count_len(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let number_end = |start: usize| {
        let digits = bytes[start.min(bytes.len())..]
            .iter()
            .take_while(|byte| byte.is_ascii_digit())
            .count();
        (digits == 1 || digits > 1 && bytes[start] != b'0').then_some(start + digits)
    };
    let mut end = number_end(1)?;
    if bytes.get(end) == Some(&b',') {
        end += 1;
        if bytes.get(end) != Some(&b'}') {
            end = number_end(end)?;
        }
    }
    (bytes.get(end) == Some(&b'}')).then_some(end + 1)
}

/// A group's head at the start of `text` (its `(?`), as Go's `parsePerlFlags` reads it, and
/// the text after it: a name (`(?P<name>` or `(?<name>`) of letters, digits and `_`, or flags
/// `i`, `m`, `s`, `U` with at most one `-` that clears at least one, ending the head with `)`
/// or opening a group with `:`. Names and flags are checked, then dropped.
fn group_head<'p>(text: &'p str, spelled: &mut String) -> Result<&'p str, String> {
    let name_start = if text.len() > 4 && text[2..].starts_with("P<") {
        Some(4)
    } else if text.len() > 3 && text[2..].starts_with('<') {
        Some(3)
    } else {
        None
    };
    if let Some(start) = name_start {
        let Some(end) = text.find('>') else {
            return Err(go_error("invalid named capture", text));
        };
        let name = &text[start..end];
        if name.is_empty()
            || !name
                .bytes()
                .all(|byte| byte == b'_' || byte.is_ascii_alphanumeric())
        {
            return Err(go_error("invalid named capture", &text[..=end]));
        }
        spelled.push('(');
        return Ok(&text[end + 1..]);
    }
    let mut clearing = false;
    let mut flag_since_sign = false;
    for (at, next) in text[2..].char_indices() {
        let read = &text[..2 + at + next.len_utf8()];
        match next {
            'i' | 'm' | 's' | 'U' => flag_since_sign = true,
            '-' if !clearing => {
                clearing = true;
                flag_since_sign = false;
            }
            ':' | ')' if !clearing || flag_since_sign => {
                if next == ':' {
                    spelled.push_str("(?:");
                }
                return Ok(&text[read.len()..]);
            }
            _ => return Err(go_error("invalid or unsupported Perl syntax", read)),
        }
    }
    Err(go_error("invalid or unsupported Perl syntax", text))
}

/// Go's repetition rules (`regexp/syntax`'s `parser.repeat` and `repeatIsValid`), checked as
/// each repetition closes, which is the order Go parses them in, so that the first rule broken
/// is the one Go reports. For each counted repetition still open, `heaviest_inside` holds the
/// largest product of counts along one path below it.
struct RepeatLimits<'p> {
    pattern: &'p str,
    heaviest_inside: Vec<u64>,
}

impl Visitor for RepeatLimits<'_> {
    type Output = ();
    type Err = String;

    fn finish(self) -> Result<(), String> {
        Ok(())
    }

    fn visit_pre(&mut self, node: &Ast) -> Result<(), String> {
        if let Ast::Repetition(repetition) = node {
            if matches!(repetition.op.kind, RepetitionKind::Range(_)) {
                self.heaviest_inside.push(1);
            }
        }
        Ok(())
    }

    fn visit_post(&mut self, node: &Ast) -> Result<(), String> {
        let Ast::Repetition(repetition) = node else {
            return Ok(());
        };
        let pattern = self.pattern;
        let operator = &pattern[repetition.op.span.start.offset..repetition.op.span.end.offset];
        let counts = match &repetition.op.kind {
            RepetitionKind::Range(RepetitionRange::Exactly(count)) => Some((*count, Some(*count))),
            RepetitionKind::Range(RepetitionRange::AtLeast(min)) => Some((*min, None)),
            RepetitionKind::Range(RepetitionRange::Bounded(min, max)) => Some((*min, Some(*max))),
            _ => None,
        };
        if let Some((min, max)) = counts {
            if min > MAX_REPEAT || max.is_some_and(|max| max > MAX_REPEAT) {
                return Err(go_error("invalid repeat count", operator));
            }
        }
        if let Ast::Repetition(inner) = repetition.ast.as_ref() {
            let stacked = &pattern[inner.op.span.start.offset..repetition.op.span.end.offset];
            return Err(go_error("invalid nested repetition operator", stacked));
        }
        let Some((min, max)) = counts else {
            return Ok(());
        };
        let inside = self.heaviest_inside.pop().unwrap_or(1);
        // Go weighs a repetition by its largest count (its least, when unbounded), and does
        // not look inside one that repeats nothing (`{0}`).
        let heaviest = match max {
            Some(0) => 1,
            _ => u64::from(max.unwrap_or(min).max(1)) * inside,
        };
        if heaviest > u64::from(MAX_REPEAT) {
            return Err(go_error("invalid repeat count", operator));
        }
        if let Some(around) = self.heaviest_inside.last_mut() {
            *around = (*around).max(heaviest);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::parse_pattern;
    use proptest::prelude::*;

    proptest! {
        /// Slicing by byte offsets must hold on any text: the letters Go's syntax gives a
        /// meaning, several-byte letters among them.
        #[test]
        fn any_text_is_judged_without_a_panic(
            pattern in r"[\\\[\]{}()?*+|^$.:<>PQEUpxdims0-9,&~é\u{10000}-]{0,24}"
        ) {
            let _ = parse_pattern(&pattern);
        }
    }
}
