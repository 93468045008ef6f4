//! What the pipeline makes of a launch: Dexaflow's backpressure (a launch that found no
//! resources is offered again without spending a dispatch attempt), a launch error that spends
//! one, and the steps of an attempt its executor follows (`queued`, then `running` once its
//! process starts, then how it ended; or back to `scheduled` if it never started). On tokio's
//! paused clock, with an executor the test scripts.

use crate::fakes;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dexaflow_admission::dispatch::executor::{
    Admitted, Completion, Ending, ExecuteFuture, Executor, ExecutorError, Launched, Step,
};
use dexaflow_admission::dispatch::task::{State, Task};
use dexaflow_admission::dispatch::{
    Disposition, MAX_DISPATCH_ATTEMPTS, Parts, Pipeline, Shutdown, TaskInstance, TaskStore,
    Trigger, signal,
};
use dexaflow_admission::events::Ignore;
use dexaflow_admission::report::Row;
use fakes::{RecordingMinter, settings, task};
use rustix::io::Errno;
use tokio::sync::mpsc::{self, UnboundedSender};
use tokio::time::Instant;

/// How the scripted executor answers one launch.
enum Answer {
    /// It fails to start the process with this error number.
    SpawnFails(Errno),
    /// It accepts the attempt as queued and follows it; the test sends its steps.
    Follows,
}

/// An executor that answers each launch from a script and hands the test the sender of every
/// attempt it follows.
#[derive(Default)]
struct ScriptedExecutor {
    script: Mutex<VecDeque<Answer>>,
    launches: Mutex<Vec<Admitted>>,
    followed: Mutex<Vec<UnboundedSender<Step>>>,
}

impl ScriptedExecutor {
    fn answering(answers: impl IntoIterator<Item = Answer>) -> Arc<ScriptedExecutor> {
        Arc::new(ScriptedExecutor {
            script: Mutex::new(answers.into_iter().collect()),
            ..ScriptedExecutor::default()
        })
    }

    fn launches(&self) -> usize {
        self.launches.lock().unwrap().len()
    }

    /// Takes the sender of the steps of the earliest attempt the executor follows: dropping it
    /// ends the following.
    fn take_steps(&self) -> UnboundedSender<Step> {
        self.followed.lock().unwrap().remove(0)
    }
}

impl Executor for ScriptedExecutor {
    fn name(&self) -> &'static str {
        "scripted"
    }

    fn execute<'a>(&'a self, attempt: &'a Admitted) -> ExecuteFuture<'a> {
        self.launches.lock().unwrap().push(attempt.clone());
        let answer = self
            .script
            .lock()
            .unwrap()
            .pop_front()
            .expect("the executor was launched more often than scripted");
        let result = match answer {
            Answer::SpawnFails(errno) => Err(spawn_error(errno)),
            Answer::Follows => {
                let (sender, steps) = mpsc::unbounded_channel();
                self.followed.lock().unwrap().push(sender);
                Ok(Launched { steps: Some(steps) })
            }
        };
        Box::pin(async move { result })
    }
}

fn spawn_error(errno: Errno) -> ExecutorError {
    ExecutorError::Spawn {
        program: "sh".to_owned(),
        source: std::io::Error::from_raw_os_error(errno.raw_os_error()),
    }
}

/// A pipeline over a fresh store with `executor`, and the minter it mints with.
struct Bench {
    pipeline: Arc<Pipeline>,
    store: TaskStore,
    minter: Arc<RecordingMinter>,
    // Kept so that shutdown never fires during a test.
    _trigger: Trigger,
    shutdown: Shutdown,
}

impl Bench {
    fn new(executor: Arc<ScriptedExecutor>) -> Bench {
        let store = TaskStore::new();
        let minter = Arc::new(RecordingMinter::default());
        let pipeline = Arc::new(Pipeline::new(Parts {
            settings: Arc::new(settings()),
            store: store.clone(),
            chain: None,
            minter: minter.clone(),
            executor,
            observer: Arc::new(Ignore),
            events: None,
        }));
        let (trigger, shutdown) = signal();
        Bench {
            pipeline,
            store,
            minter,
            _trigger: trigger,
            shutdown,
        }
    }

    /// Offers `task` (scheduling it the first time) if it is ready now, and dispatches it.
    async fn offer(&self, task: &Task) -> Option<Disposition> {
        self.store.schedule(task.clone());
        let (key, task) = self
            .store
            .take_ready(Instant::now(), 1)
            .into_iter()
            .next()?;
        Some(self.pipeline.dispatch(&key, &task, &self.shutdown).await)
    }

    fn row(&self, task: &Task) -> TaskInstance {
        self.store.get(&task.key).expect("the task is stored")
    }

    /// Waits until every followed attempt's steps are written (their senders are dropped).
    async fn followed(&self) {
        // The scripted executor has nothing to stop: this waits until the follower of each
        // launched attempt has written every step it was sent.
        self.pipeline.shut_down().await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_launch_that_finds_no_resources_is_backpressure_and_spends_no_dispatch_attempt() {
    let executor = ScriptedExecutor::answering([Answer::SpawnFails(Errno::MFILE)]);
    let bench = Bench::new(executor.clone());
    let load = task("load");

    let disposition = bench.offer(&load).await;

    assert_eq!(disposition, Some(Disposition::Backpressure));
    let row = bench.row(&load);
    assert_eq!(row.state, State::Scheduled);
    assert_eq!(row.dispatch_attempts, 0);
    assert_eq!(
        row.next_dispatch_at,
        Some(Instant::now() + Duration::from_secs(5))
    );
    assert_eq!(row.failure_reason, None);
    assert_eq!(
        bench.offer(&load).await,
        None,
        "not offered before its backoff"
    );
    assert_eq!(executor.launches(), 1);
}

#[tokio::test(start_paused = true)]
async fn backpressure_never_fails_a_task_however_often_it_comes() {
    let tries = MAX_DISPATCH_ATTEMPTS as usize + 4;
    let answers = (0..tries).map(|index| {
        Answer::SpawnFails(if index % 2 == 0 {
            Errno::MFILE
        } else {
            Errno::AGAIN
        })
    });
    let executor = ScriptedExecutor::answering(answers);
    let bench = Bench::new(executor.clone());
    let load = task("load");

    for _ in 0..tries {
        assert_eq!(bench.offer(&load).await, Some(Disposition::Backpressure));
        tokio::time::advance(Duration::from_secs(5)).await;
    }

    let row = bench.row(&load);
    assert_eq!(row.state, State::Scheduled);
    assert_eq!(row.dispatch_attempts, 0);
    assert_eq!(executor.launches(), tries);
}

#[tokio::test(start_paused = true)]
async fn token_minted_stays_true_for_an_attempt_whose_launch_failed_after_its_token() {
    let executor = ScriptedExecutor::answering(
        (0..MAX_DISPATCH_ATTEMPTS).map(|_| Answer::SpawnFails(Errno::NOENT)),
    );
    let bench = Bench::new(executor.clone());
    let load = task("load");

    assert_eq!(bench.offer(&load).await, Some(Disposition::Rejected));
    let row = bench.row(&load);
    assert_eq!((row.state, row.dispatch_attempts), (State::Scheduled, 1));
    assert!(row.token_minted);
    assert!(Row::of(&row).token_minted, "the report says so too");

    let mut last = None;
    for _ in 1..MAX_DISPATCH_ATTEMPTS {
        tokio::time::advance(Duration::from_secs(300)).await;
        last = bench.offer(&load).await;
    }
    assert_eq!(last, Some(Disposition::Failed));
    let row = bench.row(&load);
    assert_eq!(row.state, State::Failed);
    assert!(row.token_minted);
    assert!(Row::of(&row).token_minted);
    assert_eq!(bench.minter.minted().len(), MAX_DISPATCH_ATTEMPTS as usize);
}

#[tokio::test(start_paused = true)]
async fn an_accepted_attempt_stays_queued_and_unsettled_until_its_process_starts() {
    let executor = ScriptedExecutor::answering([Answer::Follows]);
    let bench = Bench::new(executor.clone());
    let load = task("load");

    assert_eq!(bench.offer(&load).await, Some(Disposition::Executed));

    let row = bench.row(&load);
    assert_eq!(row.state, State::Queued);
    assert!(row.followed);
    assert!(!row.is_settled());
    assert!(row.token_minted);
    assert_eq!(bench.minter.minted().len(), 1);
    assert_eq!(bench.store.count_unsettled(), 1);
    assert!(
        tokio::time::timeout(Duration::from_secs(60), bench.pipeline.shut_down())
            .await
            .is_err(),
        "shutdown waits for the attempt it follows"
    );
}

#[tokio::test(start_paused = true)]
async fn a_followed_attempt_runs_once_started_and_settles_as_it_ended_without_a_new_token() {
    let executor = ScriptedExecutor::answering([Answer::Follows]);
    let bench = Bench::new(executor.clone());
    let load = task("load");
    bench.offer(&load).await;
    let steps = executor.take_steps();

    steps.send(Step::Started).unwrap();
    steps
        .send(Step::Ended(Completion::Failed(Ending::ExitCode(3))))
        .unwrap();
    drop(steps);
    bench.followed().await;

    let row = bench.row(&load);
    assert_eq!(row.state, State::Failed);
    assert_eq!(row.failure_reason.as_deref(), Some("exit code 3"));
    assert!(row.is_settled());
    assert_eq!(bench.minter.minted().len(), 1);
    assert_eq!(executor.launches(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_started_attempt_is_running_and_unsettled() {
    let executor = ScriptedExecutor::answering([Answer::Follows]);
    let bench = Bench::new(executor.clone());
    let load = task("load");
    bench.offer(&load).await;

    // The executor stops following after this step: the follower writes it, then ends.
    executor.take_steps().send(Step::Started).unwrap();
    bench.followed().await;

    let row = bench.row(&load);
    assert_eq!(row.state, State::Running);
    assert!(!row.is_settled());
}

#[tokio::test(start_paused = true)]
async fn a_queued_attempt_that_cannot_start_for_lack_of_resources_is_scheduled_again_with_nothing_spent()
 {
    let executor = ScriptedExecutor::answering([Answer::Follows, Answer::Follows]);
    let bench = Bench::new(executor.clone());
    let load = task("load");
    bench.offer(&load).await;

    executor
        .take_steps()
        .send(Step::NotStarted(spawn_error(Errno::MFILE)))
        .unwrap();
    bench.followed().await;

    let row = bench.row(&load);
    assert_eq!(row.state, State::Scheduled);
    assert_eq!(row.dispatch_attempts, 0);
    assert_eq!(row.executions, 0, "the attempt never ran");
    assert_eq!(row.placement, None);
    assert_eq!(
        row.next_dispatch_at,
        Some(Instant::now() + Duration::from_secs(5))
    );
    tokio::time::advance(Duration::from_secs(5)).await;
    assert_eq!(bench.offer(&load).await, Some(Disposition::Executed));
    assert_eq!(executor.launches(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_queued_attempt_whose_process_cannot_start_spends_a_dispatch_attempt() {
    let executor = ScriptedExecutor::answering([Answer::Follows]);
    let bench = Bench::new(executor.clone());
    let load = task("load");
    bench.offer(&load).await;

    executor
        .take_steps()
        .send(Step::NotStarted(spawn_error(Errno::NOENT)))
        .unwrap();
    bench.followed().await;

    let row = bench.row(&load);
    assert_eq!(row.state, State::Scheduled);
    assert_eq!(row.dispatch_attempts, 1);
    let reason = row.failure_reason.expect("the cause is shown");
    assert!(reason.starts_with("starting \"sh\": "), "{reason}");
}

#[tokio::test(start_paused = true)]
async fn a_queued_attempt_handed_back_at_shutdown_is_scheduled_again_with_nothing_spent() {
    let executor = ScriptedExecutor::answering([Answer::Follows]);
    let bench = Bench::new(executor.clone());
    let load = task("load");
    bench.offer(&load).await;

    executor.take_steps().send(Step::HandedBack).unwrap();
    bench.followed().await;

    let row = bench.row(&load);
    assert_eq!(row.state, State::Scheduled);
    assert_eq!(row.dispatch_attempts, 0);
    assert_eq!(row.next_dispatch_at, None, "offered again at once");
    assert!(!row.is_settled());
    assert!(row.token_minted, "its token was minted all the same");
}
