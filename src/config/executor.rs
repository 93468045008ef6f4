//! The `executor.*` section: which executor runs attempts, its own settings, the task defaults
//! and the resource unit (ADR 0066).

use std::io::{self, ErrorKind};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_yaml_ng::Value;

use super::keys::{
    DEFAULT_CPU, DEFAULT_MEMORY, DRY_RUN_DIR, EXECUTOR_TYPE, LITE_KILL_GRACE, LITE_LOG_DIR,
    LITE_MAX_PARALLEL, RUN_AS_NON_ROOT, TASK_NAMESPACE, TASK_SERVICE_ACCOUNT, UNIT_CPU,
    UNIT_ENFORCE, UNIT_MAX_SIZE, UNIT_MEMORY,
};
use super::reader::{Reader, as_u64, expected, to_usize};
use super::{Config, ConfigError, ConfigErrors, Key};
use crate::admission;
use crate::dispatch::executor::lite;
use crate::dispatch::settings::{
    DEFAULT_LOG_DIR, DEFAULT_TASK_SERVICE_ACCOUNT, Enforce, ExecutorSettings, ResourceDefaults,
    ResourceUnit,
};

/// `executor.*` as read, for [`crate::dispatch::Settings`].
pub(super) struct Executor {
    pub(super) executor: ExecutorSettings,
    pub(super) task_service_account: String,
    pub(super) defaults: ResourceDefaults,
    pub(super) unit: Option<ResourceUnit>,
}

/// Which executor `executor.type` names.
#[derive(Debug, Clone, Copy)]
enum ExecutorKind {
    Lite,
    Kubernetes,
    Null,
}

impl ExecutorKind {
    fn as_str(self) -> &'static str {
        match self {
            ExecutorKind::Lite => "lite",
            ExecutorKind::Kubernetes => "kubernetes",
            ExecutorKind::Null => "null",
        }
    }
}

impl Config {
    /// Checks the directories the executor writes to, as `dispatch` does when it starts:
    /// `executor.lite.log_dir` is created if missing and must be writable,
    /// `executor.kubernetes.dry_run_dir` must be a writable directory. A directory that cannot
    /// be used would fail every attempt after its retries, so it fails the start instead.
    ///
    /// `check-config` does not run it: a config may be checked on another machine than the one
    /// it runs on.
    ///
    /// # Errors
    /// [`ConfigError::Directory`], naming the key and the directory.
    pub fn check_executor(&self) -> Result<(), ConfigErrors> {
        let (key, dir, problem) = match &self.dispatch.executor {
            ExecutorSettings::Lite { log_dir, .. } => {
                (LITE_LOG_DIR, log_dir, create_directory(log_dir))
            }
            ExecutorSettings::Kubernetes {
                dry_run_dir: Some(dir),
                ..
            } => (DRY_RUN_DIR, dir, check_directory(dir)),
            _ => return Ok(()),
        };
        problem.map_err(|source| {
            ConfigErrors::from(ConfigError::Directory {
                key: Key::file(key),
                path: dir.clone(),
                source,
            })
        })
    }
}

/// Whether `dir` is an existing directory this process can create files in.
fn check_directory(dir: &Path) -> io::Result<()> {
    if !std::fs::metadata(dir)?.is_dir() {
        return Err(not_a_directory());
    }
    check_writable(dir)
}

/// `dir` created with its parents when missing, and writable; a file in its place is said to
/// be no directory (creating it would fail with "File exists").
fn create_directory(dir: &Path) -> io::Result<()> {
    if let Err(error) = std::fs::create_dir_all(dir) {
        return Err(if dir.is_file() {
            not_a_directory()
        } else {
            error
        });
    }
    check_writable(dir)
}

fn not_a_directory() -> io::Error {
    io::Error::new(ErrorKind::NotADirectory, "not a directory")
}

/// Whether this process can create a file in `dir`: it writes one and removes it, which
/// permissions, read-only mounts and full disks all answer alike.
fn check_writable(dir: &Path) -> io::Result<()> {
    let probe = dir.join(format!(
        ".dexaflow-admission-write-check-{}",
        std::process::id()
    ));
    std::fs::File::create(&probe)?;
    std::fs::remove_file(&probe)
}

impl Reader {
    pub(super) fn executor(&mut self) -> Executor {
        let executor_kind = self.executor_kind();
        let namespace = self.text(TASK_NAMESPACE, "dexaflow", |text| {
            admission::dns_label_problem(text)
                .map(|_| "a namespace name such as \"dexaflow\" (a DNS label)".to_owned())
        });
        let task_service_account =
            self.text(TASK_SERVICE_ACCOUNT, DEFAULT_TASK_SERVICE_ACCOUNT, |text| {
                (!text.is_empty() && admission::subdomain_problem(text).is_some())
                    .then(|| "a service account name (a DNS subdomain) or \"\"".to_owned())
            });
        let default_cpu = self.quantity(DEFAULT_CPU, false);
        let default_memory = self.quantity(DEFAULT_MEMORY, false);
        let run_as_non_root = self.flag(RUN_AS_NON_ROOT, true);
        let unit = self.unit();
        let log_dir = self
            .path_or(
                LITE_LOG_DIR,
                "a directory path",
                Some(PathBuf::from(DEFAULT_LOG_DIR)),
            )
            .unwrap_or_else(|| PathBuf::from(DEFAULT_LOG_DIR));
        let kill_grace = self.duration(LITE_KILL_GRACE, lite::DEFAULT_KILL_GRACE, Duration::ZERO);
        let max_parallel = self.integer(
            LITE_MAX_PARALLEL,
            as_u64(lite::default_max_parallel()),
            1..=as_u64(lite::MAX_PARALLEL),
        );
        let dry_run_dir = self.path(DRY_RUN_DIR, "a directory path");
        let executor = match executor_kind {
            ExecutorKind::Lite => ExecutorSettings::Lite {
                log_dir,
                kill_grace,
                max_parallel: to_usize(max_parallel),
            },
            ExecutorKind::Kubernetes => {
                self.check_kubernetes_has_a_dry_run_dir(dry_run_dir.is_some());
                ExecutorSettings::Kubernetes {
                    namespace,
                    dry_run_dir,
                    run_as_non_root,
                }
            }
            ExecutorKind::Null => ExecutorSettings::Null,
        };
        Executor {
            executor,
            task_service_account,
            defaults: ResourceDefaults {
                cpu: default_cpu.map(|(text, _)| text),
                memory: default_memory.map(|(text, _)| text),
            },
            unit,
        }
    }

    fn executor_kind(&mut self) -> ExecutorKind {
        // A bare `null` is YAML's empty value, not the null executor: say so rather than
        // quietly running Lite.
        if self
            .found
            .get(EXECUTOR_TYPE)
            .is_some_and(|raw| raw.value.is_null())
        {
            self.errors.push(ConfigError::Invalid {
                key: Key::file(EXECUTOR_TYPE),
                expected:
                    "lite, kubernetes or \"null\" (quoted: a bare null is YAML's empty value)"
                        .to_owned(),
                got: "null".to_owned(),
            });
            self.bad.insert(EXECUTOR_TYPE);
        }
        self.get(
            EXECUTOR_TYPE,
            ExecutorKind::Lite,
            |raw| match raw.value.as_str().map(str::trim) {
                Some("lite" | "subprocess") => Ok(ExecutorKind::Lite),
                Some("kubernetes") => Ok(ExecutorKind::Kubernetes),
                Some("null") => Ok(ExecutorKind::Null),
                _ => Err(expected(
                    "one of lite (or its alias subprocess), kubernetes, null",
                )),
            },
            |kind| Value::String(kind.as_str().to_owned()),
        )
    }

    fn unit(&mut self) -> Option<ResourceUnit> {
        let cpu = self.quantity(UNIT_CPU, true);
        let memory = self.quantity(UNIT_MEMORY, true);
        let enforce = self.get(
            UNIT_ENFORCE,
            Enforce::Refuse,
            |raw| match raw.value.as_str().map(str::trim) {
                Some("refuse") => Ok(Enforce::Refuse),
                Some("warn") => Ok(Enforce::Warn),
                _ => Err(expected("refuse or warn")),
            },
            |enforce| {
                Value::String(match enforce {
                    Enforce::Refuse => "refuse".to_owned(),
                    Enforce::Warn => "warn".to_owned(),
                })
            },
        );
        let max_size = self.integer(UNIT_MAX_SIZE, 64, 1..=1024);
        match (cpu, memory) {
            (Some((cpu, cpu_milli)), Some((memory, memory_milli))) => Some(ResourceUnit {
                cpu,
                memory,
                cpu_milli,
                memory_milli,
                enforce,
                max_size: u32::try_from(max_size).unwrap_or(1024),
            }),
            (None, None) => None,
            _ => {
                self.check_unit_is_complete();
                None
            }
        }
    }
}
