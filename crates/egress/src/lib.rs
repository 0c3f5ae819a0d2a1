//! pinfold's egress control: the proxy that runs outside the sandbox and decides, host by
//! host, where a sandboxed command's network traffic may go.
//!
//! # The pieces
//!
//! * [`HostPattern`] (module [`host`]): one allowlist entry (`crates.io`, `*.example.com`,
//!   `example.com:8443`, `127.0.0.1:8443`, `[::1]:443`), parsed and matched. It needs only the
//!   standard library, so the policy crate validates `network.hosts` with it without building
//!   the proxy (`default-features = false`).
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

pub mod host;

pub use host::{Host, HostPattern, HostPatternError, intersect_lists};
