//! The dashboard end to end in a real headless Chromium (Debian's `chromium` and
//! `chromium-driver`), driven over the W3C WebDriver protocol, against a real `pinfold serve` on
//! loopback: sign in with an operator token, see an agent's pending approval appear with the
//! exact action, approve it, see the result; the ledger view verifies. Screenshots are kept in
//! `target/test-artifacts/dashboard/`.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::serve::{fixture, wait_for, Server};
use crate::support::User;

const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

struct Driver {
    child: Child,
    port: u16,
    session: String,
    _profile: tempfile::TempDir,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.send("DELETE", &format!("/session/{}", self.session), None);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn http(port: u16, method: &str, path: &str, body: Option<&Value>) -> Result<Value, String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let b = body.map(Value::to_string).unwrap_or_default();
    let req = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{b}", b.len());
    s.write_all(req.as_bytes()).map_err(|e| e.to_string())?;
    // chromedriver keeps the connection open whatever the request says: read by Content-Length.
    let mut raw = Vec::new();
    let mut buf = [0u8; 65536];
    loop {
        if let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&raw[..end]).to_ascii_lowercase();
            let len: usize = head.lines().find_map(|l| l.strip_prefix("content-length:")).and_then(|v| v.trim().parse().ok()).ok_or("no Content-Length")?;
            if raw.len() >= end + 4 + len {
                return serde_json::from_slice(&raw[end + 4..end + 4 + len]).map_err(|e| format!("{e}: {}", String::from_utf8_lossy(&raw)));
            }
        }
        let n = s.read(&mut buf).map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("closed early".into());
        }
        raw.extend_from_slice(&buf[..n]);
    }
}

impl Driver {
    fn start() -> Driver {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver (Debian's chromium-driver) must be installed; .ci/run installs it");
        let t0 = Instant::now();
        while http(port, "GET", "/status", None).is_err() {
            assert!(t0.elapsed() < Duration::from_secs(20), "chromedriver did not start");
            std::thread::sleep(Duration::from_millis(100));
        }
        let profile = tempfile::tempdir().unwrap();
        // Headless, and nothing that reaches out to the (closed) network by itself.
        let caps = json!({"capabilities": {"alwaysMatch": {"browserName": "chrome", "goog:chromeOptions": {
            "binary": "/usr/bin/chromium",
            "args": ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                     "--disable-background-networking", "--disable-component-update", "--disable-sync",
                     "--window-size=1280,1000", format!("--user-data-dir={}", profile.path().display())]
        }}}});
        let v = http(port, "POST", "/session", Some(&caps)).unwrap();
        let session = v["value"]["sessionId"].as_str().unwrap_or_else(|| panic!("no session: {v}")).to_string();
        Driver { child, port, session, _profile: profile }
    }

    fn send(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let v = http(self.port, method, path, body.as_ref()).unwrap();
        if let Some(e) = v["value"].get("error") {
            panic!("WebDriver {method} {path}: {e}: {}", v["value"]["message"]);
        }
        v["value"].clone()
    }

    fn cmd(&self, method: &str, rest: &str, body: Option<Value>) -> Value {
        self.send(method, &format!("/session/{}{rest}", self.session), body)
    }

    fn go(&self, url: &str) {
        self.cmd("POST", "/url", Some(json!({"url": url})));
    }

    /// The first element matching `css`, waiting up to 20 s for it to exist and be shown.
    fn find(&self, css: &str) -> String {
        let t0 = Instant::now();
        loop {
            let v = http(self.port, "POST", &format!("/session/{}/element", self.session), Some(&json!({"using": "css selector", "value": css}))).unwrap();
            if let Some(id) = v["value"][ELEMENT].as_str() {
                // The page may replace the element between the two calls (a refresh): then it
                // is looked up again.
                let shown = http(self.port, "GET", &format!("/session/{}/element/{id}/displayed", self.session), None).unwrap();
                if shown["value"] == json!(true) {
                    return id.to_string();
                }
            }
            assert!(t0.elapsed() < Duration::from_secs(20), "no visible element {css}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The text of `css`, retried while the page replaces the element under us (a refresh
    /// between finding it and reading it).
    fn text(&self, css: &str) -> String {
        let t0 = Instant::now();
        loop {
            let id = self.find(css);
            let v = http(self.port, "GET", &format!("/session/{}/element/{id}/text", self.session), None).unwrap();
            match v["value"].as_str() {
                Some(t) => return t.to_string(),
                None => assert!(t0.elapsed() < Duration::from_secs(20), "cannot read {css}: {v}"),
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Wait until the text of `css` satisfies `ok`.
    fn wait_text(&self, css: &str, ok: impl Fn(&str) -> bool) -> String {
        let t0 = Instant::now();
        loop {
            let t = self.text(css);
            if ok(&t) {
                return t;
            }
            assert!(t0.elapsed() < Duration::from_secs(20), "{css} never got the expected text; last: {t:?}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn click(&self, css: &str) {
        let t0 = Instant::now();
        loop {
            let id = self.find(css);
            let v = http(self.port, "POST", &format!("/session/{}/element/{id}/click", self.session), Some(&json!({}))).unwrap();
            if v["value"].get("error").is_none() {
                return;
            }
            assert!(t0.elapsed() < Duration::from_secs(20), "cannot click {css}: {v}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn type_into(&self, css: &str, text: &str) {
        let t0 = Instant::now();
        loop {
            let id = self.find(css);
            let base = format!("/session/{}/element/{id}", self.session);
            let cleared = http(self.port, "POST", &format!("{base}/clear"), Some(&json!({}))).unwrap();
            let typed = http(self.port, "POST", &format!("{base}/value"), Some(&json!({"text": text}))).unwrap();
            if cleared["value"].get("error").is_none() && typed["value"].get("error").is_none() {
                return;
            }
            // Replaced by a refresh while typing: again, into the new one.
            assert!(t0.elapsed() < Duration::from_secs(20), "cannot type into {css}: {typed}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn script(&self, js: &str) -> Value {
        self.cmd("POST", "/execute/sync", Some(json!({"script": js, "args": []})))
    }

    fn screenshot(&self, name: &str) {
        let b64 = self.cmd("GET", "/screenshot", None);
        let png = decode_base64(b64.as_str().unwrap());
        let dir = artifacts();
        std::fs::write(dir.join(format!("{name}.png")), png).unwrap();
    }
}

fn artifacts() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/test-artifacts/dashboard");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn decode_base64(s: &str) -> Vec<u8> {
    let val = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        _ => 63,
    };
    let bytes: Vec<u8> = s.bytes().filter(|b| !b"=\r\n".contains(b)).collect();
    let mut out = Vec::with_capacity(bytes.len() * 3 / 4);
    for chunk in bytes.chunks(4) {
        let n = chunk.iter().enumerate().fold(0u32, |acc, (i, &c)| acc | (val(c) as u32) << (18 - 6 * i));
        out.extend_from_slice(&n.to_be_bytes()[1..chunk.len()]);
    }
    out
}

fn an_operator_approves_in_the_browser(u: User) {
    let fx = fixture(u, "serve-dashboard");
    let s = Server::start(&fx, &[]);
    let sb = s.sandbox(&s.agent, json!({}));
    let ws = s.workspace(&sb);
    let d = Driver::start();
    d.go(&format!("{}/dashboard", s.url));
    // An agent's token is refused; so is a wrong one.
    d.type_into("#token", &s.agent);
    d.click("#signin");
    d.wait_text("#login-error", |t| t.contains("operator"));
    d.screenshot("1-agent-refused");
    d.type_into("#token", &s.op);
    d.click("#signin");
    assert_eq!(d.wait_text("#who-name", |t| !t.is_empty()), "olga");
    // The session cookie is out of the page's reach.
    assert_eq!(d.script("return document.cookie"), json!(""));
    d.wait_text("#no-pending", |t| t.contains("Nothing"));
    // An agent asks; the request appears, with the exact command, control characters shown.
    let r = s.exec(&s.agent, &sb, json!({"command": "touch approved-browser && echo ok \u{1b}[2K # hidden?"}));
    assert_eq!(r.status, 202, "{}", r.text());
    let id = r.json()["approval"]["id"].as_str().unwrap().to_string();
    let card = format!("#pending article[data-id='{id}']");
    let cmd = d.wait_text(&format!("{card} .command"), |t| !t.is_empty());
    assert_eq!(cmd, "touch approved-browser && echo ok \\u{1b}[2K # hidden?");
    assert_eq!(d.text(&format!("{card} .by")), "agent-a");
    d.screenshot("2-pending");
    assert!(!ws.join("approved-browser").exists());
    d.type_into(&format!("{card} .why"), "looks fine");
    d.click(&format!("{card} .approve"));
    // The result appears on the decided card.
    let done = format!("#decided article[data-id='{id}']");
    d.wait_text(&format!("{done} .status"), |t| t == "consumed");
    let out = d.wait_text(&format!("{done} .stdout"), |t| !t.is_empty());
    assert!(out.starts_with("ok"), "{out:?}");
    assert!(d.text(&format!("{done} .exit")).starts_with("exit 0"));
    d.screenshot("3-approved");
    wait_for("the approved run", || ws.join("approved-browser").exists());
    let v = s.call(&s.agent, "GET", &format!("/v1/approvals/{id}"), None).json();
    assert_eq!((v["decided_by"].clone(), v["decision_reason"].clone()), (json!("olga"), json!("looks fine")));
    // Live output in a sandbox.
    d.click("button[data-view='sandboxes']");
    let sbcard = format!("#sandbox-list article[data-id='{sb}']");
    d.type_into(&format!("{sbcard} input.command"), "echo first; sleep 0.3; echo second");
    d.click(&format!("{sbcard} button[type='submit']"));
    d.wait_text(&format!("{sbcard} .exit"), |t| t.starts_with("exit 0"));
    assert_eq!(d.text(&format!("{sbcard} .output")), "first\nsecond");
    d.screenshot("4-sandbox");
    // The ledger, verified.
    d.click("button[data-view='ledger']");
    assert_eq!(d.wait_text("#verify", |t| !t.is_empty()), "intact");
    d.wait_text("#ledger-table tbody", |t| t.contains("approval") && t.contains("serve_call"));
    d.screenshot("5-ledger");
    // Signed out, the API refuses the browser.
    d.click("#signout");
    d.find("#token");
    let status = d.script("return fetch('/v1/approvals').then(r => r.status)");
    assert_eq!(status, json!(401));
}

fn a_page_elsewhere_cannot_use_the_session(u: User) {
    let fx = fixture(u, "serve-csrf");
    let s = Server::start(&fx, &[]);
    // Sign in over HTTP as the page would, take the cookie.
    let r = s.raw("POST", "/dashboard/login", &[("Content-Type", "application/json"), ("Origin", &s.url)], json!({"token": s.op}).to_string().as_bytes());
    assert_eq!(r.status, 200, "{}", r.text());
    let set = r.headers.get("set-cookie").cloned().unwrap();
    for attr in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(set.contains(attr), "{set}");
    }
    let cookie = set.split(';').next().unwrap().to_string();
    let sb = s.sandbox(&s.agent, json!({}));
    let ws = s.workspace(&sb);
    let r = s.exec(&s.agent, &sb, json!({"command": "touch approved-csrf"}));
    let id = r.json()["approval"]["id"].as_str().unwrap().to_string();
    let path = format!("/v1/approvals/{id}/approve");
    // The cookie works for reads from anywhere the browser sends it…
    assert_eq!(s.raw("GET", "/v1/approvals", &[("Cookie", &cookie)], b"").status, 200);
    // …but a write needs this server's Origin: another origin, none at all, or a cross-site fetch
    // are all refused, and nothing runs.
    for h in [vec![("Cookie", cookie.as_str())], vec![("Cookie", cookie.as_str()), ("Origin", "http://evil.example")], vec![("Cookie", cookie.as_str()), ("Sec-Fetch-Site", "cross-site")]] {
        let r = s.raw("POST", &path, &h, b"{}");
        assert_eq!((r.status, r.code()), (403, "bad_origin".to_string()), "{h:?}: {}", r.text());
    }
    std::thread::sleep(Duration::from_millis(300));
    assert!(!ws.join("approved-csrf").exists());
    assert_eq!(s.call(&s.op, "GET", &format!("/v1/approvals/{id}"), None).json()["status"], "pending");
    // With its own Origin, the dashboard's request goes through.
    let r = s.raw("POST", &path, &[("Cookie", &cookie), ("Origin", &s.url)], b"{}");
    assert_eq!(r.status, 200, "{}", r.text());
    // A forged or signed-out session is no session.
    assert_eq!(s.raw("GET", "/v1/approvals", &[("Cookie", "pinfold_session=pfs_forged")], b"").status, 401);
    let r = s.raw("POST", "/dashboard/logout", &[("Cookie", &cookie), ("Origin", &s.url)], b"");
    assert_eq!(r.status, 204);
    assert_eq!(s.raw("GET", "/v1/approvals", &[("Cookie", &cookie)], b"").status, 401);
    // The page itself: its own scripts only, never framed.
    let r = s.raw("GET", "/dashboard", &[], b"");
    let csp = r.headers.get("content-security-policy").cloned().unwrap_or_default();
    assert!(csp.contains("script-src 'self'") && csp.contains("frame-ancestors 'none'") && !csp.contains("unsafe"), "{csp}");
    assert_eq!(r.headers.get("x-frame-options").map(String::as_str), Some("DENY"));
}

root_only!(an_operator_approves_in_the_browser, a_page_elsewhere_cannot_use_the_session);
