//! The proxy server: one listener, three protocols (HTTP forward, `CONNECT`, SOCKS5), one
//! decision per connection or request.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream, UnixListener};
use tokio::sync::Semaphore;

use rustls::pki_types::CertificateDer;

use crate::addr::{AddrClass, classify};
use crate::broker::{Broker, BuildError, Endpoint};
use crate::host::{HostPattern, normalize_name, parse_ip_literal};
use crate::tls::{Hello, MAX_HELLO, inspect};

/// Limits that keep one client from holding memory or tasks without end.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Largest request head (request line and headers) accepted; larger gets 431.
    pub max_header_bytes: usize,
    /// Time a client has to send a complete request head, SOCKS handshake or ClientHello.
    pub handshake_timeout: Duration,
    /// Time to resolve a name and connect to the upstream.
    pub connect_timeout: Duration,
    /// Connections served at once; more wait in the listen queue.
    pub max_connections: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_header_bytes: 64 * 1024,
            handshake_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(10),
            max_connections: 1024,
        }
    }
}

/// How the proxy turns names into addresses.
#[derive(Debug, Clone, Default)]
pub enum Resolver {
    /// The system resolver (`getaddrinfo`, through tokio).
    #[default]
    System,
    /// A fixed table; names not in it do not resolve. For tests and for callers that resolve
    /// on their own.
    Fixed(BTreeMap<String, Vec<IpAddr>>),
}

impl Resolver {
    async fn resolve(&self, name: &str, port: u16) -> io::Result<Vec<IpAddr>> {
        match self {
            Resolver::System => Ok(tokio::net::lookup_host((name, port))
                .await?
                .map(|a| a.ip().to_canonical())
                .collect()),
            Resolver::Fixed(table) => table
                .get(name)
                .cloned()
                .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "name not found")),
        }
    }
}

/// What the proxy allows, and how it behaves.
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// The allowlist. Empty allows nothing.
    pub allow: Vec<HostPattern>,
    pub resolver: Resolver,
    pub limits: Limits,
    /// Credential endpoints: tunnels to these hosts are terminated and their requests get the
    /// secret (module docs of [`crate::broker`]). An endpoint never widens the allowlist.
    pub endpoints: Vec<Endpoint>,
    /// Extra roots trusted for upstreams of brokered tunnels, besides the system roots
    /// (`network.upstream_ca`; see [`crate::certs_from_pem_file`]).
    pub upstream_ca: Vec<CertificateDer<'static>>,
    /// The system roots file, PEM; `None` is [`crate::SYSTEM_ROOTS`]. Read only when there are
    /// endpoints.
    pub system_roots: Option<PathBuf>,
}

/// The protocol a client used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// A plain HTTP request in absolute form (`GET http://host/path`).
    Http,
    /// `CONNECT host:port`, a TLS tunnel.
    Connect,
    /// A SOCKS5 `CONNECT`.
    Socks5,
}

/// Why a connection was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// No allowlist entry matches the host and port.
    NotAllowed,
    /// The host is not a valid name or IP literal.
    BadHost,
    /// The name did not resolve.
    Unresolved(String),
    /// Every address the name resolved to is special and not listed.
    Address { ip: IpAddr, class: AddrClass },
    /// The TLS server name differs from the host the tunnel was opened for.
    SniMismatch { sni: Option<String> },
    /// A `CONNECT` tunnel that does not start with a TLS ClientHello (or a malformed one).
    NotTls(String),
    /// The request is not a proxy request pinfold handles.
    BadRequest(String),
    /// The host is a credential endpoint and the request cannot carry the credential safely
    /// (plain HTTP, an `Upgrade`, HTTP/2, a `Host` naming another host).
    CredentialUnsafe(String),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::NotAllowed => f.write_str("host and port are not on the allowlist"),
            Refusal::BadHost => f.write_str("not a valid host name or IP address"),
            Refusal::Unresolved(e) => write!(f, "name does not resolve: {e}"),
            Refusal::Address { ip, class } => {
                write!(
                    f,
                    "resolves to {ip}, a {class} address; list the name or address exactly to allow it"
                )
            }
            Refusal::SniMismatch { sni: Some(s) } => {
                write!(f, "TLS server name `{s}` differs from the tunnel's host")
            }
            Refusal::SniMismatch { sni: None } => {
                f.write_str("TLS ClientHello without a server name for a named host")
            }
            Refusal::NotTls(why) => write!(f, "tunnel is not TLS: {why}"),
            Refusal::BadRequest(why) => f.write_str(why),
            Refusal::CredentialUnsafe(why) => write!(f, "credential endpoint: {why}"),
        }
    }
}

/// The outcome of one connection or request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Allowed,
    Refused(Refusal),
    /// Allowed, but the upstream could not be reached.
    Failed(String),
}

/// One decision, delivered when the connection (or, for HTTP, the request's upstream
/// connection) ends. Holds no header or body content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// Counts client connections from 1; requests on one HTTP connection share it.
    pub connection: u64,
    pub protocol: Protocol,
    /// The host as requested (lower case for names).
    pub host: String,
    pub port: u16,
    /// The address connected to, when it got that far.
    pub addr: Option<SocketAddr>,
    pub outcome: Outcome,
    /// Bytes sent from the client to the upstream, and back (for HTTP: on the upstream
    /// connection, request and response heads included).
    pub bytes_up: u64,
    pub bytes_down: u64,
    /// The name of the credential added to this request (brokered endpoints only). Never the
    /// value.
    pub credential: Option<String>,
}

/// Where events go. Called from the proxy's tasks; it must not block.
pub type EventSink = Arc<dyn Fn(Event) + Send + Sync>;

/// The proxy. Cheap to share: serve several listeners from one `Arc<Proxy>`.
pub struct Proxy {
    pub(crate) config: Config,
    pub(crate) sink: EventSink,
    next_id: AtomicU64,
    slots: Arc<Semaphore>,
    pub(crate) broker: Broker,
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proxy")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// A decision before connecting: where to go, or why not.
pub(crate) struct Target {
    pub(crate) host: String,
    pub(crate) port: u16,
    addrs: Vec<IpAddr>,
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
    /// Build the proxy: check the endpoints, generate the per-run CA (key in memory only)
    /// and, when there are endpoints, load the roots trusted for their upstreams.
    pub fn new(config: Config, sink: EventSink) -> Result<Arc<Proxy>, BuildError> {
        let broker = Broker::new(
            &config.endpoints,
            &config.upstream_ca,
            config.system_roots.as_deref(),
        )?;
        let slots = Arc::new(Semaphore::new(config.limits.max_connections));
        Ok(Arc::new(Proxy {
            config,
            sink,
            next_id: AtomicU64::new(1),
            slots,
            broker,
        }))
    }

    /// The per-run CA certificate, PEM. Clients of brokered endpoints must trust it.
    pub fn ca_pem(&self) -> &str {
        self.broker.ca_pem()
    }

    /// A CA bundle for the sandbox: the system roots file (`system_roots`, default
    /// [`crate::SYSTEM_ROOTS`]) followed by [`Proxy::ca_pem`]. The caller writes it where the
    /// sandbox's tools look (`SSL_CERT_FILE` and friends).
    pub fn ca_bundle(&self, system_roots: Option<&Path>) -> io::Result<String> {
        crate::broker::ca_bundle(self.broker.ca_pem(), system_roots)
    }

    /// Accept connections on a TCP listener until the task is dropped or accepting fails.
    pub async fn serve_tcp(self: Arc<Self>, listener: TcpListener) -> io::Result<()> {
        loop {
            let permit = self.slot().await?;
            if let Some((stream, _)) = accepted(listener.accept().await).await? {
                let _ = stream.set_nodelay(true);
                self.spawn_client(stream, permit);
            }
        }
    }

    /// Accept connections on a unix socket listener (the in-sandbox bridge's side).
    pub async fn serve_unix(self: Arc<Self>, listener: UnixListener) -> io::Result<()> {
        loop {
            let permit = self.slot().await?;
            if let Some((stream, _)) = accepted(listener.accept().await).await? {
                self.spawn_client(stream, permit);
            }
        }
    }

    /// A connection slot: at most `Limits::max_connections` clients are served at once; the
    /// rest wait in the listen queue.
    async fn slot(&self) -> io::Result<tokio::sync::OwnedSemaphorePermit> {
        self.slots
            .clone()
            .acquire_owned()
            .await
            .map_err(io::Error::other)
    }

    /// Serve one accepted client on a task of its own, holding its slot until it ends.
    fn spawn_client<S>(self: &Arc<Self>, stream: S, permit: tokio::sync::OwnedSemaphorePermit)
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let this = self.clone();
        tokio::spawn(async move {
            this.serve_connection(stream).await;
            drop(permit);
        });
    }

    /// Bind a unix socket at `path` (which must not exist) and serve it.
    pub async fn serve_unix_path(self: Arc<Self>, path: &Path) -> io::Result<()> {
        let listener = UnixListener::bind(path)?;
        self.serve_unix(listener).await
    }

    /// Serve one client connection of any supported protocol.
    pub async fn serve_connection<S>(self: Arc<Self>, mut stream: S)
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut first = [0u8; 1];
        let timeout = self.config.limits.handshake_timeout;
        match tokio::time::timeout(timeout, stream.read(&mut first)).await {
            Ok(Ok(1)) => {}
            _ => return,
        }
        if first[0] == 5 {
            crate::socks::serve(self, id, stream).await;
        } else {
            let stream = Rewind::new(first.to_vec(), stream);
            self.serve_http(id, stream).await;
        }
    }

    async fn serve_http<S>(self: Arc<Self>, id: u64, stream: S)
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let limits = &self.config.limits;
        let this = self.clone();
        let service = hyper::service::service_fn(move |req| {
            let this = this.clone();
            async move { Ok::<_, Infallible>(this.handle(id, req).await) }
        });
        let _ = hyper::server::conn::http1::Builder::new()
            .max_buf_size(limits.max_header_bytes.max(8192))
            .header_read_timeout(limits.handshake_timeout)
            .timer(TokioTimer::new())
            .serve_connection(TokioIo::new(stream), service)
            .with_upgrades()
            .await;
    }

    pub(crate) fn handshake_timeout(&self) -> Duration {
        self.config.limits.handshake_timeout
    }

    pub(crate) fn emit(&self, event: Event) {
        (self.sink)(event)
    }

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
    pub(crate) async fn connect(&self, target: &Target) -> Result<(TcpStream, SocketAddr), String> {
        let mut last = String::from("no address");
        for ip in &target.addrs {
            let addr = SocketAddr::new(*ip, target.port);
            match tokio::time::timeout(self.config.limits.connect_timeout, TcpStream::connect(addr))
                .await
            {
                Ok(Ok(s)) => {
                    let _ = s.set_nodelay(true);
                    return Ok((s, addr));
                }
                Ok(Err(e)) => last = format!("{addr}: {e}"),
                Err(_) => last = format!("{addr}: connect timed out"),
            }
        }
        Err(last)
    }

    /// Decide on `host:port` and connect to the address decided on. The event to complete
    /// (its host and address filled in), or the refusal to answer, already emitted.
    async fn open_upstream(
        &self,
        id: u64,
        protocol: Protocol,
        host: &str,
        port: u16,
    ) -> Result<(Target, TcpStream, Event), Response<Body>> {
        let mut event = Event {
            connection: id,
            protocol,
            host: host.to_ascii_lowercase(),
            port,
            addr: None,
            outcome: Outcome::Allowed,
            bytes_up: 0,
            bytes_down: 0,
            credential: None,
        };
        let target = match self.decide(host, port).await {
            Ok(t) => t,
            Err(r) => {
                let resp = refuse(StatusCode::FORBIDDEN, &r.to_string());
                event.outcome = Outcome::Refused(r);
                self.emit(event);
                return Err(resp);
            }
        };
        event.host = target.host.clone();
        match self.connect(&target).await {
            Ok((upstream, addr)) => {
                event.addr = Some(addr);
                Ok((target, upstream, event))
            }
            Err(e) => {
                let resp = refuse(
                    StatusCode::BAD_GATEWAY,
                    &format!("cannot reach upstream: {e}"),
                );
                event.outcome = Outcome::Failed(e);
                self.emit(event);
                Err(resp)
            }
        }
    }

    async fn handle(self: Arc<Self>, id: u64, req: Request<Incoming>) -> Response<Body> {
        if req.method() == Method::CONNECT {
            return self.handle_connect(id, req).await;
        }
        self.handle_forward(id, req).await
    }

    async fn handle_connect(self: Arc<Self>, id: u64, req: Request<Incoming>) -> Response<Body> {
        let Some(authority) = req.uri().authority().cloned() else {
            return refuse(StatusCode::BAD_REQUEST, "CONNECT needs host:port");
        };
        let host = authority.host().to_string();
        let Some(port) = authority.port_u16() else {
            return refuse(StatusCode::BAD_REQUEST, "CONNECT needs host:port");
        };
        // Connect before answering 200: the client must never see success for an upstream
        // that does not exist. Nothing is sent upstream until the ClientHello is checked.
        let (target, upstream, mut event) =
            match self.open_upstream(id, Protocol::Connect, &host, port).await {
                Ok(o) => o,
                Err(resp) => return resp,
            };
        if let Some(ep) = self.endpoint_for(&target) {
            // A credential endpoint: verified TLS to the upstream first, so an untrusted
            // upstream is refused with its reason before the client is told anything else.
            let upstream = match self.upstream_tls(&target, upstream).await {
                Ok(u) => u,
                Err(why) => {
                    event.outcome = Outcome::Failed(why.clone());
                    self.emit(event);
                    return refuse(StatusCode::BAD_GATEWAY, &why);
                }
            };
            let this = self.clone();
            tokio::spawn(async move {
                match hyper::upgrade::on(req).await {
                    Ok(u) => {
                        this.serve_brokered(TokioIo::new(u), ep, target, upstream, event)
                            .await
                    }
                    Err(e) => {
                        event.outcome = Outcome::Failed(format!("upgrade failed: {e}"));
                        this.emit(event);
                    }
                }
            });
            return Response::builder()
                .status(StatusCode::OK)
                .body(empty())
                .unwrap_or_else(|_| Response::new(empty()));
        }
        let this = self.clone();
        tokio::spawn(async move {
            let client = match hyper::upgrade::on(req).await {
                Ok(u) => TokioIo::new(u),
                Err(e) => {
                    event.outcome = Outcome::Failed(format!("upgrade failed: {e}"));
                    this.emit(event);
                    return;
                }
            };
            let expect = Expect::Tls {
                host: target.host.clone(),
                ip_literal: target.ip_literal,
            };
            this.tunnel(client, upstream, expect, event).await;
        });
        Response::builder()
            .status(StatusCode::OK)
            .body(empty())
            .unwrap_or_else(|_| Response::new(empty()))
    }

    /// Relay bytes both ways after checking the client's first bytes. The upstream's bytes
    /// flow from the start (a server may speak first); the client's are held until checked.
    pub(crate) async fn tunnel<C>(
        &self,
        client: C,
        upstream: TcpStream,
        expect: Expect,
        mut event: Event,
    ) where
        C: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let (mut client_r, mut client_w) = tokio::io::split(client);
        let (up_r, up_w) = upstream.into_split();
        // Bytes are counted as they pass, and the event goes out when this guard is dropped:
        // at the end of the tunnel, or if the task is cancelled while the tunnel is open.
        let counters = Arc::new((AtomicU64::new(0), AtomicU64::new(0)));
        let mut up_r = Counted {
            inner: up_r,
            counters: counters.clone(),
        };
        let mut up_w = Counted {
            inner: up_w,
            counters: counters.clone(),
        };
        event.bytes_up = 0;
        event.bytes_down = 0;
        let mut pending = PendingEvent::new(self.sink.clone(), event, counters);
        let down = tokio::spawn(async move {
            let n = relay(&mut up_r, &mut client_w).await.unwrap_or(0);
            let _ = client_w.shutdown().await;
            n
        });
        // The copy toward the client runs in its own task: cancel it with the tunnel.
        let mut down = AbortOnDrop(down);
        let mut buf = Vec::new();
        let check = tokio::time::timeout(
            self.config.limits.handshake_timeout,
            read_hello(&mut client_r, &mut buf),
        )
        .await;
        let refusal = match (check, &expect) {
            (Err(_), _) => Some(Refusal::NotTls("no ClientHello in time".into())),
            // A SOCKS client may open a connection and send nothing (a server-first protocol
            // that ends early): nothing to check, nothing forwarded.
            (Ok(Err(e)), Expect::TlsIfAny { .. })
                if e.kind() == io::ErrorKind::UnexpectedEof && buf.is_empty() =>
            {
                None
            }
            (Ok(Err(e)), _) => Some(Refusal::NotTls(format!("read failed: {e}"))),
            (Ok(Ok(hello)), expect) => expect.check(&hello),
        };
        if let Some(r) = refusal {
            down.0.abort();
            if let Some(e) = pending.event.as_mut() {
                e.outcome = Outcome::Refused(r);
            }
            return;
        }
        let upward = async {
            up_w.write_all(&buf).await?;
            relay(&mut client_r, &mut up_w).await?;
            let _ = up_w.shutdown().await;
            Ok::<(), io::Error>(())
        };
        let _ = upward.await;
        let _ = (&mut down.0).await;
        drop(pending);
    }

    /// HTTP/1.1 on `upstream` for requests the proxy forwards: the handshake, and the
    /// connection driven on a task of its own whose `event` (bytes counted as they pass, and
    /// `credential` when one is injected) is sent when the connection ends or the task is
    /// cancelled. A failed handshake sends the event as failed and gives the `502` to answer.
    pub(crate) async fn http1_upstream<S>(
        &self,
        upstream: S,
        mut event: Event,
        credential: Option<String>,
    ) -> Result<hyper::client::conn::http1::SendRequest<Incoming>, Response<Body>>
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let counters = Arc::new((AtomicU64::new(0), AtomicU64::new(0)));
        let upstream = Counted {
            inner: upstream,
            counters: counters.clone(),
        };
        let (sender, conn) =
            match hyper::client::conn::http1::handshake(TokioIo::new(upstream)).await {
                Ok(x) => x,
                Err(e) => {
                    event.outcome = Outcome::Failed(e.to_string());
                    self.emit(event);
                    return Err(refuse(StatusCode::BAD_GATEWAY, "upstream handshake failed"));
                }
            };
        event.credential = credential;
        let pending = PendingEvent::new(self.sink.clone(), event, counters);
        tokio::spawn(async move {
            let _ = conn.await;
            drop(pending);
        });
        Ok(sender)
    }

    async fn handle_forward(
        self: Arc<Self>,
        id: u64,
        mut req: Request<Incoming>,
    ) -> Response<Body> {
        let uri = req.uri().clone();
        match uri.scheme_str() {
            Some("http") => {}
            Some(_) => {
                return refuse(
                    StatusCode::BAD_REQUEST,
                    "only http:// URLs are forwarded; use CONNECT for https",
                );
            }
            None => {
                return refuse(
                    StatusCode::BAD_REQUEST,
                    "not a proxy request: the URL must be absolute",
                );
            }
        }
        let Some(authority) = uri.authority().cloned() else {
            return refuse(StatusCode::BAD_REQUEST, "the URL has no host");
        };
        if authority.as_str().contains('@') {
            return refuse(
                StatusCode::BAD_REQUEST,
                "user information in the URL is not forwarded",
            );
        }
        let host = authority.host().to_string();
        let port = authority.port_u16().unwrap_or(80);
        if self.broker.is_endpoint_host(&host) {
            // Never a secret in clear text, and never a request the agent expects to be
            // authenticated going out without it.
            let r = Refusal::CredentialUnsafe(
                "plain http:// is never brokered (the credential is not sent in clear text); use https://".into(),
            );
            let resp = refuse(StatusCode::FORBIDDEN, &format!("{host}: {r}"));
            self.emit(Event {
                connection: id,
                protocol: Protocol::Http,
                host: host.to_ascii_lowercase(),
                port,
                addr: None,
                outcome: Outcome::Refused(r),
                bytes_up: 0,
                bytes_down: 0,
                credential: None,
            });
            return resp;
        }
        let (_, upstream, event) = match self.open_upstream(id, Protocol::Http, &host, port).await {
            Ok(o) => o,
            Err(resp) => return resp,
        };
        let mut sender = match self.http1_upstream(upstream, event, None).await {
            Ok(s) => s,
            Err(resp) => return resp,
        };

        // Origin form upstream; Host is the host that was judged, whatever the client sent.
        let path = uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
        *req.uri_mut() = path
            .parse()
            .unwrap_or_else(|_| hyper::Uri::from_static("/"));
        strip_hop_by_hop(req.headers_mut());
        if let Ok(v) = HeaderValue::from_str(authority.as_str()) {
            req.headers_mut().insert(header::HOST, v);
        }
        send_upstream(&mut sender, req).await
    }
}

/// Send a forwarded request and hand its response back, hop-by-hop headers removed both ways
/// (the request's by the caller); `502` with the reason when the upstream fails.
pub(crate) async fn send_upstream(
    sender: &mut hyper::client::conn::http1::SendRequest<Incoming>,
    req: Request<Incoming>,
) -> Response<Body> {
    match sender.send_request(req).await {
        Ok(resp) => {
            let (mut parts, body) = resp.into_parts();
            strip_hop_by_hop(&mut parts.headers);
            Response::from_parts(
                parts,
                body.map_err(|e| -> Box<dyn std::error::Error + Send + Sync> { Box::new(e) })
                    .boxed(),
            )
        }
        Err(e) => refuse(StatusCode::BAD_GATEWAY, &format!("upstream failed: {e}")),
    }
}

/// Sort accept errors: a client that went away, or a process out of file descriptors, must not
/// stop the proxy (the latter waits a moment for connections to close); anything else does.
pub(crate) async fn accepted<T>(r: io::Result<T>) -> io::Result<Option<T>> {
    match r {
        Ok(x) => Ok(Some(x)),
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::ConnectionAborted
                    | io::ErrorKind::ConnectionReset
                    | io::ErrorKind::Interrupted
            ) =>
        {
            Ok(None)
        }
        // EMFILE, ENFILE (Linux numbers; the crate is Linux-only like the sandbox).
        Err(e) if matches!(e.raw_os_error(), Some(23 | 24)) => {
            tokio::time::sleep(Duration::from_millis(50)).await;
            Ok(None)
        }
        Err(e) => Err(e),
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

/// Bytes a tunnel moves per read and write, each way. `tokio::io::copy` moves 8 KiB at a
/// time: a recv and a send per 8 KiB, whose per-call cost is a large share of the proxy's CPU on a
/// fast link (docs/benchmarks.md, egress). 64 KiB, one loopback segment, cuts the calls
/// eightfold; two buffers per tunnel, 128 MiB at the 1024-connection limit.
const RELAY_BUF: usize = 64 * 1024;

/// Copy until end of file through one [`RELAY_BUF`] buffer; the count copied.
async fn relay<R, W>(r: &mut R, w: &mut W) -> io::Result<u64>
where
    R: AsyncRead + Unpin + ?Sized,
    W: AsyncWrite + Unpin + ?Sized,
{
    let mut buf = vec![0u8; RELAY_BUF];
    let mut total = 0u64;
    loop {
        let n = r.read(&mut buf).await?;
        if n == 0 {
            w.flush().await?;
            return Ok(total);
        }
        w.write_all(&buf[..n]).await?;
        total += n as u64;
    }
}

/// Read until [`inspect`] can tell what the bytes are (at most [`MAX_HELLO`] plus records).
async fn read_hello<R: AsyncRead + Unpin>(r: &mut R, buf: &mut Vec<u8>) -> io::Result<Hello> {
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(h) = inspect(buf) {
            return Ok(h);
        }
        if buf.len() > MAX_HELLO + 1024 {
            return Ok(Hello::Malformed("ClientHello too large"));
        }
        let n = r.read(&mut chunk).await?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "client closed before its first bytes",
            ));
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

pub(crate) type Body = BoxBody<Bytes, Box<dyn std::error::Error + Send + Sync>>;

fn empty() -> Body {
    Full::new(Bytes::new())
        .map_err(|never| match never {})
        .boxed()
}

/// A refusal: the status and a one-line reason body.
pub(crate) fn refuse(status: StatusCode, reason: &str) -> Response<Body> {
    let body = format!("pinfold egress: {reason}\n");
    let mut resp = Response::new(
        Full::new(Bytes::from(body))
            .map_err(|never| match never {})
            .boxed(),
    );
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    resp.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    resp
}

/// Headers that describe one hop, not the message (RFC 9110 section 7.6.1), and the
/// proxy's own credentials.
pub(crate) fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|t| HeaderName::from_bytes(t.trim().as_bytes()).ok())
        .collect();
    for name in named {
        headers.remove(name);
    }
    for name in [
        "connection",
        "proxy-connection",
        "keep-alive",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "proxy-authorization",
        "proxy-authenticate",
    ] {
        headers.remove(name);
    }
}

/// A stream that first yields bytes already read from it.
pub(crate) struct Rewind<S> {
    prefix: Vec<u8>,
    pos: usize,
    inner: S,
}

impl<S> Rewind<S> {
    pub(crate) fn new(prefix: Vec<u8>, inner: S) -> Self {
        Rewind {
            prefix,
            pos: 0,
            inner,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Rewind<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.pos < self.prefix.len() {
            let n = buf.remaining().min(self.prefix.len() - self.pos);
            let start = self.pos;
            buf.put_slice(&self.prefix[start..start + n]);
            self.pos += n;
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Rewind<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// An upstream stream that counts bytes written (up) and read (down).
/// A spawned task aborted when its handle is dropped.
pub(crate) struct AbortOnDrop<T>(pub(crate) tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The event of a connection still in use, delivered exactly once: when the guard is dropped
/// — at the connection's end, or when its task is cancelled mid-way (the runtime shut down
/// while a tunnel or a response was still open) — with the bytes counted so far. Without it a
/// connection open when the proxy stops would leave no event at all.
pub(crate) struct PendingEvent {
    sink: EventSink,
    pub(crate) event: Option<Event>,
    pub(crate) counters: Arc<(AtomicU64, AtomicU64)>,
}

impl PendingEvent {
    pub(crate) fn new(
        sink: EventSink,
        event: Event,
        counters: Arc<(AtomicU64, AtomicU64)>,
    ) -> PendingEvent {
        PendingEvent {
            sink,
            event: Some(event),
            counters,
        }
    }
}

impl Drop for PendingEvent {
    fn drop(&mut self) {
        if let Some(mut e) = self.event.take() {
            e.bytes_up = e.bytes_up.max(self.counters.0.load(Ordering::Relaxed));
            e.bytes_down = e.bytes_down.max(self.counters.1.load(Ordering::Relaxed));
            (self.sink)(e);
        }
    }
}

pub(crate) struct Counted<S> {
    pub(crate) inner: S,
    pub(crate) counters: Arc<(AtomicU64, AtomicU64)>,
}

impl<S: AsyncRead + Unpin> AsyncRead for Counted<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        let n = (buf.filled().len() - before) as u64;
        self.counters.1.fetch_add(n, Ordering::Relaxed);
        r
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Counted<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = r {
            self.counters.0.fetch_add(n as u64, Ordering::Relaxed);
        }
        r
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hop_by_hop_headers_are_removed() {
        let mut h = HeaderMap::new();
        h.insert(
            "connection",
            HeaderValue::from_static("keep-alive, X-Secret-Hop"),
        );
        h.insert("x-secret-hop", HeaderValue::from_static("1"));
        h.insert("proxy-authorization", HeaderValue::from_static("Basic abc"));
        h.insert("keep-alive", HeaderValue::from_static("timeout=5"));
        h.insert("accept", HeaderValue::from_static("*/*"));
        strip_hop_by_hop(&mut h);
        assert_eq!(h.len(), 1);
        assert!(h.contains_key("accept"));
    }

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
