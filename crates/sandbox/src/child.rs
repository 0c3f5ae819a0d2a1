//! The confined side: the sandbox's init, the command, and (re-exec path only) a helper.
//!
//! A single-threaded parent clones init straight into new user and pid namespaces
//! ([`init_in_fork`]); a multi-threaded one re-executes pinfold as `pinfold __sandbox-helper
//! run SPEC_FD REPORT_FD` (a fresh, single-threaded process: Landlock and seccomp apply per
//! thread, and the setup allocates after fork, which is only sound without other threads),
//! which makes the namespaces and forks init. Then:
//!
//! 1. **init** (pid 1 of the new pid namespace): ask to die with its parent; map its own uid
//!    and gid; `unshare` mount, ipc and uts namespaces (and net when the network is known to
//!    be off); fork the command process (step 2), which waits for its copy of the spec; build
//!    the policy-independent part of the mount tree; get the spec and pass it on; build the
//!    rest of the tree and pivot into it ([`crate::mounts`]) while the command confines
//!    itself; send the command one byte when the tree is done. (Through the helper, the
//!    helper makes the user, pid, ipc, uts and net namespaces and init only the mount one.)
//!
//! A sandbox started ahead of its policy ([`crate::Prestart`], cloned before the parent has
//! judged the command) does step 1 up to the spec while the parent judges, and init reads the
//! spec from a pipe. As the network is not known yet, init makes a network namespace for
//! itself after the fork (the command stays in the host's) while it waits; if the spec says
//! the network is off, init passes the namespace to the command with the spec, and the
//! command joins it. The namespace takes the kernel 0.3–0.5 ms to make, the most of any
//! step, and this way it is made before the spec arrives. With the network on it is simply
//! unused: init itself needs no network then.
//! 2. **command**, forked before the spec, confining itself while init mounts: the spec (and,
//!    network off, the network namespace to join) from init; new session; close stray descriptors;
//!    no_new_privs; a Landlock ruleset with the rules that name host inodes the mounts do not
//!    change (the writable roots, bound over themselves, and the devices bound from the host);
//!    drop every capability; seccomp. Then, after init's byte (the tree is built and init has
//!    pivoted, which moved our root too): `chdir` to the working directory in the new tree (the
//!    old one is in the detached tree); the Landlock rules for what the tree made (the private
//!    temp dir, `/dev/pts`, `/dev/shm`), enforced; report; wait for the parent's go on the report
//!    channel (sent once the parent's caller has released the run, see
//!    [`crate::Policy::run_released`]; without it the command exits unrun); `execve`. No byte
//!    (init failed and said why): exit unrun.
//! 3. init forwards signals to the command, reaps every process, and exits with the
//!    command's status when it ends — which kills anything the command left behind, since
//!    the pid namespace dies with its init.
//!
//! Every step reports failure as a line on the report pipe and exits 125.

use std::ffi::CString;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};

use serde::{Deserialize, Serialize};

use crate::landlock_layer::{self, LandlockReport};
use crate::mounts::{self, Spec};
use crate::{seccomp, sys, FORWARDED};

/// One line on the report pipe.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub(crate) enum Event {
    /// Namespaces and mounts are in place.
    Mounted,
    /// The proxy listener, listening at 127.0.0.1:`port` in the sandbox's network namespace,
    /// is attached to this line (`SCM_RIGHTS`).
    Listening { port: u16 },
    /// The listener of the watch filter ([`crate::watch`]) is attached to this line: the
    /// command's changes beneath the watched roots stop until the parent answers.
    Watching,
    /// The command's own layers, just before exec.
    Confined { landlock: Option<LandlockReport>, seccomp: Vec<String>, degraded: Vec<String> },
    /// Setup failed; nothing of the command ran.
    Failed { step: String },
    /// exec failed with this errno.
    ExecFailed { errno: i32, what: String },
    /// The command ended with this exit code and every process it left was killed and
    /// reaped: the parent may return now, without waiting for the namespaces to be torn down.
    Exited { code: i32 },
}

/// Exit code for a setup failure inside the sandbox.
pub(crate) const SETUP_FAILED: i32 = 125;

/// The byte the parent sends on the report channel to let a gated command exec (see
/// [`Spec::gate`]).
pub(crate) const GO: &[u8] = b"g";

/// The signals whose disposition pinfold changes on the way to the command, so that the
/// command process sets them back to the caller's before `execve` (the spec's
/// `ignored_signals`): SIGPIPE, which pinfold's start-up ignores, and the forwarded ones, for
/// which init installs handlers (inherited by the command's fork, and reset to the default,
/// not to the caller's `SIG_IGN`, by `execve`). Every other disposition the command inherits
/// unchanged from pinfold's caller.
pub(crate) fn reset_before_exec() -> impl Iterator<Item = libc::c_int> {
    std::iter::once(libc::SIGPIPE).chain(FORWARDED.iter().copied())
}

struct Reporter(Option<std::fs::File>);

impl Reporter {
    fn send(&mut self, e: &Event) {
        if let Some(f) = &mut self.0 {
            if let Ok(mut line) = serde_json::to_string(e) {
                line.push('\n');
                let _ = f.write_all(line.as_bytes());
            }
        }
    }

    /// Send `e` with `fd` attached.
    fn send_with_fd(&mut self, e: &Event, fd: &impl AsRawFd) -> std::io::Result<()> {
        let f = self.0.as_ref().ok_or_else(|| std::io::Error::other("no report channel"))?;
        let mut line = serde_json::to_string(e).map_err(std::io::Error::other)?;
        line.push('\n');
        sys::send_with_fd(f, line.as_bytes(), fd)
    }

    fn fail(&mut self, step: String) -> ! {
        // The parent prints it; without a report pipe, say it here.
        if self.0.is_some() {
            self.send(&Event::Failed { step });
        } else {
            let _ = writeln!(std::io::stderr(), "pinfold: sandbox setup failed: {step}");
        }
        sys::exit_now(SETUP_FAILED)
    }
}

/// What the helper needs before the spec: enough for the namespaces and the
/// policy-independent part of the mount tree.
#[derive(Debug, Clone)]
pub(crate) struct Base {
    pub run_dir: std::path::PathBuf,
    pub uid: u32,
    pub gid: u32,
}

impl Base {
    pub(crate) fn of(spec: &Spec) -> Base {
        Base { run_dir: spec.run_dir.clone(), uid: spec.uid, gid: spec.gid }
    }
}

/// Where init gets the spec.
#[derive(Debug)]
pub(crate) enum Late {
    /// Already known when the helper started.
    Known(Spec),
    /// To be read from this pipe (a prestarted helper).
    Pipe(std::fs::File),
}

pub(crate) fn run(args: &[String]) -> i32 {
    let fd = |i: usize| args.get(i).and_then(|s| s.parse::<i32>().ok());
    let (Some(spec_fd), Some(report_fd)) = (fd(1), fd(2)) else {
        eprintln!("pinfold: internal helper needs SPEC_FD REPORT_FD");
        return 2;
    };
    let mut rep = Reporter(sys::owned_from_inherited(report_fd).ok().map(std::fs::File::from));
    let spec: Spec = match sys::owned_from_inherited(spec_fd).and_then(|fd| read_spec(std::fs::File::from(fd))) {
        Ok(s) => s,
        Err(e) => rep.fail(format!("read the sandbox spec: {e}")),
    };
    helper(Base::of(&spec), Late::Known(spec), rep)
}

/// init started directly from a single-threaded parent by [`sys::clone_into_namespaces`]
/// (new user and pid namespaces): no helper process in between. Never returns.
pub(crate) fn init_in_fork(base: Base, late: Late, report: std::fs::File) -> ! {
    let mut rep = Reporter(Some(report));
    // Die with `pinfold exec`.
    let _ = sys::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0);
    if let Err(e) = write_id_maps(base.uid, base.gid) {
        rep.fail(format!("map uid {} and gid {}: {e}", base.uid, base.gid));
    }
    // The other namespaces, owned by the new user namespace; the network one too when the
    // network is known to be off.
    let mut flags = libc::CLONE_NEWNS | libc::CLONE_NEWIPC | libc::CLONE_NEWUTS;
    if matches!(&late, Late::Known(spec) if spec.network_off) {
        flags |= libc::CLONE_NEWNET;
    }
    if let Err(e) = sys::unshare(flags) {
        rep.fail(format!("create namespaces: {e}"));
    }
    init(base, late, rep)
}

/// The helper of the re-exec path: new namespaces, then init as its child.
fn helper(base: Base, late: Late, mut rep: Reporter) -> i32 {
    // Signals for init are taken here from now on, so none is lost between fork and the
    // forwarding loop.
    let sigfd = match sys::signalfd_for(FORWARDED) {
        Ok(f) => f,
        Err(e) => rep.fail(format!("signalfd: {e}")),
    };
    // 1. Namespaces. The helper gets every capability in the new user namespace.
    let mut flags = libc::CLONE_NEWUSER | libc::CLONE_NEWPID | libc::CLONE_NEWIPC | libc::CLONE_NEWUTS;
    if matches!(&late, Late::Known(spec) if spec.network_off) {
        flags |= libc::CLONE_NEWNET;
    }
    if let Err(e) = sys::unshare(flags) {
        rep.fail(format!("create namespaces: {e}"));
    }
    if let Err(e) = write_id_maps(base.uid, base.gid) {
        rep.fail(format!("map uid {} and gid {}: {e}", base.uid, base.gid));
    }
    let _ = sys::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0);
    let pid = match sys::fork() {
        Ok(p) => p,
        Err(e) => rep.fail(format!("fork init: {e}")),
    };
    if pid == 0 {
        drop(sigfd);
        // Die with the helper (and so with `pinfold exec`).
        let _ = sys::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0);
        if let Err(e) = sys::unshare(libc::CLONE_NEWNS) {
            rep.fail(format!("create a mount namespace: {e}"));
        }
        init(base, late, rep)
    }
    drop(rep);
    // The helper's only job now: pass signals on to init and return its status.
    supervise(pid, &sigfd)
}

fn read_spec(mut f: std::fs::File) -> std::io::Result<Spec> {
    let mut s = String::new();
    f.read_to_string(&mut s)?;
    serde_json::from_str(&s).map_err(std::io::Error::other)
}

/// Map our own uid and gid to themselves inside the new user namespace (the only mapping an
/// unprivileged user may write; `setgroups` must be denied first for the gid map).
fn write_id_maps(uid: u32, gid: u32) -> std::io::Result<()> {
    std::fs::write("/proc/self/setgroups", "deny")?;
    std::fs::write("/proc/self/uid_map", format!("{uid} {uid} 1\n"))?;
    std::fs::write("/proc/self/gid_map", format!("{gid} {gid} 1\n"))
}

/// Wait for `child`, passing on signals; returns the exit code to use.
fn supervise(child: libc::pid_t, sigfd: &OwnedFd) -> i32 {
    let pidfd = sys::pidfd_open(child).ok();
    loop {
        let fds: Vec<i32> = match &pidfd {
            Some(p) => vec![sigfd.as_raw_fd(), p.as_raw_fd()],
            None => vec![sigfd.as_raw_fd()],
        };
        let ready = sys::poll_read(&fds, if pidfd.is_some() { -1 } else { 50 }).unwrap_or_default();
        if ready.first().copied().unwrap_or(false) {
            if let Ok(sig) = sys::read_signal(sigfd) {
                let _ = sys::kill(child, sig);
            }
        }
        if let Ok(Some((_, status))) = sys::waitpid(child, libc::WNOHANG) {
            return code_of(status);
        }
    }
}

/// The shell's convention: the exit status, or 128+N for signal N.
fn code_of(status: libc::c_int) -> i32 {
    if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else if libc::WIFSIGNALED(status) {
        128 + libc::WTERMSIG(status)
    } else {
        SETUP_FAILED
    }
}

/// The command process's copy of the spec, from init (see [`init`]); joins the network
/// namespace init made when the spec says the network is off. Ends the process, unrun, when
/// init sends nothing (it failed, and said why).
fn spec_from_init(sock: OwnedFd, prestarted: bool, rep: &mut Reporter) -> Spec {
    let mut text = Vec::new();
    let mut ns = None;
    let mut chunk = [0u8; 8192];
    loop {
        match sys::recv_with_fds(&sock, &mut chunk) {
            Ok((0, _)) => break,
            Ok((n, fds)) => {
                text.extend_from_slice(&chunk[..n]);
                ns = ns.or(fds.into_iter().next());
            }
            Err(_) => sys::exit_now(SETUP_FAILED),
        }
    }
    let Some((&kind, rest)) = text.split_first() else { sys::exit_now(SETUP_FAILED) };
    let spec: Spec = match serde_json::from_slice(rest) {
        Ok(s) => s,
        Err(_) => sys::exit_now(SETUP_FAILED),
    };
    if prestarted && spec.network_off {
        let joined = match (kind, ns) {
            (b'n', Some(ns)) => sys::setns_net_fd(&ns),
            _ => Err(std::io::Error::other("init sent none")),
        };
        if let Err(e) = joined {
            rep.fail(format!("join the sandbox's network namespace: {e}"));
        }
    }
    spec
}

/// pid 1 of the sandbox.
fn init(base: Base, late: Late, mut rep: Reporter) -> ! {
    // Signals sent to a pid namespace's init are dropped unless it has a handler: install a
    // no-op one, then take them from a signalfd.
    for s in FORWARDED {
        let _ = sys::install_noop_handler(*s);
    }
    let sigfd = match sys::signalfd_for(FORWARDED) {
        Ok(f) => f,
        Err(e) => rep.fail(format!("signalfd in init: {e}")),
    };
    // The command process is forked first, before the spec (a prestarted init waits for it
    // anyway), so that the fork is not on the run's critical path. It gets the spec from init
    // on `spec_there`, confines itself (most of its Landlock ruleset, capabilities, seccomp)
    // while init builds the tree, then waits for init's byte on `mounted` before it goes on.
    // End of file on either: init failed, and said why.
    let (spec_here, spec_there) = match sys::socketpair() {
        Ok(p) => p,
        Err(e) => rep.fail(format!("socketpair: {e}")),
    };
    let (mounted_r, mounted_w) = match sys::pipe() {
        Ok(p) => p,
        Err(e) => rep.fail(format!("pipe: {e}")),
    };
    let prestarted = matches!(late, Late::Pipe(_));
    let pid = match sys::fork() {
        Ok(p) => p,
        Err(e) => rep.fail(format!("fork the command: {e}")),
    };
    if pid == 0 {
        drop((sigfd, spec_here, mounted_w));
        if let Late::Pipe(p) = late {
            drop(p);
        }
        let spec = spec_from_init(spec_there, prestarted, &mut rep);
        command(&spec, rep, mounted_r)
    }
    drop((spec_there, mounted_r));
    // A prestarted sandbox learns only with the spec whether the network is off: init makes
    // a network namespace now, while it waits (the kernel takes 0.3–0.5 ms for one, the most of
    // any step), and hands it to the command with the spec if the network is off. (The command
    // was forked in the host's, which it keeps when the network is on; init itself needs none.
    // Known from the start, the namespace was made with the others.)
    let net = prestarted.then(|| sys::unshare(libc::CLONE_NEWNET).and_then(|()| std::fs::File::open("/proc/thread-self/ns/net")));
    // 2. The mount tree, in the mount namespace of our own made before.
    if let Err(e) = mounts::build_base(&base.run_dir) {
        rep.fail(e.to_string());
    }
    // The spec, and its text for the command (read from the parent, or written from the
    // spec init was started with).
    let read = match late {
        Late::Known(spec) => serde_json::to_string(&spec).map(|text| (spec, text)).map_err(|e| e.to_string()),
        Late::Pipe(mut pipe) => {
            let mut text = String::new();
            match pipe.read_to_string(&mut text) {
                Ok(_) => serde_json::from_str(&text).map(|spec| (spec, text)).map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            }
        }
    };
    let (spec, text): (Spec, String) = match read {
        Ok(r) => r,
        Err(e) => rep.fail(format!("read the sandbox spec: {e}")),
    };
    if spec.run_dir != base.run_dir || spec.uid != base.uid || spec.gid != base.gid {
        rep.fail("the spec is for another run directory or user than the sandbox was started for".into());
    }
    let net = match net {
        Some(Ok(ns)) if spec.network_off => Some(ns),
        Some(Err(e)) if spec.network_off => rep.fail(format!("create a network namespace: {e}")),
        _ => None,
    };
    // The spec for the command: a first byte (`n` with the network namespace attached, to
    // join; `-` without), then the spec's text. Failing only when the command process has
    // ended already (it reported why); its status is reaped below.
    let sent = match &net {
        Some(ns) => sys::send_with_fd(&spec_here, b"n", ns),
        None => sys::send_nosignal(&spec_here, b"-").map(drop),
    };
    if sent.is_ok() {
        let _ = std::fs::File::from(spec_here).write_all(text.as_bytes());
    }
    drop(net);
    if let Err(e) = mounts::build(&spec) {
        rep.fail(e.to_string());
    }
    if let Some(port) = spec.proxy_port {
        if let Err(e) = proxy_listener(port, &mut rep) {
            rep.fail(format!("make the proxy listener at 127.0.0.1:{port} in the sandbox: {e}"));
        }
    }
    rep.send(&Event::Mounted);
    let _ = std::fs::File::from(mounted_w).write_all(b"m");
    // Nobody may attach to init, and init does nothing but wait.
    let _ = sys::prctl(libc::PR_SET_DUMPABLE, 0, 0);
    let code = reap(pid, &sigfd);
    // Nothing the command started may outlive it: kill the rest of the namespace, reap it,
    // then tell the parent, which need not wait for the namespaces to be torn down.
    let _ = sys::kill(-1, libc::SIGKILL);
    while let Ok(Some(_)) = sys::waitpid(-1, 0) {}
    rep.send(&Event::Exited { code });
    sys::exit_now(code)
}

/// Bring loopback up in the sandbox's own network namespace, listen at 127.0.0.1:`port` and
/// hand the listener to the parent, keeping no copy: the command can connect to it, and only
/// the parent accepts.
fn proxy_listener(port: u16, rep: &mut Reporter) -> std::io::Result<()> {
    sys::loopback_up()?;
    let listener = std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, port))?;
    rep.send_with_fd(&Event::Listening { port }, &listener)
}

/// Forward signals to the command and reap everything until the command exits.
fn reap(command: libc::pid_t, sigfd: &OwnedFd) -> i32 {
    // Wake when the command ends (a pidfd), or when a signal is to be passed on.
    let pidfd = sys::pidfd_open(command).ok();
    loop {
        // Reap whatever has ended (orphans are re-parented to us).
        loop {
            match sys::waitpid(-1, libc::WNOHANG) {
                Ok(Some((p, status))) if p == command => return code_of(status),
                Ok(Some(_)) => continue,
                Ok(None) => break,
                Err(_) => return SETUP_FAILED,
            }
        }
        let mut fds = vec![sigfd.as_raw_fd()];
        fds.extend(pidfd.as_ref().map(|p| p.as_raw_fd()));
        // Without a pidfd (old kernels), look again every 10 ms.
        let ready = sys::poll_read(&fds, if pidfd.is_some() { -1 } else { 10 }).unwrap_or_default();
        if ready.first().copied().unwrap_or(false) {
            if let Ok(sig) = sys::read_signal(sigfd) {
                let _ = sys::kill(command, sig);
            }
        }
    }
}

/// The command's process: the last layers, then exec. Forked by init before the mounts: the
/// steps that do not depend on the tree run while init builds it, the rest after its byte on
/// `mounted`.
fn command(spec: &Spec, mut rep: Reporter, mounted: OwnedFd) -> ! {
    let _ = sys::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0);
    // A new session: no controlling terminal to inject keystrokes into.
    if let Err(e) = sys::setsid() {
        rep.fail(format!("setsid: {e}"));
    }
    let report_fd = rep.0.as_ref().map(|f| f.as_raw_fd());
    sys::close_fds_from(3, &report_fd.into_iter().chain([mounted.as_raw_fd()]).collect::<Vec<_>>());
    let mut degraded = Vec::new();
    // Landlock (needs no_new_privs or CAP_SYS_ADMIN; set no_new_privs first).
    if let Err(e) = sys::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0) {
        rep.fail(format!("no_new_privs: {e}"));
    }
    let tcp = match (spec.network_off, spec.proxy_port) {
        (false, _) => landlock_layer::Tcp::Open,
        (true, None) => landlock_layer::Tcp::Closed,
        (true, Some(port)) => landlock_layer::Tcp::ConnectOnly(port),
    };
    // Before the tree is built, the rules whose inodes it does not change: the writable roots
    // (bound over themselves: the same inodes) and the devices bound from the host. Not when
    // the tree replaces `/proc` or `/dev` after the binds (a writable `/`, a root under
    // `/dev`): then every rule waits for the finished tree.
    let early = !mounts::covers_proc_or_dev(spec);
    let mut landlock = landlock_layer::Pending::begin(spec.landlock_abi, tcp);
    if early {
        let host = landlock_layer::HOST_DEVICES.iter().map(std::path::Path::new);
        landlock = host.fold(landlock, |p, d| p.and_then(|p| p.device(d)));
        landlock = spec.writable.iter().fold(landlock, |p, w| p.and_then(|p| p.writable(w)));
    }
    if let Err(e) = drop_capabilities() {
        rep.fail(format!("drop capabilities: {e}"));
    }
    // seccomp: it forbids nothing the steps below need (Landlock's calls, open, chdir, the
    // report channel, execve).
    // Through the proxy the command needs inet sockets to reach it; its network namespace
    // has nothing but loopback, and Landlock allows one port there.
    let sockets_off = spec.network_off && spec.proxy_port.is_none();
    // The watch filter first, its listener sent to the parent before anything it stops can
    // run: nothing until the `execve` below makes a call it watches.
    if spec.watch {
        let sent = sys::seccomp_install_listener(&crate::watch::filter()).and_then(|fd| rep.send_with_fd(&Event::Watching, &fd));
        if let Err(e) = sent {
            rep.fail(format!("install the watch filter: {e}"));
        }
    }
    let prog = seccomp::compile(sockets_off);
    if let Err(e) = sys::seccomp_install(&prog) {
        rep.fail(format!("install the seccomp filter: {e}"));
    }
    let argv: Vec<CString> = spec.argv.iter().map(|a| CString::new(a.as_bytes()).unwrap_or_default()).collect();
    let env: Vec<CString> = spec
        .env
        .iter()
        .filter_map(|(k, v)| CString::new(format!("{k}={v}")).ok())
        .collect();
    if argv.is_empty() {
        rep.fail("no command given".into());
    }
    // The tree is built (init has pivoted: our root is the new one, our working directory
    // still the old tree's until we leave it here). Without init's byte, init failed and
    // reported why: end here.
    let mut byte = [0u8; 1];
    if !matches!(std::fs::File::from(mounted).read(&mut byte), Ok(1)) {
        sys::exit_now(SETUP_FAILED);
    }
    if let Err(e) = std::env::set_current_dir(&spec.cwd) {
        rep.fail(format!("chdir {}: {e}", spec.cwd.display()));
    }
    let mut late: Vec<std::path::PathBuf> = Vec::new();
    if !early {
        late.extend(spec.writable.iter().cloned());
    }
    let scratch = spec.private_tmp.then(|| spec.run_dir.join("tmp"));
    let devices: Vec<&str> = if early {
        landlock_layer::OWN_DEVICES.to_vec()
    } else {
        landlock_layer::HOST_DEVICES.iter().chain(landlock_layer::OWN_DEVICES).copied().collect()
    };
    landlock = devices.iter().map(std::path::Path::new).fold(landlock, |p, d| p.and_then(|p| p.device(d)));
    landlock = late.iter().fold(landlock, |p, w| p.and_then(|p| p.writable(w)));
    landlock = scratch.iter().fold(landlock, |p, w| p.and_then(|p| p.scratch(w)));
    let landlock = match landlock.and_then(landlock_layer::Pending::finish) {
        Ok(r) => Some(r),
        Err(e) if spec.allow_degraded => {
            degraded.push(format!("Landlock: {e}"));
            None
        }
        Err(e) => rep.fail(e.to_string()),
    };
    rep.send(&Event::Confined { landlock, seccomp: seccomp::rule_names(sockets_off).into_iter().map(String::from).collect(), degraded });
    if let Err(e) = sys::set_dispositions(reset_before_exec(), &spec.ignored_signals) {
        rep.fail(format!("reset signal dispositions: {e}"));
    }
    if let Err(e) = sys::unblock_all_signals() {
        rep.fail(format!("unblock signals: {e}"));
    }
    // Gated: confined already, wait for the parent's go. Anything else (the channel closed:
    // the run was not released, or the parent died) ends the command here, unrun.
    if spec.gate {
        let mut go = [0u8; 1];
        let got = rep.0.as_mut().map(|f| f.read(&mut go));
        if !matches!(got, Some(Ok(1))) || go != GO {
            sys::exit_now(SETUP_FAILED);
        }
    }
    let failed = exec_as_bash_does(&argv, &env);
    rep.send(&Event::ExecFailed { errno: failed.errno, what: failed.message.clone() });
    let _ = writeln!(std::io::stderr(), "pinfold: {}", failed.message);
    sys::exit_now(failed.status)
}

/// Why the command did not start: the errno, bash's message and bash's exit status.
struct ExecFailure {
    errno: i32,
    message: String,
    status: i32,
}

/// glibc's default search path, used when the environment has no `PATH` (as `execvp` does).
const DEFAULT_PATH: &[u8] = b"/bin:/usr/bin";

/// Run `argv` as bash runs a simple command (`findcmd.c`); returns only if nothing ran.
///
/// A name with a slash is executed as it is. Otherwise each `PATH` entry is tried in order
/// (an empty entry is the working directory): an entry that cannot be searched or has no such
/// file is skipped; the first executable file (by `faccessat(AT_EACCESS)`, not a directory)
/// runs. With none, the first file found that is not executable is executed anyway, to fail
/// with its error (126, "Permission denied"), unless it is a directory; with no file at all the
/// command is not found (127). glibc's `execvp` differs in both: it reports 126 when it met a
/// directory of `PATH` it could not search, or a directory of the command's name.
///
/// The exit statuses are bash's: 127 when the file is missing (also a missing `#!`
/// interpreter), 126 for every other failure.
fn exec_as_bash_does(argv: &[CString], env: &[CString]) -> ExecFailure {
    let name = argv[0].as_bytes();
    let shown = String::from_utf8_lossy(name).into_owned();
    if name.is_empty() || !name.contains(&b'/') {
        let path = env.iter().find_map(|e| e.as_bytes().strip_prefix(b"PATH")?.strip_prefix(b"=")).unwrap_or(DEFAULT_PATH);
        let mut not_executable: Option<(CString, bool)> = None;
        if !name.is_empty() {
            for dir in path.split(|&b| b == b':') {
                let dir: &[u8] = if dir.is_empty() { b"." } else { dir };
                let mut full = dir.to_vec();
                if !full.ends_with(b"/") {
                    full.push(b'/');
                }
                full.extend_from_slice(name);
                let Ok(full) = CString::new(full) else { continue };
                let Some(is_dir) = sys::is_dir(&full) else { continue };
                if !is_dir && sys::executable(&full) {
                    return failure(&sys::execvpe_as(&full, argv, env), &full);
                }
                not_executable.get_or_insert((full, is_dir));
            }
        }
        return match not_executable {
            Some((full, false)) => failure(&sys::execvpe_as(&full, argv, env), &full),
            _ => ExecFailure { errno: libc::ENOENT, message: format!("{shown}: command not found"), status: 127 },
        };
    }
    failure(&sys::execvpe(argv, env), &argv[0])
}

fn failure(err: &std::io::Error, path: &std::ffi::CStr) -> ExecFailure {
    let errno = err.raw_os_error().unwrap_or(0);
    let shown = String::from_utf8_lossy(path.to_bytes());
    // bash names a directory as such rather than by execve's EACCES.
    let why = if errno == libc::EACCES && sys::is_dir(path) == Some(true) {
        "Is a directory".to_string()
    } else {
        let text = err.to_string();
        text.split(" (os error").next().unwrap_or(&text).to_string()
    };
    ExecFailure { errno, message: format!("{shown}: {why}"), status: if errno == libc::ENOENT { 127 } else { 126 } }
}

/// Empty the bounding, ambient, inheritable, permitted and effective sets, so that no
/// capability survives exec — even for a command that runs as uid 0 of the namespace.
fn drop_capabilities() -> std::io::Result<()> {
    // Capabilities are numbered without gaps up to the kernel's last one
    // (/proc/sys/kernel/cap_last_cap), beyond which PR_CAPBSET_DROP says EINVAL: dropping
    // until then drops them all, without reading /proc.
    for cap in 0..64 {
        match sys::prctl(libc::PR_CAPBSET_DROP, cap, 0) {
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => break,
            Err(e) => return Err(e),
        }
    }
    sys::prctl(libc::PR_CAP_AMBIENT, libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong, 0)?;
    sys::capset_clear()
}
