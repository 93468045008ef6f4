//! The part of Kubernetes' pod-template validation (`ValidatePodTemplate`, after defaulting)
//! Volcano's job rule runs on each task, and the task's topology policy.
//!
//! Checked here, in Kubernetes' field-error wording, each prefixed `spec.task[<i>].` and ended
//! with `. ` as Volcano joins them:
//! - the template's name (the task's, a DNS subdomain) and namespace (the job's);
//! - containers: at least one; each named, a DNS label, unique across containers and init
//!   containers; an image (whitespace around it is Kubernetes' check of pods, not templates);
//!   ports in 1..=65535 (container and host port), port names valid and unique; volume mounts
//!   naming a valid volume of the pod, with a mount path unique in the container; resource
//!   requests no more than limits (for extended resources and huge pages, a limit set and
//!   equal), huge pages only beside CPU or memory;
//! - volumes: named, DNS labels, unique, each of some type;
//! - with the `PodLevelResources` gate on, pod-level `spec.resources` as a container's, then
//!   requests no less than the containers' aggregate requests, sidecars included (every
//!   resource the containers request, one left out at pod level counting as `0`), and limits no
//!   less than any container's limit;
//! - `restartPolicy` one of `Always`, `OnFailure`, `Never` (empty is defaulted to `Always`).
//!
//! Everything else Kubernetes checks in a pod template is left to the API server, which
//! checks it when the job's controller creates the pods. Quantities are printed as sent, but
//! for one Kubernetes caps, printed as the cap.
//!
//! Then, for a task with a topology policy other than `none`, every container (and init
//! container) must request a whole, non-zero number of CPUs (limits stand in for absent
//! requests).

use std::collections::{BTreeMap, HashSet};
use std::fmt;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::super::gates::FeatureGates;
use super::super::job::TaskSpec;
use super::super::names::{dns_label, dns_subdomain, port_name};
use super::super::pod_template::{
    TemplateContainer, TemplatePodSpec, TemplateResources, TemplateVolume,
};
use super::super::resource::{quantity_value_errors, shown_quantity, signed_milli};
use super::super::review::{invalid, quoted};
use crate::admission::{cpu_quantity, memory_quantity};

const PORT_RANGE: &str = "must be between 1 and 65535, inclusive";

/// Where a field of the template is, written out only when an error names it: a place is made
/// for every container, port and mount, and most templates have no error.
#[derive(Debug, Clone, Copy)]
enum At<'a> {
    /// A path as it is written, such as `template.spec`.
    Root(&'static str),
    /// `parent.field`.
    Field(&'a At<'a>, &'static str),
    /// `parent.field[index]`.
    Item(&'a At<'a>, &'static str, usize),
}

impl fmt::Display for At<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            At::Root(path) => f.write_str(path),
            At::Field(parent, field) => write!(f, "{parent}.{field}"),
            At::Item(parent, field, index) => write!(f, "{parent}.{field}[{index}]"),
        }
    }
}

/// The task's template problems as Volcano appends them (`spec.task[<i>].<error>. ` each), or
/// its topology-policy problem when the template is valid; empty when neither.
pub(super) fn template_problems(
    task: &TaskSpec,
    index: usize,
    namespace: &str,
    gates: &FeatureGates,
) -> String {
    let mut errors = Vec::new();
    if task.name.is_empty() {
        errors.push("metadata.name: Required value: name or generateName is required".to_owned());
    }
    for problem in dns_subdomain(&task.name)
        .iter()
        .filter(|_| !task.name.is_empty())
    {
        errors.push(invalid("metadata.name", &quoted(&task.name), problem));
    }
    if namespace.is_empty() {
        errors.push("metadata.namespace: Required value".to_owned());
    }
    let default_spec = TemplatePodSpec::default();
    let spec = task.template.spec.as_ref().unwrap_or(&default_spec);
    pod_spec_errors(spec, gates, &mut errors);
    if !errors.is_empty() {
        let mut message = format!("spec.task[{index}].");
        for error in errors {
            message.push_str(&error);
            message.push_str(". ");
        }
        return message;
    }
    topology_policy_problem(task, spec, index)
}

fn pod_spec_errors(spec: &TemplatePodSpec, gates: &FeatureGates, errors: &mut Vec<String>) {
    const PATH: &str = "template.spec";
    let root = At::Root(PATH);
    let volumes = volume_errors(&root, spec.volumes.as_deref().unwrap_or_default(), errors);
    let mut names = HashSet::new();
    let containers = spec.containers.as_deref().unwrap_or_default();
    if containers.is_empty() {
        errors.push(format!("{PATH}.containers: Required value"));
    }
    for (index, container) in containers.iter().enumerate() {
        let path = At::Item(&root, "containers", index);
        container_errors(container, &path, &volumes, errors);
        // Kubernetes checks the name's uniqueness after the container's own fields.
        if !names.insert(container.name.as_str()) {
            errors.push(format!(
                "{path}.name: Duplicate value: {}",
                quoted(&container.name)
            ));
        }
    }
    let init = spec.init_containers.as_deref().unwrap_or_default();
    for (index, container) in init.iter().enumerate() {
        let path = At::Item(&root, "initContainers", index);
        container_errors(container, &path, &volumes, errors);
        // As Kubernetes, an init container's name is checked against every container's and
        // the init containers' before it, but an empty one is not recorded.
        let name = container.name.as_str();
        if names.contains(name) {
            errors.push(format!("{path}.name: Duplicate value: {}", quoted(name)));
        } else if !name.is_empty() {
            names.insert(name);
        }
    }
    // Kubernetes checks the pod-level resources before the restart policy.
    if let Some(resources) = spec
        .resources
        .as_ref()
        .filter(|_| gates.pod_level_resources)
    {
        let path = At::Field(&root, "resources");
        requirement_errors(resources, &path, errors);
        consistency_errors(resources, containers, init, &path, errors);
    }
    let restart = spec.restart_policy.as_deref().unwrap_or_default();
    if !["", "Always", "OnFailure", "Never"].contains(&restart) {
        errors.push(format!(
            "{PATH}.restartPolicy: Unsupported value: {}: supported values: \"Always\", \"OnFailure\", \"Never\"",
            quoted(restart)
        ));
    }
}

/// The names of the valid volumes (the ones mounts may name), reporting typeless, unnamed,
/// invalid and repeated ones; as Kubernetes, a volume with an error is not mountable.
fn volume_errors<'a>(
    spec: &At<'_>,
    volumes: &'a [TemplateVolume],
    errors: &mut Vec<String>,
) -> HashSet<&'a str> {
    let mut names = HashSet::new();
    for (index, volume) in volumes.iter().enumerate() {
        let path = At::Item(spec, "volumes", index);
        let name = volume.name.as_str();
        let mut found = Vec::new();
        if !volume.has_source() {
            found.push(format!(
                "{path}: Required value: must specify a volume type"
            ));
        }
        if name.is_empty() {
            found.push(format!("{path}.name: Required value"));
        }
        for problem in dns_label(name).iter().filter(|_| !name.is_empty()) {
            found.push(invalid(&format!("{path}.name"), &quoted(name), problem));
        }
        if names.contains(name) {
            found.push(format!("{path}.name: Duplicate value: {}", quoted(name)));
        }
        if found.is_empty() {
            names.insert(name);
        }
        errors.append(&mut found);
    }
    names
}

/// A container's own problems (its name's uniqueness is the caller's: Kubernetes records the
/// names of containers and init containers differently).
fn container_errors(
    container: &TemplateContainer,
    path: &At<'_>,
    volumes: &HashSet<&str>,
    errors: &mut Vec<String>,
) {
    let name = container.name.as_str();
    if name.is_empty() {
        errors.push(format!("{path}.name: Required value"));
    } else {
        for problem in dns_label(name) {
            errors.push(invalid(&format!("{path}.name"), &quoted(name), &problem));
        }
    }
    // Kubernetes refuses whitespace around an image only in a pod, never in a template.
    if container.image.as_deref().is_none_or(str::is_empty) {
        errors.push(format!("{path}.image: Required value"));
    }
    let mut port_names = HashSet::new();
    for (index, port) in container.ports.iter().flatten().enumerate() {
        let path = At::Item(path, "ports", index);
        if let Some(name) = port.name.as_deref().filter(|name| !name.is_empty()) {
            let problems = port_name(name);
            for problem in &problems {
                errors.push(invalid(&format!("{path}.name"), &quoted(name), problem));
            }
            if problems.is_empty() && !port_names.insert(name) {
                errors.push(format!("{path}.name: Duplicate value: {}", quoted(name)));
            }
        }
        if port.container_port == 0 {
            errors.push(format!("{path}.containerPort: Required value"));
        } else if !(1..=65535).contains(&port.container_port) {
            let value = port.container_port.to_string();
            errors.push(invalid(
                &format!("{path}.containerPort"),
                &value,
                PORT_RANGE,
            ));
        }
        if let Some(host) = port.host_port.filter(|port| !(0..=65535).contains(port)) {
            let value = host.to_string();
            errors.push(invalid(&format!("{path}.hostPort"), &value, PORT_RANGE));
        }
    }
    let mut mount_paths = HashSet::new();
    for (index, mount) in container.volume_mounts.iter().flatten().enumerate() {
        let path = At::Item(path, "volumeMounts", index);
        if mount.name.is_empty() {
            errors.push(format!("{path}.name: Required value"));
        }
        if !volumes.contains(mount.name.as_str()) {
            errors.push(format!("{path}.name: Not found: {}", quoted(&mount.name)));
        }
        if mount.mount_path.is_empty() {
            errors.push(format!("{path}.mountPath: Required value"));
        }
        if !mount_paths.insert(mount.mount_path.as_str()) {
            errors.push(invalid(
                &format!("{path}.mountPath"),
                &quoted(&mount.mount_path),
                "must be unique",
            ));
        }
    }
    if let Some(resources) = &container.resources {
        requirement_errors(resources, &At::Field(path, "resources"), errors);
    }
}

/// Each request no more than its limit; equal, and a limit set, for resources that cannot be
/// overcommitted; huge pages only beside CPU or memory.
fn requirement_errors(resources: &TemplateResources, path: &At<'_>, errors: &mut Vec<String>) {
    let no_list = BTreeMap::new();
    let requests = resources.requests.as_ref().unwrap_or(&no_list);
    let limits = resources.limits.as_ref().unwrap_or(&no_list);
    // Each quantity is read once, for its own check and for the comparison.
    let limits_read: Vec<(&String, &Quantity, Option<i128>)> = limits
        .iter()
        .map(|(name, limit)| {
            let at = format_args!("{path}.limits[{name}]");
            (
                name,
                limit,
                quantity_value_errors(name, &limit.0, &at, errors),
            )
        })
        .collect();
    for (name, request) in requests {
        let at = format_args!("{path}.requests[{name}]");
        let wanted = quantity_value_errors(name, &request.0, &at, errors);
        let Some(&(_, limit, most)) = limits_read.iter().find(|(limited, ..)| *limited == name)
        else {
            if !may_overcommit(name) {
                errors.push(format!(
                    "{path}.limits: Required value: Limit must be set for non overcommitable resources"
                ));
            }
            continue;
        };
        let (Some(wanted), Some(most)) = (wanted, most) else {
            continue;
        };
        let detail = if wanted != most && !may_overcommit(name) {
            "must be equal to"
        } else if wanted > most {
            "must be less than or equal to"
        } else {
            continue;
        };
        let detail = format!("{detail} {name} limit of {}", shown_quantity(&limit.0));
        errors.push(invalid(
            &format!("{path}.requests"),
            &quoted(&shown_quantity(&request.0)),
            &detail,
        ));
    }
    // Kubernetes: validateResourceRequirements, for a container's resources and the pod's alike.
    let names = || requests.keys().chain(limits.keys());
    if names().any(|name| name.starts_with("hugepages-"))
        && !names().any(|name| name == "cpu" || name == "memory")
    {
        errors.push(format!(
            "{path}: Forbidden: HugePages require cpu or memory"
        ));
    }
}

/// Kubernetes' native resources other than huge pages may request less than their limit.
fn may_overcommit(name: &str) -> bool {
    let native = !name.contains('/') || name.contains("kubernetes.io/");
    native && !name.starts_with("hugepages-")
}

/// Pod-level requests no less than the containers' aggregate, and each container's limits no
/// more than the pod-level limits, as Kubernetes' `validatePodResourceConsistency` checks them.
///
/// The aggregate is `AggregateContainerRequests`': the containers and the sidecars (init
/// containers restarted `Always`, which keep running beside them), or, when larger, what runs
/// while one init container runs (it and the sidecars started before it). Every resource the
/// containers request is compared, a pod-level request left out counting as `0`: a template is
/// not defaulted as a pod is, so nothing fills the pod-level request in.
fn consistency_errors(
    resources: &TemplateResources,
    containers: &[TemplateContainer],
    init: &[TemplateContainer],
    path: &At<'_>,
    errors: &mut Vec<String>,
) {
    let no_requests = BTreeMap::new();
    let pod = resources.requests.as_ref().unwrap_or(&no_requests);
    for (name, total) in aggregate_requests(containers, init) {
        let (pod_milli, shown) = match pod.get(name) {
            Some(request) => match signed_milli(&request.0) {
                Some(milli) => (milli, quoted(&shown_quantity(&request.0))),
                None => continue,
            },
            None => (0, quoted("0")),
        };
        if pod_milli < total.milli {
            let detail =
                format!("must be greater than or equal to aggregate container requests of {total}");
            errors.push(invalid(
                &format!("{path}.requests[{name}]"),
                &shown,
                &detail,
            ));
        }
    }
    let Some(pod_limits) = &resources.limits else {
        return;
    };
    // Only the containers: Kubernetes holds no init container to the pod-level limits.
    for (index, container) in containers.iter().enumerate() {
        let limits = container.resources.as_ref().and_then(|r| r.limits.as_ref());
        for (name, limit) in limits.into_iter().flatten() {
            let Some(most) = pod_limits.get(name) else {
                continue;
            };
            let (Some(wanted), Some(allowed)) = (signed_milli(&limit.0), signed_milli(&most.0))
            else {
                continue;
            };
            if wanted > allowed {
                let detail = format!(
                    "must be less than or equal to pod limits of {}",
                    shown_quantity(&most.0)
                );
                let key = format!("{path}.containers[{index}][{name}].limits");
                errors.push(invalid(&key, &quoted(&shown_quantity(&limit.0)), &detail));
            }
        }
    }
}

/// How Go prints a quantity, kept from the text it was parsed from (apimachinery's `Format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    /// `500m`, `2`, `1k`: no suffix or a decimal one.
    DecimalSi,
    /// `1Ki` to `1Ei`.
    BinarySi,
    /// `1e3`.
    DecimalExponent,
}

impl Format {
    /// The format apimachinery's `ParseQuantity` gives the text.
    fn of(text: &str) -> Format {
        let suffix = text.trim_start_matches(|ch: char| ch.is_ascii_digit() || "+-.".contains(ch));
        if suffix.ends_with('i') {
            Format::BinarySi
        } else if suffix.len() > 1 && suffix.starts_with(['e', 'E']) {
            Format::DecimalExponent
        } else {
            Format::DecimalSi
        }
    }
}

/// One resource of an aggregate: thousandths, and the format Go's sum keeps (the first
/// addend's, or the next one's while the sum is zero).
#[derive(Debug, Clone, Copy)]
struct Sum {
    milli: i128,
    format: Format,
}

impl Sum {
    /// Adds `more`, saturating: a sum past the largest amount is larger than any pod-level
    /// request.
    fn add(&mut self, more: Sum) {
        if self.milli == 0 {
            self.format = more.format;
        }
        self.milli = self.milli.saturating_add(more.milli);
    }
}

/// The sum as `Quantity.String` writes it: canonical in its format; a binary one below 1024 or
/// not whole is written in decimal, as Go writes it.
impl fmt::Display for Sum {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.milli < 0 { "-" } else { "" };
        let milli = self.milli.unsigned_abs();
        let binary = self.format == Format::BinarySi && milli % 1000 == 0 && milli >= 1_024_000;
        let text = if binary {
            memory_quantity(milli)
        } else {
            let decimal = cpu_quantity(milli);
            if self.format == Format::DecimalExponent {
                exponent_form(decimal)
            } else {
                decimal
            }
        };
        write!(f, "{sign}{text}")
    }
}

/// A canonical decimal quantity (`1500m`, `2k`) with its suffix as an exponent (`1500e-3`,
/// `2e3`).
fn exponent_form(mut decimal: String) -> String {
    const POWERS: [(char, &str); 7] = [
        ('m', "e-3"),
        ('k', "e3"),
        ('M', "e6"),
        ('G', "e9"),
        ('T', "e12"),
        ('P', "e15"),
        ('E', "e18"),
    ];
    let last = decimal.chars().last();
    if let Some((_, power)) = POWERS.iter().find(|(suffix, _)| Some(*suffix) == last) {
        decimal.pop();
        decimal.push_str(power);
    }
    decimal
}

/// Kubernetes' `AggregateContainerRequests` of the containers and init containers, by
/// resource name.
fn aggregate_requests<'a>(
    containers: &'a [TemplateContainer],
    init: &'a [TemplateContainer],
) -> BTreeMap<&'a str, Sum> {
    let mut aggregate = BTreeMap::new();
    for container in containers {
        add(&mut aggregate, &requests(container));
    }
    let mut sidecars = BTreeMap::new();
    let mut initializing: BTreeMap<&str, Sum> = BTreeMap::new();
    for container in init {
        let own = requests(container);
        let running = if container.is_sidecar() {
            add(&mut aggregate, &own);
            add(&mut sidecars, &own);
            sidecars.clone()
        } else {
            let mut running = BTreeMap::new();
            add(&mut running, &own);
            let started: Vec<_> = sidecars.iter().map(|(name, sum)| (*name, *sum)).collect();
            add(&mut running, &started);
            running
        };
        larger(&mut initializing, running);
    }
    larger(&mut aggregate, initializing);
    aggregate
}

/// Adds each amount of `more` to `sum` (Go's `addResourceList`).
fn add<'a>(sum: &mut BTreeMap<&'a str, Sum>, more: &[(&'a str, Sum)]) {
    for &(name, amount) in more {
        sum.entry(name)
            .and_modify(|total| total.add(amount))
            .or_insert(amount);
    }
}

/// Keeps in `list` the larger of its amount and `other`'s, by resource (Go's
/// `maxResourceList`: a larger amount replaces the smaller with its format).
fn larger<'a>(list: &mut BTreeMap<&'a str, Sum>, other: BTreeMap<&'a str, Sum>) {
    for (name, amount) in other {
        let kept = list.entry(name).or_insert(amount);
        if amount.milli > kept.milli {
            *kept = amount;
        }
    }
}

/// A container's requests in thousandths, skipping what is not a quantity.
fn requests(container: &TemplateContainer) -> Vec<(&str, Sum)> {
    let list = container
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref());
    list.into_iter()
        .flatten()
        .filter_map(|(name, quantity)| {
            let milli = signed_milli(&quantity.0)?;
            let format = Format::of(&quantity.0);
            Some((name.as_str(), Sum { milli, format }))
        })
        .collect()
}

/// With a topology policy, every container must be given whole CPUs.
fn topology_policy_problem(task: &TaskSpec, spec: &TemplatePodSpec, index: usize) -> String {
    if task.topology_policy.is_empty() || task.topology_policy == "none" {
        return String::new();
    }
    let init = spec.init_containers.as_deref().unwrap_or_default();
    let containers = spec.containers.as_deref().unwrap_or_default();
    let all = containers.iter().chain(init);
    for (id, container) in all.enumerate() {
        if whole_cpus(container.resources.as_ref()) == 0 {
            return format!(
                "the cpu request isn't an integer in spec.task[{index}] container[{id}]."
            );
        }
    }
    String::new()
}

/// The whole CPUs a container requests (its limits when it requests nothing), 0 when not whole.
fn whole_cpus(resources: Option<&TemplateResources>) -> i128 {
    let Some(resources) = resources else {
        return 0;
    };
    let requests = resources.requests.as_ref().filter(|list| !list.is_empty());
    let list: Option<&BTreeMap<String, Quantity>> = requests.or(resources.limits.as_ref());
    let milli = list
        .and_then(|list| list.get("cpu"))
        .and_then(|quantity| signed_milli(&quantity.0))
        .unwrap_or(0);
    if milli % 1000 == 0 { milli / 1000 } else { 0 }
}
