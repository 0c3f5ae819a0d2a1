//! The credential broker: for an endpoint host the proxy terminates the client's TLS with a
//! per-run CA, checks each HTTP/1.1 request, replaces the configured header with the secret,
//! and sends the request on over TLS it verified itself.
//!
//! The order for one brokered tunnel (`CONNECT`, or SOCKS5 to an endpoint host):
//! 1. the usual decision: allowlist, resolution, address classes, TCP connect;
//! 2. TLS to the upstream, verified against the system roots and `Config::upstream_ca`, before
//!    the client is told the tunnel exists (an untrusted upstream gets `502` with the reason);
//! 3. the client's ClientHello: its server name must be the tunnel's host (as for any tunnel);
//! 4. the client's TLS is terminated with a leaf certificate for that host, minted from the
//!    per-run CA (one per host, cached), offering only `http/1.1`;
//! 5. each request: refused with `403` if it cannot carry the secret safely (an `Upgrade`,
//!    a `Host` or absolute URL naming anything but the endpoint, HTTP/2's preface, a nested
//!    `CONNECT`); otherwise every client value of the header is removed, the secret is set,
//!    and the request goes upstream on its own verified TLS connection.

use std::collections::HashMap;
use std::fmt;
use std::io;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use hyper::body::Incoming;
use hyper::header::{self, HeaderName, HeaderValue};
use hyper::{Method, Request, Response, StatusCode, Version};
use hyper_util::rt::{TokioIo, TokioTimer};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, CidrSubnet, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, GeneralSubtree, IsCa, KeyPair, KeyUsagePurpose, NameConstraints,
    SanType,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

use crate::host::{Host, HostPattern};
use crate::proxy::{
    Body, Event, Expect, Outcome, Proxy, Refusal, Rewind, Target, refuse, strip_hop_by_hop,
};
use crate::tls::Hello;

/// Where Debian, Ubuntu, Alpine and Arch keep the system's trusted roots as one PEM file.
pub const SYSTEM_ROOTS: &str = "/etc/ssl/certs/ca-certificates.crt";

/// What an HTTP/2 client with prior knowledge sends first.
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// A secret value. `Debug` prints `<redacted>`; there is no `Display`, no serialization, and
/// the only way to the bytes is inside this crate.
#[derive(Clone)]
pub struct Secret(Arc<str>);

impl Secret {
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(Arc::from(value.into()))
    }

    fn expose(&self) -> &str {
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
    /// The credential's name: reported in [`Event::credential`], never the value.
    pub credential: String,
    /// The header to set, e.g. `Authorization`.
    pub header: String,
    /// The header's value with `{}` exactly once, e.g. `Bearer {}`.
    pub format: String,
    pub secret: Secret,
}

/// Why a [`Proxy`] could not be built. No variant holds a secret.
#[derive(Debug)]
pub enum BuildError {
    /// An endpoint that cannot be brokered as configured.
    Endpoint {
        host: String,
        credential: String,
        why: String,
    },
    /// The system roots file could not be read.
    SystemRoots { path: PathBuf, source: io::Error },
    /// PEM text without usable certificates (`path` when it came from a file).
    Pem { path: Option<PathBuf>, why: String },
    /// An extra upstream root that rustls does not accept as a trust anchor.
    UpstreamCa { index: usize, why: String },
    /// Generating the per-run CA failed.
    Ca(String),
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::Endpoint {
                host,
                credential,
                why,
            } => write!(f, "endpoint {host} (credential `{credential}`): {why}"),
            BuildError::SystemRoots { path, source } => {
                write!(f, "cannot read system roots {}: {source}", path.display())
            }
            BuildError::Pem {
                path: Some(path),
                why,
            } => write!(f, "{}: {why}", path.display()),
            BuildError::Pem { path: None, why } => f.write_str(why),
            BuildError::UpstreamCa { index, why } => {
                write!(f, "upstream CA #{}: {why}", index + 1)
            }
            BuildError::Ca(why) => write!(f, "cannot generate the per-run CA: {why}"),
        }
    }
}

impl std::error::Error for BuildError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BuildError::SystemRoots { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// The certificates in PEM text (`-----BEGIN CERTIFICATE-----` blocks; other blocks are
/// skipped). At least one is required.
pub fn certs_from_pem(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, BuildError> {
    let mut certs = Vec::new();
    for c in CertificateDer::pem_slice_iter(pem) {
        certs.push(c.map_err(|e| BuildError::Pem {
            path: None,
            why: format!("bad PEM: {e}"),
        })?);
    }
    if certs.is_empty() {
        return Err(BuildError::Pem {
            path: None,
            why: "no certificate in PEM text".into(),
        });
    }
    Ok(certs)
}

/// [`certs_from_pem`] on a file (for `network.upstream_ca`).
pub fn certs_from_pem_file(path: &Path) -> Result<Vec<CertificateDer<'static>>, BuildError> {
    let text = std::fs::read(path).map_err(|e| BuildError::Pem {
        path: Some(path.to_path_buf()),
        why: e.to_string(),
    })?;
    certs_from_pem(&text).map_err(|e| match e {
        BuildError::Pem { why, .. } => BuildError::Pem {
            path: Some(path.to_path_buf()),
            why,
        },
        other => other,
    })
}

/// Headers the broker will not set: they frame or route the message, or belong to the hop.
const FORBIDDEN_HEADERS: &[&str] = &[
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "upgrade",
    "te",
    "trailer",
    "keep-alive",
    "proxy-connection",
    "proxy-authorization",
    "proxy-authenticate",
    "expect",
];

/// An endpoint, checked and ready: the header value is built once and marked sensitive.
pub(crate) struct Brokered {
    pattern: HostPattern,
    /// The host as the proxy names it after `decide` (lower-case name, or IP literal text).
    host: String,
    ip: Option<IpAddr>,
    pub(crate) credential: String,
    header: HeaderName,
    value: HeaderValue,
}

impl fmt::Debug for Brokered {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Brokered")
            .field("host", &self.pattern)
            .field("credential", &self.credential)
            .field("header", &self.header)
            .field("value", &"<redacted>")
            .finish()
    }
}

impl Brokered {
    fn new(ep: &Endpoint) -> Result<Brokered, BuildError> {
        let fail = |why: &str| BuildError::Endpoint {
            host: ep.host.to_string(),
            credential: ep.credential.clone(),
            why: why.to_string(),
        };
        let (host, ip) = match ep.host.host() {
            Host::Name(n) => (n.clone(), None),
            Host::Ip(ip) => (ip.to_string(), Some(*ip)),
            Host::Subdomains(_) => return Err(fail("an endpoint names one exact host, not `*.`")),
        };
        let header = HeaderName::from_bytes(ep.header.as_bytes())
            .map_err(|_| fail("the header is not a valid header name"))?;
        if FORBIDDEN_HEADERS.contains(&header.as_str()) {
            return Err(fail(
                "the header frames or routes the request; it cannot carry a credential",
            ));
        }
        if ep.format.matches("{}").count() != 1 {
            return Err(fail("the format must contain `{}` exactly once"));
        }
        if ep.secret.expose().is_empty() {
            return Err(fail("the secret is empty"));
        }
        // The message never quotes the value: it holds the secret.
        let mut value = HeaderValue::from_str(&ep.format.replacen("{}", ep.secret.expose(), 1))
            .map_err(|_| {
                fail(
                    "the formatted secret is not a valid header value \
                     (control characters such as a trailing newline, or non-ASCII)",
                )
            })?;
        value.set_sensitive(true);
        Ok(Brokered {
            pattern: ep.host.clone(),
            host,
            ip,
            credential: ep.credential.clone(),
            header,
            value,
        })
    }
}

/// The broker's state inside a [`Proxy`]: endpoints, the per-run CA, minted leaves, and the
/// upstream TLS configuration.
pub(crate) struct Broker {
    endpoints: Vec<Arc<Brokered>>,
    ca: CertifiedIssuer<'static, KeyPair>,
    ca_pem: String,
    /// One server configuration per endpoint host; bounded by the number of endpoints.
    leaves: Mutex<HashMap<String, Arc<rustls::ServerConfig>>>,
    /// `None` when there are no endpoints (system roots are then not read).
    upstream: Option<Arc<rustls::ClientConfig>>,
}

impl fmt::Debug for Broker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Broker")
            .field("endpoints", &self.endpoints)
            .finish_non_exhaustive()
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

impl Broker {
    pub(crate) fn new(
        endpoints: &[Endpoint],
        upstream_ca: &[CertificateDer<'static>],
        system_roots: Option<&Path>,
    ) -> Result<Broker, BuildError> {
        let endpoints = endpoints
            .iter()
            .map(|e| Brokered::new(e).map(Arc::new))
            .collect::<Result<Vec<_>, _>>()?;
        let ca = generate_ca(&endpoints).map_err(|e| BuildError::Ca(e.to_string()))?;
        let ca_pem = ca.pem();
        let upstream = if endpoints.is_empty() {
            None
        } else {
            Some(upstream_config(upstream_ca, system_roots)?)
        };
        Ok(Broker {
            endpoints,
            ca,
            ca_pem,
            leaves: Mutex::new(HashMap::new()),
            upstream,
        })
    }

    pub(crate) fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// The endpoint for a decided host (normalized by `decide`) and port.
    pub(crate) fn endpoint_for(&self, host: &str, port: u16) -> Option<Arc<Brokered>> {
        self.endpoints
            .iter()
            .find(|e| e.pattern.matches(host, port))
            .cloned()
    }

    /// Whether `host` is an endpoint's host on any port.
    pub(crate) fn is_endpoint_host(&self, host: &str) -> bool {
        self.endpoints
            .iter()
            .any(|e| e.pattern.matches(host, e.pattern.port().unwrap_or(443)))
    }

    /// The TLS server configuration presenting a leaf for the endpoint's host.
    fn server_config(&self, ep: &Brokered) -> Result<Arc<rustls::ServerConfig>, String> {
        let mut leaves = self.leaves.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = leaves.get(&ep.host) {
            return Ok(c.clone());
        }
        let (cert, key) = self.mint(ep)?;
        let mut config = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_no_client_auth()
            .with_single_cert(vec![cert], key)
            .map_err(|e| e.to_string())?;
        // Only HTTP/1.1: a client offering only h2 fails the handshake rather than getting a
        // protocol whose requests the broker does not inspect.
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let config = Arc::new(config);
        leaves.insert(ep.host.clone(), config.clone());
        Ok(config)
    }
}

impl Broker {
    /// A leaf certificate for the endpoint's host, signed by the per-run CA, and its key.
    fn mint(
        &self,
        ep: &Brokered,
    ) -> Result<(CertificateDer<'static>, PrivateKeyDer<'static>), String> {
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(|e| e.to_string())?;
        params.subject_alt_names = vec![match ep.ip {
            Some(ip) => SanType::IpAddress(ip),
            None => SanType::DnsName(ep.host.clone().try_into().map_err(|e| format!("{e}"))?),
        }];
        params.distinguished_name = DistinguishedName::new();
        params
            .distinguished_name
            .push(DnType::CommonName, ep.host.clone());
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let key = KeyPair::generate().map_err(|e| e.to_string())?;
        let cert = params
            .signed_by(&key, &self.ca)
            .map_err(|e| e.to_string())?;
        Ok((
            cert.der().clone(),
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        ))
    }
}

/// The per-run CA. Its key lives in this process's memory only. Name constraints limit it to
/// the endpoint hosts, so a sandbox that trusts it trusts it for nothing else.
fn generate_ca(
    endpoints: &[Arc<Brokered>],
) -> Result<CertifiedIssuer<'static, KeyPair>, rcgen::Error> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params.distinguished_name = DistinguishedName::new();
    params
        .distinguished_name
        .push(DnType::CommonName, "pinfold per-run egress CA");
    // A constraint of one type leaves the other type free, so both are always present: with
    // no endpoint of a type, the only permitted name is one nobody uses (`.invalid`,
    // 0.0.0.0/32).
    let mut names: Vec<GeneralSubtree> = endpoints
        .iter()
        .filter(|e| e.ip.is_none())
        .map(|e| GeneralSubtree::DnsName(e.host.clone()))
        .collect();
    if names.is_empty() {
        names.push(GeneralSubtree::DnsName("invalid".into()));
    }
    let mut ips: Vec<GeneralSubtree> = endpoints
        .iter()
        .filter_map(|e| e.ip)
        .map(|ip| {
            let bits = if ip.is_ipv4() { 32 } else { 128 };
            GeneralSubtree::IpAddress(CidrSubnet::from_addr_prefix(ip, bits))
        })
        .collect();
    if ips.is_empty() {
        ips.push(GeneralSubtree::IpAddress(CidrSubnet::from_addr_prefix(
            IpAddr::from([0, 0, 0, 0]),
            32,
        )));
    }
    names.extend(ips);
    params.name_constraints = Some(NameConstraints {
        permitted_subtrees: names,
        excluded_subtrees: Vec::new(),
    });
    CertifiedIssuer::self_signed(params, KeyPair::generate()?)
}

/// TLS toward upstreams: the system roots plus the configured extra roots, HTTP/1.1 only.
fn upstream_config(
    upstream_ca: &[CertificateDer<'static>],
    system_roots: Option<&Path>,
) -> Result<Arc<rustls::ClientConfig>, BuildError> {
    let path = system_roots.unwrap_or(Path::new(SYSTEM_ROOTS));
    let text = std::fs::read(path).map_err(|source| BuildError::SystemRoots {
        path: path.to_path_buf(),
        source,
    })?;
    let mut roots = rustls::RootCertStore::empty();
    // System bundles carry the odd certificate webpki cannot use; skip those, as browsers do.
    roots.add_parsable_certificates(CertificateDer::pem_slice_iter(&text).filter_map(Result::ok));
    for (index, cert) in upstream_ca.iter().enumerate() {
        roots
            .add(cert.clone())
            .map_err(|e| BuildError::UpstreamCa {
                index,
                why: e.to_string(),
            })?;
    }
    let mut config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| BuildError::Ca(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The CA bundle for the sandbox: the system roots file (`system_roots`, default
/// [`SYSTEM_ROOTS`]) followed by the per-run CA certificate.
pub(crate) fn ca_bundle(ca_pem: &str, system_roots: Option<&Path>) -> io::Result<String> {
    let path = system_roots.unwrap_or(Path::new(SYSTEM_ROOTS));
    let mut text = std::fs::read_to_string(path)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str("# pinfold per-run egress CA (credential broker)\n");
    text.push_str(ca_pem);
    Ok(text)
}

/// One client connection on the brokered path.
struct Session {
    ep: Arc<Brokered>,
    target: Target,
    /// The upstream connection opened (and verified) before the client was answered; the
    /// first request uses it, later ones open their own.
    first: Mutex<Option<TlsStream<TcpStream>>>,
    /// The event as decided for the tunnel: each request's event starts from it.
    base: Event,
    requests: AtomicU64,
}

impl Proxy {
    /// The brokered endpoint for a decided target, if any.
    pub(crate) fn endpoint_for(&self, target: &Target) -> Option<Arc<Brokered>> {
        self.broker.endpoint_for(&target.host, target.port)
    }

    /// TLS to the upstream, verified, within the connect timeout. The error is the reason.
    pub(crate) async fn upstream_tls(
        &self,
        target: &Target,
        tcp: TcpStream,
    ) -> Result<TlsStream<TcpStream>, String> {
        let Some(config) = self.broker.upstream.clone() else {
            return Err("no upstream TLS configuration".into());
        };
        let name = match target.addr_literal() {
            Some(ip) => ServerName::IpAddress(ip.into()),
            None => ServerName::try_from(target.host.clone())
                .map_err(|e| format!("upstream TLS: {e}"))?,
        };
        let connector = tokio_rustls::TlsConnector::from(config);
        match tokio::time::timeout(
            self.config.limits.connect_timeout,
            connector.connect(name, tcp),
        )
        .await
        {
            Ok(Ok(s)) => Ok(s),
            Ok(Err(e)) => Err(format!("upstream TLS: {e}")),
            Err(_) => Err("upstream TLS: handshake timed out".into()),
        }
    }

    /// Serve a tunnel to an endpoint host: check the ClientHello, terminate the client's TLS,
    /// and serve its HTTP/1.1 requests with the credential added.
    pub(crate) async fn serve_brokered<C>(
        self: Arc<Self>,
        client: C,
        ep: Arc<Brokered>,
        target: Target,
        upstream: TlsStream<TcpStream>,
        mut event: Event,
    ) where
        C: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let limits = self.config.limits.clone();
        let acceptor =
            tokio_rustls::LazyConfigAcceptor::new(rustls::server::Acceptor::default(), client);
        let start = match tokio::time::timeout(limits.handshake_timeout, acceptor).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                event.outcome = Outcome::Refused(Refusal::NotTls(e.to_string()));
                return self.emit(event);
            }
            Err(_) => {
                event.outcome = Outcome::Refused(Refusal::NotTls("no ClientHello in time".into()));
                return self.emit(event);
            }
        };
        let hello = Hello::Tls {
            sni: start
                .client_hello()
                .server_name()
                .map(|s| s.to_ascii_lowercase()),
        };
        let expect = Expect::Tls {
            host: target.host.clone(),
            ip_literal: target.ip_literal,
        };
        if let Some(r) = expect.check(&hello) {
            event.outcome = Outcome::Refused(r);
            return self.emit(event);
        }
        let config = match self.broker.server_config(&ep) {
            Ok(c) => c,
            Err(e) => {
                event.outcome = Outcome::Failed(format!("cannot mint a certificate: {e}"));
                return self.emit(event);
            }
        };
        let mut tls =
            match tokio::time::timeout(limits.handshake_timeout, start.into_stream(config)).await {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => {
                    event.outcome = Outcome::Failed(format!("client TLS handshake: {e}"));
                    return self.emit(event);
                }
                Err(_) => {
                    event.outcome = Outcome::Failed("client TLS handshake timed out".into());
                    return self.emit(event);
                }
            };

        // HTTP/2 with prior knowledge: say why in HTTP/1.1 (the client may not read it) and
        // close. Only the preface's length is read ahead; the bytes are given back to hyper.
        let mut prefix = Vec::new();
        let mut chunk = [0u8; 64];
        let read_ahead = async {
            while prefix.len() < H2_PREFACE.len() && H2_PREFACE.starts_with(&prefix) {
                let n = tls.read(&mut chunk).await?;
                if n == 0 {
                    break;
                }
                prefix.extend_from_slice(&chunk[..n]);
            }
            Ok::<(), io::Error>(())
        };
        match tokio::time::timeout(limits.handshake_timeout, read_ahead).await {
            Ok(Ok(())) if !prefix.is_empty() => {}
            _ => return self.emit(event), // nothing asked: the tunnel as decided, no credential
        }
        if prefix.starts_with(H2_PREFACE) {
            let why = "HTTP/2 is not brokered; use HTTP/1.1";
            let body = format!(
                "pinfold egress: {} is a credential endpoint: {why}\n",
                target.host
            );
            let resp = format!(
                "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain; charset=utf-8\r\n\
                 Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = tls.write_all(resp.as_bytes()).await;
            let _ = tls.shutdown().await;
            event.outcome = Outcome::Refused(Refusal::CredentialUnsafe(why.into()));
            return self.emit(event);
        }

        let session = Arc::new(Session {
            ep,
            target,
            first: Mutex::new(Some(upstream)),
            base: event,
            requests: AtomicU64::new(0),
        });
        let this = self.clone();
        let s = session.clone();
        let service = hyper::service::service_fn(move |req| {
            let this = this.clone();
            let s = s.clone();
            async move { Ok::<_, std::convert::Infallible>(this.brokered_request(&s, req).await) }
        });
        let _ = hyper::server::conn::http1::Builder::new()
            .max_buf_size(limits.max_header_bytes.max(8192))
            .header_read_timeout(limits.handshake_timeout)
            .timer(TokioTimer::new())
            .serve_connection(TokioIo::new(Rewind::new(prefix, tls)), service)
            .await;
        if session.requests.load(Ordering::Relaxed) == 0 {
            self.emit(session.base.clone());
        }
    }

    /// One request inside a brokered tunnel.
    async fn brokered_request(&self, s: &Session, mut req: Request<Incoming>) -> Response<Body> {
        s.requests.fetch_add(1, Ordering::Relaxed);
        if let Err(why) = check_request(&req, &s.target) {
            let mut event = s.base.clone();
            event.outcome = Outcome::Refused(Refusal::CredentialUnsafe(why.clone()));
            self.emit(event);
            return refuse(
                StatusCode::FORBIDDEN,
                &format!("{} is a credential endpoint: {why}", s.target.host),
            );
        }
        let mut event = s.base.clone();
        let first = s.first.lock().unwrap_or_else(|p| p.into_inner()).take();
        let upstream = match first {
            Some(u) => u,
            None => match self.reopen(&s.target, &mut event).await {
                Ok(u) => u,
                Err(why) => {
                    event.outcome = Outcome::Failed(why.clone());
                    self.emit(event);
                    return refuse(StatusCode::BAD_GATEWAY, &why);
                }
            },
        };
        // The event names the credential once the secret can go out on this connection.
        let mut sender = match self
            .http1_upstream(upstream, event, Some(s.ep.credential.clone()))
            .await
        {
            Ok(x) => x,
            Err(resp) => return resp,
        };

        // Origin form; Host names the endpoint; the client's values of the header are all
        // removed and the secret set once (replace, never append).
        let path = req
            .uri()
            .path_and_query()
            .map(|p| p.as_str())
            .unwrap_or("/")
            .to_string();
        *req.uri_mut() = path
            .parse()
            .unwrap_or_else(|_| hyper::Uri::from_static("/"));
        strip_hop_by_hop(req.headers_mut());
        let authority = s.target.authority(443);
        if let Ok(v) = HeaderValue::from_str(&authority) {
            req.headers_mut().insert(header::HOST, v);
        }
        req.headers_mut().remove(&s.ep.header);
        req.headers_mut()
            .insert(s.ep.header.clone(), s.ep.value.clone());
        crate::proxy::send_upstream(&mut sender, req).await
    }

    /// A fresh verified upstream connection for a later request: decided again (the allowlist
    /// and address checks), connected, TLS verified.
    async fn reopen(
        &self,
        target: &Target,
        event: &mut Event,
    ) -> Result<TlsStream<TcpStream>, String> {
        let fresh = self
            .decide(&target.host, target.port)
            .await
            .map_err(|r| r.to_string())?;
        let (tcp, addr) = self
            .connect(&fresh)
            .await
            .map_err(|e| format!("cannot reach upstream: {e}"))?;
        event.addr = Some(addr);
        self.upstream_tls(&fresh, tcp).await
    }
}

/// Whether a request inside a brokered tunnel may carry the credential; the reason if not.
fn check_request(req: &Request<Incoming>, target: &Target) -> Result<(), String> {
    if req.method() == Method::CONNECT {
        return Err("CONNECT inside the tunnel is not brokered".into());
    }
    if !matches!(req.version(), Version::HTTP_11 | Version::HTTP_10) {
        return Err("only HTTP/1.x is brokered".into());
    }
    let upgrade = req.headers().contains_key(header::UPGRADE)
        || req
            .headers()
            .get_all(header::CONNECTION)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case("upgrade"));
    if upgrade {
        return Err("Upgrade requests (WebSocket, h2c) cannot carry the credential safely".into());
    }
    if let Some(scheme) = req.uri().scheme_str()
        && scheme != "https"
    {
        return Err(format!("a `{scheme}://` URL inside a TLS tunnel"));
    }
    if let Some(a) = req.uri().authority()
        && !target.is_authority(a.as_str(), 443)
    {
        return Err(format!("the URL names `{a}`, not the endpoint"));
    }
    let mut hosts = req.headers().get_all(header::HOST).iter();
    match (hosts.next(), hosts.next()) {
        (Some(_), Some(_)) => return Err("more than one Host header".into()),
        (Some(h), None) => {
            let text = h.to_str().unwrap_or("");
            if !target.is_authority(text, 443) {
                return Err(format!(
                    "Host `{}` is not the endpoint",
                    text.escape_debug()
                ));
            }
        }
        (None, _) => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::client::danger::ServerCertVerifier;
    use rustls::pki_types::UnixTime;

    fn ep(host: &str) -> Endpoint {
        Endpoint {
            host: host.parse().unwrap(),
            credential: "c".into(),
            header: "Authorization".into(),
            format: "Bearer {}".into(),
            secret: Secret::new("v"),
        }
    }

    /// A leaf for `host` signed by the broker's CA (whether or not it is an endpoint).
    fn leaf(broker: &Broker, host: &str) -> CertificateDer<'static> {
        broker.mint(&Brokered::new(&ep(host)).unwrap()).unwrap().0
    }

    #[test]
    fn the_per_run_ca_vouches_only_for_endpoint_hosts() {
        let roots =
            std::env::temp_dir().join(format!("pinfold-empty-roots-{}", std::process::id()));
        std::fs::write(&roots, "").unwrap();
        let broker = Broker::new(&[ep("api.test"), ep("127.0.0.9")], &[], Some(&roots)).unwrap();
        let _ = std::fs::remove_file(&roots);
        let mut store = rustls::RootCertStore::empty();
        store
            .add(
                certs_from_pem(broker.ca_pem().as_bytes())
                    .unwrap()
                    .remove(0),
            )
            .unwrap();
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
            Arc::new(store),
            provider(),
        )
        .build()
        .unwrap();
        let verify = |cert: &CertificateDer<'static>, name: &str| {
            verifier.verify_server_cert(
                cert,
                &[],
                &ServerName::try_from(name.to_string()).unwrap(),
                &[],
                UnixTime::now(),
            )
        };
        assert!(verify(&leaf(&broker, "api.test"), "api.test").is_ok());
        assert!(verify(&leaf(&broker, "127.0.0.9"), "127.0.0.9").is_ok());
        // A leaf for any other name or address, signed by the same CA key, is rejected by a
        // client that trusts the CA: the name constraints hold even if the key leaked.
        let e = verify(&leaf(&broker, "evil.test"), "evil.test").unwrap_err();
        assert!(
            format!("{e:?}").contains("NameConstraintViolation"),
            "{e:?}"
        );
        assert!(verify(&leaf(&broker, "127.0.0.1"), "127.0.0.1").is_err());
        // Server configurations (and so leaves) are minted once per host.
        let api = Brokered::new(&ep("api.test")).unwrap();
        let a = broker.server_config(&api).unwrap();
        assert!(Arc::ptr_eq(&a, &broker.server_config(&api).unwrap()));
    }
}
