//! Files beneath a sandbox's workspace, for the file calls. A path is first normalised as
//! text (absolute paths must lie in the workspace; `..` may not climb out of it), then every
//! open resolves it from the workspace's own directory with
//! `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`: a symbolic link that points outside,
//! or a `..` reached through one, fails with EXDEV instead of leaving. Nothing here follows a
//! path from `/`.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use crate::error::ApiError;

/// `p` as a path relative to `workspace`, normalised; `bad_path` when it leaves.
pub fn relative(workspace: &Path, p: &str) -> Result<PathBuf, ApiError> {
    if p.is_empty() {
        return Err(ApiError::BadPath("the path is empty".into()));
    }
    if p.as_bytes().contains(&0) {
        return Err(ApiError::BadPath("the path holds a NUL byte".into()));
    }
    let given = Path::new(p);
    let rest = if given.is_absolute() {
        given.strip_prefix(workspace).map_err(|_| ApiError::BadPath(format!("`{p}` is outside the sandbox's workspace; give a path relative to it")))?
    } else {
        given
    };
    let mut out = PathBuf::new();
    for c in rest.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return Err(ApiError::BadPath(format!("`{p}` climbs out of the sandbox's workspace")));
                }
            }
            Component::RootDir | Component::Prefix(_) => return Err(ApiError::BadPath(format!("`{p}` is not a path beneath the workspace"))),
        }
    }
    Ok(out)
}

/// An open workspace directory.
#[derive(Debug)]
pub struct Root {
    fd: OwnedFd,
}

fn cstr(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

#[allow(unsafe_code)]
fn openat2(dir: i32, rel: &Path, flags: i32, mode: u32) -> io::Result<OwnedFd> {
    let path = cstr(if rel.as_os_str().is_empty() { Path::new(".") } else { rel })?;
    // SAFETY: open_how is plain integers; all-zero is valid, and the fields are set below.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (flags | libc::O_CLOEXEC) as u64;
    how.mode = if flags & libc::O_CREAT != 0 { mode as u64 } else { 0 };
    how.resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS;
    // SAFETY: `path` is a NUL-terminated string and `how` a valid open_how that both outlive
    // the call; the kernel is told its exact size.
    let fd = unsafe { libc::syscall(libc::SYS_openat2, dir, path.as_ptr(), &how as *const libc::open_how, std::mem::size_of::<libc::open_how>()) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Map an error of a beneath-resolution to the API: leaving the workspace is `bad_path`.
pub fn io_error(p: &str, e: io::Error) -> ApiError {
    match e.raw_os_error() {
        Some(libc::EXDEV) => ApiError::BadPath(format!("`{p}` leads outside the sandbox's workspace (through a symbolic link)")),
        Some(libc::ENOENT) => ApiError::NotFound(format!("`{p}` does not exist")),
        Some(libc::ENOTDIR) => ApiError::BadPath(format!("a part of `{p}` is not a directory")),
        Some(libc::EISDIR) => ApiError::BadPath(format!("`{p}` is a directory")),
        Some(libc::ELOOP) => ApiError::BadPath(format!("`{p}` goes through too many symbolic links")),
        Some(libc::ENAMETOOLONG) => ApiError::BadPath(format!("`{p}` is too long")),
        Some(libc::EACCES) | Some(libc::EPERM) => ApiError::Forbidden(format!("`{p}` may not be accessed")),
        Some(libc::ENOTEMPTY) => ApiError::Conflict(format!("`{p}` is a directory that is not empty")),
        _ => ApiError::internal(format!("{p}: {e}")),
    }
}

impl Root {
    pub fn open(workspace: &Path) -> io::Result<Root> {
        let f = File::open(workspace)?;
        if !f.metadata()?.is_dir() {
            return Err(io::Error::from_raw_os_error(libc::ENOTDIR));
        }
        Ok(Root { fd: f.into() })
    }

    pub fn read(&self, rel: &Path) -> io::Result<File> {
        let fd = openat2(self.fd.as_raw_fd(), rel, libc::O_RDONLY | libc::O_NONBLOCK, 0)?;
        let f = File::from(fd);
        if !f.metadata()?.is_file() {
            return Err(io::Error::from_raw_os_error(if f.metadata()?.is_dir() { libc::EISDIR } else { libc::EACCES }));
        }
        Ok(f)
    }

    /// The directory `rel`, opened for listing.
    pub fn dir(&self, rel: &Path) -> io::Result<File> {
        openat2(self.fd.as_raw_fd(), rel, libc::O_RDONLY | libc::O_DIRECTORY, 0).map(File::from)
    }

    /// The parent directory of `rel` (created, with its own parents, when `create`), and the
    /// last name.
    fn parent(&self, rel: &Path, create: bool) -> io::Result<(OwnedFd, CString)> {
        let name = rel.file_name().ok_or_else(|| io::Error::from_raw_os_error(libc::EISDIR))?;
        let parent = rel.parent().unwrap_or(Path::new(""));
        if create {
            let mut at = PathBuf::new();
            for c in parent.components() {
                at.push(c);
                let (dir, n) = self.parent(&at, false)?;
                match mkdirat(&dir, &n) {
                    Ok(()) => {}
                    Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {}
                    Err(e) => return Err(e),
                }
            }
        }
        let dir = openat2(self.fd.as_raw_fd(), parent, libc::O_PATH | libc::O_DIRECTORY, 0)?;
        Ok((dir, cstr(Path::new(name))?))
    }

    /// Replace the file `rel` with `bytes`: written to a new file beside it, then renamed over
    /// it, so a reader never sees half; a link at `rel` is replaced, never followed.
    pub fn write(&self, rel: &Path, bytes: &[u8]) -> io::Result<()> {
        use std::io::Write;
        let (dir, name) = self.parent(rel, true)?;
        let tmp_name = format!(".pinfold-put-{}-{}", std::process::id(), crate::random_hex(6));
        let tmp = cstr(Path::new(&tmp_name))?;
        let fd = openat2(dir.as_raw_fd(), Path::new(&tmp_name), libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL, 0o644)?;
        let mut f = File::from(fd);
        let written = f.write_all(bytes).and_then(|()| f.sync_data());
        if let Err(e) = written.and_then(|()| renameat(&dir, &tmp, &name)) {
            let _ = unlinkat(&dir, &tmp, false);
            return Err(e);
        }
        Ok(())
    }

    /// Remove the file, link or empty directory `rel`.
    pub fn remove(&self, rel: &Path) -> io::Result<()> {
        let (dir, name) = self.parent(rel, false)?;
        match unlinkat(&dir, &name, false) {
            Err(e) if e.raw_os_error() == Some(libc::EISDIR) => unlinkat(&dir, &name, true),
            r => r,
        }
    }
}

#[allow(unsafe_code)]
fn mkdirat(dir: &OwnedFd, name: &CString) -> io::Result<()> {
    // SAFETY: a valid descriptor and NUL-terminated name.
    if unsafe { libc::mkdirat(dir.as_raw_fd(), name.as_ptr(), 0o755) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[allow(unsafe_code)]
fn renameat(dir: &OwnedFd, from: &CString, to: &CString) -> io::Result<()> {
    // SAFETY: a valid descriptor and NUL-terminated names.
    if unsafe { libc::renameat(dir.as_raw_fd(), from.as_ptr(), dir.as_raw_fd(), to.as_ptr()) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[allow(unsafe_code)]
fn unlinkat(dir: &OwnedFd, name: &CString, is_dir: bool) -> io::Result<()> {
    let flags = if is_dir { libc::AT_REMOVEDIR } else { 0 };
    // SAFETY: a valid descriptor and NUL-terminated name.
    if unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), flags) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The entries of an open directory: name, type, size (of files), sorted by name.
pub fn list(dir: File) -> io::Result<Vec<(String, &'static str, u64)>> {
    use std::os::fd::AsFd;
    let path = PathBuf::from(format!("/proc/self/fd/{}", dir.as_fd().as_raw_fd()));
    let mut out = Vec::new();
    for e in std::fs::read_dir(&path)? {
        let e = e?;
        let t = e.file_type()?;
        let kind = if t.is_symlink() {
            "symlink"
        } else if t.is_dir() {
            "dir"
        } else if t.is_file() {
            "file"
        } else {
            "other"
        };
        let size = if t.is_file() { e.metadata().map(|m| m.len()).unwrap_or(0) } else { 0 };
        out.push((e.file_name().to_string_lossy().into_owned(), kind, size));
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_stay_beneath() {
        let ws = Path::new("/w/s");
        assert_eq!(relative(ws, "a/./b/../c").unwrap(), PathBuf::from("a/c"));
        assert_eq!(relative(ws, "/w/s/a").unwrap(), PathBuf::from("a"));
        assert!(relative(ws, "../x").is_err());
        assert!(relative(ws, "a/../../x").is_err());
        assert!(relative(ws, "/etc/passwd").is_err());
        assert!(relative(ws, "/w/sx/a").is_err());
        assert!(relative(ws, "").is_err());
        assert!(relative(ws, "a\0b").is_err());
    }
}
