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
/// means a fractional quantity never looks smaller than it is.
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

/// Parses a Kubernetes quantity to billionths of its unit, rounded up: Kubernetes' own
/// precision, so that two quantities compare as Kubernetes compares them.
///
/// # Errors
/// As [`parse_milli`].
pub(crate) fn parse_nano(quantity: &str) -> Result<u128, QuantityError> {
    parse_scaled(quantity, 9)
}

/// Parses a quantity to units of 10^-`digits`, rounded up.
fn parse_scaled(quantity: &str, digits: i32) -> Result<u128, QuantityError> {
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
    // The quantity as an integer `mantissa` times 10^`exponent`, then scaled by the suffix.
    let mantissa = whole
        .bytes()
        .chain(fraction.bytes())
        .try_fold(0u128, |mantissa, digit| {
            mantissa
                .checked_mul(10)?
                .checked_add(u128::from(digit - b'0'))
        })
        .ok_or_else(error)?;
    let mut exponent = -(fraction.len() as i32) + digits;
    let mut multiplier: u128 = 1;
    match suffix {
        "" => {}
        "n" => exponent -= 9,
        "u" => exponent -= 6,
        "m" => exponent -= 3,
        "k" => exponent += 3,
        "M" => exponent += 6,
        "G" => exponent += 9,
        "T" => exponent += 12,
        "P" => exponent += 15,
        "E" => exponent += 18,
        "Ki" => multiplier = 1 << 10,
        "Mi" => multiplier = 1 << 20,
        "Gi" => multiplier = 1 << 30,
        "Ti" => multiplier = 1 << 40,
        "Pi" => multiplier = 1 << 50,
        "Ei" => multiplier = 1 << 60,
        other => {
            let power = other
                .strip_prefix(['e', 'E'])
                .and_then(|power| power.parse::<i32>().ok())
                .ok_or_else(error)?;
            // Checked: an exponent near i32::MAX or i32::MIN must be an error, not an overflow.
            exponent = exponent.checked_add(power).ok_or_else(error)?;
        }
    }
    let scaled = mantissa.checked_mul(multiplier).ok_or_else(error)?;
    if exponent >= 0 {
        10u128
            .checked_pow(exponent as u32)
            .and_then(|scale| scaled.checked_mul(scale))
            .ok_or_else(error)
    } else {
        let divisor = 10u128
            .checked_pow(exponent.unsigned_abs())
            .ok_or_else(error)?;
        Ok(scaled.div_ceil(divisor))
    }
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
