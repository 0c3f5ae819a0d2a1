//! The unconfined side: resolve the policy against the file system, start the sandbox (init,
//! or the re-exec helper), pass on signals, collect the report, clean up.

use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::child::{Base, Event, Late, GO, SETUP_FAILED};
use crate::FORWARDED;
use crate::mounts::Spec;
use crate::{env, probe, sys, LayerStatus, Network, Outcome, Plan, Policy, SandboxError, SandboxReport, Step};

/// Paths resolved against the file system at start.
pub(crate) struct Resolved {
    pub(crate) writable: Vec<PathBuf>,
    pub(crate) missing_writable: Vec<PathBuf>,
    pub(crate) write_deny: Vec<PathBuf>,
    /// Deny paths that do not exist: (the path asked for, the placeholder to create — the
    /// path itself, or its first missing ancestor — and whether that is a directory).
    pub(crate) placeholders: Vec<(PathBuf, PathBuf, bool)>,
    pub(crate) read_deny: Vec<(PathBuf, bool)>,
    /// Directories holding protected paths: bound over themselves (still writable) so they
    /// cannot be renamed or removed (`mv .git .g`, `rm -rf .git`).
    pub(crate) pins: Vec<PathBuf>,
    /// Protected directories too big to look through for every link (see [`look_through`]).
    pub(crate) links_unseen: Vec<PathBuf>,
}

fn has_glob(p: &Path) -> bool {
    p.to_string_lossy().contains(['*', '?', '['])
}

/// Expand a path with glob characters against the file system (each component may hold
/// `*`, `?`, `[…]`); a path without them is returned as is.
fn expand(p: &Path) -> Vec<PathBuf> {
    if !has_glob(p) {
        return vec![p.to_path_buf()];
    }
    let mut current = vec![PathBuf::from("/")];
    for comp in p.components().skip(1) {
        let c = comp.as_os_str().to_string_lossy();
        let mut next = Vec::new();
        for base in &current {
            if c.contains(['*', '?', '[']) {
                if let Ok(rd) = std::fs::read_dir(base) {
                    for e in rd.flatten() {
                        let name = e.file_name();
                        if glob_match(&c, &name.to_string_lossy()) {
                            next.push(base.join(name));
                        }
                    }
                }
            } else {
                next.push(base.join(comp));
            }
        }
        current = next;
    }
    current.sort();
    current
}

/// A path component against a component of a deny path: `*`, `?` and classes that end at
/// their first `]` (see [`pinfold_glob::Classes::FirstBracket`]).
pub(crate) fn glob_match(p: &str, t: &str) -> bool {
    pinfold_glob::is_match(p, t, pinfold_glob::Syntax::FIRST_BRACKET)
}

fn under_any(p: &Path, roots: &[PathBuf]) -> bool {
    roots.iter().any(|r| p.starts_with(r))
}

fn resolve(policy: &Policy) -> Result<Resolved, SandboxError> {
    // Many deny paths share a directory (eight policy-file names per directory, `.git/…`):
    // each directory is canonicalized and checked once per run, not once per path.
    let mut memo = Memo::default();
    // Protected trees too big to look through for links, for the report.
    let mut links_unseen = Vec::new();
    let mut writable = Vec::new();
    let mut missing_writable = Vec::new();
    let moved = |path: &Path, why: String| SandboxError::Setup { step: Step::WorkingDir(path.to_path_buf()), source: std::io::Error::other(why) };
    for w in &policy.writable {
        let found = memo.canonicalize(w);
        match found.ok_or(()) {
            Ok(c) => {
                // A root that holds the working directory is taken only as named (the caller
                // named it without links): a link there now is a directory swapped for one
                // by a command beside this run (found: the project swapped with a link to the
                // home directory, which then became writable).
                if c != *w && policy.cwd.starts_with(w) {
                    return Err(moved(w, format!("{} is a link (to {}) now; it was not when pinfold started: a command beside this one may have swapped it", w.display(), c.display())));
                }
                // A root beneath another writable root, or beneath the working directory, is
                // taken only if no link below that directory leads elsewhere: a command could
                // have made `build` a link to the home directory, and the next run would have
                // made the home directory writable (found: a preset writing only `out`, after
                // a run under another preset made `out` a link). The working directory counts
                // because another preset, or the project's own files, may have been writable
                // to an earlier run.
                let cwd = std::iter::once(&policy.cwd).filter(|d| d.is_absolute());
                for o in policy.writable.iter().filter(|o| *o != w && w.starts_with(o)).chain(cwd.filter(|d| *d != w && w.starts_with(d))) {
                    if let (Some(oc), Ok(rest)) = (memo.canonicalize(o), w.strip_prefix(o)) {
                        if c != oc.join(rest) {
                            return Err(SandboxError::Setup {
                                step: Step::WorkingDir(w.clone()),
                                source: std::io::Error::other(format!(
                                    "the writable root {} leads through a link beneath {} (to {}), which a command could have made; name the real path in the policy if the link is meant",
                                    w.display(),
                                    o.display(),
                                    c.display()
                                )),
                            });
                        }
                    }
                }
                if !writable.contains(&c) {
                    writable.push(c);
                }
            }
            Err(_) => missing_writable.push(w.clone()),
        }
    }
    let mut write_deny = Vec::new();
    let mut placeholders = Vec::new();
    for (i, pattern) in policy.write_deny.iter().enumerate() {
        if policy.write_deny[..i].contains(pattern) {
            continue;
        }
        let matches = expand(pattern);
        if matches.is_empty() && has_glob(pattern) {
            // Nothing matches yet: protect the directory the glob would create files in.
            if let Some(parent) = pattern.parent().filter(|p| !has_glob(p)) {
                if let Some(c) = memo.canonicalize(parent) {
                    if under_any(&c, &writable) && !write_deny.contains(&c) && !writable.contains(&c) {
                        write_deny.push(c);
                    }
                }
            }
            continue;
        }
        for d in matches {
            // Beneath a writable root, a path with no link on its way is protected where it
            // is named (see `look`).
            match look(&d, &policy.writable, &mut memo)? {
                Look::Here(c) => {
                    // Writable through another name beneath the writable root (a hook linked
                    // to a file of the project) is writable.
                    if !policy.shared.iter().any(|o| c.starts_with(o))
                        && let Some((path, links)) = hard_linked(&c, true, &mut links_unseen)
                    {
                        return Err(SandboxError::HardLinkedSecret { path, links });
                    }
                    if !write_deny.contains(&c) {
                        write_deny.push(c);
                    }
                    continue;
                }
                Look::Missing | Look::Elsewhere => {}
            }
            // A path that appears between the two looks (another run's placeholder, made
            // meanwhile) is taken as it is now: only a link that still leads nowhere is one.
            let resolved = sys::canonicalize(&d).or_else(|e| match std::fs::symlink_metadata(&d) {
                Ok(m) if !m.file_type().is_symlink() => sys::canonicalize(&d),
                _ => Err(e),
            });
            match resolved {
                Ok(c) => {
                    if !write_deny.contains(&c) {
                        write_deny.push(c);
                    }
                }
                Err(_) => placeholder(&d, policy, &writable, &mut memo, &mut placeholders)?,
            }
        }
    }
    let mut read_deny = Vec::new();
    // Hidden directories with links leading out of them, and those links.
    let mut outward: Vec<(PathBuf, Vec<(PathBuf, PathBuf)>)> = Vec::new();
    for pattern in &policy.read_deny {
        for r in expand(pattern) {
            let c = match look(&r, &policy.writable, &mut memo)? {
                Look::Here(c) => c,
                Look::Missing | Look::Elsewhere => match sys::canonicalize(&r) {
                    Ok(c) => c,
                    // Missing where a command could create it: a placeholder for the run, as
                    // for a write-deny path. Created by a command, it could be a hard link to
                    // a file the command keeps reading (`ln leak .env`), and a secret copied
                    // into `.env` later (`cp` writes into the file that is there) would be
                    // readable in the next run through `leak`.
                    Err(_) => {
                        if policy.writable.iter().any(|w| r.starts_with(w)) && !placeholders.iter().any(|(n, _, _)| *n == r) {
                            let before = placeholders.len();
                            placeholder(&r, policy, &writable, &mut memo, &mut placeholders)?;
                            // Covered as a read-deny path (an empty file or directory over
                            // it), as it will be once it exists: so a second run beside this
                            // one, or in the same kept container, is set up alike.
                            if let Some((_, ph, is_dir)) = placeholders.get(before).filter(|_| placeholders.len() > before)
                                && !read_deny.iter().any(|(p, _)| p == ph)
                            {
                                read_deny.push((ph.clone(), *is_dir));
                            }
                        }
                        continue;
                    }
                },
            };
            if read_deny.iter().any(|(p, _)| *p == c) {
                continue;
            }
            let is_dir = std::fs::symlink_metadata(&c).is_ok_and(|m| m.is_dir());
            // Hiding a name leaves the bytes readable through the file's other names: a file
            // with more than one is refused, anywhere (the names may lie anywhere on its file
            // system), and so is one in a hidden directory (found: `~/.ssh/id_rsa` read as
            // `~/backup/id_rsa`). pinfold's own hidden paths are not looked through.
            // One look through a hidden directory finds both its files' other names and the
            // links that lead out of it (used below).
            let walk = is_dir && !policy.own.iter().any(|o| c.starts_with(o));
            let looked = look_through(&c, walk);
            if looked.short {
                links_unseen.push(c.clone());
            }
            if let Some(s) = looked.second_names.into_iter().next() {
                return Err(SandboxError::HardLinkedSecret { path: s.path, links: s.links });
            }
            if !looked.links_out.is_empty() {
                outward.push((c.clone(), looked.links_out));
            }
            read_deny.push((c, is_dir));
        }
    }
    // What a symbolic link in a hidden directory leads to is hidden with it: covering the
    // directory hides the link, not the file at its real path (found: `~/.ssh/id_ed25519 ->
    // ~/dotfiles/ssh/id` read at the real path).
    let mut linked = Vec::new();
    for (d, links) in outward {
        for (link, t) in links {
            if read_deny.iter().chain(&linked).any(|(p, _): &(PathBuf, bool)| t.starts_with(p)) {
                continue;
            }
            let holds = |p: &Path| p.starts_with(&t);
            if holds(&d) || writable.iter().any(|w| holds(w)) || holds(&policy.cwd) {
                return Err(SandboxError::HiddenLinkTooWide { link, target: t });
            }
            let is_dir = std::fs::metadata(&t).is_ok_and(|m| m.is_dir());
            if let Some((path, links)) = hard_linked(&t, is_dir, &mut links_unseen) {
                return Err(SandboxError::HardLinkedSecret { path, links });
            }
            linked.push((t, is_dir));
        }
    }
    read_deny.extend(linked);
    // Every directory between a writable root and a deny path is pinned (bound over itself,
    // so it cannot be renamed): a command that moved `a` of `a/b/w.txt` to `a2` would have
    // taken the file out from under the path the policy names, and the next run would find
    // it unprotected at `a2/b/w.txt` (found by an outside attack; only the parent was
    // pinned).
    let mut pins = Vec::new();
    let deny_parents = write_deny.iter().filter_map(|d| d.parent()).chain(placeholders.iter().filter_map(|(_, ph, _)| ph.parent()));
    for parent in deny_parents {
        for dir in parent.ancestors() {
            let inside = writable.iter().any(|w| dir.starts_with(w) && dir != w.as_path());
            if !inside {
                break;
            }
            if dir.is_dir() && !pins.iter().any(|p: &PathBuf| p == dir) {
                pins.push(dir.to_path_buf());
            }
        }
    }
    Ok(Resolved { writable, missing_writable, write_deny, placeholders, read_deny, pins, links_unseen })
}

/// A placeholder for the missing deny path `d` (write- or read-deny), when a command could
/// create it: where it lies beneath a writable root.
fn placeholder(d: &Path, policy: &Policy, writable: &[PathBuf], memo: &mut Memo, placeholders: &mut Vec<(PathBuf, PathBuf, bool)>) -> Result<(), SandboxError> {
    if std::fs::symlink_metadata(d).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(SandboxError::DanglingDenyLink { path: d.to_path_buf() });
    }
    // Only paths a command could create need a placeholder.
    let Some((ph, is_dir)) = placeholder_for(d, memo) else { return Ok(()) };
    let parent = ph.parent().map(Path::to_path_buf).unwrap_or_default();
    let Some(cp) = memo.canonicalize(&parent) else { return Ok(()) };
    // (A directory on the way swapped for a link between the looks: the placeholder would
    // stand elsewhere.)
    if let Some(root) = policy.writable.iter().filter(|w| parent.starts_with(w)).max_by_key(|w| w.as_os_str().len())
        && let (Some(croot), Ok(rest)) = (memo.canonicalize(root), parent.strip_prefix(root))
        && !parent.components().any(|c| c == std::path::Component::ParentDir)
        && cp != croot.join(rest)
    {
        return Err(SandboxError::DenyThroughLink { path: d.to_path_buf(), link: parent.clone() });
    }
    if under_any(&cp, writable) {
        placeholders.push((d.to_path_buf(), cp.join(ph.file_name().unwrap_or_default()), is_dir));
    }
    Ok(())
}

/// How many entries a look through a protected directory reads at most: a run does not pay
/// for a big protected tree (the report's degraded list names one looked at in part).
pub const LINKS_ENTRIES: usize = 2000;

/// A file with more than one name found by [`look_through`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecondName {
    pub path: PathBuf,
    pub dev: u64,
    pub ino: u64,
    /// How many names it has.
    pub links: u64,
}

/// What a look through a hidden or protected path found.
#[derive(Debug, Default)]
pub struct Looked {
    /// The files with more than one name: the path itself, or those beneath it.
    pub second_names: Vec<SecondName>,
    /// The symbolic links beneath it that lead out of it (none followed), each with the real
    /// path it leads to; links to nothing are left out.
    pub links_out: Vec<(PathBuf, PathBuf)>,
    /// The look stopped at [`LINKS_ENTRIES`].
    pub short: bool,
}

/// Look at `c`: whether it is a file with more than one name, and, when `walk` and `c` is a
/// directory, everything beneath it (at most [`LINKS_ENTRIES`] entries, links not followed).
/// `pinfold exec` refuses a run while a hidden or protected file has another name and hides
/// where the links lead; the agent's file tools refuse the same paths.
pub fn look_through(c: &Path, walk: bool) -> Looked {
    use std::os::unix::fs::MetadataExt;
    let mut out = Looked::default();
    let Ok(m) = std::fs::symlink_metadata(c) else { return out };
    let second = |path: PathBuf, m: &std::fs::Metadata| SecondName { path, dev: m.dev(), ino: m.ino(), links: m.nlink() };
    if m.is_file() && m.nlink() > 1 {
        out.second_names.push(second(c.to_path_buf(), &m));
        return out;
    }
    if !(walk && m.is_dir()) {
        return out;
    }
    let mut budget = LINKS_ENTRIES;
    let mut stack = vec![c.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            if budget == 0 {
                out.short = true;
                return out;
            }
            budget -= 1;
            let Ok(kind) = e.file_type() else { continue };
            if kind.is_dir() {
                stack.push(e.path());
            } else if kind.is_file() {
                if let Ok(m) = e.metadata()
                    && m.nlink() > 1
                {
                    out.second_names.push(second(e.path(), &m));
                }
            } else if kind.is_symlink()
                && let Ok(t) = sys::canonicalize(&e.path())
                && !t.starts_with(c)
            {
                out.links_out.push((e.path(), t));
            }
        }
    }
    out
}

/// A file with more than one name at `c` or (when `walk`) beneath it; `c` goes to `short`
/// when the look stopped early.
fn hard_linked(c: &Path, walk: bool, short: &mut Vec<PathBuf>) -> Option<(PathBuf, u64)> {
    let looked = look_through(c, walk);
    if looked.short {
        short.push(c.to_path_buf());
    }
    looked.second_names.into_iter().next().map(|s| (s.path, s.links))
}

/// The placeholder for a missing deny path: the path itself (an empty file) when its parent
/// exists, else its first missing ancestor (an empty directory).
fn placeholder_for(d: &Path, memo: &mut Memo) -> Option<(PathBuf, bool)> {
    let mut cur = d.to_path_buf();
    let mut is_dir = false;
    loop {
        let parent = cur.parent()?.to_path_buf();
        match memo.parent_kind(&parent) {
            // Beneath a file (`.git` in a worktree is a file) nothing can be created at all.
            ParentKind::Dir => return Some((cur, is_dir)),
            ParentKind::NotDir => return None,
            ParentKind::Missing => {}
        }
        cur = parent;
        is_dir = true;
    }
}

/// What a would-be placeholder's parent is.
#[derive(Clone, Copy)]
enum ParentKind {
    Dir,
    NotDir,
    /// Missing, or another run's placeholder directory, which counts as missing: this run then
    /// holds that directory, rather than putting its own placeholders inside it and leaving it
    /// behind.
    Missing,
}

/// What [`resolve`] learns of directories, kept for the rest of the call (nothing it looks at
/// is changed by it; placeholders are made afterwards).
#[derive(Default)]
struct Memo {
    canonical: std::collections::HashMap<PathBuf, Option<PathBuf>>,
    parents: std::collections::HashMap<PathBuf, ParentKind>,
}

/// What a deny path beneath a writable root is, looked at once with no link followed.
enum Look {
    /// There, with no link on its way below the root or at its end: protected where it is
    /// named (as this path).
    Here(PathBuf),
    /// Not there.
    Missing,
    /// Not beneath a writable root, or itself a link, or named with `..`: resolved as before.
    Elsewhere,
}

/// A deny path beneath a writable root with a symbolic link among its directories below
/// that root is refused: the protection would go where the link leads, and a command beside
/// this run, writing that root, could swap the link for the real directory a moment later,
/// leaving the path unprotected (found by an outside attack: `a` of `a/b/w.txt` exchanged
/// with a link, and runs wrote `w.txt`). Its parent is opened beneath the root with no link
/// followed, and the name looked at in it, once: canonicalizing first and checking after
/// would leave a window between. `Here` carries the path as protected: the root's canonical
/// path and the rest as named.
fn look(d: &Path, writable: &[PathBuf], memo: &mut Memo) -> Result<Look, SandboxError> {
    if d.components().any(|c| matches!(c, std::path::Component::ParentDir | std::path::Component::CurDir)) {
        return Ok(Look::Elsewhere);
    }
    let Some(root) = writable.iter().filter(|w| d.starts_with(w) && d != w.as_path()).max_by_key(|w| w.as_os_str().len()) else { return Ok(Look::Elsewhere) };
    let (Some(croot), Ok(rest)) = (memo.canonicalize(root), d.strip_prefix(root)) else { return Ok(Look::Elsewhere) };
    let (Some(parent_rest), Some(name)) = (rest.parent(), rest.file_name()) else { return Ok(Look::Elsewhere) };
    let Ok(rootfd) = sys::open_dir_no_symlinks(&croot) else { return Ok(Look::Elsewhere) };
    let dir = if parent_rest.as_os_str().is_empty() {
        rootfd
    } else {
        match sys::open_beneath_no_symlinks(&rootfd, parent_rest) {
            Ok(dir) => dir,
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                let link = d.parent().into_iter().flat_map(Path::ancestors).take_while(|a| a.starts_with(root) && *a != root).find(|a| std::fs::symlink_metadata(a).is_ok_and(|m| m.file_type().is_symlink()));
                return Err(SandboxError::DenyThroughLink { path: d.to_path_buf(), link: link.unwrap_or(d).to_path_buf() });
            }
            // (A missing or non-directory parent: the placeholder logic decides.)
            Err(_) => return Ok(Look::Elsewhere),
        }
    };
    match sys::statat(&dir, name) {
        Ok((_, _, mode, _)) if mode & libc::S_IFMT == libc::S_IFLNK => Ok(Look::Elsewhere),
        Ok(_) => Ok(Look::Here(croot.join(rest))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Look::Missing),
        Err(_) => Ok(Look::Elsewhere),
    }
}

impl Memo {
    fn canonicalize(&mut self, p: &Path) -> Option<PathBuf> {
        if let Some(c) = self.canonical.get(p) {
            return c.clone();
        }
        let c = sys::canonicalize(p).ok();
        self.canonical.insert(p.to_path_buf(), c.clone());
        c
    }

    fn parent_kind(&mut self, p: &Path) -> ParentKind {
        if let Some(k) = self.parents.get(p) {
            return *k;
        }
        let k = match std::fs::metadata(p) {
            Ok(m) if m.is_dir() && sys::lhasxattr(p, PLACEHOLDER_MARK) => ParentKind::Missing,
            Ok(m) if m.is_dir() => ParentKind::Dir,
            Ok(_) => ParentKind::NotDir,
            Err(_) => ParentKind::Missing,
        };
        self.parents.insert(p.to_path_buf(), k);
        k
    }
}

pub(crate) fn plan(policy: &Policy) -> Result<Plan, SandboxError> {
    let r = resolve(policy)?;
    Ok(Plan {
        writable: r.writable,
        missing_writable: r.missing_writable,
        write_deny: r.write_deny,
        placeholders: r.placeholders.into_iter().map(|(_, p, _)| p).collect(),
        read_deny: r.read_deny.into_iter().map(|(p, _)| p).collect(),
        network: policy.network,
        availability: probe::probe(),
    })
}

/// pinfold's run base: `root/` (where each sandbox mounts its new root, in its own mount
/// namespace), `tmp/` (where each sandbox mounts its private tmpfs TMPDIR) and `empty` (an
/// empty file mounted over hidden files). Created once per user and reused: a run writes
/// nothing to disk. `$XDG_RUNTIME_DIR/pinfold`, else `~/.cache/pinfold/run`, else
/// `/tmp/pinfold-UID`; it must be a real directory owned by the user and closed to others.
pub(crate) fn run_base(uid: u32) -> Result<PathBuf, SandboxError> {
    use std::os::unix::fs::MetadataExt;
    let mut candidates = Vec::new();
    if let Some(rt) = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from).filter(|p| p.is_absolute() && p.is_dir()) {
        candidates.push(rt.join("pinfold"));
    }
    if let Some(h) = std::env::var_os("HOME").map(PathBuf::from).filter(|p| p.is_absolute() && p.is_dir()) {
        candidates.push(h.join(".cache/pinfold/run"));
    }
    candidates.push(std::env::temp_dir().join(format!("pinfold-{uid}")));
    let mut last_err = None;
    for base in candidates {
        // Fast path: already set up.
        if let Ok(m) = std::fs::symlink_metadata(&base) {
            if !m.is_dir() || m.uid() != uid || m.mode() & 0o022 != 0 {
                last_err = Some(SandboxError::UnsafeRunDir { path: base, uid });
                continue;
            }
            if base.join("empty").exists() {
                return Ok(base);
            }
        }
        match create_base(&base) {
            Ok(()) => return Ok(base),
            Err(source) => last_err = Some(SandboxError::Setup { step: Step::RunDir(base), source }),
        }
    }
    Err(last_err.unwrap_or(SandboxError::NoRunDir))
}

fn create_base(base: &Path) -> std::io::Result<()> {
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(base)?;
    for d in ["root", "tmp"] {
        match std::fs::DirBuilder::new().mode(0o700).create(base.join(d)) {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(e),
            _ => {}
        }
    }
    match std::fs::OpenOptions::new().write(true).create_new(true).mode(0o400).open(base.join("empty")) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => Err(e),
        _ => Ok(()),
    }
}

/// The extended attribute that marks a placeholder as pinfold's (so a later run may remove it,
/// and never a user's own empty file).
const PLACEHOLDER_MARK: &str = "user.pinfold.placeholder";

/// Whether `path` is a placeholder another run relies on right now: an empty file or directory
/// (not a link) with pinfold's mark that some process holds a `flock` on. A run that watched the
/// path as missing does not count it as planted: a sandbox running beside it made it. A
/// command cannot forge one that outlives its run (its locks go with its processes), and one
/// it made beside a run of its own is empty, and read-only to every later run.
pub fn held_placeholder(path: &Path) -> bool {
    use std::os::unix::fs::OpenOptionsExt;
    let Ok(file) = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).open(path) else { return false };
    let Ok(meta) = file.metadata() else { return false };
    let empty = if meta.is_dir() { std::fs::read_dir(path).is_ok_and(|mut d| d.next().is_none()) } else { meta.is_file() && meta.len() == 0 };
    if !empty || !sys::fhasxattr(&file, PLACEHOLDER_MARK) {
        return false;
    }
    match sys::flock(&file, libc::LOCK_EX | libc::LOCK_NB) {
        Ok(()) => {
            let _ = sys::flock(&file, libc::LOCK_UN);
            false
        }
        Err(e) => e.raw_os_error() == Some(libc::EWOULDBLOCK),
    }
}

/// An empty file or directory at a protected path that this run relies on: held open with a
/// shared `flock` for the whole run.
struct Held {
    path: PathBuf,
    /// The directory it is in, opened without following a link anywhere on the way: removal
    /// goes through it, never through the path (whose parent another run could have swapped
    /// for a link meanwhile).
    parent: std::os::fd::OwnedFd,
    is_dir: bool,
    file: std::fs::File,
    created: bool,
}

/// The placeholders of a run. Concurrent runs in one project share them: each holds a shared
/// lock on every one it relies on, and the last run to finish removes it. Without the locks a
/// run ending would remove a placeholder another run still relied on, and on unlink the kernel
/// detaches the mount on it in the other run's namespace: that run could then create the
/// protected path.
pub(crate) struct Placeholders(Vec<Held>);

impl Placeholders {
    /// Create (or find) the empty placeholder at `path` and hold it. A placeholder found
    /// mid-removal by another run is made again. Every step goes through the parent directory
    /// opened with no link followed: a directory of the project swapped for a link to
    /// elsewhere (by a command running beside this run) fails the run instead of having
    /// pinfold create files there.
    fn hold(&mut self, path: &Path, is_dir: bool) -> Result<(), SandboxError> {
        use std::os::unix::fs::MetadataExt;
        let (Some(parent_path), Some(name)) = (path.parent(), path.file_name()) else {
            return Err(SandboxError::PlaceholderChanging { path: path.to_path_buf() });
        };
        let parent = sys::open_dir_no_symlinks(parent_path).map_err(setup_err(Step::CreatePlaceholder(path.to_path_buf())))?;
        for _ in 0..16 {
            // A file made here is held by the descriptor that made it; a directory, or a
            // placeholder found, is opened (without following a link planted in its place).
            let made = if is_dir {
                sys::mkdirat(&parent, name, 0o755).map(|()| None)
            } else {
                sys::openat(&parent, name, libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL, 0o644).map(Some)
            };
            let (created, made) = match made {
                Ok(f) => (true, f),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => (false, None),
                Err(source) => return Err(SandboxError::Setup { step: Step::CreatePlaceholder(path.to_path_buf()), source }),
            };
            let file = match made.map_or_else(|| sys::openat(&parent, name, libc::O_RDONLY, 0), Ok) {
                Ok(f) => f,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(source) => return Err(SandboxError::Setup { step: Step::OpenPlaceholder(path.to_path_buf()), source }),
            };
            if created {
                // Best effort: where the file system has no user xattrs the placeholder is
                // left in place after the run rather than risk removing a user's file.
                let _ = sys::fsetxattr(&file, PLACEHOLDER_MARK, b"1");
            }
            // One found with the mark is a placeholder too, perhaps left by a run that was
            // killed before it could remove it: this run removes it when it is the last out.
            let created = created || sys::fhasxattr(&file, PLACEHOLDER_MARK);
            sys::flock(&file, libc::LOCK_SH).map_err(setup_err(Step::LockPlaceholder(path.to_path_buf())))?;
            // Still what the path names, through no link: the parent's descriptor is the
            // directory at the path now, and the name in it is what is held.
            let here = sys::open_dir_no_symlinks(parent_path).and_then(|d| sys::fd_id(&d));
            let same_parent = matches!((here, sys::fd_id(&parent)), (Ok(a), Ok(b)) if a == b);
            if let (Ok(h), Ok((dev, ino, _, _)), true) = (file.metadata(), sys::statat(&parent, name), same_parent)
                && (h.dev(), h.ino()) == (dev, ino)
            {
                self.0.push(Held { path: path.to_path_buf(), parent, is_dir, file, created });
                return Ok(());
            }
            if !same_parent {
                return Err(SandboxError::PlaceholderChanging { path: path.to_path_buf() });
            }
            // Removed (or replaced) between our open and our lock: start over.
        }
        Err(SandboxError::PlaceholderChanging { path: path.to_path_buf() })
    }

    fn created(&self) -> Vec<PathBuf> {
        self.0.iter().filter(|h| h.created).map(|h| h.path.clone()).collect()
    }

    /// Every placeholder held, and whether it is a directory.
    pub(crate) fn paths(&self) -> Vec<(PathBuf, bool)> {
        self.0.iter().map(|h| (h.path.clone(), h.is_dir)).collect()
    }

    /// Hold each of `paths` (made where missing), as a run does.
    pub(crate) fn hold_all(paths: &[(PathBuf, bool)]) -> Result<Placeholders, SandboxError> {
        let mut held = Placeholders(Vec::new());
        for (p, is_dir) in paths {
            held.hold(p, *is_dir)?;
        }
        Ok(held)
    }
}

impl Drop for Placeholders {
    fn drop(&mut self) {
        use std::os::unix::fs::MetadataExt;
        for h in self.0.drain(..).rev() {
            // Granted only when no other run holds it: the last one out removes it.
            if sys::flock(&h.file, libc::LOCK_EX | libc::LOCK_NB).is_err() || !sys::fhasxattr(&h.file, PLACEHOLDER_MARK) {
                continue;
            }
            let Some(name) = h.path.file_name() else { continue };
            let (Ok(held), Ok((dev, ino, mode, size))) = (h.file.metadata(), sys::statat(&h.parent, name)) else { continue };
            if (held.dev(), held.ino()) != (dev, ino) {
                continue;
            }
            if h.is_dir {
                let _ = sys::unlinkat(&h.parent, name, libc::AT_REMOVEDIR);
            } else if mode & libc::S_IFMT == libc::S_IFREG && size == 0 {
                let _ = sys::unlinkat(&h.parent, name, 0);
            }
        }
    }
}

/// Whether `p` is an empty regular file or an empty directory: what a placeholder looks like.
fn empty_file_or_dir(p: &Path) -> Option<bool> {
    let m = std::fs::symlink_metadata(p).ok()?;
    if m.is_file() && m.len() == 0 {
        Some(false)
    } else if m.is_dir() && std::fs::read_dir(p).ok()?.next().is_none() {
        Some(true)
    } else {
        None
    }
}

/// What every backend starts from: the policy resolved against the file system, its
/// placeholders made and held, the environment scrubbed, and the report of what is granted.
pub(crate) struct Prepared {
    pub(crate) resolved: Resolved,
    /// Held until the run ends (dropped then: the last run out removes a placeholder).
    pub(crate) held: Placeholders,
    pub(crate) cwd: PathBuf,
    pub(crate) run_dir: PathBuf,
    pub(crate) tmpdir: PathBuf,
    pub(crate) env: Vec<(String, String)>,
    pub(crate) uid: u32,
    pub(crate) gid: u32,
    pub(crate) report: SandboxReport,
    /// Watching the way to every protected path from before anything is mounted.
    pub(crate) tripwire: crate::tripwire::Tripwire,
}

/// The working directory as the kernel names it. The caller names an absolute one without
/// links (getcwd, a canonical `--cwd`): a link on its way now is a directory swapped for one
/// by a command beside this run, and is refused. (Found: looked up through links and then
/// checked again, a swap between the two looks went unseen.)
fn working_dir(named: &Path) -> Result<PathBuf, SandboxError> {
    let step = || Step::WorkingDir(named.to_path_buf());
    if !named.is_absolute() {
        return sys::canonicalize(named).map_err(setup_err(step()));
    }
    let fd = sys::open_path_no_symlinks(named).map_err(|e| match e.raw_os_error() {
        Some(libc::ELOOP) => SandboxError::Setup {
            step: step(),
            source: std::io::Error::other(format!(
                "{} leads through a link now; it did not when pinfold started: a command beside this one may have swapped a directory on its way for one",
                named.display()
            )),
        },
        _ => SandboxError::Setup { step: step(), source: e },
    })?;
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).map_err(setup_err(step()))
}

/// Resolve `policy`, make and hold its placeholders, scrub the environment: the part of a
/// run that does not depend on the backend.
pub(crate) fn prepare(policy: &Policy) -> Result<Prepared, SandboxError> {
    let cwd = working_dir(&policy.cwd)?;
    let mut r = resolve(policy)?;
    let (uid, gid) = sys::ids();
    let run_dir = run_base(uid)?;
    let tmpdir = run_dir.join("tmp");
    // Placeholders, so that deny paths that do not exist cannot be created; and a shared lock
    // on every empty protected path that exists (it may be another run's placeholder, which
    // must outlive this run).
    let mut held = Placeholders(Vec::new());
    for (i, (_, ph, is_dir)) in r.placeholders.iter().enumerate() {
        // Several deny paths may share one (`.git` for `.git/hooks` and `.git/config`).
        if r.placeholders[..i].iter().any(|(_, p, _)| p == ph) {
            continue;
        }
        held.hold(ph, *is_dir)?;
        if !r.read_deny.iter().any(|(p, _)| p == ph) {
            r.write_deny.push(ph.clone());
        }
    }
    for d in r.write_deny.clone() {
        if held.0.iter().any(|h| h.path == d) {
            continue;
        }
        if let Some(is_dir) = empty_file_or_dir(&d) {
            held.hold(&d, is_dir)?;
        } else if std::fs::symlink_metadata(&d).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound) {
            // Gone since it was resolved: another run's placeholder, removed as that run
            // ended. This run makes (and holds) its own, so the path stays protected and the
            // mount on it has something to bind.
            held.hold(&d, false)?;
        }
    }
    // Read-deny paths beneath a writable root alike: an empty one may be another run's
    // placeholder (or a kept container's), which must outlive this run.
    for (d, _) in r.read_deny.clone() {
        if held.0.iter().any(|h| h.path == d) || !under_any(&d, &r.writable) {
            continue;
        }
        if let Some(is_dir) = empty_file_or_dir(&d) {
            held.hold(&d, is_dir)?;
        } else if std::fs::symlink_metadata(&d).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound) {
            held.hold(&d, false)?;
        }
    }
    // The tripwire, before anything is mounted: every read-deny path, every write-deny path
    // a command could otherwise write, and the read-deny paths outside the writable roots as
    // the policy names them (a missing one has no cover: its making must stop the run).
    // A container has nothing of the host but what is bound into it, the writable roots:
    // what lies outside them cannot reach it, and its change is no reason to stop it.
    let outside_too = policy.backend != crate::BackendKind::Container;
    let mut guarded: Vec<PathBuf> = r.read_deny.iter().map(|(p, _)| p.clone()).filter(|p| outside_too || under_any(p, &r.writable)).collect();
    // (Not git's objects and packs, `shared`: git on the host removes and makes them, and
    // they steer nothing; hundreds of them would each cost a watch.)
    guarded.extend(r.write_deny.iter().filter(|p| under_any(p, &r.writable) && !policy.shared.iter().any(|s| p.starts_with(s))).cloned());
    if outside_too {
        guarded.extend(policy.read_deny.iter().filter(|p| p.is_absolute() && !policy.writable.iter().any(|w| p.starts_with(w))).cloned());
    }
    let tripwire = crate::tripwire::Tripwire::new(&guarded)?;
    let mut set_env = policy.set_env.clone();
    if policy.private_tmp {
        set_env.push(("TMPDIR".into(), tmpdir.display().to_string()));
    }
    let vars = std::env::vars_os().filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)));
    let (vars, mut forced): (Vec<_>, Vec<_>) = vars.partition(|(k, _)| !policy.remove_env.contains(k));
    let vars = vars.into_iter();
    let (env, mut env_removed) = env::scrub(vars, &policy.keep_env, &set_env);
    env_removed.extend(forced.drain(..).map(|(k, _)| k).filter(|k| !set_env.iter().any(|(s, _)| s == k)));
    env_removed.sort();
    env_removed.dedup();
    let mut report = SandboxReport {
        backend: policy.backend,
        writable: r.writable.clone(),
        missing_writable: r.missing_writable.clone(),
        write_deny: r.write_deny.clone(),
        placeholders: held.created(),
        read_deny: r.read_deny.iter().map(|(p, _)| p.clone()).collect(),
        network: Some(policy.network),
        proxy: (policy.network == Network::Proxy).then(|| format!("127.0.0.1:{}", policy.proxy_port)),
        tmpdir: policy.private_tmp.then(|| tmpdir.clone()),
        env_removed,
        ..SandboxReport::default()
    };
    if policy.private_tmp {
        report.writable.push(tmpdir.clone());
    }
    for d in &r.links_unseen {
        report.degraded.push(format!(
            "links in the protected directory {}: looked for in its first {LINKS_ENTRIES} entries only; a link beyond leaves the file open through it",
            d.display()
        ));
    }
    Ok(Prepared { resolved: r, held, cwd, run_dir, tmpdir, env, uid, gid, report, tripwire })
}

pub(crate) fn run(
    policy: &Policy,
    argv: &[String],
    pre: Option<Prestart>,
    hooks: crate::Hooks<'_>,
) -> Result<Outcome, SandboxError> {
    if argv.is_empty() {
        return Err(SandboxError::NoCommand);
    }
    let abi = sys::landlock_abi();
    if abi < 1 && !policy.allow_degraded {
        return Err(SandboxError::Unsupported {
            layer: "Landlock",
            why: "the kernel reports no Landlock ABI".into(),
            hint: "use Linux 5.13 or newer with Landlock enabled (lsm=…,landlock), or pass --allow-degraded to run without it".into(),
        });
    }
    let Prepared { resolved: r, held, cwd, run_dir, env, uid, gid, mut report, tripwire, .. } = prepare(policy)?;
    // A prestarted sandbox is used only if it was started for this very run directory.
    let pre = pre.filter(|p| p.run_dir == run_dir);
    let spec = Spec {
        writable: r.writable.clone(),
        pins: r.pins.clone(),
        write_deny: r.write_deny.clone(),
        read_deny: r.read_deny.clone(),
        network_off: policy.network != Network::On,
        proxy_port: (policy.network == Network::Proxy).then_some(policy.proxy_port),
        run_dir: run_dir.clone(),
        private_tmp: policy.private_tmp,
        cwd,
        argv: argv.to_vec(),
        env,
        landlock_abi: abi,
        allow_degraded: policy.allow_degraded,
        uid,
        gid,
        gate: true,
        ignored_signals: sys::caller_ignored(crate::child::reset_before_exec()),
        watch: !policy.watch.is_empty() && hooks.observer.is_some(),
    };
    if abi < 1 {
        report.degraded.push("Landlock: the kernel has none; writes are limited by the mount layer only".into());
    }
    let watch: Vec<PathBuf> = policy.watch.iter().map(|w| sys::canonicalize(w).unwrap_or_else(|_| w.clone())).collect();
    let protected: Vec<PathBuf> = r
        .write_deny
        .iter()
        .chain(r.read_deny.iter().map(|(p, _)| p))
        .map(|p| sys::canonicalize(p).unwrap_or_else(|_| p.clone()))
        .collect();
    let (code, reaper) = spawn_and_wait(&spec, &mut report, pre, hooks, (&watch, &protected), &tripwire)?;
    drop(held);
    Ok(Outcome { code, report, reaper: std::sync::Arc::new(reaper) })
}

pub(crate) fn setup_err(step: Step) -> impl FnOnce(std::io::Error) -> SandboxError {
    move |source| SandboxError::Setup { step, source }
}

/// Whether this process runs a single thread (so a forked child may allocate).
fn single_threaded() -> bool {
    std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| s.rsplit(')').next().and_then(|rest| rest.split_whitespace().nth(17).map(str::to_string)))
        .is_some_and(|n| n == "1")
}

/// The namespaces init is cloned into when this process starts it directly: a user
/// namespace (init then has every capability in it, and makes the others it owns) and a pid
/// namespace (which only a new process can enter).
const INIT_NAMESPACES: libc::c_int = libc::CLONE_NEWUSER | libc::CLONE_NEWPID;

/// Start the sandbox: when this process is single-threaded, by cloning init straight into
/// new namespaces (the child may then run ordinary Rust); else by re-executing pinfold as a
/// helper that makes the namespaces and forks init (`PINFOLD_SANDBOX_REEXEC=1` forces that).
fn start_sandbox(spec: &Spec, rep_w: std::os::fd::OwnedFd) -> Result<libc::pid_t, SandboxError> {
    let force_exec = std::env::var_os("PINFOLD_SANDBOX_REEXEC").is_some_and(|v| v == "1");
    if !force_exec && single_threaded() {
        let pid = sys::clone_into_namespaces(INIT_NAMESPACES).map_err(SandboxError::Namespaces)?;
        if pid == 0 {
            crate::child::init_in_fork(Base::of(spec), Late::Known(spec.clone()), std::fs::File::from(rep_w));
        }
        return Ok(pid);
    }
    let (spec_r, spec_w) = sys::pipe().map_err(setup_err(Step::SpecPipe))?;
    sys::clear_cloexec(spec_r.as_raw_fd()).map_err(setup_err(Step::PassSpecPipe))?;
    sys::clear_cloexec(rep_w.as_raw_fd()).map_err(setup_err(Step::PassReportPipe))?;
    let exe = std::env::current_exe().map_err(setup_err(Step::FindExecutable))?;
    let child = std::process::Command::new(exe)
        .arg(crate::HELPER_ARG)
        .arg("run")
        .arg(spec_r.as_raw_fd().to_string())
        .arg(rep_w.as_raw_fd().to_string())
        .env_clear()
        .spawn()
        .map_err(setup_err(Step::StartHelper))?;
    drop(spec_r);
    drop(rep_w);
    let mut w = std::fs::File::from(spec_w);
    let json = serde_json::to_vec(spec).map_err(SandboxError::EncodeSpec)?;
    // A helper that died early closes the pipe: the error shows in its report instead.
    let _ = w.write_all(&json);
    Ok(child.id() as libc::pid_t)
}

/// A sandbox (its init) started before the policy is known; see [`crate::Prestart`].
#[derive(Debug)]
pub struct Prestart {
    pid: libc::pid_t,
    run_dir: PathBuf,
    spec_w: Option<std::os::fd::OwnedFd>,
    rep_r: Option<std::os::fd::OwnedFd>,
}

impl Prestart {
    /// Clone init now, if this process is single-threaded (the only case where a fork may
    /// go on running Rust); `None` otherwise, or when anything fails — the run then
    /// starts its sandbox as usual.
    pub fn begin() -> Option<Prestart> {
        if std::env::var_os("PINFOLD_SANDBOX_REEXEC").is_some_and(|v| v == "1") || !single_threaded() {
            return None;
        }
        let (uid, gid) = sys::ids();
        let run_dir = run_base(uid).ok()?;
        let (spec_r, spec_w) = sys::pipe().ok()?;
        let (rep_r, rep_w) = sys::socketpair().ok()?;
        let pid = sys::clone_into_namespaces(INIT_NAMESPACES).ok()?;
        if pid == 0 {
            // Only the parent writes the spec: init must see the pipe end when it is sent.
            drop(spec_w);
            drop(rep_r);
            let base = Base { run_dir, uid, gid };
            crate::child::init_in_fork(base, Late::Pipe(std::fs::File::from(spec_r)), std::fs::File::from(rep_w));
        }
        Some(Prestart { pid, run_dir, spec_w: Some(spec_w), rep_r: Some(rep_r) })
    }

    /// Send the spec; init's pid and its report pipe.
    fn commit(mut self, spec: &Spec) -> (libc::pid_t, std::os::fd::OwnedFd) {
        if let Some(w) = self.spec_w.take() {
            let mut w = std::fs::File::from(w);
            if let Ok(json) = serde_json::to_vec(spec) {
                // An init that died early closes the pipe: the error shows in its report.
                let _ = w.write_all(&json);
            }
        }
        let rep = self.rep_r.take().expect("a prestarted sandbox has its report pipe until committed");
        let pid = std::mem::replace(&mut self.pid, 0);
        (pid, rep)
    }
}

impl Drop for Prestart {
    /// Not used (the command was denied, say): init, and with it the sandbox, goes.
    fn drop(&mut self) {
        if self.pid > 0 {
            let _ = sys::kill(self.pid, libc::SIGKILL);
            let _ = sys::waitpid(self.pid, 0);
        }
    }
}

/// Start the sandbox (or use the prestarted one), pass on signals, read its report, wait.
fn spawn_and_wait(
    spec: &Spec,
    report: &mut SandboxReport,
    pre: Option<Prestart>,
    hooks: crate::Hooks<'_>,
    (watch, protected): (&[PathBuf], &[PathBuf]),
    tripwire: &crate::tripwire::Tripwire,
) -> Result<(i32, Reaper), SandboxError> {
    let crate::Hooks { release, listener, mut observer } = hooks;
    // Take forwarded signals from a signalfd while the command runs (Ctrl-C reaches us, the
    // sandbox and the command alike; the command, in its own session, gets it from us).
    let sigfd = sys::signalfd_for(FORWARDED).map_err(setup_err(Step::Signalfd))?;
    let started = match pre {
        Some(p) => Ok(p.commit(spec)),
        None => sys::socketpair()
            .map_err(setup_err(Step::ReportChannel))
            .and_then(|(rep_r, rep_w)| start_sandbox(spec, rep_w).map(|pid| (pid, rep_r))),
    };
    let (pid, rep_r) = match started {
        Ok(p) => p,
        Err(e) => {
            let _ = sys::unblock_signals(FORWARDED);
            return Err(e);
        }
    };
    // The sandbox sets itself up (mounts, the command's own layers) while the caller
    // finishes what must precede the command; the command then waits for the go (the spec's
    // `gate`). Not released: the sandbox is killed with nothing of the command run.
    if let Err(why) = release() {
        let _ = sys::kill(pid, libc::SIGKILL);
        let _ = sys::waitpid(pid, 0);
        let _ = sys::unblock_signals(FORWARDED);
        return Err(SandboxError::NotReleased(why));
    }
    // A sandbox that failed meanwhile has closed its end: its report says why.
    let _ = sys::send_nosignal(&rep_r, GO);
    let pidfd = sys::pidfd_open(pid).map_err(setup_err(Step::PidfdOpen))?;
    let rep = rep_r;
    let mut buf: Vec<u8> = Vec::new();
    let mut rep_open = true;
    let mut exited: Option<i32> = None;
    let mut listener_given = false;
    let mut watcher: Option<crate::watch::Watcher> = None;
    let reaper = Reaper::default();
    let mut tripped = None;
    let status = loop {
        let mut fds = vec![sigfd.as_raw_fd(), pidfd.as_raw_fd(), -1, -1, -1];
        if tripped.is_none() && tripwire.watching() {
            fds[4] = tripwire.raw();
        }
        if rep_open {
            fds[2] = rep.as_raw_fd();
        }
        if let Some(w) = &watcher {
            fds[3] = w.raw();
        }
        let events = sys::poll_events(&fds, -1).map_err(setup_err(Step::Poll))?;
        let ready: Vec<bool> = events.iter().map(|e| *e != 0).collect();
        if ready[0] {
            if let Ok(sig) = sys::read_signal(&sigfd) {
                let _ = sys::kill(pid, sig);
            }
        }
        if ready[4] && tripped.is_none() {
            tripped = tripwire.tripped();
            if tripped.is_some() {
                // Everything in the sandbox dies with init (or with the helper, whose death
                // kills init).
                let _ = sys::kill(pid, libc::SIGKILL);
            }
        }
        if ready[3] {
            // Taken only when one is waiting: with none, the kernel's receive would block.
            let done = match (&watcher, observer.as_mut()) {
                (Some(w), Some(obs)) if events[3] & libc::POLLIN != 0 => w.serve_one(&mut **obs).is_err(),
                (Some(_), Some(_)) => events[3] & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0,
                _ => true,
            };
            if done {
                // Every process with the filter has ended.
                watcher = None;
            }
        }
        if rep_open && ready[2] {
            let mut chunk = [0u8; 8192];
            match sys::recv_with_fds(&rep, &mut chunk) {
                Ok((0, _)) | Err(_) => rep_open = false,
                Ok((n, fds)) => {
                    buf.extend_from_slice(&chunk[..n]);
                    // A descriptor comes with the last line of the message that carried it
                    // (the kernel ends a read there): the proxy listener with `Listening`
                    // (from init), the watch listener with `Watching` (from the command).
                    // Any other is closed unused.
                    if let Some(fd) = fds.into_iter().next() {
                        let last = chunk[..n].strip_suffix(b"\n").unwrap_or(&chunk[..n]);
                        let last = last.rsplit(|b| *b == b'\n').next().unwrap_or_default();
                        match serde_json::from_slice::<Event>(last) {
                            Ok(Event::Listening { .. }) if spec.proxy_port.is_some() && !listener_given => {
                                listener_given = true;
                                listener(std::net::TcpListener::from(fd));
                            }
                            Ok(Event::Watching) if spec.watch && watcher.is_none() => {
                                watcher = Some(crate::watch::Watcher::new(fd, watch.to_vec(), protected.to_vec()));
                            }
                            _ => {}
                        }
                    }
                    exited = exited.or_else(|| exit_event(&buf));
                }
            }
        }
        if let Some(code) = exited {
            // Everything in the sandbox is dead and reaped; what is left (init, or the
            // re-exec helper) only waits for the namespaces' teardown, which need not delay
            // us: it is reaped later (see `Reaper`).
            let _ = sys::kill(pid, libc::SIGKILL);
            reaper.0.store(pid, std::sync::atomic::Ordering::Relaxed);
            break (code << 8) & 0xff00;
        }
        if ready[1] {
            if let Ok(Some((_, st))) = sys::waitpid(pid, 0) {
                break st;
            }
        }
    };
    if exited.is_none() {
        let mut chunk = [0u8; 8192];
        while let Ok((n, _)) = sys::recv_with_fds(&rep, &mut chunk)
            && n > 0
        {
            buf.extend_from_slice(&chunk[..n]);
        }
    }
    let _ = sys::unblock_signals(FORWARDED);
    drop(sigfd);
    // A change not yet read when the command ended counts as well: the command ran with it.
    if let Some(t) = tripped.or_else(|| tripwire.tripped_at_end()) {
        return Err(SandboxError::ProtectedChanged { path: t.path, created: t.created });
    }
    let code = match exited {
        Some(c) => c,
        None if libc::WIFEXITED(status) => libc::WEXITSTATUS(status),
        None => 128 + libc::WTERMSIG(status),
    };
    let mut failed = None;
    let mut confined = false;
    for line in buf.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        match serde_json::from_slice::<Event>(line) {
            Ok(Event::Mounted) => report.namespaces = Some(LayerStatus::Enforced),
            Ok(Event::Confined { landlock, seccomp, degraded }) => {
                confined = true;
                report.landlock = landlock;
                report.seccomp = seccomp;
                report.degraded.extend(degraded);
                report.hygiene = Some(LayerStatus::Enforced);
            }
            Ok(Event::Failed { step }) => failed = Some(step),
            Ok(Event::ExecFailed { .. } | Event::Exited { .. } | Event::Listening { .. } | Event::Watching) | Err(_) => {}
        }
    }
    if let Some(step) = failed {
        return Err(SandboxError::child(step));
    }
    if !confined && code == SETUP_FAILED {
        return Err(SandboxError::HelperEnded);
    }
    Ok((code, reaper))
}

/// The sandbox's last process (its pid, 0 for none), reaped on drop unless forgotten.
#[derive(Debug, Default)]
pub(crate) struct Reaper(std::sync::atomic::AtomicI32);

impl Reaper {
    pub(crate) fn forget(&self) {
        self.0.store(0, std::sync::atomic::Ordering::Relaxed);
    }
}

impl Drop for Reaper {
    fn drop(&mut self) {
        let pid = *self.0.get_mut();
        if pid > 0 {
            let _ = sys::waitpid(pid, 0);
        }
    }
}

/// The `Exited` event, once its line is complete in `buf`.
fn exit_event(buf: &[u8]) -> Option<i32> {
    buf.split(|b| *b == b'\n').find_map(|l| match serde_json::from_slice::<Event>(l) {
        Ok(Event::Exited { code }) => Some(code),
        _ => None,
    })
}


#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob_match(".env*", ".env.local"));
        assert!(glob_match("id_*", "id_rsa"));
        assert!(!glob_match("id_*", "known_hosts"));
        assert!(glob_match("f[0-9]", "f1"));
        assert!(glob_match("f[!0-9]", "fx"));
    }

    #[test]
    fn expansion_and_placeholders() {
        let t = tempfile::tempdir().unwrap();
        std::fs::write(t.path().join(".env.local"), "").unwrap();
        std::fs::write(t.path().join(".envrc"), "").unwrap();
        let got = expand(&t.path().join(".env*"));
        assert_eq!(got.len(), 2);
        assert_eq!(placeholder_for(&t.path().join("a"), &mut Memo::default()), Some((t.path().join("a"), false)));
        assert_eq!(placeholder_for(&t.path().join("x/y/z"), &mut Memo::default()), Some((t.path().join("x"), true)));
    }
}
