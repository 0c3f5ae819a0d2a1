//! Issue 6 through the real sandbox: `pinfold exec` with a preset that lists `network.hosts`
//! (see `docs/egress.md`), against real servers this test starts on the host, with real tools
//! (curl, bash, python3, git, pip) inside the sandbox.
//!
//! The command runs in a network namespace with only loopback; its 127.0.0.1:3128 is accepted
//! outside by the egress proxy. Every escape attempt is judged on the **host** afterwards: the
//! host's TCP listener saw no connection, its UDP socket received no datagram, the upstream's
//! request log has no entry. An attempt also runs as a **control**, on the host without pinfold,
//! and must reach the host there: an attack that cannot work anyway proves nothing. The positive
//! cases (allowed host, `git ls-remote`, `pip download`) check that the host server served the
//! request and that the proxy's decision is an `egress` record in the ledger between the run's
//! `exec_start` and `exec_end`.
//!
//! Scripts print `PINFOLD-TEST-STARTED` first (a run that never started proves nothing), then
//! `ESCAPED: <what>` for an attempt that worked and `refused: <what>: <error>` otherwise.
//!
//! The suite runs as root (CI does) on x86_64, and the key cases run again as uid 65534 through
//! `setpriv`, each in its own world-traversable directory under /tmp. Nothing needs the
//! internet, and nothing is sent there even if pinfold fails: the cases whose targets are not
//! loopback (the cloud metadata address, a "public" address, a DNS resolver, names) run in a
//! network namespace of their own (`crates/egress/tests/support/netns.rs`) where those
//! addresses are on loopback with the test's listeners, and resolve names through the test's
//! own DNS responder and hosts file ([`World::with_own_etc`]). `PINFOLD_TEST_EXEC_BIN` swaps
//! in another binary (e.g. a wrapper adding `--net on`), to check that every test here can
//! fail; `PINFOLD_TEST_SHOW=1` prints every sandboxed run.

use std::collections::BTreeMap;
use std::fs;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, Shutdown, TcpListener, UdpSocket};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

#[path = "../../egress/tests/support/netns.rs"]
mod netns;

/// The system Python, which uid 65534 can run (not a pyenv shim).
const PY: &str = "/usr/bin/python3";
const STARTED: &str = "PINFOLD-TEST-STARTED";
const NOBODY: u32 = 65534;
const TIMEOUT: Duration = Duration::from_secs(30);
/// Where the proxy listens inside the sandbox's namespace.
const PROXY_PORT: u16 = 3128;

// ---------------------------------------------------------------------------------------------
// Users
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum User {
    Root,
    Nobody,
}

impl User {
    fn name(self) -> &'static str {
        match self {
            User::Root => "root",
            User::Nobody => "uid 65534",
        }
    }
}

/// `mod case { #[test] fn root(); #[test] fn nobody(); }` for each case.
macro_rules! both_users {
    ($($case:ident),* $(,)?) => {$(
        mod $case {
            #[test]
            fn root() {
                super::$case(super::User::Root)
            }
            #[test]
            fn nobody() {
                super::$case(super::User::Nobody)
            }
        }
    )*};
}

/// `mod case { #[test] fn root(); }`: cases whose proof does not depend on the uid.
macro_rules! root_only {
    ($($case:ident),* $(,)?) => {$(
        mod $case {
            #[test]
            fn root() {
                super::$case(super::User::Root)
            }
        }
    )*};
}

fn require_root_x86_64() {
    let status = fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    let uid = status.lines().find(|l| l.starts_with("Uid:")).unwrap_or("");
    assert!(
        uid.split_whitespace().nth(2) == Some("0"),
        "this suite must run as root: it runs cases as root and as uid 65534 (setpriv); got {uid:?}"
    );
    assert!(std::env::consts::ARCH == "x86_64", "written for x86_64");
}

/// The binary under test, in a place uid 65534 can run it from.
fn pinfold_bin() -> String {
    if let Ok(b) = std::env::var("PINFOLD_TEST_EXEC_BIN") {
        return b;
    }
    static BIN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        let built = PathBuf::from(env!("CARGO_BIN_EXE_pinfold"));
        let reachable = built
            .ancestors()
            .skip(1)
            .all(|d| fs::metadata(d).is_ok_and(|m| m.permissions().mode() & 0o001 != 0));
        if reachable {
            return built.display().to_string();
        }
        let dir = std::env::temp_dir().join(format!("pinfold-egress-bin-{}", std::process::id()));
        fs::create_dir_all(&dir).expect("create the binary copy's directory");
        let copy = dir.join("pinfold");
        fs::copy(&built, &copy).expect("copy the pinfold binary");
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).expect("chmod");
        fs::set_permissions(&copy, fs::Permissions::from_mode(0o755)).expect("chmod");
        copy.display().to_string()
    })
    .clone()
}

// ---------------------------------------------------------------------------------------------
// Running processes
// ---------------------------------------------------------------------------------------------

#[derive(Debug)]
struct Run {
    what: String,
    code: Option<i32>,
    signal: Option<i32>,
    stdout: String,
    stderr: String,
    timed_out: bool,
    took: Duration,
}

impl Run {
    fn show(&self) -> String {
        format!(
            "  command: {}\n  exit: {:?} signal: {:?}{} after {:?}\n  --- stdout ---\n{}\n  --- stderr ---\n{}",
            self.what,
            self.code,
            self.signal,
            if self.timed_out {
                " (TIMED OUT, killed)"
            } else {
                ""
            },
            self.took,
            indent(&self.stdout),
            indent(&self.stderr)
        )
    }
    fn started(&self) -> bool {
        self.stdout.contains(STARTED)
    }
    fn lines(&self, prefix: &str) -> Vec<&str> {
        self.stdout
            .lines()
            .filter(|l| l.starts_with(prefix))
            .collect()
    }
}

fn indent(s: &str) -> String {
    s.lines()
        .map(|l| format!("    | {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Spawn, collect output, kill after `timeout`.
fn run_cmd(mut c: Command, what: String, timeout: Duration) -> Run {
    c.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let t0 = Instant::now();
    let mut child = c
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start `{what}`: {e}"));
    let (tx, rx) = mpsc::channel();
    for (i, mut r) in [
        Box::new(child.stdout.take().expect("piped")) as Box<dyn Read + Send>,
        Box::new(child.stderr.take().expect("piped")),
    ]
    .into_iter()
    .enumerate()
    {
        let tx = tx.clone();
        thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = r.read_to_end(&mut buf);
            let _ = tx.send((i, buf));
        });
    }
    let deadline = t0 + timeout;
    let mut timed_out = false;
    let status = loop {
        match child.try_wait().expect("wait") {
            Some(s) => break s,
            None if Instant::now() > deadline => {
                timed_out = true;
                let _ = child.kill();
                break child.wait().expect("wait");
            }
            None => thread::sleep(Duration::from_millis(5)),
        }
    };
    let took = t0.elapsed();
    let mut out = [Vec::new(), Vec::new()];
    for _ in 0..2 {
        match rx.recv_timeout(Duration::from_secs(2)) {
            Ok((i, b)) => out[i] = b,
            Err(_) => break,
        }
    }
    Run {
        what,
        code: status.code(),
        signal: status.signal(),
        stdout: String::from_utf8_lossy(&out[0]).into_owned(),
        stderr: String::from_utf8_lossy(&out[1]).into_owned(),
        timed_out,
        took,
    }
}

// ---------------------------------------------------------------------------------------------
// Host servers: what reached the host
// ---------------------------------------------------------------------------------------------

/// A TCP listener on the host that answers HTTP and logs every connection and request line.
struct HostTcp {
    port: u16,
    /// `connection` for each accept, then the request line (or `no request line`).
    log: Arc<Mutex<Vec<String>>>,
    conns: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    /// What it answers with: a token the client can only have got from this server.
    body: String,
}

impl HostTcp {
    /// Listen on `ip` (`0.0.0.0` reaches it through every host address, loopback or not).
    fn bind(ip: &str) -> HostTcp {
        HostTcp::bind_at(ip, 0)
    }

    /// Listen on `ip:port` (port 0: any free one).
    fn bind_at(ip: &str, port: u16) -> HostTcp {
        let l = TcpListener::bind((ip, port))
            .unwrap_or_else(|e| panic!("bind a host TCP listener on {ip}:{port}: {e}"));
        l.set_nonblocking(true).expect("nonblocking");
        let port = l.local_addr().expect("addr").port();
        let body = format!("host-server-{port}-says-hello");
        let log = Arc::new(Mutex::new(Vec::new()));
        let conns = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (lg, n, s, b) = (log.clone(), conns.clone(), stop.clone(), body.clone());
        thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                match l.accept() {
                    Ok((mut c, from)) => {
                        n.fetch_add(1, Ordering::SeqCst);
                        let (lg, b) = (lg.clone(), b.clone());
                        thread::spawn(move || {
                            let _ = c.set_nonblocking(false);
                            let _ = c.set_read_timeout(Some(Duration::from_secs(3)));
                            let mut buf = Vec::new();
                            let mut chunk = [0u8; 4096];
                            while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < 65536 {
                                match c.read(&mut chunk) {
                                    Ok(0) | Err(_) => break,
                                    Ok(k) => buf.extend_from_slice(&chunk[..k]),
                                }
                            }
                            let text = String::from_utf8_lossy(&buf);
                            let line = text.lines().next().unwrap_or("").to_string();
                            lg.lock().expect("lock").push(if line.is_empty() {
                                format!("connection from {from} with no request line")
                            } else {
                                format!("{line} (from {from})")
                            });
                            let _ = write!(
                                c,
                                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{b}\n",
                                b.len() + 1
                            );
                            let _ = c.shutdown(Shutdown::Write);
                        });
                    }
                    Err(_) => thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        HostTcp {
            port,
            log,
            conns,
            stop,
            body,
        }
    }

    /// Everything that reached it (after a moment for in-flight connections to be logged).
    fn seen(&self) -> Vec<String> {
        thread::sleep(Duration::from_millis(100));
        let deadline = Instant::now() + Duration::from_secs(4);
        // Each accepted connection logs one line once its request is read (or times out).
        while self.log.lock().expect("lock").len() < self.conns.load(Ordering::SeqCst)
            && Instant::now() < deadline
        {
            thread::sleep(Duration::from_millis(20));
        }
        let mut v = self.log.lock().expect("lock").clone();
        let n = self.conns.load(Ordering::SeqCst);
        if v.len() < n {
            v.push(format!(
                "{} connection(s) accepted and not yet logged",
                n - v.len()
            ));
        }
        v
    }

    fn clear(&self) {
        self.log.lock().expect("lock").clear();
        self.conns.store(0, Ordering::SeqCst);
    }
}

impl Drop for HostTcp {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// A UDP socket on the host that logs every datagram and answers `pong`.
struct HostUdp {
    port: u16,
    log: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
}

impl HostUdp {
    fn bind(ip: &str) -> HostUdp {
        let s = UdpSocket::bind((ip, 0)).expect("bind a host UDP socket");
        s.set_read_timeout(Some(Duration::from_millis(50)))
            .expect("timeout");
        let port = s.local_addr().expect("addr").port();
        let log = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (lg, st) = (log.clone(), stop.clone());
        thread::spawn(move || {
            let mut buf = [0u8; 2048];
            while !st.load(Ordering::Relaxed) {
                if let Ok((n, from)) = s.recv_from(&mut buf) {
                    lg.lock().expect("lock").push(format!(
                        "datagram {:?} from {from}",
                        String::from_utf8_lossy(&buf[..n])
                    ));
                    let _ = s.send_to(b"pong", from);
                }
            }
        });
        HostUdp { port, log, stop }
    }

    fn seen(&self) -> Vec<String> {
        thread::sleep(Duration::from_millis(150));
        self.log.lock().expect("lock").clone()
    }
}

impl Drop for HostUdp {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// A DNS responder of the test's own on UDP port 53 of `ip`: `A` queries for its names get
/// their address, other types for them an empty answer, every other name NXDOMAIN. It logs
/// every query as `NAME TYPE from ADDR`.
struct HostDns {
    log: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
}

impl HostDns {
    fn start(ip: Ipv4Addr, names: &[(&str, Ipv4Addr)]) -> HostDns {
        let s = UdpSocket::bind((ip, 53))
            .unwrap_or_else(|e| panic!("bind the test's DNS responder on {ip}:53: {e}"));
        s.set_read_timeout(Some(Duration::from_millis(50)))
            .expect("timeout");
        let table: Vec<(String, Ipv4Addr)> = names
            .iter()
            .map(|(n, a)| (n.to_ascii_lowercase(), *a))
            .collect();
        let log = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (lg, st) = (log.clone(), stop.clone());
        thread::spawn(move || {
            let mut buf = [0u8; 1500];
            while !st.load(Ordering::Relaxed) {
                let Ok((n, from)) = s.recv_from(&mut buf) else {
                    continue;
                };
                match dns_answer(&buf[..n], &table) {
                    Some((name, qtype, reply)) => {
                        lg.lock()
                            .expect("lock")
                            .push(format!("{name} {qtype} from {from}"));
                        let _ = s.send_to(&reply, from);
                    }
                    None => lg
                        .lock()
                        .expect("lock")
                        .push(format!("a datagram that is no query, from {from}")),
                }
            }
        });
        HostDns { log, stop }
    }

    fn seen(&self) -> Vec<String> {
        thread::sleep(Duration::from_millis(150));
        self.log.lock().expect("lock").clone()
    }

    fn clear(&self) {
        self.log.lock().expect("lock").clear();
    }
}

impl Drop for HostDns {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The reply to a DNS query (RFC 1035 4.1) from `table`, with the name and query type.
fn dns_answer(q: &[u8], table: &[(String, Ipv4Addr)]) -> Option<(String, u16, Vec<u8>)> {
    if q.len() < 12 || q[2] & 0x80 != 0 || q[4..6] != [0, 1] {
        return None;
    }
    let (mut i, mut labels) = (12, Vec::new());
    loop {
        let len = usize::from(*q.get(i)?);
        i += 1;
        if len == 0 {
            break;
        }
        if len > 63 {
            return None;
        }
        labels.push(String::from_utf8_lossy(q.get(i..i + len)?).to_ascii_lowercase());
        i += len;
    }
    let qtype = u16::from_be_bytes([*q.get(i)?, *q.get(i + 1)?]);
    let question = q.get(12..i + 4)?;
    let name = labels.join(".");
    let known = table.iter().find(|(n, _)| *n == name).map(|(_, a)| *a);
    let answer = known.filter(|_| qtype == 1);
    let mut r = q[..2].to_vec();
    // QR, the query's RD; RA, NOERROR or NXDOMAIN; one question, one answer or none.
    r.extend([
        0x80 | (q[2] & 0x01),
        if known.is_some() { 0x80 } else { 0x83 },
    ]);
    r.extend([0, 1, 0, u8::from(answer.is_some()), 0, 0, 0, 0]);
    r.extend_from_slice(question);
    if let Some(a) = answer {
        // The name by pointer to the question, A, IN, TTL 60 s, four bytes.
        r.extend([0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4]);
        r.extend(a.octets());
    }
    Some((name, qtype, r))
}

/// A python3 `http.server` (optionally TLS) serving `root` on 127.0.0.1, logging requests to a
/// file; killed with the world.
const SERVE_PY: &str = r#"import functools, http.server, ssl, sys
root, cert, key = sys.argv[1], sys.argv[2], sys.argv[3]
handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=root)
srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
if cert:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
print(srv.server_address[1], flush=True)
srv.serve_forever()
"#;

/// A server (TLS when given a certificate) that answers one HTTP/1.0 response per connection
/// and then holds the connection open without closing it, as a slow or long-polling upstream
/// does; it logs `served <request line>` for each.
const HOLD_PY: &str = r#"import socket, ssl, sys, threading, time
root, cert, key = sys.argv[1], sys.argv[2], sys.argv[3]
ctx = None
if cert:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
l = socket.socket()
l.bind(("127.0.0.1", 0))
l.listen()
print(l.getsockname()[1], flush=True)
def serve(c):
    try:
        if ctx:
            c = ctx.wrap_socket(c, server_side=True)
        head = c.recv(4096).decode(errors="replace").split("\r\n")[0]
        c.sendall(b"HTTP/1.0 200 OK\r\n\r\nheld-open-body\n")
        print(f'served "{head}"', file=sys.stderr, flush=True)
        time.sleep(30)
    except OSError as e:
        print(f"error {e}", file=sys.stderr, flush=True)
while True:
    c, _ = l.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"#;

/// A wheel with METADATA, WHEEL and RECORD (hashes and sizes as pip checks them).
const MKWHEEL_PY: &str = r#"import base64, hashlib, sys, zipfile
files = {
    "demo/__init__.py": b"VALUE = 1\n",
    "demo-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n",
    "demo-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: pinfold-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
def rec(data):
    d = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={d},{len(data)}"
record = "".join(f"{n},{rec(d)}\n" for n, d in files.items()) + "demo-1.0.dist-info/RECORD,,\n"
with zipfile.ZipFile(sys.argv[1], "w") as z:
    for n, d in files.items():
        z.writestr(n, d)
    z.writestr("demo-1.0.dist-info/RECORD", record)
"#;

struct PyServer {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl PyServer {
    fn start(root: &Path, tls: Option<(&Path, &Path)>, log: PathBuf) -> PyServer {
        PyServer::start_script(SERVE_PY, root, tls, log)
    }

    /// `code` run as `python3 SCRIPT ROOT CERT KEY`; it prints its port on the first line.
    fn start_script(
        code: &str,
        root: &Path,
        tls: Option<(&Path, &Path)>,
        log: PathBuf,
    ) -> PyServer {
        let script = log.with_extension("py");
        fs::write(&script, code).expect("write the server script");
        let (cert, key) = match tls {
            Some((c, k)) => (c.display().to_string(), k.display().to_string()),
            None => (String::new(), String::new()),
        };
        let mut child = Command::new(PY)
            .arg(&script)
            .arg(root)
            .args([cert, key])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(fs::File::create(&log).expect("create the server log"))
            .spawn()
            .expect("start python3 http.server");
        let mut out = child.stdout.take().expect("piped");
        let mut line = Vec::new();
        let mut b = [0u8; 1];
        while out.read(&mut b).unwrap_or(0) == 1 && b[0] != b'\n' {
            line.push(b[0]);
        }
        let port = String::from_utf8_lossy(&line)
            .trim()
            .parse()
            .unwrap_or_else(|_| {
                let _ = child.kill();
                panic!(
                    "the python3 server did not start: {}",
                    fs::read_to_string(&log).unwrap_or_default()
                )
            });
        PyServer { child, port, log }
    }

    /// Request lines the server logged (`"GET /x HTTP/1.1" 200 -`).
    fn requests(&self) -> Vec<String> {
        thread::sleep(Duration::from_millis(100));
        fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("\"GET ") || l.contains("\"POST ") || l.contains("\"HEAD "))
            .map(str::to_string)
            .collect()
    }
}

impl Drop for PyServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ---------------------------------------------------------------------------------------------
// The world: one temp tree per case
// ---------------------------------------------------------------------------------------------

struct World {
    user: User,
    name: String,
    _tmp: tempfile::TempDir,
    base: PathBuf,
    proj: PathBuf,
    state: PathBuf,
    env: BTreeMap<String, String>,
    /// Ledger records already looked at (each run's records come after these).
    read_records: Mutex<usize>,
    policies: AtomicUsize,
    /// The test's own `hosts`, `resolv.conf` and `nsswitch.conf`, bound over /etc's for every
    /// command of this world ([`World::with_own_etc`]).
    etc: Option<tempfile::TempDir>,
}

impl World {
    fn new(user: User, name: &str) -> World {
        require_root_x86_64();
        let tmp = tempfile::Builder::new()
            .prefix("pinfold-egress-")
            .tempdir_in("/tmp")
            .expect("temp dir under /tmp");
        let base = tmp.path().to_path_buf();
        fs::set_permissions(&base, fs::Permissions::from_mode(0o755)).expect("chmod");
        let d = |p: &str| {
            let p = base.join(p);
            fs::create_dir_all(&p).expect("mkdir");
            p
        };
        let (home, proj, state) = (d("home"), d("proj"), base.join("state"));
        let (cfg, cache, data, pcache, tmpd, run) = (
            d("xdg/config"),
            d("xdg/cache"),
            d("xdg/data"),
            d("pinfold-cache"),
            d("tmp"),
            d("run"),
        );
        fs::set_permissions(&run, fs::Permissions::from_mode(0o700)).expect("chmod");
        let s = |p: &Path| p.display().to_string();
        let who = if user == User::Root { "root" } else { "nobody" };
        let env: BTreeMap<String, String> = [
            ("PATH", "/usr/local/bin:/usr/bin:/bin".to_string()),
            ("HOME", s(&home)),
            ("USER", who.to_string()),
            ("LOGNAME", who.to_string()),
            ("LANG", "C.UTF-8".to_string()),
            ("XDG_CONFIG_HOME", s(&cfg)),
            ("XDG_CACHE_HOME", s(&cache)),
            ("XDG_DATA_HOME", s(&data)),
            ("XDG_RUNTIME_DIR", s(&run)),
            ("PINFOLD_CACHE_DIR", s(&pcache)),
            ("PINFOLD_STATE_DIR", s(&state)),
            ("TMPDIR", s(&tmpd)),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let w = World {
            user,
            name: name.to_string(),
            _tmp: tmp,
            base,
            proj,
            state,
            env,
            read_records: Mutex::new(0),
            policies: AtomicUsize::new(0),
            etc: None,
        };
        w.own();
        w
    }

    /// Every command of this world (controls, `pinfold exec` and so its proxy and sandbox) sees
    /// the test's own name service: /etc/hosts with `localhost` and `hosts` (lines `ADDR NAME`),
    /// /etc/resolv.conf naming only [`netns::RESOLVER`] (where the case runs a [`HostDns`]),
    /// and /etc/nsswitch.conf with `hosts: files dns` (no resolver daemon, no mDNS). Each is
    /// bound over the real one in a private mount namespace made for the command (see
    /// [`ETC_OVERLAY_SH`]); the host's files are not touched. For cases in a [`netns::TestNet`],
    /// so that names resolve to the test's own addresses and queries reach the test's own
    /// responder.
    fn with_own_etc(mut self, hosts: &[(&str, String)]) -> World {
        let dir = tempfile::Builder::new()
            .prefix("pinfold-egress-etc-")
            .tempdir_in("/tmp")
            .expect("temp dir under /tmp");
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).expect("chmod");
        let mut h = String::from("127.0.0.1 localhost\n");
        for (name, addr) in hosts {
            h.push_str(&format!("{addr} {name}\n"));
        }
        let nss: String = fs::read_to_string("/etc/nsswitch.conf")
            .unwrap_or_default()
            .lines()
            .filter(|l| !l.trim_start().starts_with("hosts:"))
            .map(|l| format!("{l}\n"))
            .chain(["hosts: files dns\n".to_string()])
            .collect();
        let resolv = format!(
            "nameserver {}\noptions timeout:1 attempts:1\n",
            netns::RESOLVER
        );
        for (f, text) in [
            ("hosts", h),
            ("resolv.conf", resolv),
            ("nsswitch.conf", nss),
        ] {
            let p = dir.path().join(f);
            fs::write(&p, text).expect("write the test's own /etc file");
            fs::set_permissions(&p, fs::Permissions::from_mode(0o644)).expect("chmod");
        }
        self.etc = Some(dir);
        self
    }

    fn label(&self) -> String {
        format!("[{}] {}", self.user.name(), self.name)
    }

    /// Hand the whole tree to the case's user.
    fn own(&self) {
        if self.user != User::Nobody {
            return;
        }
        fn walk(p: &Path) {
            let _ = std::os::unix::fs::lchown(p, Some(NOBODY), Some(NOBODY));
            if fs::symlink_metadata(p).is_ok_and(|m| m.is_dir()) {
                for e in fs::read_dir(p).expect("read_dir").flatten() {
                    walk(&e.path());
                }
            }
        }
        walk(&self.base);
    }

    fn put(&self, p: &Path, content: &[u8]) {
        fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        fs::write(p, content).unwrap_or_else(|e| panic!("write {}: {e}", p.display()));
        self.own();
    }

    /// A policy file allowing every command in the `net` preset with these hosts.
    fn policy(&self, hosts: &[String]) -> PathBuf {
        let n = self.policies.fetch_add(1, Ordering::Relaxed);
        let list = hosts
            .iter()
            .map(|h| format!("{h:?}"))
            .collect::<Vec<_>>()
            .join(", ");
        let p = self.base.join(format!("policy-{n}.toml"));
        self.put(
            &p,
            format!(
                "extends = [\"pinfold:default\"]\n[defaults]\naction = \"allow\"\nsandbox = \"net\"\n\
                 [sandbox.net]\nfs.write.allow = [\".\"]\nnetwork.allow = true\nnetwork.hosts = [{list}]\n"
            )
            .as_bytes(),
        );
        p
    }

    /// `argv` as the case's user, with the world's environment, in the project (and the
    /// test's own /etc files, when the world has them).
    fn cmd(&self, argv: &[String], extra_env: &[(&str, &str)]) -> Command {
        let mut full: Vec<String> = Vec::new();
        if let Some(etc) = &self.etc {
            full.extend(
                [
                    "unshare",
                    "--mount",
                    "--propagation",
                    "private",
                    "--",
                    "/bin/sh",
                    "-c",
                    ETC_OVERLAY_SH,
                    "sh",
                ]
                .map(String::from),
            );
            full.push(etc.path().display().to_string());
        }
        if self.user == User::Nobody {
            full.extend(
                [
                    "setpriv",
                    "--reuid=65534",
                    "--regid=65534",
                    "--clear-groups",
                    "--inh-caps=-all",
                    "--",
                ]
                .map(String::from),
            );
        }
        full.extend(argv.iter().cloned());
        let mut c = Command::new(&full[0]);
        c.args(&full[1..]);
        c.env_clear()
            .envs(&self.env)
            .envs(extra_env.iter().copied())
            .current_dir(&self.proj);
        c
    }

    /// The control: `argv` on the host, without pinfold (and so without any proxy variable).
    fn control(&self, argv: &[String]) -> Run {
        run_cmd(self.cmd(argv, &[]), argv.join(" "), TIMEOUT)
    }

    /// `pinfold exec -c POLICY -- ARGV…` as the case's user.
    fn exec(&self, policy: &Path, argv: &[String]) -> Run {
        self.exec_env(policy, argv, &[])
    }

    fn exec_env(&self, policy: &Path, argv: &[String], extra_env: &[(&str, &str)]) -> Run {
        let mut full = vec![
            pinfold_bin(),
            "exec".into(),
            "-c".into(),
            policy.display().to_string(),
            "--".into(),
        ];
        full.extend(argv.iter().cloned());
        let r = run_cmd(self.cmd(&full, extra_env), full.join(" "), TIMEOUT);
        if std::env::var_os("PINFOLD_TEST_SHOW").is_some() {
            eprintln!("{}:\n{}", self.label(), r.show());
        }
        assert!(
            !matches!(r.code, Some(125 | 126)) && !r.timed_out,
            "{}: pinfold refused to run the command or timed out\n{}",
            self.label(),
            r.show()
        );
        r
    }

    /// Write `.t/NAME` in the project; returns its path.
    fn script(&self, name: &str, body: &str) -> String {
        let p = self.proj.join(".t").join(name);
        self.put(&p, body.as_bytes());
        p.display().to_string()
    }

    /// A bash script: the start marker, then `t DESC CMD ARGS…`, which runs the command and
    /// prints `ESCAPED: DESC: <output>` if it succeeded, `refused: DESC: rc=N <output>` if not.
    fn bash(&self, name: &str, body: &str) -> Vec<String> {
        let text = format!(
            "echo {STARTED}\n\
             t() {{ local d=$1 out; shift; if out=$(\"$@\" 2>&1 </dev/null); then echo \"ESCAPED: $d: $out\"; else echo \"refused: $d: rc=$? $out\"; fi; }}\n\
             {body}\n"
        );
        vec!["bash".into(), self.script(&format!("{name}.sh"), &text)]
    }

    fn python(&self, name: &str, body: &str) -> Vec<String> {
        let text = format!(
            "import errno, os, socket, sys\nprint({STARTED:?}, flush=True)\n\
             def ename(e):\n    return errno.errorcode.get(e, str(e)) if e else 'OK'\n{body}\n"
        );
        vec![PY.into(), self.script(&format!("{name}.py"), &text)]
    }

    /// Forget the records written since the last look (a run that wrote none, or not one run).
    fn skip_records(&self) {
        let text = fs::read_to_string(self.state.join("ledger.jsonl")).unwrap_or_default();
        *self.read_records.lock().expect("lock") = text.lines().count();
    }

    /// The ledger records written since the last call, checked to be exactly one run:
    /// `exec_start`, its `egress` records, `exec_end` naming that start. Returns the egress
    /// records' `data` and the `exec_end` record's `data`.
    fn run_records(&self) -> (Vec<Value>, Value) {
        let text = fs::read_to_string(self.state.join("ledger.jsonl")).unwrap_or_default();
        let all: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).expect("a record is JSON"))
            .collect();
        let mut read = self.read_records.lock().expect("lock");
        let new = all[*read..].to_vec();
        *read = all.len();
        let kinds: Vec<&str> = new
            .iter()
            .map(|r| r["kind"].as_str().unwrap_or("?"))
            .collect();
        let ok_shape = kinds.len() >= 2
            && kinds[0] == "exec_start"
            && kinds[kinds.len() - 1] == "exec_end"
            && kinds[1..kinds.len() - 1].iter().all(|k| *k == "egress")
            && new[kinds.len() - 1]["data"]["start_seq"] == new[0]["seq"];
        assert!(
            ok_shape,
            "{}: expected exec_start, egress…, exec_end (naming that start) for one run; got {kinds:?}\n{new:#?}",
            self.label()
        );
        let egress = new[1..new.len() - 1]
            .iter()
            .map(|r| r["data"].clone())
            .collect();
        (egress, new[new.len() - 1]["data"].clone())
    }
}

/// `sh -c` body for [`World::with_own_etc`]: in the private mount namespace `unshare` made,
/// bind the files of `$1` over /etc's, then run the rest of the arguments.
const ETC_OVERLAY_SH: &str = "d=$1; shift; for f in hosts resolv.conf nsswitch.conf; do \
    mount --bind \"$d/$f\" \"/etc/$f\" || { echo \"the test's /etc: cannot bind $d/$f over /etc/$f\" >&2; exit 99; }; \
    done; exec \"$@\"";

/// `"127.0.0.1:PORT"`.
fn lo(port: u16) -> String {
    format!("127.0.0.1:{port}")
}

fn argv(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// The sandboxed script started, no attempt succeeded, the host saw nothing.
fn assert_refused(w: &World, r: &Run, host: &[String]) {
    let mut why = Vec::new();
    if !r.started() {
        why.push(format!(
            "the command never started inside the sandbox (exit {:?})",
            r.code
        ));
    }
    for e in r.lines("ESCAPED") {
        why.push(format!("attempt succeeded inside the sandbox: {e}"));
    }
    for h in host {
        why.push(format!("HOST SAW: {h}"));
    }
    assert!(
        why.is_empty(),
        "{}: SANDBOX FAILED:\n  - {}\n{}",
        w.label(),
        why.join("\n  - "),
        r.show()
    );
}

/// The control reached the host with every attempt (`want` of them are expected).
fn assert_control(w: &World, r: &Run, host: &[String], want: usize) {
    let ok = r.started()
        && r.lines("refused").is_empty()
        && r.lines("ESCAPED").len() == want
        && !host.is_empty();
    assert!(
        ok,
        "{}: CONTROL FAILED: without pinfold the attempts must reach the host, or the sandboxed run \
         proves nothing.\n  host saw: {host:?}\n{}",
        w.label(),
        r.show()
    );
}

/// A script's line saying the kernel refused to send at all (no route here; no socket at all
/// or EPERM/EACCES would be stricter layers), as opposed to a timeout waiting for an answer.
fn kernel_refused(line: &str) -> bool {
    [
        "errno=ENETUNREACH",
        "errno=EAFNOSUPPORT",
        "errno=EPERM",
        "errno=EACCES",
    ]
    .iter()
    .any(|e| line.contains(e))
}

/// The egress records of a run, as `(host, port, outcome)`.
fn decisions(egress: &[Value]) -> Vec<(String, u64, String)> {
    egress
        .iter()
        .map(|e| {
            (
                e["host"].as_str().unwrap_or("?").to_string(),
                e["port"].as_u64().unwrap_or(0),
                e["outcome"].as_str().unwrap_or("?").to_string(),
            )
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// 1-2. Allowed and blocked hosts, each protocol the proxy speaks
// ---------------------------------------------------------------------------------------------

both_users!(
    allowed_host_is_forwarded_and_recorded,
    bypassing_the_proxy_reaches_nothing,
    udp_and_dns_reach_nothing,
    landlock_allows_only_connect_to_the_proxy
);
root_only!(
    tunnel_open_when_the_command_ends_is_recorded,
    blocked_host_gets_403_and_a_refused_record,
    special_addresses_and_names_refused,
    git_ls_remote_over_https_through_connect,
    pip_download_from_a_local_index
);

/// Case 1: curl to a listed host goes through the proxy (HTTP forward, and SOCKS5 when only
/// `ALL_PROXY` is left), reaches the host server, and each decision is an `egress` record
/// (allowed, host, port, the address connected to, bytes both ways) between `exec_start` and
/// `exec_end`; `pinfold audit verify` accepts the ledger and `audit tail` shows the records.
fn allowed_host_is_forwarded_and_recorded(u: User) {
    let w = World::new(u, "allowed_host_is_forwarded_and_recorded");
    let a = HostTcp::bind("127.0.0.1");
    let policy = w.policy(&[lo(a.port)]);

    let r = w.exec(
        &policy,
        &argv(&[
            "curl",
            "-sS",
            "-m",
            "5",
            &format!("http://127.0.0.1:{}/allowed-http", a.port),
        ]),
    );
    let seen = a.seen();
    assert!(
        r.code == Some(0)
            && r.stdout.contains(&a.body)
            && seen.len() == 1
            && seen[0].starts_with("GET /allowed-http "),
        "{}: curl to the listed host must work through the proxy\n  host saw: {seen:?}\n{}",
        w.label(),
        r.show()
    );
    let (egress, end) = w.run_records();
    let addr = lo(a.port);
    assert!(
        egress.len() == 1
            && egress[0]["outcome"] == "allowed"
            && egress[0]["protocol"] == "http"
            && egress[0]["host"] == "127.0.0.1"
            && egress[0]["port"] == a.port
            && egress[0]["addr"] == addr.as_str()
            && egress[0]["bytes_up"].as_u64().unwrap_or(0) > 0
            && egress[0]["bytes_down"].as_u64().unwrap_or(0) > a.body.len() as u64,
        "{}: expected one allowed http egress record for {addr} with bytes: {egress:#?}",
        w.label()
    );
    assert_eq!(
        end["sandbox"]["network"],
        "proxy",
        "{}: exec_end: {end:#}",
        w.label()
    );

    // Without the HTTP variables curl uses ALL_PROXY (socks5h://127.0.0.1:3128).
    a.clear();
    let r = w.exec(
        &policy,
        &argv(&[
            "env",
            "-u",
            "http_proxy",
            "-u",
            "HTTP_PROXY",
            "curl",
            "-sS",
            "-m",
            "5",
            &format!("http://127.0.0.1:{}/allowed-socks", a.port),
        ]),
    );
    let seen = a.seen();
    assert!(
        r.code == Some(0)
            && r.stdout.contains(&a.body)
            && seen.len() == 1
            && seen[0].starts_with("GET /allowed-socks "),
        "{}: curl through ALL_PROXY (SOCKS5) to the listed host must work\n  host saw: {seen:?}\n{}",
        w.label(),
        r.show()
    );
    let (egress, _) = w.run_records();
    assert!(
        egress.len() == 1
            && egress[0]["outcome"] == "allowed"
            && egress[0]["protocol"] == "socks5"
            && egress[0]["addr"] == addr.as_str(),
        "{}: expected one allowed socks5 record: {egress:#?}",
        w.label()
    );

    let verify = run_cmd(
        w.cmd(&argv(&[&pinfold_bin(), "audit", "verify"]), &[]),
        "pinfold audit verify".into(),
        TIMEOUT,
    );
    assert_eq!(
        verify.code,
        Some(0),
        "{}: the ledger must verify\n{}",
        w.label(),
        verify.show()
    );
    let tail = run_cmd(
        w.cmd(&argv(&[&pinfold_bin(), "audit", "tail", "--json"]), &[]),
        "pinfold audit tail".into(),
        TIMEOUT,
    );
    let egress_lines = tail
        .stdout
        .lines()
        .filter(|l| l.contains("\"kind\":\"egress\""))
        .count();
    assert!(
        tail.code == Some(0) && egress_lines == 2,
        "{}: `pinfold audit tail --json` must show the two egress records\n{}",
        w.label(),
        tail.show()
    );
}

/// Case 1, continued: a tunnel still open when the command ends is a connection the command
/// made, and must be in the ledger like any other. The upstream (HOLD_PY) answers and then
/// keeps its side open, as slow or long-polling servers do; curl gives up after 1 s, having
/// received the answer. By SOCKS5 (plain) and by `CONNECT` (TLS, the openssl-made test CA):
/// the host served the request and curl got the body, so an `allowed` record with the address
/// and bytes must be between `exec_start` and `exec_end`.
fn tunnel_open_when_the_command_ends_is_recorded(u: User) {
    let w = World::new(u, "tunnel_open_when_the_command_ends_is_recorded");
    let pki = test_pki(&w.base);
    w.own();
    let (cert, key) = (pki.join("srv.pem"), pki.join("srv.key"));
    let plain = PyServer::start_script(HOLD_PY, &w.base, None, w.base.join("hold-plain.log"));
    let tls = PyServer::start_script(
        HOLD_PY,
        &w.base,
        Some((&cert, &key)),
        w.base.join("hold-tls.log"),
    );
    let policy = w.policy(&[lo(plain.port), lo(tls.port)]);
    let ca = pki.join("ca.pem").display().to_string();
    let mut missing = Vec::new();
    for (what, srv, args) in [
        (
            "socks5",
            &plain,
            vec![
                "--proxy".to_string(),
                format!("socks5h://127.0.0.1:{PROXY_PORT}"),
                format!("http://127.0.0.1:{}/held-socks", plain.port),
            ],
        ),
        (
            "connect",
            &tls,
            vec![
                "--cacert".to_string(),
                ca.clone(),
                format!("https://127.0.0.1:{}/held-connect", tls.port),
            ],
        ),
    ] {
        let mut a = argv(&["curl", "-sS", "-m", "1"]);
        a.extend(args);
        let r = w.exec(&policy, &a);
        let served = fs::read_to_string(&srv.log).unwrap_or_default();
        assert!(
            r.stdout.contains("held-open-body") && served.contains("served \"GET /held-"),
            "{}: {what}: the held upstream must have served curl through the proxy\n  server log: {served:?}\n{}",
            w.label(),
            r.show()
        );
        let (egress, _) = w.run_records();
        let addr = lo(srv.port);
        if !egress.iter().any(|e| {
            e["outcome"] == "allowed"
                && e["protocol"] == what
                && e["addr"] == addr.as_str()
                && e["bytes_down"].as_u64().unwrap_or(0) > 0
        }) {
            missing.push(format!(
                "a {what} tunnel to {addr} carried a request and its answer, but no allowed \
                 `egress` record for it is between exec_start and exec_end (records: {egress:?})\n{}",
                r.show()
            ));
        }
    }
    assert!(
        missing.is_empty(),
        "{}: LEDGER INCOMPLETE:\n  - {}",
        w.label(),
        missing.join("\n  - ")
    );
}

/// Case 2: a host:port not on the list, by HTTP forward, `CONNECT` and SOCKS5: `403` with the
/// body `pinfold egress: <reason>` (HTTP), curl failing (CONNECT, SOCKS5), one `refused` record
/// each, and the host listener never contacted. (The listed port of the same address works in
/// the same run, so the refusals are the allowlist's doing.)
fn blocked_host_gets_403_and_a_refused_record(u: User) {
    let w = World::new(u, "blocked_host_gets_403_and_a_refused_record");
    let (a, b) = (HostTcp::bind("127.0.0.1"), HostTcp::bind("127.0.0.1"));
    let policy = w.policy(&[lo(a.port)]);

    let r = w.exec(
        &policy,
        &argv(&[
            "curl",
            "-sS",
            "-m",
            "5",
            "-w",
            "\nstatus=%{http_code}\n",
            &format!("http://127.0.0.1:{}/blocked", b.port),
        ]),
    );
    let seen = b.seen();
    assert!(
        r.stdout.contains("status=403")
            && r.stdout
                .contains("pinfold egress: host and port are not on the allowlist")
            && seen.is_empty(),
        "{}: an unlisted port must get 403 with the reason, and the host nothing\n  host saw: {seen:?}\n{}",
        w.label(),
        r.show()
    );
    let (egress, _) = w.run_records();
    assert!(
        egress.len() == 1
            && egress[0]["outcome"] == "refused"
            && egress[0]["host"] == "127.0.0.1"
            && egress[0]["port"] == b.port
            && egress[0]["addr"].is_null()
            && egress[0]["reason"]
                .as_str()
                .is_some_and(|s| s.contains("not on the allowlist")),
        "{}: expected one refused record without an address: {egress:#?}",
        w.label()
    );

    let r = w.exec(
        &policy,
        &w.bash(
            "blocked",
            &format!(
                "t connect curl -sS -m 5 -p http://127.0.0.1:{bp}/connect\n\
                 t socks5 curl -sS -m 5 --proxy socks5h://127.0.0.1:{PROXY_PORT} http://127.0.0.1:{bp}/socks\n\
                 curl -sS -m 5 -o /dev/null -w 'allowed=%{{http_code}}\\n' http://127.0.0.1:{ap}/allowed\n",
                bp = b.port,
                ap = a.port
            ),
        ),
    );
    assert_refused(&w, &r, &b.seen());
    assert!(
        r.stdout.contains("allowed=200"),
        "{}: the listed port must work in the same run\n{}",
        w.label(),
        r.show()
    );
    let (egress, _) = w.run_records();
    let d = decisions(&egress);
    let b_port = u64::from(b.port);
    let want = [
        ("127.0.0.1".to_string(), b_port, "refused".to_string()),
        ("127.0.0.1".to_string(), b_port, "refused".to_string()),
        (
            "127.0.0.1".to_string(),
            u64::from(a.port),
            "allowed".to_string(),
        ),
    ];
    let protocols: Vec<&str> = egress
        .iter()
        .map(|e| e["protocol"].as_str().unwrap_or("?"))
        .collect();
    assert!(
        d == want && protocols == ["connect", "socks5", "http"],
        "{}: expected refused connect, refused socks5, allowed http: {egress:#?}",
        w.label()
    );
}

// ---------------------------------------------------------------------------------------------
// 3. Going around the proxy
// ---------------------------------------------------------------------------------------------

/// Case 3: with `127.0.0.1:A` listed, a command that ignores the proxy reaches nothing: `curl
/// --noproxy '*'` to A, `env -u http_proxy -u HTTP_PROXY curl` to an unlisted port B (curl falls
/// back to `ALL_PROXY`, which refuses it), curl with every proxy variable removed to A, bash's
/// `/dev/tcp/127.0.0.1/A`, and python3 connecting straight to A on a non-loopback address of
/// the host ([`netns::PUBLIC`], in the case's own network namespace). The host listeners (bound
/// to 0.0.0.0, so every address reaches them) see nothing; the same script without pinfold
/// reaches them with every attempt.
fn bypassing_the_proxy_reaches_nothing(u: User) {
    let _net = netns::TestNet::enter();
    let script = |w: &World, a: &HostTcp, b: &HostTcp| {
        let tcp_py = w.script(
            "tcp.py",
            "import socket, sys\n\
             try:\n\
             \x20   s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3)\n\
             except OSError as e:\n\
             \x20   print(e); sys.exit(1)\n\
             s.sendall(f'GET {sys.argv[3]} HTTP/1.0\\r\\n\\r\\n'.encode())\n\
             data = s.recv(4096)\n\
             print(data.decode(errors='replace'))\n\
             sys.exit(0 if data else 1)\n",
        );
        let body = format!(
            "t noproxy curl -sS -m 3 --noproxy '*' http://127.0.0.1:{ap}/noproxy\n\
             t env-u-http env -u http_proxy -u HTTP_PROXY curl -sS -f -m 3 http://127.0.0.1:{bp}/env-u-http\n\
             t env-u-all env -u http_proxy -u HTTP_PROXY -u https_proxy -u HTTPS_PROXY -u all_proxy -u ALL_PROXY curl -sS -m 3 http://127.0.0.1:{ap}/env-u-all\n\
             t dev-tcp bash -c 'exec 3<>/dev/tcp/127.0.0.1/{ap} && printf \"GET /dev-tcp HTTP/1.0\\r\\n\\r\\n\" >&3 && cat <&3'\n\
             t python-loopback {PY} {tcp_py} 127.0.0.1 {ap} /python-loopback\n\
             t python-direct-ip {PY} {tcp_py} {ip} {ap} /python-direct-ip\n",
            ap = a.port,
            bp = b.port,
            ip = netns::PUBLIC,
        );
        w.bash("bypass", &body)
    };
    let attempts = 6;

    let c = World::new(u, "bypassing_the_proxy_reaches_nothing (control)");
    let (a, b) = (HostTcp::bind("0.0.0.0"), HostTcp::bind("0.0.0.0"));
    let r = c.control(&script(&c, &a, &b));
    let mut seen = a.seen();
    seen.extend(b.seen());
    assert_control(&c, &r, &seen, attempts);
    assert_eq!(
        seen.len(),
        attempts,
        "{}: control: each attempt must reach the host once: {seen:?}\n{}",
        c.label(),
        r.show()
    );

    let w = World::new(u, "bypassing_the_proxy_reaches_nothing");
    let (a, b) = (HostTcp::bind("0.0.0.0"), HostTcp::bind("0.0.0.0"));
    let policy = w.policy(&[lo(a.port)]);
    let r = w.exec(&policy, &script(&w, &a, &b));
    let mut seen = a.seen();
    seen.extend(b.seen());
    assert_refused(&w, &r, &seen);
    // Direct connections die at Landlock (EACCES), not for want of a listener.
    for what in ["dev-tcp", "python-loopback", "python-direct-ip"] {
        let l = r
            .lines("refused")
            .into_iter()
            .find(|l| l.starts_with(&format!("refused: {what}:")))
            .unwrap_or("");
        assert!(
            l.contains("Permission denied"),
            "{}: {what} must fail with EACCES: {l:?}\n{}",
            w.label(),
            r.show()
        );
    }
    // The only decision the proxy made: the SOCKS5 fallback, refused.
    let (egress, _) = w.run_records();
    assert_eq!(
        decisions(&egress),
        [(
            "127.0.0.1".to_string(),
            u64::from(b.port),
            "refused".to_string()
        )],
        "{}: {egress:#?}",
        w.label()
    );
}

// ---------------------------------------------------------------------------------------------
// 4. UDP and DNS
// ---------------------------------------------------------------------------------------------

/// The name the DNS attempts look up; the case's [`HostDns`] answers it with [`netns::PUBLIC`].
const EXFIL_NAME: &str = "exfil.pinfold-test.test";

/// Case 4, in the case's own network namespace: UDP to a host socket on 127.0.0.1 and on a
/// non-loopback address ([`netns::PUBLIC`]; the host answers `pong`), a DNS query to the case's
/// resolver ([`netns::RESOLVER`], a [`HostDns`]), a lookup through the system resolver (the
/// case's own resolv.conf naming that resolver), and `dig @RESOLVER` where dig exists. The
/// control, without pinfold, gets every answer and the resolver logs its queries. Inside,
/// nothing reaches the host or the resolver, nothing answers, and datagrams to anything but
/// the sandbox's own loopback are refused by the kernel at `sendto` (no route): no packet
/// leaves. Each attempt waits at most 1 s.
fn udp_and_dns_reach_nothing(u: User) {
    let _net = netns::TestNet::enter();
    let public = netns::PUBLIC.to_string();
    let script = |w: &World, l: &HostUdp, g: &HostUdp| {
        w.python(
            "udp",
            &format!(
                "for addr in [('127.0.0.1', {lp}), ('{public}', {gp})]:\n\
                 \x20   try:\n\
                 \x20       s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(1)\n\
                 \x20       s.sendto(b'ping-from-sandbox', addr); data, frm = s.recvfrom(100)\n\
                 \x20       print(f'ESCAPED: udp {{addr}}: got {{data!r}} from {{frm}}')\n\
                 \x20   except OSError as e:\n\
                 \x20       print(f'refused: udp {{addr}}: errno={{ename(e.errno)}} {{e}}')\n",
                lp = l.port,
                gp = g.port,
            ),
        )
    };
    let seen = |l: &HostUdp, g: &HostUdp| {
        let mut v = l.seen();
        v.extend(g.seen());
        v
    };
    let dns = HostDns::start(netns::RESOLVER, &[(EXFIL_NAME, netns::PUBLIC)]);

    let c = World::new(u, "udp_and_dns_reach_nothing (control)").with_own_etc(&[]);
    let (l, g) = (HostUdp::bind("127.0.0.1"), HostUdp::bind(&public));
    let r = c.control(&script(&c, &l, &g));
    assert_control(&c, &r, &seen(&l, &g), 2);

    let w = World::new(u, "udp_and_dns_reach_nothing").with_own_etc(&[]);
    let (l, g) = (HostUdp::bind("127.0.0.1"), HostUdp::bind(&public));
    let policy = w.policy(&[lo(1)]);
    let r = w.exec(&policy, &script(&w, &l, &g));
    assert_refused(&w, &r, &seen(&l, &g));
    let (egress, _) = w.run_records();
    assert!(
        egress.is_empty(),
        "{}: UDP must not involve the proxy: {egress:#?}",
        w.label()
    );
    let line = r
        .lines("refused: udp")
        .into_iter()
        .find(|x| x.contains(public.as_str()))
        .unwrap_or("");
    assert!(
        kernel_refused(line),
        "{}: UDP to {public} must fail at sendto (no route), not merely go unanswered: {line:?}\n{}",
        w.label(),
        r.show()
    );

    // DNS: a query to the resolver by address, then the system resolver.
    let resolver = netns::RESOLVER;
    let dns_script = |w: &World| {
        w.python(
            "dns",
            &format!(
                "import struct, time\n\
                 name = {EXFIL_NAME:?}\n\
                 query = b'\\x12\\x34\\x01\\x00\\x00\\x01\\x00\\x00\\x00\\x00\\x00\\x00' + b''.join(bytes([len(p)]) + p.encode() for p in name.split('.')) + b'\\x00\\x00\\x01\\x00\\x01'\n\
                 t0 = time.monotonic()\n\
                 try:\n\
                 \x20   s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(1)\n\
                 \x20   s.sendto(query, ('{resolver}', 53))\n\
                 \x20   print('sent: dns query to {resolver}:53 left sendto')\n\
                 \x20   print('ESCAPED: dns answer', s.recvfrom(512))\n\
                 except OSError as e:\n\
                 \x20   print(f'refused: dns {resolver}:53: errno={{ename(e.errno)}} {{e}}')\n\
                 try:\n\
                 \x20   print('ESCAPED: resolver', socket.getaddrinfo(name, 80))\n\
                 except OSError as e:\n\
                 \x20   print(f'refused: resolver: {{e}}')\n\
                 print(f'took {{time.monotonic() - t0:.2f}} s')\n"
            ),
        )
    };
    let r = c.control(&dns_script(&c));
    let asked = dns.seen();
    assert_control(&c, &r, &asked, 2);
    assert!(
        r.stdout.contains(&format!("'{public}'"))
            && asked
                .iter()
                .any(|q| q.starts_with(&format!("{EXFIL_NAME} 1 "))),
        "{}: CONTROL FAILED: the system resolver must answer {EXFIL_NAME} with {public} from the \
         case's own resolver\n  resolver saw: {asked:?}\n{}",
        c.label(),
        r.show()
    );
    dns.clear();
    let r = w.exec(&policy, &dns_script(&w));
    assert_refused(&w, &r, &dns.seen());
    assert!(
        !r.stdout.contains("sent: dns query")
            && r.lines(&format!("refused: dns {resolver}:53"))
                .iter()
                .any(|l| kernel_refused(l)),
        "{}: a DNS query to {resolver} must fail at sendto (no route), not merely go unanswered\n{}",
        w.label(),
        r.show()
    );
    let (egress, _) = w.run_records();
    assert!(
        egress.is_empty(),
        "{}: DNS must not involve the proxy: {egress:#?}",
        w.label()
    );
    if Path::new("/usr/bin/dig").exists() {
        let dig = |w: &World| {
            w.bash(
                "dig",
                &format!("t dig dig +time=1 +tries=1 +short @{resolver} {EXFIL_NAME}"),
            )
        };
        let r = c.control(&dig(&c));
        assert_control(&c, &r, &dns.seen(), 1);
        dns.clear();
        let r = w.exec(&policy, &dig(&w));
        assert_refused(&w, &r, &dns.seen());
        let (egress, _) = w.run_records();
        assert!(
            egress.is_empty(),
            "{}: dig must not involve the proxy: {egress:#?}",
            w.label()
        );
    } else {
        eprintln!(
            "udp_and_dns_reach_nothing: dig is not installed; the python3 query to {resolver}:53 stands in for it"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// 5. Landlock inside the namespace
// ---------------------------------------------------------------------------------------------

/// Case 5: inside, binding a TCP port (IPv4 and IPv6) fails with EACCES, and connecting to a
/// loopback port other than the proxy's is refused by Landlock (EACCES) rather than finding
/// nothing there (ECONNREFUSED). The proxy's port itself connects. `listen()` on an unbound
/// socket gets an ephemeral port from the kernel without `bind()` (Landlock does not see it);
/// connecting to that port from inside is still EACCES, so such a listener is unreachable.
/// The control shows the host's answers: bind works, a closed port is ECONNREFUSED.
fn landlock_allows_only_connect_to_the_proxy(u: User) {
    let body = "def attempt(name, f):\n\
                \x20   try:\n\
                \x20       print(f'RESULT {name} OK {f()}')\n\
                \x20   except OSError as e:\n\
                \x20       print(f'RESULT {name} {ename(e.errno)}')\n\
                def bind(fam, host):\n\
                \x20   s = socket.socket(fam); s.bind((host, 0)); s.listen(); return s.getsockname()[1]\n\
                def connect(fam, host, port):\n\
                \x20   s = socket.socket(fam); s.settimeout(3); s.connect((host, port)); s.close(); return port\n\
                attempt('bind4', lambda: bind(socket.AF_INET, '127.0.0.1'))\n\
                attempt('bind6', lambda: bind(socket.AF_INET6, '::1'))\n\
                attempt('connect4-closed', lambda: connect(socket.AF_INET, '127.0.0.1', 9))\n\
                attempt('connect6-closed', lambda: connect(socket.AF_INET6, '::1', 9))\n\
                lsock = socket.socket()\n\
                try:\n\
                \x20   lsock.listen(); port = lsock.getsockname()[1]\n\
                \x20   print(f'RESULT autobind-listen OK {port}')\n\
                \x20   attempt('connect-autobound', lambda: connect(socket.AF_INET, '127.0.0.1', port))\n\
                except OSError as e:\n\
                \x20   print(f'RESULT autobind-listen {ename(e.errno)}')\n\
                if len(sys.argv) > 1:\n\
                \x20   attempt('connect-proxy', lambda: connect(socket.AF_INET, '127.0.0.1', int(sys.argv[1])))\n";
    let results = |r: &Run| -> BTreeMap<String, String> {
        r.lines("RESULT ")
            .iter()
            .filter_map(|l| {
                let mut p = l.split_whitespace().skip(1);
                Some((p.next()?.to_string(), p.next()?.to_string()))
            })
            .collect()
    };

    let c = World::new(u, "landlock_allows_only_connect_to_the_proxy (control)");
    let r = c.control(&c.python("landlock", body));
    let got = results(&r);
    assert!(
        got.get("bind4").map(String::as_str) == Some("OK")
            && got.get("connect4-closed").map(String::as_str) == Some("ECONNREFUSED")
            && got.get("connect-autobound").map(String::as_str) == Some("OK"),
        "{}: CONTROL FAILED: on the host, bind must work and a closed port be ECONNREFUSED: {got:?}\n{}",
        c.label(),
        r.show()
    );

    let w = World::new(u, "landlock_allows_only_connect_to_the_proxy");
    let policy = w.policy(&[lo(1)]);
    let mut a = w.python("landlock", body);
    a.push(PROXY_PORT.to_string());
    let r = w.exec(&policy, &a);
    let got = results(&r);
    let want = [
        ("bind4", "EACCES"),
        ("bind6", "EACCES"),
        ("connect4-closed", "EACCES"),
        ("connect6-closed", "EACCES"),
        ("connect-proxy", "OK"),
    ];
    let mut why: Vec<String> = want
        .iter()
        .filter(|(k, v)| got.get(*k).map(String::as_str) != Some(*v))
        .map(|(k, v)| format!("{k}: expected {v}, got {:?}", got.get(*k)))
        .collect();
    if got.get("autobind-listen").map(String::as_str) == Some("OK")
        && got.get("connect-autobound").map(String::as_str) != Some("EACCES")
    {
        why.push(format!(
            "an autobound listener was reachable from inside: {:?}",
            got.get("connect-autobound")
        ));
    }
    assert!(
        r.started() && why.is_empty(),
        "{}: LANDLOCK FAILED:\n  - {}\n{}",
        w.label(),
        why.join("\n  - "),
        r.show()
    );
    let (_, end) = w.run_records();
    let ll = &end["sandbox"]["landlock"];
    assert!(
        ll["tcp"] == true && ll["tcp_connect_port"] == PROXY_PORT,
        "{}: exec_end must report Landlock's TCP rules (connect only to {PROXY_PORT}): {end:#}",
        w.label()
    );
}

// ---------------------------------------------------------------------------------------------
// 6. Special addresses, names, `*.x` versus the apex
// ---------------------------------------------------------------------------------------------

/// Names the case's own resolver answers in case 6: a "public" web server and, below a
/// wildcard, the metadata address.
const PUBLIC_NAME: &str = "public.pinfold-test.test";
const WILD_META_NAME: &str = "meta.wild.pinfold-test.test";
/// Another name for 127.0.0.1 in the case's own /etc/hosts.
const LOOPBACK_ALIAS: &str = "loopback-alias.pinfold-test.test";

/// Case 6, in the case's own network namespace and name service: a host listener A on 0.0.0.0
/// (so every address of the namespace reaches it), a metadata-like listener on
/// 169.254.169.254:80 ([`netns::METADATA`], also the address of `metadata.google.internal` in
/// the case's hosts file) and a web server on [`netns::PUBLIC`]:80 (`public.pinfold-test.test`
/// in the case's resolver). A control without pinfold reaches each of them by every URL below.
/// Through the proxy, with only `127.0.0.1:A` listed: the metadata address, names not on the
/// list, other addresses of this host (127.0.0.2, 0.0.0.0, `::ffff:127.0.0.2`, the non-loopback
/// address) on A's port and `localhost` are all `403`, `refused` records without an address; no
/// listener sees anything and names not on the list are never even looked up. Then
/// `localhost:A` listed exactly works while `127.0.0.1:A` and another name for 127.0.0.1 (in
/// the case's hosts file) are refused. `*.localhost` is a configuration error (pinfold does
/// not start). `*.wild.pinfold-test.test` covers `meta.wild.pinfold-test.test`, which the
/// case's resolver answers with the metadata address: refused for that address (the control
/// reaches the metadata listener by it). `*.pinfold-test.invalid:A` does not cover the apex or
/// `evil-pinfold-test.invalid` (neither looked up), and its subdomain is refused because the
/// resolver answers NXDOMAIN.
fn special_addresses_and_names_refused(u: User) {
    let _net = netns::TestNet::enter();
    let dns = HostDns::start(
        netns::RESOLVER,
        &[
            (PUBLIC_NAME, netns::PUBLIC),
            (WILD_META_NAME, netns::METADATA),
        ],
    );
    let w = World::new(u, "special_addresses_and_names_refused").with_own_etc(&[
        (netns::METADATA_NAME, netns::METADATA.to_string()),
        (LOOPBACK_ALIAS, "127.0.0.1".to_string()),
    ]);
    let a = HostTcp::bind("0.0.0.0");
    let meta = HostTcp::bind_at(&netns::METADATA.to_string(), 80);
    let web = HostTcp::bind_at(&netns::PUBLIC.to_string(), 80);
    let p = a.port;
    let probe = |name: &str, urls: &[String], tail: &str| {
        let mut body: String = urls
            .iter()
            .map(|url| format!("t {url} curl -sS -f -m 5 {url}\n"))
            .collect();
        body.push_str(tail);
        w.bash(name, &body)
    };
    // What reached any listener, and the names the case's resolver was asked for.
    let seen_all = || {
        let mut v = a.seen();
        v.extend(
            meta.seen()
                .iter()
                .map(|s| format!("metadata listener: {s}")),
        );
        v.extend(web.seen().iter().map(|s| format!("web listener: {s}")));
        v
    };
    let asked = |v: &[String], name: &str| v.iter().any(|q| q.starts_with(&format!("{name} ")));
    let clear_all = || {
        a.clear();
        meta.clear();
        web.clear();
        dns.clear();
    };

    // Only the IP literal is listed.
    let (m, public) = (netns::METADATA, netns::PUBLIC);
    let urls = vec![
        format!("http://{m}/latest/meta-data/"),
        format!("http://{m}:{p}/metadata"),
        format!("http://{}/computeMetadata/v1/", netns::METADATA_NAME),
        format!("http://{PUBLIC_NAME}/"),
        format!("http://127.0.0.2:{p}/other-loopback"),
        format!("http://0.0.0.0:{p}/unspecified"),
        format!("http://[::ffff:127.0.0.2]:{p}/mapped"),
        format!("http://localhost:{p}/name-of-listed-ip"),
        format!("http://{public}:{p}/host-ip"),
    ];
    let r = w.control(&probe("ip-listed", &urls, ""));
    let (seen, resolved) = (seen_all(), dns.seen());
    assert_control(&w, &r, &seen, urls.len());
    assert!(
        meta.seen().len() == 2 && web.seen().len() == 1 && asked(&resolved, PUBLIC_NAME),
        "{}: CONTROL FAILED: the metadata listener must see 2 requests and the web server 1, \
         {PUBLIC_NAME} resolved by the case's resolver\n  seen: {seen:?}\n  resolver: {resolved:?}\n{}",
        w.label(),
        r.show()
    );
    clear_all();
    let policy = w.policy(&[lo(p)]);
    let r = w.exec(&policy, &probe("ip-listed", &urls, ""));
    let mut seen = seen_all();
    seen.extend(
        dns.seen()
            .iter()
            .map(|q| format!("the resolver was asked: {q}")),
    );
    assert_refused(&w, &r, &seen);
    let (egress, _) = w.run_records();
    let d = decisions(&egress);
    assert!(
        d.len() == urls.len()
            && d.iter().all(|(_, _, o)| o == "refused")
            && egress.iter().all(|e| e["addr"].is_null()),
        "{}: every one of {} requests must be a refused record with no address: {egress:#?}",
        w.label(),
        urls.len()
    );

    // The name listed exactly.
    let policy = w.policy(&[format!("localhost:{p}")]);
    let urls = [
        format!("http://127.0.0.1:{p}/ip-of-listed-name"),
        format!("http://{LOOPBACK_ALIAS}:{p}/other-name"),
    ];
    let exact_probe = format!(
        "curl -sS -m 5 -o /dev/null -w 'exact=%{{http_code}}\\n' http://localhost:{p}/exact\n"
    );
    let r = w.exec(&policy, &probe("name-listed", &urls, &exact_probe));
    let seen = seen_all();
    let exact: Vec<&String> = seen
        .iter()
        .filter(|s| s.starts_with("GET /exact "))
        .collect();
    let others: Vec<String> = seen
        .iter()
        .filter(|s| !s.starts_with("GET /exact "))
        .cloned()
        .collect();
    assert_refused(&w, &r, &others);
    assert!(
        r.stdout.contains("exact=200") && exact.len() == 1,
        "{}: `localhost:{p}` listed exactly must reach the host listener\n  host saw: {seen:?}\n{}",
        w.label(),
        r.show()
    );
    let (egress, _) = w.run_records();
    assert_eq!(
        egress.iter().filter(|e| e["outcome"] == "allowed").count(),
        1,
        "{}: {egress:#?}",
        w.label()
    );
    clear_all();

    // A wildcard over a special-use name space is not a valid entry: pinfold does not start.
    let policy = w.policy(&[format!("*.localhost:{p}")]);
    let r = w.exec(
        &policy,
        &probe(
            "wildcard-localhost",
            &[format!("http://sub.localhost:{p}/sub")],
            "",
        ),
    );
    assert!(
        !r.started()
            && r.code == Some(2)
            && r.stderr.contains("invalid host")
            && seen_all().is_empty(),
        "{}: `*.localhost` must be a configuration error, nothing run\n{}",
        w.label(),
        r.show()
    );
    w.skip_records();

    // A listed wildcard whose subdomain resolves to the metadata address: refused for the
    // address, after the lookup; the control reaches the metadata listener by that name.
    let url = [format!("http://{WILD_META_NAME}/latest/meta-data/")];
    let r = w.control(&probe("wildcard-meta", &url, ""));
    assert_control(&w, &r, &meta.seen(), 1);
    clear_all();
    let policy = w.policy(&["*.wild.pinfold-test.test".to_string()]);
    let r = w.exec(&policy, &probe("wildcard-meta", &url, ""));
    assert_refused(&w, &r, &seen_all());
    let (egress, _) = w.run_records();
    let resolved = dns.seen();
    assert!(
        egress.len() == 1
            && egress[0]["outcome"] == "refused"
            && egress[0]["addr"].is_null()
            && egress[0]["reason"]
                .as_str()
                .is_some_and(|s| s.contains(&format!("resolves to {m}, a cloud metadata address")))
            && asked(&resolved, WILD_META_NAME),
        "{}: {WILD_META_NAME} must be looked up and refused for its metadata address\n  \
         resolver: {resolved:?}\n  records: {egress:#?}",
        w.label()
    );
    clear_all();

    // A wildcard covers subdomains only: not the apex, not a look-alike. `.invalid` names never
    // resolve (RFC 6761): the case's resolver answers NXDOMAIN, so the listed subdomain is
    // refused at resolution.
    let policy = w.policy(&[format!("*.pinfold-test.invalid:{p}")]);
    let urls = [
        format!("http://pinfold-test.invalid:{p}/apex"),
        format!("http://evil-pinfold-test.invalid:{p}/look-alike"),
        format!("http://sub.pinfold-test.invalid:{p}/sub"),
    ];
    let r = w.exec(&policy, &probe("wildcard", &urls, ""));
    assert_refused(&w, &r, &seen_all());
    let (egress, _) = w.run_records();
    let reasons: Vec<(&str, &str)> = egress
        .iter()
        .map(|e| {
            (
                e["host"].as_str().unwrap_or("?"),
                e["reason"].as_str().unwrap_or(""),
            )
        })
        .collect();
    let resolved = dns.seen();
    assert!(
        egress.len() == 3
            && egress.iter().all(|e| e["outcome"] == "refused")
            && reasons[0].1.contains("not on the allowlist")
            && reasons[1].1.contains("not on the allowlist")
            && reasons[2].1.contains("does not resolve")
            && asked(&resolved, "sub.pinfold-test.invalid")
            && resolved
                .iter()
                .all(|q| q.starts_with("sub.pinfold-test.invalid ")),
        "{}: the apex and the look-alike are not on the list (and not looked up); the subdomain \
         is, and fails to resolve\n  resolver: {resolved:?}\n  reasons: {reasons:#?}",
        w.label()
    );
}

// ---------------------------------------------------------------------------------------------
// 7-8. Real tools: git over HTTPS (CONNECT), pip over HTTP
// ---------------------------------------------------------------------------------------------

/// A test CA and a server certificate for IP 127.0.0.1 it signed, made with the `openssl` CLI in
/// `base/pki`: `ca.pem`, `srv.pem`, `srv.key`.
fn test_pki(base: &Path) -> PathBuf {
    let pki = base.join("pki");
    fs::create_dir_all(&pki).expect("mkdir");
    let ossl = |args: &[&str]| {
        let o = Command::new("openssl")
            .args(args)
            .current_dir(&pki)
            .output()
            .expect("run openssl (is it installed?)");
        assert!(
            o.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    };
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
    ];
    ossl(
        &[
            &["req", "-x509"],
            &ec[..],
            &[
                "-keyout",
                "ca.key",
                "-out",
                "ca.pem",
                "-days",
                "2",
                "-subj",
                "/CN=pinfold egress test CA",
                "-addext",
                "basicConstraints=critical,CA:TRUE",
                "-addext",
                "keyUsage=critical,keyCertSign",
            ],
        ]
        .concat(),
    );
    ossl(
        &[
            &["req"],
            &ec[..],
            &[
                "-keyout",
                "srv.key",
                "-out",
                "srv.csr",
                "-subj",
                "/CN=127.0.0.1",
            ],
        ]
        .concat(),
    );
    fs::write(
        pki.join("ext.cnf"),
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
    )
    .expect("write");
    ossl(&[
        "x509",
        "-req",
        "-in",
        "srv.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "srv.pem",
        "-days",
        "2",
        "-extfile",
        "ext.cnf",
    ]);

    pki
}

/// Case 7: `git ls-remote https://127.0.0.1:PORT/repo.git` inside, through `CONNECT`, against a
/// bare repository served by python3's http.server over TLS (a certificate for IP 127.0.0.1
/// from a CA made here with openssl, given to git as `GIT_SSL_CAINFO`). git prints the
/// branch's commit; the server logged the dumb-HTTP requests; the records are allowed
/// `connect`s. With the port not listed, git fails and the server logs nothing.
fn git_ls_remote_over_https_through_connect(u: User) {
    let w = World::new(u, "git_ls_remote_over_https_through_connect");
    let pki = test_pki(&w.base);

    // A bare repository with one commit, prepared for dumb HTTP.
    let www = w.base.join("www");
    let git = |args: &[&str]| {
        let o = Command::new("git")
            .args(args)
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", &w.base)
            .envs([
                ("GIT_AUTHOR_NAME", "t"),
                ("GIT_AUTHOR_EMAIL", "t@example.invalid"),
                ("GIT_COMMITTER_NAME", "t"),
                ("GIT_COMMITTER_EMAIL", "t@example.invalid"),
            ])
            .output()
            .expect("run git");
        assert!(
            o.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    let bare = www.join("repo.git");
    let work = w.base.join("work");
    git(&[
        "init",
        "-q",
        "--bare",
        "-b",
        "main",
        &bare.display().to_string(),
    ]);
    git(&["init", "-q", "-b", "main", &work.display().to_string()]);
    fs::write(work.join("README"), "over the egress proxy\n").expect("write");
    let wd = work.display().to_string();
    git(&["-C", &wd, "add", "README"]);
    git(&["-C", &wd, "commit", "-q", "-m", "initial"]);
    let head = git(&["-C", &wd, "rev-parse", "HEAD"]);
    git(&["-C", &wd, "push", "-q", &bare.display().to_string(), "main"]);
    git(&["-C", &bare.display().to_string(), "update-server-info"]);
    w.own();

    let srv = PyServer::start(
        &www,
        Some((&pki.join("srv.pem"), &pki.join("srv.key"))),
        w.base.join("git-server.log"),
    );
    let ca = pki.join("ca.pem").display().to_string();
    let url = format!("https://127.0.0.1:{}/repo.git", srv.port);
    let ls = argv(&["git", "ls-remote", &url]);

    let policy = w.policy(&[lo(srv.port)]);
    let r = w.exec_env(&policy, &ls, &[("GIT_SSL_CAINFO", &ca)]);
    let reqs = srv.requests();
    assert!(
        r.code == Some(0)
            && r.stdout.contains(&format!("{head}\trefs/heads/main"))
            && reqs.iter().any(|l| l.contains("GET /repo.git/info/refs")),
        "{}: git ls-remote over HTTPS through the proxy must list {head}\n  server log: {reqs:?}\n{}",
        w.label(),
        r.show()
    );
    let (egress, _) = w.run_records();
    assert!(
        !egress.is_empty()
            && egress.iter().all(|e| e["outcome"] == "allowed"
                && e["protocol"] == "connect"
                && e["port"] == srv.port)
            && egress
                .iter()
                .all(|e| e["bytes_down"].as_u64().unwrap_or(0) > 0),
        "{}: expected allowed connect records with bytes: {egress:#?}",
        w.label()
    );

    let before = srv.requests().len();
    let policy = w.policy(&[lo(1)]);
    let r = w.exec_env(&policy, &ls, &[("GIT_SSL_CAINFO", &ca)]);
    let after = srv.requests();
    assert!(
        r.code != Some(0) && after.len() == before && r.stderr.contains("403"),
        "{}: with the port not listed, git must fail with the proxy's 403 and the server see nothing\n  server log: {after:?}\n{}",
        w.label(),
        r.show()
    );
    let (egress, _) = w.run_records();
    assert!(
        !egress.is_empty()
            && egress
                .iter()
                .all(|e| e["outcome"] == "refused" && e["protocol"] == "connect"),
        "{}: {egress:#?}",
        w.label()
    );
}

/// Case 8: `pip download --no-deps --index-url http://127.0.0.1:PORT/simple demo -d out` inside,
/// through the proxy (HTTP forward), against a python3 http.server serving a PEP 503 index with
/// a hand-made wheel. The wheel lands in the project, byte for byte; the server logged the
/// index and file requests; the records are allowed. With the port not listed, pip fails and
/// the server logs nothing.
fn pip_download_from_a_local_index(u: User) {
    let w = World::new(u, "pip_download_from_a_local_index");
    let idx = w.base.join("index");
    let wheel = idx.join("files/demo-1.0-py3-none-any.whl");
    fs::create_dir_all(wheel.parent().expect("parent")).expect("mkdir");
    fs::create_dir_all(idx.join("simple/demo")).expect("mkdir");
    let mk = w.base.join("mkwheel.py");
    fs::write(&mk, MKWHEEL_PY).expect("write");
    let o = Command::new(PY)
        .arg(&mk)
        .arg(&wheel)
        .output()
        .expect("run python3");
    assert!(
        o.status.success(),
        "make the wheel: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let bytes = fs::read(&wheel).expect("read the wheel");
    let sha = {
        let o = Command::new("sha256sum")
            .arg(&wheel)
            .output()
            .expect("sha256sum");
        String::from_utf8_lossy(&o.stdout)
            .split_whitespace()
            .next()
            .expect("a digest")
            .to_string()
    };
    fs::write(
        idx.join("simple/demo/index.html"),
        format!("<!DOCTYPE html>\n<html><body><a href=\"/files/demo-1.0-py3-none-any.whl#sha256={sha}\">demo-1.0-py3-none-any.whl</a></body></html>\n"),
    )
    .expect("write the index");
    w.own();
    let srv = PyServer::start(&idx, None, w.base.join("pip-server.log"));

    let pip = argv(&[
        PY,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--no-cache-dir",
        "--disable-pip-version-check",
        "--index-url",
        &format!("http://127.0.0.1:{}/simple", srv.port),
        "demo",
        "-d",
        "out",
    ]);
    // No pip configuration from the host (find-links, certificates).
    let env = [("PIP_CONFIG_FILE", "/dev/null")];
    let policy = w.policy(&[lo(srv.port)]);
    let r = w.exec_env(&policy, &pip, &env);
    let got = fs::read(w.proj.join("out/demo-1.0-py3-none-any.whl")).ok();
    let reqs = srv.requests();
    assert!(
        r.code == Some(0)
            && got.as_deref() == Some(&bytes[..])
            && reqs.iter().any(|l| l.contains("GET /simple/demo/"))
            && reqs
                .iter()
                .any(|l| l.contains("GET /files/demo-1.0-py3-none-any.whl")),
        "{}: pip download through the proxy must save the wheel in the project\n  server log: {reqs:?}\n{}",
        w.label(),
        r.show()
    );
    let (egress, _) = w.run_records();
    assert!(
        egress.len() >= 2
            && egress
                .iter()
                .all(|e| e["outcome"] == "allowed" && e["port"] == srv.port),
        "{}: expected allowed records for the index and the file: {egress:#?}",
        w.label()
    );

    fs::remove_dir_all(w.proj.join("out")).expect("remove out");
    let before = srv.requests().len();
    let policy = w.policy(&[lo(1)]);
    let mut pip_fast = pip.clone();
    pip_fast.splice(3..3, argv(&["--retries", "0", "--timeout", "3"]));
    let r = w.exec_env(&policy, &pip_fast, &env);
    let after = srv.requests();
    assert!(
        r.code != Some(0)
            && after.len() == before
            && !w.proj.join("out/demo-1.0-py3-none-any.whl").exists(),
        "{}: with the port not listed, pip must fail and the server see nothing\n  server log: {after:?}\n{}",
        w.label(),
        r.show()
    );
    let (egress, _) = w.run_records();
    assert!(
        !egress.is_empty() && egress.iter().all(|e| e["outcome"] == "refused"),
        "{}: {egress:#?}",
        w.label()
    );
}

// ---------------------------------------------------------------------------------------------
// 9-11. The credential broker through the sandbox
// ---------------------------------------------------------------------------------------------

/// A TLS server that logs, as JSON lines on stderr, each connection (`connection`), each TLS
/// failure or timeout (`error`) and each request with every header as sent (`request`), and
/// answers a body that holds no request content (so the secret can come back to the sandbox
/// only through a leak). `/redirect…` answers `302` to `argv[1]`; `…info/refs…` answers a
/// dumb-HTTP ref list (for `git ls-remote`). Keep-alive: one connection, many requests.
const BROKER_PY: &str = r#"import json, socket, ssl, sys, threading
redirect, cert, key = sys.argv[1], sys.argv[2], sys.argv[3]
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
l = socket.socket()
l.bind(("127.0.0.1", 0))
l.listen(64)
print(l.getsockname()[1], flush=True)
lock = threading.Lock()
def log(o):
    with lock:
        sys.stderr.write(json.dumps(o) + "\n")
        sys.stderr.flush()
def serve(c):
    log({"event": "connection"})
    try:
        c.settimeout(5)
        c = ctx.wrap_socket(c, server_side=True)
        f = c.makefile("rb")
        while True:
            line = f.readline(65536)
            if not line:
                break
            head = line.decode(errors="replace").rstrip("\r\n")
            headers = []
            while True:
                h = f.readline(65536)
                if h in (b"\r\n", b"\n", b""):
                    break
                n, _, v = h.decode(errors="replace").partition(":")
                headers.append([n.strip(), v.strip()])
            log({"event": "request", "line": head, "headers": headers})
            path = head.split(" ")[1] if head.count(" ") >= 2 else ""
            status, extra, body = "200 OK", "", b"broker-test-ok\n"
            if path.startswith("/redirect"):
                status, extra, body = "302 Found", "Location: " + redirect + "\r\n", b"moved\n"
            elif "info/refs" in path:
                body = ("5" * 40 + "\trefs/heads/main\n").encode()
            c.sendall(("HTTP/1.1 " + status + "\r\nContent-Type: text/plain\r\nContent-Length: "
                       + str(len(body)) + "\r\n" + extra + "\r\n").encode() + body)
    except (OSError, ValueError) as e:
        log({"event": "error", "error": str(e)})
while True:
    c, _ = l.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"#;

/// What a [`BROKER_PY`] server logged.
#[derive(Debug, Default)]
struct Seen {
    connections: usize,
    /// `(request line, headers)` in arrival order.
    requests: Vec<(String, Vec<(String, String)>)>,
    raw: String,
}

impl Seen {
    fn request(&self, path: &str) -> Option<&Vec<(String, String)>> {
        self.requests
            .iter()
            .find(|(l, _)| l.split(' ').nth(1).is_some_and(|p| p.starts_with(path)))
            .map(|(_, h)| h)
    }
    /// Every value of `name` (case-insensitive) in the request for `path`.
    fn header(&self, path: &str, name: &str) -> Option<Vec<String>> {
        self.request(path).map(|h| {
            h.iter()
                .filter(|(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.clone())
                .collect()
        })
    }
}

fn broker_seen(srv: &PyServer) -> Seen {
    thread::sleep(Duration::from_millis(150));
    let raw = fs::read_to_string(&srv.log).unwrap_or_default();
    let mut s = Seen {
        raw: raw.clone(),
        ..Seen::default()
    };
    for l in raw.lines() {
        let Ok(v) = serde_json::from_str::<Value>(l) else {
            continue;
        };
        match v["event"].as_str() {
            Some("connection") => s.connections += 1,
            Some("request") => s.requests.push((
                v["line"].as_str().unwrap_or("").to_string(),
                v["headers"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .map(|p| {
                                (
                                    p[0].as_str().unwrap_or("").to_string(),
                                    p[1].as_str().unwrap_or("").to_string(),
                                )
                            })
                            .collect()
                    })
                    .unwrap_or_default(),
            )),
            _ => {}
        }
    }
    s
}

/// The test PKI of [`test_pki`] plus `lh.pem`/`lh.key`: a leaf for `localhost` (and 127.0.0.1)
/// from the same CA, since a credential endpoint must be a name.
fn broker_pki(base: &Path) -> PathBuf {
    let pki = test_pki(base);
    let ossl = |args: &[&str]| {
        let o = Command::new("openssl")
            .args(args)
            .current_dir(&pki)
            .output()
            .expect("run openssl");
        assert!(
            o.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    };
    ossl(&[
        "req",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-keyout",
        "lh.key",
        "-out",
        "lh.csr",
        "-subj",
        "/CN=localhost",
    ]);
    fs::write(
        pki.join("lh.cnf"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
    )
    .expect("write");
    ossl(&[
        "x509",
        "-req",
        "-in",
        "lh.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "lh.pem",
        "-days",
        "2",
        "-extfile",
        "lh.cnf",
    ]);
    pki
}

/// One [`BROKER_PY`] server with the `localhost` leaf; `redirect` is where `/redirect` sends.
fn broker_server(w: &World, pki: &Path, name: &str, redirect: &str) -> PyServer {
    PyServer::start_script(
        BROKER_PY,
        Path::new(redirect),
        Some((&pki.join("lh.pem"), &pki.join("lh.key"))),
        w.base.join(format!("{name}.log")),
    )
}

/// A secret nothing else here contains, different for every world.
fn fresh_secret(w: &World) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let salt = w.policies.load(Ordering::Relaxed);
    format!("pfs3cr3t{}x{nanos}q{salt}", std::process::id())
}

/// A policy: the `net` preset with `hosts`, `extra` lines in the preset (e.g. upstream_ca,
/// env.keep), one endpoint `localhost:PORT` for credential `demo`, and `[credentials.demo]`
/// with `source` (e.g. `env = "MY_PAT"`). `endpoint` `None` leaves the endpoint out.
fn broker_policy(
    w: &World,
    hosts: &[String],
    extra: &str,
    endpoint: Option<u16>,
    source: &str,
) -> PathBuf {
    let n = w.policies.fetch_add(1, Ordering::Relaxed);
    let list = hosts
        .iter()
        .map(|h| format!("{h:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    let mut text = format!(
        "extends = [\"pinfold:default\"]\n[defaults]\naction = \"allow\"\nsandbox = \"net\"\n\
         [sandbox.net]\nfs.write.allow = [\".\"]\nnetwork.allow = true\nnetwork.hosts = [{list}]\n{extra}\n"
    );
    if let Some(p) = endpoint {
        text.push_str(&format!(
            "[[sandbox.net.network.endpoint]]\nhost = \"localhost:{p}\"\ncredential = \"demo\"\n"
        ));
    }
    text.push_str(&format!("[credentials.demo]\n{source}\n"));
    let p = w.base.join(format!("policy-{n}.toml"));
    w.put(&p, text.as_bytes());
    p
}

/// `pinfold exec [FLAGS] -c POLICY -- ARGV…` whatever its exit status (cases that must not
/// start are checked by the caller).
fn exec_raw(
    w: &World,
    flags: &[&str],
    policy: &Path,
    argv: &[String],
    env: &[(&str, &str)],
) -> Run {
    let mut full = vec![pinfold_bin(), "exec".into()];
    full.extend(flags.iter().map(|s| s.to_string()));
    full.extend(["-c".into(), policy.display().to_string(), "--".into()]);
    full.extend(argv.iter().cloned());
    let r = run_cmd(w.cmd(&full, env), full.join(" "), TIMEOUT);
    if std::env::var_os("PINFOLD_TEST_SHOW").is_some() {
        eprintln!("{}:\n{}", w.label(), r.show());
    }
    r
}

/// Every file under the state dir holding `secret` (the ledger, its key, anything else).
fn files_holding(dir: &Path, secret: &str) -> Vec<String> {
    let mut hits = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if fs::read(&p)
                .is_ok_and(|b| b.windows(secret.len()).any(|x| x == secret.as_bytes()))
            {
                hits.push(p.display().to_string());
            }
        }
    }
    hits
}

/// The ledger holds the credential's name for brokered requests and never its value.
fn assert_ledger_clean(w: &World, secret: &str) {
    let hits = files_holding(&w.state, secret);
    assert!(
        hits.is_empty() && w.state.join("ledger.jsonl").is_file(),
        "{}: SECRET IN THE STATE DIR: {hits:?}",
        w.label()
    );
}

both_users!(
    credential_injected_only_for_the_endpoint,
    credential_never_enters_the_sandbox
);
root_only!(credential_broker_fails_closed);

/// Case 9: `localhost:E` is a credential endpoint (`[credentials.demo] env = "MY_PAT"`),
/// `localhost:O` another allowed host (same name, another port: a plain tunnel). Inside: curl
/// sends its own `Authorization` twice (two spellings) to E; python3 urllib and `git
/// ls-remote` send none; curl sends one to O; `curl -L` follows E's `302` to O; curl reaches E
/// by SOCKS5 (`socks5h://127.0.0.1:3128`) with its own header. On the host:
/// E saw exactly one `Authorization: Bearer SECRET` on each request; O saw the agent's header
/// untouched on the direct request, and the secret nowhere (in particular not on the redirect
/// target). The records for E name the credential `demo`, those for O none; no file of the
/// state dir and nothing the command printed holds the secret.
fn credential_injected_only_for_the_endpoint(u: User) {
    let w = World::new(u, "credential_injected_only_for_the_endpoint");
    let pki = broker_pki(&w.base);
    w.own();
    let other = broker_server(&w, &pki, "other", "-");
    let ep = broker_server(
        &w,
        &pki,
        "endpoint",
        &format!("https://localhost:{}/landed", other.port),
    );
    let (e, o) = (ep.port, other.port);
    let ca = pki.join("ca.pem").display().to_string();
    let policy = broker_policy(
        &w,
        &[format!("localhost:{e}"), format!("localhost:{o}")],
        &format!("network.upstream_ca = [{ca:?}]"),
        Some(e),
        "env = \"MY_PAT\"",
    );
    let secret = fresh_secret(&w);
    let py = w.script(
        "fetch.py",
        "import sys, urllib.request\nprint('py', urllib.request.urlopen(sys.argv[1], timeout=5).read().decode().strip())\n",
    );
    let script = w.bash(
        "inject",
        &format!(
            "c() {{ curl -sS -m 5 -w ' code=%{{http_code}}\\n' \"$@\"; }}\n\
             c -H 'Authorization: Bearer agent' -H 'authorization: Bearer agent-two' https://localhost:{e}/one\n\
             {PY} {py} https://localhost:{e}/py\n\
             git ls-remote https://localhost:{e}/repo.git\n\
             c -H 'Authorization: Bearer agent' https://localhost:{o}/direct\n\
             c -L -H 'Authorization: Bearer agent' https://localhost:{e}/redirect\n\
             c --proxy socks5h://127.0.0.1:{PROXY_PORT} -H 'Authorization: Bearer agent' https://localhost:{e}/socks\n"
        ),
    );
    // SSL_CERT_FILE: the bundle pinfold writes starts from it, so tools inside trust the test CA
    // (for the plain tunnel to O) as well as the per-run CA (for E).
    let r = exec_raw(
        &w,
        &[],
        &policy,
        &script,
        &[("MY_PAT", &secret), ("SSL_CERT_FILE", &ca)],
    );
    let (se, so) = (broker_seen(&ep), broker_seen(&other));
    let want = vec![format!("Bearer {secret}")];
    let mut why = Vec::new();
    if !(r.started() && r.code == Some(0)) {
        why.push("the script did not run to the end".to_string());
    }
    for (what, ok) in [
        (
            "curl to E and O: code=200",
            r.stdout.matches(" code=200").count() == 4,
        ),
        (
            "python3 urllib to E",
            r.stdout.contains("py broker-test-ok"),
        ),
        (
            "git ls-remote to E",
            r.stdout
                .contains(&format!("{}\trefs/heads/main", "5".repeat(40))),
        ),
    ] {
        if !ok {
            why.push(format!("{what} did not get the upstream's answer"));
        }
    }
    for p in ["/one", "/py", "/repo.git/info/refs", "/redirect", "/socks"] {
        let got = se.header(p, "authorization");
        if got.as_ref() != Some(&want) {
            why.push(format!(
                "E {p}: expected exactly [\"Bearer <secret>\"], saw {:?}",
                got.map(|v| v
                    .iter()
                    .map(|x| x.replace(&secret, "<SECRET>"))
                    .collect::<Vec<_>>())
            ));
        }
    }
    if so.header("/direct", "authorization") != Some(vec!["Bearer agent".to_string()]) {
        why.push(format!(
            "O /direct: the agent's header must pass untouched: {:?}",
            so.request("/direct")
        ));
    }
    if so.request("/landed").is_none() {
        why.push("O /landed: curl -L did not follow the redirect to O (proves nothing)".into());
    }
    if so.raw.contains(&secret) {
        why.push(format!(
            "SECRET SENT TO THE OTHER HOST: {}",
            so.raw.replace(&secret, "<SECRET>")
        ));
    }
    if r.stdout.contains(&secret) || r.stderr.contains(&secret) {
        why.push("the secret is in the command's output".into());
    }
    assert!(
        why.is_empty(),
        "{}: BROKER FAILED:\n  - {}\n  E saw: {:?}\n  O saw: {:?}\n{}",
        w.label(),
        why.join("\n  - "),
        se.requests,
        so.requests,
        r.show()
    );
    let (egress, _) = w.run_records();
    let port = |x: &Value| x["port"].as_u64().unwrap_or(0);
    let to_e: Vec<&Value> = egress.iter().filter(|x| port(x) == u64::from(e)).collect();
    let to_o: Vec<&Value> = egress.iter().filter(|x| port(x) == u64::from(o)).collect();
    assert!(
        to_e.len() >= 5
            && to_e
                .iter()
                .all(|x| x["credential"] == "demo" && x["outcome"] == "allowed")
            && to_e.iter().any(|x| x["protocol"] == "socks5")
            && to_o.len() == 2
            && to_o
                .iter()
                .all(|x| x["credential"].is_null() && x["outcome"] == "allowed"),
        "{}: records to E must name the credential `demo`, to O none: {egress:#?}",
        w.label()
    );
    assert_ledger_clean(&w, &secret);
}

/// Looks for the secret from inside, knowing it only as two halves on its command line (so
/// its own argv, and `/proc/*/cmdline`, never hold it whole): `os.environ`, the variables by
/// name, `env`, `cat /proc/self/environ`, `cat` of the credential file (also through
/// `/proc/self/root` and a hard link made inside), every readable `/proc/*/environ` and
/// `cmdline`, every file under `$TMPDIR`, `$HOME` and the project, and the CA bundle named by
/// `SSL_CERT_FILE` (which must hold certificates and no private key). `ESCAPED: …` for each
/// place the secret (or a key) is found.
const SECRET_PROBE_PY: &str = r#"import subprocess
a, b, cred = sys.argv[1], sys.argv[2], sys.argv[3]
s = (a + b).encode()
def leak(what, data):
    if s in data:
        print(f"ESCAPED: secret in {what}")
leak("os.environ", "\n".join(f"{k}={v}" for k, v in os.environ.items()).encode())
for v in ("MY_PAT", "ALSO", "ALSO_WRAPPED"):
    if v in os.environ:
        print(f"ESCAPED: variable {v} is set inside")
for argv in (["env"], ["cat", "/proc/self/environ"], ["cat", cred], ["cat", "/proc/self/root" + cred]):
    p = subprocess.run(argv, capture_output=True)
    leak(" ".join(argv), p.stdout + p.stderr)
    print(f"ran: {' '.join(argv)} rc={p.returncode} bytes={len(p.stdout)}")
try:
    os.link(cred, "linked-credential")
    leak("a hard link to the credential file", open("linked-credential", "rb").read())
    print("linked: made a hard link to the credential file")
except OSError as e:
    print(f"refused: hard link to the credential file: errno={ename(e.errno)}")
readable = 0
for pid in os.listdir("/proc"):
    if pid.isdigit():
        for f in ("environ", "cmdline"):
            try:
                data = open(f"/proc/{pid}/{f}", "rb").read()
            except OSError:
                continue
            readable += 1
            leak(f"/proc/{pid}/{f}", data)
print(f"proc files read: {readable}")
files = 0
for root in (os.environ.get("TMPDIR", "/tmp"), os.environ["HOME"], os.getcwd()):
    for dp, dn, fn in os.walk(root):
        for n in fn:
            p = os.path.join(dp, n)
            try:
                data = open(p, "rb").read(1 << 22)
            except OSError:
                continue
            files += 1
            leak(f"file {p}", data)
print(f"files read: {files}")
bundle = os.environ.get("SSL_CERT_FILE", "")
try:
    data = open(bundle, "rb").read()
    leak(f"the CA bundle {bundle}", data)
    if b"PRIVATE KEY" in data:
        print(f"ESCAPED: a private key in the CA bundle {bundle}")
    print(f"bundle: {data.count(b'BEGIN CERTIFICATE')} certificates")
except OSError as e:
    print(f"bundle: unreadable {bundle}: {e}")
"#;

/// Case 10: the secret never enters the sandbox. (a) `env = "MY_PAT"`, with `ALSO` holding a
/// copy and `ALSO_WRAPPED` holding it inside other text, all three kept by `env.keep` in the
/// preset and `--keep-env`: none is set inside, and [`SECRET_PROBE_PY`] finds the secret
/// nowhere; the CA bundle has certificates and no private key. (b) `file = "…"` with the file
/// in the project (a writable root): the file reads as nothing inside (hidden), directly,
/// through `/proc/self/root` or a hard link. In both runs curl to the endpoint gets the secret
/// injected (so the proxy held it while the command searched for it), and the ledger does not
/// hold it. The probe runs first on the host with the same variables and file: the control,
/// which must find the secret.
fn credential_never_enters_the_sandbox(u: User) {
    let w = World::new(u, "credential_never_enters_the_sandbox");
    let pki = broker_pki(&w.base);
    let secret = fresh_secret(&w);
    // The credential file, in the project: only the file-source run has it (in the env-source
    // run nothing hides it, and it is not the secret's source).
    let cred = w.proj.join("secrets/token");
    let put_cred = || {
        w.put(&cred, format!("{secret}\n").as_bytes());
        fs::set_permissions(&cred, fs::Permissions::from_mode(0o600)).expect("chmod");
    };
    put_cred();
    let ep = broker_server(&w, &pki, "endpoint", "-");
    let e = ep.port;
    let ca = pki.join("ca.pem").display().to_string();
    let cred_s = cred.display().to_string();
    let (h1, h2) = secret.split_at(secret.len() / 2);
    let mut probe = w.python("probe", SECRET_PROBE_PY);
    probe.extend([h1.to_string(), h2.to_string(), cred_s.clone()]);
    let wrapped = format!("prefix-{secret}-suffix");
    let env = [
        ("MY_PAT", secret.as_str()),
        ("ALSO", secret.as_str()),
        ("ALSO_WRAPPED", wrapped.as_str()),
        ("SSL_CERT_FILE", ca.as_str()),
    ];

    // The control: on the host the same probe finds the secret in each of these places.
    let c = run_cmd(w.cmd(&probe, &env), probe.join(" "), TIMEOUT);
    for place in [
        "ESCAPED: secret in os.environ",
        "ESCAPED: variable MY_PAT is set inside",
        "ESCAPED: variable ALSO is set inside",
        "ESCAPED: variable ALSO_WRAPPED is set inside",
        "ESCAPED: secret in env",
        "ESCAPED: secret in cat /proc/self/environ",
        &format!("ESCAPED: secret in cat {cred_s}"),
        "ESCAPED: secret in a hard link to the credential file",
    ] {
        assert!(
            c.stdout.lines().any(|l| l == place),
            "{}: CONTROL FAILED: on the host the probe must report `{place}`\n{}",
            w.label(),
            c.show()
        );
    }
    let _ = fs::remove_file(w.proj.join("linked-credential"));
    fs::remove_file(&cred).expect("remove the credential file");

    let script = |name: &str| {
        let mut s = w.bash(
            name,
            &format!(
                "\"$@\"\ncurl -sS -m 5 -w ' code=%{{http_code}}\\n' https://localhost:{e}/{name}\n"
            ),
        );
        s.extend(probe.iter().cloned());
        s
    };
    let hosts = [format!("localhost:{e}")];
    let upstream = format!("network.upstream_ca = [{ca:?}]\n");
    for (name, source, flags, extra) in [
        (
            "env-source",
            "env = \"MY_PAT\"".to_string(),
            &["--keep-env", "MY_PAT", "--keep-env", "ALSO"][..],
            format!("{upstream}env.keep = [\"MY_PAT\", \"ALSO\", \"ALSO_WRAPPED\"]\n"),
        ),
        (
            "file-source",
            format!("file = {cred_s:?}"),
            &[][..],
            upstream.clone(),
        ),
    ] {
        if name == "file-source" {
            put_cred();
        }
        let policy = broker_policy(&w, &hosts, &extra, Some(e), &source);
        let r = exec_raw(&w, flags, &policy, &script(name), &env);
        let seen = broker_seen(&ep);
        let injected = seen.header(&format!("/{name}"), "authorization");
        let mut why: Vec<String> = r
            .lines("ESCAPED")
            .iter()
            .map(|l| l.replace(&secret, "<SECRET>"))
            .collect();
        if !(r.started() && r.code == Some(0)) {
            why.push("the probe did not run to the end".into());
        }
        if injected != Some(vec![format!("Bearer {secret}")]) {
            why.push(format!(
                "curl to the endpoint in the same run did not get the secret injected \
                 (so the search proves nothing): {injected:?}"
            ));
        }
        if !r.stdout.lines().any(|l| {
            l.strip_prefix("bundle: ")
                .and_then(|x| x.split(' ').next())
                .and_then(|n| n.parse::<u32>().ok())
                .is_some_and(|n| n >= 2)
        }) {
            why.push("the CA bundle (SSL_CERT_FILE) must be readable and hold the test CA and the per-run CA".into());
        }
        if !r.stdout.contains("files read: ") || r.stdout.contains("files read: 0") {
            why.push("the probe read no file under $TMPDIR, $HOME and the project".into());
        }
        if name == "file-source" {
            if fs::read_to_string(&cred).ok().as_deref() != Some(&format!("{secret}\n")) {
                why.push("the credential file changed on the host".into());
            }
            if !r
                .stdout
                .contains(&format!("ran: cat {cred_s} rc=0 bytes=0"))
            {
                why.push("the credential file must read as empty inside (hidden)".into());
            }
        }
        assert!(
            why.is_empty(),
            "{}: {name}: SECRET REACHED THE SANDBOX:\n  - {}\n{}",
            w.label(),
            why.join("\n  - "),
            r.show().replace(&secret, "<SECRET>")
        );
        let (egress, _) = w.run_records();
        assert!(
            egress.len() == 1 && egress[0]["credential"] == "demo",
            "{}: {name}: one brokered record: {egress:#?}",
            w.label()
        );
        assert_ledger_clean(&w, &secret);
        let _ = fs::remove_file(w.proj.join("linked-credential"));
    }
}

/// Case 11: what the broker refuses. With the endpoint `localhost:E` and its upstream trusted:
/// plain `http://localhost:E` → `403`, a WebSocket upgrade over HTTPS → `403`, a `Host` header
/// naming another port → `403`, the upstream seeing none of these requests. A credential that cannot be read (`env` unset; `command = "exit
/// 3"`) or an `upstream_ca` file with no certificate: pinfold exits 125 naming the problem, the
/// command (`touch MARKER`) never runs, the upstream sees nothing. Without `upstream_ca` the
/// upstream is not trusted: `CONNECT` gets `502` with the reason (read with bash `/dev/tcp`
/// from the proxy), curl fails, and the upstream sees no request (so no secret).
fn credential_broker_fails_closed(u: User) {
    let w = World::new(u, "credential_broker_fails_closed");
    let pki = broker_pki(&w.base);
    w.own();
    let ep = broker_server(&w, &pki, "endpoint", "-");
    let e = ep.port;
    let ca = pki.join("ca.pem").display().to_string();
    let secret = fresh_secret(&w);
    let hosts = [format!("localhost:{e}")];
    let trusted = format!("network.upstream_ca = [{ca:?}]\n");
    let env_src = "env = \"MY_PAT\"";
    let with_secret = [("MY_PAT", secret.as_str())];

    // Plain http:// and a WebSocket upgrade.
    let policy = broker_policy(&w, &hosts, &trusted, Some(e), env_src);
    let r = exec_raw(
        &w,
        &[],
        &policy,
        &w.bash(
            "refused",
            &format!(
                "curl -sS -m 5 -w ' plain=%{{http_code}}\\n' http://localhost:{e}/plain\n\
                 curl -sS -m 5 -w ' ws=%{{http_code}}\\n' -H 'Connection: Upgrade' -H 'Upgrade: websocket' \
                 -H 'Sec-WebSocket-Version: 13' -H 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==' https://localhost:{e}/ws\n\
                 curl -sS -m 5 -w ' foreign=%{{http_code}}\\n' -H 'Host: localhost:1' https://localhost:{e}/foreign\n\
                 curl -sS -m 5 -w ' ok=%{{http_code}}\\n' https://localhost:{e}/ok\n"
            ),
        ),
        &with_secret,
    );
    let seen = broker_seen(&ep);
    assert!(
        r.started()
            && r.stdout.contains("plain=403")
            && r.stdout.contains("ws=403")
            && r.stdout.contains("foreign=403")
            && seen.request("/foreign").is_none()
            && r.stdout.contains("ok=200")
            && seen.request("/plain").is_none()
            && seen.request("/ws").is_none()
            && seen.header("/ok", "authorization") == Some(vec![format!("Bearer {secret}")]),
        "{}: plain http:// and an Upgrade to the endpoint must get 403 and reach nothing (and \
         the brokered request in the same run work)\n  upstream saw: {:?}\n{}",
        w.label(),
        seen.requests,
        r.show()
    );
    let (egress, _) = w.run_records();
    assert!(
        egress
            .iter()
            .any(|x| x["outcome"] == "refused" && x["protocol"] == "http")
            && egress.iter().all(|x| !x.to_string().contains(&secret)),
        "{}: {egress:#?}",
        w.label()
    );
    assert_ledger_clean(&w, &secret);

    // Nothing runs when the credential cannot be read or the upstream roots are unusable.
    let bad_ca = w.base.join("not-a-cert.pem");
    w.put(&bad_ca, b"this is not a certificate\n");
    let bad_ca = bad_ca.display().to_string();
    let marker = w.proj.join("MARKER");
    for (what, extra, source, env, needle) in [
        (
            "env unset",
            trusted.clone(),
            env_src.to_string(),
            &[][..],
            "demo",
        ),
        (
            "command exits 3",
            trusted.clone(),
            "command = \"exit 3\"".to_string(),
            &with_secret[..],
            "demo",
        ),
        (
            "upstream_ca without a certificate",
            format!("network.upstream_ca = [{bad_ca:?}]\n"),
            env_src.to_string(),
            &with_secret[..],
            "not-a-cert.pem",
        ),
    ] {
        let before = broker_seen(&ep).connections;
        let policy = broker_policy(&w, &hosts, &extra, Some(e), &source);
        let r = exec_raw(
            &w,
            &[],
            &policy,
            &argv(&[
                "bash",
                "-c",
                &format!("touch MARKER; curl -sS -m 5 https://localhost:{e}/never"),
            ]),
            env,
        );
        assert!(
            r.code == Some(125)
                && r.stderr.contains(needle)
                && !marker.exists()
                && broker_seen(&ep).connections == before
                && !r.stderr.contains(&secret),
            "{}: {what}: pinfold must exit 125 naming `{needle}`, and nothing run\n{}",
            w.label(),
            r.show()
        );
        w.skip_records();
    }
    assert_ledger_clean(&w, &secret);

    // The upstream's CA is not trusted.
    let before = broker_seen(&ep);
    let policy = broker_policy(&w, &hosts, "", Some(e), env_src);
    let r = exec_raw(
        &w,
        &[],
        &policy,
        &w.bash(
            "untrusted",
            &format!(
                "curl -sS -m 5 -w ' untrusted=%{{http_code}}\\n' https://localhost:{e}/untrusted\n\
                 exec 3<>/dev/tcp/127.0.0.1/{PROXY_PORT}\n\
                 printf 'CONNECT localhost:{e} HTTP/1.1\\r\\nHost: localhost:{e}\\r\\n\\r\\n' >&3\n\
                 timeout 5 cat <&3\n"
            ),
        ),
        &with_secret,
    );
    let seen = broker_seen(&ep);
    assert!(
        r.started()
            && r.stderr.contains("502")
            && r.stdout.contains("HTTP/1.1 502")
            && r.stdout.contains("pinfold egress: upstream TLS")
            && seen.requests.len() == before.requests.len()
            && !seen.raw[before.raw.len()..].contains(&secret),
        "{}: an untrusted upstream must get 502 with the reason and see no request\n  upstream saw: {:?}\n{}",
        w.label(),
        seen.requests,
        r.show()
    );
    let (egress, _) = w.run_records();
    assert!(
        egress.len() == 2 && egress.iter().all(|x| x["outcome"] != "allowed"),
        "{}: {egress:#?}",
        w.label()
    );
    assert_ledger_clean(&w, &secret);
}

// ---------------------------------------------------------------------------------------------
// 12. A Rust client: cargo from a local sparse registry
// ---------------------------------------------------------------------------------------------

both_users!(cargo_fetch_from_a_local_sparse_registry);

/// A `.crate` (gzip'd tar of `NAME-VERS/Cargo.toml` and `NAME-VERS/src/lib.rs`), written to
/// `argv[1]`.
const MKCRATE_PY: &str = r#"import io, sys, tarfile
out, name, vers = sys.argv[1], sys.argv[2], sys.argv[3]
files = {
    "Cargo.toml": f'[package]\nname = "{name}"\nversion = "{vers}"\nedition = "2021"\n'.encode(),
    "src/lib.rs": b"pub fn answer() -> u32 {\n    42\n}\n",
}
with tarfile.open(out, "w:gz") as t:
    for n, d in files.items():
        i = tarfile.TarInfo(f"{name}-{vers}/{n}")
        i.size, i.mode, i.mtime = len(d), 0o644, 0
        t.addfile(i, io.BytesIO(d))
"#;

/// Where a sparse index keeps a crate's entry (cargo's layout).
fn sparse_index_path(name: &str) -> String {
    let n = name.to_lowercase();
    match n.len() {
        1 => format!("1/{n}"),
        2 => format!("2/{n}"),
        3 => format!("3/{}/{n}", &n[..1]),
        _ => format!("{}/{}/{n}", &n[..2], &n[2..4]),
    }
}

/// The Rust toolchain as the case's user reaches it inside: the directory to put first on
/// `PATH` and the variables it needs. As root that is the `cargo` on the test's `PATH` (the
/// rustup proxy, given `RUSTUP_HOME`, since the world's `HOME` is not the real one). uid 65534
/// cannot use a toolchain under a home it cannot traverse (`/root` is 0700): then the real
/// `bin/cargo`, `bin/rustc` and `lib/*.so*` (all cargo needs; it runs `rustc -vV`) are hard
/// linked (copied across filesystems) into a root-owned 0755 directory outside the world,
/// which `World::own` would otherwise hand to uid 65534, originals and all.
struct Toolchain {
    path: String,
    env: Vec<(String, String)>,
    how: String,
    _links: Option<tempfile::TempDir>,
}

fn cargo_toolchain(u: User) -> Toolchain {
    let host_path = std::env::var_os("PATH").unwrap_or_default();
    let cargo = std::env::split_paths(&host_path)
        .map(|d| d.join("cargo"))
        .find(|f| f.is_file())
        .expect("cargo on the test's PATH");
    let dir = cargo.parent().expect("parent").to_path_buf();
    let out = |prog: &Path, args: &[&str]| {
        let o = Command::new(prog)
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("{} {args:?}: {e}", prog.display()));
        assert!(
            o.status.success(),
            "{} {args:?}: {}",
            prog.display(),
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    let rustup = dir.join("rustup");
    let proxy = rustup.is_file() && fs::canonicalize(&cargo).ok() == fs::canonicalize(&rustup).ok();
    let real_bin = if proxy {
        PathBuf::from(out(&rustup, &["which", "cargo"]))
    } else {
        fs::canonicalize(&cargo).expect("canonicalize cargo")
    }
    .parent()
    .expect("parent")
    .to_path_buf();
    let reachable = |p: &Path| {
        p.ancestors()
            .all(|d| fs::metadata(d).is_ok_and(|m| m.permissions().mode() & 0o001 != 0))
    };
    let s = |p: &Path| p.display().to_string();
    if u == User::Root && proxy {
        let mut env = vec![
            ("RUSTUP_HOME".to_string(), out(&rustup, &["show", "home"])),
            ("RUSTUP_AUTO_INSTALL".to_string(), "0".to_string()),
        ];
        if let Ok(t) = std::env::var("RUSTUP_TOOLCHAIN") {
            env.push(("RUSTUP_TOOLCHAIN".into(), t));
        }
        let how = format!("the rustup proxy {} ({env:?})", s(&cargo));
        return Toolchain {
            path: s(&dir),
            env,
            how,
            _links: None,
        };
    }
    if u == User::Root || reachable(&real_bin) {
        return Toolchain {
            path: s(&real_bin),
            env: Vec::new(),
            how: format!("the toolchain's own {}", s(&real_bin)),
            _links: None,
        };
    }
    let root = real_bin.parent().expect("the toolchain's root");
    let links = tempfile::Builder::new()
        .prefix("pinfold-egress-toolchain-")
        .tempdir_in("/tmp")
        .expect("temp dir under /tmp");
    let put = |from: &Path, to: &Path| {
        if fs::hard_link(from, to).is_err() {
            fs::copy(from, to).unwrap_or_else(|e| panic!("copy {} to {}: {e}", s(from), s(to)));
        }
    };
    fs::create_dir_all(links.path().join("bin")).expect("mkdir");
    fs::create_dir_all(links.path().join("lib")).expect("mkdir");
    for b in ["cargo", "rustc"] {
        put(&real_bin.join(b), &links.path().join("bin").join(b));
    }
    for e in fs::read_dir(root.join("lib"))
        .expect("read the toolchain's lib")
        .flatten()
    {
        let n = e.file_name();
        if n.to_string_lossy().contains(".so") && e.path().is_file() {
            put(&e.path(), &links.path().join("lib").join(&n));
        }
    }
    for d in ["", "bin", "lib"] {
        fs::set_permissions(links.path().join(d), fs::Permissions::from_mode(0o755))
            .expect("chmod");
    }
    Toolchain {
        path: s(&links.path().join("bin")),
        env: Vec::new(),
        how: format!(
            "links in {} to {} (not reachable by uid 65534)",
            s(links.path()),
            s(root)
        ),
        _links: Some(links),
    }
}

/// Case 12, issue 6's Rust client: `cargo fetch` inside, no `--offline`, for a project that
/// depends on `demo = { version = "1", registry = "local" }` with `.cargo/config.toml` naming
/// `sparse+http://127.0.0.1:PORT/index/` (a python3 http.server serving `config.json`, the
/// index entry at cargo's sparse path `de/mo/demo` with the `.crate`'s sha256, and the
/// `.crate` made here with python3's tarfile), then the same over `sparse+https://` (a TLS
/// server with the openssl-made test CA as `CARGO_HTTP_CAINFO`, so through `CONNECT`).
/// `CARGO_HOME` is in the project, fresh for each run. Each runs first as a control on the
/// host, which must fetch. Inside, the same toolchain answers (`cargo --version`), the
/// `.crate` lands byte for byte in `CARGO_HOME/registry/cache`, `Cargo.lock` holds its
/// checksum, the server logged the config, index and download requests, and the records are
/// `allowed` for `127.0.0.1:PORT`. With the port not listed, cargo fails (`403`) with nothing
/// cached, the server logs no request, and the records are `refused`.
fn cargo_fetch_from_a_local_sparse_registry(u: User) {
    let w = World::new(u, "cargo_fetch_from_a_local_sparse_registry");
    let tc = cargo_toolchain(u);
    let pki = test_pki(&w.base);
    let ca = pki.join("ca.pem").display().to_string();
    let (name, vers) = ("demo", "1.0.0");

    // The registry's files; `config.json` is written once the server has a port.
    let reg = |scheme: &str| -> (PathBuf, Vec<u8>, String) {
        let root = w.base.join(format!("registry-{scheme}"));
        let krate = root.join(format!("dl/{name}/{vers}/download"));
        fs::create_dir_all(krate.parent().expect("parent")).expect("mkdir");
        let mk = w.base.join("mkcrate.py");
        fs::write(&mk, MKCRATE_PY).expect("write");
        let o = Command::new(PY)
            .arg(&mk)
            .arg(&krate)
            .args([name, vers])
            .output()
            .expect("run python3");
        assert!(
            o.status.success(),
            "make the .crate: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let o = Command::new("sha256sum")
            .arg(&krate)
            .output()
            .expect("sha256sum");
        let sha = String::from_utf8_lossy(&o.stdout)
            .split_whitespace()
            .next()
            .expect("a digest")
            .to_string();
        let entry = root.join("index").join(sparse_index_path(name));
        fs::create_dir_all(entry.parent().expect("parent")).expect("mkdir");
        fs::write(
            &entry,
            format!(
                "{{\"name\":\"{name}\",\"vers\":\"{vers}\",\"deps\":[],\"cksum\":\"{sha}\",\"features\":{{}},\"yanked\":false}}\n"
            ),
        )
        .expect("write the index entry");
        (root, fs::read(&krate).expect("read the .crate"), sha)
    };

    w.put(
        &w.proj.join("Cargo.toml"),
        format!(
            "[package]\nname = \"user\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
             [dependencies]\n{name} = {{ version = \"1\", registry = \"local\" }}\n"
        )
        .as_bytes(),
    );
    w.put(&w.proj.join("src/lib.rs"), b"pub use demo::answer;\n");
    let script = w.bash(
        "fetch",
        "echo \"toolchain: $(cargo --version) / $(rustc --version)\"\ncargo fetch",
    );

    for scheme in ["http", "https"] {
        let (root, bytes, sha) = reg(scheme);
        w.own();
        let tls = (scheme == "https").then(|| (pki.join("srv.pem"), pki.join("srv.key")));
        let srv = PyServer::start(
            &root,
            tls.as_ref().map(|(c, k)| (c.as_path(), k.as_path())),
            w.base.join(format!("cargo-{scheme}-server.log")),
        );
        let base = format!("{scheme}://127.0.0.1:{}", srv.port);
        fs::write(
            root.join("index/config.json"),
            format!("{{\"dl\": \"{base}/dl/{{crate}}/{{version}}/download\", \"api\": null}}\n"),
        )
        .expect("write config.json");
        w.put(
            &w.proj.join(".cargo/config.toml"),
            format!("[registries.local]\nindex = \"sparse+{base}/index/\"\n").as_bytes(),
        );
        let label = format!("{} ({scheme}; cargo: {})", w.label(), tc.how);
        let path = format!("{}:/usr/local/bin:/usr/bin:/bin", tc.path);
        // Each run: a fresh CARGO_HOME in the project and no Cargo.lock.
        let run_env = |home: &str, extra: &[(&str, &str)]| -> Vec<(String, String)> {
            let _ = fs::remove_file(w.proj.join("Cargo.lock"));
            let mut v: Vec<(String, String)> = tc.env.clone();
            v.push(("PATH".into(), path.clone()));
            v.push(("CARGO_HOME".into(), w.proj.join(home).display().to_string()));
            v.push(("CARGO_HTTP_CAINFO".into(), ca.clone()));
            v.extend(extra.iter().map(|(k, x)| (k.to_string(), x.to_string())));
            v
        };
        let cached = |home: &str| -> Vec<(PathBuf, Vec<u8>)> {
            let cache = w.proj.join(home).join("registry/cache");
            fs::read_dir(&cache)
                .into_iter()
                .flatten()
                .flatten()
                .filter_map(|d| {
                    let f = d.path().join(format!("{name}-{vers}.crate"));
                    fs::read(&f).ok().map(|b| (f, b))
                })
                .collect()
        };

        // The control, on the host without pinfold.
        let env = run_env(&format!("control-{scheme}-home"), &[]);
        let env_ref: Vec<(&str, &str)> =
            env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let c = run_cmd(w.cmd(&script, &env_ref), script.join(" "), TIMEOUT);
        let toolchain_line = c
            .stdout
            .lines()
            .find(|l| l.starts_with("toolchain: cargo "))
            .map(str::to_string);
        assert!(
            c.code == Some(0)
                && toolchain_line.is_some()
                && cached(&format!("control-{scheme}-home")).len() == 1,
            "{label}: CONTROL FAILED: on the host cargo must fetch from the local registry\n  server log: {:?}\n{}",
            srv.requests(),
            c.show()
        );
        let toolchain_line = toolchain_line.expect("checked");

        // Inside, the port listed.
        let before = srv.requests().len();
        let home = format!("inside-{scheme}-home");
        let env = run_env(&home, &[]);
        let env_ref: Vec<(&str, &str)> =
            env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let policy = w.policy(&[lo(srv.port)]);
        let r = w.exec_env(&policy, &script, &env_ref);
        let reqs = srv.requests()[before..].to_vec();
        let got = cached(&home);
        let lock = fs::read_to_string(w.proj.join("Cargo.lock")).unwrap_or_default();
        assert!(
            r.started()
                && r.code == Some(0)
                && r.stdout.lines().any(|l| l == toolchain_line)
                && got.len() == 1
                && got[0].1 == bytes
                && lock.contains(&format!("name = \"{name}\""))
                && lock.contains(&format!("checksum = \"{sha}\""))
                && reqs.iter().any(|l| l.contains("GET /index/config.json "))
                && reqs
                    .iter()
                    .any(|l| l.contains(&format!("GET /index/{} ", sparse_index_path(name))))
                && reqs
                    .iter()
                    .any(|l| l.contains(&format!("GET /dl/{name}/{vers}/download "))),
            "{label}: cargo fetch through the proxy must put the .crate in CARGO_HOME/registry/cache \
             (same toolchain as the control: {toolchain_line:?})\n  cached: {:?}\n  Cargo.lock: {lock:?}\n  server log: {reqs:?}\n{}",
            got.iter().map(|(p, b)| (p, b.len())).collect::<Vec<_>>(),
            r.show()
        );
        let (egress, _) = w.run_records();
        let protocol = if scheme == "http" { "http" } else { "connect" };
        let addr = lo(srv.port);
        assert!(
            !egress.is_empty()
                && egress.iter().all(|e| e["outcome"] == "allowed"
                    && e["protocol"] == protocol
                    && e["host"] == "127.0.0.1"
                    && e["port"] == srv.port
                    && e["addr"] == addr.as_str()
                    && e["bytes_down"].as_u64().unwrap_or(0) > 0),
            "{label}: expected allowed {protocol} records for {addr} with bytes: {egress:#?}",
        );

        // Inside, the port not listed.
        let before = srv.requests().len();
        let home = format!("blocked-{scheme}-home");
        let env = run_env(&home, &[("CARGO_NET_RETRY", "0")]);
        let env_ref: Vec<(&str, &str)> =
            env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let policy = w.policy(&[lo(1)]);
        let r = w.exec_env(&policy, &script, &env_ref);
        let after = srv.requests();
        assert!(
            r.started()
                && r.code != Some(0)
                && r.stderr.contains("403")
                && after.len() == before
                && cached(&home).is_empty(),
            "{label}: with the port not listed, cargo must fail with the proxy's 403, nothing \
             cached, and the server see nothing\n  server log: {after:?}\n{}",
            r.show()
        );
        let (egress, _) = w.run_records();
        assert!(
            !egress.is_empty() && egress.iter().all(|e| e["outcome"] == "refused"),
            "{label}: {egress:#?}"
        );
    }
}
