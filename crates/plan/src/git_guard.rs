//! Keeping a repository's history through a sandboxed run.
//!
//! `git commit` must write `.git/objects`, `.git/refs` and `HEAD`, so they cannot simply be
//! read-only — yet `rm -rf .git` must not destroy the history. Before the run:
//!
//! * existing pack files and loose objects are added to the write-deny list: each becomes a
//!   read-only mount, which can be neither changed nor deleted (objects are immutable, and a
//!   commit only adds new ones). Past [`MAX_LOOSE`] loose objects the rest are left
//!   unprotected and the run says so (`git gc` packs them);
//! * `HEAD`, `packed-refs` and every file under `refs/` are read;
//!
//! and after the run, any of those the command deleted is written back. Refs the command
//! changed are left as changed: that is what commits, checkouts and branch switches do.
//! The `.git` directory itself cannot be renamed or removed (the sandbox pins directories
//! that hold protected paths).

use std::path::{Path, PathBuf};

/// Loose objects protected one mount each; beyond this the setup cost grows too much.
pub const MAX_LOOSE: usize = 4096;

#[derive(Debug, Default)]
pub struct GitGuard {
    /// Files to keep read-only during the run.
    pub protect: Vec<PathBuf>,
    /// Loose objects left unprotected (over the limit).
    pub unprotected: usize,
    refs: Vec<(PathBuf, Vec<u8>)>,
    /// The git directory the refs are in.
    git_dir: Option<PathBuf>,
}

impl GitGuard {
    /// Look at the repository whose git directory is `git_dir` (nothing if it is not one).
    pub fn before(git_dir: &Path) -> GitGuard {
        let mut g = GitGuard::default();
        if !git_dir.join("HEAD").is_file() {
            return g;
        }
        g.git_dir = Some(git_dir.to_path_buf());
        let objects = git_dir.join("objects");
        if let Ok(rd) = std::fs::read_dir(&objects) {
            for e in rd.flatten() {
                let name = e.file_name();
                let name = name.to_string_lossy();
                if name.len() == 2 && name.bytes().all(|b| b.is_ascii_hexdigit()) {
                    if let Ok(files) = std::fs::read_dir(e.path()) {
                        for f in files.flatten() {
                            if g.protect.len() < MAX_LOOSE {
                                g.protect.push(f.path());
                            } else {
                                g.unprotected += 1;
                            }
                        }
                    }
                }
            }
        }
        g.protect.push(objects.join("pack/pack-*"));
        // Read only regular files, without waiting: a run may leave a FIFO at any of these
        // names, and a blocking read would hang every later pinfold in the project.
        const REFS_LIMIT: u64 = 256 << 20;
        for f in ["HEAD", "packed-refs"] {
            if let Ok(Some(b)) = crate::control::read_bounded(&git_dir.join(f), REFS_LIMIT) {
                g.refs.push((git_dir.join(f), b));
            }
        }
        let mut stack = vec![git_dir.join("refs")];
        while let Some(d) = stack.pop() {
            let Ok(rd) = std::fs::read_dir(&d) else { continue };
            for e in rd.flatten() {
                let p = e.path();
                match e.file_type() {
                    Ok(t) if t.is_dir() => stack.push(p),
                    Ok(t) if t.is_file() => {
                        if let Ok(Some(b)) = crate::control::read_bounded(&p, REFS_LIMIT) {
                            g.refs.push((p, b));
                        }
                    }
                    _ => {}
                }
            }
        }
        g
    }

    /// Write back the refs the run deleted; returns them. Only through real directories: the
    /// command may have put a link where a directory of refs was (`refs -> /elsewhere`), and
    /// pinfold, outside the sandbox, must not write where the link leads.
    pub fn after(&self) -> Vec<PathBuf> {
        let mut restored = Vec::new();
        for (p, content) in &self.refs {
            if std::fs::symlink_metadata(p).is_ok() {
                continue;
            }
            if self.git_dir.as_deref().is_some_and(|g| write_new_beneath(g, p, content)) {
                restored.push(p.clone());
            }
        }
        restored
    }
}

/// Create `p` (beneath `base`) holding `content`, making missing directories on the way, but
/// only if every part of the path below `base` is a real directory (or missing): a link or a
/// file there stops it. The file is created new (never written through a link).
fn write_new_beneath(base: &Path, p: &Path, content: &[u8]) -> bool {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let Ok(rest) = p.strip_prefix(base) else { return false };
    let Some(parent) = rest.parent() else { return false };
    let mut dir = base.to_path_buf();
    for c in parent.components() {
        dir.push(c);
        match std::fs::symlink_metadata(&dir) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return false,
            Err(_) => {
                if std::fs::create_dir(&dir).is_err() || !std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir()) {
                    return false;
                }
            }
        }
    }
    let Ok(mut f) = std::fs::OpenOptions::new().write(true).create_new(true).custom_flags(libc::O_NOFOLLOW).open(p) else { return false };
    f.write_all(content).is_ok()
}
