//! Every system call pinfold makes that the standard library does not wrap. All `unsafe` of
//! the crate lives here; each block says which invariant makes it sound. Functions return
//! `io::Result` with the raw errno, and callers add what they were doing.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;

fn cstr(p: &Path) -> io::Result<CString> {
    use std::os::unix::ffi::OsStrExt;
    CString::new(p.as_os_str().as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

fn check(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 { Err(io::Error::last_os_error()) } else { Ok(r) }
}

fn check_long(r: libc::c_long) -> io::Result<libc::c_long> {
    if r < 0 { Err(io::Error::last_os_error()) } else { Ok(r) }
}

/// `unshare(2)`.
pub fn unshare(flags: libc::c_int) -> io::Result<()> {
    // SAFETY: unshare takes no pointers; it only changes this process's namespaces.
    check(unsafe { libc::unshare(flags) }).map(drop)
}

/// `fork(2)`. Returns 0 in the child.
///
/// Only called from the helper, which is single-threaded (it is a fresh exec of pinfold that
/// starts no threads), so the child may allocate and run ordinary Rust.
pub fn fork() -> io::Result<libc::pid_t> {
    // SAFETY: the caller is single-threaded (see above), so no lock can be held by another
    // thread at the time of the fork and the child's copy of the heap is consistent.
    let pid = unsafe { libc::fork() };
    if pid < 0 { Err(io::Error::last_os_error()) } else { Ok(pid) }
}

/// `clone(2)` like `fork`, with the child in new namespaces (`flags`: `CLONE_NEW*` only).
/// Returns 0 in the child.
///
/// Called only by a single-threaded process, as [`fork`]. Unlike glibc's `fork` it runs no
/// `pthread_atfork` handlers (pinfold registers none) and leaves glibc's cached thread id of
/// the parent in the child; the child never uses it (no `pthread_kill`/`raise`: it reports
/// failures on a pipe and leaves by `_exit`).
pub fn clone_into_namespaces(flags: libc::c_int) -> io::Result<libc::pid_t> {
    // SAFETY: a fork-like clone (no CLONE_VM, no new stack: the child runs on its own copy of
    // the caller's memory, as after fork). The caller is single-threaded, so no lock is held
    // by another thread and the child's copy of the heap is consistent.
    let r = unsafe {
        libc::syscall(
            libc::SYS_clone,
            (flags | libc::SIGCHLD) as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        )
    };
    if r < 0 { Err(io::Error::last_os_error()) } else { Ok(r as libc::pid_t) }
}

/// `setns(2)` into the network namespace behind `fd` (a `/proc/…/ns/net` file).
pub fn setns_net_fd(fd: &impl AsRawFd) -> io::Result<()> {
    // SAFETY: no pointers; `fd` is an open namespace file.
    check(unsafe { libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNET) }).map(drop)
}

/// `setns(2)` into the user namespace `fd` names.
pub fn setns_user_fd(fd: &impl AsRawFd) -> io::Result<()> {
    // SAFETY: no pointers; `fd` is an open namespace file.
    check(unsafe { libc::setns(fd.as_raw_fd(), libc::CLONE_NEWUSER) }).map(drop)
}

/// `setns(2)` into the mount namespace `fd` names (a single-threaded process only: the
/// kernel refuses one that shares its file-system information).
pub fn setns_mnt_fd(fd: &impl AsRawFd) -> io::Result<()> {
    // SAFETY: no pointers; `fd` is an open namespace file.
    check(unsafe { libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNS) }).map(drop)
}

/// The pid of the process at the other end of a connected unix socket (`SO_PEERCRED`).
pub fn peer_pid(sock: &impl AsRawFd) -> io::Result<libc::pid_t> {
    peer_cred(sock).map(|(pid, _)| pid)
}

/// The pid and uid of the process at the other end of a connected unix socket (the one that
/// listened, for a client): `SO_PEERCRED`.
pub fn peer_cred(sock: &impl AsRawFd) -> io::Result<(libc::pid_t, libc::uid_t)> {
    let mut cred = libc::ucred { pid: 0, uid: 0, gid: 0 };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` are valid for writing and `len` holds `cred`'s size.
    check(unsafe { libc::getsockopt(sock.as_raw_fd(), libc::SOL_SOCKET, libc::SO_PEERCRED, (&mut cred as *mut libc::ucred).cast(), &mut len) })?;
    Ok((cred.pid, cred.uid))
}

/// `mount(2)`.
pub fn mount(src: Option<&Path>, dst: &Path, fstype: Option<&str>, flags: libc::c_ulong, data: Option<&str>) -> io::Result<()> {
    let src = src.map(cstr).transpose()?;
    let dst = cstr(dst)?;
    let fstype = fstype.map(|f| CString::new(f).expect("static file system names have no NUL"));
    let data = data.map(|d| CString::new(d).expect("mount options have no NUL"));
    // SAFETY: every pointer is either null or a valid NUL-terminated string that outlives the
    // call; `data` is a string as the named file systems expect.
    check(unsafe {
        libc::mount(
            src.as_ref().map_or(std::ptr::null(), |s| s.as_ptr()),
            dst.as_ptr(),
            fstype.as_ref().map_or(std::ptr::null(), |s| s.as_ptr()),
            flags,
            data.as_ref().map_or(std::ptr::null(), |s| s.as_ptr().cast()),
        )
    })
    .map(drop)
}

/// `umount2(2)`.
pub fn umount2(target: &Path, flags: libc::c_int) -> io::Result<()> {
    let t = cstr(target)?;
    // SAFETY: `t` is a valid NUL-terminated path.
    check(unsafe { libc::umount2(t.as_ptr(), flags) }).map(drop)
}

/// `pivot_root(2)`.
pub fn pivot_root(new_root: &Path, put_old: &Path) -> io::Result<()> {
    let n = cstr(new_root)?;
    let o = cstr(put_old)?;
    // SAFETY: both are valid NUL-terminated paths.
    check_long(unsafe { libc::syscall(libc::SYS_pivot_root, n.as_ptr(), o.as_ptr()) }).map(drop)
}

/// `struct mount_attr` for `mount_setattr(2)` (not in libc 0.2).
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

pub const MOUNT_ATTR_RDONLY: u64 = 0x0000_0001;
pub const MOUNT_ATTR_NOSUID: u64 = 0x0000_0002;
pub const MOUNT_ATTR_NODEV: u64 = 0x0000_0004;
const AT_RECURSIVE: libc::c_uint = 0x8000;

/// `mount_setattr(2)` on `path` and every mount below it: set `set`, clear `clear`.
pub fn mount_setattr_recursive(path: &Path, set: u64, clear: u64) -> io::Result<()> {
    let p = cstr(path)?;
    let attr = MountAttr { attr_set: set, attr_clr: clear, propagation: 0, userns_fd: 0 };
    // SAFETY: `p` is a valid path, `attr` a properly laid out `struct mount_attr` whose size is
    // passed alongside; the kernel only reads it.
    check_long(unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            p.as_ptr(),
            AT_RECURSIVE,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    })
    .map(drop)
}

/// Bind the tree at `src` (a descriptor, `O_PATH` will do) onto what `target` refers to,
/// with `set` mount attributes (`MOUNT_ATTR_*`) on every mount of the copy before it is
/// attached: `open_tree(OPEN_TREE_CLONE | AT_RECURSIVE)`, `mount_setattr`, `move_mount`.
/// No path is looked up, so no link swapped in meanwhile is followed.
pub fn bind_tree(src: &impl AsRawFd, target: &impl AsRawFd, set: u64) -> io::Result<()> {
    bind_tree_with(src, target, set, 0)
}

/// [`bind_tree`], also clearing the `clear` attributes on every mount of the copy.
pub fn bind_tree_with(src: &impl AsRawFd, target: &impl AsRawFd, set: u64, clear: u64) -> io::Result<()> {
    const OPEN_TREE_CLONE: libc::c_uint = 1;
    const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;
    const MOVE_MOUNT_T_EMPTY_PATH: libc::c_uint = 0x40;
    let empty = c"";
    // SAFETY: `empty` is NUL-terminated; the call returns a fresh descriptor or -1.
    let tree = check_long(unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            src.as_raw_fd(),
            empty.as_ptr(),
            OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint | libc::AT_EMPTY_PATH as libc::c_uint | AT_RECURSIVE,
        )
    })?;
    // SAFETY: open_tree returned a descriptor we now own.
    let tree = unsafe { OwnedFd::from_raw_fd(tree as RawFd) };
    if set != 0 || clear != 0 {
        let attr = MountAttr { attr_set: set, attr_clr: clear, propagation: 0, userns_fd: 0 };
        // SAFETY: as in `mount_setattr_recursive`, on the detached tree's descriptor.
        check_long(unsafe {
            libc::syscall(
                libc::SYS_mount_setattr,
                tree.as_raw_fd(),
                empty.as_ptr(),
                libc::AT_EMPTY_PATH as libc::c_uint | AT_RECURSIVE,
                &attr as *const MountAttr,
                std::mem::size_of::<MountAttr>(),
            )
        })?;
    }
    // SAFETY: both descriptors are open; the paths are empty C strings.
    check_long(unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            tree.as_raw_fd(),
            empty.as_ptr(),
            target.as_raw_fd(),
            empty.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH,
        )
    })
    .map(drop)
}

/// `path` (relative) beneath the directory `dir`, opened `O_PATH` with no symbolic link
/// followed in any component (`openat2`, `RESOLVE_NO_SYMLINKS`).
pub fn open_beneath_no_symlinks(dir: &impl AsRawFd, path: &Path) -> io::Result<OwnedFd> {
    let p = cstr(path)?;
    // SAFETY: an all-zero open_how is valid.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC) as u64;
    how.resolve = libc::RESOLVE_NO_SYMLINKS;
    // SAFETY: `p` is NUL-terminated and `how` valid for the call; the size passed is its own.
    let fd = check_long(unsafe {
        libc::syscall(libc::SYS_openat2, dir.as_raw_fd(), p.as_ptr(), &how as *const libc::open_how, std::mem::size_of::<libc::open_how>())
    })?;
    // SAFETY: openat2 returned a fresh descriptor we now own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// `prctl(2)` with integer arguments.
pub fn prctl(option: libc::c_int, a: libc::c_ulong, b: libc::c_ulong) -> io::Result<libc::c_int> {
    // SAFETY: the options used here take integer arguments only, no pointers.
    check(unsafe { libc::prctl(option, a, b, 0 as libc::c_ulong, 0 as libc::c_ulong) })
}

/// `struct __user_cap_header_struct` (not in libc 0.2).
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

/// `struct __user_cap_data_struct`.
#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// Clear the effective, permitted and inheritable capability sets.
pub fn capset_clear() -> io::Result<()> {
    let header = CapHeader { version: 0x2008_0522 /* _LINUX_CAPABILITY_VERSION_3 */, pid: 0 };
    let data = [CapData { effective: 0, permitted: 0, inheritable: 0 }; 2];
    // SAFETY: version 3 headers take two data structs laid out as the kernel's; both live
    // for the call and the kernel only reads them.
    check_long(unsafe { libc::syscall(libc::SYS_capset, &header as *const CapHeader, data.as_ptr()) }).map(drop)
}

/// Install a seccomp BPF program on the calling thread (no_new_privs must already be set).
pub fn seccomp_install(prog: &[libc::sock_filter]) -> io::Result<()> {
    let fprog = libc::sock_fprog {
        len: u16::try_from(prog.len()).map_err(|_| io::Error::from_raw_os_error(libc::E2BIG))?,
        filter: prog.as_ptr().cast_mut(),
    };
    // SAFETY: `fprog` points at `prog`, which outlives the call; the kernel copies the program.
    check_long(unsafe {
        libc::syscall(libc::SYS_seccomp, 1 as libc::c_uint /* SECCOMP_SET_MODE_FILTER */, 0 as libc::c_uint, &fprog as *const libc::sock_fprog)
    })
    .map(drop)
}

/// Install `prog` as a seccomp filter whose `SECCOMP_RET_USER_NOTIF` calls go to the
/// returned listener (`SECCOMP_FILTER_FLAG_NEW_LISTENER`).
pub fn seccomp_install_listener(prog: &[libc::sock_filter]) -> io::Result<OwnedFd> {
    let fprog = libc::sock_fprog {
        len: u16::try_from(prog.len()).map_err(|_| io::Error::from_raw_os_error(libc::E2BIG))?,
        filter: prog.as_ptr().cast_mut(),
    };
    // SAFETY: `fprog` points at `prog`, which outlives the call; the kernel copies the program.
    let fd = check_long(unsafe {
        libc::syscall(libc::SYS_seccomp, 1 as libc::c_uint, libc::SECCOMP_FILTER_FLAG_NEW_LISTENER as libc::c_uint, &fprog as *const libc::sock_fprog)
    })?;
    // SAFETY: with NEW_LISTENER, success returns a fresh descriptor we now own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// The Landlock ABI version the kernel offers: `landlock_create_ruleset(NULL, 0,
/// LANDLOCK_CREATE_RULESET_VERSION)`; 0 when Landlock is absent or disabled.
pub fn landlock_abi() -> i64 {
    // SAFETY: with a null attribute pointer and size 0 the kernel only returns the version.
    let r = unsafe { libc::syscall(libc::SYS_landlock_create_ruleset, std::ptr::null::<u8>(), 0usize, 1u32) };
    if r < 0 { 0 } else { r }
}

/// `setsid(2)`.
pub fn setsid() -> io::Result<()> {
    // SAFETY: no arguments.
    check(unsafe { libc::setsid() }).map(drop)
}

/// `execvp(3)`-like: run `argv[0]` (searched in `PATH` when it has no slash) with `env`.
/// Returns only on failure.
pub fn execvpe(argv: &[CString], env: &[CString]) -> io::Error {
    let mut argp: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    argp.push(std::ptr::null());
    let mut envp: Vec<*const libc::c_char> = env.iter().map(|a| a.as_ptr()).collect();
    envp.push(std::ptr::null());
    // SAFETY: both arrays are NULL-terminated and point at strings that outlive the call.
    unsafe { libc::execvpe(argp[0], argp.as_ptr(), envp.as_ptr()) };
    io::Error::last_os_error()
}

/// `execvpe(3)` of `file` (a path with a slash, so nothing is searched; a file without a
/// known format still runs through `/bin/sh`, as bash runs it) with `argv` as given (its
/// `argv[0]` the name as typed, as bash passes it). Returns only on failure.
pub fn execvpe_as(file: &std::ffi::CStr, argv: &[CString], env: &[CString]) -> io::Error {
    let mut argp: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    argp.push(std::ptr::null());
    let mut envp: Vec<*const libc::c_char> = env.iter().map(|a| a.as_ptr()).collect();
    envp.push(std::ptr::null());
    // SAFETY: both arrays are NULL-terminated and point at strings that outlive the call.
    unsafe { libc::execvpe(file.as_ptr(), argp.as_ptr(), envp.as_ptr()) };
    io::Error::last_os_error()
}

/// Whether `p` is a directory (`stat(2)`, following links); `None` when it cannot be
/// stat'ed (missing, or a directory on the way cannot be searched).
pub fn is_dir(p: &std::ffi::CStr) -> Option<bool> {
    // SAFETY: an all-zero stat is a valid value to be overwritten.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `p` is NUL-terminated and `st` a valid out-pointer.
    (unsafe { libc::stat(p.as_ptr(), &mut st) } == 0).then_some(st.st_mode & libc::S_IFMT == libc::S_IFDIR)
}

/// Whether the effective ids may execute `p` (`faccessat(2)` with `AT_EACCESS`, bash's
/// `eaccess(X_OK)`).
pub fn executable(p: &std::ffi::CStr) -> bool {
    // SAFETY: `p` is NUL-terminated.
    unsafe { libc::faccessat(libc::AT_FDCWD, p.as_ptr(), libc::X_OK, libc::AT_EACCESS) == 0 }
}

/// `kill(2)`.
pub fn kill(pid: libc::pid_t, sig: libc::c_int) -> io::Result<()> {
    // SAFETY: no pointers.
    check(unsafe { libc::kill(pid, sig) }).map(drop)
}

/// `waitpid(2)`; `Ok(None)` with `WNOHANG` when nothing changed.
pub fn waitpid(pid: libc::pid_t, flags: libc::c_int) -> io::Result<Option<(libc::pid_t, libc::c_int)>> {
    let mut status = 0;
    // SAFETY: `status` is a valid out-pointer.
    let r = unsafe { libc::waitpid(pid, &mut status, flags) };
    match r {
        -1 => Err(io::Error::last_os_error()),
        0 => Ok(None),
        p => Ok(Some((p, status))),
    }
}

/// Block `signals` for the calling thread and return a signalfd that reports them.
pub fn signalfd_for(signals: &[libc::c_int]) -> io::Result<OwnedFd> {
    // SAFETY: `set` is initialised by sigemptyset before use; pointers are to locals.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in signals {
            libc::sigaddset(&mut set, *s);
        }
        check(libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()))?;
        let fd = check(libc::signalfd(-1, &set, libc::SFD_CLOEXEC))?;
        Ok(OwnedFd::from_raw_fd(fd))
    }
}

/// Unblock every signal (before exec, so the command starts with a clean mask).
pub fn unblock_all_signals() -> io::Result<()> {
    // SAFETY: as in `signalfd_for`.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut set);
        check(libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut())).map(drop)
    }
}

/// Read one `signalfd_siginfo`; the signal number.
pub fn read_signal(fd: &OwnedFd) -> io::Result<libc::c_int> {
    // SAFETY: the buffer is exactly one siginfo, which the kernel fills.
    unsafe {
        let mut info: libc::signalfd_siginfo = std::mem::zeroed();
        let n = libc::read(fd.as_raw_fd(), (&mut info as *mut libc::signalfd_siginfo).cast(), std::mem::size_of::<libc::signalfd_siginfo>());
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(info.ssi_signo as libc::c_int)
    }
}

/// `pidfd_open(2)`: an fd that becomes readable when `pid` exits.
pub fn pidfd_open(pid: libc::pid_t) -> io::Result<OwnedFd> {
    // SAFETY: no pointers; the returned fd is new and owned by us.
    let r = check_long(unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) })?;
    // SAFETY: a successful pidfd_open returns a fresh file descriptor.
    Ok(unsafe { OwnedFd::from_raw_fd(r as RawFd) })
}

/// `poll(2)` on fds for readability; returns which are ready.
pub fn poll_read(fds: &[RawFd], timeout_ms: libc::c_int) -> io::Result<Vec<bool>> {
    Ok(poll_events(fds, timeout_ms)?.into_iter().map(|r| r != 0).collect())
}

/// `poll(2)` on fds for readability; returns each one's `revents` (negative fds are skipped
/// by the kernel: 0).
pub fn poll_events(fds: &[RawFd], timeout_ms: libc::c_int) -> io::Result<Vec<libc::c_short>> {
    let mut p: Vec<libc::pollfd> = fds.iter().map(|&fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 }).collect();
    loop {
        // SAFETY: `p` is a valid array of `p.len()` pollfds.
        let r = unsafe { libc::poll(p.as_mut_ptr(), p.len() as libc::nfds_t, timeout_ms) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return Err(e);
        }
        return Ok(p.iter().map(|x| x.revents).collect());
    }
}

/// `pipe2(O_CLOEXEC)`.
pub fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors.
    check(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
    // SAFETY: pipe2 returned two fresh descriptors we now own.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Clear `FD_CLOEXEC` so the descriptor survives exec.
pub fn clear_cloexec(fd: RawFd) -> io::Result<()> {
    // SAFETY: fcntl on an fd with integer arguments.
    check(unsafe { libc::fcntl(fd, libc::F_SETFD, 0) }).map(drop)
}

/// Wrap a raw descriptor number inherited from the parent.
///
/// The caller must own `fd` (it was passed to this process for it alone).
pub fn owned_from_inherited(fd: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: fcntl(F_GETFD) only checks that the descriptor is open.
    check(unsafe { libc::fcntl(fd, libc::F_GETFD) })?;
    // SAFETY: the descriptor is open and was handed to this process to own (documented above).
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Close every descriptor from `from` up, except those in `keep`: by `close_range` around
/// the kept ones (one system call each, no /proc), else by listing /proc/self/fd.
pub fn close_fds_from(from: RawFd, keep: &[RawFd]) {
    let mut kept: Vec<RawFd> = keep.iter().copied().filter(|k| *k >= from).collect();
    kept.sort_unstable();
    kept.dedup();
    let mut first = from;
    let mut ranges_ok = true;
    for k in kept.iter().copied().chain(std::iter::once(RawFd::MAX)) {
        if k > first && close_range(first, k - 1).is_err() {
            ranges_ok = false;
            break;
        }
        first = k.saturating_add(1);
    }
    if ranges_ok {
        return;
    }
    let mut fds: Vec<RawFd> = Vec::new();
    if let Ok(rd) = std::fs::read_dir("/proc/self/fd") {
        for e in rd.flatten() {
            if let Some(n) = e.file_name().to_str().and_then(|s| s.parse::<RawFd>().ok()) {
                if n >= from && !keep.contains(&n) {
                    fds.push(n);
                }
            }
        }
    }
    for fd in fds {
        // SAFETY: closing descriptors this process will not use again; the read_dir handle
        // was dropped above, so none of them is in use by Rust code.
        unsafe { libc::close(fd) };
    }
}

/// `_exit(2)`: leave without running destructors or flushing stdio (after fork).
pub fn exit_now(code: i32) -> ! {
    // SAFETY: _exit never returns and is always safe to call.
    unsafe { libc::_exit(code) }
}

/// The real uid and gid.
pub fn ids() -> (libc::uid_t, libc::gid_t) {
    // SAFETY: no arguments, cannot fail.
    unsafe { (libc::getuid(), libc::getgid()) }
}

extern "C" fn noop_handler(_: libc::c_int) {}

/// Install a handler that does nothing for `sig` (so a pid namespace's init receives it).
pub fn install_noop_handler(sig: libc::c_int) -> io::Result<()> {
    // SAFETY: `act` is zero-initialised then filled; the handler is an `extern "C"` function
    // that touches nothing, so it is async-signal-safe.
    unsafe {
        let mut act: libc::sigaction = std::mem::zeroed();
        act.sa_sigaction = noop_handler as extern "C" fn(libc::c_int) as usize;
        libc::sigemptyset(&mut act.sa_mask);
        act.sa_flags = libc::SA_RESTART;
        check(libc::sigaction(sig, &act, std::ptr::null_mut())).map(drop)
    }
}

/// Whether pinfold's caller left SIGPIPE ignored: pinfold's own start-up ignores it (a
/// closed pipe is an error to report), which must not reach the command. Set once by the
/// binary's start-up ([`note_caller_sigpipe`]); unset, the caller's is taken as the default.
static CALLER_SIGPIPE_IGNORED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Record SIGPIPE's disposition as pinfold's caller left it, before pinfold changes it.
pub fn note_caller_sigpipe(ignored: bool) {
    CALLER_SIGPIPE_IGNORED.store(ignored, std::sync::atomic::Ordering::Relaxed);
}

/// Which of `signals` pinfold's caller left ignored (`SIG_IGN` survives `execve`, so a command
/// run directly would inherit it): as this process has them, with SIGPIPE as the caller had it.
pub fn caller_ignored(signals: impl IntoIterator<Item = libc::c_int>) -> Vec<libc::c_int> {
    let mut out = Vec::new();
    for sig in signals {
        let ignored = if sig == libc::SIGPIPE {
            CALLER_SIGPIPE_IGNORED.load(std::sync::atomic::Ordering::Relaxed)
        } else {
            // SAFETY: `old` is written by the call; a null `act` only reads the disposition.
            unsafe {
                let mut old: libc::sigaction = std::mem::zeroed();
                libc::sigaction(sig, std::ptr::null(), &mut old) == 0 && old.sa_sigaction == libc::SIG_IGN
            }
        };
        if ignored {
            out.push(sig);
        }
    }
    out
}

/// Give each of `signals` the disposition a command run directly by pinfold's caller would
/// have: ignored if in `ignored`, the default otherwise (a handler would be reset by `execve`
/// anyway).
pub fn set_dispositions(signals: impl IntoIterator<Item = libc::c_int>, ignored: &[libc::c_int]) -> io::Result<()> {
    for sig in signals {
        let handler = if ignored.contains(&sig) { libc::SIG_IGN } else { libc::SIG_DFL };
        // SAFETY: as in `install_noop_handler`; no handler of ours is installed.
        let r = unsafe {
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = handler;
            libc::sigemptyset(&mut act.sa_mask);
            libc::sigaction(sig, &act, std::ptr::null_mut())
        };
        check(r)?;
    }
    Ok(())
}

/// Unblock exactly `signals` (the parent restores its mask after the run).
pub fn unblock_signals(signals: &[libc::c_int]) -> io::Result<()> {
    // SAFETY: as in `signalfd_for`.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in signals {
            libc::sigaddset(&mut set, *s);
        }
        check(libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut())).map(drop)
    }
}

/// `close_range(2)` (Linux 5.9): close every descriptor in `first..=last`.
pub fn close_range(first: RawFd, last: RawFd) -> io::Result<()> {
    // SAFETY: no pointers; the caller closes descriptors it will not use again (see
    // `close_fds_from`).
    check_long(unsafe { libc::syscall(libc::SYS_close_range, first as libc::c_uint, last as libc::c_uint, 0 as libc::c_uint) }).map(drop)
}

/// `flock(2)` on `fd` (`LOCK_SH`, `LOCK_EX`, with `LOCK_NB` to fail instead of waiting).
pub fn flock(fd: &impl AsRawFd, op: libc::c_int) -> io::Result<()> {
    // SAFETY: no pointers; `fd` is open for the duration of the call.
    check(unsafe { libc::flock(fd.as_raw_fd(), op) }).map(drop)
}

/// Set the extended attribute `name` (e.g. `user.x`) of the open file `fd` to `value`.
pub fn fsetxattr(fd: &impl AsRawFd, name: &str, value: &[u8]) -> io::Result<()> {
    let name = CString::new(name).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: `name` is NUL-terminated and `value` valid for `value.len()` bytes, both alive
    // for the call; `fd` is open.
    check(unsafe { libc::fsetxattr(fd.as_raw_fd(), name.as_ptr(), value.as_ptr().cast(), value.len(), 0) }).map(drop)
}

/// Whether the open file `fd` has the extended attribute `name`.
pub fn fhasxattr(fd: &impl AsRawFd, name: &str) -> bool {
    let Ok(name) = CString::new(name) else { return false };
    // SAFETY: `name` is NUL-terminated and alive for the call; a null buffer of size 0 asks
    // only for the value's length, so nothing is written.
    unsafe { libc::fgetxattr(fd.as_raw_fd(), name.as_ptr(), std::ptr::null_mut(), 0) >= 0 }
}

/// Whether `path` (not following a final symlink) has the extended attribute `name`.
pub fn lhasxattr(path: &Path, name: &str) -> bool {
    let (Ok(path), Ok(name)) = (cstr(path), CString::new(name)) else { return false };
    // SAFETY: both strings are NUL-terminated and alive for the call; a null buffer of size 0
    // asks only for the value's length, so nothing is written.
    unsafe { libc::lgetxattr(path.as_ptr(), name.as_ptr(), std::ptr::null_mut(), 0) >= 0 }
}

/// A connected pair of unix stream sockets (`SOCK_CLOEXEC`): the report channel, which can
/// carry a descriptor as well as lines.
pub fn socketpair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors.
    check(unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0, fds.as_mut_ptr()) })?;
    // SAFETY: socketpair returned two fresh descriptors we now own.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Send `data` on a unix socket with `fd` attached (`SCM_RIGHTS`).
pub fn send_with_fd(sock: &impl AsRawFd, data: &[u8], fd: &impl AsRawFd) -> io::Result<()> {
    let raw = fd.as_raw_fd();
    // SAFETY: CMSG_SPACE only computes a size.
    let space = unsafe { libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) } as usize;
    let mut control = vec![0u8; space];
    let mut iov = libc::iovec { iov_base: data.as_ptr() as *mut libc::c_void, iov_len: data.len() };
    // SAFETY: an all-zero msghdr is a valid empty message; the fields are set below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = space as _;
    // SAFETY: `msg` points at `control`, which has room for one header and one descriptor;
    // CMSG_FIRSTHDR of such a buffer is non-null.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<RawFd>(), raw);
    }
    loop {
        // SAFETY: `msg` and the buffers it points at live across the call.
        let n = unsafe { libc::sendmsg(sock.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
        if n >= 0 {
            return if n as usize == data.len() { Ok(()) } else { Err(io::Error::other("short sendmsg")) };
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(e);
        }
    }
}

/// Read from a unix socket into `buf`, taking any descriptors that came with the bytes
/// (`MSG_CMSG_CLOEXEC`). `(0, [])` is the end of the stream.
pub fn recv_with_fds(sock: &impl AsRawFd, buf: &mut [u8]) -> io::Result<(usize, Vec<OwnedFd>)> {
    // Room for a few descriptors; more in one message are closed by the kernel (MSG_CTRUNC).
    // SAFETY: CMSG_SPACE only computes a size.
    let space = unsafe { libc::CMSG_SPACE((4 * std::mem::size_of::<RawFd>()) as u32) } as usize;
    let mut control = vec![0u8; space];
    let mut iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
    // SAFETY: an all-zero msghdr is a valid empty message; the fields are set below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = space as _;
    let n = loop {
        // SAFETY: `msg` and the buffers it points at live across the call.
        let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
        if n >= 0 {
            break n as usize;
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(e);
        }
    };
    let mut fds = Vec::new();
    // SAFETY: the kernel filled `control` and set msg_controllen; the CMSG macros walk
    // within it, and each SCM_RIGHTS entry holds descriptors now owned by this process.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(cmsg);
                let len = (*cmsg).cmsg_len as usize - (data as usize - cmsg as usize);
                for i in 0..len / std::mem::size_of::<RawFd>() {
                    let fd = std::ptr::read_unaligned(data.cast::<RawFd>().add(i));
                    fds.push(OwnedFd::from_raw_fd(fd));
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    Ok((n, fds))
}

/// Bring the loopback interface of the current network namespace up (a new namespace has it
/// down). Needs CAP_NET_ADMIN in the namespace's owning user namespace.
pub fn loopback_up() -> io::Result<()> {
    // SAFETY: socket() with integer arguments.
    let s = check(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: socket returned a fresh descriptor we now own.
    let sock = unsafe { OwnedFd::from_raw_fd(s) };
    // SAFETY: an all-zero ifreq is valid; the name is set below within its 16 bytes.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *d = *s as libc::c_char;
    }
    // SAFETY: SIOCGIFFLAGS reads into `req`, which lives across the call.
    check(unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS as _, &mut req) })?;
    // SAFETY: the kernel filled the flags member of the union for SIOCGIFFLAGS.
    unsafe { req.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short };
    // SAFETY: SIOCSIFFLAGS reads `req`, which lives across the call.
    check(unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS as _, &req) }).map(drop)
}

/// The canonical form of `p` (absolute, no symlinks, no `.` or `..`), as
/// [`std::fs::canonicalize`] gives it, in three system calls: open `p` with `O_PATH` (the
/// kernel resolves it) and read back the path of the descriptor from `/proc/self/fd`. glibc's
/// realpath reads every component's link instead, one `readlink` each: ~180 calls per `exec`
/// with the default preset. Falls back to std's where `/proc` does not answer with a path.
pub(crate) fn canonicalize(p: &Path) -> io::Result<std::path::PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let c = CString::new(p.as_os_str().as_bytes()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: `c` is a valid C string; the result is checked and owned below.
    let fd = check(unsafe { libc::open(c.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) })?;
    // SAFETY: open returned a fresh descriptor we now own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    match std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())) {
        // A path the kernel could not express from our root reads as something else (an
        // anonymous inode, or a path with " (deleted)"); such answers go to std.
        Ok(t) if t.is_absolute() && !t.as_os_str().as_bytes().ends_with(b" (deleted)") => Ok(t),
        _ => std::fs::canonicalize(p),
    }
}

#[cfg(test)]
mod canonicalize_tests {
    use std::os::unix::fs::symlink;

    /// Agrees with std (realpath) on plain paths, symlinks to files and directories, `..`
    /// after a symlink, relative paths, missing paths, dangling links and loops.
    #[test]
    fn agrees_with_std() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path();
        std::fs::create_dir_all(d.join("a/b")).unwrap();
        std::fs::write(d.join("a/b/f"), "x").unwrap();
        symlink(d.join("a/b"), d.join("lb")).unwrap();
        symlink("a/b/f", d.join("lf")).unwrap();
        symlink(d.join("nowhere"), d.join("dangling")).unwrap();
        symlink(d.join("loop2"), d.join("loop1")).unwrap();
        symlink(d.join("loop1"), d.join("loop2")).unwrap();
        let cases = ["a", "a/b/f", "lb", "lb/f", "lb/..", "lb/../b/./f", "lf", "a//b///f", "missing", "a/missing/x", "dangling", "loop1", "a/b/f/x"];
        let mut found = 0;
        for c in cases {
            let p = d.join(c);
            let (ours, std) = (super::canonicalize(&p), std::fs::canonicalize(&p));
            match (&ours, &std) {
                (Ok(a), Ok(b)) => {
                    assert_eq!(a, b, "{c}");
                    found += 1;
                }
                (Err(a), Err(b)) => assert_eq!(a.raw_os_error(), b.raw_os_error(), "{c}"),
                _ => panic!("{c}: ours {ours:?}, std {std:?}"),
            }
        }
        assert_eq!(found, 8, "the existing paths resolve");
        // Relative to the working directory, like realpath.
        assert_eq!(super::canonicalize(std::path::Path::new(".")).unwrap(), std::fs::canonicalize(".").unwrap());
    }
}

/// `send(2)` of `data` on a connected socket, without SIGPIPE when the peer has gone.
pub(crate) fn send_nosignal(sock: &impl AsRawFd, data: &[u8]) -> io::Result<usize> {
    // SAFETY: `data` is valid for `data.len()` bytes for the duration of the call.
    let n = unsafe { libc::send(sock.as_raw_fd(), data.as_ptr().cast(), data.len(), libc::MSG_NOSIGNAL) };
    if n < 0 { Err(io::Error::last_os_error()) } else { Ok(n as usize) }
}

/// `dup2(2)`: make `new` a copy of `old` (without `FD_CLOEXEC`).
pub fn dup2(old: RawFd, new: RawFd) -> io::Result<()> {
    // SAFETY: integer arguments only; `new` is replaced atomically, as the caller intends.
    check(unsafe { libc::dup2(old, new) }).map(drop)
}

/// `setrlimit(2)` with the same soft and hard limit.
pub fn setrlimit(resource: libc::__rlimit_resource_t, limit: u64) -> io::Result<()> {
    let r = libc::rlimit { rlim_cur: limit, rlim_max: limit };
    // SAFETY: `r` is a valid rlimit for the duration of the call.
    check(unsafe { libc::setrlimit(resource, &r) }).map(drop)
}

/// Set `O_NONBLOCK` on `fd`.
pub fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: fcntl with integer arguments on a descriptor the caller owns.
    let flags = check(unsafe { libc::fcntl(fd, libc::F_GETFL) })?;
    // SAFETY: as above.
    check(unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) }).map(drop)
}

/// The soft and hard limits of `resource` (`RLIM_INFINITY` as `u64::MAX`).
pub fn getrlimit(resource: libc::__rlimit_resource_t) -> (u64, u64) {
    let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: `r` is valid for writes for the duration of the call.
    if unsafe { libc::getrlimit(resource, &mut r) } != 0 {
        return (1024, 1024);
    }
    (r.rlim_cur, r.rlim_max)
}

/// This machine's host name, as `gethostname(2)` gives it.
pub fn hostname() -> Option<String> {
    let mut buf = [0u8; 256];
    // SAFETY: `buf` has room for `buf.len()` bytes, the length passed.
    if unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } != 0 {
        return None;
    }
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    std::str::from_utf8(&buf[..end]).ok().map(str::to_string).filter(|s| !s.is_empty())
}

/// Have the process `cmd` starts get SIGKILL when the thread that starts it ends.
pub fn die_with_parent(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure makes one system call with integer arguments (async-signal-safe);
    // it allocates nothing and takes no lock between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Search `PATH` (then the usual system directories) for an executable `name`.
pub(crate) fn find_program(name: &str, path: Option<&std::ffi::OsStr>) -> Option<std::path::PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let fallback = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
    let dirs = path.map(|p| p.to_os_string()).unwrap_or_default();
    std::env::split_paths(&dirs).chain(std::env::split_paths(fallback)).filter(|d| d.is_absolute()).find_map(|d| {
        let p = d.join(name);
        let m = std::fs::metadata(&p).ok()?;
        (m.is_file() && m.permissions().mode() & 0o111 != 0).then_some(p)
    })
}

/// A new descriptor (close-on-exec) for what `fd` refers to.
pub fn dup_cloexec(fd: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: fcntl with integer arguments; a descriptor it returns is new and ours.
    let n = check(unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3) })?;
    // SAFETY: `n` is a fresh descriptor this process now owns.
    Ok(unsafe { OwnedFd::from_raw_fd(n) })
}

/// Open the directory `path` (absolute) as an `O_PATH` descriptor, with no symbolic link
/// followed anywhere on the way (`openat2` with `RESOLVE_NO_SYMLINKS`): a directory swapped
/// for a link between a look and a use is not followed.
pub fn open_dir_no_symlinks(path: &Path) -> io::Result<OwnedFd> {
    openat2_no_symlinks(path, libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC)
}

/// `openat2(AT_FDCWD, path, flags)` with `RESOLVE_NO_SYMLINKS`.
fn openat2_no_symlinks(path: &Path, flags: libc::c_int) -> io::Result<OwnedFd> {
    let p = cstr(path)?;
    // SAFETY: an all-zero open_how is valid (no flags, no mode, no resolve bits).
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = flags as u64;
    how.resolve = libc::RESOLVE_NO_SYMLINKS;
    // SAFETY: `p` is NUL-terminated and `how` valid for the call; the size passed is its own.
    let fd = check_long(unsafe {
        libc::syscall(libc::SYS_openat2, libc::AT_FDCWD, p.as_ptr(), &how as *const libc::open_how, std::mem::size_of::<libc::open_how>())
    })?;
    // SAFETY: openat2 returned a fresh descriptor we now own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

fn name_cstr(name: &std::ffi::OsStr) -> io::Result<CString> {
    use std::os::unix::ffi::OsStrExt;
    if name.as_bytes().contains(&b'/') || name.is_empty() {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    CString::new(name.as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// `openat(dir, name, flags | O_NOFOLLOW | O_CLOEXEC, mode)`: `name` is one component.
pub fn openat(dir: &impl AsRawFd, name: &std::ffi::OsStr, flags: libc::c_int, mode: libc::mode_t) -> io::Result<std::fs::File> {
    let n = name_cstr(name)?;
    // SAFETY: `n` is NUL-terminated; openat returns a fresh descriptor or -1.
    let fd = check(unsafe { libc::openat(dir.as_raw_fd(), n.as_ptr(), flags | libc::O_NOFOLLOW | libc::O_CLOEXEC, mode as libc::c_uint) })?;
    // SAFETY: a fresh descriptor we now own.
    Ok(unsafe { std::fs::File::from_raw_fd(fd) })
}

/// `mkdirat(dir, name, mode)`: `name` is one component.
pub fn mkdirat(dir: &impl AsRawFd, name: &std::ffi::OsStr, mode: libc::mode_t) -> io::Result<()> {
    let n = name_cstr(name)?;
    // SAFETY: `n` is NUL-terminated.
    check(unsafe { libc::mkdirat(dir.as_raw_fd(), n.as_ptr(), mode) }).map(drop)
}

/// `unlinkat(dir, name, flags)`: `name` is one component (`AT_REMOVEDIR` for a directory).
pub fn unlinkat(dir: &impl AsRawFd, name: &std::ffi::OsStr, flags: libc::c_int) -> io::Result<()> {
    let n = name_cstr(name)?;
    // SAFETY: `n` is NUL-terminated.
    check(unsafe { libc::unlinkat(dir.as_raw_fd(), n.as_ptr(), flags) }).map(drop)
}

/// `(device, inode, mode, size)` of `name` in `dir`, the link itself if it is one.
pub fn statat(dir: &impl AsRawFd, name: &std::ffi::OsStr) -> io::Result<(u64, u64, u32, u64)> {
    let n = name_cstr(name)?;
    // SAFETY: an all-zero stat is valid; fstatat fills it.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `n` is NUL-terminated and `st` valid for writes.
    check(unsafe { libc::fstatat(dir.as_raw_fd(), n.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) })?;
    Ok((st.st_dev, st.st_ino, st.st_mode, st.st_size as u64))
}

/// `(device, inode)` of what `fd` refers to (an `O_PATH` descriptor too).
pub fn fd_id(fd: &impl AsRawFd) -> io::Result<(u64, u64)> {
    // SAFETY: an all-zero stat is valid; fstat fills it.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is valid for writes.
    check(unsafe { libc::fstat(fd.as_raw_fd(), &mut st) })?;
    Ok((st.st_dev, st.st_ino))
}

/// Open `path` (absolute) as an `O_PATH` descriptor with no symbolic link followed anywhere,
/// the last component included (`openat2`, `RESOLVE_NO_SYMLINKS`).
pub fn open_path_no_symlinks(path: &Path) -> io::Result<OwnedFd> {
    openat2_no_symlinks(path, libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC)
}

/// A helper's socket, passed as the number of a descriptor it inherited.
pub fn inherited_socket(arg: &str) -> Option<OwnedFd> {
    arg.parse::<RawFd>().ok().and_then(|fd| owned_from_inherited(fd).ok())
}

/// Ignore the terminal's signals and SIGPIPE: a helper that outlives the pinfold they stop,
/// and writes to a socket pinfold may have closed.
pub fn ignore_terminal_signals() {
    for s in [libc::SIGINT, libc::SIGHUP, libc::SIGQUIT, libc::SIGTERM, libc::SIGPIPE] {
        ignore_signal(s);
    }
}

/// Ignore `sig` in this process (a helper that must outlive the terminal's signals).
pub fn ignore_signal(sig: libc::c_int) {
    // SAFETY: SIG_IGN installs no handler code; the call only changes this process's table.
    unsafe {
        libc::signal(sig, libc::SIG_IGN);
    }
}

/// A non-blocking, close-on-exec inotify instance.
pub fn inotify_init() -> io::Result<OwnedFd> {
    // SAFETY: flags only; the result is checked.
    let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a descriptor just made, owned by the caller alone.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Watch `path` for `mask` on the inotify instance `fd`: the watch descriptor.
pub fn inotify_add_watch(fd: &OwnedFd, path: &Path, mask: u32) -> io::Result<i32> {
    let c = CString::new(std::os::unix::ffi::OsStrExt::as_bytes(path.as_os_str())).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: a valid descriptor and a NUL-terminated path.
    let wd = unsafe { libc::inotify_add_watch(fd.as_raw_fd(), c.as_ptr(), mask) };
    if wd < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(wd)
}

/// `read(2)` into `buf` (for descriptors std has no reader for).
pub fn read_fd(fd: &OwnedFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: reading into a buffer of its length.
    let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// `fd` registered with the current tokio runtime for reading, for as long as it is borrowed.
pub fn async_reader(fd: std::os::fd::BorrowedFd<'_>) -> io::Result<tokio::io::unix::AsyncFd<std::os::fd::BorrowedFd<'_>>> {
    // SAFETY: the registration holds the borrow, so the descriptor stays open (and the same
    // file) until it is dropped.
    unsafe { tokio::io::unix::AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) }.map_err(io::Error::from)
}

/// Close `fd` where its last close cannot hold up this process: an inotify instance's last
/// close waits out the kernel's mark reaper (an SRCU grace period, ~10 ms here), which would
/// land on every run's end. A grandchild keeps a copy, this process closes its own, and the
/// grandchild (holding nothing else) makes the last close once this process's copy is gone.
/// Falls back to closing here.
pub fn close_detached(fd: OwnedFd) {
    let Ok((r, w)) = pipe() else { return drop(fd) };
    let (keep_fd, keep_r) = (fd.as_raw_fd(), r.as_raw_fd());
    // SAFETY: the child and the grandchild call only async-signal-safe functions (fork,
    // close_range via syscall, read, close, _exit), so a fork from a threaded process is sound.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // The child keeps nothing but the two descriptors, before the grandchild is made and
        // before the caller's wait below returns: a copy of the caller's standard streams
        // would keep a reader of them waiting, and one of a lock it holds (the undo store's)
        // would keep it held after the caller has ended.
        let (lo, hi) = (keep_fd.min(keep_r), keep_fd.max(keep_r));
        for (first, last) in [(0, lo - 1), (lo + 1, hi - 1), (hi + 1, RawFd::MAX)] {
            if first <= last {
                // SAFETY: close_range takes integers only.
                unsafe { libc::syscall(libc::SYS_close_range, first as libc::c_uint, last as libc::c_uint, 0 as libc::c_uint) };
            }
        }
        // SAFETY: as above.
        if unsafe { libc::fork() } != 0 {
            // SAFETY: leaving the child at once, as async-signal-safe code may.
            unsafe { libc::_exit(0) };
        }
        let mut b = [0u8; 1];
        // SAFETY: reading into a one-byte buffer; returns at the pipe's end (the caller's
        // copies gone), or on an error.
        unsafe { libc::read(keep_r, b.as_mut_ptr().cast(), 1) };
        // SAFETY: closing the descriptor this process owns a copy of, then leaving.
        unsafe {
            libc::close(keep_fd);
            libc::_exit(0)
        };
    }
    if pid > 0 {
        let _ = waitpid(pid, 0);
    }
    drop(r);
    drop(fd);
    drop(w);
}
