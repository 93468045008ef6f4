//! The `metrics.*` section: where the Prometheus exporter listens.

use std::net::SocketAddr;

use super::keys::METRICS_LISTEN;
use super::reader::Reader;
use crate::metrics::DEFAULT_LISTEN;

impl Reader {
    pub(super) fn metrics_listen(&mut self) -> SocketAddr {
        self.address(METRICS_LISTEN, Some(DEFAULT_LISTEN))
            .unwrap_or(DEFAULT_LISTEN)
    }
}
