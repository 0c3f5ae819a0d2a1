//! pinfold's audit ledger: an append-only, hash-chained, signed record of what agents tried,
//! what pinfold decided, what ran and how it ended.
//!
//! The ledger lives in a state directory (see [`state_dir`]) as a few files:
//!
//! | file | what |
//! |---|---|
//! | `ledger.jsonl` | the log: one record per line |
//! | `ledger.lock` | held (`flock`) by whoever appends, so that appends never interleave |
//! | `ledger.key` | the ed25519 seed that signs checkpoints, mode 0600 (or `$PINFOLD_LEDGER_KEY`) |
//! | `ledger.pub` | its public half, for anyone who verifies |
//! | `ledger.checkpoints` | a copy of every signed checkpoint, apart from the log |
//!
//! Each record names the hash of the one before it ([`canon`] defines the encoding that is
//! hashed). Every [`CHECKPOINT_INTERVAL`]-th record, and whenever [`Ledger::checkpoint`] is
//! called, a checkpoint record signs (record count, head hash, byte size): editing, removing
//! or reordering records covered by a checkpoint shows as a broken chain or a signature
//! mismatch, and truncating the log shows against the copy in `ledger.checkpoints`.
//!
//! ```
//! use pinfold_ledger::{Ledger, Record, Status};
//! let dir = tempfile::tempdir().unwrap();
//! let ledger = Ledger::open(dir.path()).unwrap();
//! ledger.append(Record::new("check", serde_json::json!({
//!     "command": "curl -H 'Authorization: Bearer abc123' https://x", "decision": "ask",
//! }))).unwrap();
//! let report = pinfold_ledger::verify(dir.path()).unwrap();
//! assert_eq!(report.status(), Status::Intact);
//! assert_eq!(report.records, 1);
//! let text = std::fs::read_to_string(dir.path().join("ledger.jsonl")).unwrap();
//! assert!(text.contains("Bearer [REDACTED]") && !text.contains("abc123"));
//! ```
//!
//! What it does **not** guarantee: whoever can write the state directory can delete records
//! at the end that no checkpoint covers yet, or delete the log together with its checkpoint
//! file; copying checkpoints elsewhere (`pinfold audit checkpoint --json`) closes that. Redaction
//! is by pattern ([`redact`]): credentials of other shapes are written as they are.

pub mod canon;
mod keys;
pub mod redact;
pub mod time;
mod verify;

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

pub use verify::{Fault, Problem, Report, Status, Torn};

/// The record format version written in every record's `v`.
pub const FORMAT_VERSION: u64 = 1;
/// A checkpoint is written at every sequence number that is a positive multiple of this.
pub const CHECKPOINT_INTERVAL: u64 = 1000;
/// The `prev` of the first record.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// Errors from opening, appending to, or reading a ledger.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot {what} {}", path.display())]
    Io { what: &'static str, path: PathBuf, source: std::io::Error },
    #[error("the signing key {} is readable by others (mode {mode:o}); it must be 0600", path.display())]
    KeyPermissions { path: PathBuf, mode: u32 },
    #[error("{} is not a 32-byte hex key", .0.display())]
    BadKey(PathBuf),
    #[error("the ledger's last record is damaged, refusing to append after it: {0}")]
    Damaged(Box<Problem>),
    #[error(transparent)]
    Float(#[from] canon::FloatError),
    #[error("no state directory: set PINFOLD_STATE_DIR, XDG_STATE_HOME or HOME")]
    NoStateDir,
}

impl Error {
    pub(crate) fn io(what: &'static str, path: &Path, source: std::io::Error) -> Error {
        Error::Io { what, path: path.to_path_buf(), source }
    }
}

/// The ledger's directory: `$PINFOLD_STATE_DIR`, else `$XDG_STATE_HOME/pinfold`, else
/// `~/.local/state/pinfold`.
pub fn state_dir() -> Result<PathBuf, Error> {
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    var("PINFOLD_STATE_DIR")
        .or_else(|| var("XDG_STATE_HOME").map(|d| d.join("pinfold")))
        .or_else(|| var("HOME").map(|h| h.join(".local/state/pinfold")))
        .ok_or(Error::NoStateDir)
}

/// The files of a ledger.
#[derive(Debug, Clone)]
pub struct Paths {
    pub log: PathBuf,
    pub lock: PathBuf,
    pub key: PathBuf,
    pub public: PathBuf,
    pub checkpoints: PathBuf,
}

impl Paths {
    pub fn new(dir: &Path) -> Paths {
        let key = std::env::var_os("PINFOLD_LEDGER_KEY")
            .filter(|v| !v.is_empty())
            .map_or_else(|| dir.join("ledger.key"), PathBuf::from);
        Paths {
            log: dir.join("ledger.jsonl"),
            lock: dir.join("ledger.lock"),
            key,
            public: dir.join("ledger.pub"),
            checkpoints: dir.join("ledger.checkpoints"),
        }
    }
}

/// What to record: a kind (`check`, `hook`, `exec_start`, `exec_end`, …), the session that
/// asked when an agent names one, and the payload.
#[derive(Debug, Clone)]
pub struct Record {
    pub kind: String,
    pub session: Option<String>,
    pub data: Value,
}

impl Record {
    pub fn new(kind: impl Into<String>, data: Value) -> Record {
        Record { kind: kind.into(), session: None, data }
    }

    pub fn session(mut self, session: impl Into<String>) -> Record {
        self.session = Some(session.into());
        self
    }
}

/// A record that was appended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Appended {
    pub seq: u64,
    pub hash: String,
}

/// What `repair` did.
#[derive(Debug, Clone)]
pub struct Repaired {
    /// Where the torn tail started, and how long it was.
    pub offset: u64,
    pub len: u64,
    /// The `repair` record that says so.
    pub record: Appended,
}

/// An open ledger. Appends from any number of `Ledger`s, in any number of processes, form one
/// chain: each takes the lock, reads the last record, appends, and releases.
#[derive(Debug)]
pub struct Ledger {
    paths: Paths,
    log: File,
    lock: File,
    fsync: bool,
    secrets: Vec<String>,
}

/// The end of the log as read under the lock.
struct Tail {
    /// Bytes of complete records.
    len: u64,
    /// Bytes after the last newline (a torn line).
    torn: u64,
    next_seq: u64,
    prev: String,
}

impl Ledger {
    /// Open (creating when needed) the ledger in `dir`. Appends are `fdatasync`ed unless
    /// `PINFOLD_LEDGER_FSYNC=0`.
    pub fn open(dir: &Path) -> Result<Ledger, Error> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| Error::io("create the state directory", dir, e))?;
        let paths = Paths::new(dir);
        let open = |p: &Path, append: bool| {
            OpenOptions::new()
                .read(true)
                .append(append)
                .write(!append)
                .create(true)
                .truncate(false)
                .mode(0o600)
                .open(p)
        };
        let log = open(&paths.log, true).map_err(|e| Error::io("open the ledger", &paths.log, e))?;
        let lock = open(&paths.lock, false).map_err(|e| Error::io("open the lock file", &paths.lock, e))?;
        let fsync = std::env::var("PINFOLD_LEDGER_FSYNC").map_or(true, |v| v != "0");
        Ok(Ledger { paths, log, lock, fsync, secrets: Vec::new() })
    }

    /// Default: on (`PINFOLD_LEDGER_FSYNC=0` turns it off). With it on, `append` returns after
    /// the record is on disk.
    pub fn with_fsync(mut self, fsync: bool) -> Ledger {
        self.fsync = fsync;
        self
    }

    /// Values to redact wherever they appear (for instance those the policy declares secret).
    pub fn with_secrets(mut self, secrets: Vec<String>) -> Ledger {
        self.secrets = secrets;
        self
    }

    pub fn paths(&self) -> &Paths {
        &self.paths
    }

    /// Append one record, redacted. A torn last line left by a crashed writer is first
    /// truncated and a `repair` record says so. Returns the new record's sequence number.
    pub fn append(&self, record: Record) -> Result<Appended, Error> {
        self.locked(|tail, out| {
            if tail.torn > 0 {
                self.cut_torn(tail, out, "append")?;
            }
            self.push(tail, out, &record.kind, record.session.as_deref(), record.data.clone())
        })
    }

    /// Write a signed checkpoint now.
    pub fn checkpoint(&self) -> Result<Appended, Error> {
        self.locked(|tail, out| {
            if tail.torn > 0 {
                self.cut_torn(tail, out, "checkpoint")?;
            }
            self.push_checkpoint(tail, out)
        })
    }

    /// Truncate a torn last line, if there is one, and record that it was done.
    pub fn repair(&self) -> Result<Option<Repaired>, Error> {
        self.locked(|tail, out| {
            if tail.torn == 0 {
                return Ok(None);
            }
            let (offset, len) = (tail.len, tail.torn);
            let record = self.cut_torn(tail, out, "repair")?;
            Ok(Some(Repaired { offset, len, record }))
        })
    }

    /// Take the lock, read the tail, let `f` queue lines, write them, sync, release.
    fn locked<T>(&self, f: impl FnOnce(&mut Tail, &mut Output) -> Result<T, Error>) -> Result<T, Error> {
        self.lock.lock().map_err(|e| Error::io("lock", &self.paths.lock, e))?;
        let result = (|| {
            let mut tail = self.read_tail()?;
            let mut out = Output::default();
            let value = f(&mut tail, &mut out)?;
            self.write(&out)?;
            Ok(value)
        })();
        let _ = self.lock.unlock();
        result
    }

    fn write(&self, out: &Output) -> Result<(), Error> {
        if !out.log.is_empty() {
            (&self.log).write_all(&out.log).map_err(|e| Error::io("append to", &self.paths.log, e))?;
            if self.fsync {
                self.log.sync_data().map_err(|e| Error::io("sync", &self.paths.log, e))?;
            }
        }
        if !out.checkpoints.is_empty() {
            let p = &self.paths.checkpoints;
            let mut f = OpenOptions::new()
                .append(true)
                .create(true)
                .mode(0o600)
                .open(p)
                .map_err(|e| Error::io("open", p, e))?;
            f.write_all(&out.checkpoints).map_err(|e| Error::io("append to", p, e))?;
            if self.fsync {
                f.sync_data().map_err(|e| Error::io("sync", p, e))?;
            }
        }
        Ok(())
    }

    /// Queue a record (preceded by a checkpoint when its sequence number calls for one).
    fn push(&self, tail: &mut Tail, out: &mut Output, kind: &str, session: Option<&str>, data: Value) -> Result<Appended, Error> {
        if tail.next_seq > 0 && tail.next_seq.is_multiple_of(CHECKPOINT_INTERVAL) {
            self.push_checkpoint(tail, out)?;
        }
        let mut redacted = data.clone();
        let count = redact::redact_value(&mut redacted, &self.secrets);
        let mut m = Map::new();
        m.insert("v".into(), json!(FORMAT_VERSION));
        m.insert("seq".into(), json!(tail.next_seq));
        m.insert("time".into(), json!(time::now()));
        m.insert("pid".into(), json!(std::process::id()));
        m.insert("kind".into(), json!(kind));
        if let Some(s) = session {
            m.insert("session".into(), json!(s));
        }
        if count > 0 {
            let digest = canon::sha256_hex(&canon::encode(&data)?);
            m.insert("redacted".into(), json!({"count": count, "sha256": digest}));
        }
        m.insert("data".into(), redacted);
        m.insert("prev".into(), json!(tail.prev));
        let (line, hash) = canon::line(&Value::Object(m))?;
        out.log.extend_from_slice(&line);
        let seq = tail.next_seq;
        tail.len += line.len() as u64;
        tail.next_seq += 1;
        tail.prev = hash.clone();
        Ok(Appended { seq, hash })
    }

    fn push_checkpoint(&self, tail: &mut Tail, out: &mut Output) -> Result<Appended, Error> {
        let key = keys::load_or_create(&self.paths.key, &self.paths.public)?;
        let key_hex = keys::public_hex(&key.verifying_key());
        let (records, size) = (tail.next_seq, tail.len);
        let sig = keys::sign(&key, &verify::statement(records, &tail.prev, size, &key_hex));
        let data = json!({"records": records, "head": tail.prev, "size": size, "key": key_hex, "sig": sig});
        let start = out.log.len();
        // Checkpoint data holds no secrets; pushing it through `push` would redact nothing
        // but costs a scan. Build it directly.
        let mut m = Map::new();
        m.insert("v".into(), json!(FORMAT_VERSION));
        m.insert("seq".into(), json!(tail.next_seq));
        m.insert("time".into(), json!(time::now()));
        m.insert("pid".into(), json!(std::process::id()));
        m.insert("kind".into(), json!("checkpoint"));
        m.insert("data".into(), data);
        m.insert("prev".into(), json!(tail.prev));
        let (line, hash) = canon::line(&Value::Object(m))?;
        out.log.extend_from_slice(&line);
        out.checkpoints.extend_from_slice(&out.log[start..]);
        let seq = tail.next_seq;
        tail.len += line.len() as u64;
        tail.next_seq += 1;
        tail.prev = hash.clone();
        Ok(Appended { seq, hash })
    }

    /// Truncate the torn tail now (synced), and queue a `repair` record naming what was cut.
    fn cut_torn(&self, tail: &mut Tail, out: &mut Output, by: &str) -> Result<Appended, Error> {
        let mut torn = vec![0u8; tail.torn as usize];
        self.log.read_exact_at(&mut torn, tail.len).map_err(|e| Error::io("read", &self.paths.log, e))?;
        self.log.set_len(tail.len).map_err(|e| Error::io("truncate", &self.paths.log, e))?;
        self.log.sync_data().map_err(|e| Error::io("sync", &self.paths.log, e))?;
        let shown = String::from_utf8_lossy(&torn[..torn.len().min(65_536)]).into_owned();
        let data = json!({
            "what": "truncated a torn last line (a writer stopped mid-append)",
            "by": by,
            "offset": tail.len,
            "bytes": tail.torn,
            "sha256": canon::sha256_hex(&torn),
            "torn": shown,
        });
        tail.torn = 0;
        self.push(tail, out, "repair", None, data)
    }

    /// Read the end of the log: the last complete line (checked) and any torn bytes after it.
    fn read_tail(&self) -> Result<Tail, Error> {
        let io = |e| Error::io("read", &self.paths.log, e);
        let len = self.log.metadata().map_err(io)?.len();
        let mut window = 4096u64;
        loop {
            let start = len.saturating_sub(window);
            let mut buf = vec![0u8; (len - start) as usize];
            self.log.read_exact_at(&mut buf, start).map_err(io)?;
            let Some(last_nl) = buf.iter().rposition(|&b| b == b'\n') else {
                if start == 0 {
                    return Ok(Tail { len: 0, torn: len, next_seq: 0, prev: GENESIS.to_string() });
                }
                window *= 4;
                continue;
            };
            let line_start = match buf[..last_nl].iter().rposition(|&b| b == b'\n') {
                Some(p) => p + 1,
                None if start == 0 => 0,
                None => {
                    window *= 4;
                    continue;
                }
            };
            let complete = start + last_nl as u64 + 1;
            let line = &buf[line_start..last_nl];
            return match verify::check_line(line) {
                Ok(head) => Ok(Tail {
                    len: complete,
                    torn: len - complete,
                    next_seq: head.seq + 1,
                    prev: head.hash.into_owned(),
                }),
                Err(fault) => Err(Error::Damaged(Box::new(Problem {
                    file: self.paths.log.clone(),
                    line: 0,
                    offset: start + line_start as u64,
                    seq: None,
                    fault,
                }))),
            };
        }
    }
}

#[derive(Default)]
struct Output {
    log: Vec<u8>,
    checkpoints: Vec<u8>,
}

/// Verify the ledger in `dir`: sequence, links, hashes, checkpoints, signatures, and the
/// separate checkpoint file. Stops at the first problem.
pub fn verify(dir: &Path) -> Result<Report, Error> {
    verify::verify_dir(dir)
}

/// Every complete record of the log in `dir`, parsed, in order (an absent log has none).
pub fn read_records(dir: &Path) -> Result<Vec<Value>, Error> {
    let path = Paths::new(dir).log;
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io("read", &path, e)),
    };
    Ok(bytes
        .split_inclusive(|&b| b == b'\n')
        .filter(|l| l.ends_with(b"\n"))
        .filter_map(|l| serde_json::from_slice(l).ok())
        .collect())
}
