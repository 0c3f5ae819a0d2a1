//! The ledger's proof: concurrent writers, killed writers, and every kind of tampering.
//!
//! Writer processes are this test binary run again with `--exact writer_child` and
//! `LEDGER_TEST_DIR` set.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime};

use pinfold_ledger::{Fault, Ledger, Record, Status, verify};
use serde_json::json;

fn rec(i: u64) -> Record {
    Record::new("check", json!({"command": format!("cargo test case_{i}"), "decision": "allow", "n": i}))
}

/// Not a test of its own: the body of a writer process. `LEDGER_TEST_PAD` bytes of padding per
/// record make each `write` long (so that a kill can land inside it); the ledger's own
/// variables (`PINFOLD_LEDGER_ROTATE_BYTES`, `PINFOLD_LEDGER_CHECKPOINT_SECS`) pass through.
#[test]
fn writer_child() {
    let Some(dir) = std::env::var_os("LEDGER_TEST_DIR") else { return };
    let n: u64 = std::env::var("LEDGER_TEST_N").unwrap().parse().unwrap();
    let pad: usize = std::env::var("LEDGER_TEST_PAD").ok().map_or(0, |v| v.parse().unwrap());
    let salt: usize = std::env::var("LEDGER_TEST_SALT").ok().map_or(0, |v| v.parse().unwrap());
    let ledger = Ledger::open(Path::new(&dir)).unwrap().with_fsync(false);
    let me = std::process::id();
    let mut out = std::io::stdout().lock();
    // The appending thread, for a parent that traces it (libtest runs tests on a thread).
    let tid = std::fs::read_link("/proc/thread-self").unwrap();
    writeln!(out, "tid {}", tid.file_name().unwrap().to_str().unwrap()).unwrap();
    for i in 0..n {
        let mut data = json!({"writer": me, "i": i});
        if pad > 0 && i > 0 {
            // The first record is small, so that the parent hears of it soon; the others vary in
            // size so that kills land at many different offsets.
            data["pad"] = json!("x".repeat(pad / 2 + (salt + i as usize * 7919) % pad));
        }
        let a = ledger.append(Record::new("check", data)).unwrap();
        // Acknowledged: the parent may count on this record from now on.
        writeln!(out, "{} {}", a.seq, i).unwrap();
        out.flush().unwrap();
    }
}

fn writer(dir: &Path, n: u64) -> std::process::Child {
    writer_with(dir, n, &[])
}

fn writer_with(dir: &Path, n: u64, env: &[(&str, String)]) -> std::process::Child {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args(["--exact", "writer_child", "--nocapture", "--test-threads=1"])
        .env("LEDGER_TEST_DIR", dir)
        .env("LEDGER_TEST_N", n.to_string())
        .env_remove("PINFOLD_LEDGER_ROTATE_BYTES")
        .env_remove("PINFOLD_LEDGER_CHECKPOINT_SECS")
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    for (k, v) in env {
        c.env(k, v);
    }
    c.spawn().unwrap()
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

/// A directory on tmpfs for the kill loop: `$LEDGER_TEST_TMPFS`, else `/dev/shm`. On ext4 with
/// large folios (Linux 6.x) a SIGKILL practically never cuts a `write` of a megabyte or less
/// (measured: 0 of 40 kills mid-write tore a 64 KiB or 1 MiB write, 14 of 20 an 8 MiB one);
/// tmpfs copies a page at a time and checks for a fatal signal between pages (19 of 20 tore
/// a 64 KiB write). A torn tail is what the loop has to produce, so it runs where one can
/// happen, and fails rather than passing vacuously where it cannot.
fn tmpfs_dir() -> tempfile::TempDir {
    let base = std::env::var_os("LEDGER_TEST_TMPFS").map_or_else(|| "/dev/shm".into(), std::path::PathBuf::from);
    tempfile::tempdir_in(&base)
        .unwrap_or_else(|e| panic!("the kill loop needs a tmpfs directory ({}: {e}); set LEDGER_TEST_TMPFS", base.display()))
}

/// A loop of 200 crashes: a writer killed with SIGKILL at a random point, then verify and
/// repair. Every 2 kills start a fresh ledger (so the loop stays fast; within a pair a repair
/// meets an earlier one). The ledger rotates at 128 KiB and takes a checkpoint every 10 ms;
/// after a small first record the writer's records are 16–48 KiB (128–384 KiB for the kills
/// aimed into a write), on tmpfs ([`tmpfs_dir`]).
///
/// A kill at a random moment almost never lands inside `write`: an unoptimised writer spends
/// under 0.5 % of its time there (hashing, encoding and redacting cost ~250 ns a byte, the
/// copy well under 1). So the kills take turns:
/// * after a random delay (0–30 ms): anywhere;
/// * aimed with ptrace at the writer's appending thread: into the `write` of a record, once
///   the file has grown by a random part of it (the kernel copies, and the size grows, a page
///   at a time; the kill lands a little later, inside the copy or just after it);
/// * aimed at the n-th system-call stop (entry or exit, n random up to 150): between any two
///   steps of an append or a rotation (lock, stat, read, write, rename, open, …);
/// * aimed at the return of a rotation's `rename`: the chain ends in the new archive and
///   there is no live file (a crash there must lose nothing).
#[test]
fn writers_killed_at_random_points() {
    // At least KILLS kills; more (up to MAX_KILLS) while too few have landed where they were
    // aimed: on a loaded machine an aimed kill misses its window more often.
    const KILLS: usize = 200;
    const MAX_KILLS: usize = 800;
    let mut next = rng();
    let (mut torn_seen, mut chain_in_archive, mut archives) = (0, 0, 0);
    let mut landed = [0u32; 3]; // aimed into a write: before the copy, inside it, after it
    let mut dir = tmpfs_dir();
    let started = std::time::Instant::now();
    let mut k = 0;
    while k < KILLS || (k < MAX_KILLS && (torn_seen < KILLS / 8 || chain_in_archive < KILLS / 5)) {
        k += 1;
        if k % 2 == 1 {
            dir = tmpfs_dir();
        }
        let live = dir.path().join("ledger.jsonl");
        // Kills aimed into a write get long writes to land in: 128–384 KiB records.
        let pad: usize = if k % 4 == 2 { 256 << 10 } else { 32 << 10 };
        let env = [
            ("LEDGER_TEST_PAD", pad.to_string()),
            ("LEDGER_TEST_SALT", next(1 << 20).to_string()),
            ("PINFOLD_LEDGER_ROTATE_BYTES", (128 << 10).to_string()),
            ("PINFOLD_LEDGER_CHECKPOINT_SECS", "0.01".to_string()),
        ];
        let mut child = writer_with(dir.path(), 1_000_000, &env);
        let pid = child.id() as i32;
        let mut out = BufReader::new(child.stdout.take().unwrap());
        // The writer's thread id, then its first acknowledged record (after libtest's banner).
        let (mut tid, mut acked) = (None, Vec::new());
        let mut line = String::new();
        while acked.is_empty() && out.read_line(&mut line).unwrap() > 0 {
            // (libtest may have printed "test writer_child ... " on the same line.)
            if let Some(at) = line.find("tid ") {
                tid = line[at + 4..].trim().parse::<i32>().ok();
            }
            acked.extend(parse_ack(&line));
            line.clear();
        }
        assert!(!acked.is_empty(), "kill {k}: the writer acknowledged nothing");
        let tid = tid.expect("the writer names its thread");
        match (k - 1) % 4 {
            0 => {
                std::thread::sleep(Duration::from_micros(next(30_000)));
                assert_eq!(sys::kill(pid), 0);
            }
            1 => {
                let l = aimed_kill(pid, tid, Aim::IntoWrite { permille: next(500) }).expect("a record write");
                landed[l as usize] += 1;
            }
            2 => {
                aimed_kill(pid, tid, Aim::AtStop(1 + next(150)));
            }
            _ => {
                aimed_kill(pid, tid, Aim::AfterRotation(&live));
            }
        }
        let _ = child.wait();
        acked.extend(out.lines().map_while(Result::ok).filter_map(|l| parse_ack(&l)));
        if std::fs::metadata(&live).map_or(true, |m| m.len() == 0) {
            chain_in_archive += 1;
        }
        let report = verify(dir.path()).unwrap();
        archives += report.files.len() - 1;
        match report.status() {
            Status::Intact => {}
            Status::Torn => {
                torn_seen += 1;
                let r = Ledger::open(dir.path()).unwrap().repair().unwrap().unwrap();
                assert_eq!(r.offset, report.torn.as_ref().unwrap().offset);
                let again = verify(dir.path()).unwrap();
                assert_eq!(again.status(), Status::Intact, "kill {k}: after repair: {:?}", again.problem);
            }
            Status::Tampered => panic!("kill {k}: a killed writer looked like tampering: {}", report.problem.unwrap()),
        }
        // No acknowledged record is lost: each is there, at the sequence number it was given.
        let records = pinfold_ledger::read_records(dir.path()).unwrap();
        for (seq, i) in acked {
            let r = records.get(seq as usize).unwrap_or_else(|| panic!("kill {k}: acknowledged seq {seq} lost"));
            let got = (r["seq"].as_u64(), r["data"]["writer"].as_u64(), r["data"]["i"].as_u64());
            assert_eq!(got, (Some(seq), Some(pid as u64), Some(i)), "kill {k}");
        }
    }
    eprintln!(
        "{k} kills in {:.1} s: {torn_seen} left a torn tail, {chain_in_archive} left the chain ending in an archive \
         (no live record); {archives} archives verified; kills aimed into a write landed before/inside/after the copy: \
         {landed:?}",
        started.elapsed().as_secs_f64()
    );
    // The kills must really land mid-append, and mid-rotation, or this test proves little.
    assert!(torn_seen >= KILLS / 8, "only {torn_seen} of {k} kills left a torn tail");
    assert!(chain_in_archive >= KILLS / 5, "only {chain_in_archive} kills landed between a rotation's rename and its first record");
}

/// Where [`aimed_kill`] kills.
#[derive(Debug, Clone, Copy)]
enum Aim<'a> {
    /// Let the next `write` of 8 KiB or more (a record) start, and kill once the file has
    /// grown by this many thousandths of it.
    IntoWrite { permille: u64 },
    /// Kill at the n-th system-call stop (entries and exits both count).
    AtStop(u64),
    /// Kill as a rotation's rename returns (the first rename after which this live file is
    /// gone): the archive has its name, the new live file does not exist yet.
    AfterRotation(&'a Path),
}

/// Where a kill aimed into a write landed, judged by the size of the file written.
#[derive(Debug, Clone, Copy)]
enum Landed {
    Before = 0,
    Inside = 1,
    After = 2,
}

/// SIGKILL the writer `pid` at a point chosen by tracing its appending thread `tid`. For
/// [`Aim::IntoWrite`], says where the kill landed.
fn aimed_kill(pid: i32, tid: i32, aim: Aim) -> Option<Landed> {
    assert_eq!(sys::ptrace(libc::PTRACE_SEIZE as u32, tid, 0, (libc::PTRACE_O_TRACESYSGOOD | libc::PTRACE_O_EXITKILL) as usize), 0, "ptrace seize: {}", std::io::Error::last_os_error());
    assert_eq!(sys::ptrace(libc::PTRACE_INTERRUPT as u32, tid, 0, 0), 0, "ptrace interrupt: {}", std::io::Error::last_os_error());
    let mut stops = 0u64;
    let mut renamed = false;
    // Until the thread is gone (it should not be: it writes forever).
    while let Some(status) = sys::wait_stopped(tid) {
        let sig = libc::WSTOPSIG(status);
        let mut deliver = 0;
        if sig == libc::SIGTRAP | 0x80 {
            stops += 1;
            let (op, nr, args) = sys::syscall_info(tid);
            let record_write = op == sys::SYSCALL_INFO_ENTRY && nr == libc::SYS_write as u64 && args[2] >= 8192;
            match aim {
                Aim::IntoWrite { permille } if record_write => {
                    // The file being written, held open to watch the copy: the kernel copies
                    // a page at a time and the size grows with it.
                    let file = std::fs::File::open(format!("/proc/{pid}/fd/{}", args[0])).unwrap();
                    let before = file.metadata().unwrap().len();
                    let target = before + (args[2] * permille / 1000).max(1);
                    // The writer on one CPU, this thread watching from another: were the
                    // writer woken on this one, it would do its whole copy unwatched.
                    let restore = sys::pin_apart(tid);
                    sys::ptrace(libc::PTRACE_SYSCALL as u32, tid, 0, 0);
                    let deadline = std::time::Instant::now() + Duration::from_secs(5);
                    while file.metadata().unwrap().len() < target && std::time::Instant::now() < deadline {}
                    assert_eq!(sys::kill(pid), 0);
                    reap_thread(tid);
                    restore();
                    let after = file.metadata().unwrap().len();
                    return Some(match after - before {
                        0 => Landed::Before,
                        n if n < args[2] => Landed::Inside,
                        _ => Landed::After,
                    });
                }
                Aim::AtStop(n) if stops >= n => {
                    assert_eq!(sys::kill(pid), 0);
                    break;
                }
                Aim::AfterRotation(live) if op == sys::SYSCALL_INFO_EXIT && renamed && !live.exists() => {
                    assert_eq!(sys::kill(pid), 0);
                    break;
                }
                Aim::AfterRotation(_) if op == sys::SYSCALL_INFO_ENTRY => renamed = is_rename(nr),
                _ => {}
            }
        } else if status >> 16 != libc::PTRACE_EVENT_STOP {
            deliver = sig as usize; // a signal meant for the writer: pass it on
        }
        sys::ptrace(libc::PTRACE_SYSCALL as u32, tid, 0, deliver);
    }
    reap_thread(tid);
    None
}

fn is_rename(nr: u64) -> bool {
    #[cfg(target_arch = "x86_64")]
    if nr == libc::SYS_rename as u64 {
        return true;
    }
    nr == libc::SYS_renameat as u64 || nr == libc::SYS_renameat2 as u64
}

/// Wait for a traced thread to be gone, so that its process can be reaped by `wait`.
fn reap_thread(tid: i32) {
    while sys::wait_stopped(tid).is_some() {}
}

/// The system calls the kill loop makes, one `unsafe` block each. `tid` and `pid` are always
/// our own child's, not yet reaped; no call writes to memory other than locals passed in.
#[allow(unsafe_code)]
mod sys {
    use libc::{c_void, cpu_set_t};

    /// `struct ptrace_syscall_info` of <linux/ptrace.h>, written out here because the libc
    /// crate has it for glibc only (pinfold builds for musl): `op`, `arch`, the instruction
    /// and stack pointers, then the union, of which the `seccomp` member is the largest.
    #[repr(C)]
    struct SyscallInfo {
        op: u8,
        pad: [u8; 3],
        arch: u32,
        instruction_pointer: u64,
        stack_pointer: u64,
        nr: u64,
        args: [u64; 6],
        ret_data: u32,
        pad2: u32,
    }
    const GET_SYSCALL_INFO: u32 = 0x420e;
    pub const SYSCALL_INFO_ENTRY: u8 = 1;
    pub const SYSCALL_INFO_EXIT: u8 = 2;

    pub fn ptrace(request: u32, tid: i32, addr: usize, data: usize) -> libc::c_long {
        // SAFETY: the requests used (SEIZE, INTERRUPT, SYSCALL) take integers in `addr` and
        // `data` and touch no memory of ours.
        unsafe { libc::ptrace(request as _, tid, addr as *mut c_void, data as *mut c_void) }
    }

    /// The system call a thread stopped at: entry or exit, its number and arguments.
    pub fn syscall_info(tid: i32) -> (u8, u64, [u64; 6]) {
        // SAFETY: plain old data, valid zeroed.
        let mut info: SyscallInfo = unsafe { std::mem::zeroed() };
        let size = std::mem::size_of::<SyscallInfo>();
        // SAFETY: the kernel writes at most `size` bytes to `info`, which lives through the call.
        unsafe { libc::ptrace(GET_SYSCALL_INFO as _, tid, size as *mut c_void, &mut info as *mut _ as *mut c_void) };
        // `nr` and `args` are the union's `entry` member, filled for entry stops; for exit
        // stops they are read only to be ignored.
        let _ = (info.pad, info.arch, info.instruction_pointer, info.stack_pointer, info.ret_data, info.pad2);
        (info.op, info.nr, info.args)
    }

    /// Wait for traced thread `tid`; `Some(status)` while it is stopped, `None` once gone.
    pub fn wait_stopped(tid: i32) -> Option<i32> {
        let mut status = 0;
        // SAFETY: `status` is a local the kernel writes an int to.
        let r = unsafe { libc::waitpid(tid, &mut status, libc::__WALL) };
        (r >= 0 && libc::WIFSTOPPED(status)).then_some(status)
    }

    pub fn kill(pid: i32) -> i32 {
        // SAFETY: kill(2) takes plain integers.
        unsafe { libc::kill(pid, libc::SIGKILL) }
    }

    /// Run thread `tid` on one CPU and this thread on another (when two are allowed); returns
    /// what puts this thread back.
    pub fn pin_apart(tid: i32) -> impl FnOnce() {
        let size = std::mem::size_of::<cpu_set_t>();
        // SAFETY: plain old data, valid zeroed.
        let mut allowed: cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: the kernel writes at most `size` bytes to `allowed`.
        let ok = unsafe { libc::sched_getaffinity(0, size, &mut allowed) } == 0;
        let cpus: Vec<usize> = (0..libc::CPU_SETSIZE as usize)
            // SAFETY: `c` is below CPU_SETSIZE, within the set.
            .filter(|&c| ok && unsafe { libc::CPU_ISSET(c, &allowed) })
            .collect();
        if cpus.len() >= 2 {
            for (who, cpu) in [(tid, cpus[0]), (0, cpus[1])] {
                // SAFETY: plain old data, valid zeroed.
                let mut one: cpu_set_t = unsafe { std::mem::zeroed() };
                // SAFETY: `cpu` came from the set, below CPU_SETSIZE.
                unsafe { libc::CPU_SET(cpu, &mut one) };
                // SAFETY: the kernel reads `size` bytes of `one`.
                unsafe { libc::sched_setaffinity(who, size, &one) };
            }
        }
        move || {
            if ok {
                // SAFETY: the kernel reads `size` bytes of `allowed`.
                unsafe { libc::sched_setaffinity(0, size, &allowed) };
            }
        }
    }
}

/// A writer's "seq i" line.
fn parse_ack(line: &str) -> Option<(u64, u64)> {
    let (s, i) = line.trim().split_once(' ')?;
    Some((s.parse().ok()?, i.parse().ok()?))
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
// address-literal: never connected (a recorded command, never run)
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

// ---- Rotation ------------------------------------------------------------------------------

/// A ledger of `n` records rotated at `bytes` (records are ~250 bytes), with an on-demand
/// checkpoint after every `every`-th record when given.
fn rotated_with(n: u64, bytes: u64, every: Option<u64>) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let l = Ledger::open(dir.path()).unwrap().with_fsync(false).with_rotate_bytes(bytes);
    for i in 0..n {
        l.append(rec(i)).unwrap();
        if every.is_some_and(|e| i % e == e - 1) {
            l.checkpoint().unwrap();
        }
    }
    dir
}

fn rotated(n: u64, bytes: u64) -> tempfile::TempDir {
    rotated_with(n, bytes, None)
}

fn archive(dir: &Path, n: u64) -> std::path::PathBuf {
    dir.join(pinfold_ledger::files::archive_name(n))
}

fn newest_archive(dir: &Path) -> u64 {
    pinfold_ledger::files::archives(dir).unwrap().last().unwrap().0
}

fn file_records(path: &Path) -> Vec<serde_json::Value> {
    pinfold_ledger::files::parse_records(&std::fs::read(path).unwrap())
}

#[test]
fn rotation_continues_the_chain_across_files() {
    let dir = rotated(100, 4096);
    let d = dir.path();
    let r = verify(d).unwrap();
    assert_eq!(r.status(), Status::Intact, "{:?}", r.problem);
    let archives = r.files.len() as u64 - 1;
    assert!(archives >= 5, "{archives} archives");
    assert_eq!(newest_archive(d), archives);
    // One chain: sequence numbers run on across files, the user's records all there in order.
    let records = pinfold_ledger::read_records(d).unwrap();
    assert_eq!(r.records, records.len() as u64);
    for (i, rec) in records.iter().enumerate() {
        assert_eq!(rec["seq"], i as u64);
    }
    let mine: Vec<u64> = records.iter().filter(|r| r["kind"] == "check").map(|r| r["data"]["n"].as_u64().unwrap()).collect();
    assert_eq!(mine, (0..100).collect::<Vec<_>>());
    for w in r.files.windows(2) {
        assert_eq!(w[1].first_seq, Some(w[0].first_seq.unwrap() + w[0].records));
    }
    for n in 1..=archives {
        let path = archive(d, n);
        let recs = file_records(&path);
        // Closed by a checkpoint; no bigger than the limit but for that last line.
        assert_eq!(recs.last().unwrap()["kind"], "checkpoint", "{}", path.display());
        let size = std::fs::metadata(&path).unwrap().len();
        let closing = serde_json::to_string(recs.last().unwrap()).unwrap().len() as u64 + 1;
        assert!(size <= 4096 + closing, "{} has {size} bytes", path.display());
        // Each file after the first opens with a signed `rotate` record naming the one before.
        if n > 1 {
            let first = &recs[0];
            assert_eq!(first["kind"], "rotate");
            assert_eq!(first["data"]["previous"], pinfold_ledger::files::archive_name(n - 1));
            assert_eq!(first["data"]["previous_size"], std::fs::metadata(archive(d, n - 1)).unwrap().len());
            assert_eq!(first["data"]["size"], 0);
        }
        // Each archive verifies on its own.
        let alone = pinfold_ledger::verify_file(d, &path).unwrap();
        assert_eq!(alone.status(), Status::Intact, "{}: {:?}", path.display(), alone.problem);
        assert_eq!(alone.records, recs.len() as u64);
    }
    let live = file_records(&d.join("ledger.jsonl"));
    assert_eq!(live[0]["kind"], "rotate");
    assert_eq!(live[0]["data"]["previous"], pinfold_ledger::files::archive_name(archives));
    let alone = pinfold_ledger::verify_file(d, &d.join("ledger.jsonl")).unwrap();
    assert_eq!(alone.status(), Status::Intact, "{:?}", alone.problem);
    // Every signed record is in the checkpoint file too, and was matched.
    let external = std::fs::read_to_string(d.join("ledger.checkpoints")).unwrap().lines().count() as u64;
    assert_eq!((r.external_checkpoints, r.checkpoints), (external, external));
}

#[test]
fn rotate_record_at_a_multiple_of_1000_stands_for_the_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let l = Ledger::open(dir.path()).unwrap().with_fsync(false).with_rotate_bytes(0);
    for i in 0..999 {
        l.append(rec(i)).unwrap();
    }
    // Seq 999 is the closing checkpoint, 1000 the signed `rotate` record, 1001 the record.
    let l = Ledger::open(dir.path()).unwrap().with_fsync(false).with_rotate_bytes(1);
    assert_eq!(l.append(rec(999)).unwrap().seq, 1001);
    let records = pinfold_ledger::read_records(dir.path()).unwrap();
    let kinds: Vec<&str> = records[998..].iter().map(|r| r["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["check", "checkpoint", "rotate", "check"]);
    let r = verify(dir.path()).unwrap();
    assert_eq!(r.status(), Status::Intact, "{:?}", r.problem);
    // A record bigger than the limit is still written, in a file of its own.
    let a = l.append(Record::new("check", json!({"pad": "x".repeat(5000)}))).unwrap();
    assert_eq!(a.seq, 1004);
    assert_eq!(verify(dir.path()).unwrap().status(), Status::Intact);
    assert_eq!(newest_archive(dir.path()), 2);
}

#[test]
fn deleted_middle_archive_is_detected() {
    let dir = rotated(100, 4096);
    std::fs::remove_file(archive(dir.path(), 2)).unwrap();
    let p = problem(dir.path());
    assert!(matches!(&p.fault, Fault::MissingFile { name, .. } if name == "ledger.000002.jsonl"), "{p}");
    assert!(p.to_string().contains("ledger.000002.jsonl is missing"), "{p}");
}

#[test]
fn deleted_oldest_newest_or_all_archives_are_detected() {
    let dir = rotated(100, 4096);
    let d = dir.path();
    let k = newest_archive(d);
    let saved: Vec<Vec<u8>> = (1..=k).map(|n| std::fs::read(archive(d, n)).unwrap()).collect();
    let restore = || {
        for (i, bytes) in saved.iter().enumerate() {
            std::fs::write(archive(d, i as u64 + 1), bytes).unwrap();
        }
    };
    // The newest: the live file's `rotate` record names it.
    std::fs::remove_file(archive(d, k)).unwrap();
    let p = problem(d);
    assert!(matches!(&p.fault, Fault::MissingFile { name, .. } if *name == pinfold_ledger::files::archive_name(k)), "{p}");
    assert_eq!(p.file, d.join("ledger.jsonl"));
    restore();
    // The oldest: numbering starts at 1.
    std::fs::remove_file(archive(d, 1)).unwrap();
    let p = problem(d);
    assert!(matches!(&p.fault, Fault::MissingFile { name, .. } if name == "ledger.000001.jsonl"), "{p}");
    // All of them.
    for n in 1..=k {
        let _ = std::fs::remove_file(archive(d, n));
    }
    let p = problem(d);
    assert!(matches!(&p.fault, Fault::MissingFile { name, .. } if *name == pinfold_ledger::files::archive_name(k)), "{p}");
    restore();
    assert_eq!(verify(d).unwrap().status(), Status::Intact);
}

#[test]
fn deleted_newest_archive_with_no_live_file_is_caught_by_the_checkpoint_file() {
    // The state a crash between a rotation's rename and its first write leaves: the chain ends
    // in the newest archive. Deleting that archive then leaves a shorter chain that is
    // consistent in itself; the checkpoint file still names the deleted archive's checkpoints.
    let dir = rotated(60, 4096);
    let d = dir.path();
    Ledger::open(d).unwrap().with_fsync(false).checkpoint().unwrap();
    let k = newest_archive(d);
    std::fs::rename(d.join("ledger.jsonl"), archive(d, k + 1)).unwrap();
    assert_eq!(verify(d).unwrap().status(), Status::Intact);
    std::fs::remove_file(archive(d, k + 1)).unwrap();
    let p = problem(d);
    assert!(matches!(&p.fault, Fault::MissingFile { name, .. } if *name == pinfold_ledger::files::archive_name(k + 1)), "{p}");
    // Without even a closing checkpoint of its own: records cut from the end of the chain.
    let path = archive(d, k);
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    std::fs::write(&path, lines[..lines.len() - 1].concat()).unwrap();
    let p = problem(d);
    assert!(matches!(p.fault, Fault::NotClosed { .. } | Fault::Truncated { .. }), "{p}");
}

#[test]
fn swapped_archive_names_are_detected_in_the_chain_and_alone() {
    let dir = rotated(100, 4096);
    let d = dir.path();
    let tmp = d.join("swap");
    std::fs::rename(archive(d, 2), &tmp).unwrap();
    std::fs::rename(archive(d, 3), archive(d, 2)).unwrap();
    std::fs::rename(&tmp, archive(d, 3)).unwrap();
    let p = problem(d);
    assert_eq!((p.file.clone(), p.line), (archive(d, 2), 1));
    assert!(matches!(p.fault, Fault::RotateInvalid { .. }) && p.to_string().contains("files were renamed"), "{p}");
    let alone = pinfold_ledger::verify_file(d, &archive(d, 2)).unwrap();
    let p = alone.problem.expect("renamed archive verified alone");
    assert!(p.to_string().contains("by its name ledger.000002.jsonl follows ledger.000001.jsonl"), "{p}");
}

#[test]
fn truncated_archive_is_detected_in_the_chain_and_alone() {
    // On-demand checkpoints every 5 records put checkpoints inside the archives too.
    let dir = rotated_with(100, 4096, Some(5));
    let d = dir.path();
    let path = archive(d, 2);
    let original = std::fs::read(&path).unwrap();
    let lines: Vec<&[u8]> = original.split_inclusive(|&b| b == b'\n').collect();
    // Cut off its closing checkpoint and a record: it no longer ends with a checkpoint.
    std::fs::write(&path, lines[..lines.len() - 2].concat()).unwrap();
    let p = problem(d);
    assert_eq!(p.file, path);
    assert!(matches!(p.fault, Fault::NotClosed { .. }), "{p}");
    let alone = pinfold_ledger::verify_file(d, &path).unwrap();
    assert!(matches!(alone.problem.unwrap().fault, Fault::NotClosed { .. }));
    // Cut back to an earlier checkpoint: it ends with one, but not the one the next file's
    // `rotate` record (and its copy in the checkpoint file) says it ended with.
    let records = file_records(&path);
    let inner = records[..records.len() - 1].iter().rposition(|r| r["kind"] == "checkpoint").expect("an inner checkpoint");
    std::fs::write(&path, lines[..=inner].concat()).unwrap();
    let p = problem(d);
    assert_eq!(p.file, path);
    assert!(matches!(p.fault, Fault::ArchiveTruncated { .. }), "{p}");
    assert!(p.to_string().contains("record(s) were removed from its end"), "{p}");
    // Without the checkpoint file, the next file's `rotate` record still disagrees.
    let saved = std::fs::read(d.join("ledger.checkpoints")).unwrap();
    std::fs::remove_file(d.join("ledger.checkpoints")).unwrap();
    let p = problem(d);
    assert_eq!(p.file, archive(d, 3));
    assert!(matches!(p.fault, Fault::RotateInvalid { .. }), "{p}");
    std::fs::write(d.join("ledger.checkpoints"), saved).unwrap();
    let alone = pinfold_ledger::verify_file(d, &path).unwrap();
    let p = alone.problem.unwrap();
    assert!(matches!(p.fault, Fault::ArchiveTruncated { .. }), "{p}");
    // Appending junk to an archive.
    std::fs::write(&path, [&original[..], b"{\"hash\":\"00\n"].concat()).unwrap();
    let p = problem(d);
    assert_eq!((p.file.clone(), p.line), (path.clone(), lines.len() as u64 + 1));
    assert!(p.to_string().contains("lines were added"), "{p}");
}

#[test]
fn edited_or_removed_records_in_archives_are_detected() {
    let dir = rotated(100, 4096);
    let d = dir.path();
    let path = archive(d, 3);
    let original = std::fs::read_to_string(&path).unwrap();
    let at = original.find("case_").unwrap();
    let mut edited = original.clone().into_bytes();
    edited[at] = b'C';
    std::fs::write(&path, &edited).unwrap();
    let p = problem(d);
    assert_eq!((p.file.clone(), p.line), (path.clone(), 2));
    assert!(matches!(p.fault, Fault::HashMismatch { .. }), "{p}");
    assert!(matches!(pinfold_ledger::verify_file(d, &path).unwrap().problem.unwrap().fault, Fault::HashMismatch { .. }));
    std::fs::write(&path, &original).unwrap();
    // The `rotate` record that opens the live file, removed.
    let live = d.join("ledger.jsonl");
    let text = std::fs::read_to_string(&live).unwrap();
    std::fs::write(&live, &text[text.find('\n').unwrap() + 1..]).unwrap();
    let p = problem(d);
    assert!(p.to_string().contains("must open with a `rotate` record"), "{p}");
}

#[test]
fn crash_between_rename_and_first_write_loses_nothing() {
    let dir = rotated(30, 4096);
    let d = dir.path();
    let l = Ledger::open(d).unwrap().with_fsync(false).with_rotate_bytes(4096);
    l.checkpoint().unwrap();
    let before = pinfold_ledger::read_records(d).unwrap();
    // What a rotation does between closing the file and starting the next, then the crash.
    let k = newest_archive(d);
    std::fs::rename(d.join("ledger.jsonl"), archive(d, k + 1)).unwrap();
    let r = verify(d).unwrap();
    assert_eq!(r.status(), Status::Intact, "{:?}", r.problem);
    assert_eq!(pinfold_ledger::read_records(d).unwrap(), before);
    // Another process's `Ledger::open` may have created an empty live file meanwhile.
    std::fs::File::create(d.join("ledger.jsonl")).unwrap();
    assert_eq!(verify(d).unwrap().status(), Status::Intact);
    // The next append (by a `Ledger` whose descriptor still names the renamed file) continues
    // the chain from the archive: a `rotate` record naming it, then the record.
    let a = l.append(rec(1000)).unwrap();
    assert_eq!(a.seq, before.len() as u64 + 1);
    let after = pinfold_ledger::read_records(d).unwrap();
    assert_eq!(after[..before.len()], before[..]);
    assert_eq!(after[before.len()]["kind"], "rotate");
    assert_eq!(after[before.len()]["data"]["previous"], pinfold_ledger::files::archive_name(k + 1));
    assert_eq!(verify(d).unwrap().status(), Status::Intact);
}

#[test]
fn crash_after_the_closing_checkpoint_rotates_without_another() {
    let dir = rotated(30, 1 << 20);
    let d = dir.path();
    Ledger::open(d).unwrap().with_fsync(false).checkpoint().unwrap();
    // The file is over the new limit and already ends with a checkpoint (as when a crash came
    // after the closing checkpoint was written, before the rename).
    Ledger::open(d).unwrap().with_fsync(false).with_rotate_bytes(4096).append(rec(30)).unwrap();
    let closed = file_records(&archive(d, 1));
    let kinds: Vec<&str> = closed.iter().rev().take(2).map(|r| r["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["checkpoint", "check"]);
    assert_eq!(verify(d).unwrap().status(), Status::Intact);
}

#[test]
fn torn_first_line_of_a_new_live_file_is_repaired() {
    let dir = rotated(30, 4096);
    let d = dir.path();
    Ledger::open(d).unwrap().with_fsync(false).checkpoint().unwrap();
    let k = newest_archive(d);
    std::fs::rename(d.join("ledger.jsonl"), archive(d, k + 1)).unwrap();
    std::fs::write(d.join("ledger.jsonl"), b"{\"hash\":\"ab").unwrap();
    let r = verify(d).unwrap();
    assert_eq!(r.status(), Status::Torn, "{:?}", r.problem);
    let t = r.torn.unwrap();
    assert_eq!((t.file, t.offset, t.len), (d.join("ledger.jsonl"), 0, 11));
    let rep = Ledger::open(d).unwrap().repair().unwrap().unwrap();
    assert_eq!((rep.offset, rep.len), (0, 11));
    let live = file_records(&d.join("ledger.jsonl"));
    assert_eq!((live[0]["kind"].as_str(), live[1]["kind"].as_str()), (Some("rotate"), Some("repair")));
    assert_eq!(verify(d).unwrap().status(), Status::Intact);
}

#[test]
fn eight_processes_append_through_rotations() {
    let dir = tempfile::tempdir().unwrap();
    let env = [("PINFOLD_LEDGER_ROTATE_BYTES", "16384".to_string())];
    let children: Vec<_> = (0..8).map(|_| writer_with(dir.path(), 500, &env)).collect();
    let mut pids = Vec::new();
    for c in children {
        pids.push(c.id());
        assert!(c.wait_with_output().unwrap().status.success());
    }
    let r = verify(dir.path()).unwrap();
    assert_eq!(r.status(), Status::Intact, "{:?}", r.problem);
    assert!(r.files.len() > 20, "{} files", r.files.len());
    let records = pinfold_ledger::read_records(dir.path()).unwrap();
    for pid in pids {
        let mine: Vec<u64> =
            records.iter().filter(|r| r["data"]["writer"] == json!(pid)).map(|r| r["data"]["i"].as_u64().unwrap()).collect();
        assert_eq!(mine, (0..500).collect::<Vec<_>>(), "writer {pid}");
    }
}

#[test]
fn threads_sharing_one_ledger_form_one_chain() {
    // `flock` does not exclude threads that share a descriptor; the ledger's own mutex does.
    let dir = tempfile::tempdir().unwrap();
    let l = std::sync::Arc::new(Ledger::open(dir.path()).unwrap().with_fsync(false).with_rotate_bytes(8192));
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let l = l.clone();
            std::thread::spawn(move || {
                for i in 0..300 {
                    l.append(Record::new("check", json!({"t": t, "i": i}))).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let r = verify(dir.path()).unwrap();
    assert_eq!(r.status(), Status::Intact, "{:?}", r.problem);
    let records = pinfold_ledger::read_records(dir.path()).unwrap();
    assert_eq!(records.iter().filter(|r| r["kind"] == "check").count(), 1200);
}

// ---- Time-based checkpoints ------------------------------------------------------------------

fn kinds(dir: &Path) -> Vec<String> {
    pinfold_ledger::read_records(dir).unwrap().iter().map(|r| r["kind"].as_str().unwrap().to_string()).collect()
}

#[test]
fn checkpoint_when_the_last_one_is_older_than_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let l = Ledger::open(d).unwrap().with_fsync(false).with_checkpoint_every(Duration::from_millis(200));
    for i in 0..3 {
        l.append(rec(i)).unwrap();
    }
    assert_eq!(kinds(d), ["check"; 3]);
    std::thread::sleep(Duration::from_millis(250));
    l.append(rec(3)).unwrap();
    l.append(rec(4)).unwrap();
    assert_eq!(kinds(d), ["check", "check", "check", "checkpoint", "check", "check"]);
    let r = verify(d).unwrap();
    assert_eq!((r.status(), r.checkpoints, r.external_checkpoints), (Status::Intact, 1, 1));
    // The checkpoint covers the records before it.
    let cp = &pinfold_ledger::read_records(d).unwrap()[3];
    assert_eq!(cp["data"]["records"], 3);
    // Zero: only by count and on demand.
    std::thread::sleep(Duration::from_millis(250));
    Ledger::open(d).unwrap().with_fsync(false).with_checkpoint_every(Duration::ZERO).append(rec(5)).unwrap();
    assert_eq!(kinds(d).last().unwrap(), "check");
    assert_eq!(kinds(d).iter().filter(|k| *k == "checkpoint").count(), 1);
    // A ledger without a checkpoint file (older, or the file was removed) gets one next.
    std::fs::remove_file(d.join("ledger.checkpoints")).unwrap();
    l.append(rec(6)).unwrap();
    let k = kinds(d);
    assert_eq!(k[k.len() - 2..], ["checkpoint", "check"]);
    assert_eq!(verify(d).unwrap().status(), Status::Intact);
}

// ---- The public key against the signing key --------------------------------------------------

#[test]
fn replaced_public_key_is_reported_against_the_signing_key() {
    let (dir, _) = built(10);
    let d = dir.path();
    Ledger::open(d).unwrap().with_fsync(false).checkpoint().unwrap();
    let r = verify(d).unwrap();
    assert!(r.signing_key_checked && r.status() == Status::Intact);
    let (other, _) = built(3);
    Ledger::open(other.path()).unwrap().with_fsync(false).checkpoint().unwrap();
    std::fs::copy(other.path().join("ledger.pub"), d.join("ledger.pub")).unwrap();
    let p = problem(d);
    assert_eq!((p.file.clone(), p.line), (d.join("ledger.pub"), 1));
    assert!(matches!(p.fault, Fault::KeyMismatch { .. }), "{p}");
    assert!(p.to_string().contains("one of them was replaced"), "{p}");
    // Without the signing key to compare with, the checkpoints name the key they were signed by.
    std::fs::rename(d.join("ledger.key"), d.join("elsewhere")).unwrap();
    let r = verify(d).unwrap();
    assert!(!r.signing_key_checked);
    assert!(matches!(r.problem.unwrap().fault, Fault::UnknownKey { .. }));
}

#[test]
fn forged_log_with_its_own_public_key_is_caught_by_the_signing_key() {
    let (dir, _) = built(1100);
    let d = dir.path();
    // Someone who cannot read ledger.key rebuilds the whole ledger with a key of their own
    // and puts their public key in place: consistent, except with the signing key.
    let (forged, _) = built(1100);
    for f in ["ledger.jsonl", "ledger.checkpoints", "ledger.pub"] {
        std::fs::copy(forged.path().join(f), d.join(f)).unwrap();
    }
    let p = problem(d);
    assert!(matches!(p.fault, Fault::KeyMismatch { .. }), "{p}");
}

// ---- Following -------------------------------------------------------------------------------

#[test]
fn follower_returns_each_new_record_once_across_rotations() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let l = Ledger::open(d).unwrap().with_fsync(false).with_rotate_bytes(2048);
    for i in 0..5 {
        l.append(rec(i)).unwrap();
    }
    let mut f = pinfold_ledger::Follower::from_end(d).unwrap();
    assert!(f.poll().unwrap().is_empty());
    let mut got = Vec::new();
    for i in 5..80 {
        l.append(rec(i)).unwrap();
        if i % 7 == 0 {
            got.extend(f.poll().unwrap());
        }
    }
    got.extend(f.poll().unwrap());
    let all = pinfold_ledger::read_records(d).unwrap();
    let first = all.iter().position(|r| r["data"]["n"] == 5).unwrap();
    assert_eq!(got, all[first..]);
    assert!(newest_archive(d) >= 5);
    // A torn line is not returned; the repair and the record after it are.
    let live = d.join("ledger.jsonl");
    let mut bytes = std::fs::read(&live).unwrap();
    bytes.extend_from_slice(b"{\"hash\":\"ab");
    std::fs::write(&live, &bytes).unwrap();
    assert!(f.poll().unwrap().is_empty());
    l.append(rec(80)).unwrap();
    let kinds: Vec<String> = f.poll().unwrap().iter().map(|r| r["kind"].as_str().unwrap().to_string()).collect();
    assert!(kinds.ends_with(&["repair".to_string(), "check".to_string()]), "{kinds:?}");
    // Across a crash between rename and first write.
    Ledger::open(d).unwrap().with_fsync(false).checkpoint().unwrap();
    f.poll().unwrap();
    let k = newest_archive(d);
    std::fs::rename(&live, archive(d, k + 1)).unwrap();
    assert!(f.poll().unwrap().is_empty());
    l.append(rec(81)).unwrap();
    let kinds: Vec<String> = f.poll().unwrap().iter().map(|r| r["kind"].as_str().unwrap().to_string()).collect();
    assert_eq!(kinds, ["rotate", "check"]);
}

/// A handle remembers where its own last append ended and skips re-reading the tail when the
/// file is still that file and that long (lib.rs, `Ledger::mine`). Interleaved with another
/// handle, every record must still chain: A, B, A, A gives sequence numbers 0–3 in that order
/// and an intact ledger.
#[test]
fn a_handle_that_appends_again_chains_onto_whatever_came_between() {
    let dir = tempfile::tempdir().unwrap();
    let a = Ledger::open(dir.path()).unwrap().with_fsync(false);
    let b = Ledger::open(dir.path()).unwrap().with_fsync(false);
    let seqs: Vec<u64> = [&a, &b, &a, &a].iter().enumerate().map(|(i, l)| l.append(rec(i as u64)).unwrap().seq).collect();
    assert_eq!(seqs, [0, 1, 2, 3]);
    let report = verify(dir.path()).unwrap();
    assert_eq!(report.status(), Status::Intact, "{:?}", report.problem);
    assert_eq!(report.records, 4);
}

/// What the remembered end cannot hide: a last line rewritten in place to the same length
/// between two appends of one handle. The handle then chains onto the hash it remembers, and
/// verification finds the rewritten line.
#[test]
fn a_line_rewritten_between_two_appends_of_one_handle_is_detected() {
    let dir = tempfile::tempdir().unwrap();
    let a = Ledger::open(dir.path()).unwrap().with_fsync(false);
    a.append(rec(1)).unwrap();
    a.append(rec(2)).unwrap();
    let mut bytes = std::fs::read(dir.path().join("ledger.jsonl")).unwrap();
    let text = String::from_utf8(bytes.clone()).unwrap();
    let at = text.rfind("case_2").unwrap() + "case_".len();
    bytes[at] = b'7';
    std::fs::write(dir.path().join("ledger.jsonl"), &bytes).unwrap();
    a.append(rec(3)).unwrap();
    assert_eq!(problem(dir.path()).seq, Some(1), "the rewritten record is the one reported");
}
