//! What the proxy reports: the protocol a client used, the outcome of each decision and why
//! a connection was refused, the [`Event`] that carries them to the caller's sink, and the
//! guard that delivers an event exactly once.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::addr::AddrClass;

/// The protocol a client used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// A plain HTTP request in absolute form (`GET http://host/path`).
    Http,
    /// `CONNECT host:port`, a TLS tunnel.
    Connect,
    /// A SOCKS5 `CONNECT`.
    Socks5,
}

/// Why a connection was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// No allowlist entry matches the host and port.
    NotAllowed,
    /// The host is not a valid name or IP literal.
    BadHost,
    /// The name did not resolve.
    Unresolved(String),
    /// Every address the name resolved to is special and not listed.
    Address { ip: IpAddr, class: AddrClass },
    /// The TLS server name differs from the host the tunnel was opened for.
    SniMismatch { sni: Option<String> },
    /// A `CONNECT` tunnel that does not start with a TLS ClientHello (or a malformed one).
    NotTls(String),
    /// The request is not a proxy request pinfold handles.
    BadRequest(String),
    /// The host is a credential endpoint and the request cannot carry the credential safely
    /// (plain HTTP, an `Upgrade`, HTTP/2, a `Host` naming another host).
    CredentialUnsafe(String),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::NotAllowed => f.write_str("host and port are not on the allowlist"),
            Refusal::BadHost => f.write_str("not a valid host name or IP address"),
            Refusal::Unresolved(e) => write!(f, "name does not resolve: {e}"),
            Refusal::Address { ip, class } => {
                write!(
                    f,
                    "resolves to {ip}, a {class} address; list the name or address exactly to allow it"
                )
            }
            Refusal::SniMismatch { sni: Some(s) } => {
                write!(f, "TLS server name `{s}` differs from the tunnel's host")
            }
            Refusal::SniMismatch { sni: None } => {
                f.write_str("TLS ClientHello without a server name for a named host")
            }
            Refusal::NotTls(why) => write!(f, "tunnel is not TLS: {why}"),
            Refusal::BadRequest(why) => f.write_str(why),
            Refusal::CredentialUnsafe(why) => write!(f, "credential endpoint: {why}"),
        }
    }
}

/// The outcome of one connection or request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Allowed,
    Refused(Refusal),
    /// Allowed, but the upstream could not be reached.
    Failed(String),
}

/// One decision, delivered when the connection (or, for HTTP, the request's upstream
/// connection) ends. Holds no header or body content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// Counts client connections from 1; requests on one HTTP connection share it.
    pub connection: u64,
    pub protocol: Protocol,
    /// The host as requested (lower case for names).
    pub host: String,
    pub port: u16,
    /// The address connected to, when it got that far.
    pub addr: Option<SocketAddr>,
    pub outcome: Outcome,
    /// Bytes sent from the client to the upstream, and back (for HTTP: on the upstream
    /// connection, request and response heads included).
    pub bytes_up: u64,
    pub bytes_down: u64,
    /// The name of the credential added to this request (brokered endpoints only). Never the
    /// value.
    pub credential: Option<String>,
}

/// Where events go. Called from the proxy's tasks; it must not block.
pub type EventSink = Arc<dyn Fn(Event) + Send + Sync>;

/// The event of a connection still in use, delivered exactly once: when the guard is dropped
/// — at the connection's end, or when its task is cancelled mid-way (the runtime shut down
/// while a tunnel or a response was still open) — with the bytes counted so far. Without it a
/// connection open when the proxy stops would leave no event at all.
pub(crate) struct PendingEvent {
    sink: EventSink,
    pub(crate) event: Option<Event>,
    pub(crate) counters: Arc<(AtomicU64, AtomicU64)>,
}

impl PendingEvent {
    pub(crate) fn new(
        sink: EventSink,
        event: Event,
        counters: Arc<(AtomicU64, AtomicU64)>,
    ) -> PendingEvent {
        PendingEvent {
            sink,
            event: Some(event),
            counters,
        }
    }
}

impl Drop for PendingEvent {
    fn drop(&mut self) {
        if let Some(mut e) = self.event.take() {
            e.bytes_up = e.bytes_up.max(self.counters.0.load(Ordering::Relaxed));
            e.bytes_down = e.bytes_down.max(self.counters.1.load(Ordering::Relaxed));
            (self.sink)(e);
        }
    }
}
