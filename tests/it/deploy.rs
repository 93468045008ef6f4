//! The deployment files agree with the crate and with each other, checked offline (no container
//! engine or cluster runs here): the image builds with a toolchain the crate supports, from a
//! context without the build output, and `kubectl apply -k deploy/kubernetes/` applies every
//! manifest, the namespace first and the fail-closed webhook configurations last, which leave
//! out the namespaces the server needs to come back.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_yaml_ng::Value;

const MANIFESTS: &str = "deploy/kubernetes";
const KUSTOMIZATION: &str = "kustomization.yaml";
/// The webhook configurations of the Volcano overlay.
pub(super) const VOLCANO_WEBHOOKS: &str = "deploy/volcano/webhooks.yaml";
pub(super) const WEBHOOK_KINDS: [&str; 2] = [
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
];
/// The label the documented first step (`kubectl apply -k ... -l 'KEY!=VALUE'`) leaves out.
pub(super) const WEBHOOK_COMPONENT: (&str, &str) =
    ("app.kubernetes.io/component", "admission-webhooks");

fn repo_path(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(relative)
}

pub(super) fn read(relative: &str) -> String {
    let path = repo_path(relative);
    fs::read_to_string(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

/// `1.86` or `1.86.0` as numbers, a missing part counting as 0.
fn version(text: &str) -> Vec<u64> {
    let mut parts: Vec<u64> = text
        .split('.')
        .map(|part| {
            part.parse()
                .unwrap_or_else(|_| panic!("{text:?} is not a version such as 1.86"))
        })
        .collect();
    parts.resize(3, 0);
    parts
}

/// The tag of every `FROM` line whose image is Rust's official one (`rust:TAG`, with or without
/// a registry), `None` for one without a tag.
fn rust_image_tags(dockerfile: &str) -> Vec<Option<String>> {
    dockerfile
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            if !words.next()?.eq_ignore_ascii_case("FROM") {
                return None;
            }
            let image = words.find(|word| !word.starts_with("--"))?;
            let (name, tag) = match image.rsplit_once(':') {
                Some((name, tag)) if !tag.contains('/') => (name, Some(tag.to_owned())),
                _ => (image, None),
            };
            (name == "rust" || name.ends_with("/rust")).then_some(tag)
        })
        .collect()
}

#[test]
fn dockerfile_toolchain_is_at_least_the_crates_rust_version() {
    let rust_version = env!("CARGO_PKG_RUST_VERSION");
    assert!(!rust_version.is_empty(), "Cargo.toml has no rust-version");
    let tags = rust_image_tags(&read("deploy/Dockerfile"));

    assert!(
        !tags.is_empty(),
        "deploy/Dockerfile builds on no rust: image"
    );
    for tag in tags {
        let tag = tag.expect("every rust: image in deploy/Dockerfile is pinned to a version");
        let toolchain: String = tag
            .chars()
            .take_while(|ch| ch.is_ascii_digit() || *ch == '.')
            .collect();
        assert!(
            version(&toolchain) >= version(rust_version),
            "deploy/Dockerfile builds with rust:{tag}, older than Cargo.toml's rust-version {rust_version}"
        );
    }
}

#[test]
fn dockerignore_leaves_the_build_output_out_of_the_context() {
    // Docker reads the patterns in order and the last match wins: a later `!target/...`
    // would put part of it back.
    let patterns: Vec<String> = read(".dockerignore")
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(|line| line.trim_end_matches('/').to_owned())
        .collect();
    let is_target = |pattern: &str| {
        let pattern = pattern.trim_start_matches('/');
        pattern == "target" || pattern == "**/target"
    };

    assert!(
        patterns.iter().any(|pattern| is_target(pattern)),
        ".dockerignore does not leave out target: {patterns:?}"
    );
    assert!(
        !patterns.iter().any(|pattern| pattern
            .strip_prefix('!')
            .is_some_and(|kept| kept.trim_start_matches('/').starts_with("target"))),
        ".dockerignore puts part of target back: {patterns:?}"
    );
    assert!(
        patterns.iter().any(|pattern| pattern == ".git"),
        ".dockerignore does not leave out .git: {patterns:?}"
    );
}

/// The `resources` of deploy/kubernetes/kustomization.yaml, in order.
fn kustomization_resources() -> Vec<String> {
    #[derive(Deserialize)]
    struct Kustomization {
        resources: Vec<String>,
    }
    let text = read(&format!("{MANIFESTS}/{KUSTOMIZATION}"));
    let kustomization: Kustomization =
        serde_yaml_ng::from_str(&text).expect("kustomization.yaml parses");
    kustomization.resources
}

/// Every document of one manifest file of deploy/kubernetes, in order.
fn documents(file: &str) -> Vec<Value> {
    documents_at(&format!("{MANIFESTS}/{file}"))
}

/// Every document of the manifest file at `relative` (to the repository), in order.
pub(super) fn documents_at(relative: &str) -> Vec<Value> {
    let file = relative;
    let text = read(relative);
    serde_yaml_ng::Deserializer::from_str(&text)
        .map(|document| Value::deserialize(document).unwrap_or_else(|err| panic!("{file}: {err}")))
        .filter(|document| !document.is_null())
        .collect()
}

pub(super) fn string_at<'a>(document: &'a Value, path: &[&str]) -> Option<&'a str> {
    path.iter()
        .try_fold(document, |value, key| value.get(key))?
        .as_str()
}

/// Every object `kubectl apply -k` applies, in the order the kustomization lists them.
fn applied_objects() -> Vec<Value> {
    kustomization_resources()
        .iter()
        .flat_map(|file| documents(file))
        .collect()
}

#[test]
fn kustomization_lists_every_manifest_once_and_nothing_else() {
    let listed = kustomization_resources();
    let on_disk: BTreeSet<String> = fs::read_dir(repo_path(MANIFESTS))
        .expect("deploy/kubernetes lists")
        .map(|entry| {
            entry
                .expect("a directory entry reads")
                .file_name()
                .into_string()
                .expect("file names are UTF-8")
        })
        .filter(|name| name.ends_with(".yaml") && name != KUSTOMIZATION)
        .collect();

    let unique: BTreeSet<String> = listed.iter().cloned().collect();
    assert_eq!(unique.len(), listed.len(), "listed twice: {listed:?}");
    assert_eq!(
        unique, on_disk,
        "kustomization.yaml against deploy/kubernetes/*.yaml"
    );
}

#[test]
fn kustomization_applies_the_namespace_first_and_the_webhook_configurations_last() {
    let objects = applied_objects();
    let kinds: Vec<&str> = objects
        .iter()
        .map(|object| string_at(object, &["kind"]).expect("every object has a kind"))
        .collect();

    assert_eq!(kinds.first(), Some(&"Namespace"), "{kinds:?}");
    let namespace = string_at(&objects[0], &["metadata", "name"]).expect("the namespace's name");
    for object in &objects[1..] {
        assert_ne!(
            string_at(object, &["kind"]),
            Some("Namespace"),
            "one namespace"
        );
        if let Some(theirs) = string_at(object, &["metadata", "namespace"]) {
            assert_eq!(
                theirs, namespace,
                "every object in the namespace applied first"
            );
        }
    }
    let first_webhook = kinds
        .iter()
        .position(|kind| WEBHOOK_KINDS.contains(kind))
        .expect("the kustomization applies the webhook configurations");
    assert!(
        kinds[first_webhook..]
            .iter()
            .all(|kind| WEBHOOK_KINDS.contains(kind)),
        "nothing after the webhook configurations: {kinds:?}"
    );
    assert!(
        kinds.contains(&"Deployment"),
        "the server itself is applied: {kinds:?}"
    );
}

#[test]
fn only_the_webhook_configurations_carry_the_label_the_first_step_leaves_out() {
    // The first install applies everything but the webhook configurations, selected by label.
    let (key, value) = WEBHOOK_COMPONENT;
    for object in applied_objects() {
        let kind = string_at(&object, &["kind"]).expect("every object has a kind");
        let label = string_at(&object, &["metadata", "labels", key]);
        if WEBHOOK_KINDS.contains(&kind) {
            assert_eq!(label, Some(value), "{kind} is labelled {key}={value}");
        } else {
            assert_ne!(label, Some(value), "{kind} is not labelled {key}={value}");
        }
    }
    assert!(
        read(&format!("{MANIFESTS}/{KUSTOMIZATION}")).contains(&format!(
            "kubectl apply -k deploy/kubernetes/ -l '{key}!={value}'"
        )),
        "kustomization.yaml's first step leaves out {key}={value}"
    );
}

/// The webhook configurations of the base and of the Volcano overlay.
pub(super) fn every_webhook_configuration() -> Vec<Value> {
    applied_objects()
        .into_iter()
        .chain(documents_at(VOLCANO_WEBHOOKS))
        .filter(|object| WEBHOOK_KINDS.contains(&string_at(object, &["kind"]).unwrap_or_default()))
        .collect()
}

#[test]
fn every_webhook_leaves_out_the_namespaces_the_server_needs_to_come_back() {
    let mut webhooks = 0;
    for object in every_webhook_configuration() {
        if !WEBHOOK_KINDS.contains(&string_at(&object, &["kind"]).unwrap_or_default()) {
            continue;
        }
        for webhook in object["webhooks"]
            .as_sequence()
            .expect("a webhook configuration lists webhooks")
        {
            webhooks += 1;
            let name = string_at(webhook, &["name"]).expect("every webhook has a name");
            let own = string_at(webhook, &["clientConfig", "service", "namespace"])
                .expect("every webhook calls the server's service");
            let left_out: BTreeSet<&str> = webhook["namespaceSelector"]["matchExpressions"]
                .as_sequence()
                .unwrap_or_else(|| panic!("{name}: no namespaceSelector.matchExpressions"))
                .iter()
                .filter(|expression| {
                    string_at(expression, &["key"]) == Some("kubernetes.io/metadata.name")
                        && string_at(expression, &["operator"]) == Some("NotIn")
                })
                .flat_map(|expression| {
                    expression["values"]
                        .as_sequence()
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str)
                })
                .collect();
            for needed in ["kube-system", "cert-manager", own] {
                assert!(
                    left_out.contains(needed),
                    "{name} does not leave out namespace {needed}: {left_out:?}"
                );
            }
        }
    }
    assert_eq!(
        webhooks, 11,
        "the two pod webhooks and Volcano's nine: {webhooks}"
    );
}

#[test]
fn the_cluster_role_grants_the_server_only_reads_of_queues_and_namespaces() {
    let objects = applied_objects();
    let of_kind = |kind: &str| {
        objects
            .iter()
            .find(|object| string_at(object, &["kind"]) == Some(kind))
            .unwrap_or_else(|| panic!("a {kind} is applied"))
    };
    let role = of_kind("ClusterRole");
    let binding = of_kind("ClusterRoleBinding");
    let account = of_kind("ServiceAccount");

    let rules: Vec<(String, String, Vec<String>)> = role["rules"]
        .as_sequence()
        .expect("rules")
        .iter()
        .flat_map(|rule| {
            let groups = rule["apiGroups"].as_sequence().expect("apiGroups").clone();
            let resources = rule["resources"].as_sequence().expect("resources").clone();
            let verbs: Vec<String> = rule["verbs"]
                .as_sequence()
                .expect("verbs")
                .iter()
                .map(|verb| verb.as_str().expect("a verb").to_owned())
                .collect();
            groups.into_iter().flat_map(move |group| {
                let verbs = verbs.clone();
                resources.clone().into_iter().map(move |resource| {
                    (
                        group.as_str().expect("a group").to_owned(),
                        resource.as_str().expect("a resource").to_owned(),
                        verbs.clone(),
                    )
                })
            })
        })
        .collect();
    assert_eq!(
        rules,
        [
            (
                "scheduling.volcano.sh".to_owned(),
                "queues".to_owned(),
                vec!["get".to_owned(), "list".to_owned(), "watch".to_owned()]
            ),
            (
                "".to_owned(),
                "namespaces".to_owned(),
                vec!["get".to_owned()]
            ),
        ]
    );
    assert_eq!(
        string_at(binding, &["roleRef", "name"]),
        string_at(role, &["metadata", "name"])
    );
    let subject = &binding["subjects"][0];
    assert_eq!(
        string_at(subject, &["name"]),
        string_at(account, &["metadata", "name"])
    );
    assert_eq!(
        string_at(subject, &["namespace"]),
        string_at(account, &["metadata", "namespace"])
    );
}
