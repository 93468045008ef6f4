//! `/jobs/mutate`: Volcano's rules for `batch.volcano.sh/v1alpha1` jobs.

mod mutate;

pub use mutate::mutate_job;
