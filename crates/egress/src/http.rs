//! HTTP/1.1 pieces the forwarding and brokered handlers share: the response body type, the
//! refusal response, hop-by-hop header removal, and the client connection to an upstream whose
//! event is sent when it ends.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};

use crate::event::{Event, Outcome, PendingEvent};
use crate::proxy::Proxy;
use crate::stream::Counted;

impl Proxy {
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

pub(crate) type Body = BoxBody<Bytes, Box<dyn std::error::Error + Send + Sync>>;

pub(crate) fn empty() -> Body {
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
}
