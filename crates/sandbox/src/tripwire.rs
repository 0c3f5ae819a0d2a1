//! The tripwire: a run stops when the host changes a name the sandbox's covers depend on.
//!
//! A protected path is covered inside the sandbox by a mount on its directory entry (a
//! read-only bind for a write-deny path, an empty file or directory for a read-deny one). When
//! a process on the host renames another file over that entry, or removes it — an editor's
//! save, `git config`, `sed -i`, `mv` — the kernel detaches the mounts on it in every other
//! mount namespace: the sandbox would then see the new file as it is, writable or readable.
//! A read-deny path outside the writable roots that does not exist when the run starts has no
//! cover at all, and the host may create it while the command runs (`~/.aws/credentials`).
//!
//! So, before anything is mounted, the parent watches (inotify) each directory on the way to
//! every such path, and the run is stopped (killed, exit 125) as soon as a name on that way is
//! made, or another renamed over it. (A name removed or renamed away leaves nothing there to
//! read or write; what is made there next trips.) The stop comes within the parent's next wake-up; a command
//! racing the host's change can reach the new file in between, which the error says.

use std::collections::HashMap;
use std::ffi::OsString;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use crate::{sys, SandboxError};

/// The changes that trip the wire: a name in a watched directory made, removed or renamed.
const MASK: u32 = libc::IN_CREATE | libc::IN_DELETE | libc::IN_MOVED_FROM | libc::IN_MOVED_TO | libc::IN_ONLYDIR;

/// What tripped the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trip {
    /// The protected path (or a directory on its way) that changed.
    pub path: PathBuf,
    /// Made (created or renamed to) rather than removed or renamed away.
    pub created: bool,
}

/// An inotify instance watching the directories on the way to the guarded paths.
#[derive(Debug)]
pub(crate) struct Tripwire {
    /// (`None` only once dropped.)
    fd: Option<OwnedFd>,
    /// Watch descriptor → the directory it watches, by each name it was asked under (a
    /// directory reached through a link, `/var/run` and `/run`, is one watch).
    dirs: HashMap<i32, Vec<PathBuf>>,
    /// The guarded paths, by component; a component may be a glob (see [`crate::parent`]).
    guarded: Vec<Vec<OsString>>,
    /// Each guarded path that existed when the watch began, with its device and inode: looked
    /// at again when the command has ended, for a change whose event the kernel had not yet
    /// queued (a rename that the command raced and outran).
    found: Vec<(PathBuf, u64, u64)>,
}

fn components(p: &Path) -> Vec<OsString> {
    p.components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_os_string()),
            _ => None,
        })
        .collect()
}

fn is_glob(c: &OsString) -> bool {
    c.as_bytes().iter().any(|b| matches!(b, b'*' | b'?' | b'['))
}

impl Tripwire {
    /// Watch the way to each of `paths` (absolute; the last components may be globs, which
    /// match names as the policy's globs do). Directories at the top of the tree (`/`, and
    /// its entries: `/home`, `/tmp`) are not watched: renaming them under a running system is
    /// out of the question, and the churn of `/tmp` would wake the parent for nothing.
    pub(crate) fn new(paths: &[PathBuf]) -> Result<Tripwire, SandboxError> {
        let fd = sys::inotify_init().map_err(|e| refused(e, "fs.inotify.max_user_instances"))?;
        let mut wire = Tripwire { fd: Some(fd), dirs: HashMap::new(), guarded: Vec::new(), found: Vec::new() };
        let mut seen: Vec<PathBuf> = Vec::new();
        for p in paths {
            let comps = components(p);
            if comps.is_empty() || wire.guarded.contains(&comps) {
                continue;
            }
            // Each directory on the way, down to the first glob: a change of the next name
            // in it is a change of the way.
            let mut dir = PathBuf::from("/");
            for (depth, c) in comps.iter().enumerate() {
                if depth >= 2 && !seen.contains(&dir) {
                    seen.push(dir.clone());
                    wire.watch(&dir)?;
                }
                if is_glob(c) {
                    break;
                }
                dir.push(c);
            }
            wire.guarded.push(comps);
            if let Some(id) = identity(p) {
                wire.found.push((p.clone(), id.0, id.1));
            }
        }
        Ok(wire)
    }

    fn watch(&mut self, dir: &Path) -> Result<(), SandboxError> {
        match sys::inotify_add_watch(self.owned(), dir, MASK) {
            Ok(wd) => {
                self.dirs.entry(wd).or_default().push(dir.to_path_buf());
                Ok(())
            }
            // Not there (or not a directory): its making is a change in the directory above,
            // which is watched.
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR | libc::EACCES)) => Ok(()),
            Err(e) => Err(refused(e, "fs.inotify.max_user_watches")),
        }
    }

    fn owned(&self) -> &OwnedFd {
        self.fd.as_ref().expect("the tripwire's descriptor lives until it is dropped")
    }

    pub(crate) fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        std::os::fd::AsFd::as_fd(self.owned())
    }

    pub(crate) fn raw(&self) -> RawFd {
        self.owned().as_raw_fd()
    }

    /// Whether any directory is watched (with none, the wire can never trip).
    pub(crate) fn watching(&self) -> bool {
        !self.dirs.is_empty()
    }

    /// Read the pending changes (without blocking): the first that trips the wire.
    pub(crate) fn tripped(&self) -> Option<Trip> {
        let mut found = None;
        let mut buf = [0u8; 8192];
        loop {
            let n = match sys::read_fd(self.owned(), &mut buf) {
                Ok(n) if n > 0 => n,
                _ => return found,
            };
            let mut at = 0usize;
            while at + 16 <= n {
                let word = |i: usize| u32::from_ne_bytes([buf[at + i], buf[at + i + 1], buf[at + i + 2], buf[at + i + 3]]);
                let (wd, mask, len) = (word(0) as i32, word(4), word(12) as usize);
                let name = &buf[(at + 16).min(n)..(at + 16 + len).min(n)];
                let name = &name[..name.iter().position(|b| *b == 0).unwrap_or(name.len())];
                at += 16 + len;
                if found.is_some() {
                    continue;
                }
                if mask & libc::IN_Q_OVERFLOW != 0 {
                    // Changes were lost: any of them may have been one of ours.
                    found = Some(Trip { path: PathBuf::from("(more changes than the kernel queues)"), created: false });
                    continue;
                }
                let Some(names) = self.dirs.get(&wd) else { continue };
                if name.is_empty() {
                    continue;
                }
                let Some(changed) = names.iter().map(|d| d.join(std::ffi::OsStr::from_bytes(name))).find(|c| self.on_the_way(c)) else { continue };
                // A guarded path, or a directory on the way to one, made (or another renamed
                // over it): what is there now is not what the sandbox covers. One removed or
                // renamed away leaves nothing at the name (a cover renamed goes along with
                // it), so only what is made there next matters, and that trips.
                let created = mask & (libc::IN_CREATE | libc::IN_MOVED_TO) != 0;
                if created {
                    found = Some(Trip { path: changed, created });
                }
            }
        }
    }

    /// The pending changes, and then any guarded path that is no longer the file it was when
    /// the watch began: for the end of a run.
    pub(crate) fn tripped_at_end(&self) -> Option<Trip> {
        self.tripped().or_else(|| {
            self.found.iter().find_map(|(p, dev, ino)| match identity(p) {
                Some(id) if id != (*dev, *ino) => Some(Trip { path: p.clone(), created: true }),
                _ => None,
            })
        })
    }

    /// Whether `changed` is a guarded path or a directory on the way to one.
    fn on_the_way(&self, changed: &Path) -> bool {
        let got = components(changed);
        self.guarded.iter().any(|g| {
            got.len() <= g.len()
                && got.iter().zip(g).all(|(a, b)| {
                    if is_glob(b) {
                        crate::parent::glob_match(&b.to_string_lossy(), &a.to_string_lossy())
                    } else {
                        a == b
                    }
                })
        })
    }
}

impl Drop for Tripwire {
    /// Closed elsewhere: the last close of an inotify instance waits ~10 ms for the kernel.
    fn drop(&mut self) {
        if let Some(fd) = self.fd.take() {
            sys::close_detached(fd);
        }
    }
}

/// The device and inode of `p` itself (a link is not followed).
fn identity(p: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(p).ok().map(|m| (m.dev(), m.ino()))
}

fn refused(e: std::io::Error, limit: &str) -> SandboxError {
    SandboxError::Unsupported {
        layer: "the tripwire",
        why: format!("inotify: {e}; without it a protected path the host replaces while the command runs would lose its cover unnoticed"),
        hint: format!("raise the limit (sysctl {limit}) or end other programs that watch files"),
    }
}

/// The bytes of a path, for tests.
#[cfg(test)]
fn os(s: &str) -> OsString {
    use std::os::unix::ffi::OsStringExt;
    OsString::from_vec(s.as_bytes().to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wait_trip(w: &Tripwire) -> Option<Trip> {
        let _ = crate::sys::poll_read(&[w.raw()], 2000);
        w.tripped()
    }

    #[test]
    fn a_replaced_file_trips_and_a_neighbour_does_not() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path().join("p");
        std::fs::create_dir_all(d.join(".git")).unwrap();
        std::fs::write(d.join(".git/config"), "a").unwrap();
        let w = Tripwire::new(&[d.join(".git/config")]).unwrap();
        assert!(w.watching());
        std::fs::write(d.join(".git/other"), "x").unwrap();
        std::fs::write(d.join("README"), "x").unwrap();
        assert_eq!(w.tripped(), None, "a neighbour's change is not one of ours");
        std::fs::write(d.join(".git/config.lock"), "b").unwrap();
        std::fs::rename(d.join(".git/config.lock"), d.join(".git/config")).unwrap();
        assert_eq!(wait_trip(&w), Some(Trip { path: d.join(".git/config"), created: true }));
    }

    #[test]
    fn a_directory_made_on_the_way_trips_and_one_moved_away_does_not() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path().join("p");
        std::fs::create_dir_all(d.join("secrets")).unwrap();
        std::fs::write(d.join("secrets/k"), "a").unwrap();
        let w = Tripwire::new(&[d.join("secrets/k")]).unwrap();
        // Moved away: the cover of `k` goes along with it.
        std::fs::rename(d.join("secrets"), d.join("secrets.old")).unwrap();
        assert_eq!(wait_trip(&w), None);
        // A new directory in its place: what it holds is not covered.
        std::fs::create_dir(d.join("secrets")).unwrap();
        assert_eq!(wait_trip(&w), Some(Trip { path: d.join("secrets"), created: true }));
    }

    #[test]
    fn a_guarded_file_removed_does_not_trip_and_one_made_again_does() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path().join("p");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join(".env"), "a").unwrap();
        let w = Tripwire::new(&[d.join(".env")]).unwrap();
        std::fs::rename(d.join(".env"), d.join(".env.old")).unwrap();
        assert_eq!(wait_trip(&w), None);
        std::fs::write(d.join(".env"), "b").unwrap();
        assert_eq!(wait_trip(&w), Some(Trip { path: d.join(".env"), created: true }));
    }

    #[test]
    fn a_missing_path_made_trips_through_its_first_existing_directory() {
        let t = tempfile::tempdir().unwrap();
        let home = t.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        let w = Tripwire::new(&[home.join(".aws"), home.join(".ssh/id_*")]).unwrap();
        std::fs::create_dir(home.join(".cache")).unwrap();
        assert_eq!(w.tripped(), None);
        std::fs::create_dir(home.join(".ssh")).unwrap();
        assert_eq!(wait_trip(&w), Some(Trip { path: home.join(".ssh"), created: true }));
    }

    #[test]
    fn a_directory_watched_under_two_names_trips_for_either() {
        let t = tempfile::tempdir().unwrap();
        let real = t.path().join("real");
        std::fs::create_dir_all(&real).unwrap();
        std::os::unix::fs::symlink(&real, t.path().join("alias")).unwrap();
        let w = Tripwire::new(&[real.join("a.sock"), t.path().join("alias/b.sock")]).unwrap();
        std::fs::write(real.join("b.sock"), "").unwrap();
        assert_eq!(wait_trip(&w), Some(Trip { path: t.path().join("alias/b.sock"), created: true }));
        std::fs::write(real.join("a.sock"), "").unwrap();
        assert_eq!(wait_trip(&w), Some(Trip { path: real.join("a.sock"), created: true }));
    }

    #[test]
    fn a_file_replaced_shows_at_the_end_even_unread() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path().join("p");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join(".env"), "a").unwrap();
        let w = Tripwire::new(&[d.join(".env")]).unwrap();
        assert_eq!(w.tripped_at_end(), None);
        std::fs::write(d.join(".env.new"), "b").unwrap();
        std::fs::rename(d.join(".env.new"), d.join(".env")).unwrap();
        // The queued event, read first.
        assert!(w.tripped_at_end().is_some());
        // With the events read, the file's identity still tells.
        assert_eq!(w.tripped_at_end(), Some(Trip { path: d.join(".env"), created: true }));
    }

    #[test]
    fn a_glob_matches_names_in_its_directory() {
        let t = tempfile::tempdir().unwrap();
        let ssh = t.path().join("home/.ssh");
        std::fs::create_dir_all(&ssh).unwrap();
        let w = Tripwire::new(&[ssh.join("id_*")]).unwrap();
        std::fs::write(ssh.join("known_hosts"), "x").unwrap();
        assert_eq!(w.tripped(), None);
        std::fs::write(ssh.join("id_ed25519"), "k").unwrap();
        assert_eq!(wait_trip(&w), Some(Trip { path: ssh.join("id_ed25519"), created: true }));
        assert!(is_glob(&os("id_*")) && !is_glob(&os("id")));
    }
}
