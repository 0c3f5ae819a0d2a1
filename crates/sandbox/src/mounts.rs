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
}

fn step(what: impl Into<String>, r: std::io::Result<()>) -> Result<(), String> {
    r.map_err(|e| format!("{}: {e}", what.into()))
}

/// `root` joined with an absolute `p`.
fn under(root: &Path, p: &Path) -> PathBuf {
    root.join(p.strip_prefix("/").unwrap_or(p))
}

const MS_BIND: libc::c_ulong = libc::MS_BIND;
const MS_REC: libc::c_ulong = libc::MS_REC;

/// Steps 1–3: the part of the tree that is the same for every policy. Runs in the sandbox's
/// init, with capabilities in its user namespace, in a fresh mount namespace.
pub(crate) fn build_base(run_dir: &Path) -> Result<(), String> {
    let root = run_dir.join("root");
    make_private()?;
    bind_host_read_only(&root)?;
    mount_proc(&root)?;
    mount_dev(&root)
}

/// Steps 4–8, on top of [`build_base`]: the policy's binds, then pivot into the tree.
pub(crate) fn build(spec: &Spec) -> Result<(), String> {
    let root = spec.run_dir.join("root");
    let special = covers_proc_or_dev(spec);
    if special {
        detach_proc_and_dev(&root)?;
    }
    let mut writable = spec.writable.clone();
    writable.sort_by_key(|p| p.components().count());
    for w in &writable {
        bind_writable(&root, w)?;
    }
    let mut pins = spec.pins.clone();
    pins.sort_by_key(|p| p.components().count());
    for p in &pins {
        pin(&root, p)?;
    }
    for d in &spec.write_deny {
        bind_read_only(&root, d)?;
    }
    for (r, is_dir) in &spec.read_deny {
        hide(&root, r, *is_dir, &spec.run_dir.join("empty"))?;
    }
    if spec.private_tmp {
        private_tmp(&root, &spec.run_dir.join("tmp"))?;
    }
    if special {
        mount_proc(&root)?;
        mount_dev(&root)?;
    }
    pivot(&root)?;
    step(format!("chdir {}", spec.cwd.display()), std::env::set_current_dir(&spec.cwd))
}

/// Whether a bind of steps 4–6 lands on, above or inside `/proc` or `/dev`.
pub(crate) fn covers_proc_or_dev(spec: &Spec) -> bool {
    let tmp = spec.private_tmp.then(|| spec.run_dir.join("tmp"));
    let paths = spec.writable.iter().chain(&spec.pins).chain(&spec.write_deny).chain(spec.read_deny.iter().map(|(p, _)| p)).chain(&tmp);
    let special = [Path::new("/proc"), Path::new("/dev")];
    paths.into_iter().any(|p| special.iter().any(|s| p.starts_with(s) || s.starts_with(p)))
}

/// Step 1: nothing we mount may propagate to the host's mount namespace.
fn make_private() -> Result<(), String> {
    step("make mounts private", sys::mount(None, Path::new("/"), None, libc::MS_REC | libc::MS_PRIVATE, None))
}

/// Step 2: the host's tree at `root`, read-only everywhere.
fn bind_host_read_only(root: &Path) -> Result<(), String> {
    step(format!("bind / at {}", root.display()), sys::mount(Some(Path::new("/")), root, None, MS_BIND | MS_REC, None))?;
    step(
        "make the root read-only",
        sys::mount_setattr_recursive(root, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, 0),
    )
}

/// Step 4: a writable root, bound from the host (whose mount is writable) over the
/// read-only copy.
fn bind_writable(root: &Path, w: &Path) -> Result<(), String> {
    let target = under(root, w);
    step(format!("bind writable root {}", w.display()), sys::mount(Some(w), &target, None, MS_BIND | MS_REC, None))?;
    // Writable, but still no setuid binaries or devices. (Read-only flags the host set on
    // mounts below the root stay: they are locked in a user namespace, and rightly so.)
    step(
        format!("set nosuid,nodev on {}", w.display()),
        sys::mount_setattr_recursive(&target, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, 0),
    )
}

/// Step 5a: a directory holding protected paths, bound over itself: still writable, but a
/// mount point cannot be renamed or removed, so `mv .git .g` and `rm -rf .git` stop at it.
fn pin(root: &Path, p: &Path) -> Result<(), String> {
    let target = under(root, p);
    step(format!("pin {}", p.display()), sys::mount(Some(&target), &target, None, MS_BIND | MS_REC, None))
}

/// Step 5b: a deny path read-only again, on top of the writable root that contains it.
fn bind_read_only(root: &Path, d: &Path) -> Result<(), String> {
    let target = under(root, d);
    step(format!("bind {} over itself", d.display()), sys::mount(Some(&target), &target, None, MS_BIND | MS_REC, None))?;
    step(
        format!("make {} read-only", d.display()),
        sys::mount_setattr_recursive(&target, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, 0),
    )
}

/// Step 6: an unreadable path replaced by an empty one.
fn hide(root: &Path, r: &Path, is_dir: bool, empty_file: &Path) -> Result<(), String> {
    let target = under(root, r);
    // Gone since the parent looked (a socket removed by its server, say): there is nothing
    // left to read. Write-deny paths get no such leniency.
    if std::fs::symlink_metadata(&target).is_err() {
        return Ok(());
    }
    if is_dir {
        step(
            format!("hide directory {}", r.display()),
            sys::mount(Some(Path::new("tmpfs")), &target, Some("tmpfs"), libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC, Some("size=4k,mode=0500")),
        )
    } else {
        step(format!("hide file {}", r.display()), sys::mount(Some(empty_file), &target, None, MS_BIND, None))?;
        step(
            format!("make the stand-in for {} read-only", r.display()),
            sys::mount_setattr_recursive(&target, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, 0),
        )
    }
}

/// Step 6b: the private temp dir, a fresh tmpfs nobody else sees, gone when the run ends.
fn private_tmp(root: &Path, tmp: &Path) -> Result<(), String> {
    step(
        format!("mount the private temp dir at {}", tmp.display()),
        sys::mount(Some(Path::new("tmpfs")), &under(root, tmp), Some("tmpfs"), libc::MS_NOSUID | libc::MS_NODEV, Some("mode=0700")),
    )
}

/// Step 7: a bind of steps 4–6 would cover, or land inside, the `/proc` or `/dev` of step 3
/// (a writable `/`, a hidden `/dev/sda`): take both away first (with their submounts), so the
/// binds land where they would in a tree built with `/proc` and `/dev` last; they are mounted
/// again after the binds.
fn detach_proc_and_dev(root: &Path) -> Result<(), String> {
    step("detach the early /proc", sys::umount2(&root.join("proc"), libc::MNT_DETACH))?;
    step("detach the early /dev", sys::umount2(&root.join("dev"), libc::MNT_DETACH))
}

/// Step 3a: a `/proc` that shows only the sandbox's own processes.
fn mount_proc(root: &Path) -> Result<(), String> {
    step(
        "mount a new /proc",
        sys::mount(Some(Path::new("proc")), &root.join("proc"), Some("proc"), libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC, None),
    )
}

/// Device nodes a command may use, bound from the host.
const DEVICES: &[&str] = &["null", "zero", "full", "random", "urandom", "tty"];

/// Step 3b: a minimal `/dev`: the devices above, a private devpts and shm, the usual links.
fn mount_dev(root: &Path) -> Result<(), String> {
    let dev = root.join("dev");
    step("mount /dev", sys::mount(Some(Path::new("tmpfs")), &dev, Some("tmpfs"), libc::MS_NOSUID | libc::MS_NOEXEC, Some("size=64k,mode=0755")))?;
    for d in DEVICES {
        let host = Path::new("/dev").join(d);
        if !host.exists() {
            continue;
        }
        let target = dev.join(d);
        step(format!("create /dev/{d}"), std::fs::File::create(&target).map(drop))?;
        step(format!("bind /dev/{d}"), sys::mount(Some(&host), &target, None, MS_BIND, None))?;
    }
    for (dir, fstype, opts) in [("pts", "devpts", "newinstance,ptmxmode=0666,mode=0620"), ("shm", "tmpfs", "mode=1777,size=64m")] {
        let target = dev.join(dir);
        step(format!("mkdir /dev/{dir}"), std::fs::create_dir(&target))?;
        step(
            format!("mount /dev/{dir}"),
            sys::mount(Some(Path::new(fstype)), &target, Some(fstype), libc::MS_NOSUID | libc::MS_NOEXEC, Some(opts)),
        )?;
    }
    for (link, to) in [("ptmx", "pts/ptmx"), ("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2")] {
        step(format!("link /dev/{link}"), std::os::unix::fs::symlink(to, dev.join(link)))?;
    }
    // The tmpfs itself read-only: no new device files or links in /dev.
    step(
        "make /dev read-only",
        sys::mount(None, &dev, None, libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NOEXEC, None),
    )
}

/// Step 8: the new tree becomes `/`; the old root is detached, so nothing outside the tree
/// is reachable by path (`/proc/1/root` included: pid 1 is the sandbox's init).
fn pivot(root: &Path) -> Result<(), String> {
    step(format!("chdir {}", root.display()), std::env::set_current_dir(root))?;
    step("pivot_root", sys::pivot_root(Path::new("."), Path::new(".")))?;
    step("detach the old root", sys::umount2(Path::new("."), libc::MNT_DETACH))?;
    step("chdir /", std::env::set_current_dir("/"))
}
