//! The confined side: the helper, the sandbox's init, and the command.
//!
//! `pinfold exec` re-executes itself as `pinfold __sandbox-helper run SPEC_FD REPORT_FD`: a
//! fresh, single-threaded process (Landlock and seccomp apply per thread, and the setup
//! allocates after fork, which is only sound without other threads). Then:
//!
//! 1. **helper**: read the spec; `unshare` user, pid, ipc, uts (and net when the network is
//!    off) namespaces; map its own uid and gid; ask to be killed with its parent; fork.
//! 2. **init** (pid 1 of the new pid namespace): ask to die with the helper; `unshare` a
//!    mount namespace; build the mount tree and pivot into it ([`crate::mounts`]); fork.
//! 3. **command**: new session; close stray descriptors; Landlock; no_new_privs;
//!    drop every capability; seccomp last; report; `execve`.
//! 4. init forwards signals to the command, reaps every process, and exits with the
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

fn run(args: &[String]) -> i32 {
    let fd = |i: usize| args.get(i).and_then(|s| s.parse::<i32>().ok());
    let (Some(spec_fd), Some(report_fd)) = (fd(1), fd(2)) else {
        eprintln!("pinfold: internal helper needs SPEC_FD REPORT_FD");
        return 2;
    };
    let mut rep = Reporter(sys::owned_from_inherited(report_fd).ok().map(std::fs::File::from));
    let spec: Spec = match read_spec(spec_fd) {
        Ok(s) => s,
        Err(e) => rep.fail(format!("read the sandbox spec: {e}")),
    };
    helper(spec, rep)
}

/// The helper proper, whether reached by re-exec or by fork from a single-threaded parent.
pub(crate) fn helper_in_fork(spec: Spec, report: std::fs::File) -> ! {
    sys::exit_now(helper(spec, Reporter(Some(report))))
}

fn helper(spec: Spec, mut rep: Reporter) -> i32 {
    // 1. Namespaces. The helper gets every capability in the new user namespace.
    let mut flags = libc::CLONE_NEWUSER | libc::CLONE_NEWPID | libc::CLONE_NEWIPC | libc::CLONE_NEWUTS;
    if spec.network_off {
        flags |= libc::CLONE_NEWNET;
    }
    if let Err(e) = sys::unshare(flags) {
        rep.fail(format!("create namespaces: {e}"));
    }
    if let Err(e) = write_id_maps(spec.uid, spec.gid) {
        rep.fail(format!("map uid {} and gid {}: {e}", spec.uid, spec.gid));
    }
    let _ = sys::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0);

    // Signals for init are taken here from now on, so none is lost between fork and the
    // forwarding loop.
    let sigfd = match sys::signalfd_for(FORWARDED) {
        Ok(f) => f,
        Err(e) => rep.fail(format!("signalfd: {e}")),
    };
    let pid = match sys::fork() {
        Ok(p) => p,
        Err(e) => rep.fail(format!("fork init: {e}")),
    };
    if pid == 0 {
        drop(sigfd);
        init(spec, rep)
    }
    drop(rep);
    // The helper's only job now: pass signals on to init and return its status.
    supervise(pid, &sigfd)
}

fn read_spec(fd: i32) -> std::io::Result<Spec> {
    let mut f = std::fs::File::from(sys::owned_from_inherited(fd)?);
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

/// pid 1 of the sandbox.
fn init(spec: Spec, mut rep: Reporter) -> ! {
    // Die with the helper (and so with `pinfold exec`).
    let _ = sys::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0);
    // 2. The mount tree, in a mount namespace of our own.
    if let Err(e) = sys::unshare(libc::CLONE_NEWNS) {
        rep.fail(format!("create a mount namespace: {e}"));
    }
    if let Err(e) = mounts::build(&spec) {
        rep.fail(e);
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
    let landlock = match landlock_layer::apply(spec.landlock_abi, &writable, spec.network_off) {
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
    let prog = seccomp::compile(spec.network_off);
    if let Err(e) = sys::seccomp_install(&prog) {
        rep.fail(format!("install the seccomp filter: {e}"));
    }
    rep.send(&Event::Confined { landlock, seccomp: seccomp::rule_names(spec.network_off).into_iter().map(String::from).collect(), degraded });
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
    let err = sys::execvpe(&argv, &env);
    let errno = err.raw_os_error().unwrap_or(0);
    rep.send(&Event::ExecFailed { errno, what: format!("{}: {err}", spec.argv[0]) });
    let _ = writeln!(std::io::stderr(), "pinfold: {}: {err}", spec.argv[0]);
    sys::exit_now(if errno == libc::ENOENT { 127 } else { 126 })
}

/// Empty the bounding, ambient, inheritable, permitted and effective sets, so that no
/// capability survives exec — even for a command that runs as uid 0 of the namespace.
fn drop_capabilities() -> std::io::Result<()> {
    let last: libc::c_ulong = std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(63);
    for cap in 0..=last {
        match sys::prctl(libc::PR_CAPBSET_DROP, cap, 0) {
            Ok(_) => {}
            // A capability this kernel does not know.
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {}
            Err(e) => return Err(e),
        }
    }
    sys::prctl(libc::PR_CAP_AMBIENT, libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong, 0)?;
    sys::capset_clear()
}
