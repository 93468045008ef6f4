//! The `serve` subcommand's wiring: what it says when it cannot start, what it exports, what it
//! logs.

use crate::serve_support;

use std::path::Path;
use std::process::Command;

use serve_support::{Authority, Client, Serving, get};

use crate::processes::BINARY;

/// Runs `serve` with a config naming certificate files in `dir` (which may not exist) and
/// `extra` arguments; returns the exit code and standard error.
fn serve(dir: &std::path::Path, extra: &[&str]) -> (Option<i32>, String) {
    serve_with_env(dir, extra, &[])
}

/// [`serve`] with the variables `env` set.
fn serve_with_env(
    dir: &std::path::Path,
    extra: &[&str],
    env: &[(&str, &Path)],
) -> (Option<i32>, String) {
    let config = dir.join("config.yaml");
    let text = format!(
        "server:\n  listen: 127.0.0.1:0\n  tls: {{cert_file: {0}/tls.crt, key_file: {0}/tls.key}}\nmetrics: {{listen: 127.0.0.1:0}}\n",
        dir.display()
    );
    std::fs::write(&config, text).expect("write the config");
    let output = Command::new(BINARY)
        .arg("serve")
        .arg("--config")
        .arg(&config)
        .args(extra)
        .envs(env.iter().copied())
        .output()
        .expect("run the binary");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn an_unknown_enabled_admission_path_fails_the_start_naming_the_flag() {
    let dir = tempfile::tempdir().expect("a directory");
    // Usable files, checked first: the path is then what is wrong.
    Authority::new().issue().write_to(dir.path());
    let (code, stderr) = serve(
        dir.path(),
        &["--enabled-admission", "/pods/mutate, /widgets/validate"],
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains(
            "--enabled-admission: enabled admission \"/widgets/validate\" is not a service"
        ),
        "{stderr}"
    );
}

#[test]
fn a_mistyped_path_beside_a_cluster_reading_one_is_reported_before_the_cluster_is_reached() {
    let dir = tempfile::tempdir().expect("a directory");
    Authority::new().issue().write_to(dir.path());
    let kubeconfig = dir.path().join("no-such-kubeconfig");
    let (code, stderr) = serve_with_env(
        dir.path(),
        &["--enabled-admission", "/jobs/validate,/jobs/valdate"],
        &[("DEXAFLOW_SERVER_KUBECONFIG", &kubeconfig)],
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("enabled admission \"/jobs/valdate\" is not a service"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("no-such-kubeconfig"),
        "the cluster was not reached: {stderr}"
    );
}

#[test]
fn a_missing_certificate_file_fails_the_start_naming_it() {
    let dir = tempfile::tempdir().expect("a directory");
    let (code, stderr) = serve(dir.path(), &[]);
    assert_eq!(code, Some(2), "{stderr}");
    for (key, file) in [
        ("server.tls.cert_file", "tls.crt"),
        ("server.tls.key_file", "tls.key"),
    ] {
        let line = format!("{key}: reading {}: ", dir.path().join(file).display());
        assert!(stderr.contains(&line), "{line:?} missing from\n{stderr}");
    }
}

#[test]
fn an_empty_certificate_and_an_empty_key_are_each_reported() {
    let dir = tempfile::tempdir().expect("a directory");
    std::fs::write(dir.path().join("tls.crt"), "").expect("write");
    std::fs::write(dir.path().join("tls.key"), "").expect("write");

    let (code, stderr) = serve(dir.path(), &[]);

    assert_eq!(code, Some(2), "{stderr}");
    for (key, file, what) in [
        ("server.tls.cert_file", "tls.crt", "a PEM certificate chain"),
        ("server.tls.key_file", "tls.key", "a PEM private key"),
    ] {
        let line = format!("{key}: {}", dir.path().join(file).display());
        assert!(
            stderr
                .lines()
                .any(|error| error.starts_with(&line) && error.contains(what)),
            "{line:?} with {what:?} missing from\n{stderr}"
        );
    }
    assert!(!stderr.contains("serving"), "{stderr}");
}

#[test]
fn a_listen_address_in_use_fails_the_start_naming_its_key() {
    let dir = tempfile::tempdir().expect("a directory");
    Authority::new().issue().write_to(dir.path());
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let address = taken.local_addr().expect("bound").to_string();

    for (variable, key) in [
        ("DEXAFLOW_SERVER_LISTEN", "server.listen"),
        ("DEXAFLOW_SERVER_PROBE_LISTEN", "server.probe_listen"),
    ] {
        let (code, stderr) = serve_with_env(dir.path(), &[], &[(variable, Path::new(&address))]);

        assert_eq!(code, Some(2), "{stderr}");
        let line = format!("{key}: cannot listen on {address}");
        assert!(stderr.contains(&line), "{line:?} missing from\n{stderr}");
    }
}

#[test]
fn a_kubeconfig_that_cannot_be_read_is_reported_against_server_kubeconfig() {
    let dir = tempfile::tempdir().expect("a directory");
    Authority::new().issue().write_to(dir.path());
    let kubeconfig = dir.path().join("no-such-kubeconfig");

    let (code, stderr) = serve_with_env(
        dir.path(),
        &["--enabled-admission", "/jobs/validate"],
        &[("DEXAFLOW_SERVER_KUBECONFIG", &kubeconfig)],
    );

    assert_eq!(code, Some(2), "{stderr}");
    let line = format!("server.kubeconfig: kubeconfig {}", kubeconfig.display());
    assert!(stderr.contains(&line), "{line:?} missing from\n{stderr}");
    assert!(!stderr.contains("KUBECONFIG:"), "{stderr}");
}

#[test]
fn a_bad_tls_file_fails_the_start_before_the_metrics_exporter_listens() {
    let dir = tempfile::tempdir().expect("a directory");
    // Missing files, then a certificate and key that are not PEM.
    let (code, stderr) = serve(dir.path(), &[]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(!stderr.contains("metrics: listening"), "{stderr}");
    std::fs::write(dir.path().join("tls.crt"), "not a certificate").expect("write");
    std::fs::write(dir.path().join("tls.key"), "not a key").expect("write");
    let (code, stderr) = serve(dir.path(), &[]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("tls.crt"), "{stderr}");
    assert!(!stderr.contains("metrics: listening"), "{stderr}");
}

#[test]
fn a_listen_address_in_use_fails_the_start_without_announcing_the_metrics_listener() {
    let dir = tempfile::tempdir().expect("a directory");
    Authority::new().issue().write_to(dir.path());
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let address = taken.local_addr().expect("bound").to_string();

    let (code, stderr) = serve_with_env(
        dir.path(),
        &[],
        &[("DEXAFLOW_SERVER_LISTEN", Path::new(&address))],
    );

    assert_eq!(code, Some(2), "{stderr}");
    let line = format!("server.listen: cannot listen on {address}");
    assert!(stderr.contains(&line), "{line:?} missing from\n{stderr}");
    assert!(!stderr.contains("metrics: listening"), "{stderr}");
}

/// Writes a `serve` config for 127.0.0.1 port 0 with a certificate of `authority` in `dir`,
/// the exporter on port 0, and `extra` lines in the `server` section.
fn config(authority: &Authority, dir: &Path, extra: &str) -> std::path::PathBuf {
    let files = authority.issue().write_to(dir);
    let path = dir.join("serve.yaml");
    std::fs::write(
        &path,
        format!(
            "server:\n  listen: 127.0.0.1:0\n  tls: {{cert_file: {}, key_file: {}{extra}}}\nmetrics: {{listen: 127.0.0.1:0}}\n",
            files.cert_file.display(),
            files.key_file.display(),
        ),
    )
    .expect("write the config");
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_exports_the_hook_and_server_metrics_but_no_dispatch_gauges() {
    let dir = tempfile::tempdir().expect("a directory");
    let serving = Serving::start(&config(&Authority::new(), dir.path(), ""));
    let line = serving.wait_for_stderr("metrics: listening on http://");
    let url = line
        .trim()
        .strip_prefix("metrics: listening on http://")
        .expect("a URL");
    let (address, path) = url.split_once('/').expect("a path");

    let (status, scrape) = get(address.parse().expect("an address"), &format!("/{path}"))
        .await
        .expect("a scrape");

    assert_eq!(status, http::StatusCode::OK);
    assert!(
        scrape.contains("dexaflow_admission_outcomes_total"),
        "{scrape}"
    );
    assert!(
        scrape.contains("dexaflow_server_requests_in_flight"),
        "{scrape}"
    );
    assert!(!scrape.contains("dexaflow_dispatch_"), "{scrape}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_client_certificate_is_logged_naming_the_peer_and_the_tls_error() {
    let dir = tempfile::tempdir().expect("a directory");
    let authority = Authority::new();
    let clients = Authority::new();
    let ca = dir.path().join("clients.pem");
    std::fs::write(&ca, clients.pem()).expect("write the client CA");
    let serving = Serving::start(&config(
        &authority,
        dir.path(),
        &format!(", client_ca_file: {}", ca.display()),
    ));
    assert!(
        !serving.stderr().contains("client certificate refused"),
        "{}",
        serving.stderr()
    );
    // A client with no certificate: the server's handshake fails.
    let client = Client::new(serving.socket_addr(), &authority.der());

    let (peer, _) = client.try_connect().await;

    let line = serving.wait_for_stderr("client certificate refused");
    assert!(line.contains("WARN"), "{line}");
    assert!(line.contains(&peer.to_string()), "{line} names {peer}");
    assert!(line.to_lowercase().contains("certificate"), "{line}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_signal_while_serve_drains_exits_at_once_with_130() {
    use tokio::io::AsyncWriteExt;
    let dir = tempfile::tempdir().expect("a directory");
    let authority = Authority::new();
    let mut serving = Serving::start(&config(&authority, dir.path(), ""));
    let metrics = serving
        .wait_for_stderr("metrics: listening on http://")
        .trim()
        .strip_prefix("metrics: listening on http://")
        .and_then(|url| url.split_once('/'))
        .map(|(address, _)| address.parse().expect("an address"))
        .expect("the exporter's address");
    // A request whose body never ends: the drain after the first signal waits for it.
    let client = Client::new(serving.socket_addr(), &authority.der());
    let mut stream = client.connect().await;
    stream
        .write_all(
            b"POST /dags/validate HTTP/1.1\r\nhost: local\r\ncontent-type: application/json\r\n\
              content-length: 100\r\n\r\n{",
        )
        .await
        .expect("write");
    stream.flush().await.expect("flush");
    serve_support::eventually("the request in flight", || async {
        let (_, scrape) = get(metrics, "/metrics").await?;
        (serve_support::sample(&scrape, "dexaflow_server_requests_in_flight") == Some(1.0))
            .then_some(())
    })
    .await;

    serving.signal(rustix::process::Signal::TERM);
    let line = serving.wait_for_stderr("stopping:");
    assert!(
        line.contains("for 15s at most (a second Ctrl-C exits at once)"),
        "{line}"
    );
    serving.signal(rustix::process::Signal::INT);

    let status = serving.wait_for_exit();
    assert_eq!(status.code(), Some(130), "{}", serving.stderr());
}

/// How many threads `serve` says it serves connections on, in its log line on listening.
fn connection_threads(serving: &Serving) -> usize {
    let line = serving.wait_for_stderr("webhook server listening");
    line.split_whitespace()
        .find_map(|field| field.strip_prefix("connection_threads="))
        .and_then(|count| count.parse().ok())
        .unwrap_or_else(|| panic!("no thread count in {line:?}"))
}

#[test]
fn serve_serves_connections_on_as_many_threads_as_server_worker_threads_says() {
    for threads in [1, 3] {
        let dir = tempfile::tempdir().expect("a directory");
        let path = config(&Authority::new(), dir.path(), "");
        let text = std::fs::read_to_string(&path).expect("read the config");
        std::fs::write(
            &path,
            text.replace(
                "server:\n",
                &format!("server:\n  worker_threads: {threads}\n"),
            ),
        )
        .expect("write the config");

        let serving = Serving::start_with_env(&path, &[("RUST_LOG", "info")]);

        assert_eq!(connection_threads(&serving), threads, "{threads}");
    }
}
