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
//!   5. reports an [`Event`] (host, port, address, outcome, bytes each way) to the sink.
//!
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
//! # What it does not do (yet)
//!
//! No credential injection or TLS termination (the broker), no HTTP/2 toward the proxy
//! itself, no upstream connection reuse for forwarded HTTP, no authentication of clients (the
//! socket is reached only from the sandbox's bridge). A `CONNECT` tunnel must carry TLS;
//! a SOCKS5 tunnel may carry anything, but if it starts with TLS the server name must match.
//! See `docs/egress.md`.

pub mod host;

#[cfg(feature = "proxy")]
pub mod addr;
#[cfg(feature = "proxy")]
mod bridge;
#[cfg(feature = "proxy")]
pub mod broker;
#[cfg(feature = "proxy")]
mod proxy;
#[cfg(feature = "proxy")]
mod socks;
#[cfg(feature = "proxy")]
pub mod tls;

#[cfg(feature = "proxy")]
pub use bridge::bridge;
#[cfg(feature = "proxy")]
pub use broker::{BuildError, Endpoint, SYSTEM_ROOTS, Secret, certs_from_pem, certs_from_pem_file};
pub use host::{Host, HostPattern, HostPatternError, intersect_lists};
#[cfg(feature = "proxy")]
pub use proxy::{Config, Event, EventSink, Limits, Outcome, Protocol, Proxy, Refusal, Resolver};
#[cfg(feature = "proxy")]
pub use rustls::pki_types::CertificateDer;
