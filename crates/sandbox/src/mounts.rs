//! The mount layer: the file system the confined command sees.
//!
//! Built by the sandbox's init process in its own mount namespace, in this order (each step
//! one function, each failure naming the step and the path):
//!
//! 1. make every mount private, so nothing below propagates back to the host;
//! 2. bind the whole host tree at `<run>/root` and make all of it read-only, nosuid, nodev;
//! 3. mount a fresh `/proc` for the new pid namespace and a minimal `/dev`;
//! 4. bind each writable root over itself from the host, read-write (shallow roots first, so a
//!    deeper root is not covered by a shallower one);
//! 5. bind each directory holding a protected path over itself (still writable, but no longer
//!    renamable or removable), then each write-deny path over itself read-only (after the
//!    writable roots: deny wins);
//! 6. hide each read-deny path: an empty read-only tmpfs over a directory, an empty file over
//!    a file;
//! 7. when a path of steps 4–6 is `/`, `/proc` or `/dev` or lies under them, the `/proc` and
//!    `/dev` of step 3 are detached before step 4 and mounted again after step 6, so the tree is
//!    the one built with them last;
//! 8. pivot into the new root and detach the old one.
//!
//! Steps 1–3 ([`build_base`]) need nothing from the policy, so init builds them while the
//! parent is still judging the command (see [`crate::Prestart`]); steps 4–8 ([`build`])
//! follow once the spec is known.

use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::sys::{self, MOUNT_ATTR_NODEV, MOUNT_ATTR_NOSUID, MOUNT_ATTR_RDONLY};

/// Everything the helper needs, resolved by the parent (canonical paths that exist).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Spec {
    pub writable: Vec<PathBuf>,
    /// Directories bound over themselves, writable, so they cannot be renamed or removed.
    pub pins: Vec<PathBuf>,
    pub write_deny: Vec<PathBuf>,
    /// Paths to hide, with whether each is a directory.
    pub read_deny: Vec<(PathBuf, bool)>,
    /// A network namespace of its own (network off, or only through the proxy).
    pub network_off: bool,
    /// Through a proxy: the loopback port of the listener init makes for it.
    #[serde(default)]
    pub proxy_port: Option<u16>,
    /// The run base: `root/` (mount point of the new root), `tmp/` (mount point of the
    /// private TMPDIR) and `empty` (an empty file).
    pub run_dir: PathBuf,
    /// Mount a private tmpfs at `run_dir/tmp` and let the command write it.
    pub private_tmp: bool,
    pub cwd: PathBuf,
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
    pub landlock_abi: i64,
    pub allow_degraded: bool,
    pub uid: u32,
    pub gid: u32,
    /// The command waits, confined, for one byte on the report channel before its `execve`:
    /// the parent sends it once its caller has released the run (see
    /// [`crate::Policy::run_released`]), so the setup overlaps the caller's last work and
    /// nothing of the command runs before it. Without the byte (the channel closed), the
    /// command exits unrun.
    #[serde(default)]
    pub gate: bool,
    /// Which of the signals pinfold changes on the way (`child::reset_before_exec`) the caller
    /// left ignored: the command keeps those ignored and gets the default for the rest.
    #[serde(default)]
    pub ignored_signals: Vec<i32>,
    /// Install the watch filter and send its listener to the parent ([`crate::watch`]).
    #[serde(default)]
    pub watch: bool,
}

/// A step of building the tree that failed: which step, on which path, and the kernel's
/// answer (kept as the source). Sent to the parent as its message.
#[derive(Debug, thiserror::Error)]
pub(crate) enum MountError {
    #[error("make mounts private: {0}")]
    MakePrivate(#[source] io::Error),
    #[error("bind / at {}: {source}", root.display())]
    BindHost { root: PathBuf, source: io::Error },
    #[error("make the root read-only: {0}")]
    RootReadOnly(#[source] io::Error),
    #[error("mount a new /proc: {0}")]
    MountProc(#[source] io::Error),
    #[error("mount /dev: {0}")]
    MountDev(#[source] io::Error),
    #[error("create /dev/{name}: {source}")]
    CreateDevice { name: &'static str, source: io::Error },
    #[error("bind /dev/{name}: {source}")]
    BindDevice { name: &'static str, source: io::Error },
    #[error("mkdir /dev/{name}: {source}")]
    MakeDevDir { name: &'static str, source: io::Error },
    #[error("mount /dev/{name}: {source}")]
    MountDevFs { name: &'static str, source: io::Error },
    #[error("link /dev/{name}: {source}")]
    LinkDevice { name: &'static str, source: io::Error },
    #[error("make /dev read-only: {0}")]
    DevReadOnly(#[source] io::Error),
    #[error("detach the early /proc: {0}")]
    DetachProc(#[source] io::Error),
    #[error("detach the early /dev: {0}")]
    DetachDev(#[source] io::Error),
    #[error("bind writable root {}: {source}", path.display())]
    BindWritable { path: PathBuf, source: io::Error },
    #[error("set nosuid,nodev on {}: {source}", path.display())]
    WritableFlags { path: PathBuf, source: io::Error },
    #[error("pin {}: {source}", path.display())]
    Pin { path: PathBuf, source: io::Error },
    #[error("bind {} over itself: {source}", path.display())]
    BindDenied { path: PathBuf, source: io::Error },
    #[error("make {} read-only: {source}", path.display())]
    DeniedReadOnly { path: PathBuf, source: io::Error },
    #[error("hide directory {}: {source}", path.display())]
    HideDir { path: PathBuf, source: io::Error },
    #[error("hide file {}: {source}", path.display())]
    HideFile { path: PathBuf, source: io::Error },
    #[error("make the stand-in for {} read-only: {source}", path.display())]
    StandInReadOnly { path: PathBuf, source: io::Error },
    #[error("mount the private temp dir at {}: {source}", path.display())]
    PrivateTmp { path: PathBuf, source: io::Error },
    #[error("cover pinfold's run directory {}: {source}", path.display())]
    HideRunDir { path: PathBuf, source: io::Error },
    /// Into the new root before the pivot, or (last) into the working directory.
    #[error("chdir {}: {source}", path.display())]
    Chdir { path: PathBuf, source: io::Error },
    #[error("pivot_root: {0}")]
    PivotRoot(#[source] io::Error),
    #[error("detach the old root: {0}")]
    DetachOldRoot(#[source] io::Error),
}

/// `root` joined with an absolute `p`.
fn under(root: &Path, p: &Path) -> PathBuf {
    root.join(p.strip_prefix("/").unwrap_or(p))
}

const MS_BIND: libc::c_ulong = libc::MS_BIND;
const MS_REC: libc::c_ulong = libc::MS_REC;

/// Steps 1–3: the part of the tree that is the same for every policy. Runs in the sandbox's
/// init, with capabilities in its user namespace, in a fresh mount namespace.
pub(crate) fn build_base(run_dir: &Path) -> Result<(), MountError> {
    let root = run_dir.join("root");
    make_private()?;
    bind_host_read_only(&root)?;
    mount_proc(&root)?;
    mount_dev(&root)
}

/// Steps 4–8, on top of [`build_base`]: the policy's binds, then pivot into the tree.
pub(crate) fn build(spec: &Spec) -> Result<(), MountError> {
    let root = spec.run_dir.join("root");
    let special = covers_proc_or_dev(spec);
    if special {
        detach_proc_and_dev(&root)?;
    }
    let empty = spec.run_dir.join("empty");
    let paths = Paths { writable: &spec.writable, pins: &spec.pins, write_deny: &spec.write_deny, read_deny: &spec.read_deny, empty_file: &empty };
    bind_policy(&root, &paths, false)?;
    hide_run_dir(&root, &spec.run_dir, spec.private_tmp)?;
    if spec.private_tmp {
        private_tmp(&root, &spec.run_dir.join("tmp"))?;
    }
    if special {
        mount_proc(&root)?;
        mount_dev(&root)?;
    }
    pivot(&root)?;
    std::env::set_current_dir(&spec.cwd).map_err(|source| MountError::Chdir { path: spec.cwd.clone(), source })
}

/// The policy's paths, for [`bind_policy`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Paths<'a> {
    pub writable: &'a [PathBuf],
    pub pins: &'a [PathBuf],
    pub write_deny: &'a [PathBuf],
    pub read_deny: &'a [(PathBuf, bool)],
    /// An empty file, bound over each hidden file.
    pub empty_file: &'a Path,
}

/// Steps 4–6 on the host's tree bound at `root`: the writable roots (shallow first), the
/// pinned directories, the write-deny paths read-only, the read-deny paths covered. Every
/// source and target is opened with no link followed. `reopen`: the host's mounts were made
/// read-only by pinfold itself (the gvisor backend's helper does), so each writable root's
/// copy is made writable again (where the host's mount was not read-only already: those stay
/// so, and with them the whole root).
pub(crate) fn bind_policy(root: &Path, p: &Paths<'_>, reopen: bool) -> Result<(), MountError> {
    let mut writable = p.writable.to_vec();
    writable.sort_by_key(|p| p.components().count());
    for w in &writable {
        bind_writable(root, w, reopen)?;
    }
    let mut pins = p.pins.to_vec();
    pins.sort_by_key(|p| p.components().count());
    for d in &pins {
        pin(root, d)?;
    }
    for d in p.write_deny {
        bind_read_only(root, d)?;
    }
    for (r, is_dir) in p.read_deny {
        hide(root, r, *is_dir, p.empty_file)?;
    }
    Ok(())
}

/// Whether a bind of steps 4–6 lands on, above or inside `/proc` or `/dev`.
pub(crate) fn covers_proc_or_dev(spec: &Spec) -> bool {
    let tmp = spec.private_tmp.then(|| spec.run_dir.join("tmp"));
    let paths = spec.writable.iter().chain(&spec.pins).chain(&spec.write_deny).chain(spec.read_deny.iter().map(|(p, _)| p)).chain(&tmp);
    let special = [Path::new("/proc"), Path::new("/dev")];
    paths.into_iter().any(|p| special.iter().any(|s| p.starts_with(s) || s.starts_with(p)))
}

/// Step 1: nothing we mount may propagate to the host's mount namespace.
fn make_private() -> Result<(), MountError> {
    sys::mount(None, Path::new("/"), None, libc::MS_REC | libc::MS_PRIVATE, None).map_err(MountError::MakePrivate)
}

/// Step 2: the host's tree at `root`, read-only everywhere.
pub(crate) fn bind_host_read_only(root: &Path) -> Result<(), MountError> {
    sys::mount(Some(Path::new("/")), root, None, MS_BIND | MS_REC, None)
        .map_err(|source| MountError::BindHost { root: root.to_path_buf(), source })?;
    sys::mount_setattr_recursive(root, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, 0).map_err(MountError::RootReadOnly)
}

/// Step 4: a writable root, bound from the host (whose mount is writable) over the
/// read-only copy: writable, but still no setuid binaries or devices. (Read-only flags the
/// host set on mounts below the root stay: they are locked in a user namespace, and rightly
/// so.) Both ends are opened with no link followed: the root swapped for a link to the home
/// directory by a command beside this run, as it is bound, would have had the home directory
/// bound writable where the path leads.
fn bind_writable(root: &Path, w: &Path, reopen: bool) -> Result<(), MountError> {
    let err = |source| MountError::BindWritable { path: w.to_path_buf(), source };
    let src = sys::open_path_no_symlinks(w).map_err(|e| err(swapped(e, w)))?;
    let t = target(root, w).map_err(err)?;
    let set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
    let flags = |source| MountError::WritableFlags { path: w.to_path_buf(), source };
    if reopen {
        match sys::bind_tree_with(&src, &t, set, MOUNT_ATTR_RDONLY) {
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => {}
            other => return other.map_err(flags),
        }
    }
    sys::bind_tree(&src, &t, set).map_err(flags)
}

/// An error of opening `p` with no link followed, worded for a link found on the way.
fn swapped(e: std::io::Error, p: &Path) -> std::io::Error {
    if e.raw_os_error() == Some(libc::ELOOP) {
        std::io::Error::other(format!("{} passes through a link now, which it did not when the run was planned (did a command beside this one swap a directory for a link?)", p.display()))
    } else {
        e
    }
}

/// What `p` is beneath `root`, opened with no link followed: policy paths are resolved
/// (canonical) before the run, so a link on the way now is one a command beside this run
/// swapped in, and following it would put the mount elsewhere while the path names an
/// unprotected directory again a moment later.
fn target(root: &Path, p: &Path) -> std::io::Result<std::os::fd::OwnedFd> {
    let dir = std::fs::File::open(root)?;
    let rel = p.strip_prefix("/").unwrap_or(p);
    sys::open_beneath_no_symlinks(&dir, rel).map_err(|e| swapped(e, p))
}

/// Step 5a: a directory holding protected paths, bound over itself: still writable, but a
/// mount point cannot be renamed or removed, so `mv .git .g` and `rm -rf .git` stop at it.
fn pin(root: &Path, p: &Path) -> Result<(), MountError> {
    let t = target(root, p).map_err(|source| MountError::Pin { path: p.to_path_buf(), source })?;
    sys::bind_tree(&t, &t, 0).map_err(|source| MountError::Pin { path: p.to_path_buf(), source })
}

/// Step 5b: a deny path read-only again, on top of the writable root that contains it.
fn bind_read_only(root: &Path, d: &Path) -> Result<(), MountError> {
    let t = target(root, d).map_err(|source| MountError::BindDenied { path: d.to_path_buf(), source })?;
    sys::bind_tree(&t, &t, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV).map_err(|source| MountError::DeniedReadOnly { path: d.to_path_buf(), source })
}

/// Step 6: an unreadable path replaced by an empty one.
fn hide(root: &Path, r: &Path, is_dir: bool, empty_file: &Path) -> Result<(), MountError> {
    // Gone since the parent looked (a socket removed by its server, say): there is nothing
    // left to read. Write-deny paths get no such leniency.
    let t = match target(root, r) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(source) => return Err(if is_dir { MountError::HideDir { path: r.to_path_buf(), source } } else { MountError::HideFile { path: r.to_path_buf(), source } }),
    };
    let at = PathBuf::from(format!("/proc/self/fd/{}", t.as_raw_fd()));
    if is_dir {
        sys::mount(Some(Path::new("tmpfs")), &at, Some("tmpfs"), libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC, Some("size=4k,mode=0500"))
            .map_err(|source| MountError::HideDir { path: r.to_path_buf(), source })
    } else {
        let empty = std::fs::File::open(empty_file).map_err(|source| MountError::HideFile { path: r.to_path_buf(), source })?;
        sys::bind_tree(&empty, &t, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV).map_err(|source| MountError::StandInReadOnly { path: r.to_path_buf(), source })
    }
}

/// Step 6a: pinfold's run directory covered by an empty read-only tmpfs (with only the
/// mount point of the private temp dir in it): other runs' gVisor bundles (a kept secret in
/// their `config.json`), the container backend's staged bind sources (the project, hidden
/// files and all) and kept-container records are nothing for the command to read (found by
/// an outside attack: a run beside a container run read a hidden `.env` through the
/// staging point).
fn hide_run_dir(root: &Path, run_dir: &Path, tmp: bool) -> Result<(), MountError> {
    let err = |source| MountError::HideRunDir { path: run_dir.to_path_buf(), source };
    let at = under(root, run_dir);
    sys::mount(Some(Path::new("tmpfs")), &at, Some("tmpfs"), libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC, Some("size=16k,mode=0755")).map_err(err)?;
    if tmp {
        std::fs::create_dir(at.join("tmp")).map_err(err)?;
    }
    sys::mount(None, &at, None, libc::MS_REMOUNT | libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC, Some("size=16k,mode=0755")).map_err(err)
}

/// Step 6b: the private temp dir, a fresh tmpfs nobody else sees, gone when the run ends.
fn private_tmp(root: &Path, tmp: &Path) -> Result<(), MountError> {
    sys::mount(Some(Path::new("tmpfs")), &under(root, tmp), Some("tmpfs"), libc::MS_NOSUID | libc::MS_NODEV, Some("mode=0700"))
        .map_err(|source| MountError::PrivateTmp { path: tmp.to_path_buf(), source })
}

/// Step 7: a bind of steps 4–6 would cover, or land inside, the `/proc` or `/dev` of step 3
/// (a writable `/`, a hidden `/dev/sda`): take both away first (with their submounts), so the
/// binds land where they would in a tree built with `/proc` and `/dev` last; they are mounted
/// again after the binds.
fn detach_proc_and_dev(root: &Path) -> Result<(), MountError> {
    sys::umount2(&root.join("proc"), libc::MNT_DETACH).map_err(MountError::DetachProc)?;
    sys::umount2(&root.join("dev"), libc::MNT_DETACH).map_err(MountError::DetachDev)
}

/// Step 3a: a `/proc` that shows only the sandbox's own processes.
fn mount_proc(root: &Path) -> Result<(), MountError> {
    sys::mount(Some(Path::new("proc")), &root.join("proc"), Some("proc"), libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC, None)
        .map_err(MountError::MountProc)
}

/// Device nodes a command may use, bound from the host.
const DEVICES: &[&str] = &["null", "zero", "full", "random", "urandom", "tty"];

/// Step 3b: a minimal `/dev`: the devices above, a private devpts and shm, the usual links.
fn mount_dev(root: &Path) -> Result<(), MountError> {
    let dev = root.join("dev");
    sys::mount(Some(Path::new("tmpfs")), &dev, Some("tmpfs"), libc::MS_NOSUID | libc::MS_NOEXEC, Some("size=64k,mode=0755")).map_err(MountError::MountDev)?;
    for d in DEVICES {
        let host = Path::new("/dev").join(d);
        if !host.exists() {
            continue;
        }
        let target = dev.join(d);
        std::fs::File::create(&target).map_err(|source| MountError::CreateDevice { name: *d, source })?;
        sys::mount(Some(&host), &target, None, MS_BIND, None).map_err(|source| MountError::BindDevice { name: *d, source })?;
    }
    for (dir, fstype, opts) in [("pts", "devpts", "newinstance,ptmxmode=0666,mode=0620"), ("shm", "tmpfs", "mode=1777,size=64m")] {
        let target = dev.join(dir);
        std::fs::create_dir(&target).map_err(|source| MountError::MakeDevDir { name: dir, source })?;
        sys::mount(Some(Path::new(fstype)), &target, Some(fstype), libc::MS_NOSUID | libc::MS_NOEXEC, Some(opts))
            .map_err(|source| MountError::MountDevFs { name: dir, source })?;
    }
    for (link, to) in [("ptmx", "pts/ptmx"), ("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2")] {
        std::os::unix::fs::symlink(to, dev.join(link)).map_err(|source| MountError::LinkDevice { name: link, source })?;
    }
    // The tmpfs itself read-only: no new device files or links in /dev.
    sys::mount(None, &dev, None, libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NOEXEC, None)
        .map_err(MountError::DevReadOnly)
}

/// Step 8: the new tree becomes `/`; the old root is detached, so nothing outside the tree
/// is reachable by path (`/proc/1/root` included: pid 1 is the sandbox's init).
fn pivot(root: &Path) -> Result<(), MountError> {
    std::env::set_current_dir(root).map_err(|source| MountError::Chdir { path: root.to_path_buf(), source })?;
    sys::pivot_root(Path::new("."), Path::new(".")).map_err(MountError::PivotRoot)?;
    sys::umount2(Path::new("."), libc::MNT_DETACH).map_err(MountError::DetachOldRoot)?;
    std::env::set_current_dir("/").map_err(|source| MountError::Chdir { path: PathBuf::from("/"), source })
}

/// A mount table (`/proc/PID/mountinfo`): each mount point, as seen from the process's root,
/// and whether the topmost mount there is read-only.
pub(crate) fn table(mountinfo: &str) -> std::collections::HashMap<String, bool> {
    let mut at = std::collections::HashMap::new();
    for l in mountinfo.lines() {
        let f: Vec<&str> = l.split(' ').collect();
        if f.len() > 5 {
            at.insert(unescape(f[4]), f[5].split(',').any(|o| o == "ro"));
        }
    }
    at
}

/// A mount point as /proc writes it (`\040` for a space, and so on).
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c)) {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod table_tests {
    use super::*;

    #[test]
    fn mount_points_are_unescaped() {
        assert_eq!(unescape("/a\\040b"), "/a b");
        assert_eq!(unescape("/a\\134b"), "/a\\b");
        assert_eq!(unescape("/plain"), "/plain");
        assert_eq!(unescape("/end\\04"), "/end\\04");
    }

    #[test]
    fn the_topmost_mount_of_a_point_counts() {
        let t = table("1 0 8:1 / / ro,relatime - ext4 /dev/vda ro\n2 1 8:1 /p /w\\040x rw - ext4 /dev/vda rw\n3 2 8:1 /p /w\\040x ro - ext4 /dev/vda rw\n");
        assert_eq!(t.get("/"), Some(&true));
        assert_eq!(t.get("/w x"), Some(&true));
        assert_eq!(t.len(), 2);
    }
}
