//! The server's one table of services, the webhook configurations in `deploy/` and the Volcano
//! overlay's enabled paths agree: every service the API server calls has exactly one webhook,
//! of its kind, for its resource and operations, every webhook calls a service of the table,
//! and the overlay serves every built-in service with the token its cluster reads need.

use crate::deploy::{
    WEBHOOK_COMPONENT, documents_at, every_webhook_configuration, read, string_at,
};

use std::collections::BTreeSet;

use dexaflow_admission::serve::services::{Admits, BUILTIN_SERVICES, BuiltinService};
use dexaflow_admission::serve::{Kind, parse_enabled};
use serde_yaml_ng::Value;

const OVERLAY: &str = "deploy/volcano";
const ENABLED_VARIABLE: &str = "DEXAFLOW_SERVER_ENABLED_ADMISSION";

/// One webhook as a configuration registers it.
#[derive(Debug, PartialEq, Eq)]
struct Registered {
    path: String,
    kind: Kind,
    group: String,
    version: String,
    resource: String,
    operations: Vec<String>,
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_sequence()
        .map(|items| {
            items
                .iter()
                .map(|item| item.as_str().expect("a string").to_owned())
                .collect()
        })
        .unwrap_or_default()
}

fn one(values: Vec<String>, what: &str, webhook: &str) -> String {
    match <[String; 1]>::try_from(values) {
        Ok([value]) => value,
        Err(values) => panic!("{webhook}: one {what} expected, found {values:?}"),
    }
}

/// Every webhook of the base and of the overlay, each with exactly one rule.
fn registered() -> Vec<Registered> {
    let mut found = Vec::new();
    for configuration in every_webhook_configuration() {
        let kind = match string_at(&configuration, &["kind"]) {
            Some("MutatingWebhookConfiguration") => Kind::Mutating,
            _ => Kind::Validating,
        };
        for webhook in configuration["webhooks"].as_sequence().expect("webhooks") {
            let name = string_at(webhook, &["name"]).expect("a name");
            let rules = webhook["rules"].as_sequence().expect("rules");
            assert_eq!(rules.len(), 1, "{name}: one rule");
            let rule = &rules[0];
            found.push(Registered {
                path: string_at(webhook, &["clientConfig", "service", "path"])
                    .expect("a path")
                    .to_owned(),
                kind,
                group: one(strings(&rule["apiGroups"]), "apiGroup", name),
                version: one(strings(&rule["apiVersions"]), "apiVersion", name),
                resource: one(strings(&rule["resources"]), "resource", name),
                operations: strings(&rule["operations"]),
            });
        }
    }
    found
}

fn as_registered(service: &BuiltinService, admits: &Admits) -> Registered {
    Registered {
        path: service.path.to_owned(),
        kind: service.kind,
        group: admits.group.to_owned(),
        version: admits.version.to_owned(),
        resource: admits.resource.to_owned(),
        operations: admits
            .operations
            .iter()
            .map(|op| (*op).to_owned())
            .collect(),
    }
}

#[test]
fn every_service_the_api_server_calls_has_one_webhook_of_its_kind_resource_and_operations() {
    let webhooks = registered();

    for service in &BUILTIN_SERVICES {
        let calling: Vec<&Registered> = webhooks
            .iter()
            .filter(|webhook| webhook.path == service.path)
            .collect();
        match &service.admits {
            Some(admits) => assert_eq!(
                calling,
                [&as_registered(service, admits)],
                "the webhooks calling {}",
                service.path
            ),
            None => assert!(calling.is_empty(), "{} has no webhook", service.path),
        }
    }
}

#[test]
fn every_webhook_calls_a_service_of_the_table() {
    let paths: BTreeSet<&str> = BUILTIN_SERVICES
        .iter()
        .map(|service| service.path)
        .collect();

    for webhook in registered() {
        assert!(
            paths.contains(webhook.path.as_str()),
            "{} is not a built-in service's path",
            webhook.path
        );
    }
}

/// The patch of the overlay that makes the server read the cluster.
fn overlay_patch() -> Vec<Value> {
    documents_at(&format!("{OVERLAY}/reads-the-cluster.yaml"))
}

#[test]
fn the_volcano_overlay_enables_every_builtin_service() {
    let deployment = overlay_patch()
        .into_iter()
        .find(|object| string_at(object, &["kind"]) == Some("Deployment"))
        .expect("the overlay patches the Deployment");
    let env = deployment["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_sequence()
        .expect("the server's env");
    let enabled = env
        .iter()
        .find(|variable| string_at(variable, &["name"]) == Some(ENABLED_VARIABLE))
        .and_then(|variable| string_at(variable, &["value"]))
        .expect("the overlay sets the enabled paths");

    let enabled: BTreeSet<String> = parse_enabled(enabled).into_iter().collect();
    let builtin: BTreeSet<String> = BUILTIN_SERVICES
        .iter()
        .map(|service| service.path.to_owned())
        .collect();
    assert_eq!(enabled, builtin);
}

#[test]
fn the_volcano_overlay_mounts_the_token_its_cluster_reads_need() {
    let patch = overlay_patch();
    let of_kind = |kind: &str| {
        patch
            .iter()
            .find(|object| string_at(object, &["kind"]) == Some(kind))
            .unwrap_or_else(|| panic!("the overlay patches the {kind}"))
    };

    assert_eq!(
        of_kind("ServiceAccount")["automountServiceAccountToken"].as_bool(),
        Some(true)
    );
    assert_eq!(
        of_kind("Deployment")["spec"]["template"]["spec"]["automountServiceAccountToken"].as_bool(),
        Some(true),
        "the pod's own false would win over the account's true"
    );
}

#[test]
fn the_volcano_overlay_builds_on_the_base_and_documents_the_same_first_step() {
    let text = read(&format!("{OVERLAY}/kustomization.yaml"));
    let kustomization: Value = serde_yaml_ng::from_str(&text).expect("the overlay parses");

    assert_eq!(
        strings(&kustomization["resources"]),
        ["../kubernetes", "webhooks.yaml"]
    );
    let (key, value) = WEBHOOK_COMPONENT;
    assert!(
        text.contains(&format!("kubectl apply -k {OVERLAY}/ -l '{key}!={value}'")),
        "the overlay's first step leaves out {key}={value}"
    );
    for configuration in documents_at(&format!("{OVERLAY}/webhooks.yaml")) {
        assert_eq!(
            string_at(&configuration, &["metadata", "labels", key]),
            Some(value)
        );
    }
}
