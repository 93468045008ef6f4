//! The `lite` executor: runs each admitted attempt's command as a local subprocess.
//!
//! There is no isolation: the command runs as the dispatcher's user on its host. It ignores the
//! execution fields and resources, which only mean something for a pod. What it does keep is
//! the environment contract of a pod: the task's environment without reserved keys, plus the
//! agent token and the task instance id.
//!
//! # Processes
//! - Each attempt runs in a process group of its own, so that all it started can be signalled
//!   at once. When the command exits, whatever it left running in its group is killed: an
//!   attempt ends with its command, as a pod's processes end with the pod.
//! - At most `max_parallel` attempts run at once. An attempt launched beyond that is accepted
//!   at once (`queued`, with its one token) and its process starts when a slot frees
//!   (`running`), without holding up the dispatcher.
//! - An attempt that runs past its task's execution timeout is ended (below) and fails with
//!   `execution timed out after Ns`.
//! - At shutdown ([`Executor::shutdown`]) an attempt not yet started is handed back; a running
//!   one is ended and fails with [`ORPHANED`].
//!
//! Ending an attempt sends TERM to its process group, then KILL to the group once the command
//! has exited or `kill_grace` has passed, whichever comes first.
//!
//! # Descendants that leave their group
//! A task's process may leave its attempt's group (`setsid`, a daemon's double fork), where
//! signalling the group cannot reach it. On Linux the dispatcher is the subreaper of its
//! descendants (set when a `Lite` is built, see [`Lite::new`]): such a process, once its parent
//! exits, becomes the dispatcher's child rather than init's, so it can still be found.
//! - It runs on after its attempt ends (which of the attempts it came from is no longer known),
//!   and is ended when the executor shuts down (as `dispatch` does at the end of every run,
//!   completed or interrupted): TERM as soon as shutdown finds it adopted, KILL once
//!   `kill_grace` has passed since shutdown began, whatever it started being adopted and ended
//!   in turn.
//! - The processes of an attempt's group that the dispatcher adopted are reaped when the
//!   attempt ends, the others at shutdown, so that none is left a zombie.
//! - Adopting belongs to the process, not to one executor: a shutdown ends what the tasks of
//!   every `Lite` in the process left.
//!
//! What a shutdown cannot reach: a process adopted from a task is told from the dispatcher's own
//! children by its process group (a task's descendants are never in the dispatcher's group)
//! and its session, so one that made itself the leader of a new group inside the dispatcher's
//! session (`setpgid(0, 0)`, a job-control shell's background job) and was then orphaned is
//! taken for an attempt's own command and left running.
//!
//! # When the dispatcher is killed
//! When the dispatcher is killed with `kill -9` (or dies in any way that runs no shutdown: a
//! signal it does not handle, such as SIGHUP), no shutdown ends its tasks. On Linux each
//! attempt's command is started with a parent-death signal (`PR_SET_PDEATHSIG`, SIGKILL), so
//! the kernel kills every running command with the dispatcher. What those commands started, and
//! every process the dispatcher had adopted, is not signalled: the subreaper is gone with the
//! dispatcher, and they are re-parented to init (or to the nearest subreaper above the
//! dispatcher) and run on. The kernel sends the signal when the *thread* that started the
//! command exits, so a command is started on a thread that lives while the dispatcher runs (the
//! actix arbiter that dispatched the attempt, which lives until the dispatcher drains); and it
//! clears the signal when the command executes a set-user-ID or set-group-ID program, which then
//! runs on as well.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::future::Future;
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;

use rustix::process::{
    Pid, Signal, WaitOptions, getpid, kill_process, kill_process_group, test_kill_process_group,
    waitpid,
};
use sha2::{Digest, Sha256};
use tokio::process::{Child, Command};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};

use super::{
    AGENT_TOKEN_ENV, Admitted, Completion, Ending, ExecuteFuture, Executor, ExecutorError,
    Launched, ShutdownFuture, Step, TASK_INSTANCE_ID_ENV, is_reserved_env,
};
use crate::dispatch::shutdown::{self, Shutdown, Tracked, Tracker, Trigger};

/// How long an attempt's processes get between TERM and KILL unless `executor.lite.kill_grace`
/// says otherwise: what `docker stop` gives.
pub const DEFAULT_KILL_GRACE: Duration = Duration::from_secs(10);

/// The failure reason of an attempt that was running when the dispatcher shut down, in the
/// manner of Dexaflow's `orphaned: ...`.
pub const ORPHANED: &str = "orphaned: the dispatcher shut down while the task ran";

/// The longest path component a log path is given, well inside the 255 bytes file systems
/// allow; a longer encoded id is cut and given a hash.
const MAX_COMPONENT: usize = 200;
/// How much of a long encoded id is kept before its hash.
const KEPT_OF_LONG_COMPONENT: usize = 120;

/// How often shutdown looks for processes adopted from tasks, and an attempt's end for its
/// group's last processes to be gone.
const POLL: Duration = Duration::from_millis(20);
/// How many times an attempt's end looks for its group to be empty before leaving what is left
/// to shutdown: a killed process is gone within a poll or two, unless the kernel holds it in
/// an uninterruptible wait.
const GROUP_POLLS: u32 = 50;
/// How many times shutdown sends KILL to what it still finds adopted once `kill_grace` has
/// passed and every attempt has ended, before it gives up on a task that forks faster than it
/// is killed.
const KILL_ROUNDS: u32 = 50;

/// The largest `executor.lite.max_parallel`: far more processes than a host runs usefully, and
/// few enough that the slots' bookkeeping is never an allocation to fear.
pub const MAX_PARALLEL: usize = 65_536;

/// How many attempts run at once unless `executor.lite.max_parallel` says otherwise: twice the
/// CPUs this process may use, since a lite task is usually a short command that waits on I/O
/// as much as it computes.
pub fn default_max_parallel() -> usize {
    std::thread::available_parallelism().map_or(1, NonZeroUsize::get) * 2
}

/// Runs attempts as subprocesses, one log file per attempt.
#[derive(Debug)]
pub struct Lite {
    log_dir: PathBuf,
    kill_grace: Duration,
    slots: Arc<Semaphore>,
    stop: Trigger,
    stopped: Shutdown,
    // Every attempt accepted and not yet ended or handed back; shutdown waits for them.
    attempts: Tracker,
}

impl Lite {
    /// A `lite` executor writing each attempt's output under `log_dir`, with the default kill
    /// grace and parallelism.
    ///
    /// On Linux it makes this process the subreaper of its descendants
    /// (`PR_SET_CHILD_SUBREAPER`), so that a process a task leaves outside its attempt's group
    /// is adopted by the dispatcher when its parent exits, and ended at shutdown, rather than
    /// adopted by init and left running. That setting belongs to the whole process and lasts
    /// as long as it does; it is made here, when the process takes on running tasks as its
    /// descendants, and not in `main`, so that a library user running tasks through a `Lite`
    /// gets it too and a process that runs none never adopts anything.
    pub fn new(log_dir: impl Into<PathBuf>) -> Lite {
        become_subreaper();
        let (stop, stopped) = shutdown::signal();
        Lite {
            log_dir: log_dir.into(),
            kill_grace: DEFAULT_KILL_GRACE,
            slots: Arc::new(Semaphore::new(default_max_parallel())),
            stop,
            stopped,
            attempts: Tracker::default(),
        }
    }

    /// Gives an attempt's processes `kill_grace` between TERM and KILL when they are ended.
    pub fn with_kill_grace(mut self, kill_grace: Duration) -> Lite {
        self.kill_grace = kill_grace;
        self
    }

    /// Runs at most `max_parallel` attempts at once (at least one).
    pub fn with_max_parallel(mut self, max_parallel: usize) -> Lite {
        self.slots = Arc::new(Semaphore::new(max_parallel.max(1)));
        self
    }

    /// The log file of one attempt:
    /// `<log_dir>/<tenant>/<dag>/<run>/<task>/try-<try>-attempt-<epoch>.log`.
    ///
    /// Each id becomes one path component by an encoding that gives distinct ids distinct
    /// components (`path_component`), so that no two task instances share a log and no id
    /// can leave `log_dir`; the attempt epoch tells two attempts of one try apart.
    pub fn log_path(&self, attempt: &Admitted) -> PathBuf {
        let key = &attempt.task.key;
        let mut path = self.log_dir.clone();
        for id in [&key.tenant, &key.dag_id, &key.run_id, &key.task_id] {
            path.push(path_component(id));
        }
        path.push(format!(
            "try-{}-attempt-{}.log",
            attempt.try_number, attempt.attempt_epoch
        ));
        path
    }

    async fn launch(&self, attempt: &Admitted) -> Result<Launched, ExecutorError> {
        if attempt.task.command.is_empty() {
            return Err(ExecutorError::NoCommand {
                task: attempt.task.key.to_string(),
            });
        }
        let (steps, receiver) = mpsc::unbounded_channel();
        let run = Run {
            log: self.log_path(attempt),
            attempt: attempt.clone(),
            kill_grace: self.kill_grace,
            stopped: self.stopped.clone(),
            steps,
            _tracked: self.attempts.track(),
        };
        let slot = if self.stopped.is_fired() {
            None
        } else {
            Arc::clone(&self.slots).try_acquire_owned().ok()
        };
        match slot {
            // A free slot: start now, so that a launch error is the dispatcher's to handle.
            Some(slot) => {
                let process = run.start().await?;
                run.send(Step::Started);
                tokio::spawn(run.follow(process, slot));
            }
            None => {
                tokio::spawn(run.wait_for_slot(Arc::clone(&self.slots)));
            }
        }
        Ok(Launched {
            steps: Some(receiver),
        })
    }
}

impl Executor for Lite {
    fn name(&self) -> &'static str {
        "lite"
    }

    /// Starts the attempt's command if a slot is free and returns once its process has
    /// started; otherwise accepts it at once, to start when a slot frees. Its steps follow.
    fn execute<'a>(&'a self, attempt: &'a Admitted) -> ExecuteFuture<'a> {
        Box::pin(self.launch(attempt))
    }

    /// Starts nothing more: attempts waiting for a slot are handed back, running ones are
    /// ended and fail as [`ORPHANED`], and every process adopted from a task is ended (TERM,
    /// then KILL once `kill_grace` has passed). Resolves once every attempt has sent its last
    /// step and no adopted process is left.
    fn shutdown(&self) -> ShutdownFuture<'_> {
        self.stop.fire();
        Box::pin(end_adopted(self.kill_grace, self.attempts.idle()))
    }
}

/// One accepted attempt, from its launch to its last step.
struct Run {
    log: PathBuf,
    attempt: Admitted,
    kill_grace: Duration,
    stopped: Shutdown,
    steps: mpsc::UnboundedSender<Step>,
    // Dropped after the last step is sent.
    _tracked: Tracked,
}

impl Run {
    fn send(&self, step: Step) {
        // Nobody follows an attempt whose steps receiver was dropped; it runs on regardless.
        let _ = self.steps.send(step);
    }

    /// Waits for a slot, then starts the attempt and follows it; hands it back if shutdown
    /// comes first.
    async fn wait_for_slot(self, slots: Arc<Semaphore>) {
        let slot = tokio::select! {
            biased;
            () = self.stopped.triggered() => None,
            slot = slots.acquire_owned() => slot.ok(),
        };
        let Some(slot) = slot.filter(|_| !self.stopped.is_fired()) else {
            self.send(Step::HandedBack);
            return;
        };
        match self.start().await {
            Ok(process) => {
                self.send(Step::Started);
                self.follow(process, slot).await;
            }
            Err(error) => self.send(Step::NotStarted(error)),
        }
    }

    /// Opens the attempt's log and starts its command in a process group of its own.
    async fn start(&self) -> Result<Process, ExecutorError> {
        let task = &self.attempt.task;
        let Some((program, args)) = task.command.split_first() else {
            return Err(ExecutorError::NoCommand {
                task: task.key.to_string(),
            });
        };
        let stdout = open_log(&self.log).await?;
        let stderr = stdout
            .try_clone()
            .map_err(|source| write_error(&self.log, source))?;

        let mut command = Command::new(program);
        command
            .args(args)
            .env_clear()
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            .process_group(0);
        // A clean environment, so the dispatcher's own (its config overrides, its secrets) never
        // reaches a task; PATH alone is kept so that a command such as `sh` is found.
        if let Some(search_path) = std::env::var_os("PATH") {
            command.env("PATH", search_path);
        }
        command
            .envs(task.env.iter().filter(|(key, _)| !is_reserved_env(key)))
            .env(AGENT_TOKEN_ENV, &self.attempt.token)
            .env(TASK_INSTANCE_ID_ENV, &self.attempt.task_instance_id);
        let child = spawn(command).map_err(|source| ExecutorError::Spawn {
            program: program.clone(),
            source,
        })?;
        // The process group's id is its leader's pid. Pid 1 never names a child of ours, and
        // signalling group 1 would signal every process this user may signal.
        let group = child
            .id()
            .and_then(|pid| i32::try_from(pid).ok())
            .filter(|pid| *pid > 1)
            .and_then(Pid::from_raw)
            .map(Group);
        Ok(Process { child, group })
    }

    /// Waits for the process to exit, ending it at its execution timeout or at shutdown, and
    /// sends how it ended.
    async fn follow(self, mut process: Process, slot: OwnedSemaphorePermit) {
        let timeout = self.attempt.task.execution_timeout();
        let deadline = async {
            match timeout {
                Some(timeout) => tokio::time::sleep(timeout).await,
                None => std::future::pending().await,
            }
        };
        let completion = tokio::select! {
            biased;
            status = process.child.wait() => match status {
                Ok(status) => completion_of(status),
                Err(error) => Completion::Failed(Ending::Unwaitable(error.to_string())),
            },
            () = deadline => {
                process.end(self.kill_grace).await;
                let seconds = timeout.unwrap_or_default().as_secs();
                Completion::Failed(Ending::TimedOut { seconds })
            }
            () = self.stopped.triggered() => {
                process.end(self.kill_grace).await;
                Completion::Failed(Ending::Orphaned)
            }
        };
        // Kills what the command left in its group, and reaps what of it this process adopted,
        // before the slot is given to another.
        let Process { child, group } = process;
        drop(child);
        if let Some(group) = group {
            group.clear().await;
        }
        drop(slot);
        self.send(Step::Ended(completion));
    }
}

/// A started attempt: its command's process and the process group it leads.
struct Process {
    child: Child,
    group: Option<Group>,
}

impl Process {
    /// Sends TERM to the group, waits up to `grace` for the command to exit, then KILL to the
    /// group, and reaps the command.
    async fn end(&mut self, grace: Duration) {
        if let Some(group) = &self.group {
            group.signal(Signal::TERM);
        }
        if tokio::time::timeout(grace, self.child.wait())
            .await
            .is_err()
        {
            if let Some(group) = &self.group {
                group.signal(Signal::KILL);
            }
            // Reaped so that it leaves no zombie; KILL cannot be ignored.
            let _ = self.child.wait().await;
        }
    }
}

/// The process group of one attempt. Dropping it kills whatever is left in it, however the
/// attempt ends (its command exited, it was ended, its follower was dropped), so that nothing
/// an attempt started outlives it.
struct Group(Pid);

impl Group {
    fn signal(&self, signal: Signal) {
        // ESRCH, the group is already gone, is the outcome wanted; nothing else can fail for a
        // group of our own child.
        let _ = kill_process_group(self.0, signal);
    }

    /// Kills what is left in the group once its command has been reaped, and reaps the
    /// processes of it this process adopted (their parent in the group exited first), until
    /// the group is empty or [`GROUP_POLLS`] polls have passed; shutdown reaps what is left.
    async fn clear(self) {
        self.signal(Signal::KILL);
        for _ in 0..GROUP_POLLS {
            // A zombie is still a member: the group is empty once every one is reaped.
            if test_kill_process_group(self.0).is_err() {
                return;
            }
            for process in adopted_children() {
                if process.group == self.0.as_raw_pid() && process.exited {
                    process.reap();
                }
            }
            tokio::time::sleep(POLL).await;
        }
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        self.signal(Signal::KILL);
    }
}

/// Starts an attempt's command with a parent-death signal: SIGKILL, sent by the kernel to the
/// command when the thread that started it exits, so that a dispatcher killed in a way that runs
/// no shutdown (`kill -9`) takes each task's command with it.
///
/// The signal follows the *thread* that forked the command, not the process: the command must
/// be started on a thread that lives as long as the dispatcher runs attempts. It is started
/// here, synchronously (`tokio::process::Command::spawn` forks on the calling thread; no
/// blocking-pool thread is involved, and the log is opened before), by the thread that polls
/// [`Executor::execute`] or, for an attempt queued for a slot, by the one that runs the task
/// `launch` spawned with `tokio::spawn`. In `dispatch` both are the same actix arbiter: the
/// dispatcher's own (the main thread, for the whole run) or, with `worker_threads` above 0, the
/// admission worker's arbiter that dispatched the attempt, which lives until the dispatcher
/// drains, before the executor shuts down. When a worker's arbiter stops, the tasks it ran, the
/// attempts' followers among them, are dropped, and each dropped attempt's process group is
/// killed by its `Group`'s drop before the thread ends; the parent-death signal that follows
/// finds the command gone. A library user running a `Lite` on a multi-threaded tokio runtime
/// has its commands started on the runtime's worker threads, which live as long as the runtime
/// unless something calls `block_in_place` (which hands the worker's place to another thread
/// and lets the caller's thread end later); calling `execute` from a thread that ends before
/// its attempts do (a `spawn_blocking` closure, a short-lived `block_on`) kills their commands
/// when it ends.
///
/// Setting the signal takes `pre_exec`, which is `unsafe`; `ur-taking-me-with-you` does it
/// (`prctl(PR_SET_PDEATHSIG, SIGKILL)` between fork and exec), and this crate keeps its own code
/// free of `unsafe`. The kernel clears the signal when the command executes a set-user-ID or
/// set-group-ID program or one with file capabilities, and it ends the command alone: what the
/// command started is re-parented and runs on.
#[cfg(target_os = "linux")]
fn spawn(command: Command) -> std::io::Result<Child> {
    ur_taking_me_with_you::spawn_dying_with_parent_async(command)
}

/// Starts an attempt's command; where there is no `PR_SET_PDEATHSIG`, with no parent-death
/// signal (the crate's other platforms' means would put a variable in the task's environment and
/// keep a pipe open in the dispatcher for each attempt).
#[cfg(not(target_os = "linux"))]
fn spawn(mut command: Command) -> std::io::Result<Child> {
    command.spawn()
}

/// Makes this process the subreaper of its descendants, where the platform has subreapers.
fn become_subreaper() {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        // Fails only on a kernel older than 3.4, which adopts nothing for us: shutdown then
        // finds nothing adopted, and what left its group runs on as it did before.
        let _ = rustix::process::set_child_subreaper(Some(getpid()));
    }
}

/// Ends every process this one adopted from a task: TERM to each as soon as it is found, KILL
/// to each still found once `grace` has passed, looking again every [`POLL`] until
/// `runs_ended` has resolved and none is left (or [`KILL_ROUNDS`] rounds of KILL have not
/// sufficed). Reaps each one that has exited.
///
/// An attempt's command is ended by its own run, not here; what its group leaves outside the
/// group is adopted once its parent exits, and found on a later look.
async fn end_adopted(grace: Duration, runs_ended: impl Future<Output = ()>) {
    let deadline = tokio::time::Instant::now() + grace;
    let mut runs_ended = std::pin::pin!(runs_ended);
    let mut running = true;
    // A pid in here is not reused before it is reaped, since only its parent, this process,
    // reaps it; it leaves the set when reaped.
    let mut sent_term = HashSet::new();
    let mut kill_rounds = 0;
    loop {
        let past_grace = tokio::time::Instant::now() >= deadline;
        let mut left = false;
        for process in adopted_children() {
            if process.exited {
                process.reap();
                sent_term.remove(&process.pid);
            } else if past_grace {
                left = true;
                process.signal(Signal::KILL);
            } else {
                left = true;
                if sent_term.insert(process.pid) {
                    process.signal(Signal::TERM);
                }
            }
        }
        if !running {
            if !left {
                return;
            }
            if past_grace {
                kill_rounds += 1;
                if kill_rounds > KILL_ROUNDS {
                    return;
                }
            }
        }
        tokio::select! {
            () = &mut runs_ended, if running => running = false,
            () = tokio::time::sleep(POLL) => {}
        }
    }
}

/// One process as `/proc/<pid>/stat` shows it: whether it has exited (a zombie waiting to be
/// reaped), its parent, its process group and its session.
struct ProcessStat {
    pid: i32,
    exited: bool,
    parent: i32,
    group: i32,
    session: i32,
}

impl ProcessStat {
    /// The process `pid` as `/proc` shows it now; `None` once it is gone.
    fn read(pid: i32) -> Option<ProcessStat> {
        let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // The fields follow the command name, which is in parentheses and may hold spaces and
        // parentheses itself.
        let (_, fields) = text.rsplit_once(')')?;
        let mut fields = fields.split_whitespace();
        let state = fields.next()?;
        let mut ids = fields.take(3).map(str::parse::<i32>);
        let (Some(Ok(parent)), Some(Ok(group)), Some(Ok(session))) =
            (ids.next(), ids.next(), ids.next())
        else {
            return None;
        };
        Some(ProcessStat {
            pid,
            exited: matches!(state, "Z" | "X"),
            parent,
            group,
            session,
        })
    }

    /// Sends `signal`. It is a child of this process not yet reaped, so its pid cannot have
    /// been reused; ESRCH, it is gone, is the outcome wanted.
    fn signal(&self, signal: Signal) {
        if let Some(pid) = Pid::from_raw(self.pid) {
            let _ = kill_process(pid, signal);
        }
    }

    /// Reaps it, once it has exited, so that it leaves no zombie.
    fn reap(&self) {
        // Never `waitpid(None)`, which would reap a command the executor itself waits for.
        if let Some(pid) = Pid::from_raw(self.pid) {
            let _ = waitpid(Some(pid), WaitOptions::NOHANG);
        }
    }
}

/// Every child of this process that it adopted from a task, as `/proc` shows them now.
///
/// A child is taken for adopted when it is outside this process's own group (where the
/// dispatcher's own children stay, and a task's descendants never are) and is not the leader
/// of a group in this process's session (as an attempt's command is, of any `Lite` in the
/// process: its run follows it). Nothing is found where there is no `/proc`.
fn adopted_children() -> Vec<ProcessStat> {
    // Our own group and session are read from `/proc` as plain numbers, never as `Pid`s: in a
    // PID namespace whose group or session leader lives outside it (a container started from
    // a shell, a CI sandbox), they are 0, which no `Pid` can hold.
    let Some(ourselves) = ProcessStat::read(getpid().as_raw_pid()) else {
        return Vec::new();
    };
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(ProcessStat::read)
        .filter(|process| {
            let leads_a_group_of_ours =
                process.group == process.pid && process.session == ourselves.session;
            process.parent == ourselves.pid
                && process.group != ourselves.group
                && !leads_a_group_of_ours
        })
        .collect()
}

/// How an exit status reads on the task instance.
fn completion_of(status: ExitStatus) -> Completion {
    if status.success() {
        return Completion::Succeeded;
    }
    if let Some(code) = status.code() {
        return Completion::Failed(Ending::ExitCode(code));
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            return Completion::Failed(Ending::Killed(Some(signal)));
        }
    }
    Completion::Failed(Ending::Killed(None))
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

/// One id as one path component, such that distinct ids give distinct components and none is
/// `.`, `..`, hidden or contains a separator.
///
/// ASCII letters, digits, `-` and `_` are kept, and `.` except as the first character; every
/// other byte of the id's UTF-8 is written `%XX`. An empty id is `%`, which no other id gives.
/// An encoding longer than 200 bytes keeps its first 120 and adds `~` and the SHA-256 of the
/// id in hex (`~` is always escaped otherwise, so a cut component never equals a whole one).
pub(crate) fn path_component(id: &str) -> String {
    if id.is_empty() {
        return "%".to_owned();
    }
    let mut encoded = String::with_capacity(id.len());
    for (index, byte) in id.bytes().enumerate() {
        let kept = byte.is_ascii_alphanumeric()
            || byte == b'-'
            || byte == b'_'
            || (byte == b'.' && index > 0);
        if kept {
            encoded.push(char::from(byte));
        } else {
            let _ = write!(encoded, "%{byte:02X}");
        }
    }
    if encoded.len() <= MAX_COMPONENT {
        return encoded;
    }
    // Cut before an escape, never inside one.
    let mut cut = KEPT_OF_LONG_COMPONENT;
    while encoded.as_bytes()[cut - 1] == b'%' || encoded.as_bytes()[cut - 2] == b'%' {
        cut -= 1;
    }
    let digest = Sha256::digest(id.as_bytes());
    let mut component = encoded[..cut].to_owned();
    component.push('~');
    for byte in digest {
        let _ = write!(component, "{byte:02x}");
    }
    component
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_becomes_one_path_component_that_cannot_climb_or_split() {
        assert_eq!(path_component("a/b"), "a%2Fb");
        assert_eq!(path_component("a_b"), "a_b");
        assert_eq!(path_component(".."), "%2E.");
        assert_eq!(path_component(""), "%");
    }
}
