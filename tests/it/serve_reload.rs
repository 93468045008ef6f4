//! Hot reload: resource groups and certificates re-read while serving, a bad file never
//! replacing a good one. Each waits for the change with a bounded poll, never a fixed sleep.

use crate::serve_support;

use std::io::Write;
use std::path::Path;

use serde_json::{Value, json};
use serve_support::{Authority, eventually, recorder, sample, start_with};

const GPU: &str = "resourceGroups:\n  - resourceGroup: gpu\n    object: {key: namespace, value: [ml]}\n    labels: {pool: gpu}\n";
const SPOT: &str = "resourceGroups:\n  - resourceGroup: spot\n    object: {key: namespace, value: [ml]}\n    labels: {pool: spot}\n";
const BROKEN: &str = "resourceGroups:\n  - resourceGroup: spot\n    object: {key: namespace, value: [ml]}\n    labls: {pool: spot}\n";

fn review() -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "r-1",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": "ml",
            "operation": "CREATE",
            "userInfo": {"username": "alice"},
            "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
        }
    })
}

/// The `pool` node selector `/pods/mutate` gives the pod now.
async fn pool(client: &serve_support::Client) -> Option<String> {
    let answer = client.post_json("/pods/mutate", &review()).await.json();
    let patch = answer["response"]["patch"].as_str()?;
    let bytes = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, patch).ok()?;
    let patch: json_patch::Patch = serde_json::from_slice(&bytes).ok()?;
    let mut pod = review()["request"]["object"].clone();
    json_patch::patch(&mut pod, &patch).ok()?;
    pod["spec"]["nodeSelector"]["pool"]
        .as_str()
        .map(str::to_owned)
}

/// A server whose groups file holds the `gpu` group, its metrics in `recorder`.
async fn start_with_gpu_group(
    recorder: &std::sync::Arc<metrics_exporter_prometheus::PrometheusRecorder>,
) -> serve_support::Running {
    start_with(
        |settings, dir| {
            std::fs::write(dir.join("groups.yaml"), GPU).expect("write");
            settings.resource_groups_file = Some(dir.join("groups.yaml"));
        },
        |registry| registry,
        Some(recorder),
    )
    .await
}

/// Waits until `/pods/mutate` gives the pod the `pool` node selector `wanted`.
async fn until_pool(client: &serve_support::Client, wanted: &str) {
    eventually(wanted, || {
        let client = client.clone();
        let wanted = wanted.to_owned();
        async move { (pool(&client).await.as_deref() == Some(wanted.as_str())).then_some(()) }
    })
    .await;
}

/// Waits until the server presents `certificate`.
async fn until_served(
    client: &serve_support::Client,
    certificate: &rustls::pki_types::CertificateDer<'static>,
) {
    eventually("the new certificate", || {
        let client = client.clone();
        let expected = certificate.clone();
        async move {
            let served = client
                .post_json("/pods/mutate", &review())
                .await
                .certificate;
            (served == expected).then_some(())
        }
    })
    .await;
}

/// Waits until `series` in `recorder` counts one.
async fn until_counted_once(
    recorder: &metrics_exporter_prometheus::PrometheusRecorder,
    series: &str,
) {
    eventually(series, || {
        let count = sample(&recorder.handle().render(), series);
        async move { (count == Some(1.0)).then_some(()) }
    })
    .await;
}

/// Replaces `path` as an editor or `kubectl cp` would: a new file renamed over the old.
fn replace(path: &Path, text: &str) {
    let temporary = path.with_extension("new");
    std::fs::write(&temporary, text).expect("write");
    std::fs::rename(&temporary, path).expect("rename");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rewritten_groups_file_applies_to_the_next_requests() {
    let recorder = recorder();
    let running = start_with_gpu_group(&recorder).await;
    assert_eq!(pool(&running.client).await.as_deref(), Some("gpu"));
    // In place, as most editors and the Volcano docs do it.
    std::fs::write(running.dir.path().join("groups.yaml"), SPOT).expect("rewrite");
    until_pool(&running.client, "spot").await;
    let scrape = recorder.handle().render();
    assert!(
        sample(
            &scrape,
            r#"dexaflow_server_resource_group_reloads_total{result="ok"}"#
        )
        .is_some_and(|count| count >= 1.0),
        "{scrape}"
    );
    assert_eq!(
        sample(
            &scrape,
            r#"dexaflow_server_resource_group_reloads_total{result="error"}"#
        ),
        Some(0.0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_groups_file_truncated_then_written_in_place_never_serves_the_empty_file() {
    let recorder = recorder();
    let running = start_with_gpu_group(&recorder).await;
    let ok = r#"dexaflow_server_resource_group_reloads_total{result="ok"}"#;
    let error = r#"dexaflow_server_resource_group_reloads_total{result="error"}"#;
    assert_eq!(pool(&running.client).await.as_deref(), Some("gpu"));
    // Truncated in place and held open: a writer between its truncation and its write, for
    // as long as the server takes to judge what it reads.
    let mut file = std::fs::File::create(running.dir.path().join("groups.yaml")).expect("truncate");
    eventually("the empty file judged", || {
        let client = running.client.clone();
        let scrape = recorder.handle().render();
        async move {
            assert_eq!(
                pool(&client).await.as_deref(),
                Some("gpu"),
                "the empty file is never served"
            );
            let judged = [ok, error]
                .iter()
                .any(|series| sample(&scrape, series).is_some_and(|count| count >= 1.0));
            judged.then_some(())
        }
    })
    .await;
    let scrape = recorder.handle().render();
    assert_eq!(
        sample(&scrape, ok),
        Some(0.0),
        "the empty file was taken: {scrape}"
    );
    assert_eq!(sample(&scrape, error), Some(1.0), "{scrape}");
    assert_eq!(pool(&running.client).await.as_deref(), Some("gpu"));
    // The write completes: its groups apply, counted once.
    file.write_all(SPOT.as_bytes()).expect("write");
    drop(file);
    until_pool(&running.client, "spot").await;
    let scrape = recorder.handle().render();
    assert_eq!(sample(&scrape, ok), Some(1.0), "{scrape}");
    assert_eq!(sample(&scrape, error), Some(1.0), "{scrape}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_groups_file_keeps_the_previous_groups_and_is_counted() {
    let recorder = recorder();
    let running = start_with_gpu_group(&recorder).await;
    replace(&running.dir.path().join("groups.yaml"), BROKEN);
    until_counted_once(
        &recorder,
        r#"dexaflow_server_resource_group_reloads_total{result="error"}"#,
    )
    .await;
    assert_eq!(
        pool(&running.client).await.as_deref(),
        Some("gpu"),
        "the old group still applies"
    );
    // A good file after the bad one is taken in.
    replace(&running.dir.path().join("groups.yaml"), SPOT);
    until_pool(&running.client, "spot").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_groups_file_at_start_fails_the_start_naming_the_line() {
    let dir = tempfile::tempdir().expect("a directory");
    let path = dir.path().join("groups.yaml");
    std::fs::write(&path, BROKEN).expect("write");
    let error = dexaflow_admission::serve::parse_groups(&path, BROKEN).expect_err("broken");
    let text = dexaflow_admission::admission::error_chain(&error);
    assert!(text.contains("unknown field `labls`"), "{text}");
    assert!(text.contains("line 4"), "{text}");
    let mut settings = serve_support::settings(Authority::new().issue().write_to(dir.path()));
    settings.resource_groups_file = Some(path);
    let started = dexaflow_admission::serve::Server::builder(settings)
        .start()
        .await;
    assert!(matches!(
        started,
        Err(dexaflow_admission::serve::ServeError::Groups { .. })
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_mount_swapped_to_a_new_certificate_is_served() {
    let authority = Authority::new();
    let first = authority.issue();
    let second = authority.issue();
    let recorder = recorder();
    let secret = tempfile::tempdir().expect("a directory");
    first.mount_as_secret(secret.path(), "..2026_12_01_10_00_00.1");
    let secret_path = secret.path().to_owned();
    let running = start_with(
        |settings, _| {
            settings.tls.cert_file = secret_path.join("tls.crt");
            settings.tls.key_file = secret_path.join("tls.key");
        },
        |registry| registry,
        Some(&recorder),
    )
    .await;
    let client = serve_support::Client::new(running.server.local_addr(), &authority.der());
    let served = client
        .post_json("/pods/mutate", &review())
        .await
        .certificate;
    assert_eq!(served, first.der);

    second.mount_as_secret(secret.path(), "..2026_12_02_10_00_00.2");
    until_served(&client, &second.der).await;
    let scrape = recorder.handle().render();
    assert_eq!(
        sample(
            &scrape,
            r#"dexaflow_server_certificate_reloads_total{result="ok"}"#
        ),
        Some(1.0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_that_does_not_match_its_key_keeps_the_old_pair_and_is_counted() {
    let recorder = recorder();
    let running = start_with(|_, _| {}, |registry| registry, Some(&recorder)).await;
    let before = running
        .client
        .post_json("/pods/mutate", &review())
        .await
        .certificate;
    let other = running.authority.issue();
    // A new certificate whose key was not written: the pair does not match.
    replace(&running.dir.path().join("tls.crt"), &other.cert_pem);
    until_counted_once(
        &recorder,
        r#"dexaflow_server_certificate_reloads_total{result="error"}"#,
    )
    .await;
    let after = running
        .client
        .post_json("/pods/mutate", &review())
        .await
        .certificate;
    assert_eq!(after, before, "the old pair still serves");
    // Its key arrives: the new pair serves.
    replace(&running.dir.path().join("tls.key"), &other.key_pem);
    until_served(&running.client, &other.der).await;
}
