//! Verification: sequence, links, hashes, checkpoints and their signatures.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use ed25519_dalek::VerifyingKey;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::canon::hex;
use crate::{keys, Error, CHECKPOINT_INTERVAL, FORMAT_VERSION, GENESIS};

/// What `verify` found.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The log that was checked.
    pub path: PathBuf,
    /// Complete records read up to the first problem (all of them when there is none).
    pub records: u64,
    /// Bytes of complete records.
    pub bytes: u64,
    /// Checkpoint records in the log whose signature verified.
    pub checkpoints: u64,
    /// Checkpoints in the separate checkpoint file that were matched against the log.
    pub external_checkpoints: u64,
    /// The hash of the last complete record ([`GENESIS`] for an empty log).
    pub head: String,
    /// The key that verified the checkpoints, and where it was read.
    pub key: Option<String>,
    /// An incomplete last line (a writer stopped mid-append).
    pub torn: Option<Torn>,
    /// The first sign of tampering, if any.
    pub problem: Option<Problem>,
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
    /// Where it starts (the end of the last complete record).
    pub offset: u64,
    /// Its length in bytes.
    pub len: u64,
}

/// The first bad record and what is wrong with it.
#[derive(Debug, Clone, Serialize)]
pub struct Problem {
    /// The file it is in (the log, or the checkpoint file).
    pub file: PathBuf,
    /// 1-based line number in that file.
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
        write!(f, "{}:{} (byte {})", self.file.display(), self.line, self.offset)?;
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
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::Malformed { detail } => write!(f, "not a ledger record: {detail}"),
            Fault::HashMismatch { stored, computed } => write!(
                f,
                "content does not match its hash (stored {}…, content hashes to {}…): the record was edited",
                &stored[..stored.len().min(12)],
                &computed[..12]
            ),
            Fault::Version { found } => write!(f, "unknown format version {found} (this reader knows {FORMAT_VERSION})"),
            Fault::SeqGap { expected, found } if found > expected => {
                write!(f, "expected seq {expected}, found {found}: {} record(s) missing or moved", found - expected)
            }
            Fault::SeqGap { expected, found } => write!(f, "expected seq {expected}, found {found}: a record repeated or moved"),
            Fault::BrokenLink { expected, found } => write!(
                f,
                "prev is {}…, but the record before hashes to {}…: the chain is broken here",
                &found[..found.len().min(12)],
                &expected[..expected.len().min(12)]
            ),
            Fault::CheckpointMissing { kind } => {
                write!(f, "a `{kind}` record where a checkpoint must be (every {CHECKPOINT_INTERVAL} records)")
            }
            Fault::CheckpointInvalid { detail } => write!(f, "invalid checkpoint: {detail}"),
            Fault::BadSignature => write!(f, "checkpoint signature does not verify"),
            Fault::UnknownKey { key, expected } => write!(
                f,
                "checkpoint signed by key {}…, not this ledger's key {}…",
                &key[..key.len().min(12)],
                &expected[..expected.len().min(12)]
            ),
            Fault::NoPublicKey { path } => write!(f, "checkpoints exist but there is no public key at {}", path.display()),
            Fault::Truncated { checkpoint_records, checkpoint_size, log_records, log_bytes } => write!(
                f,
                "a signed checkpoint covers {checkpoint_records} records ({checkpoint_size} bytes) but the log has {log_records} ({log_bytes} bytes): records were removed from the end"
            ),
            Fault::Rewritten { records, signed_head, log_head, signed_size, log_size } => write!(
                f,
                "after {records} records a signed checkpoint has head {}… at byte {signed_size}, the log has {}… at byte {log_size}: the log was rewritten",
                &signed_head[..signed_head.len().min(12)],
                &log_head[..log_head.len().min(12)]
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

/// A checkpoint record's `data`.
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
    seq: u64,
    data: CheckpointData,
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

/// Verify the ledger in `dir` (see [`crate::Ledger`] for the files). I/O errors are errors;
/// everything the files say is in the [`Report`].
pub fn verify_dir(dir: &Path) -> Result<Report, Error> {
    let paths = crate::Paths::new(dir);
    let log = match std::fs::read(&paths.log) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(Error::io("read the ledger", &paths.log, e)),
    };
    let external = match std::fs::read(&paths.checkpoints) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(Error::io("read the checkpoint file", &paths.checkpoints, e)),
    };
    let key = keys::load_public(&paths.key, &paths.public)?;
    Ok(verify_bytes(&log, &external, key.as_ref().map(|k| &k.0), &paths))
}

/// Verify a log held in memory against a checkpoint file's contents and a public key.
pub(crate) fn verify_bytes(log: &[u8], external: &[u8], key: Option<&VerifyingKey>, paths: &crate::Paths) -> Report {
    let mut report = Report {
        path: paths.log.clone(),
        records: 0,
        bytes: 0,
        checkpoints: 0,
        external_checkpoints: 0,
        head: GENESIS.to_string(),
        key: key.map(keys::public_hex),
        torn: None,
        problem: None,
    };
    let problem = |file: &Path, line: u64, offset: u64, seq: Option<u64>, fault: Fault| Problem {
        file: file.to_path_buf(),
        line,
        offset,
        seq,
        fault,
    };

    // 1. The separate checkpoint file: each line signed, by this ledger's key.
    let mut signed: BTreeMap<u64, (String, u64)> = BTreeMap::new();
    let mut off = 0u64;
    for (i, line) in external.split_inclusive(|&b| b == b'\n').enumerate() {
        let at = off;
        off += line.len() as u64;
        let Some(line) = line.strip_suffix(b"\n") else { break }; // a torn checkpoint line says nothing
        let parsed = check_line(line).and_then(|_| {
            serde_json::from_slice::<CheckpointLine>(line)
                .map_err(|e| Fault::CheckpointInvalid { detail: format!("unreadable checkpoint: {e}") })
        });
        let cp = match parsed.and_then(|cp| check_signature(&cp.data, key, &paths.public).map(|()| cp)) {
            Ok(cp) => cp,
            Err(fault) => {
                report.problem = Some(problem(&paths.checkpoints, i as u64 + 1, at, None, fault));
                return report;
            }
        };
        let _ = cp.seq;
        signed.insert(cp.data.records, (cp.data.head, cp.data.size));
    }
    let mut pending = signed.iter().peekable();

    // 2. Every complete line's own hash, checked in parallel (the costly part: a SHA-256
    //    and a parse per record); the links and the order are checked in sequence below.
    let mut checked = check_lines_parallel(log);
    let mut checked_iter = checked.iter_mut();

    // 3. The log, line by line.
    let mut off = 0u64;
    let mut prev_hash = GENESIS.to_string();
    let mut lineno = 0u64;
    let mut rest = log;
    loop {
        // Signed checkpoints that fall at this point: after `records` records, at byte `off`.
        while let Some(&(&records, (head, size))) = pending.peek() {
            if records > report.records {
                break;
            }
            if records < report.records || *head != prev_hash || *size != off {
                report.problem = Some(problem(
                    &paths.log,
                    lineno + 1,
                    off,
                    Some(report.records),
                    Fault::Rewritten {
                        records,
                        signed_head: head.clone(),
                        log_head: prev_hash.clone(),
                        signed_size: *size,
                        log_size: off,
                    },
                ));
                return report;
            }
            report.external_checkpoints += 1;
            pending.next();
        }
        if rest.is_empty() {
            break;
        }
        let Some(nl) = memchr::memchr(b'\n', rest) else {
            report.torn = Some(Torn { offset: off, len: rest.len() as u64 });
            break;
        };
        let line = &rest[..nl];
        lineno += 1;
        let seq = report.records;
        let fail = |fault| Some(problem(&paths.log, lineno, off, Some(seq), fault));
        let head = match checked_iter.next().and_then(Option::take).unwrap_or_else(|| check_line(line)) {
            Ok(h) => h,
            Err(fault) => {
                report.problem = fail(fault);
                return report;
            }
        };
        if head.seq != seq {
            report.problem = fail(Fault::SeqGap { expected: seq, found: head.seq });
            return report;
        }
        if head.prev.as_ref() != prev_hash.as_str() {
            report.problem = fail(Fault::BrokenLink { expected: prev_hash, found: head.prev.into_owned() });
            return report;
        }
        if head.kind == "checkpoint" {
            let checked = serde_json::from_slice::<CheckpointLine>(line)
                .map_err(|e| Fault::CheckpointInvalid { detail: format!("unreadable checkpoint: {e}") })
                .and_then(|cp| {
                    let d = &cp.data;
                    if d.records != seq || d.head != prev_hash || d.size != off {
                        return Err(Fault::CheckpointInvalid {
                            detail: format!(
                                "it says {} records, head {}…, {} bytes; before it the log has {seq}, {}…, {off}",
                                d.records,
                                &d.head[..d.head.len().min(12)],
                                d.size,
                                &prev_hash[..12]
                            ),
                        });
                    }
                    check_signature(d, key, &paths.public)
                });
            if let Err(fault) = checked {
                report.problem = fail(fault);
                return report;
            }
            report.checkpoints += 1;
        } else if seq > 0 && seq.is_multiple_of(CHECKPOINT_INTERVAL) {
            report.problem = fail(Fault::CheckpointMissing { kind: head.kind.into_owned() });
            return report;
        }
        prev_hash = head.hash.into_owned();
        report.records += 1;
        off += nl as u64 + 1;
        report.bytes = off;
        rest = &rest[nl + 1..];
    }
    report.head = prev_hash;
    // 3. Signed checkpoints beyond the end of the log: it was truncated.
    if let Some(&(&records, &(_, size))) = pending.peek() {
        report.problem = Some(problem(
            &paths.log,
            lineno + 1,
            off,
            Some(report.records),
            Fault::Truncated { checkpoint_records: records, checkpoint_size: size, log_records: report.records, log_bytes: off },
        ));
    }
    report
}
