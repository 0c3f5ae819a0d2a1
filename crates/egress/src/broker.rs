//! The credential broker: for an endpoint host the proxy terminates the client's TLS with a
//! per-run CA, checks each HTTP/1.1 request, replaces the configured header with the secret,
//! and sends the request on over TLS it verified itself.
//!
//! This module holds the broker's state, built once with the proxy: the endpoints checked,
//! the per-run CA and the leaves it mints, and the TLS configuration toward upstreams. Serving
//! a brokered tunnel is `brokered.rs`.
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
use std::path::Path;
use std::sync::{Arc, Mutex};

use hyper::header::{HeaderName, HeaderValue};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, CidrSubnet, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, GeneralSubtree, IsCa, KeyPair, KeyUsagePurpose, NameConstraints,
    SanType,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::host::{Host, HostPattern};

pub use crate::config::{Endpoint, Secret};
pub use crate::error::{BuildError, EndpointProblem};
use crate::error::MintError;

/// Where Debian, Ubuntu, Alpine and Arch keep the system's trusted roots as one PEM file.
pub const SYSTEM_ROOTS: &str = "/etc/ssl/certs/ca-certificates.crt";

/// The certificates in PEM text (`-----BEGIN CERTIFICATE-----` blocks; other blocks are
/// skipped). At least one is required.
pub fn certs_from_pem(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, BuildError> {
    let mut certs = Vec::new();
    for c in CertificateDer::pem_slice_iter(pem) {
        certs.push(c.map_err(|source| BuildError::Pem { path: None, source })?);
    }
    if certs.is_empty() {
        return Err(BuildError::NoCertificate { path: None });
    }
    Ok(certs)
}

/// [`certs_from_pem`] on a file (for `network.upstream_ca`).
pub fn certs_from_pem_file(path: &Path) -> Result<Vec<CertificateDer<'static>>, BuildError> {
    let text = std::fs::read(path).map_err(|source| BuildError::PemRead {
        path: path.to_path_buf(),
        source,
    })?;
    certs_from_pem(&text).map_err(|e| e.in_file(path))
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
    pub(crate) pattern: HostPattern,
    /// The host as the proxy names it after `decide` (lower-case name, or IP literal text).
    pub(crate) host: String,
    ip: Option<IpAddr>,
    pub(crate) credential: String,
    pub(crate) header: HeaderName,
    pub(crate) value: HeaderValue,
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
        let fail = |why: EndpointProblem| BuildError::Endpoint {
            host: ep.host.to_string(),
            credential: ep.credential.clone(),
            why,
        };
        let (host, ip) = match ep.host.host() {
            Host::Name(n) => (n.clone(), None),
            Host::Ip(ip) => (ip.to_string(), Some(*ip)),
            Host::Subdomains(_) => return Err(fail(EndpointProblem::Subdomains)),
        };
        let header = HeaderName::from_bytes(ep.header.as_bytes())
            .map_err(|_| fail(EndpointProblem::HeaderName))?;
        if FORBIDDEN_HEADERS.contains(&header.as_str()) {
            return Err(fail(EndpointProblem::FramingHeader));
        }
        if ep.format.matches("{}").count() != 1 {
            return Err(fail(EndpointProblem::Format));
        }
        if ep.secret.expose().is_empty() {
            return Err(fail(EndpointProblem::EmptySecret));
        }
        // The message never quotes the value: it holds the secret.
        let mut value = HeaderValue::from_str(&ep.format.replacen("{}", ep.secret.expose(), 1))
            .map_err(|_| fail(EndpointProblem::HeaderValue))?;
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

/// The broker's state inside a [`crate::Proxy`]: endpoints, the per-run CA, minted leaves, and the
/// upstream TLS configuration.
pub(crate) struct Broker {
    endpoints: Vec<Arc<Brokered>>,
    ca: CertifiedIssuer<'static, KeyPair>,
    ca_pem: String,
    /// One server configuration per endpoint host; bounded by the number of endpoints.
    leaves: Mutex<HashMap<String, Arc<rustls::ServerConfig>>>,
    /// `None` when there are no endpoints (system roots are then not read).
    pub(crate) upstream: Option<Arc<rustls::ClientConfig>>,
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
        let ca = generate_ca(&endpoints).map_err(BuildError::Ca)?;
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
    pub(crate) fn server_config(&self, ep: &Brokered) -> Result<Arc<rustls::ServerConfig>, MintError> {
        let mut leaves = self.leaves.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = leaves.get(&ep.host) {
            return Ok(c.clone());
        }
        let (cert, key) = self.mint(ep)?;
        let mut config = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(MintError::Tls)?
            .with_no_client_auth()
            .with_single_cert(vec![cert], key)
            .map_err(MintError::Tls)?;
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
    ) -> Result<(CertificateDer<'static>, PrivateKeyDer<'static>), MintError> {
        let mut params =
            CertificateParams::new(Vec::<String>::new()).map_err(MintError::Certificate)?;
        params.subject_alt_names = vec![match ep.ip {
            Some(ip) => SanType::IpAddress(ip),
            None => SanType::DnsName(ep.host.clone().try_into().map_err(MintError::Certificate)?),
        }];
        params.distinguished_name = DistinguishedName::new();
        params
            .distinguished_name
            .push(DnType::CommonName, ep.host.clone());
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let key = KeyPair::generate().map_err(MintError::Certificate)?;
        let cert = params
            .signed_by(&key, &self.ca)
            .map_err(MintError::Certificate)?;
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
            .map_err(|source| BuildError::UpstreamCa { index, source })?;
    }
    let mut config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(BuildError::Tls)?
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

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::pki_types::ServerName;
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
