//! The one serve function every service goes through: the HTTP rules, in order, then the
//! service's handler under a deadline and panic recovery.
//!
//! | rule | answer |
//! |---|---|
//! | header fields over [`MAX_HEADER_BYTES`] | 431 |
//! | no service at the path | 404 |
//! | an authenticated service, and no `Authorization: Bearer` with the token | 401, with `WWW-Authenticate: Bearer` |
//! | a method other than `POST` | 405, with `Allow: POST` |
//! | a `Content-Type` other than `application/json` (parameters allowed) | 415 |
//! | a body over `server.max_body_bytes` (read no further than the cap) | 413 |
//! | a body not whole by the deadline (as below) | 408, closing the connection |
//! | an empty body | 400 |
//! | a `timeout` query parameter that is no Go duration, or zero or less | 400, naming `timeout` |
//! | a body that does not decode strictly, or a value the service does not take | 400, saying what was wrong |
//! | the handler panics | 500, with the request's uid |
//! | the handler cannot decide now ([`super::Unavailable`]) | 503, with the uid |
//! | the handler is past its deadline (90% of `?timeout=`, 10 s when absent, 30 s at most) | 503, with the uid |
//! | a validating service answers with a patch | 500, with the uid |
//! | otherwise | 200 and the handler's answer |
//!
//! Every answer is JSON with its `Content-Type`; an error is `{"error": "...", "uid": "..."}`,
//! with `uid` only once the body was decoded.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use http::header::{
    ALLOW, AUTHORIZATION, CONNECTION, CONTENT_LENGTH, CONTENT_TYPE, EXPECT, WWW_AUTHENTICATE,
};
use http::{Method, Request, Response, StatusCode, Version};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Body;
use hyper::body::Bytes;
use serde::Serialize;
use tokio::time::Instant;

use super::auth::BearerToken;
use super::registry::{Kind, Router, Ruling, Unavailable};
use crate::admission::{Grammar, is_json_content_type, parse_nanos};
use crate::events::{RequestOutcome, ServerEvents};
use crate::supervise::{catch_panic, panic_message, until};

/// The timeout assumed when the caller sends none: admissionregistration v1's default.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest timeout honoured: the most a webhook configuration may set.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(30);

/// The most bytes of header fields a request may carry (each counted as `name: value` and
/// its line end, as on the wire), answered 431 with a JSON body past it. hyper itself refuses a
/// request head past `4 *` this (the h1 buffer, the h2 header list), with no body.
pub(crate) const MAX_HEADER_BYTES: usize = 64 * 1024;

/// What every request needs: the routes, the body cap, the bearer token and the observer.
pub(crate) struct Shared {
    pub(crate) router: Router,
    pub(crate) max_body_bytes: usize,
    /// The token an authenticated service's callers present; `None` asks for none.
    pub(crate) bearer_token: Option<BearerToken>,
    pub(crate) events: Arc<dyn ServerEvents>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("router", &self.router)
            .field("max_body_bytes", &self.max_body_bytes)
            .finish_non_exhaustive()
    }
}

/// The body of every error answer.
#[derive(Serialize)]
struct ErrorBody<'a> {
    error: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    uid: Option<&'a str>,
}

fn json(status: StatusCode, body: Vec<u8>) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}

fn error(status: StatusCode, message: &str, uid: Option<&str>) -> Response<Full<Bytes>> {
    let body = serde_json::to_vec(&ErrorBody {
        error: message,
        uid,
    })
    .expect("two strings always serialize");
    json(status, body)
}

/// Whether the `Content-Type` is `application/json`, parameters (such as `charset`) allowed.
fn is_json(request: &Request<impl Body>) -> bool {
    request
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(is_json_content_type)
}

/// The `timeout` query parameter, as the API server writes it (`10s`): Go's duration syntax,
/// percent-decoded as Go decodes a query; `Ok(None)` when absent. Zero or less is refused, as
/// no answer could arrive in time.
fn timeout(request: &Request<impl Body>) -> Result<Option<Duration>, String> {
    let Some(query) = request.uri().query() else {
        return Ok(None);
    };
    let Some(encoded) = query.split('&').find_map(|pair| {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        (query_decode(key).as_deref() == Some("timeout")).then_some(value)
    }) else {
        return Ok(None);
    };
    let value = query_decode(encoded)
        .ok_or_else(|| format!("timeout: not a percent-encoded UTF-8 value: {encoded:?}"))?;
    match parse_nanos(&value, Grammar::Go) {
        Ok(nanos) if nanos > 0 => Ok(Some(Duration::from_nanos(nanos.unsigned_abs()))),
        Ok(_) => Err(format!(
            "timeout: must be a positive duration, got {value:?}"
        )),
        Err(reason) => Err(format!(
            "timeout: expected a Go duration such as \"10s\", got {}",
            reason.explained(format!("{value:?}"))
        )),
    }
}

/// A query component decoded as Go's `url.ParseQuery` decodes it (`%XX` escapes, `+` a space);
/// `None` for a bad escape or bytes that are not UTF-8.
fn query_decode(text: &str) -> Option<String> {
    let mut bytes = Vec::with_capacity(text.len());
    let mut rest = text.as_bytes();
    while let Some((&byte, after)) = rest.split_first() {
        rest = after;
        bytes.push(match byte {
            b'+' => b' ',
            b'%' => {
                let hex = rest
                    .get(..2)
                    .filter(|hex| hex.iter().all(u8::is_ascii_hexdigit))?;
                rest = &rest[2..];
                u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()?
            }
            other => other,
        });
    }
    String::from_utf8(bytes).ok()
}

/// Answers one request; never fails, never panics on any input.
pub(crate) async fn answer<B>(shared: Arc<Shared>, request: Request<B>) -> Response<Full<Bytes>>
where
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    let head = request.method() == Method::HEAD;
    let mut response = answer_any(shared, request).await;
    // An answer to HEAD has no body: HTTP/1 leaves it out by itself, but on HTTP/2 it would be
    // sent, and the client would reset the stream for it.
    if head {
        *response.body_mut() = Full::default();
    }
    response
}

async fn answer_any<B>(shared: Arc<Shared>, request: Request<B>) -> Response<Full<Bytes>>
where
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    let header_bytes: usize = request
        .headers()
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len() + 4)
        .sum();
    if header_bytes > MAX_HEADER_BYTES {
        let response = error(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            &format!("the header fields are larger than {MAX_HEADER_BYTES} bytes"),
            None,
        );
        return refuse_unread(request, response).await;
    }
    let Some(route) = shared.router.get(request.uri().path()) else {
        shared.events.request_not_found();
        let message = shared.router.not_found(request.uri().path());
        let response = error(StatusCode::NOT_FOUND, &message, None);
        return refuse_unread(request, response).await;
    };
    let observed = route.observe();
    let (outcome, response) = respond(&shared, route, request).await;
    observed.answered(outcome);
    response
}

/// The rules that need only the request's head: the handler's budget, or the early answer.
// The error is the answer itself, moved once to the caller: boxing it would only allocate.
#[allow(clippy::result_large_err)]
fn admissible<B: Body>(
    shared: &Shared,
    route: &super::registry::Route,
    request: &Request<B>,
) -> Result<Duration, (RequestOutcome, Response<Full<Bytes>>)> {
    let invalid = |status, message: &str| (RequestOutcome::Invalid, error(status, message, None));
    if let Some(token) = shared.bearer_token.as_ref().filter(|_| route.authenticated) {
        if !token.accepts(request.headers().get(AUTHORIZATION)) {
            // The answer never repeats what was presented.
            let mut response = error(
                StatusCode::UNAUTHORIZED,
                "a bearer token is required, and the one presented (if any) is not it",
                None,
            );
            response
                .headers_mut()
                .insert(WWW_AUTHENTICATE, http::HeaderValue::from_static("Bearer"));
            return Err((RequestOutcome::Unauthorized, response));
        }
    }
    if request.method() != Method::POST {
        let mut response = error(StatusCode::METHOD_NOT_ALLOWED, "only POST is allowed", None);
        response
            .headers_mut()
            .insert(ALLOW, http::HeaderValue::from_static("POST"));
        return Err((RequestOutcome::Invalid, response));
    }
    if !is_json(request) {
        return Err(invalid(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "Content-Type must be application/json",
        ));
    }
    let declared = request
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<u64>().ok());
    if declared.is_some_and(|length| length > shared.max_body_bytes as u64) {
        return Err(invalid(
            StatusCode::PAYLOAD_TOO_LARGE,
            &too_large(shared.max_body_bytes),
        ));
    }
    match timeout(request) {
        Ok(timeout) => Ok(timeout.unwrap_or(DEFAULT_TIMEOUT).min(MAX_TIMEOUT) * 9 / 10),
        Err(message) => Err(invalid(StatusCode::BAD_REQUEST, &message)),
    }
}

fn too_large(max_body_bytes: usize) -> String {
    format!("the body is larger than {max_body_bytes} bytes")
}

/// How much of a body left unread by an early answer is read and dropped before the answer
/// goes: closing a connection with unread bytes resets it, and the reset can reach the client
/// before it has read the answer.
const DRAIN_BYTES: usize = 1024 * 1024;
/// How long that reading may take.
const DRAIN_TIME: Duration = Duration::from_secs(5);

/// The early answer to `request`, whose body was not read. A client that asked to be told
/// before it sends the body (`Expect: 100-continue`) has sent none of it: reading it would tell
/// the client to go on, so the answer closes the connection instead, and the client, told no,
/// sends nothing. Any other body is drained as [`unread`] does.
async fn refuse_unread<B>(
    request: Request<B>,
    mut response: Response<Full<Bytes>>,
) -> Response<Full<Bytes>>
where
    B: Body<Data = Bytes>,
{
    let waits_for_go_ahead = request
        .headers()
        .get(EXPECT)
        .is_some_and(|value| value.as_bytes().eq_ignore_ascii_case(b"100-continue"));
    let version = request.version();
    if waits_for_go_ahead {
        close_after(&mut response, version);
        return response;
    }
    unread(std::pin::pin!(request.into_body()), version, response).await
}

/// Asks HTTP/1 to close the connection once `response` is sent, the only way it has to leave a
/// request's body unread. HTTP/2 forbids the header, and ends a stream whose body is left
/// unread by itself (a reset with no error, after the answer), the connection staying open.
fn close_after(response: &mut Response<Full<Bytes>>, version: Version) {
    if version < Version::HTTP_2 {
        response
            .headers_mut()
            .insert(CONNECTION, http::HeaderValue::from_static("close"));
    }
}

/// Reads and drops what is left of `body`, up to [`DRAIN_BYTES`] in [`DRAIN_TIME`], so that
/// `response` reaches the client; when more is left, the response closes the connection
/// ([`close_after`], for a request of `version`).
async fn unread<B>(
    mut body: B,
    version: Version,
    mut response: Response<Full<Bytes>>,
) -> Response<Full<Bytes>>
where
    B: Body<Data = Bytes> + Unpin,
{
    let drained = tokio::time::timeout(DRAIN_TIME, async {
        let mut left = DRAIN_BYTES;
        while let Some(frame) = body.frame().await {
            let Ok(frame) = frame else { return false };
            let size = frame.data_ref().map_or(0, Bytes::len);
            let Some(rest) = left.checked_sub(size) else {
                return false;
            };
            left = rest;
        }
        true
    })
    .await
    .unwrap_or(false);
    if !drained {
        close_after(&mut response, version);
    }
    response
}

async fn respond<B>(
    shared: &Shared,
    route: &super::registry::Route,
    request: Request<B>,
) -> (RequestOutcome, Response<Full<Bytes>>)
where
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    let budget = match admissible(shared, route, &request) {
        Ok(budget) => budget,
        Err((outcome, response)) => {
            let response = refuse_unread(request, response).await;
            return (outcome, response);
        }
    };
    let invalid = |status, message: &str| (RequestOutcome::Invalid, error(status, message, None));
    let version = request.version();
    let mut incoming = std::pin::pin!(request.into_body());
    let deadline = Instant::now() + budget;
    // The body counts against the deadline too: a client that stops sending half way would
    // otherwise hold its connection, and a slot of `server.max_connections`, for ever.
    let read = until(
        deadline,
        Limited::new(&mut incoming, shared.max_body_bytes).collect(),
    );
    let Some(read) = read.await else {
        let (outcome, mut response) = invalid(
            StatusCode::REQUEST_TIMEOUT,
            "the body did not arrive whole before the request's deadline",
        );
        close_after(&mut response, version);
        return (outcome, response);
    };
    let body = match read {
        Ok(collected) => collected.to_bytes(),
        Err(cause) if cause.is::<http_body_util::LengthLimitError>() => {
            let (outcome, response) = invalid(
                StatusCode::PAYLOAD_TOO_LARGE,
                &too_large(shared.max_body_bytes),
            );
            return (outcome, unread(incoming, version, response).await);
        }
        Err(cause) => {
            return invalid(
                StatusCode::BAD_REQUEST,
                &format!("reading the body: {cause}"),
            );
        }
    };
    if body.is_empty() {
        return invalid(StatusCode::BAD_REQUEST, "the body is empty");
    }
    // Decoding and checking run the service's own code (its `Deserialize`, `check` and `uid`):
    // a panic there is the handler's too.
    let start =
        std::panic::catch_unwind(AssertUnwindSafe(|| route.endpoint.start(&body, deadline)));
    let started = match start {
        Ok(Ok(started)) => started,
        Ok(Err(message)) => {
            return invalid(
                StatusCode::BAD_REQUEST,
                &format!("the body is not a valid request: {message}"),
            );
        }
        Err(payload) => return panicked(&panic_message(payload.as_ref()), None),
    };
    let uid = started.uid;
    // In place, on the connection's task: a panic while the handler builds its future or while
    // it is polled ends this request with a 500, not the connection, and costs no task. The
    // answer is polled before any timer is made, so a timer is made only when it has to wait.
    let Some(joined) = until(deadline, catch_panic(|| started.answer)).await else {
        return (
            RequestOutcome::Timeout,
            error(
                StatusCode::SERVICE_UNAVAILABLE,
                "the service did not answer before its deadline",
                Some(&uid),
            ),
        );
    };
    match joined {
        Ok(Ok(answer)) if answer.ruling == Ruling::Patched && route.kind == Kind::Validating => {
            tracing::error!(%uid, "a validating service answered with a patch; not sent");
            (
                RequestOutcome::Panic,
                error(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "a validating service answered with a patch",
                    Some(&uid),
                ),
            )
        }
        Ok(Ok(answer)) => (
            RequestOutcome::Ruled(answer.ruling),
            json(StatusCode::OK, answer.body),
        ),
        Ok(Err(Unavailable(message))) => (
            RequestOutcome::Unavailable,
            error(StatusCode::SERVICE_UNAVAILABLE, &message, Some(&uid)),
        ),
        Err(message) => panicked(&message, Some(&uid)),
    }
}

/// The answer to a request whose handler panicked: logged with `message`, answered 500.
fn panicked(message: &str, uid: Option<&str>) -> (RequestOutcome, Response<Full<Bytes>>) {
    match uid {
        Some(uid) => tracing::error!(%uid, "a handler panicked: {message}"),
        None => tracing::error!("a handler panicked: {message}"),
    }
    (
        RequestOutcome::Panic,
        error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the service failed on this request",
            uid,
        ),
    )
}
