//! The executor policy through the dispatcher (ADR 0063 as the last hook, ADR 0100 §7): each
//! rule's refusal leaves the attempt without a token and without a pod, each forced value is on
//! the pod manifest the Kubernetes executor writes in its dry run, and no operator hook undoes
//! what the policy forces.

use crate::common;
use crate::fakes;
use crate::webhook_fixture;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::{FakeHook, annotation, node_selector};
use dexaflow_admission::admission::{
    Changes, Decision, Hook, TaintEffect, Toleration, TolerationOperator,
};
use dexaflow_admission::config::Config;
use dexaflow_admission::dispatch::TaskInstance;
use dexaflow_admission::dispatch::placement::{DedicatedReason, PodKind};
use dexaflow_admission::dispatch::task::{State, Task};
use dexaflow_admission::hooks::Webhook;
use dexaflow_admission::install::{Drained, Install};
use fakes::{RecordingMinter, supervision, task};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use webhook_fixture::{Certs, Server, Transport, deciding};

use crate::common::NO_ENV;

/// What dispatching one task came to.
struct Dispatched {
    /// The task instance afterwards.
    instance: TaskInstance,
    /// Every pod manifest the Kubernetes executor wrote: one per executor call.
    pods: Vec<Pod>,
    /// How many agent tokens were minted.
    tokens: usize,
}

impl Dispatched {
    fn reason(&self) -> &str {
        self.instance.failure_reason.as_deref().unwrap_or_default()
    }

    /// Checks both sides of a refusal: failed at once with `reason`, no token, no executor call.
    fn assert_refused_with(&self, reason: &str) {
        assert_eq!(self.reason(), reason);
        assert_eq!(self.instance.state, State::Failed);
        assert_eq!(self.tokens, 0, "a refused attempt gets no token");
        assert!(!self.instance.token_minted);
        assert!(
            self.pods.is_empty(),
            "a refused attempt reaches no executor"
        );
        assert_eq!(self.instance.placement, None);
    }

    /// The one pod written, checking that the attempt ran.
    fn pod(&self) -> &Pod {
        assert_eq!(self.instance.state, State::Queued, "{}", self.reason());
        assert_eq!(self.tokens, 1);
        assert_eq!(self.pods.len(), 1);
        &self.pods[0]
    }
}

/// `task` with a node selector of its own, so that it takes a dedicated pod (a warm attempt
/// writes none) when the policy forces nothing onto it.
fn on_its_own_pod(mut task: Task) -> Task {
    task.execution
        .node_selector
        .insert("disk".to_owned(), "ssd".to_owned());
    task
}

/// Dispatches `task` on the Kubernetes executor in dry-run mode, with warm pools on, the
/// config's own chain (its hooks, then `executor.policy` last) and `operator_hooks` registered
/// after the chain is built, on tokio's paused clock. `policy` is the YAML of `executor.policy`.
async fn dispatch(policy: &str, operator_hooks: Vec<Arc<dyn Hook>>, task: Task) -> Dispatched {
    tokio::time::pause();
    dispatch_on_the_real_clock(policy, operator_hooks, task).await
}

/// As [`dispatch`], on the real clock: for a webhook, whose call waits on a real socket, which a
/// paused clock would time out at once.
async fn dispatch_on_the_real_clock(
    policy: &str,
    operator_hooks: Vec<Arc<dyn Hook>>,
    task: Task,
) -> Dispatched {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let yaml = format!(
        "executor:\n  type: kubernetes\n  task_service_account: dexaflow-task\n  kubernetes: {{dry_run_dir: {:?}}}\n  policy: {policy}\nexecution: {{warm_pools_enabled: true}}\n",
        dir.path().display().to_string()
    );
    let config = Config::from_yaml_str(&yaml, NO_ENV)
        .unwrap_or_else(|errors| panic!("config is valid:\n{errors}"));
    let minter = Arc::new(RecordingMinter::default());
    let install = operator_hooks
        .into_iter()
        .fold(Install::from_config(config), Install::hook)
        .minter(minter.clone());
    let key = task.key.clone();
    let report = run(install, vec![task]).await;
    let pods = std::fs::read_dir(dir.path())
        .expect("the dry-run directory")
        .map(|entry| {
            let path = entry.expect("a directory entry").path();
            serde_yaml_ng::from_str(&std::fs::read_to_string(path).expect("a manifest"))
                .expect("a pod")
        })
        .collect();
    let instance = report
        .instances
        .into_iter()
        .find(|instance| instance.task.key == key)
        .expect("the task instance");
    Dispatched {
        instance,
        pods,
        tokens: minter.minted().len(),
    }
}

fn operator(hook: FakeHook) -> Vec<Arc<dyn Hook>> {
    vec![hook.shared() as Arc<dyn Hook>]
}

fn pod_spec(pod: &Pod) -> &k8s_openapi::api::core::v1::PodSpec {
    pod.spec.as_ref().expect("a pod spec")
}

fn limits(pod: &Pod) -> BTreeMap<String, Quantity> {
    pod_spec(pod).containers[0]
        .resources
        .as_ref()
        .and_then(|resources| resources.limits.clone())
        .unwrap_or_default()
}

fn quantity(text: &str) -> Quantity {
    Quantity(text.to_owned())
}

// ---- images.allowed ---------------------------------------------------------------------------

#[actix::test]
async fn an_image_outside_images_allowed_is_refused_before_its_token() {
    let mut evil = task("load");
    evil.image = "evil.io/x:1".to_owned();

    let dispatched = dispatch("{images: {allowed: [ghcr.io/acme/]}}", vec![], evil).await;

    dispatched.assert_refused_with(
        "dispatch refused: admission: refused by executor policy: image \"evil.io/x:1\" is not in images.allowed",
    );
}

#[actix::test]
async fn an_image_under_an_allowed_prefix_runs() {
    let dispatched = dispatch(
        "{images: {allowed: [ghcr.io/acme/]}}",
        vec![],
        on_its_own_pod(task("load")),
    )
    .await;

    let pod = dispatched.pod();
    assert_eq!(
        pod_spec(pod).containers[0].image.as_deref(),
        Some("ghcr.io/acme/etl:1.2")
    );
}

// ---- service_account -------------------------------------------------------------------------

#[actix::test]
async fn a_service_account_outside_allowed_is_refused() {
    let mut reporting = task("load");
    reporting.execution.service_account = "reporting".to_owned();

    let dispatched = dispatch(
        "{service_account: {allowed: [dexaflow-task]}}",
        vec![],
        reporting,
    )
    .await;

    dispatched.assert_refused_with(
        "dispatch refused: admission: refused by executor policy: execution.service_account \"reporting\" is not in service_account.allowed",
    );
}

#[actix::test]
async fn the_forced_service_account_replaces_the_task_s_own_on_the_pod() {
    let mut reporting = task("load");
    reporting.execution.service_account = "reporting".to_owned();

    let dispatched = dispatch(
        "{service_account: {force: etl-runner, allowed: [etl-runner]}}",
        vec![],
        reporting,
    )
    .await;

    let pod = dispatched.pod();
    assert_eq!(
        pod_spec(pod).service_account_name.as_deref(),
        Some("etl-runner")
    );
}

// ---- placement.allow_dag_placement --------------------------------------------------------------

#[actix::test]
async fn dag_placement_is_refused_before_any_hook_when_the_policy_forbids_it() {
    let hook = FakeHook::admitting("tenant-placement").shared();
    let mut pinned = task("load");
    pinned
        .execution
        .node_selector
        .insert("disktype".to_owned(), "ssd".to_owned());

    let dispatched = dispatch(
        "{placement: {allow_dag_placement: false}}",
        vec![hook.clone()],
        pinned,
    )
    .await;

    assert_eq!(hook.calls(), 0, "checked with the built-in refusals");
    dispatched.assert_refused_with(
        "dispatch refused: refused by executor policy: execution.node_selector is set but placement.allow_dag_placement is false",
    );
}

#[actix::test]
async fn a_dag_priority_class_is_dag_placement_too() {
    let mut urgent = task("load");
    urgent.execution.priority_class_name = "batch-high".to_owned();

    let dispatched = dispatch("{placement: {allow_dag_placement: false}}", vec![], urgent).await;

    dispatched.assert_refused_with(
        "dispatch refused: refused by executor policy: execution.priority_class_name is set but placement.allow_dag_placement is false",
    );
}

#[actix::test]
async fn a_hook_s_placement_is_not_dag_placement() {
    let hook = FakeHook::changing("tenant-placement", node_selector("pool", "gpu"));

    let dispatched = dispatch(
        "{placement: {allow_dag_placement: false}}",
        operator(hook),
        task("load"),
    )
    .await;

    let pod = dispatched.pod();
    assert_eq!(
        pod_spec(pod).node_selector,
        Some(BTreeMap::from([("pool".to_owned(), "gpu".to_owned())]))
    );
}

// ---- placement.allowed_priority_classes -------------------------------------------------------

/// An operator hook that sets the priority class `class` on every attempt.
fn setting_priority_class(class: &str) -> Vec<Arc<dyn Hook>> {
    operator(FakeHook::changing(
        "tenant-placement",
        Changes {
            priority_class: Some(class.to_owned()),
            ..Changes::default()
        },
    ))
}

#[actix::test]
async fn a_dag_priority_class_outside_allowed_is_refused() {
    let mut urgent = task("load");
    urgent.execution.priority_class_name = "critical".to_owned();

    let dispatched = dispatch(
        "{placement: {allowed_priority_classes: [batch-low]}}",
        vec![],
        urgent,
    )
    .await;

    dispatched.assert_refused_with(
        "dispatch refused: admission: refused by executor policy: execution.priority_class_name \"critical\" is not in placement.allowed_priority_classes",
    );
}

#[actix::test]
async fn an_operator_hook_s_priority_class_outside_allowed_is_refused_with_the_policy_s_message() {
    let dispatched = dispatch(
        "{placement: {allowed_priority_classes: [batch-low]}}",
        setting_priority_class("critical"),
        task("load"),
    )
    .await;

    dispatched.assert_refused_with(
        "dispatch refused: admission: refused by executor policy: execution.priority_class_name \"critical\" is not in placement.allowed_priority_classes",
    );
}

#[actix::test]
async fn an_allowed_priority_class_lands_on_the_pod() {
    let dispatched = dispatch(
        "{placement: {allowed_priority_classes: [batch-low]}}",
        setting_priority_class("batch-low"),
        task("load"),
    )
    .await;

    assert_eq!(
        pod_spec(dispatched.pod()).priority_class_name.as_deref(),
        Some("batch-low")
    );
}

// ---- forced placement -------------------------------------------------------------------------

fn forced_toleration() -> Toleration {
    Toleration {
        key: "dedicated".to_owned(),
        operator: TolerationOperator::Equal,
        value: "tenant-jobs".to_owned(),
        effect: Some(TaintEffect::NoSchedule),
        toleration_seconds: None,
    }
}

const FORCED_PLACEMENT: &str = "{placement: {node_selector: {pool: tenant-jobs}, tolerations: [{key: dedicated, operator: Equal, value: tenant-jobs, effect: NoSchedule}]}}";

#[actix::test]
async fn the_forced_node_selector_and_tolerations_are_merged_onto_the_pod() {
    let mut own = task("load");
    own.execution
        .node_selector
        .insert("disktype".to_owned(), "ssd".to_owned());

    let dispatched = dispatch(FORCED_PLACEMENT, vec![], own).await;

    let spec = pod_spec(dispatched.pod());
    assert_eq!(
        spec.node_selector,
        Some(BTreeMap::from([
            ("disktype".to_owned(), "ssd".to_owned()),
            ("pool".to_owned(), "tenant-jobs".to_owned()),
        ]))
    );
    let tolerations = spec.tolerations.as_ref().expect("tolerations");
    assert_eq!(tolerations.len(), 1);
    assert_eq!(tolerations[0].key.as_deref(), Some("dedicated"));
    assert_eq!(tolerations[0].value.as_deref(), Some("tenant-jobs"));
    assert_eq!(tolerations[0].effect.as_deref(), Some("NoSchedule"));
}

#[actix::test]
async fn an_operator_hook_setting_a_forced_node_selector_key_loses_to_the_policy() {
    let mut changes = node_selector("pool", "gpu");
    changes
        .node_selector
        .insert("zone".to_owned(), "eu-west-1a".to_owned());
    let hook = FakeHook::changing("tenant-placement", changes).shared();

    let dispatched = dispatch(FORCED_PLACEMENT, vec![hook.clone()], task("load")).await;

    assert_eq!(hook.calls(), 1);
    assert_eq!(
        pod_spec(dispatched.pod()).node_selector,
        Some(BTreeMap::from([
            ("pool".to_owned(), "tenant-jobs".to_owned()),
            ("zone".to_owned(), "eu-west-1a".to_owned()),
        ]))
    );
}

/// A webhook at a real TLS server on loopback that answers every attempt with `changes`, and the
/// server, which must outlive the dispatch.
fn webhook_changing(certs: &Certs, changes: Changes) -> (Vec<Arc<dyn Hook>>, Server) {
    let server = Server::start(
        certs,
        Transport::Tls,
        deciding(move |_| Decision::AdmitWith(Box::new(changes.clone()))),
    );
    let webhook = Webhook::new(&certs.webhook(&server.url())).expect("a valid webhook");
    (vec![Arc::new(webhook) as Arc<dyn Hook>], server)
}

#[actix::test]
async fn a_webhook_setting_a_forced_node_selector_key_loses_to_the_policy() {
    let certs = Certs::new();
    let (hooks, server) = webhook_changing(&certs, node_selector("pool", "gpu"));

    let dispatched = dispatch_on_the_real_clock(FORCED_PLACEMENT, hooks, task("load")).await;

    assert_eq!(server.seen().len(), 1, "the webhook was asked once");
    assert_eq!(
        pod_spec(dispatched.pod()).node_selector,
        Some(BTreeMap::from([(
            "pool".to_owned(),
            "tenant-jobs".to_owned()
        )]))
    );
}

#[actix::test]
async fn a_webhook_s_priority_class_outside_allowed_is_refused_with_the_policy_s_message() {
    let certs = Certs::new();
    let changes = Changes {
        priority_class: Some("critical".to_owned()),
        ..Changes::default()
    };
    let (hooks, server) = webhook_changing(&certs, changes);

    let dispatched = dispatch_on_the_real_clock(
        "{placement: {allowed_priority_classes: [batch-low]}}",
        hooks,
        task("load"),
    )
    .await;

    assert_eq!(server.seen().len(), 1, "the webhook was asked once");
    dispatched.assert_refused_with(
        "dispatch refused: admission: refused by executor policy: execution.priority_class_name \"critical\" is not in placement.allowed_priority_classes",
    );
}

#[actix::test]
async fn an_operator_hook_s_tolerations_are_kept_before_the_forced_ones() {
    let hook = FakeHook::changing(
        "tenant-placement",
        common::toleration(common::equal_toleration("gpu", "a100")),
    );

    let dispatched = dispatch(FORCED_PLACEMENT, operator(hook), task("load")).await;

    let keys: Vec<Option<String>> = pod_spec(dispatched.pod())
        .tolerations
        .iter()
        .flatten()
        .map(|toleration| toleration.key.clone())
        .collect();
    assert_eq!(
        keys,
        [Some("gpu".to_owned()), Some(forced_toleration().key)]
    );
}

// ---- metadata ---------------------------------------------------------------------------------

#[actix::test]
async fn a_label_outside_the_allowed_prefixes_is_refused_naming_the_first_key_in_order() {
    let mut labelled = task("load");
    for key in ["team.example.com/owner", "zz-cost", "cost-center"] {
        labelled
            .execution
            .labels
            .insert(key.to_owned(), "x".to_owned());
    }

    let dispatched = dispatch(
        "{metadata: {allowed_label_prefixes: [team.example.com/]}}",
        vec![],
        on_its_own_pod(labelled),
    )
    .await;

    dispatched.assert_refused_with(
        "dispatch refused: admission: refused by executor policy: execution.labels \"cost-center\" does not start with an allowed prefix",
    );
}

#[actix::test]
async fn an_annotation_an_operator_hook_adds_outside_the_allowed_prefixes_is_refused() {
    let hook = FakeHook::changing("audit", annotation("audit.example.com/by", "hook"));

    let dispatched = dispatch(
        "{metadata: {allowed_annotation_prefixes: [team.example.com/]}}",
        operator(hook),
        task("load"),
    )
    .await;

    dispatched.assert_refused_with(
        "dispatch refused: admission: refused by executor policy: execution.annotations \"audit.example.com/by\" does not start with an allowed prefix",
    );
}

#[actix::test]
async fn labels_under_an_allowed_prefix_land_on_the_pod() {
    let mut labelled = task("load");
    labelled
        .execution
        .labels
        .insert("team.example.com/owner".to_owned(), "data".to_owned());

    let dispatched = dispatch(
        "{metadata: {allowed_label_prefixes: [team.example.com/]}}",
        vec![],
        on_its_own_pod(labelled),
    )
    .await;

    let labels = dispatched.pod().metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels["team.example.com/owner"], "data");
}

// ---- resources.max -----------------------------------------------------------------------------

#[actix::test]
async fn a_limit_over_the_maximum_is_refused_not_lowered() {
    let mut big = task("load");
    big.resources.limits.memory = Some("32Gi".to_owned());

    let dispatched = dispatch("{resources: {max: {memory: 16Gi}}}", vec![], big).await;

    dispatched.assert_refused_with(
        "dispatch refused: admission: refused by executor policy: resources.limits.memory \"32Gi\" exceeds resources.max 16Gi",
    );
}

#[actix::test]
async fn a_request_over_the_maximum_is_refused() {
    let mut big = task("load");
    big.resources.requests.cpu = Some("8".to_owned());

    let dispatched = dispatch("{resources: {max: {cpu: 4}}}", vec![], big).await;

    dispatched.assert_refused_with(
        "dispatch refused: admission: refused by executor policy: resources.requests.cpu \"8\" exceeds resources.max 4",
    );
}

#[actix::test]
async fn empty_limits_are_filled_with_the_maximum_and_set_ones_are_kept() {
    let mut small = task("load");
    small.resources.requests.cpu = Some("1".to_owned());
    small.resources.requests.memory = Some("1Gi".to_owned());
    small.resources.limits.memory = Some("2Gi".to_owned());

    let dispatched = dispatch(
        "{resources: {max: {cpu: 4, memory: 16Gi, ephemeral_storage: 20Gi}}}",
        vec![],
        small,
    )
    .await;

    assert_eq!(
        limits(dispatched.pod()),
        BTreeMap::from([
            ("cpu".to_owned(), quantity("4")),
            ("ephemeral-storage".to_owned(), quantity("20Gi")),
            ("memory".to_owned(), quantity("2Gi")),
        ])
    );
}

// ---- runtime_class_name ------------------------------------------------------------------------

#[actix::test]
async fn the_forced_runtime_class_lands_on_the_pod() {
    let dispatched = dispatch("{runtime_class_name: gvisor}", vec![], task("load")).await;

    assert_eq!(
        pod_spec(dispatched.pod()).runtime_class_name.as_deref(),
        Some("gvisor")
    );
}

#[actix::test]
async fn an_operator_hook_setting_a_runtime_class_is_refused_as_an_operator_hook() {
    let hook = FakeHook::changing(
        "sneaky",
        Changes {
            runtime_class_name: Some("runc".to_owned()),
            ..Changes::default()
        },
    );

    let dispatched = dispatch("{runtime_class_name: gvisor}", operator(hook), task("load")).await;

    dispatched.assert_refused_with(
        "dispatch refused: admission: hook \"sneaky\": runtime_class_name may only be set by a privileged hook",
    );
}

// ---- placement of what the policy forced ----------------------------------------------------------

#[actix::test]
async fn an_attempt_the_policy_forced_a_field_onto_takes_a_dedicated_pod_for_the_policy() {
    let dispatched = dispatch("{runtime_class_name: gvisor}", vec![], task("load")).await;

    dispatched.pod();
    assert_eq!(
        dispatched.instance.placement,
        Some(PodKind::Dedicated(DedicatedReason::ExecutorPolicy))
    );
}

#[actix::test]
async fn an_attempt_whose_limit_the_policy_filled_takes_a_dedicated_pod_for_the_policy() {
    let dispatched = dispatch(
        "{resources: {max: {ephemeral_storage: 20Gi}}}",
        vec![],
        task("load"),
    )
    .await;

    dispatched.pod();
    assert_eq!(
        dispatched.instance.placement,
        Some(PodKind::Dedicated(DedicatedReason::ExecutorPolicy))
    );
}

#[actix::test]
async fn an_attempt_a_policy_only_checked_goes_warm() {
    let dispatched = dispatch("{images: {allowed: [ghcr.io/acme/]}}", vec![], task("load")).await;

    assert_eq!(dispatched.tokens, 1);
    assert_eq!(dispatched.instance.placement, Some(PodKind::Warm));
}

// ---- Lite ---------------------------------------------------------------------------------------

#[actix::test]
async fn the_policy_refuses_on_lite_too() {
    tokio::time::pause();
    let logs = tempfile::tempdir().expect("a temporary directory");
    let yaml = format!(
        "executor:\n  type: lite\n  lite: {{log_dir: {:?}}}\n  policy: {{images: {{allowed: [ghcr.io/acme/]}}}}\n",
        logs.path().display().to_string()
    );
    let config = Config::from_yaml_str(&yaml, NO_ENV).expect("config is valid");
    let minter = Arc::new(RecordingMinter::default());
    let mut evil = task("load");
    evil.image = "evil.io/x:1".to_owned();
    let install = Install::from_config(config).minter(minter.clone());

    let report = run(install, vec![evil]).await;

    let instance = &report.instances[0];
    assert_eq!(
        instance.failure_reason.as_deref(),
        Some(
            "dispatch refused: admission: refused by executor policy: image \"evil.io/x:1\" is not in images.allowed"
        )
    );
    assert!(minter.minted().is_empty());
    assert_eq!(
        std::fs::read_dir(logs.path())
            .expect("the log directory")
            .count(),
        0,
        "no process was started"
    );
}

// ---- the README's example ------------------------------------------------------------------------

#[actix::test]
async fn the_example_policy_gives_the_outcomes_the_readme_shows() {
    tokio::time::pause();
    let logs = tempfile::tempdir().expect("a temporary directory");
    let log_dir = logs.path().display().to_string();
    let config = Config::from_yaml_str(
        include_str!("../../examples/policy.yaml"),
        [("DEXAFLOW_EXECUTOR_LITE_LOG_DIR", log_dir.as_str())],
    )
    .expect("the example config is valid");
    let tasks = dexaflow_admission::workload::load(
        std::path::Path::new("examples/policy-workload.yaml"),
        &config.dispatch.executor,
    )
    .expect("the example workload is valid");
    let install = Install::from_config(config).minter(Arc::new(RecordingMinter::default()));

    let report = run(install, tasks).await;

    let outcomes: Vec<(&str, Option<&str>)> = report
        .instances
        .iter()
        .map(|instance| {
            (
                instance.task.key.task_id.as_str(),
                instance.failure_reason.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        outcomes,
        [
            (
                "aggregate",
                Some(
                    "dispatch refused: admission: refused by executor policy: resources.limits.memory \"32Gi\" exceeds resources.max 16Gi"
                )
            ),
            (
                "exfiltrate",
                Some(
                    "dispatch refused: admission: refused by executor policy: image \"evil.io/x:1\" is not in images.allowed"
                )
            ),
            ("extract", None),
            (
                "labelled",
                Some(
                    "dispatch refused: admission: refused by executor policy: execution.labels \"cost-center\" does not start with an allowed prefix"
                )
            ),
            (
                "pinned",
                Some(
                    "dispatch refused: refused by executor policy: execution.node_selector is set but placement.allow_dag_placement is false"
                )
            ),
            (
                "render",
                Some(
                    "dispatch refused: admission: refused by executor policy: execution.priority_class_name \"critical\" is not in placement.allowed_priority_classes"
                )
            ),
        ]
    );
    let extract = &report.instances[2];
    assert_eq!(extract.state, State::Success);
    assert_eq!(
        extract.placement,
        Some(PodKind::Dedicated(DedicatedReason::ExecutorPolicy))
    );
    let execution = extract.execution.as_ref().expect("admitted");
    assert_eq!(execution.node_selector["pool"], "tenant-jobs");
    assert_eq!(execution.service_account, "etl-runner");
    assert_eq!(execution.runtime_class_name, "gvisor");
}

/// Offers `tasks` to `install` (supervised as the tests' fakes say) and waits until each is
/// settled, then drains.
async fn run(install: Install, tasks: Vec<Task>) -> Drained {
    let handle = install
        .supervise(|settings| *settings = supervision())
        .start()
        .expect("an actix test runs in an actix system");
    for task in tasks {
        handle.offer(task).expect("each task is offered once");
    }
    handle.wait_settled().await;
    handle.drain().await
}
