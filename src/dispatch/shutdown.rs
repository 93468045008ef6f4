//! The shutdown signal: fired once, seen by every dispatch in progress.

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
    pub fn is_fired(&self) -> bool {
        *self.fired.borrow()
    }

    /// Resolves once the signal fires; never, if its trigger is dropped unfired.
    ///
    /// # Cancel safety
    /// Cancel safe: it only waits.
    pub async fn triggered(&self) {
        let mut fired = self.fired.clone();
        if fired.wait_for(|fired| *fired).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}
