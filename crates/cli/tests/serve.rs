//! `pinfold serve` end to end: a real server on loopback, real HTTP over TCP (requests written
//! by hand, so that a test can send exactly the headers an attacker would), real sandboxed
//! runs. Each guarantee of docs/server.md has a case that tries to get past it and checks the
//! host afterwards.

use std::collections::BTreeMap;
use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::sandbox::Fx;
use crate::support::{pinfold_bin, run_cmd, User, TIMEOUT};

/// The policy every server here runs under (the user's own config.toml): the embedded
/// default's sandbox, everything allowed but two patterns.
const POLICY: &str = r#"extends = ["pinfold:default"]
[defaults]
action = "allow"

[[rules]]
ask = "touch approved-*"
message = "a person decides whether the marker is made"

[[rules]]
deny = "touch forbidden-*"
message = "never"
"#;

pub(crate) struct Server {
    child: Child,
    pub url: String,
    pub host: String,
    pub agent: String,
    pub agent2: String,
    pub op: String,
    pub op2: String,
    args: Vec<String>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) struct Reply {
    pub(crate) status: u16,
    pub(crate) headers: BTreeMap<String, String>,
    pub(crate) body: Vec<u8>,
}

impl Reply {
    pub(crate) fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }
    pub(crate) fn code(&self) -> String {
        self.json()["error"]["code"].as_str().unwrap_or("").to_string()
    }
    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

fn token(fx: &Fx, name: &str, role: &str) -> String {
    let argv: Vec<String> = vec![pinfold_bin(), "serve".into(), "token".into(), "add".into(), name.into(), "--role".into(), role.into()];
    let r = run_cmd(fx.cmd(&argv), argv.join(" "), None, TIMEOUT);
    assert_eq!(r.code, Some(0), "{}", r.show());
    r.stdout.trim().to_string()
}

pub(crate) fn fixture(u: User, name: &str) -> Fx {
    let fx = Fx::new(u, name);
    fx.put(&fx.xdg_config.join("pinfold/config.toml"), POLICY);
    fx.own();
    fx
}

impl Server {
    pub(crate) fn start(fx: &Fx, extra: &[&str]) -> Server {
        let (agent, agent2, op, op2) = (token(fx, "agent-a", "agent"), token(fx, "agent-b", "agent"), token(fx, "olga", "operator"), token(fx, "oscar", "operator"));
        let args: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        Server::launch(fx, args, agent, agent2, op, op2)
    }

    /// A handle that only talks to a running server (from another thread), as `agent`.
    fn client(host: String, agent: &str) -> Server {
        let child = std::process::Command::new("true").spawn().expect("spawn true");
        Server { child, url: String::new(), host, agent: agent.to_string(), agent2: String::new(), op: String::new(), op2: String::new(), args: vec![] }
    }

    /// Another server on the same state, with the first one's tokens.
    fn start_more(fx: &Fx, extra: &[&str]) -> Server {
        let args: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        let tokens: Vec<String> = ["agent-c", "agent-d", "olivia", "otto"].iter().zip(["agent", "agent", "operator", "operator"]).map(|(n, r)| token(fx, n, r)).collect();
        Server::launch(fx, args, tokens[0].clone(), tokens[1].clone(), tokens[2].clone(), tokens[3].clone())
    }

    fn launch(fx: &Fx, args: Vec<String>, agent: String, agent2: String, op: String, op2: String) -> Server {
        let mut argv = vec![pinfold_bin(), "serve".into(), "--listen".into(), "127.0.0.1:0".into()];
        argv.extend(args.iter().cloned());
        let mut c = fx.cmd(&argv);
        c.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::inherit());
        let mut child = c.spawn().expect("start pinfold serve");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("piped")).read_line(&mut line).expect("read the first line");
        let url = line.trim().strip_prefix("listening on ").unwrap_or_else(|| panic!("first line: {line:?}")).to_string();
        let host = url.trim_start_matches("http://").to_string();
        Server { child, url, host, agent, agent2, op, op2, args }
    }

    /// Stop and start again on the same state (a new port).
    fn restart(mut self, fx: &Fx) -> Server {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let (a, b, c, d, args) = (self.agent.clone(), self.agent2.clone(), self.op.clone(), self.op2.clone(), self.args.clone());
        Server::launch(fx, args, a, b, c, d)
    }

    /// A request with exactly these headers (Host and Content-Length added unless given).
    pub(crate) fn raw(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Reply {
        let mut s = TcpStream::connect(&self.host).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
        let mut req = format!("{method} {path} HTTP/1.1\r\n");
        if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
            req += &format!("Host: {}\r\n", self.host);
        }
        for (k, v) in headers {
            req += &format!("{k}: {v}\r\n");
        }
        req += &format!("Content-Length: {}\r\nConnection: close\r\n\r\n", body.len());
        s.write_all(req.as_bytes()).unwrap();
        // A server that refuses on the headers (413) may close before the body is sent.
        let _ = s.write_all(body);
        let mut raw = Vec::new();
        let _ = s.read_to_end(&mut raw);
        parse(&raw)
    }

    pub(crate) fn call(&self, token: &str, method: &str, path: &str, body: Option<Value>) -> Reply {
        let auth = format!("Bearer {token}");
        let b = body.map(|b| b.to_string()).unwrap_or_default();
        self.raw(method, path, &[("Authorization", &auth), ("Content-Type", "application/json")], b.as_bytes())
    }

    pub(crate) fn sandbox(&self, token: &str, body: Value) -> String {
        let r = self.call(token, "POST", "/v1/sandboxes", Some(body));
        assert_eq!(r.status, 201, "{}", r.text());
        r.json()["id"].as_str().unwrap().to_string()
    }

    pub(crate) fn exec(&self, token: &str, sb: &str, body: Value) -> Reply {
        self.call(token, "POST", &format!("/v1/sandboxes/{sb}/exec"), Some(body))
    }

    pub(crate) fn workspace(&self, sb: &str) -> PathBuf {
        let r = self.call(&self.op, "GET", &format!("/v1/sandboxes/{sb}"), None);
        assert_eq!(r.status, 200, "{}", r.text());
        PathBuf::from(r.json()["workspace"].as_str().unwrap())
    }
}

fn parse(raw: &[u8]) -> Reply {
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap_or_else(|| panic!("no header end in {:?}", String::from_utf8_lossy(raw)));
    let head = String::from_utf8_lossy(&raw[..end]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap().split(' ').nth(1).unwrap().parse().unwrap();
    let mut headers = BTreeMap::new();
    for l in lines {
        if let Some((k, v)) = l.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
        }
    }
    let mut body = raw[end + 4..].to_vec();
    if headers.get("transfer-encoding").is_some_and(|v| v.contains("chunked")) {
        let mut out = Vec::new();
        let mut b = &body[..];
        loop {
            let nl = b.windows(2).position(|w| w == b"\r\n").unwrap();
            let n = usize::from_str_radix(std::str::from_utf8(&b[..nl]).unwrap().trim(), 16).unwrap();
            b = &b[nl + 2..];
            if n == 0 {
                break;
            }
            out.extend_from_slice(&b[..n]);
            b = &b[n + 2..];
        }
        body = out;
    }
    Reply { status, headers, body }
}

pub(crate) fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < Duration::from_secs(30), "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

// --- authentication ---

fn every_endpoint_but_healthz_needs_a_token(u: User) {
    let fx = fixture(u, "serve-auth");
    let s = Server::start(&fx, &["--rate", "100000"]);
    let r = s.raw("GET", "/healthz", &[], b"");
    assert_eq!((r.status, r.json()["status"].clone()), (200, json!("ok")));
    let sb = s.sandbox(&s.agent, json!({}));
    let paths = [
        ("POST", "/v1/sandboxes".to_string()),
        ("GET", "/v1/sandboxes".into()),
        ("GET", format!("/v1/sandboxes/{sb}")),
        ("DELETE", format!("/v1/sandboxes/{sb}")),
        ("POST", format!("/v1/sandboxes/{sb}/exec")),
        ("GET", format!("/v1/sandboxes/{sb}/files?path=a")),
        ("PUT", format!("/v1/sandboxes/{sb}/files?path=a")),
        ("DELETE", format!("/v1/sandboxes/{sb}/files?path=a")),
        ("GET", format!("/v1/sandboxes/{sb}/dir")),
        ("GET", "/v1/approvals".into()),
        ("GET", "/v1/approvals/ap_x".into()),
        ("POST", "/v1/approvals/ap_x/approve".into()),
        ("POST", "/v1/approvals/ap_x/deny".into()),
        ("GET", "/v1/ledger".into()),
        ("GET", "/v1/ledger/verify".into()),
    ];
    let wrong = format!("Bearer {}x", s.agent);
    for (m, p) in &paths {
        for h in [vec![], vec![("Authorization", wrong.as_str())], vec![("Authorization", "Bearer ")], vec![("Authorization", "Basic YTpi")]] {
            let r = s.raw(m, p, &h, br#"{"command": "touch pwned"}"#);
            assert_eq!(r.status, 401, "{m} {p} with {h:?}: {}", r.text());
            assert_eq!(r.code(), "unauthorized");
        }
    }
    // Nothing any of them asked for happened: the sandbox is there, nothing was written.
    let ws = s.workspace(&sb);
    assert!(!ws.join("pwned").exists() && !ws.join("a").exists());
    // The actor is the token's name, whatever a header says.
    let r = s.call(&s.agent, "GET", &format!("/v1/sandboxes/{sb}"), None);
    assert_eq!(r.json()["owner"], "agent-a");
}

// --- sandboxes and exec ---

fn a_governed_exec_runs_in_the_sandbox(u: User) {
    let fx = fixture(u, "serve-exec");
    let s = Server::start(&fx, &[]);
    let sb = s.sandbox(&s.agent, json!({"ttl_s": 600}));
    let ws = s.workspace(&sb);
    let r = s.exec(&s.agent, &sb, json!({"command": "echo out; echo err >&2; printf x > made; exit 3"}));
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!((v["exit_code"].clone(), v["stdout"].clone(), v["stderr"].clone(), v["verdict"].clone()), (json!(3), json!("out\n"), json!("err\n"), json!("allow")), "{v}");
    assert_eq!(fs::read_to_string(ws.join("made")).unwrap(), "x");
    // argv form and stdin.
    let r = s.exec(&s.agent, &sb, json!({"argv": ["sh", "-c", "tr a-z A-Z; echo \"$0\"", "it's one word"], "stdin": "hello\n"}));
    assert_eq!(r.json()["stdout"], "HELLO\nit's one word\n", "{}", r.text());
    // The sandbox holds: the home directory's files are read-only and its keys hidden.
    let before = fs::read_to_string(fx.home.join(".bashrc")).unwrap();
    let r = s.exec(&s.agent, &sb, json!({"command": format!("echo pwned >> {}/.bashrc; cat {}/.ssh/id_rsa", fx.home.display(), fx.home.display())}));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_ne!(r.json()["exit_code"], 0, "{}", r.text());
    assert!(!r.text().contains(&fx.token), "a hidden key leaked: {}", r.text());
    assert_eq!(fs::read_to_string(fx.home.join(".bashrc")).unwrap(), before);
}

/// `{"backend": "gvisor"}`: the sandbox's commands run on gVisor's kernel (its `uname -r` is
/// not the host's), the sandbox still holds, and the answer names the backend; an unknown
/// backend is a 400 and makes nothing.
fn a_sandbox_runs_on_the_backend_it_names(u: User) {
    let fx = fixture(u, "serve-backend");
    let s = Server::start(&fx, &[]);
    let host = fx.host_ok(&["uname", "-r"]);
    let plain = s.sandbox(&s.agent, json!({}));
    let r = s.exec(&s.agent, &plain, json!({"command": "uname -r"}));
    assert_eq!(r.json()["stdout"].as_str(), Some(host.as_str()), "{}", r.text());
    let r = s.call(&s.agent, "POST", "/v1/sandboxes", Some(json!({"backend": "gvisor"})));
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(r.json()["backend"], "gvisor", "{}", r.text());
    let sb = r.json()["id"].as_str().unwrap().to_string();
    let ws = s.workspace(&sb);
    let r = s.exec(&s.agent, &sb, json!({"command": "uname -r; printf x > made"}));
    assert_eq!(r.status, 200, "{}", r.text());
    let out = r.json()["stdout"].as_str().unwrap_or("").to_string();
    assert!(!out.is_empty() && out != host, "gvisor's kernel release should differ from the host's {host:?}: {}", r.text());
    assert_eq!(fs::read_to_string(ws.join("made")).unwrap(), "x");
    let before = fs::read_to_string(fx.home.join(".bashrc")).unwrap();
    let r = s.exec(&s.agent, &sb, json!({"command": format!("echo pwned >> {}/.bashrc; cat {}/.ssh/id_rsa", fx.home.display(), fx.home.display())}));
    assert_ne!(r.json()["exit_code"], 0, "{}", r.text());
    assert!(!r.text().contains(&fx.token), "a hidden key leaked: {}", r.text());
    assert_eq!(fs::read_to_string(fx.home.join(".bashrc")).unwrap(), before);
    let r = s.call(&s.agent, "POST", "/v1/sandboxes", Some(json!({"backend": "firecracker"})));
    assert_eq!((r.status, r.code()), (400, "bad_request".to_string()), "{}", r.text());
    assert!(r.text().contains("unknown backend"), "{}", r.text());
}

/// A sandbox whose preset runs on the container backend keeps one container between its
/// execs (the second sees what the first left in /tmp, and runs without making another), and
/// deleting the sandbox removes it.
#[test]
fn a_container_sandbox_keeps_its_container_until_deleted() {
    let mut fx = fixture(User::Root, "serve-kept");
    fx.put(
        &fx.xdg_config.join("pinfold/config.toml"),
        &format!("{POLICY}\n[sandbox.boxed]\nbackend = \"container\"\nimage = \"{}\"\nfs.write.allow = [\".\"]\n", crate::support::container::toolbox_image()),
    );
    fx.own();
    let engine = crate::support::container::engine();
    fx.env.insert("DOCKER_HOST".into(), engine.host.clone());
    let s = Server::start(&fx, &[]);
    let sb = s.sandbox(&s.agent, json!({"preset": "boxed"}));
    let name = format!("pinfold-kept-{sb}-");
    let r = s.exec(&s.agent, &sb, json!({"command": "echo one > /tmp/left; echo made > made.txt"}));
    assert_eq!((r.status, r.json()["exit_code"].as_i64()), (200, Some(0)), "{}", r.text());
    assert_eq!(fs::read_to_string(s.workspace(&sb).join("made.txt")).unwrap_or_default(), "made\n");
    assert_eq!(crate::support::container::containers(engine, &name).len(), 1, "kept after the exec");
    let r = s.exec(&s.agent, &sb, json!({"command": "cat /tmp/left"}));
    assert_eq!(r.json()["stdout"].as_str(), Some("one\n"), "{}", r.text());
    // The backend named in the request (the server asks the engine from its own runtime;
    // found: the handler panicked and the connection closed with no answer).
    let r = s.call(&s.agent, "POST", "/v1/sandboxes", Some(json!({"backend": "container"})));
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(r.json()["backend"].as_str(), Some("container"), "{}", r.text());
    let r = s.call(&s.agent, "DELETE", &format!("/v1/sandboxes/{sb}"), None);
    assert_eq!(r.status, 204, "{}", r.text());
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !crate::support::container::containers(engine, &name).is_empty() {
        assert!(std::time::Instant::now() < deadline, "the kept container outlived its sandbox by 60 s");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn exec_limits_hold(u: User) {
    let fx = fixture(u, "serve-limits");
    let s = Server::start(&fx, &["--max-output", "1000", "--max-timeout", "2"]);
    let sb = s.sandbox(&s.agent, json!({}));
    let r = s.exec(&s.agent, &sb, json!({"command": "head -c 5000 /dev/zero | tr '\\0' a"}));
    let v = r.json();
    assert_eq!((v["truncated"].clone(), v["output_limit"].clone()), (json!(true), json!(1000)), "{v}");
    assert_eq!(v["stdout"].as_str().unwrap().len(), 1000);
    // A timeout over the ceiling is cut to it; the run is stopped and says so.
    let t0 = Instant::now();
    let r = s.exec(&s.agent, &sb, json!({"command": "sleep 59.123", "timeout_s": 600}));
    let v = r.json();
    assert_eq!(v["timed_out"], true, "{v}");
    assert!(t0.elapsed() < Duration::from_secs(20), "took {:?}", t0.elapsed());
    // Nothing of it is left running.
    let left = fx.host_ok(&["sh", "-c", "pgrep -fc 'sleep 59[.]123' || true"]);
    assert_eq!(left.trim(), "0", "sleep 59.123 still runs");
    // A timeout beyond what the API document allows (2^32 - 1) is a 400, on an allowed
    // command and on one that would ask alike (found by schemathesis: 2^63 took an approval).
    for cmd in ["true", "\u{12} {a"] {
        let r = s.exec(&s.agent, &sb, json!({"command": cmd, "timeout_s": 9223372036854775808_u64}));
        assert_eq!((r.status, r.code()), (400, "bad_request".to_string()), "{cmd}: {}", r.text());
    }
    let r = s.exec(&s.agent, &sb, json!({"command": "true", "timeout_s": 4294967295_u64}));
    assert_eq!(r.status, 200, "the largest allowed timeout: {}", r.text());
}

fn a_denied_exec_runs_nothing(u: User) {
    let fx = fixture(u, "serve-deny");
    let s = Server::start(&fx, &[]);
    let sb = s.sandbox(&s.agent, json!({}));
    let ws = s.workspace(&sb);
    for cmd in ["touch forbidden-1", "true && touch forbidden-2", "echo $(touch forbidden-3)"] {
        let r = s.exec(&s.agent, &sb, json!({"command": cmd}));
        assert_eq!((r.status, r.code()), (403, "denied".to_string()), "{cmd}: {}", r.text());
        assert!(r.json()["error"]["message"].as_str().unwrap().contains("never"), "{}", r.text());
    }
    assert_eq!(fs::read_dir(&ws).unwrap().filter_map(Result::ok).filter(|e| e.file_name().to_string_lossy().starts_with("forbidden")).count(), 0);
}

fn sandboxes_belong_to_their_agent(u: User) {
    let fx = fixture(u, "serve-owner");
    let s = Server::start(&fx, &[]);
    let sb = s.sandbox(&s.agent, json!({}));
    let ws = s.workspace(&sb);
    for (m, p, b) in [
        ("GET", format!("/v1/sandboxes/{sb}"), None),
        ("POST", format!("/v1/sandboxes/{sb}/exec"), Some(json!({"command": "touch other"}))),
        ("PUT", format!("/v1/sandboxes/{sb}/files?path=other"), None),
        ("DELETE", format!("/v1/sandboxes/{sb}"), None),
    ] {
        let r = s.call(&s.agent2, m, &p, b);
        assert_eq!(r.status, 404, "{m} {p}: {}", r.text());
    }
    let list = s.call(&s.agent2, "GET", "/v1/sandboxes", None).json();
    assert_eq!(list["sandboxes"], json!([]));
    assert!(ws.is_dir() && !ws.join("other").exists());
    // Its owner deletes it: gone from the registry, its fresh workspace removed.
    let r = s.call(&s.agent, "DELETE", &format!("/v1/sandboxes/{sb}"), None);
    assert_eq!(r.status, 204, "{}", r.text());
    wait_for("the workspace to go", || !ws.exists());
    assert_eq!(s.exec(&s.agent, &sb, json!({"command": "true"})).status, 404);
}

fn a_delete_kills_what_runs(u: User) {
    let fx = fixture(u, "serve-kill");
    let s = Server::start(&fx, &[]);
    let sb = s.sandbox(&s.agent, json!({}));
    let host = s.host.clone();
    let agent = s.agent.clone();
    let sb2 = sb.clone();
    let t0 = Instant::now();
    let h = std::thread::spawn(move || {
        let s2 = Server::client(host, &agent);
        s2.exec(&agent, &sb2, json!({"command": "sleep 77.321", "timeout_s": 120})).json()
    });
    wait_for("the command to start", || fx.host_ok(&["sh", "-c", "pgrep -fc 'sleep 77[.]321' || true"]).trim() != "0");
    assert_eq!(s.call(&s.agent, "DELETE", &format!("/v1/sandboxes/{sb}"), None).status, 204);
    let v = h.join().unwrap();
    assert!(t0.elapsed() < Duration::from_secs(30), "the run was not stopped: {v}");
    assert_ne!(v["exit_code"], 0, "{v}");
    wait_for("nothing left running", || fx.host_ok(&["sh", "-c", "pgrep -fc 'sleep 77[.]321' || true"]).trim() == "0");
}

fn workspaces_are_confined_to_their_roots(u: User) {
    let fx = fixture(u, "serve-roots");
    let proj = fx.proj.display().to_string();
    let s = Server::start(&fx, &["--workspace-root", &proj]);
    let r = s.call(&s.agent, "POST", "/v1/sandboxes", Some(json!({"workspace": fx.home.display().to_string()})));
    assert_eq!((r.status, r.code()), (403, "forbidden".to_string()), "{}", r.text());
    let r = s.call(&s.agent, "POST", "/v1/sandboxes", Some(json!({"workspace": format!("{proj}/../home")})));
    assert_eq!(r.status, 403, "{}", r.text());
    let r = s.call(&s.agent, "POST", "/v1/sandboxes", Some(json!({"workspace": format!("{proj}/nope")})));
    assert_eq!((r.status, r.code()), (400, "bad_path".to_string()), "{}", r.text());
    // The project's own policy file, not yet approved by the user: refused, never read.
    let r = s.call(&s.agent, "POST", "/v1/sandboxes", Some(json!({"workspace": proj, "preset": "workspace"})));
    assert_eq!((r.status, r.code()), (409, "policy_error".to_string()), "{}", r.text());
    fx.approve(&fx.proj.join("pinfold.toml"));
    let r = s.call(&s.agent, "POST", "/v1/sandboxes", Some(json!({"workspace": proj, "preset": "no-such"})));
    assert_eq!((r.status, r.code()), (400, "bad_request".to_string()), "{}", r.text());
    let sb = s.sandbox(&s.agent, json!({"workspace": proj, "preset": "workspace"}));
    let r = s.exec(&s.agent, &sb, json!({"command": "git log --oneline | wc -l"}));
    assert_eq!(r.json()["stdout"], "1\n", "{}", r.text());
    // A named workspace is the user's: deleting the sandbox leaves it.
    assert_eq!(s.call(&s.agent, "DELETE", &format!("/v1/sandboxes/{sb}"), None).status, 204);
    std::thread::sleep(Duration::from_millis(300));
    assert!(fx.proj.join("README").is_file());
}

// --- files ---

fn files_stay_beneath_the_workspace(u: User) {
    let fx = fixture(u, "serve-files");
    let s = Server::start(&fx, &[]);
    let sb = s.sandbox(&s.agent, json!({}));
    let ws = s.workspace(&sb);
    let auth = format!("Bearer {}", s.agent);
    let h = [("Authorization", auth.as_str())];
    // Binary-safe both ways.
    let bytes: Vec<u8> = (0..=255u8).cycle().take(70_000).collect();
    let r = s.raw("PUT", &format!("/v1/sandboxes/{sb}/files?path=deep/er/bin.dat"), &h, &bytes);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(fs::read(ws.join("deep/er/bin.dat")).unwrap(), bytes);
    let r = s.raw("GET", &format!("/v1/sandboxes/{sb}/files?path=deep/er/bin.dat"), &h, b"");
    assert_eq!((r.status, r.headers.get("content-type").cloned()), (200, Some("application/octet-stream".to_string())));
    assert_eq!(r.body, bytes);
    let r = s.raw("GET", &format!("/v1/sandboxes/{sb}/dir?path=deep/er"), &h, b"");
    assert_eq!(r.json()["entries"], json!([{"name": "bin.dat", "type": "file", "size": 70000}]));
    // A link the sandbox made, pointing out.
    let out = fx.out.display().to_string();
    fs::write(fx.out.join("victim"), "host\n").unwrap();
    fx.own();
    let r = s.exec(&s.agent, &sb, json!({"command": format!("ln -s {out} out && ln -s {out}/victim v && ln -s .. up")}));
    assert_eq!(r.json()["exit_code"], 0, "{}", r.text());
    let victim = fx.out.join("victim");
    for p in ["../x", "a/../../x", &format!("{out}/victim"), "/etc/passwd", "out/victim", "v", "up/x", "out/new", "%2e%2e/x"] {
        let q = p.replace('/', "%2F");
        let enc = if p.starts_with('%') { p.to_string() } else { q };
        for (m, body) in [("GET", &b""[..]), ("PUT", &b"pwned"[..]), ("DELETE", &b""[..])] {
            let r = s.raw(m, &format!("/v1/sandboxes/{sb}/files?path={enc}"), &h, body);
            assert!(r.status == 400 || r.status == 404, "{m} {p}: {} {}", r.status, r.text());
            if r.status == 400 {
                assert_eq!(r.code(), "bad_path", "{m} {p}: {}", r.text());
            }
            // Only a name that stays inside may be merely missing.
            if !["out/new"].contains(&p) && !p.starts_with('%') {
                assert_eq!(r.status, 400, "{m} {p} leaves the workspace: {}", r.text());
            }
        }
        let r = s.raw("GET", &format!("/v1/sandboxes/{sb}/dir?path={enc}"), &h, b"");
        assert!(r.status == 400 || r.status == 404, "dir {p}: {}", r.text());
    }
    assert_eq!(fs::read_to_string(&victim).unwrap(), "host\n");
    assert_eq!(fs::read_dir(&fx.out).unwrap().count(), 1, "something was made outside");
    assert!(!ws.parent().unwrap().join("x").exists());
    // Protected paths: refused like an agent's own write tool, and nothing is written.
    for p in [".git/hooks/pre-commit", ".claude/settings.json", "pinfold.toml", ".vscode/tasks.json"] {
        let r = s.raw("PUT", &format!("/v1/sandboxes/{sb}/files?path={p}"), &h, b"#!/bin/sh\necho pwned\n");
        assert_eq!((r.status, r.code()), (403, "denied".to_string()), "{p}: {}", r.text());
        assert!(!ws.join(p).exists(), "{p} was written");
    }
    // Delete a file, then an empty directory.
    assert_eq!(s.raw("DELETE", &format!("/v1/sandboxes/{sb}/files?path=deep/er/bin.dat"), &h, b"").status, 204);
    assert_eq!(s.raw("DELETE", &format!("/v1/sandboxes/{sb}/files?path=deep/er"), &h, b"").status, 204);
    assert!(!ws.join("deep/er").exists());
}

// --- approvals ---

fn approvals_run_once_after_a_person_approves(u: User) {
    let fx = fixture(u, "serve-approve");
    let s = Server::start(&fx, &[]);
    let sb = s.sandbox(&s.agent, json!({}));
    let ws = s.workspace(&sb);
    let r = s.exec(&s.agent, &sb, json!({"command": "touch approved-1 && echo done"}));
    assert_eq!(r.status, 202, "{}", r.text());
    let id = r.json()["approval"]["id"].as_str().unwrap().to_string();
    assert_eq!(r.json()["approval"]["status"], "pending");
    assert!(r.json()["approval"]["url"].as_str().unwrap().ends_with(&id));
    assert!(!ws.join("approved-1").exists(), "it ran before anyone approved");
    // The agent sees it; the other agent does not.
    let mine = s.call(&s.agent, "GET", "/v1/approvals?status=pending", None).json();
    assert_eq!(mine["approvals"].as_array().unwrap().len(), 1);
    assert_eq!(mine["approvals"][0]["action"]["command"], "touch approved-1 && echo done");
    assert_eq!(s.call(&s.agent2, "GET", "/v1/approvals?status=pending", None).json()["approvals"], json!([]));
    assert_eq!(s.call(&s.agent2, "GET", &format!("/v1/approvals/{id}"), None).status, 404);
    // An agent cannot decide.
    let r = s.call(&s.agent, "POST", &format!("/v1/approvals/{id}/approve"), None);
    assert_eq!((r.status, r.code()), (403, "forbidden".to_string()));
    // A long poll that ends when the decision comes.
    let (host, agent, id2) = (s.host.clone(), s.agent.clone(), id.clone());
    let poll = std::thread::spawn(move || {
        let s2 = Server::client(host, &agent);
        let t0 = Instant::now();
        let v = s2.call(&agent, "GET", &format!("/v1/approvals/{id2}?wait=30"), None).json();
        (v, t0.elapsed())
    });
    std::thread::sleep(Duration::from_millis(500));
    let r = s.call(&s.op, "POST", &format!("/v1/approvals/{id}/approve"), Some(json!({"reason": "fine"})));
    assert_eq!(r.status, 200, "{}", r.text());
    let (v, took) = poll.join().unwrap();
    assert!(took < Duration::from_secs(25), "the long poll did not wake: {v}");
    wait_for("the approved run", || s.call(&s.agent, "GET", &format!("/v1/approvals/{id}"), None).json()["status"] == "consumed");
    let v = s.call(&s.agent, "GET", &format!("/v1/approvals/{id}"), None).json();
    assert_eq!((v["decided_by"].clone(), v["result"]["stdout"].clone(), v["result"]["exit_code"].clone()), (json!("olga"), json!("done\n"), json!(0)), "{v}");
    assert!(ws.join("approved-1").exists());
    // Once: approving again is refused, and the file is not made twice.
    fs::remove_file(ws.join("approved-1")).unwrap();
    let r = s.call(&s.op2, "POST", &format!("/v1/approvals/{id}/approve"), None);
    assert_eq!((r.status, r.code()), (409, "conflict".to_string()), "{}", r.text());
    std::thread::sleep(Duration::from_millis(500));
    assert!(!ws.join("approved-1").exists());
    // The ledger has the request, the decision by name, and the run.
    let l = s.call(&s.op, "GET", "/v1/ledger?limit=1000", None).json();
    let kinds: Vec<String> = l["records"].as_array().unwrap().iter().map(|r| r["kind"].as_str().unwrap().to_string()).collect();
    for k in ["serve_sandbox", "serve_call", "serve_result", "approval", "exec_start", "exec_end"] {
        assert!(kinds.iter().any(|x| x == k), "no {k} in {kinds:?}");
    }
    let decision = l["records"].as_array().unwrap().iter().find(|r| r["kind"] == "approval").unwrap();
    assert_eq!((decision["data"]["by"].clone(), decision["data"]["decision"].clone()), (json!("olga"), json!("approved")));
    assert_eq!(s.call(&s.op, "GET", "/v1/ledger/verify", None).json()["status"], "intact");
}

fn nobody_approves_their_own_request(u: User) {
    let fx = fixture(u, "serve-self");
    let s = Server::start(&fx, &[]);
    // An operator's own request.
    let sb = s.sandbox(&s.op, json!({}));
    let ws = s.workspace(&sb);
    let r = s.exec(&s.op, &sb, json!({"command": "touch approved-self"}));
    let id = r.json()["approval"]["id"].as_str().unwrap().to_string();
    let r = s.call(&s.op, "POST", &format!("/v1/approvals/{id}/approve"), None);
    assert_eq!((r.status, r.code()), (403, "self_approval".to_string()), "{}", r.text());
    let r = s.call(&s.op, "POST", &format!("/v1/approvals/{id}/deny"), None);
    assert_eq!((r.status, r.code()), (403, "self_approval".to_string()), "{}", r.text());
    std::thread::sleep(Duration::from_millis(300));
    assert!(!ws.join("approved-self").exists());
    // Denied by another: never runs.
    let r = s.call(&s.op2, "POST", &format!("/v1/approvals/{id}/deny"), Some(json!({"reason": "no"})));
    assert_eq!(r.json()["status"], "denied", "{}", r.text());
    let r = s.call(&s.agent, "POST", &format!("/v1/approvals/{id}/approve"), None);
    assert_eq!(r.status, 403);
    let r = s.call(&s.op2, "POST", &format!("/v1/approvals/{id}/approve"), None);
    assert_eq!(r.status, 409);
    std::thread::sleep(Duration::from_millis(300));
    assert!(!ws.join("approved-self").exists());
}

fn approvals_expire_and_survive_a_restart(u: User) {
    let fx = fixture(u, "serve-restart");
    let s = Server::start(&fx, &["--approval-ttl", "3"]);
    let sb = s.sandbox(&s.agent, json!({}));
    let ws = s.workspace(&sb);
    let old = s.exec(&s.agent, &sb, json!({"command": "touch approved-late"})).json()["approval"]["id"].as_str().unwrap().to_string();
    wait_for("expiry", || s.call(&s.agent, "GET", &format!("/v1/approvals/{old}"), None).json()["status"] == "expired");
    assert_eq!(s.call(&s.op, "POST", &format!("/v1/approvals/{old}/approve"), None).status, 409);
    // A pending approval outlives the server.
    let s = s.restart(&fx);
    let s = {
        let mut s = s;
        s.args = vec![];
        s.restart(&fx)
    };
    let id = s.exec(&s.agent, &sb, json!({"command": "touch approved-2"})).json()["approval"]["id"].as_str().unwrap().to_string();
    let s = s.restart(&fx);
    let r = s.call(&s.agent, "GET", &format!("/v1/sandboxes/{sb}"), None);
    assert_eq!(r.status, 200, "the sandbox did not survive: {}", r.text());
    assert_eq!(s.call(&s.agent, "GET", &format!("/v1/approvals/{id}"), None).json()["status"], "pending");
    assert_eq!(s.call(&s.op, "POST", &format!("/v1/approvals/{id}/approve"), None).status, 200);
    wait_for("the approved run", || ws.join("approved-2").exists());
    assert!(!ws.join("approved-late").exists());
}

// --- the server's own defences ---

fn hosts_origins_and_limits(u: User) {
    let fx = fixture(u, "serve-guards");
    let s = Server::start(&fx, &["--rate", "20"]);
    let sb = s.sandbox(&s.agent, json!({}));
    let ws = s.workspace(&sb);
    let auth = format!("Bearer {}", s.agent);
    let port = s.host.rsplit(':').next().unwrap().to_string();
    let body = br#"{"command": "touch rebound"}"#;
    let path = format!("/v1/sandboxes/{sb}/exec");
    // DNS rebinding: the right address under another name.
    for host in [format!("evil.example:{port}"), "localhost".into(), format!("127.0.0.1:{port}.evil.example"), "".into()] {
        let r = s.raw("POST", &path, &[("Host", &host), ("Authorization", &auth)], body);
        assert_eq!((r.status, r.code()), (403, "bad_host".to_string()), "Host {host:?}: {}", r.text());
    }
    // Cross-origin writes from a browser.
    for (k, v) in [("Origin", "http://evil.example".to_string()), ("Origin", "null".into()), ("Origin", format!("http://localhost:{port}")), ("Sec-Fetch-Site", "cross-site".into())] {
        let r = s.raw("POST", &path, &[("Authorization", &auth), (k, &v)], body);
        assert_eq!((r.status, r.code()), (403, "bad_origin".to_string()), "{k}: {v}: {}", r.text());
    }
    // The same origin may.
    let own = format!("http://{}", s.host);
    let r = s.raw("POST", &path, &[("Authorization", &auth), ("Origin", &own)], br#"{"command": "true"}"#);
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(!ws.join("rebound").exists());
    // Bodies over the cap.
    let big = vec![b' '; 2 << 20];
    let r = s.raw("POST", &path, &[("Authorization", &auth)], &big);
    assert_eq!((r.status, r.code()), (413, "too_large".to_string()), "{}", r.text());
    // Security headers on every answer, errors included.
    for r in [s.raw("GET", "/healthz", &[], b""), s.raw("GET", "/v1/sandboxes", &[], b"")] {
        for h in ["x-content-type-options", "x-frame-options", "content-security-policy", "cache-control", "referrer-policy"] {
            assert!(r.headers.contains_key(h), "no {h}: {:?}", r.headers);
        }
    }
    // The rate limit: a burst over 20/s gets 429s, and a bad token gets no further than a good one.
    let mut limited = 0;
    for _ in 0..60 {
        let r = s.raw("GET", "/v1/sandboxes", &[("Authorization", &auth)], b"");
        if r.status == 429 {
            assert_eq!(r.code(), "rate_limited");
            limited += 1;
        }
    }
    assert!(limited > 0, "60 requests at once were never limited");
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(s.raw("GET", "/v1/sandboxes", &[("Authorization", &auth)], b"").status, 200);
}

fn a_slow_client_is_cut_off(u: User) {
    let fx = fixture(u, "serve-slow");
    let s = Server::start(&fx, &[]);
    let mut c = TcpStream::connect(&s.host).unwrap();
    c.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n").unwrap();
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let t0 = Instant::now();
    let mut buf = Vec::new();
    let _ = c.read_to_end(&mut buf);
    assert!(t0.elapsed() < Duration::from_secs(20), "a connection that never finished its headers was kept {:?}", t0.elapsed());
}

fn only_loopback_without_tls(u: User) {
    let fx = fixture(u, "serve-bind");
    let argv: Vec<String> = vec![pinfold_bin(), "serve".into(), "--listen".into(), "0.0.0.0:0".into()];
    let r = run_cmd(fx.cmd(&argv), argv.join(" "), None, TIMEOUT);
    assert_eq!(r.code, Some(2), "{}", r.show());
    assert!(r.stderr.contains("not a loopback address"), "{}", r.show());
}

fn no_token_reaches_the_ledger_or_the_log(u: User) {
    let fx = fixture(u, "serve-secrets");
    let s = Server::start(&fx, &[]);
    let sb = s.sandbox(&s.agent, json!({}));
    s.exec(&s.agent, &sb, json!({"command": "env; echo PINFOLD_TOKEN=$PINFOLD_TOKEN"}));
    s.call(&format!("{}z", s.op), "GET", "/v1/ledger", None);
    let state = fx.home.join(".local/state/pinfold");
    let mut all = Vec::new();
    for e in walk(&state) {
        all.extend(fs::read(&e).unwrap_or_default());
    }
    let text = String::from_utf8_lossy(&all);
    for t in [&s.agent, &s.agent2, &s.op, &s.op2] {
        assert!(!text.contains(t.as_str()), "a token is stored in the clear under {}", state.display());
    }
    // The command's environment did not have it either.
    let r = s.exec(&s.agent, &sb, json!({"command": "env"}));
    for t in [&s.agent, &s.op] {
        assert!(!r.text().contains(t.as_str()));
    }
}

fn walk(d: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in fs::read_dir(d).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

fn idempotency_and_streaming(u: User) {
    let fx = fixture(u, "serve-idem");
    let s = Server::start(&fx, &[]);
    let sb = s.sandbox(&s.agent, json!({}));
    let ws = s.workspace(&sb);
    let auth = format!("Bearer {}", s.agent);
    let path = format!("/v1/sandboxes/{sb}/exec");
    let body = br#"{"command": "echo x >> count; wc -l < count"}"#;
    let a = s.raw("POST", &path, &[("Authorization", &auth), ("Idempotency-Key", "k1")], body);
    let b = s.raw("POST", &path, &[("Authorization", &auth), ("Idempotency-Key", "k1")], body);
    assert_eq!(a.json(), b.json());
    assert_eq!(b.headers.get("idempotent-replayed").map(String::as_str), Some("true"));
    assert_eq!(fs::read_to_string(ws.join("count")).unwrap(), "x\n", "the command ran twice");
    let c = s.raw("POST", &path, &[("Authorization", &auth), ("Idempotency-Key", "k1")], br#"{"command": "true"}"#);
    assert_eq!((c.status, c.code()), (409, "conflict".to_string()));
    // Streaming: the output as events, then the result.
    let r = s.raw("POST", &path, &[("Authorization", &auth), ("Accept", "text/event-stream")], br#"{"command": "echo one; sleep 0.2; echo two >&2"}"#);
    assert_eq!(r.headers.get("content-type").map(String::as_str), Some("text/event-stream"));
    let t = r.text();
    let events: Vec<&str> = t.lines().filter_map(|l| l.strip_prefix("event: ")).collect();
    assert_eq!(events, ["stdout", "stderr", "result"], "{t}");
    assert!(t.contains(r#"data: {"data":"one\n"}"#), "{t}");
}

fn approvals_cli_against_a_running_server(u: User) {
    let fx = fixture(u, "serve-cli");
    let s = Server::start(&fx, &[]);
    let sb = s.sandbox(&s.agent, json!({}));
    let ws = s.workspace(&sb);
    let id = s.exec(&s.agent, &sb, json!({"command": "touch approved-cli"})).json()["approval"]["id"].as_str().unwrap().to_string();
    let cli = |tok: &str, args: &[&str]| {
        let mut argv = vec![pinfold_bin(), "approvals".into()];
        argv.extend(args.iter().map(|a| a.to_string()));
        let mut c = fx.cmd(&argv);
        c.env("PINFOLD_SERVER", &s.url).env("PINFOLD_TOKEN", tok);
        run_cmd(c, argv.join(" "), None, TIMEOUT)
    };
    let r = cli(&s.op, &["list"]);
    assert_eq!(r.code, Some(0), "{}", r.show());
    assert!(r.stdout.contains(&id) && r.stdout.contains("touch approved-cli"), "{}", r.show());
    let r = cli(&s.agent, &["approve", &id]);
    assert_eq!(r.code, Some(2), "{}", r.show());
    assert!(r.stderr.contains("403 forbidden"), "{}", r.show());
    let r = cli(&s.op, &["approve", &id, "--reason", "ok"]);
    assert_eq!(r.code, Some(0), "{}", r.show());
    wait_for("the approved run", || ws.join("approved-cli").exists());
    let r = cli(&s.op, &["show", &id]);
    assert!(r.stdout.contains("\"decided_by\": \"olga\""), "{}", r.show());
}

// --- the OpenAPI document ---

/// What .ci/schemathesis found, kept: the document is served without a token (but behind the
/// Host check), a path parameter axum cannot read is JSON like every other error, a body the
/// document lets be left out may be JSON `null` (but not a form feed), and numbers the document calls int64 are read
/// as such.
fn the_api_answers_as_its_openapi_document_says(u: User) {
    let fx = fixture(u, "serve-openapi");
    let s = Server::start(&fx, &[]);
    let r = s.raw("GET", "/v1/openapi.json", &[], b"");
    assert_eq!((r.status, r.headers.get("content-type").cloned()), (200, Some("application/json".to_string())), "{}", r.text());
    let doc = r.json();
    assert_eq!(doc["components"]["securitySchemes"]["bearer"]["scheme"], "bearer", "{doc}");
    for (p, m) in [("/v1/sandboxes/{id}/exec", "post"), ("/v1/ledger", "get"), ("/v1/approvals/{id}/approve", "post")] {
        assert_eq!(doc["paths"][p][m]["security"], json!([{"bearer": []}]), "{p} {m}");
    }
    assert!(doc["paths"]["/healthz"]["get"].get("security").is_none());
    let port = s.host.rsplit(':').next().unwrap().to_string();
    let r = s.raw("GET", "/v1/openapi.json", &[("Host", &format!("evil.example:{port}"))], b"");
    assert_eq!((r.status, r.code()), (403, "bad_host".to_string()), "{}", r.text());
    // A path parameter that is not UTF-8: 400 in the error JSON, not plain text.
    for p in ["/v1/sandboxes/%FF", "/v1/sandboxes/%C3%28/files?path=a", "/v1/approvals/%FF/approve"] {
        let m = if p.ends_with("approve") { "POST" } else { "GET" };
        let r = s.call(&s.op, m, p, None);
        assert_eq!((r.status, r.code()), (400, "bad_request".to_string()), "{m} {p}: {}", r.text());
    }
    // `null` for a body that may be left out.
    let r = s.raw("POST", "/v1/sandboxes", &[("Authorization", &format!("Bearer {}", s.agent))], b"null");
    assert_eq!(r.status, 201, "{}", r.text());
    let r = s.raw("POST", "/v1/approvals/ap_x/deny", &[("Authorization", &format!("Bearer {}", s.op))], b"null");
    assert_eq!((r.status, r.code()), (404, "not_found".to_string()), "{}", r.text());
    // Whitespace is JSON's four bytes: a form feed alone (or around `null`) is no JSON.
    for body in [&b" \t\r\n"[..], b"\n null \r\n"] {
        let r = s.raw("POST", "/v1/sandboxes", &[("Authorization", &format!("Bearer {}", s.agent))], body);
        assert_eq!(r.status, 201, "{body:?}: {}", r.text());
    }
    for body in [&b"\x0c"[..], b"\x0cnull", b"null\x0b"] {
        let r = s.raw("POST", "/v1/sandboxes", &[("Authorization", &format!("Bearer {}", s.agent))], body);
        assert_eq!((r.status, r.code()), (400, "bad_request".to_string()), "{body:?}: {}", r.text());
    }
    // The ledger's `after` is an int64: past it is a bad query, not a page.
    let r = s.call(&s.op, "GET", "/v1/ledger?after=9223372036854775808", None);
    assert_eq!((r.status, r.code()), (400, "bad_request".to_string()), "{}", r.text());
    let r = s.call(&s.op, "GET", "/v1/ledger?after=-1&limit=-5", None);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["records"].as_array().map(Vec::len), Some(1), "{}", r.text());
}

fn a_sandbox_past_its_ttl_is_reaped(u: User) {
    let fx = fixture(u, "serve-ttl");
    let s = Server::start(&fx, &[]);
    let sb = s.sandbox(&s.agent, json!({"ttl_s": 3}));
    let ws = s.workspace(&sb);
    // A command still running when the time is up is stopped with its sandbox.
    let (host, agent, sb2) = (s.host.clone(), s.agent.clone(), sb.clone());
    let run = std::thread::spawn(move || {
        let s2 = Server::client(host, &agent);
        s2.exec(&agent, &sb2, json!({"command": "sleep 88.321", "timeout_s": 120})).json()
    });
    wait_for("the sandbox to be reaped", || s.call(&s.agent, "GET", &format!("/v1/sandboxes/{sb}"), None).status == 404);
    let v = run.join().unwrap();
    assert_ne!(v["exit_code"], 0, "{v}");
    wait_for("its workspace to go", || !ws.exists());
    wait_for("nothing left running", || fx.host_ok(&["sh", "-c", "pgrep -fc 'sleep 88[.]321' || true"]).trim() == "0");
    let l = s.call(&s.op, "GET", "/v1/ledger?limit=1000", None).json();
    assert!(l["records"].as_array().unwrap().iter().any(|r| r["kind"] == "serve_sandbox" && r["data"]["event"] == "expired" && r["data"]["sandbox"] == json!(sb)), "{l}");
}

// --- red-team findings, each kept ---

/// A sandbox's workspace swapped for a link (by a sandbox around it) after it was made: the
/// server refused to nest the two, and a swap by the sandbox itself is caught at the next call.
fn a_workspace_replaced_by_a_link_is_refused(u: User) {
    let fx = fixture(u, "serve-swap");
    let roots = fx.base.join("roots");
    fs::create_dir_all(roots.join("ws/sub")).unwrap();
    fx.own();
    let r = roots.display().to_string();
    let s = Server::start(&fx, &["--workspace-root", &r]);
    let outer = s.sandbox(&s.agent, json!({"workspace": format!("{r}/ws")}));
    // Nesting either way is refused.
    let c = s.call(&s.agent, "POST", "/v1/sandboxes", Some(json!({"workspace": format!("{r}/ws/sub")})));
    assert_eq!((c.status, c.code()), (409, "conflict".to_string()), "{}", c.text());
    let c = s.call(&s.agent2, "POST", "/v1/sandboxes", Some(json!({"workspace": r.clone()})));
    assert_eq!((c.status, c.code()), (409, "conflict".to_string()), "{}", c.text());
    // Without the outer one, the inner is allowed; then the agent's own sandbox replaces its
    // workspace's directory by a link out, through a sandbox made later on the parent… which is
    // refused; so it swaps it from inside the inner sandbox's parent path another way: the
    // outer sandbox, deleted and made again after the inner one, is refused too.
    assert_eq!(s.call(&s.agent, "DELETE", &format!("/v1/sandboxes/{outer}"), None).status, 204);
    let inner = s.sandbox(&s.agent, json!({"workspace": format!("{r}/ws/sub")}));
    let c = s.call(&s.agent, "POST", "/v1/sandboxes", Some(json!({"workspace": format!("{r}/ws")})));
    assert_eq!(c.status, 409, "{}", c.text());
    // A swap nonetheless (here by the host, as a sandbox around it would): the next call is
    // refused and nothing is written where the link points.
    let out = fx.out.display().to_string();
    fs::rename(roots.join("ws/sub"), roots.join("ws/old")).unwrap();
    std::os::unix::fs::symlink(&out, roots.join("ws/sub")).unwrap();
    let e = s.exec(&s.agent, &inner, json!({"command": "echo ESCAPED > escaped.txt"}));
    assert_eq!((e.status, e.code()), (409, "conflict".to_string()), "{}", e.text());
    let f = s.call(&s.agent, "PUT", &format!("/v1/sandboxes/{inner}/files?path=escaped.txt"), Some(json!("x")));
    assert_eq!(f.status, 409, "{}", f.text());
    assert!(!fx.out.join("escaped.txt").exists());
    // Another directory moved to its path (same name, other inode) is refused the same way.
    fs::remove_file(roots.join("ws/sub")).unwrap();
    fs::create_dir(roots.join("ws/sub")).unwrap();
    let e = s.exec(&s.agent, &inner, json!({"command": "true"}));
    assert_eq!(e.status, 409, "{}", e.text());
}

/// Requests racing with one Idempotency-Key: one runs.
fn an_idempotency_key_runs_once_under_a_race(u: User) {
    let fx = fixture(u, "serve-idem-race");
    let s = Server::start(&fx, &[]);
    let sb = s.sandbox(&s.agent, json!({}));
    let ws = s.workspace(&sb);
    let mut hs = Vec::new();
    for _ in 0..5 {
        let (host, agent, sb) = (s.host.clone(), s.agent.clone(), sb.clone());
        hs.push(std::thread::spawn(move || {
            let s2 = Server::client(host, &agent);
            let auth = format!("Bearer {agent}");
            s2.raw("POST", &format!("/v1/sandboxes/{sb}/exec"), &[("Authorization", &auth), ("Idempotency-Key", "race")], br#"{"command": "sleep 0.5; echo run >> runs.txt"}"#).status
        }));
    }
    let statuses: Vec<u16> = hs.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(fs::read_to_string(ws.join("runs.txt")).unwrap(), "run\n", "statuses {statuses:?}");
    assert!(statuses.iter().all(|&c| c == 200 || c == 409), "{statuses:?}");
    // No run took another's placeholders for planted files.
    let planted: Vec<_> = fs::read_dir(&ws).unwrap().flatten().filter(|e| e.file_name().to_string_lossy().contains("pinfold-planted")).collect();
    assert!(planted.is_empty(), "{planted:?}");
}

/// Runs side by side in one workspace: neither takes the other's placeholders for files it
/// planted.
fn runs_side_by_side_keep_their_placeholders(u: User) {
    let fx = fixture(u, "serve-side");
    let s = Server::start(&fx, &[]);
    let sb = s.sandbox(&s.agent, json!({}));
    let ws = s.workspace(&sb);
    let mut hs = Vec::new();
    for i in 0..4 {
        let (host, agent, sb) = (s.host.clone(), s.agent.clone(), sb.clone());
        hs.push(std::thread::spawn(move || {
            let s2 = Server::client(host, &agent);
            s2.exec(&agent, &sb, json!({"command": format!("sleep 0.{}; echo {i} > f{i}", 2 + i)})).json()
        }));
    }
    for h in hs {
        let v = h.join().unwrap();
        assert_eq!(v["exit_code"], 0, "{v}");
    }
    let planted: Vec<_> = walk(&ws).into_iter().filter(|p| p.to_string_lossy().contains("pinfold-planted")).collect();
    assert!(planted.is_empty(), "{planted:?}");
}

/// A body that never finishes arriving is cut off.
fn a_trickled_body_is_cut_off(u: User) {
    let fx = fixture(u, "serve-trickle");
    let s = Server::start(&fx, &["--body-timeout", "2"]);
    for (path, auth) in [("/dashboard/login", None), ("/v1/sandboxes", Some(s.agent.clone())), ("/mcp", Some(s.agent.clone()))] {
        let mut c = TcpStream::connect(&s.host).unwrap();
        let mut head = format!("POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 1000\r\n", s.host);
        if let Some(t) = auth {
            head += &format!("Authorization: Bearer {t}\r\n");
        }
        head += "\r\n{";
        c.write_all(head.as_bytes()).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let t0 = Instant::now();
        let mut raw = Vec::new();
        let _ = c.read_to_end(&mut raw);
        assert!(t0.elapsed() < Duration::from_secs(15), "{path}: held {:?}", t0.elapsed());
        let r = parse(&raw);
        assert_eq!((r.status, r.code()), (408, "timeout".to_string()), "{path}: {}", r.text());
    }
}

/// A server killed mid-run takes the run with it: nothing goes on past its deadline unwatched.
fn a_killed_server_leaves_no_run_behind(u: User) {
    let fx = fixture(u, "serve-kill9");
    let mut s = Server::start(&fx, &[]);
    let sb = s.sandbox(&s.agent, json!({}));
    let ws = s.workspace(&sb);
    let (host, agent, sb2) = (s.host.clone(), s.agent.clone(), sb.clone());
    std::thread::spawn(move || {
        let s2 = Server::client(host, &agent);
        let _ = s2.exec(&agent, &sb2, json!({"command": "sleep 3.217; echo beyond > beyond.txt", "timeout_s": 2}));
    });
    wait_for("the command to start", || fx.host_ok(&["sh", "-c", "pgrep -fc 'sleep 3[.]217' || true"]).trim() != "0");
    let _ = s.child.kill();
    let _ = s.child.wait();
    wait_for("the run to die with the server", || fx.host_ok(&["sh", "-c", "pgrep -fc 'sleep 3[.]217' || true"]).trim() == "0");
    std::thread::sleep(Duration::from_secs(4));
    assert!(!ws.join("beyond.txt").exists(), "the command ran on after the server died");
}

/// One sandbox's commands cannot find another's fresh workspace.
fn fresh_workspaces_cannot_find_each_other(u: User) {
    let fx = fixture(u, "serve-siblings");
    let s = Server::start(&fx, &[]);
    let mine = s.sandbox(&s.agent, json!({}));
    let theirs = s.sandbox(&s.agent2, json!({}));
    let r = s.call(&s.agent2, "PUT", &format!("/v1/sandboxes/{theirs}/files?path=private.txt"), Some(json!("AGENT2-PRIVATE")));
    assert_eq!(r.status, 200, "{}", r.text());
    let r = s.exec(&s.agent, &mine, json!({"command": "ls ..; ls -a .. | wc -l; cat ../*/private.txt"}));
    let v = r.json();
    assert!(!v["stdout"].as_str().unwrap().contains(&theirs), "{v}");
    assert!(!r.text().contains("AGENT2-PRIVATE"), "{v}");
    assert!(v["stderr"].as_str().unwrap().contains("Permission denied"), "{v}");
    // Nor learn its name from what pinfold keeps readable: the policy cache names the
    // workspace each file was compiled for, and each sandbox has its own, unlistable to others.
    let cache = fx.base.join("pinfold-cache").display().to_string();
    let r = s.exec(&s.agent, &mine, json!({"command": format!("grep -raoh 'sb_[0-9a-f]*' {cache} $HOME/.cache 2>/dev/null | sort -u")}));
    assert!(!r.text().contains(&theirs), "another sandbox's id is readable: {}", r.text());
    // A named workspace around the fresh ones is refused.
    let s2 = Server::start_more(&fx, &["--workspace-root", &fx.base.display().to_string()]);
    let data = fx.base.join("xdg/data").display().to_string();
    let r = s2.call(&s2.agent, "POST", "/v1/sandboxes", Some(json!({"workspace": data})));
    assert_eq!((r.status, r.code()), (403, "forbidden".to_string()), "{}", r.text());
}

/// A fresh workspace in the default place, `~/.local/share/pinfold/workspaces/ID` (no
/// `XDG_DATA_HOME`): an ordinary project, not the home directory's own files (found by an
/// outside attack: the Files API was refused every path there, and every file a command made
/// was moved aside as a control file).
fn a_fresh_workspace_in_the_default_place_is_an_ordinary_project(u: User) {
    let mut fx = fixture(u, "serve-default-place");
    fx.env.remove("XDG_DATA_HOME");
    let s = Server::start(&fx, &[]);
    let id = s.sandbox(&s.agent, json!({}));
    let r = s.call(&s.agent, "PUT", &format!("/v1/sandboxes/{id}/files?path=notes.txt"), Some(json!("notes")));
    assert_eq!(r.status, 200, "{}", r.text());
    let r = s.exec(&s.agent, &id, json!({"command": "echo made > a.txt && cat notes.txt a.txt"}));
    let v = r.json();
    assert_eq!(v["exit_code"], 0, "{v}");
    assert!(v["stdout"].as_str().unwrap_or("").contains("notes") && v["stdout"].as_str().unwrap_or("").contains("made"), "{v}");
    let ws = fx.home.join(".local/share/pinfold/workspaces");
    let made: Vec<String> = std::fs::read_dir(&ws).map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect()).unwrap_or_default();
    assert!(!made.is_empty(), "the workspace is not in the default place {}: the case proves nothing", ws.display());
}

/// Request lines and headers that name another host.
fn other_hosts_in_any_form_are_refused(u: User) {
    let fx = fixture(u, "serve-hostforms");
    let s = Server::start(&fx, &[]);
    let own = s.host.clone();
    for (line, hosts) in [
        (format!("GET http://evil.example/healthz HTTP/1.1"), vec![own.clone()]),
        (format!("GET /healthz HTTP/1.1"), vec![own.clone(), "evil.example".to_string()]),
        (format!("GET /healthz HTTP/1.1"), vec!["evil.example".to_string(), own.clone()]),
    ] {
        let mut c = TcpStream::connect(&s.host).unwrap();
        let mut req = format!("{line}\r\n");
        for h in &hosts {
            req += &format!("Host: {h}\r\n");
        }
        req += "Connection: close\r\n\r\n";
        c.write_all(req.as_bytes()).unwrap();
        let mut raw = Vec::new();
        let _ = c.read_to_end(&mut raw);
        let r = parse(&raw);
        assert_eq!(r.status, 403, "{line} {hosts:?}: {}", r.text());
    }
    // Token names are one name whatever their case: `OLGA` cannot be made beside `olga`.
    let argv: Vec<String> = vec![pinfold_bin(), "serve".into(), "token".into(), "add".into(), "OLGA".into(), "--role".into(), "operator".into()];
    let r = run_cmd(fx.cmd(&argv), argv.join(" "), None, TIMEOUT);
    assert_eq!(r.code, Some(2), "{}", r.show());
    assert!(r.stderr.contains("exists"), "{}", r.show());
}

/// Nesting refused without naming another agent's sandbox.
fn a_refusal_names_no_one_elses_sandbox(u: User) {
    let fx = fixture(u, "serve-nest-name");
    let roots = fx.base.join("roots");
    fs::create_dir_all(roots.join("ws/inner")).unwrap();
    fx.own();
    let r = roots.display().to_string();
    let s = Server::start(&fx, &["--workspace-root", &r]);
    let theirs = s.sandbox(&s.agent2, json!({"workspace": format!("{r}/ws/inner")}));
    let c = s.call(&s.agent, "POST", "/v1/sandboxes", Some(json!({"workspace": format!("{r}/ws")})));
    assert_eq!(c.status, 409, "{}", c.text());
    assert!(!c.text().contains(&theirs) && !c.text().contains("inner"), "{}", c.text());
}

/// A flood without a valid token does not use up the limit of those who hold one; too many
/// long polls from one token are answered at once instead of holding connections.
fn floods_do_not_shut_out_token_holders(u: User) {
    let fx = fixture(u, "serve-flood");
    let s = Server::start(&fx, &["--rate", "20"]);
    let mut limited = 0;
    for _ in 0..60 {
        let r = s.raw("GET", "/v1/sandboxes", &[("Authorization", "Bearer pft_bogus")], b"");
        assert!(r.status == 401 || r.status == 429, "{}", r.text());
        limited += (r.status == 429) as usize;
    }
    assert!(limited > 0, "guessing tokens was never limited");
    assert_eq!(s.call(&s.op, "GET", "/v1/sandboxes", None).status, 200);
    // Long polls.
    let sb = s.sandbox(&s.agent, json!({}));
    let id = s.exec(&s.agent, &sb, json!({"command": "touch approved-poll"})).json()["approval"]["id"].as_str().unwrap().to_string();
    let mut hs = Vec::new();
    for _ in 0..crate_long_polls() {
        let (host, agent, id) = (s.host.clone(), s.agent.clone(), id.clone());
        hs.push(std::thread::spawn(move || {
            let s2 = Server::client(host, &agent);
            s2.call(&agent, "GET", &format!("/v1/approvals/{id}?wait=20"), None).status
        }));
    }
    std::thread::sleep(Duration::from_millis(800));
    let t0 = Instant::now();
    let r = s.call(&s.agent, "GET", &format!("/v1/approvals/{id}?wait=20"), None);
    assert_eq!(r.json()["status"], "pending");
    assert!(t0.elapsed() < Duration::from_secs(5), "a poll over the token's share waited {:?}", t0.elapsed());
    // Everyone else is still served.
    assert_eq!(s.raw("GET", "/healthz", &[], b"").status, 200);
    assert_eq!(s.call(&s.op, "POST", &format!("/v1/approvals/{id}/deny"), None).status, 200);
    for h in hs {
        assert_eq!(h.join().unwrap(), 200);
    }
}

/// Long polls one token may hold at once (docs/server.md).
fn crate_long_polls() -> usize {
    8
}

both_users!(a_governed_exec_runs_in_the_sandbox, a_sandbox_runs_on_the_backend_it_names, files_stay_beneath_the_workspace, approvals_run_once_after_a_person_approves);
root_only!(
    every_endpoint_but_healthz_needs_a_token,
    exec_limits_hold,
    a_denied_exec_runs_nothing,
    sandboxes_belong_to_their_agent,
    a_delete_kills_what_runs,
    workspaces_are_confined_to_their_roots,
    nobody_approves_their_own_request,
    approvals_expire_and_survive_a_restart,
    hosts_origins_and_limits,
    a_slow_client_is_cut_off,
    only_loopback_without_tls,
    no_token_reaches_the_ledger_or_the_log,
    idempotency_and_streaming,
    approvals_cli_against_a_running_server,
    the_api_answers_as_its_openapi_document_says,
    a_sandbox_past_its_ttl_is_reaped,
    a_workspace_replaced_by_a_link_is_refused,
    an_idempotency_key_runs_once_under_a_race,
    runs_side_by_side_keep_their_placeholders,
    a_trickled_body_is_cut_off,
    a_killed_server_leaves_no_run_behind,
    fresh_workspaces_cannot_find_each_other,
    a_fresh_workspace_in_the_default_place_is_an_ordinary_project,
    other_hosts_in_any_form_are_refused,
    a_refusal_names_no_one_elses_sandbox,
    floods_do_not_shut_out_token_holders,
);
