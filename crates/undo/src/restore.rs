//! Putting paths back: [`Store::undo`] and [`Store::redo`].
//!
//! The entries of the runs undone are put back newest first (by the time each was written
//! down, so the changes of runs that overlapped unwind in the order they happened), each
//! path to the state its entry names. Every change an undo makes goes first through a
//! journal of its own that keeps all it replaces — so what a person changed since the run
//! is kept too, and the undo can itself be undone. Nothing is deleted that is not kept: a
//! directory the command made that holds something else now is left where it is, and said.

use std::path::{Path, PathBuf};

use pinfold_sandbox::Change;

use crate::journal::{Journal, Pre};
use crate::keep::Keep;
use crate::tree::{Is, Tree};
use crate::{Error, Kind, Record, RecordKind, Store};

/// One path put back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restored {
    /// Relative to the project root.
    pub path: PathBuf,
    /// What was done: `restored`, `removed`, `made`, `moved back`, `swapped back`, `mode`.
    pub action: &'static str,
}

/// What an undo (or redo) did.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Its own record (what it replaced): `pinfold undo --redo` undoes it.
    pub id: String,
    /// The records put back: id and command.
    pub undone: Vec<(String, String)>,
    pub restored: Vec<Restored>,
    /// Paths left as they are, and why.
    pub left: Vec<(PathBuf, String)>,
}

impl Store {
    /// Put back what the `n` most recent sandboxed commands that changed the project (and are
    /// not undone yet) changed. Refuses while a sandboxed command runs in the project.
    pub fn undo(&self, n: usize, cwd: &Path) -> Result<Outcome, Error> {
        let _lock = self.lock(true)?;
        let open: Vec<Record> = self.list()?.into_iter().filter(|r| r.meta.kind == RecordKind::Exec && r.undone.is_none() && !r.entries.is_empty()).collect();
        if open.is_empty() {
            return Err(Error::new(Kind::Nothing, "nothing to undo: no sandboxed command changed this project since its records began (or each is undone)", Some("`pinfold undo --list` shows the records")));
        }
        if open.len() < n {
            return Err(Error::new(Kind::Nothing, format!("only {} sandboxed command(s) can be undone here", open.len()), Some("`pinfold undo --list` shows them")));
        }
        let chosen: Vec<Record> = open[open.len() - n..].to_vec();
        let text = if n == 1 { "pinfold undo".to_string() } else { format!("pinfold undo {n}") };
        self.apply(&chosen, &text, cwd)
    }

    /// Undo the most recent undo that is not undone itself: what it replaced comes back, and
    /// the commands it undid can be undone again.
    pub fn redo(&self, cwd: &Path) -> Result<Outcome, Error> {
        let _lock = self.lock(true)?;
        let all = self.list()?;
        let Some(last) = all.iter().rev().find(|r| r.meta.kind == RecordKind::Undo && r.undone.is_none()).cloned() else {
            return Err(Error::new(Kind::Nothing, "no undo to take back", Some("`pinfold undo --list` shows the records")));
        };
        let out = self.apply(std::slice::from_ref(&last), "pinfold undo --redo", cwd)?;
        for r in all.iter().filter(|r| last.meta.undoes.contains(&r.meta.id) && r.undone.as_deref() == Some(last.meta.id.as_str())) {
            let _ = std::fs::remove_file(r.dir.join("undone"));
        }
        Ok(out)
    }

    fn apply(&self, chosen: &[Record], text: &str, cwd: &Path) -> Result<Outcome, Error> {
        let ids: Vec<String> = chosen.iter().map(|r| r.meta.id.clone()).collect();
        let meta = self.meta(RecordKind::Undo, text, cwd, ids);
        let run_dir = self.runs().join(&meta.id);
        // One view of the tree to put paths back through, one for the undo's own journal.
        let open_tree = || Tree::open(&self.root).map_err(|e| Error::io(Kind::Store, &self.root, e));
        let tree = open_tree()?;
        let mut j = Journal::new(self.root.clone(), open_tree()?, run_dir.clone(), meta, Keep::All, None);
        j.touch().map_err(|e| Error::io(Kind::Store, &run_dir, e))?;
        let mut entries: Vec<(&Record, &crate::Entry)> = chosen.iter().flat_map(|r| r.entries.iter().map(move |e| (r, e))).collect();
        entries.sort_by(|a, b| b.1.t.cmp(&a.1.t).then(b.1.n.cmp(&a.1.n)));
        let mut out = Outcome { id: j.id().to_string(), undone: chosen.iter().map(|r| (r.meta.id.clone(), r.meta.command.clone())).collect(), restored: Vec::new(), left: Vec::new() };
        let mut failed = None;
        for (rec, e) in entries {
            let rel = e.path.to_path();
            match self.put_back(&tree, &mut j, rec, e) {
                Ok(Some(action)) => out.restored.push(crate::Restored { path: rel, action }),
                Ok(None) => {}
                Err(Step::Left(why)) => out.left.push((rel, why)),
                Err(Step::Failed(err)) => {
                    failed = Some(err);
                    break;
                }
            }
        }
        let id = out.id.clone();
        j.finish(Some(0))?;
        // Marked even when a step failed: what was put back is in the undo's own record, and
        // `--redo` takes it back; the rest stays as it is.
        for r in chosen {
            std::fs::write(r.dir.join("undone"), &id).map_err(|e| Error::io(Kind::Store, &r.dir, e))?;
        }
        if let Some(e) = failed {
            return Err(e);
        }
        Ok(out)
    }

    /// Put one entry's path back. `Ok(None)`: it is already as it was.
    fn put_back(&self, tree: &Tree, j: &mut Journal, rec: &Record, e: &crate::Entry) -> Result<Option<&'static str>, Step> {
        let rel = e.path.to_path();
        // Only plain relative paths outside the project's git directory: never `..`, `/`,
        // `.git/…` (a nested repository's `lib/.git` is put back like any directory).
        if rel.starts_with(".git") || rel.components().any(|c| !matches!(c, std::path::Component::Normal(_))) {
            return Err(Step::Left("not a path undo puts back".into()));
        }
        let path = self.root.join(&rel);
        // A step that fails on this path leaves it as it is, said; the undo goes on with the
        // rest. (Only failing to keep what it replaces stops an undo: `before` below.)
        let fail = |err: std::io::Error| Step::Left(format!("could not be put back: {err}"));
        // The way to the path holds a link (or leaves the project): nothing there is touched.
        let at = match tree.at(&rel) {
            Ok(at) => at,
            Err(err) if err.raw_os_error() == Some(libc::ELOOP) || err.raw_os_error() == Some(libc::EXDEV) => {
                return Err(Step::Left("a symbolic link stands on the way to it: left in place".into()));
            }
            Err(err) if err.raw_os_error() == Some(libc::ENOENT) || err.raw_os_error() == Some(libc::ENOTDIR) => {
                return Err(Step::Left("the directory that held it is gone".into()));
            }
            Err(err) => return Err(fail(err)),
        };
        let now = at.lstat().map_err(fail)?;
        let mut before = |c: Change| j.before(&c).map_err(|errno| Step::Failed(Error::io(Kind::Store, &path, std::io::Error::from_raw_os_error(errno))));
        match &e.pre {
            Pre::Absent => {
                let Some(st) = now else { return Ok(None) };
                before(Change::Remove { path: path.clone() })?;
                match at.remove(st.is == Is::Dir) {
                    Ok(()) => Ok(Some("removed")),
                    Err(err) if st.is == Is::Dir && matches!(err.raw_os_error(), Some(libc::ENOTEMPTY | libc::EEXIST)) => {
                        // Build output in a directory git ignores (`mkdir target`) was never
                        // kept: the directory stays, and that is no news.
                        if !Keep::git(&self.root, &self.git_dir).keeps(&rel.join("_")) {
                            return Ok(None);
                        }
                        Err(Step::Left("a directory the command made holds files it did not make: left in place".into()))
                    }
                    Err(err) => Err(fail(err)),
                }
            }
            Pre::File { mode } => {
                let kept = rec.dir.join("kept").join(e.n.to_string());
                let Some(bytes) = kept_file(&kept) else {
                    return Err(Step::Left(format!("its kept bytes are missing ({})", kept.display())));
                };
                // Never a set-user or set-group bit from a record.
                let mode = &(mode & 0o1777);
                // A regular file there now: the bytes go back into it, so every other name
                // of the file (a hard link) gets them back too.
                if let Some(st) = now
                    && st.is == Is::File
                {
                    before(Change::Write { path: path.clone(), truncate: true })?;
                    let out = at.rewrite().map_err(fail)?;
                    bytes
                        .metadata()
                        .and_then(|m| crate::sys::copy_sparse(&bytes, &out, m.len()))
                        .and_then(|_| {
                            use std::os::unix::fs::PermissionsExt;
                            out.set_permissions(std::fs::Permissions::from_mode(*mode))?;
                            out.set_modified(bytes.metadata()?.modified()?)
                        })
                        .map_err(fail)?;
                    return Ok(Some("restored"));
                }
                if let Some(st) = now
                    && st.is == Is::Dir
                {
                    before(Change::Remove { path: path.clone() })?;
                    if at.remove(true).is_err() {
                        return Err(Step::Left("a directory stands there now and is not empty: left in place".into()));
                    }
                }
                let tmp = at.sibling(&temp_name(e.n)).map_err(fail)?;
                let out = tmp.create_new(0o600).map_err(fail)?;
                let copied = bytes.metadata().and_then(|m| crate::sys::copy_sparse(&bytes, &out, m.len())).and_then(|_| {
                    use std::os::unix::fs::PermissionsExt;
                    out.set_permissions(std::fs::Permissions::from_mode(*mode))?;
                    out.set_modified(bytes.metadata()?.modified()?)
                });
                if let Err(err) = copied {
                    let _ = tmp.remove(false);
                    return Err(fail(err));
                }
                before(if now.is_some_and(|st| st.is != Is::Dir) { Change::Remove { path: path.clone() } } else { Change::Make { path: path.clone() } })?;
                if let Err(err) = tmp.rename(&at, false) {
                    let _ = tmp.remove(false);
                    return Err(fail(err));
                }
                Ok(Some("restored"))
            }
            Pre::Link { target } => {
                // An empty directory there (one the command made where it removed the link,
                // emptied by this undo) goes, as for a file.
                if now.is_some_and(|st| st.is == Is::Dir) {
                    before(Change::Remove { path: path.clone() })?;
                    if at.remove(true).is_err() {
                        return Err(Step::Left("a directory stands there now and is not empty: left in place".into()));
                    }
                }
                if now.is_some_and(|st| st.is == Is::Link) && at.read_link().ok() == Some(target.to_path()) {
                    return Ok(None);
                }
                let tmp = at.sibling(&temp_name(e.n)).map_err(fail)?;
                tmp.symlink(&target.to_path()).map_err(fail)?;
                before(if now.is_some() { Change::Remove { path: path.clone() } } else { Change::Make { path: path.clone() } })?;
                tmp.rename(&at, false).map_err(fail)?;
                Ok(Some("restored"))
            }
            Pre::Dir { mode } => match now {
                None => {
                    before(Change::Make { path: path.clone() })?;
                    at.mkdir(0o700).map_err(fail)?;
                    at.chmod(*mode).map_err(fail)?;
                    Ok(Some("made"))
                }
                Some(st) if st.is == Is::Dir => {
                    if st.mode == *mode {
                        return Ok(None);
                    }
                    before(Change::Mode { path: path.clone() })?;
                    at.chmod(*mode).map_err(fail)?;
                    Ok(Some("mode"))
                }
                // A file or a link the command put where it removed the directory (`rm -rf
                // src && ln -s /x src`): kept by this undo (a redo puts it back), then the
                // directory is made again and what it held follows.
                Some(st) => {
                    before(Change::Remove { path: path.clone() })?;
                    at.remove(st.is == Is::Dir).map_err(fail)?;
                    at.mkdir(0o700).map_err(fail)?;
                    at.chmod(*mode).map_err(fail)?;
                    Ok(Some("made"))
                }
            },
            Pre::Moved { to } => {
                let dest = to.to_path();
                if dest.is_absolute() {
                    return Err(Step::Left(format!("it was moved out of the project, to {}: left there", dest.display())));
                }
                if now.is_some() {
                    return Err(Step::Left(format!("it was moved to {}, and something stands here again: left in place", dest.display())));
                }
                let src = tree.at(&dest).map_err(|_| Step::Left(format!("it was moved to {}, which cannot be reached now", dest.display())))?;
                if !src.lstat().map_err(fail)?.is_some_and(|st| st.is == Is::Dir) {
                    return Err(Step::Left(format!("it was moved to {}, which is no longer a directory", dest.display())));
                }
                before(Change::Rename { from: self.root.join(&dest), to: path.clone(), exchange: false })?;
                src.rename(&at, false).map_err(fail)?;
                Ok(Some("moved back"))
            }
            Pre::Swapped { with } => {
                let other = tree.at(&with.to_path()).map_err(|_| Step::Left("what it was swapped with cannot be reached now".into()))?;
                before(Change::Rename { from: path.clone(), to: self.root.join(with.to_path()), exchange: true })?;
                at.rename(&other, true).map_err(fail)?;
                Ok(Some("swapped back"))
            }
            Pre::Mode { mode } => match now {
                Some(st) if st.mode != *mode && st.is != Is::Link => {
                    before(Change::Mode { path: path.clone() })?;
                    at.chmod(*mode).map_err(fail)?;
                    Ok(Some("mode"))
                }
                _ => Ok(None),
            },
            Pre::Fifo { mode } => {
                if now.is_some() {
                    return Ok(None);
                }
                before(Change::Make { path: path.clone() })?;
                at.mkfifo(*mode).map_err(fail)?;
                Ok(Some("made"))
            }
        }
    }
}

enum Step {
    /// Left as it is, and why.
    Left(String),
    /// The undo stops here.
    Failed(Error),
}

/// A record's kept bytes: a regular file, opened without following a link and without waiting
/// on a FIFO.
fn kept_file(p: &Path) -> Option<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).open(p).ok()?;
    f.metadata().ok()?.is_file().then_some(f)
}

/// A name beside the path for the bytes before they take its place.
fn temp_name(n: u64) -> String {
    format!(".pinfold-undo-{}-{n}", std::process::id())
}
