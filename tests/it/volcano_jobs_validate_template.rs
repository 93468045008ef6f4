//! Volcano's `/jobs/validate` rule: the names it checks (the job's and its pods'), the part of
//! Kubernetes' pod-template validation it runs that we port, the names the job's controller
//! and plugins derive (beyond Volcano), and the feature gates. Volcano's tests have no case
//! for these; each test names the Volcano or Kubernetes code it follows.

use dexaflow_admission::volcano::{FeatureGates, UnknownGate};
use serde_json::{Value, json};

use super::volcano_jobs_validate::{create, denied, job, simple_job, task};

const LABEL: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const LABEL_1035: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";
const TOO_LONG: &str = "name part must be no more than 63 bytes";

/// A job named `job` whose one task `task-1` has the pod `spec`.
fn with_pod(spec: Value) -> Value {
    let one = json!({"name": "task-1", "replicas": 1, "template": {"spec": spec}});
    job(
        "job",
        json!({"minAvailable": 1, "queue": "default", "tasks": [one]}),
    )
}

fn busybox(name: &str) -> Value {
    json!({"name": name, "image": "busybox:1.24"})
}

/// Volcano: validateK8sPodNameLength (the pod of the task's index, as Volcano builds it)
#[test]
fn a_pod_name_longer_than_a_qualified_name_is_refused_naming_it() {
    let name = "j".repeat(55);
    let job = simple_job(&name, json!({}));
    assert_eq!(
        denied(create(&job)),
        format!("create pod with name {name}-task-1-0 validate failed [{TOO_LONG}];")
    );
}

/// Volcano: validateJobName, after the pods' names
#[test]
fn a_job_name_longer_than_a_qualified_name_is_refused_after_its_pod_name() {
    let name = "j".repeat(64);
    let job = simple_job(&name, json!({}));
    assert_eq!(
        denied(create(&job)),
        format!(
            "create pod with name {name}-task-1-0 validate failed [{TOO_LONG}];create job with name {name} validate failed [{TOO_LONG}]"
        )
    );
}

/// Kubernetes: ValidateObjectMeta of the template, named as the task (a DNS subdomain)
#[test]
fn a_task_name_that_is_not_a_dns_subdomain_is_refused_as_the_template_name() {
    let job = job(
        "job",
        json!({"minAvailable": 1, "queue": "default", "tasks": [task("Task_1", 1)]}),
    );
    assert_eq!(
        denied(create(&job)),
        "spec.task[0].metadata.name: Invalid value: \"Task_1\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')."
    );
}

/// Kubernetes: a pod spec needs a container
#[test]
fn a_template_without_containers_is_refused() {
    assert_eq!(
        denied(create(&with_pod(json!({})))),
        "spec.task[0].template.spec.containers: Required value."
    );
}

/// Kubernetes: a container needs a name and an image; Volcano ends each error with `. `
#[test]
fn a_container_without_name_or_image_is_refused_for_both() {
    assert_eq!(
        denied(create(&with_pod(json!({"containers": [{}]})))),
        "spec.task[0].template.spec.containers[0].name: Required value. template.spec.containers[0].image: Required value."
    );
}

/// Kubernetes: a container name is a DNS label
#[test]
fn a_container_name_that_is_not_a_dns_label_is_refused() {
    let spec = json!({"containers": [busybox("Fake_Name")]});
    assert_eq!(
        denied(create(&with_pod(spec))),
        format!(
            "spec.task[0].template.spec.containers[0].name: Invalid value: \"Fake_Name\": {LABEL}."
        )
    );
}

/// Kubernetes: container names are unique across containers and init containers
#[test]
fn an_init_container_named_as_a_container_is_refused() {
    let spec = json!({"containers": [busybox("main")], "initContainers": [busybox("main")]});
    assert_eq!(
        denied(create(&with_pod(spec))),
        "spec.task[0].template.spec.initContainers[0].name: Duplicate value: \"main\"."
    );
}

/// Kubernetes: validateInitContainers records only non-empty names, so two unnamed init
/// containers are each refused for the missing name and not as duplicates
#[test]
fn two_unnamed_init_containers_are_refused_only_as_unnamed() {
    let unnamed = json!({"image": "busybox:1.24"});
    let spec = json!({"containers": [busybox("main")], "initContainers": [unnamed, unnamed]});
    assert_eq!(
        denied(create(&with_pod(spec))),
        "spec.task[0].template.spec.initContainers[0].name: Required value. template.spec.initContainers[1].name: Required value."
    );
    // Two named alike are duplicates.
    let spec = json!({"containers": [busybox("main")],
                      "initContainers": [busybox("init"), busybox("init")]});
    assert_eq!(
        denied(create(&with_pod(spec))),
        "spec.task[0].template.spec.initContainers[1].name: Duplicate value: \"init\"."
    );
}

/// Kubernetes: volume names are unique
#[test]
fn two_volumes_of_one_name_are_refused() {
    let volume = json!({"name": "data", "emptyDir": {}});
    let spec = json!({"containers": [busybox("main")], "volumes": [volume, volume]});
    assert_eq!(
        denied(create(&with_pod(spec))),
        "spec.task[0].template.spec.volumes[1].name: Duplicate value: \"data\"."
    );
}

/// Kubernetes: a volume has a type
#[test]
fn a_volume_without_a_type_is_refused() {
    let spec = json!({"containers": [busybox("main")], "volumes": [{"name": "data"}]});
    assert_eq!(
        denied(create(&with_pod(spec))),
        "spec.task[0].template.spec.volumes[0]: Required value: must specify a volume type."
    );
}

/// Kubernetes: a volume mount names a volume of the pod
#[test]
fn a_mount_of_a_missing_volume_is_refused() {
    let mut main = busybox("main");
    main["volumeMounts"] = json!([{"name": "data", "mountPath": "/data"}]);
    assert_eq!(
        denied(create(&with_pod(json!({"containers": [main]})))),
        "spec.task[0].template.spec.containers[0].volumeMounts[0].name: Not found: \"data\"."
    );
}

/// Kubernetes: a container mounts at most one volume at a path
#[test]
fn two_mounts_at_one_path_are_refused() {
    let mut main = busybox("main");
    main["volumeMounts"] = json!([{"name": "a", "mountPath": "/data"},
                                  {"name": "b", "mountPath": "/data"}]);
    let volumes = json!([{"name": "a", "emptyDir": {}}, {"name": "b", "emptyDir": {}}]);
    assert_eq!(
        denied(create(&with_pod(
            json!({"containers": [main], "volumes": volumes})
        ))),
        "spec.task[0].template.spec.containers[0].volumeMounts[1].mountPath: Invalid value: \"/data\": must be unique."
    );
}

/// Kubernetes: a container port is 1 to 65535
#[test]
fn a_container_port_above_65535_is_refused() {
    let mut main = busybox("main");
    main["ports"] = json!([{"containerPort": 70000}]);
    assert_eq!(
        denied(create(&with_pod(json!({"containers": [main]})))),
        "spec.task[0].template.spec.containers[0].ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive."
    );
}

/// Kubernetes: a port name is at most 15 characters
#[test]
fn a_port_name_longer_than_15_characters_is_refused() {
    let mut main = busybox("main");
    main["ports"] = json!([{"containerPort": 80, "name": "a-very-long-name1"}]);
    assert_eq!(
        denied(create(&with_pod(json!({"containers": [main]})))),
        "spec.task[0].template.spec.containers[0].ports[0].name: Invalid value: \"a-very-long-name1\": must be no more than 15 characters."
    );
}

/// Kubernetes: a container requests no more than its limit
#[test]
fn a_container_request_above_its_limit_is_refused() {
    let mut main = busybox("main");
    main["resources"] = json!({"requests": {"cpu": "2"}, "limits": {"cpu": "1"}});
    assert_eq!(
        denied(create(&with_pod(json!({"containers": [main]})))),
        "spec.task[0].template.spec.containers[0].resources.requests: Invalid value: \"2\": must be less than or equal to cpu limit of 1."
    );
}

/// Kubernetes: an extended resource's request equals its limit
#[test]
fn an_extended_resource_request_below_its_limit_is_refused() {
    let mut main = busybox("main");
    main["resources"] =
        json!({"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "2"}});
    assert_eq!(
        denied(create(&with_pod(json!({"containers": [main]})))),
        "spec.task[0].template.spec.containers[0].resources.requests: Invalid value: \"1\": must be equal to nvidia.com/gpu limit of 2."
    );
}

/// Kubernetes: the restart policy is Always, OnFailure or Never
#[test]
fn an_unknown_restart_policy_is_refused_listing_the_supported_ones() {
    let spec = json!({"containers": [busybox("main")], "restartPolicy": "Sometimes"});
    assert_eq!(
        denied(create(&with_pod(spec))),
        "spec.task[0].template.spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\"."
    );
}

/// Volcano: validateTaskTemplate, the error prefixed with the task's index
#[test]
fn a_template_error_in_the_second_task_names_its_index() {
    let bad = json!({"name": "task-2", "replicas": 1, "template": {"spec": {"containers": [{"name": "main"}]}}});
    let job = job(
        "job",
        json!({"minAvailable": 1, "queue": "default", "tasks": [task("task-1", 1), bad]}),
    );
    assert_eq!(
        denied(create(&job)),
        "spec.task[1].template.spec.containers[0].image: Required value."
    );
}

/// A job named `name` with one task `task-1` of `replicas` and `plugins`.
fn plugged(name: &str, replicas: i32, plugins: Value) -> Value {
    job(
        name,
        json!({"minAvailable": 1, "queue": "default", "tasks": [task("task-1", replicas)],
               "plugins": plugins}),
    )
}

/// Beyond Volcano: with the svc plugin, a dotted job name breaks the Service, the ConfigMap
/// volume and the hostnames
#[test]
fn a_dotted_job_name_with_the_svc_plugin_is_refused_for_each_derived_name() {
    let job = plugged("my.job", 2, json!({"svc": []}));
    assert_eq!(
        denied(create(&job)),
        format!(
            "the Service \"my.job\" that the svc plugin creates is not a valid DNS-1035 label: {LABEL_1035}; the ConfigMap \"my.job-svc\" that the svc plugin creates and mounts as a volume of that name is not a valid DNS-1123 label: {LABEL}; the hostname \"my.job-task-1-1\" that the svc plugin gives the last pod of task \"task-1\" is not a valid DNS-1123 label: {LABEL};"
        )
    );
}

/// Beyond Volcano: without plugins, a dotted job name derives nothing refused
#[test]
fn a_dotted_job_name_without_plugins_is_allowed() {
    assert_eq!(create(&simple_job("my.job", json!({}))), Ok(()));
}

/// Beyond Volcano: the highest pod index lengthens the hostname past 63 characters
#[test]
fn a_hostname_longer_than_63_characters_at_the_last_index_is_refused() {
    let name = "j".repeat(54);
    let job = plugged(&name, 1000, json!({"svc": []}));
    assert_eq!(
        denied(create(&job)),
        format!(
            "the hostname \"{name}-task-1-999\" that the svc plugin gives the last pod of task \"task-1\" is not a valid DNS-1123 label: must be no more than 63 characters;"
        )
    );
}

/// Beyond Volcano: the Service of a plugin that needs svc (tensorflow) starts with a letter
#[test]
fn a_job_name_starting_with_a_digit_with_tensorflow_is_refused_for_its_service() {
    let job = plugged("1job", 1, json!({"tensorflow": [], "svc": []}));
    assert_eq!(
        denied(create(&job)),
        format!(
            "the Service \"1job\" that the svc plugin creates is not a valid DNS-1035 label: {LABEL_1035};"
        )
    );
}

/// Beyond Volcano: the ssh plugin's Secret is mounted as a volume of its name
#[test]
fn a_dotted_job_name_with_the_ssh_plugin_is_refused_for_its_secret() {
    let job = plugged("my.job", 1, json!({"ssh": []}));
    assert_eq!(
        denied(create(&job)),
        format!(
            "the Secret \"my.job-ssh\" that the ssh plugin creates and mounts as a volume of that name is not a valid DNS-1123 label: {LABEL};"
        )
    );
}

/// The PodLevelResources gate is on unless turned off
#[test]
fn pod_level_resources_are_checked_by_default() {
    assert!(FeatureGates::default().pod_level_resources);
}

/// A gate that changes no verdict is refused, naming it and the known gates
#[test]
fn setting_an_unknown_gate_is_refused_naming_the_known_ones() {
    let mut gates = FeatureGates::default();
    let error = gates.set("SidecarContainers", false);
    assert_eq!(
        error,
        Err(UnknownGate {
            name: "SidecarContainers".to_owned()
        })
    );
    assert_eq!(
        error.map_err(|error| error.to_string()),
        Err(
            "feature gate \"SidecarContainers\" changes no admission verdict; known gates: PodLevelResources"
                .to_owned()
        )
    );
    assert_eq!(gates, FeatureGates::default());
}

/// Kubernetes: port names are unique in a container
#[test]
fn two_ports_of_one_name_are_refused() {
    let mut main = busybox("main");
    main["ports"] = json!([{"containerPort": 80, "name": "http"},
                           {"containerPort": 81, "name": "http"}]);
    assert_eq!(
        denied(create(&with_pod(json!({"containers": [main]})))),
        "spec.task[0].template.spec.containers[0].ports[1].name: Duplicate value: \"http\"."
    );
}

/// Kubernetes: each rule of a port name is reported
#[test]
fn a_port_name_of_digits_and_hyphens_is_refused_for_each_rule() {
    let mut main = busybox("main");
    main["ports"] = json!([{"containerPort": 80, "name": "-8--0"}]);
    let invalid =
        "spec.task[0].template.spec.containers[0].ports[0].name: Invalid value: \"-8--0\"";
    assert_eq!(
        denied(create(&with_pod(json!({"containers": [main]})))),
        format!(
            "{invalid}: must contain at least one letter (a-z). template.spec.containers[0].ports[0].name: Invalid value: \"-8--0\": must not contain consecutive hyphens. template.spec.containers[0].ports[0].name: Invalid value: \"-8--0\": must not begin or end with a hyphen."
        )
    );
}

/// Kubernetes: a mount without a name or path is reported for each, and names no volume
#[test]
fn a_mount_without_name_or_path_is_refused_for_each() {
    let mut main = busybox("main");
    main["volumeMounts"] = json!([{}]);
    let path = "template.spec.containers[0].volumeMounts[0]";
    assert_eq!(
        denied(create(&with_pod(json!({"containers": [main]})))),
        format!(
            "spec.task[0].{path}.name: Required value. {path}.name: Not found: \"\". {path}.mountPath: Required value."
        )
    );
}

/// Kubernetes: a volume has a type; a source sent as `null` is no source
#[test]
fn a_volume_whose_only_source_is_null_is_refused_as_without_a_type() {
    let typeless = json!({"name": "data", "emptyDir": null});
    let spec = json!({"containers": [busybox("main")], "volumes": [typeless]});
    assert_eq!(
        denied(create(&with_pod(spec))),
        "spec.task[0].template.spec.volumes[0]: Required value: must specify a volume type."
    );
}

/// Kubernetes: a volume has a type, whichever source it names
#[test]
fn a_volume_with_a_source_is_allowed_and_mountable() {
    let mut main = busybox("main");
    main["volumeMounts"] = json!([{"name": "data", "mountPath": "/data"}]);
    let config = json!({"name": "data", "configMap": {"name": "settings"}});
    let spec = json!({"containers": [main], "volumes": [config]});
    assert_eq!(create(&with_pod(spec)), Ok(()));
}

/// Kubernetes: a volume with an error cannot be mounted
#[test]
fn a_mount_of_a_typeless_volume_is_refused_for_both() {
    let mut main = busybox("main");
    main["volumeMounts"] = json!([{"name": "data", "mountPath": "/data"}]);
    let spec = json!({"containers": [main], "volumes": [{"name": "data"}]});
    assert_eq!(
        denied(create(&with_pod(spec))),
        "spec.task[0].template.spec.volumes[0]: Required value: must specify a volume type. template.spec.containers[0].volumeMounts[0].name: Not found: \"data\"."
    );
}

/// Kubernetes: ValidateResourceQuantityValue, for each request (ValidateContainerResourceRequirements)
#[test]
fn a_negative_container_request_is_refused_naming_its_resource() {
    let mut main = busybox("main");
    main["resources"] = json!({"requests": {"cpu": "-1"}});
    assert_eq!(
        denied(create(&with_pod(json!({"containers": [main]})))),
        "spec.task[0].template.spec.containers[0].resources.requests[cpu]: Invalid value: \"-1\": must be greater than or equal to 0."
    );
}

/// Volcano refuses the whole job as undecodable (ParseQuantity fails inside DecodeJob); here
/// the limit is named, as for each limit Kubernetes checks.
#[test]
fn a_container_limit_that_is_no_quantity_is_refused_naming_its_resource_and_text() {
    let mut main = busybox("main");
    main["resources"] = json!({"limits": {"memory": "lots"}});
    assert_eq!(
        denied(create(&with_pod(json!({"containers": [main]})))),
        "spec.task[0].template.spec.containers[0].resources.limits[memory]: Invalid value: \"lots\": must be a quantity such as \"500m\", \"2\" or \"1Gi\"."
    );
}

/// Kubernetes: a counted (extended) resource is requested in whole units
#[test]
fn a_fraction_of_an_extended_resource_is_refused() {
    let mut main = busybox("main");
    main["resources"] =
        json!({"requests": {"example.com/gpu": "500m"}, "limits": {"example.com/gpu": "500m"}});
    let refusal = denied(create(&with_pod(json!({"containers": [main]}))));
    assert!(
        refusal.contains(
            "resources.limits[example.com/gpu]: Invalid value: \"500m\": must be an integer"
        ) && refusal.contains(
            "resources.requests[example.com/gpu]: Invalid value: \"500m\": must be an integer"
        ),
        "{refusal}"
    );
}

/// Kubernetes: ParseQuantity caps a quantity at 2^63 - 1 units, and the request is compared,
/// and quoted, as the cap (ValidateContainerResourceRequirements)
#[test]
fn a_request_past_the_largest_quantity_is_compared_as_the_cap() {
    let requesting = |request: &str, limit: &str| {
        let mut main = busybox("main");
        main["resources"] = json!({"requests": {"cpu": request}, "limits": {"cpu": limit}});
        create(&with_pod(json!({"containers": [main]})))
    };
    assert_eq!(
        denied(requesting("1e999999999", "1")),
        "spec.task[0].template.spec.containers[0].resources.requests: Invalid value: \"9223372036854775807\": must be less than or equal to cpu limit of 1."
    );
    // A limit past it is capped alike, so the two are equal.
    assert_eq!(requesting("1e999999999", "1e30"), Ok(()));
}

/// Kubernetes: ParseQuantity reads a request of 39 fraction digits, rounding it up to the
/// billionth (then to the thousandth, as SetDefaults_ResourceList does), so it exceeds an
/// equal-looking limit (ValidateContainerResourceRequirements)
#[test]
fn a_request_with_many_fraction_digits_is_rounded_up_and_compared() {
    let request = format!("1.{}1", "0".repeat(38));
    let mut main = busybox("main");
    main["resources"] = json!({"requests": {"cpu": request}, "limits": {"cpu": "1"}});
    assert_eq!(
        denied(create(&with_pod(json!({"containers": [main]})))),
        format!(
            "spec.task[0].template.spec.containers[0].resources.requests: Invalid value: \"{request}\": must be less than or equal to cpu limit of 1."
        )
    );
}

/// Kubernetes: an extended resource requested needs a limit
#[test]
fn an_extended_resource_requested_without_a_limit_is_refused() {
    let mut main = busybox("main");
    main["resources"] = json!({"requests": {"nvidia.com/gpu": "1"}});
    assert_eq!(
        denied(create(&with_pod(json!({"containers": [main]})))),
        "spec.task[0].template.spec.containers[0].resources.limits: Required value: Limit must be set for non overcommitable resources."
    );
}

/// Kubernetes: validateContainersOnlyForPod refuses whitespace around an image in a pod
/// (ValidatePodCreate), never in a pod template, so Volcano admits the job
#[test]
fn an_image_with_surrounding_spaces_is_admitted_in_a_template() {
    let spec = json!({"containers": [{"name": "main", "image": " busybox:1.24 "}]});
    assert_eq!(create(&with_pod(spec)), Ok(()));
    // An empty image is still refused.
    let spec = json!({"containers": [{"name": "main", "image": ""}]});
    assert_eq!(
        denied(create(&with_pod(spec))),
        "spec.task[0].template.spec.containers[0].image: Required value."
    );
}
