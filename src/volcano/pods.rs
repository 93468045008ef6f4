//! `/pods/validate`: Volcano's disruption-budget annotations on the pods its schedulers place.

use k8s_openapi::api::core::v1::Pod;

use super::review::{Operation, Refusal, Review, quoted};

/// The annotation giving how many of the job's pods must stay available.
const MIN_AVAILABLE: &str = "volcano.sh/jdb-min-available";
/// The annotation giving how many of the job's pods may be unavailable.
const MAX_UNAVAILABLE: &str = "volcano.sh/jdb-max-unavailable";

/// Volcano's `/pods/validate` for one request (CREATE only).
///
/// Only pods whose `schedulerName` is one of `scheduler_names` are checked: each of the
/// annotations `volcano.sh/jdb-min-available` and `volcano.sh/jdb-max-unavailable` must be a
/// positive integer or a percentage from 1% to 99%, and at most one of them may be set.
///
/// # Errors
/// [`Refusal::Denied`] with Volcano's message; [`Refusal::UnknownOperation`] for any operation
/// but CREATE; [`Refusal::Undecodable`] when the request has no object.
pub fn validate_pod(review: &Review<'_, Pod>, scheduler_names: &[String]) -> Result<(), Refusal> {
    if review.operation != Operation::Create {
        return Err(Refusal::unknown_operation(&review.operation, "'CREATE'"));
    }
    let pod = review.object.ok_or_else(|| Refusal::missing("object"))?;
    let scheduler = pod
        .spec
        .as_ref()
        .and_then(|spec| spec.scheduler_name.as_deref())
        .unwrap_or_default();
    if !scheduler_names.iter().any(|name| name == scheduler) {
        return Ok(());
    }
    let Some(annotations) = pod.metadata.annotations.as_ref() else {
        return Ok(());
    };
    let mut found = 0;
    for key in [MIN_AVAILABLE, MAX_UNAVAILABLE] {
        if let Some(value) = annotations.get(key) {
            found += 1;
            check_budget(key, value).map_err(Refusal::Denied)?;
        }
    }
    if found > 1 {
        return Err(Refusal::denied(format!(
            "not allow configure multiple annotations <[{MIN_AVAILABLE} {MAX_UNAVAILABLE}]> at same time"
        )));
    }
    Ok(())
}

/// A positive integer, or (any other text) a percentage whose `%` signs removed leave an
/// integer from 1 to 99, as Volcano reads it: through `intstr.Parse`, whose integer is an int32,
/// so that a larger number is read as text and refused as a percentage.
fn check_budget(key: &str, value: &str) -> Result<(), String> {
    if let Some(number) = go_atoi(value).ok().filter(|n| i32::try_from(*n).is_ok()) {
        if number <= 0 {
            return Err(format!(
                "invalid value <{}> for {key}, it must be a positive integer",
                quoted(value)
            ));
        }
        return Ok(());
    }
    let digits = value.replace('%', "");
    let percent = go_atoi(&digits).map_err(|reason| {
        format!(
            "invalid value strconv.Atoi: parsing {}: {reason} for {key}",
            quoted(&digits)
        )
    })?;
    if !(1..100).contains(&percent) {
        return Err(format!(
            "invalid value <{}> for {key}, it must be a valid percentage which between 1% ~ 99%",
            quoted(value)
        ));
    }
    Ok(())
}

/// An integer as Go's `strconv.Atoi` reads one: an optional sign, then decimal digits only,
/// within 64 bits.
///
/// # Errors
/// Go's reason: `invalid syntax`, or `value out of range` for digits past 64 bits.
fn go_atoi(text: &str) -> Result<i64, &'static str> {
    let digits = text.strip_prefix(['+', '-']).unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err("invalid syntax");
    }
    text.parse().map_err(|_| "value out of range")
}
