//! The crate's errors, one variant per failure, each keeping the error it came from
//! (`source()`): building a [`crate::Proxy`] ([`BuildError`]), and the failures on the way to
//! an upstream that end up in an event's outcome or a refusal's reason.

use std::error::Error as StdError;
use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;

use rustls::pki_types::InvalidDnsNameError;

use crate::event::Refusal;

/// Why a [`crate::Proxy`] could not be built. No variant holds a secret.
#[derive(Debug)]
pub enum BuildError {
    /// An endpoint that cannot be brokered as configured.
    Endpoint {
        host: String,
        credential: String,
        why: EndpointProblem,
    },
    /// The system roots file could not be read.
    SystemRoots { path: PathBuf, source: io::Error },
    /// A PEM file (`network.upstream_ca`) could not be read.
    PemRead { path: PathBuf, source: io::Error },
    /// PEM text that does not parse (`path` when it came from a file).
    Pem {
        path: Option<PathBuf>,
        source: rustls::pki_types::pem::Error,
    },
    /// PEM text without a certificate (`path` when it came from a file).
    NoCertificate { path: Option<PathBuf> },
    /// An extra upstream root that rustls does not accept as a trust anchor.
    UpstreamCa { index: usize, source: rustls::Error },
    /// Generating the per-run CA failed.
    Ca(rcgen::Error),
    /// The TLS configuration toward upstreams could not be built.
    Tls(rustls::Error),
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = |f: &mut fmt::Formatter<'_>, path: &Option<PathBuf>| match path {
            Some(p) => write!(f, "{}: ", p.display()),
            None => Ok(()),
        };
        match self {
            BuildError::Endpoint {
                host,
                credential,
                why,
            } => write!(f, "endpoint {host} (credential `{credential}`): {why}"),
            BuildError::SystemRoots { path, source } => {
                write!(f, "cannot read system roots {}: {source}", path.display())
            }
            BuildError::PemRead { path, source } => write!(f, "{}: {source}", path.display()),
            BuildError::Pem { path, source } => {
                at(f, path)?;
                write!(f, "bad PEM: {source}")
            }
            BuildError::NoCertificate { path } => {
                at(f, path)?;
                f.write_str("no certificate in PEM text")
            }
            BuildError::UpstreamCa { index, source } => {
                write!(f, "upstream CA #{}: {source}", index + 1)
            }
            BuildError::Ca(e) => write!(f, "cannot generate the per-run CA: {e}"),
            BuildError::Tls(e) => write!(f, "cannot configure TLS toward upstreams: {e}"),
        }
    }
}

impl StdError for BuildError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match self {
            BuildError::Endpoint { why, .. } => Some(why),
            BuildError::SystemRoots { source, .. } | BuildError::PemRead { source, .. } => Some(source),
            BuildError::Pem { source, .. } => Some(source),
            BuildError::UpstreamCa { source, .. } => Some(source),
            BuildError::Ca(e) => Some(e),
            BuildError::Tls(e) => Some(e),
            BuildError::NoCertificate { .. } => None,
        }
    }
}

impl BuildError {
    /// The PEM errors of [`crate::certs_from_pem`], given the file the text came from.
    pub(crate) fn in_file(self, file: &std::path::Path) -> BuildError {
        match self {
            BuildError::Pem { source, .. } => BuildError::Pem {
                path: Some(file.to_path_buf()),
                source,
            },
            BuildError::NoCertificate { .. } => BuildError::NoCertificate {
                path: Some(file.to_path_buf()),
            },
            other => other,
        }
    }
}

/// What is wrong with an endpoint's configuration (the secret is never quoted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndpointProblem {
    /// `*.example.com`: an endpoint is one exact host.
    Subdomains,
    /// The header is not a valid header name.
    HeaderName,
    /// The header frames or routes the request (`Host`, `Content-Length`…).
    FramingHeader,
    /// The format does not hold `{}` exactly once.
    Format,
    /// The secret is empty.
    EmptySecret,
    /// The formatted secret is not a valid header value.
    HeaderValue,
}

impl fmt::Display for EndpointProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            EndpointProblem::Subdomains => "an endpoint names one exact host, not `*.`",
            EndpointProblem::HeaderName => "the header is not a valid header name",
            EndpointProblem::FramingHeader => {
                "the header frames or routes the request; it cannot carry a credential"
            }
            EndpointProblem::Format => "the format must contain `{}` exactly once",
            EndpointProblem::EmptySecret => "the secret is empty",
            EndpointProblem::HeaderValue => {
                "the formatted secret is not a valid header value \
                 (control characters such as a trailing newline, or non-ASCII)"
            }
        })
    }
}

impl StdError for EndpointProblem {}

/// Why no connection to a decided upstream was made.
#[derive(Debug)]
pub(crate) enum ConnectError {
    /// The decision left no address to try.
    NoAddress,
    /// The last address tried refused or failed.
    Io { addr: SocketAddr, source: io::Error },
    /// The last address tried did not answer within the connect timeout.
    TimedOut { addr: SocketAddr },
}

impl fmt::Display for ConnectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConnectError::NoAddress => f.write_str("no address"),
            ConnectError::Io { addr, source } => write!(f, "{addr}: {source}"),
            ConnectError::TimedOut { addr } => write!(f, "{addr}: connect timed out"),
        }
    }
}

impl StdError for ConnectError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match self {
            ConnectError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Why verified TLS to a credential endpoint's upstream was not established.
#[derive(Debug)]
pub(crate) enum UpstreamTlsError {
    /// The proxy has no upstream TLS configuration (it has no endpoints).
    NoConfig,
    /// The host is not a name TLS can verify.
    Name(InvalidDnsNameError),
    /// The handshake failed (an untrusted certificate among others).
    Handshake(io::Error),
    /// The handshake did not finish within the connect timeout.
    TimedOut,
}

impl fmt::Display for UpstreamTlsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UpstreamTlsError::NoConfig => f.write_str("no upstream TLS configuration"),
            UpstreamTlsError::Name(e) => write!(f, "upstream TLS: {e}"),
            UpstreamTlsError::Handshake(e) => write!(f, "upstream TLS: {e}"),
            UpstreamTlsError::TimedOut => f.write_str("upstream TLS: handshake timed out"),
        }
    }
}

impl StdError for UpstreamTlsError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match self {
            UpstreamTlsError::Name(e) => Some(e),
            UpstreamTlsError::Handshake(e) => Some(e),
            _ => None,
        }
    }
}

/// Why a later request in a brokered tunnel got no fresh upstream connection.
#[derive(Debug)]
pub(crate) enum ReopenError {
    /// Decided again, and refused (the allowlist or the addresses changed their answer).
    Refused(Refusal),
    /// Decided, but no connection was made.
    Connect(ConnectError),
    /// Connected, but TLS was not verified.
    Tls(UpstreamTlsError),
}

impl fmt::Display for ReopenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReopenError::Refused(r) => write!(f, "{r}"),
            ReopenError::Connect(e) => write!(f, "cannot reach upstream: {e}"),
            ReopenError::Tls(e) => write!(f, "{e}"),
        }
    }
}

impl StdError for ReopenError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match self {
            ReopenError::Refused(_) => None,
            ReopenError::Connect(e) => Some(e),
            ReopenError::Tls(e) => Some(e),
        }
    }
}

/// Why a leaf certificate for an endpoint host could not be made.
#[derive(Debug)]
pub(crate) enum MintError {
    /// Generating or signing the certificate failed.
    Certificate(rcgen::Error),
    /// rustls refused the certificate and key.
    Tls(rustls::Error),
}

impl fmt::Display for MintError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MintError::Certificate(e) => write!(f, "{e}"),
            MintError::Tls(e) => write!(f, "{e}"),
        }
    }
}

impl StdError for MintError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match self {
            MintError::Certificate(e) => Some(e),
            MintError::Tls(e) => Some(e),
        }
    }
}

/// Why a request inside a brokered tunnel may not carry the credential.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Unbrokerable {
    /// A `CONNECT` inside the tunnel.
    Connect,
    /// HTTP/2 or later framing.
    NotHttp1,
    /// An `Upgrade` (WebSocket, h2c).
    Upgrade,
    /// An absolute URL with a scheme other than `https`.
    Scheme(String),
    /// An absolute URL naming another authority.
    Authority(String),
    /// Two `Host` headers.
    TwoHosts,
    /// A `Host` header naming another host.
    Host(String),
}

impl fmt::Display for Unbrokerable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unbrokerable::Connect => f.write_str("CONNECT inside the tunnel is not brokered"),
            Unbrokerable::NotHttp1 => f.write_str("only HTTP/1.x is brokered"),
            Unbrokerable::Upgrade => {
                f.write_str("Upgrade requests (WebSocket, h2c) cannot carry the credential safely")
            }
            Unbrokerable::Scheme(s) => write!(f, "a `{s}://` URL inside a TLS tunnel"),
            Unbrokerable::Authority(a) => write!(f, "the URL names `{a}`, not the endpoint"),
            Unbrokerable::TwoHosts => f.write_str("more than one Host header"),
            Unbrokerable::Host(h) => write!(f, "Host `{}` is not the endpoint", h.escape_debug()),
        }
    }
}

impl StdError for Unbrokerable {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_errors_keep_their_source_and_name_the_file() {
        let gone = std::env::temp_dir().join(format!("pinfold-no-such-pem-{}", std::process::id()));
        let e = crate::certs_from_pem_file(&gone).unwrap_err();
        assert!(matches!(&e, BuildError::PemRead { path, .. } if *path == gone), "{e:?}");
        let io = e.source().and_then(|s| s.downcast_ref::<io::Error>()).expect("the io::Error is kept");
        assert_eq!(io.kind(), io::ErrorKind::NotFound);
        assert_eq!(e.to_string(), format!("{}: {io}", gone.display()));

        let e = crate::certs_from_pem(b"just text").unwrap_err();
        assert!(matches!(e, BuildError::NoCertificate { path: None }), "{e:?}");
        assert_eq!(e.to_string(), "no certificate in PEM text");
        let e = e.in_file(std::path::Path::new("/etc/x.pem"));
        assert_eq!(e.to_string(), "/etc/x.pem: no certificate in PEM text");

        let bad = b"-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n";
        let e = crate::certs_from_pem(bad).unwrap_err().in_file(std::path::Path::new("/etc/x.pem"));
        assert!(matches!(e, BuildError::Pem { path: Some(_), .. }), "{e:?}");
        assert!(e.to_string().starts_with("/etc/x.pem: bad PEM: "), "{e}");
        assert!(e.source().is_some());
    }

    #[test]
    fn an_endpoint_problem_is_the_cause_of_its_build_error() {
        let e = BuildError::Endpoint {
            host: "api.test".into(),
            credential: "gh".into(),
            why: EndpointProblem::Format,
        };
        assert_eq!(e.to_string(), "endpoint api.test (credential `gh`): the format must contain `{}` exactly once");
        let why = e.source().and_then(|s| s.downcast_ref::<EndpointProblem>());
        assert_eq!(why, Some(&EndpointProblem::Format));
    }

    #[test]
    fn upstream_failures_read_as_before_and_chain_their_cause() {
        let addr: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let refused = io::Error::from(io::ErrorKind::ConnectionRefused);
        let text = format!("127.0.0.1:9: {refused}");
        let e = ReopenError::Connect(ConnectError::Io { addr, source: refused });
        assert_eq!(e.to_string(), format!("cannot reach upstream: {text}"));
        let inner = e.source().expect("the connect error");
        assert_eq!(inner.to_string(), text);
        assert!(inner.source().and_then(|s| s.downcast_ref::<io::Error>()).is_some());
        assert_eq!(ConnectError::TimedOut { addr }.to_string(), "127.0.0.1:9: connect timed out");
        assert_eq!(
            ReopenError::Refused(Refusal::NotAllowed).to_string(),
            "host and port are not on the allowlist"
        );
        assert_eq!(UpstreamTlsError::TimedOut.to_string(), "upstream TLS: handshake timed out");
        assert_eq!(
            Unbrokerable::Host("a\nb".into()).to_string(),
            "Host `a\\nb` is not the endpoint"
        );
    }
}
