//! Start, probes and graceful shutdown of the webhook server, and what fails the start.

use crate::serve_support;

use std::sync::Arc;

use dexaflow_admission::serve::{
    self, Answer, Handler, Kind, Ruling, ServeError, Server, Service, Unavailable,
};
use http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::json;
use serve_support::{Authority, eventually, probe, settings, start, start_with};
use tokio::sync::{Notify, mpsc};
use tokio::time::Instant;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_answer_on_plain_http_once_started() {
    let running = start().await;
    let address = running.server.probe_addr().expect("a probe listener");
    assert_eq!(probe(address, "/healthz").await, Some(StatusCode::OK));
    assert_eq!(probe(address, "/readyz").await, Some(StatusCode::OK));
    assert_eq!(
        probe(address, "/metrics").await,
        Some(StatusCode::NOT_FOUND)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_answer_any_method_but_get_and_head_405() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let running = start().await;
    let address = running.server.probe_addr().expect("a probe listener");

    let mut stream = tokio::net::TcpStream::connect(address)
        .await
        .expect("connect");
    stream
        .write_all(
            b"POST /healthz HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        )
        .await
        .expect("send");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.expect("read");

    assert!(
        answer.starts_with("HTTP/1.1 405 Method Not Allowed\r\n"),
        "{answer}"
    );
    assert!(answer.contains("\r\nallow: GET, HEAD\r\n"), "{answer}");
    assert_eq!(probe(address, "/healthz").await, Some(StatusCode::OK));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_waits_for_a_condition_given_to_the_front_door() {
    let synced = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = Arc::clone(&synced);
    let running = start_with(
        |_, _| {},
        move |builder| {
            builder.ready_when("the queue cache", move || {
                flag.load(std::sync::atomic::Ordering::SeqCst)
            })
        },
        None,
    )
    .await;
    let address = running.server.probe_addr().expect("a probe listener");

    assert_eq!(
        probe(address, "/readyz").await,
        Some(StatusCode::SERVICE_UNAVAILABLE)
    );
    assert_eq!(probe(address, "/healthz").await, Some(StatusCode::OK));
    synced.store(true, std::sync::atomic::Ordering::SeqCst);
    assert_eq!(probe(address, "/readyz").await, Some(StatusCode::OK));
}

/// A service whose requests wait until the test lets them go, telling the test they arrived.
#[derive(Clone)]
struct Gate {
    arrived: mpsc::UnboundedSender<()>,
    release: Arc<Notify>,
}

#[derive(Deserialize)]
struct Ticket {
    uid: String,
}

#[derive(Serialize)]
struct Stamp {
    uid: String,
    finished: bool,
}

impl Handler for Gate {
    type Request = Ticket;
    type Response = Stamp;

    fn uid(ticket: &Ticket) -> &str {
        &ticket.uid
    }

    async fn handle(
        &self,
        ticket: Ticket,
        _deadline: Instant,
    ) -> Result<Answer<Stamp>, Unavailable> {
        let released = self.release.notified();
        let _ = self.arrived.send(());
        released.await;
        Ok(Answer {
            ruling: Ruling::Allowed,
            body: Stamp {
                uid: ticket.uid,
                finished: true,
            },
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_turns_unready_stops_accepting_and_lets_requests_in_flight_finish() {
    let (arrived, mut arrivals) = mpsc::unbounded_channel();
    let release = Arc::new(Notify::new());
    let gate = Gate {
        arrived,
        release: Arc::clone(&release),
    };
    let running = start_with(
        |_, _| {},
        move |builder| builder.service(Service::new("/test/gate", Kind::Validating, gate)),
        None,
    )
    .await;
    let address = running.server.local_addr();
    let probes = running.server.probe_addr().expect("a probe listener");
    let client = running.client.clone();
    let in_flight = tokio::spawn(async move {
        client
            .post_json("/test/gate", &json!({"uid": "in-flight"}))
            .await
    });
    arrivals
        .recv()
        .await
        .expect("the request reached its handler");

    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = running.server;
    let serving = tokio::spawn(server.run_until(async {
        let _ = stopped.await;
    }));
    stop.send(()).expect("the server listens for its stop");
    eventually("readiness to go false", || async move {
        (probe(probes, "/readyz").await == Some(StatusCode::SERVICE_UNAVAILABLE)).then_some(())
    })
    .await;
    eventually("the listener to close", || async move {
        tokio::net::TcpStream::connect(address)
            .await
            .is_err()
            .then_some(())
    })
    .await;
    assert!(
        !in_flight.is_finished(),
        "the request in flight is still being answered"
    );
    assert!(!serving.is_finished(), "the server waits for it");

    release.notify_one();
    let answer = in_flight.await.expect("the client task");
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.json(), json!({"uid": "in-flight", "finished": true}));
    assert_eq!(
        serving.await.expect("the server task"),
        0,
        "no connection was cut"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_duplicate_path_is_an_error() {
    let error = start_error_with(
        |_, _| {},
        |builder| {
            builder.service(Service::new(
                serve::dags::PATH,
                Kind::Validating,
                serve::dags::DagValidation,
            ))
        },
    )
    .await;
    assert!(matches!(&error, ServeError::DuplicatePath { path } if path == "/dags/validate"));
}

/// Whether `path` has a service on `running`: a path without one is answered 404, whatever
/// the body.
async fn is_served(running: &serve_support::Running, path: &str) -> bool {
    running.client.post_json(path, &json!({})).await.status != StatusCode::NOT_FOUND
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enabled_admission_serves_only_the_listed_paths() {
    let enabled = serve::parse_enabled(" /pods/validate , ,/dags/validate ");
    assert_eq!(enabled, ["/pods/validate", "/dags/validate"]);
    let running = start_with(|_, _| {}, |builder| builder.enabled(enabled), None).await;
    assert!(is_served(&running, "/pods/validate").await);
    assert!(is_served(&running, "/dags/validate").await);
    assert!(!is_served(&running, "/pods/mutate").await);
    assert!(!is_served(&running, "/tasks/admit").await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unset_enabled_admission_serves_every_service_that_needs_no_cluster() {
    let running = start().await;
    for path in [
        "/dags/validate",
        "/pods/mutate",
        "/pods/validate",
        "/queues/mutate",
        "/tasks/admit",
    ] {
        assert!(is_served(&running, path).await, "{path}");
    }
    assert!(
        !is_served(&running, "/queues/validate").await,
        "a service that reads the cluster is served only when listed"
    );
    assert!(!is_served(&running, "/jobs/validate").await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_enabled_admission_fails_naming_it_and_every_service() {
    let error = start_error_with(
        |_, _| {},
        |builder| builder.enabled(serve::parse_enabled("/pods/mutate,/widgets/validate")),
    )
    .await;
    assert_eq!(
        error.to_string(),
        "enabled_admission: enabled admission \"/widgets/validate\" is not a service (the services are /pods/mutate, /pods/validate, /dags/validate, /jobs/validate, /jobs/mutate, /queues/validate, /queues/mutate, /podgroups/validate, /podgroups/mutate, /cronjobs/validate, /jobflows/validate, /hypernodes/validate, /tasks/admit)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_enabled_admission_fails_naming_the_setting() {
    let error =
        start_error(|settings, _| settings.enabled_admission = Some(serve::parse_enabled(" , ")))
            .await;
    assert!(
        matches!(error, ServeError::NothingEnabled { setting } if setting == "enabled_admission"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disabled_service_is_not_found_and_the_answer_names_the_setting_that_enables_it() {
    let running = start_with(
        |settings, _| settings.enabled_admission = Some(vec!["/pods/validate".to_owned()]),
        |registry| registry,
        None,
    )
    .await;
    let answer = running
        .client
        .post_json("/dags/validate", &json!({"api_version": "dexaflow.io/admission/v1", "uid": "u", "dag": {"dag_id": "d", "tasks": []}}))
        .await;
    let unknown = running
        .client
        .post_json("/widgets/validate", &json!({}))
        .await;

    assert_eq!(answer.status, StatusCode::NOT_FOUND);
    assert_eq!(
        answer.json()["error"],
        "the service at /dags/validate is not enabled: list it in enabled_admission"
    );
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    assert_eq!(unknown.json()["error"], "no service at this path");
}

async fn start_error(configure: impl FnOnce(&mut serve::Settings, &std::path::Path)) -> ServeError {
    start_error_with(configure, |builder| builder).await
}

async fn start_error_with(
    configure: impl FnOnce(&mut serve::Settings, &std::path::Path),
    build: impl FnOnce(serve::ServerBuilder) -> serve::ServerBuilder,
) -> ServeError {
    let dir = tempfile::tempdir().expect("a directory");
    let mut settings = settings(Authority::new().issue().write_to(dir.path()));
    configure(&mut settings, dir.path());
    build(Server::builder(settings))
        .start()
        .await
        .expect_err("the start fails")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_that_does_not_match_the_certificate_fails_the_start() {
    let other = Authority::new().issue();
    let error = start_error(|_, dir| {
        std::fs::write(dir.join("tls.key"), &other.key_pem).expect("write");
    })
    .await;
    assert!(matches!(error, ServeError::Key { .. }), "{error:?}");
    assert!(
        error
            .to_string()
            .contains("tls.key: the private key cannot serve"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_file_without_a_certificate_fails_the_start_naming_it() {
    let error = start_error(|_, dir| {
        std::fs::write(dir.join("tls.crt"), "not PEM").expect("write");
    })
    .await;
    assert!(
        error
            .to_string()
            .ends_with("tls.crt: expected a PEM certificate chain"),
        "{error}"
    );
}

/// Why the server does not start with a bearer token file holding `contents`.
async fn start_error_with_token_file(contents: &'static str) -> ServeError {
    start_error(move |settings, dir| {
        std::fs::write(dir.join("token"), contents).expect("write");
        settings.bearer_token_file = Some(dir.join("token"));
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_bearer_token_file_fails_the_start() {
    let error = start_error_with_token_file("\n").await;
    assert!(matches!(error, ServeError::EmptyToken { .. }), "{error:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bearer_token_no_header_can_carry_fails_the_start_without_showing_it() {
    let error = start_error_with_token_file("s3cret\nsecond-line\n").await;
    assert!(
        matches!(error, ServeError::TokenNotAHeader { .. }),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(message.contains("no client could present it"), "{message}");
    assert!(!message.contains("s3cret"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_address_in_use_fails_the_start_naming_it() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let address = taken.local_addr().expect("bound");
    let error = start_error(|settings, _| settings.listen = address).await;
    assert_eq!(
        error.to_string(),
        format!("listen: cannot listen on {address}")
    );
}

/// Whether a request over a connection presenting `identity` (a client certificate and its key,
/// or none) gets an answer.
async fn is_answered(
    running: &serve_support::Running,
    identity: Option<&serve_support::Pair>,
) -> bool {
    use rustls::pki_types::PrivateKeyDer;
    use rustls::pki_types::pem::PemObject;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut roots = rustls::RootCertStore::empty();
    roots.add(running.authority.der()).expect("the CA");
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_root_certificates(roots);
    let config = match identity {
        None => builder.with_no_client_auth(),
        Some(pair) => builder
            .with_client_auth_cert(
                vec![pair.der.clone()],
                PrivateKeyDer::from_pem_slice(pair.key_pem.as_bytes()).expect("a key"),
            )
            .expect("a client identity"),
    };
    let tcp = tokio::net::TcpStream::connect(running.server.local_addr())
        .await
        .expect("connect");
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let name = rustls::pki_types::ServerName::try_from("localhost").expect("a name");
    // TLS 1.3 reports a refused client certificate on the first read, not in the handshake.
    let Ok(mut stream) = connector.connect(name, tcp).await else {
        return false;
    };
    let request = b"GET /dags/validate HTTP/1.1\r\nhost: localhost\r\n\r\n";
    if stream.write_all(request).await.is_err() {
        return false;
    }
    let mut buffer = [0_u8; 12];
    matches!(stream.read(&mut buffer).await, Ok(read) if read > 0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_answers_only_clients_with_a_certificate_of_the_client_ca() {
    let clients = Authority::new();
    let running = start_with(
        |settings, dir| {
            std::fs::write(dir.join("clients.pem"), clients.pem()).expect("write");
            settings.client_ca_file = Some(dir.join("clients.pem"));
        },
        |registry| registry,
        None,
    )
    .await;
    assert!(
        is_answered(&running, Some(&clients.issue())).await,
        "a client of the CA"
    );
    assert!(
        !is_answered(&running, None).await,
        "a client without a certificate"
    );
    let stranger = Authority::new().issue();
    assert!(
        !is_answered(&running, Some(&stranger)).await,
        "a client of another CA"
    );
}
