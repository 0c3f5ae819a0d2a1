//! Host patterns: the entries of `network.hosts`, parsed once and matched many times.
//!
//! This module needs nothing but the standard library (and serde for the string form), so the
//! policy crate can validate configuration with it without building the proxy.

use std::fmt;
use std::net::{IpAddr, Ipv6Addr};

/// The ports a pattern without `:port` allows.
pub const DEFAULT_PORTS: [u16; 2] = [80, 443];

/// One allowlist entry: a host (exact name, `*.suffix`, or an IP literal) and an optional port.
///
/// * `example.com` matches `example.com` only, on ports 80 and 443.
/// * `*.example.com` matches `a.example.com` and `a.b.example.com`, never `example.com` itself.
/// * `example.com:8443`, `127.0.0.1:8443`, `[::1]:443` match that one port.
///
/// Names are compared in lower case, without a trailing dot. IP literals match only the same
/// literal (an IPv4-mapped IPv6 address counts as its IPv4 address), never a name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HostPattern {
    host: Host,
    port: Option<u16>,
}

/// The host part of a [`HostPattern`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Host {
    /// An exact DNS name, lower case.
    Name(String),
    /// `*.SUFFIX`: any name strictly below SUFFIX (lower case, without the `*.`).
    Subdomains(String),
    /// An IP address literal.
    Ip(IpAddr),
}

/// Why an entry is not a host pattern: one variant per failure, with the text it was read
/// from; [`HostPatternError::hint`] says what to write instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostPatternError {
    #[error("empty host")]
    Empty,
    #[error("`{0}` is a URL, not a host")]
    Url(String),
    #[error("`{0}` contains white space")]
    WhiteSpace(String),
    #[error("`{0}`: unclosed `[`")]
    UnclosedBracket(String),
    #[error("`{0}` is not an IPv6 address")]
    BadIpv6(String),
    #[error("`{text}`: unexpected `{after}` after `]`")]
    AfterBracket { text: String, after: String },
    #[error("`{0}` is not a host, an IP address or host:port")]
    TooManyColons(String),
    #[error("`{0}` has a port but no host")]
    PortWithoutHost(String),
    #[error("`{0}` is not an ASCII host name")]
    NotAscii(String),
    #[error("`{0}`: `*` may only be the whole first label")]
    StarInside(String),
    #[error("`{0}` ends with a dot")]
    TrailingDot(String),
    #[error("`{0}` is not a valid host name")]
    BadName(String),
    #[error("`*.{0}` would allow every name under `.{0}`")]
    WildTopLevel(String),
    #[error("`{whole}`: invalid port `{port}`")]
    BadPort { whole: String, port: String },
    #[error("`{whole}`: port `{port}` is out of range")]
    PortRange { whole: String, port: String },
}

impl HostPatternError {
    /// What to write instead, when there is more to say than the message.
    pub fn hint(&self) -> Option<&'static str> {
        use HostPatternError::*;
        Some(match self {
            Empty | WhiteSpace(_) | AfterBracket { .. } | PortWithoutHost(_) => return None,
            Url(_) => "write the host alone, e.g. \"crates.io\" or \"example.com:8443\"",
            UnclosedBracket(_) | BadIpv6(_) => "write IPv6 as \"[::1]:443\"",
            TooManyColons(_) => "write IPv6 addresses in brackets, e.g. \"[::1]:443\"",
            NotAscii(_) => "write internationalized names in their `xn--` form",
            StarInside(_) => "write \"*.example.com\" for every subdomain of example.com",
            TrailingDot(_) => "drop the trailing dot",
            BadName(_) => "use letters, digits, `-` and `.`, labels of at most 63 characters",
            WildTopLevel(_) => "name a registrable domain, e.g. \"*.example.com\"",
            BadPort { .. } | PortRange { .. } => "a port is a number from 1 to 65535",
        })
    }
}

/// A DNS name as a request names it: lower case, without a trailing dot; `None` if it is not
/// a well-formed name (letters, digits, `-`, `_`; labels of 1 to 63 bytes; at most 253 bytes).
pub fn normalize_name(name: &str) -> Option<String> {
    let name = name.strip_suffix('.').unwrap_or(name);
    if name.is_empty() || name.len() > 253 {
        return None;
    }
    for label in name.split('.') {
        let b = label.as_bytes();
        if b.is_empty()
            || b.len() > 63
            || b[0] == b'-'
            || b[b.len() - 1] == b'-'
            || !b
                .iter()
                .all(|c| c.is_ascii_alphanumeric() || *c == b'-' || *c == b'_')
        {
            return None;
        }
    }
    // `1.2.3` or `010.1.1.1` are not names: refuse what resolvers might read as numbers.
    let last = name.rsplit('.').next().unwrap_or(name);
    if last.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    Some(name.to_ascii_lowercase())
}

/// An IP literal as a request names it: `1.2.3.4`, `::1` or `[::1]`, mapped IPv4 made IPv4.
pub fn parse_ip_literal(text: &str) -> Option<IpAddr> {
    let inner = text
        .strip_prefix('[')
        .and_then(|t| t.strip_suffix(']'))
        .unwrap_or(text);
    inner.parse::<IpAddr>().ok().map(|ip| ip.to_canonical())
}

impl HostPattern {
    /// Parse one entry of `network.hosts`.
    pub fn parse(text: &str) -> Result<HostPattern, HostPatternError> {
        if text.is_empty() {
            return Err(HostPatternError::Empty);
        }
        if text.contains("://") || text.contains('/') {
            return Err(HostPatternError::Url(text.into()));
        }
        if text.bytes().any(|b| b.is_ascii_whitespace()) {
            return Err(HostPatternError::WhiteSpace(text.into()));
        }
        // `[v6]` or `[v6]:port`
        if let Some(rest) = text.strip_prefix('[') {
            let Some((addr, after)) = rest.split_once(']') else {
                return Err(HostPatternError::UnclosedBracket(text.into()));
            };
            let ip: Ipv6Addr = addr.parse().map_err(|_| HostPatternError::BadIpv6(addr.into()))?;
            let port = match after {
                "" => None,
                p => match p.strip_prefix(':') {
                    Some(p) => Some(parse_port(p, text)?),
                    None => {
                        return Err(HostPatternError::AfterBracket { text: text.into(), after: after.into() });
                    }
                },
            };
            return Ok(HostPattern {
                host: Host::Ip(IpAddr::V6(ip).to_canonical()),
                port,
            });
        }
        if text.matches(':').count() > 1 {
            return match text.parse::<Ipv6Addr>() {
                Ok(ip) => Ok(HostPattern {
                    host: Host::Ip(IpAddr::V6(ip).to_canonical()),
                    port: None,
                }),
                Err(_) => Err(HostPatternError::TooManyColons(text.into())),
            };
        }
        let (host, port) = match text.split_once(':') {
            Some((h, p)) => (h, Some(parse_port(p, text)?)),
            None => (text, None),
        };
        if host.is_empty() {
            return Err(HostPatternError::PortWithoutHost(text.into()));
        }
        if let Ok(ip) = host.parse::<IpAddr>() {
            return Ok(HostPattern {
                host: Host::Ip(ip.to_canonical()),
                port,
            });
        }
        if !host.is_ascii() {
            return Err(HostPatternError::NotAscii(host.into()));
        }
        let (wild, name) = match host.strip_prefix("*.") {
            Some(rest) => (true, rest),
            None => (false, host),
        };
        if name.contains('*') {
            return Err(HostPatternError::StarInside(host.into()));
        }
        if name.ends_with('.') {
            return Err(HostPatternError::TrailingDot(host.into()));
        }
        let Some(name) = normalize_name(name) else {
            return Err(HostPatternError::BadName(host.into()));
        };
        if wild {
            if !name.contains('.') {
                return Err(HostPatternError::WildTopLevel(name));
            }
            Ok(HostPattern {
                host: Host::Subdomains(name),
                port,
            })
        } else {
            Ok(HostPattern {
                host: Host::Name(name),
                port,
            })
        }
    }

    /// The host part.
    pub fn host(&self) -> &Host {
        &self.host
    }

    /// The port, or `None` for the default ports 80 and 443.
    pub fn port(&self) -> Option<u16> {
        self.port
    }

    /// Whether this pattern names one host exactly (a name or an IP literal, not `*.x`).
    /// Only an exact entry lets the proxy connect to a private or loopback address.
    pub fn is_exact(&self) -> bool {
        !matches!(self.host, Host::Subdomains(_))
    }

    fn port_allows(&self, port: u16) -> bool {
        match self.port {
            Some(p) => p == port,
            None => DEFAULT_PORTS.contains(&port),
        }
    }

    /// Whether a request for `host` (a name or an IP literal, any case, `[v6]` accepted) on
    /// `port` matches.
    pub fn matches(&self, host: &str, port: u16) -> bool {
        if !self.port_allows(port) {
            return false;
        }
        if let Some(ip) = parse_ip_literal(host) {
            return self.host == Host::Ip(ip);
        }
        let Some(name) = normalize_name(host) else {
            return false;
        };
        self.matches_name(&name)
    }

    fn matches_name(&self, name: &str) -> bool {
        match &self.host {
            Host::Name(n) => n == name,
            Host::Subdomains(s) => is_strictly_below(name, s),
            Host::Ip(_) => false,
        }
    }

    /// What both patterns allow, if anything: the host and port sets intersected.
    pub fn intersect(&self, other: &HostPattern) -> Option<HostPattern> {
        let port = match (self.port, other.port) {
            (None, None) => None,
            (Some(p), None) | (None, Some(p)) => DEFAULT_PORTS.contains(&p).then_some(p)?.into(),
            (Some(a), Some(b)) => (a == b).then_some(a)?.into(),
        };
        let host = match (&self.host, &other.host) {
            (Host::Ip(a), Host::Ip(b)) => (a == b).then_some(Host::Ip(*a))?,
            (Host::Ip(_), _) | (_, Host::Ip(_)) => return None,
            (Host::Name(a), Host::Name(b)) => (a == b).then(|| Host::Name(a.clone()))?,
            (Host::Name(n), Host::Subdomains(s)) | (Host::Subdomains(s), Host::Name(n)) => {
                is_strictly_below(n, s).then(|| Host::Name(n.clone()))?
            }
            (Host::Subdomains(a), Host::Subdomains(b)) => {
                if a == b || is_strictly_below(a, b) {
                    Host::Subdomains(a.clone())
                } else if is_strictly_below(b, a) {
                    Host::Subdomains(b.clone())
                } else {
                    return None;
                }
            }
        };
        Some(HostPattern { host, port })
    }

    /// Whether everything `other` allows, this allows too.
    pub fn covers(&self, other: &HostPattern) -> bool {
        self.intersect(other).as_ref() == Some(other)
    }
}

/// `a.b.example.com` is strictly below `example.com`; `example.com` is not.
fn is_strictly_below(name: &str, suffix: &str) -> bool {
    name.len() > suffix.len() + 1
        && name.ends_with(suffix)
        && name.as_bytes()[name.len() - suffix.len() - 1] == b'.'
}

fn parse_port(p: &str, whole: &str) -> Result<u16, HostPatternError> {
    if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) || p.len() > 5 {
        return Err(HostPatternError::BadPort { whole: whole.into(), port: p.into() });
    }
    match p.parse::<u32>() {
        Ok(n @ 1..=65535) => Ok(n as u16),
        _ => Err(HostPatternError::PortRange { whole: whole.into(), port: p.into() }),
    }
}

impl fmt::Display for HostPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.host, self.port) {
            (Host::Name(n), _) => f.write_str(n)?,
            (Host::Subdomains(s), _) => write!(f, "*.{s}")?,
            (Host::Ip(IpAddr::V6(ip)), Some(_)) => write!(f, "[{ip}]")?,
            (Host::Ip(ip), _) => write!(f, "{ip}")?,
        }
        if let Some(p) = self.port {
            write!(f, ":{p}")?;
        }
        Ok(())
    }
}

impl std::str::FromStr for HostPattern {
    type Err = HostPatternError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        HostPattern::parse(s)
    }
}

impl serde::Serialize for HostPattern {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for HostPattern {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        HostPattern::parse(&text).map_err(|e| match e.hint() {
            Some(h) => serde::de::Error::custom(format!("{e} ({h})")),
            None => serde::de::Error::custom(e),
        })
    }
}

/// The hosts every list allows, as patterns: each list is one preset's allowlist, and the
/// result allows a host on a port exactly when every list does. Patterns covered by another
/// in the result are dropped. An empty result allows nothing.
pub fn intersect_lists(lists: &[&[HostPattern]]) -> Vec<HostPattern> {
    let Some((first, rest)) = lists.split_first() else {
        return Vec::new();
    };
    let mut acc: Vec<HostPattern> = first.to_vec();
    for list in rest {
        let mut next = Vec::new();
        for a in &acc {
            for b in list.iter() {
                if let Some(c) = a.intersect(b) {
                    next.push(c);
                }
            }
        }
        acc = next;
    }
    minimize(acc)
}

/// Sorted, without duplicates or patterns another one covers.
fn minimize(mut v: Vec<HostPattern>) -> Vec<HostPattern> {
    v.sort();
    v.dedup();
    let keep: Vec<bool> = v
        .iter()
        .enumerate()
        .map(|(i, p)| !v.iter().enumerate().any(|(j, q)| i != j && q.covers(p)))
        .collect();
    v.into_iter()
        .zip(keep)
        .filter_map(|(p, k)| k.then_some(p))
        .collect()
}

// address-literal: never connected (patterns parsed and matched only)
#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> HostPattern {
        HostPattern::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn parses_and_prints() {
        for (text, shown) in [
            ("crates.io", "crates.io"),
            ("Static.Crates.IO:443", "static.crates.io:443"),
            ("*.githubusercontent.com", "*.githubusercontent.com"),
            ("127.0.0.1:8443", "127.0.0.1:8443"),
            ("[::1]:443", "[::1]:443"),
            ("::1", "::1"),
            ("[::ffff:10.0.0.1]", "10.0.0.1"),
            ("localhost", "localhost"),
            ("under_score.example", "under_score.example"),
        ] {
            assert_eq!(p(text).to_string(), shown, "{text}");
        }
    }

    #[test]
    fn rejects_malformed() {
        for bad in [
            "",
            "https://crates.io",
            "crates.io/x",
            "a b",
            "example.com:",
            "example.com:0",
            "example.com:65536",
            "example.com:http",
            ":443",
            "*",
            "*.com",
            "a.*.com",
            "*example.com",
            "-a.com",
            "a-.com",
            "a..com",
            "example.com.",
            "1.2.3",
            "[::1",
            "[zz]:1",
            "[::1]x",
            "1:2:3",
            "bücher.de",
            "**.a.com",
        ] {
            assert!(
                HostPattern::parse(bad).is_err(),
                "{bad:?} should be rejected"
            );
        }
        let e = HostPattern::parse("example.com:70000").unwrap_err();
        assert!(e.to_string().contains("out of range"), "{e}");
        assert_eq!(e.hint(), Some("a port is a number from 1 to 65535"));
    }

    #[test]
    fn wildcard_is_subdomains_only() {
        let w = p("*.example.com");
        assert!(w.matches("a.example.com", 443));
        assert!(w.matches("A.B.Example.com.", 80));
        assert!(!w.matches("example.com", 443));
        assert!(!w.matches("badexample.com", 443));
        assert!(!w.matches("a.example.com", 8080));
    }

    #[test]
    fn ports() {
        assert!(p("x.io").matches("x.io", 80));
        assert!(p("x.io").matches("x.io", 443));
        assert!(!p("x.io").matches("x.io", 22));
        assert!(p("x.io:22").matches("x.io", 22));
        assert!(!p("x.io:22").matches("x.io", 443));
    }

    #[test]
    fn ip_literals_match_only_literals() {
        assert!(p("127.0.0.1:8443").matches("127.0.0.1", 8443));
        assert!(p("[::1]:443").matches("[::1]", 443));
        assert!(p("[::1]:443").matches("::1", 443));
        assert!(p("10.0.0.1").matches("::ffff:10.0.0.1", 443));
        assert!(!p("127.0.0.1").matches("localhost", 443));
        assert!(!p("localhost").matches("127.0.0.1", 443));
    }

    #[test]
    fn intersections() {
        let i = |a: &str, b: &str| p(a).intersect(&p(b)).map(|x| x.to_string());
        assert_eq!(
            i("*.example.com", "api.example.com").as_deref(),
            Some("api.example.com")
        );
        assert_eq!(i("*.example.com", "example.com"), None);
        assert_eq!(
            i("*.example.com", "*.a.example.com").as_deref(),
            Some("*.a.example.com")
        );
        assert_eq!(
            i("example.com", "example.com:443").as_deref(),
            Some("example.com:443")
        );
        assert_eq!(i("example.com", "example.com:8080"), None);
        assert_eq!(i("example.com:8080", "*.example.com:8080"), None);
        assert_eq!(
            i("a.example.com", "*.example.com:443").as_deref(),
            Some("a.example.com:443")
        );
        assert_eq!(i("127.0.0.1", "localhost"), None);
        let a = [p("crates.io"), p("*.github.com"), p("example.com:8443")];
        let b = [
            p("crates.io:443"),
            p("api.github.com"),
            p("*.github.com:443"),
        ];
        let mut got: Vec<String> = intersect_lists(&[&a, &b])
            .iter()
            .map(|x| x.to_string())
            .collect();
        got.sort();
        assert_eq!(got, ["*.github.com:443", "api.github.com", "crates.io:443"]);
        // `api.github.com:443` is covered by `*.github.com:443` and not listed twice.
        assert!(intersect_lists(&[&a, &[]]).is_empty());
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        const LABELS: [&str; 3] = ["a", "b", "example"];
        const PORTS: [u16; 4] = [80, 443, 8080, 22];

        fn name(min: usize) -> impl Strategy<Value = String> {
            prop::collection::vec(prop::sample::select(&LABELS[..]), min..=3)
                .prop_map(|l| format!("{}.com", l.join(".")))
        }

        fn pattern() -> impl Strategy<Value = HostPattern> {
            let host = prop_oneof![
                name(1).prop_map(|n| n),
                name(1).prop_map(|n| format!("*.{n}")),
                Just("127.0.0.1".to_string()),
                Just("[::1]".to_string()),
            ];
            let port = prop::option::of(prop::sample::select(&PORTS[..3]));
            (host, port).prop_map(|(h, p)| {
                let text = match p {
                    Some(p) => format!("{h}:{p}"),
                    None if h == "[::1]" => "::1".into(),
                    None => h,
                };
                HostPattern::parse(&text).unwrap()
            })
        }

        fn request() -> impl Strategy<Value = (String, u16)> {
            let host = prop_oneof![
                name(0),
                Just("127.0.0.1".to_string()),
                Just("::1".to_string()),
            ];
            (host, prop::sample::select(&PORTS[..]))
        }

        proptest! {
            /// The intersection allows exactly what both allow.
            #[test]
            fn intersect_is_exact(a in pattern(), b in pattern(), reqs in prop::collection::vec(request(), 1..20)) {
                let i = a.intersect(&b);
                for (h, p) in &reqs {
                    let both = a.matches(h, *p) && b.matches(h, *p);
                    let got = i.as_ref().is_some_and(|i| i.matches(h, *p));
                    prop_assert_eq!(got, both, "{} ∩ {} = {:?} on {}:{}", a, b, i, h, p);
                }
            }

            /// Merged allowlists allow a request exactly when every list does.
            #[test]
            fn lists_intersect_exactly(
                lists in prop::collection::vec(prop::collection::vec(pattern(), 0..4), 1..4),
                reqs in prop::collection::vec(request(), 1..20),
            ) {
                let slices: Vec<&[HostPattern]> = lists.iter().map(Vec::as_slice).collect();
                let merged = intersect_lists(&slices);
                for (h, p) in &reqs {
                    let every = lists.iter().all(|l| l.iter().any(|x| x.matches(h, *p)));
                    let got = merged.iter().any(|x| x.matches(h, *p));
                    prop_assert_eq!(got, every, "{:?} -> {:?} on {}:{}", lists, merged, h, p);
                }
            }

            /// Any text either fails with a message or parses to a pattern that prints and
            /// parses back to itself.
            #[test]
            fn parse_any_text(text in "[a-zA-Z0-9.*:\\[\\]_-]{0,24}|\\PC{0,24}") {
                if let Ok(p) = HostPattern::parse(&text) {
                    prop_assert_eq!(HostPattern::parse(&p.to_string()).unwrap(), p);
                }
            }

            /// What a pattern prints parses back to the same pattern.
            #[test]
            fn display_round_trips(a in pattern()) {
                prop_assert_eq!(HostPattern::parse(&a.to_string()).unwrap(), a);
            }
        }
    }
}
