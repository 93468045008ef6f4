//! A Kubernetes API server on 127.0.0.1 for what `serve` reads: list and watch of Volcano's
//! queues (resource versions, bookmarks, a watch the test can break, lists that fail with 500,
//! lists and watches never answered, watches answered with an empty body),
//! get of namespaces, a bearer token, `Status` bodies for 401, 403, 404 and 500. Real HTTP on a real socket, so that the
//! real client (kube-rs) talks to it as to a cluster.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Request, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Bytes, Frame, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::sync::mpsc;

const QUEUES_PATH: &str = "/apis/scheduling.volcano.sh/v1beta1/queues";
const NAMESPACES_PATH: &str = "/api/v1/namespaces/";

/// The server's state, shared with its connections.
#[derive(Default)]
struct State {
    token: Mutex<String>,
    resource_version: AtomicU64,
    queues: Mutex<BTreeMap<String, Value>>,
    namespaces: Mutex<BTreeMap<String, Value>>,
    /// The open watches, and every event sent so far with its resource version, so that a
    /// watch started from a version gets what came after it, as from a real API server.
    watchers: Mutex<Watchers>,
    forbidden: AtomicBool,
    lists_failing: AtomicBool,
    lists_hanging: AtomicBool,
    watches_hanging: AtomicBool,
    watches_empty: AtomicBool,
    namespace_delay: Mutex<Option<Duration>>,
    requests: Mutex<Vec<String>>,
}

#[derive(Default)]
struct Watchers {
    open: Vec<mpsc::UnboundedSender<Bytes>>,
    sent: Vec<(u64, Bytes)>,
}

/// A running API server; it stops with the test's runtime.
pub struct ApiServer {
    address: SocketAddr,
    state: Arc<State>,
}

impl ApiServer {
    /// Starts the server on a free port; it accepts `token` only.
    pub async fn start(token: &str) -> ApiServer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a free port");
        let address = listener.local_addr().expect("bound");
        let state = Arc::new(State {
            token: Mutex::new(token.to_owned()),
            resource_version: AtomicU64::new(100),
            ..State::default()
        });
        let served = Arc::clone(&state);
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let state = Arc::clone(&served);
                tokio::spawn(async move {
                    let service = service_fn(move |request| {
                        let state = Arc::clone(&state);
                        async move { Ok::<_, Infallible>(answer(&state, request).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        ApiServer { address, state }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// Writes a kubeconfig for this server with `token` into `dir`, and returns its path.
    pub fn kubeconfig(&self, dir: &Path, token: &str) -> PathBuf {
        kubeconfig(dir, &self.url(), token)
    }

    /// The address the server listens on, as a proxy's `CONNECT` names it.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Writes a kubeconfig for this server with `token` into `dir` whose cluster is reached
    /// through the HTTP proxy at `proxy_url` (`proxy-url`), and returns its path.
    pub fn kubeconfig_through_proxy(&self, dir: &Path, token: &str, proxy_url: &str) -> PathBuf {
        let cluster = format!("server: \"{}\", proxy-url: \"{proxy_url}\"", self.url());
        kubeconfig_of(dir, &cluster, &format!("token: {token}"))
    }

    /// Writes a kubeconfig for this server into `dir` whose user's credential comes from the
    /// exec plugin `command` run with `args`, never interactively, and returns its path.
    pub fn kubeconfig_with_exec(&self, dir: &Path, command: &str, args: &[&str]) -> PathBuf {
        let exec = json!({
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": command,
            "args": args,
            "interactiveMode": "Never",
        });
        // JSON is YAML's flow syntax.
        kubeconfig_of_user(dir, &self.url(), &format!("exec: {exec}"))
    }

    /// Writes a kubeconfig for this server into `dir` whose user reads its token from
    /// `token_file` (`tokenFile`), and returns its path.
    pub fn kubeconfig_with_token_file(&self, dir: &Path, token_file: &Path) -> PathBuf {
        kubeconfig_of_user(
            dir,
            &self.url(),
            &format!("tokenFile: {:?}", token_file.display().to_string()),
        )
    }

    /// Adds or replaces the queue `name` with `spec`, telling every watch.
    pub fn put_queue(&self, name: &str, spec: Value) {
        self.put_queue_in_state(name, spec, "Open");
    }

    /// Adds or replaces the queue `name` with `spec` in `state` (`Open`, `Closed`), telling
    /// every watch.
    pub fn put_queue_in_state(&self, name: &str, spec: Value, state: &str) {
        let version = self.next_version();
        let queue = json!({
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": name, "resourceVersion": version.to_string()},
            "spec": spec,
            "status": {"state": state},
        });
        let added = self
            .state
            .queues
            .lock()
            .expect("queues")
            .insert(name.to_owned(), queue.clone())
            .is_none();
        self.tell(
            version,
            json!({"type": if added { "ADDED" } else { "MODIFIED" }, "object": queue}),
        );
    }

    /// Deletes the queue `name`, telling every watch.
    pub fn delete_queue(&self, name: &str) {
        let removed = self.state.queues.lock().expect("queues").remove(name);
        if let Some(mut queue) = removed {
            let version = self.next_version();
            queue["metadata"]["resourceVersion"] = json!(version.to_string());
            self.tell(version, json!({"type": "DELETED", "object": queue}));
        }
    }

    /// Sends every watch a bookmark at the current resource version.
    pub fn bookmark(&self) {
        let version = self.state.resource_version.load(Ordering::SeqCst);
        self.tell(
            version,
            json!({"type": "BOOKMARK", "object": {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue",
                "metadata": {"resourceVersion": version.to_string()},
            }}),
        );
    }

    /// Ends every watch stream now, as a restarted API server or a cut connection would.
    pub fn break_watches(&self) {
        self.state.watchers.lock().expect("watchers").open.clear();
    }

    /// How many watch streams are open.
    pub fn watches(&self) -> usize {
        let mut watchers = self.state.watchers.lock().expect("watchers");
        watchers.open.retain(|watcher| !watcher.is_closed());
        watchers.open.len()
    }

    /// Accepts `token` only from now on, as after a rotation.
    pub fn rotate_token(&self, token: &str) {
        *self.state.token.lock().expect("token") = token.to_owned();
    }

    /// Answers 403 to every request from now on (`false`: serves again).
    pub fn forbid(&self, forbidden: bool) {
        self.state.forbidden.store(forbidden, Ordering::SeqCst);
    }

    /// Answers 500 to every list of queues from now on (`false`: lists them again); watches
    /// are served.
    pub fn fail_lists(&self, failing: bool) {
        self.state.lists_failing.store(failing, Ordering::SeqCst);
    }

    /// Never answers a list of queues asked for from now on (`false`: answers the next ones);
    /// the request is read and counted, and its connection left open.
    pub fn hang_lists(&self, hanging: bool) {
        self.state.lists_hanging.store(hanging, Ordering::SeqCst);
    }

    /// Never begins the response to a watch of queues asked for from now on (`false`: answers
    /// the next ones), as an API server that accepted the request and stalled.
    pub fn hang_watches(&self, hanging: bool) {
        self.state.watches_hanging.store(hanging, Ordering::SeqCst);
    }

    /// Answers every watch of queues asked for from now on with 200 and an empty body, which
    /// ends the watch at once without an event (`false`: streams the next ones).
    pub fn end_watches_at_once(&self, ending: bool) {
        self.state.watches_empty.store(ending, Ordering::SeqCst);
    }

    /// How many watches of queues were asked for so far, answered or not.
    pub fn watches_asked(&self) -> usize {
        self.requests()
            .iter()
            .filter(|request| request.contains(QUEUES_PATH) && request.contains("watch="))
            .count()
    }

    /// How many lists of queues (not watches) were asked for so far, answered or not.
    pub fn lists(&self) -> usize {
        self.requests()
            .iter()
            .filter(|request| request.contains(QUEUES_PATH) && !request.contains("watch="))
            .count()
    }

    /// Adds the namespace `name` with `annotations`.
    pub fn put_namespace(&self, name: &str, annotations: Value) {
        self.state.namespaces.lock().expect("namespaces").insert(
            name.to_owned(),
            json!({
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": name, "annotations": annotations},
            }),
        );
    }

    /// Adds the namespace `team-a`, whose annotation names the queue `research`: the namespace
    /// the pod group and namespace tests read.
    pub fn put_team_a_in_research(&self) {
        self.put_namespace(
            "team-a",
            json!({"scheduling.volcano.sh/queue-name": "research"}),
        );
    }

    /// Delays every namespace answer by `delay`.
    pub fn delay_namespaces(&self, delay: Duration) {
        *self.state.namespace_delay.lock().expect("delay") = Some(delay);
    }

    /// The requests served so far: `METHOD path?query`.
    pub fn requests(&self) -> Vec<String> {
        self.state.requests.lock().expect("requests").clone()
    }

    fn next_version(&self) -> u64 {
        self.state.resource_version.fetch_add(1, Ordering::SeqCst) + 1
    }

    fn tell(&self, version: u64, event: Value) {
        let mut line = event.to_string();
        line.push('\n');
        let bytes = Bytes::from(line);
        let mut watchers = self.state.watchers.lock().expect("watchers");
        watchers.sent.push((version, bytes.clone()));
        watchers
            .open
            .retain(|watcher| watcher.send(bytes.clone()).is_ok());
    }
}

type Body = BoxBody<Bytes, Infallible>;

async fn answer(state: &State, request: Request<Incoming>) -> Response<Body> {
    let uri = request.uri().clone();
    state
        .requests
        .lock()
        .expect("requests")
        .push(format!("{} {uri}", request.method()));
    let presented = request
        .headers()
        .get(http::header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok());
    let expected = format!("Bearer {}", state.token.lock().expect("token"));
    if presented != Some(&expected) {
        return status(StatusCode::UNAUTHORIZED, "Unauthorized", "Unauthorized");
    }
    if state.forbidden.load(Ordering::SeqCst) {
        return status(
            StatusCode::FORBIDDEN,
            "Forbidden",
            "queues.scheduling.volcano.sh is forbidden: User \"system:serviceaccount:test\" cannot list resource",
        );
    }
    let path = uri.path();
    let query = uri.query().unwrap_or("");
    if path == QUEUES_PATH {
        if query
            .split('&')
            .any(|pair| pair == "watch=true" || pair == "watch=1")
        {
            if state.watches_hanging.load(Ordering::SeqCst) {
                return std::future::pending().await;
            }
            if state.watches_empty.load(Ordering::SeqCst) {
                return json_response(StatusCode::OK, full_bytes(Bytes::new()));
            }
            let since: u64 = query
                .split('&')
                .find_map(|pair| pair.strip_prefix("resourceVersion="))
                .and_then(|version| version.parse().ok())
                .unwrap_or(0);
            let (sender, receiver) = mpsc::unbounded_channel();
            let mut watchers = state.watchers.lock().expect("watchers");
            for (_, line) in watchers.sent.iter().filter(|(version, _)| *version > since) {
                let _ = sender.send(line.clone());
            }
            watchers.open.push(sender);
            drop(watchers);
            let stream = futures::stream::unfold(receiver, |mut receiver| async move {
                receiver
                    .recv()
                    .await
                    .map(|line| (Ok::<_, Infallible>(Frame::data(line)), receiver))
            });
            return json_response(StatusCode::OK, StreamBody::new(stream).boxed());
        }
        if state.lists_hanging.load(Ordering::SeqCst) {
            return std::future::pending().await;
        }
        if state.lists_failing.load(Ordering::SeqCst) {
            return status(
                StatusCode::INTERNAL_SERVER_ERROR,
                "InternalError",
                "Internal error occurred: etcdserver: request timed out",
            );
        }
        let items: Vec<Value> = state
            .queues
            .lock()
            .expect("queues")
            .values()
            .cloned()
            .collect();
        let version = state.resource_version.load(Ordering::SeqCst);
        let list = json!({
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "QueueList",
            "metadata": {"resourceVersion": version.to_string()},
            "items": items,
        });
        return json_response(StatusCode::OK, full(list));
    }
    if let Some(name) = path.strip_prefix(NAMESPACES_PATH) {
        let delay = *state.namespace_delay.lock().expect("delay");
        if let Some(delay) = delay {
            tokio::time::sleep(delay).await;
        }
        let found = state
            .namespaces
            .lock()
            .expect("namespaces")
            .get(name)
            .cloned();
        return match found {
            Some(namespace) => json_response(StatusCode::OK, full(namespace)),
            None => status(
                StatusCode::NOT_FOUND,
                "NotFound",
                &format!("namespaces \"{name}\" not found"),
            ),
        };
    }
    status(
        StatusCode::NOT_FOUND,
        "NotFound",
        "the server could not find the requested resource",
    )
}

fn full(value: Value) -> Body {
    full_bytes(Bytes::from(value.to_string()))
}

fn full_bytes(bytes: Bytes) -> Body {
    Full::new(bytes).boxed()
}

fn json_response(code: StatusCode, body: Body) -> Response<Body> {
    let mut response = Response::new(body);
    *response.status_mut() = code;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}

/// A `metav1.Status` failure, as the API server answers one.
fn status(code: StatusCode, reason: &str, message: &str) -> Response<Body> {
    json_response(
        code,
        full(json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": reason,
            "code": code.as_u16(),
        })),
    )
}

/// Writes a kubeconfig for the API server at `url` with `token` into `dir`, and returns its
/// path.
pub fn kubeconfig(dir: &Path, url: &str, token: &str) -> PathBuf {
    kubeconfig_of_user(dir, url, &format!("token: {token}"))
}

/// Writes a kubeconfig for the API server at `url` into `dir` whose user is `user` (the fields
/// of a flow mapping, such as `token: abc`), and returns its path.
fn kubeconfig_of_user(dir: &Path, url: &str, user: &str) -> PathBuf {
    kubeconfig_of(dir, &format!("server: \"{url}\""), user)
}

/// Writes a kubeconfig into `dir` whose cluster and user are `cluster` and `user` (the fields of
/// a flow mapping each), and returns its path.
fn kubeconfig_of(dir: &Path, cluster: &str, user: &str) -> PathBuf {
    let path = dir.join("kubeconfig");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster: {{{cluster}}}\n\
             users:\n- name: test\n  user: {{{user}}}\ncontexts:\n- name: test\n  \
             context: {{cluster: test, user: test}}\ncurrent-context: test\n"
        ),
    )
    .expect("write the kubeconfig");
    path
}
