//! The queue cache as the read-only view Volcano's rules take.

use std::sync::Arc;

use super::{Cache, Grouped};
use crate::volcano::{Queue, QueueView, ViewError};

impl Grouped for Queue {
    fn group(&self) -> &str {
        &self.spec.parent
    }
}

impl QueueView for Cache<Queue> {
    fn queue(&self, name: &str) -> Result<Arc<Queue>, ViewError> {
        self.get(name).ok_or_else(|| ViewError::NotFound {
            name: name.to_owned(),
        })
    }

    fn children(&self, parent: &str) -> Result<Vec<Arc<Queue>>, ViewError> {
        // In name order, so that a message listing them reads the same every time.
        Ok(self.group(parent))
    }

    fn queues_where(&self, keep: &dyn Fn(&Queue) -> bool) -> Result<Vec<Arc<Queue>>, ViewError> {
        let mut queues: Vec<Arc<Queue>> =
            self.all().into_iter().filter(|queue| keep(queue)).collect();
        queues.sort_by(|a, b| a.name().cmp(b.name()));
        Ok(queues)
    }
}
