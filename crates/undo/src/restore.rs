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

use crate::journal::{copy_file, Journal, Pre};
use crate::keep::Keep;
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
        let mut j = Journal::new(self.root.clone(), run_dir.clone(), meta, Keep::All, None);
        j.touch().map_err(|e| Error::io(Kind::Store, &run_dir, e))?;
        let mut entries: Vec<(&Record, &crate::Entry)> = chosen.iter().flat_map(|r| r.entries.iter().map(move |e| (r, e))).collect();
        entries.sort_by(|a, b| b.1.t.cmp(&a.1.t).then(b.1.n.cmp(&a.1.n)));
        let mut out = Outcome { id: j.id().to_string(), undone: chosen.iter().map(|r| (r.meta.id.clone(), r.meta.command.clone())).collect(), restored: Vec::new(), left: Vec::new() };
        let mut failed = None;
        for (rec, e) in entries {
            let rel = e.path.to_path();
            match self.put_back(&mut j, rec, e) {
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
    fn put_back(&self, j: &mut Journal, rec: &Record, e: &crate::Entry) -> Result<Option<&'static str>, Step> {
        let path = self.root.join(e.path.to_path());
        let now = std::fs::symlink_metadata(&path).ok();
        let mut before = |c: Change| j.before(&c).map_err(|errno| Step::Failed(Error::io(Kind::Store, &path, std::io::Error::from_raw_os_error(errno))));
        let io = |e: std::io::Error| Step::Failed(Error::io(Kind::Store, &path, e));
        match &e.pre {
            Pre::Absent => {
                let Some(m) = now else { return Ok(None) };
                before(Change::Remove { path: path.clone() })?;
                if m.is_dir() {
                    match std::fs::remove_dir(&path) {
                        Ok(()) => {}
                        Err(err) if err.raw_os_error() == Some(libc::ENOTEMPTY) || err.raw_os_error() == Some(libc::EEXIST) => {
                            // Build output in a directory git ignores (`mkdir target`) was
                            // never kept: the directory stays, and that is no news.
                            if !Keep::git(&self.root, &self.git_dir).keeps(&e.path.to_path().join("_")) {
                                return Ok(None);
                            }
                            return Err(Step::Left("a directory the command made holds files it did not make: left in place".into()));
                        }
                        Err(err) => return Err(io(err)),
                    }
                } else {
                    std::fs::remove_file(&path).map_err(io)?;
                }
                Ok(Some("removed"))
            }
            Pre::File { mode } => {
                let kept = rec.dir.join("kept").join(e.n.to_string());
                if !kept.exists() {
                    return Err(Step::Left(format!("its kept bytes are missing ({})", kept.display())));
                }
                if let Some(m) = &now
                    && m.is_dir()
                {
                    before(Change::Remove { path: path.clone() })?;
                    if std::fs::remove_dir(&path).is_err() {
                        return Err(Step::Left("a directory stands there now and is not empty: left in place".into()));
                    }
                }
                let tmp = temp_beside(&path, e.n);
                copy_file(&kept, &tmp).map_err(io)?;
                set_mode(&tmp, *mode).map_err(io)?;
                if now.as_ref().is_some_and(|m| !m.is_dir()) {
                    before(Change::Remove { path: path.clone() })?;
                } else {
                    before(Change::Make { path: path.clone() })?;
                }
                if let Err(err) = std::fs::rename(&tmp, &path) {
                    let _ = std::fs::remove_file(&tmp);
                    return Err(io(err));
                }
                Ok(Some("restored"))
            }
            Pre::Link { target } => {
                if now.as_ref().is_some_and(|m| m.is_dir()) {
                    return Err(Step::Left("a directory stands there now: left in place".into()));
                }
                let tmp = temp_beside(&path, e.n);
                std::os::unix::fs::symlink(target.to_path(), &tmp).map_err(io)?;
                before(if now.is_some() { Change::Remove { path: path.clone() } } else { Change::Make { path: path.clone() } })?;
                std::fs::rename(&tmp, &path).map_err(io)?;
                Ok(Some("restored"))
            }
            Pre::Dir { mode } => match now {
                None => {
                    before(Change::Make { path: path.clone() })?;
                    std::fs::create_dir(&path).map_err(io)?;
                    set_mode(&path, *mode).map_err(io)?;
                    Ok(Some("made"))
                }
                Some(m) if m.is_dir() => {
                    if m_mode(&m) == *mode {
                        return Ok(None);
                    }
                    before(Change::Mode { path: path.clone() })?;
                    set_mode(&path, *mode).map_err(io)?;
                    Ok(Some("mode"))
                }
                Some(_) => Err(Step::Left("it was a directory; something else stands there now: left in place".into())),
            },
            Pre::Moved { to } => {
                let src = self.root.join(to.to_path());
                if now.is_some() {
                    return Err(Step::Left(format!("it was moved to {}, and something stands here again: left in place", to.to_path().display())));
                }
                if !src.is_dir() {
                    return Err(Step::Left(format!("it was moved to {}, which is no longer a directory", to.to_path().display())));
                }
                before(Change::Rename { from: src.clone(), to: path.clone(), exchange: false })?;
                std::fs::rename(&src, &path).map_err(io)?;
                Ok(Some("moved back"))
            }
            Pre::Swapped { with } => {
                let other = self.root.join(with.to_path());
                before(Change::Rename { from: path.clone(), to: other.clone(), exchange: true })?;
                crate::sys::exchange(&path, &other).map_err(io)?;
                Ok(Some("swapped back"))
            }
            Pre::Mode { mode } => match now {
                Some(m) if m_mode(&m) != *mode && !m.file_type().is_symlink() => {
                    before(Change::Mode { path: path.clone() })?;
                    set_mode(&path, *mode).map_err(io)?;
                    Ok(Some("mode"))
                }
                _ => Ok(None),
            },
            Pre::Fifo { mode } => {
                if now.is_some() {
                    return Ok(None);
                }
                before(Change::Make { path: path.clone() })?;
                crate::sys::mkfifo(&path, *mode).map_err(io)?;
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

fn m_mode(m: &std::fs::Metadata) -> u32 {
    std::os::unix::fs::MetadataExt::mode(m) & 0o7777
}

fn set_mode(p: &Path, mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode))
}

/// A name beside `path` for the bytes before they take its place.
fn temp_beside(path: &Path, n: u64) -> PathBuf {
    let name = format!(".pinfold-undo-{}-{n}", std::process::id());
    path.parent().map(|d| d.join(&name)).unwrap_or_else(|| PathBuf::from(name))
}
