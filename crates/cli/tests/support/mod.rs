//! What every test file here shares: the binary under test, running a process with a deadline,
//! and running a case as root and as uid 65534.
//!
//! [`sandbox`] is the fixture of the `sandbox_*` files (a temp world per run, attacks and their
//! controls), [`egress`] the one of the `egress_*` files (host servers, the world a run with a
//! host allowlist needs), [`hook`] the small world of the files that drive `pinfold hook`,
//! `check` and `init` (a home and a project in a temporary directory).
// Each test file uses part of the support; what one does not use is not dead.
#![allow(dead_code)]

pub mod container;
pub mod egress;
pub mod hook;
pub mod sandbox;

use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The binary under test, as cargo built it.
pub const BIN: &str = env!("CARGO_BIN_EXE_pinfold");

/// Every agent `pinfold hook` speaks for.
pub const AGENTS: [&str; 5] = ["claude-code", "codex", "gemini", "cursor", "copilot"];

/// The system Python (ctypes for raw syscalls); not a pyenv shim, which uid 65534 cannot use.
pub const PY: &str = "/usr/bin/python3";
/// First line of every attack script's output: the command really started.
pub const STARTED: &str = "PINFOLD-TEST-STARTED";
pub const NOBODY: u32 = 65534;
pub const TIMEOUT: Duration = Duration::from_secs(30);

/// The binary under test, in a place uid 65534 can run it from. `PINFOLD_TEST_EXEC_BIN` swaps
/// in another (e.g. a fake that runs commands unconfined, or adds `--net on`, to check that
/// every attack test can fail).
pub fn pinfold_bin() -> String {
    if let Ok(b) = std::env::var("PINFOLD_TEST_EXEC_BIN") {
        return b;
    }
    static BIN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        let built = PathBuf::from(env!("CARGO_BIN_EXE_pinfold"));
        // uid 65534 must be able to run it (and pinfold re-executes itself): a checkout in a
        // directory closed to others (`mktemp -d` makes 0700 ones) gets a copy in a
        // world-traversable place, one per test process.
        let reachable = built
            .ancestors()
            .skip(1)
            .all(|d| fs::metadata(d).is_ok_and(|m| m.permissions().mode() & 0o001 != 0));
        if reachable {
            return built.display().to_string();
        }
        let dir = std::env::temp_dir().join(format!("pinfold-test-bin-{}", std::process::id()));
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
// Users and test generation
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum User {
    Root,
    Nobody,
}

impl User {
    pub fn name(self) -> &'static str {
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

/// The sandbox and egress suites need root: they run every case as root and as uid 65534 via
/// `setpriv`, and their raw syscall numbers are x86_64's.
pub fn require_root_x86_64() {
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

/// A name no other run of this process (or a concurrent one) uses.
pub fn unique(tag: &str) -> String {
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

// ---------------------------------------------------------------------------------------------
// Running processes
// ---------------------------------------------------------------------------------------------

/// The outcome of one process run with a deadline ([`run_cmd`]).
#[derive(Debug)]
pub struct Run {
    pub what: String,
    pub code: Option<i32>,
    pub signal: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub timed_out: bool,
    pub took: Duration,
}

impl Run {
    pub fn all(&self) -> String {
        format!("{}\n{}", self.stdout, self.stderr)
    }
    pub fn show(&self) -> String {
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
    /// The lines of stdout that start with `prefix`.
    pub fn lines(&self, prefix: &str) -> Vec<&str> {
        self.stdout
            .lines()
            .filter(|l| l.starts_with(prefix))
            .collect()
    }
    pub fn escaped(&self) -> Vec<&str> {
        self.lines("ESCAPED")
    }
    pub fn refused_lines(&self) -> Vec<&str> {
        self.lines("refused")
    }
    pub fn started(&self) -> bool {
        self.stdout.contains(STARTED)
    }
}

/// Output quoted for a failure message (the first 6,000 characters).
pub fn indent(s: &str) -> String {
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
pub fn run_cmd(mut c: Command, what: String, stdin: Option<Vec<u8>>, timeout: Duration) -> Run {
    c.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    });
    c.stdout(Stdio::piped()).stderr(Stdio::piped());
    let t0 = Instant::now();
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

/// The user approves a policy file they wrote, as `pinfold trust PATH` does outside any
/// sandbox, with the world's state directory: the worlds' helpers call it for each policy
/// file (any TOML, YAML or JSON file, since a policy may extend one) they write in a project.
/// What cannot be approved (a name that is not a regular file) stays unapproved.
pub fn approve_policy(path: &Path, state_dir: &Path) {
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    if !["toml", "yaml", "yml", "json"].contains(&ext) || !path.is_file() {
        return;
    }
    let out = std::process::Command::new(BIN)
        .args(["trust", &path.display().to_string()])
        .env("PINFOLD_STATE_DIR", state_dir)
        .output()
        .expect("run pinfold trust");
    assert!(out.status.success(), "pinfold trust {}: {}", path.display(), String::from_utf8_lossy(&out.stderr));
}
