//! The server's own defences, before any handler runs: the Host header (DNS rebinding), the
//! Origin of state-changing requests (cross-site requests from a browser), a rate limit per
//! client address (and per token, in the token check), body and header limits, connection
//! timeouts, and security headers on every response.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use tower::ServiceExt;

use crate::api;
use crate::db::{Actor, Sandbox};
use crate::error::ApiError;
use crate::govern::Action;
use crate::run::Chunk;
use crate::App;

/// The peer's address, put on each request by the accept loop.
#[derive(Clone, Copy, Debug)]
pub struct Peer(pub SocketAddr);

/// Token buckets keyed by client address or token hash: `rate` requests a second, bursts of
/// `rate`. At most [`Limiter::MAX_KEYS`] keys are held: full (idle) buckets are dropped first,
/// and when every bucket is busy a new key is refused, so memory stays bounded under a flood
/// of distinct keys.
#[derive(Debug)]
pub struct Limiter {
    rate: f64,
    buckets: Mutex<HashMap<String, (f64, Instant)>>,
}

impl Limiter {
    pub const MAX_KEYS: usize = 10_000;

    pub fn new(rate: u32) -> Limiter {
        Limiter { rate: rate.max(1) as f64, buckets: Mutex::new(HashMap::new()) }
    }

    pub fn allow(&self, key: &str) -> bool {
        let now = Instant::now();
        let mut b = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        if !b.contains_key(key) && b.len() >= Self::MAX_KEYS {
            let rate = self.rate;
            b.retain(|_, (tokens, at)| *tokens + now.duration_since(*at).as_secs_f64() * rate < rate);
            if b.len() >= Self::MAX_KEYS {
                return false;
            }
        }
        let (tokens, at) = b.entry(key.to_string()).or_insert((self.rate, now));
        *tokens = (*tokens + now.duration_since(*at).as_secs_f64() * self.rate).min(self.rate);
        *at = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// The Host values this server answers for: its address, and the loopback names with its port,
/// and any the operator added.
pub fn hosts_for(local: SocketAddr, extra: &[String]) -> Vec<String> {
    let port = local.port();
    let mut v = vec![local.to_string(), format!("localhost:{port}"), format!("127.0.0.1:{port}"), format!("[::1]:{port}")];
    v.extend(extra.iter().map(|h| if h.contains(':') && !h.starts_with('[') || h.ends_with(']') || h.contains("]:") { h.clone() } else { format!("{h}:{port}") }));
    v.dedup();
    v
}

fn state_changing(m: &Method) -> bool {
    !matches!(*m, Method::GET | Method::HEAD | Method::OPTIONS)
}

pub async fn checks(State(app): State<App>, req: Request, next: Next) -> Response {
    let peer = req.extensions().get::<Peer>().map(|p| p.0.ip());
    if let Err(e) = precheck(&app, &req, peer) {
        return secure(e.into_response());
    }
    secure(next.run(req).await)
}

fn precheck(app: &App, req: &Request, peer: Option<IpAddr>) -> Result<(), ApiError> {
    // DNS rebinding: a page on evil.example that resolves to 127.0.0.1 sends its own name.
    // Exactly one Host header, and a request line in absolute form (`GET http://h/…`) must
    // name an allowed host too.
    if req.headers().get_all("host").iter().count() != 1 {
        return Err(ApiError::BadHost);
    }
    let host = req.headers().get("host").and_then(|h| h.to_str().ok()).map(|h| h.to_ascii_lowercase());
    let hosts = app.hosts.lock().unwrap_or_else(|p| p.into_inner()).clone();
    match &host {
        Some(h) if hosts.iter().any(|a| a == h) => {}
        _ => return Err(ApiError::BadHost),
    }
    if let Some(a) = req.uri().authority()
        && !hosts.iter().any(|h| h.eq_ignore_ascii_case(a.as_str()))
    {
        return Err(ApiError::BadHost);
    }
    // A request with credentials is limited per token (or session) once they are checked, and
    // per address only if they fail (api.rs): every local client shares 127.0.0.1, so a flood
    // without a token must not use up the bucket of those that hold one. Requests without
    // credentials are limited per address here.
    let credentialed = req.headers().contains_key("authorization") || crate::dashboard::session_cookie(req.headers()).is_some();
    if !credentialed
        && let Some(ip) = peer
        && !app.limiter.allow(&format!("ip:{ip}"))
    {
        return Err(ApiError::RateLimited);
    }
    if state_changing(req.method()) {
        // A browser names the page's origin on every cross-origin write; only our own may write.
        if let Some(o) = req.headers().get("origin") {
            let o = o.to_str().unwrap_or("");
            let own = host.as_deref().map(|h| format!("http://{h}"));
            if own.as_deref() != Some(o) {
                return Err(ApiError::BadOrigin);
            }
        }
        if req.headers().get("sec-fetch-site").and_then(|v| v.to_str().ok()).is_some_and(|s| s == "cross-site" || s == "same-site") {
            return Err(ApiError::BadOrigin);
        }
    }
    if let Some(len) = req.headers().get("content-length").and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok()) {
        let limit = if req.uri().path().ends_with("/files") { app.opts.max_file } else { app.opts.max_body };
        if len > limit as u64 {
            return Err(ApiError::TooLarge(limit));
        }
    }
    Ok(())
}

/// Headers every response carries: no sniffing, no framing, no referrer, no caching of
/// answers that may hold output.
fn secure(mut r: Response) -> Response {
    let h = r.headers_mut();
    h.insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    h.insert("x-frame-options", HeaderValue::from_static("DENY"));
    h.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
    h.insert("cache-control", HeaderValue::from_static("no-store"));
    h.insert("cross-origin-resource-policy", HeaderValue::from_static("same-origin"));
    if !h.contains_key("content-security-policy") {
        h.insert("content-security-policy", HeaderValue::from_static("default-src 'none'; frame-ancestors 'none'"));
    }
    r
}

/// How long a client may take to send a request's headers, and how long an idle keep-alive
/// connection is kept.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// Most connections served at once; more wait in the kernel's backlog.
pub const MAX_CONNECTIONS: usize = 1024;

pub async fn accept_loop(listener: tokio::net::TcpListener, app: App) -> Result<(), String> {
    let router = api::router(app.clone());
    let slots = std::sync::Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).map_err(|e| e.to_string())?;
    loop {
        let permit = tokio::select! {
            p = slots.clone().acquire_owned() => p.map_err(|e| e.to_string())?,
            _ = term.recv() => break,
            _ = tokio::signal::ctrl_c() => break,
        };
        let (stream, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    crate::log(&format!("accept: {e}"));
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = term.recv() => break,
            _ = tokio::signal::ctrl_c() => break,
        };
        let _ = stream.set_nodelay(true);
        let router = router.clone();
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |mut req: hyper::Request<hyper::body::Incoming>| {
                req.extensions_mut().insert(Peer(peer));
                router.clone().oneshot(req.map(Body::new))
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .max_buf_size(64 * 1024)
                .serve_connection(TokioIo::new(stream), svc);
            let _ = conn.await;
            drop(permit);
        });
    }
    // Stopping: what runs is told to stop (each pinfold exec records its end).
    let ids: Vec<String> = app.running.lock().unwrap_or_else(|p| p.into_inner()).keys().cloned().collect();
    for id in ids {
        app.kill_sandbox(&id);
    }
    Ok(())
}

/// `Accept: text/event-stream`: `stdout` and `stderr` events as output comes (data: JSON
/// `{"data": TEXT}`), then one `result`, `approval` or `error` event with the same body the
/// JSON answer would have.
pub async fn stream_exec(app: App, actor: Actor, sb: Sandbox, action: Action) -> Response {
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Chunk>(256);
    let (out_tx, out_rx) = tokio::sync::mpsc::channel::<Result<bytes::Bytes, std::convert::Infallible>>(256);
    tokio::spawn(async move {
        let app2 = app.clone();
        let done = tokio::spawn(async move { api::exec_stream_result(&app2, &actor, &sb, action, tx).await });
        while let Some(c) = rx.recv().await {
            let (name, data) = match c {
                Chunk::Stdout(b) => ("stdout", b),
                Chunk::Stderr(b) => ("stderr", b),
            };
            let ev = sse(name, &serde_json::json!({"data": String::from_utf8_lossy(&data)}));
            if out_tx.send(Ok(ev)).await.is_err() {
                break;
            }
        }
        let (name, body) = done.await.unwrap_or_else(|_| ("error".into(), ApiError::internal("the run's task failed").body()));
        let _ = out_tx.send(Ok(sse(&name, &body))).await;
    });
    let stream = futures_util::stream::unfold(out_rx, |mut rx| async move { rx.recv().await.map(|x| (x, rx)) });
    let mut r = Response::new(Body::from_stream(stream));
    r.headers_mut().insert("content-type", HeaderValue::from_static("text/event-stream"));
    r
}

fn sse(event: &str, data: &serde_json::Value) -> bytes::Bytes {
    bytes::Bytes::from(format!("event: {event}\ndata: {data}\n\n"))
}
