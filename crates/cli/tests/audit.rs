//! `pinfold audit`: exit codes and output of verify, show, tail, repair, checkpoint.

use std::path::Path;

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
        ("curl -H 'Authorization: Bearer abcdef123' https://x", "ask", "s2"),
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
