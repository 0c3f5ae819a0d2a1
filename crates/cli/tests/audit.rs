//! `pinfold audit`: exit codes and output of verify (across files and of one file), show,
//! tail (and tail --follow, run as a real process), repair, checkpoint.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

use assert_cmd::Command;
use pinfold_ledger::{Ledger, Record};
use serde_json::json;

fn pinfold(dir: &Path) -> Command {
    let mut c = Command::cargo_bin("pinfold").unwrap();
    c.env("PINFOLD_STATE_DIR", dir).env("PINFOLD_LEDGER_FSYNC", "0");
    c
}

fn filled() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let l = Ledger::open(dir.path()).unwrap().with_fsync(false);
    for (cmd, d, s) in [
        ("git status", "allow", "s1"),
        ("git push --force", "ask", "s1"),
        ("rm -rf ~", "deny", "s2"),
        ("curl -H 'Authorization: Bearer abcdef123' https://x", "ask", "s2"), // address-literal: never connected (a recorded command)
    ] {
        l.append(Record::new("check", json!({"command": cmd, "decision": d})).session(s)).unwrap();
    }
    dir
}

fn out(c: &mut Command) -> (i32, String) {
    let o = c.output().unwrap();
    (o.status.code().unwrap(), String::from_utf8(o.stdout).unwrap())
}

#[test]
fn verify_intact_tampered_torn() {
    let dir = filled();
    let (code, text) = out(pinfold(dir.path()).args(["audit", "verify"]));
    assert_eq!(code, 0, "{text}");
    assert!(text.starts_with("intact: 4 records"), "{text}");

    let log = dir.path().join("ledger.jsonl");
    let orig = std::fs::read_to_string(&log).unwrap();
    std::fs::write(&log, orig.replacen("rm -rf ~", "rm -rf /", 1)).unwrap();
    let (code, text) = out(pinfold(dir.path()).args(["audit", "verify"]));
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("ledger.jsonl:3 (byte") && text.contains("seq 2: content does not match its hash"), "{text}");
    let (code, text) = out(pinfold(dir.path()).args(["audit", "verify", "--json"]));
    assert_eq!(code, 1);
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!((v["status"].as_str(), v["problem"]["fault"].as_str(), v["problem"]["line"].as_u64()), (Some("tampered"), Some("hash_mismatch"), Some(3)));
    // Repair refuses to touch a tampered log.
    let (code, _) = out(pinfold(dir.path()).args(["audit", "repair"]));
    assert_eq!(code, 2);

    std::fs::write(&log, format!("{orig}{{\"hash\":\"12")).unwrap();
    let (code, text) = out(pinfold(dir.path()).args(["audit", "verify"]));
    assert_eq!(code, 3, "{text}");
    assert!(text.starts_with("torn: the last 11 bytes"), "{text}");
    let (code, text) = out(pinfold(dir.path()).args(["audit", "repair"]));
    assert_eq!(code, 0);
    assert!(text.starts_with("repaired: removed 11 torn bytes"), "{text}");
    assert_eq!(out(pinfold(dir.path()).args(["audit", "verify"])).0, 0);
    assert_eq!(out(pinfold(dir.path()).args(["audit", "repair"])).1, "nothing to repair\n");
}

#[test]
fn show_and_tail_filter() {
    let dir = filled();
    let (code, text) = out(pinfold(dir.path()).args(["audit", "show", "--decision", "ask"]));
    assert_eq!(code, 0);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(lines[0].contains("git push --force") && lines[1].contains("Bearer [REDACTED]"), "{text}");
    let (_, text) = out(pinfold(dir.path()).args(["audit", "show", "--command", "git *", "--json"]));
    let cmds: Vec<String> = text.lines().map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["data"]["command"].as_str().unwrap().to_string()).collect();
    assert_eq!(cmds, ["git status", "git push --force"]);
    let (_, text) = out(pinfold(dir.path()).args(["audit", "tail", "--limit", "1", "--session", "s1"]));
    assert!(text.contains("git push --force") && text.lines().count() == 1, "{text}");
    let (_, text) = out(pinfold(dir.path()).args(["audit", "show", "--since", "1h", "--until", "2000-01-01"]));
    assert_eq!(text, "");
    let (_, text) = out(pinfold(dir.path()).args(["audit", "show", "--since", "1h", "--limit", "3"]));
    assert_eq!(text.lines().count(), 3);
    let (code, _) = out(pinfold(dir.path()).args(["audit", "show", "--since", "yesterday"]));
    assert_eq!(code, 2);
}

#[test]
fn checkpoint_on_demand_then_truncation_is_caught() {
    let dir = filled();
    let (code, text) = out(pinfold(dir.path()).args(["audit", "checkpoint", "--json"]));
    assert_eq!(code, 0);
    let cp: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!((cp["kind"].as_str(), cp["data"]["records"].as_u64()), (Some("checkpoint"), Some(4)));
    let log = dir.path().join("ledger.jsonl");
    let text = std::fs::read_to_string(&log).unwrap();
    let kept: String = text.split_inclusive('\n').take(3).collect();
    std::fs::write(&log, kept).unwrap();
    let (code, text) = out(pinfold(dir.path()).args(["audit", "verify"]));
    assert_eq!(code, 1);
    assert!(text.contains("a signed checkpoint covers 4 records") && text.contains("removed from the end"), "{text}");
}

#[test]
fn state_dir_flag_and_empty_ledger() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = Command::cargo_bin("pinfold").unwrap();
    let (code, text) = out(c.args(["audit", "verify", "--state-dir"]).arg(dir.path()));
    assert_eq!(code, 0);
    assert!(text.starts_with("intact: 0 records"), "{text}");
}

// ---- Rotation, files, the signing key --------------------------------------------------------

/// A ledger rotated at 2 KiB: `n` records over several files, every fifth an `ask`.
fn rotated(n: u64) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let l = Ledger::open(dir.path()).unwrap().with_fsync(false).with_rotate_bytes(2048);
    for i in 0..n {
        let decision = if i % 5 == 0 { "ask" } else { "allow" };
        l.append(Record::new("check", json!({"command": format!("make test{i}"), "decision": decision}))).unwrap();
    }
    l.checkpoint().unwrap();
    dir
}

fn archive(dir: &Path, n: u64) -> std::path::PathBuf {
    dir.join(format!("ledger.{n:06}.jsonl"))
}

#[test]
fn verify_across_files_and_one_file_alone() {
    let dir = rotated(40);
    let d = dir.path();
    let (code, text) = out(pinfold(d).args(["audit", "verify"]));
    assert_eq!(code, 0, "{text}");
    assert!(text.contains(" records in ") && text.contains("ledger.pub matches the signing key"), "{text}");
    let (code, text) = out(pinfold(d).args(["audit", "verify", "--file"]).arg(archive(d, 2)));
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("in 1 file,"), "{text}");
    let (code, text) = out(pinfold(d).args(["audit", "verify", "--json", "--file"]).arg(d.join("ledger.jsonl")));
    assert_eq!(code, 0, "{text}");
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!((v["status"].as_str(), v["files"].as_array().map(Vec::len)), (Some("intact"), Some(1)));

    // A middle archive deleted.
    let saved = std::fs::read(archive(d, 2)).unwrap();
    std::fs::remove_file(archive(d, 2)).unwrap();
    let (code, text) = out(pinfold(d).args(["audit", "verify"]));
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("TAMPERED:") && text.contains("ledger.000002.jsonl is missing"), "{text}");
    let (_, text) = out(pinfold(d).args(["audit", "verify", "--json"]));
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["problem"]["fault"], "missing_file");
    std::fs::write(archive(d, 2), &saved).unwrap();

    // Two archives' names swapped: in the chain, and alone.
    std::fs::rename(archive(d, 2), d.join("x")).unwrap();
    std::fs::rename(archive(d, 3), archive(d, 2)).unwrap();
    std::fs::rename(d.join("x"), archive(d, 3)).unwrap();
    let (code, text) = out(pinfold(d).args(["audit", "verify"]));
    assert_eq!(code, 1);
    assert!(text.contains("files were renamed"), "{text}");
    let (code, text) = out(pinfold(d).args(["audit", "verify", "--file"]).arg(archive(d, 3)));
    assert_eq!(code, 1);
    assert!(text.contains("by its name ledger.000003.jsonl follows ledger.000002.jsonl"), "{text}");
    std::fs::rename(archive(d, 2), d.join("x")).unwrap();
    std::fs::rename(archive(d, 3), archive(d, 2)).unwrap();
    std::fs::rename(d.join("x"), archive(d, 3)).unwrap();

    // An archive cut short: its closing checkpoint gone.
    let text = String::from_utf8(saved.clone()).unwrap();
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    std::fs::write(archive(d, 2), lines[..lines.len() - 1].concat()).unwrap();
    for args in [vec!["audit", "verify"], vec!["audit", "verify", "--file", archive(d, 2).to_str().unwrap()]] {
        let (code, text) = out(pinfold(d).args(&args));
        assert_eq!(code, 1, "{args:?}");
        assert!(text.contains("ledger.000002.jsonl") && text.contains("records were removed from its end"), "{text}");
    }
    std::fs::write(archive(d, 2), &saved).unwrap();
    assert_eq!(out(pinfold(d).args(["audit", "verify"])).0, 0);

    // ledger.pub replaced by another key's.
    let other = rotated(3);
    std::fs::copy(other.path().join("ledger.pub"), d.join("ledger.pub")).unwrap();
    let (code, text) = out(pinfold(d).args(["audit", "verify"]));
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("ledger.pub:1") && text.contains("one of them was replaced"), "{text}");
}

#[test]
fn show_and_tail_read_across_files() {
    let dir = rotated(40);
    let d = dir.path();
    assert!(archive(d, 3).exists());
    let (_, text) = out(pinfold(d).args(["audit", "show", "--json"]));
    let seqs: Vec<u64> = text.lines().map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (0..seqs.len() as u64).collect::<Vec<_>>());
    let (_, text) = out(pinfold(d).args(["audit", "show", "--command", "make test*", "--limit", "3"]));
    assert!(text.lines().count() == 3 && text.contains("make test0") && text.contains("make test2"), "{text}");
    let (_, text) = out(pinfold(d).args(["audit", "tail", "--decision", "ask", "--limit", "5"]));
    let cmds: Vec<&str> = text.lines().map(|l| l.rsplit("  ").next().unwrap()).collect();
    assert_eq!(cmds, ["make test15", "make test20", "make test25", "make test30", "make test35"], "{text}");
    // A closed pipe ends the command quietly.
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_pinfold"))
        .args(["audit", "show"])
        .env("PINFOLD_STATE_DIR", d)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    assert_eq!((o.status.code(), String::from_utf8_lossy(&o.stderr).into_owned()), (Some(0), String::new()));
}

// ---- tail --follow ---------------------------------------------------------------------------

/// `pinfold audit tail -f ARGS` on `dir`, its stdout lines delivered on a channel.
fn follow(dir: &Path, args: &[&str]) -> (std::process::Child, mpsc::Receiver<String>) {
    // SIGINT as a terminal gives it: a test run started in the background by a shell
    // without job control inherits SIGINT ignored, and an ignored signal stays ignored.
    let mut child = std::process::Command::new("env")
        .args(["--default-signal=INT", env!("CARGO_BIN_EXE_pinfold"), "audit", "tail", "-f"])
        .args(args)
        .env("PINFOLD_STATE_DIR", dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (child, rx)
}

fn next_json(rx: &mpsc::Receiver<String>) -> serde_json::Value {
    let line = rx.recv_timeout(Duration::from_secs(10)).expect("tail -f printed nothing for 10 s");
    serde_json::from_str(&line).unwrap()
}

#[test]
fn tail_follow_prints_new_records_across_rotations() {
    let dir = rotated(10);
    let d = dir.path();
    let (mut all, all_rx) = follow(d, &["--json", "--limit", "2"]);
    let (mut asks, asks_rx) = follow(d, &["--json", "--decision", "ask", "--limit", "1"]);
    // The backlog: the last two records (the checkpoint and the record before it), and the
    // last `ask`.
    let backlog: Vec<serde_json::Value> = (0..2).map(|_| next_json(&all_rx)).collect();
    assert_eq!(backlog[1]["kind"], "checkpoint");
    assert_eq!(next_json(&asks_rx)["data"]["command"], "make test5");
    let last = backlog[1]["seq"].as_u64().unwrap();
    // Another process appends, through several rotations.
    let l = Ledger::open(d).unwrap().with_fsync(false).with_rotate_bytes(2048);
    let before = std::fs::read_dir(d).unwrap().count();
    for i in 10..40 {
        let decision = if i % 5 == 0 { "ask" } else { "allow" };
        l.append(Record::new("check", json!({"command": format!("make test{i}"), "decision": decision}))).unwrap();
        if i % 10 == 0 {
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    assert!(std::fs::read_dir(d).unwrap().count() >= before + 3, "no rotation happened");
    let total = pinfold_ledger::read_records(d).unwrap().len() as u64;
    // Every record after the backlog, once, in order: records, checkpoints, `rotate`s.
    let mut kinds = std::collections::BTreeSet::new();
    for seq in last + 1..total {
        let r = next_json(&all_rx);
        assert_eq!(r["seq"], seq);
        kinds.insert(r["kind"].as_str().unwrap().to_string());
    }
    assert!(kinds.contains("rotate") && kinds.contains("checkpoint") && kinds.contains("check"), "{kinds:?}");
    // The filter applies to what follows too.
    for i in [10, 15, 20, 25, 30, 35] {
        assert_eq!(next_json(&asks_rx)["data"]["command"], format!("make test{i}"));
    }
    // SIGINT ends it, quietly.
    for child in [&mut all, &mut asks] {
        let pid = child.id().to_string();
        assert!(std::process::Command::new("kill").args(["-INT", &pid]).status().unwrap().success());
        let status = child.wait().unwrap();
        assert!(!status.success(), "{status:?}");
        let mut err = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
        assert_eq!(err, "");
    }
    assert!(all_rx.recv_timeout(Duration::from_secs(1)).is_err());
}

#[test]
fn tail_follow_ends_quietly_when_its_reader_goes() {
    let dir = rotated(3);
    let d = dir.path();
    // The pipe is bash's, not this process's: a pipe made here could be copied into a child
    // another test thread forks at that moment, and a reader left anywhere keeps tail going.
    let out = d.join("out");
    let mut child = std::process::Command::new("bash")
        .args(["-c", r#""$1" audit tail --follow --limit 1 2>"$2.err" | head -n 1 >"$2.line"; echo "${PIPESTATUS[0]}" >"$2.code""#, "-"])
        .arg(env!("CARGO_BIN_EXE_pinfold"))
        .arg(&out)
        .env("PINFOLD_STATE_DIR", d)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let read = |ext: &str| std::fs::read_to_string(d.join(format!("out.{ext}"))).unwrap_or_default();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !read("line").ends_with('\n') {
        assert!(std::time::Instant::now() < deadline, "tail -f printed nothing: {}", read("err"));
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(read("line").contains("checkpoint"), "{}", read("line"));
    // head has gone: tail's next write finds the pipe closed.
    Ledger::open(d).unwrap().with_fsync(false).append(Record::new("check", json!({"command": "ls"}))).unwrap();
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "tail -f kept running with nobody reading");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!((read("code").trim().to_string(), read("err")), ("0".to_string(), String::new()));
}

/// A command text holding a carriage return and an escape sequence, recorded as refused: `audit
/// show`, `audit tail` and `check` (plain and `--explain`) print it with the control
/// characters escaped, so it cannot erase its own line and fake an allowed one on the
/// reviewer's terminal (found by an outside attack: a refused `rm -rf ~` shown as an allowed
/// `git status`). The JSON keeps the text as it was.
#[test]
fn control_characters_in_a_command_are_never_printed_raw() {
    let dir = tempfile::tempdir().unwrap();
    let fake = "rm -rf ~ #\r\x1b[2K  2  2026-12-04T07:20:10  exec_start  allow  git status";
    let l = Ledger::open(dir.path()).unwrap().with_fsync(false);
    l.append(Record::new("check", json!({"command": fake, "decision": "deny"}))).unwrap();
    for args in [&["audit", "show"][..], &["audit", "tail"][..]] {
        let (code, text) = out(pinfold(dir.path()).args(args));
        assert_eq!(code, 0, "{args:?}");
        assert!(text.contains("rm -rf ~"), "{args:?}: {text:?}");
        assert!(!text.contains('\x1b') && !text.contains('\r'), "{args:?} printed a control character raw: {text:?}");
        assert!(text.contains("\\u{1b}[2K"), "{args:?}: {text:?}");
    }
    let (_, text) = out(pinfold(dir.path()).args(["audit", "show", "--json"]));
    let v: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
    assert_eq!(v["data"]["command"], fake, "the record keeps the text as it was");
    for explain in [false, true] {
        let mut c = pinfold(dir.path());
        c.args(["check"]);
        if explain {
            c.arg("--explain");
        }
        // (A carriage return alone makes the text unparseable: an escape sequence in a word.)
        let (_, text) = out(c.args(["--", "rm -rf ~ '\x1b[2K\x1b[1Gallow: git status' && true"]));
        assert!(text.contains("\\u{1b}[2K"), "the command is quoted, escaped: {text:?}");
        assert!(!text.contains('\x1b') && !text.contains('\r'), "check (explain: {explain}) printed a control character raw: {text:?}");
    }
}
