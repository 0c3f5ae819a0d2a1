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
//!    be off); build the policy-independent part of the mount tree; get the spec; join a new
//!    network namespace when the network is off; build the rest of the tree and pivot into it
//!    ([`crate::mounts`]); fork. (Through the helper, the helper makes the user, pid, ipc,
//!    uts and net namespaces and init only the mount one.)
//!
//! A sandbox started ahead of its policy ([`crate::Prestart`], cloned before the parent has
//! judged the command) does step 1 up to the spec while the parent judges, and init reads the
//! spec from a pipe. As the network is not known yet, a thread of init makes a network
//! namespace of its own while init mounts (namespaces belong to threads), and init joins it
//! if the spec says the network is off: the namespace takes the kernel about 0.3 ms to make,
//! the most of any step, and this way it is made in parallel. With the network on, it is
//! simply dropped.
//! 2. **command**: new session; close stray descriptors; Landlock; no_new_privs;
//!    drop every capability; seccomp last; report; wait for the parent's go on the report
//!    channel (sent once the parent's caller has released the run, see
//!    [`crate::Policy::run_released`]; without it the command exits unrun); `execve`.
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
use crate::{seccomp, sys};

/// One line on the report pipe.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub(crate) enum Event {
    /// Namespaces and mounts are in place.
    Mounted,
    /// The proxy listener, listening at 127.0.0.1:`port` in the sandbox's network namespace,
    /// is attached to this line (`SCM_RIGHTS`).
    Listening { port: u16 },
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

/// Signals init and the helper pass on to the command.
pub(crate) const FORWARDED: &[libc::c_int] =
    &[libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT, libc::SIGUSR1, libc::SIGUSR2, libc::SIGWINCH, libc::SIGCONT];

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

/// Entry point of `pinfold __sandbox-helper …`. Never returns.
pub fn helper_main(args: &[String]) -> ! {
    let code = match args.first().map(String::as_str) {
        Some("probe") => crate::probe::probe_child(),
        Some("run") => run(args),
        _ => {
            eprintln!("pinfold: internal helper called with unknown arguments");
            2
        }
    };
    std::process::exit(code)
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

fn run(args: &[String]) -> i32 {
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
    // Prestarted: the network is not known yet. A thread makes a network namespace while
    // init mounts (the kernel takes about 0.3 ms for one, the most of any step); init joins
    // it if the spec says the network is off (see `NetOffer`).
    let net = match &late {
        Late::Pipe(_) => NetOffer::start(),
        Late::Known(_) => None,
    };
    init(base, late, net, rep)
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
        init(base, late, None, rep)
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

/// A network namespace made in parallel by a thread of init: the thread unshares its own
/// network namespace (namespaces belong to threads) and hands back a descriptor of it.
struct NetOffer(std::thread::JoinHandle<std::io::Result<std::fs::File>>);

impl NetOffer {
    fn start() -> Option<NetOffer> {
        std::thread::Builder::new()
            .stack_size(64 * 1024)
            .spawn(|| {
                sys::unshare(libc::CLONE_NEWNET)?;
                std::fs::File::open("/proc/thread-self/ns/net")
            })
            .ok()
            .map(NetOffer)
    }

    /// Wait for the thread (init is single-threaded again after this); join its network
    /// namespace when `use_it`. False if that was asked and could not be done.
    fn finish(self, use_it: bool) -> bool {
        match self.0.join() {
            Ok(Ok(ns)) => !use_it || sys::setns_net_fd(&ns).is_ok(),
            _ => !use_it,
        }
    }
}

/// pid 1 of the sandbox.
fn init(base: Base, late: Late, net: Option<NetOffer>, mut rep: Reporter) -> ! {
    // 2. The mount tree, in the mount namespace of our own made before.
    if let Err(e) = mounts::build_base(&base.run_dir) {
        rep.fail(e);
    }
    let net_pending = matches!(late, Late::Pipe(_));
    let spec = match late {
        Late::Known(spec) => spec,
        Late::Pipe(pipe) => match read_spec(pipe) {
            Ok(s) => s,
            Err(e) => rep.fail(format!("read the sandbox spec: {e}")),
        },
    };
    if spec.run_dir != base.run_dir || spec.uid != base.uid || spec.gid != base.gid {
        rep.fail("the spec is for another run directory or user than the sandbox was started for".into());
    }
    if let Err(e) = mounts::build(&spec) {
        rep.fail(e);
    }
    // A prestarted sandbox learns only now whether the network is off: join the network
    // namespace the thread made meanwhile, or make one here if it could not. (Known from the
    // start, it was made with the other namespaces.)
    let joined = net.is_some_and(|n| n.finish(spec.network_off));
    if net_pending && spec.network_off && !joined {
        if let Err(e) = sys::unshare(libc::CLONE_NEWNET) {
            rep.fail(format!("create a network namespace: {e}"));
        }
    }
    if let Some(port) = spec.proxy_port {
        if let Err(e) = proxy_listener(port, &mut rep) {
            rep.fail(format!("make the proxy listener at 127.0.0.1:{port} in the sandbox: {e}"));
        }
    }
    rep.send(&Event::Mounted);
    // Signals sent to a pid namespace's init are dropped unless it has a handler: install a
    // no-op one, then take them from a signalfd.
    for s in crate::child::FORWARDED {
        let _ = sys::install_noop_handler(*s);
    }
    let sigfd = match sys::signalfd_for(FORWARDED) {
        Ok(f) => f,
        Err(e) => rep.fail(format!("signalfd in init: {e}")),
    };
    let pid = match sys::fork() {
        Ok(p) => p,
        Err(e) => rep.fail(format!("fork the command: {e}")),
    };
    if pid == 0 {
        drop(sigfd);
        command(&spec, rep)
    }
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

/// The command's process: the last layers, then exec.
fn command(spec: &Spec, mut rep: Reporter) -> ! {
    let _ = sys::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0);
    // A new session: no controlling terminal to inject keystrokes into.
    if let Err(e) = sys::setsid() {
        rep.fail(format!("setsid: {e}"));
    }
    let report_fd = rep.0.as_ref().map(|f| f.as_raw_fd());
    sys::close_fds_from(3, &report_fd.into_iter().collect::<Vec<_>>());
    let mut degraded = Vec::new();
    // Landlock (needs no_new_privs or CAP_SYS_ADMIN; set no_new_privs first).
    if let Err(e) = sys::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0) {
        rep.fail(format!("no_new_privs: {e}"));
    }
    let mut writable = spec.writable.clone();
    if spec.private_tmp {
        writable.push(spec.run_dir.join("tmp"));
    }
    let tcp = match (spec.network_off, spec.proxy_port) {
        (false, _) => landlock_layer::Tcp::Open,
        (true, None) => landlock_layer::Tcp::Closed,
        (true, Some(port)) => landlock_layer::Tcp::ConnectOnly(port),
    };
    let landlock = match landlock_layer::apply(spec.landlock_abi, &writable, tcp) {
        Ok(r) => Some(r),
        Err(e) if spec.allow_degraded => {
            degraded.push(format!("Landlock: {e}"));
            None
        }
        Err(e) => rep.fail(e),
    };
    if let Err(e) = drop_capabilities() {
        rep.fail(format!("drop capabilities: {e}"));
    }
    // seccomp last: it forbids nothing the steps above need, but it is the final word.
    // Through the proxy the command needs inet sockets to reach it; its network namespace
    // has nothing but loopback, and Landlock allows one port there.
    let sockets_off = spec.network_off && spec.proxy_port.is_none();
    let prog = seccomp::compile(sockets_off);
    if let Err(e) = sys::seccomp_install(&prog) {
        rep.fail(format!("install the seccomp filter: {e}"));
    }
    rep.send(&Event::Confined { landlock, seccomp: seccomp::rule_names(sockets_off).into_iter().map(String::from).collect(), degraded });
    if let Err(e) = sys::unblock_all_signals() {
        rep.fail(format!("unblock signals: {e}"));
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
    // Gated: confined already, wait for the parent's go. Anything else (the channel closed:
    // the run was not released, or the parent died) ends the command here, unrun.
    if spec.gate {
        let mut go = [0u8; 1];
        let got = rep.0.as_mut().map(|f| f.read(&mut go));
        if !matches!(got, Some(Ok(1))) || go != GO {
            sys::exit_now(SETUP_FAILED);
        }
    }
    let err = sys::execvpe(&argv, &env);
    let errno = err.raw_os_error().unwrap_or(0);
    rep.send(&Event::ExecFailed { errno, what: format!("{}: {err}", spec.argv[0]) });
    let _ = writeln!(std::io::stderr(), "pinfold: {}: {err}", spec.argv[0]);
    sys::exit_now(if errno == libc::ENOENT { 127 } else { 126 })
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
