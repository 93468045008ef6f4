//! `/tasks/admit` over real HTTPS on 127.0.0.1: the `dexaflow.io/admission/v1` protocol answered
//! by a supervised chain of the config's hooks and a library user's Rust hooks, with the
//! server config's own change rules, its status codes, its bearer token and its boot check.

use crate::common;
use crate::serve_support;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use common::FakeHook;
use dexaflow_admission::admission::{
    AnswerEnvelope, Changes, Decision, Hook, HookError, HookFuture, Request, RequestEnvelope,
};
use dexaflow_admission::config::Config;
use dexaflow_admission::serve::{ServeError, Server, ServerBuilder, Settings, admit};
use http::StatusCode;
use http_body_util::Full;
use hyper::body::Bytes;
use serde_json::{Value, json};
use serve_support::{Authority, Running, SERVED_HOOKS, recorder, sample, start_with};

/// The config: the served hooks (acme runs as it is, gpu-lab is placed on the GPU pool, finance
/// is frozen for ten minutes, umbrella is refused), with priority classes limited to `batch`.
fn config() -> String {
    format!("execution_allowlist:\n  priority_classes: [batch]\n{SERVED_HOOKS}")
}

/// The builder's `/tasks/admit` chain: `yaml`'s hooks and change rules, then `extra` hooks.
fn admission(yaml: &str, extra: Vec<Arc<dyn Hook>>) -> impl FnOnce(ServerBuilder) -> ServerBuilder {
    let config = Config::from_yaml_str(yaml, Vec::<(String, String)>::new()).expect("a config");
    move |builder: ServerBuilder| {
        extra.into_iter().fold(
            builder
                .change_rules(config.dispatch.change_rules())
                .supervision(config.supervise)
                .hook_specs(&config.hooks),
            ServerBuilder::hook,
        )
    }
}

/// A server with the built-in services and `/tasks/admit` of `yaml` and `extra`.
async fn serve_admission(
    yaml: &str,
    extra: Vec<Arc<dyn Hook>>,
    configure: impl FnOnce(&mut Settings, &Path),
) -> Running {
    start_with(configure, admission(yaml, extra), None).await
}

fn envelope(uid: &str, tenant: &str) -> Value {
    serde_json::to_value(RequestEnvelope::new(
        uid,
        Request::new(tenant, "etl", "load"),
    ))
    .expect("JSON")
}

/// POSTs an attempt of `tenant` to `/tasks/admit` and returns the answer.
async fn ask(running: &Running, tenant: &str) -> serve_support::Answer {
    running
        .client
        .post_json(admit::PATH, &envelope("8d0f3a1e", tenant))
        .await
}

/// The decision of a 200 answer, checked against the wire's rules for the uid it echoes.
fn decision(answer: &serve_support::Answer) -> Decision {
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
    assert_eq!(answer.content_type(), "application/json");
    let envelope: AnswerEnvelope = serde_json::from_slice(&answer.body).expect("an answer");
    envelope.into_decision("8d0f3a1e").expect("a valid answer")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attempt_no_hook_acts_on_is_admitted_echoing_the_uid() {
    let running = serve_admission(&config(), Vec::new(), |_, _| {}).await;

    let answer = ask(&running, "acme").await;

    assert_eq!(decision(&answer), Decision::Admit);
    assert_eq!(answer.json()["api_version"], "dexaflow.io/admission/v1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn placement_hook_changes_are_answered_as_admit_with() {
    let running = serve_admission(&config(), Vec::new(), |_, _| {}).await;

    let answer = ask(&running, "gpu-lab").await;

    let mut changes = Changes::default();
    changes.node_selector.insert("pool".into(), "gpu".into());
    assert_eq!(decision(&answer), Decision::AdmitWith(Box::new(changes)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn freeze_hold_is_answered_200_hold_with_its_reason_not_503() {
    let running = serve_admission(&config(), Vec::new(), |_, _| {}).await;

    let answer = ask(&running, "finance").await;

    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(
        decision(&answer),
        Decision::Hold("quarter-end close".into())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deny_refusal_is_answered_200_refuse_with_its_reason() {
    let running = serve_admission(&config(), Vec::new(), |_, _| {}).await;

    let answer = ask(&running, "umbrella").await;

    assert_eq!(
        decision(&answer),
        Decision::Refuse("tenant umbrella is suspended for unpaid invoices".into())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_hook_a_library_user_adds_runs_after_the_config_hooks_and_sees_their_changes() {
    let mut changes = Changes::default();
    changes.labels.insert("team".into(), "ml".into());
    let team = FakeHook::changing("team-label", changes.clone()).shared();

    let running = serve_admission(&config(), vec![team.clone()], |_, _| {}).await;
    let answer = ask(&running, "gpu-lab").await;

    changes.node_selector.insert("pool".into(), "gpu".into());
    assert_eq!(decision(&answer), Decision::AdmitWith(Box::new(changes)));
    let seen = team.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].execution.node_selector["pool"], "gpu");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn change_the_servers_allowlist_forbids_is_refused_naming_the_hook() {
    let rogue = FakeHook::changing(
        "rogue",
        Changes {
            priority_class: Some("system-cluster-critical".into()),
            ..Changes::default()
        },
    )
    .shared();
    let running = serve_admission(&config(), vec![rogue], |_, _| {}).await;

    let answer = ask(&running, "acme").await;

    let Decision::Refuse(reason) = decision(&answer) else {
        panic!("expected a refusal: {:?}", answer.body)
    };
    assert!(reason.starts_with("hook \"rogue\": "), "{reason}");
    assert!(reason.contains("system-cluster-critical"), "{reason}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broken_hook_is_answered_503_naming_it_and_later_hooks_are_not_called() {
    let broken =
        FakeHook::failing("quota", HookError::Failed("quota service down".into())).shared();
    let after = FakeHook::admitting("after").shared();
    let running = serve_admission(&config(), vec![broken.clone(), after.clone()], |_, _| {}).await;

    let answer = ask(&running, "acme").await;

    answer.assert_error(
        StatusCode::SERVICE_UNAVAILABLE,
        "admission hook unavailable: quota: quota service down",
    );
    assert_eq!(answer.json()["uid"], "8d0f3a1e");
    assert_eq!(broken.seen().len(), 1);
    assert!(after.seen().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn panicking_hook_is_answered_503_not_500() {
    let panicking = FakeHook::panicking("panicky", "index out of bounds").shared();
    let running = serve_admission(&config(), vec![panicking], |_, _| {}).await;

    let answer = ask(&running, "acme").await;

    answer.assert_error(
        StatusCode::SERVICE_UNAVAILABLE,
        "admission hook unavailable: panicky: panicked: index out of bounds",
    );
}

/// A hook that decides inside `tokio::task::block_in_place`, which the single-threaded runtime
/// of a connection's thread refuses with a panic.
struct BlockingInPlace;

impl Hook for BlockingInPlace {
    fn name(&self) -> &str {
        "in-place"
    }

    fn is_remote(&self) -> bool {
        false
    }

    fn admit<'a>(&'a self, _request: &'a Request) -> HookFuture<'a> {
        Box::pin(async { tokio::task::block_in_place(|| Ok(Decision::Admit)) })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hook_calling_block_in_place_is_answered_503_as_its_panic_and_the_server_serves_on() {
    let running = serve_admission(&config(), vec![Arc::new(BlockingInPlace)], |_, _| {}).await;

    // Each over an HTTP/1.1 connection of its own, served on a connection thread: the second
    // finds the server, and the thread, still answering.
    let first = ask(&running, "acme").await;
    let second = ask(&running, "acme").await;

    for answer in [&first, &second] {
        answer.assert_error(
            StatusCode::SERVICE_UNAVAILABLE,
            "admission hook unavailable: in-place: panicked: ",
        );
        assert_eq!(answer.json()["uid"], "8d0f3a1e");
    }
}

/// POSTs an attempt of acme to `/tasks/admit?timeout=1s` and returns the answer, which comes
/// long before the chain's own ten seconds.
async fn ask_within_a_second(running: &Running) -> serve_support::Answer {
    tokio::time::timeout(
        Duration::from_secs(9),
        running.client.post_json(
            &format!("{}?timeout=1s", admit::PATH),
            &envelope("8d0f3a1e", "acme"),
        ),
    )
    .await
    .expect("an answer before the chain's own 10 seconds")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callers_deadline_cuts_the_chain_answered_as_the_budget_spent_naming_the_hook() {
    let patient = "execution: {admission: {timeout: 10s, chain_timeout: 10s, \
                   breaker: {failures: 1, backoff: 10m, max_backoff: 10m}}}";
    let silent = FakeHook::pending("silent").shared();
    let running = serve_admission(patient, vec![silent.clone()], |_, _| {}).await;

    let first = ask_within_a_second(&running).await;
    let second = ask_within_a_second(&running).await;

    for answer in [&first, &second] {
        answer.assert_error(
            StatusCode::SERVICE_UNAVAILABLE,
            "admission hook unavailable: silent: cut after ",
        );
        answer.assert_error(
            StatusCode::SERVICE_UNAVAILABLE,
            "the chain budget was spent",
        );
        assert_eq!(answer.json()["uid"], "8d0f3a1e");
    }
    // A breaker that counted the first cut (one failure opens it) would have skipped the hook.
    assert_eq!(silent.seen().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_api_version_is_answered_400_naming_the_field() {
    let running = serve_admission(&config(), Vec::new(), |_, _| {}).await;
    let mut body = envelope("8d0f3a1e", "acme");
    body["api_version"] = json!("dexaflow.io/admission/v2");

    let answer = running.client.post_json(admit::PATH, &body).await;

    answer.assert_error(StatusCode::BAD_REQUEST, "api_version: expected");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_field_is_answered_400_naming_it() {
    let running = serve_admission(&config(), Vec::new(), |_, _| {}).await;
    let mut body = envelope("8d0f3a1e", "acme");
    body["colour"] = json!("blue");

    let answer = running.client.post_json(admit::PATH, &body).await;

    answer.assert_error(StatusCode::BAD_REQUEST, "unknown field `colour`");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_value_of_the_wrong_type_is_answered_400_naming_its_field_and_no_hook_runs() {
    let recorded = FakeHook::admitting("recorded").shared();
    let running = serve_admission(&config(), vec![recorded.clone()], |_, _| {}).await;
    let mut body = envelope("8d0f3a1e", "acme");
    body["execution"]["node_selector"] = json!({"zone": 7});

    let answer = running.client.post_json(admit::PATH, &body).await;

    answer.assert_error(
        StatusCode::BAD_REQUEST,
        "execution.node_selector.zone: invalid type: integer `7`",
    );
    assert!(recorded.seen().is_empty(), "a hook ran on an invalid body");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_sent_as_an_array_is_answered_400_naming_its_field_and_no_hook_runs() {
    let recorded = FakeHook::admitting("recorded").shared();
    let running = serve_admission(&config(), vec![recorded.clone()], |_, _| {}).await;
    let mut body = envelope("8d0f3a1e", "acme");
    // The resources' two fields in order, as serde's derived decoder of a struct would take
    // them and Go's decoder refuses them.
    body["resources"] = json!([{}, {}]);

    let answer = running.client.post_json(admit::PATH, &body).await;

    answer.assert_error(
        StatusCode::BAD_REQUEST,
        "resources: invalid type: sequence, expected struct Resources",
    );
    assert!(recorded.seen().is_empty(), "a hook ran on an invalid body");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_repeated_in_a_map_is_answered_400_naming_it_and_no_hook_runs() {
    let recorded = FakeHook::admitting("recorded").shared();
    let running = serve_admission(&config(), vec![recorded.clone()], |_, _| {}).await;
    let text = serde_json::to_string(&envelope("8d0f3a1e", "acme")).expect("JSON");
    let labels = r#""labels":{}"#;
    assert!(text.contains(labels), "{text}");
    let repeated = text.replace(
        labels,
        r#""labels":{"dexaflow.io/tenant":"acme","dexaflow.io/tenant":"umbrella"}"#,
    );

    let answer = running.client.post(admit::PATH, repeated).await;

    answer.assert_error(
        StatusCode::BAD_REQUEST,
        r#"duplicate key "dexaflow.io/tenant""#,
    );
    assert!(recorded.seen().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn body_over_the_cap_is_answered_413() {
    let running = serve_admission(&config(), Vec::new(), |settings, _| {
        settings.max_body_bytes = 64;
    })
    .await;

    let answer = ask(&running, "acme").await;

    answer.assert_error(StatusCode::PAYLOAD_TOO_LARGE, "larger than 64 bytes");
}

/// A server whose `/tasks/admit` takes the bearer token `s3cret-token`, with a hook that
/// records every call.
async fn serve_with_token() -> (Running, Arc<FakeHook>) {
    let recorded = FakeHook::admitting("recorded").shared();
    let running = serve_admission(&config(), vec![recorded.clone()], |settings, dir| {
        let path = dir.join("token");
        std::fs::write(&path, "s3cret-token\n").expect("write the token");
        settings.bearer_token_file = Some(path);
    })
    .await;
    (running, recorded)
}

async fn ask_with(running: &Running, authorization: Option<&str>) -> serve_support::Answer {
    let mut request = http::Request::post(admit::PATH)
        .header(http::header::HOST, "localhost")
        .header(http::header::CONTENT_TYPE, "application/json");
    if let Some(authorization) = authorization {
        request = request.header(http::header::AUTHORIZATION, authorization);
    }
    let body = serde_json::to_vec(&envelope("8d0f3a1e", "acme")).expect("JSON");
    running
        .client
        .send(
            request
                .body(Full::new(Bytes::from(body)))
                .expect("a request"),
        )
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn caller_without_the_bearer_token_is_answered_401_and_no_hook_runs() {
    let (running, recorded) = serve_with_token().await;

    let answer = ask_with(&running, None).await;

    answer.assert_error(StatusCode::UNAUTHORIZED, "bearer token is required");
    assert_eq!(answer.headers[http::header::WWW_AUTHENTICATE], "Bearer");
    assert!(recorded.seen().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn caller_with_a_wrong_token_is_answered_401_and_neither_token_is_echoed() {
    let (running, recorded) = serve_with_token().await;

    let answer = ask_with(&running, Some("Bearer guessed-token")).await;

    answer.assert_error(StatusCode::UNAUTHORIZED, "bearer token is required");
    let text = String::from_utf8_lossy(&answer.body);
    assert!(!text.contains("guessed-token"), "{text}");
    assert!(!text.contains("s3cret"), "{text}");
    assert!(recorded.seen().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn caller_with_the_bearer_token_is_answered() {
    let (running, recorded) = serve_with_token().await;

    let answer = ask_with(&running, Some("Bearer s3cret-token")).await;

    assert_eq!(decision(&answer), Decision::Admit);
    assert_eq!(recorded.seen().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bearer_scheme_is_accepted_in_any_case() {
    let (running, recorded) = serve_with_token().await;

    for authorization in ["bearer s3cret-token", "BEARER s3cret-token"] {
        let answer = ask_with(&running, Some(authorization)).await;
        assert_eq!(answer.status, StatusCode::OK, "{authorization}");
        assert_eq!(decision(&answer), Decision::Admit, "{authorization}");
    }
    assert_eq!(recorded.seen().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_services_take_no_bearer_token_when_one_is_set() {
    let (running, _) = serve_with_token().await;
    let dag = json!({"api_version": "dexaflow.io/admission/v1", "uid": "1",
        "dag": {"dag_id": "etl", "tasks": [{"task_id": "a"}]}});

    let answer = running.client.post_json("/dags/validate", &dag).await;

    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
    assert_eq!(answer.json()["allowed"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_without_auth_refuses_to_start_admit_on_an_address_other_than_loopback() {
    let dir = tempfile::tempdir().expect("a directory");
    let files = Authority::new().issue().write_to(dir.path());
    let path = dir.path().join("config.yaml");
    // Never bound: the check comes first. Read by the config reader, so that the error names
    // the keys the operator wrote.
    std::fs::write(
        &path,
        format!(
            "server:\n  listen: 0.0.0.0:0\n  tls: {{cert_file: {}, key_file: {}}}\n",
            files.cert_file.display(),
            files.key_file.display()
        ),
    )
    .expect("write the config");
    let (_, settings) =
        Config::load_with_server(&path, Vec::<(String, String)>::new()).expect("a valid config");
    let error = admission(&config(), Vec::new())(Server::builder(settings))
        .enabled([admit::PATH])
        .start()
        .await
        .expect_err("no auth on 0.0.0.0");

    assert!(
        matches!(error, ServeError::Unauthenticated { .. }),
        "{error}"
    );
    assert_eq!(
        error.to_string(),
        "/tasks/admit would answer any caller on 0.0.0.0:0: set server.auth.bearer_token_file or \
         server.tls.client_ca_file, or make server.listen a loopback address"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admit_outcomes_are_counted_by_service_including_held_and_unavailable() {
    let recorder = recorder();
    let running = start_with(
        |_, _| {},
        admission(
            &config(),
            vec![FakeHook::failing("flaky", HookError::Failed("down".into())).shared()],
        ),
        Some(&recorder),
    )
    .await;

    ask(&running, "finance").await;
    ask(&running, "acme").await;

    let scrape = recorder.handle().render();
    let count = |outcome: &str| {
        sample(
            &scrape,
            &format!(
                "dexaflow_server_requests_total{{service=\"/tasks/admit\",outcome=\"{outcome}\"}}"
            ),
        )
    };
    assert_eq!(count("held"), Some(1.0), "{scrape}");
    assert_eq!(count("unavailable"), Some(1.0), "{scrape}");
    assert_eq!(count("allowed"), Some(0.0), "{scrape}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn breaker_opened_by_failures_skips_the_hook_and_is_answered_503() {
    let config = "execution: {admission: {breaker: {failures: 2, backoff: 10m, max_backoff: 10m}}}";
    let broken = FakeHook::failing("quota", HookError::Failed("down".into())).shared();
    let running = serve_admission(config, vec![broken.clone()], |_, _| {}).await;

    ask(&running, "acme").await;
    ask(&running, "acme").await;
    let answer = ask(&running, "acme").await;

    answer.assert_error(
        StatusCode::SERVICE_UNAVAILABLE,
        "admission hook unavailable: quota: skipped while its breaker is open",
    );
    assert_eq!(broken.seen().len(), 2);
}
