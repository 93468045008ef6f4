//! The `lite` executor: runs each admitted attempt's command as a local subprocess.
//!
//! There is no isolation: the command runs as the dispatcher's user on its host. It ignores the
//! execution fields and resources, which only mean something for a pod. What it does keep is
//! the environment contract of a pod: the task's environment without reserved keys, plus the
//! agent token and the task instance id.

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};

use tokio::process::Command;

use super::{
    AGENT_TOKEN_ENV, Admitted, Completion, ExecuteFuture, Executor, ExecutorError, Launched,
    TASK_INSTANCE_ID_ENV, is_reserved_env,
};

/// Runs attempts as subprocesses, one log file per attempt.
#[derive(Debug, Clone)]
pub struct Lite {
    log_dir: PathBuf,
}

impl Lite {
    /// A `lite` executor writing each attempt's output under `log_dir`.
    pub fn new(log_dir: impl Into<PathBuf>) -> Lite {
        Lite {
            log_dir: log_dir.into(),
        }
    }

    /// The log file of one attempt: `<log_dir>/<tenant>/<dag>/<run>/<task>/attempt-<try>.log`.
    ///
    /// Each id becomes one path component: `/`, `\` and NUL are replaced by `_`, and an empty,
    /// `.` or `..` id becomes `_`, so that no id can leave `log_dir`.
    pub fn log_path(&self, attempt: &Admitted) -> PathBuf {
        let key = &attempt.task.key;
        let mut path = self.log_dir.clone();
        for id in [&key.tenant, &key.dag_id, &key.run_id, &key.task_id] {
            path.push(path_component(id));
        }
        path.push(format!("attempt-{}.log", attempt.try_number));
        path
    }

    async fn launch(&self, attempt: &Admitted) -> Result<Launched, ExecutorError> {
        let task = &attempt.task;
        let Some((program, args)) = task.command.split_first() else {
            return Err(ExecutorError::NoCommand {
                task: task.key.to_string(),
            });
        };
        let path = self.log_path(attempt);
        let stdout = open_log(&path).await?;
        let stderr = stdout
            .try_clone()
            .map_err(|source| write_error(&path, source))?;

        let mut command = Command::new(program);
        command
            .args(args)
            .env_clear()
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr);
        // A clean environment, so the dispatcher's own (its config overrides, its secrets) never
        // reaches a task; PATH alone is kept so that a command such as `sh` is found.
        if let Some(search_path) = std::env::var_os("PATH") {
            command.env("PATH", search_path);
        }
        command
            .envs(task.env.iter().filter(|(key, _)| !is_reserved_env(key)))
            .env(AGENT_TOKEN_ENV, &attempt.token)
            .env(TASK_INSTANCE_ID_ENV, &attempt.task_instance_id);
        let mut child = command.spawn().map_err(|source| ExecutorError::Spawn {
            program: program.clone(),
            source,
        })?;
        let completion = Box::pin(async move {
            match child.wait().await {
                Ok(status) => completion_of(status),
                Err(error) => Completion::Failed(format!("waiting for the process: {error}")),
            }
        });
        Ok(Launched {
            completion: Some(completion),
        })
    }
}

impl Executor for Lite {
    fn name(&self) -> &'static str {
        "lite"
    }

    /// Starts the attempt's command and returns once the process has started; the completion
    /// future waits for it to exit.
    ///
    /// Dropping the completion future does not kill the process: a launched attempt runs on.
    fn execute<'a>(&'a self, attempt: &'a Admitted) -> ExecuteFuture<'a> {
        Box::pin(self.launch(attempt))
    }
}

/// How an exit status reads on the task instance.
fn completion_of(status: ExitStatus) -> Completion {
    if status.success() {
        return Completion::Succeeded;
    }
    if let Some(code) = status.code() {
        return Completion::Failed(format!("exit code {code}"));
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            return Completion::Failed(format!("killed by signal {signal}"));
        }
    }
    Completion::Failed("killed by signal".to_owned())
}

/// Creates the log file and its directories.
async fn open_log(path: &Path) -> Result<std::fs::File, ExecutorError> {
    if let Some(dir) = path.parent() {
        tokio::fs::create_dir_all(dir)
            .await
            .map_err(|source| write_error(dir, source))?;
    }
    let file = tokio::fs::File::create(path)
        .await
        .map_err(|source| write_error(path, source))?;
    Ok(file.into_std().await)
}

fn write_error(path: &Path, source: std::io::Error) -> ExecutorError {
    ExecutorError::Write {
        path: path.display().to_string(),
        source,
    }
}

/// One id as a single, harmless path component.
fn path_component(id: &str) -> String {
    if id.is_empty() || id == "." || id == ".." {
        return "_".to_owned();
    }
    id.replace(['/', '\\', '\0'], "_")
}
