//! Verification: sequence, links, hashes, checkpoints and their signatures, across the log's
//! files (archives, then the live file) or within one file alone.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};

use ed25519_dalek::VerifyingKey;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::canon::hex;
use crate::files::{self, archive_name, archive_number};
use crate::{CHECKPOINT_INTERVAL, Error, FORMAT_VERSION, GENESIS, Paths, keys};

/// What `verify` found.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The log that was checked: the live file, or the one file checked alone.
    pub path: PathBuf,
    /// Complete records read up to the first problem (all of them when there is none).
    pub records: u64,
    /// Bytes of complete records, over all files checked.
    pub bytes: u64,
    /// Signed records (checkpoints, and the `rotate` records that open files) whose signature
    /// verified.
    pub checkpoints: u64,
    /// Checkpoints in the separate checkpoint file that were matched against the log.
    pub external_checkpoints: u64,
    /// The hash of the last complete record ([`GENESIS`] for an empty log).
    pub head: String,
    /// The key that verified the checkpoints.
    pub key: Option<String>,
    /// `ledger.pub` was compared with the public half of a readable `ledger.key` (a mismatch
    /// is the `problem`).
    pub signing_key_checked: bool,
    /// The files checked, in order, up to the problem.
    pub files: Vec<FileSummary>,
    /// An incomplete last line (a writer stopped mid-append).
    pub torn: Option<Torn>,
    /// The first sign of tampering, if any.
    pub problem: Option<Problem>,
}

/// One file of the log, as far as it was checked.
#[derive(Debug, Clone, Serialize)]
pub struct FileSummary {
    pub path: PathBuf,
    /// The sequence number of its first record (`None`: it has none).
    pub first_seq: Option<u64>,
    pub records: u64,
    pub bytes: u64,
}

/// How the ledger stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Every record and checkpoint checks out.
    Intact,
    /// Intact except for an incomplete last line: a crash, which `repair` fixes.
    Torn,
    /// Something was changed, removed or reordered.
    Tampered,
}

impl Report {
    pub fn status(&self) -> Status {
        match (&self.problem, &self.torn) {
            (Some(_), _) => Status::Tampered,
            (None, Some(_)) => Status::Torn,
            (None, None) => Status::Intact,
        }
    }
}

/// An incomplete last line.
#[derive(Debug, Clone, Serialize)]
pub struct Torn {
    /// The file it is in (always the live file).
    pub file: PathBuf,
    /// Where it starts (the end of the last complete record).
    pub offset: u64,
    /// Its length in bytes.
    pub len: u64,
}

/// The first bad record and what is wrong with it.
#[derive(Debug, Clone, Serialize)]
pub struct Problem {
    /// The file it is in (a log file, the checkpoint file, the public key, or a missing file).
    pub file: PathBuf,
    /// 1-based line number in that file (0: the file as a whole).
    pub line: u64,
    /// Byte offset of that line.
    pub offset: u64,
    /// The sequence number a record there should have (log problems).
    pub seq: Option<u64>,
    #[serde(flatten)]
    pub fault: Fault,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}", self.file.display())?;
        } else {
            write!(f, "{}:{} (byte {})", self.file.display(), self.line, self.offset)?;
        }
        if let Some(s) = self.seq {
            write!(f, ", seq {s}")?;
        }
        write!(f, ": {}", self.fault)
    }
}

/// What is wrong.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "fault", rename_all = "snake_case")]
pub enum Fault {
    /// Not a ledger line at all.
    Malformed { detail: String },
    /// The content does not match its stored hash: the record was edited.
    HashMismatch { stored: String, computed: String },
    /// A format version this reader does not know.
    Version { found: u64 },
    /// A record is missing, repeated or out of order.
    SeqGap { expected: u64, found: u64 },
    /// The record does not point at the one before it.
    BrokenLink { expected: String, found: String },
    /// Every `CHECKPOINT_INTERVAL`-th record must be a checkpoint.
    CheckpointMissing { kind: String },
    /// A checkpoint's fields disagree with the log around it.
    CheckpointInvalid { detail: String },
    /// A checkpoint's signature does not verify.
    BadSignature,
    /// A checkpoint was signed by a key other than this ledger's.
    UnknownKey { key: String, expected: String },
    /// There are checkpoints but no public key to check them with.
    NoPublicKey { path: PathBuf },
    /// The log ends before a signed checkpoint: records were removed from its end.
    Truncated { checkpoint_records: u64, checkpoint_size: u64, log_records: u64, log_bytes: u64 },
    /// A signed checkpoint names a different head than the log has at that point: rewritten.
    Rewritten { records: u64, signed_head: String, log_head: String, signed_size: u64, log_size: u64 },
    /// `ledger.pub` is not the public half of the readable signing key.
    KeyMismatch { public: String, signing_key: PathBuf, derived: String },
    /// A file of the chain is not there.
    MissingFile { name: String, why: String },
    /// An archive does not end with its closing checkpoint.
    NotClosed { kind: Option<String> },
    /// A file's opening `rotate` record is missing, misplaced or disagrees with the files.
    RotateInvalid { detail: String },
    /// An archive ends before the point at which the next file says it ended.
    ArchiveTruncated { records: u64, expected: u64 },
}

fn short(h: &str) -> &str {
    &h[..h.len().min(12)]
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::Malformed { detail } => write!(f, "not a ledger record: {detail}"),
            Fault::HashMismatch { stored, computed } => write!(
                f,
                "content does not match its hash (stored {}…, content hashes to {}…): the record was edited",
                short(stored),
                short(computed)
            ),
            Fault::Version { found } => write!(f, "unknown format version {found} (this reader knows {FORMAT_VERSION})"),
            Fault::SeqGap { expected, found } if found > expected => {
                write!(f, "expected seq {expected}, found {found}: {} record(s) missing or moved", found - expected)
            }
            Fault::SeqGap { expected, found } => write!(f, "expected seq {expected}, found {found}: a record repeated or moved"),
            Fault::BrokenLink { expected, found } => write!(
                f,
                "prev is {}…, but the record before hashes to {}…: the chain is broken here",
                short(found),
                short(expected)
            ),
            Fault::CheckpointMissing { kind } => {
                write!(f, "a `{kind}` record where a checkpoint must be (every {CHECKPOINT_INTERVAL} records)")
            }
            Fault::CheckpointInvalid { detail } => write!(f, "invalid checkpoint: {detail}"),
            Fault::BadSignature => write!(f, "checkpoint signature does not verify"),
            Fault::UnknownKey { key, expected } => write!(
                f,
                "checkpoint signed by key {}…, not this ledger's key {}…",
                short(key),
                short(expected)
            ),
            Fault::NoPublicKey { path } => write!(f, "checkpoints exist but there is no public key at {}", path.display()),
            Fault::Truncated { checkpoint_records, checkpoint_size, log_records, log_bytes } => write!(
                f,
                "a signed checkpoint covers {checkpoint_records} records ({checkpoint_size} bytes into its file) but the log has {log_records} ({log_bytes} bytes into its last file): records were removed from the end"
            ),
            Fault::Rewritten { records, signed_head, log_head, signed_size, log_size } => write!(
                f,
                "after {records} records a signed checkpoint has head {}… at byte {signed_size}, the log has {}… at byte {log_size}: the log was rewritten",
                short(signed_head),
                short(log_head)
            ),
            Fault::KeyMismatch { public, signing_key, derived } => write!(
                f,
                "holds public key {}…, but the signing key {} is the private half of {}…: one of them was replaced",
                short(public),
                signing_key.display(),
                short(derived)
            ),
            Fault::MissingFile { name, why } => write!(f, "{name} is missing: {why}"),
            Fault::NotClosed { kind: Some(kind) } => write!(
                f,
                "an archive must end with the checkpoint that closed it, this one ends with a `{kind}` record: records were removed from its end"
            ),
            Fault::NotClosed { kind: None } => write!(f, "an archive must end with the checkpoint that closed it, this one holds no record"),
            Fault::RotateInvalid { detail } => write!(f, "{detail}"),
            Fault::ArchiveTruncated { records, expected } => write!(
                f,
                "the archive ends after {records} records, but the signed record that opens the next file says it ended after {expected}: {} record(s) were removed from its end",
                expected - records
            ),
        }
    }
}

/// The fields every line has, read without copying.
#[derive(Deserialize)]
pub(crate) struct Head<'a> {
    #[serde(borrow)]
    pub hash: Cow<'a, str>,
    pub v: u64,
    pub seq: u64,
    #[serde(borrow)]
    pub prev: Cow<'a, str>,
    #[serde(borrow)]
    pub kind: Cow<'a, str>,
}

/// A checkpoint record's `data` (and the signed part of a `rotate` record's).
#[derive(Deserialize)]
pub(crate) struct CheckpointData {
    pub records: u64,
    pub head: String,
    pub size: u64,
    pub key: String,
    pub sig: String,
}

#[derive(Deserialize)]
struct CheckpointLine {
    data: CheckpointData,
}

/// A line of the checkpoint file: a checkpoint, or a copy of a `rotate` record.
#[derive(Deserialize)]
struct ExternalLine {
    data: ExternalData,
}

#[derive(Deserialize)]
struct ExternalData {
    #[serde(flatten)]
    signed: CheckpointData,
    previous: Option<String>,
    previous_size: Option<u64>,
}

/// What a signed `rotate` record says about the archive before it.
struct Opening {
    /// Records before it: the archive ended after this many.
    records: u64,
    /// The archive's last hash and its size.
    head: String,
    size: u64,
}

/// A `rotate` record's `data`: a checkpoint at byte 0 of its file, and the file before it.
#[derive(Deserialize)]
struct RotateData {
    #[serde(flatten)]
    signed: CheckpointData,
    previous: String,
    previous_size: u64,
}

#[derive(Deserialize)]
struct RotateLine {
    data: RotateData,
}

/// Check a line's stored hash against its content; returns the parsed head.
pub(crate) fn check_line(line: &[u8]) -> Result<Head<'_>, Fault> {
    const P: &[u8] = b"{\"hash\":\"";
    if line.len() < P.len() + 67 || !line.starts_with(P) || !line[P.len() + 64..].starts_with(b"\",\"") {
        return Err(Fault::Malformed { detail: "does not start with {\"hash\":\"<64 hex digits>\",".into() });
    }
    let stored = &line[P.len()..P.len() + 64];
    let mut h = Sha256::new();
    h.update(b"{");
    h.update(&line[P.len() + 66..]);
    let computed = h.finalize();
    let mut stored_bytes = [0u8; 32];
    let ok = std::str::from_utf8(stored).ok().and_then(crate::canon::unhex::<32>).map(|b| stored_bytes = b).is_some();
    if !ok || stored_bytes[..] != computed[..] {
        return Err(Fault::HashMismatch {
            stored: String::from_utf8_lossy(stored).into_owned(),
            computed: hex(&computed),
        });
    }
    let head: Head<'_> =
        serde_json::from_slice(line).map_err(|e| Fault::Malformed { detail: format!("not valid JSON: {e}") })?;
    if head.v != FORMAT_VERSION {
        return Err(Fault::Version { found: head.v });
    }
    Ok(head)
}

/// [`check_line`] on every newline-terminated line of `log`, in order, split over the
/// available cores. Small logs are checked on the calling thread.
fn check_lines_parallel(log: &[u8]) -> Vec<Option<Result<Head<'_>, Fault>>> {
    let mut lines: Vec<&[u8]> = Vec::new();
    let mut start = 0;
    for nl in memchr::memchr_iter(b'\n', log) {
        lines.push(&log[start..nl]);
        start = nl + 1;
    }
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(8);
    if threads < 2 || lines.len() < 4096 {
        return lines.iter().map(|l| Some(check_line(l))).collect();
    }
    let chunk = lines.len().div_ceil(threads);
    std::thread::scope(|s| {
        let handles: Vec<_> = lines
            .chunks(chunk)
            .map(|part| (part.len(), s.spawn(move || part.iter().map(|l| Some(check_line(l))).collect::<Vec<_>>())))
            .collect();
        // A chunk whose thread failed keeps its place as `None`s: the sequential pass then
        // checks those lines itself.
        handles
            .into_iter()
            .flat_map(|(n, h)| h.join().unwrap_or_else(|_| (0..n).map(|_| None).collect()))
            .collect()
    })
}

/// The statement a checkpoint signs.
pub(crate) fn statement(records: u64, head: &str, size: u64, key: &str) -> Vec<u8> {
    crate::canon::encode(&serde_json::json!({"records": records, "head": head, "size": size, "key": key}))
        .expect("no floats")
}

fn check_signature(d: &CheckpointData, key: Option<&VerifyingKey>, pub_path: &Path) -> Result<(), Fault> {
    let Some(key) = key else {
        return Err(Fault::NoPublicKey { path: pub_path.to_path_buf() });
    };
    let expected = keys::public_hex(key);
    if d.key != expected {
        return Err(Fault::UnknownKey { key: d.key.clone(), expected });
    }
    if !keys::verify(key, &statement(d.records, &d.head, d.size, &d.key), &d.sig) {
        return Err(Fault::BadSignature);
    }
    Ok(())
}

fn problem(file: &Path, line: u64, offset: u64, seq: Option<u64>, fault: Fault) -> Box<Problem> {
    Box::new(Problem { file: file.to_path_buf(), line, offset, seq, fault })
}

/// What every verification starts from: the key (cross-checked against a readable signing
/// key) and the separate checkpoint file, each entry signed by that key.
struct Setup {
    key: Option<VerifyingKey>,
    signed: BTreeMap<u64, (String, u64)>,
    /// From the copies of `rotate` records: archive name → where it ended.
    openings: HashMap<String, Opening>,
    report: Report,
}

fn setup(paths: &Paths, path: &Path) -> Result<Result<Setup, Report>, Error> {
    let mut report = Report {
        path: path.to_path_buf(),
        records: 0,
        bytes: 0,
        checkpoints: 0,
        external_checkpoints: 0,
        head: GENESIS.to_string(),
        key: None,
        signing_key_checked: false,
        files: Vec::new(),
        torn: None,
        problem: None,
    };
    let key = keys::load_public(&paths.key, &paths.public)?.map(|(k, from)| (k, from == paths.public));
    report.key = key.as_ref().map(|(k, _)| keys::public_hex(k));
    // `ledger.pub` against the signing key, when the key is there to read: replacing the
    // public key (to pass off a forger's checkpoints) shows here.
    if let Some((k, true)) = &key
        && let Some(derived) = keys::read_signing_public(&paths.key)?
    {
        report.signing_key_checked = true;
        if derived != *k {
            report.problem = Some(*problem(
                &paths.public,
                1,
                0,
                None,
                Fault::KeyMismatch {
                    public: keys::public_hex(k),
                    signing_key: paths.key.clone(),
                    derived: keys::public_hex(&derived),
                },
            ));
            return Ok(Err(report));
        }
    }
    let key = key.map(|(k, _)| k);
    let external = match std::fs::read(&paths.checkpoints) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(Error::io("read the checkpoint file", &paths.checkpoints, e)),
    };
    let mut signed = BTreeMap::new();
    let mut openings = HashMap::new();
    let mut off = 0u64;
    for (i, line) in external.split_inclusive(|&b| b == b'\n').enumerate() {
        let at = off;
        off += line.len() as u64;
        let Some(line) = line.strip_suffix(b"\n") else { break }; // a torn checkpoint line says nothing
        let parsed = check_line(line).and_then(|_| {
            serde_json::from_slice::<ExternalLine>(line)
                .map_err(|e| Fault::CheckpointInvalid { detail: format!("unreadable checkpoint: {e}") })
        });
        match parsed.and_then(|cp| check_signature(&cp.data.signed, key.as_ref(), &paths.public).map(|()| cp.data)) {
            Ok(d) => {
                if let (Some(name), Some(size)) = (d.previous, d.previous_size) {
                    openings.insert(name, Opening { records: d.signed.records, head: d.signed.head.clone(), size });
                }
                signed.insert(d.signed.records, (d.signed.head, d.signed.size));
            }
            Err(fault) => {
                report.problem = Some(*problem(&paths.checkpoints, i as u64 + 1, at, None, fault));
                return Ok(Err(report));
            }
        }
    }
    Ok(Ok(Setup { key, signed, openings, report }))
}

/// Verify the ledger in `dir` (see [`crate::Ledger`] for the files): its archives and live
/// file as one chain. I/O errors are errors; everything the files say is in the [`Report`].
pub fn verify_dir(dir: &Path) -> Result<Report, Error> {
    let paths = Paths::new(dir);
    let setup = match setup(&paths, &paths.log)? {
        Ok(s) => s,
        Err(report) => return Ok(report),
    };
    let snapshot = files::snapshot(dir)?;
    let mut chain = Chain::new(setup, &paths);
    // Archives are numbered 1, 2, … without gaps: a missing number is a removed file.
    for (i, f) in snapshot.iter().filter(|f| f.number.is_some()).enumerate() {
        let want = i as u64 + 1;
        if f.number != Some(want) {
            let name = archive_name(want);
            let why = match i {
                0 => format!("archives are numbered from 1 and the first one here is {}", f.path.display()),
                _ => format!("archives are numbered without gaps and the one after {} is {}", archive_name(want - 1), f.path.display()),
            };
            chain.report.problem = Some(*problem(&dir.join(&name), 0, 0, None, Fault::MissingFile { name, why }));
            return Ok(chain.report);
        }
    }
    let n = snapshot.len();
    let mut before: Option<(String, u64)> = None;
    for (i, f) in snapshot.iter().enumerate() {
        let bytes = f.read()?;
        let start = match &before {
            None => Start::Genesis,
            Some((name, size)) => Start::After { name: name.clone(), size: *size },
        };
        let role = Role { start, archive: f.number.is_some(), last: i + 1 == n };
        if let Err(p) = chain.walk(&f.path, &bytes, role) {
            chain.report.problem = Some(*p);
            return Ok(chain.report);
        }
        let name = f.path.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        before = Some((name, bytes.len() as u64));
    }
    chain.report.head = chain.prev.clone();
    Ok(chain.report)
}

/// Verify one file of the ledger in `dir` on its own (see [`crate::verify_file`]).
pub fn verify_one(dir: &Path, file: &Path) -> Result<Report, Error> {
    let paths = Paths::new(dir);
    let setup = match setup(&paths, file)? {
        Ok(s) => s,
        Err(report) => return Ok(report),
    };
    let bytes = std::fs::read(file).map_err(|e| Error::io("read", file, e))?;
    let name = file.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let role = match archive_number(&name) {
        Some(1) => Role { start: Start::Genesis, archive: true, last: false },
        Some(n) => Role { start: Start::Alone { previous: Some(archive_name(n - 1)) }, archive: true, last: false },
        None if name == "ledger.jsonl" => {
            let previous = files::archives(dir)?.pop().map(|(n, _)| archive_name(n));
            Role { start: Start::Alone { previous }, archive: false, last: true }
        }
        // A copy under another name: checked as an archive, whatever its place.
        None => Role { start: Start::Alone { previous: None }, archive: true, last: false },
    };
    let mut chain = Chain::new(setup, &paths);
    if let Err(p) = chain.walk(file, &bytes, role) {
        chain.report.problem = Some(*p);
    }
    chain.report.head = chain.prev.clone();
    Ok(chain.report)
}

/// Where the chain stands when a file begins.
enum Start {
    /// The first file: seq 0 after [`GENESIS`].
    Genesis,
    /// Right after the named file of the given size (the files checked as one chain).
    After { name: String, size: u64 },
    /// Checked alone: the first record says where the chain stands; `previous` is the file
    /// that must come before it, when known.
    Alone { previous: Option<String> },
}

struct Role {
    start: Start,
    /// An archive: it must end with a checkpoint, and cannot be torn.
    archive: bool,
    /// The end of the chain: signed checkpoints past its end mean records were removed.
    last: bool,
}

/// The chain as it is walked, file after file.
struct Chain<'a> {
    key: Option<VerifyingKey>,
    paths: &'a Paths,
    /// The checkpoint file's entries not matched yet: records → (head, offset in its file).
    signed: BTreeMap<u64, (String, u64)>,
    openings: HashMap<String, Opening>,
    seq: u64,
    prev: String,
    report: Report,
}

impl<'a> Chain<'a> {
    fn new(setup: Setup, paths: &'a Paths) -> Chain<'a> {
        Chain {
            key: setup.key,
            paths,
            signed: setup.signed,
            openings: setup.openings,
            seq: 0,
            prev: GENESIS.to_string(),
            report: setup.report,
        }
    }

    /// Signed checkpoints that fall at this point of the chain (after `self.seq` records, at
    /// byte `off` of this file) must name the head the log has here.
    fn match_external(&mut self, file: &Path, line: u64, off: u64) -> Result<(), Box<Problem>> {
        while let Some((&records, (head, size))) = self.signed.first_key_value() {
            if records > self.seq {
                break;
            }
            if records == self.seq && *head == self.prev && *size == 0 && off > 0 {
                let detail = format!(
                    "the checkpoint file's copy of the signed `rotate` record that opened the next file says this file ended after {records} records, at byte {off}; it goes on: lines were added"
                );
                return Err(problem(file, line, off, Some(self.seq), Fault::RotateInvalid { detail }));
            }
            if records < self.seq || *head != self.prev || *size != off {
                return Err(problem(
                    file,
                    line,
                    off,
                    Some(self.seq),
                    Fault::Rewritten {
                        records,
                        signed_head: head.clone(),
                        log_head: self.prev.clone(),
                        signed_size: *size,
                        log_size: off,
                    },
                ));
            }
            self.report.external_checkpoints += 1;
            self.signed.pop_first();
        }
        Ok(())
    }

    /// The chain ends here, in `name`, at byte `off`. When that is an archive whose closing
    /// the checkpoint file shows a later file opening after, that file is missing; otherwise
    /// signed checkpoints at this point are matched as anywhere.
    fn end_of_chain(&mut self, path: &Path, name: &str, archive: bool, line: u64, off: u64) -> Result<(), Box<Problem>> {
        if archive
            && let Some(o) = self.openings.get(name)
            && o.records == self.seq
        {
            let next = archive_number(name).map_or_else(|| "the file after it".to_string(), |n| archive_name(n + 1));
            let why = format!(
                "the checkpoint file holds the signed `rotate` record that opened it after {name} ({} records), and the chain ends in {name}",
                o.records
            );
            return Err(problem(&self.paths.dir.join(&next), 0, 0, None, Fault::MissingFile { name: next, why }));
        }
        self.match_external(path, line, off)
    }

    /// Check one file's records, continuing the chain.
    fn walk(&mut self, path: &Path, bytes: &[u8], role: Role) -> Result<(), Box<Problem>> {
        let name = path.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        let mut summary = FileSummary { path: path.to_path_buf(), first_seq: None, records: 0, bytes: 0 };
        // Alone, the first record says where the chain stands; signed checkpoints before that
        // belong to earlier files.
        if let Start::Alone { .. } = role.start
            && let Some(first) = memchr::memchr(b'\n', bytes).map(|nl| &bytes[..nl])
            && let Ok(head) = check_line(first)
        {
            self.seq = head.seq;
            self.prev = if head.seq == 0 { GENESIS.to_string() } else { head.prev.into_owned() };
            self.signed.retain(|&r, _| r >= head.seq);
        }
        let mut checked = check_lines_parallel(bytes);
        let mut checked_iter = checked.iter_mut();
        let mut off = 0u64;
        let mut lineno = 0u64;
        let mut last_kind: Option<(Cow<'_, str>, u64, u64)> = None;
        let mut rest = bytes;
        loop {
            if rest.is_empty() {
                // The end of a file that another follows is also the start of that one:
                // signed checkpoints there are matched at its first line.
                if role.last {
                    self.end_of_chain(path, &name, role.archive, lineno + 1, off)?;
                }
                break;
            }
            self.match_external(path, lineno + 1, off)?;
            let Some(nl) = memchr::memchr(b'\n', rest) else {
                if role.archive {
                    let fault = Fault::Malformed { detail: "an archive ends with an incomplete line".into() };
                    return Err(problem(path, lineno + 1, off, Some(self.seq), fault));
                }
                self.report.torn = Some(Torn { file: path.to_path_buf(), offset: off, len: rest.len() as u64 });
                break;
            };
            let line = &rest[..nl];
            lineno += 1;
            let seq = self.seq;
            let fail = |fault| problem(path, lineno, off, Some(seq), fault);
            let head = checked_iter.next().and_then(Option::take).unwrap_or_else(|| check_line(line)).map_err(fail)?;
            if lineno == 1 {
                self.check_opening(&head, line, &name, &role.start).map_err(fail)?;
                summary.first_seq = Some(head.seq);
            }
            if head.seq != seq {
                return Err(fail(Fault::SeqGap { expected: seq, found: head.seq }));
            }
            if head.prev.as_ref() != self.prev.as_str() {
                return Err(fail(Fault::BrokenLink { expected: self.prev.clone(), found: head.prev.into_owned() }));
            }
            match head.kind.as_ref() {
                "checkpoint" => {
                    let cp = serde_json::from_slice::<CheckpointLine>(line)
                        .map_err(|e| Fault::CheckpointInvalid { detail: format!("unreadable checkpoint: {e}") })
                        .map_err(fail)?;
                    self.check_signed(&cp.data, seq, off).map_err(fail)?;
                }
                "rotate" => {
                    if lineno != 1 {
                        let detail = "a `rotate` record in the middle of a file (it can only open one)".to_string();
                        return Err(fail(Fault::RotateInvalid { detail }));
                    }
                    let r = serde_json::from_slice::<RotateLine>(line)
                        .map_err(|e| Fault::RotateInvalid { detail: format!("unreadable rotate record: {e}") })
                        .map_err(fail)?;
                    self.check_signed(&r.data.signed, seq, off).map_err(fail)?;
                }
                kind if seq > 0 && seq.is_multiple_of(CHECKPOINT_INTERVAL) => {
                    return Err(fail(Fault::CheckpointMissing { kind: kind.to_string() }));
                }
                _ => {}
            }
            last_kind = Some((head.kind, lineno, off));
            self.prev = head.hash.into_owned();
            self.seq += 1;
            self.report.records += 1;
            summary.records += 1;
            off += nl as u64 + 1;
            rest = &rest[nl + 1..];
        }
        summary.bytes = off;
        self.report.bytes += off;
        self.report.files.push(summary);
        if role.archive {
            match last_kind {
                Some((kind, _, _)) if kind == "checkpoint" => {}
                Some((kind, line, at)) => {
                    return Err(problem(path, line, at, Some(self.seq - 1), Fault::NotClosed { kind: Some(kind.into_owned()) }));
                }
                None => return Err(problem(path, 0, 0, None, Fault::NotClosed { kind: None })),
            }
        }
        // An archive must end where the signed record that opens the next file (its copy in
        // the checkpoint file, which names this archive) says it did: this catches an archive
        // cut back to an earlier checkpoint even when it is checked alone.
        if role.archive
            && let Some(o) = self.openings.get(&name)
        {
            if self.seq < o.records {
                return Err(problem(path, 0, off, None, Fault::ArchiveTruncated { records: self.seq, expected: o.records }));
            }
            if self.seq != o.records || self.prev != o.head || off != o.size {
                let detail = format!(
                    "the signed record that opens the next file says {name} ended after {} records, {} bytes, head {}…; it ends after {}, {off}, {}…: it was changed",
                    o.records,
                    o.size,
                    short(&o.head),
                    self.seq,
                    short(&self.prev)
                );
                return Err(problem(path, 0, off, None, Fault::RotateInvalid { detail }));
            }
        }
        if role.last
            && let Some((&records, &(_, size))) = self.signed.first_key_value()
        {
            return Err(problem(
                path,
                lineno + 1,
                off,
                Some(self.seq),
                Fault::Truncated { checkpoint_records: records, checkpoint_size: size, log_records: self.seq, log_bytes: off },
            ));
        }
        Ok(())
    }

    /// A file's first record: a file after the first opens with a `rotate` record naming the
    /// file before it. Checked before the sequence, so that a removed or renamed file is
    /// reported as that rather than as a gap.
    fn check_opening(&self, head: &Head<'_>, line: &[u8], name: &str, start: &Start) -> Result<(), Fault> {
        let continues = match start {
            Start::Genesis => false,
            Start::After { .. } => true,
            Start::Alone { .. } => head.seq > 0,
        };
        if head.kind != "rotate" {
            if continues {
                let detail = format!(
                    "{name} continues the chain at seq {}, so it must open with a `rotate` record naming the file before it; it opens with a `{}` record",
                    head.seq, head.kind
                );
                return Err(Fault::RotateInvalid { detail });
            }
            return Ok(());
        }
        let r = serde_json::from_slice::<RotateLine>(line)
            .map_err(|e| Fault::RotateInvalid { detail: format!("unreadable rotate record: {e}") })?;
        let previous = &r.data.previous;
        let exists = self.paths.dir.join(previous).exists();
        let missing = |why: String| Fault::MissingFile { name: previous.clone(), why };
        match start {
            Start::Genesis => Err(missing(format!(
                "{name}, the first file here, opens with a `rotate` record saying the chain continues from it"
            ))),
            Start::After { name: before, size } if previous != before => {
                if exists {
                    Err(Fault::RotateInvalid {
                        detail: format!(
                            "{name} opens with a `rotate` record naming {previous} as the file before it, but {before} is: files were renamed"
                        ),
                    })
                } else {
                    Err(missing(format!("{name} opens with a `rotate` record naming it as the file before it")))
                }
            }
            Start::After { size, .. } if r.data.previous_size != *size => Err(Fault::RotateInvalid {
                detail: format!(
                    "{name} opens with a `rotate` record saying {previous} had {} bytes; it has {size}: the archive was changed",
                    r.data.previous_size
                ),
            }),
            Start::Alone { previous: Some(want) } if previous != want => Err(Fault::RotateInvalid {
                detail: format!(
                    "by its name {name} follows {want}, but its `rotate` record names {previous}: files were renamed"
                ),
            }),
            _ => Ok(()),
        }
    }

    /// A checkpoint (or the signed part of a `rotate` record) at `seq`, byte `off` of its file.
    fn check_signed(&mut self, d: &CheckpointData, seq: u64, off: u64) -> Result<(), Fault> {
        if d.records != seq || d.head != self.prev || d.size != off {
            return Err(Fault::CheckpointInvalid {
                detail: format!(
                    "it says {} records, head {}…, {} bytes; before it the log has {seq}, {}…, {off}",
                    d.records,
                    short(&d.head),
                    d.size,
                    short(&self.prev)
                ),
            });
        }
        check_signature(d, self.key.as_ref(), &self.paths.public)?;
        self.report.checkpoints += 1;
        Ok(())
    }
}
