//! The proxy against real servers on loopback: a plain HTTP upstream, a TLS upstream with a
//! test CA (rcgen), real `curl` and hand-written clients for what curl will not do. Special
//! addresses (cloud metadata, private) are the test's own, in a network namespace it makes
//! (`pinfold_test_support::netns`).

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use pinfold_egress::addr::AddrClass;
use pinfold_egress::{Config, Event, Limits, Outcome, Protocol, Proxy, Refusal, Resolver};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc::UnboundedReceiver;

use pinfold_test_support::netns;

const LOCAL: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

// --- upstreams ---------------------------------------------------------------------------------

/// A plain HTTP server: answers every request with its own request head as the body.
async fn http_upstream() -> SocketAddr {
    http_upstream_at(SocketAddr::new(LOCAL, 0)).await.0
}

/// [`http_upstream`] listening on `bind`, with the number of connections it accepted.
async fn http_upstream_at(bind: SocketAddr) -> (SocketAddr, Arc<AtomicUsize>) {
    let l = TcpListener::bind(bind)
        .await
        .unwrap_or_else(|e| panic!("listen on {bind}: {e}"));
    let addr = l.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = l.accept().await else {
                return;
            };
            count.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let resp = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\nKeep-Alive: timeout=5\r\n\r\n",
                    head.len()
                );
                let _ = s.write_all(resp.as_bytes()).await;
                let _ = s.write_all(&head).await;
                let _ = s.shutdown().await;
            });
        }
    });
    (addr, accepted)
}

struct Tls {
    addr: SocketAddr,
    ca_file: PathBuf,
    ca: CertificateDer<'static>,
    /// TLS handshakes the upstream completed.
    handshakes: Arc<AtomicUsize>,
    _dir: tempfile::TempDir,
}

/// A TLS server for `tls.test`, `other.test`, `localhost` and 127.0.0.1, signed by a test CA;
/// answers `HTTP/1.1 200` with body `tls ok`.
async fn tls_upstream() -> Tls {
    use rcgen::{
        BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType, IsCa,
        KeyPair, SanType,
    };
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.distinguished_name = DistinguishedName::new();
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "pinfold egress test CA");
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let mut leaf = CertificateParams::new(vec![
        "tls.test".to_string(),
        "other.test".to_string(),
        "localhost".to_string(),
    ])
    .unwrap();
    leaf.subject_alt_names.push(SanType::IpAddress(LOCAL));
    leaf.distinguished_name = DistinguishedName::new();
    leaf.distinguished_name.push(DnType::CommonName, "tls.test");
    let leaf_key = KeyPair::generate().unwrap();
    let cert = leaf.signed_by(&leaf_key, &ca).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, ca.pem()).unwrap();

    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der())),
        )
        .unwrap();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let handshakes = Arc::new(AtomicUsize::new(0));
    let counter = handshakes.clone();
    tokio::spawn(async move {
        loop {
            let Ok((s, _)) = l.accept().await else { return };
            let acceptor = acceptor.clone();
            let counter = counter.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(s).await else {
                    return;
                };
                counter.fetch_add(1, Ordering::SeqCst);
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match tls.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let _ = tls
                    .write_all(
                        b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\nConnection: close\r\n\r\ntls ok",
                    )
                    .await;
                let _ = tls.shutdown().await;
            });
        }
    });
    Tls {
        addr,
        ca_file,
        ca: ca.der().clone(),
        handshakes,
        _dir: dir,
    }
}

// --- the proxy ---------------------------------------------------------------------------------

struct Running {
    addr: SocketAddr,
    events: UnboundedReceiver<Event>,
}

impl Running {
    async fn event(&mut self) -> Event {
        tokio::time::timeout(Duration::from_secs(10), self.events.recv())
            .await
            .expect("an event within 10 s")
            .expect("the proxy is running")
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

/// Names the fixed resolver knows; anything else does not resolve.
fn names() -> BTreeMap<String, Vec<IpAddr>> {
    let mut m = BTreeMap::new();
    for n in [
        "tls.test",
        "other.test",
        "plain.test",
        "a.wild.test",
        "b.a.wild.test",
        "wild.test",
    ] {
        m.insert(n.to_string(), vec![LOCAL]);
    }
    m
}

async fn proxy_with(allow: &[String], resolver: Resolver, limits: Limits) -> Running {
    let (tx, events) = tokio::sync::mpsc::unbounded_channel();
    let config = Config {
        allow: allow.iter().map(|h| h.parse().unwrap()).collect(),
        resolver,
        limits,
        ..Config::default()
    };
    let proxy = Proxy::new(
        config,
        Arc::new(move |e| {
            let _ = tx.send(e);
        }),
    )
    .unwrap();
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(proxy.serve_tcp(l));
    Running { addr, events }
}

async fn proxy(allow: &[String]) -> Running {
    proxy_with(allow, Resolver::Fixed(names()), Limits::default()).await
}

/// Run curl with no proxy variables from the environment; (exit code, stdout, stderr).
async fn curl(args: &[&str]) -> (i32, String, String) {
    let out = tokio::process::Command::new("curl")
        .args(["-sS", "--max-time", "20", "--noproxy", ""])
        .args(args)
        .env_remove("http_proxy")
        .env_remove("https_proxy")
        .env_remove("HTTPS_PROXY")
        .env_remove("ALL_PROXY")
        .env_remove("all_proxy")
        .env_remove("NO_PROXY")
        .env_remove("no_proxy")
        .stdin(Stdio::null())
        .output()
        .await
        .expect("curl runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `curl -x proxy URL`, printing the body and then the status code on its own line.
async fn curl_via(proxy: &Running, url: &str, extra: &[&str]) -> (u16, String) {
    let p = proxy.url();
    let mut args = vec!["-x", p.as_str(), "-w", "\n%{http_code}", url];
    args.extend_from_slice(extra);
    let (code, out, err) = curl(&args).await;
    let (body, status) = out.rsplit_once('\n').unwrap_or(("", "0"));
    let status: u16 = status.trim().parse().unwrap_or(0);
    assert!(
        code == 0 || status != 0 || err.contains("CONNECT"),
        "curl {url}: exit {code}: {err}"
    );
    (status, body.to_string())
}

fn refused(e: &Event) -> &Refusal {
    match &e.outcome {
        Outcome::Refused(r) => r,
        other => panic!("expected a refusal, got {other:?} in {e:?}"),
    }
}

// --- HTTP forward ------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_forward_allowed_host_works_and_is_recorded() {
    let up = http_upstream().await;
    let mut p = proxy(&[format!("plain.test:{}", up.port())]).await;
    let url = format!("http://plain.test:{}/path?q=1", up.port());
    let (status, body) = curl_via(
        &p,
        &url,
        &[
            "-H",
            "Connection: keep-alive, X-Hop",
            "-H",
            "X-Hop: secret",
            "-H",
            "Proxy-Authorization: Basic eDp5",
            "-H",
            "X-Kept: yes",
        ],
    )
    .await;
    assert_eq!(status, 200);
    // The upstream saw origin form, the judged host, and no hop-by-hop headers.
    let head = body.to_ascii_lowercase();
    assert!(head.starts_with("get /path?q=1 http/1.1\r\n"), "{body}");
    assert!(
        head.contains(&format!("host: plain.test:{}\r\n", up.port())),
        "{body}"
    );
    assert!(head.contains("x-kept: yes"), "{body}");
    for gone in ["x-hop", "proxy-authorization", "proxy-connection"] {
        assert!(!head.contains(gone), "{gone} was forwarded: {body}");
    }
    let e = p.event().await;
    assert_eq!(
        (e.protocol, e.host.as_str(), e.port),
        (Protocol::Http, "plain.test", up.port())
    );
    assert_eq!(e.outcome, Outcome::Allowed);
    assert_eq!(e.addr, Some(up));
    assert!(e.bytes_up > 40 && e.bytes_down > body.len() as u64, "{e:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_forward_blocked_host_gets_403_with_a_reason() {
    let up = http_upstream().await;
    let mut p = proxy(&[format!("plain.test:{}", up.port())]).await;
    let (status, body) = curl_via(&p, &format!("http://other.test:{}/", up.port()), &[]).await;
    assert_eq!(status, 403);
    assert_eq!(
        body,
        "pinfold egress: host and port are not on the allowlist\n"
    );
    let e = p.event().await;
    assert_eq!(e.host, "other.test");
    assert_eq!(refused(&e), &Refusal::NotAllowed);
    assert_eq!((e.addr, e.bytes_up, e.bytes_down), (None, 0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_host_header_cannot_redirect_a_forwarded_request() {
    let up = http_upstream().await;
    let p = proxy(&[format!("plain.test:{}", up.port())]).await;
    let mut s = TcpStream::connect(p.addr).await.unwrap();
    let req = format!(
        "GET http://plain.test:{}/ HTTP/1.1\r\nHost: evil.test\r\nConnection: close\r\n\r\n",
        up.port()
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).await.unwrap();
    let lower = resp.to_ascii_lowercase();
    assert!(lower.starts_with("http/1.1 200"), "{resp}");
    assert!(
        lower.contains(&format!("host: plain.test:{}", up.port())),
        "{resp}"
    );
    assert!(!lower.contains("evil.test"), "{resp}");
    // The upstream's hop-by-hop response header was not passed back either.
    assert!(!lower.contains("keep-alive: timeout"), "{resp}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wildcard_allows_subdomains_not_the_apex() {
    let up = http_upstream().await;
    // The wildcard is not an exact listing, so its loopback address must be listed itself.
    let mut p = proxy(&[
        format!("*.wild.test:{}", up.port()),
        format!("127.0.0.1:{}", up.port()),
    ])
    .await;
    for sub in ["a.wild.test", "b.a.wild.test"] {
        let (status, _) = curl_via(&p, &format!("http://{sub}:{}/", up.port()), &[]).await;
        assert_eq!(status, 200, "{sub}");
        assert_eq!(p.event().await.outcome, Outcome::Allowed);
    }
    let (status, body) = curl_via(&p, &format!("http://wild.test:{}/", up.port()), &[]).await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(refused(&p.event().await), &Refusal::NotAllowed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ports_are_limited() {
    let up = http_upstream().await;
    let other = http_upstream().await;
    let mut p = proxy(&[format!("plain.test:{}", up.port()), "tls.test".into()]).await;
    let (status, _) = curl_via(&p, &format!("http://plain.test:{}/", other.port()), &[]).await;
    assert_eq!(status, 403);
    assert_eq!(refused(&p.event().await), &Refusal::NotAllowed);
    // No port in the pattern: 80 and 443 only, not the upstream's port.
    let (status, _) = curl_via(&p, &format!("http://tls.test:{}/", up.port()), &[]).await;
    assert_eq!(status, 403);
    assert_eq!(refused(&p.event().await), &Refusal::NotAllowed);
}

/// Run `body` on a tokio runtime whose threads are all in a network namespace of the test's own
/// (see `pinfold_test_support::netns`): what the proxy connects to there is the test's,
/// whatever it is.
fn in_test_net(body: impl std::future::Future<Output = ()>) {
    let _net = netns::TestNet::enter();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(body);
}

/// Names behind wildcard entries that resolve to loopback, cloud metadata (IPv4 and IPv6) or
/// private addresses are refused with the class named; the same names listed exactly are
/// allowed. The special addresses are the test's own: they are on the loopback interface of the
/// test's network namespace, each with a listener on port 80. A control proxy that lists the
/// names (and the metadata address) exactly reaches every listener, so the refusals are the
/// guard's doing and not a missing server, and after them no listener saw another connection.
#[test]
fn names_resolving_to_special_addresses_are_refused_unless_listed() {
    in_test_net(async {
        let up = http_upstream().await;
        let port = up.port();
        let special = [
            (
                "x.meta.test",
                IpAddr::V4(netns::METADATA),
                AddrClass::CloudMetadata,
            ),
            (
                "x.fd.test",
                IpAddr::V6(netns::METADATA_V6),
                AddrClass::CloudMetadata,
            ),
            ("x.lan.test", IpAddr::V4(netns::PRIVATE), AddrClass::Private),
        ];
        let mut names = names();
        let mut listeners = Vec::new();
        for (name, ip, _) in special {
            names.insert(name.into(), vec![ip]);
            listeners.push(http_upstream_at(SocketAddr::new(ip, 80)).await.1);
        }
        let reached =
            || -> Vec<usize> { listeners.iter().map(|n| n.load(Ordering::SeqCst)).collect() };
        let metadata_url = format!("http://{}/latest/meta-data/", netns::METADATA);

        // The control: listed exactly, each name (and the literal) reaches its listener.
        let mut exact: Vec<String> = special.iter().map(|(n, ..)| n.to_string()).collect();
        exact.push(netns::METADATA.to_string());
        let mut c = proxy_with(&exact, Resolver::Fixed(names.clone()), Limits::default()).await;
        for (name, ..) in special {
            let url = format!("http://{name}/latest/meta-data/");
            let (status, body) = curl_via(&c, &url, &[]).await;
            assert_eq!(status, 200, "control: {name} listed exactly: {body}");
            assert_eq!(c.event().await.outcome, Outcome::Allowed);
        }
        let (status, body) = curl_via(&c, &metadata_url, &[]).await;
        assert_eq!(
            status, 200,
            "control: the metadata address listed exactly: {body}"
        );
        assert_eq!(c.event().await.outcome, Outcome::Allowed);
        assert_eq!(
            reached(),
            [2, 1, 1],
            "control: every listener of the test's namespace must be reachable (metadata twice)"
        );

        let allow = [
            format!("*.wild.test:{port}"),
            format!("plain.test:{port}"),
            "*.meta.test".to_string(),
            "*.fd.test".to_string(),
            "*.lan.test".to_string(),
        ];
        let mut p = proxy_with(&allow, Resolver::Fixed(names), Limits::default()).await;
        // A wildcard entry whose name resolves to 127.0.0.1: refused, nothing connected.
        let (status, body) = curl_via(&p, &format!("http://a.wild.test:{port}/"), &[]).await;
        assert_eq!(status, 403);
        assert_eq!(
            body,
            "pinfold egress: resolves to 127.0.0.1, a loopback address; list the name or address exactly to allow it\n"
        );
        let e = p.event().await;
        assert_eq!(
            refused(&e),
            &Refusal::Address {
                ip: LOCAL,
                class: AddrClass::Loopback
            }
        );
        assert_eq!(e.addr, None);
        // The same address behind a name listed exactly: the user said so.
        let (status, _) = curl_via(&p, &format!("http://plain.test:{port}/"), &[]).await;
        assert_eq!(status, 200);
        assert_eq!(p.event().await.outcome, Outcome::Allowed);
        // Metadata and private addresses behind wildcards: refused, with the address and class.
        for (name, ip, class) in special {
            let (status, body) =
                curl_via(&p, &format!("http://{name}/latest/meta-data/"), &[]).await;
            assert_eq!(status, 403, "{name}");
            assert!(body.contains(&format!("a {class} address")), "{body}");
            let e = p.event().await;
            assert_eq!(refused(&e), &Refusal::Address { ip, class }, "{name}");
            assert_eq!(e.addr, None, "{name}");
        }
        // An IP literal that is not listed: not on the allowlist at all.
        let (status, _) = curl_via(&p, &metadata_url, &[]).await;
        assert_eq!(status, 403);
        assert_eq!(refused(&p.event().await), &Refusal::NotAllowed);
        assert_eq!(
            reached(),
            [2, 1, 1],
            "GUARD FAILED: a refused request reached a listener of the test's namespace"
        );
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn localhost_through_the_system_resolver() {
    let up = http_upstream().await;
    let port = up.port();
    // Listed exactly: allowed, though it resolves to loopback.
    let mut p = proxy_with(
        &[format!("localhost:{port}")],
        Resolver::System,
        Limits::default(),
    )
    .await;
    let (status, _) = curl_via(&p, &format!("http://localhost:{port}/"), &[]).await;
    assert_eq!(status, 200);
    let e = p.event().await;
    assert_eq!(e.outcome, Outcome::Allowed);
    assert!(e.addr.unwrap().ip().is_loopback());
    // 127.0.0.1 as a literal is another host: not listed.
    let (status, _) = curl_via(&p, &format!("http://127.0.0.1:{port}/"), &[]).await;
    assert_eq!(status, 403);
    assert_eq!(refused(&p.event().await), &Refusal::NotAllowed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unresolvable_names_are_refused() {
    let mut p = proxy(&["nowhere.test".into()]).await;
    let (status, body) = curl_via(&p, "http://nowhere.test/", &[]).await;
    assert_eq!(status, 403);
    assert!(body.contains("does not resolve"), "{body}");
    assert!(matches!(refused(&p.event().await), Refusal::Unresolved(_)));
}

// --- CONNECT -----------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_allowed_host_works_with_curl() {
    let tls = tls_upstream().await;
    let port = tls.addr.port();
    let mut p = proxy(&[format!("tls.test:{port}")]).await;
    let ca = tls.ca_file.display().to_string();
    let (status, body) =
        curl_via(&p, &format!("https://tls.test:{port}/"), &["--cacert", &ca]).await;
    assert_eq!((status, body.as_str()), (200, "tls ok"));
    let e = p.event().await;
    assert_eq!(
        (e.protocol, e.outcome.clone(), e.addr),
        (Protocol::Connect, Outcome::Allowed, Some(tls.addr))
    );
    assert!(e.bytes_up > 200 && e.bytes_down > 200, "{e:?}");
    assert_eq!(tls.handshakes.load(Ordering::SeqCst), 1);

    // Another port on the same host: 403 before any tunnel.
    let (code, _, err) = curl(&[
        "-x",
        &p.url(),
        "--cacert",
        &ca,
        &format!("https://tls.test:{}/", port + 1),
    ])
    .await;
    assert_ne!(code, 0);
    assert!(err.contains("403"), "{err}");
    assert_eq!(refused(&p.event().await), &Refusal::NotAllowed);
}

/// Open a CONNECT tunnel by hand; the status line and the stream.
async fn connect(proxy: SocketAddr, target: &str) -> (String, TcpStream) {
    let mut s = TcpStream::connect(proxy).await.unwrap();
    s.write_all(format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if s.read(&mut b).await.unwrap() == 0 {
            break;
        }
        head.push(b[0]);
    }
    let text = String::from_utf8_lossy(&head).into_owned();
    (text.lines().next().unwrap_or("").to_string(), s)
}

fn client_config(ca: &CertificateDer<'static>) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.clone()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Arc::new(
        rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth(),
    )
}

/// TLS through an open tunnel with the given server name; the response body, or the error.
async fn tls_get(
    s: TcpStream,
    ca: &CertificateDer<'static>,
    name: ServerName<'static>,
) -> Result<String, String> {
    let connector = tokio_rustls::TlsConnector::from(client_config(ca));
    let mut tls = connector
        .connect(name, s)
        .await
        .map_err(|e| e.to_string())?;
    tls.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    let _ = tls.read_to_end(&mut out).await;
    let text = String::from_utf8_lossy(&out).into_owned();
    Ok(text.rsplit("\r\n\r\n").next().unwrap_or("").to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sni_must_match_the_connect_host() {
    let tls = tls_upstream().await;
    let port = tls.addr.port();
    let mut p = proxy(&[format!("tls.test:{port}"), format!("127.0.0.1:{port}")]).await;

    // Tunnel for tls.test, TLS for other.test (the certificate covers both): refused before
    // a byte of the ClientHello reaches the upstream.
    let (status, s) = connect(p.addr, &format!("tls.test:{port}")).await;
    assert_eq!(status, "HTTP/1.1 200 OK");
    let r = tls_get(s, &tls.ca, ServerName::try_from("other.test").unwrap()).await;
    assert!(r.is_err(), "{r:?}");
    let e = p.event().await;
    assert_eq!(
        refused(&e),
        &Refusal::SniMismatch {
            sni: Some("other.test".into())
        }
    );
    assert_eq!(e.bytes_up, 0);

    // No SNI (an IP server name) for a named host: refused.
    let (_, s) = connect(p.addr, &format!("tls.test:{port}")).await;
    assert!(
        tls_get(s, &tls.ca, ServerName::IpAddress(LOCAL.into()))
            .await
            .is_err()
    );
    assert_eq!(
        refused(&p.event().await),
        &Refusal::SniMismatch { sni: None }
    );
    assert_eq!(
        tls.handshakes.load(Ordering::SeqCst),
        0,
        "nothing reached the upstream"
    );

    // The matching name works, and so does no SNI for an IP literal.
    let (_, s) = connect(p.addr, &format!("TLS.test:{port}")).await;
    assert_eq!(
        tls_get(s, &tls.ca, ServerName::try_from("tls.test").unwrap())
            .await
            .unwrap(),
        "tls ok"
    );
    assert_eq!(p.event().await.outcome, Outcome::Allowed);
    let (_, s) = connect(p.addr, &format!("127.0.0.1:{port}")).await;
    assert_eq!(
        tls_get(s, &tls.ca, ServerName::IpAddress(LOCAL.into()))
            .await
            .unwrap(),
        "tls ok"
    );
    assert_eq!(p.event().await.outcome, Outcome::Allowed);
    // An IP literal tunnel carrying a name: refused.
    let (_, s) = connect(p.addr, &format!("127.0.0.1:{port}")).await;
    assert!(
        tls_get(s, &tls.ca, ServerName::try_from("tls.test").unwrap())
            .await
            .is_err()
    );
    assert!(matches!(
        refused(&p.event().await),
        Refusal::SniMismatch { .. }
    ));
    assert_eq!(tls.handshakes.load(Ordering::SeqCst), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_tunnels_must_carry_tls() {
    let up = http_upstream().await;
    let mut p = proxy(&[format!("plain.test:{}", up.port())]).await;
    let (status, mut s) = connect(p.addr, &format!("plain.test:{}", up.port())).await;
    assert_eq!(status, "HTTP/1.1 200 OK");
    s.write_all(b"GET / HTTP/1.1\r\nHost: plain.test\r\n\r\n")
        .await
        .unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out).await;
    assert!(
        out.is_empty(),
        "plain text went through: {}",
        String::from_utf8_lossy(&out)
    );
    assert!(matches!(refused(&p.event().await), Refusal::NotTls(_)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_concurrent_tunnels() {
    const N: usize = 500;
    let tls = tls_upstream().await;
    let port = tls.addr.port();
    let mut p = proxy(&[format!("tls.test:{port}")]).await;
    // All tunnels are open and through their handshake at once before any finishes.
    let barrier = Arc::new(tokio::sync::Barrier::new(N));
    let mut tasks = Vec::new();
    for _ in 0..N {
        let ca = tls.ca.clone();
        let barrier = barrier.clone();
        let proxy = p.addr;
        tasks.push(tokio::spawn(async move {
            let (status, s) = connect(proxy, &format!("tls.test:{port}")).await;
            assert_eq!(status, "HTTP/1.1 200 OK");
            let connector = tokio_rustls::TlsConnector::from(client_config(&ca));
            let mut tls = connector
                .connect(ServerName::try_from("tls.test").unwrap(), s)
                .await
                .unwrap();
            barrier.wait().await;
            tls.write_all(b"GET / HTTP/1.1\r\nHost: tls.test\r\n\r\n")
                .await
                .unwrap();
            let mut out = Vec::new();
            let _ = tls.read_to_end(&mut out).await;
            String::from_utf8_lossy(&out).ends_with("tls ok")
        }));
    }
    let mut ok = 0;
    for t in tasks {
        if tokio::time::timeout(Duration::from_secs(120), t)
            .await
            .unwrap()
            .unwrap()
        {
            ok += 1;
        }
    }
    assert_eq!(ok, N);
    for _ in 0..N {
        assert_eq!(p.event().await.outcome, Outcome::Allowed);
    }
    assert_eq!(tls.handshakes.load(Ordering::SeqCst), N);
}

// --- SOCKS5 ------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn socks5_with_remote_dns_and_literals() {
    let up = http_upstream().await;
    let tls = tls_upstream().await;
    let port = up.port();
    let mut p = proxy(&[
        format!("plain.test:{port}"),
        format!("127.0.0.1:{port}"),
        format!("tls.test:{}", tls.addr.port()),
    ])
    .await;
    let socks = p.addr.to_string();
    // Remote DNS (ATYP 3): the proxy judges and resolves the name.
    let (code, body, err) = curl(&[
        "--socks5-hostname",
        &socks,
        &format!("http://plain.test:{port}/x"),
    ])
    .await;
    assert_eq!(code, 0, "{err}");
    assert!(body.starts_with("GET /x HTTP/1.1"), "{body}");
    let e = p.event().await;
    assert_eq!(
        (e.protocol, e.host.as_str(), e.outcome.clone()),
        (Protocol::Socks5, "plain.test", Outcome::Allowed)
    );
    assert!(e.bytes_down > 0);
    // An IPv4 literal (ATYP 1).
    let (code, _, err) = curl(&["--socks5", &socks, &format!("http://127.0.0.1:{port}/")]).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(p.event().await.outcome, Outcome::Allowed);
    // TLS over SOCKS, SNI checked.
    let ca = tls.ca_file.display().to_string();
    let (code, body, err) = curl(&[
        "--socks5-hostname",
        &socks,
        "--cacert",
        &ca,
        &format!("https://tls.test:{}/", tls.addr.port()),
    ])
    .await;
    assert_eq!((code, body.as_str()), (0, "tls ok"), "{err}");
    assert_eq!(p.event().await.outcome, Outcome::Allowed);
    // Blocked: curl fails, the event says why.
    let (code, _, _) = curl(&[
        "--socks5-hostname",
        &socks,
        &format!("http://other.test:{port}/"),
    ])
    .await;
    assert_ne!(code, 0);
    assert_eq!(refused(&p.event().await), &Refusal::NotAllowed);
}

/// A raw SOCKS5 CONNECT; the reply code.
async fn socks_reply(proxy: SocketAddr, atyp_and_addr: &[u8], port: u16) -> u8 {
    let mut s = TcpStream::connect(proxy).await.unwrap();
    s.write_all(&[5, 1, 0]).await.unwrap();
    let mut m = [0u8; 2];
    s.read_exact(&mut m).await.unwrap();
    assert_eq!(m, [5, 0]);
    let mut req = vec![5, 1, 0];
    req.extend_from_slice(atyp_and_addr);
    req.extend_from_slice(&port.to_be_bytes());
    s.write_all(&req).await.unwrap();
    let mut r = [0u8; 10];
    s.read_exact(&mut r).await.unwrap();
    r[1]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn socks5_reply_codes() {
    let up = http_upstream().await;
    let mut p = proxy(&[
        format!("plain.test:{}", up.port()),
        "nowhere.test:80".into(),
        format!("*.wild.test:{}", up.port()),
    ])
    .await;
    let name = |n: &str| {
        let mut v = vec![3, n.len() as u8];
        v.extend_from_slice(n.as_bytes());
        v
    };
    assert_eq!(socks_reply(p.addr, &name("plain.test"), up.port()).await, 0);
    assert_eq!(p.event().await.outcome, Outcome::Allowed);
    // Not on the allowlist: 2, "connection not allowed by ruleset".
    assert_eq!(socks_reply(p.addr, &name("other.test"), up.port()).await, 2);
    assert_eq!(refused(&p.event().await), &Refusal::NotAllowed);
    // Resolves to loopback behind a wildcard: also 2.
    assert_eq!(
        socks_reply(p.addr, &name("a.wild.test"), up.port()).await,
        2
    );
    assert!(matches!(refused(&p.event().await), Refusal::Address { .. }));
    // Does not resolve: 4, "host unreachable".
    assert_eq!(socks_reply(p.addr, &name("nowhere.test"), 80).await, 4);
    assert!(matches!(refused(&p.event().await), Refusal::Unresolved(_)));
    // IPv6 literal not listed: 2.
    let mut v6 = vec![4];
    v6.extend_from_slice(&"::1".parse::<std::net::Ipv6Addr>().unwrap().octets());
    assert_eq!(socks_reply(p.addr, &v6, up.port()).await, 2);
    let e = p.event().await;
    assert_eq!(
        (e.host.as_str(), refused(&e)),
        ("::1", &Refusal::NotAllowed)
    );
    // BIND (command 2): 7, "command not supported".
    let mut s = TcpStream::connect(p.addr).await.unwrap();
    s.write_all(&[5, 1, 0, 5, 2, 0, 1, 127, 0, 0, 1, 0, 80])
        .await
        .unwrap();
    let mut r = [0u8; 12];
    s.read_exact(&mut r).await.unwrap();
    assert_eq!(r[3], 7);
}

// --- malformed, oversized, slow --------------------------------------------------------------

async fn raw(proxy: SocketAddr, bytes: &[u8]) -> String {
    let mut s = TcpStream::connect(proxy).await.unwrap();
    s.write_all(bytes).await.unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_requests_are_rejected() {
    let p = proxy(&["plain.test".into()]).await;
    assert!(
        raw(p.addr, b"GARBAGE\r\n\r\n")
            .await
            .starts_with("HTTP/1.1 400")
    );
    assert!(
        raw(p.addr, b"GET / HTTP/1.1\r\nHost: plain.test\r\n\r\n")
            .await
            .contains("not a proxy request")
    );
    assert!(
        raw(p.addr, b"CONNECT plain.test HTTP/1.1\r\n\r\n")
            .await
            .starts_with("HTTP/1.1 400")
    );
    let r = raw(
        p.addr,
        b"GET https://plain.test/ HTTP/1.1\r\nHost: plain.test\r\n\r\n",
    )
    .await;
    assert!(r.contains("use CONNECT"), "{r}");
    let r = raw(
        p.addr,
        b"GET http://u:p@plain.test/ HTTP/1.1\r\nHost: plain.test\r\n\r\n",
    )
    .await;
    assert!(r.starts_with("HTTP/1.1 400"), "{r}");
    // SOCKS5 without the no-authentication method: refused with 0xff.
    let mut s = TcpStream::connect(p.addr).await.unwrap();
    s.write_all(&[5, 1, 2]).await.unwrap();
    let mut m = [0u8; 2];
    s.read_exact(&mut m).await.unwrap();
    assert_eq!(m, [5, 0xff]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_headers_are_rejected_without_reading_them_all() {
    let p = proxy(&["plain.test".into()]).await;
    let mut s = TcpStream::connect(p.addr).await.unwrap();
    let (mut r, mut w) = s.split();
    let writer = async {
        // 32 MiB of header that never ends. The proxy must stop reading long before.
        let mut sent = 0usize;
        let _ = w.write_all(b"GET http://plain.test/ HTTP/1.1\r\n").await;
        let line = [b'a'; 8192];
        while sent < 32 << 20 {
            if w.write_all(b"X-Big: ").await.is_err()
                || w.write_all(&line).await.is_err()
                || w.write_all(b"\r\n").await.is_err()
            {
                break;
            }
            sent += line.len();
        }
        sent
    };
    let reader = async {
        let mut out = Vec::new();
        let _ = r.read_to_end(&mut out).await;
        out
    };
    let (sent, out) = tokio::time::timeout(Duration::from_secs(30), async {
        tokio::join!(writer, reader)
    })
    .await
    .expect("the proxy closes the connection");
    let text = String::from_utf8_lossy(&out);
    assert!(text.starts_with("HTTP/1.1 431"), "{text}");
    assert!(sent < 32 << 20, "the proxy read all {sent} bytes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_clients_are_dropped() {
    let limits = Limits {
        handshake_timeout: Duration::from_millis(500),
        ..Limits::default()
    };
    let tls = tls_upstream().await;
    let mut p = proxy_with(
        &[format!("tls.test:{}", tls.addr.port())],
        Resolver::Fixed(names()),
        limits,
    )
    .await;
    let started = std::time::Instant::now();
    for partial in [
        &b""[..],
        b"GET http://tls.test/ HTTP/1.1\r\nX-Slow:",
        b"\x05",
        b"\x05\x01\x00\x05",
    ] {
        let mut s = TcpStream::connect(p.addr).await.unwrap();
        s.write_all(partial).await.unwrap();
        let mut out = Vec::new();
        let r = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut out)).await;
        assert!(r.is_ok(), "still open after 5 s with {partial:?}");
    }
    // An open tunnel whose client never sends a ClientHello.
    let (status, mut s) = connect(p.addr, &format!("tls.test:{}", tls.addr.port())).await;
    assert_eq!(status, "HTTP/1.1 200 OK");
    let mut out = Vec::new();
    let r = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut out)).await;
    assert!(r.is_ok());
    assert!(matches!(refused(&p.event().await), Refusal::NotTls(_)));
    assert!(started.elapsed() < Duration::from_secs(15));
}

// --- listening on a unix socket ----------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_a_unix_socket() {
    let up = http_upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("egress.sock");
    let (tx, mut events) = tokio::sync::mpsc::unbounded_channel();
    let config = Config {
        allow: vec![format!("plain.test:{}", up.port()).parse().unwrap()],
        resolver: Resolver::Fixed(names()),
        limits: Limits::default(),
        ..Config::default()
    };
    let proxy = Proxy::new(
        config,
        Arc::new(move |e| {
            let _ = tx.send(e);
        }),
    )
    .unwrap();
    let listener = tokio::net::UnixListener::bind(&path).unwrap();
    tokio::spawn(proxy.serve_unix(listener));
    let mut s = tokio::net::UnixStream::connect(&path).await.unwrap();
    let req = format!(
        "GET http://plain.test:{}/u HTTP/1.1\r\nHost: plain.test\r\nConnection: close\r\n\r\n",
        up.port()
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    assert!(out.contains("GET /u HTTP/1.1"), "{out}");
    let e = tokio::time::timeout(Duration::from_secs(5), events.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(e.outcome, Outcome::Allowed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_request_on_a_kept_alive_connection_is_judged() {
    let up = http_upstream().await;
    let port = up.port();
    let mut p = proxy(&[format!("plain.test:{port}")]).await;
    let mut s = TcpStream::connect(p.addr).await.unwrap();
    let first = format!("GET http://plain.test:{port}/1 HTTP/1.1\r\nHost: plain.test\r\n\r\n");
    s.write_all(first.as_bytes()).await.unwrap();
    // Read the first response (its length is in the head).
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = s.read(&mut buf).await.unwrap();
        assert_ne!(n, 0, "closed early");
        got.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&got).to_string();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let len: usize = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length: ")
                        .map(|v| v.trim().parse().unwrap())
                })
                .unwrap();
            if body.len() >= len {
                break;
            }
        }
    }
    assert!(got.starts_with(b"HTTP/1.1 200"));
    assert_eq!(p.event().await.outcome, Outcome::Allowed);
    // The second request on the same connection names another host: judged on its own.
    let second = format!("GET http://other.test:{port}/2 HTTP/1.1\r\nHost: plain.test\r\n\r\n");
    s.write_all(second.as_bytes()).await.unwrap();
    let mut rest = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut rest)).await;
    let text = String::from_utf8_lossy(&rest);
    assert!(text.starts_with("HTTP/1.1 403"), "{text}");
    let e = p.event().await;
    assert_eq!(
        (e.host.as_str(), refused(&e)),
        ("other.test", &Refusal::NotAllowed)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curl_through_the_bridge_and_the_unix_socket() {
    let up = http_upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("egress.sock");
    let (tx, events) = tokio::sync::mpsc::unbounded_channel();
    let config = Config {
        allow: vec![format!("plain.test:{}", up.port()).parse().unwrap()],
        resolver: Resolver::Fixed(names()),
        limits: Limits::default(),
        ..Config::default()
    };
    let proxy = Proxy::new(
        config,
        Arc::new(move |e| {
            let _ = tx.send(e);
        }),
    )
    .unwrap();
    tokio::spawn(proxy.serve_unix(tokio::net::UnixListener::bind(&path).unwrap()));
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(pinfold_egress::bridge(l, path.clone(), 64));
    let mut p = Running { addr, events };
    let (status, body) = curl_via(&p, &format!("http://plain.test:{}/b", up.port()), &[]).await;
    assert_eq!(status, 200);
    assert!(body.starts_with("GET /b HTTP/1.1"), "{body}");
    assert_eq!(p.event().await.outcome, Outcome::Allowed);
    let (status, body) = curl_via(&p, &format!("http://other.test:{}/", up.port()), &[]).await;
    assert_eq!(
        (status, body.as_str()),
        (
            403,
            "pinfold egress: host and port are not on the allowlist\n"
        )
    );
    assert_eq!(refused(&p.event().await), &Refusal::NotAllowed);
    let (code, _, _) = curl(&[
        "--socks5-hostname",
        &addr.to_string(),
        &format!("http://plain.test:{}/", up.port()),
    ])
    .await;
    assert_eq!(code, 0);
    assert_eq!(p.event().await.protocol, Protocol::Socks5);
}
