//! The log's files: the live `ledger.jsonl` and the numbered archives rotation leaves behind
//! (`ledger.000001.jsonl`, `ledger.000002.jsonl`, …, oldest first), reading them in order,
//! and following the log as it grows ([`Follower`]).
//!
//! Rotation renames the live file to the next archive number under the append lock; the chain
//! continues in a new live file (see [`crate::Ledger::with_rotate_bytes`]). Readers that list
//! the files take the same lock, shared, for the moment it takes to open them, so that a
//! rotation cannot slip between the listing and the opening.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::{Error, Paths};

/// The file name of archive number `n` (from 1): `ledger.000001.jsonl`.
pub fn archive_name(n: u64) -> String {
    format!("ledger.{n:06}.jsonl")
}

/// The number of an archive file name, when it is one (exactly as [`archive_name`] writes it).
pub fn archive_number(name: &str) -> Option<u64> {
    let digits = name.strip_prefix("ledger.")?.strip_suffix(".jsonl")?;
    if digits.len() < 6 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    (n > 0 && archive_name(n) == name).then_some(n)
}

/// The archives in `dir`, oldest (lowest number) first.
pub fn archives(dir: &Path) -> Result<Vec<(u64, PathBuf)>, Error> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io("list", dir, e)),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::io("list", dir, e))?;
        if let Some(n) = entry.file_name().to_str().and_then(archive_number) {
            out.push((n, entry.path()));
        }
    }
    out.sort_unstable();
    Ok(out)
}

/// One file of the log, opened, with its length when it was opened.
#[derive(Debug)]
pub struct LogFile {
    pub path: PathBuf,
    /// The archive number; `None` for the live file.
    pub number: Option<u64>,
    pub file: File,
    /// Its length when the snapshot was taken: read no further.
    pub len: u64,
}

impl LogFile {
    /// Its bytes up to the length it had when the snapshot was taken.
    pub fn read(&self) -> Result<Vec<u8>, Error> {
        // Into spare capacity, not a zeroed buffer: a file can be tens of megabytes.
        let mut buf = Vec::with_capacity(self.len as usize);
        let mut f = &self.file;
        f.seek(SeekFrom::Start(0))
            .and_then(|_| f.take(self.len).read_to_end(&mut buf))
            .map_err(|e| Error::io("read", &self.path, e))?;
        Ok(buf)
    }
}

/// Every file of the log in `dir`, oldest first (the archives, then the live file if it
/// exists), opened together under a shared append lock so that they form one consistent
/// chain even while others append and rotate.
pub fn snapshot(dir: &Path) -> Result<Vec<LogFile>, Error> {
    let paths = Paths::new(dir);
    // Best effort: a read-only copy of a ledger has no lock to take, and needs none.
    let lock = File::open(&paths.lock).ok().filter(|l| l.lock_shared().is_ok());
    let result = (|| {
        let mut out = Vec::new();
        for (n, path) in archives(dir)? {
            let file = File::open(&path).map_err(|e| Error::io("open", &path, e))?;
            let len = file.metadata().map_err(|e| Error::io("read", &path, e))?.len();
            out.push(LogFile { path, number: Some(n), file, len });
        }
        match File::open(&paths.log) {
            Ok(file) => {
                let len = file.metadata().map_err(|e| Error::io("read", &paths.log, e))?.len();
                out.push(LogFile { path: paths.log.clone(), number: None, file, len });
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io("open", &paths.log, e)),
        }
        Ok(out)
    })();
    if let Some(l) = lock {
        let _ = l.unlock();
    }
    result
}

/// The complete (newline-terminated) lines of `bytes` that parse as JSON, in order.
pub fn parse_records(bytes: &[u8]) -> Vec<Value> {
    let mut out = Vec::new();
    let mut start = 0;
    for nl in memchr::memchr_iter(b'\n', bytes) {
        if let Ok(v) = serde_json::from_slice(&bytes[start..nl]) {
            out.push(v);
        }
        start = nl + 1;
    }
    out
}

fn file_id(m: &std::fs::Metadata) -> (u64, u64) {
    (m.dev(), m.ino())
}

/// Follows the log as records are appended, across rotations: the record stream of
/// `tail -f`. [`Follower::poll`] returns the complete records appended since the last call, in
/// order; it never returns a record twice (it remembers the last sequence number it gave) and
/// never a line that is still being written.
///
/// How it keeps its place: it holds the file it is reading open. When the live path names
/// another file (a rotation renamed the one it holds), the held file is final: it reads it to
/// its end, then every archive newer than it, then the new live file.
#[derive(Debug)]
pub struct Follower {
    dir: PathBuf,
    live: PathBuf,
    current: Option<Current>,
    /// Archives up to this number have been read (or were there before following began).
    done_through: u64,
    /// Records below this sequence number are not returned again.
    next_seq: Option<u64>,
}

#[derive(Debug)]
struct Current {
    file: File,
    id: (u64, u64),
    /// Bytes consumed: always the end of a complete line.
    offset: u64,
}

impl Follower {
    /// Start at the current end of the log in `dir`: [`poll`](Self::poll) returns what is
    /// appended from now on.
    pub fn from_end(dir: &Path) -> Result<Follower, Error> {
        let paths = Paths::new(dir);
        let done_through = archives(dir)?.last().map_or(0, |(n, _)| *n);
        let current = match File::open(&paths.log) {
            Ok(file) => {
                let meta = file.metadata().map_err(|e| Error::io("read", &paths.log, e))?;
                let offset = end_of_complete_lines(&file, &paths.log, meta.len())?;
                Some(Current { file, id: file_id(&meta), offset })
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(Error::io("open", &paths.log, e)),
        };
        Ok(Follower { dir: dir.to_path_buf(), live: paths.log, current, done_through, next_seq: None })
    }

    /// Do not return records with sequence numbers up to and including `seq` (they were shown
    /// already, for instance as the backlog `tail -f` prints first).
    pub fn skip_through(&mut self, seq: u64) {
        self.next_seq = Some(self.next_seq.map_or(seq + 1, |n| n.max(seq + 1)));
    }

    /// The records appended since the last call, oldest first.
    pub fn poll(&mut self) -> Result<Vec<Value>, Error> {
        let mut out = Vec::new();
        // Each round either finds the held file still live (done) or moves one file on; a
        // burst of rotations is caught up with over a few rounds or the next poll.
        for _ in 0..16 {
            if let Some(cur) = &mut self.current {
                self.next_seq = read_new(cur, &self.live, &mut out, self.next_seq)?;
                let live_id = std::fs::metadata(&self.live).ok().map(|m| file_id(&m));
                if live_id == Some(cur.id) {
                    break;
                }
                // Rotated (or removed): the held file was renamed after its last line was
                // written, so what it holds now is all it will ever hold.
                self.next_seq = read_new(cur, &self.live, &mut out, self.next_seq)?;
                let id = cur.id;
                if let Some(n) = self.archive_with_id(id)? {
                    self.done_through = self.done_through.max(n);
                }
                self.current = None;
            }
            // Between files: the archives newer than the last one read, then the live file.
            for (n, path) in archives(&self.dir)? {
                if n > self.done_through {
                    self.read_whole(&path, &mut out)?;
                    self.done_through = n;
                }
            }
            let file = match File::open(&self.live) {
                Ok(f) => f,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => break,
                Err(e) => return Err(Error::io("open", &self.live, e)),
            };
            let id = file_id(&file.metadata().map_err(|e| Error::io("read", &self.live, e))?);
            // An archive may have appeared between the listing and the open: it is older than
            // the file just opened, unless it *is* that file (rotated again already).
            let list = archives(&self.dir)?;
            let mut ours = None;
            for (n, path) in &list {
                if std::fs::metadata(path).is_ok_and(|m| file_id(&m) == id) {
                    ours = Some(*n);
                }
            }
            for (n, path) in list {
                if n > self.done_through && ours.is_none_or(|o| n < o) {
                    self.read_whole(&path, &mut out)?;
                    self.done_through = n;
                }
            }
            self.current = Some(Current { file, id, offset: 0 });
        }
        Ok(out)
    }

    fn archive_with_id(&self, id: (u64, u64)) -> Result<Option<u64>, Error> {
        Ok(archives(&self.dir)?
            .into_iter()
            .find(|(_, p)| std::fs::metadata(p).is_ok_and(|m| file_id(&m) == id))
            .map(|(n, _)| n))
    }

    fn read_whole(&mut self, path: &Path, out: &mut Vec<Value>) -> Result<(), Error> {
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(Error::io("read", path, e)),
        };
        self.next_seq = keep_new(parse_records(&bytes), out, self.next_seq);
        Ok(())
    }
}

/// Move the records with `seq` at or above `next` into `out`; returns the new `next`.
fn keep_new(records: Vec<Value>, out: &mut Vec<Value>, mut next: Option<u64>) -> Option<u64> {
    for r in records {
        let seq = r["seq"].as_u64();
        if let (Some(s), Some(n)) = (seq, next)
            && s < n
        {
            continue;
        }
        if let Some(s) = seq {
            next = Some(s + 1);
        }
        out.push(r);
    }
    next
}

/// Read the complete lines after `cur.offset`.
fn read_new(cur: &mut Current, path: &Path, out: &mut Vec<Value>, next: Option<u64>) -> Result<Option<u64>, Error> {
    let len = cur.file.metadata().map_err(|e| Error::io("read", path, e))?.len();
    if len < cur.offset {
        // Cut below what was read (by hand: repair only cuts after the last complete line).
        cur.offset = end_of_complete_lines(&cur.file, path, len)?;
        return Ok(next);
    }
    if len == cur.offset {
        return Ok(next);
    }
    let mut buf = vec![0u8; (len - cur.offset) as usize];
    cur.file.read_exact_at(&mut buf, cur.offset).map_err(|e| Error::io("read", path, e))?;
    let Some(last_nl) = memchr::memrchr(b'\n', &buf) else { return Ok(next) };
    cur.offset += last_nl as u64 + 1;
    Ok(keep_new(parse_records(&buf[..=last_nl]), out, next))
}

/// The offset just after the last newline in the first `len` bytes of `file` (0 if none).
pub(crate) fn end_of_complete_lines(file: &File, path: &Path, len: u64) -> Result<u64, Error> {
    let mut end = len;
    let mut buf = vec![0u8; 65_536];
    while end > 0 {
        let start = end.saturating_sub(buf.len() as u64);
        let chunk = &mut buf[..(end - start) as usize];
        file.read_exact_at(chunk, start).map_err(|e| Error::io("read", path, e))?;
        if let Some(p) = memchr::memrchr(b'\n', chunk) {
            return Ok(start + p as u64 + 1);
        }
        end = start;
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn archive_names_round_trip() {
        assert_eq!(archive_name(1), "ledger.000001.jsonl");
        assert_eq!(archive_number("ledger.000001.jsonl"), Some(1));
        assert_eq!(archive_number("ledger.1234567.jsonl"), Some(1_234_567));
        for bad in ["ledger.jsonl", "ledger.1.jsonl", "ledger.0000001.jsonl", "ledger.000000.jsonl", "ledger.00000a.jsonl", "ledger.000001.jsonl.tmp", "x.000001.jsonl"] {
            assert_eq!(archive_number(bad), None, "{bad}");
        }
    }
}
