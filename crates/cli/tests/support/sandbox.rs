//! The fixture of the `sandbox_*` tests: one temporary world per run, attacks run as a
//! control and inside `pinfold exec`, and a look at the host afterwards.
//!
//! Every attack runs three times over:
//!
//! 1. a **control**: the same attack without pinfold, in a fresh fixture. It must work on this
//!    host; if it does not, the test fails ("CONTROL FAILED"), because a sandbox test whose attack
//!    cannot succeed anyway proves nothing;
//! 2. the attack inside `pinfold exec`, in another fresh fixture;
//! 3. a look at the **host** afterwards: files absent or unchanged, processes gone, listeners
//!    that received nothing.
//!
//! "Refused" means the attempt failed (non-zero exit, EPERM/EACCES/EROFS/EXDEV/EBUSY…) **and**
//! the host did not change. Attack scripts print `ESCAPED: <what>` for every attempt that
//! succeeded and `refused: <what>: <error>` otherwise; the host check is independent of them.
//! A run only counts if the command really started inside the sandbox (the script prints
//! [`STARTED`] first): pinfold refusing to start (125) or judging the command away (126) does
//! not pass an attack test, except where a case accepts "refuses to start with a clear error".
//!
//! Each case runs as root and as uid 65534 (through `setpriv`), each in its own world-traversable
//! directory under `/tmp/pinfold-tests-*` with its own project, HOME, XDG dirs and
//! `PINFOLD_CACHE_DIR`. The suite must run as root and on x86_64 (raw syscall numbers); nothing
//! is skipped: a missing tool or kernel feature fails the test with a message saying so.
//!
//! Each attack, what it proves and where its test is: `docs/design/escape-tests.md`.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::net::{TcpListener, UdpSocket};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use super::{NOBODY, PY, Run, TIMEOUT, User, pinfold_bin, require_root_x86_64, run_cmd, unique};

/// A policy that allows every command, so the kernel layers (not the policy) face each attack.
pub const TEST_POLICY: &str = r#"# pinfold test policy: allow everything; the sandbox must hold.
[defaults]
action = "allow"
sandbox = "workspace"

[sandbox.workspace]
fs.write.allow = ["."]
fs.write.deny = [".git/hooks", ".git/config", "pinfold.toml", ".env", "denied-dir", "keys/*.pem", "~/.bashrc"]
fs.read.deny = ["~/.ssh", "~/.aws", "secret.txt"]
network.allow = false
"#;

/// The embedded default policy (its `workspace` preset, its rules) with `allow` for commands
/// no rule matches, installed as the *global* config: the real default sandbox, no asking.
pub const DEFAULT_PRESET_ALLOW: &str = r#"extends = ["pinfold:default"]
[defaults]
action = "allow"
"#;

/// Bash prelude of every attack script: the start marker and `t DESC 'shell text'`.
pub const SH_PRELUDE: &str = include_str!("../attacks/prelude.sh");

/// Python prelude: start marker, raw syscalls, helpers that classify errno.
pub const PY_PRELUDE: &str = include_str!("../attacks/prelude.py");

pub struct Fx {
    pub user: User,
    pub name: String,
    pub _tmp: tempfile::TempDir,
    pub base: PathBuf,
    pub home: PathBuf,
    pub proj: PathBuf,
    pub out: PathBuf,
    pub xdg_config: PathBuf,
    pub run_dir: PathBuf,
    /// Where pinfold runs (the project unless a case says otherwise).
    pub cwd: PathBuf,
    /// `-c FILE` for `pinfold exec`; `None` loads the global/project files (or the default).
    pub config: Option<PathBuf>,
    pub env: BTreeMap<String, String>,
    /// A secret's content, in `~/.ssh/id_rsa`, `~/.aws/credentials` and `secret.txt`.
    pub token: String,
    /// Host paths the control may create outside the fixture (removed on drop).
    pub cleanup: Mutex<Vec<PathBuf>>,
    /// Processes the case spawned on the host (killed on drop).
    pub pids: Mutex<Vec<Child>>,
    /// `pinfold exec --backend B` for every run of this fixture (see [`on_backend`]).
    pub backend: Option<&'static str>,
}

thread_local! {
    static BACKEND: std::cell::Cell<Option<&'static str>> = const { std::cell::Cell::new(None) };
}

/// The backend [`on_backend`] set for this thread's fixtures, if any.
pub fn current_backend() -> Option<&'static str> {
    BACKEND.with(std::cell::Cell::get)
}

/// Run `case` with every fixture it makes running its commands on `backend` (`pinfold exec
/// --backend BACKEND`): the same attack, the same host check, another backend.
pub fn on_backend(backend: &'static str, case: impl FnOnce()) {
    BACKEND.with(|b| b.set(Some(backend)));
    case();
    BACKEND.with(|b| b.set(None));
}

impl Drop for Fx {
    fn drop(&mut self) {
        for p in self.cleanup.lock().expect("lock").iter() {
            let _ = fs::remove_file(p);
        }
        for c in self.pids.lock().expect("lock").iter_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Fx {
    /// A fresh world: project (a git repo with a commit, an existing hook, `secret.txt`,
    /// `keys/server.pem`, the test policy as `pinfold.toml`), HOME (`.ssh/id_rsa`,
    /// `.aws/credentials`, `.bashrc`), an outside dir, XDG dirs, all owned by the user.
    pub fn new(user: User, name: &str) -> Fx {
        require_root_x86_64();
        let tmp = tempfile::Builder::new()
            .prefix("pinfold-tests-")
            .tempdir_in("/tmp")
            .expect("create a temp dir under /tmp");
        let base = tmp.path().to_path_buf();
        fs::set_permissions(&base, fs::Permissions::from_mode(0o755)).expect("chmod base");
        let d = |p: &str| {
            let p = base.join(p);
            fs::create_dir_all(&p).expect("mkdir");
            p
        };
        let (home, proj, out) = (d("home"), d("proj"), d("outside"));
        let (xdg_config, xdg_cache, xdg_data) = (d("xdg/config"), d("xdg/cache"), d("xdg/data"));
        let (pcache, run_dir, tmpd) = (d("pinfold-cache"), d("run"), d("tmp"));
        fs::set_permissions(&run_dir, fs::Permissions::from_mode(0o700)).expect("chmod run");
        let token = unique("SECRET-TOKEN-");
        let mut env = BTreeMap::new();
        for (k, v) in [
            ("PATH", "/usr/local/bin:/usr/bin:/bin".to_string()),
            ("HOME", home.display().to_string()),
            (
                "USER",
                if user == User::Root { "root" } else { "nobody" }.to_string(),
            ),
            (
                "LOGNAME",
                if user == User::Root { "root" } else { "nobody" }.to_string(),
            ),
            ("LANG", "C.UTF-8".to_string()),
            ("XDG_CONFIG_HOME", xdg_config.display().to_string()),
            ("XDG_CACHE_HOME", xdg_cache.display().to_string()),
            ("XDG_DATA_HOME", xdg_data.display().to_string()),
            ("XDG_RUNTIME_DIR", run_dir.display().to_string()),
            ("PINFOLD_CACHE_DIR", pcache.display().to_string()),
            ("TMPDIR", tmpd.display().to_string()),
        ] {
            env.insert(k.to_string(), v);
        }
        if current_backend() == Some("container") {
            env.insert("DOCKER_HOST".into(), super::container::engine_for(user).host.clone());
        }
        let fx = Fx {
            user,
            name: name.to_string(),
            _tmp: tmp,
            base,
            home: home.clone(),
            proj: proj.clone(),
            out,
            xdg_config,
            run_dir,
            cwd: proj.clone(),
            config: Some(proj.join("pinfold.toml")),
            env,
            token,
            cleanup: Mutex::new(Vec::new()),
            pids: Mutex::new(Vec::new()),
            backend: BACKEND.with(std::cell::Cell::get),
        };
        // HOME: credentials and a shell rc file.
        fx.put(
            &home.join(".ssh/id_rsa"),
            &format!("-----BEGIN KEY-----\n{}\n", fx.token),
        );
        fx.put(
            &home.join(".aws/credentials"),
            &format!("aws_secret_access_key={}\n", fx.token),
        );
        fx.put(&home.join(".bashrc"), "# original bashrc\n");
        // The project: a repository with one commit and an existing hook.
        fx.init_repo(&proj);
        fx.put(&proj.join("pinfold.toml"), TEST_POLICY);
        fx.put(&proj.join("secret.txt"), &format!("{}\n", fx.token));
        fx.put(&proj.join("keys/server.pem"), "original pem\n");
        fx.put(&proj.join(".git/info/exclude"), ".t/\nsecret.txt\n");
        fx.own();
        fx
    }

    pub fn init_repo(&self, dir: &Path) {
        self.host_ok(&[
            "git",
            "init",
            "-q",
            "-b",
            "main",
            &dir.display().to_string(),
        ]);
        self.put(&dir.join("README"), "hello\n");
        self.put(&dir.join(".git/hooks/pre-push"), "#!/bin/sh\nexit 0\n");
        let d = dir.display().to_string();
        self.host_ok(&["git", "-C", &d, "add", "README"]);
        self.host_ok(&["git", "-C", &d, "commit", "-q", "-m", "initial"]);
    }

    /// Write a host file (parents created) and hand it to the case's user.
    pub fn put(&self, p: &Path, content: &str) {
        if let Some(parent) = p.parent() {
            fs::create_dir_all(parent).expect("mkdir");
        }
        fs::write(p, content).unwrap_or_else(|e| panic!("write {}: {e}", p.display()));
        if p.starts_with(self.home.join(".ssh")) {
            fs::set_permissions(p, fs::Permissions::from_mode(0o600)).expect("chmod");
        }
        if p.to_string_lossy().contains("/hooks/") {
            fs::set_permissions(p, fs::Permissions::from_mode(0o755)).expect("chmod");
        }
    }

    /// Give everything under the base to the case's user (symlinks themselves, never targets),
    /// except files named `suid-*`, which a case made root-owned setuid on purpose.
    pub fn own(&self) {
        if self.user == User::Nobody {
            let b = self.base.display().to_string();
            let o = format!("{NOBODY}:{NOBODY}");
            self.host_ok(&[
                "find", &b, "-name", "suid-*", "-prune", "-o", "-exec", "chown", "-h", &o, "{}",
                "+",
            ]);
        }
    }

    pub fn s(p: &Path) -> String {
        p.display().to_string()
    }

    /// A command run as the case's user with the fixture's environment, in `cwd`.
    pub fn cmd(&self, argv: &[String]) -> Command {
        let mut c = match self.user {
            User::Root => {
                let mut c = Command::new(&argv[0]);
                c.args(&argv[1..]);
                c
            }
            User::Nobody => {
                let mut c = Command::new("setpriv");
                c.args([
                    "--reuid=65534",
                    "--regid=65534",
                    "--clear-groups",
                    "--inh-caps=-all",
                    "--",
                ]);
                c.args(argv);
                c
            }
        };
        c.env_clear().envs(&self.env).current_dir(&self.cwd);
        c
    }

    pub fn label(&self) -> String {
        format!("[{}] {}", self.user.name(), self.name)
    }

    /// Run as root on the host (setup and inspection), failing loudly.
    pub fn host_ok(&self, argv: &[&str]) -> String {
        let mut c = Command::new(argv[0]);
        c.args(&argv[1..]).env_clear().envs(&self.env);
        c.envs([
            ("GIT_AUTHOR_NAME", "t"),
            ("GIT_AUTHOR_EMAIL", "t@example.invalid"),
            ("GIT_COMMITTER_NAME", "t"),
            ("GIT_COMMITTER_EMAIL", "t@example.invalid"),
            ("GIT_CONFIG_COUNT", "1"),
            ("GIT_CONFIG_KEY_0", "safe.directory"),
            ("GIT_CONFIG_VALUE_0", "*"),
        ]);
        let out = c
            .output()
            .unwrap_or_else(|e| panic!("{}: cannot run {argv:?}: {e}", self.label()));
        assert!(
            out.status.success(),
            "{}: host setup/inspection command {argv:?} failed: {}\n{}",
            self.label(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The user approves `policy` (`pinfold trust`, as the case's user, outside any sandbox),
    /// for cases that let pinfold find the project's policy instead of passing `-c`.
    pub fn approve(&self, policy: &Path) {
        let argv = vec![pinfold_bin(), "trust".into(), Self::s(policy)];
        let r = run_cmd(self.cmd(&argv), argv.join(" "), None, TIMEOUT);
        assert_eq!(r.code, Some(0), "{}: cannot approve {}\n{}", self.label(), policy.display(), r.show());
    }

    /// Write `.t/NAME.sh` (bash) in the working directory; returns the argv that runs it.
    pub fn sh_script(&self, name: &str, body: &str) -> Vec<String> {
        let p = self.cwd.join(".t").join(format!("{name}.sh"));
        self.put(&p, &format!("{SH_PRELUDE}{body}\n"));
        self.own();
        vec!["bash".into(), Self::s(&p)]
    }

    /// Write `.t/NAME.py` (with the prelude); returns the argv that runs it.
    pub fn py_script(&self, name: &str, body: &str) -> Vec<String> {
        let p = self.cwd.join(".t").join(format!("{name}.py"));
        self.put(&p, &format!("{PY_PRELUDE}{body}\n"));
        self.own();
        vec![PY.into(), Self::s(&p)]
    }

    /// The control: the argv run directly on the host as the case's user.
    pub fn control(&self, argv: &[String]) -> Run {
        run_cmd(self.cmd(argv), argv.join(" "), None, TIMEOUT)
    }

    /// `pinfold exec [-c CONFIG] OPTS… -- ARGV…` as the case's user.
    pub fn exec_argv(&self, opts: &[&str], argv: &[String]) -> Vec<String> {
        let mut v = vec![pinfold_bin(), "exec".into()];
        if let Some(b) = self.backend {
            v.push(format!("--backend={b}"));
            if b == "container" {
                v.push(format!("--image={}", super::container::toolbox_image_for(self.user)));
            }
        }
        if let Some(c) = &self.config {
            v.push("-c".into());
            v.push(Self::s(c));
        }
        v.extend(opts.iter().map(|s| s.to_string()));
        v.push("--".into());
        v.extend(argv.iter().cloned());
        v
    }

    pub fn exec(&self, opts: &[&str], argv: &[String]) -> Run {
        self.exec_stdin(opts, argv, None)
    }

    pub fn exec_stdin(&self, opts: &[&str], argv: &[String], stdin: Option<&str>) -> Run {
        let full = self.exec_argv(opts, argv);
        let r = run_cmd(
            self.cmd(&full),
            full.join(" "),
            stdin.map(|s| s.as_bytes().to_vec()),
            TIMEOUT,
        );
        self.check_implemented(&r);
        r
    }

    pub fn check_implemented(&self, r: &Run) {
        if r.code == Some(2) && r.stderr.contains("unrecognized subcommand") {
            panic!(
                "{}: EXEC NOT IMPLEMENTED: `pinfold exec` is not a subcommand yet (the control \
                 passed; this is the sandbox step)\n{}",
                self.label(),
                r.show()
            );
        }
    }

    /// Use the embedded default policy (allow for unmatched commands) via the global config.
    pub fn use_default_preset(&mut self) {
        let p = self.xdg_config.join("pinfold/config.toml");
        self.put(&p, DEFAULT_PRESET_ALLOW);
        self.config = None;
        let _ = fs::remove_file(self.proj.join("pinfold.toml"));
        self.own();
    }

    pub fn spawn_host_sleeper(&self, argv0: &str) -> u32 {
        let mut c = self.cmd(&[
            "bash".into(),
            "-c".into(),
            format!("exec -a {argv0} sleep 300"),
        ]);
        c.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let child = c.spawn().expect("spawn a host process");
        let pid = child.id();
        self.pids.lock().expect("lock").push(child);
        // Wait until the exec happened, so the pid carries argv0.
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.starts_with(argv0.as_bytes()))
            {
                break;
            }
            thread::sleep(Duration::from_millis(5));
        }
        pid
    }

    pub fn host_pid_alive(&self, pid: u32) -> bool {
        let mut kids = self.pids.lock().expect("lock");
        match kids.iter_mut().find(|c| c.id() == pid) {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => Path::new(&format!("/proc/{pid}")).exists(),
        }
    }

    // ---- assertions ---------------------------------------------------------------------

    /// The control must show the attack works on this host: every attempt escaped (no
    /// `refused:` line, at least one `ESCAPED:` line when the script prints them) and the host
    /// check saw the change.
    pub fn assert_control(&self, r: &Run, host_changes: &[String], scripted: bool) {
        let ok = !r.timed_out
            && r.started()
            && (!scripted || (r.refused_lines().is_empty() && !r.escaped().is_empty()))
            && !host_changes.is_empty();
        assert!(
            ok,
            "{}: CONTROL FAILED: the attack does not work on this host even without pinfold, so \
             the sandbox test would prove nothing.\n  host changes seen: {host_changes:?}\n{}",
            self.label(),
            r.show()
        );
    }

    /// The sandboxed run must have started the command, every attempt refused, the host
    /// unchanged.
    pub fn assert_refused(&self, r: &Run, host_changes: &[String]) {
        let mut why = Vec::new();
        if r.timed_out {
            why.push("pinfold exec timed out".to_string());
        }
        if !r.started() {
            why.push(format!(
                "the command never started inside the sandbox (exit {:?}); a sandbox that does \
                 not run the command passes no attack test",
                r.code
            ));
        }
        if matches!(r.code, Some(125 | 126)) {
            why.push(format!(
                "pinfold itself refused (exit {:?}) instead of running the attack",
                r.code
            ));
        }
        for e in r.escaped() {
            why.push(format!("attempt succeeded inside the sandbox: {e}"));
        }
        for c in host_changes {
            why.push(format!("HOST CHANGED: {c}"));
        }
        assert!(
            why.is_empty(),
            "{}: SANDBOX FAILED:\n  - {}\n{}",
            self.label(),
            why.join("\n  - "),
            r.show()
        );
    }
}

/// The host-side view of "what changed": `None` if the file is as it was.
pub fn changed_file(p: &Path, before: &Option<Vec<u8>>) -> Option<String> {
    let now = fs::read(p).ok();
    if &now != before {
        Some(format!(
            "{} changed: was {:?}, now {:?}",
            p.display(),
            before
                .as_ref()
                .map(|b| String::from_utf8_lossy(b).into_owned()),
            now.as_ref()
                .map(|b| String::from_utf8_lossy(b).into_owned())
        ))
    } else {
        None
    }
}

pub fn exists_change(p: &Path) -> Option<String> {
    fs::symlink_metadata(p)
        .ok()
        .map(|_| format!("{} exists", p.display()))
}

/// Snapshot of files whose content must not change.
pub struct Snap(Vec<(PathBuf, Option<Vec<u8>>)>);

impl Snap {
    pub fn of(paths: &[PathBuf]) -> Snap {
        Snap(
            paths
                .iter()
                .map(|p| (p.clone(), fs::read(p).ok()))
                .collect(),
        )
    }
    pub fn changes(&self) -> Vec<String> {
        self.0
            .iter()
            .filter_map(|(p, b)| changed_file(p, b))
            .collect()
    }
}

/// The common shape of a file-system attack: control in one fixture, attack in another.
/// `setup` prepares a fixture, `script` returns the argv to run, `changes` lists host changes.
pub fn attack_case(
    u: User,
    name: &str,
    setup: &dyn Fn(&mut Fx),
    script: &dyn Fn(&Fx) -> Vec<String>,
    changes: &dyn Fn(&Fx) -> Vec<String>,
) {
    let mut c = Fx::new(u, name);
    setup(&mut c);
    let argv = script(&c);
    let r = c.control(&argv);
    c.assert_control(&r, &changes(&c), true);

    let mut a = Fx::new(u, name);
    setup(&mut a);
    let argv = script(&a);
    let r = a.exec(&[], &argv);
    a.assert_refused(&r, &changes(&a));
}

/// Control and sandbox for a script whose attempts print ESCAPED/refused; the host check is
/// `changes` (often none: these are kernel calls whose "change" is reaching the kernel).
pub fn syscall_case(u: User, name: &str, script: &dyn Fn(&Fx) -> Vec<String>) {
    let c = Fx::new(u, name);
    let r = c.control(&script(&c));
    let esc: Vec<String> = r.escaped().iter().map(|s| s.to_string()).collect();
    c.assert_control(&r, &esc, true);
    let a = Fx::new(u, name);
    let r = a.exec(&[], &script(&a));
    a.assert_refused(&r, &mounted_under(&a.base));
}

/// Host listeners on loopback: TCP (v4, v6; answering HTTP) and UDP (v4, v6). Count arrivals.
pub struct Listeners {
    pub tcp4: u16,
    pub tcp6: u16,
    pub udp4: UdpSocket,
    pub udp6: UdpSocket,
    pub hits: Arc<AtomicUsize>,
    pub stop: Arc<AtomicBool>,
}

impl Listeners {
    pub fn new() -> Listeners {
        let t4 = TcpListener::bind("127.0.0.1:0").expect("bind tcp4");
        let t6 = TcpListener::bind("[::1]:0").expect("bind tcp6 on ::1");
        let udp4 = UdpSocket::bind("127.0.0.1:0").expect("bind udp4");
        let udp6 = UdpSocket::bind("[::1]:0").expect("bind udp6");
        for s in [&udp4, &udp6] {
            s.set_nonblocking(true).expect("nonblocking");
        }
        let (tcp4, tcp6) = (
            t4.local_addr().expect("addr").port(),
            t6.local_addr().expect("addr").port(),
        );
        let hits = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (h, s) = (hits.clone(), stop.clone());
        thread::spawn(move || {
            for l in [&t4, &t6] {
                l.set_nonblocking(true).expect("nonblocking");
            }
            while !s.load(Ordering::Relaxed) {
                for l in [&t4, &t6] {
                    if let Ok((mut c, _)) = l.accept() {
                        h.fetch_add(1, Ordering::Relaxed);
                        let _ = c.write_all(b"HTTP/1.0 200 OK\r\nContent-Length: 3\r\n\r\nok\n");
                    }
                }
                thread::sleep(Duration::from_millis(5));
            }
        });
        Listeners {
            tcp4,
            tcp6,
            udp4,
            udp6,
            hits,
            stop,
        }
    }

    /// What reached the host.
    pub fn arrivals(&self) -> Vec<String> {
        thread::sleep(Duration::from_millis(50));
        let mut v = Vec::new();
        let n = self.hits.load(Ordering::Relaxed);
        if n > 0 {
            v.push(format!("{n} TCP connection(s) reached a host listener"));
        }
        let mut buf = [0u8; 2048];
        for (name, s) in [("udp4", &self.udp4), ("udp6", &self.udp6)] {
            while let Ok((len, from)) = s.recv_from(&mut buf) {
                v.push(format!(
                    "{name} datagram of {len} bytes from {from} reached the host"
                ));
            }
        }
        v
    }
}

impl Drop for Listeners {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The repository's history as the host sees it, or why it is broken.
pub fn history(fx: &Fx, dir: &Path) -> Result<String, String> {
    let out = Command::new("git")
        .args(["-C", &Fx::s(dir), "log", "--format=%H %s"])
        .env_clear()
        .envs(&fx.env)
        .envs([
            ("GIT_CONFIG_COUNT", "1"),
            ("GIT_CONFIG_KEY_0", "safe.directory"),
            ("GIT_CONFIG_VALUE_0", "*"),
        ])
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// A worktree: the project's `.git` is a file pointing into a main repository elsewhere. The
/// common git dir must be writable for `git commit` (positive test), but its hooks and config
/// are as dangerous as the project's own and must stay protected.
pub fn make_worktree(fx: &mut Fx) {
    let main = fx.out.join("main");
    fs::create_dir_all(&main).expect("mkdir");
    fx.init_repo(&main);
    let wt = fx.base.join("wt");
    fx.host_ok(&[
        "git",
        "-C",
        &Fx::s(&main),
        "worktree",
        "add",
        "-q",
        "-b",
        "wt",
        &Fx::s(&wt),
    ]);
    fx.cwd = wt.clone();
    fx.put(&wt.join("pinfold.toml"), TEST_POLICY);
    fx.config = Some(wt.join("pinfold.toml"));
    fx.own();
}

/// Commits made inside a run need an identity (the fixture's HOME has no git config).
pub const GIT_ID: &str = "export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@example.invalid GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@example.invalid\n";

/// Mounts on the host under `dir` (a sandbox mounting on the host is a host change); they are
/// detached so the temp dir can be removed.
pub fn mounted_under(dir: &Path) -> Vec<String> {
    let info = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let d = Fx::s(dir);
    let found: Vec<String> = info
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .filter(|m| m.starts_with(&d))
        .map(String::from)
        .collect();
    for m in &found {
        let _ = Command::new("umount").args(["-l", m]).status();
    }
    found
        .into_iter()
        .map(|m| format!("a mount appeared on the host at {m}"))
        .collect()
}
