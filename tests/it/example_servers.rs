//! The example webhook servers answer the crate's own webhook client by tenant, and every answer
//! they give holds against `schemas/answer.schema.json`: `examples/webhook_server.rs` (an
//! operator's Rust hook served through the front door) and `examples/webhook_server.py` (any
//! language: Python's standard library only).

#[path = "../../examples/webhook_server.rs"]
#[allow(dead_code)]
mod rust_example;

use crate::serve_support::{self, Authority, Client};
use crate::webhook_schema::{assert_holds, validator};

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use dexaflow_admission::admission::{Decision, Hook, Request, RequestEnvelope};
use dexaflow_admission::hooks::{Webhook, WebhookSpec};
use dexaflow_admission::serve::{Server, TlsFiles};
use http::StatusCode;

/// The tenants the examples decide on, one of each decision.
const TENANTS: [&str; 4] = ["acme", "gpu-lab", "finance", "umbrella"];

/// A CA, a serving certificate for 127.0.0.1 signed by it, and the files holding them.
struct Files {
    _dir: tempfile::TempDir,
    authority: Authority,
    ca_file: PathBuf,
    cert_file: PathBuf,
    key_file: PathBuf,
}

fn files() -> Files {
    let dir = tempfile::tempdir().expect("a directory");
    let authority = Authority::new();
    let tls = authority.issue().write_to(dir.path());
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, authority.pem()).expect("write the CA");
    Files {
        ca_file,
        cert_file: tls.cert_file,
        key_file: tls.key_file,
        authority,
        _dir: dir,
    }
}

/// Asks the server at `url` about each of [`TENANTS`] through the crate's webhook client.
async fn decisions(url: &str, ca_file: &Path) -> Vec<Decision> {
    let spec = WebhookSpec {
        ca_bundle: Some(ca_file.to_owned()),
        ..WebhookSpec::new("webhook", url)
    };
    let webhook = Webhook::new(&spec).expect("a valid webhook");
    let mut decisions = Vec::new();
    for tenant in TENANTS {
        let decision = webhook
            .admit(&Request::new(tenant, "etl", "load"))
            .await
            .unwrap_or_else(|error| panic!("{tenant}: {error}"));
        decisions.push(decision);
    }
    decisions
}

/// Asserts one decision of each kind, by tenant, with the changes and reasons the examples give.
fn assert_by_tenant(decisions: &[Decision]) {
    let [acme, gpu, finance, umbrella] = decisions else {
        panic!("four decisions, got {decisions:?}");
    };
    assert_eq!(acme, &Decision::Admit);
    let Decision::AdmitWith(changes) = gpu else {
        panic!("gpu-lab is admitted with changes, got {gpu:?}");
    };
    assert_eq!(
        changes.node_selector.get("pool").map(String::as_str),
        Some("gpu")
    );
    assert_eq!(
        changes.labels.get("team").map(String::as_str),
        Some("gpu-lab")
    );
    assert!(
        changes.service_account.is_none()
            && changes.priority_class.is_none()
            && changes.tolerations.is_empty()
            && changes.annotations.is_empty(),
        "nothing else changes: {changes:?}"
    );
    assert!(
        matches!(finance, Decision::Hold(reason) if reason.contains("quarter-end")),
        "{finance:?}"
    );
    assert!(
        matches!(umbrella, Decision::Refuse(reason) if reason.contains("suspended")),
        "{umbrella:?}"
    );
}

/// Posts each of [`TENANTS`] to `/tasks/admit` on `address` as raw JSON and asserts that every
/// answer is a 200 holding against the answer schema, with the uid of its request.
async fn assert_answers_hold_against_the_schema(address: SocketAddr, files: &Files) {
    let client = Client::new(address, &files.authority.der());
    let schema = validator("answer.schema.json");
    for (index, tenant) in TENANTS.iter().enumerate() {
        let uid = format!("uid-{index}");
        let call = RequestEnvelope::new(uid.clone(), Request::new(*tenant, "etl", "load"));
        let answer = client
            .post_json(
                "/tasks/admit",
                &serde_json::to_value(&call).expect("encodes"),
            )
            .await;
        assert_eq!(answer.status, StatusCode::OK, "{tenant}");
        let body = answer.json();
        assert_holds(&schema, &body);
        assert_eq!(body["uid"], uid.as_str());
    }
}

/// The Rust example, started through the front door on 127.0.0.1 with `files`' certificate.
async fn start_rust_example(files: &Files) -> Server {
    let settings = serve_support::settings(TlsFiles {
        cert_file: files.cert_file.clone(),
        key_file: files.key_file.clone(),
    });
    rust_example::server(settings, Duration::ZERO)
        .start()
        .await
        .expect("the example starts")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rust_example_server_answers_the_webhook_client_by_tenant() {
    let files = files();
    let server = start_rust_example(&files).await;
    let url = format!("https://{}/tasks/admit", server.local_addr());

    assert_by_tenant(&decisions(&url, &files.ca_file).await);
    assert_answers_hold_against_the_schema(server.local_addr(), &files).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rust_example_server_serves_no_pod_service() {
    let files = files();
    let server = start_rust_example(&files).await;
    let client = Client::new(server.local_addr(), &files.authority.der());

    let answer = client
        .post_json("/pods/mutate", &serde_json::json!({}))
        .await;

    assert_eq!(answer.status, StatusCode::NOT_FOUND);
}

/// The Python example, running; killed when dropped.
struct PythonServer {
    child: Child,
    address: SocketAddr,
}

impl PythonServer {
    /// Starts the example on a free port, or `None` when this machine has no `python3`.
    fn start(files: &Files) -> Option<PythonServer> {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/webhook_server.py");
        let mut child = match Command::new("python3")
            .arg(script)
            .args(["--listen", "127.0.0.1:0", "--cert"])
            .arg(&files.cert_file)
            .arg("--key")
            .arg(&files.key_file)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
        {
            Ok(child) => child,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return None,
            Err(error) => panic!("starting python3: {error}"),
        };
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("piped"))
            .read_line(&mut line)
            .expect("the first line");
        // "serving https://127.0.0.1:PORT/tasks/admit"
        let address = line
            .trim()
            .strip_prefix("serving https://")
            .and_then(|rest| rest.strip_suffix("/tasks/admit"))
            .and_then(|address| address.parse().ok())
            .unwrap_or_else(|| panic!("the address on the first line, got {line:?}"));
        Some(PythonServer { child, address })
    }
}

impl Drop for PythonServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_example_server_answers_the_webhook_client_by_tenant() {
    let files = files();
    let Some(server) = PythonServer::start(&files) else {
        eprintln!("no python3 on this machine: the Python example is not run");
        return;
    };
    let url = format!("https://{}/tasks/admit", server.address);

    assert_by_tenant(&decisions(&url, &files.ca_file).await);
    assert_answers_hold_against_the_schema(server.address, &files).await;
}
