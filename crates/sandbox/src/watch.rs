//! Changes seen before they happen: a second seccomp filter that hands the calls able to
//! change or remove a file to pinfold's own process, which names the change ([`Change`]) to
//! its caller and then lets the call go on (or fails it with the errno the caller gives).
//!
//! Why seccomp user notification: the caller (pinfold's undo) must keep what a file held
//! *before* the command changes it, at a cost proportional to what the command changes — a
//! command that changes nothing must cost nothing per file of the project. The kernel stops
//! the calling thread at each watched call until pinfold answers, so what is kept is always
//! the state just before the change. Reads, `write(2)` on a file already open and everything
//! else run unwatched: only opening for writing (`open`, `openat`, `openat2`, `creat`) and
//! the calls that change names or modes (`truncate`, `unlink`, `rmdir`, `rename`, `mkdir`,
//! `mknod`, `symlink`, `link`, `chmod` and their `*at` forms) are stopped.
//!
//! The paths come from the stopped process's memory and are resolved in its own view (its
//! working directory, descriptors and root, through `/proc/PID/…`); the sandbox binds every
//! writable root at its own path, so the resolved path names the same file outside. A thread
//! of the command could rewrite the path between pinfold's read and the kernel's: this
//! serves a record of changes for a careful agent's mistakes, not a boundary; the boundary is
//! the rest of the sandbox. See `docs/design/undo.md`.

use std::ffi::OsStr;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::seccomp::{ins, BPF_JEQ_K, BPF_JSET_K, BPF_LD_W_ABS, BPF_RET_K, OFF_ARCH, OFF_NR, RET_ALLOW, AUDIT_ARCH_X86_64};

/// A change the command is about to make, with host paths. Reported only when a path it
/// changes lies beneath one of [`crate::Policy::watch`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// A file is about to be opened for writing: created if `path` does not exist, emptied
    /// first when `truncate`, else changed in place. `truncate(2)` reports this too.
    Write { path: PathBuf, truncate: bool },
    /// A name is about to be removed (`unlink`, `rmdir`).
    Remove { path: PathBuf },
    /// `from` is about to be renamed `to`, replacing what is there; with `exchange`, the two
    /// swap.
    Rename { from: PathBuf, to: PathBuf, exchange: bool },
    /// A new name is about to be made (`mkdir`, `mknod`, `symlink`, `link`).
    Make { path: PathBuf },
    /// Its permission bits are about to change.
    Mode { path: PathBuf },
}

impl Change {
    /// Every path the change touches.
    pub fn paths(&self) -> Vec<&Path> {
        match self {
            Change::Write { path, .. } | Change::Remove { path } | Change::Make { path } | Change::Mode { path } => vec![path],
            Change::Rename { from, to, .. } => vec![from, to],
        }
    }
}

/// The caller's answer: `Ok` lets the call go on; `Err(errno)` fails it with that errno
/// (`ENOSPC` when what the change would replace cannot be kept, say).
pub type Observer<'a> = &'a mut dyn FnMut(&Change) -> Result<(), i32>;

/// `open` and `openat` flags that write: the call is stopped only with one of these.
const WRITE_FLAGS: u32 = (libc::O_WRONLY | libc::O_RDWR | libc::O_CREAT | libc::O_TRUNC) as u32;

/// The calls stopped, and for `open`/`openat` the argument holding the flags.
const WATCHED: &[(i64, Option<u8>)] = &[
    (libc::SYS_open, Some(1)),
    (libc::SYS_openat, Some(2)),
    (libc::SYS_openat2, None),
    (libc::SYS_creat, None),
    (libc::SYS_truncate, None),
    (libc::SYS_unlink, None),
    (libc::SYS_unlinkat, None),
    (libc::SYS_rmdir, None),
    (libc::SYS_rename, None),
    (libc::SYS_renameat, None),
    (libc::SYS_renameat2, None),
    (libc::SYS_mkdir, None),
    (libc::SYS_mkdirat, None),
    (libc::SYS_mknod, None),
    (libc::SYS_mknodat, None),
    (libc::SYS_symlink, None),
    (libc::SYS_symlinkat, None),
    (libc::SYS_link, None),
    (libc::SYS_linkat, None),
    (libc::SYS_chmod, None),
    (libc::SYS_fchmod, None),
    (libc::SYS_fchmodat, None),
    (libc::SYS_fchmodat2, None),
];

const RET_USER_NOTIF: u32 = libc::SECCOMP_RET_USER_NOTIF;

/// The filter: native calls in [`WATCHED`] (opens only with a writing flag) go to the
/// listener; everything else passes (the deny-list filter, installed beside it, still
/// refuses what it refuses: the kernel takes the strictest answer of all filters).
pub(crate) fn filter() -> Vec<libc::sock_filter> {
    let mut p = vec![
        ins(BPF_LD_W_ABS, 0, 0, OFF_ARCH),
        ins(BPF_JEQ_K, 1, 0, AUDIT_ARCH_X86_64),
        ins(BPF_RET_K, 0, 0, RET_ALLOW),
        ins(BPF_LD_W_ABS, 0, 0, OFF_NR),
    ];
    for (nr, flags) in WATCHED {
        match flags {
            // jeq nr ? next : skip 4 | ld flags | jset ? notify : allow | ret notify | ret allow
            Some(arg) => {
                p.push(ins(BPF_JEQ_K, 0, 4, *nr as u32));
                p.push(ins(BPF_LD_W_ABS, 0, 0, crate::seccomp::off_arg_low(*arg)));
                p.push(ins(BPF_JSET_K, 0, 1, WRITE_FLAGS));
                p.push(ins(BPF_RET_K, 0, 0, RET_USER_NOTIF));
                p.push(ins(BPF_RET_K, 0, 0, RET_ALLOW));
            }
            None => {
                p.push(ins(BPF_JEQ_K, 0, 1, *nr as u32));
                p.push(ins(BPF_RET_K, 0, 0, RET_USER_NOTIF));
            }
        }
    }
    p.push(ins(BPF_RET_K, 0, 0, RET_ALLOW));
    p
}

/// One stopped call, decoded: what it would change, with the paths as the process named
/// them (not yet resolved).
#[derive(Debug, PartialEq, Eq)]
enum Call {
    Write { at: At, truncate: bool, follow: bool },
    Remove { at: At },
    Rename { from: At, to: At, exchange: bool },
    Make { at: At },
    Mode { at: At, follow: bool },
    /// Nothing that names a file in the tree (an unnamed temp file).
    Nothing,
}

/// A path argument: relative to a descriptor (or the working directory), at an address in
/// the process's memory. `addr` 0 with `empty`: the descriptor itself.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
struct At {
    dirfd: i32,
    addr: u64,
    empty: bool,
}

const CWD: i32 = libc::AT_FDCWD;

fn at(dirfd: u64, addr: u64) -> At {
    At { dirfd: dirfd as i32, addr, empty: false }
}

fn cwd(addr: u64) -> At {
    At { dirfd: CWD, addr, empty: false }
}

/// `__O_TMPFILE` without `O_DIRECTORY`: an unnamed file, linked later (if ever) by `linkat`.
const O_TMPFILE_BIT: u32 = 0o20000000;

fn open_call(at: At, flags: u64) -> Call {
    let f = flags as u32;
    if f & O_TMPFILE_BIT != 0 {
        return Call::Nothing;
    }
    if f & WRITE_FLAGS == 0 {
        return Call::Nothing;
    }
    let excl = f & (libc::O_CREAT | libc::O_EXCL) as u32 == (libc::O_CREAT | libc::O_EXCL) as u32;
    Call::Write { at, truncate: f & libc::O_TRUNC as u32 != 0, follow: f & libc::O_NOFOLLOW as u32 == 0 && !excl }
}

/// Decode the stopped call; `how` reads `openat2`'s flags from the process.
fn decode(nr: i64, a: [u64; 6], how: impl FnOnce(u64) -> Option<u64>) -> Call {
    match nr {
        libc::SYS_open => open_call(cwd(a[0]), a[1]),
        libc::SYS_openat => open_call(at(a[0], a[1]), a[2]),
        libc::SYS_openat2 => match how(a[2]) {
            Some(flags) => open_call(at(a[0], a[1]), flags),
            // Unreadable: take it as the strongest change an open can make.
            None => Call::Write { at: at(a[0], a[1]), truncate: true, follow: true },
        },
        libc::SYS_creat => Call::Write { at: cwd(a[0]), truncate: true, follow: true },
        libc::SYS_truncate => Call::Write { at: cwd(a[0]), truncate: true, follow: true },
        libc::SYS_unlink | libc::SYS_rmdir => Call::Remove { at: cwd(a[0]) },
        libc::SYS_unlinkat => Call::Remove { at: at(a[0], a[1]) },
        libc::SYS_rename => Call::Rename { from: cwd(a[0]), to: cwd(a[1]), exchange: false },
        libc::SYS_renameat => Call::Rename { from: at(a[0], a[1]), to: at(a[2], a[3]), exchange: false },
        libc::SYS_renameat2 => {
            Call::Rename { from: at(a[0], a[1]), to: at(a[2], a[3]), exchange: a[4] as u32 & libc::RENAME_EXCHANGE != 0 }
        }
        libc::SYS_mkdir | libc::SYS_mknod => Call::Make { at: cwd(a[0]) },
        libc::SYS_mkdirat | libc::SYS_mknodat => Call::Make { at: at(a[0], a[1]) },
        libc::SYS_symlink => Call::Make { at: cwd(a[1]) },
        libc::SYS_symlinkat => Call::Make { at: at(a[1], a[2]) },
        libc::SYS_link => Call::Make { at: cwd(a[1]) },
        libc::SYS_linkat => Call::Make { at: at(a[2], a[3]) },
        libc::SYS_chmod => Call::Mode { at: cwd(a[0]), follow: true },
        libc::SYS_fchmod => Call::Mode { at: At { dirfd: a[0] as i32, addr: 0, empty: true }, follow: true },
        libc::SYS_fchmodat => Call::Mode { at: at(a[0], a[1]), follow: true },
        libc::SYS_fchmodat2 => {
            let flags = a[3] as i32;
            let mut t = at(a[0], a[1]);
            t.empty = flags & libc::AT_EMPTY_PATH != 0;
            Call::Mode { at: t, follow: flags & libc::AT_SYMLINK_NOFOLLOW == 0 }
        }
        _ => Call::Nothing,
    }
}

/// The stopped process, as seen from outside.
struct Proc {
    pid: u32,
    mem: Option<File>,
}

impl Proc {
    /// The NUL-terminated string at `addr` (at most `PATH_MAX` bytes).
    fn string(&mut self, addr: u64) -> Option<Vec<u8>> {
        if self.mem.is_none() {
            self.mem = File::open(format!("/proc/{}/mem", self.pid)).ok();
        }
        let mem = self.mem.as_ref()?;
        let mut out = Vec::new();
        let mut chunk = [0u8; 256];
        while out.len() < libc::PATH_MAX as usize {
            // Read up to the end of the page only: the next may not be mapped.
            let at = addr + out.len() as u64;
            let room = (4096 - (at % 4096) as usize).min(chunk.len());
            let n = mem.read_at(&mut chunk[..room], at).ok()?;
            if n == 0 {
                return None;
            }
            if let Some(end) = chunk[..n].iter().position(|b| *b == 0) {
                out.extend_from_slice(&chunk[..end]);
                return Some(out);
            }
            out.extend_from_slice(&chunk[..n]);
        }
        None
    }

    fn u64_at(&mut self, addr: u64) -> Option<u64> {
        if self.mem.is_none() {
            self.mem = File::open(format!("/proc/{}/mem", self.pid)).ok();
        }
        let mut b = [0u8; 8];
        self.mem.as_ref()?.read_exact_at(&mut b, addr).ok()?;
        Some(u64::from_ne_bytes(b))
    }

    /// The process's id and its thread's id as its own pid namespace numbers them (`NStgid`,
    /// `NSpid` of `/proc/TID/status`): what `/proc/self` and `/proc/thread-self` name for it.
    fn ns_ids(&self) -> Option<(u64, u64)> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid)).ok()?;
        let last = |key: &str| -> Option<u64> {
            status.lines().find_map(|l| l.strip_prefix(key))?.split_whitespace().last()?.parse().ok()
        };
        Some((last("NStgid:")?, last("NSpid:")?))
    }

    /// `raw` with the names that mean "the caller" spelled as the caller's own numbers:
    /// `/proc/self`, `/proc/thread-self`, `/dev/fd`, `/dev/stdin|stdout|stderr`. Resolved by
    /// pinfold they would name pinfold's process instead.
    fn own_names(&self, raw: &[u8]) -> Option<Vec<u8>> {
        const SPELLINGS: &[(&[u8], &str)] = &[
            (b"/proc/self", "/proc/{P}"),
            (b"/proc/thread-self", "/proc/{P}/task/{T}"),
            (b"/dev/fd", "/proc/{P}/fd"),
            (b"/dev/stdin", "/proc/{P}/fd/0"),
            (b"/dev/stdout", "/proc/{P}/fd/1"),
            (b"/dev/stderr", "/proc/{P}/fd/2"),
        ];
        for (from, to) in SPELLINGS {
            if raw.starts_with(from) && matches!(raw.get(from.len()), None | Some(b'/')) {
                let (p, t) = self.ns_ids()?;
                let mut out = to.replace("{P}", &p.to_string()).replace("{T}", &t.to_string()).into_bytes();
                out.extend_from_slice(&raw[from.len()..]);
                return Some(out);
            }
        }
        Some(raw.to_vec())
    }

    /// The absolute path (in the process's view) a path relative to `dirfd` starts from.
    fn base_text(&self, dirfd: i32) -> Result<Vec<u8>, i32> {
        let link = if dirfd == CWD { format!("/proc/{}/cwd", self.pid) } else { format!("/proc/{}/fd/{dirfd}", self.pid) };
        match std::fs::read_link(&link) {
            Ok(t) if t.as_os_str().as_bytes().first() == Some(&b'/') => Ok(t.into_os_string().into_vec()),
            // Not a directory (a pipe, a socket): the call fails the same way.
            Ok(_) => Err(libc::ENOTDIR),
            Err(e) => Err(e.raw_os_error().unwrap_or(libc::EBADF)),
        }
    }

    /// The host path `at` names, with the last component followed when it is a symbolic
    /// link and `follow`. `Ok(None)`: the call names nothing that can change here (its
    /// directory does not exist: it fails the same way). `Err(errno)`: the path could not be
    /// resolved as the kernel will resolve it (too long, a link loop, a name the caller's view
    /// gives another meaning): the call is refused, never let through unrecorded.
    fn resolve(&mut self, at: At, follow: bool) -> Result<Option<PathBuf>, i32> {
        if at.empty && (at.addr == 0 || self.string(at.addr).is_some_and(|s| s.is_empty())) {
            // The descriptor itself (`fchmod`).
            let text = self.base_text(at.dirfd)?;
            return Ok(Some(PathBuf::from(std::ffi::OsString::from_vec(text))));
        }
        let raw = self.string(at.addr).ok_or(libc::ENAMETOOLONG)?;
        if raw.is_empty() {
            return Ok(None);
        }
        let full = if raw[0] == b'/' {
            raw
        } else {
            let mut b = self.base_text(at.dirfd)?;
            b.push(b'/');
            b.extend_from_slice(&raw);
            b
        };
        self.resolve_full(&full, follow, 0)
    }

    /// Resolve `full`, an absolute path in the process's view, from the process's root.
    fn resolve_full(&mut self, full: &[u8], follow: bool, depth: u32) -> Result<Option<PathBuf>, i32> {
        if depth > 16 {
            return Err(libc::ELOOP);
        }
        let full = self.own_names(full).ok_or(libc::EACCES)?;
        if full.len() >= libc::PATH_MAX as usize {
            return Err(libc::ENAMETOOLONG);
        }
        let mut t: &[u8] = &full;
        while t.len() > 1 && t.ends_with(b"/") {
            t = &t[..t.len() - 1];
        }
        let cut = t.iter().rposition(|b| *b == b'/').unwrap_or(0);
        let (parent, name) = (&t[..cut], &t[cut + 1..]);
        let root = open_path(Path::new(&format!("/proc/{}/root", self.pid)), true).ok_or(libc::EACCES)?;
        if name.is_empty() || name == b"." || name == b".." {
            // The directory itself (`chmod .`).
            return match open_in_root(&root, t, true) {
                Ok(fd) => host_path(&fd).map(Some),
                Err(e) if e == libc::ENOENT || e == libc::ENOTDIR => Ok(None),
                Err(e) => Err(e),
            };
        }
        let pfd = match open_in_root(&root, if parent.is_empty() { b"/" } else { parent }, true) {
            Ok(fd) => fd,
            Err(e) if e == libc::ENOENT || e == libc::ENOTDIR => {
                // Missing: the call fails too — unless the caller's view gives the path
                // another meaning than pinfold's (a link through `/proc/self`), which pinfold
                // cannot follow: refused.
                let through_self = full.split(|b| *b == b'/').any(|c| c == b"self" || c == b"thread-self");
                return if through_self { Err(libc::EACCES) } else { Ok(None) };
            }
            Err(e) => return Err(e),
        };
        let phost = host_path(&pfd)?;
        let name_os = OsStr::from_bytes(name);
        let path = phost.join(name_os);
        if !follow {
            return Ok(Some(path));
        }
        match lstat_at(&pfd, name_os) {
            Some(m) if m.file_type().is_symlink() => {}
            _ => return Ok(Some(path)),
        }
        // A symbolic link: the change lands on what it names, resolved in the caller's view.
        let text = std::fs::read_link(join(&fd_link(&pfd), name)).map_err(|e| e.raw_os_error().unwrap_or(libc::EACCES))?;
        let text = text.as_os_str().as_bytes();
        let next = if text.first() == Some(&b'/') {
            text.to_vec()
        } else {
            let mut b = t[..cut].to_vec();
            b.push(b'/');
            b.extend_from_slice(text);
            b
        };
        self.resolve_full(&next, true, depth + 1)
    }
}

/// Open `path` (absolute, in the process's view) from the process's root (`root`, its
/// `/proc/PID/root`): `/proc` there is the sandbox's own, so the magic links of the caller's
/// process (`/proc/N/cwd`, `/proc/N/fd/M`) lead where they lead for it. An absolute symbolic
/// link on the way resolves against pinfold's root, which binds every writable root at the
/// same path.
fn open_in_root(root: &OwnedFd, path: &[u8], dir: bool) -> Result<OwnedFd, i32> {
    let rel = path.strip_prefix(b"/").unwrap_or(path);
    let rel = if rel.is_empty() { &b"."[..] } else { rel };
    let c = std::ffi::CString::new(rel).map_err(|_| libc::EINVAL)?;
    let flags = libc::O_PATH | libc::O_CLOEXEC | if dir { libc::O_DIRECTORY } else { 0 };
    // SAFETY: a valid C string relative to a descriptor we own; openat returns a fresh
    // descriptor or -1.
    let r = unsafe { libc::openat(root.as_raw_fd(), c.as_ptr(), flags) };
    if r < 0 {
        return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EACCES));
    }
    // SAFETY: a non-negative result is a descriptor we now own.
    Ok(unsafe { OwnedFd::from_raw_fd(r) })
}

/// The host path of an opened directory (the sandbox binds every writable root at its own
/// path, so the caller's path names the same file outside).
fn host_path(fd: &OwnedFd) -> Result<PathBuf, i32> {
    match std::fs::read_link(fd_link(fd)) {
        Ok(t) if t.as_os_str().as_bytes().first() == Some(&b'/') && !t.as_os_str().as_bytes().ends_with(b" (deleted)") => Ok(t),
        Ok(_) => Err(libc::ENOENT),
        // The path is too long for the link to hold (or gone): not resolvable.
        Err(_) => Err(libc::ENAMETOOLONG),
    }
}

fn join(base: &Path, rest: &[u8]) -> PathBuf {
    let mut b = base.as_os_str().as_bytes().to_vec();
    if !rest.is_empty() {
        b.push(b'/');
        b.extend_from_slice(rest);
    }
    PathBuf::from(OsStr::from_bytes(&b))
}

fn open_path(p: &Path, dir: bool) -> Option<OwnedFd> {
    let c = std::ffi::CString::new(p.as_os_str().as_bytes()).ok()?;
    let flags = libc::O_PATH | libc::O_CLOEXEC | if dir { libc::O_DIRECTORY } else { 0 };
    // SAFETY: a valid C string; open returns a fresh descriptor or -1.
    let fd = unsafe { libc::open(c.as_ptr(), flags) };
    // SAFETY: a non-negative result is a descriptor we now own.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) })
}

fn fd_link(fd: &OwnedFd) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

fn lstat_at(dir: &OwnedFd, name: &OsStr) -> Option<std::fs::Metadata> {
    std::fs::symlink_metadata(join(&fd_link(dir), name.as_bytes())).ok()
}

/// The listener of one run: decodes each stopped call, resolves its paths, asks the
/// observer when one lies beneath `roots`, and answers the kernel.
pub(crate) struct Watcher {
    fd: OwnedFd,
    roots: Vec<PathBuf>,
    /// The paths the sandbox keeps read-only or hides (and its placeholders): a change to one,
    /// or to a directory holding one, is refused here, before the observer hears of it. The
    /// kernel refuses those changes anyway; refused here, they never enter a record that an
    /// undo outside the sandbox would carry out.
    protected: Vec<PathBuf>,
}

/// What to answer a stopped call.
enum Decision {
    /// Nothing of it lies beneath the watched roots.
    Pass,
    Ask(Change),
    Refuse(i32),
}

impl Watcher {
    pub(crate) fn new(fd: OwnedFd, roots: Vec<PathBuf>, protected: Vec<PathBuf>) -> Watcher {
        // Wake the stopped thread on the CPU that answers it: a round trip costs about 10 µs
        // instead of 50–150 µs on a VM whose idle CPUs sleep deeply. Older kernels (before
        // 6.6) lack the flag; the round trip is then only slower.
        // SAFETY: an ioctl on our own listener with an integer argument.
        let _ = unsafe { libc::ioctl(fd.as_raw_fd(), libc::SECCOMP_IOCTL_NOTIF_SET_FLAGS as _, 1u64 /* SYNC_WAKE_UP */) };
        Watcher { fd, roots, protected }
    }

    pub(crate) fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Take one stopped call and answer it. `Err` only when the listener is done (every
    /// process that had the filter has ended).
    pub(crate) fn serve_one(&self, observer: &mut dyn FnMut(&Change) -> Result<(), i32>) -> io::Result<()> {
        // SAFETY: an all-zero seccomp_notif is what the kernel expects to fill.
        let mut req: libc::seccomp_notif = unsafe { std::mem::zeroed() };
        // SAFETY: RECV fills `req`, which has the kernel's layout.
        let r = unsafe { libc::ioctl(self.fd.as_raw_fd(), libc::SECCOMP_IOCTL_NOTIF_RECV as _, &mut req) };
        if r < 0 {
            let e = io::Error::last_os_error();
            // ENOENT: the caller died before we took it; EINTR: try again later.
            return match e.raw_os_error() {
                Some(libc::ENOENT | libc::EINTR) => Ok(()),
                _ => Err(e),
            };
        }
        let mut p = Proc { pid: req.pid, mem: None };
        let call = decode(req.data.nr as i64, req.data.args, |addr| p.u64_at(addr));
        let answer = match self.change(&mut p, call) {
            Decision::Ask(c) if self.still_waiting(req.id) => observer(&c),
            Decision::Refuse(errno) => Err(errno),
            _ => Ok(()),
        };
        let mut resp = libc::seccomp_notif_resp { id: req.id, val: 0, error: 0, flags: libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32 };
        if let Err(errno) = answer {
            resp.error = -errno;
            resp.flags = 0;
        }
        // SAFETY: SEND reads `resp`, which has the kernel's layout. ENOENT: the caller has
        // died meanwhile, nothing to answer.
        let _ = unsafe { libc::ioctl(self.fd.as_raw_fd(), libc::SECCOMP_IOCTL_NOTIF_SEND as _, &mut resp) };
        Ok(())
    }

    fn still_waiting(&self, id: u64) -> bool {
        let mut id = id;
        // SAFETY: ID_VALID reads a u64.
        unsafe { libc::ioctl(self.fd.as_raw_fd(), libc::SECCOMP_IOCTL_NOTIF_ID_VALID as _, &mut id) == 0 }
    }

    fn beneath(&self, p: &Path) -> bool {
        self.roots.iter().any(|r| p.starts_with(r))
    }

    fn change(&self, p: &mut Proc, call: Call) -> Decision {
        let mut resolved = || -> Result<Option<Change>, i32> {
            Ok(Some(match call {
                Call::Nothing => return Ok(None),
                Call::Write { at, truncate, follow } => {
                    let Some(path) = p.resolve(at, follow)? else { return Ok(None) };
                    Change::Write { path, truncate }
                }
                Call::Remove { at } => {
                    let Some(path) = p.resolve(at, false)? else { return Ok(None) };
                    Change::Remove { path }
                }
                Call::Make { at } => {
                    let Some(path) = p.resolve(at, false)? else { return Ok(None) };
                    Change::Make { path }
                }
                Call::Mode { at, follow } => {
                    let Some(path) = p.resolve(at, follow)? else { return Ok(None) };
                    Change::Mode { path }
                }
                Call::Rename { from, to, exchange } => {
                    let (Some(from), Some(to)) = (p.resolve(from, false)?, p.resolve(to, false)?) else { return Ok(None) };
                    Change::Rename { from, to, exchange }
                }
            }))
        };
        let c = match resolved() {
            Ok(Some(c)) => c,
            Ok(None) => return Decision::Pass,
            Err(errno) => return Decision::Refuse(errno),
        };
        let paths = c.paths();
        if !paths.iter().any(|x| self.beneath(x)) {
            return Decision::Pass;
        }
        // A protected path itself (read-only file system, as the kernel says), or a directory
        // that holds one and would carry it away (busy, as for a mount point).
        if paths.iter().any(|x| self.protected.iter().any(|d| x.starts_with(d))) {
            return Decision::Refuse(libc::EROFS);
        }
        let carries = match &c {
            Change::Remove { path } => vec![path.as_path()],
            Change::Rename { from, to, .. } => vec![from.as_path(), to.as_path()],
            _ => Vec::new(),
        };
        if carries.iter().any(|x| self.protected.iter().any(|d| d.starts_with(x))) {
            return Decision::Refuse(libc::EBUSY);
        }
        Decision::Ask(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opens_are_stopped_only_when_they_write() {
        let no = |_| None;
        assert_eq!(decode(libc::SYS_openat, [3, 100, libc::O_RDONLY as u64, 0, 0, 0], no), Call::Nothing);
        let w = decode(libc::SYS_openat, [3, 100, (libc::O_WRONLY | libc::O_TRUNC) as u64, 0, 0, 0], no);
        assert_eq!(w, Call::Write { at: at(3, 100), truncate: true, follow: true });
        let excl = decode(libc::SYS_open, [100, (libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY) as u64, 0, 0, 0, 0], no);
        assert_eq!(excl, Call::Write { at: cwd(100), truncate: false, follow: false });
        let tmp = decode(libc::SYS_openat, [3, 100, (libc::O_TMPFILE | libc::O_RDWR) as u64, 0, 0, 0], no);
        assert_eq!(tmp, Call::Nothing);
        let two = decode(libc::SYS_openat2, [3, 100, 200, 24, 0, 0], |a| (a == 200).then_some(libc::O_RDWR as u64));
        assert_eq!(two, Call::Write { at: at(3, 100), truncate: false, follow: true });
        let swap = decode(libc::SYS_renameat2, [1, 2, 3, 4, libc::RENAME_EXCHANGE as u64, 0], no);
        assert_eq!(swap, Call::Rename { from: at(1, 2), to: at(3, 4), exchange: true });
    }

    /// The filter, run by the kernel's rules (a tiny classic-BPF interpreter): every watched
    /// call is stopped (opens only with a writing flag), others pass.
    #[test]
    fn the_filter_stops_exactly_the_watched_calls() {
        let p = filter();
        let run = |nr: u32, args: [u64; 6]| -> u32 {
            let mut data = [0u8; 64];
            data[0..4].copy_from_slice(&nr.to_le_bytes());
            data[4..8].copy_from_slice(&AUDIT_ARCH_X86_64.to_le_bytes());
            for (i, a) in args.iter().enumerate() {
                data[16 + 8 * i..24 + 8 * i].copy_from_slice(&a.to_le_bytes());
            }
            let (mut acc, mut pc) = (0u32, 0usize);
            loop {
                let i = p[pc];
                pc += 1;
                match i.code {
                    BPF_LD_W_ABS => acc = u32::from_le_bytes(data[i.k as usize..i.k as usize + 4].try_into().unwrap()),
                    BPF_JEQ_K => pc += if acc == i.k { i.jt } else { i.jf } as usize,
                    BPF_JSET_K => pc += if acc & i.k != 0 { i.jt } else { i.jf } as usize,
                    BPF_RET_K => return i.k,
                    c => panic!("unexpected opcode {c:#x}"),
                }
            }
        };
        for (nr, flags) in WATCHED {
            match flags {
                Some(arg) => {
                    let mut a = [0u64; 6];
                    assert_eq!(run(*nr as u32, a), RET_ALLOW, "read-only open {nr}");
                    for f in [libc::O_WRONLY, libc::O_RDWR, libc::O_CREAT, libc::O_TRUNC] {
                        a[*arg as usize] = f as u64;
                        assert_eq!(run(*nr as u32, a), RET_USER_NOTIF, "open {nr} flags {f:#o}");
                    }
                }
                None => assert_eq!(run(*nr as u32, [0; 6]), RET_USER_NOTIF, "{nr}"),
            }
        }
        for nr in [libc::SYS_read, libc::SYS_write, libc::SYS_execve, libc::SYS_stat, libc::SYS_ftruncate] {
            assert_eq!(run(nr as u32, [u64::MAX; 6]), RET_ALLOW, "{nr}");
        }
    }
}
