//! What the caller configures: the allowlist, the resolver, the limits, and the credential
//! endpoints with their secrets.

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::CertificateDer;

use crate::host::HostPattern;

/// Limits that keep one client from holding memory or tasks without end.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Largest request head (request line and headers) accepted; larger gets 431.
    pub max_header_bytes: usize,
    /// Time a client has to send a complete request head, SOCKS handshake or ClientHello.
    pub handshake_timeout: Duration,
    /// Time to resolve a name and connect to the upstream.
    pub connect_timeout: Duration,
    /// Connections served at once; more wait in the listen queue.
    pub max_connections: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_header_bytes: 64 * 1024,
            handshake_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(10),
            max_connections: 1024,
        }
    }
}

/// How the proxy turns names into addresses.
#[derive(Debug, Clone, Default)]
pub enum Resolver {
    /// The system resolver (`getaddrinfo`, through tokio).
    #[default]
    System,
    /// A fixed table; names not in it do not resolve. For tests and for callers that resolve
    /// on their own.
    Fixed(BTreeMap<String, Vec<IpAddr>>),
}

impl Resolver {
    pub(crate) async fn resolve(&self, name: &str, port: u16) -> io::Result<Vec<IpAddr>> {
        match self {
            Resolver::System => Ok(tokio::net::lookup_host((name, port))
                .await?
                .map(|a| a.ip().to_canonical())
                .collect()),
            Resolver::Fixed(table) => table
                .get(name)
                .cloned()
                .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "name not found")),
        }
    }
}

/// What the proxy allows, and how it behaves.
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// The allowlist. Empty allows nothing.
    pub allow: Vec<HostPattern>,
    pub resolver: Resolver,
    pub limits: Limits,
    /// Credential endpoints: tunnels to these hosts are terminated and their requests get the
    /// secret (module docs of [`crate::broker`]). An endpoint never widens the allowlist.
    pub endpoints: Vec<Endpoint>,
    /// Extra roots trusted for upstreams of brokered tunnels, besides the system roots
    /// (`network.upstream_ca`; see [`crate::certs_from_pem_file`]).
    pub upstream_ca: Vec<CertificateDer<'static>>,
    /// The system roots file, PEM; `None` is [`crate::SYSTEM_ROOTS`]. Read only when there are
    /// endpoints.
    pub system_roots: Option<PathBuf>,
}

/// A secret value. `Debug` prints `<redacted>`; there is no `Display`, no serialization, and
/// the only way to the bytes is inside this crate.
#[derive(Clone)]
pub struct Secret(Arc<str>);

impl Secret {
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(Arc::from(value.into()))
    }

    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// A credential endpoint: requests to `host` get `header: format` with the secret in place
/// of `{}` (policy's `[[sandbox.X.network.endpoint]]` plus the secret the CLI read).
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// One exact host (no `*.`), with an optional port (none: 80 and 443, as in the allowlist).
    pub host: HostPattern,
    /// The credential's name: reported in [`crate::Event::credential`], never the value.
    pub credential: String,
    /// The header to set, e.g. `Authorization`.
    pub header: String,
    /// The header's value with `{}` exactly once, e.g. `Bearer {}`.
    pub format: String,
    pub secret: Secret,
}
