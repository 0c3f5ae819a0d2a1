//! The ledger's proof: concurrent writers, killed writers, and every kind of tampering.
//!
//! Writer processes are this test binary run again with `--exact writer_child` and
//! `LEDGER_TEST_DIR` set.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime};

use pinfold_ledger::{Fault, Ledger, Record, Status, verify};
use serde_json::json;

fn rec(i: u64) -> Record {
    Record::new("check", json!({"command": format!("cargo test case_{i}"), "decision": "allow", "n": i}))
}

/// Not a test of its own: the body of a writer process.
#[test]
fn writer_child() {
    let Some(dir) = std::env::var_os("LEDGER_TEST_DIR") else { return };
    let n: u64 = std::env::var("LEDGER_TEST_N").unwrap().parse().unwrap();
    let ledger = Ledger::open(Path::new(&dir)).unwrap().with_fsync(false);
    let me = std::process::id();
    for i in 0..n {
        let a = ledger.append(Record::new("check", json!({"writer": me, "i": i}))).unwrap();
        // Acknowledged: the parent may count on this record from now on.
        println!("{}", a.seq);
    }
}

fn writer(dir: &Path, n: u64) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "writer_child", "--nocapture", "--test-threads=1"])
        .env("LEDGER_TEST_DIR", dir)
        .env("LEDGER_TEST_N", n.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

#[test]
fn sixteen_processes_two_thousand_appends_each() {
    let dir = tempfile::tempdir().unwrap();
    let children: Vec<_> = (0..16).map(|_| writer(dir.path(), 2000)).collect();
    let mut pids = Vec::new();
    for c in children {
        pids.push(c.id());
        let out = c.wait_with_output().unwrap();
        assert!(out.status.success());
    }
    let report = verify(dir.path()).unwrap();
    assert_eq!(report.status(), Status::Intact, "{:?}", report.problem);
    // 32,000 records plus a checkpoint at every 1,000th sequence number.
    let checkpoints = report.checkpoints;
    assert_eq!(report.records, 32_000 + checkpoints);
    assert_eq!(checkpoints, (32_000 + checkpoints - 1) / 1000);
    // Every writer's every record is there exactly once, in its own order.
    let records = pinfold_ledger::read_records(dir.path()).unwrap();
    for pid in pids {
        let mine: Vec<u64> = records
            .iter()
            .filter(|r| r["data"]["writer"] == json!(pid))
            .map(|r| r["data"]["i"].as_u64().unwrap())
            .collect();
        assert_eq!(mine, (0..2000).collect::<Vec<_>>(), "writer {pid}");
    }
}

/// A cheap xorshift, seeded from the clock; the seed is printed so a failure can be replayed.
fn rng() -> impl FnMut(u64) -> u64 {
    let mut s = std::env::var("LEDGER_TEST_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or_else(|| {
        SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap().as_nanos() as u64 | 1
    });
    eprintln!("LEDGER_TEST_SEED={s}");
    move |n| {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s % n
    }
}

#[test]
fn writers_killed_at_random_points() {
    let dir = tempfile::tempdir().unwrap();
    let mut next = rng();
    let mut acked_total = 0u64;
    let mut torn_seen = 0;
    for _ in 0..50 {
        let mut child = writer(dir.path(), 1_000_000);
        let mut out = BufReader::new(child.stdout.take().unwrap());
        // Let it get going, then kill it somewhere in the middle of an append.
        let mut last_acked = None;
        let mut line = String::new();
        let _ = out.read_line(&mut line);
        std::thread::sleep(Duration::from_micros(next(20_000)));
        let pid = child.id() as i32;
        assert_eq!(unsafe_kill(pid), 0);
        let _ = child.wait();
        for l in std::iter::once(line.clone()).chain(out.lines().map_while(Result::ok)) {
            if let Ok(seq) = l.trim().parse::<u64>() {
                last_acked = Some(seq);
            }
        }
        let report = verify(dir.path()).unwrap();
        match report.status() {
            Status::Intact => {}
            Status::Torn => {
                torn_seen += 1;
                let r = Ledger::open(dir.path()).unwrap().repair().unwrap().unwrap();
                assert_eq!(r.offset, report.torn.as_ref().unwrap().offset);
                assert_eq!(verify(dir.path()).unwrap().status(), Status::Intact);
            }
            Status::Tampered => panic!("a killed writer looked like tampering: {}", report.problem.unwrap()),
        }
        // No acknowledged record is lost.
        let records = verify(dir.path()).unwrap().records;
        if let Some(seq) = last_acked {
            assert!(records > seq, "acknowledged seq {seq} lost: {records} records");
        }
        assert!(records >= acked_total);
        acked_total = records;
    }
    eprintln!("torn tails seen: {torn_seen} of 50");
}

#[allow(unsafe_code)]
fn unsafe_kill(pid: i32) -> i32 {
    // SAFETY: kill(2) takes plain integers; `pid` is our own child, not yet reaped.
    unsafe { libc::kill(pid, libc::SIGKILL) }
}

/// A ledger of 1,100 records (a checkpoint at 1,000), and its log's lines.
fn built(n: u64) -> (tempfile::TempDir, Vec<Vec<u8>>) {
    let dir = tempfile::tempdir().unwrap();
    let ledger = Ledger::open(dir.path()).unwrap().with_fsync(false);
    for i in 0..n {
        ledger.append(rec(i)).unwrap();
    }
    let lines = lines(dir.path());
    (dir, lines)
}

fn lines(dir: &Path) -> Vec<Vec<u8>> {
    std::fs::read(dir.join("ledger.jsonl")).unwrap().split_inclusive(|&b| b == b'\n').map(<[u8]>::to_vec).collect()
}

fn write_lines(dir: &Path, lines: &[Vec<u8>]) {
    std::fs::write(dir.join("ledger.jsonl"), lines.concat()).unwrap();
}

fn problem(dir: &Path) -> pinfold_ledger::Problem {
    let r = verify(dir).unwrap();
    assert_eq!(r.status(), Status::Tampered, "{r:?}");
    r.problem.unwrap()
}

#[test]
fn intact_ledger_verifies_with_checkpoints() {
    let (dir, lines) = built(1100);
    let r = verify(dir.path()).unwrap();
    assert_eq!(r.status(), Status::Intact);
    assert_eq!((r.records, r.checkpoints, r.external_checkpoints), (1101, 1, 1));
    assert_eq!(lines.len(), 1101);
    let key = std::fs::metadata(dir.path().join("ledger.key")).unwrap();
    assert_eq!(std::os::unix::fs::PermissionsExt::mode(&key.permissions()) & 0o777, 0o600);
}

#[test]
fn one_flipped_byte_anywhere_is_detected() {
    let (dir, lines) = built(1100);
    let original = lines.concat();
    let mut next = rng();
    for _ in 0..300 {
        let mut bytes = original.clone();
        // Any byte but the final newline (removing that is indistinguishable from a crash,
        // see `final_newline_removed_reads_as_torn`).
        let at = next(bytes.len() as u64 - 1) as usize;
        bytes[at] ^= 1 << next(8);
        std::fs::write(dir.path().join("ledger.jsonl"), &bytes).unwrap();
        let p = problem(dir.path());
        // The record reported is the one holding the byte (or, for a flipped newline, the one
        // it ends or the merged one).
        let line_of = original[..at].iter().filter(|&&b| b == b'\n').count() as u64 + 1;
        assert!(p.line == line_of || p.line == line_of + 1, "byte {at} on line {line_of}, reported {p}");
    }
    // A flip inside record 500's command: that record's content no longer matches its hash.
    let mut ls = lines.clone();
    let at = ls[500].windows(9).position(|w| w == b"case_500\"").unwrap();
    ls[500][at] = b'C';
    write_lines(dir.path(), &ls);
    let p = problem(dir.path());
    assert_eq!((p.line, p.seq), (501, Some(500)));
    assert!(matches!(p.fault, Fault::HashMismatch { .. }), "{p}");
    assert!(p.to_string().contains("the record was edited"), "{p}");
}

#[test]
fn deleted_line_is_a_gap() {
    let (dir, mut lines) = built(1100);
    lines.remove(500);
    write_lines(dir.path(), &lines);
    let p = problem(dir.path());
    assert_eq!(p.line, 501);
    assert!(matches!(p.fault, Fault::SeqGap { expected: 500, found: 501 }), "{p}");
    assert!(p.to_string().contains("1 record(s) missing"), "{p}");
}

#[test]
fn reordered_lines_are_detected() {
    let (dir, mut lines) = built(1100);
    lines.swap(299, 300);
    write_lines(dir.path(), &lines);
    let p = problem(dir.path());
    assert_eq!(p.line, 300);
    assert!(matches!(p.fault, Fault::SeqGap { expected: 299, found: 300 }), "{p}");
}

#[test]
fn truncation_after_a_checkpoint_is_detected() {
    let (dir, lines) = built(1100);
    write_lines(dir.path(), &lines[..900]);
    let p = problem(dir.path());
    assert!(
        matches!(p.fault, Fault::Truncated { checkpoint_records: 1000, log_records: 900, .. }),
        "{p}"
    );
    // An on-demand checkpoint covers the very end: removing the last record is detected too.
    let (dir, _) = built(10);
    Ledger::open(dir.path()).unwrap().checkpoint().unwrap();
    let mut lines = lines_of(dir.path());
    lines.truncate(9); // drop record 9 and the checkpoint after it
    write_lines(dir.path(), &lines);
    let p = problem(dir.path());
    assert!(matches!(p.fault, Fault::Truncated { checkpoint_records: 10, log_records: 9, .. }), "{p}");
}

fn lines_of(dir: &Path) -> Vec<Vec<u8>> {
    lines(dir)
}

#[test]
fn fresh_chain_built_without_the_key_is_detected() {
    let (dir, _) = built(1100);
    // The forger builds a complete, internally consistent chain of the same length; needing a
    // checkpoint at 1,000 they sign it with their own key.
    let (forged, forged_lines) = built(1100);
    write_lines(dir.path(), &forged_lines);
    let p = problem(dir.path());
    assert!(matches!(p.fault, Fault::Rewritten { records: 1000, .. }), "{p}");
    assert!(p.to_string().contains("the log was rewritten"), "{p}");
    // A forged chain that stops short of needing a checkpoint: the checkpoint file catches it.
    let short: Vec<_> = lines(forged.path()).into_iter().take(1000).collect();
    write_lines(dir.path(), &short);
    let p = problem(dir.path());
    assert!(matches!(p.fault, Fault::Rewritten { records: 1000, .. }), "{p}");
    // Without the checkpoint file the forger's own key still gives them away.
    std::fs::remove_file(dir.path().join("ledger.checkpoints")).unwrap();
    write_lines(dir.path(), &forged_lines);
    let p = problem(dir.path());
    assert_eq!(p.line, 1001);
    assert!(matches!(p.fault, Fault::UnknownKey { .. }), "{p}");
    // Leaving the checkpoint out instead breaks the every-1,000 rule.
    let mut ls = forged_lines.clone();
    ls.remove(1000);
    let ls: Vec<Vec<u8>> = ls; // record 1000 is now an ordinary record with seq 1001: a gap
    write_lines(dir.path(), &ls);
    let p = problem(dir.path());
    assert_eq!(p.line, 1001);
}

#[test]
fn torn_tail_is_not_tampering_and_repair_records_it() {
    let (dir, lines) = built(20);
    let mut bytes = lines.concat();
    let torn = &lines[5][..40];
    bytes.extend_from_slice(torn);
    std::fs::write(dir.path().join("ledger.jsonl"), &bytes).unwrap();
    let r = verify(dir.path()).unwrap();
    assert_eq!(r.status(), Status::Torn);
    assert_eq!(r.records, 20);
    let t = r.torn.unwrap();
    assert_eq!((t.offset, t.len), (lines.concat().len() as u64, 40));
    let repaired = Ledger::open(dir.path()).unwrap().repair().unwrap().unwrap();
    assert_eq!(repaired.record.seq, 20);
    let r = verify(dir.path()).unwrap();
    assert_eq!(r.status(), Status::Intact);
    let last = pinfold_ledger::read_records(dir.path()).unwrap().pop().unwrap();
    assert_eq!(last["kind"], "repair");
    assert_eq!(last["data"]["bytes"], 40);
    assert_eq!(last["data"]["by"], "repair");
    // Nothing to repair now.
    assert!(Ledger::open(dir.path()).unwrap().repair().unwrap().is_none());
    // An append after a crash repairs first, and says so.
    let mut bytes = std::fs::read(dir.path().join("ledger.jsonl")).unwrap();
    bytes.extend_from_slice(b"{\"hash\":\"ab");
    std::fs::write(dir.path().join("ledger.jsonl"), &bytes).unwrap();
    let a = Ledger::open(dir.path()).unwrap().append(rec(99)).unwrap();
    assert_eq!(a.seq, 22);
    let recs = pinfold_ledger::read_records(dir.path()).unwrap();
    assert_eq!(recs[21]["data"]["by"], "append");
    assert_eq!(verify(dir.path()).unwrap().status(), Status::Intact);
}

#[test]
fn final_newline_removed_reads_as_torn() {
    // A writer killed after all but the last byte leaves exactly this; the repair record keeps
    // the bytes it removed.
    let (dir, lines) = built(3);
    let mut bytes = lines.concat();
    bytes.pop();
    std::fs::write(dir.path().join("ledger.jsonl"), &bytes).unwrap();
    assert_eq!(verify(dir.path()).unwrap().status(), Status::Torn);
    Ledger::open(dir.path()).unwrap().repair().unwrap().unwrap();
    let recs = pinfold_ledger::read_records(dir.path()).unwrap();
    assert!(recs[2]["data"]["torn"].as_str().unwrap().contains("case_2"));
}

#[test]
fn damaged_last_record_refuses_appends() {
    let (dir, mut lines) = built(3);
    let n = lines[2].len();
    lines[2][n - 5] ^= 1;
    write_lines(dir.path(), &lines);
    let e = Ledger::open(dir.path()).unwrap().append(rec(3)).unwrap_err();
    assert!(e.to_string().contains("damaged"), "{e}");
}

#[test]
fn redaction_keeps_a_hash_of_the_original() {
    let dir = tempfile::tempdir().unwrap();
    let data = json!({"command": "git clone https://u:hunter2@example.com/r && echo ghp_abcdefghijklmnopqrstuvwxyz0123"});
    Ledger::open(dir.path()).unwrap().with_fsync(false).append(Record::new("check", data.clone())).unwrap();
    let text = std::fs::read_to_string(dir.path().join("ledger.jsonl")).unwrap();
    assert!(!text.contains("hunter2") && !text.contains("abcdefghijklmnop"), "{text}");
    let r = &pinfold_ledger::read_records(dir.path()).unwrap()[0];
    assert_eq!(r["redacted"]["count"], 2);
    let want = pinfold_ledger::canon::sha256_hex(&pinfold_ledger::canon::encode(&data).unwrap());
    assert_eq!(r["redacted"]["sha256"], want);
}
