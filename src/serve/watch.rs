//! Re-reading files when they change: a watch on their directories, and a poll as the fallback.
//!
//! The directory is watched rather than the file, so that a Kubernetes Secret or ConfigMap
//! update is seen: the kubelet writes a new timestamped directory and renames a `..data`
//! symlink over the old one, an event in the directory, while the file's own name (a symlink
//! through `..data`) never changes. Events arrive in bursts and some mounts send none, so the
//! watch only wakes the reload, at most one pending at a time, and a poll wakes it too; the
//! reload itself compares what it reads with what it read last.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use notify::{RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::mpsc;

use super::ServeError;

use crate::sync::lock;

/// A running watch; dropping it stops the watch and its reload task.
pub(crate) struct Watch {
    _watcher: RecommendedWatcher,
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watch").finish_non_exhaustive()
    }
}

impl Watch {
    /// Watches the directories of `files` and calls `reload` on a blocking thread after every
    /// burst of changes there, and every `poll`. Call it inside a tokio runtime.
    ///
    /// # Errors
    /// [`ServeError::Watch`] when a directory cannot be watched.
    pub(crate) fn start(
        files: &[&Path],
        poll: Duration,
        reload: impl Fn() + Send + Sync + 'static,
    ) -> Result<Watch, ServeError> {
        // One wake-up pending is enough: the reload reads every file afresh.
        let (wake, mut woken) = mpsc::channel::<()>(1);
        let directories: BTreeSet<PathBuf> = files.iter().map(|file| directory(file)).collect();
        let mut watcher =
            notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
                if event.is_ok_and(|event| !event.kind.is_access()) {
                    // Full means a reload is already pending; closed means the watch is stopping.
                    let _ = wake.try_send(());
                }
            })
            .map_err(|source| ServeError::Watch {
                path: directories.first().cloned().unwrap_or_default(),
                source,
            })?;
        for directory in &directories {
            watcher
                .watch(directory, RecursiveMode::NonRecursive)
                .map_err(|source| ServeError::Watch {
                    path: directory.clone(),
                    source,
                })?;
        }
        let reload = Arc::new(reload);
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    woke = woken.recv() => if woke.is_none() { break },
                    () = tokio::time::sleep(poll) => {}
                }
                let reload = Arc::clone(&reload);
                // File reads block; keep them off the threads that answer requests.
                if tokio::task::spawn_blocking(move || reload()).await.is_err() {
                    tracing::error!("a file reload panicked; the previous contents stay");
                }
            }
        });
        Ok(Watch { _watcher: watcher })
    }
}

/// The directory `file` is in: `.` for a bare file name.
fn directory(file: &Path) -> PathBuf {
    match file.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_owned(),
        _ => PathBuf::from("."),
    }
}

/// What a reload read last, good or bad, so that an unchanged file is neither parsed nor logged
/// again on every poll.
#[derive(Debug)]
pub(crate) struct LastRead<T>(Mutex<T>);

impl<T: PartialEq + Clone> LastRead<T> {
    /// Starts with what was read at start.
    pub(crate) fn new(read: T) -> LastRead<T> {
        LastRead(Mutex::new(read))
    }

    /// Whether `read` differs from what was read last; it is what was read last from now on.
    pub(crate) fn is_new(&self, read: &T) -> bool {
        // A panic while holding the lock leaves at worst a stale copy, read again next time.
        let mut last = lock(&self.0);
        if *last == *read {
            return false;
        }
        last.clone_from(read);
        true
    }
}
