//! Each decision of a webhook end to end: the `dispatch` command, configured with
//! `execution.admission.webhook.*`, asks a real HTTPS server on 127.0.0.1 about every attempt,
//! and its table and JSON show the webhook's changes and its cleaned reasons.

use crate::webhook_fixture;

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use dexaflow_admission::admission::{Changes, Decision};
use serde_json::Value;
use webhook_fixture::{Certs, Handler, Server, Transport, deciding};

use crate::processes::{BINARY, FOUR_TENANTS};

/// Admits acme, places gpu-lab on the GPU pool, holds finance once, refuses umbrella with a
/// reason full of control and format characters.
fn by_tenant() -> Handler {
    let held = Arc::new(AtomicBool::new(false));
    deciding(move |call| match call.request.tenant.as_str() {
        "gpu-lab" => {
            let mut changes = Changes::default();
            changes.node_selector.insert("pool".into(), "gpu".into());
            changes.labels.insert("team".into(), "gpu-lab".into());
            Decision::AdmitWith(Box::new(changes))
        }
        "finance" if !held.swap(true, Ordering::SeqCst) => {
            Decision::Hold("quarter-end\u{7} close\n".into())
        }
        "umbrella" => Decision::Refuse("tenant umbrella is\u{202e} suspended\u{1b}[31m\r\n".into()),
        _ => Decision::Admit,
    })
}

/// Runs `dispatch` against `server` and returns its standard output.
fn dispatch(certs: &Certs, server: &Server, dir: &Path, output: &str) -> String {
    let config = dir.join("dexaflow.yaml");
    std::fs::write(
        &config,
        format!(
            "scheduler: {{loop_interval_ms: 50}}
executor: {{type: \"null\"}}
execution:
  warm_pools_enabled: true
  admission:
    webhook:
      url: {}
      ca_bundle: {}
",
            server.url(),
            certs.ca.display()
        ),
    )
    .expect("writes the config");
    let workload = dir.join("workload.yaml");
    std::fs::write(&workload, FOUR_TENANTS).expect("writes the workload");
    let run = Command::new(BINARY)
        .arg("dispatch")
        .arg("--config")
        .arg(&config)
        .arg("--workload")
        .arg(&workload)
        .args(["--output", output, "--metrics-listen", "127.0.0.1:0"])
        .output()
        .expect("runs the binary");
    let stdout = String::from_utf8(run.stdout).expect("UTF-8");
    assert!(
        run.status.success(),
        "dispatch failed: {}\n{stdout}",
        String::from_utf8_lossy(&run.stderr)
    );
    stdout
}

/// The JSON task instance of `tenant`.
fn instance<'j>(json: &'j Value, tenant: &str) -> &'j Value {
    json.as_array()
        .expect("an array")
        .iter()
        .find(|instance| instance["tenant"] == tenant)
        .unwrap_or_else(|| panic!("a task instance of {tenant}"))
}

/// The table's row for `tenant`.
fn row<'t>(table: &'t str, tenant: &str) -> &'t str {
    table
        .lines()
        .find(|line| line.starts_with(&format!("{tenant} ")))
        .unwrap_or_else(|| panic!("a row for {tenant} in\n{table}"))
}

#[test]
fn dispatch_table_shows_each_webhook_decision_with_its_changes_and_cleaned_reasons() {
    let certs = Certs::new();
    let server = Server::start(&certs, Transport::Tls, by_tenant());

    let table = dispatch(&certs, &server, certs.dir.path(), "table");

    let squeeze = |line: &str| line.split_whitespace().collect::<Vec<_>>().join(" ");
    for (tenant, expected) in [
        ("acme", "acme etl r1 extract 1 queued warm -"),
        (
            "gpu-lab",
            "gpu-lab train r1 fit 1 queued dedicated (admission change) -",
        ),
        (
            "finance",
            "finance close r1 report 1 queued warm admitted after admission hold: quarter-end close",
        ),
        (
            "umbrella",
            "umbrella billing r1 invoice 1 failed - dispatch refused: admission: tenant umbrella is suspended[31m",
        ),
    ] {
        assert_eq!(squeeze(row(&table, tenant)), expected, "{table}");
    }
    assert!(
        table.contains("4 task instances: 1 failed (1 refused), 3 queued; 3 tokens minted"),
        "{table}"
    );
    let tenants: Vec<String> = server
        .seen()
        .iter()
        .map(|seen| seen.envelope().request.tenant)
        .collect();
    assert_eq!(
        tenants.iter().filter(|tenant| *tenant == "finance").count(),
        2,
        "held once, asked again: {tenants:?}"
    );
    assert_eq!(tenants.len(), 5);
}

#[test]
fn dispatch_json_shows_the_fields_the_webhook_changed() {
    let certs = Certs::new();
    let server = Server::start(&certs, Transport::Tls, by_tenant());

    let json: Value =
        serde_json::from_str(&dispatch(&certs, &server, certs.dir.path(), "json")).expect("JSON");

    let fit = instance(&json, "gpu-lab");
    assert_eq!(fit["node_selector"]["pool"], "gpu");
    assert_eq!(fit["labels"]["team"], "gpu-lab");
    assert_eq!(fit["token_minted"], true);
    let invoice = instance(&json, "umbrella");
    assert_eq!(invoice["token_minted"], false);
}
