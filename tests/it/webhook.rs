//! The webhook hook (ADR 0100 §8) against a real HTTPS server on 127.0.0.1, through the
//! dispatcher: what each call sends, every way an answer or a connection can be wrong (each a
//! hook failure that leaves the attempt unavailable, naming the webhook, with no token), the
//! timeout and the breaker, the bearer token and its rotation, TLS trust and mutual TLS, and the
//! service-account rule.
//!
//! The sockets are real, so the clock is real: tests assert outcomes, never durations.

use crate::fakes;
use crate::webhook_fixture;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use dexaflow_admission::admission::{API_VERSION, Changes, Decision, Hook, Request};
use dexaflow_admission::dispatch::task::State;
use dexaflow_admission::dispatch::{Settings, TaskInstance};
use dexaflow_admission::events::BreakerState;
use dexaflow_admission::hooks::webhook::CONNECTION_LANES;
use dexaflow_admission::hooks::{Webhook, WebhookSpec};
use dexaflow_admission::supervise::{self, HookSettings};
use fakes::{Harness, settings, start, supervision, task};
use hyper::{StatusCode, Version};
use serde_json::json;
use webhook_fixture::{Certs, Handler, Reply, Seen, Server, Transport, deciding, scripted};

/// The token the strictness tests send, which no message may show.
const TOKEN: &str = "s3cr3t-token-value";

fn hook(spec: &WebhookSpec) -> Arc<dyn Hook> {
    Arc::new(Webhook::new(spec).expect("a valid webhook"))
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("writes the file");
    path
}

/// Offers the task `load` once, ticks once and returns its task instance.
async fn dispatch_once(harness: &mut Harness) -> TaskInstance {
    harness.dispatch(task("load")).await
}

/// Ticks once, waits for the offer to settle and returns the task `load`.
async fn tick(harness: &mut Harness) -> TaskInstance {
    harness.tick(&task("load").key).await
}

/// Dispatches one attempt through a webhook (with a bearer token) whose server answers with
/// `handler`, and checks that the attempt is unavailable because of the webhook: waiting, the
/// cause naming the webhook and containing `cause`, no token, no executor call, no secret shown.
async fn assert_unavailable(handler: Handler, cause: &str) {
    let certs = Certs::new();
    let server = Server::start(&certs, Transport::Tls, handler);
    let spec = WebhookSpec {
        bearer_token_file: Some(write(certs.dir.path(), "token", TOKEN)),
        ..certs.webhook(&server.url())
    };
    assert_unavailable_through(&spec, cause).await;
    assert!(!server.seen().is_empty(), "the server was asked");
}

async fn assert_unavailable_through(spec: &WebhookSpec, cause: &str) {
    let mut harness = start(settings(), supervision(), vec![hook(spec)]);

    let row = dispatch_once(&mut harness).await;

    let reason = row.failure_reason.as_deref().unwrap_or_default().to_owned();
    assert_eq!(row.state, State::Scheduled, "{reason}");
    assert!(
        reason.starts_with("admission hook unavailable: webhook: "),
        "{reason}"
    );
    assert!(reason.contains(cause), "{reason:?} should say {cause:?}");
    assert!(!reason.contains(TOKEN), "{reason}");
    assert_eq!(row.dispatch_attempts, 0);
    assert!(!row.token_minted);
    assert!(harness.minter.minted().is_empty());
    assert!(harness.executor.calls().is_empty());
    assert_eq!(
        harness.gate(0).consecutive_failures(),
        1,
        "the breaker counts it"
    );
}

/// A 200 `application/json` answer of `body`.
fn raw_json(body: serde_json::Value) -> Handler {
    Arc::new(move |_: &Seen| Reply::json(&body))
}

/// A valid answer to the request, as JSON, changed by `edit`.
fn edited_answer(decision: Decision, edit: fn(&mut serde_json::Value)) -> Handler {
    Arc::new(move |seen: &Seen| {
        let mut answer = serde_json::to_value(dexaflow_admission::admission::AnswerEnvelope::new(
            seen.envelope().uid,
            decision.clone(),
        ))
        .expect("encodes");
        edit(&mut answer);
        Reply::json(answer)
    })
}

fn raw(status: StatusCode, content_type: Option<&'static str>, body: &[u8]) -> Handler {
    let body = body.to_vec();
    Arc::new(move |_: &Seen| Reply::Raw {
        status,
        content_type,
        headers: Vec::new(),
        body: body.clone(),
    })
}

/// The test supervision, with the webhook's own settings `own`.
fn with_own(own: HookSettings) -> supervise::Settings {
    let mut supervision = supervision();
    supervision.hooks.insert("webhook".to_owned(), own);
    supervision
}

fn admitting() -> Handler {
    deciding(|_| Decision::Admit)
}

#[actix::test]
async fn call_is_a_post_of_the_request_envelope_with_the_deadline_in_the_url() {
    let certs = Certs::new();
    let server = Server::start(&certs, Transport::Tls, admitting());
    let mut harness = start(
        settings(),
        supervision(),
        vec![hook(&certs.webhook(&server.url()))],
    );

    let row = dispatch_once(&mut harness).await;

    assert_eq!(row.state, State::Queued, "{:?}", row.failure_reason);
    let seen = server.seen();
    assert_eq!(seen.len(), 1);
    let call = &seen[0];
    assert_eq!(call.method, hyper::Method::POST);
    assert_eq!(call.uri.path(), "/admit");
    assert_eq!(
        call.uri.query(),
        Some("timeout=500ms"),
        "supervision's 500ms"
    );
    assert_eq!(call.headers["content-type"], "application/json");
    assert_eq!(call.headers["accept"], "application/json");
    assert!(
        call.headers.get("authorization").is_none(),
        "no token file, no header"
    );
    let envelope = call.envelope();
    assert_eq!(envelope.request.api_version, API_VERSION);
    assert_eq!(envelope.request.tenant, "acme");
    assert_eq!(envelope.request.task_id, "load");
    assert_eq!(envelope.uid.len(), 36);
}

#[actix::test]
async fn each_call_has_a_fresh_uid() {
    let certs = Certs::new();
    let server = Server::start(&certs, Transport::Tls, admitting());
    let webhook = Webhook::new(&certs.webhook(&server.url())).expect("valid");
    let request = Request::new("acme", "etl", "load");

    for _ in 0..3 {
        assert_eq!(webhook.admit(&request).await, Ok(Decision::Admit));
    }

    let mut uids: Vec<String> = server
        .seen()
        .iter()
        .map(|seen| seen.envelope().uid)
        .collect();
    uids.sort();
    uids.dedup();
    assert_eq!(uids.len(), 3);
}

#[actix::test]
async fn call_outside_supervision_sends_no_deadline() {
    let certs = Certs::new();
    let server = Server::start(&certs, Transport::Tls, admitting());
    let webhook = Webhook::new(&certs.webhook(&server.url())).expect("valid");

    let decision = webhook.admit(&Request::new("acme", "etl", "load")).await;

    assert_eq!(decision, Ok(Decision::Admit));
    assert_eq!(server.seen()[0].uri.query(), None);
}

#[actix::test]
async fn hook_own_timeout_is_the_deadline_sent_and_the_one_that_ends_a_slow_call() {
    let certs = Certs::new();
    let server = Server::start(&certs, Transport::Tls, Arc::new(|_: &Seen| Reply::Never));
    let supervision = with_own(HookSettings {
        timeout: Some(Duration::from_millis(150)),
        fail_open: None,
    });
    let mut harness = start(
        settings(),
        supervision,
        vec![hook(&certs.webhook(&server.url()))],
    );

    let row = dispatch_once(&mut harness).await;

    assert_eq!(
        row.failure_reason.as_deref(),
        Some("admission hook unavailable: webhook: timed out after 150ms")
    );
    assert_eq!(server.seen()[0].uri.query(), Some("timeout=150ms"));
    assert!(!row.token_minted);
}

#[actix::test]
async fn calls_share_one_kept_alive_connection() {
    let certs = Certs::new();
    let server = Server::start(&certs, Transport::Tls, admitting());
    let webhook = Webhook::new(&certs.webhook(&server.url())).expect("valid");
    let request = Request::new("acme", "etl", "load");

    for _ in 0..5 {
        assert_eq!(webhook.admit(&request).await, Ok(Decision::Admit));
    }

    assert_eq!(server.seen().len(), 5);
    assert_eq!(server.connections(), 1);
    assert!(server.seen().iter().all(|seen| seen.connection == 0));
}

#[actix::test]
async fn overlapping_calls_spread_over_one_http2_connection_per_lane() {
    let certs = Certs::new();
    let server = Server::start(&certs, Transport::Tls, admitting());
    let webhook = Webhook::new(&certs.webhook(&server.url())).expect("valid");
    let request = Request::new("acme", "etl", "load");
    let call = || webhook.admit(&request);

    // Twice as many calls as lanes, all started before any is answered.
    let decisions = tokio::join!(
        call(),
        call(),
        call(),
        call(),
        call(),
        call(),
        call(),
        call()
    );

    let decisions = <[_; 8]>::from(decisions);
    assert_eq!(decisions.len(), 2 * CONNECTION_LANES);
    assert!(
        decisions
            .iter()
            .all(|decision| *decision == Ok(Decision::Admit))
    );
    let seen = server.seen();
    assert!(seen.iter().all(|seen| seen.version == Version::HTTP_2));
    let used: BTreeSet<usize> = seen.iter().map(|seen| seen.connection).collect();
    assert_eq!(used.len(), CONNECTION_LANES, "{used:?}");
    for connection in used {
        let carried = seen.iter().filter(|seen| seen.connection == connection);
        assert_eq!(carried.count(), 2, "connection {connection}");
    }
}

#[actix::test]
async fn http2_is_used_where_the_server_offers_it() {
    let certs = Certs::new();
    let server = Server::start(&certs, Transport::Tls, admitting());
    let webhook = Webhook::new(&certs.webhook(&server.url())).expect("valid");

    let decision = webhook.admit(&Request::new("acme", "etl", "load")).await;

    assert_eq!(decision, Ok(Decision::Admit));
    assert_eq!(server.seen()[0].version, Version::HTTP_2);
}

#[actix::test]
async fn plain_http_to_loopback_works() {
    let certs = Certs::new();
    let server = Server::start(&certs, Transport::Plain, admitting());
    let webhook = Webhook::new(&WebhookSpec::new("webhook", server.url())).expect("loopback");

    let decision = webhook.admit(&Request::new("acme", "etl", "load")).await;

    assert_eq!(decision, Ok(Decision::Admit));
    assert_eq!(server.seen()[0].version, Version::HTTP_11);
}

#[actix::test]
async fn json_content_type_with_a_charset_is_accepted() {
    let certs = Certs::new();
    let server = Server::start(
        &certs,
        Transport::Tls,
        Arc::new(|seen: &Seen| Reply::Raw {
            status: StatusCode::OK,
            content_type: Some("application/json; charset=utf-8"),
            headers: Vec::new(),
            body: serde_json::to_vec(&dexaflow_admission::admission::AnswerEnvelope::new(
                seen.envelope().uid,
                Decision::Admit,
            ))
            .expect("encodes"),
        }),
    );
    let webhook = Webhook::new(&certs.webhook(&server.url())).expect("valid");

    let decision = webhook.admit(&Request::new("acme", "etl", "load")).await;

    assert_eq!(decision, Ok(Decision::Admit));
}

#[actix::test]
async fn redirect_is_not_followed_and_leaves_the_attempt_unavailable() {
    let certs = Certs::new();
    let elsewhere = Server::start(&certs, Transport::Tls, admitting());
    let location = elsewhere.url();
    let handler: Handler = Arc::new(move |_: &Seen| Reply::Raw {
        status: StatusCode::TEMPORARY_REDIRECT,
        content_type: None,
        headers: vec![("location", location.clone())],
        body: Vec::new(),
    });

    assert_unavailable(
        handler,
        "answered 307 Temporary Redirect, a redirect, which is not followed",
    )
    .await;
    assert!(elsewhere.seen().is_empty(), "the redirect was not followed");
}

#[actix::test]
async fn status_other_than_200_leaves_the_attempt_unavailable() {
    assert_unavailable(
        raw(
            StatusCode::SERVICE_UNAVAILABLE,
            Some("application/json"),
            b"{}",
        ),
        "answered 503 Service Unavailable, expected 200 OK",
    )
    .await;
}

#[actix::test]
async fn answer_over_64_kib_leaves_the_attempt_unavailable() {
    let body = vec![b' '; 64 * 1024 + 1];
    assert_unavailable(
        raw(StatusCode::OK, Some("application/json"), &body),
        "answer body is over 65536 bytes",
    )
    .await;
}

#[actix::test]
async fn reading_an_endless_answer_stops_at_the_cap() {
    assert_unavailable(
        Arc::new(|_: &Seen| Reply::Endless),
        "answer body is over 65536 bytes",
    )
    .await;
}

#[actix::test]
async fn body_that_is_not_json_leaves_the_attempt_unavailable() {
    assert_unavailable(
        raw(StatusCode::OK, Some("application/json"), b"<html>ok</html>"),
        "answer is not JSON",
    )
    .await;
}

#[actix::test]
async fn content_type_other_than_json_leaves_the_attempt_unavailable() {
    let handler: Handler = Arc::new(|seen: &Seen| Reply::Raw {
        status: StatusCode::OK,
        content_type: Some("text/plain"),
        headers: Vec::new(),
        body: serde_json::to_vec(&dexaflow_admission::admission::AnswerEnvelope::new(
            seen.envelope().uid,
            Decision::Admit,
        ))
        .expect("encodes"),
    });

    assert_unavailable(
        handler,
        r#"answer Content-Type is "text/plain", expected application/json"#,
    )
    .await;
}

#[actix::test]
async fn missing_content_type_leaves_the_attempt_unavailable() {
    assert_unavailable(
        raw(StatusCode::OK, None, b"{}"),
        "answer Content-Type is missing, expected application/json",
    )
    .await;
}

#[actix::test]
async fn answer_with_an_unknown_field_leaves_the_attempt_unavailable() {
    assert_unavailable(
        edited_answer(Decision::Admit, |answer| answer["allowed"] = json!(true)),
        "answer is not a dexaflow.io/admission/v1 answer: unknown field `allowed`",
    )
    .await;
}

#[actix::test]
async fn answer_that_is_an_array_of_an_admit_s_fields_leaves_the_attempt_unavailable() {
    // The fields of a valid admit, in order, with the request's own uid: serde's derived
    // decoder of a struct would take them.
    let handler: Handler =
        Arc::new(|seen: &Seen| Reply::json(json!([API_VERSION, seen.envelope().uid, "admit"])));

    assert_unavailable(
        handler,
        "answer is not a dexaflow.io/admission/v1 answer: invalid type: sequence, expected struct AnswerEnvelope",
    )
    .await;
}

#[actix::test]
async fn answer_whose_changes_are_an_array_leaves_the_attempt_unavailable() {
    // A node selector as the first of the changes' fields: serde's derived decoder of a struct
    // would take it as the changes, Go's refuses it.
    let changes = Changes {
        node_selector: [("pool".to_owned(), "gpu".to_owned())].into(),
        ..Changes::default()
    };
    assert_unavailable(
        edited_answer(Decision::AdmitWith(Box::new(changes)), |answer| {
            answer["changes"] = json!([{"pool": "gpu"}]);
        }),
        "answer is not a dexaflow.io/admission/v1 answer: invalid type: sequence, expected struct Changes",
    )
    .await;
}

#[actix::test]
async fn answer_of_another_api_version_leaves_the_attempt_unavailable() {
    assert_unavailable(
        edited_answer(Decision::Admit, |answer| {
            answer["api_version"] = json!("dexaflow.io/admission/v2")
        }),
        r#"answer: api_version is "dexaflow.io/admission/v2", expected "dexaflow.io/admission/v1""#,
    )
    .await;
}

#[actix::test]
async fn answer_without_a_uid_leaves_the_attempt_unavailable() {
    assert_unavailable(
        raw_json(json!({"api_version": API_VERSION, "decision": "admit"})),
        "missing field `uid`",
    )
    .await;
}

#[actix::test]
async fn answer_with_another_uid_leaves_the_attempt_unavailable() {
    assert_unavailable(
        edited_answer(Decision::Admit, |answer| {
            answer["uid"] = json!("not-the-one")
        }),
        r#"answer: uid is not the request's "#,
    )
    .await;
}

#[actix::test]
async fn a_long_wrong_uid_is_shown_after_the_requests_own_which_is_never_cut() {
    assert_unavailable(
        edited_answer(Decision::Admit, |answer| {
            answer["uid"] = json!("x".repeat(2000))
        }),
        r#"": got "xxxxxxxx"#,
    )
    .await;
}

#[actix::test]
async fn hold_without_a_reason_leaves_the_attempt_unavailable() {
    assert_unavailable(
        edited_answer(Decision::Hold("x".into()), |answer| {
            answer.as_object_mut().expect("object").remove("reason");
        }),
        "answer: decision hold needs a reason that is not blank",
    )
    .await;
}

#[actix::test]
async fn refuse_whose_reason_is_only_control_and_format_characters_leaves_the_attempt_unavailable()
{
    assert_unavailable(
        edited_answer(Decision::Refuse("x".into()), |answer| {
            answer["reason"] = json!("\u{7}\u{1b}\u{200b}\u{202e} \n");
        }),
        "answer: decision refuse needs a reason that is not blank",
    )
    .await;
}

#[actix::test]
async fn admit_with_a_reason_leaves_the_attempt_unavailable() {
    assert_unavailable(
        edited_answer(Decision::Admit, |answer| answer["reason"] = json!("fine")),
        "answer: decision admit takes no reason",
    )
    .await;
}

#[actix::test]
async fn admit_with_without_changes_leaves_the_attempt_unavailable() {
    assert_unavailable(
        edited_answer(Decision::AdmitWith(Box::default()), |answer| {
            answer.as_object_mut().expect("object").remove("changes");
        }),
        "answer: decision admit_with needs changes",
    )
    .await;
}

#[actix::test]
async fn refuse_with_changes_leaves_the_attempt_unavailable() {
    assert_unavailable(
        edited_answer(Decision::Refuse("no".into()), |answer| {
            answer["changes"] = json!({})
        }),
        "answer: decision refuse takes no changes",
    )
    .await;
}

#[actix::test]
async fn connection_failure_leaves_the_attempt_unavailable() {
    let certs = Certs::new();
    // A port that was free a moment ago and has no listener now.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("a free port")
        .local_addr()
        .expect("bound");
    let spec = certs.webhook(&format!("https://{closed}/admit"));

    assert_unavailable_through(&spec, "request failed: client error (Connect)").await;
}

#[actix::test]
async fn untrusted_certificate_fails_while_the_ca_bundle_makes_it_pass() {
    let certs = Certs::new();
    let server = Server::start(&certs, Transport::Tls, admitting());
    let request = Request::new("acme", "etl", "load");
    let system_roots = WebhookSpec::new("webhook", server.url());
    let other_ca = WebhookSpec {
        ca_bundle: Some(certs.other_ca.clone()),
        ..WebhookSpec::new("webhook", server.url())
    };

    for untrusted in [&system_roots, &other_ca] {
        assert_unavailable_through(untrusted, "invalid peer certificate").await;
    }
    assert!(
        server.seen().is_empty(),
        "no request went out over an untrusted connection"
    );

    let trusted = Webhook::new(&certs.webhook(&server.url())).expect("valid");
    assert_eq!(trusted.admit(&request).await, Ok(Decision::Admit));
    assert_eq!(server.seen().len(), 1);
}

#[actix::test]
async fn mutual_tls_presents_the_client_certificate_and_fails_without_one() {
    let certs = Certs::new();
    let server = Server::start(&certs, Transport::MutualTls, admitting());
    let request = Request::new("acme", "etl", "load");

    assert_unavailable_through(&certs.webhook(&server.url()), "request failed").await;
    assert!(server.seen().is_empty());

    let with_certificate = WebhookSpec {
        client_cert: Some(certs.client_cert.clone()),
        client_key: Some(certs.client_key.clone()),
        ..certs.webhook(&server.url())
    };
    let webhook = Webhook::new(&with_certificate).expect("valid");
    assert_eq!(webhook.admit(&request).await, Ok(Decision::Admit));
    assert_eq!(server.seen().len(), 1);
}

#[actix::test]
async fn a_bearer_token_the_server_echoes_in_its_reason_or_answer_is_never_shown() {
    let echo_in_reason: Handler = Arc::new(|seen: &Seen| {
        let presented = seen.headers["authorization"]
            .to_str()
            .expect("ASCII")
            .to_owned();
        Reply::decision(seen, Decision::Refuse(format!("you presented {presented}")))
    });
    let echo_as_uid: Handler = Arc::new(|seen: &Seen| {
        let presented = seen.headers["authorization"]
            .to_str()
            .expect("ASCII")
            .to_owned();
        Reply::json(json!({"api_version": API_VERSION, "uid": presented, "decision": "admit"}))
    });
    for (handler, shown) in [
        (echo_in_reason, "you presented Bearer <bearer token>"),
        (echo_as_uid, "got \"Bearer <bearer token>\""),
    ] {
        let certs = Certs::new();
        let server = Server::start(&certs, Transport::Tls, handler);
        let spec = WebhookSpec {
            bearer_token_file: Some(write(certs.dir.path(), "token", TOKEN)),
            ..certs.webhook(&server.url())
        };
        let webhook = Webhook::new(&spec).expect("valid");

        let said = match webhook.admit(&Request::new("acme", "etl", "load")).await {
            Ok(Decision::Refuse(reason)) => reason,
            Err(dexaflow_admission::admission::HookError::Failed(error)) => error,
            other => panic!("expected a refusal or a failure, got {other:?}"),
        };

        assert!(said.contains(shown), "{said}");
        assert!(!said.contains(TOKEN), "{said}");
        assert_eq!(server.seen().len(), 1, "the server was asked once");
    }
}

#[actix::test]
async fn bearer_token_is_sent_trimmed_and_a_rotated_file_is_picked_up() {
    let certs = Certs::new();
    let server = Server::start(&certs, Transport::Tls, admitting());
    let token_file = write(certs.dir.path(), "token", "  first-token\n");
    let spec = WebhookSpec {
        bearer_token_file: Some(token_file.clone()),
        ..certs.webhook(&server.url())
    };
    let webhook = Webhook::new(&spec).expect("valid");
    let request = Request::new("acme", "etl", "load");
    let authorization = |seen: &Seen| {
        seen.headers
            .get("authorization")
            .map(|value| value.to_str().expect("ASCII").to_owned())
    };

    assert_eq!(webhook.admit(&request).await, Ok(Decision::Admit));
    assert_eq!(
        authorization(&server.seen()[0]).as_deref(),
        Some("Bearer first-token")
    );

    // Rotate as Kubernetes does: a new file moved over the old one at once.
    let staged = write(certs.dir.path(), "token.new", "second-token\n");
    std::fs::rename(&staged, &token_file).expect("renames");
    let mut rotated = false;
    for _ in 0..50 {
        assert_eq!(webhook.admit(&request).await, Ok(Decision::Admit));
        let last = server.seen().last().cloned().expect("a request");
        if authorization(&last).as_deref() == Some("Bearer second-token") {
            rotated = true;
            break;
        }
        assert_eq!(authorization(&last).as_deref(), Some("Bearer first-token"));
    }
    assert!(rotated, "the rotated token was never sent");
}

#[actix::test]
async fn unreadable_token_file_at_call_time_fails_the_call_without_showing_the_token() {
    let certs = Certs::new();
    let server = Server::start(&certs, Transport::Tls, admitting());
    let token_file = write(certs.dir.path(), "token", TOKEN);
    let spec = WebhookSpec {
        bearer_token_file: Some(token_file.clone()),
        ..certs.webhook(&server.url())
    };
    let built = hook(&spec);
    std::fs::remove_file(&token_file).expect("removes the token");
    let mut harness = start(settings(), supervision(), vec![built]);

    let row = dispatch_once(&mut harness).await;

    let reason = row.failure_reason.as_deref().unwrap_or_default().to_owned();
    assert!(
        reason.starts_with(&format!(
            "admission hook unavailable: webhook: bearer_token_file {}: ",
            token_file.display()
        )),
        "{reason}"
    );
    assert!(!reason.contains(TOKEN));
    assert!(server.seen().is_empty(), "no call without its token");
}

#[actix::test]
async fn server_that_never_answers_hits_the_timeout_and_then_opens_the_breaker() {
    let certs = Certs::new();
    let server = Server::start(&certs, Transport::Tls, Arc::new(|_: &Seen| Reply::Never));
    let supervision = supervise::Settings {
        timeout: Duration::from_millis(100),
        breaker: supervise::BreakerSettings {
            failures: 2,
            backoff: Duration::from_secs(3600),
            max_backoff: Duration::from_secs(3600),
            jitter: 0.0,
        },
        ..supervision()
    };
    let mut harness = start(
        settings(),
        supervision,
        vec![hook(&certs.webhook(&server.url()))],
    );

    let first = dispatch_once(&mut harness).await;
    let second = tick(&mut harness).await;
    let third = tick(&mut harness).await;

    let timed_out = "admission hook unavailable: webhook: timed out after 100ms";
    assert_eq!(first.failure_reason.as_deref(), Some(timed_out));
    assert_eq!(second.failure_reason.as_deref(), Some(timed_out));
    // The open breaker skips the call, but the attempt keeps the first cause (issue 17).
    assert_eq!(third.failure_reason.as_deref(), Some(timed_out));
    assert_eq!(harness.gate(0).state(), BreakerState::Open);
    assert_eq!(
        server.seen().len(),
        2,
        "the open breaker did not call the server"
    );
    assert!(!third.token_minted);
    assert!(harness.executor.calls().is_empty());
}

#[actix::test]
async fn webhook_failing_open_by_its_own_setting_admits_unchanged() {
    let certs = Certs::new();
    let server = Server::start(
        &certs,
        Transport::Tls,
        raw(StatusCode::INTERNAL_SERVER_ERROR, None, b""),
    );
    let supervision = with_own(HookSettings {
        timeout: None,
        fail_open: Some(true),
    });
    let mut harness = start(
        settings(),
        supervision,
        vec![hook(&certs.webhook(&server.url()))],
    );

    let row = dispatch_once(&mut harness).await;

    assert_eq!(row.state, State::Queued, "{:?}", row.failure_reason);
    assert!(row.token_minted);
    assert_eq!(server.seen().len(), 1);
}

/// A webhook that sets `service_account` on every attempt, under `settings`.
async fn dispatch_with_service_account(
    settings: Settings,
    account: &str,
) -> (Harness, TaskInstance) {
    let certs = Certs::new();
    let account = account.to_owned();
    let server = Server::start(
        &certs,
        Transport::Tls,
        deciding(move |_| {
            Decision::AdmitWith(Box::new(Changes {
                service_account: Some(account.clone()),
                ..Changes::default()
            }))
        }),
    );
    let mut harness = start(
        settings,
        supervision(),
        vec![hook(&certs.webhook(&server.url()))],
    );
    let row = dispatch_once(&mut harness).await;
    assert_eq!(server.seen().len(), 1);
    (harness, row)
}

#[actix::test]
async fn webhook_changing_the_service_account_without_an_allowlist_refuses_the_attempt() {
    let (harness, row) = dispatch_with_service_account(settings(), "cluster-admin").await;

    assert_eq!(row.state, State::Failed);
    assert_eq!(
        row.failure_reason.as_deref(),
        Some(
            "dispatch refused: admission: hook \"webhook\": service account \"cluster-admin\" may be set by a webhook only when execution_allowlist.service_accounts is set"
        )
    );
    assert!(!row.token_minted);
    assert!(harness.executor.calls().is_empty());
}

#[actix::test]
async fn webhook_may_change_the_service_account_to_one_the_allowlist_names() {
    let mut settings = settings();
    settings.allowlist.service_accounts = Some(["etl-runner".to_owned()].into());

    let (harness, row) = dispatch_with_service_account(settings, "etl-runner").await;

    assert_eq!(row.state, State::Queued, "{:?}", row.failure_reason);
    let execution = row.execution.expect("admitted with its execution fields");
    assert_eq!(execution.service_account, "etl-runner");
    assert!(row.token_minted);
    assert_eq!(harness.executor.calls().len(), 1);
}

#[actix::test]
async fn webhook_may_set_the_default_task_service_account_without_an_allowlist() {
    let (_, row) = dispatch_with_service_account(settings(), "dexaflow-task").await;

    assert_eq!(row.state, State::Queued, "{:?}", row.failure_reason);
    let execution = row.execution.expect("admitted with its execution fields");
    assert_eq!(execution.service_account, "dexaflow-task");
}

#[actix::test]
async fn held_then_admitted_attempt_is_offered_again_without_spending_dispatch_attempts() {
    let certs = Certs::new();
    let server = Server::start(
        &certs,
        Transport::Tls,
        scripted(
            vec![deciding(|_| {
                Decision::Hold("budget resets at 18:00".into())
            })],
            admitting(),
        ),
    );
    let mut harness = start(
        settings(),
        supervision(),
        vec![hook(&certs.webhook(&server.url()))],
    );

    let held = dispatch_once(&mut harness).await;
    let admitted = tick(&mut harness).await;

    assert_eq!(held.state, State::Scheduled);
    assert_eq!(
        held.failure_reason.as_deref(),
        Some("admission hold: budget resets at 18:00")
    );
    assert_eq!(held.dispatch_attempts, 0);
    assert!(!held.token_minted);
    assert_eq!(admitted.state, State::Queued);
    assert_eq!(
        admitted.waited_for.as_deref(),
        Some("admission hold: budget resets at 18:00")
    );
    assert_eq!(server.seen().len(), 2);
}
