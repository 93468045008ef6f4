//! The `metrics.*` section: where the Prometheus exporter listens.

use std::net::SocketAddr;

use serde_yaml_ng::Value;

use super::keys::METRICS_LISTEN;
use super::reader::{Reader, expected};
use crate::metrics::DEFAULT_LISTEN;

impl Reader {
    pub(super) fn metrics_listen(&mut self) -> SocketAddr {
        self.get(
            METRICS_LISTEN,
            DEFAULT_LISTEN,
            |raw| {
                raw.value
                    .as_str()
                    .and_then(|text| text.trim().parse().ok())
                    .ok_or_else(|| expected(format!("an address such as \"{DEFAULT_LISTEN}\"")))
            },
            |address| Value::String(address.to_string()),
        )
    }
}
