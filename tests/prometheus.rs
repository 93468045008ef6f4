//! The Grafana dashboard, proven against a real Prometheus: two loads run with their exporters
//! on loopback, `loadtest` with synthetic hooks that produce every outcome but `cancelled`, and
//! `dispatch` with a workload of many tenants and DAGs through built-in hooks and a small buffer.
//! Prometheus scrapes both every second, and every panel's expression from
//! `grafana/dashboards/dexaflow-admission.json` must evaluate to at least one series. A scrape
//! of each must pass `promtool check metrics`, name no tenant, DAG or task of its load, and count
//! every outcome its load produced.
//!
//! A third load, `serve` with the same hooks, answers a steady stream of `/tasks/admit` and
//! `/pods/mutate` requests, and every panel of the dashboard's server row must give finite
//! values, not only series.
//!
//! Needs `prometheus` and `promtool` on PATH (Debian's `prometheus` package, which `.ci/run`
//! installs); without them the test fails rather than passing unseen.

mod serve_support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use dexaflow_admission::metrics::{
    AT_CAPACITY_TOTAL, BREAKER_STATE, OUTCOMES_TOTAL, SERVER_REQUESTS_TOTAL,
};
use serde_json::{Value, json};

const BINARY: &str = env!("CARGO_BIN_EXE_dexaflow-admission");
const DASHBOARD: &str = "grafana/dashboards/dexaflow-admission.json";
const EXAMPLE_PROMETHEUS_CONFIG: &str = "grafana/prometheus.yml";
/// How long Prometheus may take to start, scrape and hold enough samples for `rate`.
const DATA_DEADLINE: Duration = Duration::from_secs(45);
/// What `$__rate_interval` becomes: Grafana makes it at least four scrape intervals (1s here).
const RATE_INTERVAL: &str = "30s";

/// Six tenants, three DAGs each, five tasks each: 90 attempts through a buffer of 4. Every
/// name carries `zq`, which nothing else in a scrape does.
const TENANTS: usize = 6;
const DAGS: usize = 3;
const TASKS: usize = 5;
const MARKER: &str = "zq";

fn tenant(index: usize) -> String {
    format!("tenant{MARKER}{index}")
}

fn dag(index: usize) -> String {
    format!("dag{MARKER}{index}")
}

fn task(index: usize) -> String {
    format!("task{MARKER}{index}")
}

fn workload_names() -> Vec<String> {
    (0..TENANTS)
        .map(tenant)
        .chain((0..DAGS).map(dag))
        .chain((0..TASKS).map(task))
        .chain([format!("run{MARKER}")])
        .collect()
}

fn workload() -> String {
    let mut yaml = String::from("runs:\n");
    for t in 0..TENANTS {
        for d in 0..DAGS {
            yaml.push_str(&format!(
                "  - tenant: {}\n    dag_id: {}\n    run_id: run{MARKER}\n    tasks:\n",
                tenant(t),
                dag(d)
            ));
            for k in 0..TASKS {
                yaml.push_str(&format!(
                    "      - task_id: {}\n        image: ghcr.io/example/app:1\n        command: [\"true\"]\n",
                    task(k)
                ));
            }
        }
    }
    yaml
}

/// Tenant 0 is refused; tenant 1 is admitted with changes; tenants 2 and 3 are admitted; tenants
/// 4 and 5 are held for ten minutes, which keeps the run (and its exporter) going until the test
/// ends it. A buffer of 4 fills, so attempts are deferred at capacity too. (The held tenants
/// come last in key order, the order attempts are offered in, so that the held attempts offered
/// again on every tick do not crowd the others out of the buffer.)
fn config() -> String {
    format!(
        r#"scheduler:
  loop_interval_ms: 100
  dispatch:
    buffer_size: 4
    workers: 2
executor:
  type: "null"
execution:
  admission:
    hooks:
      - type: freeze
        name: freeze-held
        tenants: [{held0}, {held1}]
        after: 0s
        for: 10m
        reason: frozen for the test
      - type: deny
        name: deny-suspended
        match:
          tenants: [{refused}]
        reason: suspended for the test
      - type: placement
        name: place-gpu
        groups:
          - match:
              tenants: [{placed}]
            set:
              node_selector:
                pool: gpu
"#,
        held0 = tenant(4),
        held1 = tenant(5),
        refused = tenant(0),
        placed = tenant(1),
    )
}

/// The outcomes the `dispatch` load above produces, each of which its scrape must count.
const DISPATCH_PRODUCES: &[&str] = &["admit", "admit_with", "hold", "refuse"];

/// The `loadtest` load: long enough to outlive the test, which ends it. With `--fail-open` every
/// hook of the chain is called: changes, then errors, timeouts (20ms) and panics that each fail
/// open, a breaker that opens after 3 errors in a row and skips, then holds and refusals.
const LOADTEST_ARGS: &[&str] = &[
    "loadtest",
    "--duration",
    "10m",
    "--rate",
    "300",
    "--tenants",
    "20",
    "--buffer-size",
    "4",
    "--workers",
    "2",
    "--hook",
    "change:0.3",
    "--hook",
    "error:0.3",
    "--hook",
    "timeout:0.05",
    "--hook",
    "panic:0.05",
    "--hook",
    "hold:0.1",
    "--hook",
    "refuse:0.1",
    "--fail-open",
    "--timeout",
    "20ms",
    "--breaker-failures",
    "3",
    "--breaker-backoff",
    "500ms",
];

/// The outcomes the `loadtest` load produces, each of which its scrape must count.
const LOADTEST_PRODUCES: &[&str] = &[
    "admit",
    "admit_with",
    "hold",
    "refuse",
    "error",
    "timeout",
    "panic",
    "skipped",
    "fail_open",
];

/// Whether `scrape` holds a `loadtest` task id: `a` and nine digits.
fn has_loadtest_task_id(scrape: &str) -> bool {
    scrape
        .as_bytes()
        .windows(10)
        .any(|window| window[0] == b'a' && window[1..].iter().all(u8::is_ascii_digit))
}

/// A child process that is killed and reaped however the test ends.
struct Running {
    name: &'static str,
    child: Child,
    log: PathBuf,
}

impl Running {
    fn start(name: &'static str, command: &mut Command, log: PathBuf) -> Running {
        let file = std::fs::File::create(&log).expect("create a log file");
        let child = command
            .stdin(Stdio::null())
            .stdout(file.try_clone().expect("clone the log file"))
            .stderr(file)
            .spawn()
            .unwrap_or_else(|error| panic!("starting {name}: {error}"));
        Running { name, child, log }
    }

    /// Panics, with the end of the child's log, if it has exited.
    fn assert_running(&mut self) {
        if let Some(status) = self.child.try_wait().expect("poll the child") {
            panic!(
                "{} exited with {status}; its log ends:\n{}",
                self.name,
                self.log_tail()
            );
        }
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn require(tool: &str) {
    let found = Command::new(tool)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    assert!(
        found,
        "`{tool}` is not on PATH: `.ci/run` installs Debian's prometheus package when it is \
         missing (apt-get install -y prometheus); install it the same way to run this test"
    );
}

fn free_port() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("a bound address")
}

/// A plain HTTP/1.0 GET, so that no chunked body comes back: the status and the body.
fn get(address: SocketAddr, target: &str) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect_timeout(&address, Duration::from_secs(2))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        stream,
        "GET {target} HTTP/1.0\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    let malformed = || std::io::Error::other(format!("malformed response: {response:?}"));
    let (head, body) = response.split_once("\r\n\r\n").ok_or_else(malformed)?;
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(malformed)?;
    Ok((status, body.to_owned()))
}

fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|byte| match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                char::from(byte).to_string()
            }
            _ => format!("%{byte:02X}"),
        })
        .collect()
}

/// Evaluates `expr` now through Prometheus' HTTP API and returns its series.
fn query(prometheus: SocketAddr, expr: &str) -> Result<Vec<Value>, String> {
    let target = format!("/api/v1/query?query={}", percent_encode(expr));
    let (status, body) = get(prometheus, &target).map_err(|error| error.to_string())?;
    let answer: Value =
        serde_json::from_str(&body).map_err(|error| format!("{error}: {body:?}"))?;
    if status != 200 || answer["status"] != "success" {
        return Err(format!("HTTP {status}: {body}"));
    }
    answer["data"]["result"]
        .as_array()
        .cloned()
        .ok_or_else(|| format!("no result array: {body}"))
}

fn scrape(exporter: SocketAddr) -> String {
    let (status, body) = get(exporter, "/metrics").expect("scrape /metrics");
    assert_eq!(status, 200, "{body}");
    body
}

/// The value of the sample named exactly `series` (name and labels as rendered).
fn sample(scrape: &str, series: &str) -> Option<f64> {
    scrape.lines().find_map(|line| {
        let value = line.strip_prefix(series)?.strip_prefix(' ')?;
        value.parse().ok()
    })
}

/// Whether one series of a Prometheus instant query has a finite value.
fn is_finite(series: &Value) -> bool {
    series["value"][1]
        .as_str()
        .and_then(|value| value.parse::<f64>().ok())
        .is_some_and(f64::is_finite)
}

fn dashboard() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(DASHBOARD);
    let text = std::fs::read_to_string(&path).expect("read the dashboard");
    serde_json::from_str(&text).expect("the dashboard is JSON")
}

/// Every panel, rows' nested panels included.
fn panels(dashboard: &Value) -> Vec<&Value> {
    fn collect<'a>(panels: &'a Value, into: &mut Vec<&'a Value>) {
        for panel in panels.as_array().into_iter().flatten() {
            into.push(panel);
            collect(&panel["panels"], into);
        }
    }
    let mut all = Vec::new();
    collect(&dashboard["panels"], &mut all);
    all
}

/// Each panel's title with each of its expressions, Grafana's variables substituted.
fn panel_queries(dashboard: &Value) -> Vec<(String, String)> {
    let mut queries = Vec::new();
    for panel in panels(dashboard) {
        let title = panel["title"].as_str().unwrap_or("untitled").to_owned();
        let targets = panel["targets"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default();
        // A row only groups panels; every other panel shows at least one query, so none is
        // left unproved by having no target.
        assert!(
            panel["type"] == "row" || !targets.is_empty(),
            "panel {title:?} has no query"
        );
        for target in targets {
            let expr = target["expr"]
                .as_str()
                .unwrap_or_else(|| panic!("panel {title:?} has a target without an expr"));
            let expr = expr
                .replace("$__rate_interval", RATE_INTERVAL)
                .replace("$__interval", "1s")
                .replace("$__range", "5m");
            assert!(
                !expr.contains('$'),
                "panel {title:?} uses a variable the test does not substitute: {expr}"
            );
            queries.push((title.clone(), expr));
        }
    }
    queries
}

fn promtool_check(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new("promtool")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start promtool");
    let mut input = child.stdin.take().expect("promtool's stdin");
    input
        .write_all(stdin.unwrap_or_default().as_bytes())
        .expect("write to promtool");
    drop(input);
    child.wait_with_output().expect("promtool finishes")
}

/// Checks one load's scrape: `promtool check metrics` passes, no name of the load appears, and
/// every outcome it produced is counted.
fn check_scrape(load: &str, scrape: &str, names: &[String], produced: &[&str]) {
    let check = promtool_check(&["check", "metrics"], Some(scrape));
    assert!(
        check.status.success(),
        "promtool check metrics on the {load} scrape: {}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
    for name in names {
        assert!(
            !scrape.contains(name.as_str()),
            "the {load} scrape names {name:?}:\n{scrape}"
        );
    }
    for outcome in produced {
        let series = format!("{OUTCOMES_TOTAL}{{outcome=\"{outcome}\"}}");
        let count = sample(scrape, &series);
        assert!(
            count.is_some_and(|count| count > 0.0),
            "{series} is {count:?} in the {load} scrape, after a run that produced it:\n{scrape}"
        );
    }
}

/// The title of the dashboard's row for the webhook server; the panels after it are its.
const SERVER_ROW: &str = "Webhook server (serve)";

/// The titles of the panels in the server row: those after the row panel, up to the next row.
fn server_row_titles(dashboard: &Value) -> Vec<String> {
    let top = dashboard["panels"].as_array().expect("panels");
    let start = top
        .iter()
        .position(|panel| panel["type"] == "row" && panel["title"] == SERVER_ROW)
        .unwrap_or_else(|| panic!("no row titled {SERVER_ROW:?}"));
    top[start + 1..]
        .iter()
        .take_while(|panel| panel["type"] != "row")
        .filter_map(|panel| panel["title"].as_str().map(str::to_owned))
        .collect()
}

/// Starts `serve` on `listen` with `config`'s hooks (the file `dispatch` reads, shared) and a
/// certificate of `authority`, its exporter on `exporter`.
fn start_serve(
    dir: &Path,
    authority: &serve_support::Authority,
    listen: SocketAddr,
    exporter: SocketAddr,
) -> Running {
    let files = authority.issue().write_to(dir);
    let config_path = dir.join("serve.yaml");
    std::fs::write(
        &config_path,
        format!(
            "{}server:\n  listen: {listen}\n  tls: {{cert_file: {}, key_file: {}}}\nmetrics: {{listen: {exporter}}}\n",
            config(),
            files.cert_file.display(),
            files.key_file.display()
        ),
    )
    .expect("write the server's config");
    Running::start(
        "dexaflow-admission serve",
        Command::new(BINARY)
            .arg("serve")
            .arg("--config")
            .arg(&config_path)
            .current_dir(dir),
        dir.join("serve.log"),
    )
}

/// Sends `/tasks/admit` (tenants in turn, so that every hook acts) and `/pods/mutate` requests
/// to the server at `address`, one every 20 ms, until `stop` is set.
fn drive_serve(
    address: SocketAddr,
    ca: rustls::pki_types::CertificateDer<'static>,
    stop: Arc<AtomicBool>,
) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async move {
        let client = serve_support::Client::new(address, &ca);
        let pod = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "1", "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": "default", "operation": "CREATE", "userInfo": {"username": "load"},
            "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}});
        let mut index = 0;
        while !stop.load(Ordering::Relaxed) {
            let attempt = json!({"api_version": "dexaflow.io/admission/v1", "uid": "1",
                "tenant": tenant(index % 6), "dag_id": "d", "task_id": "t"});
            client.post_json("/tasks/admit", &attempt).await;
            client.post_json("/pods/mutate", &pod).await;
            index += 1;
            // Pacing the load, not waiting for anything.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
}

#[test]
fn every_dashboard_panel_has_data_in_a_real_prometheus() {
    require("prometheus");
    require("promtool");
    let started = Instant::now();
    let dir = tempfile::tempdir().expect("a temp dir");
    let workload_path = dir.path().join("workload.yaml");
    let config_path = dir.path().join("dexaflow.yaml");
    std::fs::write(&workload_path, workload()).expect("write the workload");
    std::fs::write(&config_path, config()).expect("write the config");

    let loadtest_exporter = free_port();
    let mut loadtest = Running::start(
        "dexaflow-admission loadtest",
        Command::new(BINARY)
            .args(LOADTEST_ARGS)
            .arg("--metrics-listen")
            .arg(loadtest_exporter.to_string())
            .current_dir(dir.path()),
        dir.path().join("loadtest.log"),
    );
    let dispatch_exporter = free_port();
    let mut dispatch = Running::start(
        "dexaflow-admission dispatch",
        Command::new(BINARY)
            .arg("dispatch")
            .arg("--config")
            .arg(&config_path)
            .arg("--workload")
            .arg(&workload_path)
            .arg("--metrics-listen")
            .arg(dispatch_exporter.to_string())
            .current_dir(dir.path()),
        dir.path().join("dispatch.log"),
    );

    let serve_listen = free_port();
    let serve_exporter = free_port();
    let authority = serve_support::Authority::new();
    let mut serve = start_serve(dir.path(), &authority, serve_listen, serve_exporter);
    let serve_deadline = Instant::now() + DATA_DEADLINE;
    while !std::fs::read_to_string(dir.path().join("serve.log"))
        .unwrap_or_default()
        .contains("serving https://")
    {
        serve.assert_running();
        assert!(Instant::now() < serve_deadline, "serve did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    let stop_driving = Arc::new(AtomicBool::new(false));
    let driver = std::thread::spawn({
        let ca = authority.der();
        let stop = Arc::clone(&stop_driving);
        move || drive_serve(serve_listen, ca, stop)
    });

    let prometheus_address = free_port();
    let prometheus_config = dir.path().join("prometheus.yml");
    std::fs::write(
        &prometheus_config,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: dexaflow-admission\n    static_configs:\n      - targets: [\"{loadtest_exporter}\", \"{dispatch_exporter}\", \"{serve_exporter}\"]\n"
        ),
    )
    .expect("write the Prometheus config");
    let mut prometheus = Running::start(
        "prometheus",
        Command::new("prometheus")
            .arg(format!("--config.file={}", prometheus_config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address={prometheus_address}"))
            .current_dir(dir.path()),
        dir.path().join("prometheus.log"),
    );

    // Wait for the condition every panel needs: both targets are up and a rate over each one's
    // hook calls has the two samples it takes.
    let ready = [
        r#"count(up{job="dexaflow-admission"} == 1) == 3"#.to_owned(),
        format!("count(sum by (instance) (rate({OUTCOMES_TOTAL}[{RATE_INTERVAL}])) > 0) == 2"),
        format!("sum(rate({SERVER_REQUESTS_TOTAL}[{RATE_INTERVAL}])) > 0"),
    ];
    let deadline = Instant::now() + DATA_DEADLINE;
    loop {
        loadtest.assert_running();
        dispatch.assert_running();
        serve.assert_running();
        prometheus.assert_running();
        let has =
            |expr: &String| query(prometheus_address, expr).is_ok_and(|series| !series.is_empty());
        if ready.iter().all(has) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no data in Prometheus within {DATA_DEADLINE:?}; {}",
            match query(prometheus_address, "up") {
                Ok(series) => format!(
                    "up is {series:?}; prometheus log:\n{}",
                    prometheus.log_tail()
                ),
                Err(error) => format!(
                    "prometheus answers {error}; its log:\n{}",
                    prometheus.log_tail()
                ),
            }
        );
        std::thread::sleep(Duration::from_millis(250));
    }

    let queries = panel_queries(&dashboard());
    assert!(
        queries.len() >= 6,
        "the dashboard has too few expressions: {queries:?}"
    );
    let failures: Vec<String> = queries
        .iter()
        .filter_map(|(title, expr)| match query(prometheus_address, expr) {
            // Every counter and gauge is exported at 0 from the start, so a series alone proves
            // only the name; a quantile over no calls is NaN. At least one finite value is
            // asked for (an outcome with no calls in the window may still show NaN beside it).
            Ok(series) if !series.iter().any(is_finite) => {
                Some(format!("{title}: {expr}: no finite value in {series:?}"))
            }
            Ok(_) => None,
            Err(error) => Some(format!("{title}: {expr}: {error}")),
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} panel expressions failed:\n{}",
        failures.len(),
        queries.len(),
        failures.join("\n")
    );

    let server_titles = server_row_titles(&dashboard());
    assert!(server_titles.len() >= 4, "{server_titles:?}");
    let not_finite: Vec<String> = queries
        .iter()
        .filter(|(title, _)| server_titles.contains(title))
        .filter_map(|(title, expr)| {
            let series = query(prometheus_address, expr).unwrap_or_default();
            let finite = !series.is_empty() && series.iter().all(is_finite);
            (!finite).then(|| format!("{title}: {expr}: {series:?}"))
        })
        .collect();
    assert!(
        not_finite.is_empty(),
        "server panels without finite values:\n{}",
        not_finite.join("\n")
    );
    stop_driving.store(true, Ordering::Relaxed);
    driver
        .join()
        .expect("the server load ran without a failed request");
    serve.assert_running();

    let scrape_loadtest = scrape(loadtest_exporter);
    let loadtest_names = ["tenant-".to_owned(), "loadtest".to_owned()];
    check_scrape(
        "loadtest",
        &scrape_loadtest,
        &loadtest_names,
        LOADTEST_PRODUCES,
    );
    assert!(
        !has_loadtest_task_id(&scrape_loadtest),
        "the loadtest scrape names a task:\n{scrape_loadtest}"
    );

    let scrape_dispatch = scrape(dispatch_exporter);
    let mut dispatch_names = workload_names();
    dispatch_names.push(MARKER.to_owned());
    check_scrape(
        "dispatch",
        &scrape_dispatch,
        &dispatch_names,
        DISPATCH_PRODUCES,
    );
    let deferred = sample(&scrape_dispatch, AT_CAPACITY_TOTAL);
    assert!(
        deferred.is_some_and(|count| count > 0.0),
        "{AT_CAPACITY_TOTAL} is {deferred:?} with 90 attempts through a buffer of 4"
    );

    loadtest.assert_running();
    dispatch.assert_running();
    eprintln!(
        "proved {} panel expressions against Prometheus in {:?}",
        queries.len(),
        started.elapsed()
    );
}

#[test]
fn the_example_prometheus_config_is_valid() {
    require("promtool");
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(EXAMPLE_PROMETHEUS_CONFIG);
    let check = promtool_check(&["check", "config", &path.display().to_string()], None);
    assert!(
        check.status.success(),
        "promtool check config {}: {}{}",
        path.display(),
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
}

#[test]
fn every_panel_reads_the_datasource_variable() {
    let dashboard = dashboard();
    let variables = dashboard["templating"]["list"]
        .as_array()
        .expect("templating variables");
    assert!(
        variables.iter().any(|v| v["name"] == "datasource"
            && v["type"] == "datasource"
            && v["query"] == "prometheus"),
        "no Prometheus datasource variable named datasource: {variables:?}"
    );
    let panels = panels(&dashboard);
    assert!(!panels.is_empty(), "the dashboard has no panels");
    for panel in panels {
        assert_eq!(
            panel["datasource"]["uid"], "${datasource}",
            "{}",
            panel["title"]
        );
        for target in panel["targets"].as_array().into_iter().flatten() {
            assert_eq!(
                target["datasource"]["uid"], "${datasource}",
                "{}",
                panel["title"]
            );
        }
    }
}

/// How a test hands the binary an address that is already taken.
#[derive(Clone, Copy)]
enum Taken {
    /// `dispatch --metrics-listen ADDR`.
    DispatchFlag,
    /// `dispatch` with `DEXAFLOW_METRICS_LISTEN=ADDR`, which sets `metrics.listen`.
    DispatchKey,
    /// `loadtest --metrics-listen ADDR`.
    LoadtestFlag,
}

/// Runs the binary with its exporter pointed at an address another socket listens on.
fn run_with_taken_address(how: Taken) -> (Output, SocketAddr) {
    let taken = TcpListener::bind("127.0.0.1:0").expect("bind a port");
    let address = taken.local_addr().expect("a bound address");
    let workload = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/workload.yaml");
    let mut command = Command::new(BINARY);
    match how {
        Taken::DispatchFlag | Taken::DispatchKey => {
            command.arg("dispatch").arg("--workload").arg(workload);
        }
        Taken::LoadtestFlag => {
            command.args(["loadtest", "--attempts", "10"]);
        }
    }
    match how {
        Taken::DispatchFlag | Taken::LoadtestFlag => {
            command.arg("--metrics-listen").arg(address.to_string());
        }
        Taken::DispatchKey => {
            command.env("DEXAFLOW_METRICS_LISTEN", address.to_string());
        }
    }
    let output = command.output().expect("run the binary");
    drop(taken);
    (output, address)
}

#[test]
fn an_exporter_address_in_use_fails_naming_the_flag_and_the_address() {
    let (output, address) = run_with_taken_address(Taken::DispatchFlag);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("--metrics-listen: cannot listen on {address}: ")),
        "{stderr}"
    );
    assert!(output.stdout.is_empty(), "dispatched anyway");
}

#[test]
fn an_exporter_address_in_use_fails_naming_the_key_and_the_address() {
    let (output, address) = run_with_taken_address(Taken::DispatchKey);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("metrics.listen: cannot listen on {address}: ")),
        "{stderr}"
    );
}

#[test]
fn a_loadtest_exporter_address_in_use_fails_naming_the_flag_and_the_address() {
    let (output, address) = run_with_taken_address(Taken::LoadtestFlag);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("--metrics-listen: cannot listen on {address}: ")),
        "{stderr}"
    );
    assert!(output.stdout.is_empty(), "ran the load test anyway");
}

#[test]
fn a_loadtest_scrape_has_every_hooks_breaker_gauge_at_zero_before_any_breaker_changes() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let exporter = free_port();
    // Neither hook ever fails, so neither breaker changes: only registration makes the gauges.
    let mut loadtest = Running::start(
        "dexaflow-admission loadtest",
        Command::new(BINARY)
            .args(["loadtest", "--duration", "10m", "--rate", "1"])
            .args(["--hook", "noop", "--hook", "refuse:0"])
            .arg("--metrics-listen")
            .arg(exporter.to_string()),
        dir.path().join("loadtest.log"),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    let scraped = loop {
        loadtest.assert_running();
        if let Ok((200, body)) = get(exporter, "/metrics") {
            break body;
        }
        assert!(
            Instant::now() < deadline,
            "the exporter did not answer within 30 s; the log ends:\n{}",
            loadtest.log_tail()
        );
        std::thread::sleep(Duration::from_millis(50));
    };

    for hook in ["noop#0", "refuse#1"] {
        assert_eq!(
            sample(&scraped, &format!("{BREAKER_STATE}{{hook=\"{hook}\"}}")),
            Some(0.0),
            "{hook}: {scraped}"
        );
    }
    let gauges = scraped
        .lines()
        .filter(|line| line.starts_with(&format!("{BREAKER_STATE}{{")))
        .count();
    assert_eq!(
        gauges, 2,
        "a gauge for a hook the run does not have: {scraped}"
    );
}
