//! When to re-read watched files: a watch on their directories.
//!
//! The directory is watched rather than the file, so that a Kubernetes Secret or ConfigMap
//! update is seen: the kubelet writes a new timestamped directory and renames a `..data`
//! symlink over the old one, an event in the directory, while the file's own name (a symlink
//! through `..data`) never changes. Events arrive in bursts and some mounts send none, so the
//! watch only wakes the reload, at most one wake-up pending at a time; the reload also polls,
//! and compares what it reads with what it read before (`reload.rs`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use notify::{RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::mpsc;

use super::ServeError;

/// A running watch; dropping it stops the watch and closes its wake-up channel.
pub(crate) struct Watch {
    _watcher: RecommendedWatcher,
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watch").finish_non_exhaustive()
    }
}

impl Watch {
    /// Watches the directories of `files` and sends on `wake` after changes there; a full
    /// channel means a wake-up is already pending.
    ///
    /// # Errors
    /// [`ServeError::Watch`] when a directory cannot be watched.
    pub(crate) fn start(files: &[&Path], wake: mpsc::Sender<()>) -> Result<Watch, ServeError> {
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
