//! MCP on `pinfold serve`, end to end: a real server on loopback, MCP's streamable HTTP at
//! `/mcp` written by hand (so a test sends exactly the headers it means), and `pinfold mcp`
//! over stdio as a child process. Each case checks the host afterwards, not only the answers.

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::process::{ChildStdin, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{json, Value};

use crate::serve::{fixture, wait_for, Reply, Server};
use crate::support::{pinfold_bin, User};

const PROTOCOL: &str = "2025-06-18";

/// One MCP message POSTed to /mcp with `token` (none: no Authorization header).
fn post(s: &Server, token: Option<&str>, msg: &Value) -> Reply {
    let auth = token.map(|t| format!("Bearer {t}"));
    let mut h = vec![("Content-Type", "application/json"), ("Accept", "application/json, text/event-stream"), ("MCP-Protocol-Version", PROTOCOL)];
    if let Some(a) = &auth {
        h.push(("Authorization", a.as_str()));
    }
    s.raw("POST", "/mcp", &h, msg.to_string().as_bytes())
}

/// The JSON-RPC answer in a reply: the JSON body, or the last `data:` of an event stream.
fn answer(r: &Reply) -> Value {
    assert_eq!(r.status, 200, "{}", r.text());
    let ct = r.headers.get("content-type").cloned().unwrap_or_default();
    if ct.starts_with("text/event-stream") {
        let t = r.text();
        let last = t.lines().filter_map(|l| l.strip_prefix("data:")).map(str::trim).filter(|d| !d.is_empty()).last().unwrap_or_else(|| panic!("no event: {t}"));
        serde_json::from_str(last).unwrap()
    } else {
        r.json()
    }
}

fn rpc(s: &Server, token: &str, method: &str, params: Value) -> Value {
    answer(&post(s, Some(token), &json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params})))
}

/// A tool call's JSON-RPC answer (`result` or `error`).
fn call(s: &Server, token: &str, tool: &str, args: Value) -> Value {
    rpc(s, token, "tools/call", json!({"name": tool, "arguments": args}))
}

/// A tool call that gave a result: its structured content and isError.
fn result(s: &Server, token: &str, tool: &str, args: Value) -> (Value, bool) {
    let v = call(s, token, tool, args);
    let r = &v["result"];
    assert!(r.is_object(), "{tool}: {v}");
    // The same JSON as text, for clients that read no structured content.
    let text: Value = serde_json::from_str(r["content"][0]["text"].as_str().unwrap_or_else(|| panic!("{v}"))).unwrap();
    assert_eq!(text, r["structuredContent"], "{v}");
    (r["structuredContent"].clone(), r["isError"] == true)
}

/// A tool call that failed as JSON-RPC: (error code, data.code, message).
fn error(s: &Server, token: &str, tool: &str, args: Value) -> (i64, String, String) {
    let v = call(s, token, tool, args);
    let e = &v["error"];
    assert!(e.is_object(), "{tool}: expected an error: {v}");
    (e["code"].as_i64().unwrap(), e["data"]["code"].as_str().unwrap_or("").to_string(), e["message"].as_str().unwrap_or("").to_string())
}

fn new_sandbox(s: &Server, token: &str) -> String {
    let (v, is_error) = result(s, token, "create_sandbox", json!({"ttl_s": 600}));
    assert!(!is_error && v["status"] == "ok", "{v}");
    assert_eq!(v["sandbox"]["owner"], "agent-a");
    v["sandbox"]["id"].as_str().unwrap().to_string()
}

// --- the endpoint ---

fn initialize_and_list_the_tools(u: User) {
    let fx = fixture(u, "mcp-list");
    let s = Server::start(&fx, &[]);
    let init = rpc(&s, &s.agent, "initialize", json!({"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}}));
    let r = &init["result"];
    assert_eq!((r["protocolVersion"].clone(), r["serverInfo"]["name"].clone()), (json!(PROTOCOL), json!("pinfold")), "{init}");
    assert!(r["capabilities"]["tools"].is_object(), "{init}");
    assert!(r["instructions"].as_str().unwrap().contains("approval_status"), "{init}");
    // The notification that follows: accepted, no answer.
    let n = post(&s, Some(&s.agent), &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    assert_eq!(n.status, 202, "{}", n.text());
    let list = rpc(&s, &s.agent, "tools/list", json!({}));
    let tools = list["result"]["tools"].as_array().unwrap_or_else(|| panic!("{list}"));
    let mut names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    names.sort();
    assert_eq!(names, ["approval_status", "create_sandbox", "exec", "list_dir", "read_file", "write_file"]);
    for t in tools {
        let (i, o) = (&t["inputSchema"], &t["outputSchema"]);
        assert_eq!((i["type"].clone(), o["type"].clone()), (json!("object"), json!("object")), "{t}");
        assert_eq!(i["additionalProperties"], false, "{t}");
        assert!(o["properties"]["status"]["enum"].as_array().unwrap().contains(&json!("ok")), "{t}");
        assert!(t["description"].as_str().is_some_and(|d| d.len() > 20), "{t}");
    }
    let get = |n: &str| tools.iter().find(|t| t["name"] == n).unwrap();
    let exec = get("exec");
    for p in ["sandbox", "command", "argv", "stdin", "timeout_s"] {
        assert!(exec["inputSchema"]["properties"][p].is_object(), "exec has no {p}: {exec}");
    }
    assert_eq!(exec["inputSchema"]["required"], json!(["sandbox"]));
    assert_eq!(exec["outputSchema"]["properties"]["status"]["enum"], json!(["ok", "denied", "approval_required"]));
    for p in ["exit_code", "stdout", "stderr", "reason", "approval"] {
        assert!(exec["outputSchema"]["properties"][p].is_object(), "exec's output has no {p}");
    }
    assert_eq!(get("read_file")["inputSchema"]["required"], json!(["sandbox", "path"]));
    assert!(get("write_file")["inputSchema"]["properties"]["content_base64"].is_object());
    assert_eq!(get("approval_status")["inputSchema"]["required"], json!(["id"]));
    assert!(get("approval_status")["outputSchema"]["properties"]["approval"]["properties"]["result"].is_object());
    // An unknown tool.
    let (code, _, msg) = error(&s, &s.agent, "rm_rf", json!({}));
    assert_eq!(code, -32602, "{msg}");
}

fn the_endpoint_is_behind_the_token_and_the_guard(u: User) {
    let fx = fixture(u, "mcp-auth");
    let s = Server::start(&fx, &[]);
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    // No token, a wrong one: the REST API's 401, before MCP reads anything.
    for token in [None, Some("pft_0000")] {
        let r = post(&s, token, &list);
        assert_eq!((r.status, r.code()), (401, "unauthorized".to_string()), "{}", r.text());
        assert_eq!(r.headers.get("www-authenticate").map(String::as_str), Some("Bearer"));
    }
    // A wrong scheme, and the dashboard's cookie, are not a bearer token.
    let r = s.raw("POST", "/mcp", &[("Authorization", &format!("Basic {}", s.agent)), ("Content-Type", "application/json"), ("Accept", "application/json, text/event-stream")], list.to_string().as_bytes());
    assert_eq!(r.status, 401, "{}", r.text());
    let r = s.raw("POST", "/mcp", &[("Cookie", "pinfold_session=x"), ("Content-Type", "application/json"), ("Accept", "application/json, text/event-stream")], list.to_string().as_bytes());
    assert_eq!(r.status, 401, "{}", r.text());
    // The guard: a rebinding Host, another site's Origin.
    let auth = format!("Bearer {}", s.agent);
    let h = |extra: (&'static str, &'static str)| vec![("Authorization", auth.clone()), ("Content-Type", "application/json".into()), ("Accept", "application/json, text/event-stream".into()), (extra.0, extra.1.to_string())];
    for (extra, code) in [(("Host", "evil.example:80"), "bad_host"), (("Origin", "http://evil.example"), "bad_origin")] {
        let headers = h(extra);
        let hv: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let r = s.raw("POST", "/mcp", &hv, list.to_string().as_bytes());
        assert_eq!((r.status, r.code()), (403, code.to_string()), "{}", r.text());
    }
    // No sessions: GET (a standalone event stream) is not offered.
    let r = s.raw("GET", "/mcp", &[("Authorization", &auth), ("Accept", "text/event-stream")], b"");
    assert_eq!(r.status, 405, "{}", r.text());
    // A token's tool calls are its own: another agent's sandbox is not found, and nothing runs.
    let sb = new_sandbox(&s, &s.agent);
    let ws = s.workspace(&sb);
    let (code, data, _) = error(&s, &s.agent2, "exec", json!({"sandbox": sb, "command": "touch other"}));
    assert_eq!((code, data.as_str()), (-32602, "not_found"));
    let (code, data, _) = error(&s, &s.agent2, "write_file", json!({"sandbox": sb, "path": "other", "content": "x"}));
    assert_eq!((code, data.as_str()), (-32602, "not_found"));
    std::thread::sleep(Duration::from_millis(200));
    assert!(!ws.join("other").exists());
    // The sandbox made over MCP is the REST API's too.
    let r = s.call(&s.agent, "GET", "/v1/sandboxes", None);
    assert_eq!(r.json()["sandboxes"][0]["id"], json!(sb), "{}", r.text());
}

// --- exec ---

fn exec_runs_denies_and_asks(u: User) {
    let fx = fixture(u, "mcp-exec");
    let s = Server::start(&fx, &[]);
    let sb = new_sandbox(&s, &s.agent);
    let ws = s.workspace(&sb);
    // Allowed: it runs in the sandbox and its output comes back.
    let (v, is_error) = result(&s, &s.agent, "exec", json!({"sandbox": sb, "command": "echo out; echo err >&2; printf x > made; exit 3"}));
    assert!(!is_error, "{v}");
    assert_eq!((v["status"].clone(), v["exit_code"].clone(), v["stdout"].clone(), v["stderr"].clone(), v["verdict"].clone()), (json!("ok"), json!(3), json!("out\n"), json!("err\n"), json!("allow")), "{v}");
    assert_eq!(fs::read_to_string(ws.join("made")).unwrap(), "x");
    let (v, _) = result(&s, &s.agent, "exec", json!({"sandbox": sb, "argv": ["sh", "-c", "tr a-z A-Z; echo \"$0\"", "it's one word"], "stdin": "hello\n"}));
    assert_eq!(v["stdout"], "HELLO\nit's one word\n", "{v}");
    // Denied: a typed result the model can read, and nothing ran.
    for cmd in ["touch forbidden-1", "true && touch forbidden-2", "echo $(touch forbidden-3)"] {
        let (v, is_error) = result(&s, &s.agent, "exec", json!({"sandbox": sb, "command": cmd}));
        assert!(is_error, "{cmd}: {v}");
        assert_eq!(v["status"], "denied", "{cmd}: {v}");
        assert!(v["reason"].as_str().unwrap().contains("never"), "{v}");
    }
    let forbidden = || fs::read_dir(&ws).unwrap().filter_map(Result::ok).filter(|e| e.file_name().to_string_lossy().starts_with("forbidden")).count();
    assert_eq!(forbidden(), 0);
    // Malformed calls are JSON-RPC errors, with the REST API's code.
    for args in [json!({"sandbox": sb}), json!({"sandbox": sb, "command": "true", "argv": ["true"]}), json!({"sandbox": sb, "command": "true", "shell": "zsh"}), json!({"sandbox": sb, "command": "  "})] {
        let (code, data, msg) = error(&s, &s.agent, "exec", args.clone());
        assert_eq!((code, data.as_str()), (-32602, "bad_request"), "{args}: {msg}");
    }
    let (code, data, _) = error(&s, &s.agent, "exec", json!({"sandbox": "sb_nope", "command": "true"}));
    assert_eq!((code, data.as_str()), (-32602, "not_found"));
    // Asked: an approval, nothing run until a person approves it over REST.
    let (v, is_error) = result(&s, &s.agent, "exec", json!({"sandbox": sb, "command": "touch approved-1 && echo done"}));
    assert!(!is_error, "{v}");
    assert_eq!((v["status"].clone(), v["approval"]["status"].clone()), (json!("approval_required"), json!("pending")), "{v}");
    let id = v["approval"]["id"].as_str().unwrap().to_string();
    assert!(v["approval"]["url"].as_str().unwrap().ends_with(&id), "{v}");
    assert!(v["next"].as_str().unwrap().contains(&id), "{v}");
    let (v, _) = result(&s, &s.agent, "approval_status", json!({"id": id}));
    assert_eq!((v["status"].clone(), v["approval"]["status"].clone()), (json!("ok"), json!("pending")), "{v}");
    assert_eq!(v["approval"]["action"]["command"], "touch approved-1 && echo done");
    assert!(!ws.join("approved-1").exists(), "it ran before anyone approved");
    // Another agent does not see it; an agent cannot approve.
    let (code, data, _) = error(&s, &s.agent2, "approval_status", json!({"id": id}));
    assert_eq!((code, data.as_str()), (-32602, "not_found"));
    // A long poll over MCP that ends when the operator's decision has run.
    let v = std::thread::scope(|scope| {
        let poll = scope.spawn(|| result(&s, &s.agent, "approval_status", json!({"id": id, "wait_s": 30})).0);
        std::thread::sleep(Duration::from_millis(500));
        let r = s.call(&s.op, "POST", &format!("/v1/approvals/{id}/approve"), Some(json!({"reason": "fine"})));
        assert_eq!(r.status, 200, "{}", r.text());
        poll.join().unwrap()
    });
    let a = &v["approval"];
    assert_eq!((a["status"].clone(), a["decided_by"].clone(), a["result"]["stdout"].clone(), a["result"]["exit_code"].clone()), (json!("consumed"), json!("olga"), json!("done\n"), json!(0)), "{v}");
    assert!(ws.join("approved-1").exists());
    // The ledger names the MCP caller, as for REST.
    let l = s.call(&s.op, "GET", "/v1/ledger?limit=1000", None).json();
    let calls: Vec<&Value> = l["records"].as_array().unwrap().iter().filter(|r| r["kind"] == "serve_call").collect();
    assert!(calls.iter().any(|r| r["data"]["actor"] == "agent-a" && r["data"]["decision"] == "deny"), "{l}");
    assert_eq!(s.call(&s.op, "GET", "/v1/ledger/verify", None).json()["status"], "intact");
}

// --- files ---

fn files_round_trip_and_stay_beneath_the_workspace(u: User) {
    let fx = fixture(u, "mcp-files");
    let s = Server::start(&fx, &[]);
    let sb = new_sandbox(&s, &s.agent);
    let ws = s.workspace(&sb);
    let a = &s.agent;
    let (v, is_error) = result(&s, a, "write_file", json!({"sandbox": sb, "path": "deep/er/notes.txt", "content": "héllo\n"}));
    assert_eq!((v["status"].clone(), v["bytes"].clone(), is_error), (json!("ok"), json!(7), false), "{v}");
    assert_eq!(fs::read_to_string(ws.join("deep/er/notes.txt")).unwrap(), "héllo\n");
    let (v, _) = result(&s, a, "read_file", json!({"sandbox": sb, "path": "deep/er/notes.txt"}));
    assert_eq!((v["content"].clone(), v["size"].clone(), v.get("content_base64").is_none()), (json!("héllo\n"), json!(7), true), "{v}");
    // Bytes that are not text, both ways, as base64 (an absolute path inside is fine).
    let abs = format!("{}/bin.dat", ws.display());
    let (v, _) = result(&s, a, "write_file", json!({"sandbox": sb, "path": abs, "content_base64": "/wD+gA=="}));
    assert_eq!(v["bytes"], 4, "{v}");
    assert_eq!(fs::read(ws.join("bin.dat")).unwrap(), [0xff, 0, 0xfe, 0x80]);
    let (v, _) = result(&s, a, "read_file", json!({"sandbox": sb, "path": "bin.dat"}));
    assert_eq!((v["content_base64"].clone(), v.get("content").is_none()), (json!("/wD+gA=="), true), "{v}");
    let (v, _) = result(&s, a, "list_dir", json!({"sandbox": sb}));
    assert_eq!(v["entries"], json!([{"name": "bin.dat", "type": "file", "size": 4}, {"name": "deep", "type": "dir", "size": 0}]), "{v}");
    let (v, _) = result(&s, a, "list_dir", json!({"sandbox": sb, "path": "deep/er"}));
    assert_eq!(v["entries"], json!([{"name": "notes.txt", "type": "file", "size": 7}]), "{v}");
    let (code, data, _) = error(&s, a, "write_file", json!({"sandbox": sb, "path": "x", "content": "a", "content_base64": "YQ=="}));
    assert_eq!((code, data.as_str()), (-32602, "bad_request"));
    let (code, data, _) = error(&s, a, "read_file", json!({"sandbox": sb, "path": "missing"}));
    assert_eq!((code, data.as_str()), (-32602, "not_found"));
    // Paths that leave the workspace, by name or through links the sandbox made: refused, and
    // nothing outside is read or touched.
    let out = fx.out.display().to_string();
    fs::write(fx.out.join("victim"), "host\n").unwrap();
    fx.own();
    let (v, _) = result(&s, a, "exec", json!({"sandbox": sb, "command": format!("ln -s {out} out && ln -s {out}/victim v && ln -s .. up")}));
    assert_eq!(v["exit_code"], 0, "{v}");
    for p in ["../x", "a/../../x", &format!("{out}/victim"), "/etc/passwd", "out/victim", "v", "up/x", "out/new"] {
        for (tool, args) in [
            ("read_file", json!({"sandbox": sb, "path": p})),
            ("write_file", json!({"sandbox": sb, "path": p, "content": "pwned"})),
            ("list_dir", json!({"sandbox": sb, "path": p})),
        ] {
            let v = call(&s, a, tool, args);
            let e = &v["error"];
            assert_eq!(e["code"], -32602, "{tool} {p}: {v}");
            let code = e["data"]["code"].as_str().unwrap();
            // Only a name that stays inside may be merely missing.
            assert!(code == "bad_path" || (code == "not_found" && p == "out/new"), "{tool} {p}: {v}");
            assert!(!v.to_string().contains("root:"), "{tool} {p} read outside: {v}");
        }
    }
    assert_eq!(fs::read_to_string(fx.out.join("victim")).unwrap(), "host\n");
    assert_eq!(fs::read_dir(&fx.out).unwrap().count(), 1, "something was made outside");
    assert!(!ws.parent().unwrap().join("x").exists());
    // Protected paths: denied as a typed result, and nothing is written.
    for p in [".git/hooks/pre-commit", ".claude/settings.json", "pinfold.toml"] {
        let (v, is_error) = result(&s, a, "write_file", json!({"sandbox": sb, "path": p, "content": "#!/bin/sh\necho pwned\n"}));
        assert!(is_error && v["status"] == "denied", "{p}: {v}");
        assert!(v["reason"].as_str().is_some_and(|r| !r.is_empty()), "{v}");
        assert!(!ws.join(p).exists(), "{p} was written");
    }
}

// --- `pinfold mcp` over stdio ---

/// `pinfold mcp` talking to `s` with `token`: its stdin, and its stdout's lines.
struct McpChild {
    child: std::process::Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
}

impl McpChild {
    fn start(fx: &crate::support::sandbox::Fx, s: &Server, token: &str) -> McpChild {
        let argv = vec![pinfold_bin(), "mcp".to_string()];
        let mut c = fx.cmd(&argv);
        c.env("PINFOLD_SERVER", &s.url).env("PINFOLD_TOKEN", token).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::inherit());
        let mut child = c.spawn().expect("start pinfold mcp");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(l);
            }
        });
        McpChild { stdin: child.stdin.take(), child, lines }
    }

    fn send(&mut self, msg: Value) {
        let i = self.stdin.as_mut().unwrap();
        writeln!(i, "{msg}").unwrap();
        i.flush().unwrap();
    }

    fn next(&self) -> Value {
        let l = self.lines.recv_timeout(Duration::from_secs(60)).expect("a line from pinfold mcp");
        serde_json::from_str(&l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"))
    }
}

fn pinfold_mcp_over_stdio(u: User) {
    let fx = fixture(u, "mcp-stdio");
    let s = Server::start(&fx, &[]);
    let mut m = McpChild::start(&fx, &s, &s.agent);
    m.send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}}}));
    let v = m.next();
    assert_eq!((v["id"].clone(), v["result"]["protocolVersion"].clone(), v["result"]["serverInfo"]["name"].clone()), (json!(1), json!(PROTOCOL), json!("pinfold")), "{v}");
    // A notification gets no answer: the next line is the next request's.
    m.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    m.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    let v = m.next();
    assert_eq!((v["id"].clone(), v["result"]["tools"].as_array().map(Vec::len)), (json!(2), Some(6)), "{v}");
    m.send(json!({"jsonrpc": "2.0", "id": "three", "method": "tools/call", "params": {"name": "create_sandbox", "arguments": {}}}));
    let v = m.next();
    assert_eq!(v["id"], "three", "{v}");
    let sb = v["result"]["structuredContent"]["sandbox"]["id"].as_str().unwrap_or_else(|| panic!("{v}")).to_string();
    let ws = s.workspace(&sb);
    m.send(json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "exec", "arguments": {"sandbox": sb, "command": "echo hi | tee made"}}}));
    let v = m.next();
    assert_eq!((v["id"].clone(), v["result"]["structuredContent"]["stdout"].clone()), (json!(4), json!("hi\n")), "{v}");
    assert_eq!(fs::read_to_string(ws.join("made")).unwrap(), "hi\n");
    m.send(json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "exec", "arguments": {"sandbox": sb, "command": "touch forbidden-x"}}}));
    let v = m.next();
    assert_eq!((v["result"]["isError"].clone(), v["result"]["structuredContent"]["status"].clone()), (json!(true), json!("denied")), "{v}");
    assert!(!ws.join("forbidden-x").exists());
    // A JSON-RPC error passes through; a line that is not JSON gets a parse error.
    m.send(json!({"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"name": "read_file", "arguments": {"sandbox": sb, "path": "../../etc/passwd"}}}));
    let v = m.next();
    assert_eq!((v["id"].clone(), v["error"]["code"].clone(), v["error"]["data"]["code"].clone()), (json!(6), json!(-32602), json!("bad_path")), "{v}");
    writeln!(m.stdin.as_mut().unwrap(), "{{not json").unwrap();
    assert_eq!(m.next()["error"]["code"], -32700);
    // End of input: it exits 0.
    drop(m.stdin.take());
    let t0 = std::time::Instant::now();
    wait_for("pinfold mcp to exit", || m.child.try_wait().unwrap().is_some());
    assert!(t0.elapsed() < Duration::from_secs(10));
    assert_eq!(m.child.wait().unwrap().code(), Some(0));

    // A bad token: each request answered with an error that says why, and it keeps going.
    let mut m = McpChild::start(&fx, &s, "pft_wrong");
    m.send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
    let v = m.next();
    assert_eq!((v["id"].clone(), v["error"]["code"].clone()), (json!(1), json!(-32000)), "{v}");
    assert!(v["error"]["message"].as_str().unwrap().contains("401 unauthorized"), "{v}");
    m.send(json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}));
    assert_eq!(m.next()["id"], 2);
    drop(m.stdin.take());
    assert_eq!(m.child.wait().unwrap().code(), Some(0));

    // No token at all: a usage error before anything is read.
    let argv = vec![pinfold_bin(), "mcp".to_string()];
    let mut c = fx.cmd(&argv);
    c.env_remove("PINFOLD_TOKEN").env("PINFOLD_SERVER", &s.url).stdin(Stdio::null());
    let out = c.output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("PINFOLD_TOKEN"));
}

both_users!(exec_runs_denies_and_asks);
root_only!(initialize_and_list_the_tools, the_endpoint_is_behind_the_token_and_the_guard, files_round_trip_and_stay_beneath_the_workspace, pinfold_mcp_over_stdio);
