//! One reloading value for every watched file: read at start, re-read when the files change,
//! taken only once a write has settled, and published whole for the hot path.
//!
//! A [`Reloading`] value holds what its files parse to. Readers take the value in force
//! without waiting ([`Reloading::load`]); the reload task swaps in a new one whole, never
//! waiting for readers. A file that does not parse keeps the last good value in force, and the
//! failure is logged and reported once (not again on every poll while the file stays the same).
//!
//! # The settle rule
//!
//! A file written in place is first truncated, then filled: a reader can see it empty, or with
//! half of its text, which may even parse (the first of two groups). So a read that differs
//! from what was taken last is not taken at once: it is taken only when a later read, at least
//! [`SETTLE`] after it, finds the same bytes, with no other bytes read in between. The rule
//! compares contents, not lengths and modification times, since a file rewritten within one
//! tick of a coarse clock keeps its time, and the files are small. It needs no clock but the
//! reads' own times, so tests drive [`Settle`] with instants they choose.
//!
//! A writer that truncates the file and then stops for longer than [`SETTLE`] (or dies) would
//! leave an empty file that settles. An empty file is never taken on a reload: it is what a
//! writer leaves between truncating and writing, so it is judged a failure
//! ([`ServeError::Empty`]), and the last good value stays. A file that should say "nothing"
//! says so in its own syntax (`resourceGroups: []`). At start an empty file is read as usual.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::{ArcSwap, Guard};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::ServeError;
use super::watch::Watch;
use crate::admission::error_chain;
use crate::events::{ServerEvents, WatchedFile};

/// How long a changed file must read the same before it is taken: far longer than a write in
/// place takes, short beside the poll interval.
const SETTLE: Duration = Duration::from_millis(500);

/// The bytes of each watched file, in the order of [`Files::paths`].
pub(crate) type Contents<const N: usize> = [Vec<u8>; N];

/// Makes a value from the bytes of its files, or says why they do not make one.
pub(crate) type Parse<T, const N: usize> =
    Box<dyn Fn(&Contents<N>) -> Result<T, ServeError> + Send + Sync>;

/// What a [`Reloading`] value is read from and how.
pub(crate) struct Files<T, const N: usize> {
    /// What the files hold, for the logs: `"resource groups"`, `"serving certificate"`.
    pub(crate) name: &'static str,
    /// Where a reload's result is reported.
    pub(crate) reported_as: WatchedFile,
    /// The files, read together; a change to any one re-reads them all.
    pub(crate) paths: [PathBuf; N],
    /// Makes the value from the files' bytes, or says why they do not make one.
    pub(crate) parse: Parse<T, N>,
}

impl<T, const N: usize> Files<T, N> {
    /// Reads every file.
    fn read(&self) -> Result<Contents<N>, ServeError> {
        let mut contents = [(); N].map(|()| Vec::new());
        for (content, path) in contents.iter_mut().zip(&self.paths) {
            *content = read_file(path)?;
        }
        Ok(contents)
    }

    /// Judges settled contents on a reload: an empty file is a write in progress or one that
    /// stopped (see the module's settle rule), anything else is parsed.
    fn judge(&self, contents: &Contents<N>) -> Result<T, ServeError> {
        let empty = contents
            .iter()
            .zip(&self.paths)
            .find(|(content, _)| content.is_empty());
        if let Some((_, path)) = empty {
            return Err(ServeError::Empty {
                path: path.to_owned(),
            });
        }
        (self.parse)(contents)
    }
}

/// Reads `path` whole.
///
/// # Errors
/// [`ServeError::Read`] naming the file.
pub(super) fn read_file(path: &Path) -> Result<Vec<u8>, ServeError> {
    std::fs::read(path).map_err(|source| ServeError::Read {
        path: path.to_owned(),
        source,
    })
}

/// A value made from files, re-made when they change; clones share the value and the watch.
pub(crate) struct Reloading<T> {
    current: Arc<ArcSwap<T>>,
    /// Keeps the files watched, and the reload task running, while any clone is alive.
    _watch: Option<Arc<Watch>>,
}

impl<T> Clone for Reloading<T> {
    fn clone(&self) -> Reloading<T> {
        Reloading {
            current: Arc::clone(&self.current),
            _watch: self._watch.clone(),
        }
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for Reloading<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reloading")
            .field("current", &self.current.load())
            .field("watched", &self._watch.is_some())
            .finish()
    }
}

impl<T: Send + Sync + 'static> Reloading<T> {
    /// A value that never changes: no file behind it.
    pub(crate) fn fixed(value: T) -> Reloading<T> {
        Reloading {
            current: Arc::new(ArcSwap::from_pointee(value)),
            _watch: None,
        }
    }

    /// Reads and parses `files` now, then watches them: a burst of changes in their
    /// directories, or `poll` without one, re-reads them, and contents that have settled
    /// replace the value if they parse. Each reload's result goes to `events`. Call it inside a
    /// tokio runtime.
    ///
    /// # Errors
    /// [`ServeError::Read`] or the parse's error when the files cannot make a value now;
    /// [`ServeError::Watch`] when a directory cannot be watched.
    pub(crate) fn watch<const N: usize>(
        files: Files<T, N>,
        poll: Duration,
        events: Arc<dyn ServerEvents>,
    ) -> Result<Reloading<T>, ServeError> {
        let contents = files.read()?;
        let current = Arc::new(ArcSwap::from_pointee((files.parse)(&contents)?));
        // One wake-up pending is enough: the reload reads every file afresh.
        let (wake, woken) = mpsc::channel(1);
        let paths: Vec<&Path> = files.paths.iter().map(PathBuf::as_path).collect();
        let watch = Watch::start(&paths, wake)?;
        let task = Task {
            files: Arc::new(files),
            settle: Settle::new(Arc::new(contents), SETTLE),
            current: Arc::clone(&current),
            poll,
            events,
        };
        tokio::spawn(task.run(woken));
        Ok(Reloading {
            current,
            _watch: Some(Arc::new(watch)),
        })
    }

    /// The value in force, held for a moment: taking it writes nothing another thread reads,
    /// where taking a count of it would change one count on every read, from every thread.
    /// Keep what outlives the moment with `Guard::into_inner`.
    pub(crate) fn load(&self) -> Guard<Arc<T>> {
        self.current.load()
    }
}

/// The reload task of one [`Reloading`] value.
struct Task<T, const N: usize> {
    files: Arc<Files<T, N>>,
    settle: Settle<Arc<Contents<N>>>,
    current: Arc<ArcSwap<T>>,
    poll: Duration,
    events: Arc<dyn ServerEvents>,
}

impl<T: Send + Sync + 'static, const N: usize> Task<T, N> {
    /// Reads the files on every wake-up, after `poll` without one, and sooner while a change
    /// settles; ends when the watch is dropped.
    async fn run(mut self, mut woken: mpsc::Receiver<()>) {
        let mut wait = self.poll;
        loop {
            tokio::select! {
                woke = woken.recv() => if woke.is_none() { break },
                () = tokio::time::sleep(wait) => {}
            }
            wait = self.reload().await;
        }
    }

    /// One read, and what follows from it; returns how long to wait for the next one.
    async fn reload(&mut self) -> Duration {
        let files = Arc::clone(&self.files);
        // File reads block; keep them off the threads that answer requests.
        let read = match tokio::task::spawn_blocking(move || files.read()).await {
            Ok(read) => read,
            Err(_) => {
                tracing::error!(
                    "{}: reading the files panicked; the value stays",
                    self.files.name
                );
                return self.poll;
            }
        };
        let contents = match read {
            Ok(contents) => contents,
            Err(error) => {
                // A file being replaced can be missing for a moment; the next event or poll
                // reads it again.
                tracing::warn!("{} kept: {}", self.files.name, error_chain(&error));
                self.settle.forget();
                return self.poll;
            }
        };
        match self.settle.step(Arc::new(contents), Instant::now()) {
            Step::Unchanged => self.poll,
            Step::Settling(wait) => {
                tracing::debug!(
                    "{}: the files changed; waiting for them to settle",
                    self.files.name
                );
                wait
            }
            Step::Settled => {
                self.take().await;
                self.poll
            }
        }
    }

    /// Judges the settled contents: a value that parses replaces the one in force.
    async fn take(&self) {
        let files = Arc::clone(&self.files);
        let contents = Arc::clone(self.settle.last());
        let judged = tokio::task::spawn_blocking(move || files.judge(&contents)).await;
        let name = self.files.name;
        let ok = match judged {
            Ok(Ok(value)) => {
                self.current.store(Arc::new(value));
                tracing::info!(file = %self.first_path().display(), "{name} reloaded");
                true
            }
            Ok(Err(error)) => {
                tracing::error!(
                    "{name} kept, the new files are not usable: {}",
                    error_chain(&error)
                );
                false
            }
            Err(_) => {
                tracing::error!("{name} kept, parsing the new files panicked");
                false
            }
        };
        // The one place a reload's result is reported.
        self.events.reloaded(self.files.reported_as, ok);
    }

    fn first_path(&self) -> &Path {
        self.files
            .paths
            .first()
            .map_or(Path::new(""), PathBuf::as_path)
    }
}

/// What one read leads to under the settle rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// The read is what was taken last: nothing to do.
    Unchanged,
    /// The read is new, or has not yet read the same for [`SETTLE`]: read again after this.
    Settling(Duration),
    /// The read has read the same for the settle period: it is taken, [`Settle::last`] now.
    Settled,
}

/// The settle rule over reads of any kind: contents are taken once two reads at least a period
/// apart find them the same, with no other contents read in between.
#[derive(Debug)]
struct Settle<R> {
    period: Duration,
    /// What was taken last, good or bad: judged once, not again on every poll.
    last: R,
    /// A read that differs from `last`, and when it was first read.
    pending: Option<(R, Instant)>,
}

impl<R: PartialEq> Settle<R> {
    /// Starts with `taken`, what was read at start, and the settle `period`.
    fn new(taken: R, period: Duration) -> Settle<R> {
        Settle {
            period,
            last: taken,
            pending: None,
        }
    }

    /// Takes in `read`, read at `now`.
    fn step(&mut self, read: R, now: Instant) -> Step {
        if read == self.last {
            self.pending = None;
            return Step::Unchanged;
        }
        match self.pending.take() {
            Some((pending, since)) if pending == read => {
                let waited = now.saturating_duration_since(since);
                if waited >= self.period {
                    self.last = read;
                    Step::Settled
                } else {
                    self.pending = Some((pending, since));
                    Step::Settling(self.period - waited)
                }
            }
            _ => {
                self.pending = Some((read, now));
                Step::Settling(self.period)
            }
        }
    }

    /// Forgets a pending read: the files could not be read, so the next read starts afresh.
    fn forget(&mut self) {
        self.pending = None;
    }

    /// What was taken last.
    fn last(&self) -> &R {
        &self.last
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PERIOD: Duration = Duration::from_millis(500);
    const GPU: &str = "resourceGroups: [gpu]";
    const PARTIAL: &str = "resourceGroups: [gp";
    const BOTH: &str = "resourceGroups: [gpu, spot]";

    fn settle() -> (Settle<&'static str>, Instant) {
        (Settle::new(GPU, PERIOD), Instant::now())
    }

    #[test]
    fn a_read_equal_to_the_last_taken_is_unchanged() {
        let (mut settle, start) = settle();
        assert_eq!(settle.step(GPU, start), Step::Unchanged);
        assert_eq!(settle.step(GPU, start + PERIOD * 3), Step::Unchanged);
        assert_eq!(*settle.last(), GPU);
    }

    #[test]
    fn new_contents_are_taken_only_after_reading_the_same_a_period_later() {
        let (mut settle, start) = settle();
        assert_eq!(settle.step(BOTH, start), Step::Settling(PERIOD));
        assert_eq!(*settle.last(), GPU, "not taken on the first read");
        let early = start + PERIOD / 5;
        assert_eq!(
            settle.step(BOTH, early),
            Step::Settling(PERIOD - PERIOD / 5)
        );
        assert_eq!(*settle.last(), GPU, "not taken before the period");
        assert_eq!(settle.step(BOTH, start + PERIOD), Step::Settled);
        assert_eq!(*settle.last(), BOTH);
        assert_eq!(
            settle.step(BOTH, start + PERIOD * 2),
            Step::Unchanged,
            "taken once"
        );
    }

    #[test]
    fn a_half_written_file_completed_within_the_period_is_never_taken() {
        let (mut settle, start) = settle();
        assert_eq!(settle.step("", start), Step::Settling(PERIOD));
        assert_eq!(
            settle.step(PARTIAL, start + PERIOD / 2),
            Step::Settling(PERIOD)
        );
        // A period after the first read, but only half a period after the partial text was
        // first read: it waits the rest.
        assert_eq!(
            settle.step(PARTIAL, start + PERIOD),
            Step::Settling(PERIOD / 2)
        );
        let completed = start + PERIOD * 5 / 4;
        assert_eq!(settle.step(BOTH, completed), Step::Settling(PERIOD));
        assert_eq!(
            *settle.last(),
            GPU,
            "neither the empty nor the partial file taken"
        );
        assert_eq!(settle.step(BOTH, completed + PERIOD), Step::Settled);
        assert_eq!(*settle.last(), BOTH);
    }

    #[test]
    fn contents_that_change_back_to_the_last_taken_cancel_the_pending_read() {
        let (mut settle, start) = settle();
        assert_eq!(settle.step("", start), Step::Settling(PERIOD));
        assert_eq!(settle.step(GPU, start + PERIOD / 2), Step::Unchanged);
        // The empty file again starts a new period, not the forgotten one.
        assert_eq!(settle.step("", start + PERIOD), Step::Settling(PERIOD));
        assert_eq!(*settle.last(), GPU);
    }

    #[test]
    fn a_failed_read_forgets_the_pending_contents() {
        let (mut settle, start) = settle();
        assert_eq!(settle.step(BOTH, start), Step::Settling(PERIOD));
        settle.forget();
        assert_eq!(settle.step(BOTH, start + PERIOD), Step::Settling(PERIOD));
        assert_eq!(*settle.last(), GPU);
    }

    fn files(dir: &Path) -> Files<usize, 1> {
        Files {
            name: "test file",
            reported_as: WatchedFile::ResourceGroups,
            paths: [dir.join("file")],
            parse: Box::new(|[bytes]| Ok(bytes.len())),
        }
    }

    #[test]
    fn settled_empty_contents_are_judged_a_failure_naming_the_file() {
        let dir = tempfile::tempdir().expect("a directory");
        let files = files(dir.path());
        let judged = files.judge(&[Vec::new()]);
        assert!(
            matches!(&judged, Err(ServeError::Empty { path }) if *path == dir.path().join("file")),
            "{judged:?}"
        );
        assert_eq!(files.judge(&[b"x".to_vec()]).ok(), Some(1));
    }

    #[test]
    fn every_file_is_read_in_order() {
        let dir = tempfile::tempdir().expect("a directory");
        std::fs::write(dir.path().join("a"), "first").expect("write");
        std::fs::write(dir.path().join("b"), "second").expect("write");
        let files: Files<(), 2> = Files {
            name: "pair",
            reported_as: WatchedFile::Certificates,
            paths: [dir.path().join("a"), dir.path().join("b")],
            parse: Box::new(|_| Ok(())),
        };
        let read = files.read().expect("both files read");
        assert_eq!(read, [b"first".to_vec(), b"second".to_vec()]);
        std::fs::remove_file(dir.path().join("b")).expect("remove");
        assert!(
            matches!(files.read(), Err(ServeError::Read { path, .. }) if path == dir.path().join("b"))
        );
    }
}
