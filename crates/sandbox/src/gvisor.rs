//! The gVisor backend: the policy written as an OCI bundle and run by `runsc`, so the command's
//! system calls go to gVisor's user-space kernel (the Sentry) and its file access through
//! gVisor's file proxy, never straight to the host kernel.
//!
//! The command's root is the process sandbox's mount tree, built with the host kernel's mounts
//! by pinfold's helper (see [`Tree`]): the host's root read-only; each writable root bound
//! writable; the directories holding protected paths bound over themselves (so they cannot be
//! renamed away); each write-deny path (and each placeholder) bound read-only; each read-deny
//! path covered by an empty read-only tmpfs or by an empty file. gVisor adds a private tmpfs
//! for TMPDIR and its own `/proc`, `/dev` and `/sys`. The process has no capabilities,
//! `no_new_privs`, the scrubbed environment and the caller's `RLIMIT_NOFILE`.
//!
//! `runsc` is started through pinfold's own helper (`__sandbox-helper gvisor`), which dies
//! with its parent, makes a user namespace mapping the caller alone (root too) to root, a
//! network and a mount namespace, builds the tree there at the bundle's `rootfs` from
//! descriptors opened with no link followed, runs `runsc --rootless` and passes signals on with
//! `runsc kill`. Network off: gVisor's own network stack with nothing but loopback
//! (`--network=none`). Network through the proxy: the helper listens at
//! `127.0.0.1:PORT` in its new namespace, hands the listener to the caller, and runsc uses
//! that namespace as the host network (`--network=host`), where nothing else is reachable.

use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::backend::{Backend, BackendKind, BackendStatus};
use crate::parent::{prepare, setup_err, Prepared};
use crate::{sys, FORWARDED, Hooks, LayerStatus, Network, Outcome, Policy, Prestart, SandboxError, Step};

/// Where pinfold finds `runsc` when it is not on `PATH` (an absolute path).
pub const RUNSC_ENV: &str = "PINFOLD_RUNSC";

/// A file to write a copy of each run's OCI configuration to (for benchmarks).
const BUNDLE_COPY_ENV: &str = "PINFOLD_GVISOR_BUNDLE_COPY";

const INSTALL_HINT: &str = "install gVisor's runsc (Debian: `apt install runsc`), or set PINFOLD_RUNSC to its absolute path";

#[derive(Debug)]
pub(crate) struct Gvisor;

/// The system directories `runsc` is looked for in. Not `PATH`: a project's `.venv/bin` or
/// `node_modules/.bin` on it would let a command plant the program pinfold runs unconfined.
const SYSTEM_DIRS: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The `runsc` to run: `$PINFOLD_RUNSC` (an absolute path), else the first in the system
/// directories.
fn runsc() -> Result<PathBuf, SandboxError> {
    if let Some(p) = std::env::var_os(RUNSC_ENV).filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        return if p.is_absolute() && p.is_file() {
            Ok(p)
        } else {
            Err(SandboxError::Backend {
                backend: "gvisor",
                why: format!("{RUNSC_ENV}={} is not an absolute path to a file", p.display()),
                hint: INSTALL_HINT.into(),
            })
        };
    }
    sys::find_program("runsc", Some(std::ffi::OsStr::new(SYSTEM_DIRS))).ok_or_else(|| SandboxError::Backend {
        backend: "gvisor",
        why: format!("runsc is not installed (looked in {SYSTEM_DIRS})"),
        hint: INSTALL_HINT.into(),
    })
}

/// Refuse a `runsc` a sandboxed command could have written: one beneath a writable root of
/// this run, or one (or a directory above it) that another user than root or the caller owns
/// or that others may write.
fn trusted(runsc: &Path, writable: &[PathBuf]) -> Result<PathBuf, SandboxError> {
    use std::os::unix::fs::MetadataExt;
    let refuse = |why: String| SandboxError::Backend { backend: "gvisor", why, hint: "install runsc where only root can write (Debian: `apt install runsc`), or point PINFOLD_RUNSC there".into() };
    let real = sys::canonicalize(runsc).map_err(|e| refuse(format!("{}: {e}", runsc.display())))?;
    if let Some(w) = writable.iter().find(|w| real.starts_with(w)) {
        return Err(refuse(format!("{} is beneath {}, which sandboxed commands may write", real.display(), w.display())));
    }
    let (uid, _) = sys::ids();
    for p in real.ancestors() {
        let m = std::fs::metadata(p).map_err(|e| refuse(format!("{}: {e}", p.display())))?;
        let sticky_dir = m.is_dir() && m.mode() & 0o1000 != 0;
        if (m.uid() != 0 && m.uid() != uid) || (m.mode() & 0o022 != 0 && !sticky_dir) {
            return Err(refuse(format!("{} may be written by others than root and you", p.display())));
        }
    }
    Ok(real)
}

fn version(runsc: &Path) -> Option<String> {
    let out = std::process::Command::new(runsc).arg("--version").stdin(std::process::Stdio::null()).output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines().next().map(|l| l.trim().to_string()).filter(|l| !l.is_empty())
}

impl Backend for Gvisor {
    fn kind(&self) -> BackendKind {
        BackendKind::Gvisor
    }

    fn status(&self) -> BackendStatus {
        let runsc = match runsc() {
            Ok(p) => p,
            Err(e) => {
                let fix = e.hint().map(str::to_string);
                return BackendStatus { name: "gvisor", available: false, detail: e.to_string(), fix, program: None };
            }
        };
        let Some(v) = version(&runsc) else {
            return BackendStatus {
                name: "gvisor",
                available: false,
                detail: format!("{} does not answer --version", runsc.display()),
                fix: Some(INSTALL_HINT.into()),
                program: Some(runsc),
            };
        };
        if let Err(e) = trusted(&runsc, &[]) {
            return BackendStatus { name: "gvisor", available: false, detail: e.to_string(), fix: e.hint().map(str::to_string), program: Some(runsc) };
        }
        let a = crate::probe();
        if !a.user_namespaces {
            return BackendStatus {
                name: "gvisor",
                available: false,
                detail: format!("{v}; runsc runs in a user namespace of pinfold's: {}", a.user_namespaces_why.unwrap_or_else(|| "creating one failed".into())),
                fix: Some(crate::USERNS_HINT.into()),
                program: Some(runsc),
            };
        }
        BackendStatus { name: "gvisor", available: true, detail: format!("{v}, rootless in a user namespace of pinfold's"), fix: None, program: Some(runsc) }
    }

    fn run(&self, policy: &Policy, argv: &[String], pre: Option<Prestart>, hooks: Hooks<'_>) -> Result<Outcome, SandboxError> {
        drop(pre);
        if argv.is_empty() {
            return Err(SandboxError::NoCommand);
        }
        if !policy.watch.is_empty() && hooks.observer.is_some() {
            return Err(SandboxError::Backend {
                backend: "gvisor",
                why: "it cannot record changes for undo: the command's calls go to gVisor's kernel, where pinfold cannot see a change before it happens".into(),
                hint: "run with the process backend, or turn undo off ([undo] enabled = false)".into(),
            });
        }
        // gVisor's network here is its own stack with loopback alone, or the egress proxy: a
        // run asking for the host's network would get none while its report said `on` (found
        // by an outside attack). Refused, as the container backend refuses it.
        if policy.network == Network::On {
            return Err(SandboxError::Backend {
                backend: "gvisor",
                why: "a gVisor run has no network or reaches the egress proxy; `network = on` (the host's network unfiltered) is not given here".into(),
                hint: "name the hosts the command may reach (network.hosts) to go through the egress proxy, or use the process backend for unfiltered network".into(),
            });
        }
        let runsc = runsc()?;
        if !crate::probe().user_namespaces {
            return Err(SandboxError::Backend {
                backend: "gvisor",
                why: "runsc runs in a user namespace of pinfold's, and this user cannot make one".into(),
                hint: crate::USERNS_HINT.into(),
            });
        }
        let prepared = prepare(policy)?;
        let runsc = trusted(&runsc, &prepared.resolved.writable)?;
        let Some(program) = resolve_program(&argv[0], &prepared.env, &prepared.cwd) else {
            eprintln!("pinfold: {}: command not found", argv[0]);
            let mut report = prepared.report;
            fill_report(&mut report);
            return Ok(Outcome { code: 127, report, reaper: Default::default() });
        };
        let bundle = Bundle::create(&prepared.run_dir)?;
        let rootfs = bundle.path.join("rootfs");
        std::fs::DirBuilder::new().mode(0o700).create(&rootfs).map_err(setup_err(Step::RunDir(rootfs.clone())))?;
        let tree = Tree::of(&prepared);
        let config = config(policy, &prepared, &program, argv, &rootfs);
        // Readable by its owner only: it holds the environment the command gets (a kept
        // secret among it).
        let bytes = serde_json::to_vec_pretty(&config).map_err(SandboxError::EncodeSpec)?;
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(bundle.path.join("config.json"))
            .and_then(|mut f| std::io::Write::write_all(&mut f, &bytes))
            .map_err(setup_err(Step::RunDir(bundle.path.clone())))?;
        // For bench/backends.sh: the same bundle, timed under bare `runsc run`.
        if let Some(copy) = std::env::var_os(BUNDLE_COPY_ENV) {
            let _ = std::fs::write(copy, serde_json::to_vec_pretty(&config).unwrap_or_default());
        }
        let result = launch(&runsc, policy, &bundle, &tree, hooks, &prepared.tripwire);
        let Prepared { held, mut report, .. } = prepared;
        let code = result?;
        drop(held);
        fill_report(&mut report);
        Ok(Outcome { code, report, reaper: Default::default() })
    }
}

/// Rules of the process sandbox a gVisor run leaves out. `clone3` is refused with ENOSYS so
/// that libc falls back to `clone`; runsc (20221219) returns EPERM for every refusal whatever
/// `errnoRet` says, and EPERM from `clone3` stops glibc's threads. gVisor's namespaces are
/// its own kernel's: a new one inside reaches nothing of the host's.
const GVISOR_EXCEPT: &[&str] = &["clone3"];

/// What a gVisor run enforced, in the report's terms.
fn fill_report(report: &mut crate::SandboxReport) {
    report.backend = BackendKind::Gvisor;
    // The mount tree and the namespaces are gVisor's, and complete.
    report.namespaces = Some(LayerStatus::Enforced);
    report.hygiene = Some(LayerStatus::Enforced);
    report.kernel = Some("gVisor (runsc, rootless)".into());
    report.seccomp = crate::seccomp::RULES.iter().filter(|r| !r.network_off_only && !GVISOR_EXCEPT.contains(&r.name)).map(|r| r.name.to_string()).collect();
}

/// The program `name` names, found as the process backend finds it (a name with a slash as
/// it is, else along the command's `PATH`): runsc wants a path, and a missing command is 127
/// here as there.
fn resolve_program(name: &str, env: &[(String, String)], cwd: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    if name.contains('/') {
        return Some(cwd.join(name));
    }
    if name.is_empty() {
        return None;
    }
    let path = env.iter().find(|(k, _)| k == "PATH").map_or("/usr/local/bin:/usr/bin:/bin", |(_, v)| v.as_str());
    path.split(':').find_map(|d| {
        let dir = if d.is_empty() { cwd.to_path_buf() } else { cwd.join(d) };
        let p = dir.join(name);
        let m = std::fs::metadata(&p).ok()?;
        (m.is_file() && m.permissions().mode() & 0o111 != 0).then_some(p)
    })
}

/// A run's bundle directory (`config.json`, runsc's state and log), under the run base's
/// `gvisor/`, removed when dropped. Those left by a killed run are removed by the next.
struct Bundle {
    path: PathBuf,
    id: String,
}

impl Bundle {
    fn create(run_dir: &Path) -> Result<Bundle, SandboxError> {
        let base = run_dir.join("gvisor");
        match std::fs::DirBuilder::new().mode(0o700).create(&base) {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(setup_err(Step::RunDir(base))(e)),
            _ => {}
        }
        sweep(&base);
        let pid = std::process::id();
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        static COUNT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = COUNT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let id = format!("pinfold-{pid}-{n}-{nanos:x}");
        let path = base.join(&id);
        std::fs::DirBuilder::new().mode(0o700).create(&path).map_err(setup_err(Step::RunDir(path.clone())))?;
        std::fs::DirBuilder::new().mode(0o700).create(path.join("state")).map_err(setup_err(Step::RunDir(path.clone())))?;
        Ok(Bundle { path, id })
    }
}

impl Drop for Bundle {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Remove the bundles of runs whose pinfold is gone (killed before it could clean up).
fn sweep(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else { return };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.strip_prefix("pinfold-")).and_then(|r| r.split('-').next()).and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        // Signal 0: is the run's pinfold still there? (A reused pid keeps a stale bundle a
        // little longer; it is never in anyone's way.)
        if pid > 0 && sys::kill(pid, 0).is_err_and(|e| e.raw_os_error() == Some(libc::ESRCH)) {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// The tree runsc serves as the command's root: the host's, built by the helper in its own
/// mount namespace at the bundle's `rootfs` as the process backend builds its own
/// ([`mounts::bind_policy`]): every writable root, pinned directory, write-deny path and
/// cover put on the directory entry opened with no link followed, in the host kernel. runsc
/// gets no bind of its own to place by path, and gVisor's file proxy walks a tree whose
/// protections are mounts on the very entries: a directory renamed on the host while the run
/// goes takes its mounts along (found: with per-path binds, gVisor looked a renamed directory
/// up afresh, without the read-only bind on it, and a write-deny file was written).
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Tree {
    writable: Vec<PathBuf>,
    pins: Vec<PathBuf>,
    write_deny: Vec<PathBuf>,
    read_deny: Vec<(PathBuf, bool)>,
    empty: PathBuf,
}

impl Tree {
    fn of(p: &Prepared) -> Tree {
        let r = &p.resolved;
        Tree { writable: r.writable.clone(), pins: r.pins.clone(), write_deny: r.write_deny.clone(), read_deny: r.read_deny.clone(), empty: p.run_dir.join("empty") }
    }

    /// As JSON, for the helper.
    fn arg(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| "{}".into())
    }
}

/// The OCI runtime configuration of one run: the helper's tree as the root (writable where
/// the tree is: the host kernel refuses the rest), gVisor's own `/proc`, `/dev` and `/sys`, a
/// private TMPDIR, and nothing of pinfold's run directory.
fn config(policy: &Policy, p: &Prepared, program: &Path, argv: &[String], rootfs: &Path) -> Value {
    let mut mounts = Vec::new();
    // pinfold's run directory: every run's bundle and runsc state, the container backend's
    // staged bind sources, kept-container records: nothing for the command to read (an empty
    // tmpfs, which holds only the private TMPDIR's mount point).
    mounts.push(json!({"destination": p.run_dir, "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "nodev", "noexec", "size=16k", "mode=0555"]}));
    if policy.private_tmp {
        mounts.push(json!({"destination": p.tmpdir, "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "nodev", "mode=0700"]}));
    }
    // gVisor's own /proc, /dev and /sys.
    mounts.push(json!({"destination": "/proc", "type": "proc", "source": "proc"}));
    mounts.push(json!({"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "mode=755"]}));
    mounts.push(json!({"destination": "/sys", "type": "sysfs", "source": "sysfs", "options": ["nosuid", "noexec", "nodev", "ro"]}));
    let mut namespaces = vec![json!({"type": "pid"}), json!({"type": "ipc"}), json!({"type": "uts"}), json!({"type": "mount"})];
    if policy.network != Network::Proxy {
        namespaces.push(json!({"type": "network"}));
    }
    let (soft, hard) = sys::getrlimit(libc::RLIMIT_NOFILE);
    let mut args = vec![program.display().to_string()];
    args.extend(argv[1..].iter().cloned());
    let hostname = sys::hostname().unwrap_or_else(|| "pinfold".into());
    json!({
        "ociVersion": "1.0.2",
        "process": {
            "terminal": false,
            "user": {"uid": 0, "gid": 0},
            "args": args,
            "env": p.env.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>(),
            "cwd": p.cwd,
            "capabilities": {"bounding": [], "effective": [], "inheritable": [], "permitted": [], "ambient": []},
            "rlimits": [{"type": "RLIMIT_NOFILE", "soft": soft, "hard": hard}],
            "noNewPrivileges": true,
        },
        "root": {"path": rootfs, "readonly": false},
        "hostname": hostname,
        "mounts": mounts,
        // The process sandbox's rules, in the command's gVisor kernel (`--oci-seccomp`): what
        // gVisor would allow that the other backends refuse (setuid bits above all).
        "linux": {"namespaces": namespaces, "seccomp": crate::container::profile::over(crate::container::profile::allow_by_default(), GVISOR_EXCEPT)},
    })
}

/// Start runsc (through the helper), hand the proxy listener on, pass signals, wait; the
/// command's exit status, or why runsc could not run it.
fn launch(runsc: &Path, policy: &Policy, bundle: &Bundle, tree: &Tree, hooks: Hooks<'_>, wire: &crate::tripwire::Tripwire) -> Result<i32, SandboxError> {
    let Hooks { release, listener, .. } = hooks;
    let proxy = policy.network == Network::Proxy;
    let log = bundle.path.join("runsc.log");
    let mut runsc_args: Vec<String> = vec![
        runsc.display().to_string(),
        "--root".into(),
        bundle.path.join("state").display().to_string(),
        "--log".into(),
        log.display().to_string(),
        "--log-format".into(),
        "json".into(),
        format!("--network={}", if proxy { "host" } else { "none" }),
        // No host socket or FIFO is ever opened from inside (the read-deny list does not
        // cover them: see `config`).
        "--host-uds=none".into(),
        "--host-fifo=none".into(),
        "--oci-seccomp".into(),
    ];
    // runsc as root of pinfold's user namespace, which maps the caller alone (root too):
    // `--rootless`, or it would make namespaces it cannot there and switch its sandbox to a
    // user it cannot map; cgroups belong to the host's root. So runsc never holds a host
    // capability, and never hands the caller's standard streams to another user (runsc as
    // the host's root gives them to its sandbox's uid).
    runsc_args.push("--rootless".into());
    runsc_args.push("--ignore-cgroups".into());
    runsc_args.extend(["run".into(), "--bundle".into(), bundle.path.display().to_string(), bundle.id.clone()]);
    // Nothing of the command starts before the caller lets it.
    release().map_err(SandboxError::NotReleased)?;
    let (ours, theirs) = sys::socketpair().map_err(setup_err(Step::ReportChannel))?;
    sys::clear_cloexec(theirs.as_raw_fd()).map_err(setup_err(Step::PassReportPipe))?;
    let (uid, gid) = sys::ids();
    let exe = std::env::current_exe().map_err(setup_err(Step::FindExecutable))?;
    let (out, err, shared) = streams().map_err(setup_err(Step::StartHelper))?;
    let sigfd = sys::signalfd_for(FORWARDED).map_err(setup_err(Step::Signalfd))?;
    // (The builder, which holds the pipes' write ends, is gone when `spawn` returns: the
    // relays see the end when the command's side closes.)
    let spawned = std::process::Command::new(exe)
        .arg(crate::HELPER_ARG)
        .arg("gvisor")
        .arg(theirs.as_raw_fd().to_string())
        .arg(std::process::id().to_string())
        .arg(format!("{uid}:{gid}"))
        .arg(tree.arg())
        .arg(if proxy { policy.proxy_port.to_string() } else { "-".into() })
        .args(&runsc_args)
        // Its own process group: a terminal's Ctrl-C reaches pinfold alone, which passes it
        // to the command through runsc (runsc itself would just die of it).
        .process_group(0)
        .env_clear()
        .env("PATH", SYSTEM_DIRS)
        .stdout(out)
        .stderr(err)
        .spawn();
    drop(theirs);
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => {
            let _ = sys::unblock_signals(FORWARDED);
            return Err(setup_err(Step::StartHelper)(e));
        }
    };
    let pid = child.id() as libc::pid_t;
    let relays = [child.stdout.take().map(|o| relay(o, 1)), child.stderr.take().map(|e| relay(e, 2)), shared.map(|r| relay(r, 1))];
    // The helper says `L` with the listener attached (proxy), then `R` just before it becomes
    // runsc; or `E` and why it failed.
    let mut said = Vec::new();
    let mut failed: Option<String> = None;
    loop {
        let mut buf = [0u8; 512];
        match sys::recv_with_fds(&ours, &mut buf) {
            Ok((0, _)) | Err(_) => break,
            Ok((n, fds)) => {
                said.extend_from_slice(&buf[..n]);
                if let Some(fd) = fds.into_iter().next() {
                    listener(std::net::TcpListener::from(fd));
                }
                if said.contains(&b'R') {
                    break;
                }
                if said.first() == Some(&b'E') {
                    // The rest of the message follows until the helper closes its end.
                    continue;
                }
            }
        }
    }
    if said.first() == Some(&b'E') {
        failed = Some(String::from_utf8_lossy(&said[1..]).trim().to_string());
    }
    drop(ours);
    // The helper passes each signal to the command (`runsc kill`). A tripped wire kills the
    // helper: runsc and gVisor's sandbox die with it (their death signal).
    let status = wait_passing_signals(&mut child, &sigfd, |sig| {
        let _ = sys::kill(pid, sig);
    }, Some(wire));
    let _ = sys::unblock_signals(FORWARDED);
    drop(sigfd);
    // Everything that held the pipes has ended with runsc: the relays see the end.
    for r in relays.into_iter().flatten() {
        let _ = r.join();
    }
    let (status, tripped) = status.map_err(setup_err(Step::Poll))?;
    if let Some(t) = tripped {
        return Err(SandboxError::ProtectedChanged { path: t.path, created: t.created });
    }
    if let Some(why) = failed {
        return Err(SandboxError::child(why));
    }
    use std::os::unix::process::ExitStatusExt;
    let code = match (status.code(), status.signal()) {
        (Some(c), _) => c,
        (None, Some(s)) => 128 + s,
        _ => 128,
    };
    // runsc's own failures (the bundle refused, the sandbox not started) exit 128 and log at
    // level error; a command that exits 128 logs nothing.
    if code == 128
        && let Some(why) = runsc_error(&log)
    {
        return Err(SandboxError::Child { step: format!("runsc: {why}"), hint: Some("`pinfold doctor` checks the gvisor backend") });
    }
    Ok(code)
}

/// Wait for `child`, handing each signal read from `sigfd` to `pass` meanwhile; with a
/// `wire`, `child` is killed when it trips, and the trip returned.
fn wait_passing_signals(
    child: &mut std::process::Child,
    sigfd: &OwnedFd,
    mut pass: impl FnMut(libc::c_int),
    wire: Option<&crate::tripwire::Tripwire>,
) -> std::io::Result<(std::process::ExitStatus, Option<crate::tripwire::Trip>)> {
    let end = |child: &mut std::process::Child, tripped: Option<crate::tripwire::Trip>| {
        let status = child.wait()?;
        // A change not yet read when the command ended counts as well.
        Ok((status, tripped.or_else(|| wire.and_then(|w| w.tripped_at_end()))))
    };
    let Ok(pidfd) = sys::pidfd_open(child.id() as libc::pid_t) else { return end(child, None) };
    let mut tripped = None;
    loop {
        let w = wire.filter(|w| tripped.is_none() && w.watching()).map_or(-1, |w| w.raw());
        let ready = match sys::poll_read(&[sigfd.as_raw_fd(), pidfd.as_raw_fd(), w], -1) {
            Ok(r) => r,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return end(child, tripped),
        };
        if ready[0]
            && let Ok(sig) = sys::read_signal(sigfd)
        {
            pass(sig);
        }
        if ready[2] && tripped.is_none() {
            tripped = wire.and_then(|w| w.tripped());
            if tripped.is_some() {
                let _ = sys::kill(child.id() as libc::pid_t, libc::SIGKILL);
            }
        }
        if ready[1] {
            return end(child, tripped);
        }
    }
}

/// runsc's stream `fd` (1 or 2): the caller's own, except a regular file, which gets a pipe
/// that [`relay`] copies into it. gVisor writes a host file at offsets of its own, so that
/// what the command writes would land over what was there (`> log 2>&1`, or output before
/// pinfold's in the same file); pinfold's writes keep the file's own offset.
fn relayed(fd: libc::c_int) -> std::process::Stdio {
    let regular = std::fs::metadata(format!("/proc/self/fd/{fd}")).is_ok_and(|m| m.is_file());
    if regular { std::process::Stdio::piped() } else { std::process::Stdio::inherit() }
}

/// runsc's stdout and stderr. When both are the same regular file (`>> log 2>&1`), one pipe
/// serves both, returned as its read end for [`relay`] into fd 1: two pipes would be copied
/// by two threads in whatever order they run, and stderr could land before the stdout
/// written first.
fn streams() -> std::io::Result<(std::process::Stdio, std::process::Stdio, Option<std::io::PipeReader>)> {
    use std::os::unix::fs::MetadataExt;
    let file = |fd: i32| std::fs::metadata(format!("/proc/self/fd/{fd}")).ok().filter(std::fs::Metadata::is_file).map(|m| (m.dev(), m.ino()));
    match (file(1), file(2)) {
        (Some(a), Some(b)) if a == b => {
            let (r, w) = std::io::pipe()?;
            Ok((w.try_clone()?.into(), w.into(), Some(r)))
        }
        _ => Ok((relayed(1), relayed(2), None)),
    }
}

/// Copy `from` into this process's `fd` until the end (or until `fd` cannot be written).
fn relay(mut from: impl Read + Send + 'static, fd: libc::c_int) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        use std::io::Write;
        let Ok(to) = sys::dup_cloexec(fd) else { return };
        let mut to = std::fs::File::from(to);
        // read and write, not io::copy: that splices, and splice(2) moves the file's offset
        // without the lock write(2) takes, so stdout and stderr into one file would land on
        // each other.
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match from.read(&mut buf) {
                Ok(0) => return,
                Ok(n) => {
                    if to.write_all(&buf[..n]).is_err() {
                        return;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return,
            }
        }
    })
}

/// The last error runsc logged, if any.
fn runsc_error(log: &Path) -> Option<String> {
    let mut text = String::new();
    std::fs::File::open(log).ok()?.read_to_string(&mut text).ok()?;
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["level"] == "error" || v["level"] == "fatal" || v["msg"].as_str().is_some_and(|m| m.contains("FATAL ERROR") || m.starts_with("running container:")))
        .filter_map(|v| v["msg"].as_str().map(|m| m.trim_start_matches("FATAL ERROR: ").to_string()))
        .last()
}

/// The helper's side (`__sandbox-helper gvisor SOCK PARENT IDS PORT RUNSC ARGS…`), in a fresh
/// single-threaded pinfold: die with the parent; make the namespaces; listen for the proxy
/// and pass the listener back; become runsc.
pub(crate) fn helper(args: &[String]) -> i32 {
    let [_, sock, parent, ids, tree, port, runsc @ ..] = args else {
        eprintln!("pinfold: internal helper called with unknown arguments");
        return 2;
    };
    let Some(sock) = sys::inherited_socket(sock) else {
        eprintln!("pinfold: internal helper called without its socket");
        return 2;
    };
    let Some(bundle) = runsc.iter().position(|a| a == "--bundle").and_then(|i| runsc.get(i + 1)) else {
        eprintln!("pinfold: internal helper called without a bundle");
        return 2;
    };
    match helper_setup(&sock, parent, ids, tree, port, Path::new(bundle)) {
        Ok(()) => {}
        Err(why) => {
            let _ = sys::send_nosignal(&sock, format!("E{why}").as_bytes());
            return 2;
        }
    }
    let _ = sys::send_nosignal(&sock, b"R");
    drop(sock);
    supervise(runsc)
}

/// Run runsc (`PROG GLOBAL-FLAGS… run --bundle B ID`) in the helper's namespaces, pass each
/// signal pinfold forwards to the command with `runsc kill` (runsc's control socket is an
/// abstract socket of this network namespace: only from here can it be reached), and exit as
/// runsc did.
fn supervise(runsc: &[String]) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    let (Some((prog, rest)), Some(run_at)) = (runsc.split_first(), runsc.iter().position(|a| a == "run")) else { return 2 };
    let Some(id) = runsc.last() else { return 2 };
    let sigfd = match sys::signalfd_for(FORWARDED) {
        Ok(fd) => fd,
        Err(e) => {
            eprintln!("pinfold: signalfd: {e}");
            return 2;
        }
    };
    let mut cmd = std::process::Command::new(prog);
    cmd.args(rest);
    sys::die_with_parent(&mut cmd);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("pinfold: start {prog}: {e}");
            return 127;
        }
    };
    let runsc_pid = child.id() as libc::pid_t;
    let status = wait_passing_signals(&mut child, &sigfd, |sig| {
        // Not waited for here: a `runsc kill` that hangs must not hold up the next signal or
        // runsc's end (the helper's exit reaps it). Not startable: runsc itself ends the run.
        let killer = std::process::Command::new(prog)
            .args(&runsc[1..run_at])
            .args(["kill", id, &sig.to_string()])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn();
        if killer.is_err() {
            let _ = sys::kill(runsc_pid, sig);
        }
    }, None);
    match status.map(|(s, _)| s) {
        Ok(s) => s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(0)),
        Err(_) => 2,
    }
}

fn helper_setup(sock: &OwnedFd, parent: &str, ids: &str, tree: &str, port: &str, bundle: &Path) -> Result<(), String> {
    sys::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0).map_err(|e| format!("set the death signal: {e}"))?;
    // The parent may have died before the death signal was set.
    if parent.parse::<u32>().ok() != Some(std::os::unix::process::parent_id()) {
        return Err("pinfold ended before runsc started".into());
    }
    {
        let (uid, gid) = ids.split_once(':').ok_or("bad ids")?;
        sys::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET | libc::CLONE_NEWNS).map_err(|e| format!("create namespaces: {e}"))?;
        std::fs::write("/proc/self/setgroups", "deny").map_err(|e| format!("write setgroups: {e}"))?;
        std::fs::write("/proc/self/uid_map", format!("0 {uid} 1")).map_err(|e| format!("write uid_map: {e}"))?;
        std::fs::write("/proc/self/gid_map", format!("0 {gid} 1")).map_err(|e| format!("write gid_map: {e}"))?;
    }
    // The host read-only in this mount namespace, but for what runsc writes (its bundle and
    // /proc): runsc itself then writes nothing else of the host, whatever a path it is given
    // leads to now.
    sys::mount(None, Path::new("/"), None, libc::MS_REC | libc::MS_PRIVATE, None).map_err(|e| format!("make the mounts private: {e}"))?;
    sys::mount_setattr_recursive(Path::new("/"), sys::MOUNT_ATTR_RDONLY, 0).map_err(|e| format!("make the host read-only for runsc: {e}"))?;
    sys::mount_setattr_recursive(Path::new("/proc"), 0, sys::MOUNT_ATTR_RDONLY).map_err(|e| format!("make /proc writable for runsc: {e}"))?;
    sys::mount(Some(bundle), bundle, None, libc::MS_BIND, None).map_err(|e| format!("bind the bundle {}: {e}", bundle.display()))?;
    sys::mount_setattr_recursive(bundle, 0, sys::MOUNT_ATTR_RDONLY).map_err(|e| format!("make the bundle writable for runsc: {e}"))?;
    // The command's root: the host's tree, read-only, with the policy's mounts on it, each on
    // the entry opened with no link followed (a directory swapped for a link by a command
    // beside this run fails the run here); the writable roots writable again where the host's
    // mounts are.
    let tree: Tree = serde_json::from_str(tree).map_err(|e| format!("bad tree: {e}"))?;
    let root = bundle.join("rootfs");
    crate::mounts::bind_host_read_only(&root).map_err(|e| e.to_string())?;
    let paths = crate::mounts::Paths { writable: &tree.writable, pins: &tree.pins, write_deny: &tree.write_deny, read_deny: &tree.read_deny, empty_file: &tree.empty };
    crate::mounts::bind_policy(&root, &paths, true).map_err(|e| format!("{e} (did a command beside this one replace a directory with a link?)"))?;
    if port != "-" {
        let port: u16 = port.parse().map_err(|_| "bad port")?;
        sys::loopback_up().map_err(|e| format!("bring loopback up: {e}"))?;
        let l = std::net::TcpListener::bind(("127.0.0.1", port)).map_err(|e| format!("make the proxy listener at 127.0.0.1:{port}: {e}"))?;
        sys::send_with_fd(sock, b"L", &l).map_err(|e| format!("pass the proxy listener: {e}"))?;
    }
    Ok(())
}
