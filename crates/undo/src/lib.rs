//! Undo for what sandboxed commands did to a project.
//!
//! Before each change a sandboxed command makes beneath the project (the sandbox reports it
//! and holds the command's call until it is answered: `pinfold_sandbox::Change`), the run's
//! [`Journal`] writes down what the path held and keeps its bytes. [`Store::undo`] puts the
//! paths of the most recent runs back as they were; what it replaces is kept the same way, in
//! a record of its own, so an undo can be undone ([`Store::redo`]). The cost follows what a
//! command changes: a command that changes nothing costs no work per file of the project.
//!
//! The store lives in pinfold's state directory (`STATE/undo/KEY`, KEY a hash of the working
//! tree's path), which no sandboxed command can read or write, whatever the repository's
//! layout (a linked worktree or a submodule sees other git directories; a `.git` file can name
//! any). What a change replaces is kept as a copy of its own (sparse files
//! stay sparse). A project that is not in a git working tree has
//! no undo ([`Store::locate`] says why). The design and its limits: `docs/design/undo.md`.

use std::fs::{File, OpenOptions};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub mod index;
mod journal;
mod keep;
mod restore;
mod tree;
#[allow(unsafe_code)]
mod sys;

pub use journal::{Entry, Journal, Pre};
pub use restore::{Outcome, Restored};

/// The stores' directory inside pinfold's state directory.
pub const STORE_NAME: &str = "undo";

/// Records kept: older ones are removed when a new one is made.
pub const KEEP_RUNS: usize = 100;

/// The bytes the records may keep, together: beyond it the oldest records go (the newest
/// stays whatever its size).
pub const KEEP_BYTES: u64 = 4 << 30;

/// A path as bytes (paths need not be UTF-8): a string when it is UTF-8, else its bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Bytes {
    Text(String),
    Raw(Vec<u8>),
}

impl Bytes {
    pub fn from_path(p: &Path) -> Bytes {
        match p.to_str() {
            Some(s) => Bytes::Text(s.to_string()),
            None => Bytes::Raw(p.as_os_str().as_bytes().to_vec()),
        }
    }

    pub fn to_path(&self) -> PathBuf {
        match self {
            Bytes::Text(s) => PathBuf::from(s),
            Bytes::Raw(b) => PathBuf::from(std::ffi::OsStr::from_bytes(b)),
        }
    }
}

/// What a record is of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecordKind {
    /// A sandboxed command.
    Exec,
    /// `pinfold undo` (or its redo): what it replaced.
    Undo,
}

/// A record's `meta.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Meta {
    pub id: String,
    pub kind: RecordKind,
    /// The command as run (for an undo: what it undid).
    pub command: String,
    pub cwd: String,
    /// When it started, ns since the epoch (a string: JSON numbers lose precision).
    pub started_ns: String,
    pub pid: u32,
    /// For an undo: the records it put back.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub undoes: Vec<String>,
}

/// Why the store could not do what was asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// No undo here (not a git repository).
    Unavailable,
    /// A sandboxed command is running in the project.
    Busy,
    /// Nothing to undo (or redo).
    Nothing,
    /// The store could not be read or written.
    Store,
}

/// An error, with what to do about it.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct Error {
    pub kind: Kind,
    pub message: String,
    pub hint: Option<String>,
}

impl Error {
    fn new(kind: Kind, message: impl Into<String>, hint: Option<&str>) -> Error {
        Error { kind, message: message.into(), hint: hint.map(str::to_string) }
    }

    fn io(kind: Kind, path: &Path, e: std::io::Error) -> Error {
        let hint = match e.raw_os_error() {
            Some(libc::ENOSPC) => Some("free some space on the project's file system"),
            _ => None,
        };
        Error::new(kind, format!("{}: {e}", path.display()), hint)
    }
}

pub(crate) fn now_ns() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0)
}

/// The undo store of one project.
#[derive(Debug, Clone)]
pub struct Store {
    /// The project's root (the working tree).
    pub root: PathBuf,
    /// The working tree's own git directory (its ignore rules and index).
    pub git_dir: PathBuf,
    /// `STATE/undo/KEY`.
    pub dir: PathBuf,
}

/// The store's list of ignore files runs changed (see [`Store::earlier_ignores`]).
pub(crate) const IGNORES: &str = "ignores";

impl Store {
    /// The store of the git working tree holding `dir` (canonical): the nearest directory at
    /// or above it with a `.git` — a directory, or a file naming one (a linked worktree, a
    /// submodule). `Err` says why there is none.
    pub fn locate(dir: &Path, state: Option<&Path>) -> Result<Store, Error> {
        let Some(state) = state else {
            return Err(Error::new(Kind::Unavailable, "no state directory for undo records", Some("set PINFOLD_STATE_DIR, XDG_STATE_HOME or HOME")));
        };
        let Some(root) = dir.ancestors().find(|d| std::fs::symlink_metadata(d.join(".git")).is_ok()) else {
            return Err(Error::new(
                Kind::Unavailable,
                format!("{} is not in a git repository: pinfold keeps undo records in the git directory", dir.display()),
                Some("run `git init` in the project to have undo"),
            ));
        };
        let dotgit = root.join(".git");
        let git_dir = match std::fs::symlink_metadata(&dotgit) {
            Ok(m) if m.is_dir() => dotgit,
            _ => {
                let text = std::fs::read_to_string(&dotgit).unwrap_or_default();
                let Some(target) = text.lines().next().and_then(|l| l.strip_prefix("gitdir:")) else {
                    return Err(Error::new(Kind::Unavailable, format!("{} names no git directory", dotgit.display()), None));
                };
                let p = PathBuf::from(target.trim());
                if p.is_absolute() { p } else { root.join(p) }
            }
        };
        let root = root.to_path_buf();
        let key: String = {
            use sha2::Digest;
            let h = sha2::Sha256::digest(root.as_os_str().as_bytes());
            h[..16].iter().map(|b| format!("{b:02x}")).collect()
        };
        let dir = state.join(STORE_NAME).join(key);
        Ok(Store { root, git_dir, dir })
    }

    fn runs(&self) -> PathBuf {
        self.dir.join("runs")
    }

    /// Make the store (if it is not there yet), closed to other users, with the working
    /// tree's path in `root` for a person looking.
    pub fn prepare(&self) -> Result<(), Error> {
        use std::os::unix::fs::DirBuilderExt;
        if std::fs::symlink_metadata(&self.dir).is_ok_and(|m| m.is_dir()) {
            return Ok(());
        }
        std::fs::DirBuilder::new().mode(0o700).recursive(true).create(&self.dir).map_err(|e| Error::io(Kind::Store, &self.dir, e))?;
        let _ = std::fs::write(self.dir.join("root"), self.root.as_os_str().as_bytes());
        Ok(())
    }

    fn lock(&self, exclusive: bool) -> Result<File, Error> {
        self.prepare()?;
        let path = self.dir.join("lock");
        let f = OpenOptions::new().read(true).write(true).create(true).truncate(false).mode(0o600).open(&path).map_err(|e| Error::io(Kind::Store, &path, e))?;
        let op = if exclusive { libc::LOCK_EX | libc::LOCK_NB } else { libc::LOCK_SH };
        if let Err(e) = sys::flock(&f, op) {
            if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
                return Err(Error::new(Kind::Busy, "a sandboxed command is running in this project", Some("wait for it to end (or stop it), then undo")));
            }
            return Err(Error::io(Kind::Store, &path, e));
        }
        Ok(f)
    }

    /// The stores kept in `state` whose working tree overlaps one of `roots` (lies beneath
    /// it, or holds it): an undo of any of them would put back files a run writing `roots`
    /// could be writing (a repository nested in the project, `git init sub`, has a store of its
    /// own; so has the one around it). Read from each store's `root` file; stores whose tree
    /// is gone are left out.
    pub fn overlapping(state: &Path, roots: &[PathBuf]) -> Vec<Store> {
        let Ok(rd) = std::fs::read_dir(state.join(STORE_NAME)) else { return Vec::new() };
        let mut out = Vec::new();
        for e in rd.flatten() {
            let Ok(bytes) = std::fs::read(e.path().join("root")) else { continue };
            let root = PathBuf::from(std::ffi::OsStr::from_bytes(&bytes));
            if !roots.iter().any(|r| root.starts_with(r) || r.starts_with(&root)) {
                continue;
            }
            if let Ok(s) = Store::locate(&root, Some(state))
                && s.dir == e.path()
            {
                out.push(s);
            }
        }
        out
    }

    /// Hold the store busy, as a run's journal does, for a run that keeps no journal (a
    /// backend that records no changes): an undo refuses while the returned file is open.
    /// Waits for an undo under way to end.
    pub fn hold(&self) -> Result<File, Error> {
        self.lock(false)
    }

    /// The journal of a run about to start: `command` run in `cwd`. Holds the store's lock
    /// shared until it is finished (an undo refuses meanwhile). Nothing is written until the
    /// first change.
    pub fn begin(&self, command: &str, cwd: &Path) -> Result<Journal, Error> {
        let lock = self.lock(false)?;
        let meta = self.meta(RecordKind::Exec, command, cwd, Vec::new());
        let run_dir = self.runs().join(&meta.id);
        let tree = tree::Tree::open(&self.root).map_err(|e| Error::io(Kind::Store, &self.root, e))?;
        let keep = keep::Keep::git_since(&self.root, &self.git_dir, self.earlier_ignores());
        Ok(Journal::new(self.root.clone(), tree, run_dir, meta, keep, Some(lock)))
    }

    /// The `.gitignore` files the runs on record changed, each as it was before the first of
    /// them (its directory relative to the root, and its bytes then; `None`: there was none),
    /// from the store's `ignores` list (one small read; none when no run changed one). A run
    /// pruned since takes its entries with it.
    fn earlier_ignores(&self) -> Vec<(PathBuf, Option<Vec<u8>>)> {
        let Ok(text) = std::fs::read(self.dir.join(IGNORES)) else { return Vec::new() };
        let mut out: Vec<(PathBuf, Option<Vec<u8>>)> = Vec::new();
        for line in text.split(|b| *b == b'\n') {
            let Ok(i) = serde_json::from_slice::<journal::IgnoreChange>(line) else { continue };
            let dir = i.dir.to_path();
            let run = self.runs().join(&i.run);
            if out.iter().any(|(d, _)| *d == dir) || !run.is_dir() {
                continue;
            }
            let bytes = if i.had { std::fs::read(run.join("kept").join(i.n.to_string())).ok() } else { None };
            if i.had && bytes.is_none() {
                continue;
            }
            out.push((dir, bytes));
        }
        out
    }

    fn meta(&self, kind: RecordKind, command: &str, cwd: &Path, undoes: Vec<String>) -> Meta {
        let started = now_ns();
        let pid = std::process::id();
        // Sorts by time; the pid and a counter keep ids of one instant apart.
        static COUNT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let c = COUNT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Meta {
            id: format!("{started:020}-{pid}-{c}"),
            kind,
            command: command.to_string(),
            cwd: cwd.display().to_string(),
            started_ns: started.to_string(),
            pid,
            undoes,
        }
    }

    /// Remove the oldest records beyond [`KEEP_RUNS`], and then while the records together
    /// keep more than [`KEEP_BYTES`] (each record's size is in its `end.json`; the newest
    /// record always stays).
    pub fn prune(&self) -> Result<usize, Error> {
        let ids = self.ids()?;
        let mut keep = ids.len().min(KEEP_RUNS);
        let mut total: u64 = 0;
        for (i, id) in ids.iter().rev().enumerate().take(keep) {
            total = total.saturating_add(self.kept_bytes(id));
            if total > KEEP_BYTES && i > 0 {
                keep = i;
                break;
            }
        }
        let gone = ids.len() - keep;
        for id in &ids[..gone] {
            let _ = std::fs::remove_dir_all(self.runs().join(id));
        }
        if gone > 0
            && let Ok(text) = std::fs::read(self.dir.join(IGNORES))
        {
            // The ignore files' list keeps only the runs still on record.
            let kept: Vec<&[u8]> = text
                .split(|b| *b == b'\n')
                .filter(|l| serde_json::from_slice::<journal::IgnoreChange>(l).is_ok_and(|i| self.runs().join(&i.run).is_dir()))
                .collect();
            let mut out = kept.join(&b'\n');
            if !out.is_empty() {
                out.push(b'\n');
            }
            let _ = std::fs::write(self.dir.join(IGNORES), out);
        }
        Ok(gone)
    }

    fn kept_bytes(&self, id: &str) -> u64 {
        let end: Option<serde_json::Value> = std::fs::read(self.runs().join(id).join("end.json")).ok().and_then(|b| serde_json::from_slice(&b).ok());
        end.and_then(|e| e["kept_bytes"].as_u64()).unwrap_or(0)
    }

    /// Every record's id, oldest first.
    fn ids(&self) -> Result<Vec<String>, Error> {
        let mut ids = Vec::new();
        match std::fs::read_dir(self.runs()) {
            Ok(rd) => {
                for e in rd.flatten() {
                    if let Some(n) = e.file_name().to_str() {
                        ids.push(n.to_string());
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io(Kind::Store, &self.runs(), e)),
        }
        ids.sort();
        Ok(ids)
    }

    /// Every record, oldest first.
    pub fn list(&self) -> Result<Vec<Record>, Error> {
        let mut out = Vec::new();
        for id in self.ids()? {
            if let Some(r) = self.record(&id) {
                out.push(r);
            }
        }
        Ok(out)
    }

    fn record(&self, id: &str) -> Option<Record> {
        let dir = self.runs().join(id);
        let meta: Meta = serde_json::from_slice(&std::fs::read(dir.join("meta.json")).ok()?).ok()?;
        let text = std::fs::read(dir.join("journal")).unwrap_or_default();
        // A line cut short (the run killed while writing it) ends the journal.
        let entries: Vec<Entry> = text.split(|b| *b == b'\n').map_while(|l| serde_json::from_slice(l).ok()).collect();
        let end: Option<serde_json::Value> = std::fs::read(dir.join("end.json")).ok().and_then(|b| serde_json::from_slice(&b).ok());
        let undone = std::fs::read_to_string(dir.join("undone")).ok().map(|s| s.trim().to_string());
        Some(Record { meta, entries, ended: end.is_some(), exit: end.and_then(|e| e["exit"].as_i64()).map(|c| c as i32), undone, dir })
    }
}

/// One record, read back.
#[derive(Debug, Clone)]
pub struct Record {
    pub meta: Meta,
    pub entries: Vec<Entry>,
    /// The run's end was written (false: killed mid-way, or still running).
    pub ended: bool,
    pub exit: Option<i32>,
    /// The id of the undo that put it back.
    pub undone: Option<String>,
    pub dir: PathBuf,
}

impl Record {
    /// The paths it changed, each once, in order.
    pub fn paths(&self) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = Vec::new();
        for e in &self.entries {
            let p = e.path.to_path();
            if !out.contains(&p) {
                out.push(p);
            }
        }
        out
    }

    /// Started, in seconds since the epoch.
    pub fn started_s(&self) -> u64 {
        self.meta.started_ns.parse::<u128>().map(|n| (n / 1_000_000_000) as u64).unwrap_or(0)
    }
}
