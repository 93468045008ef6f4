//! Whether a schedule is one that robfig/cron v3's `ParseStandard` accepts: the grammar of
//! Volcano's cronjob schedules.
//!
//! The grammar, as that parser reads it:
//! - A schedule starting with `@` is a descriptor, matched exactly (case and blanks count):
//!   `@yearly`, `@annually`, `@monthly`, `@weekly`, `@daily`, `@midnight`, `@hourly`, or
//!   `@every ` followed by a Go duration (any Go accepts, zero and negative included).
//! - Otherwise the schedule splits on Unicode white space into exactly five fields: minute
//!   (0–59), hour (0–23), day of month (1–31), month (1–12 or `jan`…`dec`) and day of week (0–6
//!   or `sun`…`sat`; `7` is not Sunday).
//! - A field is a list on `,` whose empty items are dropped (so `1,,2` is `1,2`, and `,` alone
//!   is an empty list that is accepted). Each item is `*` or `?` (the whole range; whatever
//!   follows a `-` after it is ignored), a value, or `low-high`, optionally followed by
//!   `/step`; `value/step` runs from the value to the field's maximum.
//! - Values are decimal integers as Go's `strconv.Atoi` reads them (a leading `+` allowed) or,
//!   in the month and weekday fields, names compared after Go's lower-casing. Steps are
//!   integers only, and at least 1.
//!
//! The `TZ=` and `CRON_TZ=` prefixes robfig reads are not: Volcano refuses any schedule that
//! contains `TZ` before it parses one.

use crate::admission::{Grammar, parse_nanos};

/// Why a schedule is not one robfig/cron's standard parser accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ScheduleError {
    /// The schedule is empty.
    Empty,
    /// It starts with `@` but is no descriptor.
    UnknownDescriptor,
    /// `@every ` is not followed by a Go duration.
    BadDuration,
    /// It has other than five fields.
    FieldCount,
    /// A value or step is neither an integer (nor, where names are allowed, a name).
    BadNumber,
    /// A value or step is below zero.
    NegativeNumber,
    /// A range has more than one `-`.
    TooManyHyphens,
    /// An item has more than one `/`.
    TooManySlashes,
    /// A range starts below the field's minimum.
    BelowMinimum,
    /// A range ends above the field's maximum.
    AboveMaximum,
    /// A range starts after it ends.
    Reversed,
    /// A step of 0.
    ZeroStep,
}

/// One field's bounds and the names its values may be written as.
struct Bounds {
    min: u64,
    max: u64,
    /// Each name and its value.
    names: &'static [(&'static str, u64)],
}

const MONTHS: &[(&str, u64)] = &[
    ("jan", 1),
    ("feb", 2),
    ("mar", 3),
    ("apr", 4),
    ("may", 5),
    ("jun", 6),
    ("jul", 7),
    ("aug", 8),
    ("sep", 9),
    ("oct", 10),
    ("nov", 11),
    ("dec", 12),
];

const WEEKDAYS: &[(&str, u64)] = &[
    ("sun", 0),
    ("mon", 1),
    ("tue", 2),
    ("wed", 3),
    ("thu", 4),
    ("fri", 5),
    ("sat", 6),
];

/// Minute, hour, day of month, month, day of week.
const FIELDS: [Bounds; 5] = [
    Bounds {
        min: 0,
        max: 59,
        names: &[],
    },
    Bounds {
        min: 0,
        max: 23,
        names: &[],
    },
    Bounds {
        min: 1,
        max: 31,
        names: &[],
    },
    Bounds {
        min: 1,
        max: 12,
        names: MONTHS,
    },
    Bounds {
        min: 0,
        max: 6,
        names: WEEKDAYS,
    },
];

const DESCRIPTORS: &[&str] = &[
    "@yearly",
    "@annually",
    "@monthly",
    "@weekly",
    "@daily",
    "@midnight",
    "@hourly",
];

/// Checks `schedule` as robfig/cron v3's `ParseStandard` parses it (see the module's grammar).
///
/// # Errors
/// The first [`ScheduleError`] met, in the order robfig's parser meets them.
pub(crate) fn check_schedule(schedule: &str) -> Result<(), ScheduleError> {
    if schedule.is_empty() {
        return Err(ScheduleError::Empty);
    }
    if schedule.starts_with('@') {
        return check_descriptor(schedule);
    }
    let fields: Vec<&str> = schedule.split_whitespace().collect();
    if fields.len() != FIELDS.len() {
        return Err(ScheduleError::FieldCount);
    }
    for (field, bounds) in fields.into_iter().zip(&FIELDS) {
        for item in field.split(',').filter(|item| !item.is_empty()) {
            check_item(item, bounds)?;
        }
    }
    Ok(())
}

fn check_descriptor(schedule: &str) -> Result<(), ScheduleError> {
    if DESCRIPTORS.contains(&schedule) {
        return Ok(());
    }
    let every = schedule
        .strip_prefix("@every ")
        .ok_or(ScheduleError::UnknownDescriptor)?;
    parse_nanos(every, Grammar::Go)
        .map(drop)
        .map_err(|_| ScheduleError::BadDuration)
}

/// One item of a field's list: `*`, `?`, a value or a range, optionally with a step.
fn check_item(item: &str, bounds: &Bounds) -> Result<(), ScheduleError> {
    let (range, step) = match item.split_once('/') {
        Some((range, step)) => (range, Some(step)),
        None => (item, None),
    };
    let (low, high) = match range.split_once('-') {
        Some((low, high)) => (low, Some(high)),
        None => (range, None),
    };
    let (start, mut end) = if low == "*" || low == "?" {
        (bounds.min, bounds.max)
    } else {
        let start = value(low, bounds)?;
        match high {
            None => (start, start),
            Some(high) if high.contains('-') => return Err(ScheduleError::TooManyHyphens),
            Some(high) => (start, value(high, bounds)?),
        }
    };
    let step = match step {
        None => 1,
        Some(step) if step.contains('/') => return Err(ScheduleError::TooManySlashes),
        Some(step) => {
            // A single value with a step runs to the field's maximum.
            if high.is_none() {
                end = bounds.max;
            }
            number(step)?
        }
    };
    if start < bounds.min {
        return Err(ScheduleError::BelowMinimum);
    }
    if end > bounds.max {
        return Err(ScheduleError::AboveMaximum);
    }
    if start > end {
        return Err(ScheduleError::Reversed);
    }
    if step == 0 {
        return Err(ScheduleError::ZeroStep);
    }
    Ok(())
}

/// A value: one of the field's names, else a number.
fn value(text: &str, bounds: &Bounds) -> Result<u64, ScheduleError> {
    let folded = go_lowercase(text);
    match bounds.names.iter().find(|(name, _)| *name == folded) {
        Some(&(_, value)) => Ok(value),
        None => number(text),
    }
}

/// A non-negative decimal integer, as Go's `strconv.Atoi` reads one (an optional sign, then
/// digits, within 64 bits).
fn number(text: &str) -> Result<u64, ScheduleError> {
    let parsed: i64 = text.parse().map_err(|_| ScheduleError::BadNumber)?;
    u64::try_from(parsed).map_err(|_| ScheduleError::NegativeNumber)
}

/// `text` lower-cased as far as Go's `strings.ToLower` can make it a name: ASCII letters, and
/// the two other letters Go lowers to ASCII ones (`İ` to `i`, the Kelvin sign to `k`). Any other
/// letter is kept, and so matches no name, as it would not in Go.
fn go_lowercase(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '\u{130}' => 'i',
            '\u{212a}' => 'k',
            c => c.to_ascii_lowercase(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{ScheduleError, check_schedule};

    #[test]
    fn five_fields_of_stars_or_question_marks_are_a_schedule() {
        assert_eq!(check_schedule("* * * * *"), Ok(()));
        assert_eq!(check_schedule("? ? ? ? ?"), Ok(()));
    }

    #[test]
    fn four_or_six_fields_are_refused() {
        assert_eq!(check_schedule("* * * *"), Err(ScheduleError::FieldCount));
        assert_eq!(
            check_schedule("0 * * * * *"),
            Err(ScheduleError::FieldCount)
        );
    }

    #[test]
    fn fields_split_on_any_white_space_and_blanks_around_them_are_ignored() {
        assert_eq!(check_schedule(" 0\t12 *\u{a0}* * \n"), Ok(()));
    }

    #[test]
    fn ranges_steps_and_lists_combine() {
        assert_eq!(check_schedule("0-30/5,45 */2 1-31 1,6,12 1-5"), Ok(()));
    }

    #[test]
    fn each_fields_bounds_are_inclusive() {
        assert_eq!(check_schedule("59 23 31 12 6"), Ok(()));
        assert_eq!(check_schedule("0 0 1 1 0"), Ok(()));
    }

    #[test]
    fn a_value_past_a_fields_bounds_is_refused() {
        for schedule in ["60 * * * *", "* 24 * * *", "* * 32 * *", "* * * 13 *"] {
            assert_eq!(
                check_schedule(schedule),
                Err(ScheduleError::AboveMaximum),
                "{schedule}"
            );
        }
        for schedule in ["* * 0 * *", "* * * 0 *"] {
            assert_eq!(
                check_schedule(schedule),
                Err(ScheduleError::BelowMinimum),
                "{schedule}"
            );
        }
    }

    #[test]
    fn seven_is_not_sunday() {
        assert_eq!(
            check_schedule("* * * * 7"),
            Err(ScheduleError::AboveMaximum)
        );
        assert_eq!(check_schedule("* * * * 0"), Ok(()));
    }

    #[test]
    fn a_value_with_a_step_runs_to_the_fields_maximum() {
        assert_eq!(check_schedule("5/15 * * * *"), Ok(()));
        assert_eq!(check_schedule("60/5 * * * *"), Err(ScheduleError::Reversed));
    }

    #[test]
    fn a_reversed_range_is_refused() {
        assert_eq!(check_schedule("5-1 * * * *"), Err(ScheduleError::Reversed));
    }

    #[test]
    fn a_step_of_zero_or_below_is_refused() {
        assert_eq!(check_schedule("*/0 * * * *"), Err(ScheduleError::ZeroStep));
        assert_eq!(
            check_schedule("*/-1 * * * *"),
            Err(ScheduleError::NegativeNumber)
        );
    }

    #[test]
    fn a_second_hyphen_or_slash_is_refused() {
        assert_eq!(
            check_schedule("1-2-3 * * * *"),
            Err(ScheduleError::TooManyHyphens)
        );
        assert_eq!(
            check_schedule("*/2/3 * * * *"),
            Err(ScheduleError::TooManySlashes)
        );
    }

    #[test]
    fn what_follows_a_star_and_a_hyphen_is_ignored() {
        assert_eq!(check_schedule("*-2-x * * * *"), Ok(()));
    }

    #[test]
    fn a_value_takes_a_plus_sign_but_nothing_else_but_digits() {
        assert_eq!(check_schedule("+5 * * * *"), Ok(()));
        for schedule in [
            "x * * * *",
            "1x * * * *",
            "+ * * * *",
            "/5 * * * *",
            "- * * * *",
        ] {
            assert_eq!(
                check_schedule(schedule),
                Err(ScheduleError::BadNumber),
                "{schedule}"
            );
        }
    }

    #[test]
    fn a_number_past_64_bits_is_refused() {
        assert_eq!(
            check_schedule("99999999999999999999 * * * *"),
            Err(ScheduleError::BadNumber)
        );
    }

    #[test]
    fn empty_list_items_are_dropped() {
        assert_eq!(check_schedule("1,,2 * * * *"), Ok(()));
        assert_eq!(check_schedule(", * * * *"), Ok(()));
    }

    #[test]
    fn month_and_weekday_names_match_in_any_case() {
        assert_eq!(check_schedule("0 0 * JAN-Dec mon-FRI"), Ok(()));
        assert_eq!(check_schedule("0 0 * * sun,sat"), Ok(()));
    }

    #[test]
    fn names_are_lowered_as_go_lowers_them() {
        // Go lowers the dotted capital I to a plain `i`.
        assert_eq!(check_schedule("0 0 * * FR\u{130}"), Ok(()));
        assert_eq!(
            check_schedule("0 0 * * fr\u{131}"),
            Err(ScheduleError::BadNumber)
        );
    }

    #[test]
    fn names_are_only_for_their_own_field_and_not_for_steps() {
        assert_eq!(check_schedule("0 0 * * jan"), Err(ScheduleError::BadNumber));
        assert_eq!(check_schedule("0 0 mon * *"), Err(ScheduleError::BadNumber));
        assert_eq!(
            check_schedule("0 0 * */feb *"),
            Err(ScheduleError::BadNumber)
        );
    }

    #[test]
    fn every_descriptor_is_a_schedule() {
        for descriptor in [
            "@yearly",
            "@annually",
            "@monthly",
            "@weekly",
            "@daily",
            "@midnight",
            "@hourly",
        ] {
            assert_eq!(check_schedule(descriptor), Ok(()), "{descriptor}");
        }
    }

    #[test]
    fn descriptors_match_exactly() {
        for schedule in ["@DAILY", "@daily ", "@every", "@reboot"] {
            assert_eq!(
                check_schedule(schedule),
                Err(ScheduleError::UnknownDescriptor),
                "{schedule}"
            );
        }
        // Blanks before the `@` make it one field, not a descriptor.
        assert_eq!(check_schedule(" @daily"), Err(ScheduleError::FieldCount));
    }

    #[test]
    fn every_takes_any_go_duration() {
        for schedule in [
            "@every 1m",
            "@every 1h30m",
            "@every 1.5h",
            "@every 0",
            "@every -1m",
        ] {
            assert_eq!(check_schedule(schedule), Ok(()), "{schedule}");
        }
        for schedule in [
            "@every 90",
            "@every  1m",
            "@every 1m ",
            "@every 1d",
            "@every ",
        ] {
            assert_eq!(
                check_schedule(schedule),
                Err(ScheduleError::BadDuration),
                "{schedule}"
            );
        }
    }

    #[test]
    fn an_empty_schedule_is_refused() {
        assert_eq!(check_schedule(""), Err(ScheduleError::Empty));
    }
}
