//! Kubernetes resource quantities (`500m`, `2`, `512Mi`, `1.5G`), parsed to compare sizes and
//! written back in Kubernetes' canonical form.

use thiserror::Error;

/// A quantity that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{quantity:?} is not a Kubernetes quantity such as \"500m\", \"2\" or \"512Mi\"")]
pub struct QuantityError {
    /// The text that did not parse.
    pub quantity: String,
}

/// Parses a Kubernetes quantity to thousandths of its unit, rounded up.
///
/// Thousandths keep CPU exact (`500m` is 500) and are fine-grained enough for bytes; rounding up
/// means a fractional quantity never looks smaller than it is. As Kubernetes, any number of
/// digits is read exactly before rounding (`1.` and 38 zeros and `1` is 1001).
///
/// ```
/// use dexaflow_admission::admission::parse_milli;
/// assert_eq!(parse_milli("500m").unwrap(), 500);
/// assert_eq!(parse_milli("1Ki").unwrap(), 1_024_000);
/// assert_eq!(parse_milli("1.5").unwrap(), 1_500);
/// assert_eq!(parse_milli("1u").unwrap(), 1);
/// ```
///
/// # Errors
/// A [`QuantityError`] naming the text when it is not a non-negative quantity, whitespace
/// around it included: Kubernetes refuses `" 1"`, so a pod must never be given one.
pub fn parse_milli(quantity: &str) -> Result<u128, QuantityError> {
    parse_scaled(quantity, 3)
}

/// The largest quantity Kubernetes keeps, in whole units: its `ParseQuantity` caps a larger one
/// (`1e999`) to this.
pub(crate) const MAX_QUANTITY: u128 = 9_223_372_036_854_775_807;

/// Parses a quantity to units of 10^-`digits` (at most 9: billionths are Kubernetes' own
/// precision, so that two quantities compare as Kubernetes compares them), rounded up, as
/// Kubernetes keeps it: capped at [`MAX_QUANTITY`] whole units, where [`parse_milli`] refuses
/// what it cannot hold.
///
/// # Errors
/// As [`parse_milli`], but never for the size.
pub(crate) fn parse_capped(quantity: &str, digits: u32) -> Result<u128, QuantityError> {
    let cap = MAX_QUANTITY * 10u128.pow(digits);
    Ok(match scale(quantity, digits)? {
        Scaled::Exact(amount) => amount.min(cap),
        Scaled::TooLarge => cap,
        // Kubernetes rounds a positive amount below its precision up to the least it holds.
        Scaled::TooSmall => 1,
    })
}

/// Whether Kubernetes caps the quantity (a non-negative one, as [`parse_milli`] takes) at
/// [`MAX_QUANTITY`]; false when it is not a quantity.
pub(crate) fn is_capped(quantity: &str) -> bool {
    match scale(quantity, 9) {
        Ok(Scaled::Exact(nano)) => nano > MAX_QUANTITY * 1_000_000_000,
        Ok(Scaled::TooLarge) => true,
        Ok(Scaled::TooSmall) | Err(_) => false,
    }
}

/// A quantity scaled to an integer: exactly (rounded up), or past what 128 bits hold either
/// way.
#[derive(Debug, PartialEq, Eq)]
enum Scaled {
    Exact(u128),
    TooLarge,
    /// Positive, but less than one unit by more than 10^38.
    TooSmall,
}

/// Parses a quantity to units of 10^-`digits`, rounded up, refusing one too large to hold.
fn parse_scaled(quantity: &str, digits: u32) -> Result<u128, QuantityError> {
    match scale(quantity, digits)? {
        Scaled::Exact(amount) => Ok(amount),
        Scaled::TooLarge | Scaled::TooSmall => Err(QuantityError {
            quantity: quantity.to_owned(),
        }),
    }
}

/// Scales a quantity to units of 10^-`digits`, rounded up.
fn scale(quantity: &str, digits: u32) -> Result<Scaled, QuantityError> {
    let error = || QuantityError {
        quantity: quantity.to_owned(),
    };
    let number_end = quantity
        .find(|ch: char| !(ch.is_ascii_digit() || ch == '.' || ch == '+'))
        .unwrap_or(quantity.len());
    let (number, suffix) = quantity.split_at(number_end);
    let number = number.strip_prefix('+').unwrap_or(number);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && fraction.is_empty()
        || !whole
            .bytes()
            .chain(fraction.bytes())
            .all(|b| b.is_ascii_digit())
    {
        return Err(error());
    }
    // The suffix as a power of ten and a binary multiplier.
    let (power, multiplier): (i64, u128) = match suffix {
        "" => (0, 1),
        "n" => (-9, 1),
        "u" => (-6, 1),
        "m" => (-3, 1),
        "k" => (3, 1),
        "M" => (6, 1),
        "G" => (9, 1),
        "T" => (12, 1),
        "P" => (15, 1),
        "E" => (18, 1),
        "Ki" => (0, 1 << 10),
        "Mi" => (0, 1 << 20),
        "Gi" => (0, 1 << 30),
        "Ti" => (0, 1 << 40),
        "Pi" => (0, 1 << 50),
        "Ei" => (0, 1 << 60),
        other => {
            // Kubernetes reads the exponent in 64 bits and keeps its low 32 (`int32(parsed)`).
            let power = other
                .strip_prefix(['e', 'E'])
                .and_then(|power| power.parse::<i64>().ok())
                .ok_or_else(error)?;
            (i64::from(power as i32), 1)
        }
    };
    let exponent = power + i64::from(digits) - fraction.len() as i64;
    Ok(scale_short(whole, fraction, multiplier, exponent)
        .unwrap_or_else(|| scale_digits(whole, fraction, multiplier, exponent)))
}

/// The most significant digits [`scale_short`] reads into a `u64`.
const SHORT_DIGITS: usize = 18;

/// [`scale_digits`] in machine arithmetic, for a number of at most [`SHORT_DIGITS`] significant
/// digits (every quantity a pod spec is likely to hold): `None` for a longer one. Its product
/// with a binary multiplier (at most 2^60) stays below 2^120, so every step is exact.
fn scale_short(whole: &str, fraction: &str, multiplier: u128, exponent: i64) -> Option<Scaled> {
    let mut number = 0u64;
    let mut count = 0;
    for digit in whole
        .bytes()
        .chain(fraction.bytes())
        .skip_while(|&d| d == b'0')
    {
        count += 1;
        if count > SHORT_DIGITS {
            return None;
        }
        number = number * 10 + u64::from(digit - b'0');
    }
    let product = u128::from(number) * multiplier;
    if product == 0 {
        return Some(Scaled::Exact(0));
    }
    let shift = u32::try_from(exponent.unsigned_abs()).unwrap_or(u32::MAX);
    Some(if exponent >= 0 {
        // 10^39 and more is past 128 bits whatever the product.
        10u128
            .checked_pow(shift)
            .and_then(|power| product.checked_mul(power))
            .map_or(Scaled::TooLarge, Scaled::Exact)
    } else if shift <= 38 {
        Scaled::Exact(product.div_ceil(10u128.pow(shift)))
    } else {
        // The product has at most 37 digits: shifted past 38 it is below the unit by more
        // than 10^38.
        Scaled::TooSmall
    })
}

/// Scales the number written `whole`.`fraction` times `multiplier` times 10^`exponent`, any
/// number of digits long, rounded up.
fn scale_digits(whole: &str, fraction: &str, multiplier: u128, exponent: i64) -> Scaled {
    // Kubernetes reads any number of digits exactly (apimachinery's `ParseQuantity` falls back
    // to an arbitrary-precision decimal past 18 digits) and then rounds up: the digits without
    // their leading zeros, times the binary multiplier, as decimal digits, then shifted.
    let significant = whole
        .bytes()
        .chain(fraction.bytes())
        .skip_while(|&digit| digit == b'0');
    let product = times(significant, multiplier);
    if product.is_empty() {
        return Scaled::Exact(0);
    }
    // The amount is `product` × 10^`exponent`: its whole part is the first `whole_digits`
    // digits (with zeros after them when `exponent` is positive), rounded up when any digit
    // after them is not zero.
    let whole_digits = product.len() as i64 + exponent;
    // 40 digits are more than 128 bits hold: past any amount Kubernetes keeps.
    if whole_digits > 39 {
        return Scaled::TooLarge;
    }
    // A positive amount below the unit rounds up to one (Kubernetes' least amount); one below
    // it by more than 10^38 is told apart, for `parse_milli` to refuse.
    if whole_digits <= 0 {
        return if exponent < -38 {
            Scaled::TooSmall
        } else {
            Scaled::Exact(1)
        };
    }
    let kept = usize::try_from(whole_digits).expect("between 1 and 39");
    let mut amount = 0u128;
    for index in 0..kept {
        let digit = product.get(index).copied().unwrap_or(0);
        let Some(next) = amount
            .checked_mul(10)
            .and_then(|amount| amount.checked_add(u128::from(digit)))
        else {
            return Scaled::TooLarge;
        };
        amount = next;
    }
    let rest = product.get(kept..).unwrap_or_default();
    if rest.iter().any(|&digit| digit != 0) {
        amount = match amount.checked_add(1) {
            Some(amount) => amount,
            None => return Scaled::TooLarge,
        };
    }
    Scaled::Exact(amount)
}

/// The decimal digits (most significant first) of the number written by `digits` (ASCII
/// digits without leading zeros) times `multiplier`, without leading zeros; empty for zero.
fn times(digits: impl Iterator<Item = u8>, multiplier: u128) -> Vec<u8> {
    let mut product: Vec<u8> = digits.map(|digit| digit - b'0').collect();
    if multiplier == 1 || product.is_empty() {
        return product;
    }
    // Schoolbook multiplication from the least significant digit; the carry stays below
    // 10 × the multiplier (at most 2^60).
    let mut carry = 0u128;
    for digit in product.iter_mut().rev() {
        let value = u128::from(*digit) * multiplier + carry;
        *digit = (value % 10) as u8;
        carry = value / 10;
    }
    let mut head = Vec::new();
    while carry > 0 {
        head.push((carry % 10) as u8);
        carry /= 10;
    }
    head.reverse();
    head.append(&mut product);
    head
}

/// Formats millicores as Kubernetes writes a canonical decimal quantity: `500m`, `2`, `1500m`,
/// `1k`.
pub fn cpu_quantity(milli: u128) -> String {
    if milli % 1000 != 0 {
        return format!("{milli}m");
    }
    decimal_quantity(milli / 1000)
}

/// Formats thousandths of a byte (rounded up to whole bytes) as Kubernetes writes a canonical
/// binary quantity: `512Mi`, `4Gi`, and plain bytes (`1000000000`) when no binary suffix is
/// exact; below 1024 bytes the decimal form (`500`, `1k`).
pub fn memory_quantity(milli: u128) -> String {
    let bytes = milli.div_ceil(1000);
    if bytes < 1024 {
        return decimal_quantity(bytes);
    }
    const SUFFIXES: [&str; 6] = ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
    let mut value = bytes;
    let mut suffix = "";
    for next in SUFFIXES {
        if value % 1024 != 0 {
            break;
        }
        value /= 1024;
        suffix = next;
    }
    format!("{value}{suffix}")
}

/// A whole number with the largest exact decimal suffix: `2`, `1k`, `3M`.
fn decimal_quantity(whole: u128) -> String {
    if whole == 0 {
        return "0".to_owned();
    }
    const SUFFIXES: [&str; 6] = ["k", "M", "G", "T", "P", "E"];
    let mut value = whole;
    let mut suffix = "";
    for next in SUFFIXES {
        if value % 1000 != 0 {
            break;
        }
        value /= 1000;
        suffix = next;
    }
    format!("{value}{suffix}")
}

/// Whether the quantity `limit` is below the quantity `request`, as Kubernetes refuses a limit
/// below its request; false when either does not parse (each is refused on its own).
pub(crate) fn is_below(limit: &str, request: &str) -> bool {
    match (parse_milli(limit), parse_milli(request)) {
        (Ok(limit), Ok(request)) => limit < request,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::{SHORT_DIGITS, scale_digits, scale_short};

    proptest! {
        /// The machine-arithmetic path gives what the digit-by-digit one gives, wherever it
        /// answers, and answers for every number of up to 18 significant digits.
        #[test]
        fn short_numbers_scale_as_their_digits_do(
            whole in "[0-9]{0,12}",
            fraction in "[0-9]{0,12}",
            multiplier in prop::sample::select(vec![1u128, 1 << 10, 1 << 20, 1 << 30, 1 << 40, 1 << 50, 1 << 60]),
            exponent in -60i64..60,
        ) {
            let significant = format!("{whole}{fraction}").trim_start_matches('0').len();
            match scale_short(&whole, &fraction, multiplier, exponent) {
                Some(short) => prop_assert_eq!(short, scale_digits(&whole, &fraction, multiplier, exponent)),
                None => prop_assert!(significant > SHORT_DIGITS),
            }
        }
    }

    #[test]
    fn a_shift_past_every_power_is_too_large_or_too_small() {
        assert_eq!(
            scale_short("1", "", 1, i64::from(i32::MAX)),
            Some(scale_digits("1", "", 1, i64::from(i32::MAX)))
        );
        assert_eq!(
            scale_short("1", "", 1, i64::from(i32::MIN)),
            Some(scale_digits("1", "", 1, i64::from(i32::MIN)))
        );
    }
}
