//! The [`Proxy`]: its configuration, event sink and broker state, built once and shared by
//! every listener and connection task. Serving is in `server.rs`; deciding in `decide.rs`; the
//! handlers of each protocol in `requests.rs`, `socks.rs`, `tunnel.rs` and `brokered.rs`.

use std::io;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use tokio::sync::Semaphore;

use crate::broker::Broker;
use crate::config::Config;
use crate::error::BuildError;
use crate::event::{Event, EventSink};

/// The proxy. Cheap to share: serve several listeners from one `Arc<Proxy>`.
pub struct Proxy {
    pub(crate) config: Config,
    pub(crate) sink: EventSink,
    pub(crate) next_id: AtomicU64,
    pub(crate) slots: Arc<Semaphore>,
    pub(crate) broker: Broker,
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proxy")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Proxy {
    /// Build the proxy: check the endpoints, generate the per-run CA (key in memory only)
    /// and, when there are endpoints, load the roots trusted for their upstreams.
    pub fn new(config: Config, sink: EventSink) -> Result<Arc<Proxy>, BuildError> {
        let broker = Broker::new(
            &config.endpoints,
            &config.upstream_ca,
            config.system_roots.as_deref(),
        )?;
        let slots = Arc::new(Semaphore::new(config.limits.max_connections));
        Ok(Arc::new(Proxy {
            config,
            sink,
            next_id: AtomicU64::new(1),
            slots,
            broker,
        }))
    }

    /// The per-run CA certificate, PEM. Clients of brokered endpoints must trust it.
    pub fn ca_pem(&self) -> &str {
        self.broker.ca_pem()
    }

    /// A CA bundle for the sandbox: the system roots file (`system_roots`, default
    /// [`crate::SYSTEM_ROOTS`]) followed by [`Proxy::ca_pem`]. The caller writes it where the
    /// sandbox's tools look (`SSL_CERT_FILE` and friends).
    pub fn ca_bundle(&self, system_roots: Option<&Path>) -> io::Result<String> {
        crate::broker::ca_bundle(self.broker.ca_pem(), system_roots)
    }

    pub(crate) fn handshake_timeout(&self) -> Duration {
        self.config.limits.handshake_timeout
    }

    pub(crate) fn emit(&self, event: Event) {
        (self.sink)(event)
    }
}
