//! Project policy files are read only with content the user approved, as direnv reads an
//! `.envrc` only once allowed.
//!
//! A project file (`pinfold.*`, `pinfold.local.*` and what they extend) decides what agents
//! may run and how strong their sandbox is, and anyone who can change the project can write
//! one: a sandboxed command, an agent's file tool, a `git pull` of someone else's commit. So a
//! project file is read only when its exact content (SHA-256, with its path) is in the list
//! `pinfold trust` keeps in the state directory (`trusted`, one `HASH<TAB>PATH` a line; hidden
//! and read-only in every sandbox). Any change, the user's own included, needs `pinfold trust`
//! again. The user's own files (`$XDG_CONFIG_HOME/pinfold`) and a `-c` file are theirs.
//!
//! `pinfold exec` also keeps, in the state directory, when each writable root was open to
//! sandboxed commands (`sandbox-roots`, a line per root: the root, its intervals, the runs
//! going on; rewritten in place under an exclusive lock, read under a shared one). A refusal
//! uses it to say whether a sandboxed command could have written the file: its status-change
//! time (ctime: set by the kernel on every creation or change, never to a time the caller
//! chooses) lies in such an interval. Runs less than a second apart share an interval, and
//! past 32 intervals a root's oldest are merged into one.

use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::{Dirs, Error};

const ROOTS: &str = "sandbox-roots";
const TRUSTED: &str = "trusted";

#[derive(Debug, Clone)]
struct Span {
    root: PathBuf,
    /// When sandboxed commands could write the root: `[from, to]` in nanoseconds since the
    /// epoch, `from` on the kernel's coarse clock (the one inode times come from, so a change
    /// after it is never stamped before it), `to` on the fine one (a change before it is never
    /// stamped after it). Sorted; runs less than [`MERGE_GAP_NS`] apart are one interval, and
    /// beyond [`MAX_INTERVALS`] the oldest are merged into one.
    intervals: Vec<(i64, i64)>,
    /// Runs going on now: the `pinfold exec` process and when its span began.
    active: Vec<(u32, i64)>,
}

/// Runs closer together than this count as one interval (an agent's burst of commands).
const MERGE_GAP_NS: i64 = 1_000_000_000;
/// Intervals kept per root; older ones are merged (stricter: the gaps between them are lost).
const MAX_INTERVALS: usize = 32;

impl Span {
    fn add(&mut self, from: i64, to: i64) {
        self.intervals.push((from, to.max(from)));
        self.intervals.sort_unstable();
        let mut merged: Vec<(i64, i64)> = Vec::with_capacity(self.intervals.len());
        for (a, b) in self.intervals.drain(..) {
            match merged.last_mut() {
                Some(last) if a <= last.1 + MERGE_GAP_NS => last.1 = last.1.max(b),
                _ => merged.push((a, b)),
            }
        }
        if merged.len() > MAX_INTERVALS {
            let cut = merged.len() - MAX_INTERVALS + 1;
            let to = merged[cut - 1].1;
            let from = merged[0].0;
            merged.drain(..cut);
            merged.insert(0, (from, to));
        }
        self.intervals = merged;
    }

    /// Whether a change stamped `t` may have come from a sandboxed command.
    fn covers(&self, t: i64, now: i64) -> bool {
        self.intervals.iter().any(|(a, b)| *a <= t && t <= *b) || self.active.iter().any(|(_, from)| *from <= t && t <= now)
    }

    /// Read the part of a line after its root: `FROM-TO,FROM-TO…<TAB>PID:FROM,PID:FROM…`, as
    /// [`Entry::to_line`] writes it (roots with a tab or a line break in their path are not
    /// recorded: see [`begin_run`]).
    fn parse_rest(root: &str, rest: &str) -> Option<Span> {
        let (iv, ac) = rest.split_once('\t')?;
        Some(Span { root: PathBuf::from(root), intervals: pairs(iv, '-')?, active: pairs(ac, ':')? })
    }
}

/// `A<sep>B,A<sep>B…` (empty parts skipped) as numbers; `None` if one does not parse.
fn pairs<A: std::str::FromStr, B: std::str::FromStr>(text: &str, sep: char) -> Option<Vec<(A, B)>> {
    text.split(',').filter(|x| !x.is_empty()).map(|x| pair(x, sep)).collect()
}

fn pair<A: std::str::FromStr, B: std::str::FromStr>(x: &str, sep: char) -> Option<(A, B)> {
    let (a, b) = x.split_once(sep)?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

/// `CLOCK_REALTIME_COARSE`: the clock the kernel stamps inode times from (a tick, 4 ms here,
/// behind the fine clock at most). A file changed after this reading gets a ctime at or after it.
#[allow(unsafe_code)]
fn coarse_now_ns() -> i64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec, which `ts` is, and takes no other pointer.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_REALTIME_COARSE, &mut ts) };
    if r != 0 {
        // No coarse clock: a second earlier than the fine one is earlier than any tick.
        return now_ns() - 1_000_000_000;
    }
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

fn ctime_ns(m: &std::fs::Metadata) -> i64 {
    m.ctime() * 1_000_000_000 + m.ctime_nsec()
}

fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}


/// Read the record under a shared lock (writers replace it in place under an exclusive one).
/// `None` when it cannot be read as a whole: the caller then refuses, never allows.
fn read_all(dir: &Path) -> Option<String> {
    let f = match std::fs::File::open(dir.join(ROOTS)) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Some(String::new()),
        Err(_) => return None,
    };
    f.lock_shared().ok()?;
    let mut text = String::new();
    std::io::Read::read_to_string(&mut &f, &mut text).ok()?;
    Some(text)
}

/// The state directory, which holds the record.
fn state(dirs: &Dirs) -> Result<&Path, Error> {
    dirs.ledger_dir().map_err(|e| Error::new("no state directory for the record of sandboxed roots").cause(e))
}

/// A line of one of the run's roots in [`update_in`]: its runs going on read, its intervals
/// kept as text, changed at the end where that is all [`Span::add`] would do ([`add_text`]).
/// A busy root has 32 intervals; reading and writing them all at the start and end of every
/// run cost ~0.35M instructions per update with five roots.
struct Entry {
    root: PathBuf,
    intervals: String,
    active: Vec<(u32, i64)>,
}

impl Entry {
    /// Parse the part after the root; `None` when it is not a line pinfold wrote. The
    /// intervals are only checked for their characters here: one that does not parse fails a
    /// later [`add_text`] that needs it (and the update), or makes [`check`] refuse.
    fn parse(root: &str, rest: &str) -> Option<Entry> {
        let (iv, ac) = rest.split_once('\t')?;
        if !iv.bytes().all(|c| c.is_ascii_digit() || c == b'-' || c == b',') {
            return None;
        }
        Some(Entry { root: PathBuf::from(root), intervals: iv.to_string(), active: pairs(ac, ':')? })
    }

    fn add(&mut self, from: i64, to: i64) -> Option<()> {
        self.intervals = add_text(&self.intervals, from, to)?;
        Some(())
    }

    fn to_line(&self) -> String {
        use std::fmt::Write;
        let mut line = String::with_capacity(self.intervals.len() + 64 + 32 * self.active.len());
        let _ = write!(line, "{}\t{}\t", self.root.display(), self.intervals);
        for (i, (p, f)) in self.active.iter().enumerate() {
            let _ = write!(line, "{}{p}:{f}", if i > 0 { "," } else { "" });
        }
        line.push('\n');
        line
    }
}

/// The intervals `iv` (as a line holds them) with `[from, to]` added, as [`Span::add`] would
/// leave them. When the new interval starts at or after the last one's start, which is every
/// run's end in time order, only the last interval is read: it is extended, or the new one
/// appended (at the cap, with the two oldest merged). Anything else goes through
/// [`Span::add`]. `None`: an interval that
/// had to be read does not parse.
fn add_text(iv: &str, from: i64, to: i64) -> Option<String> {
    let to = to.max(from);
    if iv.is_empty() {
        return Some(format!("{from}-{to}"));
    }
    let (head, last) = match iv.rsplit_once(',') {
        Some((h, l)) => (Some(h), l),
        None => (None, iv),
    };
    let (a, b): (i64, i64) = pair(last, '-')?;
    let count = iv.bytes().filter(|&c| c == b',').count() + 1;
    if from >= a && count <= MAX_INTERVALS {
        if from <= b.saturating_add(MERGE_GAP_NS) {
            let merged = format!("{a}-{}", b.max(to));
            return Some(match head {
                Some(h) => format!("{h},{merged}"),
                None => merged,
            });
        }
        if count < MAX_INTERVALS {
            return Some(format!("{iv},{from}-{to}"));
        }
        // At the cap: the new one goes last and the two oldest become one (stricter: the gap
        // between them is lost), as `Span::add` does; only those two are read.
        let mut parts = iv.splitn(3, ',');
        if let (Some(first), Some(second), Some(rest)) = (parts.next(), parts.next(), parts.next()) {
            let (a0, _): (i64, i64) = pair(first, '-')?;
            let (_, b1): (i64, i64) = pair(second, '-')?;
            return Some(format!("{a0}-{b1},{rest},{from}-{to}"));
        }
    }
    let mut span = Span::parse_rest("", &format!("{iv}\t"))?;
    span.add(from, to);
    Some(span.intervals.iter().map(|(a, b)| format!("{a}-{b}")).collect::<Vec<_>>().join(","))
}

/// Change the records of `roots` in the state directory `dir` under an exclusive lock,
/// rewriting the one file in place (the other roots' lines as they were). A run on those roots
/// that died without closing its span is closed first, at the latest now.
fn update_in(dir: &Path, roots: &[PathBuf], mut f: impl FnMut(&mut Entry) -> Option<()>) -> Result<(), Error> {
    use std::io::{Read, Seek};
    fn fail(what: &'static str) -> impl Fn(std::io::Error) -> Error {
        move |e| Error::new(format!("cannot {what} the record of sandboxed roots")).cause(e)
    }
    // A line of ours that does not parse would be dropped with its root's history: that root
    // would then look never sandboxed. Refuse instead: the record is pinfold's own, in a
    // directory no sandbox can write, so a bad line means a bug or a disk error.
    let unreadable = || {
        Error::new(format!("the record of sandboxed roots ({}) has a line pinfold cannot read", dir.join(ROOTS).display()))
            .hint("remove the file only if no agent has run in a sandbox since: it is what keeps planted policy files out")
    };
    std::fs::create_dir_all(dir).map_err(fail("create the directory of"))?;
    let mut file = std::fs::OpenOptions::new().create(true).truncate(false).read(true).write(true).open(dir.join(ROOTS)).map_err(fail("open"))?;
    file.lock().map_err(fail("lock"))?;
    let mut text = String::new();
    file.read_to_string(&mut text).map_err(fail("read"))?;
    // Only the lines of `roots` are read and rewritten; every other line is copied as it is
    // (a record holds every root ever sandboxed, and reading and writing all of them at the
    // start and end of every run cost every run in proportion). Their runs that died without
    // closing are closed when a run next uses their root; until then such a span counts as
    // open, which is stricter, never laxer.
    enum Line<'a> {
        Kept(&'a str),
        Ours(Entry),
    }
    let mut lines: Vec<Line> = Vec::new();
    for line in text.lines() {
        let root = line.split_once('\t').map(|(root, _)| root);
        if !root.is_some_and(|r| roots.iter().any(|w| w.as_os_str() == r)) {
            lines.push(Line::Kept(line));
            continue;
        }
        let parsed = line.split_once('\t').and_then(|(root, rest)| Entry::parse(root, rest));
        lines.push(Line::Ours(parsed.ok_or_else(unreadable)?));
    }
    let now = now_ns();
    // Each pid looked up once (one run holds every root it writes).
    let mut seen: Vec<(u32, bool)> = Vec::new();
    let mut is_alive = |pid: u32| match seen.iter().find(|(p, _)| *p == pid) {
        Some((_, a)) => *a,
        None => {
            let a = alive(pid);
            seen.push((pid, a));
            a
        }
    };
    for line in &mut lines {
        let Line::Ours(entry) = line else { continue };
        let dead: Vec<(u32, i64)> = entry.active.iter().filter(|(p, _)| !is_alive(*p)).copied().collect();
        entry.active.retain(|(p, _)| !dead.iter().any(|(d, _)| d == p));
        for (_, from) in dead {
            entry.add(from, now).ok_or_else(unreadable)?;
        }
    }
    for root in roots {
        let found = lines.iter().position(|l| matches!(l, Line::Ours(e) if e.root == *root));
        let i = match found {
            Some(i) => i,
            None => {
                lines.push(Line::Ours(Entry { root: root.clone(), intervals: String::new(), active: Vec::new() }));
                lines.len() - 1
            }
        };
        if let Line::Ours(e) = &mut lines[i] {
            f(e).ok_or_else(unreadable)?;
        }
    }
    let mut out = String::with_capacity(text.len() + 128);
    for line in &lines {
        match line {
            Line::Kept(l) => {
                out.push_str(l);
                out.push('\n');
            }
            Line::Ours(e) => out.push_str(&e.to_line()),
        }
    }
    file.seek(std::io::SeekFrom::Start(0)).map_err(fail("rewrite"))?;
    file.write_all(out.as_bytes()).map_err(fail("rewrite"))?;
    file.set_len(out.len() as u64).map_err(fail("rewrite"))
}

/// A run's hold on its roots, recorded before its command starts; [`RunSpan::end`] when it
/// has ended.
#[derive(Debug)]
pub struct RunSpan {
    dir: PathBuf,
    roots: Vec<PathBuf>,
    from: i64,
}

/// Record that a sandboxed command is about to be able to write `roots`. `loaded` are the
/// policy files this run was judged by: if one changed within the coarse clock's present tick
/// (a person saved it just now), the record waits for the next tick, so that the file does not
/// look changed during the run (at most a tick, 4 ms here, and only then).
/// The record is kept in `dirs.state`.
pub fn begin_run(roots: &[PathBuf], loaded: &[PathBuf], dirs: &Dirs) -> Result<RunSpan, Error> {
    let roots: Vec<PathBuf> = roots.iter().map(|r| std::fs::canonicalize(r).unwrap_or_else(|_| r.clone())).collect();
    if let Some(bad) = roots.iter().find(|r| r.to_str().is_none_or(|s| s.contains(['\t', '\n', '\r']))) {
        return Err(Error::new(format!("pinfold cannot record the writable root {:?} (a tab, line break or non-UTF-8 name)", bad))
            .hint("rename it, or leave it out of the sandbox's writable roots"));
    }
    let pid = std::process::id();
    let newest = loaded.iter().filter_map(|f| std::fs::metadata(f).ok()).map(|m| ctime_ns(&m)).max().unwrap_or(i64::MIN);
    let mut from = coarse_now_ns();
    for _ in 0..25 {
        if from > newest {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
        from = coarse_now_ns();
    }
    let dir = state(dirs)?.to_path_buf();
    update_in(&dir, &roots, |e| {
        e.active.retain(|(p, _)| *p != pid);
        e.active.push((pid, from));
        Some(())
    })?;
    Ok(RunSpan { dir, roots, from })
}

impl RunSpan {
    /// The command and everything it started have ended.
    pub fn end(self) -> Result<(), Error> {
        let pid = std::process::id();
        let now = now_ns();
        update_in(&self.dir, &self.roots, |e| {
            e.active.retain(|(p, _)| *p != pid);
            e.add(self.from, now)
        })
    }
}

/// The path an approval names: absolute and normalised (`.` and `..` applied to the words),
/// with no link followed.
fn approval_path(f: &Path) -> PathBuf {
    pinfold_policy::matcher::normalize(&std::path::absolute(f).unwrap_or_else(|_| f.to_path_buf()))
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

fn trusted_entries(dir: &Path) -> Vec<(String, PathBuf)> {
    let Ok(text) = std::fs::read_to_string(dir.join(TRUSTED)) else { return Vec::new() };
    text.lines()
        .filter_map(|l| l.split_once('\t').map(|(h, p)| (h.to_string(), PathBuf::from(p))))
        .collect()
}

/// Refuse `files` (project-layer policy files, as loaded) whose exact content the user has not
/// approved with `pinfold trust`: a project file may come from anyone — a sandboxed command, an
/// agent's file tool, a `git pull` — and it decides what agents may run and how strong their
/// sandbox is. The refusal says whether a sandboxed command could have written the file.
pub fn check(files: &[PathBuf], dirs: &Dirs) -> Result<(), Error> {
    if files.is_empty() {
        return Ok(());
    }
    let dir = dirs
        .ledger_dir()
        .map_err(|e| Error::new("no state directory, where pinfold keeps the policy files you approved").cause(e).hint("set HOME, XDG_STATE_HOME or PINFOLD_STATE_DIR"))?;
    let mut trusted: Option<Vec<(String, PathBuf)>> = None;
    for f in files {
        let content = std::fs::read(f).map_err(|e| Error::new(format!("cannot read {}", f.display())).cause(e))?;
        // The path as loaded, links not followed: an approval is for these bytes at this
        // path, and a link planted here (`sub/pinfold.toml -> ../play/pinfold.toml`, or a
        // directory on the way) must not borrow the approval of the file it points at.
        let canonical = approval_path(f);
        let hash = sha256_hex(&content);
        let list = trusted.get_or_insert_with(|| trusted_entries(dir));
        if list.iter().any(|(h, p)| *h == hash && *p == canonical) {
            continue;
        }
        let approved_before = list.iter().any(|(_, p)| *p == canonical);
        let sandboxed = sandboxed_root(f, &canonical, dir);
        let why = match (&sandboxed, approved_before) {
            (Some(root), _) => format!(
                "{} was created or changed while sandboxed commands could write {}, and this content is not one you approved",
                f.display(),
                root.display()
            ),
            (None, true) => format!("{} changed since you approved it", f.display()),
            (None, false) => format!("{} is a project policy file you have not approved", f.display()),
        };
        return Err(Error::new(format!("{why}; pinfold reads project policy only with content you approved")).hint(format!(
            "read it, then run `pinfold trust {}` outside any sandbox (a project file decides what agents may run and how strong their sandbox is, and anyone who can change the project can write one)",
            f.display()
        )));
    }
    Ok(())
}

/// The writable root a sandboxed command held when `f` last changed, if any (for the refusal's
/// words: the decision does not depend on it).
fn sandboxed_root(f: &Path, canonical: &Path, dir: &Path) -> Option<PathBuf> {
    let text = read_all(dir)?;
    let ctime = ctime_ns(&std::fs::metadata(f).ok()?);
    let now = now_ns();
    text.lines()
        .filter_map(|l| l.split_once('\t'))
        .filter(|(root, _)| canonical.starts_with(root))
        .filter_map(|(root, rest)| Span::parse_rest(root, rest))
        .find(|s| s.covers(ctime, now))
        .map(|s| s.root)
}

/// Approve the present content of `files`; a later change needs approving again.
pub fn trust(files: &[PathBuf], dirs: &Dirs) -> Result<Vec<(PathBuf, String)>, Error> {
    let dir = dirs.ledger_dir().map_err(|e| Error::new("no state directory to keep trusted files in").cause(e))?;
    std::fs::create_dir_all(dir).map_err(|e| Error::new(format!("cannot create {}", dir.display())).cause(e))?;
    let mut out = Vec::new();
    let mut lines = String::new();
    for f in files {
        let canonical = approval_path(f);
        let content = std::fs::read(&canonical).map_err(|e| Error::new(format!("cannot read {}", f.display())).cause(e))?;
        let hash = sha256_hex(&content);
        let Some(p) = canonical.to_str().filter(|p| !p.contains(['\n', '\t'])) else {
            return Err(Error::new(format!("{} has a name pinfold cannot record (tab, line break or not UTF-8)", f.display())));
        };
        lines.push_str(&format!("{hash}\t{p}\n"));
        out.push((canonical, hash));
    }
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(TRUSTED))
        .map_err(|e| Error::new("cannot open the list of trusted policy files").cause(e))?;
    file.write_all(lines.as_bytes()).map_err(|e| Error::new("cannot write the list of trusted policy files").cause(e))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000_000_000;

    fn span() -> Span {
        Span { root: PathBuf::from("/p"), intervals: Vec::new(), active: Vec::new() }
    }

    #[test]
    fn runs_under_a_second_apart_share_an_interval() {
        let mut s = span();
        s.add(10 * S, 11 * S);
        s.add(11 * S + S / 2, 12 * S);
        s.add(20 * S, 21 * S);
        assert_eq!(s.intervals, [(10 * S, 12 * S), (20 * S, 21 * S)]);
        // Between two bursts, a change is not covered; inside one it is.
        assert!(!s.covers(15 * S, 30 * S));
        assert!(s.covers(11 * S + S / 4, 30 * S));
        // A run going on covers from its start until now.
        s.active.push((1, 25 * S));
        assert!(s.covers(26 * S, 27 * S));
        assert!(!s.covers(24 * S, 27 * S));
    }

    #[test]
    fn the_oldest_intervals_are_merged_past_the_cap() {
        let mut s = span();
        for i in 0..(MAX_INTERVALS as i64 + 10) {
            s.add(i * 10 * S, i * 10 * S + S);
        }
        assert_eq!(s.intervals.len(), MAX_INTERVALS);
        // Merged, the gaps between the oldest are covered: stricter, never laxer.
        assert!(s.covers(5 * S, i64::MAX));
        assert_eq!(s.intervals[0].0, 0);
    }

    /// A run rewrites only its own roots' lines: another root's line (here with a run that
    /// died unclosed, pid 0 never being a live process's) stays byte for byte, a run of ours
    /// that died is closed, and an unreadable line of ours is refused.
    #[test]
    fn an_update_touches_only_its_own_roots() {
        let dir = tempfile::tempdir().unwrap();
        let other = "/elsewhere\t1-2,5-9\t0:7\n";
        let ours = "/project\t1-2\t0:3\n";
        std::fs::write(dir.path().join(ROOTS), format!("{other}{ours}")).unwrap();
        update_in(dir.path(), &[PathBuf::from("/project")], |e| {
            e.active.push((42, 10));
            Some(())
        })
        .unwrap();
        let text = std::fs::read_to_string(dir.path().join(ROOTS)).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert_eq!(format!("{}\n", lines[0]), other);
        let span = Span::parse_rest("/project", lines[1].split_once('\t').unwrap().1).unwrap();
        assert_eq!(span.active, vec![(42, 10)], "{text}");
        assert!(span.intervals.iter().any(|(a, b)| *a <= 3 && *b >= now_ns() - 60_000_000_000), "the dead run's span is closed at about now: {text}");
        std::fs::write(dir.path().join(ROOTS), format!("{other}/project\tnonsense\n")).unwrap();
        assert!(update_in(dir.path(), &[PathBuf::from("/project")], |_| Some(())).is_err());
    }

    #[test]
    fn a_line_reads_back_as_written() {
        let mut e = Entry { root: PathBuf::from("/p"), intervals: String::new(), active: Vec::new() };
        e.add(3 * S, 4 * S).unwrap();
        e.add(9 * S, 10 * S).unwrap();
        e.active.push((42, 11 * S));
        let line = e.to_line();
        let (root, rest) = line.trim_end_matches('\n').split_once('\t').unwrap();
        let back = Span::parse_rest(root, rest).unwrap();
        assert_eq!(back.root, e.root);
        assert_eq!(back.intervals, vec![(3 * S, 4 * S), (9 * S, 10 * S)]);
        assert_eq!(back.active, e.active);
        assert!(Span::parse_rest("/p", "1-x\t").is_none());
        assert!(Entry::parse("/p", "1-x\t").is_none());
    }

    /// `add_text` reads only the last interval where it can; whatever it does, the intervals
    /// must come out as `Span::add` leaves them. Random runs (starts mostly in time order, some
    /// before the last interval, some inside it, gaps around the merge gap, past the cap),
    /// each step checked.
    #[test]
    fn adding_to_the_text_agrees_with_the_span() {
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for _ in 0..200 {
            let mut text = String::new();
            let mut span = span();
            let mut t = 1_700_000_000 * S;
            for _ in 0..80 {
                let (from, to) = match next(10) {
                    // Before the last interval's start: a long run ending late.
                    0 => (t - next(40) as i64 * S, t + next(3) as i64 * S),
                    // Inside the last interval, ending before it does (the clock went back).
                    9 => {
                        let from = t - next(S as u64) as i64;
                        (from, from + next(S as u64 / 2) as i64)
                    }
                    // Right at or inside the merge gap, or just past it.
                    1..=4 => {
                        t += next(3 * S as u64) as i64;
                        (t, t + next(S as u64) as i64)
                    }
                    _ => {
                        t += next(20) as i64 * S;
                        (t, t + next(5) as i64 * S)
                    }
                };
                t = t.max(to);
                text = add_text(&text, from, to).unwrap();
                span.add(from, to);
                let back = Span::parse_rest("", &format!("{text}\t")).unwrap();
                assert_eq!(back.intervals, span.intervals, "after adding {from}-{to}: {text}");
            }
        }
        assert!(add_text("1-2,x-3", 0, 1).is_none(), "a bad interval that has to be read fails the update");
    }
}
