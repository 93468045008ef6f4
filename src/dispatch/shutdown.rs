//! The shutdown signal, fired once and seen by every dispatch in progress, and the tracker of
//! work that shutdown waits for.

use std::sync::Arc;

use tokio::sync::watch;

/// Fires the shutdown signal.
#[derive(Debug)]
pub struct Trigger {
    fired: watch::Sender<bool>,
}

/// Tells a dispatch in progress that shutdown cancelled it. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Shutdown {
    fired: watch::Receiver<bool>,
}

/// A new, unfired signal.
pub fn signal() -> (Trigger, Shutdown) {
    let (fired, seen) = watch::channel(false);
    (Trigger { fired }, Shutdown { fired: seen })
}

impl Trigger {
    /// Fires the signal; it stays fired.
    pub fn fire(&self) {
        self.fired.send_replace(true);
    }
}

impl Shutdown {
    /// Whether the signal has fired.
    pub(crate) fn is_fired(&self) -> bool {
        *self.fired.borrow()
    }

    /// Resolves once the signal fires; never, if its trigger is dropped unfired.
    ///
    /// # Cancel safety
    /// Cancel safe: it only waits.
    pub(crate) async fn triggered(&self) {
        let mut fired = self.fired.clone();
        if fired.wait_for(|fired| *fired).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// Counts work that outlives the call that started it (an executor's running attempts, the
/// pipeline's followers of launched attempts), so that shutdown can wait until all of it is done.
/// Cheap to clone; every clone counts the same work.
#[derive(Debug, Clone)]
pub(crate) struct Tracker {
    live: Arc<watch::Sender<usize>>,
}

/// One piece of work a [`Tracker`] counts, until it is dropped.
#[derive(Debug)]
pub(crate) struct Tracked {
    live: Arc<watch::Sender<usize>>,
}

impl Default for Tracker {
    fn default() -> Tracker {
        Tracker {
            live: Arc::new(watch::Sender::new(0)),
        }
    }
}

impl Tracker {
    /// Counts one more piece of work until the returned guard is dropped.
    pub(crate) fn track(&self) -> Tracked {
        self.live.send_modify(|live| *live += 1);
        Tracked {
            live: Arc::clone(&self.live),
        }
    }

    /// Resolves once no work is live.
    ///
    /// # Cancel safety
    /// Cancel safe: it only waits.
    pub(crate) async fn idle(&self) {
        let mut live = self.live.subscribe();
        // The sender lives in `self`, so the channel cannot close while this waits.
        let _ = live.wait_for(|live| *live == 0).await;
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.live.send_modify(|live| *live -= 1);
    }
}
