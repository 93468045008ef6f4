//! The `metrics.*` section: where the Prometheus exporter listens.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};

use super::Config;
use super::keys::METRICS_LISTEN;
use super::reader::Reader;
use crate::metrics::DEFAULT_LISTEN;

/// Where the exporter of a batch command (`dispatch`, `loadtest`) listens unless `metrics.listen`
/// or `--metrics-listen` says: a port the system picks on loopback, which the command prints,
/// so that two runs at once, or a run beside `serve` on [`DEFAULT_LISTEN`], never collide.
pub const BATCH_LISTEN: SocketAddr = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0));

impl Reader {
    /// `metrics.listen`, and whether it was set (in the file or a variable) rather than left
    /// to its default.
    pub(super) fn metrics_listen(&mut self) -> (SocketAddr, bool) {
        let is_set = self
            .found
            .get(METRICS_LISTEN)
            .is_some_and(|raw| !raw.value.is_null());
        let listen = self
            .address(METRICS_LISTEN, Some(DEFAULT_LISTEN))
            .unwrap_or(DEFAULT_LISTEN);
        (listen, is_set)
    }
}

impl Config {
    /// Where a batch command's exporter listens: `metrics.listen` when it is set, and
    /// [`BATCH_LISTEN`] (a port of its own) otherwise. `serve`, which runs for long and is
    /// scraped at a known address, listens on [`Config::metrics_listen`] with its default.
    pub fn batch_metrics_listen(&self) -> SocketAddr {
        if self.metrics_listen_is_set {
            self.metrics_listen
        } else {
            BATCH_LISTEN
        }
    }
}
