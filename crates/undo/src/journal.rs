//! A run's journal: before each change the sandbox reports, what the path held, written
//! down (and its bytes kept) before the change may happen.
//!
//! Layout of one run's record, `STORE/runs/ID/`:
//! * `meta.json` — what ran, where, when, by which process; `kind` `exec` or `undo`;
//! * `journal` — one JSON line per change, in the order they happened ([`Entry`]);
//! * `kept/N` — the bytes of entry N's file: always a copy of its own (holes kept), never a
//!   hard link, which a later write through another name of the file would change;
//! * `end.json` — written when the run ends (absent: it was killed, or still runs);
//! * `undone` — the id of the undo that put this run's changes back.
//!
//! The record is made at the first change: a run that changes nothing writes nothing.

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use pinfold_sandbox::Change;
use serde::{Deserialize, Serialize};

use crate::keep::Keep;
use crate::tree::{At, Is, Tree};
use crate::{now_ns, Error, Kind, Meta};

/// What a path held before a change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "was", rename_all = "snake_case")]
pub enum Pre {
    /// Nothing: the change made it.
    Absent,
    /// A file, its bytes in `kept/N` (N = the entry's number), with its permission bits.
    File { mode: u32 },
    /// A symbolic link to `target`.
    Link { target: crate::Bytes },
    /// A directory with these permission bits (its contents are entries of their own).
    Dir { mode: u32 },
    /// A directory renamed to `to` (relative to the root), its contents with it.
    Moved { to: crate::Bytes },
    /// Swapped with `with` (`renameat2` `RENAME_EXCHANGE`).
    Swapped { with: crate::Bytes },
    /// Its permission bits, before a `chmod`.
    Mode { mode: u32 },
    /// A FIFO with these permission bits.
    Fifo { mode: u32 },
}

/// One change, as the journal holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// Its number in the run (names its kept bytes).
    pub n: u64,
    /// When it was written down (ns since the epoch): entries of several runs put back
    /// together are put back newest first.
    pub t: u128,
    /// The path, relative to the project root.
    pub path: crate::Bytes,
    #[serde(flatten)]
    pub pre: Pre,
}

/// A line of the store's `ignores` list: a run changed the `.gitignore` in `dir`; its bytes
/// before are the run's kept `n` (`had`), or there was none.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct IgnoreChange {
    pub(crate) run: String,
    pub(crate) n: u64,
    pub(crate) dir: crate::Bytes,
    pub(crate) had: bool,
}

/// The journal of one run: the sandbox's observer.
#[derive(Debug)]
pub struct Journal {
    root: PathBuf,
    tree: Tree,
    run_dir: PathBuf,
    meta: Meta,
    keep: Keep,
    /// Made at the first change.
    file: Option<File>,
    n: u64,
    /// Paths whose state before the run is written down: later changes to them add nothing
    /// (putting a path back means putting back its first state). Cleared when a directory is
    /// renamed, since paths beneath then name other files.
    seen: HashSet<PathBuf>,
    /// Paths whose mode alone is written down (a later change to their content still is).
    moded: HashSet<PathBuf>,
    /// Inodes with several names whose bytes this run kept: a write through another name
    /// of one needs no second copy.
    inodes: HashSet<(u64, u64)>,
    /// Bytes the kept copies take on disk.
    kept_bytes: u64,
    /// Held shared for the run: an undo waits for no run, it refuses while one holds it.
    _lock: Option<File>,
}

impl Journal {
    pub(crate) fn new(root: PathBuf, tree: Tree, run_dir: PathBuf, meta: Meta, keep: Keep, lock: Option<File>) -> Journal {
        Journal { root, tree, run_dir, meta, keep, file: None, n: 0, seen: HashSet::new(), moded: HashSet::new(), inodes: HashSet::new(), kept_bytes: 0, _lock: lock }
    }

    /// The record's id.
    pub fn id(&self) -> &str {
        &self.meta.id
    }

    /// Write down what `change` is about to replace, keeping the bytes it would lose. `Err`
    /// is the errno the change must fail with: nothing is changed that could not be kept
    /// (`ENOSPC` on a full disk).
    pub fn before(&mut self, change: &Change) -> Result<(), i32> {
        self.record(change).map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))
    }

    fn rel(&mut self, p: &Path) -> Option<PathBuf> {
        let rel = p.strip_prefix(&self.root).ok()?.to_path_buf();
        self.keep.keeps(&rel).then_some(rel)
    }

    /// A path of the project not kept by itself (in a directory git ignores) that is a file
    /// with other names: a write through it writes a file that may be kept under another name
    /// (found by an outside attack: `ln notes.txt target/x && echo > target/x` emptied
    /// `notes.txt`, and undo had nothing to put back).
    fn other_name(&mut self, p: &Path) -> Option<PathBuf> {
        let rel = p.strip_prefix(&self.root).ok()?.to_path_buf();
        if rel.as_os_str().is_empty() || rel.starts_with(".git") || rel.components().any(|c| !matches!(c, std::path::Component::Normal(_))) {
            return None;
        }
        let st = self.tree.at(&rel).ok()?.lstat().ok()??;
        (st.is == Is::File && st.nlink > 1).then_some(rel)
    }

    fn record(&mut self, change: &Change) -> std::io::Result<()> {
        for p in change.paths() {
            if let Ok(rel) = p.strip_prefix(&self.root) {
                self.keep.before_change(rel);
                // The directories above: a `.gitignore` among what a rename moves.
                for a in rel.ancestors().skip(1) {
                    self.keep.before_change(&a.join(".gitignore"));
                }
            }
        }
        match change {
            Change::Write { path, .. } => {
                let Some(rel) = self.rel(path).or_else(|| self.other_name(path)) else { return Ok(()) };
                let at = self.tree.at(&rel)?;
                let st = at.lstat()?;
                // A file with other names (`ln a b && echo x > b`): its bytes are every name's,
                // kept once per run whatever name is written, and put back in place.
                let shared = st.is_some_and(|st| st.is == Is::File && st.nlink > 1 && !self.inodes.contains(&(st.dev, st.ino)));
                if self.seen.contains(&rel) && !shared {
                    return Ok(());
                }
                if let Some(st) = st
                    && st.nlink > 1
                {
                    self.inodes.insert((st.dev, st.ino));
                }
                match st {
                    None => self.add(rel, Pre::Absent, None),
                    Some(st) if st.is == Is::File => self.add(rel, Pre::File { mode: st.mode }, Some((&at, false))),
                    // Opening a directory or a FIFO for writing changes nothing kept on disk.
                    _ => Ok(()),
                }
            }
            Change::Remove { path } => self.replaced(path),
            Change::Make { path } => {
                let Some(rel) = self.rel(path) else { return Ok(()) };
                if self.seen.contains(&rel) || self.keep.ignored_dir(&rel) || self.tree.lstat(&rel)?.is_some() {
                    return Ok(());
                }
                self.add(rel, Pre::Absent, None)
            }
            Change::Mode { path } => {
                let Some(rel) = self.rel(path) else { return Ok(()) };
                if self.seen.contains(&rel) || self.moded.contains(&rel) {
                    return Ok(());
                }
                match self.tree.lstat(&rel)? {
                    Some(st) => {
                        self.add(rel.clone(), Pre::Mode { mode: st.mode }, None)?;
                        // Only the mode: what the path holds is still written down at its
                        // first change (`chmod +x f && rm f`).
                        self.seen.remove(&rel);
                        self.moded.insert(rel);
                        Ok(())
                    }
                    None => Ok(()),
                }
            }
            Change::Rename { from, to, exchange: true } => {
                let (Some(a), Some(b)) = (self.rel(from), self.rel(to)) else {
                    // One side outside what is kept: each side as a replacement.
                    self.replaced(to)?;
                    return self.replaced(from);
                };
                let with = crate::Bytes::from_path(&b);
                self.add(a, Pre::Swapped { with }, None)?;
                self.seen.clear();
                Ok(())
            }
            Change::Rename { from, to, exchange: false } => {
                self.replaced(to)?;
                let Some(rel) = self.rel(from) else { return Ok(()) };
                let is_dir = self.tree.lstat(&rel)?.is_some_and(|st| st.is == Is::Dir);
                if !is_dir {
                    return self.replaced(from);
                }
                // A directory moves with everything in it. Into a place that is kept, the move
                // is written down and reversed; out of the project, into a directory git
                // ignores, or into `.git`, what moves is gone from what is kept: everything in
                // it is written down as removed (kept as copies), deepest first.
                if self.rel(to).is_none() {
                    return self.removed_tree(&rel);
                }
                let dest = to.strip_prefix(&self.root).map(Path::to_path_buf).unwrap_or_else(|_| to.clone());
                self.add(rel, Pre::Moved { to: crate::Bytes::from_path(&dest) }, None)?;
                self.seen.clear();
                Ok(())
            }
        }
    }

    /// Every entry of the directory `rel` (beneath the root, through no link), written down
    /// as removed: children before their directory, as `rm -r` removes them, so an undo makes
    /// the directories again before it puts their files back.
    fn removed_tree(&mut self, rel: &Path) -> std::io::Result<()> {
        // A tree too deep or too big to keep within a bounded time: the move is refused.
        const MAX_ENTRIES: usize = 200_000;
        let mut stack: Vec<(PathBuf, bool)> = vec![(rel.to_path_buf(), false)];
        let mut seen_entries = 0usize;
        while let Some((p, listed)) = stack.pop() {
            seen_entries += 1;
            if seen_entries > MAX_ENTRIES || p.as_os_str().len() >= libc::PATH_MAX as usize {
                return Err(std::io::Error::from_raw_os_error(libc::E2BIG));
            }
            let is_dir = self.tree.lstat(&p)?.is_some_and(|st| st.is == Is::Dir);
            if is_dir && !listed {
                stack.push((p.clone(), true));
                for name in self.tree.list(&p)? {
                    stack.push((p.join(name), false));
                }
            } else {
                self.replaced(&self.root.join(&p))?;
            }
        }
        Ok(())
    }

    /// `path`'s name is about to go (removed, or replaced by a rename): what it holds is
    /// kept as a copy.
    fn replaced(&mut self, path: &Path) -> std::io::Result<()> {
        let Some(rel) = self.rel(path) else { return Ok(()) };
        if self.seen.contains(&rel) {
            return Ok(());
        }
        let at = self.tree.at(&rel)?;
        let Some(st) = at.lstat()? else { return self.add(rel, Pre::Absent, None) };
        match st.is {
            Is::File => self.add(rel, Pre::File { mode: st.mode }, Some((&at, true))),
            Is::Link => {
                let target = at.read_link()?;
                self.add(rel, Pre::Link { target: crate::Bytes::from_path(&target) }, None)
            }
            Is::Dir if self.keep.ignored_dir(&rel) => Ok(()),
            Is::Dir => self.add(rel, Pre::Dir { mode: st.mode }, None),
            Is::Fifo => self.add(rel, Pre::Fifo { mode: st.mode }, None),
            Is::Other => Ok(()),
        }
    }

    fn add(&mut self, rel: PathBuf, pre: Pre, bytes: Option<(&At, bool)>) -> std::io::Result<()> {
        let n = self.n;
        self.open()?;
        if let Some((at, _)) = bytes {
            // Always a copy of its own, never a hard link: a link shares the inode with any
            // other name of the file, and a later write through that name (in this run or a
            // later one) would change the kept bytes.
            let kept = self.run_dir.join("kept").join(n.to_string());
            if let Err(e) = at.read().and_then(|mut f| copy_into(&mut f, &kept)) {
                let _ = std::fs::remove_file(&kept);
                return Err(e);
            }
            // What it takes on disk (a sparse file's holes take nothing).
            self.kept_bytes += std::fs::symlink_metadata(&kept).map(|m| m.blocks() * 512).unwrap_or(0);
        }
        let ignore = rel.file_name().is_some_and(|f| f == ".gitignore") && matches!(pre, Pre::File { .. } | Pre::Absent);
        let had = matches!(pre, Pre::File { .. });
        let entry = Entry { n, t: now_ns(), path: crate::Bytes::from_path(&rel), pre };
        let mut line = serde_json::to_vec(&entry).map_err(std::io::Error::other)?;
        line.push(b'\n');
        self.file.as_mut().expect("opened above").write_all(&line)?;
        if ignore && let Some(store) = self.run_dir.parent().and_then(Path::parent) {
            // For later runs' view of what is ignored (see keep.rs): an ignore file changed
            // by a run that can be undone does not decide what the next run keeps.
            let dir = rel.parent().map(Path::to_path_buf).unwrap_or_default();
            let change = IgnoreChange { run: self.meta.id.clone(), n, dir: crate::Bytes::from_path(&dir), had };
            let mut line = serde_json::to_vec(&change).map_err(std::io::Error::other)?;
            line.push(b'\n');
            OpenOptions::new().create(true).append(true).mode(0o600).open(store.join(crate::IGNORES))?.write_all(&line)?;
        }
        self.n += 1;
        self.seen.insert(rel);
        Ok(())
    }

    /// Make the record now, changes or not.
    pub(crate) fn touch(&mut self) -> std::io::Result<()> {
        self.open()
    }

    /// The record, made at the first change.
    fn open(&mut self) -> std::io::Result<()> {
        if self.file.is_some() {
            return Ok(());
        }
        std::fs::create_dir_all(self.run_dir.join("kept"))?;
        let meta = serde_json::to_vec_pretty(&self.meta).map_err(std::io::Error::other)?;
        std::fs::write(self.run_dir.join("meta.json"), meta)?;
        let f = OpenOptions::new().create_new(true).append(true).mode(0o600).open(self.run_dir.join("journal"))?;
        self.file = Some(f);
        Ok(())
    }

    /// The run has ended with `exit` (`None`: it did not start). Returns how many changes
    /// were written down.
    pub fn finish(mut self, exit: Option<i32>) -> Result<usize, Error> {
        if self.file.is_none() {
            return Ok(0);
        }
        // Not synced to disk: the record outlives a killed process (the page cache holds it),
        // and the bytes it keeps are not synced either; a power cut may lose the last ones.
        self.file = None;
        let end = serde_json::json!({"ended_ns": now_ns().to_string(), "exit": exit, "changes": self.n, "kept_bytes": self.kept_bytes});
        std::fs::write(self.run_dir.join("end.json"), end.to_string()).map_err(|e| Error::io(Kind::Store, &self.run_dir, e))?;
        Ok(self.n as usize)
    }
}

/// Copy what `from` holds into the new file `dst`: bytes (holes kept), permission bits and
/// modification time. Refused with `ENOSPC` when it would leave less than a reserve free on
/// the records' file system (5 % of it, at most 1 GiB): keeping a command's changes must not
/// fill the disk the user's other work needs.
pub(crate) fn copy_into(from: &mut File, dst: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let m = from.metadata()?;
    let needs = m.blocks() * 512;
    let (free, size) = crate::sys::space(dst.parent().unwrap_or(Path::new("/")))?;
    let reserve = (size / 20).min(1 << 30);
    if needs.saturating_add(reserve) > free {
        return Err(std::io::Error::from_raw_os_error(libc::ENOSPC));
    }
    let to = OpenOptions::new().write(true).create_new(true).mode(0o600).open(dst)?;
    crate::sys::copy_sparse(from, &to, m.len())?;
    to.set_permissions(std::fs::Permissions::from_mode(m.mode() & 0o7777))?;
    to.set_modified(m.modified()?)?;
    Ok(())
}
