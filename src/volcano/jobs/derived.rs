//! Beyond Volcano: the names Volcano's job controller and plugins derive from a job, which
//! Kubernetes would refuse when the controller creates the objects, leaving the job pending.
//!
//! Checked when the `svc` plugin is set (or a plugin the mutator adds it for): the Service named
//! as the job (a DNS-1035 label); the ConfigMap `<job>-svc`, mounted as a pod volume of that name
//! (a DNS-1123 label); and each pod's hostname `<job>-<task>-<index>` at the task's highest
//! index (a DNS-1123 label). When the `ssh` plugin (or `mpi`) is set: the Secret `<job>-ssh`,
//! mounted as a pod volume of that name (a DNS-1123 label). The pod names, the PodGroup
//! `<job>-<uid>` and the NetworkPolicy named as the job need no check: Volcano's own checks of
//! the job's and pods' names keep them within Kubernetes' limits.

use super::super::job::Job;
use super::super::names::{dns_1035_label, dns_label};
use super::NEEDS_SVC;

/// Every derived name Kubernetes would refuse, one sentence each, naming the object, what
/// derives it and the rule it breaks.
pub(crate) fn derived_name_problems(job: &Job) -> Vec<String> {
    let Some(plugins) = &job.spec.plugins else {
        return Vec::new();
    };
    let has = |name: &str| plugins.contains_key(name);
    let name = job.metadata.name.as_deref().unwrap_or_default();
    let mut problems = Vec::new();
    if has("svc") || NEEDS_SVC.iter().any(|plugin| has(plugin)) {
        let service = dns_1035_label(name);
        if !service.is_empty() {
            problems.push(format!(
                "the Service {name:?} that the svc plugin creates is not a valid DNS-1035 label: {}",
                service.join("; ")
            ));
        }
        let config_map = [name, "-svc"].concat();
        let label = dns_label(&config_map);
        if !label.is_empty() {
            problems.push(format!(
                "the ConfigMap {config_map:?} that the svc plugin creates and mounts as a volume of that name is not a valid DNS-1123 label: {}",
                label.join("; ")
            ));
        }
        for task in job.spec.tasks.iter().filter(|task| task.replicas > 0) {
            let last = (task.replicas - 1).to_string();
            let hostname = [name, "-", &task.name, "-", &last].concat();
            let label = dns_label(&hostname);
            if !label.is_empty() {
                problems.push(format!(
                    "the hostname {hostname:?} that the svc plugin gives the last pod of task {:?} is not a valid DNS-1123 label: {}",
                    task.name,
                    label.join("; ")
                ));
            }
        }
    }
    if has("ssh") || has("mpi") {
        let secret = [name, "-ssh"].concat();
        let label = dns_label(&secret);
        if !label.is_empty() {
            problems.push(format!(
                "the Secret {secret:?} that the ssh plugin creates and mounts as a volume of that name is not a valid DNS-1123 label: {}",
                label.join("; ")
            ));
        }
    }
    problems
}
