//! The answer to each HTTP proxy request: a `CONNECT` tunnel (relayed after the ClientHello
//! is checked, or brokered for a credential endpoint) and an absolute-form `http://` request
//! forwarded upstream.

use std::sync::Arc;

use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use crate::decide::{Expect, Target};
use crate::event::{Event, Outcome, Protocol, Refusal};
use crate::http::{Body, empty, refuse, send_upstream, strip_hop_by_hop};
use crate::proxy::Proxy;

impl Proxy {
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
                event.outcome = Outcome::Failed(e.to_string());
                self.emit(event);
                Err(resp)
            }
        }
    }

    pub(crate) async fn handle(self: Arc<Self>, id: u64, req: Request<Incoming>) -> Response<Body> {
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
                    let why = why.to_string();
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
