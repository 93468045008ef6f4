//! A timer on a thread of its own, for the waits of the `sleep:DUR` and `jitter:MIN..MAX` hooks.
//!
//! A synthetic hook stands for a remote one, whose answer arrives as soon as its socket is
//! readable. Its wait must therefore end at its deadline, not at the next tick of some timer:
//!
//! - tokio's timer counts whole milliseconds and rounds a deadline up to its next tick, so
//!   `tokio::time::sleep(1ms)` lasts 1 to 2 ms, about 2.1 ms on a busy runtime;
//! - a thread parked until a deadline (`std::thread::sleep`, a condition variable) wakes 50 to
//!   150 µs late on a shared virtual machine, 5 to 15% of a 1 ms wait.
//!
//! A run sized on either would be sized wrong: 64 workers behind a 1 ms hook would look like 30
//! or 58 thousand attempts per second where the dispatcher can do 64. The [`TimerThread`]
//! parks until `SPIN` before the earliest deadline and spins through the rest, so a wait ends
//! within microseconds of its deadline and never before it. The spinning costs up to one core
//! while waits are pending; that core stands for the hooks' own machines, so the harness leaves
//! it out of the CPU time it reports (`TimerThread::cpu_time`).
//!
//! It follows the wall clock, not tokio's: a paused tokio clock does not reach it, so tests that
//! pause the clock use [`HookTimer::Tokio`].

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::cpu::cpu_time_in;

use crate::sync::lock;

/// How long before the earliest deadline the thread stops parking and starts spinning: longer
/// than a parked thread is late on the machines the harness runs on.
pub(crate) const SPIN: Duration = Duration::from_micros(200);

/// Which timer the synthetic hooks wait on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum HookTimer {
    /// A [`TimerThread`]: a wait ends within microseconds after its deadline.
    #[default]
    Thread,
    /// `tokio::time::sleep`: millisecond ticks, rounded up; follows a paused tokio clock.
    Tokio,
}

/// A thread that ends waits at their deadlines. Cloning shares the thread; it stops when the
/// last clone is dropped.
#[derive(Debug, Clone)]
pub struct TimerThread {
    handle: Arc<Handle>,
}

/// Stops the thread when dropped.
#[derive(Debug)]
struct Handle {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    // `/proc/<pid>/task/<tid>/stat` of the thread (Linux only).
    stat: Option<PathBuf>,
}

#[derive(Debug, Default)]
struct Shared {
    state: Mutex<State>,
    // Signalled when a wait becomes the earliest while the thread is parked, and on stop.
    changed: Condvar,
    // Counts the waits that became the earliest, so that a spin for a later deadline sees one.
    earlier: AtomicU64,
}

#[derive(Debug, Default)]
struct State {
    waits: BinaryHeap<Reverse<Entry>>,
    next_id: u64,
    parked: bool,
    stopping: bool,
}

#[derive(Debug)]
struct Entry {
    deadline: Instant,
    // Breaks ties between equal deadlines, so that the heap's order is total.
    id: u64,
    slot: Arc<Slot>,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Entry) -> bool {
        self.cmp(other).is_eq()
    }
}

impl Eq for Entry {}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Entry) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Entry {
    fn cmp(&self, other: &Entry) -> std::cmp::Ordering {
        (self.deadline, self.id).cmp(&(other.deadline, other.id))
    }
}

/// What a wait and the thread share: whether the deadline passed, and whom to wake.
#[derive(Debug, Default)]
struct Slot {
    fired: AtomicBool,
    waker: Mutex<Option<Waker>>,
}

impl Slot {
    fn fire(&self) {
        self.fired.store(true, Ordering::Release);
        if let Some(waker) = lock(&self.waker).take() {
            waker.wake();
        }
    }
}

impl Shared {
    fn run(&self) {
        let mut due = Vec::new();
        let mut state = lock(&self.state);
        while !state.stopping {
            let now = Instant::now();
            while let Some(Reverse(entry)) = state.waits.peek() {
                if entry.deadline > now {
                    break;
                }
                if let Some(Reverse(entry)) = state.waits.pop() {
                    due.push(entry.slot);
                }
            }
            if !due.is_empty() {
                // Wake outside the lock: a woken runtime may start a new wait at once.
                drop(state);
                for slot in due.drain(..) {
                    slot.fire();
                }
                state = lock(&self.state);
                continue;
            }
            let earliest = state.waits.peek().map(|Reverse(entry)| entry.deadline);
            state = match earliest {
                Some(deadline) if deadline - now <= SPIN => {
                    let earlier = self.earlier.load(Ordering::Acquire);
                    drop(state);
                    while Instant::now() < deadline
                        && self.earlier.load(Ordering::Acquire) == earlier
                    {
                        std::hint::spin_loop();
                    }
                    lock(&self.state)
                }
                Some(deadline) => self.park(state, Some(deadline - now - SPIN)),
                None => self.park(state, None),
            };
        }
    }

    /// Parks the thread for `duration` (until notified when `None`), or less when a wait
    /// becomes the earliest or the timer stops.
    fn park<'a>(
        &'a self,
        mut state: MutexGuard<'a, State>,
        duration: Option<Duration>,
    ) -> MutexGuard<'a, State> {
        state.parked = true;
        let mut state = match duration {
            Some(duration) => {
                self.changed
                    .wait_timeout(state, duration)
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .0
            }
            None => self
                .changed
                .wait(state)
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        };
        state.parked = false;
        state
    }
}

impl TimerThread {
    /// Starts the thread.
    ///
    /// # Panics
    /// When the operating system cannot start a thread, as [`std::thread::spawn`].
    pub fn start() -> TimerThread {
        let shared = Arc::new(Shared::default());
        let (stat_tx, stat_rx) = std::sync::mpsc::channel();
        let thread = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("loadtest-timer".to_owned())
                .spawn(move || {
                    let stat = std::fs::read_link("/proc/thread-self")
                        .ok()
                        .map(|task| PathBuf::from("/proc").join(task).join("stat"));
                    // `start` waits for this, so `cpu_time` can be read as soon as it returns.
                    let _ = stat_tx.send(stat);
                    shared.run();
                })
                .expect("the operating system starts the timer thread")
        };
        TimerThread {
            handle: Arc::new(Handle {
                shared,
                thread: Some(thread),
                stat: stat_rx.recv().ok().flatten(),
            }),
        }
    }

    /// A future that is ready once `duration` has passed, counted from now; never, when that
    /// is past the end of the clock (`sleep:300000000y`), as with tokio's timer.
    pub fn sleep(&self, duration: Duration) -> Sleep {
        let slot = Arc::new(Slot::default());
        let Some(deadline) = Instant::now().checked_add(duration) else {
            return Sleep { slot };
        };
        let shared = &self.handle.shared;
        let mut state = lock(&shared.state);
        let id = state.next_id;
        state.next_id += 1;
        let is_earliest = state
            .waits
            .peek()
            .is_none_or(|Reverse(first)| deadline < first.deadline);
        state.waits.push(Reverse(Entry {
            deadline,
            id,
            slot: Arc::clone(&slot),
        }));
        let parked = state.parked;
        drop(state);
        if is_earliest {
            shared.earlier.fetch_add(1, Ordering::Release);
            if parked {
                shared.changed.notify_one();
            }
        }
        Sleep { slot }
    }

    /// The CPU time the thread has used so far, spinning included; `None` where `/proc` does
    /// not tell (any OS but Linux).
    pub(crate) fn cpu_time(&self) -> Option<Duration> {
        cpu_time_in(self.handle.stat.as_ref()?)
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        lock(&self.shared.state).stopping = true;
        self.shared.earlier.fetch_add(1, Ordering::Release);
        self.shared.changed.notify_one();
        if let Some(thread) = self.thread.take() {
            // The thread only waits and wakes; it cannot have panicked with anything to report.
            let _ = thread.join();
        }
    }
}

/// A wait on a [`TimerThread`]. Dropping it early (a hook's timeout) leaves a small entry to
/// expire unseen, but lets go of the waker at once: the waker holds the waiting task, which
/// would otherwise stay in memory until the deadline.
#[derive(Debug)]
pub struct Sleep {
    slot: Arc<Slot>,
}

impl Drop for Sleep {
    fn drop(&mut self) {
        lock(&self.slot.waker).take();
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.slot.fired.load(Ordering::Acquire) {
            return Poll::Ready(());
        }
        {
            let mut waker = lock(&self.slot.waker);
            if !waker
                .as_ref()
                .is_some_and(|stored| stored.will_wake(cx.waker()))
            {
                *waker = Some(cx.waker().clone());
            }
        }
        // The deadline may have passed between the check and storing the waker.
        if self.slot.fired.load(Ordering::Acquire) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("a current-thread runtime starts")
    }

    #[test]
    fn a_wait_never_ends_before_its_deadline() {
        let timer = TimerThread::start();
        runtime().block_on(async {
            for micros in [0, 50, 300, 1_000, 2_500] {
                let duration = Duration::from_micros(micros);
                let started = Instant::now();
                timer.sleep(duration).await;
                assert!(
                    started.elapsed() >= duration,
                    "a {duration:?} wait ended after {:?}",
                    started.elapsed()
                );
            }
        });
    }

    #[test]
    fn a_wait_past_the_end_of_the_clock_never_ends_and_takes_no_entry() {
        let timer = TimerThread::start();
        let mut sleep = std::pin::pin!(timer.sleep(Duration::MAX));
        let mut context = Context::from_waker(Waker::noop());
        assert!(sleep.as_mut().poll(&mut context).is_pending());
        assert!(lock(&timer.handle.shared.state).waits.is_empty());
    }

    /// A waker that only counts its clones, through the `Arc` it is made from.
    struct CountingWaker;

    impl std::task::Wake for CountingWaker {
        fn wake(self: Arc<Self>) {}
    }

    #[test]
    fn dropping_a_pending_wait_lets_go_of_its_waker_before_the_deadline() {
        let timer = TimerThread::start();
        let counted = Arc::new(CountingWaker);
        let waker = Waker::from(Arc::clone(&counted));
        let mut sleep = Box::pin(timer.sleep(Duration::from_secs(3600)));
        assert!(
            sleep
                .as_mut()
                .poll(&mut Context::from_waker(&waker))
                .is_pending()
        );
        let held = Arc::strong_count(&counted);
        drop(sleep);
        assert_eq!(
            Arc::strong_count(&counted),
            held - 1,
            "the entry still holds the waker"
        );
        assert_eq!(lock(&timer.handle.shared.state).waits.len(), 1);
    }

    #[test]
    fn waits_end_in_deadline_order_whatever_the_order_they_started_in() {
        let timer = TimerThread::start();
        let finished = Arc::new(Mutex::new(Vec::new()));
        runtime().block_on(async {
            let local = tokio::task::LocalSet::new();
            for millis in [3_u64, 1, 4, 2] {
                let sleep = timer.sleep(Duration::from_millis(millis));
                let finished = Arc::clone(&finished);
                local.spawn_local(async move {
                    sleep.await;
                    lock(&finished).push(millis);
                });
            }
            local.await;
        });
        assert_eq!(*lock(&finished), vec![1, 2, 3, 4]);
    }

    #[test]
    fn a_wait_that_becomes_the_earliest_interrupts_a_longer_park() {
        let timer = TimerThread::start();
        let _hour_long = timer.sleep(Duration::from_secs(3600));
        let short = runtime().block_on(async {
            // A guard, not a measurement: the short wait takes a millisecond.
            tokio::time::timeout(
                Duration::from_secs(60),
                timer.sleep(Duration::from_millis(1)),
            )
            .await
        });
        assert!(
            short.is_ok(),
            "the thread kept parking for the hour-long wait"
        );
    }

    #[test]
    fn dropping_the_last_clone_stops_the_thread_with_waits_pending() {
        let timer = TimerThread::start();
        let pending = timer.sleep(Duration::from_secs(3600));
        let shared = Arc::clone(&timer.handle.shared);
        drop(timer.clone());
        assert!(
            !lock(&shared.state).stopping,
            "a clone's drop stops nothing"
        );
        let (joined_tx, joined) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            // Joins the timer thread.
            drop(timer);
            let _ = joined_tx.send(());
        });
        // A guard, not a measurement: the join takes microseconds.
        assert!(
            joined.recv_timeout(Duration::from_secs(60)).is_ok(),
            "the timer thread kept waiting for the hour-long wait"
        );
        assert!(!pending.slot.fired.load(Ordering::Acquire));
    }

    #[test]
    fn the_threads_cpu_time_can_be_read_as_soon_as_it_starts_on_linux() {
        let timer = TimerThread::start();
        let cpu = timer.cpu_time();
        if cfg!(target_os = "linux") {
            assert!(
                cpu.is_some(),
                "no CPU time read from {:?}",
                timer.handle.stat
            );
        }
    }
}
