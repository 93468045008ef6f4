//! The crate's one duration parser, in two grammars that share one implementation.
//!
//! [`Grammar::Go`] is Go's `time.ParseDuration`, exactly: the grammar the Kubernetes API server
//! and Dexaflow's Go client write `?timeout=` in. `[-+]?([0-9]*(\.[0-9]*)?[a-z]+)+`, or `0` alone
//! (with or without a sign); the units are `ns`, `us`, `µs` (U+00B5), `μs` (U+03BC), `ms`, `s`,
//! `m` and `h`; components add up (`1h2m0.5s`); a fraction is scaled as Go scales it, through a
//! 64-bit float; the result is a signed count of nanoseconds that fits in 64 bits.
//!
//! [`Grammar::Human`] is what the config file, the hook specs and the command line take: Go's
//! grammar, plus blanks around the text, between components and between a number and its unit
//! (`1h 30m`, `5 s`), and the longer unit names people write (`nanos`, `nsec`, `usec`, `millis`,
//! `msec`, `sec`, `secs`, `second`, `seconds`, `min`, `mins`, `minute`, `minutes`, `hr`, `hrs`,
//! `hour`, `hours`, `d`, `day`, `days`, `w`, `wk`, `wks`, `week`, `weeks`, `M`, `month`,
//! `months` (30.44 days), `y`, `yr`, `yrs`, `year`, `years` (365.25 days)), so that every
//! duration written for the parser the crate used before (humantime's) still reads the same, up
//! to Go's limit of about 292 years.

use std::fmt;
use std::time::Duration;

/// Which texts a duration may be written as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Grammar {
    /// Go's `time.ParseDuration`, exactly: for values a Go program wrote (the wire).
    Go,
    /// Go's grammar with blanks and longer unit names allowed: for values people wrote.
    Human,
}

/// Why a text is not a duration, in Go's words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DurationError {
    /// No number where one must be, a number out of range, or nothing at all.
    Invalid,
    /// A negative duration where only a length of time makes sense ([`parse_duration`]).
    Negative,
    /// A number with no unit after it, such as `1`.
    MissingUnit,
    /// A unit Go does not know, such as `e` in `1e3s`.
    UnknownUnit(String),
    /// A duration too long for a signed 64-bit count of nanoseconds (about 292 years), which Go
    /// calls invalid too.
    OutOfRange,
}

impl fmt::Display for DurationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DurationError::Invalid => f.write_str("invalid duration"),
            DurationError::Negative => f.write_str("negative duration"),
            DurationError::MissingUnit => f.write_str("missing unit in duration"),
            DurationError::UnknownUnit(unit) => write!(f, "unknown unit {unit:?} in duration"),
            DurationError::OutOfRange => {
                f.write_str("duration out of range: about 292 years at most")
            }
        }
    }
}

impl DurationError {
    /// `got`, a rejected text as an error shows it, followed by why it is no duration where
    /// that says more than that it is none: `"-1s" (negative duration)`.
    pub fn explained(&self, got: String) -> String {
        match self {
            DurationError::Invalid => got,
            reason => format!("{got} ({reason})"),
        }
    }
}

const NANOSECOND: u64 = 1;
const MICROSECOND: u64 = 1_000 * NANOSECOND;
const MILLISECOND: u64 = 1_000 * MICROSECOND;
const SECOND: u64 = 1_000 * MILLISECOND;
const MINUTE: u64 = 60 * SECOND;
const HOUR: u64 = 60 * MINUTE;

/// 2⁶³: one past the largest positive duration, and the magnitude of the most negative one.
const LIMIT: u64 = 1 << 63;

const DAY: u64 = 24 * HOUR;
const WEEK: u64 = 7 * DAY;
/// 30.44 days, as the parser the crate used before counted a month.
const MONTH: u64 = 2_630_016 * SECOND;
/// 365.25 days.
const YEAR: u64 = 31_557_600 * SECOND;

fn unit(name: &str, grammar: Grammar) -> Option<u64> {
    let go = match name {
        "ns" => Some(NANOSECOND),
        "us" | "\u{b5}s" | "\u{3bc}s" => Some(MICROSECOND),
        "ms" => Some(MILLISECOND),
        "s" => Some(SECOND),
        "m" => Some(MINUTE),
        "h" => Some(HOUR),
        _ => None,
    };
    match grammar {
        Grammar::Go => go,
        Grammar::Human => go.or(match name {
            "nanos" | "nsec" => Some(NANOSECOND),
            "usec" => Some(MICROSECOND),
            "millis" | "msec" => Some(MILLISECOND),
            "sec" | "secs" | "second" | "seconds" => Some(SECOND),
            "min" | "mins" | "minute" | "minutes" => Some(MINUTE),
            "hr" | "hrs" | "hour" | "hours" => Some(HOUR),
            "d" | "day" | "days" => Some(DAY),
            "w" | "wk" | "wks" | "week" | "weeks" => Some(WEEK),
            "M" | "month" | "months" => Some(MONTH),
            "y" | "yr" | "yrs" | "year" | "years" => Some(YEAR),
            _ => None,
        }),
    }
}

/// The length of time `text` says, in the `Grammar::Human` grammar: what a config key, a
/// hook spec or a flag takes.
///
/// # Errors
/// A [`DurationError`] when `text` is no duration, or [`DurationError::Negative`] when it is
/// below zero.
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let nanos = parse_nanos(text, Grammar::Human)?;
    u64::try_from(nanos)
        .map(Duration::from_nanos)
        .map_err(|_| DurationError::Negative)
}

/// The signed nanoseconds `text` says in `grammar`; with [`Grammar::Go`], as Go's
/// `time.ParseDuration` reads it.
///
/// # Errors
/// A [`DurationError`] wherever Go returns an error (or, with [`Grammar::Human`], where Go
/// would return one for the text without its blanks and longer unit names).
pub(crate) fn parse_nanos(text: &str, grammar: Grammar) -> Result<i64, DurationError> {
    let human = grammar == Grammar::Human;
    let mut rest = if human { text.trim() } else { text }.as_bytes();
    let mut negative = false;
    if let Some((&sign, after)) = rest.split_first() {
        if sign == b'-' || sign == b'+' {
            negative = sign == b'-';
            rest = after;
        }
    }
    if rest == b"0" {
        return Ok(0);
    }
    if rest.is_empty() {
        return Err(DurationError::Invalid);
    }
    let mut total: u64 = 0;
    while let Some(&first) = rest.first() {
        if !(first == b'.' || first.is_ascii_digit()) {
            return Err(DurationError::Invalid);
        }
        let before = rest.len();
        let (mut value, after) = leading_int(rest).ok_or(DurationError::OutOfRange)?;
        rest = after;
        let has_integer = rest.len() != before;
        let mut fraction = 0;
        let mut scale = 1.0;
        let mut has_fraction = false;
        if let Some(after) = rest.strip_prefix(b".") {
            let (digits, digits_scale, after_digits) = leading_fraction(after);
            has_fraction = after_digits.len() != after.len();
            (fraction, scale, rest) = (digits, digits_scale, after_digits);
        }
        if !has_integer && !has_fraction {
            return Err(DurationError::Invalid);
        }
        if human {
            rest = rest.trim_ascii_start();
        }
        let end = rest
            .iter()
            .position(|&byte| {
                byte == b'.' || byte.is_ascii_digit() || (human && byte.is_ascii_whitespace())
            })
            .unwrap_or(rest.len());
        if end == 0 {
            return Err(DurationError::MissingUnit);
        }
        let name = String::from_utf8_lossy(&rest[..end]);
        let unit =
            unit(&name, grammar).ok_or_else(|| DurationError::UnknownUnit(name.into_owned()))?;
        rest = &rest[end..];
        if human {
            rest = rest.trim_ascii_start();
        }
        if value > LIMIT / unit {
            return Err(DurationError::OutOfRange);
        }
        value *= unit;
        if fraction > 0 {
            // Go scales the fraction through a float: nanosecond-exact up to an hour's digits.
            value += (fraction as f64 * (unit as f64 / scale)) as u64;
            if value > LIMIT {
                return Err(DurationError::OutOfRange);
            }
        }
        total = total.checked_add(value).ok_or(DurationError::OutOfRange)?;
        if total > LIMIT {
            return Err(DurationError::OutOfRange);
        }
    }
    match (negative, i64::try_from(total)) {
        (false, Ok(nanos)) => Ok(nanos),
        (true, Ok(nanos)) => Ok(-nanos),
        (true, Err(_)) => Ok(i64::MIN),
        (false, Err(_)) => Err(DurationError::OutOfRange),
    }
}

/// The leading `[0-9]*` of `text` and what follows; `None` on overflow past 2⁶³.
fn leading_int(text: &[u8]) -> Option<(u64, &[u8])> {
    let end = text
        .iter()
        .position(|byte| !byte.is_ascii_digit())
        .unwrap_or(text.len());
    let mut value: u64 = 0;
    for &digit in &text[..end] {
        if value > LIMIT / 10 {
            return None;
        }
        value = value * 10 + u64::from(digit - b'0');
        if value > LIMIT {
            return None;
        }
    }
    Some((value, &text[end..]))
}

/// The leading `[0-9]*` of a fraction, its scale (10 to the digits kept) and what follows;
/// digits past 64-bit precision are skipped, as Go skips them.
fn leading_fraction(text: &[u8]) -> (u64, f64, &[u8]) {
    let end = text
        .iter()
        .position(|byte| !byte.is_ascii_digit())
        .unwrap_or(text.len());
    let mut value: u64 = 0;
    let mut scale = 1.0;
    let mut overflow = false;
    for &digit in &text[..end] {
        if overflow {
            continue;
        }
        if value > (LIMIT - 1) / 10 {
            overflow = true;
            continue;
        }
        let next = value * 10 + u64::from(digit - b'0');
        if next > LIMIT {
            overflow = true;
            continue;
        }
        value = next;
        scale *= 10.0;
    }
    (value, scale, &text[end..])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Go's own table (`time_test.go`, `parseDurationTests`), and its rejects.
    #[test]
    fn go_durations_parse_as_go_parses_them() {
        let s = SECOND as i64;
        let ms = MILLISECOND as i64;
        let us = MICROSECOND as i64;
        let m = MINUTE as i64;
        let h = HOUR as i64;
        let accepted: &[(&str, i64)] = &[
            ("0", 0),
            ("5s", 5 * s),
            ("30s", 30 * s),
            ("1478s", 1478 * s),
            ("-5s", -5 * s),
            ("+5s", 5 * s),
            ("-0", 0),
            ("+0", 0),
            ("5.0s", 5 * s),
            ("5.6s", 5 * s + 600 * ms),
            ("5.s", 5 * s),
            (".5s", 500 * ms),
            ("1.0s", s),
            ("1.00s", s),
            ("1.004s", s + 4 * ms),
            ("1.0040s", s + 4 * ms),
            ("100.00100s", 100 * s + ms),
            ("10ns", 10),
            ("11us", 11 * us),
            ("12\u{b5}s", 12 * us),
            ("12\u{3bc}s", 12 * us),
            ("13ms", 13 * ms),
            ("14s", 14 * s),
            ("15m", 15 * m),
            ("16h", 16 * h),
            ("3h30m", 3 * h + 30 * m),
            ("10.5s4m", 4 * m + 10 * s + 500 * ms),
            ("-2m3.4s", -(2 * m + 3 * s + 400 * ms)),
            ("1h2m3s4ms5us6ns", h + 2 * m + 3 * s + 4 * ms + 5 * us + 6),
            ("39h9m14.425s", 39 * h + 9 * m + 14 * s + 425 * ms),
            ("1h2m0.5s", h + 2 * m + 500 * ms),
            ("52763797000ns", 52763797000),
            ("0.3333333333333333333h", 20 * m),
            ("9007199254740993ns", (1 << 53) + 1),
            ("9223372036854775807ns", i64::MAX),
            ("9223372036854775.807us", i64::MAX),
            ("9223372036s854ms775us807ns", i64::MAX),
            ("-9223372036854775808ns", i64::MIN),
            ("-9223372036854775.808us", i64::MIN),
            ("-9223372036s854ms775us808ns", i64::MIN),
            ("-2562047h47m16.854775808s", i64::MIN),
            ("0.100000000000000000000h", 6 * m),
            ("0.830103483285477580700h", 49 * m + 48 * s + 372539827),
        ];
        for &(text, nanos) in accepted {
            assert_eq!(parse_nanos(text, Grammar::Go), Ok(nanos), "{text:?}");
        }
        let rejected = [
            ("", DurationError::Invalid),
            ("3", DurationError::MissingUnit),
            ("1", DurationError::MissingUnit),
            ("-", DurationError::Invalid),
            ("s", DurationError::Invalid),
            (".", DurationError::Invalid),
            ("-.", DurationError::Invalid),
            (".s", DurationError::Invalid),
            ("+.s", DurationError::Invalid),
            ("+-1s", DurationError::Invalid),
            ("1.5.5s", DurationError::MissingUnit),
            ("1e3s", DurationError::UnknownUnit("e".to_owned())),
            ("1d", DurationError::UnknownUnit("d".to_owned())),
            ("1S", DurationError::UnknownUnit("S".to_owned())),
            (" 1s", DurationError::Invalid),
            ("1s ", DurationError::UnknownUnit("s ".to_owned())),
            ("00", DurationError::MissingUnit),
            ("9223372036854775808ns", DurationError::OutOfRange),
            ("9223372036854775.808us", DurationError::OutOfRange),
            ("9223372036854ms775us808ns", DurationError::OutOfRange),
            ("-9223372036854775809ns", DurationError::OutOfRange),
            ("9223372036854775810ns", DurationError::OutOfRange),
            ("9223372036854776us", DurationError::OutOfRange),
            ("3000000h", DurationError::OutOfRange),
        ];
        for (text, error) in rejected {
            assert_eq!(parse_nanos(text, Grammar::Go), Err(error), "{text:?}");
        }
    }

    #[test]
    fn human_durations_take_blanks_and_long_unit_names() {
        let accepted: &[(&str, Duration)] = &[
            ("500ms", Duration::from_millis(500)),
            (" 2s ", Duration::from_secs(2)),
            ("1h 30m", Duration::from_secs(90 * 60)),
            ("5 s", Duration::from_secs(5)),
            ("1.5h", Duration::from_secs(90 * 60)),
            ("0", Duration::ZERO),
            ("0s", Duration::ZERO),
            ("10 minutes", Duration::from_secs(600)),
            ("2days 1hr", Duration::from_secs(49 * 3600)),
            ("1w", Duration::from_secs(7 * 24 * 3600)),
            ("1y 1M", Duration::from_secs(31_557_600 + 2_630_016)),
            ("3sec 20msec", Duration::from_millis(3020)),
            ("12\u{b5}s", Duration::from_micros(12)),
        ];
        for &(text, duration) in accepted {
            assert_eq!(parse_duration(text), Ok(duration), "{text:?}");
        }
    }

    #[test]
    fn human_durations_refuse_what_is_no_length_of_time() {
        let rejected = [
            ("", DurationError::Invalid),
            ("   ", DurationError::Invalid),
            ("fast", DurationError::Invalid),
            ("15", DurationError::MissingUnit),
            ("1 2s", DurationError::MissingUnit),
            ("1mo", DurationError::UnknownUnit("mo".to_owned())),
            ("5S", DurationError::UnknownUnit("S".to_owned())),
            ("-5s", DurationError::Negative),
            ("1h-5m", DurationError::UnknownUnit("h-".to_owned())),
            ("300 years", DurationError::OutOfRange),
        ];
        for (text, error) in rejected {
            assert_eq!(parse_duration(text), Err(error), "{text:?}");
        }
    }

    #[test]
    fn go_grammar_takes_neither_blanks_nor_long_unit_names() {
        assert_eq!(
            parse_nanos("1h 30m", Grammar::Go),
            Err(DurationError::UnknownUnit("h ".to_owned()))
        );
        assert_eq!(
            parse_nanos("5sec", Grammar::Go),
            Err(DurationError::UnknownUnit("sec".to_owned()))
        );
        assert_eq!(parse_nanos("-5s", Grammar::Go), Ok(-5 * SECOND as i64));
    }
}
