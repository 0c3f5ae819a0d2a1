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

/// `mkfifo(3)`.
pub(crate) fn mkfifo(p: &Path, mode: u32) -> io::Result<()> {
    let cp = c(p)?;
    // SAFETY: a valid C string and an integer mode.
    if unsafe { libc::mkfifo(cp.as_ptr(), mode) } == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
}

/// Swap `a` and `b` (`renameat2` with `RENAME_EXCHANGE`).
pub(crate) fn exchange(a: &Path, b: &Path) -> io::Result<()> {
    let (ca, cb) = (c(a)?, c(b)?);
    // SAFETY: valid C strings; renameat2 with integer arguments.
    let r = unsafe { libc::renameat2(libc::AT_FDCWD, ca.as_ptr(), libc::AT_FDCWD, cb.as_ptr(), libc::RENAME_EXCHANGE) };
    if r == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
}
