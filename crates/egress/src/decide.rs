//! The decision for one host and port, before any byte goes upstream: the allowlist, the
//! resolution and the address classes ([`Target`], or the [`Refusal`]); the connection to an
//! address decided on; and what a tunnel's first client bytes must be ([`Expect`]).

use std::net::{IpAddr, SocketAddr};

use tokio::net::TcpStream;

use crate::addr::classify;
use crate::error::ConnectError;
use crate::event::Refusal;
use crate::host::{HostPattern, normalize_name, parse_ip_literal};
use crate::proxy::Proxy;
use crate::tls::Hello;

/// A decision before connecting: where to go, or why not.
pub(crate) struct Target {
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) addrs: Vec<IpAddr>,
    /// Set for an IP literal: the TLS server name must then be absent.
    pub(crate) ip_literal: bool,
}

impl Target {
    /// The host as an address, when it is an IP literal.
    pub(crate) fn addr_literal(&self) -> Option<IpAddr> {
        if self.ip_literal {
            parse_ip_literal(&self.host)
        } else {
            None
        }
    }

    /// `host[:port]` as a `Host` header names it (the port left out when it is the default).
    pub(crate) fn authority(&self, default_port: u16) -> String {
        let host = match self.addr_literal() {
            Some(IpAddr::V6(ip)) => format!("[{ip}]"),
            _ => self.host.clone(),
        };
        if self.port == default_port {
            host
        } else {
            format!("{host}:{}", self.port)
        }
    }

    /// Whether `text` (a `Host` header or a URL's authority) names this host and port.
    pub(crate) fn is_authority(&self, text: &str, default_port: u16) -> bool {
        let Ok(a) = text.parse::<hyper::http::uri::Authority>() else {
            return false;
        };
        if a.as_str().contains('@') || a.port_u16().unwrap_or(default_port) != self.port {
            return false;
        }
        match (self.addr_literal(), parse_ip_literal(a.host())) {
            (Some(mine), Some(theirs)) => mine == theirs,
            (None, None) => normalize_name(a.host()).is_some_and(|n| n == self.host),
            _ => false,
        }
    }
}

impl Proxy {
    /// Check the host against the allowlist, resolve it, and keep the addresses it may use.
    pub(crate) async fn decide(&self, host: &str, port: u16) -> Result<Target, Refusal> {
        let (host, ip_literal) = match parse_ip_literal(host) {
            Some(ip) => (ip.to_string(), true),
            None => (normalize_name(host).ok_or(Refusal::BadHost)?, false),
        };
        let matching: Vec<&HostPattern> = self
            .config
            .allow
            .iter()
            .filter(|p| p.matches(&host, port))
            .collect();
        if matching.is_empty() {
            return Err(Refusal::NotAllowed);
        }
        let listed_exactly = matching.iter().any(|p| p.is_exact());
        let resolved = if ip_literal {
            vec![parse_ip_literal(&host).ok_or(Refusal::BadHost)?]
        } else {
            let lookup = self.config.resolver.resolve(&host, port);
            match tokio::time::timeout(self.config.limits.connect_timeout, lookup).await {
                Ok(Ok(addrs)) if !addrs.is_empty() => addrs,
                Ok(Ok(_)) => return Err(Refusal::Unresolved("no addresses".into())),
                Ok(Err(e)) => return Err(Refusal::Unresolved(e.to_string())),
                Err(_) => return Err(Refusal::Unresolved("timed out".into())),
            }
        };
        let mut first_special = None;
        let mut addrs = Vec::new();
        for ip in resolved {
            let ip = ip.to_canonical();
            match classify(ip) {
                Some(class) if !listed_exactly && !self.address_listed(ip, port) => {
                    first_special.get_or_insert(Refusal::Address { ip, class });
                }
                _ => addrs.push(ip),
            }
        }
        if addrs.is_empty() {
            return Err(first_special.unwrap_or(Refusal::Unresolved("no addresses".into())));
        }
        Ok(Target {
            host,
            port,
            addrs,
            ip_literal,
        })
    }

    /// Whether the allowlist names this address (and port) as an IP literal.
    fn address_listed(&self, ip: IpAddr, port: u16) -> bool {
        let literal = ip.to_string();
        self.config
            .allow
            .iter()
            .any(|p| *p.host() == crate::host::Host::Ip(ip) && p.matches(&literal, port))
    }

    /// Connect to the first address that answers.
    pub(crate) async fn connect(&self, target: &Target) -> Result<(TcpStream, SocketAddr), ConnectError> {
        let mut last = ConnectError::NoAddress;
        for ip in &target.addrs {
            let addr = SocketAddr::new(*ip, target.port);
            match tokio::time::timeout(self.config.limits.connect_timeout, TcpStream::connect(addr))
                .await
            {
                Ok(Ok(s)) => {
                    let _ = s.set_nodelay(true);
                    return Ok((s, addr));
                }
                Ok(Err(source)) => last = ConnectError::Io { addr, source },
                Err(_) => last = ConnectError::TimedOut { addr },
            }
        }
        Err(last)
    }
}

/// What a tunnel's first client bytes must be.
pub(crate) enum Expect {
    /// A TLS ClientHello naming `host` (or no name, for an IP literal).
    Tls { host: String, ip_literal: bool },
    /// Anything; but if it is TLS, the name must match (SOCKS).
    TlsIfAny { host: String, ip_literal: bool },
}

impl Expect {
    pub(crate) fn check(&self, hello: &Hello) -> Option<Refusal> {
        let (host, ip_literal, required) = match self {
            Expect::Tls { host, ip_literal } => (host, *ip_literal, true),
            Expect::TlsIfAny { host, ip_literal } => (host, *ip_literal, false),
        };
        match hello {
            Hello::NotTls if required => Some(Refusal::NotTls(
                "the first bytes are not a TLS handshake".into(),
            )),
            Hello::NotTls => None,
            Hello::Malformed(why) => Some(Refusal::NotTls((*why).into())),
            Hello::Tls { sni: None } if ip_literal => None,
            Hello::Tls { sni } => {
                let same = sni
                    .as_deref()
                    .and_then(normalize_name)
                    .is_some_and(|s| !ip_literal && s == *host);
                (!same).then(|| Refusal::SniMismatch { sni: sni.clone() })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // address-literal: never connected (server names compared only)
    #[test]
    fn sni_rules() {
        let tls = |host: &str, ip: bool| Expect::Tls {
            host: host.into(),
            ip_literal: ip,
        };
        let hello = |s: Option<&str>| Hello::Tls {
            sni: s.map(String::from),
        };
        assert_eq!(tls("a.com", false).check(&hello(Some("a.com"))), None);
        assert!(tls("a.com", false).check(&hello(Some("b.com"))).is_some());
        assert!(tls("a.com", false).check(&hello(None)).is_some());
        assert_eq!(tls("127.0.0.1", true).check(&hello(None)), None);
        assert!(
            tls("127.0.0.1", true)
                .check(&hello(Some("a.com")))
                .is_some()
        );
        assert!(tls("a.com", false).check(&Hello::NotTls).is_some());
        let any = Expect::TlsIfAny {
            host: "a.com".into(),
            ip_literal: false,
        };
        assert_eq!(any.check(&Hello::NotTls), None);
        assert!(any.check(&hello(Some("b.com"))).is_some());
    }
}
