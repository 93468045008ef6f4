//! The serve function's rules, each against a real HTTPS server on 127.0.0.1 and a real client.

use crate::serve_support;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use dexaflow_admission::events::RequestOutcome;
use dexaflow_admission::serve::{
    Answer, Handler, Kind, Ruling, ServerBuilder, Service, Unavailable,
};
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use serde::{Deserialize, Serialize};
use serde_json::json;
use serve_support::{
    Counted, RecordingEvents, eventually, recorder, sample, start, start_observed, start_with,
};
use tokio::time::Instant;

/// A DAG request as `/dags/validate` takes it: the smallest valid body of a built-in service.
fn dag_body() -> serde_json::Value {
    json!({
        "api_version": "dexaflow.io/admission/v1",
        "uid": "d-1",
        "dag": {"dag_id": "etl", "tasks": [{"task_id": "extract", "depends_on": []}]}
    })
}

fn request(
    method: Method,
    path: &str,
    content_type: Option<&str>,
    body: &str,
) -> Request<Full<Bytes>> {
    let mut builder = Request::builder()
        .method(method)
        .uri(path)
        .header(http::header::HOST, "localhost");
    if let Some(content_type) = content_type {
        builder = builder.header(http::header::CONTENT_TYPE, content_type);
    }
    builder
        .body(Full::new(Bytes::from(body.to_owned())))
        .expect("a request")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_method_other_than_post_is_answered_405_with_allow() {
    let running = start().await;
    let body = dag_body().to_string();
    let answer = running
        .client
        .send(request(
            Method::GET,
            "/dags/validate",
            Some("application/json"),
            &body,
        ))
        .await;
    assert_eq!(answer.status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(
        answer
            .headers
            .get(http::header::ALLOW)
            .map(|v| v.as_bytes()),
        Some(&b"POST"[..])
    );
    answer.assert_error(StatusCode::METHOD_NOT_ALLOWED, "POST");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_is_not_json_by_its_content_type_is_answered_415() {
    let running = start().await;
    let body = dag_body().to_string();
    for content_type in [Some("text/plain"), Some("application/jsonx"), None] {
        let answer = running
            .client
            .send(request(Method::POST, "/dags/validate", content_type, &body))
            .await;
        assert_eq!(
            answer.status,
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "{content_type:?}"
        );
        assert_eq!(answer.content_type(), "application/json");
        assert!(
            answer.json().get("allowed").is_none(),
            "no answer of the service"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_json_content_type_with_parameters_is_accepted() {
    let running = start().await;
    let answer = running
        .client
        .send(request(
            Method::POST,
            "/dags/validate",
            Some("Application/JSON; charset=utf-8"),
            &dag_body().to_string(),
        ))
        .await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.json()["allowed"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_tells_its_observer_each_answer_by_service_and_outcome_without_metrics() {
    let events = Arc::new(RecordingEvents::default());
    let running = start_observed(|_, _| {}, |registry| registry, events.clone()).await;

    let allowed = running
        .client
        .post_json("/dags/validate", &dag_body())
        .await;
    let invalid = running.client.post("/pods/mutate", "").await;
    let unknown = running
        .client
        .post_json("/widgets/validate", &dag_body())
        .await;

    assert_eq!(allowed.status, StatusCode::OK);
    assert_eq!(invalid.status, StatusCode::BAD_REQUEST);
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    // Told before the answer is sent: no wait needed.
    assert_eq!(
        events.answered(),
        [
            (
                "/dags/validate".to_owned(),
                RequestOutcome::Ruled(Ruling::Allowed)
            ),
            ("/pods/mutate".to_owned(), RequestOutcome::Invalid),
        ]
    );
    let counted = events.counted();
    assert_eq!(
        (
            counted.started,
            counted.abandoned,
            counted.not_found,
            counted.opened
        ),
        (2, 0, 1, 3),
        "a started request for each answered one, the unknown path apart: {counted:?}"
    );
    // The client opens a connection per request and closes it once answered.
    let closed = eventually("every connection closed", || async {
        let counted = events.counted();
        (counted.closed == 3).then_some(counted)
    })
    .await;
    assert_eq!(
        closed,
        Counted {
            closed: 3,
            ..counted
        }
    );
    assert!(events.reloads().is_empty(), "{:?}", events.reloads());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_body_is_answered_400() {
    let running = start().await;
    let answer = running.client.post("/dags/validate", "").await;
    answer.assert_error(StatusCode::BAD_REQUEST, "the body is empty");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_declared_over_the_cap_is_answered_413() {
    let running = start_with(|settings, _| settings.max_body_bytes = 64, |r| r, None).await;
    let mut body = dag_body();
    body["dag"]["dag_id"] = json!("x".repeat(100));
    let answer = running.client.post_json("/dags/validate", &body).await;
    assert_eq!(answer.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(answer.content_type(), "application/json");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_body_without_length_is_cut_at_the_cap_and_answered_413() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let running = start_with(|settings, _| settings.max_body_bytes = 1024, |r| r, None).await;
    let mut stream = running.client.connect().await;
    // Chunked, past the cap, and never finished: only a server that stops reading at the cap
    // can answer it.
    let chunk = format!("200\r\n{}\r\n", " ".repeat(0x200));
    let request = format!(
        "POST /dags/validate HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n{}",
        chunk.repeat(3)
    );
    stream.write_all(request.as_bytes()).await.expect("write");
    stream.flush().await.expect("flush");
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(30), stream.read_to_end(&mut answer)).await;
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 413 "), "{answer}");
    assert!(
        answer.contains("content-type: application/json"),
        "{answer}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_does_not_decode_strictly_is_answered_400_saying_what_was_wrong() {
    let running = start().await;
    let cases = [
        (json!({"api_version": "dexaflow.io/admission/v1", "uid": "u", "dag": {"dag_id": "d", "tasks": [], "owner": "x"}}).to_string(), "unknown field `owner`"),
        (json!({"api_version": "dexaflow.io/admission/v1", "uid": 7, "dag": {"dag_id": "d", "tasks": []}}).to_string(), "invalid type: integer `7`"),
        (format!("{} {{}}", dag_body()), "trailing characters"),
        (r#"{"api_version": "dexaflow.io/admission/v1", "uid": "a", "uid": "b", "dag": {"dag_id": "d", "tasks": []}}"#.to_owned(), "duplicate field `uid`"),
    ];
    for (body, wrong) in cases {
        let answer = running.client.post("/dags/validate", body.clone()).await;
        answer.assert_error(StatusCode::BAD_REQUEST, wrong);
        assert!(answer.json().get("uid").is_none());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dag_sent_as_an_array_of_its_fields_is_answered_400_and_not_judged() {
    let running = start().await;
    let body = json!({
        "api_version": "dexaflow.io/admission/v1",
        "uid": "u",
        "dag": ["etl", [["extract", []]]],
    });

    let answer = running.client.post_json("/dags/validate", &body).await;

    answer.assert_error(
        StatusCode::BAD_REQUEST,
        "dag: invalid type: sequence, expected struct",
    );
    assert!(answer.json().get("allowed").is_none(), "{}", answer.json());
    assert!(answer.json().get("uid").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_is_not_utf8_is_answered_400_saying_where() {
    let running = start().await;
    let mut body = dag_body().to_string().into_bytes();
    let at = body.len() - 3;
    body[at] = 0xff;
    let answer = running.client.post("/dags/validate", body).await;
    answer.assert_error(
        StatusCode::BAD_REQUEST,
        &format!("not UTF-8: invalid utf-8 sequence of 1 bytes from index {at}"),
    );
    assert!(answer.json().get("uid").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_parameter_that_is_no_duration_is_answered_400() {
    let running = start().await;
    let answer = running
        .client
        .post("/dags/validate?timeout=soon", dag_body().to_string())
        .await;
    answer.assert_error(StatusCode::BAD_REQUEST, "timeout: ");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zero_or_negative_timeout_is_answered_400_naming_the_parameter() {
    let running = start().await;
    for timeout in ["0", "0s", "-0", "-5s", "-1h2m0.5s"] {
        let answer = running
            .client
            .post(
                &format!("/dags/validate?timeout={timeout}"),
                dag_body().to_string(),
            )
            .await;
        answer.assert_error(
            StatusCode::BAD_REQUEST,
            "timeout: must be a positive duration",
        );
        assert!(answer.json().get("allowed").is_none(), "{timeout}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_in_go_syntax_is_taken_and_one_go_refuses_is_answered_400() {
    let running = start().await;
    // Each of these is a Go duration, encoded as a URL carries it: `+` is `%2B` (a bare `+` in a
    // query is a space, as Go decodes one), the micro signs are UTF-8 escapes.
    for timeout in [
        "10s",
        "1h2m0.5s",
        "1.5s",
        ".5s",
        "%2B3s",
        "2500000%C2%B5s",
        "2500000%CE%BCs",
    ] {
        let answer = running
            .client
            .post(
                &format!("/dags/validate?timeout={timeout}"),
                dag_body().to_string(),
            )
            .await;
        assert_eq!(
            answer.status,
            StatusCode::OK,
            "{timeout}: {:?}",
            answer.body
        );
        assert_eq!(answer.json()["allowed"], true, "{timeout}");
    }
    for timeout in [
        "1", ".", "-.", "1.5.5s", "1e3s", "%2B-1s", "1d", "10S", "%ZZs", "1%+1s", "+3s",
    ] {
        let answer = running
            .client
            .post(
                &format!("/dags/validate?timeout={timeout}"),
                dag_body().to_string(),
            )
            .await;
        answer.assert_error(StatusCode::BAD_REQUEST, "timeout: ");
        assert!(answer.json().get("allowed").is_none(), "{timeout}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn header_fields_over_the_cap_are_answered_431_with_a_json_body() {
    let running = start().await;
    let mut request = request(
        Method::POST,
        "/dags/validate",
        Some("application/json"),
        &dag_body().to_string(),
    );
    request.headers_mut().insert(
        "x-padding",
        http::HeaderValue::from_str(&"x".repeat(100 * 1024)).expect("a header value"),
    );

    let answer = running.client.send(request).await;

    answer.assert_error(
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
        "header fields are larger than 65536 bytes",
    );
    assert!(
        answer.json().get("allowed").is_none(),
        "the service never ran"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_request_line_is_answered_400_by_hyper_without_a_body() {
    let running = start().await;
    let answer =
        answer_to_head_alone(&running, "NOT A REQUEST LINE\r\nhost: localhost\r\n\r\n").await;
    // hyper answers a head it cannot parse itself, before any service: no hook gives it a body.
    assert!(
        answer.starts_with("HTTP/1.1 400 Bad Request\r\n"),
        "{answer}"
    );
    assert!(!answer.contains("application/json"), "{answer}");
    assert!(answer.ends_with("\r\n\r\n"), "no body: {answer}");
}

/// What the server writes on one connection for `head` (a request head with no body sent),
/// until it closes the connection.
async fn answer_to_head_alone(running: &serve_support::Running, head: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = running.client.connect().await;
    stream.write_all(head.as_bytes()).await.expect("write");
    stream.flush().await.expect("flush");
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(30), stream.read_to_end(&mut answer)).await;
    String::from_utf8_lossy(&answer).into_owned()
}

/// What a fresh server answers a POST to `/dags/validate` of `content_type` that declares
/// `length` bytes and waits for `100 Continue` before sending them: checked never to be the
/// go-ahead, and to close the connection (the body, never sent, cannot be drained).
async fn answer_to_a_client_waiting_for_the_go_ahead(content_type: &str, length: usize) -> String {
    let running = start().await;
    let answer = answer_to_head_alone(
        &running,
        &format!(
            "POST /dags/validate HTTP/1.1\r\nhost: localhost\r\ncontent-type: {content_type}\r\n\
             content-length: {length}\r\nexpect: 100-continue\r\n\r\n"
        ),
    )
    .await;
    assert!(!answer.contains("100 Continue"), "{answer}");
    assert!(answer.contains("connection: close\r\n"), "{answer}");
    answer
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_over_the_cap_that_waits_for_100_continue_is_answered_413_without_the_go_ahead() {
    let answer = answer_to_a_client_waiting_for_the_go_ahead("application/json", 20_000_000).await;
    assert!(
        answer.starts_with("HTTP/1.1 413 Payload Too Large\r\n"),
        "{answer}"
    );
    assert!(answer.ends_with("larger than 3145728 bytes\"}"), "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_of_the_wrong_type_that_waits_for_100_continue_is_answered_415_without_the_go_ahead()
{
    let answer = answer_to_a_client_waiting_for_the_go_ahead("text/plain", 2000).await;
    assert!(
        answer.starts_with("HTTP/1.1 415 Unsupported Media Type\r\n"),
        "{answer}"
    );
    assert!(answer.ends_with("application/json\"}"), "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_path_is_answered_404_and_counted() {
    let recorder = recorder();
    let running = start_with(|_, _| {}, |r| r, Some(&recorder)).await;
    let answer = running
        .client
        .post_json("/widgets/validate", &dag_body())
        .await;
    assert_eq!(answer.status, StatusCode::NOT_FOUND);
    assert_eq!(answer.content_type(), "application/json");
    let scrape = recorder.handle().render();
    assert_eq!(
        sample(
            &scrape,
            r#"dexaflow_server_requests_total{service="none",outcome="not_found"}"#
        ),
        Some(1.0)
    );
}

/// A service for the panic, deadline and patch rules: its request carries a uid and what to do.
#[derive(Debug, Clone, Copy)]
struct Misbehaving;

#[derive(Debug, Deserialize)]
struct Order {
    uid: String,
    act: String,
}

#[derive(Debug, Serialize)]
struct Done {
    uid: String,
}

impl Handler for Misbehaving {
    type Request = Order;
    type Response = Done;

    fn uid(order: &Order) -> &str {
        &order.uid
    }

    fn check(order: &Order) -> Result<(), String> {
        if order.act == "panic_checking" {
            panic!("the check broke on {}", order.uid);
        }
        Ok(())
    }

    fn handle(
        &self,
        order: Order,
        deadline: Instant,
    ) -> impl Future<Output = Result<Answer<Done>, Unavailable>> + Send {
        // Before the future exists: a handler's own code, run when it is called.
        if order.act == "panic_building" {
            panic!("the handler broke building its future for {}", order.uid);
        }
        async move {
            match order.act.as_str() {
                "panic" => panic!("the handler broke on {}", order.uid),
                "panic_after_waiting" => {
                    // Polled once, pending, then polled again: the panic comes on a later poll.
                    tokio::task::yield_now().await;
                    panic!("the handler broke after waiting on {}", order.uid);
                }
                "stall" => {
                    // Well past the deadline: only the serve function's deadline ends the wait.
                    tokio::time::sleep_until(deadline + Duration::from_secs(3600)).await;
                }
                _ => {}
            }
            Ok(Answer {
                ruling: if order.act == "patch" {
                    Ruling::Patched
                } else {
                    Ruling::Allowed
                },
                body: Done { uid: order.uid },
            })
        }
    }
}

fn with_misbehaving(builder: ServerBuilder) -> ServerBuilder {
    builder
        .service(Service::new("/test/mutate", Kind::Mutating, Misbehaving))
        .service(Service::new(
            "/test/validate",
            Kind::Validating,
            Misbehaving,
        ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_in_a_handler_is_answered_500_with_the_uid_and_counted() {
    let recorder = recorder();
    let running = start_with(|_, _| {}, with_misbehaving, Some(&recorder)).await;
    let answer = running
        .client
        .post_json("/test/mutate", &json!({"uid": "u-42", "act": "panic"}))
        .await;
    assert_eq!(answer.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(answer.content_type(), "application/json");
    assert_eq!(answer.json()["uid"], "u-42");
    // The server goes on answering.
    let next = running
        .client
        .post_json("/test/mutate", &json!({"uid": "u-43", "act": "answer"}))
        .await;
    assert_eq!(next.status, StatusCode::OK);
    let scrape = recorder.handle().render();
    assert_eq!(
        sample(
            &scrape,
            r#"dexaflow_server_requests_total{service="/test/mutate",outcome="panic"}"#
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &scrape,
            r#"dexaflow_server_requests_total{service="/test/mutate",outcome="allowed"}"#
        ),
        Some(1.0)
    );
}

/// Sends `bodies` to `/test/mutate` one after the other over one kept-alive connection, and
/// gives each answer's status and JSON body.
async fn over_one_connection(
    running: &serve_support::Running,
    bodies: &[serde_json::Value],
) -> Vec<(StatusCode, serde_json::Value)> {
    let tls = running.client.connect().await;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .expect("an HTTP/1.1 handshake");
    tokio::spawn(connection);
    let mut answers = Vec::new();
    for body in bodies {
        let request = Request::post("/test/mutate")
            .header(http::header::HOST, "localhost")
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(body.to_string())))
            .expect("a request");
        // The client's side of the connection turns ready for the next request only once it
        // has finished with the last answer: sending before that is the client's error.
        sender
            .ready()
            .await
            .expect("the same connection, still open for another request");
        let response = sender
            .send_request(request)
            .await
            .expect("an answer on the same connection");
        let status = response.status();
        let bytes = response
            .into_body()
            .collect()
            .await
            .expect("the whole body")
            .to_bytes();
        answers.push((status, serde_json::from_slice(&bytes).expect("JSON")));
    }
    answers
}

/// Asserts that a request acting `act` is answered 500 naming `uid` (when the body was decoded
/// far enough to know it), that the next request on the same connection is answered, and that
/// both are counted.
async fn assert_panic_answered_and_connection_kept(act: &str, uid: Option<&str>) {
    let recorder = recorder();
    let running = start_with(|_, _| {}, with_misbehaving, Some(&recorder)).await;
    let answers = over_one_connection(
        &running,
        &[
            json!({"uid": "u-42", "act": act}),
            json!({"uid": "u-43", "act": "answer"}),
        ],
    )
    .await;
    assert_eq!(answers[0].0, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(answers[0].1["error"], "the service failed on this request");
    assert_eq!(answers[0].1.get("uid").and_then(|uid| uid.as_str()), uid);
    assert_eq!(answers[1].0, StatusCode::OK);
    assert_eq!(answers[1].1["uid"], "u-43");
    let scrape = recorder.handle().render();
    for outcome in ["panic", "allowed"] {
        let series = format!(
            r#"dexaflow_server_requests_total{{service="/test/mutate",outcome="{outcome}"}}"#
        );
        assert_eq!(sample(&scrape, &series), Some(1.0), "{series}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_panicking_while_it_builds_its_future_is_answered_500_and_its_connection_serves_on()
 {
    assert_panic_answered_and_connection_kept("panic_building", Some("u-42")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_panicking_on_a_later_poll_is_answered_500_and_its_connection_serves_on() {
    assert_panic_answered_and_connection_kept("panic_after_waiting", Some("u-42")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_check_panicking_on_a_decoded_request_is_answered_500_and_its_connection_serves_on() {
    assert_panic_answered_and_connection_kept("panic_checking", None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_past_the_deadline_of_the_timeout_parameter_is_answered_503_with_the_uid() {
    let recorder = recorder();
    let running = start_with(|_, _| {}, with_misbehaving, Some(&recorder)).await;
    let answer = running
        .client
        .post_json(
            "/test/mutate?timeout=1s",
            &json!({"uid": "u-slow", "act": "stall"}),
        )
        .await;
    assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(answer.json()["uid"], "u-slow");
    let scrape = recorder.handle().render();
    assert_eq!(
        sample(
            &scrape,
            r#"dexaflow_server_requests_total{service="/test/mutate",outcome="timeout"}"#
        ),
        Some(1.0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_patch_from_a_validating_service_is_never_sent() {
    let running = start_with(|_, _| {}, with_misbehaving, None).await;
    let refused = running
        .client
        .post_json("/test/validate", &json!({"uid": "u-v", "act": "patch"}))
        .await;
    assert_eq!(refused.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(refused.json()["uid"], "u-v");
    let mutating = running
        .client
        .post_json("/test/mutate", &json!({"uid": "u-m", "act": "patch"}))
        .await;
    assert_eq!(mutating.status, StatusCode::OK);
    assert_eq!(mutating.json()["uid"], "u-m");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_is_not_offered_unless_enabled() {
    let running = start().await;
    let alpn = negotiated_alpn(&running, &[b"h2", b"http/1.1"]).await;
    assert_eq!(alpn.as_deref(), Some(&b"http/1.1"[..]));
    let enabled = start_with(|settings, _| settings.http2 = true, |r| r, None).await;
    let alpn = negotiated_alpn(&enabled, &[b"h2", b"http/1.1"]).await;
    assert_eq!(alpn.as_deref(), Some(&b"h2"[..]));
}

/// A request of `method` to `path` on an HTTP/2 server, `body` sent as JSON.
fn http2_request(method: Method, path: &str, body: Vec<u8>) -> Request<Full<Bytes>> {
    Request::builder()
        .method(method)
        .uri(format!("https://localhost{path}"))
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(body)))
        .expect("a request")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_over_the_cap_is_answered_413_over_http2_not_reset() {
    let running = start_with(
        |settings, _| {
            settings.http2 = true;
            settings.max_body_bytes = 1024;
        },
        |r| r,
        None,
    )
    .await;
    // Past what an early answer drains, so that HTTP/1 would close the connection.
    let body = vec![b' '; 2 * 1024 * 1024];

    let answer = running
        .client
        .send_http2(http2_request(Method::POST, "/dags/validate", body))
        .await
        .expect("the answer, not a reset stream");

    answer.assert_error(StatusCode::PAYLOAD_TOO_LARGE, "larger than 1024 bytes");
    assert!(
        answer.headers.get(http::header::CONNECTION).is_none(),
        "{:?}",
        answer.headers
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_head_request_over_http2_gets_its_status_and_no_body() {
    let running = start_with(|settings, _| settings.http2 = true, |r| r, None).await;

    let answer = running
        .client
        .send_http2(http2_request(Method::HEAD, "/dags/validate", Vec::new()))
        .await
        .expect("the answer, not a protocol error");

    assert_eq!(answer.status, StatusCode::METHOD_NOT_ALLOWED);
    assert!(answer.body.is_empty(), "{:?}", answer.body);
}

async fn negotiated_alpn(running: &serve_support::Running, offered: &[&[u8]]) -> Option<Vec<u8>> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(running.authority.der()).expect("the CA");
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = offered.iter().map(|protocol| protocol.to_vec()).collect();
    let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(running.server.local_addr())
        .await
        .expect("connect");
    let tls = connector
        .connect(
            rustls::pki_types::ServerName::try_from("localhost").expect("a name"),
            tcp,
        )
        .await
        .expect("a handshake");
    tls.get_ref().1.alpn_protocol().map(<[u8]>::to_vec)
}
