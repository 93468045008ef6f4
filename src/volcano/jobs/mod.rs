//! `/jobs/mutate` and `/jobs/validate`: Volcano's rules for `batch.volcano.sh/v1alpha1` jobs.

mod derived;
mod mutate;
mod policies;
mod semantic;
mod template;
mod validate;

pub use mutate::mutate_job;
pub(crate) use validate::template_job_problems;
pub use validate::validate_job;

/// The plugins that need the `svc` plugin (the mutator adds it for them).
const NEEDS_SVC: [&str; 4] = ["tensorflow", "mpi", "pytorch", "ray"];
