//! Serving a tunnel to a credential endpoint (the order is in [`crate::broker`]'s docs):
//! verified TLS to the upstream, the client's ClientHello checked and its TLS terminated with
//! a minted leaf, and each HTTP/1.1 request checked and sent on with the secret in its header.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode, Version};
use hyper_util::rt::{TokioIo, TokioTimer};
use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

use crate::broker::Brokered;
use crate::decide::{Expect, Target};
use crate::error::{ReopenError, Unbrokerable, UpstreamTlsError};
use crate::event::{Event, Outcome, Refusal};
use crate::http::{Body, refuse, send_upstream, strip_hop_by_hop};
use crate::proxy::Proxy;
use crate::stream::Rewind;
use crate::tls::Hello;

/// What an HTTP/2 client with prior knowledge sends first.
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

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

    /// TLS to the upstream, verified, within the connect timeout.
    pub(crate) async fn upstream_tls(
        &self,
        target: &Target,
        tcp: TcpStream,
    ) -> Result<TlsStream<TcpStream>, UpstreamTlsError> {
        let Some(config) = self.broker.upstream.clone() else {
            return Err(UpstreamTlsError::NoConfig);
        };
        let name = match target.addr_literal() {
            Some(ip) => ServerName::IpAddress(ip.into()),
            None => ServerName::try_from(target.host.clone()).map_err(UpstreamTlsError::Name)?,
        };
        let connector = tokio_rustls::TlsConnector::from(config);
        match tokio::time::timeout(
            self.config.limits.connect_timeout,
            connector.connect(name, tcp),
        )
        .await
        {
            Ok(Ok(s)) => Ok(s),
            Ok(Err(e)) => Err(UpstreamTlsError::Handshake(e)),
            Err(_) => Err(UpstreamTlsError::TimedOut),
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
            event.outcome = Outcome::Refused(Refusal::CredentialUnsafe(why.to_string()));
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
                    let why = why.to_string();
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
        send_upstream(&mut sender, req).await
    }

    /// A fresh verified upstream connection for a later request: decided again (the allowlist
    /// and address checks), connected, TLS verified.
    async fn reopen(
        &self,
        target: &Target,
        event: &mut Event,
    ) -> Result<TlsStream<TcpStream>, ReopenError> {
        let fresh = self
            .decide(&target.host, target.port)
            .await
            .map_err(ReopenError::Refused)?;
        let (tcp, addr) = self.connect(&fresh).await.map_err(ReopenError::Connect)?;
        event.addr = Some(addr);
        self.upstream_tls(&fresh, tcp).await.map_err(ReopenError::Tls)
    }
}

/// Whether a request inside a brokered tunnel may carry the credential; the reason if not.
fn check_request(req: &Request<Incoming>, target: &Target) -> Result<(), Unbrokerable> {
    if req.method() == Method::CONNECT {
        return Err(Unbrokerable::Connect);
    }
    if !matches!(req.version(), Version::HTTP_11 | Version::HTTP_10) {
        return Err(Unbrokerable::NotHttp1);
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
        return Err(Unbrokerable::Upgrade);
    }
    if let Some(scheme) = req.uri().scheme_str()
        && scheme != "https"
    {
        return Err(Unbrokerable::Scheme(scheme.to_string()));
    }
    if let Some(a) = req.uri().authority()
        && !target.is_authority(a.as_str(), 443)
    {
        return Err(Unbrokerable::Authority(a.to_string()));
    }
    let mut hosts = req.headers().get_all(header::HOST).iter();
    match (hosts.next(), hosts.next()) {
        (Some(_), Some(_)) => return Err(Unbrokerable::TwoHosts),
        (Some(h), None) => {
            let text = h.to_str().unwrap_or("");
            if !target.is_authority(text, 443) {
                return Err(Unbrokerable::Host(text.to_string()));
            }
        }
        (None, _) => {}
    }
    Ok(())
}
