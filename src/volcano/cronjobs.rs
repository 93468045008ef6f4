//! `/cronjobs/validate`: a cronjob's schedule parses, its time zone is a known IANA name, its
//! name leaves room for the suffix of the jobs it creates, and (beyond Volcano) the job it
//! creates would pass `/jobs/validate`.

use super::cron::check_schedule;
use super::cronjob::{CronJob, CronJobSpec};
use super::gates::FeatureGates;
use super::job::Job;
use super::jobs::template_job_problems;
use super::names::qualified_name_errors;
use super::review::{Operation, Refusal, Review, invalid, quoted};

/// The longest name of a job (a DNS label).
const MAX_JOB_NAME: usize = 63;
/// Room for what Volcano's controller appends to the cronjob's name for each job: `-` and the
/// scheduled time in minutes since 1970 (8 digits today), with room for 10.
const JOB_NAME_SUFFIX: usize = 11;
/// The longest cronjob name.
const MAX_CRONJOB_NAME: usize = MAX_JOB_NAME - JOB_NAME_SUFFIX;

/// The concurrency policies a cronjob may name.
const CONCURRENCY_POLICIES: [&str; 3] = ["Allow", "Forbid", "Replace"];

/// Volcano's `/cronjobs/validate` for one request (CREATE or UPDATE; an UPDATE is judged on
/// its new object alone, as a CREATE is).
///
/// Volcano's checks, in its words: the schedule present, free of `TZ`, and one robfig/cron's
/// standard parser accepts; the time zone, when set, non-empty, each `/`-separated part of
/// Volcano's allowed characters, not `Local`, and in the IANA database; the name at most 52
/// bytes and a qualified name. The schedule and time-zone problems make one message (Volcano
/// runs them together, separated by blanks), the name's another.
///
/// Beyond Volcano, in Kubernetes' field-error form: `spec.concurrencyPolicy` empty or one of
/// `Allow`, `Forbid` and `Replace`; `spec.startingDeadlineSeconds` and the two history limits
/// not negative. Every message is joined with `; `, Volcano's first.
///
/// # Errors
/// [`Refusal::Denied`] with the joined messages; [`Refusal::UnknownOperation`] for any
/// operation but CREATE and UPDATE; [`Refusal::Undecodable`] when the request has no object.
pub fn validate_cronjob(review: &Review<'_, CronJob>, gates: &FeatureGates) -> Result<(), Refusal> {
    if !matches!(review.operation, Operation::Create | Operation::Update) {
        return Err(Refusal::unknown_operation(
            &review.operation,
            "'CREATE' or 'UPDATE'",
        ));
    }
    let cronjob = review.object.ok_or_else(|| Refusal::missing("object"))?;
    let mut messages = Vec::new();
    let spec = spec_problems(&cronjob.spec);
    if !spec.is_empty() {
        messages.push(spec.join(" "));
    }
    messages.extend(name_problem(
        cronjob.metadata.name.as_deref().unwrap_or_default(),
    ));
    messages.extend(field_problems(&cronjob.spec));
    messages.extend(job_template_problem(cronjob, review.namespace, gates));
    if messages.is_empty() {
        Ok(())
    } else {
        Err(Refusal::Denied(messages.join("; ")))
    }
}

/// Volcano's schedule and time-zone problems, in its order; Volcano runs them into one message
/// separated by blanks.
fn spec_problems(spec: &CronJobSpec) -> Vec<&'static str> {
    let mut problems = Vec::new();
    if spec.schedule.is_empty() {
        problems.push("schedule is required, but got empty");
    } else if spec.schedule.contains("TZ") {
        problems.push(
            "schedule should not contain TZ or CRON_TZ, TZ should only be set in the timeZone field",
        );
    } else if check_schedule(&spec.schedule).is_err() {
        problems.push("schedule is not a valid cron expression");
    }
    let Some(zone) = spec.time_zone.as_deref() else {
        return problems;
    };
    if zone.is_empty() {
        problems.push("timeZone must be nil or non-empty string, got empty string");
        return problems;
    }
    // One problem for each bad part, then the lookup all the same, as Volcano does.
    for part in zone.split('/') {
        if !is_zone_part(part) {
            problems.push("unknown timeZone");
        }
    }
    if zone.eq_ignore_ascii_case("Local") {
        problems.push(
            "timeZone can't be Local, and must be defined in https://www.iana.org/time-zones",
        );
    } else if !is_known_zone(zone) {
        problems.push("invalid timeZone");
    }
    problems
}

/// Whether one `/`-separated part of a time zone is of the characters and length Volcano
/// allows (`^[A-Za-z.\-_0-9+]{1,14}$`), and neither `.`, `..` nor starting with `-`.
fn is_zone_part(part: &str) -> bool {
    (1..=14).contains(&part.len())
        && part
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-+".contains(&b))
        && part != "."
        && part != ".."
        && !part.starts_with('-')
}

/// Whether `zone` names a zone (or link) of the IANA database built into this program.
///
/// Volcano asks Go's `time.LoadLocation`, which reads its host's zone files: there `UTC` is
/// always known, and so are the names chrono-tz knows where the host has the IANA files. Go also
/// opens whatever file the name leads to, so it accepts paths the database does not name
/// (`Asia/./Shanghai`, `Asia//Shanghai`) and files beside the zones (`posixrules`, `Factory`,
/// `localtime`, Debian's `posix/` and `right/` trees), and refuses every zone but `UTC` on a
/// host without zone files. Here the answer is the same on every host.
fn is_known_zone(zone: &str) -> bool {
    zone.parse::<chrono_tz::Tz>().is_ok()
}

/// Volcano's name problem: too long for the jobs' suffix, or not a qualified name.
fn name_problem(name: &str) -> Option<String> {
    if name.len() > MAX_CRONJOB_NAME {
        return Some(format!(
            "cronJob name must be no more than {MAX_CRONJOB_NAME} characters to accommodate job \
             name suffix (max {MAX_JOB_NAME} total)"
        ));
    }
    let errors = qualified_name_errors(name);
    (!errors.is_empty()).then(|| {
        format!(
            "invalid cronJob name {}: {}",
            quoted(name),
            errors.join("; ")
        )
    })
}

/// The problems beyond Volcano's rule, as Kubernetes words field errors: a concurrency policy
/// the controller does not know, and negative counts.
fn field_problems(spec: &CronJobSpec) -> Vec<String> {
    let mut problems = Vec::new();
    let policy = spec.concurrency_policy.as_str();
    if !policy.is_empty() && !CONCURRENCY_POLICIES.contains(&policy) {
        let supported: Vec<String> = CONCURRENCY_POLICIES.iter().map(|p| quoted(p)).collect();
        problems.push(format!(
            "spec.concurrencyPolicy: Unsupported value: {}: supported values: {}",
            quoted(policy),
            supported.join(", ")
        ));
    }
    let counts = [
        (
            "spec.startingDeadlineSeconds",
            spec.starting_deadline_seconds,
        ),
        (
            "spec.successfulJobsHistoryLimit",
            spec.successful_jobs_history_limit.map(i64::from),
        ),
        (
            "spec.failedJobsHistoryLimit",
            spec.failed_jobs_history_limit.map(i64::from),
        ),
    ];
    for (path, count) in counts {
        if let Some(count) = count.filter(|count| *count < 0) {
            problems.push(invalid(
                path,
                &count.to_string(),
                "must be greater than or equal to 0",
            ));
        }
    }
    problems
}

/// A name that passes every name check, under which the job template is judged: each job's
/// own name (the cronjob's and a suffix) and the names derived from it are judged when the job
/// is made, and the cronjob's name above.
const STAND_IN_JOB_NAME: &str = "job";

/// Beyond Volcano: the job template judged as `/jobs/validate` judges a new job, but for its
/// queue and its names (judged when each job is made); `None` when it passes.
fn job_template_problem(
    cronjob: &CronJob,
    namespace: &str,
    gates: &FeatureGates,
) -> Option<String> {
    let template = &cronjob.spec.job_template;
    let mut metadata = template.metadata.clone();
    metadata.name = Some(STAND_IN_JOB_NAME.to_owned());
    metadata.namespace = metadata
        .namespace
        .or_else(|| cronjob.metadata.namespace.clone());
    let job = Job {
        metadata,
        spec: template.spec.clone(),
        ..Job::default()
    };
    let problems = template_job_problems(&job, namespace, gates);
    (!problems.is_empty()).then(|| format!("spec.jobTemplate: {problems}"))
}
