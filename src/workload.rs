//! The workload file of the `dispatch` command: DAG runs and their tasks, offered to the
//! dispatcher as scheduled task instances.
//!
//! ```yaml
//! runs:
//!   - tenant: acme
//!     dag_id: etl
//!     run_id: manual__1
//!     default_args:
//!       execution_timeout_seconds: 600
//!     tasks:
//!       - task_id: extract
//!         image: ghcr.io/acme/etl:1.2
//!         command: [sh, -c, "echo extracting"]
//! ```
//!
//! A workload is checked whole when it is read, and every problem is reported, one a line, each
//! naming its entry (`runs[0].tasks[2]: unknown key "imgae"`): unknown keys, values of the wrong
//! shape, ids that are empty or hold control or format characters, a task listed twice, label
//! and annotation keys under the prefixes reserved for the orchestrator (as Dexaflow refuses
//! them when a DAG is registered), an execution timeout of zero, and, read for the lite
//! executor ([`parse_for`], [`load`]), a task without a command. An empty file, or one whose
//! runs list no task, is a workload with no tasks.

use std::collections::BTreeSet;
use std::fmt;
use std::ops::RangeInclusive;
use std::path::Path;

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_yaml_ng::{Mapping, Value};
use thiserror::Error;

use crate::admission::{error_lines, escape_controls, is_control_or_format, is_reserved_key};
use crate::config::{
    self, Mismatch, big_integer_digits, integer_in, integers, parse_yaml, too_large,
};
use crate::dispatch::settings::ExecutorSettings;
use crate::dispatch::task::{Task, TaskExecution, TaskKey};

/// One problem with a workload file. Each names the entry, such as `runs[0].tasks[2]`.
#[derive(Debug, Error)]
pub enum WorkloadError {
    /// The file could not be read.
    #[error("reading {path}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The text is not YAML, or not a mapping with a `runs` list.
    #[error("not a workload (a mapping with a runs list)")]
    Syntax {
        /// Where and why parsing stopped.
        #[source]
        source: serde_yaml_ng::Error,
    },
    /// A key a run or a task does not have, often a typo.
    #[error("{at}: unknown key {key}")]
    UnknownKey {
        /// The entry.
        at: String,
        /// The key, quoted.
        key: String,
    },
    /// An entry whose values are not of the expected shape.
    #[error("{at}")]
    Shape {
        /// The entry.
        at: String,
        /// What is wrong.
        #[source]
        source: serde_yaml_ng::Error,
    },
    /// An empty tenant, DAG, run or task id.
    #[error("{at}.{field}: must not be empty")]
    EmptyId {
        /// The entry.
        at: String,
        /// `tenant`, `dag_id`, `run_id` or `task_id`.
        field: &'static str,
    },
    /// An id with a Unicode control (Cc) or format (Cf) character, which could forge a line of
    /// the table or a log.
    #[error("{at}.{field}: \"{id}\" contains a control or format character")]
    IdCharacter {
        /// The entry.
        at: String,
        /// `tenant`, `dag_id`, `run_id` or `task_id`.
        field: &'static str,
        /// The id, its control and format characters escaped.
        id: String,
    },
    /// A task listed twice.
    #[error("{at}: task {task} appears twice")]
    Duplicate {
        /// The later entry.
        at: String,
        /// The task instance.
        task: TaskKey,
    },
    /// A label or annotation key under `leoflow.io/` or `dexaflow.io/` (or a subdomain of
    /// either), which only the orchestrator may set.
    #[error(
        "{at}: task \"{task}\": execution.{field} key \"{key}\" is under a prefix reserved for the orchestrator (leoflow.io/, dexaflow.io/ and their subdomains)"
    )]
    ReservedKey {
        /// The entry.
        at: String,
        /// The task id, escaped.
        task: String,
        /// `labels` or `annotations`.
        field: &'static str,
        /// The key, escaped.
        key: String,
    },
    /// An integer beyond 64 bits; its digits are not shown, there may be many.
    #[error("{at}: an integer of {digits} digits does not fit in 64 bits")]
    TooLarge {
        /// The value's full path, such as `runs[0].tasks[1].pool_slots`.
        at: String,
        /// How many digits it has.
        digits: usize,
    },
    /// A value of an integer field (`pool_slots`, `execution_timeout_seconds`) that is outside
    /// the field's range, or no integer; the digits of one too large for 64 bits are not shown.
    #[error("{at}: {problem}")]
    OutOfRange {
        /// The value's full path, such as `runs[0].tasks[1].pool_slots`.
        at: String,
        /// The range and what was given, such as `expected an integer from 0 to 4294967295,
        /// got 5000000000 (too large)`.
        problem: String,
    },
    /// A task without a command for an executor that runs commands (`lite`), whose every
    /// attempt would fail to launch and back off until its dispatch attempts were spent.
    #[error("{at}.command: required by the lite executor, which runs it as a local process")]
    NoCommand {
        /// The task.
        at: String,
    },
    /// An execution timeout of zero seconds, which would end every attempt as it starts.
    #[error("{at}.execution_timeout_seconds: must be at least 1")]
    ZeroTimeout {
        /// The task or the run's `default_args`.
        at: String,
    },
}

/// Every problem found in a workload; never empty. Displayed one problem a line, each with its
/// causes joined by `: `.
#[derive(Debug)]
pub struct WorkloadErrors {
    errors: Vec<WorkloadError>,
}

impl WorkloadErrors {
    /// The problems, in the order they were found.
    pub fn errors(&self) -> &[WorkloadError] {
        &self.errors
    }
}

impl From<WorkloadError> for WorkloadErrors {
    fn from(error: WorkloadError) -> WorkloadErrors {
        WorkloadErrors {
            errors: vec![error],
        }
    }
}

impl fmt::Display for WorkloadErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&error_lines(&self.errors))
    }
}

impl std::error::Error for WorkloadErrors {}

/// The top level of a workload file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Workload {
    #[serde(default)]
    runs: Vec<Value>,
}

/// A run entry without its tasks, whose keys are checked before it is read.
#[derive(Debug, Deserialize)]
struct Run {
    tenant: String,
    dag_id: String,
    run_id: String,
    #[serde(default)]
    default_args: DefaultArgs,
    #[serde(default)]
    tasks: Vec<Value>,
}

/// What a run sets for each of its tasks that does not set it itself.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct DefaultArgs {
    #[serde(default)]
    execution_timeout_seconds: Option<u64>,
}

/// The keys of a run entry.
const RUN_KEYS: [&str; 5] = ["tenant", "dag_id", "run_id", "default_args", "tasks"];

/// Reads the workload at `path` for `executor`, as [`parse_for`] does.
///
/// # Errors
/// [`WorkloadErrors`] with the read error, or every problem in the file.
pub fn load(path: &Path, executor: &ExecutorSettings) -> Result<Vec<Task>, WorkloadErrors> {
    let text = std::fs::read_to_string(path).map_err(|source| WorkloadError::Read {
        path: path.display().to_string(),
        source,
    })?;
    parse_for(&text, executor)
}

/// Parses a workload from YAML text with the checks every executor shares: a task without a
/// command passes, as a pod runs its image's own entrypoint.
///
/// # Errors
/// [`WorkloadErrors`] with every problem found, each naming its entry.
pub fn parse(text: &str) -> Result<Vec<Task>, WorkloadErrors> {
    parse_with(text, false)
}

/// Parses a workload from YAML text for `executor`: [`parse`]'s checks, and a command in every
/// task when the executor needs one ([`ExecutorSettings::needs_command`]: `lite`).
///
/// # Errors
/// [`WorkloadErrors`] with every problem found, each naming its entry.
pub fn parse_for(text: &str, executor: &ExecutorSettings) -> Result<Vec<Task>, WorkloadErrors> {
    parse_with(text, executor.needs_command())
}

fn parse_with(text: &str, needs_command: bool) -> Result<Vec<Task>, WorkloadErrors> {
    // Parsed as the config is, so that an integer too large for 64 bits is kept and reported
    // against its entry with the other problems, not fail the whole file alone.
    let workload: Option<Workload> = parse_yaml(text)
        .and_then(serde_yaml_ng::from_value)
        .map_err(|source| WorkloadError::Syntax { source })?;
    let mut reader = Reader {
        needs_command,
        ..Reader::default()
    };
    for (index, run) in workload.unwrap_or_default().runs.into_iter().enumerate() {
        reader.run(&format!("runs[{index}]"), run);
    }
    if reader.errors.is_empty() {
        Ok(reader.tasks)
    } else {
        Err(WorkloadErrors {
            errors: reader.errors,
        })
    }
}

/// Reads entries one at a time, collecting the tasks and every problem.
#[derive(Default)]
struct Reader {
    /// Whether every task needs a command ([`ExecutorSettings::needs_command`]).
    needs_command: bool,
    tasks: Vec<Task>,
    seen: BTreeSet<TaskKey>,
    errors: Vec<WorkloadError>,
}

impl Reader {
    fn run(&mut self, at: &str, entry: Value) {
        let Value::Mapping(mapping) = entry else {
            self.not_a_mapping(
                at,
                "a run is a mapping with tenant, dag_id, run_id and tasks",
            );
            return;
        };
        let mut mapping = mapping;
        let keys_ok = !self.unknown_keys(at, &mut mapping, |key| RUN_KEYS.contains(&key));
        let default_args = self.nested::<DefaultArgs>(at, &mut mapping, "default_args");
        let placeholders = ids_mapping("-", "-", "-");
        let Some((mut run, mut fields_ok)) =
            self.read::<Run>(at, &mapping, &placeholders, mapping.clone())
        else {
            return;
        };
        if let Some((args, args_ok)) = default_args {
            run.default_args = args;
            fields_ok &= args_ok;
        }
        // Each problem of the run is reported once, not again for each of its tasks, whose
        // own problems are reported all the same.
        let ids_ok = [
            ("tenant", &run.tenant),
            ("dag_id", &run.dag_id),
            ("run_id", &run.run_id),
        ]
        .into_iter()
        .fold(true, |ok, (field, id)| self.id(at, field, id) && ok);
        if run.default_args.execution_timeout_seconds == Some(0) {
            self.errors.push(WorkloadError::ZeroTimeout {
                at: format!("{at}.default_args"),
            });
        }
        let run_ok = keys_ok && fields_ok && ids_ok;
        for (index, task) in run.tasks.iter().enumerate() {
            self.task(&format!("{at}.tasks[{index}]"), &run, task.clone(), run_ok);
        }
    }

    fn task(&mut self, at: &str, run: &Run, entry: Value, run_ok: bool) {
        let Value::Mapping(mut mapping) = entry else {
            self.not_a_mapping(at, "a task is a mapping of its fields");
            return;
        };
        // The run's ids are the run's: a task that sets its own is refused as unknown.
        let known = |key: &str| {
            Task::FIELDS.contains(&key) && !matches!(key, "tenant" | "dag_id" | "run_id")
        };
        let keys_ok = !self.unknown_keys(at, &mut mapping, known);
        // The execution fields are read one by one too, so that a bad toleration does not hide
        // a reserved label key beside it.
        let execution = self.nested::<TaskExecution>(at, &mut mapping, "execution");
        let mut placeholders = ids_mapping(&run.tenant, &run.dag_id, &run.run_id);
        let mut whole = placeholders.clone();
        whole.extend(mapping.clone());
        placeholders.insert("task_id".into(), "-".into());
        let Some((mut task, fields_ok)) = self.read::<Task>(at, &mapping, &placeholders, whole)
        else {
            return;
        };
        let mut ok = keys_ok && fields_ok && run_ok;
        if let Some((fields, execution_ok)) = execution {
            task.execution = fields;
            ok &= execution_ok;
        }
        ok = self.id(at, "task_id", &task.key.task_id) && ok;
        if task.execution_timeout_seconds == Some(0) {
            self.errors
                .push(WorkloadError::ZeroTimeout { at: at.to_owned() });
            ok = false;
        }
        // A command of the wrong shape was reported as such.
        let no_command = mapping
            .get("command")
            .is_none_or(|command| command.as_sequence().is_some_and(Vec::is_empty));
        if self.needs_command && no_command {
            self.errors
                .push(WorkloadError::NoCommand { at: at.to_owned() });
            ok = false;
        }
        task.execution_timeout_seconds = task
            .execution_timeout_seconds
            .or(run.default_args.execution_timeout_seconds);
        let execution = &task.execution;
        for (field, keys) in [
            ("labels", &execution.labels),
            ("annotations", &execution.annotations),
        ] {
            // Lower-cased first, as Kubernetes compares them: `Dexaflow.IO/x` is reserved too.
            for key in keys
                .keys()
                .filter(|key| is_reserved_key(&key.to_lowercase()))
            {
                self.errors.push(WorkloadError::ReservedKey {
                    at: at.to_owned(),
                    task: escape_controls(&task.key.task_id).into_owned(),
                    field,
                    key: escape_controls(key).into_owned(),
                });
                ok = false;
            }
        }
        if ok && !self.seen.insert(task.key.clone()) {
            self.errors.push(WorkloadError::Duplicate {
                at: at.to_owned(),
                task: task.key,
            });
            return;
        }
        if ok {
            self.tasks.push(task);
        }
    }

    /// Reads `whole` as a `T`, reporting each field of `mapping` whose value is bad under its
    /// own name (`runs[0].tasks[1].pool_slots: ...`): each is read alone over `placeholders`,
    /// which fill the required fields, since a whole entry would stop at its first bad field and
    /// not say which it was.
    ///
    /// The entry is then read without its bad fields, a required one (bad or missing) standing
    /// in as its placeholder, so that the checks of its other fields still run and report what
    /// they find: with it comes whether every field was good. `None` only when even that fails.
    fn read<T: DeserializeOwned>(
        &mut self,
        at: &str,
        mapping: &Mapping,
        placeholders: &Mapping,
        mut whole: Mapping,
    ) -> Option<(T, bool)> {
        let mut ok = true;
        for (key, value) in mapping {
            let mut alone = placeholders.clone();
            alone.insert(key.clone(), value.clone());
            if let Err(source) = serde_yaml_ng::from_value::<T>(Value::Mapping(alone)) {
                let at = format!("{at}.{}", key.as_str().unwrap_or_default());
                let too_large = big_integers(value, &at);
                if let Some(problem) = integer_problem(key, value) {
                    self.errors.push(WorkloadError::OutOfRange { at, problem });
                } else if too_large.is_empty() {
                    self.errors.push(WorkloadError::Shape { at, source });
                } else {
                    self.errors.extend(too_large);
                }
                match placeholders.get(key) {
                    Some(placeholder) => whole.insert(key.clone(), placeholder.clone()),
                    None => whole.shift_remove(key),
                };
                ok = false;
            }
        }
        // Only what no single field shows is left, such as a missing field.
        match serde_yaml_ng::from_value(Value::Mapping(whole.clone())) {
            Ok(entry) => return Some((entry, ok)),
            Err(source) => self.errors.push(WorkloadError::Shape {
                at: at.to_owned(),
                source,
            }),
        }
        for (key, placeholder) in placeholders {
            if !whole.contains_key(key) {
                whole.insert(key.clone(), placeholder.clone());
            }
        }
        serde_yaml_ng::from_value(Value::Mapping(whole))
            .ok()
            .map(|entry| (entry, false))
    }

    /// Reads the member `key` of `mapping`, when it is a mapping, field by field as [`Self::read`]
    /// does, and takes it out of `mapping`; leaves any other value for the entry's own read to
    /// report.
    fn nested<T: DeserializeOwned>(
        &mut self,
        at: &str,
        mapping: &mut Mapping,
        key: &str,
    ) -> Option<(T, bool)> {
        let Some(Value::Mapping(fields)) = mapping.get(key) else {
            return None;
        };
        let fields = fields.clone();
        mapping.shift_remove(key);
        self.read::<T>(
            &format!("{at}.{key}"),
            &fields,
            &Mapping::new(),
            fields.clone(),
        )
    }

    fn not_a_mapping(&mut self, at: &str, what: &str) {
        self.errors.push(WorkloadError::Shape {
            at: at.to_owned(),
            source: serde::de::Error::custom(what),
        });
    }

    /// Reports each key of `mapping` that `known` does not take and removes it, so that the
    /// rest is read without it; says whether there was one.
    fn unknown_keys(
        &mut self,
        at: &str,
        mapping: &mut Mapping,
        known: impl Fn(&str) -> bool,
    ) -> bool {
        let before = mapping.len();
        mapping.retain(|key, _| {
            let is_known = key.as_str().is_some_and(&known);
            if !is_known {
                self.errors.push(WorkloadError::UnknownKey {
                    at: at.to_owned(),
                    key: describe(key),
                });
            }
            is_known
        });
        mapping.len() != before
    }

    /// Checks one id; says whether it is good.
    fn id(&mut self, at: &str, field: &'static str, id: &str) -> bool {
        if id.is_empty() {
            self.errors.push(WorkloadError::EmptyId {
                at: at.to_owned(),
                field,
            });
            return false;
        }
        if id.chars().any(is_control_or_format) {
            self.errors.push(WorkloadError::IdCharacter {
                at: at.to_owned(),
                field,
                id: escape_controls(id).into_owned(),
            });
            return false;
        }
        true
    }
}

/// The integer fields of a task (and of a run's `default_args`), each with its range.
const INTEGERS: [(&str, RangeInclusive<u64>); 2] = [
    ("pool_slots", 0..=u32::MAX as u64),
    ("execution_timeout_seconds", 1..=u64::MAX),
];

/// What is wrong with `value` for the integer field `key` ([`INTEGERS`]), in the config's
/// words: above the field's range (`expected an integer from 0 to 4294967295, got 5000000000
/// (too large)`; the digits of one too large for 64 bits are not shown, and a 64-bit field
/// leaves that one to [`big_integers`]), below it, or no integer at all (`expected a positive integer, got "soon"`). `None` for any other field,
/// or a value in range.
fn integer_problem(key: &Value, value: &Value) -> Option<String> {
    let (_, range) = INTEGERS
        .iter()
        .find(|(field, _)| key.as_str() == Some(field))?;
    let mismatch = match (value, big_integer_digits(value)) {
        (_, Some(digits)) => match digits.strip_prefix('-') {
            // A 64-bit field: reported as not fitting in 64 bits, as any integer is.
            None if *range.end() == u64::MAX => return None,
            None => too_large(&format!("an integer of {} digits", digits.len()), range),
            Some(digits) => Mismatch {
                expected: integers(range),
                got: format!("a negative integer of {} digits", digits.len()),
            },
        },
        (Value::Number(number), _) if number.as_u64().is_some() => {
            integer_in(number.as_u64()?, &number.to_string(), range).err()?
        }
        _ => Mismatch {
            expected: integers(range),
            got: config::describe(value),
        },
    };
    Some(mismatch.to_string())
}

/// Every integer too large for 64 bits in `value`, at `at`, each with its full path.
fn big_integers(value: &Value, at: &str) -> Vec<WorkloadError> {
    if let Some(digits) = big_integer_digits(value) {
        return vec![WorkloadError::TooLarge {
            at: at.to_owned(),
            digits: digits.trim_start_matches('-').len(),
        }];
    }
    match value {
        Value::Sequence(items) => items
            .iter()
            .enumerate()
            .flat_map(|(index, item)| big_integers(item, &format!("{at}[{index}]")))
            .collect(),
        Value::Mapping(mapping) => mapping
            .iter()
            .flat_map(|(key, item)| {
                let name = key
                    .as_str()
                    .map_or_else(|| describe(key), |key| escape_controls(key).into_owned());
                big_integers(item, &format!("{at}.{name}"))
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// A mapping of the three ids a task takes from its run.
fn ids_mapping(tenant: &str, dag_id: &str, run_id: &str) -> Mapping {
    let mut ids = Mapping::new();
    ids.insert("tenant".into(), tenant.into());
    ids.insert("dag_id".into(), dag_id.into());
    ids.insert("run_id".into(), run_id.into());
    ids
}

/// A key as an error quotes it: text quoted and escaped, anything else as YAML writes it.
fn describe(key: &Value) -> String {
    match key.as_str() {
        Some(key) => format!("\"{}\"", escape_controls(key)),
        None => serde_yaml_ng::to_string(key).map_or_else(
            |_| "a key that is not text".to_owned(),
            |text| format!("{:?}", text.trim_end()),
        ),
    }
}
