//! The Grafana dashboard, proven against a real Prometheus. Four loads run with their exporters
//! on loopback port 0 (each prints the address it bound on stderr, and the test reads it there):
//! `loadtest` with synthetic hooks that produce every outcome but `cancelled`; a second, `held`
//! `loadtest` whose first hook always errors, so that its breaker opens and stays open, and whose
//! second never answers, so that its 2 workers stay busy and 4 attempts wait in its buffer of 5;
//! `dispatch` with a workload of many tenants and DAGs through built-in hooks and a small buffer;
//! and `serve` with the same hooks, answering a steady stream of `/tasks/admit`, `/pods/mutate`
//! and `/queues/validate` requests, one at a time, while 3 more are kept stalled in flight and
//! the test changes its resource groups file and its certificate. `serve` watches the queues of
//! a test API server on loopback, which the test makes refuse the watch for a while once the
//! cache has synced, so that the cache's failures are counted while it serves its last state.
//!
//! Prometheus scrapes all four every second. The test waits on Prometheus' own readiness and on
//! every target's health, sees the reload panels read 0 before it changes any file, then polls
//! every expression of every panel of `grafana/dashboards/dexaflow-admission.json` until each
//! has returned finite values that agree with what the loads did: while all run, an outcome
//! produced has a rate above 0 and one never produced 0, the opened breaker reads 2 and the
//! breakers that never count a failure 0, and each reload rate is above 0 with no failed one.
//! Then the loads that move the gauges end (the steady loads, whose targets Prometheus must see
//! down, and the server's steady requests), and the gauge panels must read exactly what is held:
//! buffer depth 4, capacity 5, busy workers 2, requests in flight 3. A panel or expression
//! missing from the dashboard, a target without an `expr`, or a panel the test has no check for
//! fails the test. A scrape of the two steady dispatching loads must pass `promtool check
//! metrics`, name no tenant, DAG or task of its load, and count every outcome its load produced.
//!
//! Needs `prometheus` and `promtool` on PATH (Debian's `prometheus` package, which `.ci/run`
//! installs); without them the test fails rather than passing unseen.

use crate::apiserver::ApiServer;
use crate::serve_support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use dexaflow_admission::admission::{Request, RequestEnvelope};
use dexaflow_admission::metrics::{
    AT_CAPACITY_TOTAL, BREAKER_STATE, CACHE_SYNCED, CACHE_WATCH_FAILURES_TOTAL, OUTCOMES_TOTAL,
};
use serde_json::{Value, json};
use serve_support::sample;

use crate::processes::{BINARY, poll_until};
const DASHBOARD: &str = "grafana/dashboards/dexaflow-admission.json";
const EXAMPLE_PROMETHEUS_CONFIG: &str = "grafana/prometheus.yml";
/// How long the loads and Prometheus may take to start and see every target up.
const DATA_DEADLINE: Duration = Duration::from_secs(45);
/// How long every panel expression may take to agree with the loads, once every target is up.
const POLL_DEADLINE: Duration = Duration::from_secs(60);
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

/// The `loadtest` load: long enough to outlive the test, which ends it. A first hook sleeping
/// 10 ms keeps its two workers busy and its buffer of 4 full at 300 attempts a second. With
/// `--fail-open` every hook of the chain is called: changes, then errors, timeouts (20ms) and panics that each fail
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
    "sleep:10ms",
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

/// A port taken and released at once: only for Prometheus, which does not print the port it
/// bound when given port 0. Every server of the crate binds port 0 and says where.
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

/// The resource groups `serve` starts with, and those the test changes them to.
const GPU_GROUPS: &str = "resourceGroups:\n  - resourceGroup: gpu\n    object: {key: namespace, value: [ml]}\n    labels: {pool: gpu}\n";
const SPOT_GROUPS: &str = "resourceGroups:\n  - resourceGroup: spot\n    object: {key: namespace, value: [ml]}\n    labels: {pool: spot}\n";

/// Replaces `path` whole, as a config management tool does.
fn replace(path: &Path, text: &str) {
    let temporary = path.with_extension("new");
    std::fs::write(&temporary, text).expect("write");
    std::fs::rename(&temporary, path).expect("rename");
}

/// The bearer token of the test API server `serve` reads queues from.
const CLUSTER_TOKEN: &str = "dashboard-queue-reader";
/// The services `serve` answers: the two the steady load drives besides `/tasks/admit`, and
/// one that reads the queue cache.
const SERVED: &str = "[/tasks/admit, /pods/mutate, /queues/validate]";

/// Starts `serve` in `dir` with `config`'s hooks (the ones `dispatch` reads), a certificate of
/// `authority`, a resource groups file and the cluster of `kubeconfig`, the server and its
/// exporter on port 0.
fn start_serve(dir: &Path, authority: &serve_support::Authority, kubeconfig: &Path) -> Running {
    let files = authority
        .issue()
        .mount_as_secret(dir, "..2026_12_03_00_00_00.1");
    let groups = dir.join("groups.yaml");
    std::fs::write(&groups, GPU_GROUPS).expect("write the resource groups");
    let config_path = dir.join("serve.yaml");
    std::fs::write(
        &config_path,
        format!(
            "{}server:\n  listen: 127.0.0.1:0\n  tls: {{cert_file: {}, key_file: {}}}\n  resource_groups_file: {}\n  kubeconfig: {}\n  enabled_admission: {SERVED}\nmetrics: {{listen: 127.0.0.1:0}}\n",
            config(),
            files.cert_file.display(),
            files.key_file.display(),
            groups.display(),
            kubeconfig.display()
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

/// Runs `future` to its end on a runtime of its own, for a thread that drives a server.
fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(future)
}

/// Sends `/tasks/admit` (tenants in turn, so that every hook acts), `/pods/mutate` and
/// `/queues/validate` requests to the server at `address`, one every 20 ms, until `stop` is set.
fn drive_serve(
    address: SocketAddr,
    ca: rustls::pki_types::CertificateDer<'static>,
    stop: Arc<AtomicBool>,
) {
    block_on(async move {
        let client = serve_support::Client::new(address, &ca);
        let pod = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "1", "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": "default", "operation": "CREATE", "userInfo": {"username": "load"},
            "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}});
        let queue = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "2", "kind": {"group": "scheduling.volcano.sh", "version": "v1beta1", "kind": "Queue"},
            "resource": {"group": "scheduling.volcano.sh", "version": "v1beta1", "resource": "queues"},
            "name": "team", "operation": "CREATE", "userInfo": {"username": "load"},
            "object": {"metadata": {"name": "team"}, "spec": {"weight": 1}}}});
        let mut index = 0;
        while !stop.load(Ordering::Relaxed) {
            let attempt = serde_json::to_value(RequestEnvelope::new(
                "1",
                Request::new(tenant(index % 6), "d", "t"),
            ))
            .expect("an attempt is JSON");
            client.post_json("/tasks/admit", &attempt).await;
            client.post_json("/pods/mutate", &pod).await;
            client.post_json("/queues/validate", &queue).await;
            index += 1;
            // Pacing the load, not waiting for anything.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
}

/// Waits, bounded by `deadline`, until `log` holds a line starting with `prefix`, and returns the
/// address that follows it (up to the next `/` or the line's end).
fn address_in_log(running: &mut Running, prefix: &str, deadline: Instant) -> SocketAddr {
    poll_until(deadline, Duration::from_millis(20), || {
        running.assert_running();
        let text = std::fs::read_to_string(&running.log).unwrap_or_default();
        text.lines()
            .find_map(|line| {
                let rest = line.strip_prefix(prefix)?;
                rest.split('/').next()?.parse().ok()
            })
            .ok_or_else(|| {
                format!(
                    "{} printed no {prefix:?} line; its log ends:\n{}",
                    running.name,
                    running.log_tail()
                )
            })
    })
}

/// The line every command that exports metrics prints on stderr, before the bound address.
const METRICS_LINE: &str = "metrics: listening on http://";

/// Starts the binary with `args`, its exporter on port 0, and returns it with the address the
/// exporter bound, read from its stderr line.
fn start_with_exporter(
    name: &'static str,
    dir: &Path,
    log: &str,
    args: &[&str],
    deadline: Instant,
) -> (Running, SocketAddr) {
    let mut running = Running::start(
        name,
        Command::new(BINARY)
            .args(args)
            .args(["--metrics-listen", "127.0.0.1:0"])
            .current_dir(dir),
        dir.join(log),
    );
    let exporter = address_in_log(&mut running, METRICS_LINE, deadline);
    (running, exporter)
}

/// Admission workers the `held` load runs, every one of them held busy by a call that never
/// answers. The four held values differ from each other and from every buffer of the other
/// loads, so that a panel reading the wrong gauge, or a depth read as the capacity, cannot
/// agree by chance.
const HELD_WORKERS: usize = 2;
/// The `held` load's attempts that wait in its buffer behind the busy workers.
const HELD_QUEUED: usize = 4;
/// The `held` load's buffer capacity, one more than it holds.
const HELD_BUFFER: usize = 5;
/// Requests kept stalled in flight on `serve`.
const STALLED: usize = 3;

/// The `held` load: as many attempts as its workers hold and [`HELD_QUEUED`] more, through two
/// hooks. The first always errors: its breaker opens at the first failure and stays open for
/// ten minutes, so its gauge reads 2 (open), and `--fail-open` lets every attempt on to the
/// second, which never answers within its ten-minute timeout. Each worker stays busy with one
/// attempt and the others wait in the buffer for the rest of the test. The workers share the
/// dispatcher's thread, so the buffer's depth is set in the order it changes.
fn held_args() -> Vec<String> {
    let attempts = (HELD_WORKERS + HELD_QUEUED).to_string();
    let (workers, buffer) = (HELD_WORKERS.to_string(), HELD_BUFFER.to_string());
    [
        "loadtest",
        "--attempts",
        &attempts,
        "--rate",
        "0",
        "--buffer-size",
        &buffer,
        "--workers",
        &workers,
        "--worker-threads",
        "0",
        "--hook",
        "error:1",
        "--hook",
        "timeout:1",
        "--fail-open",
        "--timeout",
        "10m",
        "--chain-timeout",
        "10m",
        "--breaker-failures",
        "1",
        "--breaker-backoff",
        "10m",
        "--breaker-max-backoff",
        "10m",
    ]
    .map(str::to_owned)
    .to_vec()
}

/// The hook whose breaker the `held` load opens, as the gauge names it.
const OPENED_HOOK: &str = "error#0";
/// The `held` load's hook that never answers: no call of it ever ends, so its breaker never
/// counts one and stays closed.
const PENDING_HOOK: &str = "timeout#1";
/// The hooks of the `dispatch` and `serve` config, none of which ever fails.
const NEVER_FAILING_HOOKS: &[&str] = &["freeze-held", "deny-suspended", "place-gpu"];

/// Polls Prometheus' `/api/v1/targets` until every one of `count` targets is up, bounded.
fn wait_for_targets(
    prometheus: &mut Running,
    address: SocketAddr,
    count: usize,
    deadline: Instant,
) {
    let mut last = String::new();
    poll_until(deadline, Duration::from_millis(100), || {
        prometheus.assert_running();
        if let Ok((200, body)) = get(address, "/api/v1/targets") {
            let answer: Value = serde_json::from_str(&body).unwrap_or_default();
            let targets = answer["data"]["activeTargets"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            if targets.len() == count && targets.iter().all(|target| target["health"] == "up") {
                return Ok(());
            }
            last = body;
        }
        Err(format!(
            "the {count} targets were not all up in time: {last}\nprometheus log:\n{}",
            prometheus.log_tail()
        ))
    });
}

/// Polls Prometheus, bounded, until it has scraped each target of `targets` (its exporter's
/// address, and whether it must be up) since `since` and found it up or down as given. A scrape
/// that finds a target down marks every series of that target stale in the same write, so from
/// then on no panel sums what the target last exported.
fn wait_for_scrapes_since(
    prometheus: &mut Running,
    address: SocketAddr,
    targets: &[(SocketAddr, bool)],
    since: SystemTime,
    deadline: Instant,
) {
    let since = since
        .duration_since(UNIX_EPOCH)
        .expect("the clock is past 1970")
        .as_secs_f64();
    for (target, up) in targets {
        let expr = format!(
            "up{{instance=\"{target}\"}} and timestamp(up{{instance=\"{target}\"}}) > {since}"
        );
        let expected = if *up { 1.0 } else { 0.0 };
        // Prometheus scrapes every second.
        poll_until(deadline, Duration::from_millis(100), || {
            prometheus.assert_running();
            let last = match query(address, &expr).map(|series| values(&series)) {
                Ok(series) if single(&series) == Some(expected) => return Ok(()),
                Ok(series) => format!("{series:?}"),
                Err(error) => error,
            };
            Err(format!(
                "prometheus did not scrape {target} as {} in time: {expr}: {last}",
                if *up { "up" } else { "down" }
            ))
        });
    }
}

/// Polls Prometheus' `/-/ready` until it answers 200, bounded.
fn wait_for_ready(prometheus: &mut Running, address: SocketAddr, deadline: Instant) {
    poll_until(deadline, Duration::from_millis(100), || {
        prometheus.assert_running();
        match get(address, "/-/ready") {
            Ok((200, _)) => Ok(()),
            _ => Err(format!(
                "prometheus was not ready in time; its log:\n{}",
                prometheus.log_tail()
            )),
        }
    });
}

/// The series of an instant query, each as its labels and its value (NaN when it has none).
fn values(series: &[Value]) -> Vec<(Value, f64)> {
    series
        .iter()
        .map(|series| {
            let value = series["value"][1]
                .as_str()
                .and_then(|value| value.parse::<f64>().ok())
                .unwrap_or(f64::NAN);
            (series["metric"].clone(), value)
        })
        .collect()
}

/// The value of the series whose `label` is `value`, if there is one.
fn labelled(series: &[(Value, f64)], label: &str, value: &str) -> Option<f64> {
    series
        .iter()
        .find(|(metric, _)| metric[label] == value)
        .map(|(_, sample)| *sample)
}

/// The single value of an unlabelled aggregate.
fn single(series: &[(Value, f64)]) -> Option<f64> {
    match series {
        [(_, value)] => Some(*value),
        _ => None,
    }
}

fn positive(value: Option<f64>) -> bool {
    value.is_some_and(|value| value.is_finite() && value > 0.0)
}

/// The panel of the server's reloads, which reads 0 until the test changes a file.
const RELOADS_PANEL: &str = "Server reloads per second";

/// Whether a reload panel's expression reads 0 for both results, as it must before the test
/// changes any file: the rate above 0 that [`agrees`] then requires comes from the reloads the
/// test drives, and from nothing else.
fn reads_no_reload(_title: &str, _index: usize, series: &[(Value, f64)]) -> Result<(), String> {
    need(
        labelled(series, "result", "ok") == Some(0.0)
            && labelled(series, "result", "error") == Some(0.0),
        "nothing was reloaded yet: both results read 0",
        series,
    )
}

/// `Ok` when `ok`, else `what` with the series that disagreed.
fn need(ok: bool, what: &str, series: &[(Value, f64)]) -> Result<(), String> {
    if ok {
        Ok(())
    } else {
        Err(format!("{what}: {series:?}"))
    }
}

/// The panels whose gauges read, at an instant, what the `held` load and the stalled requests
/// hold: proved by [`holds`] once the loads that move them (the other `loadtest`, `dispatch` and
/// the server's steady load) have ended. Every other panel is proved by [`agrees`] while all
/// the loads run.
const HELD_PANELS: &[&str] = &[
    "Dispatch buffer: depth against capacity",
    "Server requests in flight",
];

/// Whether the series of one held panel's expression read exactly what is held: the `held`
/// load's full buffer and busy workers, the requests stalled in flight. Only the held state can
/// produce these values once the other loads ended; a load that ended reads 0.
fn holds(title: &str, index: usize, series: &[(Value, f64)]) -> Result<(), String> {
    let need = |ok: bool, what: &str| need(ok, what, series);
    let exactly = |count: usize| single(series) == Some(count as f64);
    match (title, index) {
        ("Dispatch buffer: depth against capacity", 0) => need(
            exactly(HELD_QUEUED),
            &format!("{HELD_QUEUED} attempts wait behind the held workers"),
        ),
        ("Dispatch buffer: depth against capacity", 1) => need(
            exactly(HELD_BUFFER),
            &format!("the one buffer left is the held load's, of {HELD_BUFFER}"),
        ),
        ("Dispatch buffer: depth against capacity", 2) => need(
            exactly(HELD_WORKERS),
            &format!(
                "the {HELD_WORKERS} held workers are busy, each with a call that never answers"
            ),
        ),
        ("Server requests in flight", 0) => need(
            exactly(STALLED),
            &format!("the {STALLED} stalled requests are in flight, and nothing else"),
        ),
        _ => Err(format!(
            "the test does not know held panel {title:?} expression {index}: give it a check"
        )),
    }
}

/// Whether the series of one panel expression agree with what the loads did while they all
/// run: `Ok` when they do, the disagreement otherwise. `index` is the expression's place in its
/// panel.
fn agrees(title: &str, index: usize, series: &[(Value, f64)]) -> Result<(), String> {
    let need = |ok: bool, what: &str| need(ok, what, series);
    match (title, index) {
        ("Hook calls per second by outcome", 0) => {
            for outcome in LOADTEST_PRODUCES.iter().chain(DISPATCH_PRODUCES) {
                need(
                    positive(labelled(series, "outcome", outcome)),
                    &format!("{outcome} was produced, its rate must be above 0"),
                )?;
            }
            need(
                labelled(series, "outcome", "cancelled") == Some(0.0),
                "nothing was cancelled, its rate must be 0",
            )
        }
        ("Hook calls per second by outcome", 1) => need(positive(single(series)), "chains ran"),
        ("Hook latency by outcome (p50, p95, p99)", _) => {
            for outcome in LOADTEST_PRODUCES.iter().chain(DISPATCH_PRODUCES) {
                need(
                    positive(labelled(series, "outcome", outcome)),
                    &format!("{outcome} calls took time"),
                )?;
            }
            // A call cut at its 20 ms timeout ran at least that long: its quantile lies above
            // the 10 ms bucket's bound.
            need(
                labelled(series, "outcome", "timeout").is_some_and(|value| value > 0.01),
                "timeouts took at least their 20ms timeout",
            )
        }
        ("Chain latency (p50, p95, p99)", _) => need(positive(single(series)), "chains took time"),
        ("Breaker state per hook", 0) => {
            need(
                labelled(series, "hook", OPENED_HOOK) == Some(2.0),
                &format!("the breaker of {OPENED_HOOK} was opened for ten minutes: 2"),
            )?;
            need(
                labelled(series, "hook", PENDING_HOOK) == Some(0.0),
                &format!("no call of {PENDING_HOOK} ever ended: its breaker is closed, 0"),
            )?;
            for hook in NEVER_FAILING_HOOKS {
                need(
                    labelled(series, "hook", hook) == Some(0.0),
                    &format!("{hook} never fails: its breaker is closed, 0"),
                )?;
            }
            need(
                series
                    .iter()
                    .all(|(_, value)| [0.0, 1.0, 2.0].contains(value)),
                "every breaker state is 0, 1 or 2",
            )
        }
        ("At capacity, unavailable and fail-open per second", _) => need(
            positive(single(series)),
            "full buffers defer, hooks fail, and the loadtest fails open",
        ),
        ("Server requests per second by service and outcome", 0) => {
            let of = |service: &str, outcome: &str| {
                series
                    .iter()
                    .find(|(metric, _)| {
                        metric["service"] == service && metric["outcome"] == outcome
                    })
                    .map(|(_, value)| *value)
            };
            need(
                positive(of("/tasks/admit", "held")),
                "frozen tenants are held",
            )?;
            need(
                positive(of("/tasks/admit", "denied")),
                "the suspended tenant is refused",
            )?;
            need(
                positive(of("/tasks/admit", "allowed")),
                "other tenants are admitted",
            )?;
            need(
                positive(of("/pods/mutate", "allowed")) || positive(of("/pods/mutate", "patched")),
                "pods are answered",
            )?;
            need(
                positive(of("/queues/validate", "allowed")),
                "queues are admitted from the synced cache",
            )?;
            need(
                of("/tasks/admit", "panic") == Some(0.0),
                "no handler panicked",
            )
        }
        ("Server latency by service (p50, p99)", _) => {
            for service in ["/tasks/admit", "/pods/mutate", "/queues/validate"] {
                need(
                    positive(labelled(series, "service", service)),
                    &format!("{service} answered"),
                )?;
            }
            Ok(())
        }
        ("Cluster cache synced", 0) => need(
            labelled(series, "resource", "queues") == Some(1.0),
            "the queue cache synced, and stays synced while the watch is refused",
        ),
        ("Cluster cache age", 0) => need(
            labelled(series, "resource", "queues").is_some_and(|age| {
                (0.0..(DATA_DEADLINE + POLL_DEADLINE).as_secs_f64()).contains(&age)
            }),
            "the queue cache took in the queues since the test started",
        ),
        ("Cluster cache watch failures per second", 0) => need(
            positive(labelled(series, "resource", "queues")),
            "the API server refused the queue watch for a while",
        ),
        (RELOADS_PANEL, _) => need(
            positive(labelled(series, "result", "ok"))
                && labelled(series, "result", "error") == Some(0.0),
            "the files were changed and taken in, and no reload failed",
        ),
        _ => Err(format!(
            "the test does not know panel {title:?} expression {index}: give it a check"
        )),
    }
}

/// Each panel's title with each of its expressions and the expression's place in the panel.
fn indexed_queries(dashboard: &Value) -> Vec<(String, usize, String)> {
    let mut indexed: Vec<(String, usize, String)> = Vec::new();
    for (title, expr) in panel_queries(dashboard) {
        let index = indexed.iter().filter(|(seen, _, _)| *seen == title).count();
        indexed.push((title, index, expr));
    }
    indexed
}

/// Every panel expression the dashboard must hold (title, place): the test proves each and
/// fails when one is missing.
const EXPECTED_EXPRESSIONS: &[(&str, usize)] = &[
    ("Hook calls per second by outcome", 2),
    ("Hook latency by outcome (p50, p95, p99)", 3),
    ("Chain latency (p50, p95, p99)", 3),
    ("Breaker state per hook", 1),
    ("Dispatch buffer: depth against capacity", 3),
    ("At capacity, unavailable and fail-open per second", 3),
    ("Server requests per second by service and outcome", 1),
    ("Server latency by service (p50, p99)", 2),
    ("Server requests in flight", 1),
    ("Server reloads per second", 2),
    ("Cluster cache synced", 1),
    ("Cluster cache age", 1),
    ("Cluster cache watch failures per second", 1),
];

/// Holds one `/tasks/admit` request of `address` in flight until `release` is set: its head
/// promises a body that never comes and its connection stays open, so the server counts it in
/// flight the whole time. Should the server answer it or close the connection, another takes
/// its place.
fn stall_request(
    address: SocketAddr,
    ca: rustls::pki_types::CertificateDer<'static>,
    release: Arc<AtomicBool>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    block_on(async move {
        let client = serve_support::Client::new(address, &ca);
        while !release.load(Ordering::Relaxed) {
            let mut stream = client.connect().await;
            let head = format!(
                "POST /tasks/admit?timeout=2s HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{"
            );
            if stream.write_all(head.as_bytes()).await.is_err() || stream.flush().await.is_err() {
                continue;
            }
            let mut answer = [0u8; 256];
            // Until the server answers or closes, with a look at `release` every 100 ms.
            while !release.load(Ordering::Relaxed) {
                let read = stream.read(&mut answer);
                if tokio::time::timeout(Duration::from_millis(100), read)
                    .await
                    .is_ok()
                {
                    break;
                }
            }
        }
    });
}

/// Once `serve`'s queue cache has synced, makes `api` refuse its watch (403) and breaks the
/// watch, until `serve`'s exporter counts a failure; then lets it watch again. Both waits are
/// bounded polls of the exporter.
fn refuse_the_queue_watch_for_a_while(
    api: &ApiServer,
    serve: &mut Running,
    exporter: SocketAddr,
    deadline: Instant,
) {
    let synced = format!("{CACHE_SYNCED}{{resource=\"queues\"}}");
    let failures = format!("{CACHE_WATCH_FAILURES_TOTAL}{{resource=\"queues\"}}");
    let mut refused = false;
    poll_until(deadline, Duration::from_millis(50), || {
        serve.assert_running();
        let scrape = scrape(exporter);
        // Synced is listed; the watch that follows must be open to be broken.
        if !refused && sample(&scrape, &synced) == Some(1.0) && api.watches() > 0 {
            api.forbid(true);
            api.break_watches();
            refused = true;
        }
        if refused && sample(&scrape, &failures).is_some_and(|count| count > 0.0) {
            api.forbid(false);
            return Ok(());
        }
        Err(format!(
            "serve's queue cache {}: {scrape}",
            if refused {
                "counted no failure of the refused watch"
            } else {
                "never synced"
            }
        ))
    });
}

/// A check of one panel expression's series (given its panel's title and its place there):
/// `Ok` when they agree with what the test drove, the disagreement otherwise.
type Check = fn(&str, usize, &[(Value, f64)]) -> Result<(), String>;

/// Polls every expression of `queries` (title, place in its panel, expression) until `check`
/// has found each to agree once, asserting meanwhile that every process of `alive` still runs;
/// fails, naming every expression that never agreed and why, when `within` has passed first.
fn poll_until_agreed(
    prometheus: SocketAddr,
    queries: &[&(String, usize, String)],
    alive: &mut [&mut Running],
    within: Duration,
    check: Check,
) {
    let mut pending: Vec<(&str, usize, &str, String)> = queries
        .iter()
        .map(|(title, index, expr)| (title.as_str(), *index, expr.as_str(), String::new()))
        .collect();
    // Prometheus scrapes every second.
    poll_until(Instant::now() + within, Duration::from_millis(250), || {
        for running in alive.iter_mut() {
            running.assert_running();
        }
        pending.retain_mut(|(title, index, expr, why)| {
            let series = query(prometheus, expr).map(|series| values(&series));
            match series.and_then(|series| check(title, *index, &series).map(|()| series)) {
                Ok(series) => {
                    eprintln!("{title} [{index}] agreed: {series:?}");
                    false
                }
                Err(error) => {
                    *why = error;
                    true
                }
            }
        });
        if pending.is_empty() {
            return Ok(());
        }
        Err(format!(
            "{} of {} panel expressions never agreed within {within:?}:\n{}",
            pending.len(),
            queries.len(),
            pending
                .iter()
                .map(|(title, index, expr, why)| format!("{title} [{index}]: {expr}\n    {why}"))
                .collect::<Vec<_>>()
                .join("\n")
        ))
    });
}

#[test]
fn every_dashboard_panel_agrees_with_what_the_loads_did_in_a_real_prometheus() {
    require("prometheus");
    require("promtool");
    let started = Instant::now();
    let deadline = started + DATA_DEADLINE;
    let dir = tempfile::tempdir().expect("a temp dir");
    let workload_path = dir.path().join("workload.yaml");
    let config_path = dir.path().join("dexaflow.yaml");
    std::fs::write(&workload_path, workload()).expect("write the workload");
    std::fs::write(&config_path, config()).expect("write the config");

    let queries = indexed_queries(&dashboard());
    let mut missing = Vec::new();
    for (title, count) in EXPECTED_EXPRESSIONS {
        let found = queries.iter().filter(|(seen, _, _)| seen == title).count();
        if found != *count {
            missing.push(format!("{title}: {found} expressions, expected {count}"));
        }
    }
    assert!(
        missing.is_empty(),
        "the dashboard lacks panels or expressions the test proves:\n{}",
        missing.join("\n")
    );
    let (held_queries, running_queries): (Vec<_>, Vec<_>) = queries
        .iter()
        .partition(|(title, _, _)| HELD_PANELS.contains(&title.as_str()));
    let reload_queries: Vec<_> = queries
        .iter()
        .filter(|(title, _, _)| title == RELOADS_PANEL)
        .collect();

    let (mut loadtest, loadtest_exporter) = start_with_exporter(
        "dexaflow-admission loadtest",
        dir.path(),
        "loadtest.log",
        LOADTEST_ARGS,
        deadline,
    );
    let held_args = held_args();
    let held_args: Vec<&str> = held_args.iter().map(String::as_str).collect();
    let (mut held, held_exporter) = start_with_exporter(
        "dexaflow-admission loadtest (held)",
        dir.path(),
        "held.log",
        &held_args,
        deadline,
    );
    let workload_arg = workload_path.display().to_string();
    let config_arg = config_path.display().to_string();
    let (mut dispatch, dispatch_exporter) = start_with_exporter(
        "dexaflow-admission dispatch",
        dir.path(),
        "dispatch.log",
        &[
            "dispatch",
            "--config",
            &config_arg,
            "--workload",
            &workload_arg,
        ],
        deadline,
    );

    // The cluster `serve` reads queues from runs on a runtime of its own for the whole test.
    let cluster = tokio::runtime::Runtime::new().expect("a runtime for the API server");
    let api = cluster.block_on(ApiServer::start(CLUSTER_TOKEN));
    api.put_queue("default", json!({"weight": 1}));
    let authority = serve_support::Authority::new();
    let serve_dir = dir.path().join("serve");
    std::fs::create_dir(&serve_dir).expect("a directory for serve");
    let kubeconfig = api.kubeconfig(&serve_dir, CLUSTER_TOKEN);
    let mut serve = start_serve(&serve_dir, &authority, &kubeconfig);
    let serve_exporter = address_in_log(&mut serve, METRICS_LINE, deadline);
    let serve_listen = address_in_log(&mut serve, "serving https://", deadline);
    let stop_driving = Arc::new(AtomicBool::new(false));
    let driver = std::thread::spawn({
        let ca = authority.der();
        let stop = Arc::clone(&stop_driving);
        move || drive_serve(serve_listen, ca, stop)
    });
    let release_stalled = Arc::new(AtomicBool::new(false));
    let stallers: Vec<_> = (0..STALLED)
        .map(|_| {
            let ca = authority.der();
            let release = Arc::clone(&release_stalled);
            std::thread::spawn(move || stall_request(serve_listen, ca, release))
        })
        .collect();

    // Prometheus prints the address it was told, not the one it bound, so it alone gets a port
    // taken and released here (the race with another process taking it is Prometheus' to lose).
    let prometheus_address = free_port();
    let prometheus_config = dir.path().join("prometheus.yml");
    std::fs::write(
        &prometheus_config,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: dexaflow-admission\n    static_configs:\n      - targets: [\"{loadtest_exporter}\", \"{held_exporter}\", \"{dispatch_exporter}\", \"{serve_exporter}\"]\n"
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
    wait_for_ready(&mut prometheus, prometheus_address, deadline);
    wait_for_targets(&mut prometheus, prometheus_address, 4, deadline);
    refuse_the_queue_watch_for_a_while(&api, &mut serve, serve_exporter, deadline);

    // Before any file changes, the reload panels read 0 (over at least two scrapes), so the
    // rates they show next come from the reloads driven here.
    poll_until_agreed(
        prometheus_address,
        &reload_queries,
        &mut [&mut serve, &mut prometheus],
        POLL_DEADLINE,
        reads_no_reload,
    );
    // Reloads: the groups file and the certificate change while Prometheus scrapes.
    replace(&serve_dir.join("groups.yaml"), SPOT_GROUPS);
    authority
        .issue()
        .mount_as_secret(&serve_dir, "..2026_12_03_00_00_00.2");

    // While every load runs: the rates, latencies and breaker states agree with what they do.
    poll_until_agreed(
        prometheus_address,
        &running_queries,
        &mut [
            &mut loadtest,
            &mut held,
            &mut dispatch,
            &mut serve,
            &mut prometheus,
        ],
        POLL_DEADLINE,
        agrees,
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

    // The loads that move the gauges end and the server's steady load has stopped: once
    // Prometheus has scraped every target since (finding the ended ones down, and marking their
    // series stale), what the gauge panels read is what the held load and the stalled requests
    // hold, exactly.
    drop(loadtest);
    drop(dispatch);
    wait_for_scrapes_since(
        &mut prometheus,
        prometheus_address,
        &[
            (loadtest_exporter, false),
            (dispatch_exporter, false),
            (held_exporter, true),
            (serve_exporter, true),
        ],
        SystemTime::now(),
        Instant::now() + POLL_DEADLINE,
    );
    poll_until_agreed(
        prometheus_address,
        &held_queries,
        &mut [&mut held, &mut serve, &mut prometheus],
        POLL_DEADLINE,
        holds,
    );

    release_stalled.store(true, Ordering::Relaxed);
    for staller in stallers {
        staller.join().expect("the stalled requests ran");
    }
    serve.assert_running();
    held.assert_running();
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
    // Neither hook ever fails, so neither breaker changes: only registration makes the gauges.
    let (mut loadtest, exporter) = start_with_exporter(
        "dexaflow-admission loadtest",
        dir.path(),
        "loadtest.log",
        &[
            "loadtest",
            "--duration",
            "10m",
            "--rate",
            "1",
            "--hook",
            "noop",
            "--hook",
            "refuse:0",
        ],
        Instant::now() + Duration::from_secs(30),
    );
    loadtest.assert_running();
    // The gauges appear when the chain starts and tells the metrics its hooks, a moment after
    // the exporter's line: scrape until a call has been counted, which the chain's start
    // precedes.
    let deadline = Instant::now() + Duration::from_secs(30);
    let scraped = poll_until(deadline, Duration::from_millis(50), || {
        let scraped = scrape(exporter);
        let called = scraped
            .lines()
            .filter(|line| line.starts_with(&format!("{OUTCOMES_TOTAL}{{")))
            .any(|line| !line.ends_with(" 0"));
        if called {
            Ok(scraped)
        } else {
            Err(format!(
                "the load test counted no hook call in time: {scraped}"
            ))
        }
    });

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
