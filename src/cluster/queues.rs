//! The queue cache as the read-only view Volcano's rules take.

use super::Cache;
use crate::volcano::{Queue, QueueView, ViewError};

impl QueueView for Cache<Queue> {
    fn queue(&self, name: &str) -> Result<Queue, ViewError> {
        self.get(name)
            .map(|queue| Queue::clone(&queue))
            .ok_or_else(|| ViewError::NotFound {
                name: name.to_owned(),
            })
    }

    fn children(&self, parent: &str) -> Result<Vec<Queue>, ViewError> {
        let mut children: Vec<Queue> = self
            .matching(|queue| queue.spec.parent == parent)
            .into_iter()
            .map(|queue| Queue::clone(&queue))
            .collect();
        // The cache keeps no order; by name, so that a message listing them reads the same.
        children.sort_by(|a, b| a.name().cmp(b.name()));
        Ok(children)
    }

    fn queues(&self) -> Result<Vec<Queue>, ViewError> {
        let mut queues: Vec<Queue> = self
            .all()
            .into_iter()
            .map(|queue| Queue::clone(&queue))
            .collect();
        queues.sort_by(|a, b| a.name().cmp(b.name()));
        Ok(queues)
    }
}
