//! pinfold's audit ledger: an append-only, hash-chained, signed record of what agents tried,
//! what pinfold decided, what ran and how it ended.
//!
//! The ledger lives in a state directory (see [`state_dir`]) as a few files:
//!
//! | file | what |
//! |---|---|
//! | `ledger.jsonl` | the live log: one record per line |
//! | `ledger.000001.jsonl`, … | archives: earlier parts of the same chain, oldest first ([`files`]) |
//! | `ledger.lock` | held (`flock`) by whoever appends, so that appends never interleave |
//! | `ledger.key` | the ed25519 seed that signs checkpoints, mode 0600 (or `$PINFOLD_LEDGER_KEY`) |
//! | `ledger.pub` | its public half, for anyone who verifies |
//! | `ledger.checkpoints` | a copy of every signed checkpoint, apart from the log |
//!
//! Each record names the hash of the one before it ([`canon`] defines the encoding that is
//! hashed). Every [`CHECKPOINT_INTERVAL`]-th record, when the last checkpoint is older than
//! [`DEFAULT_CHECKPOINT_EVERY`] (see [`Ledger::with_checkpoint_every`]), and whenever
//! [`Ledger::checkpoint`] is called, a checkpoint record signs (record count, head hash, byte
//! offset): editing, removing or reordering records covered by a checkpoint shows as a broken
//! chain or a signature mismatch, and truncating the log shows against the copy in
//! `ledger.checkpoints`.
//!
//! When the live file would grow past [`DEFAULT_ROTATE_BYTES`] ([`Ledger::with_rotate_bytes`])
//! it is closed with a checkpoint and renamed to the next archive; the new live file opens with
//! a signed `rotate` record naming the archive, and the chain goes on. [`verify`] checks all
//! files as one chain, [`verify_file`] one file alone.
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
pub mod files;
mod keys;
pub mod redact;
pub mod time;
mod verify;

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use serde_json::{Map, Value, json};

pub use files::Follower;
pub use verify::{FileSummary, Fault, Problem, Report, Status, Torn};

/// The record format version written in every record's `v`.
pub const FORMAT_VERSION: u64 = 1;
/// A checkpoint is written at every sequence number that is a positive multiple of this.
pub const CHECKPOINT_INTERVAL: u64 = 1000;
/// The `prev` of the first record.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";
/// The live file is rotated before a record would take it past this many bytes
/// (`PINFOLD_LEDGER_ROTATE_BYTES`, [`Ledger::with_rotate_bytes`]).
pub const DEFAULT_ROTATE_BYTES: u64 = 64 << 20;
/// An append writes a checkpoint first when the last one is older than this
/// (`PINFOLD_LEDGER_CHECKPOINT_SECS`, [`Ledger::with_checkpoint_every`]).
pub const DEFAULT_CHECKPOINT_EVERY: Duration = Duration::from_secs(300);

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
    #[error("will not rotate the log onto {}: the file exists", .0.display())]
    ArchiveExists(PathBuf),
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

/// The ledger's directory: `pinfold_state_dir` (`$PINFOLD_STATE_DIR`), else
/// `xdg_state_home/pinfold` (`$XDG_STATE_HOME`), else `home/.local/state/pinfold`. The caller
/// reads the variables (empty counts as unset); the ledger reads no environment for it.
pub fn state_dir(pinfold_state_dir: Option<&Path>, xdg_state_home: Option<&Path>, home: Option<&Path>) -> Result<PathBuf, Error> {
    pinfold_state_dir
        .map(Path::to_path_buf)
        .or_else(|| xdg_state_home.map(|d| d.join("pinfold")))
        .or_else(|| home.map(|h| h.join(".local/state/pinfold")))
        .ok_or(Error::NoStateDir)
}

/// The files of a ledger.
#[derive(Debug, Clone)]
pub struct Paths {
    pub dir: PathBuf,
    /// The live log.
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
            dir: dir.to_path_buf(),
            log: dir.join("ledger.jsonl"),
            lock: dir.join("ledger.lock"),
            key,
            public: dir.join("ledger.pub"),
            checkpoints: dir.join("ledger.checkpoints"),
        }
    }

    /// Archive number `n` (from 1).
    pub fn archive(&self, n: u64) -> PathBuf {
        self.dir.join(files::archive_name(n))
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

/// An open ledger. Appends from any number of `Ledger`s, in any number of processes (and
/// threads), form one chain: each takes the lock, reads the last record, appends, and
/// releases.
#[derive(Debug)]
pub struct Ledger {
    paths: Paths,
    /// The live file as last opened. Behind a mutex because `flock` does not exclude threads
    /// sharing one descriptor, and because a rotation replaces it.
    live: Mutex<File>,
    lock: File,
    fsync: std::sync::atomic::AtomicBool,
    secrets: Vec<String>,
    rotate_bytes: u64,
    checkpoint_every: Duration,
    /// The live file's end as this handle left it: when the file is still that file and that
    /// long at the next call, its last line is the one this handle wrote, and the tail need
    /// not be read and checked again (`pinfold exec` appends `exec_end` right after its own
    /// `exec_start`, unless another process wrote in between). Read and set under `live`.
    mine: Mutex<Option<Mine>>,
}

/// See [`Ledger::mine`].
#[derive(Debug)]
struct Mine {
    dev: u64,
    ino: u64,
    len: u64,
    next_seq: u64,
    prev: String,
    last: Last,
}

/// The kind of the last record, as far as appending cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Last {
    /// No record yet.
    None,
    Checkpoint,
    Rotate,
    Other,
}

impl Last {
    fn of(kind: &str) -> Last {
        match kind {
            "checkpoint" => Last::Checkpoint,
            "rotate" => Last::Rotate,
            _ => Last::Other,
        }
    }
}

/// The end of the chain as read under the lock, updated as lines are queued.
struct Tail {
    /// Bytes of complete records in the live file (including queued ones).
    len: u64,
    /// Bytes after the last newline of the live file (a torn line).
    torn: u64,
    next_seq: u64,
    prev: String,
    last: Last,
    /// The live file holds no record yet but the chain does: the archive it ends in, and its
    /// size. The first record of the live file is then a `rotate` record naming it.
    previous: Option<(String, u64)>,
    /// The last checkpoint is older than the time limit.
    checkpoint_due: bool,
    /// There is no checkpoint file yet: create it, empty, to start the checkpoint clock.
    start_clock: bool,
    /// Rotated once in this call already.
    rotated: bool,
}

impl Ledger {
    /// Open (creating when needed) the ledger in `dir`. Appends are `fdatasync`ed unless
    /// `PINFOLD_LEDGER_FSYNC=0`; `PINFOLD_LEDGER_ROTATE_BYTES` and
    /// `PINFOLD_LEDGER_CHECKPOINT_SECS` override the rotation size and checkpoint age.
    pub fn open(dir: &Path) -> Result<Ledger, Error> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| Error::io("create the state directory", dir, e))?;
        let paths = Paths::new(dir);
        let live = open_live(&paths.log)?;
        let lock = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&paths.lock)
            .map_err(|e| Error::io("open the lock file", &paths.lock, e))?;
        let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let fsync = env("PINFOLD_LEDGER_FSYNC").is_none_or(|v| v != "0");
        let rotate_bytes = env("PINFOLD_LEDGER_ROTATE_BYTES").and_then(|v| v.parse().ok()).unwrap_or(DEFAULT_ROTATE_BYTES);
        let checkpoint_every = env("PINFOLD_LEDGER_CHECKPOINT_SECS")
            .and_then(|v| v.parse::<f64>().ok())
            .and_then(|s| Duration::try_from_secs_f64(s).ok())
            .unwrap_or(DEFAULT_CHECKPOINT_EVERY);
        Ok(Ledger {
            paths,
            live: Mutex::new(live),
            lock,
            fsync: fsync.into(),
            secrets: Vec::new(),
            rotate_bytes,
            checkpoint_every,
            mine: Mutex::new(None),
        })
    }

    /// Default: on (`PINFOLD_LEDGER_FSYNC=0` turns it off). With it on, `append` returns after
    /// the record is on disk.
    pub fn with_fsync(self, fsync: bool) -> Ledger {
        self.set_fsync(fsync);
        self
    }

    /// [`Ledger::with_fsync`] for an open ledger: whether the appends from now on are synced
    /// (so a caller can sync some kinds of record and not others).
    pub fn set_fsync(&self, fsync: bool) {
        self.fsync.store(fsync, std::sync::atomic::Ordering::Relaxed);
    }

    fn syncing(&self) -> bool {
        self.fsync.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Values to redact wherever they appear (for instance those the policy declares secret).
    pub fn with_secrets(mut self, secrets: Vec<String>) -> Ledger {
        self.secrets = secrets;
        self
    }

    /// Rotate the live file before a record would take it past `bytes` (default
    /// [`DEFAULT_ROTATE_BYTES`]; 0: never). A record larger than that still gets written, alone
    /// in a fresh file; the closing checkpoint may take an archive a few hundred bytes past it.
    pub fn with_rotate_bytes(mut self, bytes: u64) -> Ledger {
        self.rotate_bytes = bytes;
        self
    }

    /// Before appending, write a checkpoint when the last one is older than `every` (default
    /// [`DEFAULT_CHECKPOINT_EVERY`]; zero: only every [`CHECKPOINT_INTERVAL`] records and on
    /// demand). The age is the modification time of `ledger.checkpoints`, which every
    /// checkpoint appends to: one `stat`, no reading.
    pub fn with_checkpoint_every(mut self, every: Duration) -> Ledger {
        self.checkpoint_every = every;
        self
    }

    pub fn paths(&self) -> &Paths {
        &self.paths
    }

    /// Append one record, redacted. A torn last line left by a crashed writer is first
    /// truncated and a `repair` record says so. Returns the new record's sequence number.
    pub fn append(&self, record: Record) -> Result<Appended, Error> {
        self.locked(|live, tail, out| {
            if tail.torn > 0 {
                self.cut_torn(live, tail, out, "append")?;
            }
            self.push(live, tail, out, &record.kind, record.session.as_deref(), &record.data)
        })
    }

    /// Write a signed checkpoint now.
    pub fn checkpoint(&self) -> Result<Appended, Error> {
        self.locked(|live, tail, out| {
            if tail.torn > 0 {
                self.cut_torn(live, tail, out, "checkpoint")?;
            }
            self.open_file(tail, out)?;
            self.push_signed(tail, out, None)
        })
    }

    /// Truncate a torn last line, if there is one, and record that it was done.
    pub fn repair(&self) -> Result<Option<Repaired>, Error> {
        self.locked(|live, tail, out| {
            if tail.torn == 0 {
                return Ok(None);
            }
            let (offset, len) = (tail.len, tail.torn);
            let record = self.cut_torn(live, tail, out, "repair")?;
            Ok(Some(Repaired { offset, len, record }))
        })
    }

    /// Take the lock, make sure the descriptor is the live file, read the tail, let `f` queue
    /// lines, write them, sync, release.
    fn locked<T>(&self, f: impl FnOnce(&mut File, &mut Tail, &mut Output) -> Result<T, Error>) -> Result<T, Error> {
        let mut live = self.live.lock().unwrap_or_else(PoisonError::into_inner);
        self.lock.lock().map_err(|e| Error::io("lock", &self.paths.lock, e))?;
        let mut mine = self.mine.lock().unwrap_or_else(PoisonError::into_inner);
        let result = (|| {
            let held = self.ensure_live(&mut live)?;
            let len = held.len();
            let mut tail = match mine.take() {
                Some(m) if (m.dev, m.ino, m.len) == (held.dev(), held.ino(), len) => Tail {
                    len,
                    torn: 0,
                    next_seq: m.next_seq,
                    prev: m.prev,
                    last: m.last,
                    previous: None,
                    checkpoint_due: false,
                    start_clock: false,
                    rotated: false,
                },
                _ => self.read_tail(&live, len)?,
            };
            self.check_clock(&mut tail);
            let mut out = Output::default();
            let value = f(&mut live, &mut tail, &mut out)?;
            self.write(&live, &out, tail.start_clock)?;
            // Remembered only when the file ends exactly where the chain does.
            if let Ok(m) = live.metadata()
                && m.len() == tail.len
                && tail.len > 0
            {
                *mine = Some(Mine { dev: m.dev(), ino: m.ino(), len: tail.len, next_seq: tail.next_seq, prev: tail.prev, last: tail.last });
            }
            Ok(value)
        })();
        let _ = self.lock.unlock();
        result
    }

    /// Another process may have rotated the file this descriptor was opened on (it is an
    /// archive now) or, after a crash between rotating and writing, no live file may exist:
    /// (re)open the live path when it is not the file held. Returns the live file's metadata.
    fn ensure_live(&self, live: &mut File) -> Result<std::fs::Metadata, Error> {
        let held = live.metadata().map_err(|e| Error::io("read", &self.paths.log, e))?;
        match std::fs::metadata(&self.paths.log) {
            Ok(m) if m.ino() == held.ino() && m.dev() == held.dev() => return Ok(held),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io("read", &self.paths.log, e)),
        }
        *live = open_live(&self.paths.log)?;
        live.metadata().map_err(|e| Error::io("read", &self.paths.log, e))
    }

    /// Is a time-based checkpoint due? The checkpoint file's modification time says when the
    /// last checkpoint was written.
    fn check_clock(&self, tail: &mut Tail) {
        if self.checkpoint_every.is_zero() {
            return;
        }
        match std::fs::metadata(&self.paths.checkpoints) {
            Ok(m) => {
                let age = m.modified().ok().and_then(|t| SystemTime::now().duration_since(t).ok());
                tail.checkpoint_due = age.is_some_and(|a| a >= self.checkpoint_every);
            }
            // No checkpoint yet: an empty ledger starts the clock now, a non-empty one (from
            // before time-based checkpoints, or whose checkpoint file was removed) is due.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if tail.next_seq == 0 {
                    tail.start_clock = true;
                } else {
                    tail.checkpoint_due = true;
                }
            }
            Err(_) => {}
        }
    }

    fn write(&self, live: &File, out: &Output, start_clock: bool) -> Result<(), Error> {
        // A checkpoint is always synced, log first: a copy in `ledger.checkpoints` must never
        // name records the log could lose, whatever the setting for ordinary records.
        let checkpointing = !out.checkpoints.is_empty();
        self.write_log(live, &out.log, self.syncing() || checkpointing)?;
        if !out.checkpoints.is_empty() || start_clock {
            let p = &self.paths.checkpoints;
            let mut f = OpenOptions::new()
                .append(true)
                .create(true)
                .mode(0o600)
                .open(p)
                .map_err(|e| Error::io("open", p, e))?;
            if !out.checkpoints.is_empty() {
                f.write_all(&out.checkpoints).map_err(|e| Error::io("append to", p, e))?;
                f.sync_data().map_err(|e| Error::io("sync", p, e))?;
            }
        }
        Ok(())
    }

    fn write_log(&self, live: &File, bytes: &[u8], sync: bool) -> Result<(), Error> {
        if !bytes.is_empty() {
            let mut w = live;
            w.write_all(bytes).map_err(|e| Error::io("append to", &self.paths.log, e))?;
            if sync {
                live.sync_data().map_err(|e| Error::io("sync", &self.paths.log, e))?;
            }
        }
        Ok(())
    }

    /// Queue a record: first a `rotate` record when it opens a file, a checkpoint when its
    /// sequence number or the clock calls for one, and a rotation when it would not fit.
    fn push(
        &self,
        live: &mut File,
        tail: &mut Tail,
        out: &mut Output,
        kind: &str,
        session: Option<&str>,
        data: &Value,
    ) -> Result<Appended, Error> {
        let mut redacted = data.clone();
        let count = redact::redact_value(&mut redacted, &self.secrets);
        let mut m = Map::new();
        m.insert("v".into(), json!(FORMAT_VERSION));
        m.insert("time".into(), json!(time::now()));
        m.insert("pid".into(), json!(std::process::id()));
        m.insert("kind".into(), json!(kind));
        if let Some(s) = session {
            m.insert("session".into(), json!(s));
        }
        if count > 0 {
            let digest = canon::sha256_hex(&canon::encode(data)?);
            m.insert("redacted".into(), json!({"count": count, "sha256": digest}));
        }
        m.insert("data".into(), redacted);
        let mut record = Value::Object(m);
        loop {
            self.open_file(tail, out)?;
            let by_count = tail.next_seq > 0 && tail.next_seq.is_multiple_of(CHECKPOINT_INTERVAL);
            let by_clock = tail.checkpoint_due && tail.last == Last::Other;
            if by_count || by_clock {
                self.push_signed(tail, out, None)?;
            }
            record["seq"] = json!(tail.next_seq);
            record["prev"] = json!(tail.prev);
            let (line, hash) = canon::line(&record)?;
            let over = self.rotate_bytes > 0 && tail.len > 0 && tail.len + line.len() as u64 > self.rotate_bytes;
            if over && !tail.rotated {
                self.rotate(live, tail, out)?;
                continue;
            }
            return Ok(Self::queue(tail, out, line, hash, Last::Other));
        }
    }

    fn queue(tail: &mut Tail, out: &mut Output, line: Vec<u8>, hash: String, last: Last) -> Appended {
        out.log.extend_from_slice(&line);
        let seq = tail.next_seq;
        tail.len += line.len() as u64;
        tail.next_seq += 1;
        tail.prev = hash.clone();
        tail.last = last;
        Appended { seq, hash }
    }

    /// A live file with no record while the chain has some opens with a `rotate` record.
    fn open_file(&self, tail: &mut Tail, out: &mut Output) -> Result<(), Error> {
        if tail.len == 0
            && tail.next_seq > 0
            && let Some(previous) = tail.previous.take()
        {
            self.push_signed(tail, out, Some(previous))?;
        }
        Ok(())
    }

    /// Queue a signed record: a `checkpoint`, or, given the previous file's name and size, the
    /// `rotate` record that opens a file. Both sign (records before it, head, its offset in
    /// its file); a `rotate` record also names the file the chain continues from.
    fn push_signed(&self, tail: &mut Tail, out: &mut Output, previous: Option<(String, u64)>) -> Result<Appended, Error> {
        let key = keys::load_or_create(&self.paths.key, &self.paths.public)?;
        let key_hex = keys::public_hex(&key.verifying_key());
        let (records, size) = (tail.next_seq, tail.len);
        let sig = keys::sign(&key, &verify::statement(records, &tail.prev, size, &key_hex));
        let mut data = json!({"records": records, "head": tail.prev, "size": size, "key": key_hex, "sig": sig});
        let (kind, last) = match previous {
            Some((name, bytes)) => {
                data["previous"] = json!(name);
                data["previous_size"] = json!(bytes);
                ("rotate", Last::Rotate)
            }
            None => ("checkpoint", Last::Checkpoint),
        };
        // Checkpoint data holds no secrets; pushing it through `push` would redact nothing
        // but costs a scan. Build it directly.
        let mut m = Map::new();
        m.insert("v".into(), json!(FORMAT_VERSION));
        m.insert("seq".into(), json!(tail.next_seq));
        m.insert("time".into(), json!(time::now()));
        m.insert("pid".into(), json!(std::process::id()));
        m.insert("kind".into(), json!(kind));
        m.insert("data".into(), data);
        m.insert("prev".into(), json!(tail.prev));
        let (line, hash) = canon::line(&Value::Object(m))?;
        out.checkpoints.extend_from_slice(&line);
        tail.checkpoint_due = false;
        Ok(Self::queue(tail, out, line, hash, last))
    }

    /// Close the live file and start the next, under the lock already held:
    fn rotate(&self, live: &mut File, tail: &mut Tail, out: &mut Output) -> Result<(), Error> {
        // 1. The closing file ends with a checkpoint, so that it verifies on its own to its
        //    last byte (an archive that does not end with one was cut short).
        if tail.last != Last::Checkpoint {
            self.push_signed(tail, out, None)?;
        }
        // 2. Everything queued so far belongs to the closing file: write (and sync) it there
        //    before the rename, so the archive is complete the moment it has its name.
        self.write_log(live, &out.log, true)?;
        out.log.clear();
        // 3. Rename it to one past the newest archive, never over an existing file. From here
        //    until the new file has its first record, the chain ends in that archive, and
        //    the next append (this one, or after a crash any other) continues it from there.
        let n = files::archives(&self.paths.dir)?.last().map_or(1, |(n, _)| n + 1);
        let archive = self.paths.archive(n);
        if std::fs::symlink_metadata(&archive).is_ok() {
            return Err(Error::ArchiveExists(archive));
        }
        std::fs::rename(&self.paths.log, &archive).map_err(|e| Error::io("rotate", &self.paths.log, e))?;
        // 4. The new live file. Its first record (queued next, by the caller's loop) is the
        //    `rotate` record naming the archive.
        *live = open_live(&self.paths.log)?;
        // The rename and the new name are durable before anything is acknowledged in it
        // (always: a rotation is rare, and ends with a checkpoint).
        File::open(&self.paths.dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| Error::io("sync", &self.paths.dir, e))?;
        tail.previous = Some((files::archive_name(n), tail.len));
        tail.len = 0;
        tail.rotated = true;
        Ok(())
    }

    /// Truncate the torn tail now (synced), and queue a `repair` record naming what was cut.
    fn cut_torn(&self, live: &mut File, tail: &mut Tail, out: &mut Output, by: &str) -> Result<Appended, Error> {
        let mut torn = vec![0u8; tail.torn as usize];
        live.read_exact_at(&mut torn, tail.len).map_err(|e| Error::io("read", &self.paths.log, e))?;
        live.set_len(tail.len).map_err(|e| Error::io("truncate", &self.paths.log, e))?;
        live.sync_data().map_err(|e| Error::io("sync", &self.paths.log, e))?;
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
        self.push(live, tail, out, "repair", None, &data)
    }

    /// Read the end of the chain: the live file's last complete line (checked) and any torn
    /// bytes after it; when the live file has no complete line, the newest archive's last.
    fn read_tail(&self, live: &File, len: u64) -> Result<Tail, Error> {
        let mut tail = Tail {
            len: 0,
            torn: len,
            next_seq: 0,
            prev: GENESIS.to_string(),
            last: Last::None,
            previous: None,
            checkpoint_due: false,
            start_clock: false,
            rotated: false,
        };
        if let Some(last) = last_line(live, &self.paths.log, len)? {
            tail.len = last.end;
            tail.torn = len - last.end;
            tail.next_seq = last.seq + 1;
            tail.prev = last.hash;
            tail.last = Last::of(&last.kind);
            return Ok(tail);
        }
        // The live file has no record: a fresh ledger, or the chain ends in the newest archive
        // (just rotated, or a crash came between the rename and the first write).
        let Some((n, path)) = files::archives(&self.paths.dir)?.pop() else { return Ok(tail) };
        let damaged = |offset, detail: &str| {
            Error::Damaged(Box::new(Problem {
                file: path.clone(),
                line: 0,
                offset,
                seq: None,
                fault: verify::Fault::Malformed { detail: detail.into() },
            }))
        };
        let f = File::open(&path).map_err(|e| Error::io("open", &path, e))?;
        let alen = f.metadata().map_err(|e| Error::io("read", &path, e))?.len();
        let Some(last) = last_line(&f, &path, alen)? else {
            return Err(damaged(0, "the newest archive holds no record"));
        };
        if last.end != alen {
            return Err(damaged(last.end, "the newest archive ends with an incomplete line"));
        }
        tail.next_seq = last.seq + 1;
        tail.prev = last.hash;
        tail.last = Last::of(&last.kind);
        tail.previous = Some((files::archive_name(n), alen));
        Ok(tail)
    }
}

fn open_live(path: &Path) -> Result<File, Error> {
    OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| Error::io("open the ledger", path, e))
}

/// A file's last complete line, checked.
struct LastLine {
    /// The offset just past its newline.
    end: u64,
    seq: u64,
    hash: String,
    kind: String,
}

/// The last complete line of the first `len` bytes of `file`, its hash checked; `None` when
/// there is no complete line. A last line that does not check out is [`Error::Damaged`]:
/// appending after it would extend a chain that is already broken (fail closed).
fn last_line(file: &File, path: &Path, len: u64) -> Result<Option<LastLine>, Error> {
    let io = |e| Error::io("read", path, e);
    let mut window = 4096u64;
    loop {
        let start = len.saturating_sub(window);
        let mut buf = vec![0u8; (len - start) as usize];
        file.read_exact_at(&mut buf, start).map_err(io)?;
        // A plain backward scan, not `memchr::memrchr`: the line is a few hundred bytes
        // from the end, and memchr's first call probes the CPU's features (`cpuid`, a trap
        // to the hypervisor on a VM), a cost every `pinfold check` paid for this one search.
        let Some(last_nl) = buf.iter().rposition(|&c| c == b'\n') else {
            if start == 0 {
                return Ok(None);
            }
            window *= 4;
            continue;
        };
        let line_start = match buf[..last_nl].iter().rposition(|&c| c == b'\n') {
            Some(p) => p + 1,
            None if start == 0 => 0,
            None => {
                window *= 4;
                continue;
            }
        };
        let line = &buf[line_start..last_nl];
        return match verify::check_line(line) {
            Ok(head) => Ok(Some(LastLine {
                end: start + last_nl as u64 + 1,
                seq: head.seq,
                hash: head.hash.into_owned(),
                kind: head.kind.into_owned(),
            })),
            Err(fault) => Err(Error::Damaged(Box::new(Problem {
                file: path.to_path_buf(),
                line: 0,
                offset: start + line_start as u64,
                seq: None,
                fault,
            }))),
        };
    }
}

#[derive(Default)]
struct Output {
    log: Vec<u8>,
    checkpoints: Vec<u8>,
}

/// Verify the ledger in `dir`: all its files in order as one chain (sequence, links, hashes,
/// checkpoints, signatures, file boundaries), the separate checkpoint file, and `ledger.pub`
/// against a readable `ledger.key`. Stops at the first problem.
pub fn verify(dir: &Path) -> Result<Report, Error> {
    verify::verify_dir(dir)
}

/// Verify one file of the ledger in `dir` on its own (an archive, or the live file): its
/// records, checkpoints and signatures with `dir`'s key, that an archive ends with a signed
/// checkpoint, that a file after the first opens with a `rotate` record naming the file before
/// it, and the entries of `dir`'s checkpoint file that fall inside it.
pub fn verify_file(dir: &Path, file: &Path) -> Result<Report, Error> {
    verify::verify_one(dir, file)
}

/// Every complete record of the log in `dir` (archives, then the live file), parsed, in order
/// (an absent log has none).
pub fn read_records(dir: &Path) -> Result<Vec<Value>, Error> {
    let mut out = Vec::new();
    for f in files::snapshot(dir)? {
        out.extend(files::parse_records(&f.read()?));
    }
    Ok(out)
}
