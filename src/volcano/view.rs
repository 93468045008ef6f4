//! The read-only view of the cluster the rules need: Volcano's queue cache.

use std::fmt;
use std::sync::Arc;

use super::queue::Queue;
use super::review::quoted;

/// Why the view could not answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ViewError {
    /// No queue of that name is in the cache.
    NotFound {
        /// The queue's name.
        name: String,
    },
    /// The cache could not be read.
    Unavailable {
        /// Why, for the denial's message.
        reason: String,
    },
}

impl fmt::Display for ViewError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // As Kubernetes' listers word a missing object, the name quoted as Go's `%q`.
            ViewError::NotFound { name } => {
                write!(f, "queue.scheduling.volcano.sh {} not found", quoted(name))
            }
            ViewError::Unavailable { reason } => f.write_str(reason),
        }
    }
}

impl std::error::Error for ViewError {}

/// Volcano's queue cache, read-only: the cluster's queues by name and by parent.
///
/// The server implements it over its informer; tests implement it over a map. Queues are lent
/// as the cache shares them, never copied for a review.
pub trait QueueView {
    /// The queue named `name`.
    ///
    /// # Errors
    /// [`ViewError::NotFound`] when there is none, [`ViewError::Unavailable`] when the cache
    /// cannot be read.
    fn queue(&self, name: &str) -> Result<Arc<Queue>, ViewError>;

    /// The queues whose `spec.parent` is `parent`, in name order.
    ///
    /// # Errors
    /// [`ViewError::Unavailable`] when the cache cannot be read.
    fn children(&self, parent: &str) -> Result<Vec<Arc<Queue>>, ViewError>;

    /// The queues `keep` holds for, in name order: the hierarchy-annotation check looks through
    /// every queue, and takes only those it is after.
    ///
    /// # Errors
    /// [`ViewError::Unavailable`] when the cache cannot be read.
    fn queues_where(&self, keep: &dyn Fn(&Queue) -> bool) -> Result<Vec<Arc<Queue>>, ViewError>;
}
