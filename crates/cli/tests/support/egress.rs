//! The fixture of the `egress_*` tests: `pinfold exec` with a preset that lists
//! `network.hosts` (see `docs/egress.md`), against real servers these tests start on the host,
//! with real tools (curl, bash, python3, git, pip, cargo) inside the sandbox.
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
//! network namespace of their own ([`netns`]) where those addresses are on loopback with the
//! test's listeners, and resolve names through the test's own DNS responder and hosts file
//! ([`World::with_own_etc`]). `PINFOLD_TEST_EXEC_BIN` swaps in another binary (e.g. a wrapper
//! adding `--net on`), to check that every test here can fail; `PINFOLD_TEST_SHOW=1` prints
//! every sandboxed run.

use std::collections::BTreeMap;
use std::fs;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, Shutdown, TcpListener, UdpSocket};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use pinfold_test_support::netns;
use serde_json::Value;

use super::{NOBODY, PY, Run, STARTED, TIMEOUT, User, pinfold_bin, require_root_x86_64, run_cmd};

/// Where the proxy listens inside the sandbox's namespace.
pub const PROXY_PORT: u16 = 3128;

/// A TCP listener on the host that answers HTTP and logs every connection and request line.
pub struct HostTcp {
    pub port: u16,
    /// `connection` for each accept, then the request line (or `no request line`).
    pub log: Arc<Mutex<Vec<String>>>,
    pub conns: Arc<AtomicUsize>,
    pub stop: Arc<AtomicBool>,
    /// What it answers with: a token the client can only have got from this server.
    pub body: String,
}

impl HostTcp {
    /// Listen on `ip` (`0.0.0.0` reaches it through every host address, loopback or not).
    pub fn bind(ip: &str) -> HostTcp {
        HostTcp::bind_at(ip, 0)
    }

    /// Listen on `ip:port` (port 0: any free one).
    pub fn bind_at(ip: &str, port: u16) -> HostTcp {
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
    pub fn seen(&self) -> Vec<String> {
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

    pub fn clear(&self) {
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
pub struct HostUdp {
    pub port: u16,
    pub log: Arc<Mutex<Vec<String>>>,
    pub stop: Arc<AtomicBool>,
}

impl HostUdp {
    pub fn bind(ip: &str) -> HostUdp {
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

    pub fn seen(&self) -> Vec<String> {
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
pub struct HostDns {
    pub log: Arc<Mutex<Vec<String>>>,
    pub stop: Arc<AtomicBool>,
}

impl HostDns {
    pub fn start(ip: Ipv4Addr, names: &[(&str, Ipv4Addr)]) -> HostDns {
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

    pub fn seen(&self) -> Vec<String> {
        thread::sleep(Duration::from_millis(150));
        self.log.lock().expect("lock").clone()
    }

    pub fn clear(&self) {
        self.log.lock().expect("lock").clear();
    }
}

impl Drop for HostDns {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The reply to a DNS query (RFC 1035 4.1) from `table`, with the name and query type.
pub fn dns_answer(q: &[u8], table: &[(String, Ipv4Addr)]) -> Option<(String, u16, Vec<u8>)> {
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
pub const SERVE_PY: &str = include_str!("../programs/serve.py");

/// A server (TLS when given a certificate) that answers one HTTP/1.0 response per connection
/// and then holds the connection open without closing it, as a slow or long-polling upstream
/// does; it logs `served <request line>` for each.
pub const HOLD_PY: &str = include_str!("../programs/hold.py");

/// A wheel with METADATA, WHEEL and RECORD (hashes and sizes as pip checks them).
pub const MKWHEEL_PY: &str = include_str!("../programs/mkwheel.py");

pub struct PyServer {
    pub child: Child,
    pub port: u16,
    pub log: PathBuf,
}

impl PyServer {
    pub fn start(root: &Path, tls: Option<(&Path, &Path)>, log: PathBuf) -> PyServer {
        PyServer::start_script(SERVE_PY, root, tls, log)
    }

    /// `code` run as `python3 SCRIPT ROOT CERT KEY`; it prints its port on the first line.
    pub fn start_script(
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
    pub fn requests(&self) -> Vec<String> {
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

pub struct World {
    pub user: User,
    pub name: String,
    pub _tmp: tempfile::TempDir,
    pub base: PathBuf,
    pub proj: PathBuf,
    pub state: PathBuf,
    pub env: BTreeMap<String, String>,
    /// Ledger records already looked at (each run's records come after these).
    pub read_records: Mutex<usize>,
    pub policies: AtomicUsize,
    /// The test's own `hosts`, `resolv.conf` and `nsswitch.conf`, bound over /etc's for every
    /// command of this world ([`World::with_own_etc`]).
    pub etc: Option<tempfile::TempDir>,
    /// `pinfold exec --backend B` for every run (see [`super::sandbox::on_backend`]).
    pub backend: Option<&'static str>,
}

impl World {
    pub fn new(user: User, name: &str) -> World {
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
            backend: super::sandbox::current_backend(),
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
    pub fn with_own_etc(mut self, hosts: &[(&str, String)]) -> World {
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

    pub fn label(&self) -> String {
        format!("[{}] {}", self.user.name(), self.name)
    }

    /// Hand the whole tree to the case's user.
    pub fn own(&self) {
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

    pub fn put(&self, p: &Path, content: &[u8]) {
        fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        fs::write(p, content).unwrap_or_else(|e| panic!("write {}: {e}", p.display()));
        self.own();
    }

    /// A policy file allowing every command in the `net` preset with these hosts.
    pub fn policy(&self, hosts: &[String]) -> PathBuf {
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
    pub fn cmd(&self, argv: &[String], extra_env: &[(&str, &str)]) -> Command {
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
        if self.backend == Some("container") {
            c.env("DOCKER_HOST", &super::container::engine_for(self.user).host);
        }
        c
    }

    /// The control: `argv` on the host, without pinfold (and so without any proxy variable).
    pub fn control(&self, argv: &[String]) -> Run {
        run_cmd(self.cmd(argv, &[]), argv.join(" "), None, TIMEOUT)
    }

    /// `--backend=B` (and the test image for a container) when the case runs on another
    /// backend than the process one.
    pub fn backend_flags(&self) -> Vec<String> {
        let mut v = Vec::new();
        if let Some(b) = self.backend {
            v.push(format!("--backend={b}"));
            if b == "container" {
                v.push(format!("--image={}", super::container::toolbox_image_for(self.user)));
            }
        }
        v
    }

    /// `pinfold exec -c POLICY -- ARGV…` as the case's user.
    pub fn exec(&self, policy: &Path, argv: &[String]) -> Run {
        self.exec_env(policy, argv, &[])
    }

    pub fn exec_env(&self, policy: &Path, argv: &[String], extra_env: &[(&str, &str)]) -> Run {
        let mut full = vec![
            pinfold_bin(),
            "exec".into(),
            "-c".into(),
            policy.display().to_string(),
        ];
        full.extend(self.backend_flags());
        full.push("--".into());
        full.extend(argv.iter().cloned());
        let r = run_cmd(self.cmd(&full, extra_env), full.join(" "), None, TIMEOUT);
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
    pub fn script(&self, name: &str, body: &str) -> String {
        let p = self.proj.join(".t").join(name);
        self.put(&p, body.as_bytes());
        p.display().to_string()
    }

    /// A bash script: the start marker, then `t DESC CMD ARGS…`, which runs the command and
    /// prints `ESCAPED: DESC: <output>` if it succeeded, `refused: DESC: rc=N <output>` if not.
    pub fn bash(&self, name: &str, body: &str) -> Vec<String> {
        let text = format!(
            "echo {STARTED}\n\
             t() {{ local d=$1 out; shift; if out=$(\"$@\" 2>&1 </dev/null); then echo \"ESCAPED: $d: $out\"; else echo \"refused: $d: rc=$? $out\"; fi; }}\n\
             {body}\n"
        );
        vec!["bash".into(), self.script(&format!("{name}.sh"), &text)]
    }

    pub fn python(&self, name: &str, body: &str) -> Vec<String> {
        let text = format!(
            "import errno, os, socket, sys\nprint({STARTED:?}, flush=True)\n\
             def ename(e):\n    return errno.errorcode.get(e, str(e)) if e else 'OK'\n{body}\n"
        );
        vec![PY.into(), self.script(&format!("{name}.py"), &text)]
    }

    /// Forget the records written since the last look (a run that wrote none, or not one run).
    pub fn skip_records(&self) {
        let text = fs::read_to_string(self.state.join("ledger.jsonl")).unwrap_or_default();
        *self.read_records.lock().expect("lock") = text.lines().count();
    }

    /// The ledger records written since the last call, checked to be exactly one run:
    /// `exec_start`, its `egress` records, `exec_end` naming that start. Returns the egress
    /// records' `data` and the `exec_end` record's `data`.
    pub fn run_records(&self) -> (Vec<Value>, Value) {
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
pub const ETC_OVERLAY_SH: &str = include_str!("../programs/etc_overlay.sh");

/// `"127.0.0.1:PORT"`.
pub fn lo(port: u16) -> String {
    format!("127.0.0.1:{port}")
}

pub fn argv(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// The sandboxed script started, no attempt succeeded, the host saw nothing.
pub fn assert_refused(w: &World, r: &Run, host: &[String]) {
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
pub fn assert_control(w: &World, r: &Run, host: &[String], want: usize) {
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
pub fn kernel_refused(line: &str) -> bool {
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
pub fn decisions(egress: &[Value]) -> Vec<(String, u64, String)> {
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

/// A test CA and a server certificate for IP 127.0.0.1 it signed, made with the `openssl` CLI in
/// `base/pki`: `ca.pem`, `srv.pem`, `srv.key`.
pub fn test_pki(base: &Path) -> PathBuf {
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
