//! pinfold's egress control: the proxy that runs outside the sandbox and decides, host by
//! host, where a sandboxed command's network traffic may go.
//!
//! # The pieces
//!
//! * [`HostPattern`] (module [`host`]): one allowlist entry (`crates.io`, `*.example.com`,
//!   `example.com:8443`, `127.0.0.1:8443`, `[::1]:443`), parsed and matched. It needs only the
//!   standard library, so the policy crate validates `network.hosts` with it without building
//!   the proxy (`default-features = false`).
//! * [`Proxy`] (feature `proxy`, on by default): one listener (TCP or unix socket) speaking
//!   plain HTTP forward proxying, `CONNECT` and SOCKS5. For every request it
//!   1. matches the requested host and port against the allowlist ([`Config::allow`]);
//!   2. resolves the name itself and drops loopback, private, link-local, CGNAT, multicast and
//!      cloud metadata addresses ([`addr::classify`]) unless the name or address is listed
//!      exactly;
//!   3. connects to an address it checked (never re-resolving), and only then answers;
//!   4. for a tunnel, reads the client's TLS ClientHello and refuses a server name (SNI) that
//!      differs from the host the tunnel was opened for, before any client byte goes upstream;
//!   5. reports an [`Event`] (host, port, address, outcome, bytes each way, and the name of
//!      the credential added, if any) to the sink.
//!
//! * The credential broker (module [`broker`]): for an [`Endpoint`] (an exact host, a header,
//!   a format such as `Bearer {}`, and a [`Secret`]) a tunnel is not relayed blindly. The proxy
//!   verifies TLS to the upstream itself (system roots plus [`Config::upstream_ca`]), checks
//!   the client's server name, terminates the client's TLS with a leaf from a per-run CA
//!   (generated in [`Proxy::new`], key in memory only, name-constrained to the endpoint
//!   hosts), and on each HTTP/1.1 request replaces every client value of the header with the
//!   secret. What cannot carry the secret safely is refused with `403`: `Upgrade`, HTTP/2,
//!   a `Host` naming another host, plain `http://` to an endpoint host. The sandbox must trust
//!   [`Proxy::ca_pem`]; [`Proxy::ca_bundle`] gives the system roots plus that CA.
//! * [`bridge`]: the relay for inside the sandbox, from a loopback TCP port to the proxy's unix
//!   socket, deciding nothing.
//!
//! Refusals answer `403` with a one-line reason (SOCKS5: reply code 2, "not allowed by
//! ruleset", or 4 for a name that does not resolve).
//!
//! # Example
//!
//! ```
//! use pinfold_egress::HostPattern;
//!
//! let p: HostPattern = "*.githubusercontent.com".parse().unwrap();
//! assert!(p.matches("raw.githubusercontent.com", 443));
//! assert!(!p.matches("githubusercontent.com", 443)); // subdomains only, not the apex
//! assert!(!p.matches("raw.githubusercontent.com", 22)); // no port: 80 and 443
//! assert!(HostPattern::parse("crates.io:0").is_err());
//! ```
//!
//! Serving, with events collected on a channel:
//!
//! ```no_run
//! # #[cfg(feature = "proxy")]
//! # async fn run() -> std::io::Result<()> {
//! use std::sync::Arc;
//! use pinfold_egress::{Config, Proxy};
//!
//! let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
//! let config = Config { allow: vec!["crates.io".parse().unwrap()], ..Config::default() };
//! let proxy = Proxy::new(config, Arc::new(move |e| { let _ = tx.send(e); })).expect("no endpoints");
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! tokio::spawn(proxy.serve_tcp(listener));
//! while let Some(event) = rx.recv().await {
//!     println!("{} {}:{} {:?}", event.connection, event.host, event.port, event.outcome);
//! }
//! # Ok(()) }
//! ```
//!
//! With a credential endpoint (the secret comes from wherever the caller keeps it; this crate
//! never reads one):
//!
//! ```no_run
//! # #[cfg(feature = "proxy")]
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use pinfold_egress::{Config, Endpoint, Proxy, Secret, certs_from_pem_file};
//!
//! let config = Config {
//!     allow: vec!["api.github.com".parse()?],
//!     endpoints: vec![Endpoint {
//!         host: "api.github.com".parse()?,
//!         credential: "github".into(),
//!         header: "Authorization".into(),
//!         format: "Bearer {}".into(),
//!         secret: Secret::new(std::env::var("GITHUB_TOKEN")?),
//!     }],
//!     upstream_ca: certs_from_pem_file("/etc/corp/root.pem".as_ref())?,
//!     ..Config::default()
//! };
//! let proxy = Proxy::new(config, Arc::new(|_event| {}))?;
//! // For the sandbox: SSL_CERT_FILE and friends point at this file.
//! std::fs::write("/run/pinfold/ca-bundle.pem", proxy.ca_bundle(None)?)?;
//! # Ok(()) }
//! ```
//!
//! # What it does not do (yet)
//!
//! No HTTP/2 toward the proxy itself or inside a brokered tunnel, no upstream connection
//! reuse for forwarded or brokered HTTP, no authentication of clients (in `pinfold exec` the
//! only listener is inside the sandbox's own network namespace). A `CONNECT` tunnel must carry TLS; a SOCKS5 tunnel may
//! carry anything, but if it starts with TLS the server name must match (and to an endpoint
//! host it must be TLS). The secret is kept in memory as an ordinary string (not zeroed on
//! drop, not locked against swapping). See `docs/egress.md`.

pub mod host;

#[cfg(feature = "proxy")]
pub mod addr;
#[cfg(feature = "proxy")]
mod bridge;
#[cfg(feature = "proxy")]
pub mod broker;
#[cfg(feature = "proxy")]
mod brokered;
#[cfg(feature = "proxy")]
mod config;
#[cfg(feature = "proxy")]
mod decide;
#[cfg(feature = "proxy")]
mod error;
#[cfg(feature = "proxy")]
mod event;
#[cfg(feature = "proxy")]
mod http;
#[cfg(feature = "proxy")]
mod proxy;
#[cfg(feature = "proxy")]
mod requests;
#[cfg(feature = "proxy")]
mod server;
#[cfg(feature = "proxy")]
mod socks;
#[cfg(feature = "proxy")]
mod stream;
#[cfg(feature = "proxy")]
pub mod tls;
#[cfg(feature = "proxy")]
mod tunnel;

#[cfg(feature = "proxy")]
pub use bridge::bridge;
#[cfg(feature = "proxy")]
pub use broker::{SYSTEM_ROOTS, certs_from_pem, certs_from_pem_file};
#[cfg(feature = "proxy")]
pub use config::{Config, Endpoint, Limits, Resolver, Secret};
#[cfg(feature = "proxy")]
pub use error::{BuildError, EndpointProblem};
#[cfg(feature = "proxy")]
pub use event::{Event, EventSink, Outcome, Protocol, Refusal};
pub use host::{Host, HostPattern, HostPatternError, intersect_lists};
#[cfg(feature = "proxy")]
pub use proxy::Proxy;
#[cfg(feature = "proxy")]
pub use rustls::pki_types::CertificateDer;
