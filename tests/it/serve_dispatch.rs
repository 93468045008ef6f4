//! End to end, both sides the built binary: `serve` on 127.0.0.1 (port 0, its bound address read
//! back from what it prints) runs `/tasks/admit` with the config's hooks, and `dispatch`, with
//! the webhook hook pointed at it over TLS with a bearer token, admits, changes, holds and
//! refuses attempts; its table shows the server's reasons.

use crate::serve_support;

use std::path::Path;
use std::process::Command;

use serve_support::{Authority, SERVED_HOOKS, Serving};

use crate::processes::{BINARY, FOUR_TENANTS};

/// Starts `serve` with certificates issued by `authority` and the bearer token `token`, all in
/// `dir`, and reads back the address it bound.
fn serve(authority: &Authority, dir: &Path, token: &Path) -> Serving {
    let files = authority.issue().write_to(dir);
    let config = dir.join("serve.yaml");
    std::fs::write(
        &config,
        format!(
            "server:
  listen: 127.0.0.1:0
  tls: {{cert_file: {}, key_file: {}}}
  auth: {{bearer_token_file: {}}}
metrics: {{listen: 127.0.0.1:0}}
{SERVED_HOOKS}",
            files.cert_file.display(),
            files.key_file.display(),
            token.display()
        ),
    )
    .expect("write the server's config");
    Serving::start(&config)
}

/// Runs `dispatch` with the webhook hook at `serving` and returns its table.
fn dispatch(serving: &Serving, ca: &Path, token: &Path, dir: &Path) -> String {
    let config = dir.join("dispatch.yaml");
    std::fs::write(
        &config,
        format!(
            "scheduler: {{loop_interval_ms: 50, dispatch: {{retry_window: 500ms}}}}
executor: {{type: \"null\"}}
execution:
  warm_pools_enabled: true
  admission:
    webhook:
      url: https://localhost:{port}/tasks/admit
      ca_bundle: {ca}
      bearer_token_file: {token}
      timeout: 2s
",
            port = serving
                .address
                .rsplit_once(':')
                .expect("an address with a port")
                .1,
            ca = ca.display(),
            token = token.display(),
        ),
    )
    .expect("write the dispatcher's config");
    let workload = dir.join("workload.yaml");
    std::fs::write(&workload, FOUR_TENANTS).expect("write the workload");
    let run = Command::new(BINARY)
        .arg("dispatch")
        .arg("--config")
        .arg(&config)
        .arg("--workload")
        .arg(&workload)
        .args(["--metrics-listen", "127.0.0.1:0"])
        .output()
        .expect("run dispatch");
    let stdout = String::from_utf8(run.stdout).expect("UTF-8");
    assert!(
        run.status.success(),
        "dispatch failed: {}\n{stdout}",
        String::from_utf8_lossy(&run.stderr)
    );
    stdout
}

/// The table's row for `tenant`, its columns separated by single spaces.
fn row(table: &str, tenant: &str) -> String {
    table
        .lines()
        .find(|line| line.starts_with(&format!("{tenant} ")))
        .unwrap_or_else(|| panic!("a row for {tenant} in\n{table}"))
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn dispatch_through_serve_admits_changes_holds_and_refuses_showing_the_servers_reasons() {
    let dir = tempfile::tempdir().expect("a directory");
    let authority = Authority::new();
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, authority.pem()).expect("write the CA");
    let token = dir.path().join("token");
    std::fs::write(&token, "e2e-token\n").expect("write the token");
    let serving = serve(&authority, dir.path(), &token);

    let table = dispatch(&serving, &ca, &token, dir.path());

    for (tenant, expected) in [
        ("acme", "acme etl r1 extract 1 queued warm -"),
        (
            "gpu-lab",
            "gpu-lab train r1 fit 1 queued dedicated (admission change) -",
        ),
        (
            "finance",
            "finance close r1 report 1 failed - dispatch_failed: admission hold: quarter-end close",
        ),
        (
            "umbrella",
            "umbrella billing r1 invoice 1 failed - dispatch refused: admission: tenant umbrella is suspended for unpaid invoices",
        ),
    ] {
        assert_eq!(row(&table, tenant), expected, "{table}");
    }
    assert!(
        table.contains("4 task instances: 2 failed (1 refused), 2 queued; 2 tokens minted"),
        "{table}"
    );
}
