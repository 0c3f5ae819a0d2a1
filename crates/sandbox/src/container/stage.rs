//! Bind sources pinned where the engine resolves them.
//!
//! The engine takes each bind's source as a path and resolves it itself, later, following
//! links. A command running beside this run (in another sandbox, with the project writable)
//! could swap a directory of the project for a link between pinfold's check and the engine's
//! bind, and the container would get the link's target writable: the home directory, say.
//!
//! So pinfold hands the engine no path of the project. A helper (`__sandbox-helper
//! container-stage`) enters the engine's own user and mount namespaces (those of the process
//! serving its socket), opens each source there with no link followed, checks it is the very
//! file pinfold resolved (device and inode), and binds that descriptor onto a staging point in
//! a fresh directory of pinfold's run directory. The engine binds from the staging point,
//! which no sandboxed command can reach: a swap after the open changes nothing. The helper
//! holds the staging mounts until pinfold closes its socket (at the end of the run, or when
//! pinfold dies), then removes them; a helper killed before it could is swept by the next
//! run's helper.
//!
//! Nothing is ever removed recursively here: a staging point still holding a bind (the
//! project) is left where it is rather than emptied.

use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::engine::err;
use crate::parent::setup_err;
use crate::{sys, SandboxError, Step};

/// One bind source and its staging point, with the identities both must keep.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Pin {
    src: PathBuf,
    at: PathBuf,
    /// The source's device and inode, as pinfold resolved it.
    id: (u64, u64),
    /// The staging point's, as pinfold made it.
    at_id: (u64, u64),
    dir: bool,
}

/// The sources of one container's binds: staged, or (a degraded run) handed over as paths.
#[derive(Debug)]
pub(crate) struct Pins {
    dir: Option<PathBuf>,
    list: Vec<Pin>,
}

/// Why the sources could not be staged.
#[derive(Debug)]
pub(crate) enum StageError {
    /// This user may not mount where the engine resolves paths (an engine of another user,
    /// root's Docker reached through the `docker` group).
    Privilege(String),
    Failed(SandboxError),
}

/// The staging directory of a run: `stage-PIDNS-PID-UNIQUE`.
fn prefix() -> String {
    let ns: String = super::pid_namespace().chars().filter(char::is_ascii_digit).collect();
    format!("stage-{ns}-")
}

impl Pins {
    /// Pins staged in a fresh directory of the run directory.
    pub(crate) fn staged(run_dir: &Path) -> Result<Pins, SandboxError> {
        let dir = run_dir.join(format!("{}{}-{}", prefix(), std::process::id(), super::unique()));
        std::fs::DirBuilder::new().mode(0o700).create(&dir).map_err(setup_err(Step::RunDir(dir.clone())))?;
        Ok(Pins { dir: Some(dir), list: Vec::new() })
    }

    /// Sources handed to the engine as the paths they are (nothing staged).
    pub(crate) fn by_path() -> Pins {
        Pins { dir: None, list: Vec::new() }
    }

    /// The path the engine is to bind `p` from. `p` must hold no symbolic link in any
    /// component.
    pub(crate) fn pin(&mut self, p: &Path) -> Result<PathBuf, SandboxError> {
        let fd = sys::open_path_no_symlinks(p).map_err(|e| {
            err(format!("{} cannot be bound into the container: {e}", p.display()), "a path the policy names must not pass through a symbolic link for the container backend; name the real path")
        })?;
        let Some(dir) = &self.dir else { return Ok(p.to_path_buf()) };
        if let Some(done) = self.list.iter().find(|x| x.src == p) {
            return Ok(done.at.clone());
        }
        let meta = std::fs::File::from(fd).metadata().map_err(setup_err(Step::PinSource(p.to_path_buf())))?;
        let id = { use std::os::unix::fs::MetadataExt; (meta.dev(), meta.ino()) };
        let at = dir.join(self.list.len().to_string());
        if meta.is_dir() {
            std::fs::DirBuilder::new().mode(0o700).create(&at)
        } else {
            std::fs::OpenOptions::new().write(true).create_new(true).open(&at).map(drop)
        }
        .map_err(setup_err(Step::RunDir(at.clone())))?;
        let at_id = {
            use std::os::unix::fs::MetadataExt;
            let m = std::fs::symlink_metadata(&at).map_err(setup_err(Step::RunDir(at.clone())))?;
            (m.dev(), m.ino())
        };
        self.list.push(Pin { src: p.to_path_buf(), at: at.clone(), id, at_id, dir: meta.is_dir() });
        Ok(at)
    }

    /// Bind each source onto its staging point where the engine serving `socket` (process
    /// `engine_pid`) resolves paths; held until the returned value is dropped.
    pub(crate) fn bind(mut self, socket: &Path, engine_pid: libc::pid_t) -> Result<Staged, StageError> {
        let Some(dir) = self.dir.take() else { return Ok(Staged { child: None, sock: None, dir: None, list: Vec::new() }) };
        let list = std::mem::take(&mut self.list);
        let mut staged = Staged { child: None, sock: None, dir: Some(dir.clone()), list: list.clone() };
        if engine_pid <= 0 {
            return Err(StageError::Privilege(format!("the process serving {} is not in this pid namespace", socket.display())));
        }
        let (ours, theirs) = sys::socketpair().map_err(|e| StageError::Failed(setup_err(Step::ReportChannel)(e)))?;
        sys::clear_cloexec(theirs.as_raw_fd()).map_err(|e| StageError::Failed(setup_err(Step::PassReportPipe)(e)))?;
        let exe = std::env::current_exe().map_err(|e| StageError::Failed(setup_err(Step::FindExecutable)(e)))?;
        let pins = serde_json::to_string(&list).map_err(|e| StageError::Failed(SandboxError::EncodeSpec(e)))?;
        let child = std::process::Command::new(exe)
            .arg(crate::HELPER_ARG)
            .arg("container-stage")
            .arg(theirs.as_raw_fd().to_string())
            .arg(std::process::id().to_string())
            .arg(engine_pid.to_string())
            .arg(&dir)
            .arg(pins)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .map_err(|e| StageError::Failed(setup_err(Step::StartHelper)(e)))?;
        drop(theirs);
        staged.child = Some(child);
        let mut buf = [0u8; 1024];
        let n = sys::recv_with_fds(&ours, &mut buf).map(|(n, _)| n).unwrap_or(0);
        staged.sock = Some(ours);
        let why = || String::from_utf8_lossy(&buf[1..n]).trim().to_string();
        match buf.first().copied().filter(|_| n > 0) {
            Some(b'R') => Ok(staged),
            Some(b'P') => Err(StageError::Privilege(why())),
            Some(b'E') => Err(StageError::Failed(err(format!("cannot pin the container's bind sources: {}", why()), "see `pinfold doctor`"))),
            _ => Err(StageError::Failed(err("the helper that pins the container's bind sources ended before it said why", "see `pinfold doctor`"))),
        }
    }
}

impl Drop for Pins {
    /// Staging points made but never handed to the helper.
    fn drop(&mut self) {
        if let Some(dir) = self.dir.take() {
            remove_points(&dir, &self.list);
        }
    }
}

/// The staging mounts of a run, held by the helper until this is dropped.
#[derive(Debug)]
pub(crate) struct Staged {
    child: Option<std::process::Child>,
    sock: Option<OwnedFd>,
    dir: Option<PathBuf>,
    list: Vec<Pin>,
}

impl Drop for Staged {
    fn drop(&mut self) {
        // The helper removes its mounts when its socket closes.
        drop(self.sock.take());
        if let Some(mut c) = self.child.take() {
            let _ = c.wait();
        }
        if let Some(dir) = self.dir.take() {
            remove_points(&dir, &self.list);
        }
    }
}

/// Remove the staging points and their directory, one by one: a point that still holds a
/// bind is not empty, and stays (never emptied).
fn remove_points(dir: &Path, list: &[Pin]) {
    for p in list {
        let _ = if p.dir { std::fs::remove_dir(&p.at) } else { remove_empty_file(&p.at) };
    }
    let _ = std::fs::remove_dir(dir);
}

/// Unlink `p` if it is an empty regular file (a staging point with nothing bound on it).
fn remove_empty_file(p: &Path) -> std::io::Result<()> {
    let m = std::fs::symlink_metadata(p)?;
    if m.is_file() && m.len() == 0 {
        std::fs::remove_file(p)
    } else {
        Err(std::io::Error::from_raw_os_error(libc::EBUSY))
    }
}

/// `pinfold __sandbox-helper container-stage SOCK PARENT ENGINE-PID DIR PINS`: enter the
/// namespaces of the engine's process, bind each pin, say `R` (or `P`/`E` and why), hold the
/// mounts until SOCK closes, then remove them.
pub(crate) fn helper(args: &[String]) -> i32 {
    let [_, sock, parent, engine, dir, pins] = args else { return 2 };
    let Some(sock) = sys::inherited_socket(sock) else { return 2 };
    // Not the terminal's signals, and no death signal: when pinfold dies its end of the
    // socket closes, and the mounts must still be removed.
    sys::ignore_terminal_signals();
    let dir = PathBuf::from(dir);
    let pins: Vec<Pin> = match serde_json::from_str(pins) {
        Ok(p) => p,
        Err(e) => {
            let _ = sys::send_nosignal(&sock, format!("Ebad pins: {e}").as_bytes());
            return 2;
        }
    };
    if parent.parse::<u32>().ok() != Some(std::os::unix::process::parent_id()) {
        let _ = sys::send_nosignal(&sock, b"Epinfold ended first");
        return 2;
    }
    let mut mounted = Vec::new();
    let made = enter(engine).and_then(|()| {
        sweep(&dir);
        for p in &pins {
            bind_pin(p)?;
            mounted.push(p.clone());
        }
        Ok(())
    });
    let code = match made {
        Ok(()) => {
            let _ = sys::send_nosignal(&sock, b"R");
            let mut sock = std::os::unix::net::UnixStream::from(sock);
            let mut b = [0u8; 64];
            loop {
                match sock.read(&mut b) {
                    Ok(0) => break,
                    Ok(_) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
            0
        }
        Err(Fail::Privilege(why)) => {
            let _ = sys::send_nosignal(&sock, format!("P{why}").as_bytes());
            1
        }
        Err(Fail::Other(why)) => {
            let _ = sys::send_nosignal(&sock, format!("E{why}").as_bytes());
            1
        }
    };
    unbind(&dir, &mounted);
    remove_points(&dir, &pins);
    code
}

enum Fail {
    Privilege(String),
    Other(String),
}

fn permission(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EPERM | libc::EACCES))
}

/// Join the user and mount namespaces of `pid` where they are not this process's already.
fn enter(pid: &str) -> Result<(), Fail> {
    let pid: libc::pid_t = pid.parse().map_err(|_| Fail::Other("bad engine pid".into()))?;
    let ns = |p: &str, kind: &str| std::fs::read_link(format!("/proc/{p}/ns/{kind}")).map(|l| l.display().to_string());
    for (kind, flag) in [("user", libc::CLONE_NEWUSER), ("mnt", libc::CLONE_NEWNS)] {
        let theirs = ns(&pid.to_string(), kind).map_err(|e| {
            if permission(&e) { Fail::Privilege(format!("cannot see the engine's {kind} namespace: {e}")) } else { Fail::Other(format!("read the engine's {kind} namespace: {e}")) }
        })?;
        let ours = ns("self", kind).map_err(|e| Fail::Other(format!("read this {kind} namespace: {e}")))?;
        if theirs == ours {
            continue;
        }
        let f = std::fs::File::open(format!("/proc/{pid}/ns/{kind}")).map_err(|e| {
            if permission(&e) { Fail::Privilege(format!("cannot open the engine's {kind} namespace: {e}")) } else { Fail::Other(format!("open the engine's {kind} namespace: {e}")) }
        })?;
        let r = if flag == libc::CLONE_NEWUSER { sys::setns_user_fd(&f) } else { sys::setns_mnt_fd(&f) };
        r.map_err(|e| if permission(&e) { Fail::Privilege(format!("cannot enter the engine's {kind} namespace: {e}")) } else { Fail::Other(format!("enter the engine's {kind} namespace: {e}")) })?;
    }
    Ok(())
}

/// Bind `p.src` onto `p.at`, each opened with no link followed and checked to be the file
/// pinfold resolved and the point it made.
fn bind_pin(p: &Pin) -> Result<(), Fail> {
    let src = sys::open_path_no_symlinks(&p.src)
        .map_err(|e| Fail::Other(format!("open {} to bind it (did a command beside this one replace it with a link?): {e}", p.src.display())))?;
    if sys::fd_id(&src).ok() != Some(p.id) {
        return Err(Fail::Other(format!("{} changed while the run was set up (did a command beside this one replace it?)", p.src.display())));
    }
    let at = sys::open_path_no_symlinks(&p.at).map_err(|e| Fail::Other(format!("open the staging point {}: {e}", p.at.display())))?;
    if sys::fd_id(&at).ok() != Some(p.at_id) {
        return Err(Fail::Other(format!("the staging point {} changed before it was used", p.at.display())));
    }
    let from = PathBuf::from(format!("/proc/self/fd/{}", src.as_raw_fd()));
    let onto = PathBuf::from(format!("/proc/self/fd/{}", at.as_raw_fd()));
    sys::mount(Some(&from), &onto, None, libc::MS_BIND | libc::MS_REC, None).map_err(|e| {
        let why = format!("bind {} where the engine resolves paths: {e}", p.src.display());
        if permission(&e) { Fail::Privilege(why) } else { Fail::Other(why) }
    })
}

/// Detach the binds on the staging points (each with what lies beneath it).
fn unbind(_dir: &Path, mounted: &[Pin]) {
    for p in mounted.iter().rev() {
        let _ = sys::umount2(&p.at, libc::MNT_DETACH | libc::UMOUNT_NOFOLLOW);
    }
}

/// Unbind and remove the staging directories of runs of this pid namespace whose pinfold is
/// gone (a helper killed before it could clean up).
fn sweep(dir: &Path) {
    let (Some(run_dir), prefix) = (dir.parent(), prefix()) else { return };
    let Ok(entries) = std::fs::read_dir(run_dir) else { return };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(&prefix)) else { continue };
        let Some((pid, _)) = rest.split_once('-') else { continue };
        if pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(pid) = pid.parse::<libc::pid_t>() else { continue };
        if pid <= 0 || !sys::kill(pid, 0).is_err_and(|e| e.raw_os_error() == Some(libc::ESRCH)) {
            continue;
        }
        let Ok(points) = std::fs::read_dir(e.path()) else { continue };
        for p in points.flatten() {
            let at = p.path();
            let _ = sys::umount2(&at, libc::MNT_DETACH | libc::UMOUNT_NOFOLLOW);
            let _ = if p.file_type().is_ok_and(|t| t.is_dir()) { std::fs::remove_dir(&at) } else { remove_empty_file(&at) };
        }
        let _ = std::fs::remove_dir(e.path());
    }
}
