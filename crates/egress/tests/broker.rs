//! The credential broker against real servers on loopback: a TLS upstream (rcgen test CA that
//! the proxy's `Config` trusts) which records and echoes every request head, real `curl`
//! trusting the proxy's CA bundle, and hand-written clients for what curl will not send.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pinfold_egress::{
    CertificateDer, Config, Endpoint, Event, Outcome, Protocol, Proxy, Refusal, Resolver, Secret,
};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc::UnboundedReceiver;

const LOCAL: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);
const SECRET: &str = "s3cr3t-VALUE-42";

// --- the upstream ------------------------------------------------------------------------------

/// Request heads an upstream read, each with the server name it was reached by.
type Seen = Arc<Mutex<Vec<(Option<String>, String)>>>;

struct Upstream {
    addr: SocketAddr,
    /// The test CA's certificate, PEM file and DER.
    ca_file: PathBuf,
    ca: CertificateDer<'static>,
    /// Every request head the upstream read, in order, with the SNI it was reached by.
    seen: Seen,
    _dir: tempfile::TempDir,
}

impl Upstream {
    fn seen(&self) -> Vec<(Option<String>, String)> {
        self.seen.lock().unwrap().clone()
    }
}

/// A TLS server for `api.test` and `other.test`, signed by a fresh test CA. Each connection
/// serves one request: `/redirect` answers `302` to `https://other.test:PORT/landed`,
/// anything else `200` with the request head as the body.
async fn upstream() -> Upstream {
    use rcgen::{
        BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType, IsCa,
        KeyPair,
    };
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.distinguished_name = DistinguishedName::new();
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "pinfold broker test CA");
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let leaf =
        CertificateParams::new(vec!["api.test".to_string(), "other.test".to_string()]).unwrap();
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
    let seen: Seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((s, _)) = l.accept().await else { return };
            let acceptor = acceptor.clone();
            let log = log.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(s).await else {
                    return;
                };
                let sni = tls.get_ref().1.server_name().map(str::to_string);
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match tls.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&head).into_owned();
                log.lock().unwrap().push((sni, head.clone()));
                let resp = if head.starts_with("GET /redirect ") {
                    format!(
                        "HTTP/1.1 302 Found\r\nLocation: https://other.test:{}/landed\r\n\
                         Content-Length: 0\r\nConnection: close\r\n\r\n",
                        addr.port()
                    )
                } else {
                    format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{head}",
                        head.len()
                    )
                };
                let _ = tls.write_all(resp.as_bytes()).await;
                let _ = tls.shutdown().await;
            });
        }
    });
    Upstream {
        addr,
        ca_file,
        ca: ca.der().clone(),
        seen,
        _dir: dir,
    }
}

// --- the proxy ---------------------------------------------------------------------------------

struct Running {
    proxy: Arc<Proxy>,
    addr: SocketAddr,
    events: UnboundedReceiver<Event>,
    /// What curl trusts: the upstream's test CA (standing in for the system roots) plus the
    /// proxy's per-run CA, as `Proxy::ca_bundle` writes it.
    bundle: PathBuf,
    _dir: tempfile::TempDir,
}

impl Running {
    async fn event(&mut self) -> Event {
        let e = tokio::time::timeout(Duration::from_secs(10), self.events.recv())
            .await
            .expect("an event within 10 s")
            .expect("the proxy is running");
        assert!(
            !format!("{e:?}").contains(SECRET),
            "the secret is in an event: {e:?}"
        );
        e
    }

    /// No further event arrives within a short wait.
    async fn no_event(&mut self) {
        let r = tokio::time::timeout(Duration::from_millis(300), self.events.recv()).await;
        assert!(r.is_err(), "unexpected event: {r:?}");
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

fn resolver() -> Resolver {
    let mut m = BTreeMap::new();
    for n in ["api.test", "other.test", "evil.test"] {
        m.insert(n.to_string(), vec![LOCAL]);
    }
    Resolver::Fixed(m)
}

fn endpoint(host: &str) -> Endpoint {
    Endpoint {
        host: host.parse().unwrap(),
        credential: "gh".into(),
        header: "Authorization".into(),
        format: "Bearer {}".into(),
        secret: Secret::new(SECRET),
    }
}

/// A proxy allowing `api.test` and `other.test` on the upstream's port, with `api.test` an
/// endpoint, trusting `trusted` for upstreams.
async fn broker(up: &Upstream, trusted: &[CertificateDer<'static>]) -> Running {
    let port = up.addr.port();
    let (tx, events) = tokio::sync::mpsc::unbounded_channel();
    let config = Config {
        allow: vec![
            format!("api.test:{port}").parse().unwrap(),
            format!("other.test:{port}").parse().unwrap(),
        ],
        resolver: resolver(),
        endpoints: vec![endpoint(&format!("api.test:{port}"))],
        upstream_ca: trusted.to_vec(),
        ..Config::default()
    };
    let proxy = Proxy::new(
        config,
        Arc::new(move |e| {
            let _ = tx.send(e);
        }),
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("bundle.pem");
    std::fs::write(&bundle, proxy.ca_bundle(Some(&up.ca_file)).unwrap()).unwrap();
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(proxy.clone().serve_tcp(l));
    Running {
        proxy,
        addr,
        events,
        bundle,
        _dir: dir,
    }
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

/// `curl -x proxy --cacert bundle URL EXTRA…`; (status, body, stderr).
async fn curl_via(p: &Running, url: &str, extra: &[&str]) -> (u16, String, String) {
    let proxy = p.url();
    let bundle = p.bundle.display().to_string();
    let mut args = vec![
        "-x",
        proxy.as_str(),
        "--cacert",
        bundle.as_str(),
        "-w",
        "\n%{http_code}",
        url,
    ];
    args.extend_from_slice(extra);
    let (_, out, err) = curl(&args).await;
    let (body, status) = out.rsplit_once('\n').unwrap_or(("", "0"));
    (status.trim().parse().unwrap_or(0), body.to_string(), err)
}

/// The values of `name` in a request head, in order.
fn header_values(head: &str, name: &str) -> Vec<String> {
    head.lines()
        .filter_map(|l| l.split_once(':'))
        .filter(|(n, _)| n.trim().eq_ignore_ascii_case(name))
        .map(|(_, v)| v.trim().to_string())
        .collect()
}

fn refused(e: &Event) -> &Refusal {
    match &e.outcome {
        Outcome::Refused(r) => r,
        other => panic!("expected a refusal, got {other:?} in {e:?}"),
    }
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

/// TLS through an open tunnel, trusting only the proxy's CA; send `request`, read to the end.
async fn tls_exchange(
    s: TcpStream,
    ca_pem: &str,
    name: &str,
    alpn: &[&[u8]],
    request: &[u8],
) -> Result<String, String> {
    let mut roots = rustls::RootCertStore::empty();
    for c in pinfold_egress::certs_from_pem(ca_pem.as_bytes()).unwrap() {
        roots.add(c).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let mut tls = connector
        .connect(ServerName::try_from(name.to_string()).unwrap(), s)
        .await
        .map_err(|e| e.to_string())?;
    tls.write_all(request).await.map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    let _ = tls.read_to_end(&mut out).await;
    Ok(String::from_utf8_lossy(&out).into_owned())
}

// --- tests -------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_secret_replaces_the_agents_header_for_the_endpoint() {
    let up = upstream().await;
    let port = up.addr.port();
    let mut p = broker(&up, std::slice::from_ref(&up.ca)).await;
    let url = format!("https://api.test:{port}/repos?x=1");

    // curl trusts the bundle (test CA + per-run CA); the agent's own Authorization is replaced.
    let (status, body, err) = curl_via(
        &p,
        &url,
        &["-H", "Authorization: Bearer agent-token", "--http1.1"],
    )
    .await;
    assert_eq!(status, 200, "{err}");
    assert!(body.starts_with("GET /repos?x=1 HTTP/1.1\r\n"), "{body}");
    assert_eq!(
        header_values(&body, "authorization"),
        [format!("Bearer {SECRET}")]
    );
    assert_eq!(header_values(&body, "host"), [format!("api.test:{port}")]);
    let e = p.event().await;
    assert_eq!(
        (
            e.protocol,
            e.outcome.clone(),
            e.credential.as_deref(),
            e.addr
        ),
        (
            Protocol::Connect,
            Outcome::Allowed,
            Some("gh"),
            Some(up.addr)
        )
    );
    assert!(e.bytes_up > 0 && e.bytes_down > 0, "{e:?}");

    // The upstream saw exactly that, reached with its own name.
    let seen = up.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].0.as_deref(), Some("api.test"));
    assert_eq!(
        header_values(&seen[0].1, "authorization"),
        [format!("Bearer {SECRET}")]
    );

    // curl offering h2 gets http/1.1 (the only protocol offered) and still the secret; two
    // URLs on one connection: each request gets it once (the second on a new upstream
    // connection, because the upstream closes after each answer).
    let (code, out, err) = curl(&[
        "-x",
        &p.url(),
        "--cacert",
        &p.bundle.display().to_string(),
        "--http2",
        &format!("https://api.test:{port}/one"),
        &format!("https://api.test:{port}/two"),
    ])
    .await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out.matches(&format!("authorization: Bearer {SECRET}"))
            .count()
            + out
                .matches(&format!("Authorization: Bearer {SECRET}"))
                .count(),
        2,
        "{out}"
    );
    for _ in 0..2 {
        assert_eq!(p.event().await.credential.as_deref(), Some("gh"));
    }
    assert_eq!(up.seen().len(), 3);

    // By hand: two values of the header (different spellings) become one, the secret.
    let (status, s) = connect(p.addr, &format!("api.test:{port}")).await;
    assert_eq!(status, "HTTP/1.1 200 OK");
    let req = format!(
        "GET /dup HTTP/1.1\r\nHost: api.test:{port}\r\nAuthorization: Bearer a\r\n\
         authorization: Basic b\r\nConnection: close\r\n\r\n"
    );
    let resp = tls_exchange(s, p.proxy.ca_pem(), "api.test", &[], req.as_bytes())
        .await
        .unwrap();
    assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
    let last = up.seen().pop().unwrap().1;
    assert!(last.starts_with("GET /dup "), "{last}");
    assert_eq!(
        header_values(&last, "authorization"),
        [format!("Bearer {SECRET}")]
    );
    assert_eq!(p.event().await.credential.as_deref(), Some("gh"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_allowed_hosts_are_tunnelled_untouched() {
    let up = upstream().await;
    let port = up.addr.port();
    let mut p = broker(&up, std::slice::from_ref(&up.ca)).await;
    // Trusting only the upstream's own CA works: the tunnel is not terminated.
    let (code, out, err) = curl(&[
        "-x",
        &p.url(),
        "--cacert",
        &up.ca_file.display().to_string(),
        "-H",
        "Authorization: Bearer agent-token",
        &format!("https://other.test:{port}/"),
    ])
    .await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(header_values(&out, "authorization"), ["Bearer agent-token"]);
    let e = p.event().await;
    assert_eq!((e.outcome.clone(), e.credential), (Outcome::Allowed, None));
    let seen = up.seen();
    assert_eq!(seen.len(), 1);
    assert!(!seen[0].1.contains(SECRET));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_to_another_host_carries_no_secret() {
    let up = upstream().await;
    let port = up.addr.port();
    let mut p = broker(&up, std::slice::from_ref(&up.ca)).await;
    let (status, body, err) =
        curl_via(&p, &format!("https://api.test:{port}/redirect"), &["-L"]).await;
    assert_eq!(status, 200, "{err}");
    assert!(body.starts_with("GET /landed HTTP/1.1"), "{body}");
    let seen = up.seen();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(seen[0].0.as_deref(), Some("api.test"));
    assert!(seen[0].1.contains(SECRET));
    assert_eq!(seen[1].0.as_deref(), Some("other.test"));
    assert!(!seen[1].1.contains(SECRET), "{}", seen[1].1);
    assert!(header_values(&seen[1].1, "authorization").is_empty());
    let mut creds: Vec<Option<String>> =
        vec![p.event().await.credential, p.event().await.credential];
    creds.sort();
    assert_eq!(creds, [None, Some("gh".to_string())]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_that_cannot_carry_the_secret_safely_are_refused() {
    let up = upstream().await;
    let port = up.addr.port();
    let mut p = broker(&up, std::slice::from_ref(&up.ca)).await;
    let url = format!("https://api.test:{port}/ws");

    // A WebSocket upgrade.
    let (status, body, err) = curl_via(
        &p,
        &url,
        &["-H", "Upgrade: websocket", "-H", "Connection: Upgrade"],
    )
    .await;
    assert_eq!(status, 403, "{err}");
    assert!(
        body.starts_with("pinfold egress: api.test is a credential endpoint: Upgrade"),
        "{body}"
    );
    assert!(matches!(
        refused(&p.event().await),
        Refusal::CredentialUnsafe(_)
    ));

    // A Host naming another host (the certificate and SNI say api.test).
    let (status, body, _) = curl_via(&p, &url, &["-H", "Host: other.test"]).await;
    assert_eq!(status, 403);
    assert!(
        body.contains("Host `other.test` is not the endpoint"),
        "{body}"
    );
    assert!(matches!(
        refused(&p.event().await),
        Refusal::CredentialUnsafe(_)
    ));
    // Host with another port.
    let (status, _, _) = curl_via(&p, &url, &["-H", &format!("Host: api.test:{}", port + 1)]).await;
    assert_eq!(status, 403);
    let _ = p.event().await;

    // HTTP/2 with prior knowledge inside the tunnel: a 403 in HTTP/1.1, nothing forwarded.
    let (_, s) = connect(p.addr, &format!("api.test:{port}")).await;
    let resp = tls_exchange(
        s,
        p.proxy.ca_pem(),
        "api.test",
        &[],
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0",
    )
    .await
    .unwrap();
    assert!(resp.starts_with("HTTP/1.1 403"), "{resp}");
    assert!(resp.contains("HTTP/2 is not brokered"), "{resp}");
    let _ = p.event().await;

    // A client offering only h2 in ALPN: the handshake fails (only http/1.1 is offered).
    let (_, s) = connect(p.addr, &format!("api.test:{port}")).await;
    let r = tls_exchange(s, p.proxy.ca_pem(), "api.test", &[b"h2"], b"").await;
    assert!(r.is_err(), "{r:?}");
    assert!(matches!(p.event().await.outcome, Outcome::Failed(_)));

    // A nested CONNECT and an absolute URL for another host.
    for req in [
        format!("CONNECT other.test:{port} HTTP/1.1\r\nHost: other.test:{port}\r\n\r\n"),
        format!("GET https://other.test:{port}/ HTTP/1.1\r\nHost: api.test:{port}\r\n\r\n"),
    ] {
        let (_, s) = connect(p.addr, &format!("api.test:{port}")).await;
        let resp = tls_exchange(s, p.proxy.ca_pem(), "api.test", &[], req.as_bytes())
            .await
            .unwrap();
        assert!(resp.starts_with("HTTP/1.1 403"), "{req}: {resp}");
        assert!(matches!(
            refused(&p.event().await),
            Refusal::CredentialUnsafe(_)
        ));
    }

    assert!(up.seen().is_empty(), "the upstream got {:?}", up.seen());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_http_to_an_endpoint_is_refused() {
    let up = upstream().await;
    let port = up.addr.port();
    let mut p = broker(&up, std::slice::from_ref(&up.ca)).await;
    let (status, body, err) = curl_via(&p, &format!("http://api.test:{port}/"), &[]).await;
    assert_eq!(status, 403, "{err}");
    assert!(
        body.starts_with("pinfold egress: api.test: credential endpoint: plain http://"),
        "{body}"
    );
    let e = p.event().await;
    assert_eq!((e.protocol, e.addr), (Protocol::Http, None));
    assert!(matches!(refused(&e), Refusal::CredentialUnsafe(_)));
    // Any port of the endpoint's host, even one the allowlist does not name.
    let (status, _, _) = curl_via(&p, "http://API.test/", &[]).await;
    assert_eq!(status, 403);
    let _ = p.event().await;
    assert!(up.seen().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_upstream_is_refused_before_any_request() {
    let up = upstream().await;
    let port = up.addr.port();
    // The proxy does not trust the upstream's CA (only the system roots).
    let mut p = broker(&up, &[]).await;
    let (code, _, err) = curl(&[
        "-x",
        &p.url(),
        "--cacert",
        &p.bundle.display().to_string(),
        "-H",
        "Authorization: Bearer agent",
        &format!("https://api.test:{port}/"),
    ])
    .await;
    assert_ne!(code, 0);
    assert!(err.contains("502"), "{err}");
    let e = p.event().await;
    match &e.outcome {
        Outcome::Failed(why) => assert!(
            why.starts_with("upstream TLS: invalid peer certificate"),
            "{why}"
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(e.credential, None);
    // The body says why.
    let (status, body) = {
        let (status, mut s) = connect(p.addr, &format!("api.test:{port}")).await;
        let mut rest = String::new();
        let _ = s.read_to_string(&mut rest).await;
        (status, rest)
    };
    assert!(status.starts_with("HTTP/1.1 502"), "{status}");
    assert!(
        body.contains("pinfold egress: upstream TLS: invalid peer certificate"),
        "{body}"
    );
    let _ = p.event().await;
    assert!(up.seen().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sni_must_match_on_the_terminated_path() {
    let up = upstream().await;
    let port = up.addr.port();
    let mut p = broker(&up, std::slice::from_ref(&up.ca)).await;
    let (status, s) = connect(p.addr, &format!("api.test:{port}")).await;
    assert_eq!(status, "HTTP/1.1 200 OK");
    // other.test would be a valid name for the upstream, but this tunnel is api.test's.
    let r = tls_exchange(
        s,
        p.proxy.ca_pem(),
        "other.test",
        &[],
        format!("GET / HTTP/1.1\r\nHost: other.test:{port}\r\n\r\n").as_bytes(),
    )
    .await;
    assert!(r.is_err(), "{r:?}");
    assert_eq!(
        refused(&p.event().await),
        &Refusal::SniMismatch {
            sni: Some("other.test".into())
        }
    );
    p.no_event().await;
    assert!(up.seen().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn socks5_to_an_endpoint_takes_the_same_path() {
    let up = upstream().await;
    let port = up.addr.port();
    let mut p = broker(&up, std::slice::from_ref(&up.ca)).await;
    let (code, out, err) = curl(&[
        "--socks5-hostname",
        &p.addr.to_string(),
        "--cacert",
        &p.bundle.display().to_string(),
        &format!("https://api.test:{port}/socks"),
    ])
    .await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        header_values(&out, "authorization"),
        [format!("Bearer {SECRET}")]
    );
    let e = p.event().await;
    assert_eq!(
        (e.protocol, e.credential.as_deref()),
        (Protocol::Socks5, Some("gh"))
    );
    // Plain text over SOCKS to the endpoint: refused, nothing forwarded.
    let mut s = TcpStream::connect(p.addr).await.unwrap();
    s.write_all(&[5, 1, 0]).await.unwrap();
    let mut r = [0u8; 2];
    s.read_exact(&mut r).await.unwrap();
    let mut req = vec![5, 1, 0, 3, 8];
    req.extend(b"api.test");
    req.extend(port.to_be_bytes());
    s.write_all(&req).await.unwrap();
    let mut reply = [0u8; 10];
    s.read_exact(&mut reply).await.unwrap();
    assert_eq!(reply[1], 0);
    s.write_all(b"GET / HTTP/1.1\r\nHost: api.test\r\n\r\n")
        .await
        .unwrap();
    let mut rest = Vec::new();
    let _ = s.read_to_end(&mut rest).await;
    // At most a TLS alert record (type 21) from the proxy's TLS acceptor; no HTTP.
    assert!(rest.is_empty() || rest[0] == 21, "{rest:?}");
    assert!(matches!(refused(&p.event().await), Refusal::NotTls(_)));
    assert_eq!(up.seen().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_secret_is_never_in_debug_output_or_errors() {
    let ep = endpoint("api.test");
    let config = Config {
        endpoints: vec![ep.clone()],
        ..Config::default()
    };
    for text in [
        format!("{ep:?}"),
        format!("{config:?}"),
        format!("{:?}", Secret::new(SECRET)),
    ] {
        assert!(!text.contains(SECRET), "{text}");
    }
    assert!(format!("{ep:?}").contains("<redacted>"));
    let proxy = Proxy::new(config.clone(), Arc::new(|_| {})).unwrap();
    assert!(!format!("{proxy:?}").contains(SECRET));

    // Endpoints that cannot carry the secret are build errors that do not quote it.
    let bad = |f: &dyn Fn(&mut Endpoint)| {
        let mut ep = endpoint("api.test");
        f(&mut ep);
        let err = Proxy::new(
            Config {
                endpoints: vec![ep],
                ..Config::default()
            },
            Arc::new(|_| {}),
        )
        .unwrap_err();
        let text = format!("{err} {err:?}");
        assert!(!text.contains(SECRET), "{text}");
        text
    };
    assert!(bad(&|e| e.secret = Secret::new(format!("{SECRET}\n"))).contains("trailing newline"));
    assert!(bad(&|e| e.format = "Bearer".into()).contains("`{}` exactly once"));
    assert!(bad(&|e| e.header = "Host".into()).contains("frames or routes"));
    assert!(bad(&|e| e.host = "*.api.test".parse().unwrap()).contains("exact host"));
    assert!(bad(&|e| e.secret = Secret::new("")).contains("empty"));
    // Missing system roots with endpoints: an error naming the file.
    let err = Proxy::new(
        Config {
            endpoints: vec![endpoint("api.test")],
            system_roots: Some("/nonexistent/roots.pem".into()),
            ..Config::default()
        },
        Arc::new(|_| {}),
    )
    .unwrap_err();
    assert!(err.to_string().contains("/nonexistent/roots.pem"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ca_bundle_is_the_system_roots_plus_the_per_run_ca() {
    let up = upstream().await;
    let p = broker(&up, &[]).await;
    let bundle = std::fs::read_to_string(&p.bundle).unwrap();
    let system = std::fs::read_to_string(&up.ca_file).unwrap();
    assert!(bundle.starts_with(&system));
    assert!(bundle.ends_with(p.proxy.ca_pem()));
    assert_eq!(
        pinfold_egress::certs_from_pem(bundle.as_bytes())
            .unwrap()
            .len(),
        2
    );
    // The default is the system's file; two proxies have two different CAs.
    let default = p.proxy.ca_bundle(None).unwrap();
    assert!(default.len() > p.proxy.ca_pem().len() + 1000);
    let other = broker(&up, &[]).await;
    assert_ne!(other.proxy.ca_pem(), p.proxy.ca_pem());
    assert!(
        p.proxy
            .ca_bundle(Some(std::path::Path::new("/nonexistent")))
            .is_err()
    );
    // PEM text without a certificate is an error, not an empty trust list.
    assert!(pinfold_egress::certs_from_pem(b"").is_err());
    let key_only = b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n";
    assert!(pinfold_egress::certs_from_pem(key_only).is_err());
}
