//! The project's files, reached only beneath its root and never through a symbolic link.
//!
//! Between runs the project holds whatever a sandboxed command left there, links included.
//! pinfold's undo runs outside the sandbox, so a path it follows through a planted link
//! could read a file the sandbox hides (then put into the project by a later undo) or write
//! one outside the project. Every access here resolves the path's directories with
//! `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` from the root and acts on the last name
//! with the `*at` calls that do not follow it: a link on the way fails the step (`ELOOP`).

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use crate::sys;

/// What a name is, from `lstat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Is {
    File,
    Dir,
    Link,
    Fifo,
    Other,
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Stat {
    pub is: Is,
    pub mode: u32,
    pub dev: u64,
    pub ino: u64,
    pub nlink: u64,
}

fn stat_of(st: &libc::stat) -> Stat {
    let is = match st.st_mode & libc::S_IFMT {
        libc::S_IFREG => Is::File,
        libc::S_IFDIR => Is::Dir,
        libc::S_IFLNK => Is::Link,
        libc::S_IFIFO => Is::Fifo,
        _ => Is::Other,
    };
    Stat { is, mode: st.st_mode & 0o7777, dev: st.st_dev, ino: st.st_ino, nlink: st.st_nlink }
}

#[derive(Debug)]
pub(crate) struct Tree {
    root: OwnedFd,
}

/// A name in its directory.
pub(crate) struct At {
    dir: OwnedFd,
    name: CString,
}

impl Tree {
    pub(crate) fn open(root: &Path) -> io::Result<Tree> {
        Ok(Tree { root: sys::open_dir(root)? })
    }

    /// The directory holding `rel` (reached beneath the root, through no link) and its name.
    pub(crate) fn at(&self, rel: &Path) -> io::Result<At> {
        let name = rel.file_name().ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))?;
        let parent = rel.parent().unwrap_or(Path::new(""));
        let dir = if parent.as_os_str().is_empty() { self.root.try_clone()? } else { sys::open_dir_beneath(&self.root, parent)? };
        Ok(At { dir, name: sys::name(name)? })
    }

    /// The names in the directory `rel` (reached beneath the root, through no link).
    pub(crate) fn list(&self, rel: &Path) -> io::Result<Vec<std::ffi::OsString>> {
        let fd = if rel.as_os_str().is_empty() { self.root.try_clone()? } else { sys::open_dir_beneath(&self.root, rel)? };
        let mut out = Vec::new();
        for e in std::fs::read_dir(format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&fd)))? {
            out.push(e?.file_name());
        }
        Ok(out)
    }

    pub(crate) fn lstat(&self, rel: &Path) -> io::Result<Option<Stat>> {
        let a = self.at(rel)?;
        a.lstat()
    }
}

impl At {
    pub(crate) fn lstat(&self) -> io::Result<Option<Stat>> {
        Ok(sys::lstat_at(&self.dir, &self.name)?.as_ref().map(stat_of))
    }

    pub(crate) fn read(&self) -> io::Result<File> {
        sys::open_at(&self.dir, &self.name, libc::O_RDONLY, 0)
    }

    /// Open the file for writing, emptied (never through a link).
    pub(crate) fn rewrite(&self) -> io::Result<File> {
        sys::open_at(&self.dir, &self.name, libc::O_WRONLY | libc::O_TRUNC, 0)
    }

    pub(crate) fn create_new(&self, mode: u32) -> io::Result<File> {
        sys::open_at(&self.dir, &self.name, libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL, mode)
    }


    pub(crate) fn read_link(&self) -> io::Result<PathBuf> {
        sys::readlink_at(&self.dir, &self.name)
    }

    pub(crate) fn remove(&self, is_dir: bool) -> io::Result<()> {
        sys::unlink_at(&self.dir, &self.name, is_dir)
    }

    pub(crate) fn mkdir(&self, mode: u32) -> io::Result<()> {
        sys::mkdir_at(&self.dir, &self.name, mode)
    }

    pub(crate) fn mkfifo(&self, mode: u32) -> io::Result<()> {
        sys::mkfifo_at(&self.dir, &self.name, mode)
    }

    pub(crate) fn symlink(&self, target: &Path) -> io::Result<()> {
        sys::symlink_at(target, &self.dir, &self.name)
    }

    pub(crate) fn chmod(&self, mode: u32) -> io::Result<()> {
        sys::chmod_at(&self.dir, &self.name, mode)
    }

    /// Rename this name to `to`'s (`exchange`: swap them).
    pub(crate) fn rename(&self, to: &At, exchange: bool) -> io::Result<()> {
        sys::rename_at(&self.dir, &self.name, &to.dir, &to.name, if exchange { libc::RENAME_EXCHANGE } else { 0 })
    }

    /// Another name in the same directory.
    pub(crate) fn sibling(&self, name: &str) -> io::Result<At> {
        Ok(At { dir: self.dir.try_clone()?, name: sys::name(std::ffi::OsStr::new(name))? })
    }
}
