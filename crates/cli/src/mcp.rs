//! `pinfold mcp`: MCP over stdio, for MCP clients that start their servers as child processes
//! (Claude Code's `mcpServers`). A thin client of a running `pinfold serve`: each JSON-RPC
//! message read from standard input (one per line) is POSTed to the server's `/mcp` with the
//! token, and each message that comes back (a JSON answer, or the events of a server-sent
//! stream) is written to standard output, one per line. Nothing is judged, run or recorded
//! here: the server has the one approval inbox and the one ledger writer.
//!
//! Requests are forwarded concurrently (a long exec does not hold up a ping), except
//! `initialize`, which is answered before the next line is read: its answer gives the
//! protocol version (sent back as `MCP-Protocol-Version`) and maybe a session id
//! (`Mcp-Session-Id`), which later requests carry.

use std::io::{BufRead, Write};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use clap::Args;
use pinfold_plan::Error;
use pinfold_server::client::{sse_data, Client};
use serde_json::{json, Value};

use crate::exit;

#[derive(Debug, Args)]
pub struct McpArgs {}

/// The longest a request may take: an exec runs up to the server's --max-timeout.
const TIMEOUT: Duration = Duration::from_secs(3600);

/// JSON-RPC's code for an implementation-defined server error: the server could not be
/// reached, or answered with something that is not MCP (401, 429...).
const SERVER_ERROR: i64 = -32000;

#[derive(Debug)]
struct Link {
    client: Client,
    session: Mutex<Option<String>>,
    version: Mutex<Option<String>>,
    out: Mutex<std::io::Stdout>,
}

pub fn run(_args: McpArgs) -> Result<i32, Error> {
    let server = std::env::var("PINFOLD_SERVER").unwrap_or_else(|_| "http://127.0.0.1:7878".into());
    let token = std::env::var("PINFOLD_TOKEN").map_err(|_| Error::new("PINFOLD_TOKEN is not set").hint("an agent token from `pinfold serve token add NAME --role agent`"))?;
    let link = Arc::new(Link {
        client: Client::new(&server, &token).map_err(Error::new)?,
        session: Mutex::new(None),
        version: Mutex::new(None),
        out: Mutex::new(std::io::stdout()),
    });
    let mut running: Vec<JoinHandle<()>> = Vec::new();
    for line in std::io::stdin().lock().lines() {
        let line = line.map_err(|e| Error::new("cannot read standard input").cause(e))?;
        if line.trim().is_empty() {
            continue;
        }
        let msg: Value = match serde_json::from_str(&line) {
            Ok(v) => v,
            Err(e) => {
                link.write(&json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": format!("not JSON: {e}")}}));
                continue;
            }
        };
        if msg["method"] == "initialize" {
            link.forward(&line, &msg);
        } else {
            running.retain(|h| !h.is_finished());
            let link = link.clone();
            running.push(std::thread::spawn(move || link.forward(&line, &msg)));
        }
    }
    for h in running {
        let _ = h.join();
    }
    Ok(exit::OK)
}

impl Link {
    fn forward(&self, line: &str, msg: &Value) {
        let session = self.session.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let version = self.version.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let mut headers = vec![("Content-Type", "application/json"), ("Accept", "application/json, text/event-stream")];
        if let Some(s) = &session {
            headers.push(("Mcp-Session-Id", s.as_str()));
        }
        if let Some(v) = &version {
            headers.push(("MCP-Protocol-Version", v.as_str()));
        }
        let reply = match self.client.send("POST", "/mcp", &headers, line.as_bytes(), TIMEOUT) {
            Ok(r) => r,
            Err(e) => return self.fail(msg, &e, None),
        };
        if let Some(s) = reply.header("mcp-session-id") {
            *self.session.lock().unwrap_or_else(|p| p.into_inner()) = Some(s.to_string());
        }
        let content_type = reply.header("content-type").unwrap_or("").to_ascii_lowercase();
        let messages: Vec<Value> = if content_type.starts_with("text/event-stream") {
            sse_data(&reply.body).iter().filter_map(|d| serde_json::from_str(d).ok()).collect()
        } else if content_type.starts_with("application/json") {
            serde_json::from_slice(&reply.body).into_iter().collect()
        } else {
            Vec::new()
        };
        let is_rpc = |v: &Value| v.get("jsonrpc").is_some() || v.is_array();
        if messages.iter().any(is_rpc) {
            for m in messages.iter().filter(|m| is_rpc(m)) {
                if msg["method"] == "initialize"
                    && let Some(v) = m["result"]["protocolVersion"].as_str()
                {
                    *self.version.lock().unwrap_or_else(|p| p.into_inner()) = Some(v.to_string());
                }
                self.write(m);
            }
        } else if reply.status >= 300 {
            // Not MCP: the server's own error (`{"error": {"code", "message"}}`) or a plain one.
            let v = messages.first();
            let why = match v.and_then(|v| v["error"]["message"].as_str()) {
                Some(m) => format!("{} {}: {m}", reply.status, v.and_then(|v| v["error"]["code"].as_str()).unwrap_or("error")),
                None => format!("{} {}", reply.status, String::from_utf8_lossy(&reply.body).trim()),
            };
            self.fail(msg, &format!("the server refused: {why}"), Some(reply.status));
        }
    }

    /// A request's error answer made here (a notification gets none: it is said on stderr).
    fn fail(&self, msg: &Value, why: &str, status: Option<u16>) {
        let _ = writeln!(std::io::stderr(), "pinfold mcp: {why}");
        if let Some(id) = msg.get("id").filter(|_| msg.get("method").is_some()) {
            self.write(&json!({"jsonrpc": "2.0", "id": id, "error": {"code": SERVER_ERROR, "message": format!("pinfold mcp: {why}"), "data": {"http_status": status}}}));
        }
    }

    fn write(&self, v: &Value) {
        let mut out = self.out.lock().unwrap_or_else(|p| p.into_inner());
        let _ = writeln!(out, "{v}");
        let _ = out.flush();
    }
}
