//! A small blocking HTTP/1.1 client for the thin clients of a running server (`pinfold
//! approvals`, `pinfold mcp`): `http://HOST:PORT` only, since the server listens on loopback.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct Client {
    host: String,
    token: String,
}

#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    /// The headers, names in lower case, in the order sent.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn json(&self) -> Result<serde_json::Value, String> {
        serde_json::from_slice(&self.body).map_err(|e| format!("the server's answer is not JSON ({e})"))
    }

    /// The first header named `name` (lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
}

/// The `data` of each event in a server-sent-events body (lines joined by newlines; events
/// without data, such as a retry hint, left out).
pub fn sse_data(body: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(body).replace("\r\n", "\n").replace('\r', "\n");
    let mut out = Vec::new();
    for event in text.split("\n\n") {
        let data: Vec<&str> = event.lines().filter_map(|l| l.strip_prefix("data:")).map(|d| d.strip_prefix(' ').unwrap_or(d)).collect();
        if !data.is_empty() && data.iter().any(|d| !d.is_empty()) {
            out.push(data.join("\n"));
        }
    }
    out
}

impl Client {
    /// `server`: `http://HOST:PORT` (a trailing slash is fine).
    pub fn new(server: &str, token: &str) -> Result<Client, String> {
        let rest = server.strip_prefix("http://").ok_or_else(|| format!("PINFOLD_SERVER `{server}` is not an http:// address"))?;
        let host = rest.trim_end_matches('/');
        if host.is_empty() || host.contains('/') {
            return Err(format!("PINFOLD_SERVER `{server}` is not http://HOST:PORT"));
        }
        if token.is_empty() || token.contains(['\r', '\n']) {
            return Err("PINFOLD_TOKEN is empty or malformed".into());
        }
        Ok(Client { host: host.to_string(), token: token.to_string() })
    }

    pub fn request(&self, method: &str, path: &str, body: Option<&serde_json::Value>, timeout: Duration) -> Result<Reply, String> {
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        self.send(method, path, &[("Content-Type", "application/json")], body.as_bytes(), timeout)
    }

    /// A request with these headers besides Host, Authorization, Content-Length and
    /// Connection; the whole answer is read (the server closes the connection after it).
    pub fn send(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8], timeout: Duration) -> Result<Reply, String> {
        let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\n", self.host, self.token);
        for (k, v) in headers {
            if k.contains(['\r', '\n', ':']) || v.contains(['\r', '\n']) {
                return Err(format!("a malformed {k} header"));
            }
            head += &format!("{k}: {v}\r\n");
        }
        head += &format!("Content-Length: {}\r\nConnection: close\r\n\r\n", body.len());
        let mut s = TcpStream::connect(&self.host).map_err(|e| format!("cannot reach the server at http://{}: {e}", self.host))?;
        let _ = s.set_read_timeout(Some(timeout));
        s.write_all(head.as_bytes()).and_then(|()| s.write_all(body)).map_err(|e| format!("cannot send to the server: {e}"))?;
        let mut raw = Vec::new();
        s.read_to_end(&mut raw).map_err(|e| format!("cannot read the server's answer: {e}"))?;
        parse(&raw)
    }
}

fn parse(raw: &[u8]) -> Result<Reply, String> {
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n").ok_or("the server's answer has no header end")?;
    let head = std::str::from_utf8(&raw[..end]).map_err(|_| "the server's answer headers are not text")?;
    let mut lines = head.split("\r\n");
    let status: u16 = lines.next().and_then(|l| l.split(' ').nth(1)).and_then(|s| s.parse().ok()).ok_or("the server's status line is malformed")?;
    let headers: Vec<(String, String)> = lines.filter_map(|l| l.split_once(':')).map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string())).collect();
    let chunked = headers.iter().any(|(k, v)| k == "transfer-encoding" && v.to_ascii_lowercase().contains("chunked"));
    let mut body = raw[end + 4..].to_vec();
    if chunked {
        body = dechunk(&body)?;
    }
    Ok(Reply { status, headers, body })
}

fn dechunk(mut b: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    loop {
        let nl = b.windows(2).position(|w| w == b"\r\n").ok_or("a malformed chunk")?;
        let size = usize::from_str_radix(std::str::from_utf8(&b[..nl]).map_err(|_| "a malformed chunk")?.split(';').next().unwrap_or("").trim(), 16)
            .map_err(|_| "a malformed chunk size")?;
        b = &b[nl + 2..];
        if size == 0 {
            return Ok(out);
        }
        if b.len() < size + 2 {
            return Err("a truncated chunk".into());
        }
        out.extend_from_slice(&b[..size]);
        b = &b[size + 2..];
    }
}
