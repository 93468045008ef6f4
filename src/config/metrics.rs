//! The `metrics.*` section: where the Prometheus exporter listens.

use std::net::SocketAddr;

use serde_yaml_ng::Value;

use super::keys::METRICS_LISTEN;
use super::reader::{Reader, expected};

impl Reader {
    pub(super) fn metrics_listen(&mut self) -> SocketAddr {
        self.get(
            METRICS_LISTEN,
            SocketAddr::from(([127, 0, 0, 1], 9464)),
            |raw| {
                raw.value
                    .as_str()
                    .and_then(|text| text.trim().parse().ok())
                    .ok_or_else(|| expected("an address such as \"127.0.0.1:9464\""))
            },
            |address| Value::String(address.to_string()),
        )
    }
}
