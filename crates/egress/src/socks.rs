//! SOCKS5 (RFC 1928), `CONNECT` only, no authentication; names are resolved by the proxy
//! (ATYP 3, what `curl --socks5-hostname` sends) so the allowlist judges names, not addresses.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::decide::Expect;
use crate::event::{Event, Outcome, Protocol, Refusal};
use crate::proxy::Proxy;

// Reply codes (RFC 1928 section 6).
const SUCCEEDED: u8 = 0x00;
const GENERAL_FAILURE: u8 = 0x01;
const NOT_ALLOWED: u8 = 0x02;
const HOST_UNREACHABLE: u8 = 0x04;
const CONNECTION_REFUSED: u8 = 0x05;
const COMMAND_NOT_SUPPORTED: u8 = 0x07;
const ATYP_NOT_SUPPORTED: u8 = 0x08;

/// The reply code for a refusal.
pub(crate) fn reply_code(r: &Refusal) -> u8 {
    match r {
        Refusal::Unresolved(_) => HOST_UNREACHABLE,
        Refusal::BadRequest(_) => GENERAL_FAILURE,
        _ => NOT_ALLOWED,
    }
}

enum Request {
    Connect { host: String, port: u16 },
    Fail(u8),
}

/// Serve one SOCKS5 client whose version byte (5) was already read.
pub(crate) async fn serve<S>(proxy: Arc<Proxy>, id: u64, mut stream: S)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let timeout = proxy_limits(&proxy);
    let req = match tokio::time::timeout(timeout, handshake(&mut stream)).await {
        Ok(Ok(Some(req))) => req,
        _ => return, // slow, closed or not SOCKS5 without auth: nothing was decided
    };
    let (host, port) = match req {
        Request::Connect { host, port } => (host, port),
        Request::Fail(code) => {
            let _ = reply(&mut stream, code).await;
            return;
        }
    };
    let mut event = Event {
        connection: id,
        protocol: Protocol::Socks5,
        host: host.to_ascii_lowercase(),
        port,
        addr: None,
        outcome: Outcome::Allowed,
        bytes_up: 0,
        bytes_down: 0,
        credential: None,
    };
    let target = match proxy.decide(&host, port).await {
        Ok(t) => t,
        Err(r) => {
            let _ = reply(&mut stream, reply_code(&r)).await;
            event.outcome = Outcome::Refused(r);
            proxy.emit(event);
            return;
        }
    };
    event.host = target.host.clone();
    let (upstream, addr) = match proxy.connect(&target).await {
        Ok(c) => c,
        Err(e) => {
            let _ = reply(&mut stream, CONNECTION_REFUSED).await;
            event.outcome = Outcome::Failed(e.to_string());
            proxy.emit(event);
            return;
        }
    };
    event.addr = Some(addr);
    if let Some(ep) = proxy.endpoint_for(&target) {
        // A credential endpoint: the same terminating path as CONNECT (verified upstream TLS
        // before success; then the ClientHello, the per-run CA, request checks).
        let upstream = match proxy.upstream_tls(&target, upstream).await {
            Ok(u) => u,
            Err(why) => {
                let _ = reply(&mut stream, GENERAL_FAILURE).await;
                event.outcome = Outcome::Failed(why.to_string());
                proxy.emit(event);
                return;
            }
        };
        if reply(&mut stream, SUCCEEDED).await.is_err() {
            return;
        }
        return proxy
            .serve_brokered(stream, ep, target, upstream, event)
            .await;
    }
    if reply(&mut stream, SUCCEEDED).await.is_err() {
        return;
    }
    let expect = Expect::TlsIfAny {
        host: target.host.clone(),
        ip_literal: target.ip_literal,
    };
    proxy.tunnel(stream, upstream, expect, event).await;
}

fn proxy_limits(proxy: &Proxy) -> std::time::Duration {
    proxy.handshake_timeout()
}

/// Method negotiation and the request. `None`: give up without a reply.
async fn handshake<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
) -> std::io::Result<Option<Request>> {
    let n = s.read_u8().await? as usize;
    let mut methods = [0u8; 255];
    s.read_exact(&mut methods[..n]).await?;
    if !methods[..n].contains(&0) {
        s.write_all(&[5, 0xff]).await?; // no acceptable method
        return Ok(None);
    }
    s.write_all(&[5, 0]).await?;
    let mut head = [0u8; 4];
    s.read_exact(&mut head).await?;
    let [ver, cmd, _rsv, atyp] = head;
    if ver != 5 {
        return Ok(None);
    }
    let host = match atyp {
        1 => {
            let mut b = [0u8; 4];
            s.read_exact(&mut b).await?;
            IpAddr::V4(Ipv4Addr::from(b)).to_string()
        }
        3 => {
            let len = s.read_u8().await? as usize;
            let mut b = vec![0u8; len];
            s.read_exact(&mut b).await?;
            match String::from_utf8(b) {
                Ok(name) => name,
                Err(_) => return Ok(Some(Request::Fail(GENERAL_FAILURE))),
            }
        }
        4 => {
            let mut b = [0u8; 16];
            s.read_exact(&mut b).await?;
            IpAddr::V6(Ipv6Addr::from(b)).to_canonical().to_string()
        }
        _ => return Ok(Some(Request::Fail(ATYP_NOT_SUPPORTED))),
    };
    let port = s.read_u16().await?;
    if cmd != 1 {
        return Ok(Some(Request::Fail(COMMAND_NOT_SUPPORTED)));
    }
    Ok(Some(Request::Connect { host, port }))
}

/// A reply with an unspecified bound address (clients do not need it for CONNECT).
async fn reply<S: AsyncWrite + Unpin>(s: &mut S, code: u8) -> std::io::Result<()> {
    s.write_all(&[5, code, 0, 1, 0, 0, 0, 0, 0, 0]).await?;
    s.flush().await
}
