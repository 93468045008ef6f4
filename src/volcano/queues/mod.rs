//! `/queues/validate` and `/queues/mutate`: Volcano's rules for `scheduling.volcano.sh/v1beta1`
//! queues.

mod hierarchy;
mod mutate;
mod validate;

pub use mutate::mutate_queue;
pub use validate::validate_queue;

use super::queue::ROOT_QUEUE;

/// The annotation naming a queue's place in a hierarchy (`root/a/b`).
const HIERARCHY: &str = "volcano.sh/hierarchy";
/// The annotation giving the weight of each level of [`HIERARCHY`] (`1/2/3`).
const HIERARCHY_WEIGHTS: &str = "volcano.sh/hierarchy-weights";

/// Whether a parent name means "top level": empty or `root`.
fn is_top_level(parent: &str) -> bool {
    parent.is_empty() || parent == ROOT_QUEUE
}

/// The settings of `/queues/validate`, Volcano's command-line flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueSettings {
    /// The deepest a queue may sit below `root` (Volcano's default 5).
    pub max_queue_depth: usize,
    /// Whether a queue with allocated pods may not be deleted (Volcano's default off).
    pub enable_queue_allocated_pods_check: bool,
    /// Whether the `root` queue's capability, deserved and guarantee are fixed (Volcano's
    /// default on).
    pub enable_root_queue_protection: bool,
}

impl Default for QueueSettings {
    fn default() -> Self {
        QueueSettings {
            max_queue_depth: 5,
            enable_queue_allocated_pods_check: false,
            enable_root_queue_protection: true,
        }
    }
}
