//! The registry of services and the router built from it at start: no global state, a duplicate
//! path is an error, and only the enabled paths are routed.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::time::Instant;

use super::ServeError;
use super::services::BuiltinService;
use crate::admission::{error_path, strict_from_str};
pub use crate::events::Ruling;
use crate::events::{RequestOutcome, ServerEvents, ServiceEvents};

/// Kubernetes' two kinds of admission webhook: what a service may answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Answers allowed or not, never with a patch: the serve function refuses to send a patch
    /// from a validating service, as the API server would refuse to take it.
    Validating,
    /// May answer with a patch.
    Mutating,
}

impl Kind {
    /// The kind as logs show it.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Validating => "validating",
            Kind::Mutating => "mutating",
        }
    }
}

/// What a handler answers: the response body and what it decided, for the events and for the
/// serve function's check that a validating service sends no patch.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer<R> {
    /// The response, serialized as the JSON body of a 200.
    pub body: R,
    /// What the answer says.
    pub ruling: Ruling,
}

/// Why a handler could not decide, answered 503 with this text and the request's uid, so
/// that the caller treats the service as down (its breaker counts it, its fail-open applies)
/// rather than as a decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unavailable(pub String);

/// One service's logic: a typed request in, a typed answer out. The serve function does the
/// HTTP around it (method, media type, body cap, strict decoding, deadline, panics).
///
/// Implement it for a service of your own and register it with [`Service::new`].
pub trait Handler: Send + Sync + 'static {
    /// The request body, decoded strictly with `serde_json` (trailing data and duplicate
    /// fields are errors, an array is never read as an object; unknown fields as the type
    /// says).
    type Request: DeserializeOwned + Send + 'static;
    /// The response body.
    type Response: Serialize + Send + 'static;

    /// The request decoded from the body's text: by default [`strict_from_str`]. A
    /// handler may decode another way first (in fewer passes) as long as it takes the same
    /// bodies to the same requests.
    ///
    /// # Errors
    /// serde's error, which the 400 answer quotes.
    fn decode(text: &str) -> Result<Self::Request, serde_json::Error> {
        strict_from_str(text)
    }

    /// What the 400 answer says of a body [`Handler::decode`] refused with `error`: by default
    /// `error` after the path of the field it is about (`try_number: invalid type: ...`).
    /// A handler whose `decode` reads another type than `Self::Request` first says which.
    fn explain(text: &str, error: serde_json::Error) -> String {
        located::<Self::Request>(text, error)
    }

    /// The request's uid, echoed in the error answer when the handler panics.
    fn uid(request: &Self::Request) -> &str;

    /// What is wrong with a decoded request that its type cannot say (a value it does not
    /// take, such as another protocol version), answered 400 like a decoding error; `Ok` by
    /// default.
    ///
    /// # Errors
    /// The problem, naming the field.
    fn check(request: &Self::Request) -> Result<(), String> {
        let _ = request;
        Ok(())
    }

    /// Answers `request`; `deadline` is a little before the caller's own timeout, and the serve
    /// function stops waiting for the answer then.
    ///
    /// # Errors
    /// [`Unavailable`] when the service cannot decide now.
    fn handle(
        &self,
        request: Self::Request,
        deadline: Instant,
    ) -> impl Future<Output = Result<Answer<Self::Response>, Unavailable>> + Send;
}

/// What a handler's future gives, its response serialized.
pub(crate) type Encoded = Result<Answer<Vec<u8>>, Unavailable>;

/// A request decoded and ready to run: its uid and the handler's future, which borrows the
/// handler.
pub(crate) struct Started<'h> {
    pub(crate) uid: String,
    pub(crate) answer: Pin<Box<dyn Future<Output = Encoded> + Send + 'h>>,
}

/// A handler with its request and response types erased, so that services of different types
/// share one registry.
pub(crate) trait Endpoint: Send + Sync {
    /// Decodes `body` strictly and builds the handler's future; the handler itself runs only
    /// when the future is polled.
    ///
    /// The future borrows the handler rather than holding a count of it: every worker thread
    /// serves the same routes, and a count changed on each request would move between them.
    fn start<'h>(&'h self, body: &[u8], deadline: Instant) -> Result<Started<'h>, String>;
}

impl<H: Handler> Endpoint for H {
    fn start<'h>(&'h self, body: &[u8], deadline: Instant) -> Result<Started<'h>, String> {
        // Checked whole once, so that the decoder need not check each string it reads again.
        let text = std::str::from_utf8(body).map_err(|error| format!("not UTF-8: {error}"))?;
        let request = H::decode(text).map_err(|error| H::explain(text, error))?;
        H::check(&request)?;
        let uid = H::uid(&request).to_owned();
        let answer = Box::pin(async move {
            let answer = self.handle(request, deadline).await?;
            // Room for most answers, where `to_vec`'s start would grow twice on the way.
            let mut body = Vec::with_capacity(512);
            serde_json::to_writer(&mut body, &answer.body)
                .expect("a response of plain fields always serializes");
            Ok(Answer {
                body,
                ruling: answer.ruling,
            })
        });
        Ok(Started { uid, answer })
    }
}

/// `error`, met decoding `text` as a `T`, after the path of the field it is about (see
/// [`error_path`]); `error` as it is when it is about no field.
pub(crate) fn located<T: DeserializeOwned>(text: &str, error: serde_json::Error) -> String {
    let error = error.to_string();
    match error_path::<T, _>(&mut serde_json::Deserializer::from_str(text), &error) {
        Some(path) => format!("{path}: {error}"),
        None => error,
    }
}

/// One admission service: a path, a kind and a handler.
#[derive(Clone)]
pub struct Service {
    path: String,
    kind: Kind,
    endpoint: Arc<dyn Endpoint>,
    authenticated: bool,
    reads_cluster: bool,
}

impl std::fmt::Debug for Service {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Service")
            .field("path", &self.path)
            .field("kind", &self.kind)
            .field("authenticated", &self.authenticated)
            .field("reads_cluster", &self.reads_cluster)
            .finish()
    }
}

impl Service {
    /// A service answering `path` with `handler`.
    pub fn new(path: impl Into<String>, kind: Kind, handler: impl Handler) -> Service {
        Service {
            path: path.into(),
            kind,
            endpoint: Arc::new(handler),
            authenticated: false,
            reads_cluster: false,
        }
    }

    /// The built-in service of `row`, answered by `handler`; one that reads the cluster is
    /// served only when listed in the enabled paths, since it needs a Kubernetes client.
    pub(crate) fn builtin(row: BuiltinService, handler: impl Handler) -> Service {
        Service {
            reads_cluster: row.reads_the_cluster(),
            ..Service::new(row.path, row.kind, handler)
        }
    }

    /// The same service for authenticated callers only: each request must carry the bearer
    /// token of [`super::Settings::bearer_token_file`] when one is set (401 otherwise), and
    /// the server refuses to start with it when neither that file nor a client CA is set,
    /// unless it listens on loopback. The API server's services need none of this: it is
    /// the only caller a cluster lets through to them.
    pub fn authenticated(mut self) -> Service {
        self.authenticated = true;
        self
    }

    /// The path it answers, such as `/pods/mutate`.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Whether it validates or mutates.
    pub fn kind(&self) -> Kind {
        self.kind
    }
}

/// Every service the server could serve, in registration order; built in `main` (or a test)
/// and turned into a [`Router`] at start.
#[derive(Debug, Default, Clone)]
pub(crate) struct Registry {
    services: Vec<Service>,
}

impl Registry {
    /// An empty registry.
    pub(crate) fn new() -> Registry {
        Registry::default()
    }

    /// Adds `service`.
    ///
    /// # Errors
    /// [`ServeError::DuplicatePath`] when a service already answers its path.
    pub(crate) fn register(mut self, service: Service) -> Result<Registry, ServeError> {
        if self.services.iter().any(|known| known.path == service.path) {
            return Err(ServeError::DuplicatePath { path: service.path });
        }
        self.services.push(service);
        Ok(self)
    }

    /// The router for the `enabled` paths, or for every service that reads no cluster when
    /// `enabled` is `None`, with each route's observer asked of `events` once, here.
    ///
    /// # Errors
    /// As [`check_enabled`].
    pub(crate) fn route(
        self,
        enabled: Option<&[String]>,
        setting: &'static str,
        events: &dyn ServerEvents,
    ) -> Result<Router, ServeError> {
        check_enabled(
            enabled,
            self.services.iter().map(|service| service.path.as_str()),
            setting,
        )?;
        let (chosen, left_out): (Vec<Service>, Vec<Service>) =
            self.services
                .into_iter()
                .partition(|service| match enabled {
                    None => !service.reads_cluster,
                    Some(paths) => paths.contains(&service.path),
                });
        let not_enabled = left_out.into_iter().map(|service| service.path).collect();
        let routes = chosen
            .into_iter()
            .map(|service| {
                let route = Route {
                    kind: service.kind,
                    endpoint: service.endpoint,
                    authenticated: service.authenticated,
                    events: events.service(&service.path),
                };
                (service.path, route)
            })
            .collect();
        Ok(Router {
            routes,
            not_enabled,
            setting,
        })
    }
}

/// Checks the list of enabled paths (the setting `setting`) against the paths services answer,
/// `known`; `None` (the setting unset) passes.
///
/// # Errors
/// [`ServeError::NothingEnabled`] for an empty list, [`ServeError::UnknownPath`] for a path
/// no service answers, naming them all.
pub(crate) fn check_enabled<'a>(
    enabled: Option<&[String]>,
    known: impl Iterator<Item = &'a str> + Clone,
    setting: &'static str,
) -> Result<(), ServeError> {
    match enabled {
        None => Ok(()),
        Some([]) => Err(ServeError::NothingEnabled { setting }),
        Some(paths) => match paths
            .iter()
            .find(|path| !known.clone().any(|known| known == path.as_str()))
        {
            None => Ok(()),
            Some(unknown) => Err(ServeError::UnknownPath {
                setting,
                path: unknown.clone(),
                known: known.collect::<Vec<_>>().join(", "),
            }),
        },
    }
}

/// The services being served, by path; immutable once built.
pub(crate) struct Router {
    routes: HashMap<String, Route>,
    /// The paths of services registered but not enabled, so that a request to one is told how
    /// to enable it rather than that nothing is there.
    not_enabled: HashSet<String>,
    /// The name of the setting that enables services.
    setting: &'static str,
}

impl std::fmt::Debug for Router {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut paths: Vec<&String> = self.routes.keys().collect();
        paths.sort();
        f.debug_struct("Router").field("paths", &paths).finish()
    }
}

impl Router {
    /// The served paths, sorted, with their kinds.
    pub(crate) fn paths(&self) -> Vec<(&str, Kind)> {
        let mut paths: Vec<(&str, Kind)> = self
            .routes
            .iter()
            .map(|(path, route)| (path.as_str(), route.kind))
            .collect();
        paths.sort_unstable_by_key(|(path, _)| *path);
        paths
    }

    pub(crate) fn get(&self, path: &str) -> Option<&Route> {
        self.routes.get(path)
    }

    /// Why nothing answers `path`: no service has it, or the one that has it is not enabled.
    pub(crate) fn not_found(&self, path: &str) -> Cow<'static, str> {
        if self.not_enabled.contains(path) {
            Cow::Owned(format!(
                "the service at {path} is not enabled: list it in {}",
                self.setting
            ))
        } else {
            Cow::Borrowed("no service at this path")
        }
    }

    /// The served paths that take authenticated callers only, sorted.
    pub(crate) fn authenticated_paths(&self) -> Vec<&str> {
        let mut paths: Vec<&str> = self
            .routes
            .iter()
            .filter(|(_, route)| route.authenticated)
            .map(|(path, _)| path.as_str())
            .collect();
        paths.sort_unstable();
        paths
    }
}

/// One served path: its kind, its endpoint, whether it takes authenticated callers only, and
/// the observer of its requests.
pub(crate) struct Route {
    pub(crate) kind: Kind,
    pub(crate) endpoint: Arc<dyn Endpoint>,
    pub(crate) authenticated: bool,
    pub(crate) events: Arc<dyn ServiceEvents>,
}

impl Route {
    /// Tells the route's observer that a request started; the guard tells it how the request
    /// ended.
    pub(crate) fn observe(&self) -> Observed<'_> {
        self.events.request_started();
        Observed {
            events: self.events.as_ref(),
            started: Instant::now(),
            answered: false,
        }
    }
}

/// A request being answered: [`Observed::answered`] reports its outcome and latency; dropped
/// before that (its connection closed, and the serve future with it), it reports the request
/// abandoned, so that every start has its end.
pub(crate) struct Observed<'a> {
    events: &'a dyn ServiceEvents,
    started: Instant,
    answered: bool,
}

impl Observed<'_> {
    /// Reports the request answered with `outcome`.
    pub(crate) fn answered(mut self, outcome: RequestOutcome) {
        self.answered = true;
        self.events
            .request_answered(outcome, self.started.elapsed());
    }
}

impl Drop for Observed<'_> {
    fn drop(&mut self) {
        if !self.answered {
            self.events.request_abandoned(self.started.elapsed());
        }
    }
}

/// Splits a comma-separated list of paths, trimming each and dropping empty items, as
/// `--enabled-admission` is written.
pub fn parse_enabled(list: &str) -> Vec<String> {
    list.split(',')
        .map(str::trim)
        .filter(|path| !path.is_empty())
        .map(str::to_owned)
        .collect()
}
