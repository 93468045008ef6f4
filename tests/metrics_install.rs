//! `metrics::install` as a library user calls it: on port 0, with the bound address and an
//! in-process rendering returned. The recorder it installs is process-wide, so this binary holds
//! one test and installs once.

// serve_support waits through processes' bounded poll.
#[path = "it/processes/mod.rs"]
mod processes;
#[path = "it/serve_support/mod.rs"]
mod serve_support;

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::time::Duration;

use dexaflow_admission::admission::Outcome;
use dexaflow_admission::events::HookEvents;
use dexaflow_admission::metrics::{self, DURATION_SECONDS, LATENCY_BUCKETS, OUTCOMES_TOTAL};
use serve_support::sample;

/// The body of a plain HTTP/1.0 GET of `target` (so that no chunked body comes back).
fn get(address: SocketAddr, target: &str) -> String {
    let mut stream = TcpStream::connect_timeout(&address, Duration::from_secs(5)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("a read timeout");
    write!(stream, "GET {target} HTTP/1.0\r\nHost: {address}\r\n\r\n").expect("send");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("read");
    let (head, body) = response.split_once("\r\n\r\n").expect("a head and a body");
    assert!(
        head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200"),
        "{head}"
    );
    body.to_owned()
}

#[test]
fn an_exporter_on_port_zero_gives_its_address_and_renders_what_it_serves() {
    let installed =
        metrics::install(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).expect("port 0 is free");
    let address = installed.exporter.address();
    assert!(address.ip().is_loopback(), "{address}");
    assert_ne!(address.port(), 0, "the bound port, not the one asked for");
    assert_eq!(
        installed.exporter.url(),
        format!("http://{address}/metrics")
    );

    let refused = format!("{OUTCOMES_TOTAL}{{outcome=\"refuse\"}}");
    let held = format!("{OUTCOMES_TOTAL}{{outcome=\"hold\"}}");
    installed
        .metrics
        .hook_call("quota-hook", Outcome::Refuse, Duration::from_micros(80));

    let rendered = installed.exporter.render();
    assert_eq!(sample(&rendered, &refused), Some(1.0), "{rendered}");
    assert_eq!(sample(&rendered, &held), Some(0.0), "{rendered}");
    // The call's 80µs lands in the public buckets: above 50µs, within 100µs and every later one.
    for bound in LATENCY_BUCKETS {
        let bucket = format!("{DURATION_SECONDS}_bucket{{outcome=\"refuse\",le=\"{bound}\"}}");
        let within = if bound < 0.000_08 { 0.0 } else { 1.0 };
        assert_eq!(
            sample(&rendered, &bucket),
            Some(within),
            "{bucket} in {rendered}"
        );
    }
    let served = get(address, "/metrics");
    assert_eq!(sample(&served, &refused), Some(1.0), "{served}");
    assert_eq!(sample(&served, &held), Some(0.0), "{served}");
    assert!(
        !served.contains("quota-hook"),
        "metrics are labelled by outcome only, never by hook call: {served}"
    );
}
