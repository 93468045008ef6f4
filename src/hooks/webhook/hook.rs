//! The webhook hook: one call is one POST of the attempt, and its answer is the decision.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::{Body, Bytes};
use hyper::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use hyper::{Method, StatusCode};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use super::spec::Endpoint;
use super::token::{TokenFile, hidden_in};
use super::{MAX_ANSWER_BYTES, WebhookError, WebhookSpec};
use crate::admission::{
    AnswerEnvelope, Decision, Hook, HookError, HookFuture, Request, RequestEnvelope, error_chain,
    is_json_content_type, strict_from_slice,
};
use crate::hooks::SpecError;

/// The HTTP client of one webhook: a pool of kept-alive connections, HTTP/2 where the server
/// offers it.
pub type HttpClient = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// How many connection pools a webhook keeps, each its own HTTP/2 connection where the server
/// speaks it. A call goes to the pool with the fewest calls in flight (the first on a tie), so
/// calls one after another share one connection and only overlapping calls open more. One HTTP/2
/// connection carries every stream through one task and one TLS session: under many concurrent
/// calls that task is the limit, where HTTP/1.1 spreads them over a connection each.
pub const CONNECTION_LANES: usize = 4;

fn application_json() -> HeaderValue {
    HeaderValue::from_static("application/json")
}

/// A hook that asks an HTTPS endpoint (ADR 0100 §8), for installs without their own binary.
///
/// Each call POSTs a [`RequestEnvelope`] (the attempt, with a fresh random `uid`) and takes the
/// decision from the [`AnswerEnvelope`] of a `200` answer. Anything else is the hook failing,
/// never an admit: a redirect (none is followed), another status, an answer over
/// [`MAX_ANSWER_BYTES`] (reading stops there), a body that is not JSON or not `application/json`,
/// an unknown field, another `api_version`, a missing or different `uid`, a decision without its
/// `reason` or `changes` or with one it must not have, a TLS or connection failure. The error
/// says which ([`WebhookError`]).
///
/// The hook keeps [`CONNECTION_LANES`] connection pools for all its calls, made when it is
/// built; no call sets up a client or TLS settings. Under supervision the call's deadline
/// bounds the whole exchange (connect, TLS, request, answer: the supervisor drops the call at
/// its limit) and is sent as `?timeout=`.
///
/// It is a remote hook ([`Hook::is_remote`]): it may change the service account only when
/// `execution_allowlist.service_accounts` is set.
#[derive(Debug)]
pub struct Webhook {
    name: String,
    // A webhook whose files could not be loaded when it was built still stands in the chain,
    // failing every call with the reason.
    ready: Result<Ready, SpecError>,
}

#[derive(Debug)]
struct Ready {
    endpoint: Endpoint,
    token: Option<TokenFile>,
    lanes: Box<[Lane]>,
}

/// One connection pool and how many calls it carries now.
#[derive(Debug)]
struct Lane {
    client: HttpClient,
    in_flight: AtomicUsize,
}

/// A call's hold on its lane: counted in flight until dropped, however the call ends.
struct Held<'a> {
    lane: &'a Lane,
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.lane.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Ready {
    /// The lane with the fewest calls in flight, the first on a tie, held for one call.
    fn hold_lane(&self) -> Held<'_> {
        let lane = self
            .lanes
            .iter()
            .min_by_key(|lane| lane.in_flight.load(Ordering::Relaxed))
            .expect("a webhook has at least one lane");
        lane.in_flight.fetch_add(1, Ordering::Relaxed);
        Held { lane }
    }
}

impl Webhook {
    /// The webhook `spec` describes, with its connection pool, its TLS settings loaded from its
    /// files now. Needs no runtime to build; calls need a tokio runtime.
    ///
    /// # Errors
    /// Every problem [`WebhookSpec::check`] finds.
    pub fn new(spec: &WebhookSpec) -> Result<Webhook, Vec<SpecError>> {
        let endpoint = spec.endpoint().map_err(|problem| vec![problem]);
        let tls = super::tls::client_config(spec);
        let token = spec.bearer_token_file.clone().map(TokenFile::new);
        let token_problem = token.as_ref().and_then(|token| token.check().err());
        let (endpoint, tls) = match (endpoint, tls, token_problem) {
            (Ok(endpoint), Ok(tls), None) => (endpoint, tls),
            (endpoint, tls, token_problem) => {
                let mut problems = endpoint.err().unwrap_or_default();
                problems.extend(tls.err().unwrap_or_default());
                problems.extend(token_problem);
                return Err(problems);
            }
        };
        let mut http = HttpConnector::new();
        // The scheme is the HTTPS connector's business: it allows http for loopback URLs only
        // because the URL check refused every other.
        http.enforce_http(false);
        // A request is one small write: do not wait for an acknowledgement to send it.
        http.set_nodelay(true);
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_all_versions()
            .wrap_connector(http);
        // Each lane its own client, so its own pool: clones of one client would share theirs.
        let lanes = (0..CONNECTION_LANES)
            .map(|_| Lane {
                client: Client::builder(TokioExecutor::new()).build(connector.clone()),
                in_flight: AtomicUsize::new(0),
            })
            .collect();
        Ok(Webhook {
            name: spec.name.clone(),
            ready: Ok(Ready {
                endpoint,
                token,
                lanes,
            }),
        })
    }

    /// The webhook `spec` describes, as config builds it: when its files can no longer be loaded
    /// (they passed the boot check a moment before), it fails every call naming the first
    /// problem instead, so that the chain is never silently shorter.
    pub fn from_spec(spec: &WebhookSpec) -> Webhook {
        Webhook::new(spec).unwrap_or_else(|problems| Webhook {
            name: spec.name.clone(),
            ready: Err(problems
                .into_iter()
                .next()
                .expect("a webhook that cannot be built has a problem to say")),
        })
    }

    /// The HTTP client of the webhook's first connection pool (the one calls one after another
    /// use), for a caller that wants to measure it alone.
    ///
    /// # Errors
    /// The problem that kept the webhook from being built.
    pub fn client(&self) -> Result<&HttpClient, &SpecError> {
        self.ready.as_ref().map(|ready| &ready.lanes[0].client)
    }

    /// One call: the attempt out, the decision back. `limit` is the deadline sent as
    /// `?timeout=`; none is sent without one.
    ///
    /// # Errors
    /// [`WebhookError`], saying what was wrong.
    ///
    /// # Cancel safety
    /// Dropping the future abandons the exchange; the connection is not returned to the pool.
    pub async fn call(
        &self,
        request: &Request,
        limit: Option<Duration>,
    ) -> Result<Decision, WebhookError> {
        self.call_keeping(request, limit, &mut None).await
    }

    /// [`Webhook::call`], keeping the `Authorization` header it sends in `sent`.
    async fn call_keeping(
        &self,
        request: &Request,
        limit: Option<Duration>,
        sent: &mut Option<HeaderValue>,
    ) -> Result<Decision, WebhookError> {
        let ready = self
            .ready
            .as_ref()
            .map_err(|problem| WebhookError::Setup(problem.clone()))?;
        let uid = new_uid().map_err(WebhookError::Uid)?;
        let body = serde_json::to_vec(&RequestEnvelope::wire(&uid, request))
            .expect("a request always encodes: its maps have string keys");
        let mut outgoing = hyper::Request::builder()
            .method(Method::POST)
            .uri(ready.endpoint.call_uri(limit))
            .header(CONTENT_TYPE, application_json())
            .header(ACCEPT, application_json());
        if let Some(token) = &ready.token {
            let header = token.header()?;
            outgoing = outgoing.header(AUTHORIZATION, header.clone());
            *sent = Some(header);
        }
        let outgoing = outgoing
            .body(Full::new(Bytes::from(body)))
            .expect("a request of a checked URI and typed headers always builds");
        // Held until the answer is read: the exchange is in flight on the lane until then.
        let held = ready.hold_lane();
        let answer = held
            .lane
            .client
            .request(outgoing)
            .await
            .map_err(WebhookError::Send)?;
        let status = answer.status();
        if status.is_redirection() {
            return Err(WebhookError::Redirect { status });
        }
        if status != StatusCode::OK {
            return Err(WebhookError::Status { status });
        }
        let content_type = answer.headers().get(CONTENT_TYPE);
        if !content_type
            .and_then(|value| value.to_str().ok())
            .is_some_and(is_json_content_type)
        {
            return Err(WebhookError::ContentType {
                got: content_type
                    .map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned()),
            });
        }
        let body = answer.into_body();
        if body.size_hint().lower() > MAX_ANSWER_BYTES as u64 {
            return Err(WebhookError::TooLarge);
        }
        let bytes = Limited::new(body, MAX_ANSWER_BYTES)
            .collect()
            .await
            .map_err(|error| {
                if error.is::<LengthLimitError>() {
                    WebhookError::TooLarge
                } else {
                    WebhookError::Read(error)
                }
            })?
            .to_bytes();
        let answer: AnswerEnvelope = strict_from_slice(&bytes).map_err(|error| {
            if error.is_syntax() || error.is_eof() {
                WebhookError::NotJson(error)
            } else {
                WebhookError::Shape(error)
            }
        })?;
        answer.into_decision(&uid).map_err(WebhookError::Answer)
    }

    fn admit_by<'a>(&'a self, request: &'a Request, limit: Option<Duration>) -> HookFuture<'a> {
        Box::pin(async move {
            let mut sent = None;
            let result = self.call_keeping(request, limit, &mut sent).await;
            // A server that echoes the token, in a reason or in what it answers, must not show
            // it to whoever reads the task instance or the log.
            let hidden = |text| match &sent {
                Some(header) => hidden_in(header, text),
                None => text,
            };
            match result {
                Ok(Decision::Hold(reason)) => Ok(Decision::Hold(hidden(reason))),
                Ok(Decision::Refuse(reason)) => Ok(Decision::Refuse(hidden(reason))),
                Ok(decision) => Ok(decision),
                Err(error) => Err(HookError::Failed(hidden(error_chain(&error)))),
            }
        })
    }
}

impl Hook for Webhook {
    fn name(&self) -> &str {
        &self.name
    }

    /// Called without supervision, the exchange has no deadline but the server's, and none is
    /// sent.
    fn admit<'a>(&'a self, request: &'a Request) -> HookFuture<'a> {
        self.admit_by(request, None)
    }

    /// The supervisor gives the call its deadline, `min(timeout, chain budget left)`, which only
    /// it knows; the webhook sends it as `?timeout=` (Go's duration syntax, as the Kubernetes
    /// API server sends `?timeout=10s`). Carrying the deadline through this one trait method,
    /// whose default every other hook keeps, changes no other hook and no caller; the webhook's
    /// own `timeout` setting alone would overstate the deadline once the chain budget is short.
    fn admit_within<'a>(&'a self, request: &'a Request, limit: Duration) -> HookFuture<'a> {
        self.admit_by(request, Some(limit))
    }

    fn is_remote(&self) -> bool {
        true
    }
}

/// A random (version 4) UUID, fresh for each call, from the operating system's generator.
fn new_uid() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)?;
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    // Written into one string: no allocation per byte or per group.
    let mut uid = String::with_capacity(36);
    for (index, byte) in bytes.iter().enumerate() {
        if matches!(index, 4 | 6 | 8 | 10) {
            uid.push('-');
        }
        for nibble in [byte >> 4, byte & 0x0f] {
            uid.push(char::from_digit(u32::from(nibble), 16).unwrap_or('0'));
        }
    }
    Ok(uid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uid_is_a_version_4_uuid_and_fresh_each_time() {
        let first = new_uid().expect("the system has a generator");
        let second = new_uid().expect("the system has a generator");

        assert_ne!(first, second);
        let parts: Vec<&str> = first.split('-').collect();
        assert_eq!(
            parts.iter().map(|part| part.len()).collect::<Vec<_>>(),
            [8, 4, 4, 4, 12]
        );
        assert!(parts[2].starts_with('4'), "{first}");
        assert!(matches!(&parts[3][..1], "8" | "9" | "a" | "b"), "{first}");
    }
}
