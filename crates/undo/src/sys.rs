//! The few system calls std does not wrap.

use std::ffi::CString;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

fn c(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// `flock(2)`, retried on EINTR.
pub(crate) fn flock(f: &impl AsRawFd, op: libc::c_int) -> io::Result<()> {
    loop {
        // SAFETY: flock on a descriptor the caller owns, with an integer operation.
        if unsafe { libc::flock(f.as_raw_fd(), op) } == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(e);
        }
    }
}



/// A file name for the `*at` calls.
pub(crate) fn name(n: &std::ffi::OsStr) -> io::Result<CString> {
    CString::new(n.as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

fn ok(r: libc::c_int) -> io::Result<()> {
    if r == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
}

fn owned(r: libc::c_long) -> io::Result<std::os::fd::OwnedFd> {
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a non-negative result of open/openat2 is a fresh descriptor we now own.
    Ok(unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(r as libc::c_int) })
}

/// `open(path, O_PATH | O_DIRECTORY)`.
pub(crate) fn open_dir(p: &Path) -> io::Result<std::os::fd::OwnedFd> {
    let cp = c(p)?;
    // SAFETY: a valid C string and integer flags.
    owned(unsafe { libc::open(cp.as_ptr(), libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) } as libc::c_long)
}

/// `openat2(dir, rel, O_PATH | O_DIRECTORY)`, resolving beneath `dir` and through no link:
/// a symbolic link anywhere on the way fails with `ELOOP`, a way out with `EXDEV`.
pub(crate) fn open_dir_beneath(dir: &impl AsRawFd, rel: &Path) -> io::Result<std::os::fd::OwnedFd> {
    let cp = c(rel)?;
    // SAFETY: open_how is plain integers; all-zero is valid, the fields are set below.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) as u64;
    how.resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS;
    // SAFETY: valid pointers to a C string and an open_how of the size passed.
    owned(unsafe { libc::syscall(libc::SYS_openat2, dir.as_raw_fd(), cp.as_ptr(), &how as *const libc::open_how, std::mem::size_of::<libc::open_how>()) })
}

/// `openat(dir, name, flags | O_NOFOLLOW | O_CLOEXEC, mode)`.
pub(crate) fn open_at(dir: &impl AsRawFd, n: &std::ffi::CStr, flags: libc::c_int, mode: u32) -> io::Result<std::fs::File> {
    // SAFETY: a valid C string and integer flags.
    let fd = owned(unsafe { libc::openat(dir.as_raw_fd(), n.as_ptr(), flags | libc::O_NOFOLLOW | libc::O_CLOEXEC, mode) } as libc::c_long)?;
    Ok(std::fs::File::from(fd))
}

/// `fstatat(dir, name, AT_SYMLINK_NOFOLLOW)`: `None` when nothing is there.
pub(crate) fn lstat_at(dir: &impl AsRawFd, n: &std::ffi::CStr) -> io::Result<Option<libc::stat>> {
    // SAFETY: an all-zero stat is valid storage for the kernel to fill.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid C string and stat buffer.
    let r = unsafe { libc::fstatat(dir.as_raw_fd(), n.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) };
    if r == 0 {
        return Ok(Some(st));
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::ENOENT) { Ok(None) } else { Err(e) }
}


/// `readlinkat(dir, name)`.
pub(crate) fn readlink_at(dir: &impl AsRawFd, n: &std::ffi::CStr) -> io::Result<std::path::PathBuf> {
    let mut buf = vec![0u8; libc::PATH_MAX as usize + 1];
    // SAFETY: valid C string; `buf` has room for the length passed.
    let r = unsafe { libc::readlinkat(dir.as_raw_fd(), n.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    buf.truncate(r as usize);
    Ok(std::path::PathBuf::from(std::ffi::OsString::from(std::ffi::OsStr::from_bytes(&buf))))
}

/// `unlinkat(dir, name, AT_REMOVEDIR if dir)`.
pub(crate) fn unlink_at(d: &impl AsRawFd, n: &std::ffi::CStr, is_dir: bool) -> io::Result<()> {
    // SAFETY: valid C string; integer flags.
    ok(unsafe { libc::unlinkat(d.as_raw_fd(), n.as_ptr(), if is_dir { libc::AT_REMOVEDIR } else { 0 }) })
}

/// `renameat2(a, an, b, bn, flags)`.
pub(crate) fn rename_at(a: &impl AsRawFd, an: &std::ffi::CStr, b: &impl AsRawFd, bn: &std::ffi::CStr, flags: libc::c_uint) -> io::Result<()> {
    // SAFETY: valid C strings; integer flags.
    ok(unsafe { libc::renameat2(a.as_raw_fd(), an.as_ptr(), b.as_raw_fd(), bn.as_ptr(), flags) })
}

/// `mkdirat(dir, name, mode)`.
pub(crate) fn mkdir_at(d: &impl AsRawFd, n: &std::ffi::CStr, mode: u32) -> io::Result<()> {
    // SAFETY: valid C string; integer mode.
    ok(unsafe { libc::mkdirat(d.as_raw_fd(), n.as_ptr(), mode) })
}

/// `mkfifoat(dir, name, mode)`.
pub(crate) fn mkfifo_at(d: &impl AsRawFd, n: &std::ffi::CStr, mode: u32) -> io::Result<()> {
    // SAFETY: valid C string; integer mode.
    ok(unsafe { libc::mkfifoat(d.as_raw_fd(), n.as_ptr(), mode) })
}

/// `symlinkat(target, dir, name)`.
pub(crate) fn symlink_at(target: &Path, d: &impl AsRawFd, n: &std::ffi::CStr) -> io::Result<()> {
    let ct = c(target)?;
    // SAFETY: valid C strings.
    ok(unsafe { libc::symlinkat(ct.as_ptr(), d.as_raw_fd(), n.as_ptr()) })
}

/// The permission bits of `name` in `d`, never through a symbolic link: `fchmodat2` with
/// `AT_SYMLINK_NOFOLLOW` (Linux 6.6); before it, open the name without following and `fchmod`.
pub(crate) fn chmod_at(d: &impl AsRawFd, n: &std::ffi::CStr, mode: u32) -> io::Result<()> {
    // SAFETY: valid C string; integer arguments.
    let r = unsafe { libc::syscall(libc::SYS_fchmodat2, d.as_raw_fd(), n.as_ptr(), mode, libc::AT_SYMLINK_NOFOLLOW) };
    if r == 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() != Some(libc::ENOSYS) {
        return Err(e);
    }
    let f = open_at(d, n, libc::O_RDONLY, 0)?;
    // SAFETY: fchmod on a descriptor we own.
    ok(unsafe { libc::fchmod(f.as_raw_fd(), mode) })
}

/// Copy the data of `from` into the empty file `to` keeping its holes: only the ranges
/// `SEEK_DATA`/`SEEK_HOLE` name are copied (`copy_file_range`), then the length is set. A
/// sparse file costs the records what it holds, not its length.
pub(crate) fn copy_sparse(from: &std::fs::File, to: &std::fs::File, len: u64) -> io::Result<()> {
    let (i, o) = (from.as_raw_fd(), to.as_raw_fd());
    let mut at: i64 = 0;
    while (at as u64) < len {
        // SAFETY: lseek on a descriptor we own.
        let data = unsafe { libc::lseek(i, at, libc::SEEK_DATA) };
        if data < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::ENXIO) {
                break;
            }
            return Err(e);
        }
        // SAFETY: as above.
        let hole = unsafe { libc::lseek(i, data, libc::SEEK_HOLE) };
        if hole < 0 {
            return Err(io::Error::last_os_error());
        }
        let (mut off_in, mut off_out) = (data, data);
        while off_in < hole {
            // SAFETY: offsets are ours; both descriptors are open files.
            let n = unsafe { libc::copy_file_range(i, &mut off_in, o, &mut off_out, (hole - off_in) as usize, 0) };
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
            if n == 0 {
                break;
            }
        }
        at = hole;
    }
    to.set_len(len)
}

/// Bytes free to an unprivileged writer on the file system holding `p`, and its size.
pub(crate) fn space(p: &Path) -> io::Result<(u64, u64)> {
    let cp = c(p)?;
    // SAFETY: an all-zero statvfs is valid storage for the kernel to fill.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a valid C string and buffer.
    if unsafe { libc::statvfs(cp.as_ptr(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((st.f_bavail as u64 * st.f_frsize as u64, st.f_blocks as u64 * st.f_frsize as u64))
}
